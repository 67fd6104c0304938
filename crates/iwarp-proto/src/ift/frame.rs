//! The IFT frame format.
//!
//! draft-williams-iwarp-ift-01 §5.1: a frame is
//!
//! | field | octets |
//! | --- | --- |
//! | header_size | 2 |
//! | payload_size | 2 |
//! | receiver's VTag | 2 |
//! | DDP header | header_size |
//! | header CRC, if the sender set HC | 4 |
//! | DDP payload | payload_size |
//! | payload CRC, if the sender set PC | 4 |
//!
//! There is no padding: CRC fields fall wherever the lengths put them (§5.1
//! second figure, §7.2). Markers (see [`super::marker`]) may fall anywhere
//! inside; the lengths here do not count them.
//!
//! Interpretations of §5.1:
//!
//! - The 16-bit fields are big-endian (network order), as in every RDDP
//!   document. The CRC fields are stored least significant octet first, as
//!   MPA stores its CRC and iSCSI its digests (§5.1 names the iSCSI CRC).
//! - "The header CRC covers both the IFT header (header_size and
//!   payload_size fields) and the DDP header." The receiver's VTag lies
//!   between the two, in the first figure's IFT header rows, and is covered
//!   too: the header CRC covers the 6 + header_size octets before it,
//!   contiguously, whether or not they end on a 4-octet boundary.
//! - The payload CRC covers the payload_size octets of the DDP payload
//!   only; a zero-length payload's CRC is that of no octets (0).
//! - The DDP header is what DDP calls its header (14 octets tagged, 18
//!   untagged, RDMAP's control octet included); an RDMAP header beyond it,
//!   such as a Read Request's, is DDP payload (§5.1 last paragraph). A
//!   receiver caps header_size at [`MAX_HEADER_SIZE`] so that a hostile
//!   peer cannot make it buffer 64 KiB of "header" before any check.
//!
//! [`IftHeaderView`] is the checked view over the IFT header's six octets,
//! [`IftHeader`] the value parsed from and emitted into them
//! ([`crate::wire`]'s convention).

use crate::wire::{be16, Truncated};

/// Octets of header_size, payload_size and the VTag: the IFT header.
pub const IFT_HEADER_LEN: usize = 6;

/// Octets of a CRC field.
pub const CRC_LEN: usize = 4;

/// The largest header_size a receiver accepts. DDP headers are 14 or 18
/// octets; this leaves room for other ULPs over DDP mode.
pub const MAX_HEADER_SIZE: usize = 64;

/// The largest header or payload the 16-bit size fields can describe.
pub const MAX_SIZE: usize = u16::MAX as usize;

/// Octets of a frame, markers not counted.
#[inline]
pub const fn frame_len(
    header_len: usize,
    payload_len: usize,
    header_crc: bool,
    payload_crc: bool,
) -> usize {
    IFT_HEADER_LEN
        + header_len
        + if header_crc { CRC_LEN } else { 0 }
        + payload_len
        + if payload_crc { CRC_LEN } else { 0 }
}

/// A read-only view of an IFT header: a frame's first six octets.
#[derive(Debug, Clone, Copy)]
pub struct IftHeaderView<T: AsRef<[u8]>> {
    octets: T,
}

impl<T: AsRef<[u8]>> IftHeaderView<T> {
    /// Wraps `octets` without checking them: fields past the end read as
    /// zero.
    pub const fn new_unchecked(octets: T) -> Self {
        Self { octets }
    }

    /// Wraps `octets` after checking they hold the six octets.
    pub fn new_checked(octets: T) -> Result<Self, Truncated> {
        Truncated::check(octets.as_ref(), IFT_HEADER_LEN)?;
        Ok(Self { octets })
    }

    /// The underlying octets.
    pub fn into_inner(self) -> T {
        self.octets
    }

    /// Octets of DDP header.
    pub fn header_size(&self) -> u16 {
        be16(self.octets.as_ref(), 0)
    }

    /// Octets of DDP payload.
    pub fn payload_size(&self) -> u16 {
        be16(self.octets.as_ref(), 2)
    }

    /// The receiver's VTag.
    pub fn vtag(&self) -> u16 {
        be16(self.octets.as_ref(), 4)
    }
}

/// The IFT header of a frame: its first six octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IftHeader {
    /// Octets of DDP header.
    pub header_size: u16,
    /// Octets of DDP payload.
    pub payload_size: u16,
    /// The receiver's VTag.
    pub vtag: u16,
}

impl IftHeader {
    /// Parses a view. Every value is a header; whether header_size is
    /// acceptable is the receiver's call ([`MAX_HEADER_SIZE`]).
    pub fn parse<T: AsRef<[u8]>>(view: &IftHeaderView<T>) -> Result<Self, Truncated> {
        Truncated::check(view.octets.as_ref(), IFT_HEADER_LEN)?;
        Ok(Self {
            header_size: view.header_size(),
            payload_size: view.payload_size(),
            vtag: view.vtag(),
        })
    }

    /// Octets [`IftHeader::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        IFT_HEADER_LEN
    }

    /// Writes the six octets at the start of `buf`; returns their length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let out = Truncated::room(buf, IFT_HEADER_LEN)?;
        out[0..2].copy_from_slice(&self.header_size.to_be_bytes());
        out[2..4].copy_from_slice(&self.payload_size.to_be_bytes());
        out[4..6].copy_from_slice(&self.vtag.to_be_bytes());
        Ok(IFT_HEADER_LEN)
    }

    /// The six octets, in a buffer that always fits them.
    pub fn to_bytes(&self) -> [u8; IFT_HEADER_LEN] {
        let mut out = [0u8; IFT_HEADER_LEN];
        // Exactly IFT_HEADER_LEN: cannot fail.
        let _ = self.emit(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert_eq!(frame_len(0, 0, false, false), 6);
        assert_eq!(frame_len(14, 0, true, true), 6 + 14 + 4 + 4);
        assert_eq!(frame_len(18, 65535, false, true), 6 + 18 + 65535 + 4);
    }

    #[test]
    fn header_round_trip() {
        let h = IftHeader {
            header_size: 0x0012,
            payload_size: 0xabcd,
            vtag: 0x1234,
        };
        let octets = h.to_bytes();
        assert_eq!(octets, [0x00, 0x12, 0xab, 0xcd, 0x12, 0x34]);
        let view = IftHeaderView::new_checked(&octets[..]).unwrap();
        assert_eq!(IftHeader::parse(&view), Ok(h));
        assert_eq!(view.vtag(), 0x1234);
        assert!(IftHeaderView::new_checked(&octets[..5]).is_err());
        assert!(IftHeader::parse(&IftHeaderView::new_unchecked(&octets[..5])).is_err());
        assert!(h.emit(&mut [0u8; 5]).is_err());
    }
}
