//! DDP segment headers on the wire (RFC 5041 §4).
//!
//! [`Segment`] is a zero-copy view over the octets of a DDP segment (a
//! ULPDU), in the style of [`crate::wire`]: `new_checked` verifies the
//! length once, then accessors read the raw fields and never panic.
//! [`SegmentHeader`] (a [`TaggedHeader`] or an [`UntaggedHeader`]) is the
//! value parsed from and emitted into those octets. The RsvdULP fields are
//! carried opaquely; RDMAP gives them meaning.

use super::error::{DdpError, TaggedError, UntaggedError};
use crate::memory::STag;
use crate::wire::{be32, be64, Truncated};

/// The DDP version this implementation speaks (RFC 5041 §4.1, DV = 1).
pub const DDP_VERSION: u8 = 1;
/// Octets of a tagged header: control, RsvdULP, STag, TO (§4.2).
pub const TAGGED_HEADER_LEN: usize = 14;
/// Octets of an untagged header: control, RsvdULP (40 bits), QN, MSN, MO (§4.3).
pub const UNTAGGED_HEADER_LEN: usize = 18;

const T_FLAG: u8 = 0x80;
const L_FLAG: u8 = 0x40;
const DV_MASK: u8 = 0x03;

/// The header length a segment whose first octet is `control` has.
pub const fn header_len(control: u8) -> usize {
    if control & T_FLAG != 0 {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    }
}

/// A read-only view of a DDP segment: header fields and payload.
#[derive(Debug, Clone, Copy)]
pub struct Segment<T: AsRef<[u8]>> {
    octets: T,
}

impl<T: AsRef<[u8]>> Segment<T> {
    /// Wraps `octets` without checking them: accessors read fields past
    /// the end as zero.
    pub const fn new_unchecked(octets: T) -> Self {
        Self { octets }
    }

    /// Wraps `octets` after checking they hold the whole header that the
    /// T flag announces.
    pub fn new_checked(octets: T) -> Result<Self, Truncated> {
        let b = octets.as_ref();
        let needed = b.first().map_or(1, |&c| header_len(c));
        Truncated::check(b, needed)?;
        Ok(Self { octets })
    }

    /// The underlying octets.
    pub fn into_inner(self) -> T {
        self.octets
    }

    fn b(&self) -> &[u8] {
        self.octets.as_ref()
    }

    fn control(&self) -> u8 {
        self.b().first().copied().unwrap_or(0)
    }

    /// T flag: tagged buffer model.
    pub fn tagged(&self) -> bool {
        self.control() & T_FLAG != 0
    }

    /// L flag: last segment of its message.
    pub fn last(&self) -> bool {
        self.control() & L_FLAG != 0
    }

    /// DV: the DDP version.
    pub fn version(&self) -> u8 {
        self.control() & DV_MASK
    }

    /// The first RsvdULP octet (the RDMAP control octet).
    pub fn rsvd_ulp(&self) -> u8 {
        self.b().get(1).copied().unwrap_or(0)
    }

    /// Tagged: the data sink's STag (octets 2..6, as DV 1 lays them out).
    pub fn stag(&self) -> STag {
        STag(be32(self.b(), 2))
    }

    /// Tagged: the tagged offset (octets 6..14).
    pub fn tagged_offset(&self) -> u64 {
        be64(self.b(), 6)
    }

    /// Untagged: RsvdULP\[8:39\] (octets 2..6).
    pub fn rsvd_ulp_word(&self) -> u32 {
        be32(self.b(), 2)
    }

    /// Untagged: the queue number (octets 6..10).
    pub fn qn(&self) -> u32 {
        be32(self.b(), 6)
    }

    /// Untagged: the message sequence number (octets 10..14).
    pub fn msn(&self) -> u32 {
        be32(self.b(), 10)
    }

    /// Untagged: the message offset (octets 14..18).
    pub fn mo(&self) -> u32 {
        be32(self.b(), 14)
    }

    /// Header length: 14 tagged, 18 untagged.
    pub fn header_len(&self) -> usize {
        header_len(self.control())
    }

    /// The header octets (as many as there are).
    pub fn header(&self) -> &[u8] {
        let b = self.b();
        &b[..self.header_len().min(b.len())]
    }

    /// The payload octets.
    pub fn payload(&self) -> &[u8] {
        self.b().get(self.header_len()..).unwrap_or(&[])
    }
}

/// The header of a segment in the tagged buffer model (RFC 5041 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaggedHeader {
    /// L flag.
    pub last: bool,
    /// RsvdULP, 8 bits: the RDMAP control octet.
    pub rsvd_ulp: u8,
    /// The data sink's STag.
    pub stag: STag,
    /// The tagged offset of the segment's first payload octet.
    pub to: u64,
}

