//! `tracing` events of a connection's startup, in the words of `iwarp_proto`'s
//! pretty-printers: each MPA Request and Reply or IFT Adaption Indication sent and
//! received (`mpa::startup::pretty`, `ift::pretty`), the Terminate a failed initiator owes
//! its peer (`rdmap::pretty`, `ddp::pretty`), the failure, and what the connection settled.
//!
//! Frames are logged at debug level, the settled connection at info; every event carries
//! the peer's address and has the connection manager's target, `iwarp::cm`. Nothing is
//! copied or formatted unless the subscriber wants the event.

use std::fmt;
use std::net::SocketAddr;

use tracing::Level;

use iwarp_proto::ift::indication::INDICATION_LEN;
use iwarp_proto::ift::Indication;
use iwarp_proto::mpa::startup::StartupFrameRepr;
use iwarp_proto::rdmap::pretty::Pdu;

use crate::info::{ConnectionInfo, FramingInfo};

/// One message of a startup as the log shows it: an MPA frame, an IFT indication, an FPDU,
/// or only its length (a last streaming-mode message, say).
pub(crate) struct Message<'a>(pub(crate) &'a [u8]);

impl fmt::Display for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let octets = self.0;
        if let Ok((frame, len)) = StartupFrameRepr::parse_bytes(octets) {
            if len == octets.len() {
                return write!(f, "MPA {frame}");
            }
        }
        if octets.len() == INDICATION_LEN {
            if let Ok(indication) = Indication::parse_bytes(octets) {
                return write!(f, "IFT {indication}");
            }
        }
        if let Some(pdu) = lone_fpdu(octets) {
            return write!(f, "FPDU {pdu}");
        }
        write!(f, "{} octets", octets.len())
    }
}

/// The DDP segment of `octets` when they are one FPDU, as the Terminate of a failed
/// initiator is: ULPDU_Length, the ULPDU, pad and CRC. With markers, the stream of FPDUs
/// opens with a marker whose FPDUPTR is 0 (RFC 5044 §5.1), four zero octets, which no
/// ULPDU_Length starts with.
fn lone_fpdu(octets: &[u8]) -> Option<Pdu> {
    let fpdu = octets.strip_prefix(&[0u8; 4][..]).unwrap_or(octets);
    let len = usize::from(u16::from_be_bytes([*fpdu.first()?, *fpdu.get(1)?]));
    let ulpdu = fpdu.get(2..2 + len)?;
    Pdu::parse(ulpdu, len).ok()
}

/// The connection is in full operation with these parameters: an event of
/// the connection's `span`, which names the peer.
pub(crate) fn established(span: &tracing::Span, info: &ConnectionInfo) {
    tracing::info!(target: "iwarp::cm", parent: span, "established: {}", Settled(info));
}

fn display_peer(peer: Option<SocketAddr>) -> tracing::field::DisplayValue<String> {
    tracing::field::display(peer.map_or_else(|| "?".into(), |p| p.to_string()))
}

/// What a startup settled, in one line.
struct Settled<'a>(&'a ConnectionInfo);

impl fmt::Display for Settled<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.0;
        let on = |b: bool| if b { "on" } else { "off" };
        write!(f, "{:?}, ", info.role)?;
        match &info.framing {
            FramingInfo::Mpa(m) => write!(f, "MPA revision {}", m.revision.wire())?,
            FramingInfo::ImmediateStart => f.write_str("MPA immediate start")?,
            _ => f.write_str("IFT")?,
        }
        let framing = info.framing_params();
        write!(
            f,
            ", CRC {}, markers {} sent {} received",
            on(framing.crc),
            on(framing.send_markers),
            on(framing.receive_markers)
        )?;
        if let Some(m) = info.mpa() {
            if let Some(io) = m.ird_ord {
                write!(f, ", IRD {} ORD {}", io.ird, io.ord)?;
            }
            if let Some(rtr) = m.rtr {
                write!(f, ", RTR {rtr:?}")?;
            }
        }
        write!(f, ", EMSS {}, MULPDU {}", info.emss, info.mulpdu)?;
        let private_data = info.peer_private_data();
        if !private_data.is_empty() {
            write!(
                f,
                ", {} octets of private data from the peer",
                private_data.len()
            )?;
        }
        Ok(())
    }
}

