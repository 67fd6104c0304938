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
//!
//! [`TerminateView`] is the checked view over a Terminate payload,
//! [`TerminateMessage`] the value parsed from and emitted into it
//! ([`crate::wire`]'s convention).

use super::error::ProtocolError;
use super::opcode::{Opcode, QN_TERMINATE};
use super::read_request::READ_REQUEST_LEN;
use crate::ddp::{header::header_len, SegmentHeader, UntaggedHeader, UNTAGGED_HEADER_LEN};
use crate::wire::{be16, Truncated};

/// Octets of the control word (layer, type, code, flags) that every
/// Terminate carries.
pub const TERMINATE_CONTROL_LEN: usize = 4;

/// The largest Terminate payload: control word, length, untagged DDP
/// header, Read Request header.
pub const TERMINATE_MAX_LEN: usize = 4 + 2 + UNTAGGED_HEADER_LEN + READ_REQUEST_LEN;

/// The largest Terminate ULPDU: its DDP header and the largest payload.
pub const TERMINATE_ULPDU_MAX_LEN: usize = UNTAGGED_HEADER_LEN + TERMINATE_MAX_LEN;

/// The DDP header a Terminate message travels under (RFC 5040 §4.8):
/// untagged, a single segment (L set), queue 2, MO 0, message `msn` of
/// that queue.
//= rfc5040#4.8
//# The Terminate Message MUST be sent as a single DDP Segment on untagged queue 2, with the
//# Last flag set.
//= rfc5040#4.8
//# The Terminate Control field names the layer, the error type and the error code, and says (M,
//# D, R) whether the DDP Segment Length, the DDP header and the RDMAP header of the segment in
//# error follow.
pub fn terminate_header(msn: u32) -> UntaggedHeader {
    UntaggedHeader {
        last: true,
        rsvd_ulp: Opcode::Terminate.control(),
        rsvd_ulp_word: 0,
        qn: QN_TERMINATE,
        msn,
        mo: 0,
    }
}

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

/// A read-only view of a Terminate payload: the control word, checked
/// present, and the header copies its flags announce, where they are
/// complete.
#[derive(Debug, Clone, Copy)]
pub struct TerminateView<T: AsRef<[u8]>> {
    octets: T,
}

impl<T: AsRef<[u8]>> TerminateView<T> {
    /// Wraps `octets` without checking them: fields past the end read as
    /// zero, copies past the end as absent.
    pub const fn new_unchecked(octets: T) -> Self {
        Self { octets }
    }

    /// Wraps `octets` after checking they hold the control word.
    pub fn new_checked(octets: T) -> Result<Self, Truncated> {
        Truncated::check(octets.as_ref(), TERMINATE_CONTROL_LEN)?;
        Ok(Self { octets })
    }

    /// The underlying octets.
    pub fn into_inner(self) -> T {
        self.octets
    }

    fn b(&self) -> &[u8] {
        self.octets.as_ref()
    }

    fn octet(&self, at: usize) -> u8 {
        self.b().get(at).copied().unwrap_or(0)
    }

    /// Layer (4 bits).
    pub fn layer(&self) -> u8 {
        self.octet(0) >> 4
    }

    /// Error type (4 bits).
    pub fn etype(&self) -> u8 {
        self.octet(0) & 0x0f
    }

    /// Error code.
    pub fn code(&self) -> u8 {
        self.octet(1)
    }

    /// M: the DDP Segment Length is valid.
    pub fn m_flag(&self) -> bool {
        self.octet(2) & M_FLAG != 0
    }

    /// D: a DDP header copy follows.
    pub fn d_flag(&self) -> bool {
        self.octet(2) & D_FLAG != 0
    }

    /// R: a Read Request copy follows.
    pub fn r_flag(&self) -> bool {
        self.octet(2) & R_FLAG != 0
    }

