//! The `tracing` of a connection in full operation: one span per
//! connection, with both addresses, this end's role and the framing,
//! which every event of the connection names as its parent (whichever
//! task or user call emits it); and the events themselves, with the
//! target `iwarp::conn`.
//!
//! Levels: the settled connection (logged by the connection manager) and
//! its end, with why and its counters, at info, as are Terminates, sent or
//! received, with their layer, type and code in words (`rdmap::pretty`),
//! and the errors that stop a stream (a lost connection, a framing error);
//! the steps between (queue pair states, the RTR of peer-to-peer mode,
//! rule 4's hold lifted, FINs, closes, aborts, the error that stopped the
//! stream) at debug; each completion at trace, the only event per message.
//! Nothing is formatted unless a subscriber wants the event, and the span
//! is never entered: with the log off, an event costs a check of the
//! global level filter.

use std::net::SocketAddr;

use tracing::Span;

use iwarp_proto::connection::{ConnectionError, ConnectionStats, Notice};
use iwarp_proto::rdmap::Completion;

use crate::info::{ConnectionInfo, FramingInfo};

/// The span of a connection from `local` to `peer`:
/// `conn{local=… peer=… role=… framing=…}`.
pub(super) fn span(local: SocketAddr, peer: SocketAddr, info: &ConnectionInfo) -> Span {
    let framing = match &info.framing {
        FramingInfo::Mpa(m) => match m.revision.wire() {
            0 => "MPAv0",
            1 => "MPAv1",
            _ => "MPAv2",
        },
        FramingInfo::ImmediateStart => "MPA-immediate",
        _ => "IFT",
    };
    tracing::info_span!(
        target: "iwarp::conn",
        "conn",
        %local,
        %peer,
        role = ?info.role,
        framing
    )
}

/// A step in the connection's life.
pub(super) fn notice(span: &Span, notice: &Notice) {
    match notice {
        Notice::TerminateSent(m) => {
            tracing::info!(target: "iwarp::conn", parent: span, "sent Terminate: {m}");
        }
        Notice::TerminateReceived(m) => {
            tracing::info!(target: "iwarp::conn", parent: span, "received Terminate: {m}");
        }
        Notice::StateChanged(s) => {
            tracing::debug!(target: "iwarp::conn", parent: span, "queue pair {s:?}");
        }
        Notice::RtrSent(rtr) => tracing::debug!(
            target: "iwarp::conn",
            parent: span,
            "sent the RTR of peer-to-peer mode, a zero-length {rtr:?}"
        ),
        Notice::HoldLifted => tracing::debug!(
            target: "iwarp::conn",
            parent: span,
            "first PDU received and valid: the responder may send"
        ),
        Notice::PeerFin => {
            tracing::debug!(target: "iwarp::conn", parent: span, "peer closed its side (FIN)");
        }
        // A close is a step; a lost connection or a bad stream is an error
        // (a Terminate has its own event above).
        Notice::Stopped(e @ (ConnectionError::Lost(_) | ConnectionError::Framing(_))) => {
            tracing::info!(target: "iwarp::conn", parent: span, "error: {e}");
        }
        Notice::Stopped(e) => {
            tracing::debug!(target: "iwarp::conn", parent: span, "stopped: {e}");
        }
        Notice::DisconnectTimedOut => tracing::debug!(
            target: "iwarp::conn",
            parent: span,
            "graceful close not answered within the disconnect timeout: aborting"
        ),
        other => tracing::debug!(target: "iwarp::conn", parent: span, "{other:?}"),
    }
}

/// Everything is written and the stream closes gracefully.
pub(super) fn send_fin(span: &Span) {
    tracing::debug!(target: "iwarp::conn", parent: span, "sending FIN");
}

/// The TCP connection closes both ways.
pub(super) fn close(span: &Span) {
    tracing::debug!(target: "iwarp::conn", parent: span, "closing both ways");
}

/// This end starts a graceful close.
pub(super) fn disconnect(span: &Span) {
    tracing::debug!(target: "iwarp::conn", parent: span, "closing gracefully");
}

/// Every user handle is gone while the connection still runs.
pub(super) fn abandoned(span: &Span) {
    tracing::debug!(
        target: "iwarp::conn",
        parent: span,
        "every handle dropped: aborting"
    );
}

/// The connection has ended: why, and what it carried.
pub(super) fn finished(span: &Span, error: Option<&ConnectionError>, stats: &ConnectionStats) {
    match error {
        Some(e) => tracing::info!(target: "iwarp::conn", parent: span, "finished ({e}): {stats}"),
        None => tracing::info!(target: "iwarp::conn", parent: span, "finished: {stats}"),
    }
}

/// A completion handed to its queue or waiter: per message, so at trace.
#[inline]
pub(super) fn completion(span: &Span, c: &Completion) {
    tracing::trace!(
        target: "iwarp::conn",
        parent: span,
        wr_id = c.wr_id,
        "{:?} {:?}, {} octets",
        c.opcode,
        c.status,
        c.byte_len
    );
}