/// The log of one startup exchange with a peer: the messages sent, the peer's message as
/// the startup machine takes it in (logged once whole, or with the failure when it never
/// is; collected only while debug events are wanted), the failure.
#[derive(Debug)]
pub(crate) struct StartupLog {
    peer: Option<SocketAddr>,
    octets: Vec<u8>,
    logged: bool,
}

impl StartupLog {
    /// Nothing exchanged yet with `peer`.
    pub(crate) fn new(peer: Option<SocketAddr>) -> Self {
        Self {
            peer,
            octets: Vec::new(),
            logged: !tracing::enabled!(target: "iwarp::cm", Level::DEBUG),
        }
    }

    /// A message sent to the peer.
    pub(crate) fn sent(&self, octets: &[u8]) {
        tracing::debug!(
            target: "iwarp::cm",
            peer = display_peer(self.peer),
            "sent {}",
            Message(octets)
        );
    }

    /// The machine took `octets` of the peer's message.
    pub(crate) fn took(&mut self, octets: &[u8]) {
        if self.logged || octets.is_empty() {
            return;
        }
        self.octets.extend_from_slice(octets);
        if whole(&self.octets) {
            tracing::debug!(
                target: "iwarp::cm",
                peer = display_peer(self.peer),
                "received {}",
                Message(&self.octets)
            );
            self.logged = true;
            self.octets = Vec::new();
        }
    }

    /// The startup failed: logs it, with any part of a message it had received.
    pub(crate) fn failed(&self, error: &dyn fmt::Display) {
        if !self.logged && !self.octets.is_empty() {
            tracing::debug!(
                target: "iwarp::cm",
                peer = display_peer(self.peer),
                "received {} octets of a startup message that never completed",
                self.octets.len()
            );
        }
        tracing::debug!(
            target: "iwarp::cm",
            peer = display_peer(self.peer),
            "startup failed: {error}"
        );
    }
}

/// Whether `octets` hold a whole startup message: an MPA frame (its header gives its
/// length) or a 64-octet IFT indication.
fn whole(octets: &[u8]) -> bool {
    match StartupFrameRepr::parse_bytes(octets) {
        Ok((_, len)) => len == octets.len(),
        Err(_) => octets.len() >= INDICATION_LEN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_proto::framing::LlpErrorCode;
    use iwarp_proto::rdmap::{ProtocolError, TerminateMessage};

    #[test]
    fn messages_in_words() {
        // rping's MPA Request over siw: revision 2, enhanced, IRD 1 ORD 1, no CRC.
        let mut request = b"MPA ID Req Frame".to_vec();
        request.extend_from_slice(&[0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01]);
        assert_eq!(
            Message(&request).to_string(),
            "MPA Request rev 2 enhanced IRD 1 ORD 1, M 0 C 0"
        );
        assert!(whole(&request));
        assert!(!whole(&request[..20]));
        assert_eq!(Message(&request[..20]).to_string(), "20 octets");
        assert_eq!(Message(b"hello").to_string(), "5 octets");
    }

    #[test]
    fn a_terminate_fpdu_in_words() {
        let (ulpdu, len) =
            TerminateMessage::new(ProtocolError::Llp(LlpErrorCode::InsufficientIrd)).to_ulpdu(1);
        let mut fpdu = (len as u16).to_be_bytes().to_vec();
        fpdu.extend_from_slice(&ulpdu[..len]);
        fpdu.extend_from_slice(&[0; 6]);
        let text = Message(&fpdu).to_string();
        assert!(text.starts_with("FPDU Terminate"), "{text}");
        // After the marker that opens a stream with markers.
        let mut marked = vec![0; 4];
        marked.extend_from_slice(&fpdu);
        assert_eq!(Message(&marked).to_string(), text);
    }
}
