//! The summary at the end: connections, PDUs per type, octets per
//! direction, errors found, and each connection's operations.
//!
//! It is counted from the very events that were reported ([`Tally`]), so it
//! always agrees with them.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;

use crate::event::{Event, MessageKind, StartupKind};
use crate::note::Level;
use crate::ops::OperationSummary;
use crate::tcp::ReassemblyStats;

/// Counters of one direction of a connection.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DirectionSummary {
    /// Sender.
    pub src: Option<SocketAddr>,
    /// Receiver.
    pub dst: Option<SocketAddr>,
    /// TCP reassembly counters (octets, retransmissions, gaps).
    pub tcp: ReassemblyStats,
    /// Startup frames or indications.
    pub startup: u64,
    /// Framed PDUs.
    pub pdus: u64,
    /// PDUs found whole ahead of a hole (the placement view).
    pub ahead: u64,
    /// Of those, the ones whose payload a receiver could place at once.
    pub placeable: u64,
    /// Their payload octets.
    pub placeable_octets: u64,
    /// Errors found (PDUs with errors, error notes, gaps, findings).
    pub errors: u64,
}

/// What a connection's startup settled, for the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "kind", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum ConnectionFraming {
    /// MPA, settled from the Request and Reply.
    Mpa {
        /// The revision in use.
        revision: u8,
        /// CRC both ways.
        crc: bool,
        /// Markers in what the initiator receives.
        markers_to_initiator: bool,
        /// Markers in what the responder receives.
        markers_to_responder: bool,
        /// The options overrode CRC checking or markers.
        overridden: bool,
    },
    /// The Reply rejected the connection.
    MpaRejected {
        /// The Reply's revision.
        revision: u8,
    },
    /// IFT, settled from the two Adaption Indications.
    Ift {
        /// RDMA mode (else DDP mode).
        rdma: bool,
    },
    /// No startup seen; MPA assumed because the options named it.
    Assumed,
    /// A startup was seen but never settled.
    NotSettled,
}

impl fmt::Display for ConnectionFraming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Mpa {
                revision,
                crc,
                markers_to_initiator,
                markers_to_responder,
                overridden,
            } => {
                let markers = match (markers_to_responder, markers_to_initiator) {
                    (false, false) => "no markers",
                    (true, true) => "markers both ways",
                    (true, false) => "markers to the responder only",
                    (false, true) => "markers to the initiator only",
                };
                let crc = if crc { "on" } else { "off" };
                write!(f, "MPA rev {revision}, CRC {crc}, {markers}")?;
                if overridden {
                    f.write_str(" (overridden on the command line)")?;
                }
                Ok(())
            }
            Self::MpaRejected { revision } => write!(f, "MPA rev {revision}, rejected"),
            Self::Ift { rdma } => write!(f, "IFT, {} mode", if rdma { "RDMA" } else { "DDP" }),
            Self::Assumed => f.write_str("MPA assumed (no startup seen)"),
            Self::NotSettled => f.write_str("startup not settled"),
        }
    }
}

/// One connection.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ConnectionSummary {
    /// Its number.
    pub id: usize,
    /// The client (SYN sender, or first sender).
    pub client: SocketAddr,
    /// The server.
    pub server: SocketAddr,
    /// Its framing.
    pub framing: ConnectionFraming,
    /// Client to server, then server to client.
    pub directions: [DirectionSummary; 2],
    /// Its RDMA operations.
    pub operations: OperationSummary,
}

/// Errors by kind.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ErrorCounts {
    /// PDUs whose CRC was wrong.
    pub crc: u64,
    /// PDUs with a malformed or inconsistent DDP/RDMAP header.
    pub header: u64,
    /// Framing errors and other errors reported as notes (marker
    /// mismatches, invalid startups, framing lost).
    pub framing: u64,
    /// Holes in the capture.
    pub gaps: u64,
    /// Stateful checks that failed.
    pub findings: u64,
}

impl ErrorCounts {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.crc + self.header + self.framing + self.gaps + self.findings
    }
}

/// The whole summary.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Summary {
    /// Frames read from the capture.
    pub frames: u64,
    /// Frames that held a TCP segment.
    pub tcp_segments: u64,
    /// Frames skipped, by reason.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::display_map"))]
    pub skipped: BTreeMap<crate::packet::Skip, u64>,
    /// iWARP connections decoded.
    pub connections: Vec<ConnectionSummary>,
    /// TCP connections without an MPA/IFT startup, not decoded.
    pub not_decoded: u64,
    /// PDUs by message type (startup frames included), by name.
    pub pdus: BTreeMap<String, u64>,
    /// Errors found in the traffic.
    pub errors: ErrorCounts,
}

/// Counts events as they are reported.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Per connection id: per direction counters.
    pub directions: BTreeMap<usize, [DirectionSummary; 2]>,
    /// PDUs by type.
    pub pdus: HashMap<MessageKind, u64>,
    /// Errors by kind.
    pub errors: ErrorCounts,
}

impl Tally {
    /// The PDU counts by name, in order.
    pub fn pdus_by_name(&self) -> BTreeMap<String, u64> {
        self.pdus.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// Counts one event of connection `id`, direction `dir`.
    pub fn observe(&mut self, id: usize, dir: usize, event: &Event) {
        let d = &mut self.directions.entry(id).or_default()[dir % 2];
        match event {
            Event::MpaStartup(f) => {
                d.startup += 1;
                let kind = match (f.kind, &f.error) {
                    (_, Some(_)) | (StartupKind::Unknown, _) => MessageKind::MpaInvalid,
                    (StartupKind::Request, None) => MessageKind::MpaRequest,
                    (StartupKind::Reply, None) => MessageKind::MpaReply,
                };
                *self.pdus.entry(kind).or_default() += 1;
                if f.error.is_some() {
                    d.errors += 1;
                    self.errors.framing += 1;
                }
            }
            Event::IftIndication(i) => {
                d.startup += 1;
                *self.pdus.entry(MessageKind::IftIndication).or_default() += 1;
                if i.error.is_some() {
                    d.errors += 1;
                    self.errors.framing += 1;
                }
            }
            Event::Pdu(p) => {
                d.pdus += 1;
                *self.pdus.entry(p.message_kind()).or_default() += 1;
                let bad_crc = p.crc_bad();
                let header_errors = p.errors.iter().any(|e| !e.is_crc());
                if bad_crc {
                    self.errors.crc += 1;
                }
                if header_errors {
                    self.errors.header += 1;
                }
                if bad_crc || header_errors {
                    d.errors += 1;
                }
            }
            Event::Placeable(p) => {
                d.ahead += 1;
                if p.placeable {
                    d.placeable += 1;
                    d.placeable_octets += p.pdu.payload_len as u64;
                }
            }
            Event::Gap(_) => {
                d.errors += 1;
                self.errors.gaps += 1;
            }
            Event::Note(n) if n.level() == Level::Error => {
                d.errors += 1;
                self.errors.framing += 1;
            }
            Event::Finding(f) if f.level() == Level::Error => {
                d.errors += 1;
                self.errors.findings += 1;
            }
            Event::Framing(_)
            | Event::Resync(_)
            | Event::Note(_)
            | Event::Finding(_)
            | Event::Operation(_) => {}
        }
    }
}