    /// The DDP Segment Length field (read whether or not M is set).
    pub fn segment_length(&self) -> u16 {
        be16(self.b(), TERMINATE_CONTROL_LEN)
    }

    /// The DDP header copy, if D is set and the whole header (14 or 18
    /// octets, as its T flag says) is there.
    pub fn ddp_header(&self) -> Option<&[u8]> {
        if !self.d_flag() {
            return None;
        }
        let h = self.b().get(TERMINATE_CONTROL_LEN + 2..)?;
        h.get(..header_len(*h.first()?))
    }

    /// The Read Request copy, if R is set and its 28 octets follow the DDP
    /// copy (or the control word, without D).
    pub fn read_request(&self) -> Option<&[u8]> {
        if !self.r_flag() {
            return None;
        }
        let at = if self.d_flag() {
            TERMINATE_CONTROL_LEN + 2 + self.ddp_header()?.len()
        } else {
            TERMINATE_CONTROL_LEN
        };
        self.b().get(at..at + READ_REQUEST_LEN)
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

    /// Parses a view. Only the control word is required: header copies
    /// that are announced but missing or cut short are left out rather
    /// than failing, since the error itself is what the receiver must
    /// report.
    pub fn parse<T: AsRef<[u8]>>(view: &TerminateView<T>) -> Result<Self, Truncated> {
        Truncated::check(view.b(), TERMINATE_CONTROL_LEN)?;
        let segment_length = view.m_flag().then(|| view.segment_length());
        Ok(Self {
            layer: view.layer(),
            etype: view.etype(),
            code: view.code(),
            ddp: view
                .ddp_header()
                .and_then(|h| TerminatedDdp::new(segment_length, h)),
            rdmap: view.read_request().and_then(|r| r.try_into().ok()),
        })
    }

    /// Parses the Terminate payload `octets`.
    pub fn parse_bytes(octets: &[u8]) -> Result<Self, Truncated> {
        Self::parse(&TerminateView::new_checked(octets)?)
    }

    /// Octets [`TerminateMessage::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        TERMINATE_CONTROL_LEN
            + self.ddp.as_ref().map_or(0, |d| 2 + d.header().len())
            + self.rdmap.map_or(0, |r| r.len())
    }

