//! One connection in full operation: the socket, the MPA framing state and
//! the RDMAP engine, driven by a reader task and a writer task.
//!
//! The engine and the framing state sit behind one mutex that is never
//! held across an `.await`. Whoever touches the engine (a user posting
//! work, the reader after feeding octets, the writer when the socket
//! drains) also flushes what the engine wants to send, with non-blocking
//! vectored writes, and moves finished work into the completion queues.
//! So a post is written in the caller's own context, with no task switch,
//! and a Read Response goes out as soon as the reader has taken the
//! request. The writer task only steps in when the socket is full.

mod rx;
mod tx;

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use socket2::SockRef;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};

use iwarp_proto::framing::{AnyDeframer, AnyFramer, Deframer, FramingError, LlpErrorCode};
use iwarp_proto::rdmap::{
    self, Completion, CompletionOpcode, CompletionStatus, Event, ProtocolError, QpState, Sge,
    TerminateMessage,
};

use crate::cq::CompletionQueue;
use crate::info::ConnectionInfo;

pub(crate) use rx::RxEnd;
use rx::RxPath;
use tx::{Flush, TxPath};

/// Work request ids with this bit set belong to the runtime (convenience
/// calls and the peer-to-peer RTR message).
pub(crate) const INTERNAL_WR: u64 = 1 << 63;

/// Reads per lock hold before the reader lets others in.
const READS_PER_TURN: usize = 16;

/// Why a connection stopped moving data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// The peer terminated the stream with this Terminate message.
    #[error("peer terminated the stream: {0:?}")]
    TerminateReceived(TerminateMessage),
    /// This end found an error and terminated the stream.
    #[error("terminated the stream: {0}")]
    TerminateSent(ProtocolError),
    /// The framing layer (MPA or IFT) found the received stream invalid.
    #[error("{0}")]
    Framing(FramingError),
    /// The TCP connection failed or ended in the middle of an FPDU.
    #[error("connection lost: {0}")]
    Lost(String),
    /// The peer closed the connection.
    #[error("peer closed the connection")]
    PeerClosed,
    /// This end closed or dropped the connection.
    #[error("connection closed locally")]
    LocallyClosed,
}

/// The state the user handles and the two tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    pub(crate) stream: TcpStream,
    /// Wakes the writer: the socket refused a write made elsewhere, or the
    /// connection is ending.
    tx_wake: Notify,
    /// Wakes those waiting for the connection to end.
    done: Notify,
    pub(crate) send_cq: CompletionQueue,
    pub(crate) recv_cq: CompletionQueue,
    pub(crate) info: ConnectionInfo,
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    idle_timeout: Option<std::time::Duration>,
    /// How long a graceful close waits for the peer.
    pub(crate) disconnect_timeout: std::time::Duration,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) qp: rdmap::QueuePair,
    tx: TxPath,
    rx: RxPath,
    waiters: HashMap<u64, oneshot::Sender<Completion>>,
    next_internal: u64,
    /// The first reason the connection stopped, for the user.
    pub(crate) error: Option<ConnectionError>,
    /// After the pending octets: send FIN (graceful close) or close both
    /// ways (a Terminate was sent or received).
    fin_after_flush: bool,
    close_after_flush: bool,
    write_closed: bool,
    reader_done: bool,
    writer_done: bool,
    /// Every user handle is gone.
    abandoned: bool,
    /// This end asked for the graceful close.
    closing_locally: bool,
    /// Send-queue completions waiting for a partly written batch.
    held: std::collections::VecDeque<Completion>,
}

/// How the connection was set up, for [`Shared::start`].
#[derive(Debug)]
pub(crate) struct Startup<'a> {
    pub(crate) stream: TcpStream,
    pub(crate) engine: rdmap::QueuePairConfig,
    pub(crate) info: ConnectionInfo,
    /// Octets read past the startup frames: the first FPDUs.
    pub(crate) leftover: &'a [u8],
    /// The framing layer, set up as the startup settled it.
    pub(crate) framer: AnyFramer,
    pub(crate) deframer: AnyDeframer,
    /// This end may send nothing before it has received a PDU
    /// (RFC 5044 §7.1.2 rule 4).
    pub(crate) hold_until_received: bool,
    /// The zero-length RTR message to send first (RFC 6581).
    pub(crate) rtr: Option<iwarp_proto::mpa::startup::RtrType>,
    pub(crate) send_cq: CompletionQueue,
    pub(crate) recv_cq: CompletionQueue,
    /// Receives to post before anything is received.
    pub(crate) initial_recvs: Vec<(u64, Sge)>,
    /// Nothing received for this long: the connection is lost.
    pub(crate) idle_timeout: Option<std::time::Duration>,
    pub(crate) disconnect_timeout: std::time::Duration,
}

