//! The RDMA Read Request header (RFC 5040 §4.4).

use crate::memory::STag;

/// Octets of a Read Request header: the whole payload of the message.
pub const READ_REQUEST_LEN: usize = 28;

/// The payload of an RDMA Read Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadRequest {
    /// Where the responder writes: the requester's sink STag.
    pub sink_stag: STag,
    /// Tagged offset in the sink.
    pub sink_to: u64,
    /// Octets to read.
    pub size: u32,
    /// What the responder reads: its own source STag.
    pub source_stag: STag,
    /// Tagged offset in the source.
    pub source_to: u64,
}

impl ReadRequest {
    /// Parses the 28 octets; `None` if fewer are given.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; READ_REQUEST_LEN] = b.get(..READ_REQUEST_LEN)?.try_into().ok()?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| (u32_at(i) as u64) << 32 | u32_at(i + 4) as u64;
        Some(Self {
            sink_stag: STag(u32_at(0)),
            sink_to: u64_at(4),
            size: u32_at(12),
            source_stag: STag(u32_at(16)),
            source_to: u64_at(20),
        })
    }

    /// The 28 octets.
    pub fn to_bytes(&self) -> [u8; READ_REQUEST_LEN] {
        let mut b = [0u8; READ_REQUEST_LEN];
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.source_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.source_to.to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let r = ReadRequest {
            sink_stag: STag(0x0102_0304),
            sink_to: 0x0506_0708_090a_0b0c,
            size: 0x0d0e_0f10,
            source_stag: STag(0x1112_1314),
            source_to: 0x1516_1718_191a_1b1c,
        };
        let b = r.to_bytes();
        let expect: Vec<u8> = (1..=28).collect();
        assert_eq!(b[..], expect[..]);
        assert_eq!(ReadRequest::parse(&b), Some(r));
        assert_eq!(ReadRequest::parse(&b[..27]), None);
    }
}
