//! What a [`Connection`](super::Connection) reports to its runtime: what
//! to act on, and what is worth knowing (for a log).

use crate::mpa::startup::RtrType;
use crate::rdmap::{Completion, QpState, TerminateMessage};

use super::error::ConnectionError;

/// Something the runtime must act on, or may want to know, from
/// [`Connection::poll_event`](super::Connection::poll_event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A work request finished. Send-queue requests are reported only once
    /// every octet of their segments has been written (RFC 5041 §5.4: the
    /// LLP has them), so a completed source buffer is never still being
    /// read; receives are reported as soon as they are delivered.
    Completion(Completion),
    /// Everything is written and the stream is closing gracefully: close
    /// the write side of the TCP connection (send FIN) and keep reading
    /// until the peer closes its side.
    SendFin,
    /// Close the TCP connection both ways now: after a Terminate, on an
    /// error or an abortive close, or once neither direction can move
    /// anything more. Nothing more is read after it.
    Close,
    /// The connection has ended for good: nothing more will be sent or
    /// received, and every request outstanding has completed. Only the
    /// flushed completions of work posted afterwards may follow.
    Finished,
    /// A step in the connection's life, for a log: nothing to act on.
    Notice(Notice),
}

/// A step in a connection's life worth a line in a log: each happens at
/// most a few times per connection, never per message, and none after
/// [`Event::Finished`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// The queue pair moved to this state.
    StateChanged(QpState),
    /// The zero-length RTR message of peer-to-peer mode (RFC 6581) was
    /// written: the initiator's first FPDU, which lets the responder send.
    RtrSent(RtrType),
    /// The responder received and validated its first PDU: RFC 5044
    /// §7.1.2 rule 4 no longer holds back what it sends.
    HoldLifted,
    /// This end queued a Terminate message (it goes out as the stream's
    /// last PDU, then the connection closes).
    TerminateSent(TerminateMessage),
    /// The peer's Terminate message arrived: the connection closes,
    /// unanswered.
    TerminateReceived(TerminateMessage),
    /// The peer closed its half of the TCP connection (a read returned the
    /// end of the stream).
    PeerFin,
    /// The connection stopped moving data, for this reason (the first
    /// one, as [`Connection::error`](super::Connection::error) keeps it).
    Stopped(ConnectionError),
    /// A graceful close was not answered within the disconnect timeout:
    /// the connection closes abortively.
    DisconnectTimedOut,
}
