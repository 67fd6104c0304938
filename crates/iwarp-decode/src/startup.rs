//! The start of a connection: MPA Request/Reply frames and IFT Adaption
//! Indications, recognised, described, and settled into framing.
//!
//! Frames are parsed by `iwarp-proto` ([`StartupFrameRepr::parse_bytes`],
//! [`StartupFrame`], [`Indication::parse`]) and settled by the stack's own
//! rules: an MPA pair by [`observe`], an IFT pair by [`settle`], so the
//! framing the decoder follows is the one the stack would have agreed to.

use iwarp_proto::ift::indication::{check_magic, INDICATION_LEN};
use iwarp_proto::ift::{settle, CrcDemand, IftConfig, Indication, RxCrc, RxParams};
use iwarp_proto::mpa::startup::{
    observe, EnhancedData, FrameError, FrameKind, Observed, Revision, StartupFrame,
    StartupFrameRepr, HEADER_LEN, KEY_LEN, REPLY_KEY, REQUEST_KEY,
};

use crate::event::{IndicationInfo, StartupFrameInfo, StartupKind};

/// What the first octets of a direction are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Too few octets to tell.
    Unknown,
    /// An MPA Request or Reply key.
    Mpa,
    /// The IFT magic number.
    Ift,
    /// Neither: FPDUs (or not iWARP at all).
    Neither,
}

/// Recognises the start of a direction from its first octets.
pub fn opening(first: &[u8]) -> Opening {
    let is_prefix = |key: &[u8]| {
        let n = first.len().min(key.len());
        first[..n] == key[..n]
    };
    if first.len() >= KEY_LEN && (first[..KEY_LEN] == REQUEST_KEY || first[..KEY_LEN] == REPLY_KEY)
    {
        return Opening::Mpa;
    }
    if first.len() >= 4 && check_magic(first).is_ok() {
        return Opening::Ift;
    }
    let ift_prefix = check_magic(first).is_ok();
    if first.len() < KEY_LEN && (is_prefix(&REQUEST_KEY) || is_prefix(&REPLY_KEY) || ift_prefix) {
        Opening::Unknown
    } else {
        Opening::Neither
    }
}

/// What an MPA frame settles, when it is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpaFrame {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M.
    pub markers: bool,
    /// C.
    pub crc: bool,
    /// R (Reply).
    pub rejected: bool,
    /// Rev.
    pub revision: Revision,
    /// IRD/ORD, revision 2 enhanced.
    pub enhanced: Option<EnhancedData>,
}

/// The startup a direction sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A valid MPA frame.
    Mpa(MpaFrame),
    /// A valid IFT indication.
    Ift(Indication),
    /// An invalid frame or indication: the peer would close.
    Invalid,
}

/// Parses the MPA frame at the start of `bytes`. `None` while more octets
/// are needed; otherwise the report, the frame's length, and what it
/// settles (`None` if it is invalid; the length is then what was read).
pub fn mpa_frame(bytes: &[u8], offset: u64) -> Option<(StartupFrameInfo, usize, Option<MpaFrame>)> {
    match StartupFrameRepr::parse_bytes(bytes) {
        Err(FrameError::Truncated { .. }) => None,
        Ok((repr, len)) => {
            let view = StartupFrame::new_checked(bytes).ok()?;
            let info = frame_info(&view, offset, Some(&repr), None);
            let frame = MpaFrame {
                kind: repr.kind,
                markers: repr.markers,
                crc: repr.crc,
                rejected: repr.rejected,
                revision: repr.revision,
                enhanced: repr.enhanced,
            };
            Some((info, len, Some(frame)))
        }
        Err(e) => {
            // The header is in and wrong. A view needs a whole frame: read
            // the header through one padded to the longest frame, then
            // describe it with the private data that was captured.
            let head = bytes.get(..HEADER_LEN)?;
            let probe = StartupFrame::new_checked(padded(head, usize::from(u16::MAX))).ok()?;
            let pd_length = usize::from(probe.pd_length());
            let body = bytes.get(HEADER_LEN..).unwrap_or(&[]);
            let body = &body[..body.len().min(pd_length)];
            let mut full = head.to_vec();
            full.extend_from_slice(body);
            let view = StartupFrame::new_checked(padded(&full, pd_length)).ok()?;
            let mut info = frame_info(&view, offset, None, Some(e));
            info.private_data = body.to_vec();
            Some((info, full.len(), None))
        }
    }
}

/// `octets` followed by zeros up to a whole frame of `pd_length` octets of
/// private data.
fn padded(octets: &[u8], pd_length: usize) -> Vec<u8> {
    let mut v = octets.to_vec();
    v.resize((HEADER_LEN + pd_length).max(octets.len()), 0);
    v
}

