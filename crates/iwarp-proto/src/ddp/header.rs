//! DDP segment headers on the wire (RFC 5041 §4).
//!
//! [`Segment`] is a zero-copy view over the octets of a DDP segment (a
//! ULPDU), in the style of smoltcp's `wire` packets: `new_checked` verifies
//! the length once, then accessors never panic. [`TaggedHeader`] and
//! [`UntaggedHeader`] are the plain values parsed from and emitted into
//! those octets. The RsvdULP fields are carried opaquely; RDMAP gives them
//! meaning.

use crate::memory::STag;

/// The DDP version this implementation speaks (RFC 5041 §4.1, DV = 1).
pub const DDP_VERSION: u8 = 1;
/// Octets of a tagged header: control, RsvdULP, STag, TO (§4.2).
pub const TAGGED_HEADER_LEN: usize = 14;
/// Octets of an untagged header: control, RsvdULP (40 bits), QN, MSN, MO (§4.3).
pub const UNTAGGED_HEADER_LEN: usize = 18;

const T_FLAG: u8 = 0x80;
const L_FLAG: u8 = 0x40;
const DV_MASK: u8 = 0x03;

/// Why octets are not a DDP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("DDP segment of {len} octets is shorter than its {needed}-octet header")]
pub struct Truncated {
    /// Octets present.
    pub len: usize,
    /// Octets the header needs.
    pub needed: usize,
}

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
    /// Wraps `octets` after checking they hold the whole header that the
    /// T flag announces.
    pub fn new_checked(octets: T) -> Result<Self, Truncated> {
        let b = octets.as_ref();
        let needed = match b.first() {
            Some(&c) => header_len(c),
            None => 1,
        };
        if b.len() < needed {
            return Err(Truncated {
                len: b.len(),
                needed,
            });
        }
        Ok(Self { octets })
    }

    fn b(&self) -> &[u8] {
        self.octets.as_ref()
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = self.b();
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// T flag: tagged buffer model.
    pub fn tagged(&self) -> bool {
        self.b()[0] & T_FLAG != 0
    }

    /// L flag: last segment of its message.
    pub fn last(&self) -> bool {
        self.b()[0] & L_FLAG != 0
    }

    /// DV: the DDP version.
    pub fn version(&self) -> u8 {
        self.b()[0] & DV_MASK
    }

    /// The first RsvdULP octet (the RDMAP control octet).
    pub fn rsvd_ulp(&self) -> u8 {
        self.b()[1]
    }

    /// Header length: 14 tagged, 18 untagged.
    pub fn header_len(&self) -> usize {
        header_len(self.b()[0])
    }

    /// The header octets.
    pub fn header(&self) -> &[u8] {
        &self.b()[..self.header_len()]
    }

    /// The payload octets.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }

    /// The parsed header (fields whose meaning depends on DV are read as
    /// version 1 lays them out).
    pub fn repr(&self) -> SegmentHeader {
        let b = self.b();
        if self.tagged() {
            SegmentHeader::Tagged(TaggedHeader {
                last: self.last(),
                rsvd_ulp: b[1],
                stag: STag(self.u32_at(2)),
                to: (self.u32_at(6) as u64) << 32 | self.u32_at(10) as u64,
            })
        } else {
            SegmentHeader::Untagged(UntaggedHeader {
                last: self.last(),
                rsvd_ulp: b[1],
                rsvd_ulp_word: self.u32_at(2),
                qn: self.u32_at(6),
                msn: self.u32_at(10),
                mo: self.u32_at(14),
            })
        }
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
    /// Its length on the wire.
    pub fn len(&self) -> usize {
        match self {
            Self::Tagged(_) => TAGGED_HEADER_LEN,
            Self::Untagged(_) => UNTAGGED_HEADER_LEN,
        }
    }

    /// Never empty; here for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
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
    /// start of `out` and returns its length. `out` must hold
    /// [`SegmentHeader::len`] octets.
    pub fn emit(&self, out: &mut [u8]) -> usize {
        match self {
            Self::Tagged(h) => {
                out[0] = T_FLAG | if h.last { L_FLAG } else { 0 } | DDP_VERSION;
                out[1] = h.rsvd_ulp;
                out[2..6].copy_from_slice(&h.stag.to_be_bytes());
                out[6..14].copy_from_slice(&h.to.to_be_bytes());
                TAGGED_HEADER_LEN
            }
            Self::Untagged(h) => {
                out[0] = if h.last { L_FLAG } else { 0 } | DDP_VERSION;
                out[1] = h.rsvd_ulp;
                out[2..6].copy_from_slice(&h.rsvd_ulp_word.to_be_bytes());
                out[6..10].copy_from_slice(&h.qn.to_be_bytes());
                out[10..14].copy_from_slice(&h.msn.to_be_bytes());
                out[14..18].copy_from_slice(&h.mo.to_be_bytes());
                UNTAGGED_HEADER_LEN
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
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
        let h = s.repr();
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
        assert_eq!(h.emit(&mut out), 18);
        assert_eq!(out[..], octets[..18]);
    }

    #[test]
    fn tagged_round_trip_every_field() {
        let h = SegmentHeader::Tagged(TaggedHeader {
            last: false,
            rsvd_ulp: 0x40,
            stag: STag(0x0102_0304),
            to: 0x1112_1314_1516_1718,
        });
        let mut out = [0u8; 14];
        h.emit(&mut out);
        assert_eq!(
            out,
            [0x81, 0x40, 1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        assert_eq!(Segment::new_checked(&out[..]).unwrap().repr(), h);
    }

    #[test]
    fn truncated_headers_are_refused() {
        assert!(Segment::new_checked(&[][..]).is_err());
        assert!(Segment::new_checked(&[0x80; 13][..]).is_err());
        assert!(Segment::new_checked(&[0x00; 17][..]).is_err());
        assert!(Segment::new_checked(&[0x80; 14][..]).is_ok());
    }
}
