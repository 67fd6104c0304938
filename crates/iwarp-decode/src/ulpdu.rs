//! One ULPDU read as DDP and RDMAP: header fields, the RDMAP message, and
//! what is wrong with them.
//!
//! Every field is read through `iwarp-proto`'s own views and reprs
//! ([`Segment`], [`ReadRequest`], [`TerminateMessage`], the opcode and
//! error tables), so the decoder shows exactly what the stack would see.
//! The checks here are the ones a person debugging interop wants flagged
//! on the PDU itself (a version that is not 1, an opcode in the wrong
//! buffer model or queue, a Read Request of the wrong size); the stateful
//! checks (MSN order, STag validity) need the peer's memory and are not
//! made.

use iwarp_proto::ddp::{Segment, SegmentHeader, DDP_VERSION, UNTAGGED_HEADER_LEN};
use iwarp_proto::rdmap::{
    control_opcode, control_version, Opcode, ProtocolError, ReadRequest, TerminateMessage,
    RDMAP_VERSION, READ_REQUEST_LEN, TERMINATE_MAX_LEN,
};

use super::event::{
    hex, hex_value, stag, DdpInfo, RdmapInfo, ReadRequestInfo, TerminateInfo, TerminatedDdpInfo,
};

/// Payload octets shown with each PDU.
pub const PREVIEW: usize = 32;

/// Octets of a ULPDU kept for decoding: the longest header, the longest
/// RDMAP header that follows it (a Terminate's), and the preview.
pub const HEAD: usize = UNTAGGED_HEADER_LEN + TERMINATE_MAX_LEN + PREVIEW;

/// A ULPDU, interpreted.
#[derive(Debug, Clone, Default)]
pub struct Interpreted {
    /// The DDP header, if the ULPDU holds one.
    pub ddp: Option<DdpInfo>,
    /// The RDMAP message, in RDMA mode.
    pub rdmap: Option<RdmapInfo>,
    /// DDP payload octets.
    pub payload_len: usize,
    /// The first payload octets, hex.
    pub payload: String,
    /// What is wrong.
    pub errors: Vec<String>,
    /// What to count it as in the summary.
    pub kind: String,
}

/// The name of an RDMAP message.
pub fn opcode_name(op: Opcode) -> &'static str {
    match op {
        Opcode::RdmaWrite => "RDMA Write",
        Opcode::ReadRequest => "RDMA Read Request",
        Opcode::ReadResponse => "RDMA Read Response",
        Opcode::Send => "Send",
        Opcode::SendInvalidate => "Send with Invalidate",
        Opcode::SendSolicited => "Send with SE",
        Opcode::SendSolicitedInvalidate => "Send with SE and Invalidate",
        Opcode::Terminate => "Terminate",
    }
}

fn opcode_name_of(control: u8) -> &'static str {
    Opcode::from_bits(control_opcode(control)).map_or("reserved opcode", opcode_name)
}

/// Interprets a ULPDU of `ulpdu_len` octets whose first octets are `head`
/// (all of it, or at least [`HEAD`] octets). `rdma` says whether RDMAP runs
/// over DDP (always for MPA; IFT can run DDP alone).
pub fn interpret(head: &[u8], ulpdu_len: usize, rdma: bool) -> Interpreted {
    let mut out = Interpreted::default();
    let segment = match Segment::new_checked(head) {
        Ok(s) => s,
        Err(e) => {
            out.errors.push(format!("malformed DDP header: {e}"));
            out.kind = "malformed".into();
            return out;
        }
    };
    let header = segment.repr();
    out.ddp = Some(ddp_info(&header, segment.version()));
    out.payload_len = ulpdu_len.saturating_sub(segment.header_len());
    let payload = segment.payload();
    out.payload = hex(&payload[..payload.len().min(PREVIEW)]);
    if segment.version() != DDP_VERSION {
        // RFC 5041 §4.1: DV is 1; anything else is an invalid DDP version.
        out.errors
            .push(format!("DDP version {} (DV must be 1)", segment.version()));
    }
    if !rdma {
        out.kind = if segment.tagged() {
            "DDP tagged"
        } else {
            "DDP untagged"
        }
        .into();
        return out;
    }
    let control = segment.rsvd_ulp();
    let rv = control_version(control);
    let bits = control_opcode(control);
    if rv != RDMAP_VERSION {
        out.errors
            .push(format!("RDMAP version {rv} (RV must be 1)"));
    }
    let Some(op) = Opcode::from_bits(bits) else {
        out.errors
            .push(format!("RDMAP opcode {bits} is reserved (RFC 5040 §4.3)"));
        out.kind = format!("reserved opcode {bits}");
        out.rdmap = Some(RdmapInfo {
            rv,
            opcode: bits,
            name: "reserved opcode",
            solicited: false,
            invalidate_stag: None,
            read_request: None,
            terminate: None,
        });
        return out;
    };
    let name = opcode_name(op);
    out.kind = name.into();
    let mut info = RdmapInfo {
        rv,
        opcode: bits,
        name,
        solicited: matches!(op, Opcode::SendSolicited | Opcode::SendSolicitedInvalidate),
        invalidate_stag: None,
        read_request: None,
        terminate: None,
    };
    // RFC 5040 §4.3: each message has its buffer model and queue.
    match (&header, op.queue()) {
        (SegmentHeader::Tagged(_), Some(_)) => out
            .errors
            .push(format!("{name} must use the untagged buffer model")),
        (SegmentHeader::Untagged(_), None) => out
            .errors
            .push(format!("{name} must use the tagged buffer model")),
        (SegmentHeader::Untagged(h), Some(q)) if h.qn != q => out
            .errors
            .push(format!("{name} belongs on QN {q}, not QN {}", h.qn)),
        _ => {}
    }
    if let SegmentHeader::Untagged(h) = &header {
        if matches!(op, Opcode::SendInvalidate | Opcode::SendSolicitedInvalidate) {
            info.invalidate_stag = Some(stag(h.rsvd_ulp_word));
        }
    }
    match op {
        Opcode::ReadRequest => {
            // RFC 5040 §4.4: the whole payload is the 28-octet header.
            if out.payload_len != READ_REQUEST_LEN {
                out.errors.push(format!(
                    "Read Request carries {} octets, not {READ_REQUEST_LEN}",
                    out.payload_len
                ));
            }
            info.read_request = ReadRequest::parse(payload).as_ref().map(read_request_info);
        }
        Opcode::Terminate => match TerminateMessage::parse(payload) {
            Some(t) => info.terminate = Some(terminate_info(&t)),
            None => out.errors.push(format!(
                "Terminate carries {} octets, fewer than its 4-octet control field",
                out.payload_len
            )),
        },
        _ => {}
    }
    out.rdmap = Some(info);
    out
}

