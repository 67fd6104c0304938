//! One iWARP connection in full operation, as a sans-IO state machine:
//! the framing both ways, the queue pair, and the rules of a connection's
//! life that neither the framing nor the queue pair knows.
//!
//! In the style of `quinn-proto`'s `Connection`, a [`Connection`] owns no
//! socket and reads no clock. Its runtime feeds it what happened and
//! carries out what it asks for:
//!
//! - received octets go to [`Connection::handle_input`] (or are read
//!   straight into their region through [`Connection::read_direct`]), the
//!   end of the stream to [`Connection::handle_eof`], a failed read to
//!   [`Connection::handle_read_error`];
//! - octets to send come from [`Connection::poll_transmit`], which lends
//!   them, payload borrowed from the registered regions, to one vectored
//!   write; the runtime says how many went with
//!   [`Connection::handle_written`] (or that the write failed);
//! - time comes in through [`Connection::handle_timeout`] at
//!   [`Connection::next_timeout`];
//! - completions, and what to do with the TCP connection (send FIN,
//!   close), come out of [`Connection::poll_event`].
//!
//! After anything that changes it (a `handle_*` call, a post, a close),
//! the runtime calls `poll_transmit` until it returns `None` or the socket
//! is full, then `poll_event` until it returns `None`.
//!
//! The rules it keeps:
//!
//! - **Rule 4** (RFC 5044 §7.1.2): an MPA responder sends nothing until it
//!   has received and validated a PDU. A Terminate it owes before then
//!   is never sent: the connection just closes.
//! - **Peer-to-peer mode** (RFC 6581): the initiator's first FPDU is the
//!   zero-length RTR message the startup chose; its completion is the
//!   connection's own, never reported.
//! - **Completions after the octets**: a send-queue request completes when
//!   the last octet of its last segment is written, so completions wait
//!   while a batch is partly written. Once the write side is closed, a
//!   partly written batch never will be: nothing waits any more, and a
//!   Send or Write the queue pair had completed reports a fatal error,
//!   since it may never have left.
//! - **Errors to Terminates**: a framing error (CRC, marker) or an error
//!   the queue pair finds sends a Terminate, then closes the connection;
//!   a received Terminate closes it; a lost connection flushes every
//!   request.
//! - **FIN and half close**: a graceful close sends FIN once every queued
//!   request is done, then waits for the peer's; the peer's FIN between
//!   PDUs ends the stream, inside a PDU it is a lost connection. When
//!   neither direction can move anything more, the connection closes both
//!   ways, so the peer is never left on a half-open connection.
//! - **Timeouts**: an idle timeout (nothing received) loses the
//!   connection; a graceful close the peer does not answer within the
//!   disconnect timeout becomes an abortive one.
//!
//! What it carried and met is counted in [`ConnectionStats`]
//! ([`Connection::stats`]), and the steps of its life (state changes,
//! Terminates, the RTR, FINs, why it stopped) come out as
//! [`Event::Notice`]s, for a runtime's log.

mod config;
mod error;
mod event;
mod receive;
mod stats;
mod transmit;

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::framing::{
    AnyDeframer, AnyFramer, Deframer, Framer, FramingError, LlpError, LlpErrorCode,
};
use crate::ift::{IftReceiver, IftTransmitter};
use crate::memory::{MemoryTable, STag};
use crate::mpa::startup::RtrType;
use crate::mpa::{FpduReceiver, FpduTransmitter};
use crate::rdmap::{
    Completion, CompletionOpcode, CompletionStatus, Event as QpEvent, PostError, QpState,
    QueuePair, SendFlags, Sge,
};

pub use config::{ConnectionConfig, FramingSetup};
pub use error::{ConnectionError, LossReason};
pub use event::{Event, Notice};
pub use receive::DirectRead;
pub use stats::ConnectionStats;
pub use transmit::{MAX_BATCH_OCTETS, MAX_BATCH_ULPDUS, MAX_IOV};

use transmit::TxHalf;

/// The work request id of the RTR message: the connection's own, so its
/// completion is never reported.
const RTR_WR_ID: u64 = u64::MAX;

