//! The queue pair: RDMAP over DDP for one stream, as a sans-IO engine.
//!
//! What goes in: work requests ([`QueuePair::post_send`],
//! [`QueuePair::post_recv`], [`QueuePair::rdma_write`],
//! [`QueuePair::rdma_read`], [`QueuePair::close`]); received ULPDUs, through
//! the [`UlpduSink`](crate::framing::UlpduSink) implementation in `rx.rs` or
//! by direct placement; LLP failures ([`QueuePair::handle_llp_error`],
//! [`QueuePair::handle_llp_closed`]). What comes out: the next ULPDU to
//! send ([`QueuePair::poll_transmit`]), completions
//! ([`QueuePair::poll_completion`]) and events ([`QueuePair::poll_event`]).
//!
//! The engine is split as siw splits its queue pair (`siw_qp.c`,
//! `siw_qp_tx.c`, `siw_qp_rx.c`): posting, state and teardown here, the
//! transmit half (choosing and segmenting messages) in `tx.rs`, the
//! receive half (checks, placement, delivery) in `rx.rs`.
//!
//! Queues are allocated once, at their configured depth; nothing on the
//! data path allocates.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::ddp::UNTAGGED_HEADER_LEN;
use crate::framing::mulpdu::MAX_ULPDU;
use crate::framing::LlpErrorCode;
use crate::memory::{Access, MemoryTable, RegionSlice, STag};

use super::counters::{MessageCounters, OneSidedCounters};
use super::error::{ProtocolError, RdmapError};
use super::opcode::Opcode;
use super::read_request::ReadRequest;
use super::rx::Rx;
use super::terminate::{TerminateMessage, TerminatedDdp, TERMINATE_MAX_LEN};
use super::tx::TxMessage;
use super::work::{
    Completion, CompletionOpcode, CompletionStatus, Event, PostError, QpState, QueuePairConfig,
    SendFlags, Sge,
};

/// A send-queue work request, kept until it completes so that
/// completions come out in posting order.
#[derive(Debug)]
pub(super) struct SqSlot {
    wr_id: u64,
    opcode: CompletionOpcode,
    pub(super) byte_len: u32,
    status: Option<CompletionStatus>,
}

/// A send-queue message not yet started.
#[derive(Debug)]
pub(super) enum SqWork {
    Send {
        seq: u64,
        opcode: Opcode,
        invalidate: STag,
        source: Option<RegionSlice>,
        len: u32,
    },
    Write {
        seq: u64,
        source: Option<RegionSlice>,
        len: u32,
        stag: STag,
        to: u64,
    },
    Read {
        seq: u64,
        request: ReadRequest,
    },
}

/// An RDMA Read this end asked for and has not had fully answered.
#[derive(Debug)]
pub(super) struct OutstandingRead {
    pub(super) seq: u64,
    pub(super) sink_stag: STag,
    pub(super) sink_to: u64,
    pub(super) len: u32,
    pub(super) received: u32,
}

/// An RDMA Read Request the peer made, to be answered in order.
#[derive(Debug)]
pub(super) struct ReadJob {
    pub(super) source: Option<RegionSlice>,
    pub(super) request: ReadRequest,
    /// For the Terminate's D and R copies if the source goes bad.
    pub(super) ddp: Option<TerminatedDdp>,
}

/// A posted receive.
#[derive(Debug)]
pub(super) struct RecvWork {
    pub(super) wr_id: u64,
    pub(super) buffer: Option<RegionSlice>,
    pub(super) len: u32,
}

/// Which work request an error is blamed on, and with what status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Culprit {
    None,
    /// The receive at the head of the receive queue.
    Recv(CompletionStatus),
    /// The read at the head of the outstanding-read queue.
    Read(CompletionStatus),
    /// A send-queue request.
    Sq(u64, CompletionStatus),
}

/// The RDMAP/DDP engine of one stream. See the module documentation.
#[derive(Debug)]
pub struct QueuePair {
    pub(super) cfg: QueuePairConfig,
    pub(super) table: Arc<MemoryTable>,
    pub(super) state: QpState,
    pub(super) mulpdu: usize,

    pub(super) sq_slots: VecDeque<SqSlot>,
    pub(super) sq_base: u64,
    pub(super) sq_pending: VecDeque<SqWork>,
    pub(super) tx: Option<TxMessage>,
    pub(super) tx_msn: [u32; 3],
    /// Alternation between the send queue and read responses, so that
    /// neither starves the other; switches happen at message boundaries.
    pub(super) last_from_irq: bool,
    pub(super) orq: VecDeque<OutstandingRead>,
    pub(super) irq: VecDeque<ReadJob>,
    pub(super) rq: VecDeque<RecvWork>,
    pub(super) rx: Rx,

