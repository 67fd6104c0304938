//! Steering tags.

use std::fmt;

/// A Steering Tag: names a registered region on the wire (RFC 5041 §4.2).
///
/// As with verbs rkeys, the upper 24 bits are an index into the local
/// [`MemoryTable`](super::MemoryTable) and the low 8 bits a key the consumer
/// chooses, so that a region registered again at the same index gets a
/// different STag and stale ones held by a peer stop working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct STag(pub u32);

impl STag {
    /// The largest table index an STag can carry.
    pub const MAX_INDEX: u32 = (1 << 24) - 1;

    /// The STag for table `index` (24 bits, higher bits dropped) and `key`.
    pub const fn new(index: u32, key: u8) -> Self {
        Self(((index & Self::MAX_INDEX) << 8) | key as u32)
    }

    /// The table index.
    pub const fn index(self) -> u32 {
        self.0 >> 8
    }

    /// The consumer's key.
    pub const fn key(self) -> u8 {
        self.0 as u8
    }

    /// The STag as it goes on the wire (big-endian).
    pub const fn to_be_bytes(self) -> [u8; 4] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for STag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

impl From<u32> for STag {
    fn from(v: u32) -> Self {
        Self(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_key() {
        let s = STag::new(0x12_3456, 0x78);
        assert_eq!(s.0, 0x1234_5678);
        assert_eq!(s.index(), 0x12_3456);
        assert_eq!(s.key(), 0x78);
        assert_eq!(STag::new(u32::MAX, 1).index(), STag::MAX_INDEX);
    }
}