/// One connection in full operation. See the module documentation.
#[derive(Debug)]
pub struct Connection {
    qp: QueuePair,
    tx: TxHalf,
    deframer: AnyDeframer,
    /// Input octets the last [`Connection::handle_input`] left for the
    /// next one (an incomplete FPDU of a verifying receiver).
    unconsumed: usize,
    /// Where a direct read of payload with markers lands before its runs
    /// are copied out (`receive.rs` says why); empty until markers are
    /// read directly.
    marked_scratch: Vec<u8>,
    /// The first reason the connection stopped.
    error: Option<ConnectionError>,
    /// After the pending octets: send FIN (graceful close) or close both
    /// ways (a Terminate was sent or received).
    fin_after_flush: bool,
    close_after_flush: bool,
    write_closed: bool,
    read_closed: bool,
    /// This end asked for the graceful close.
    closing_locally: bool,
    finished: bool,
    /// The RTR message sent, until it has completed.
    rtr_outstanding: Option<RtrType>,
    /// Send-queue completions waiting for a partly written batch.
    held: VecDeque<Completion>,
    events: VecDeque<Event>,
    idle_timeout: Option<Duration>,
    last_input: Instant,
    disconnect_timeout: Duration,
    disconnect_deadline: Option<Instant>,
    /// The counters kept as things happen; the rest of
    /// [`Connection::stats`] is read from the framing and the queue pair.
    stats: ConnectionStats,
}

impl Connection {
    /// A connection in full operation, as `config` says, resolving STags
    /// in `table`; `now` starts its idle timer. In peer-to-peer mode the
    /// RTR message is queued first; post any receives the peer may need at
    /// once (iWARP has no receiver-not-ready) before feeding any input.
    pub fn new(
        config: ConnectionConfig,
        table: Arc<MemoryTable>,
        now: Instant,
    ) -> Result<Self, PostError> {
        let (framer, deframer) = match config.framing {
            FramingSetup::Mpa { params, placement } => (
                AnyFramer::Mpa(FpduTransmitter::new(params)),
                AnyDeframer::Mpa(FpduReceiver::new(params).with_placement(placement)),
            ),
            FramingSetup::Ift(params) => (
                AnyFramer::Ift(IftTransmitter::new(params.tx)),
                AnyDeframer::Ift(IftReceiver::new(params.rx)),
            ),
        };
        let mut qp_config = config.queue_pair;
        qp_config.mulpdu = framer.mulpdu(config.emss);
        let mut qp = QueuePair::new(qp_config, table);
        if let Some(rtr) = config.rtr {
            post_rtr(&mut qp, rtr)?;
        }
        Ok(Self {
            qp,
            tx: TxHalf::new(framer, config.hold_until_received, config.emss),
            deframer,
            unconsumed: 0,
            marked_scratch: Vec::new(),
            error: None,
            fin_after_flush: false,
            close_after_flush: false,
            write_closed: false,
            read_closed: false,
            closing_locally: false,
            finished: false,
            rtr_outstanding: config.rtr,
            held: VecDeque::with_capacity(64),
            events: VecDeque::with_capacity(64),
            idle_timeout: config.idle_timeout,
            last_input: now,
            disconnect_timeout: config.disconnect_timeout,
            disconnect_deadline: None,
            stats: ConnectionStats::default(),
        })
    }

    /// The queue pair, to look at (state, MULPDU, counters).
    pub fn qp(&self) -> &QueuePair {
        &self.qp
    }

    /// The receive side of the framing, to plan reads by (what comes
    /// next, the payload layout, the sizes of recent PDUs).
    pub fn deframer(&self) -> &AnyDeframer {
        &self.deframer
    }

    /// The transmit side of the framing.
    pub fn framer(&self) -> &AnyFramer {
        &self.tx.framer
    }

    /// The queue pair's state.
    pub fn state(&self) -> QpState {
        self.qp.state()
    }

    /// Why the connection stopped moving data, once it has.
    pub fn error(&self) -> Option<&ConnectionError> {
        self.error.as_ref()
    }

    /// Whether the connection has ended for good ([`Event::Finished`]).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether the write side is closed: nothing more will be sent.
    pub fn is_write_closed(&self) -> bool {
        self.write_closed
    }

    /// Whether a batch is partly written: the runtime waits until the
    /// socket takes more.
    pub fn is_transmit_pending(&self) -> bool {
        self.tx.is_pending()
    }

    /// Whether rule 4 still holds everything back.
    pub fn is_held(&self) -> bool {
        self.tx.held
    }