/// The header of a segment in the untagged buffer model (RFC 5041 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UntaggedHeader {
    /// L flag.
    pub last: bool,
    /// RsvdULP\[0:7\]: the RDMAP control octet.
    pub rsvd_ulp: u8,
    /// RsvdULP\[8:39\]: RDMAP's Invalidate STag, or zero.
    pub rsvd_ulp_word: u32,
    /// Queue number.
    pub qn: u32,
    /// Message sequence number.
    pub msn: u32,
    /// Message offset.
    pub mo: u32,
}

/// A DDP header of either model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentHeader {
    /// Tagged buffer model.
    Tagged(TaggedHeader),
    /// Untagged buffer model.
    Untagged(UntaggedHeader),
}

impl SegmentHeader {
    /// Parses the header of a checked segment. RFC 5041 §4.1: DV must be
    /// 1, since the rest of the header's layout depends on it; anything
    /// else is the invalid-version error of the segment's buffer model
    /// (§7.2). The RsvdULP fields are not checked here: they are RDMAP's.
    pub fn parse<T: AsRef<[u8]>>(segment: &Segment<T>) -> Result<Self, HeaderError> {
        Truncated::check(segment.b(), segment.header_len().max(1))?;
        let tagged = segment.tagged();
        //= rfc5041#4.1
        //# The value of DV MUST be the same for all the DDP Segments transmitted or received on
        //# a DDP Stream.
        if segment.version() != DDP_VERSION {
            return Err(HeaderError::Version(if tagged {
                DdpError::Tagged(TaggedError::InvalidVersion)
            } else {
                DdpError::Untagged(UntaggedError::InvalidVersion)
            }));
        }
        Ok(if tagged {
            Self::Tagged(TaggedHeader {
                last: segment.last(),
                rsvd_ulp: segment.rsvd_ulp(),
                stag: segment.stag(),
                to: segment.tagged_offset(),
            })
        } else {
            Self::Untagged(UntaggedHeader {
                last: segment.last(),
                rsvd_ulp: segment.rsvd_ulp(),
                rsvd_ulp_word: segment.rsvd_ulp_word(),
                qn: segment.qn(),
                msn: segment.msn(),
                mo: segment.mo(),
            })
        })
    }

    /// Octets [`SegmentHeader::emit`] writes: 14 tagged, 18 untagged.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::Tagged(_) => TAGGED_HEADER_LEN,
            Self::Untagged(_) => UNTAGGED_HEADER_LEN,
        }
    }

    /// L flag.
    pub fn last(&self) -> bool {
        match self {
            Self::Tagged(h) => h.last,
            Self::Untagged(h) => h.last,
        }
    }

    /// The first RsvdULP octet.
    pub fn rsvd_ulp(&self) -> u8 {
        match self {
            Self::Tagged(h) => h.rsvd_ulp,
            Self::Untagged(h) => h.rsvd_ulp,
        }
    }

    /// Writes the header, DV = 1 and reserved bits zero (§4.1), into the
    /// start of `buf`; returns its length.
    //= rfc5041#4.1
    //# This field MUST be set to zero on transmit, and not checked on receive.
    //= rfc5041#4.1
    //# This field MUST be set to one to indicate the version of the specification described in
    //# this document.
    //= rfc5041#4.2
    //# Figure 4 shows the DDP Header format that MUST be used in all DDP Segments that target
    //# Tagged Buffers.
    //= rfc5041#4.3
    //# Figure 5 shows the DDP Header format that MUST be used in all DDP Segments that target
    //# Untagged Buffers.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let out = Truncated::room(buf, self.buffer_len())?;
        match self {
            Self::Tagged(h) => {
                out[0] = T_FLAG | if h.last { L_FLAG } else { 0 } | DDP_VERSION;
                out[1] = h.rsvd_ulp;
                out[2..6].copy_from_slice(&h.stag.to_be_bytes());
                out[6..14].copy_from_slice(&h.to.to_be_bytes());
            }
            Self::Untagged(h) => {
                out[0] = if h.last { L_FLAG } else { 0 } | DDP_VERSION;
                out[1] = h.rsvd_ulp;
                out[2..6].copy_from_slice(&h.rsvd_ulp_word.to_be_bytes());
                out[6..10].copy_from_slice(&h.qn.to_be_bytes());
                out[10..14].copy_from_slice(&h.msn.to_be_bytes());
                out[14..18].copy_from_slice(&h.mo.to_be_bytes());
            }
        }
        Ok(self.buffer_len())
    }

    /// The header's octets in an array that fits either model, with the
    /// length used: [`SegmentHeader::emit`] into a buffer that is always
    /// large enough.
    pub fn to_bytes(&self) -> ([u8; UNTAGGED_HEADER_LEN], usize) {
        let mut out = [0u8; UNTAGGED_HEADER_LEN];
        let len = self.emit(&mut out).map_or(0, |n| n);
        (out, len)
    }
}