impl Shared {
    /// Starts full operation: builds the engine and spawns the tasks.
    pub(crate) fn start(s: Startup<'_>) -> std::io::Result<Arc<Self>> {
        let peer = s.stream.peer_addr()?;
        let local = s.stream.local_addr()?;
        let mut qp = rdmap::QueuePair::new(s.engine, crate::memory::table().clone());
        for (wr_id, sge) in s.initial_recvs {
            qp.post_recv(wr_id, sge)
                .map_err(|e| std::io::Error::other(format!("initial receive {wr_id}: {e}")))?;
        }
        let mut next_internal = INTERNAL_WR;
        if let Some(rtr) = s.rtr {
            use iwarp_proto::mpa::startup::RtrType;
            let empty = Sge {
                stag: Default::default(),
                to: 0,
                len: 0,
            };
            let wr = next_internal;
            next_internal += 1;
            // RFC 6581 §4: the RTR is the initiator's first FPDU. Zero-length
            // messages name no buffer, so STag 0 is never checked.
            let posted = match rtr {
                RtrType::Write => qp.rdma_write(wr, empty, Default::default(), 0),
                RtrType::Read => qp.rdma_read(wr, empty, Default::default(), 0),
                RtrType::Send => qp.post_send(wr, empty, Default::default()),
            };
            if let Err(e) = posted {
                return Err(std::io::Error::other(format!("RTR not accepted: {e}")));
            }
        }
        let shared = Arc::new(Self {
            inner: Mutex::new(Inner {
                qp,
                tx: TxPath::new(s.framer, s.hold_until_received, s.info.emss),
                rx: RxPath::new(s.deframer, s.leftover),
                waiters: HashMap::new(),
                next_internal,
                error: None,
                fin_after_flush: false,
                close_after_flush: false,
                write_closed: false,
                reader_done: false,
                writer_done: false,
                abandoned: false,
                closing_locally: false,
                held: std::collections::VecDeque::with_capacity(64),
            }),
            stream: s.stream,
            tx_wake: Notify::new(),
            done: Notify::new(),
            send_cq: s.send_cq,
            recv_cq: s.recv_cq,
            info: s.info,
            peer,
            local,
            idle_timeout: s.idle_timeout,
            disconnect_timeout: s.disconnect_timeout,
        });
        tokio::spawn(reader(shared.clone()));
        tokio::spawn(writer(shared.clone()));
        Ok(shared)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the engine, then sends what it queued and delivers what
    /// it completed.
    pub(crate) fn with_engine<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut inner = self.lock();
        let r = f(&mut inner);
        self.after_engine_handoff(&mut inner);
        r
    }

    /// A fresh id for a runtime-owned work request, with a channel its
    /// completion will arrive on.
    pub(crate) fn internal_wr(inner: &mut Inner) -> (u64, oneshot::Receiver<Completion>) {
        let id = inner.next_internal;
        inner.next_internal = INTERNAL_WR | (id.wrapping_add(1) & !INTERNAL_WR);
        let (tx, rx) = oneshot::channel();
        inner.waiters.insert(id, tx);
        (id, rx)
    }

    /// [`Shared::after_engine`] from anywhere but the writer task: if the
    /// socket is full, the writer takes over.
    fn after_engine_handoff(&self, inner: &mut Inner) {
        if self.after_engine(inner) {
            self.tx_wake.notify_one();
        }
    }

    /// Flushes, delivers completions, reacts to events. Returns true when
    /// the socket is full with octets still to write. Only the writer task
    /// may ignore that: anyone else must hand over to it (waking it from
    /// its own flush would make it spin).
    fn after_engine(&self, inner: &mut Inner) -> bool {
        let mut blocked = false;
        if !inner.write_closed {
            match inner.tx.flush(&mut inner.qp, &self.stream) {
                Flush::Idle => {}
                Flush::Blocked => blocked = true,
                Flush::Failed(e) => {
                    inner.note(ConnectionError::Lost(e.to_string()));
                    inner.qp.handle_llp_error(LlpErrorCode::ConnectionLost);
                    self.close_socket(inner);
                }
            }
        }
        self.drain(inner);
        if !inner.tx.is_pending() && !inner.write_closed {
            if inner.close_after_flush {
                self.close_socket(inner);
            } else if inner.fin_after_flush {
                let _ = SockRef::from(&self.stream).shutdown(Shutdown::Write);
                inner.write_closed = true;
                self.tx_wake.notify_one();
            }
        }
        blocked
    }

