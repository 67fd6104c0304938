//! DDP headers in words: the one-line summary ([`SegmentHeader`]'s
//! `Display`) and the field line of a tree ([`SegmentHeader::tree`]), in
//! the style of smoltcp's `wire::pretty_print`. `iwarp decode` prints them,
//! and the stack's tracing can log a segment the same way.

use core::fmt;

use super::header::SegmentHeader;

impl fmt::Display for SegmentHeader {
    /// `STag 0x00001234 TO 0x7f0000001000 last` or `QN 0 MSN 1 MO 0 last`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tagged(h) => write!(f, "STag {} TO {:#x}", h.stag, h.to)?,
            Self::Untagged(h) => write!(f, "QN {} MSN {} MO {}", h.qn, h.msn, h.mo)?,
        }
        if self.last() {
            f.write_str(" last")?;
        }
        Ok(())
    }
}

/// Every field of a DDP header on one line: see [`SegmentHeader::tree`].
#[derive(Debug, Clone, Copy)]
pub struct HeaderTree<'a> {
    header: &'a SegmentHeader,
    dv: u8,
    payload_len: usize,
}

impl SegmentHeader {
    /// Every field, with the DV read from the wire and the payload length:
    /// `DDP: untagged, L 1, DV 1, QN 0, MSN 1, MO 0, 16 payload octets`.
    pub fn tree(&self, dv: u8, payload_len: usize) -> HeaderTree<'_> {
        HeaderTree {
            header: self,
            dv,
            payload_len,
        }
    }
}

impl fmt::Display for HeaderTree<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = u8::from(self.header.last());
        match self.header {
            SegmentHeader::Tagged(h) => write!(
                f,
                "DDP: tagged, L {l}, DV {}, STag {}, TO {:#x}",
                self.dv, h.stag, h.to
            )?,
            SegmentHeader::Untagged(h) => write!(
                f,
                "DDP: untagged, L {l}, DV {}, QN {}, MSN {}, MO {}",
                self.dv, h.qn, h.msn, h.mo
            )?,
        }
        write!(f, ", {} payload octets", self.payload_len)
    }
}

#[cfg(test)]
mod tests {
    use super::super::header::{TaggedHeader, UntaggedHeader};
    use super::*;
    use crate::memory::STag;

    #[test]
    fn both_models() {
        let t = SegmentHeader::Tagged(TaggedHeader {
            last: false,
            rsvd_ulp: 0x40,
            stag: STag(0x1234),
            to: 0x7f00_0000_1000,
        });
        assert_eq!(t.to_string(), "STag 0x00001234 TO 0x7f0000001000");
        assert_eq!(
            t.tree(1, 100).to_string(),
            "DDP: tagged, L 0, DV 1, STag 0x00001234, TO 0x7f0000001000, 100 payload octets"
        );
        let u = SegmentHeader::Untagged(UntaggedHeader {
            last: true,
            rsvd_ulp: 0x43,
            rsvd_ulp_word: 0,
            qn: 0,
            msn: 1,
            mo: 0,
        });
        assert_eq!(u.to_string(), "QN 0 MSN 1 MO 0 last");
        assert_eq!(
            u.tree(1, 16).to_string(),
            "DDP: untagged, L 1, DV 1, QN 0, MSN 1, MO 0, 16 payload octets"
        );
    }
}
