//! The summary printed at the end: connections, PDUs per type, octets per
//! direction, errors found.
//!
//! It is counted from the very events that were printed ([`Tally`]), so it
//! always agrees with the lines above it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Serialize;

use super::event::{CrcStatus, Event, Level};
use super::tcp::ReassemblyStats;

/// Counters of one direction of a connection.
#[derive(Debug, Clone, Default, Serialize)]
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
    /// Errors found (PDUs with errors, error notes, gaps).
    pub errors: u64,
}

/// One connection.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectionSummary {
    /// Its number.
    pub id: usize,
    /// The client (SYN sender, or first sender).
    pub client: SocketAddr,
    /// The server.
    pub server: SocketAddr,
    /// Its framing, in words.
    pub framing: String,
    /// Client to server, then server to client.
    pub directions: [DirectionSummary; 2],
}

/// Errors by kind.
#[derive(Debug, Clone, Default, Serialize)]
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
}

impl ErrorCounts {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.crc + self.header + self.framing + self.gaps
    }
}

/// The whole summary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Frames read from the capture.
    pub frames: u64,
    /// Frames that held a TCP segment.
    pub tcp_segments: u64,
    /// Frames skipped, by reason.
    pub skipped: BTreeMap<&'static str, u64>,
    /// iWARP connections decoded.
    pub connections: Vec<ConnectionSummary>,
    /// TCP connections without an MPA/IFT startup, not decoded.
    pub not_decoded: u64,
    /// PDUs by message type (startup frames included).
    pub pdus: BTreeMap<String, u64>,
    /// Errors found in the traffic.
    pub errors: ErrorCounts,
    /// Why the capture could not be read to its end, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_error: Option<String>,
}

/// Counts events as they are reported.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Per connection id: per direction counters.
    pub directions: BTreeMap<usize, [DirectionSummary; 2]>,
    /// PDUs by type.
    pub pdus: BTreeMap<String, u64>,
    /// Errors by kind.
    pub errors: ErrorCounts,
}

impl Tally {
    /// Counts one event of connection `id`, direction `dir`.
    pub fn observe(&mut self, id: usize, dir: usize, event: &Event) {
        let d = &mut self.directions.entry(id).or_default()[dir % 2];
        match event {
            Event::MpaStartup(f) => {
                d.startup += 1;
                let name = match f.kind {
                    "request" => "MPA Request",
                    "reply" => "MPA Reply",
                    _ => "MPA startup (invalid)",
                };
                *self.pdus.entry(name.into()).or_default() += 1;
                if f.error.is_some() {
                    d.errors += 1;
                    self.errors.framing += 1;
                }
            }
            Event::IftIndication(i) => {
                d.startup += 1;
                *self
                    .pdus
                    .entry("IFT Adaption Indication".into())
                    .or_default() += 1;
                if i.error.is_some() {
                    d.errors += 1;
                    self.errors.framing += 1;
                }
            }
            Event::Pdu(p) => {
                d.pdus += 1;
                let kind = match (&p.rdmap, &p.ddp) {
                    (Some(r), _) => r.name.to_string(),
                    (None, Some(super::event::DdpInfo::Tagged { .. })) => "DDP tagged".into(),
                    (None, Some(super::event::DdpInfo::Untagged { .. })) => "DDP untagged".into(),
                    (None, None) => "malformed".into(),
                };
                *self.pdus.entry(kind).or_default() += 1;
                let bad_crc = p.crc.status == CrcStatus::Bad
                    || p.header_crc
                        .as_ref()
                        .is_some_and(|c| c.status == CrcStatus::Bad);
                let header_errors = p.errors.len() > usize::from(bad_crc);
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
            Event::Gap(_) => {
                d.errors += 1;
                self.errors.gaps += 1;
            }
            Event::Note(n) if n.level == Level::Error => {
                d.errors += 1;
                self.errors.framing += 1;
            }
            Event::Framing(_) | Event::Resync(_) | Event::Note(_) => {}
        }
    }
}
