//! The Terminate message payload (RFC 5040 §4.8).
//!
//! ```text
//!  Layer(4) EType(4) | Error Code(8) | M D R (3) reserved(13)
//!  [DDP Segment Length (16) + terminated DDP header (14 or 18)]  if D
//!  [terminated RDMAP header: a Read Request's 28 octets]          if R
//! ```
//!
//! M says the DDP Segment Length is valid. It is the ULPDU length, exactly
//! as MPA carried it in front of the DDP header, so the copy reads like the
//! start of the offending FPDU (Intel irdma copies those octets verbatim).

use super::error::ProtocolError;
use super::read_request::READ_REQUEST_LEN;
use crate::ddp::{header::header_len, UNTAGGED_HEADER_LEN};

/// The largest Terminate payload: control word, length, untagged DDP
/// header, Read Request header.
pub const TERMINATE_MAX_LEN: usize = 4 + 2 + UNTAGGED_HEADER_LEN + READ_REQUEST_LEN;

const M_FLAG: u8 = 0x80;
const D_FLAG: u8 = 0x40;
const R_FLAG: u8 = 0x20;

/// The copy of the DDP header of the segment that caused the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminatedDdp {
    /// The DDP segment length (M flag set) if known.
    pub segment_length: Option<u16>,
    header: [u8; UNTAGGED_HEADER_LEN],
    header_len: u8,
}

impl TerminatedDdp {
    /// A copy of `header`: the first 14 (tagged) or 18 (untagged) octets
    /// of the segment, as the T flag of its first octet says. `None` if
    /// fewer octets are given.
    pub fn new(segment_length: Option<u16>, header: &[u8]) -> Option<Self> {
        let len = header_len(*header.first()?);
        let src = header.get(..len)?;
        let mut h = [0u8; UNTAGGED_HEADER_LEN];
        h[..len].copy_from_slice(src);
        Some(Self {
            segment_length,
            header: h,
            header_len: len as u8,
        })
    }

    /// The copied DDP header octets.
    pub fn header(&self) -> &[u8] {
        &self.header[..self.header_len as usize]
    }
}

/// A Terminate message's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminateMessage {
    /// Layer (4 bits).
    pub layer: u8,
    /// Error type (4 bits).
    pub etype: u8,
    /// Error code.
    pub code: u8,
    /// The terminated DDP header, with its segment length (D, M).
    pub ddp: Option<TerminatedDdp>,
    /// The terminated RDMAP header: the Read Request (R).
    pub rdmap: Option<[u8; READ_REQUEST_LEN]>,
}

impl TerminateMessage {
    /// A message naming `error`, with no header copies.
    pub fn new(error: ProtocolError) -> Self {
        Self {
            layer: error.layer(),
            etype: error.etype(),
            code: error.code(),
            ddp: None,
            rdmap: None,
        }
    }

    /// The error it names, if this implementation knows the code.
    pub fn error(&self) -> Option<ProtocolError> {
        ProtocolError::from_parts(self.layer, self.etype, self.code)
    }

    /// Writes the payload into `out`, returns its length.
    pub fn emit(&self, out: &mut [u8; TERMINATE_MAX_LEN]) -> usize {
        out[0] = (self.layer & 0x0f) << 4 | (self.etype & 0x0f);
        out[1] = self.code;
        let mut flags = 0;
        let mut n = 4;
        if let Some(d) = &self.ddp {
            flags |= D_FLAG;
            if d.segment_length.is_some() {
                flags |= M_FLAG;
            }
            out[4..6].copy_from_slice(&d.segment_length.unwrap_or(0).to_be_bytes());
            let h = d.header();
            out[6..6 + h.len()].copy_from_slice(h);
            n = 6 + h.len();
        }
        if let Some(r) = &self.rdmap {
            flags |= R_FLAG;
            out[n..n + READ_REQUEST_LEN].copy_from_slice(r);
            n += READ_REQUEST_LEN;
        }
        out[2] = flags;
        out[3] = 0;
        n
    }

    /// Parses a Terminate payload. Only the first four octets are
    /// required: header copies that are announced but missing or cut
    /// short are left out rather than failing, since the error itself is
    /// what the receiver must report.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let c = b.get(..4)?;
        let flags = c[2];
        let mut msg = Self {
            layer: c[0] >> 4,
            etype: c[0] & 0x0f,
            code: c[1],
            ddp: None,
            rdmap: None,
        };
        let mut rest = &b[4..];
        if flags & D_FLAG != 0 {
            let len = rest.get(..2).map(|l| u16::from_be_bytes([l[0], l[1]]));
            let seg_len = len.filter(|_| flags & M_FLAG != 0);
            msg.ddp = rest.get(2..).and_then(|h| TerminatedDdp::new(seg_len, h));
            let used = msg.ddp.map_or(rest.len(), |d| 2 + d.header().len());
            rest = &rest[used.min(rest.len())..];
        }
        if flags & R_FLAG != 0 {
            msg.rdmap = rest.get(..READ_REQUEST_LEN).and_then(|r| r.try_into().ok());
        }
        Some(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::{DdpError, UntaggedError};

    #[test]
    fn untagged_error_with_ddp_copy() {
        let mut t = TerminateMessage::new(ProtocolError::Ddp(DdpError::Untagged(
            UntaggedError::NoBuffer,
        )));
        let hdr = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        t.ddp = TerminatedDdp::new(Some(34), &hdr);
        let mut out = [0u8; TERMINATE_MAX_LEN];
        let n = t.emit(&mut out);
        assert_eq!(n, 24);
        assert_eq!(&out[..6], &[0x12, 0x02, 0xc0, 0x00, 0x00, 0x22]);
        assert_eq!(&out[6..24], &hdr);
        assert_eq!(TerminateMessage::parse(&out[..n]), Some(t));
    }

    #[test]
    fn read_request_copy_and_truncation() {
        let mut t =
            TerminateMessage::new(ProtocolError::Llp(crate::framing::LlpErrorCode::CrcError));
        assert_eq!(t.error().unwrap().layer(), 2);
        let hdr = [0x41u8, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
        t.ddp = TerminatedDdp::new(Some(46), &hdr);
        t.rdmap = Some([7; 28]);
        let mut out = [0u8; TERMINATE_MAX_LEN];
        let n = t.emit(&mut out);
        assert_eq!(n, TERMINATE_MAX_LEN);
        assert_eq!(out[2], 0xe0);
        assert_eq!(TerminateMessage::parse(&out), Some(t));
        // Cut short: the copies are dropped, the error stays.
        for cut in 4..n {
            let p = TerminateMessage::parse(&out[..cut]).unwrap();
            assert_eq!((p.layer, p.etype, p.code), (2, 0, 2));
        }
        assert_eq!(TerminateMessage::parse(&out[..3]), None);
    }
}
