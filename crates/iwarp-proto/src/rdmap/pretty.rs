//! RDMAP messages in words: the one-line summary of a DDP segment carrying
//! RDMAP ([`Pdu`]'s `Display`) and its field tree ([`Pdu::tree`]), with
//! `Display` for the opcode, the Read Request and the Terminate message,
//! in the style of smoltcp's `wire::pretty_print`. `iwarp decode` prints
//! these, and the stack's tracing can log a segment the same way.

use core::fmt;

use super::opcode::{control_opcode, control_version, Opcode};
use super::read_request::ReadRequest;
use super::terminate::TerminateMessage;
use crate::ddp::{Segment, SegmentHeader, TaggedHeader, UntaggedHeader};
use crate::memory::STag;
use crate::wire::Truncated;

impl fmt::Display for Opcode {
    /// The message's name, as RFC 5040 §4.3 names it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::RdmaWrite => "RDMA Write",
            Self::ReadRequest => "RDMA Read Request",
            Self::ReadResponse => "RDMA Read Response",
            Self::Send => "Send",
            Self::SendInvalidate => "Send with Invalidate",
            Self::SendSolicited => "Send with SE",
            Self::SendSolicitedInvalidate => "Send with SE and Invalidate",
            Self::Terminate => "Terminate",
        })
    }
}

/// The name of an RDMAP control octet's opcode, or `reserved opcode`.
fn opcode_name(control: u8) -> &'static str {
    match Opcode::from_bits(control_opcode(control)) {
        Some(Opcode::RdmaWrite) => "RDMA Write",
        Some(Opcode::ReadRequest) => "RDMA Read Request",
        Some(Opcode::ReadResponse) => "RDMA Read Response",
        Some(Opcode::Send) => "Send",
        Some(Opcode::SendInvalidate) => "Send with Invalidate",
        Some(Opcode::SendSolicited) => "Send with SE",
        Some(Opcode::SendSolicitedInvalidate) => "Send with SE and Invalidate",
        Some(Opcode::Terminate) => "Terminate",
        None => "reserved opcode",
    }
}

impl fmt::Display for ReadRequest {
    /// `32 octets from STag 0xe54e5800 TO 0x562e4da7b530 into STag
    /// 0x00000301 TO 0x7f3a1c000000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} octets from STag {} TO {:#x} into STag {} TO {:#x}",
            self.size, self.source_stag, self.source_to, self.sink_stag, self.sink_to
        )
    }
}

/// The name of a Terminate's layer number (RFC 5040 §4.8).
pub fn layer_name(layer: u8) -> &'static str {
    match layer {
        0 => "RDMAP",
        1 => "DDP",
        2 => "LLP",
        _ => "unknown layer",
    }
}

/// The error a Terminate names, in words: its own wording when the code is
/// known, else the layer and "unknown error".
struct TerminateError<'a>(&'a TerminateMessage);

impl fmt::Display for TerminateError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.error() {
            Some(e) => write!(f, "{e}"),
            None => write!(f, "{}: unknown error", layer_name(self.0.layer)),
        }
    }
}

impl fmt::Display for TerminateMessage {
    /// `LLP: CRC error [layer 2 type 0 code 0x02]; offending Send (QN 0 MSN
    /// 2 MO 0 last, ULPDU length 34)`, then the Read Request copy if any.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [layer {} type {} code {:#04x}]",
            TerminateError(self),
            self.layer,
            self.etype,
            self.code
        )?;
        if let Some(d) = &self.ddp {
            if let Ok(s) = Segment::new_checked(d.header()) {
                write!(
                    f,
                    "; offending {} ({}",
                    opcode_name(s.rsvd_ulp()),
                    fields(&s)
                )?;
                if let Some(len) = d.segment_length {
                    write!(f, ", ULPDU length {len}")?;
                }
                f.write_str(")")?;
            }
        }
        if let Some(r) = self
            .rdmap
            .as_ref()
            .and_then(|r| ReadRequest::parse_bytes(r).ok())
        {
            write!(f, "; offending Read Request: {r}")?;
        }
        Ok(())
    }
}

