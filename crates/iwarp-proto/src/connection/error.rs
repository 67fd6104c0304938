//! Why a connection stopped moving data, as typed values.

use std::io;

use crate::framing::FramingError;
use crate::rdmap::{ProtocolError, TerminateMessage};

/// Why a connection stopped moving data: the first reason, kept for the
/// user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The peer terminated the stream with this Terminate message.
    #[error("peer terminated the stream: {0}")]
    TerminateReceived(TerminateMessage),
    /// This end found an error and terminated the stream.
    #[error("terminated the stream: {0}")]
    TerminateSent(ProtocolError),
    /// The framing layer (MPA or IFT) found the received stream invalid.
    #[error("{0}")]
    Framing(FramingError),
    /// The TCP connection failed, timed out or ended in the middle of a
    /// PDU.
    #[error("connection lost: {0}")]
    Lost(LossReason),
    /// The peer closed the connection.
    #[error("peer closed the connection")]
    PeerClosed,
    /// This end closed or dropped the connection.
    #[error("connection closed locally")]
    LocallyClosed,
}

/// Why the TCP connection under a stream was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LossReason {
    /// The peer closed its half of the connection in the middle of a PDU.
    #[error("ended inside an FPDU")]
    EndedInsidePdu,
    /// Nothing arrived within the idle timeout.
    #[error("nothing received within the idle timeout")]
    IdleTimeout,
    /// A region a partly written segment was being sent from was
    /// invalidated: the rest of the segment can never be sent.
    #[error("source region invalidated during transmission")]
    SourceInvalidated,
    /// A socket operation failed.
    #[error("{}", describe(*kind, *os_code))]
    Io {
        /// What kind of failure.
        kind: io::ErrorKind,
        /// The operating system's error number, when it gave one.
        os_code: Option<i32>,
    },
}

impl LossReason {
    /// The loss an I/O error means.
    pub fn from_io(e: &io::Error) -> Self {
        Self::Io {
            kind: e.kind(),
            os_code: e.raw_os_error(),
        }
    }
}

impl From<&io::Error> for LossReason {
    fn from(e: &io::Error) -> Self {
        Self::from_io(e)
    }
}

/// The operating system's words for an error, as `io::Error` shows it.
fn describe(kind: io::ErrorKind, os_code: Option<i32>) -> String {
    match os_code {
        Some(code) => io::Error::from_raw_os_error(code).to_string(),
        None => io::Error::from(kind).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_loss_reads_as_the_io_error_did() {
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        let loss = LossReason::from_io(&reset);
        assert_eq!(
            loss,
            LossReason::Io {
                kind: io::ErrorKind::ConnectionReset,
                os_code: None
            }
        );
        assert_eq!(loss.to_string(), reset.to_string());
        let os = io::Error::from_raw_os_error(104);
        assert_eq!(LossReason::from(&os).to_string(), os.to_string());
        assert_eq!(
            ConnectionError::Lost(LossReason::EndedInsidePdu).to_string(),
            "connection lost: ended inside an FPDU"
        );
    }
}