/// Why a segment's header cannot be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer octets than the header the T flag announces.
    #[error("DDP header: {0}")]
    Truncated(#[from] Truncated),
    /// DV is not 1 (RFC 5041 §4.1): the error to report, in the segment's
    /// buffer model.
    #[error("{0}")]
    Version(DdpError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    //= rfc5041#4.3
    //= type=test
    //# Figure 5 shows the DDP Header format that MUST be used in all DDP Segments that target
    //# Untagged Buffers.
    fn siw_send_header() {
        // siw-observed.md: rping's first Send, after the MPA length.
        let octets = [
            0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0xaa,
        ];
        let s = Segment::new_checked(&octets[..]).unwrap();
        assert!(!s.tagged() && s.last());
        assert_eq!(s.version(), 1);
        assert_eq!(s.rsvd_ulp(), 0x43);
        assert_eq!(s.payload(), &[0xaa]);
        let h = SegmentHeader::parse(&s).unwrap();
        assert_eq!(
            h,
            SegmentHeader::Untagged(UntaggedHeader {
                last: true,
                rsvd_ulp: 0x43,
                rsvd_ulp_word: 0,
                qn: 0,
                msn: 1,
                mo: 0
            })
        );
        let mut out = [0u8; 18];
        assert_eq!(h.emit(&mut out), Ok(18));
        assert_eq!(out[..], octets[..18]);
        assert_eq!(h.buffer_len(), 18);
    }

    #[test]
    //= rfc5041#4.2
    //= type=test
    //# Figure 4 shows the DDP Header format that MUST be used in all DDP Segments that target
    //# Tagged Buffers.
    fn tagged_round_trip_every_field() {
        let h = SegmentHeader::Tagged(TaggedHeader {
            last: false,
            rsvd_ulp: 0x40,
            stag: STag(0x0102_0304),
            to: 0x1112_1314_1516_1718,
        });
        let mut out = [0u8; 14];
        assert_eq!(h.emit(&mut out), Ok(14));
        assert_eq!(
            out,
            [0x81, 0x40, 1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        let view = Segment::new_checked(&out[..]).unwrap();
        assert_eq!(SegmentHeader::parse(&view), Ok(h));
        assert_eq!(
            (view.stag(), view.tagged_offset()),
            (STag(0x0102_0304), 0x1112_1314_1516_1718)
        );
        assert_eq!(h.to_bytes().1, 14);
    }

    /// The control octet's reserved bits are not checked on receive: a
    /// header with all four set parses as the same header without them,
    /// and emitting it sends them as zero.
    //= rfc5041#4.1
    //= type=test
    //# This field MUST be set to zero on transmit, and not checked on
    //# receive.
    #[test]
    fn reserved_control_bits_are_not_checked() {
        let mut octets = [0xc1u8, 0x40, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0x20];
        let clean = SegmentHeader::parse(&Segment::new_checked(&octets[..]).unwrap()).unwrap();
        octets[0] |= 0x3c;
        let seen = SegmentHeader::parse(&Segment::new_checked(&octets[..]).unwrap()).unwrap();
        assert_eq!(seen, clean);
        assert_eq!(seen.to_bytes().0[0], 0xc1);
    }

    #[test]
    fn short_buffers_and_other_versions_are_refused() {
        let h = SegmentHeader::Untagged(UntaggedHeader {
            last: true,
            rsvd_ulp: 0x41,
            rsvd_ulp_word: 0,
            qn: 1,
            msn: 1,
            mo: 0,
        });
        assert_eq!(
            h.emit(&mut [0u8; 17]),
            Err(Truncated {
                needed: 18,
                available: 17
            })
        );
        let (mut octets, _) = h.to_bytes();
        octets[0] = (octets[0] & !DV_MASK) | 2;
        let view = Segment::new_checked(&octets[..]).unwrap();
        assert_eq!(
            SegmentHeader::parse(&view),
            Err(HeaderError::Version(DdpError::Untagged(
                UntaggedError::InvalidVersion
            )))
        );
        // Unchecked views read what is there and zeros beyond it.
        let short = Segment::new_unchecked(&octets[..3]);
        assert_eq!((short.qn(), short.mo()), (0, 0));
        assert!(SegmentHeader::parse(&short).is_err());
    }

    #[test]
    fn truncated_headers_are_refused() {
        assert!(Segment::new_checked(&[][..]).is_err());
        assert!(Segment::new_checked(&[0x80; 13][..]).is_err());
        assert!(Segment::new_checked(&[0x00; 17][..]).is_err());
        assert!(Segment::new_checked(&[0x80; 14][..]).is_ok());
    }
}