/// The header fields of a segment as DV 1 lays them out, whatever its DV:
/// a summary shows them even when [`SegmentHeader::parse`] refuses the
/// version.
fn fields<T: AsRef<[u8]>>(s: &Segment<T>) -> SegmentHeader {
    if s.tagged() {
        SegmentHeader::Tagged(TaggedHeader {
            last: s.last(),
            rsvd_ulp: s.rsvd_ulp(),
            stag: s.stag(),
            to: s.tagged_offset(),
        })
    } else {
        SegmentHeader::Untagged(UntaggedHeader {
            last: s.last(),
            rsvd_ulp: s.rsvd_ulp(),
            rsvd_ulp_word: s.rsvd_ulp_word(),
            qn: s.qn(),
            msn: s.msn(),
            mo: s.mo(),
        })
    }
}

/// A DDP segment carrying RDMAP, as much of it as a summary needs: the
/// header, the payload length, and the RDMAP header in the payload (a Read
/// Request's or a Terminate's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pdu {
    /// The DDP header.
    pub header: SegmentHeader,
    /// DV as received.
    pub dv: u8,
    /// DDP payload octets (the ULPDU less its header).
    pub payload_len: usize,
    /// The Read Request, when the opcode says one and the payload holds it.
    pub read_request: Option<ReadRequest>,
    /// The Terminate message, when the opcode says one and the payload
    /// holds its control word.
    pub terminate: Option<TerminateMessage>,
}

impl Pdu {
    /// Reads a ULPDU of `ulpdu_len` octets from its first octets `head`
    /// (the whole ULPDU, or at least its header and the longest RDMAP
    /// header, [`super::TERMINATE_MAX_LEN`] octets).
    pub fn parse(head: &[u8], ulpdu_len: usize) -> Result<Self, Truncated> {
        let segment = Segment::new_checked(head)?;
        let header = fields(&segment);
        let payload = segment.payload();
        let opcode = Opcode::from_bits(control_opcode(segment.rsvd_ulp()));
        Ok(Self {
            header,
            dv: segment.version(),
            payload_len: ulpdu_len.saturating_sub(segment.header_len()),
            read_request: (opcode == Some(Opcode::ReadRequest))
                .then(|| ReadRequest::parse_bytes(payload).ok())
                .flatten(),
            terminate: (opcode == Some(Opcode::Terminate))
                .then(|| TerminateMessage::parse_bytes(payload).ok())
                .flatten(),
        })
    }

    /// The RDMAP opcode, if it is a defined one.
    pub fn opcode(&self) -> Option<Opcode> {
        Opcode::from_bits(control_opcode(self.header.rsvd_ulp()))
    }

    /// RV: the RDMAP version.
    pub fn rdmap_version(&self) -> u8 {
        control_version(self.header.rsvd_ulp())
    }

    /// The STag a Send with Invalidate names.
    pub fn invalidate_stag(&self) -> Option<STag> {
        match (&self.header, self.opcode()) {
            (
                SegmentHeader::Untagged(h),
                Some(Opcode::SendInvalidate | Opcode::SendSolicitedInvalidate),
            ) => Some(STag(h.rsvd_ulp_word)),
            _ => None,
        }
    }

    /// Whether the message asks for a solicited event.
    pub fn solicited(&self) -> bool {
        matches!(
            self.opcode(),
            Some(Opcode::SendSolicited | Opcode::SendSolicitedInvalidate)
        )
    }

    /// Every field, one line each (newline-separated, not indented).
    pub fn tree(&self) -> PduTree<'_> {
        PduTree(self)
    }
}

impl fmt::Display for Pdu {
    /// `Send QN 0 MSN 1 MO 0 last len 16`, `RDMA Read Request MSN 1: 32
    /// octets from ...`, `Terminate LLP: CRC error [...]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(opcode_name(self.header.rsvd_ulp()))?;
        if let Some(stag) = self.invalidate_stag() {
            write!(f, " (invalidate {stag})")?;
        }
        if let Some(r) = &self.read_request {
            if let SegmentHeader::Untagged(h) = &self.header {
                write!(f, " MSN {}:", h.msn)?;
            }
            return write!(f, " {r}");
        }
        if let Some(t) = &self.terminate {
            return write!(f, " {t}");
        }
        write!(f, " {} len {}", self.header, self.payload_len)
    }
}

/// The field tree of a [`Pdu`]: see [`Pdu::tree`].
#[derive(Debug, Clone, Copy)]
pub struct PduTree<'a>(&'a Pdu);