    /// Octets written over the connection's life.
    pub fn octets_written(&self) -> u64 {
        self.tx.octets
    }

    /// What the connection has carried and met so far: octets and PDUs
    /// each way, framing errors, Terminates, messages by type.
    pub fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            octets_sent: self.tx.octets,
            octets_received: self.deframer.offset(),
            pdus_sent: self.tx.pdus_written(),
            pdus_received: self.deframer.pdus_received(),
            messages: self.qp.message_counters(),
            ..self.stats
        }
    }

    /// The EMSS the MULPDU follows now.
    pub fn emss(&self) -> usize {
        self.tx.emss
    }

    /// The idle timeout, if one runs. Only it reads the instants given to
    /// [`Connection::handle_input`] and [`Connection::read_direct`]:
    /// without one, any instant will do there, and a runtime need not
    /// read its clock for every read.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    // ------------------------------------------------------------ work

    /// Posts a receive buffer for an incoming Send.
    pub fn post_recv(&mut self, wr_id: u64, sge: Sge) -> Result<(), PostError> {
        self.posted(|qp| qp.post_recv(wr_id, sge))
    }

    /// Posts a Send of `sge`, with Solicited Event and/or Invalidate as
    /// `flags` say.
    pub fn post_send(&mut self, wr_id: u64, sge: Sge, flags: SendFlags) -> Result<(), PostError> {
        self.posted(|qp| qp.post_send(wr_id, sge, flags))
    }

    /// Posts an RDMA Write of `sge` to the peer's `stag` at `to`.
    pub fn rdma_write(
        &mut self,
        wr_id: u64,
        sge: Sge,
        stag: STag,
        to: u64,
    ) -> Result<(), PostError> {
        self.posted(|qp| qp.rdma_write(wr_id, sge, stag, to))
    }

    /// Posts an RDMA Read of `sge.len` octets from the peer's `stag` at
    /// `to` into `sge`.
    pub fn rdma_read(
        &mut self,
        wr_id: u64,
        sge: Sge,
        stag: STag,
        to: u64,
    ) -> Result<(), PostError> {
        self.posted(|qp| qp.rdma_read(wr_id, sge, stag, to))
    }

    fn posted(
        &mut self,
        post: impl FnOnce(&mut QueuePair) -> Result<(), PostError>,
    ) -> Result<(), PostError> {
        let r = post(&mut self.qp);
        self.settle();
        r
    }

    // ------------------------------------------------------ transmit

    /// Lends the next octets to send to `write`, as slices for one
    /// vectored write (framing octets and payload borrowed from the
    /// registered regions, which stay locked for the call), and returns
    /// what `write` returned; report the octets written with
    /// [`Connection::handle_written`]. `None` when there is nothing to
    /// send now: everything is written, rule 4 holds it back, or the write
    /// side is closed.
    pub fn poll_transmit<R>(&mut self, write: impl FnOnce(&[IoSlice<'_>]) -> R) -> Option<R> {
        if self.write_closed || (!self.tx.is_pending() && !self.tx.gather(&mut self.qp)) {
            self.settle();
            if self.read_closed {
                // Nothing more can be sent or received.
                self.finish();
            }
            return None;
        }
        match self.tx.write_with(write) {
            Ok(r) => Some(r),
            Err(_) => {
                // A source region invalidated in the middle of a partly
                // written batch: the stream cannot be completed.
                self.qp.abort_transmit();
                self.note(ConnectionError::Lost(LossReason::SourceInvalidated));
                self.close();
                self.settle();
                None
            }
        }
    }

    /// `n` octets of what [`Connection::poll_transmit`] lent were written.
    pub fn handle_written(&mut self, n: usize) {
        if self.tx.written(n) {
            self.settle();
        }
    }

    /// Writing to the TCP connection failed: the connection is lost and
    /// closed.
    pub fn handle_write_error(&mut self, reason: LossReason) {
        if self.write_closed {
            return;
        }
        self.note(ConnectionError::Lost(reason));
        self.qp.handle_llp_error(LlpErrorCode::ConnectionLost);
        self.close();
        self.settle();
    }

    /// Whether the MULPDU should follow a fresh reading of the EMSS: call
    /// [`Connection::handle_emss`] with it.
    pub fn wants_emss(&self) -> bool {
        self.tx.wants_emss()
    }

    /// The TCP connection's EMSS now: segments from now on follow it.
    pub fn handle_emss(&mut self, emss: usize) {
        self.tx.follow_emss(&mut self.qp, emss);
    }

    // ------------------------------------------------------ lifecycle

    /// Starts a graceful close (RFC 5041 §6.2.1): queued work finishes,
    /// nothing new is accepted, FIN goes out once everything is done, and
    /// the stream ends when the peer closes its side. If it has not within
    /// the disconnect timeout from `now`, the close becomes abortive.
    pub fn close_gracefully(&mut self, now: Instant) {
        self.closing_locally = true;
        if !self.finished && self.disconnect_deadline.is_none() {
            self.disconnect_deadline = Some(now + self.disconnect_timeout);
        }
        self.qp.close();
        self.settle();
    }

    /// Closes abortively (every user handle is gone, or a graceful close
    /// timed out): outstanding work is flushed and the TCP connection
    /// closed at once.
    pub fn abort(&mut self) {
        self.note(ConnectionError::LocallyClosed);
        self.qp.handle_llp_error(LlpErrorCode::ConnectionLost);
        self.close();
        self.settle();
    }

    /// When [`Connection::handle_timeout`] should next be called, if a
    /// timer runs.
    pub fn next_timeout(&self) -> Option<Instant> {
        if self.finished {
            return None;
        }
        let idle = match self.idle_timeout {
            Some(idle) if !self.read_closed => Some(self.last_input + idle),
            _ => None,
        };
        match (idle, self.disconnect_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Time has passed: a timer that is over takes effect.
    //= rfc5044#7.1.2
    //# ULPs SHOULD implement a reasonable timeout while waiting for FPDUs, ULPDUs, and
    //# application level messages to guard against application failures and certain
    //# denial-of-service attacks.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.finished {
            return;
        }
        if self.disconnect_deadline.is_some_and(|d| now >= d) {
            self.events
                .push_back(Event::Notice(Notice::DisconnectTimedOut));
            self.abort();
            return;
        }
        if let Some(idle) = self.idle_timeout {
            if !self.read_closed && now >= self.last_input + idle {
                self.handle_read_error(LossReason::IdleTimeout);
            }
        }
    }

    /// The next thing to act on, in order.
    pub fn poll_event(&mut self) -> Option<Event> {
        // Every call that changes the connection has already settled it.
        self.events.pop_front()
    }

    /// Whether [`Connection::poll_event`] has something to return.
    pub fn has_event(&self) -> bool {
        !self.events.is_empty()
    }

    // ------------------------------------------------------ internals

    /// Records the first reason the connection stopped.
    fn note(&mut self, e: ConnectionError) {
        if self.error.is_none() {
            self.error = Some(e);
            self.events.push_back(Event::Notice(Notice::Stopped(e)));
        }
    }

    /// A framing error (CRC, marker) stopped the received stream: it is
    /// counted, and the queue pair queues the Terminate naming it.
    fn framing_failed(&mut self, e: FramingError) {
        self.stats.framing_error(&e);
        self.note(ConnectionError::Framing(e));
        self.qp.handle_llp_error(e.llp_code());
        self.read_closed = true;
    }

    /// Closes both ways now: nothing more is written or read.
    //= rfc5041#3
    //# For a specific LLP Connection, when all LLP Streams are either gracefully torn down or
    //# are labeled as erroneous LLP streams, the LLP Connection MUST be torn down.
    fn close(&mut self) {
        if !(self.write_closed && self.read_closed) {
            self.events.push_back(Event::Close);
        }
        self.write_closed = true;
        self.read_closed = true;
    }

    /// Reacts to the queue pair's events, moves completions out (once
    /// their octets are written) and closes the write side when a Terminate
    /// or the graceful close asks for it and nothing is left to write.
    /// Every public call that may change the queue pair ends with it, so
    /// that [`Connection::poll_event`] only has to look; taking a batch
    /// out in [`Connection::poll_transmit`] is the exception: what that
    /// changes waits for the batch to be written, or for the call that
    /// finds nothing more to send.
    #[inline]
    fn settle(&mut self) {
        // Most calls find nothing to do: a few branches.
        let unwritten = self.tx.is_pending();
        let holding = unwritten && !self.write_closed;
        let may_close = !unwritten && (self.close_after_flush || self.fin_after_flush);
        if self.qp.has_output()
            || (!holding && !self.held.is_empty())
            || (may_close && !self.write_closed)
            || (self.read_closed && self.write_closed && !self.finished)
        {
            self.settle_now();
        }
    }

    fn settle_now(&mut self) {
        while let Some(event) = self.qp.poll_event() {
            match event {
                QpEvent::TerminateSent(m) => {
                    self.stats.terminates_sent += 1;
                    self.events
                        .push_back(Event::Notice(Notice::TerminateSent(m)));
                    self.close_after_flush = true;
                }
                QpEvent::TerminateReceived(m) => {
                    self.stats.terminates_received += 1;
                    self.events
                        .push_back(Event::Notice(Notice::TerminateReceived(m)));
                    self.note(ConnectionError::TerminateReceived(m));
                    self.close_after_flush = true;
                }
                QpEvent::LocalError(e) => self.note(ConnectionError::TerminateSent(e)),
                QpEvent::ReadyToClose => self.fin_after_flush = true,
                QpEvent::StateChanged(s) => {
                    self.events
                        .push_back(Event::Notice(Notice::StateChanged(s)));
                }
            }
        }
        // A batch still partly unwritten once the write side is closed
        // never will be: hold nothing back for it.
        let unwritten = self.tx.is_pending();
        let holding = unwritten && !self.write_closed;
        if !holding {
            // Completions held while a batch was being written go first,
            // in their order.
            while let Some(c) = self.held.pop_front() {
                self.deliver(c, unwritten);
            }
        }
        while let Some(c) = self.qp.poll_completion() {
            // RFC 5041 §5.4 via the queue pair: a send-queue request
            // completes when the LLP has its last segment; while a batch
            // is partly written ours may not have it yet, so send-queue
            // completions wait (all of them, Reads too: they complete in
            // posting order). Receives owe nothing to the batch.
            if holding && c.opcode != CompletionOpcode::Recv {
                self.held.push_back(c);
            } else {
                self.deliver(c, unwritten);
            }
        }
        if !self.tx.is_pending() && !self.write_closed {
            if self.close_after_flush {
                self.close();
            } else if self.fin_after_flush {
                self.write_closed = true;
                self.events.push_back(Event::SendFin);
            }
        }
        if self.read_closed && self.write_closed {
            self.finish();
        }
    }

    /// Reports one completion.
    fn deliver(&mut self, mut c: Completion, unwritten: bool) {
        if let Some(rtr) = self.rtr_outstanding {
            if c.wr_id == RTR_WR_ID && c.opcode != CompletionOpcode::Recv {
                self.rtr_outstanding = None;
                if c.status == CompletionStatus::Success && !unwritten {
                    self.events.push_back(Event::Notice(Notice::RtrSent(rtr)));
                }
                return;
            }
        }
        if unwritten
            && c.status == CompletionStatus::Success
            && matches!(
                c.opcode,
                CompletionOpcode::Send | CompletionOpcode::RdmaWrite
            )
        {
            // The queue pair completed it when it handed out the last
            // segment, which may be in the batch that never went out.
            c.status = CompletionStatus::FatalError;
        }
        self.events.push_back(Event::Completion(c));
    }

    /// Nothing more can be sent or received: the connection closes (the
    /// peer closed first, the connection was lost or timed out, a Terminate
    /// went out or came in, or one owed could never go out), the queue
    /// pair learns that the stream is closed (a Terminate still held by
    /// rule 4 will never be sent) and everything left is flushed.
    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.close();
        self.qp.handle_llp_closed();
        self.settle();
        self.events.push_back(Event::Finished);
    }
}

/// Queues the zero-length RTR message of peer-to-peer mode.
//= rfc6581#4
//# The Initiator MUST send the selected zero-length RTR message as its first FPDU, which
//# lets the Responder send.
fn post_rtr(qp: &mut QueuePair, rtr: RtrType) -> Result<(), PostError> {
    // Zero-length messages name no buffer, so STag 0 is never checked.
    let empty = Sge {
        stag: STag::default(),
        to: 0,
        len: 0,
    };
    match rtr {
        RtrType::Write => qp.rdma_write(RTR_WR_ID, empty, STag::default(), 0),
        RtrType::Read => qp.rdma_read(RTR_WR_ID, empty, STag::default(), 0),
        RtrType::Send => qp.post_send(RTR_WR_ID, empty, SendFlags::default()),
    }
}