    //= rfc5041#3
    //# For a specific LLP Connection, when all LLP Streams are either gracefully torn down or
    //# are labeled as erroneous LLP streams, the LLP Connection MUST be torn down.
    fn close_socket(&self, inner: &mut Inner) {
        let _ = SockRef::from(&self.stream).shutdown(Shutdown::Both);
        inner.write_closed = true;
        self.tx_wake.notify_one();
    }

    /// Moves completions to the queues (once their data is written) and
    /// handles the engine's events.
    fn drain(&self, inner: &mut Inner) {
        while let Some(event) = inner.qp.poll_event() {
            match event {
                Event::TerminateSent(_) => inner.close_after_flush = true,
                Event::TerminateReceived(m) => {
                    inner.note(ConnectionError::TerminateReceived(m));
                    inner.close_after_flush = true;
                }
                Event::LocalError(e) => inner.note(ConnectionError::TerminateSent(e)),
                Event::ReadyToClose => inner.fin_after_flush = true,
                Event::StateChanged(_) => {}
            }
        }
        // A batch still partly unwritten once the write side is closed
        // never will be: hold nothing back for it.
        let unwritten = inner.tx.is_pending();
        let holding = unwritten && !inner.write_closed;
        if !holding {
            // Completions held while a batch was being written go first,
            // in their order.
            while let Some(c) = inner.held.pop_front() {
                self.deliver(inner, c, unwritten);
            }
        }
        while let Some(c) = inner.qp.poll_completion() {
            // RFC 5041 §5.4 via the engine: a send-queue request completes
            // when the LLP has its last segment; while a batch is partly
            // written ours may not have it yet, so send-queue completions
            // wait (all of them, Reads too: they complete in posting
            // order). Receives owe nothing to the batch and go at once.
            if holding && c.opcode != CompletionOpcode::Recv {
                inner.held.push_back(c);
            } else {
                self.deliver(inner, c, unwritten);
            }
        }
    }

    /// Hands one completion to its waiter or queue.
    fn deliver(&self, inner: &mut Inner, mut c: Completion, unwritten: bool) {
        if unwritten
            && c.status == CompletionStatus::Success
            && matches!(
                c.opcode,
                CompletionOpcode::Send | CompletionOpcode::RdmaWrite
            )
        {
            // The engine completed it when it handed out the last segment,
            // which may be in the batch that never went out.
            c.status = CompletionStatus::FatalError;
        }
        if c.wr_id & INTERNAL_WR != 0 {
            if let Some(waiter) = inner.waiters.remove(&c.wr_id) {
                let _ = waiter.send(c);
            }
            return;
        }
        match c.opcode {
            CompletionOpcode::Recv => self.recv_cq.push(c),
            _ => self.send_cq.push(c),
        }
    }

