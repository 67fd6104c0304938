//! Finding an FPDU boundary without markers, by its CRC.
//!
//! After octets are lost from a stream without markers, nothing in the
//! stream says where the next FPDU begins, but with CRC in use an FPDU
//! vouches for itself: its ULPDU_Length says where its CRC field is, and a
//! CRC32c over the octets before it that matches the field is all but
//! impossible by chance (RFC 5044 §4.3's CRC covers the length, ULPDU and
//! pad). A candidate offset is taken when its FPDU's CRC matches *and* the
//! FPDU right after it matches too, which rules out the rare false match.
//!
//! Candidates are first screened on the DDP control octet (DV 1, RFC 5041
//! §4.1) and a ULPDU_Length that holds the DDP header the T flag announces,
//! so that most offsets cost a few comparisons rather than a CRC.

use iwarp_proto::ddp::header::header_len;
use iwarp_proto::ddp::DDP_VERSION;
use iwarp_proto::framing::crc::{crc32c, from_wire};
use iwarp_proto::mpa::fpdu::{fpdu_len, CRC_LEN, HEADER_LEN};

/// What an offset holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// An FPDU of this many octets whose CRC matches.
    Fpdu(usize),
    /// Not an FPDU.
    NotFpdu,
    /// More octets are needed to tell.
    NeedMore,
}

/// Whether `bytes` starts with an FPDU whose CRC matches (no markers).
pub fn fpdu_at(bytes: &[u8]) -> Verdict {
    let Some(&[hi, lo, control]) = bytes.get(..HEADER_LEN + 1) else {
        return Verdict::NeedMore;
    };
    let ulpdu_len = usize::from(u16::from_be_bytes([hi, lo]));
    // DV 1 and the two reserved bits zero; room for the header it announces.
    if control & 0x3f != DDP_VERSION || ulpdu_len < header_len(control) {
        return Verdict::NotFpdu;
    }
    let len = fpdu_len(ulpdu_len);
    let Some(fpdu) = bytes.get(..len) else {
        return Verdict::NeedMore;
    };
    let (covered, field) = fpdu.split_at(len - CRC_LEN);
    let field = [field[0], field[1], field[2], field[3]];
    if crc32c(covered) == from_wire(field) {
        Verdict::Fpdu(len)
    } else {
        Verdict::NotFpdu
    }
}

/// Whether an FPDU boundary is at the start of `bytes`: two FPDUs in a row
/// whose CRCs match. `at_end`: no more octets will come, so an FPDU whose
/// successor the capture cut short is taken alone, and what would need more
/// octets is not an FPDU.
pub fn boundary_at(bytes: &[u8], at_end: bool) -> Verdict {
    match fpdu_at(bytes) {
        Verdict::Fpdu(len) => match fpdu_at(&bytes[len..]) {
            Verdict::Fpdu(_) => Verdict::Fpdu(len),
            Verdict::NeedMore if at_end => Verdict::Fpdu(len),
            other => other,
        },
        Verdict::NeedMore if at_end => Verdict::NotFpdu,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_proto::framing::{Framer, WireBatch};
    use iwarp_proto::mpa::{FpduTransmitter, FramingParams};

    fn fpdus(n: usize) -> (Vec<u8>, Vec<usize>) {
        let mut tx = FpduTransmitter::new(FramingParams {
            crc: true,
            send_markers: false,
            receive_markers: false,
        });
        let mut wire = Vec::new();
        let mut starts = Vec::new();
        for i in 0..n {
            let mut u = vec![
                0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i as u8, 0, 0, 0, 0,
            ];
            u.extend(std::iter::repeat_n(i as u8, 37 * i + 5));
            starts.push(wire.len());
            let mut batch = WireBatch::new();
            tx.frame(&[], &[&u], &mut batch).unwrap();
            batch.write_to(&[&u], &mut wire);
        }
        (wire, starts)
    }

    #[test]
    fn only_boundaries_pass() {
        let (wire, starts) = fpdus(6);
        for at in 0..wire.len() {
            let v = boundary_at(&wire[at..], true);
            if starts.contains(&at) {
                assert!(matches!(v, Verdict::Fpdu(_)), "{at}: {v:?}");
            } else {
                assert_ne!(v, Verdict::Fpdu(0), "{at}");
                assert!(!matches!(v, Verdict::Fpdu(_)), "{at}: {v:?}");
            }
        }
        // The last FPDU alone passes only at the end; at the end, what
        // would need more octets is no FPDU.
        let last = *starts.last().unwrap();
        assert_eq!(boundary_at(&wire[last..], false), Verdict::NeedMore);
        assert_eq!(fpdu_at(&[0]), Verdict::NeedMore);
        assert_eq!(boundary_at(&[0, 0x30, 0x41], true), Verdict::NotFpdu);
    }
}