fn ddp_info(header: &SegmentHeader, dv: u8) -> DdpInfo {
    match header {
        SegmentHeader::Tagged(h) => DdpInfo::Tagged {
            last: h.last,
            dv,
            stag: stag(h.stag.0),
            to: hex_value(h.to),
        },
        SegmentHeader::Untagged(h) => DdpInfo::Untagged {
            last: h.last,
            dv,
            qn: h.qn,
            msn: h.msn,
            mo: h.mo,
        },
    }
}

fn read_request_info(r: &ReadRequest) -> ReadRequestInfo {
    ReadRequestInfo {
        sink_stag: stag(r.sink_stag.0),
        sink_to: hex_value(r.sink_to),
        size: r.size,
        source_stag: stag(r.source_stag.0),
        source_to: hex_value(r.source_to),
    }
}

/// The layer number's name (RFC 5040 §4.8).
pub fn layer_name(layer: u8) -> &'static str {
    match layer {
        0 => "RDMAP",
        1 => "DDP",
        2 => "LLP",
        _ => "unknown layer",
    }
}

fn terminate_info(t: &TerminateMessage) -> TerminateInfo {
    let error = match ProtocolError::from_parts(t.layer, t.etype, t.code) {
        Some(e) => e.to_string(),
        None => format!("{}: unknown error", layer_name(t.layer)),
    };
    let ddp_copy = t.ddp.as_ref().and_then(|d| {
        let octets = d.header();
        let segment = Segment::new_checked(octets).ok()?;
        Some(TerminatedDdpInfo {
            segment_length: d.segment_length,
            header: hex(octets),
            ddp: ddp_info(&segment.repr(), segment.version()),
            rdmap: opcode_name_of(segment.rsvd_ulp()),
        })
    });
    TerminateInfo {
        layer: t.layer,
        layer_name: layer_name(t.layer),
        etype: t.etype,
        code: t.code,
        error,
        ddp_copy,
        rdmap_copy: t
            .rdmap
            .as_ref()
            .and_then(|r| ReadRequest::parse(r))
            .as_ref()
            .map(read_request_info),
    }
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
        let i = interpret(&u, u.len(), true);
        assert!(i.errors.is_empty(), "{:?}", i.errors);
        assert_eq!(i.kind, "Send");
        assert_eq!(i.payload_len, 16);
        assert!(matches!(
            i.ddp,
            Some(DdpInfo::Untagged {
                last: true,
                qn: 0,
                msn: 1,
                mo: 0,
                dv: 1
            })
        ));
    }

    #[test]
    fn wrong_model_and_queue_are_flagged() {
        // A Write (opcode 0) in an untagged header on QN 5.
        let u = hx("4140 00000000 00000005 00000001 00000000");
        let i = interpret(&u, u.len(), true);
        assert_eq!(i.errors.len(), 1, "{:?}", i.errors);
        // A Send on QN 1.
        let u = hx("4143 00000000 00000001 00000001 00000000");
        assert_eq!(interpret(&u, u.len(), true).errors.len(), 1);
    }

    #[test]
    fn short_and_odd_ulpdus_do_not_panic() {
        for len in 0..40 {
            for fill in [0u8, 0x41, 0xc1, 0xff] {
                let u = vec![fill; len];
                let _ = interpret(&u, len, true);
                let _ = interpret(&u, len + 70000, false);
            }
        }
    }

    #[test]
    fn terminate_with_copies() {
        // LLP CRC error, M D R set: length 34, the Send header, a Read Request copy.
        let u = hx("4147 00000000 00000002 00000001 00000000 \
             2002e000 0022 4143 00000000 00000000 00000001 00000000 \
             00000001 0000000000001000 00000100 00000002 0000000000002000");
        let i = interpret(&u, u.len(), true);
        assert!(i.errors.is_empty(), "{:?}", i.errors);
        let t = i.rdmap.unwrap().terminate.unwrap();
        assert_eq!((t.layer, t.etype, t.code), (2, 0, 2));
        assert_eq!(t.error, "LLP: CRC error");
        let d = t.ddp_copy.unwrap();
        assert_eq!(d.segment_length, Some(34));
        assert_eq!(d.rdmap, "Send");
        assert_eq!(t.rdmap_copy.unwrap().size, 0x100);
    }
}