    /// Waits until both tasks have ended.
    pub(crate) async fn closed(&self) {
        loop {
            let notified = self.done.notified();
            {
                let inner = self.lock();
                if inner.reader_done && inner.writer_done {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Every user handle was dropped: close the connection.
    pub(crate) fn abandon(&self) {
        let mut inner = self.lock();
        inner.abandoned = true;
        inner.note(ConnectionError::LocallyClosed);
        inner.qp.handle_llp_error(LlpErrorCode::ConnectionLost);
        self.close_socket(&mut inner);
        self.drain(&mut inner);
    }

    /// Starts a graceful close.
    pub(crate) fn close(&self) {
        self.with_engine(|inner| {
            inner.closing_locally = true;
            inner.qp.close();
        });
    }

    fn task_done(&self, inner: &mut Inner, reader: bool) {
        if reader {
            inner.reader_done = true;
        } else {
            inner.writer_done = true;
        }
        self.tx_wake.notify_one();
        if inner.reader_done && inner.writer_done {
            // Nothing more can be sent or received: close, so that the
            // peer is not left waiting on a half-open connection (it
            // closed first, the connection was lost or timed out, or a
            // held Terminate could never go out).
            if !inner.write_closed {
                self.close_socket(inner);
            }
            // The engine learns that the stream is closed: a Terminate
            // still waiting (held by rule 4) will never be sent, and the
            // state moves on from Terminate to Error.
            inner.qp.handle_llp_closed();
            // Nothing can complete any more: what is left is flushed.
            self.drain(inner);
            for (_, w) in inner.waiters.drain() {
                drop(w);
            }
            self.done.notify_waiters();
        }
    }

    pub(crate) fn state(&self) -> QpState {
        self.lock().qp.state()
    }
}

impl Inner {
    /// Records the first reason the connection stopped.
    fn note(&mut self, e: ConnectionError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    pub(crate) fn debug_state(&self) -> String {
        format!(
            "qp {:?}; tx pending {} ; rx at boundary {} offset {} ; reader_done {} writer_done {} write_closed {} fin {} close {} err {:?}",
            self.qp.state(),
            self.tx.is_pending(),
            self.rx.deframer.at_boundary(),
            self.rx.deframer.offset(),
            self.reader_done,
            self.writer_done,
            self.write_closed,
            self.fin_after_flush,
            self.close_after_flush,
            self.error
        )
    }

    /// The MULPDU in force and the EMSS it follows.
    pub(crate) fn mulpdu(&self) -> (usize, usize) {
        (self.qp.mulpdu(), self.tx.emss)
    }

    /// Octets written and read, and payload octets placed directly.
    pub(crate) fn octets(&self) -> (u64, u64, u64) {
        (self.tx.octets, self.rx.octets, self.rx.direct_octets)
    }
}

/// The reader task: socket → MPA → engine, until the stream ends.
async fn reader(shared: Arc<Shared>) {
    let end = loop {
        let step = {
            let mut guard = shared.lock();
            let inner = &mut *guard;
            let r = read_turn(inner, &shared.stream);
            shared.after_engine_handoff(inner);
            r
        };
        match step {
            Ok(true) => tokio::task::yield_now().await,
            Ok(false) => {
                let readable = shared.stream.readable();
                let ready = match shared.idle_timeout {
                    Some(idle) => match tokio::time::timeout(idle, readable).await {
                        Ok(r) => r,
                        Err(_) => {
                            break RxEnd::Lost(Some(std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                "nothing received within the idle timeout",
                            )))
                        }
                    },
                    None => readable.await,
                };
                if let Err(e) = ready {
                    break RxEnd::Lost(Some(e));
                }
            }
            Err(end) => break end,
        }
    };
    let mut guard = shared.lock();
    let inner = &mut *guard;
    match &end {
        RxEnd::Closed => {
            inner.note(if inner.closing_locally {
                ConnectionError::LocallyClosed
            } else {
                ConnectionError::PeerClosed
            });
            inner.qp.handle_llp_closed();
        }
        RxEnd::Lost(e) => {
            let what = e
                .as_ref()
                .map_or("ended inside an FPDU".to_string(), |e| e.to_string());
            inner.note(ConnectionError::Lost(what));
        }
        RxEnd::Framing(e) => inner.note(ConnectionError::Framing(*e)),
        RxEnd::Engine => {}
    }
    if let Some(code) = end.llp_code() {
        inner.qp.handle_llp_error(code);
    }
    shared.after_engine_handoff(inner);
    shared.task_done(inner, true);
}

/// Feeds staged octets and reads more, a few times. `Ok(true)`: there may
/// be more to read at once; `Ok(false)`: the socket is empty.
fn read_turn(inner: &mut Inner, stream: &TcpStream) -> Result<bool, RxEnd> {
    for _ in 0..READS_PER_TURN {
        feed(inner)?;
        if !inner.rx.read(&mut inner.qp, stream)? {
            return Ok(false);
        }
    }
    feed(inner)?;
    Ok(true)
}

/// Feeds the staged octets, and lifts the responder's hold once the
/// framing layer has validated a PDU (RFC 5044 §7.1.2 rule 4). The hold
/// is lifted even when the engine refused that PDU's contents: the
/// Terminate it queued must go out, and the framing did validate the PDU.
fn feed(inner: &mut Inner) -> Result<(), RxEnd> {
    let fed = inner.rx.feed_staged(&mut inner.qp);
    if inner.tx.is_held() && inner.rx.deframer.pdus_received() > 0 {
        inner.tx.release();
    }
    fed
}

/// The writer task: waits for the socket to drain when a write could not
/// finish, and closes the write side when the connection ends.
async fn writer(shared: Arc<Shared>) {
    loop {
        let notified = shared.tx_wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (pending, finished) = {
            let mut guard = shared.lock();
            let inner = &mut *guard;
            // The writer's own flush: a full socket is what it waits for
            // below, so no hand-over.
            shared.after_engine(inner);
            let finished = inner.write_closed || (inner.reader_done && !inner.tx.is_pending());
            (inner.tx.is_pending(), finished)
        };
        if finished {
            break;
        }
        if pending {
            tokio::select! {
                r = shared.stream.writable() => if r.is_err() { break },
                _ = &mut notified => {}
            }
        } else {
            notified.await;
        }
    }
    let mut guard = shared.lock();
    let inner = &mut *guard;
    shared.task_done(inner, false);
}
