//! One ULPDU read as DDP and RDMAP, and what is wrong with it on its own.
//!
//! The fields are read by `iwarp-proto`'s own parser
//! ([`iwarp_proto::rdmap::pretty::Pdu`] over [`Segment`]), so the decoder
//! shows exactly what the stack would see. The checks here are the ones a
//! person debugging interop wants flagged on the PDU itself (a version that
//! is not 1, an opcode in the wrong buffer model or queue, a Read Request
//! of the wrong size); the checks that need what came before are
//! [`crate::checks`]'.

use iwarp_proto::ddp::{Segment, SegmentHeader, DDP_VERSION, UNTAGGED_HEADER_LEN};
use iwarp_proto::rdmap::pretty::Pdu;
use iwarp_proto::rdmap::{
    control_opcode, control_version, Opcode, RDMAP_VERSION, READ_REQUEST_LEN, TERMINATE_MAX_LEN,
};

use crate::event::{PduError, Preview, PREVIEW};

/// Octets of a ULPDU kept for decoding: the longest header, the longest
/// RDMAP header that follows it (a Terminate's), and the preview.
pub const HEAD: usize = UNTAGGED_HEADER_LEN + TERMINATE_MAX_LEN + PREVIEW;

/// A ULPDU, interpreted.
#[derive(Debug, Clone, Default)]
pub struct Interpreted {
    /// The DDP segment, if the ULPDU holds a DDP header.
    pub segment: Option<Pdu>,
    /// DDP payload octets.
    pub payload_len: usize,
    /// The first payload octets.
    pub payload: Preview,
}

/// Interprets a ULPDU of `ulpdu_len` octets whose first octets are `head`
/// (all of it, or at least [`HEAD`] octets), adding what is wrong to
/// `errors`. `rdma` says whether RDMAP runs over DDP (always for MPA; IFT
/// can run DDP alone).
pub fn interpret(
    head: &[u8],
    ulpdu_len: usize,
    rdma: bool,
    errors: &mut Vec<PduError>,
) -> Interpreted {
    let mut out = Interpreted::default();
    let segment = match Segment::new_checked(head) {
        Ok(s) => s,
        Err(e) => {
            errors.push(PduError::ShortDdpHeader {
                len: e.available,
                needed: e.needed,
            });
            return out;
        }
    };
    let Ok(pdu) = Pdu::parse(head, ulpdu_len) else {
        return out;
    };
    out.payload_len = pdu.payload_len;
    out.payload = Preview::of(segment.payload());
    out.segment = Some(pdu);
    if segment.version() != DDP_VERSION {
        // RFC 5041 §4.1: DV is 1; anything else is an invalid DDP version.
        errors.push(PduError::DdpVersion(segment.version()));
    }
    if !rdma {
        return out;
    }
    let control = segment.rsvd_ulp();
    let rv = control_version(control);
    if rv != RDMAP_VERSION {
        errors.push(PduError::RdmapVersion(rv));
    }
    let Some(op) = Opcode::from_bits(control_opcode(control)) else {
        errors.push(PduError::ReservedOpcode(control_opcode(control)));
        return out;
    };
    // RFC 5040 §4.3: each message has its buffer model and queue.
    match (&pdu.header, op.queue()) {
        (SegmentHeader::Tagged(_), Some(_)) => errors.push(PduError::MustBeUntagged(op)),
        (SegmentHeader::Untagged(_), None) => errors.push(PduError::MustBeTagged(op)),
        (SegmentHeader::Untagged(h), Some(q)) if h.qn != q => errors.push(PduError::WrongQueue {
            opcode: op,
            expected: q,
            qn: h.qn,
        }),
        _ => {}
    }
    match op {
        // RFC 5040 §4.4: the whole payload is the 28-octet header.
        Opcode::ReadRequest if pdu.payload_len != READ_REQUEST_LEN => {
            errors.push(PduError::ReadRequestLength(pdu.payload_len));
        }
        Opcode::Terminate if pdu.terminate.is_none() => {
            errors.push(PduError::ShortTerminate(pdu.payload_len));
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hx(s: &str) -> Vec<u8> {
        let d: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        d.chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn rping_send() {
        let u = hx("4143 00000000 00000000 00000001 00000000 00005637f5a0d530 3fce2900 00000020");
        let mut errors = Vec::new();
        let i = interpret(&u, u.len(), true, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let s = i.segment.unwrap();
        assert_eq!(s.opcode(), Some(Opcode::Send));
        assert_eq!(i.payload_len, 16);
        assert!(matches!(
            s.header,
            SegmentHeader::Untagged(h) if h.last && h.qn == 0 && h.msn == 1 && h.mo == 0
        ));
    }

    #[test]
    fn wrong_model_and_queue_are_flagged() {
        // A Write (opcode 0) in an untagged header on QN 5.
        let u = hx("4140 00000000 00000005 00000001 00000000");
        let mut errors = Vec::new();
        interpret(&u, u.len(), true, &mut errors);
        assert_eq!(errors, [PduError::MustBeTagged(Opcode::RdmaWrite)]);
        // A Send on QN 1.
        let u = hx("4143 00000000 00000001 00000001 00000000");
        errors.clear();
        interpret(&u, u.len(), true, &mut errors);
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn short_and_odd_ulpdus_do_not_panic() {
        let mut errors = Vec::new();
        for len in 0..40 {
            for fill in [0u8, 0x41, 0xc1, 0xff] {
                let u = vec![fill; len];
                let _ = interpret(&u, len, true, &mut errors);
                let _ = interpret(&u, len + 70000, false, &mut errors);
            }
        }
    }
}