    completions: VecDeque<Completion>,
    pub(super) events: VecDeque<Event>,
    pub(super) terminate_out: Option<TerminateMessage>,
    ready_to_close_sent: bool,
    pub(super) counters: MessageCounters,
}

impl QueuePair {
    /// A queue pair in state ready-to-send, using `table` for every STag.
    pub fn new(cfg: QueuePairConfig, table: Arc<MemoryTable>) -> Self {
        Self {
            cfg,
            table,
            state: QpState::ReadyToSend,
            mulpdu: cfg.mulpdu.clamp(Self::MIN_MULPDU, MAX_ULPDU),
            // The queues grow as work is posted, up to their depths, and
            // keep what they grew to: an idle queue pair holds little, a
            // busy one allocates no more once warmed up.
            sq_slots: VecDeque::new(),
            sq_base: 0,
            sq_pending: VecDeque::new(),
            tx: None,
            //= rfc5041#4.3
            //# The initial value for MSN MUST be one.
            tx_msn: [1; 3],
            last_from_irq: true,
            orq: VecDeque::with_capacity(cfg.ord.max(1)),
            irq: VecDeque::with_capacity(cfg.ird.max(1)),
            rq: VecDeque::new(),
            rx: Rx::new(),
            completions: VecDeque::new(),
            events: VecDeque::with_capacity(16),
            terminate_out: None,
            ready_to_close_sent: false,
            counters: MessageCounters::default(),
        }
    }

    /// The peer's one-sided operations on this end's memory so far.
    pub fn one_sided_counters(&self) -> OneSidedCounters {
        self.counters.one_sided()
    }

