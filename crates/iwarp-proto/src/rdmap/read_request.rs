//! The RDMA Read Request header (RFC 5040 §4.4): the whole payload of a
//! Read Request message, 28 octets.
//!
//! ```text
//!  0..4   Data Sink STag
//!  4..12  Data Sink Tagged Offset
//! 12..16  RDMA Read Message Size
//! 16..20  Data Source STag
//! 20..28  Data Source Tagged Offset
//! ```
//!
//! [`ReadRequestView`] is the checked view over those octets,
//! [`ReadRequest`] the value parsed from and emitted into them
//! ([`crate::wire`]'s convention).

use crate::memory::STag;
use crate::wire::{be32, be64, Truncated};

/// Octets of a Read Request header: the whole payload of the message.
pub const READ_REQUEST_LEN: usize = 28;

/// A read-only view of a Read Request header.
#[derive(Debug, Clone, Copy)]
pub struct ReadRequestView<T: AsRef<[u8]>> {
    octets: T,
}

impl<T: AsRef<[u8]>> ReadRequestView<T> {
    /// Wraps `octets` without checking them: fields past the end read as
    /// zero.
    pub const fn new_unchecked(octets: T) -> Self {
        Self { octets }
    }

    /// Wraps `octets` after checking they hold the 28 octets.
    pub fn new_checked(octets: T) -> Result<Self, Truncated> {
        Truncated::check(octets.as_ref(), READ_REQUEST_LEN)?;
        Ok(Self { octets })
    }

    /// The underlying octets.
    pub fn into_inner(self) -> T {
        self.octets
    }

    /// Where the responder writes: the requester's sink STag.
    pub fn sink_stag(&self) -> STag {
        STag(be32(self.octets.as_ref(), 0))
    }

    /// Tagged offset in the sink.
    pub fn sink_to(&self) -> u64 {
        be64(self.octets.as_ref(), 4)
    }

    /// Octets to read.
    pub fn size(&self) -> u32 {
        be32(self.octets.as_ref(), 12)
    }

    /// What the responder reads: its own source STag.
    pub fn source_stag(&self) -> STag {
        STag(be32(self.octets.as_ref(), 16))
    }

    /// Tagged offset in the source.
    pub fn source_to(&self) -> u64 {
        be64(self.octets.as_ref(), 20)
    }
}

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
    /// Parses a view. Every value of every field is a Read Request; what
    /// they may ask for is checked by the responder against its memory.
    pub fn parse<T: AsRef<[u8]>>(view: &ReadRequestView<T>) -> Result<Self, Truncated> {
        Truncated::check(view.octets.as_ref(), READ_REQUEST_LEN)?;
        Ok(Self {
            sink_stag: view.sink_stag(),
            sink_to: view.sink_to(),
            size: view.size(),
            source_stag: view.source_stag(),
            source_to: view.source_to(),
        })
    }

    /// Parses the first 28 octets of `octets`.
    pub fn parse_bytes(octets: &[u8]) -> Result<Self, Truncated> {
        Self::parse(&ReadRequestView::new_checked(octets)?)
    }

    /// Octets [`ReadRequest::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        READ_REQUEST_LEN
    }

    /// Writes the 28 octets at the start of `buf`; returns their length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = Truncated::room(buf, READ_REQUEST_LEN)?;
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.source_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.source_to.to_be_bytes());
        Ok(READ_REQUEST_LEN)
    }

    /// The 28 octets, in a buffer that always fits them.
    pub fn to_bytes(&self) -> [u8; READ_REQUEST_LEN] {
        let mut b = [0u8; READ_REQUEST_LEN];
        // Exactly READ_REQUEST_LEN: cannot fail.
        let _ = self.emit(&mut b);
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
        assert_eq!(ReadRequest::parse_bytes(&b), Ok(r));
        let view = ReadRequestView::new_checked(&b[..]).unwrap();
        assert_eq!((view.size(), view.source_to()), (r.size, r.source_to));
        assert_eq!(
            ReadRequest::parse_bytes(&b[..27]),
            Err(Truncated {
                needed: 28,
                available: 27
            })
        );
        assert!(ReadRequest::parse(&ReadRequestView::new_unchecked(&b[..27])).is_err());
        assert!(r.emit(&mut [0u8; 27]).is_err());
        assert_eq!(r.emit(&mut [0u8; 40]), Ok(28));
    }
}
