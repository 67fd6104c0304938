//! A connection's counters, as `rdma statistic` shows a kernel device's:
//! octets and PDUs each way, framing errors, Terminates, messages by type,
//! direct reads.
//!
//! Nothing here is counted per octet or per PDU on the data path: octets
//! and PDUs are the framing layers' own stream positions, read when asked
//! for; messages are counted by the queue pair where each one ends; errors
//! and Terminates where they already stop the stream.

use core::fmt;

use crate::framing::FramingError;
use crate::ift::IftRxError;
use crate::mpa::MpaError;
use crate::rdmap::MessageCounters;

/// What a [`Connection`](super::Connection) has carried and met since it
/// entered full operation (the startup frames are not counted), from
/// [`Connection::stats`](super::Connection::stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ConnectionStats {
    /// Octets written to the TCP connection: PDUs with their framing
    /// (length, markers, pad, CRC).
    pub octets_sent: u64,
    /// Octets of the stream the framing layer has taken, framing
    /// included: an FPDU a verifying receiver holds until it is whole is
    /// counted once it is.
    pub octets_received: u64,
    /// PDUs (MPA FPDUs or IFT frames) whose every octet was written.
    pub pdus_sent: u64,
    /// PDUs received whole and valid (CRC and markers checked).
    pub pdus_received: u64,
    /// Received PDUs whose CRC did not match (MPA's CRC, IFT's header or
    /// payload CRC). Any framing error stops the stream, so each of these
    /// three is 0 or 1 per connection.
    pub crc_errors: u64,
    /// Markers that disagreed with the PDU lengths.
    pub marker_errors: u64,
    /// Other framing errors (IFT: a VTag not ours, a header too long).
    pub other_framing_errors: u64,
    /// Terminate messages sent (handed to the framing layer).
    pub terminates_sent: u64,
    /// Terminate messages received.
    pub terminates_received: u64,
    /// Reads the runtime made straight into a region
    /// ([`Connection::read_direct`](super::Connection::read_direct)).
    pub direct_reads: u64,
    /// Payload octets those reads placed, with no copy.
    pub direct_octets: u64,
    /// Messages sent and received, by type.
    pub messages: MessageCounters,
}

impl ConnectionStats {
    /// Counts the framing error that stopped the stream. By its kind, not
    /// by the code its Terminate names: IFT reports a wrong VTag with the
    /// marker code.
    pub(super) fn framing_error(&mut self, e: &FramingError) {
        match e {
            FramingError::Mpa(MpaError::Crc { .. })
            | FramingError::Ift(IftRxError::HeaderCrc { .. } | IftRxError::PayloadCrc { .. }) => {
                self.crc_errors += 1;
            }
            FramingError::Mpa(MpaError::Marker { .. })
            | FramingError::Ift(IftRxError::Marker { .. }) => self.marker_errors += 1,
            _ => self.other_framing_errors += 1,
        }
    }
}

impl fmt::Display for ConnectionStats {
    /// One line for a log: `sent 8262 octets in 4 PDUs, received 36 octets
    /// in 2 PDUs; sent/received: Sends 1/1, RDMA Writes 1/0`, then the
    /// Terminates, errors and direct reads there were. Message types
    /// neither end used are left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent {} octets in {} PDUs, received {} octets in {} PDUs",
            self.octets_sent, self.pdus_sent, self.octets_received, self.pdus_received
        )?;
        let m = &self.messages;
        let kinds = [
            ("Sends", m.sends_sent, m.sends_received),
            ("RDMA Writes", m.writes_sent, m.writes_received),
            (
                "Read Requests",
                m.read_requests_sent,
                m.read_requests_received,
            ),
            (
                "Read Responses",
                m.read_responses_sent,
                m.read_responses_received,
            ),
            ("Terminates", self.terminates_sent, self.terminates_received),
        ];
        let mut first = true;
        for (name, sent, received) in kinds {
            if sent == 0 && received == 0 {
                continue;
            }
            let lead = if first { "; sent/received: " } else { ", " };
            write!(f, "{lead}{name} {sent}/{received}")?;
            first = false;
        }
        let errors = [
            ("CRC errors", self.crc_errors),
            ("marker errors", self.marker_errors),
            ("other framing errors", self.other_framing_errors),
        ];
        for (name, n) in errors {
            if n > 0 {
                write!(f, "; {name} {n}")?;
            }
        }
        if self.direct_reads > 0 {
            write!(
                f,
                "; {} octets placed by {} direct reads",
                self.direct_octets, self.direct_reads
            )?;
        }
        Ok(())
    }
}
