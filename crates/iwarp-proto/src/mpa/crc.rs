//! CRC32c (Castagnoli) as MPA uses it.
//!
//! The CRC is the one iSCSI uses for header and data digests (RFC 3720),
//! computed with the `crc32c` crate, which uses the SSE4.2 / ARMv8 CRC
//! instructions when the CPU has them. It is incremental: the receiver folds
//! bytes in as they arrive, whatever the chunking.
//!
//! On the wire the 32-bit CRC value is stored least significant octet
//! first. This is fixed by the annotated FPDUs of draft-ietf-rddp-mpa-01
//! §5.2: the CRC32c of figure 5's 48 covered octets is `0x84B3864C` and the
//! dump shows `4C 86 B3 84`; Linux `siw` stores it the same way.

/// A running CRC32c over a sequence of byte slices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crc32c {
    value: u32,
}

impl Crc32c {
    /// A CRC over no bytes yet.
    pub const fn new() -> Self {
        Self { value: 0 }
    }

    /// Folds `bytes` into the CRC.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        self.value = crc32c::crc32c_append(self.value, bytes);
    }

    /// The CRC32c of everything folded in so far.
    #[inline]
    pub const fn value(&self) -> u32 {
        self.value
    }

    /// The CRC value as its four octets on the wire (least significant first).
    #[inline]
    pub const fn to_wire(&self) -> [u8; 4] {
        self.value.to_le_bytes()
    }
}

/// Reads a CRC field as transmitted on the wire.
#[inline]
pub const fn from_wire(octets: [u8; 4]) -> u32 {
    u32::from_le_bytes(octets)
}

/// CRC32c of one byte slice.
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector_iscsi() {
        // RFC 3720 appendix B.4: 32 octets of zeros give 0x8A9136AA.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        // The standard check value of CRC-32C over "123456789".
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn incremental_equals_one_shot_for_every_split() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = crc32c(&data);
        for split in 0..=data.len() {
            let mut c = Crc32c::new();
            c.update(&data[..split]);
            c.update(&data[split..]);
            assert_eq!(c.value(), whole, "split at {split}");
        }
    }

    #[test]
    fn wire_order_is_least_significant_first() {
        let mut c = Crc32c::new();
        c.update(b"123456789");
        assert_eq!(c.to_wire(), [0x83, 0x92, 0x06, 0xE3]);
        assert_eq!(from_wire(c.to_wire()), c.value());
    }
}