    /// Writes the payload at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let len = self.buffer_len();
        let out = Truncated::room(buf, len)?;
        out[0] = (self.layer & 0x0f) << 4 | (self.etype & 0x0f);
        out[1] = self.code;
        let mut flags = 0;
        let mut n = TERMINATE_CONTROL_LEN;
        if let Some(d) = &self.ddp {
            flags |= D_FLAG;
            if d.segment_length.is_some() {
                flags |= M_FLAG;
            }
            out[n..n + 2].copy_from_slice(&d.segment_length.unwrap_or(0).to_be_bytes());
            let h = d.header();
            out[n + 2..n + 2 + h.len()].copy_from_slice(h);
            n += 2 + h.len();
        }
        if let Some(r) = &self.rdmap {
            flags |= R_FLAG;
            out[n..n + READ_REQUEST_LEN].copy_from_slice(r);
        }
        out[2] = flags;
        out[3] = 0;
        Ok(len)
    }

    /// The payload, in a buffer that always fits it, with its length.
    pub fn to_bytes(&self) -> ([u8; TERMINATE_MAX_LEN], usize) {
        let mut out = [0u8; TERMINATE_MAX_LEN];
        // At most TERMINATE_MAX_LEN: cannot fail.
        let len = self.emit(&mut out).unwrap_or(0);
        (out, len)
    }

    /// The whole ULPDU carrying this message as message `msn` of the
    /// Terminate queue: DDP header, then payload, with its length. For a
    /// sender with no queue pair running yet: an MPA initiator that fails
    /// after a valid Reply (RFC 6581).
    pub fn to_ulpdu(&self, msn: u32) -> ([u8; TERMINATE_ULPDU_MAX_LEN], usize) {
        let mut out = [0u8; TERMINATE_ULPDU_MAX_LEN];
        let (header, payload) = out.split_at_mut(UNTAGGED_HEADER_LEN);
        // An untagged header fills its part, the payload fits the rest:
        // neither can fail.
        let _ = SegmentHeader::Untagged(terminate_header(msn)).emit(header);
        let len = self.emit(payload).unwrap_or(0);
        (out, UNTAGGED_HEADER_LEN + len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::{DdpError, UntaggedError};

    #[test]
    //= rfc5040#4.8
    //= type=test
    //# The Terminate Message MUST be sent as a single DDP Segment on untagged queue 2, with the
    //# Last flag set.
    //= rfc5040#4.8
    //= type=test
    //# The Terminate Control field names the layer, the error type and the error code, and says
    //# (M, D, R) whether the DDP Segment Length, the DDP header and the RDMAP header of the
    //# segment in error follow.
    fn untagged_error_with_ddp_copy() {
        let mut t = TerminateMessage::new(ProtocolError::Ddp(DdpError::Untagged(
            UntaggedError::NoBuffer,
        )));
        let hdr = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        t.ddp = TerminatedDdp::new(Some(34), &hdr);
        let (out, n) = t.to_bytes();
        assert_eq!(n, 24);
        assert_eq!(t.buffer_len(), 24);
        assert_eq!(&out[..6], &[0x12, 0x02, 0xc0, 0x00, 0x00, 0x22]);
        assert_eq!(&out[6..24], &hdr);
        assert_eq!(TerminateMessage::parse_bytes(&out[..n]), Ok(t));
        assert!(t.emit(&mut [0u8; 23]).is_err());
    }

    #[test]
    fn whole_ulpdu() {
        let t = TerminateMessage::new(ProtocolError::Llp(
            crate::framing::LlpErrorCode::InsufficientIrd,
        ));
        let (out, n) = t.to_ulpdu(1);
        assert_eq!(
            out[..n],
            [0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x20, 0x06, 0, 0]
        );
    }

    #[test]
    //= rfc5040#4.8
    //= type=test
    //# The Terminate Control field names the layer, the error type and the error code, and says
    //# (M, D, R) whether the DDP Segment Length, the DDP header and the RDMAP header of the
    //# segment in error follow.
    fn read_request_copy_and_truncation() {
        let mut t =
            TerminateMessage::new(ProtocolError::Llp(crate::framing::LlpErrorCode::CrcError));
        assert_eq!(t.error().unwrap().layer(), 2);
        let hdr = [0x41u8, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
        t.ddp = TerminatedDdp::new(Some(46), &hdr);
        t.rdmap = Some([7; 28]);
        let (out, n) = t.to_bytes();
        assert_eq!(n, TERMINATE_MAX_LEN);
        assert_eq!(out[2], 0xe0);
        assert_eq!(TerminateMessage::parse_bytes(&out), Ok(t));
        // Cut short: the copies are dropped, the error stays.
        for cut in 4..n {
            let p = TerminateMessage::parse_bytes(&out[..cut]).unwrap();
            assert_eq!((p.layer, p.etype, p.code), (2, 0, 2));
            assert_eq!(p.ddp.is_some(), cut >= 24);
            assert_eq!(p.rdmap.is_some(), cut == n);
        }
        assert!(TerminateMessage::parse_bytes(&out[..3]).is_err());
        // A Read Request copy without a DDP copy sits right after the
        // control word.
        let mut r =
            TerminateMessage::new(ProtocolError::Llp(crate::framing::LlpErrorCode::CrcError));
        r.rdmap = Some([9; 28]);
        let (out, n) = r.to_bytes();
        assert_eq!(n, 32);
        let view = TerminateView::new_checked(&out[..n]).unwrap();
        assert!(view.r_flag() && !view.d_flag() && view.ddp_header().is_none());
        assert_eq!(view.read_request(), Some(&[9u8; 28][..]));
    }
}