fn frame_info<T: AsRef<[u8]>>(
    view: &StartupFrame<T>,
    offset: u64,
    repr: Option<&StartupFrameRepr<'_>>,
    error: Option<FrameError>,
) -> StartupFrameInfo {
    let enhanced = repr.and_then(|r| r.enhanced);
    StartupFrameInfo {
        offset,
        kind: match view.kind() {
            Some(FrameKind::Request) => StartupKind::Request,
            Some(FrameKind::Reply) => StartupKind::Reply,
            None => StartupKind::Unknown,
        },
        flags: view.flags(),
        markers: view.markers(),
        crc: view.crc(),
        rejected: view.rejected(),
        enhanced_flag: view.enhanced_flag(),
        revision: view.revision(),
        pd_length: view.pd_length(),
        enhanced,
        private_data: repr
            .map_or_else(|| view.private_data().to_vec(), |r| r.private_data.to_vec()),
        error,
    }
}

/// Parses an IFT indication at the start of `bytes`; `None` while fewer
/// than 64 octets are in.
pub fn indication(bytes: &[u8], offset: u64) -> Option<(IndicationInfo, Option<Indication>)> {
    let octets = bytes.get(..INDICATION_LEN)?;
    Some(match Indication::parse_bytes(octets) {
        Ok(ind) => (
            IndicationInfo {
                offset,
                fields: Some(ind),
                error: None,
            },
            Some(ind),
        ),
        Err(e) => (
            IndicationInfo {
                offset,
                fields: None,
                error: Some(e),
            },
            None,
        ),
    })
}

impl MpaFrame {
    /// The frame as the protocol crate's repr (without its private data,
    /// which settles nothing).
    fn repr(&self) -> StartupFrameRepr<'static> {
        StartupFrameRepr {
            kind: self.kind,
            markers: self.markers,
            crc: self.crc,
            rejected: self.rejected,
            revision: self.revision,
            enhanced: self.enhanced,
            private_data: &[],
        }
    }
}

/// What a Request and its Reply settle, by the stack's own rules
/// ([`observe`]).
pub fn mpa_settle(request: &MpaFrame, reply: &MpaFrame) -> Observed {
    observe(&request.repr(), &reply.repr())
}

/// The receive parameters for frames that `sender`'s end sends and
/// `receiver`'s end receives, as the receiving end of the stack would
/// settle them; `check_crc` false leaves CRC fields unchecked.
pub fn ift_settle(
    sender: &Indication,
    receiver: &Indication,
    check_crc: bool,
) -> Result<RxParams, iwarp_proto::ift::NegotiationError> {
    // The receiving end's configuration, as its indication states it,
    // accepting whatever the sender chose (the decoder judges nothing).
    let mut config = IftConfig::new(receiver.vtag);
    config.rdma = receiver.rdma;
    config.header_crc = receiver.header_crc;
    config.payload_crc = receiver.payload_crc;
    config.check_header_crc = !receiver.ignore_header_crc;
    config.check_payload_crc = !receiver.ignore_payload_crc;
    config.peer_header_crc = CrcDemand::Any;
    config.peer_payload_crc = CrcDemand::Any;
    config.permit_speculative_placement = receiver.speculative_placement;
    config.send_markers = receiver.send_markers;
    config.receive_markers = receiver.receive_markers;
    let mut rx = settle(&config, sender)?.rx;
    // The decoder checks every CRC that is on the wire, unless told not to,
    // even one the receiver said it ignores: a wrong one is still news.
    let checked = |crc: RxCrc| match crc {
        RxCrc::Absent => RxCrc::Absent,
        _ if check_crc => RxCrc::Checked,
        _ => RxCrc::Ignored,
    };
    rx.header_crc = checked(rx.header_crc);
    rx.payload_crc = checked(rx.payload_crc);
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings() {
        assert_eq!(opening(b""), Opening::Unknown);
        assert_eq!(opening(b"MPA ID R"), Opening::Unknown);
        assert_eq!(opening(b"MPA ID Req Frame"), Opening::Mpa);
        assert_eq!(opening(b"MPA ID Rep Frame\x00"), Opening::Mpa);
        assert_eq!(opening(b"MPA ID Rex Frame"), Opening::Neither);
        assert_eq!(opening(b"RDD"), Opening::Unknown);
        assert_eq!(opening(b"RDDP"), Opening::Ift);
        assert_eq!(opening(&[0, 0x22, 0x41, 0x43]), Opening::Neither);
    }

    #[test]
    fn invalid_frames_are_described() {
        // Revision 3 (siw closes).
        let mut f = REQUEST_KEY.to_vec();
        f.extend_from_slice(&[0x00, 0x03, 0x00, 0x00]);
        let (info, len, frame) = mpa_frame(&f, 0).unwrap();
        assert_eq!((info.revision, len, frame), (3, 20, None));
        assert!(info.error.is_some());
        // Revision 1 with 600 octets of private data, 2 of them captured.
        let mut f = REPLY_KEY.to_vec();
        f.extend_from_slice(&[0x40, 0x01, 0x02, 0x58, 0xaa, 0xbb]);
        let (info, len, _) = mpa_frame(&f, 0).unwrap();
        assert_eq!((info.pd_length, len, info.crc), (600, 22, true));
        assert_eq!(info.private_data, [0xaa, 0xbb]);
        // Cut short: wait.
        assert!(mpa_frame(&f[..19], 0).is_none());
    }
}