impl fmt::Display for PduTree<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0;
        writeln!(f, "{}", p.header.tree(p.dv, p.payload_len))?;
        write!(
            f,
            "RDMAP: RV {}, opcode {} ({})",
            p.rdmap_version(),
            control_opcode(p.header.rsvd_ulp()),
            opcode_name(p.header.rsvd_ulp())
        )?;
        if p.solicited() {
            f.write_str(", solicited event")?;
        }
        if let Some(stag) = p.invalidate_stag() {
            write!(f, ", invalidate STag {stag}")?;
        }
        if let Some(r) = &p.read_request {
            write!(
                f,
                "\nRead Request: sink STag {} TO {:#x}, size {}, source STag {} TO {:#x}",
                r.sink_stag, r.sink_to, r.size, r.source_stag, r.source_to
            )?;
        }
        if let Some(t) = &p.terminate {
            write!(
                f,
                "\nTerminate: layer {} ({}), type {}, code {:#04x}: {}",
                t.layer,
                layer_name(t.layer),
                t.etype,
                t.code,
                TerminateError(t)
            )?;
            if let Some(d) = &t.ddp {
                if let Ok(s) = Segment::new_checked(d.header()) {
                    write!(
                        f,
                        "\n  DDP copy: {} {}",
                        opcode_name(s.rsvd_ulp()),
                        fields(&s)
                    )?;
                    if let Some(len) = d.segment_length {
                        write!(f, ", segment length {len}")?;
                    }
                    f.write_str(" [")?;
                    for b in d.header() {
                        write!(f, "{b:02x}")?;
                    }
                    f.write_str("]")?;
                }
            }
            if let Some(r) = t
                .rdmap
                .as_ref()
                .and_then(|r| ReadRequest::parse_bytes(r).ok())
            {
                write!(f, "\n  RDMAP copy: Read Request {r}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hx(s: &str) -> Vec<u8> {
        let d: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        d.chunks(2)
            .map(|p| u8::from_str_radix(core::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn send_read_request_terminate() {
        let send =
            hx("4143 00000000 00000000 00000001 00000000 00005637f5a0d530 3fce2900 00000020");
        let p = Pdu::parse(&send, send.len()).unwrap();
        assert_eq!(p.to_string(), "Send QN 0 MSN 1 MO 0 last len 16");
        assert_eq!(
            p.tree().to_string(),
            "DDP: untagged, L 1, DV 1, QN 0, MSN 1, MO 0, 16 payload octets\nRDMAP: RV 1, opcode 3 (Send)"
        );
        let rr = hx("4141 00000000 00000001 00000001 00000000 \
                     00000301 00007f3a1c000000 00000020 e54e5800 0000562e4da7b530");
        let p = Pdu::parse(&rr, rr.len()).unwrap();
        assert_eq!(
            p.to_string(),
            "RDMA Read Request MSN 1: 32 octets from STag 0xe54e5800 TO 0x562e4da7b530 into STag 0x00000301 TO 0x7f3a1c000000"
        );
        let term = hx("4147 00000000 00000002 00000001 00000000 \
             2002e000 0022 4143 00000000 00000000 00000002 00000000 \
             00000001 0000000000001000 00000100 00000002 0000000000002000");
        let p = Pdu::parse(&term, term.len()).unwrap();
        assert_eq!(
            p.to_string(),
            "Terminate LLP: CRC error [layer 2 type 0 code 0x02]; offending Send (QN 0 MSN 2 MO 0 last, ULPDU length 34); \
             offending Read Request: 256 octets from STag 0x00000002 TO 0x2000 into STag 0x00000001 TO 0x1000"
        );
        assert!(p.tree().to_string().contains(
            "\n  DDP copy: Send QN 0 MSN 2 MO 0 last, segment length 34 [414300000000000000000000000200000000]"
        ));
        let inv = hx("4144 00009abc 00000000 00000001 00000000 646f6e65");
        let p = Pdu::parse(&inv, inv.len()).unwrap();
        assert_eq!(
            p.to_string(),
            "Send with Invalidate (invalidate 0x00009abc) QN 0 MSN 1 MO 0 last len 4"
        );
    }

    #[test]
    fn short_and_odd_headers_never_panic() {
        for len in 0..60 {
            for fill in [0u8, 0x41, 0x47, 0xc1, 0xff] {
                let mut u = vec![fill; len];
                if let Some(b) = u.get_mut(1) {
                    *b = 0x47;
                }
                if let Ok(p) = Pdu::parse(&u, len + 3) {
                    let _ = (p.to_string(), p.tree().to_string());
                }
            }
        }
    }
}