    /// The messages sent and received so far, by type.
    pub fn message_counters(&self) -> MessageCounters {
        self.counters
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &QueuePairConfig {
        &self.cfg
    }

    /// The current MULPDU.
    pub fn mulpdu(&self) -> usize {
        self.mulpdu
    }

    /// Sets the MULPDU (the framing layer computes it, RFC 5044 §4.5):
    /// every segment from now on is at most this long. Values below
    /// [`QueuePair::MIN_MULPDU`] are raised to it, so that the largest
    /// Terminate fits one segment (MPA never offers less than 128); values
    /// above 64768 are lowered to it, the largest ULPDU MPA carries.
    //= draft-ietf-rddp-mpa-01#3.2
    //# The sending DDP MUST NOT post a ULPDU larger than 64768 octets to
    //# MPA.
    pub fn set_mulpdu(&mut self, mulpdu: usize) {
        self.mulpdu = mulpdu.clamp(Self::MIN_MULPDU, MAX_ULPDU);
    }

    /// The smallest MULPDU the engine works with: an untagged header and
    /// the largest Terminate payload.
    pub const MIN_MULPDU: usize = UNTAGGED_HEADER_LEN + TERMINATE_MAX_LEN;

    /// Send-queue requests (Sends, RDMA Writes, RDMA Reads) posted over
    /// the queue pair's life, accepted ones only: a runtime tells by it
    /// whether a post left anything to transmit.
    pub fn send_queue_posted(&self) -> u64 {
        self.sq_base + self.sq_slots.len() as u64
    }

    /// The next completion, in order per queue.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether a completion or an event is waiting.
    #[inline]
    pub fn has_output(&self) -> bool {
        !self.completions.is_empty() || !self.events.is_empty()
    }

    pub(super) fn set_state(&mut self, s: QpState) {
        if self.state != s {
            self.state = s;
            self.events.push_back(Event::StateChanged(s));
        }
    }

    fn is_failed(&self) -> bool {
        matches!(
            self.state,
            QpState::Terminate | QpState::Error | QpState::Closed
        )
    }

    fn local(&self, sge: &Sge, need: Access) -> Result<Option<RegionSlice>, PostError> {
        if sge.len == 0 {
            // Zero-length messages carry no payload: no buffer to check.
            return Ok(None);
        }
        self.table
            .check_local(sge.stag, self.cfg.pd, need, sge.to, sge.len as u64)
            .map(Some)
            .map_err(PostError::LocalProtection)
    }

    /// Accepts a send-queue request, or completes it at once with a flush
    /// error when the stream has failed (as verbs do).
    fn push_sq(
        &mut self,
        wr_id: u64,
        opcode: CompletionOpcode,
        byte_len: u32,
        make: impl FnOnce(u64) -> SqWork,
    ) -> Result<(), PostError> {
        if self.state == QpState::Closing {
            return Err(PostError::Closing);
        }
        if self.sq_slots.len() >= self.cfg.send_queue_depth {
            return Err(PostError::QueueFull);
        }
        let seq = self.sq_base + self.sq_slots.len() as u64;
        let failed = self.is_failed();
        self.sq_slots.push_back(SqSlot {
            wr_id,
            opcode,
            byte_len,
            status: failed.then_some(CompletionStatus::FlushError),
        });
        if failed {
            self.release_sq();
        } else {
            self.sq_pending.push_back(make(seq));
        }
        Ok(())
    }

    /// Posts a Send of `sge` (RFC 5040 §5.3), with Solicited Event and/or
    /// Invalidate as `flags` say.
    pub fn post_send(&mut self, wr_id: u64, sge: Sge, flags: SendFlags) -> Result<(), PostError> {
        let source = self.local(&sge, Access::empty())?;
        let opcode = match (flags.solicited, flags.invalidate.is_some()) {
            (false, false) => Opcode::Send,
            (false, true) => Opcode::SendInvalidate,
            (true, false) => Opcode::SendSolicited,
            (true, true) => Opcode::SendSolicitedInvalidate,
        };
        let invalidate = flags.invalidate.unwrap_or_default();
        self.push_sq(wr_id, CompletionOpcode::Send, sge.len, |seq| SqWork::Send {
            seq,
            opcode,
            invalidate,
            source,
            len: sge.len,
        })
    }

    /// Posts an RDMA Write of `sge` to the peer's `remote_stag` at
    /// `remote_to` (RFC 5040 §5.1).
    //= rfc5041#5.2
    //# The ULP at the Data Source MUST specify the STag and the initial TO when the ULP Message
    //# is handed to DDP.
    pub fn rdma_write(
        &mut self,
        wr_id: u64,
        sge: Sge,
        remote_stag: STag,
        remote_to: u64,
    ) -> Result<(), PostError> {
        let source = self.local(&sge, Access::empty())?;
        self.push_sq(wr_id, CompletionOpcode::RdmaWrite, sge.len, |seq| {
            SqWork::Write {
                seq,
                source,
                len: sge.len,
                stag: remote_stag,
                to: remote_to,
            }
        })
    }

    /// Posts an RDMA Read of `sge.len` octets from the peer's
    /// `remote_stag` at `remote_to` into `sge` (RFC 5040 §5.2). The sink
    /// needs local and remote write access: the Read Response is a tagged
    /// write into it. Fails with [`PostError::ZeroOrd`] on a stream whose
    /// ORD is 0.
    pub fn rdma_read(
        &mut self,
        wr_id: u64,
        sge: Sge,
        remote_stag: STag,
        remote_to: u64,
    ) -> Result<(), PostError> {
        if self.cfg.ord == 0 {
            return Err(PostError::ZeroOrd);
        }
        // Checked now; the Read Responses are checked again as they land.
        self.local(&sge, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
        let request = ReadRequest {
            sink_stag: sge.stag,
            sink_to: sge.to,
            size: sge.len,
            source_stag: remote_stag,
            source_to: remote_to,
        };
        self.push_sq(wr_id, CompletionOpcode::RdmaRead, sge.len, |seq| {
            SqWork::Read { seq, request }
        })
    }

    /// Posts a receive buffer for an incoming Send. iWARP has no
    /// receiver-not-ready: a Send that finds none is fatal.
    pub fn post_recv(&mut self, wr_id: u64, sge: Sge) -> Result<(), PostError> {
        let buffer = self.local(&sge, Access::LOCAL_WRITE)?;
        if self.rq.len() >= self.cfg.recv_queue_depth {
            return Err(PostError::QueueFull);
        }
        if self.is_failed() {
            self.completions.push_back(Completion {
                wr_id,
                status: CompletionStatus::FlushError,
                opcode: CompletionOpcode::Recv,
                byte_len: 0,
                solicited: false,
                invalidated: None,
            });
            return Ok(());
        }
        self.rq.push_back(RecvWork {
            wr_id,
            buffer,
            len: sge.len,
        });
        Ok(())
    }

    /// Starts a graceful close (RFC 5041 §6.2.1): queued work and read
    /// responses are still sent, new transfers are refused;
    /// [`Event::ReadyToClose`] says when the LLP may be closed.
    //= rfc5041#6.2
    //# DDP MUST NOT independently initiate Stream Teardown.
    //= rfc5041#6.2.1
    //# If the Local Peer ULP indicates graceful teardown, the DDP layer on the Local Peer
    //# SHOULD ensure that all ULP data would be transferred before the underlying LLP Stream &
    //# Connection are torn down, and any further data transfer requests by the Local Peer ULP
    //# MUST return an error.
    pub fn close(&mut self) {
        if self.state == QpState::ReadyToSend {
            self.set_state(QpState::Closing);
            self.check_drained();
        }
    }

    pub(super) fn check_drained(&mut self) {
        if self.state == QpState::Closing
            && !self.ready_to_close_sent
            && self.tx.is_none()
            && self.sq_pending.is_empty()
            && self.orq.is_empty()
            && self.irq.is_empty()
        {
            self.ready_to_close_sent = true;
            self.events.push_back(Event::ReadyToClose);
        }
    }

    /// The LLP stream closed (the peer's FIN, or the runtime closed it).
    /// After a graceful close this ends in [`QpState::Closed`]; otherwise
    /// it is an abortive teardown and ends in [`QpState::Error`]. Every
    /// outstanding work request completes with a flush error, and
    /// receiving stops: nothing fed afterwards, the rest of a ULPDU in
    /// progress included, is placed or delivered.
    //= rfc5044#7.2
    //# A mechanism SHOULD be provided by MPA to DDP for DDP to be made aware that a graceful
    //# close of the TCP connection has been received by the TCP (e.g., FIN is received).
    //= rfc5041#3
    //# For a specific LLP Stream, the LLP MUST provide a mechanism to indicate that the LLP
    //# Stream has been gracefully torn down.
    //= rfc5041#3
    //# For a specific LLP Connection, the LLP MUST provide a mechanism to indicate that the LLP
    //# Connection has been gracefully torn down.
    //= rfc5041#6.2.1
    //# If the DDP layer on the Local Peer receives a graceful teardown request from the LLP,
    //# any further data received after the request is considered an error and MUST cause the
    //# DDP Stream to be abortively torn down.
    pub fn handle_llp_closed(&mut self) {
        self.rx.stop();
        if matches!(self.state, QpState::Error | QpState::Closed) {
            return;
        }
        let next = if self.state == QpState::Closing {
            QpState::Closed
        } else {
            QpState::Error
        };
        self.terminate_out = None;
        self.flush(Culprit::None);
        self.set_state(next);
    }

    /// The LLP (MPA) failed: a CRC error, a marker disagreement, a lost
    /// connection. Whatever DDP held for the ULPDU in progress is dropped;
    /// the Terminate names the LLP error (layer 2), with no header copies,
    /// since the header may be the damaged part. A lost connection sends
    /// nothing.
    //= rfc5044#8
    //# For Error codes 2 and 3, MPA MUST NOT close the TCP connection following a reported
    //# error.
    //= rfc5041#3
    //# The LLP MUST ensure that if it accepts a DDP Segment, it will transfer it reliably to
    //# the receiver or return with an error stating that the transfer failed to complete.
    //= rfc5041#6.2.2
    //# If the LLP indicates to the ULP that a fatal error has occurred, the DDP layer SHOULD
    //# report the error to the ULP (see Section 7.2, DDP Error Numbers) and complete all
    //# outstanding ULP requests with an error.
    //= rfc5041#7
    //# All LLP errors reported to DDP SHOULD be passed up to the ULP.
    pub fn handle_llp_error(&mut self, code: LlpErrorCode) {
        if self.is_failed() {
            return;
        }
        self.rx.stop();
        let error = ProtocolError::Llp(code);
        if code == LlpErrorCode::ConnectionLost {
            self.events.push_back(Event::LocalError(error));
            self.flush(Culprit::None);
            self.set_state(QpState::Error);
        } else {
            self.fail(error, TerminateMessage::new(error), Culprit::None);
        }
    }

    /// The runtime could not lock a [`Transmit`](super::Transmit)'s payload (its source STag
    /// was invalidated after `poll_transmit`): the stream fails with a
    /// local catastrophic error.
    pub fn abort_transmit(&mut self) {
        if self.is_failed() {
            return;
        }
        let error = ProtocolError::Rdmap(RdmapError::LocalCatastrophic);
        self.fail(error, TerminateMessage::new(error), Culprit::None);
    }

    /// The stream fails: `term` goes out next, and every outstanding work
    /// request completes, `culprit` with its own status, the rest with a
    /// flush error (RFC 5041 §6.2.2, §7.1).
    //= rfc5041#6.2.2
    //# Thus any of the following fatal errors on a DDP Stream MUST cause DDP to indicate to the
    //# ULP that a fatal error has occurred
    //= rfc5041#6.2.2
    //# After indicating to the ULP a fatal error has occurred, the DDP Stream MUST NOT be
    //# terminated until the Local Peer ULP indicates to the DDP layer that the DDP Stream
    //# should be abortively torndown.
    //= rfc5041#7.1
    //# Since each of these errors represents a failure of the sending ULP or protocol, DDP
    //# SHOULD enable the ULP to send one additional DDP Message before terminating the DDP
    //# Stream.
    //= rfc5040#6
    //# The Terminate Message MUST be the last message sent on the stream.
    //= rfc5040#7
    //# When an error is detected on the stream, the RDMAP layer MUST send a Terminate Message
    //# naming it, when the LLP is still able to carry one, and complete outstanding work with
    //# an error.
    pub(super) fn fail(&mut self, error: ProtocolError, term: TerminateMessage, culprit: Culprit) {
        if self.is_failed() {
            return;
        }
        self.rx.stop();
        self.events.push_back(Event::LocalError(error));
        self.terminate_out = Some(term);
        self.flush(culprit);
        self.set_state(QpState::Terminate);
    }

    /// The peer's Terminate arrived: stop, report, flush; no Terminate goes
    /// back: the stream is already dead at the peer.
    //= rfc5040#6
    //# A Terminate Message MUST NOT be sent in answer to a received Terminate Message; the
    //# stream is then closed.
    pub(super) fn terminated_by_peer(&mut self, msg: TerminateMessage) {
        if self.is_failed() {
            return;
        }
        self.rx.stop();
        self.events.push_back(Event::TerminateReceived(msg));
        // A Read the peer refused carries the Read Request as its R copy:
        // that read gets the peer's verdict.
        let mut culprit = Culprit::None;
        if let Some(req) = msg.rdmap.and_then(|r| ReadRequest::parse_bytes(&r).ok()) {
            if let Some(head) = self.orq.front() {
                if head.sink_stag == req.sink_stag && head.sink_to == req.sink_to {
                    let status = if msg.layer == 0 && msg.etype == 1 {
                        CompletionStatus::RemoteAccessError
                    } else {
                        CompletionStatus::RemoteOperationError
                    };
                    culprit = Culprit::Read(status);
                }
            }
        }
        self.flush(culprit);
        self.set_state(QpState::Error);
    }

    fn flush(&mut self, culprit: Culprit) {
        let flush = CompletionStatus::FlushError;
        self.sq_pending.clear();
        self.tx = None;
        self.irq.clear();
        for (i, read) in self.orq.drain(..).enumerate() {
            let status = match culprit {
                Culprit::Read(s) if i == 0 => s,
                _ => flush,
            };
            let idx = (read.seq - self.sq_base) as usize;
            if let Some(slot) = self.sq_slots.get_mut(idx) {
                slot.byte_len = read.received;
                slot.status.get_or_insert(status);
            }
        }
        if let Culprit::Sq(seq, status) = culprit {
            if let Some(slot) = self.sq_slots.get_mut((seq - self.sq_base) as usize) {
                slot.status.get_or_insert(status);
            }
        }
        for slot in self.sq_slots.iter_mut() {
            slot.status.get_or_insert(flush);
        }
        self.release_sq();
        for (i, recv) in self.rq.drain(..).enumerate() {
            let status = match culprit {
                Culprit::Recv(s) if i == 0 => s,
                _ => flush,
            };
            self.completions.push_back(Completion {
                wr_id: recv.wr_id,
                status,
                opcode: CompletionOpcode::Recv,
                byte_len: 0,
                solicited: false,
                invalidated: None,
            });
        }
    }

    /// Records the outcome of send-queue request `seq` and releases every
    /// finished request at the head, so completions keep posting order.
    pub(super) fn complete_sq(&mut self, seq: u64, status: CompletionStatus, byte_len: u32) {
        if let Some(slot) = self
            .sq_slots
            .get_mut((seq.wrapping_sub(self.sq_base)) as usize)
        {
            slot.status = Some(status);
            slot.byte_len = byte_len;
        }
        self.release_sq();
    }

    fn release_sq(&mut self) {
        while self.sq_slots.front().is_some_and(|s| s.status.is_some()) {
            let s = self.sq_slots.pop_front().expect("checked non-empty");
            self.sq_base += 1;
            self.completions.push_back(Completion {
                wr_id: s.wr_id,
                status: s.status.unwrap_or(CompletionStatus::FlushError),
                opcode: s.opcode,
                byte_len: s.byte_len,
                solicited: false,
                invalidated: None,
            });
        }
    }

    pub(super) fn push_completion(&mut self, c: Completion) {
        self.completions.push_back(c);
    }

    pub(super) fn read_finished(&mut self) {
        self.check_drained();
    }
}
