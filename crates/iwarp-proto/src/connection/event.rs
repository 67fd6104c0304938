//! What a [`Connection`](super::Connection) reports to its runtime.

use crate::rdmap::Completion;

/// Something the runtime must act on, from
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
}
