//! One connection in full operation: the socket, and the sans-IO
//! [`Connection`] of `iwarp-proto` driven by a reader task and a writer
//! task.
//!
//! The protocol rules of a running connection (rule 4's hold, the RTR,
//! completions held while a batch is partly written, errors to
//! Terminates, FIN and half close, the timers' verdicts) live in the
//! `Connection`; this module carries out what it asks for with tokio:
//! reads, vectored writes, `shutdown`, wakers and timers.
//!
//! The `Connection` sits behind one mutex that is never held across an
//! `.await`; the reader and writer tasks take it without blocking their
//! thread (`lock.rs`). Whoever touches it (a user posting work, the reader after
//! feeding octets, the writer when the socket drains) also writes what it
//! wants to send, with non-blocking vectored writes, and moves finished
//! work into the completion queues. So a post is written in the caller's
//! own context, with no task switch, and a Read Response goes out as soon
//! as the reader has taken the request. The writer task steps in when the
//! socket is full, and for posts that come in a burst: one made soon
//! after a post that wrote (`Config::post_burst`) leaves its octets to
//! the next such post or to the writer, so that a burst shares writes.
//!
//! Each connection has a `tracing` span, which its events name as their
//! parent (`log.rs`).

mod lock;
mod log;
mod rx;
mod sock_io;
mod waiters;

use std::future::Future;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use socket2::SockRef;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use iwarp_proto::connection::{Connection, ConnectionConfig, Event, LossReason};
use iwarp_proto::framing::Deframer;
use iwarp_proto::memory::MemoryTable;
use iwarp_proto::rdmap::{Completion, CompletionOpcode, QpState, Sge};

use crate::cq::CompletionQueue;
use crate::error::Error;
use crate::info::ConnectionInfo;

pub use iwarp_proto::connection::ConnectionError;

use lock::{TaskGuard, TaskLock};
use rx::{ReadStep, RxPath};
use waiters::{Waiters, INTERNAL_WR};

/// Reads per lock hold before the reader lets others in.
const READS_PER_TURN: usize = 16;

/// The state the user handles and the two tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    inner: TaskLock<Inner>,
    pub(crate) stream: TcpStream,
    /// Wakes the writer: the socket refused a write made elsewhere, or the
    /// connection is ending.
    tx_wake: Notify,
    /// Wakes those waiting for the connection to end.
    done: Notify,
    /// `Config::post_burst`.
    post_burst: Duration,
    pub(crate) send_cq: CompletionQueue,
    pub(crate) recv_cq: CompletionQueue,
    pub(crate) info: ConnectionInfo,
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    /// The connection's span: both addresses, role, framing.
    pub(crate) span: tracing::Span,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) conn: Connection,
    rx: RxPath,
    /// The runtime's own requests, each awaited by one call.
    pub(crate) waiters: Waiters,
    /// When the connection started: the instant given for input when no
    /// idle timer needs a fresh one.
    started: Instant,
    /// When a post last wrote to the socket itself.
    last_post_write: Option<Instant>,
    /// System calls that wrote to the socket.
    socket_writes: u64,
}

/// How the connection was set up, for [`Shared::start`].
#[derive(Debug)]
pub(crate) struct Startup<'a> {
    pub(crate) stream: TcpStream,
    /// The STag table of the queue pair's device.
    pub(crate) table: Arc<MemoryTable>,
    pub(crate) config: ConnectionConfig,
    pub(crate) info: ConnectionInfo,
    /// Octets read past the startup frames: the first PDUs.
    pub(crate) leftover: &'a [u8],
    pub(crate) send_cq: CompletionQueue,
    pub(crate) recv_cq: CompletionQueue,
    /// Receives to post before anything is received.
    pub(crate) initial_recvs: Vec<(u64, Sge)>,
    /// `Config::post_burst`.
    pub(crate) post_burst: Duration,
}

impl Shared {
    /// Starts full operation: builds the connection and spawns the tasks.
    pub(crate) fn start(s: Startup<'_>) -> Result<Arc<Self>, Error> {
        let peer = s.stream.peer_addr()?;
        let local = s.stream.local_addr()?;
        let started = Instant::now();
        let mut conn = Connection::new(s.config, s.table, started).map_err(Error::Rtr)?;
        for (wr_id, sge) in s.initial_recvs {
            conn.post_recv(wr_id, sge)
                .map_err(|error| Error::InitialReceive { wr_id, error })?;
        }
        let rx = RxPath::new(conn.verifies_first(), s.leftover);
        let mut info = s.info;
        info.mulpdu = conn.qp().mulpdu();
        let span = log::span(local, peer, &info);
        let shared = Arc::new(Self {
            inner: TaskLock::new(Inner {
                conn,
                rx,
                waiters: Waiters::default(),
                started,
                last_post_write: None,
                socket_writes: 0,
            }),
            stream: s.stream,
            tx_wake: Notify::new(),
            done: Notify::new(),
            post_burst: s.post_burst,
            send_cq: s.send_cq,
            recv_cq: s.recv_cq,
            info,
            peer,
            local,
            span,
        });
        tokio::spawn(reader(shared.clone()));
        tokio::spawn(writer(shared.clone()));
        Ok(shared)
    }

    pub(crate) fn lock(&self) -> TaskGuard<'_, Inner> {
        self.inner.lock()
    }

    /// The lock, as the connection's own tasks take it: waiting for its
    /// release without blocking the thread (the `lock` module says why).
    async fn lock_async(&self) -> TaskGuard<'_, Inner> {
        self.inner.lock_async().await
    }

    /// Runs `f` on the connection, then sends what it queued and delivers
    /// what it completed.
    pub(crate) fn with_engine<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut inner = self.lock();
        let r = f(&mut inner);
        self.after_engine_handoff(&mut inner);
        r
    }

    /// Runs the post `f` on the connection. Like [`Shared::with_engine`],
    /// the post writes to the socket itself, unless a post did less than
    /// `Config::post_burst` ago: then its octets wait for the next post
    /// that writes or for the writer task, whichever comes first, so that
    /// a burst of posts goes out in a few writes instead of one each.
    /// A post that queued no send-queue request (receives alone) has
    /// nothing to write: it leaves octets deferred by an earlier post
    /// where they are and does not read the clock.
    pub(crate) fn post_with_engine<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut inner = self.lock();
        let queued_before = inner.conn.qp().send_queue_posted();
        let r = f(&mut inner);
        if inner.conn.qp().send_queue_posted() == queued_before {
            // What a receive may raise (a flush error on a closed
            // connection) is delivered now.
            if inner.conn.has_event() {
                self.after_engine_handoff(&mut inner);
            }
            return r;
        }
        // Once the write side is closed the writer task has ended (or is
        // ending): a post's completion, a flush error then, is delivered
        // here.
        let defer = !self.post_burst.is_zero()
            && !inner.conn.is_write_closed()
            && inner
                .last_post_write
                .is_some_and(|t| t.elapsed() < self.post_burst);
        if defer {
            self.tx_wake.notify_one();
        } else {
            let before = inner.conn.octets_written();
            self.after_engine_handoff(&mut inner);
            if inner.conn.octets_written() != before {
                // From the end of the write: writing 64 KiB takes longer
                // than the window.
                inner.last_post_write = Some(Instant::now());
            }
        }
        r
    }

    /// Posts one runtime-owned request with `post` (given its id) and
    /// returns what waits for its completion; a refused post frees the id.
    pub(crate) fn post_awaited<E>(
        &self,
        post: impl FnOnce(&mut Inner, u64) -> Result<(), E>,
    ) -> Result<Awaited<'_>, E> {
        let id = self.post_with_engine(|inner| {
            let id = inner.waiters.register();
            post(inner, id).inspect_err(|_| inner.waiters.cancel(id))?;
            Ok(id)
        })?;
        Ok(Awaited {
            shared: self,
            id,
            answered: false,
        })
    }

    /// [`Shared::after_engine`] from anywhere but the writer task: if the
    /// socket is full, the writer takes over.
    fn after_engine_handoff(&self, inner: &mut Inner) {
        if self.after_engine(inner) {
            self.tx_wake.notify_one();
        }
    }

    /// Writes what the connection has to send and acts on its events.
    /// Returns true when the socket is full with octets still to write.
    /// Only the writer task may ignore that: anyone else must hand over to
    /// it (waking it from its own flush would make it spin).
    fn after_engine(&self, inner: &mut Inner) -> bool {
        let conn = &mut inner.conn;
        let mut blocked = false;
        loop {
            if conn.wants_emss() {
                conn.handle_emss(crate::socket::emss(&self.stream));
            }
            let Some(written) = conn.poll_transmit(|iov| sock_io::try_send(&self.stream, iov))
            else {
                break;
            };
            match written {
                Ok(0) => {
                    conn.handle_write_error(LossReason::from_io(&io::ErrorKind::WriteZero.into()))
                }
                Ok(n) => {
                    inner.socket_writes += 1;
                    conn.handle_written(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => conn.handle_write_error(LossReason::from_io(&e)),
            }
        }
        while let Some(event) = inner.conn.poll_event() {
            match event {
                Event::Completion(c) => self.deliver(inner, c),
                Event::SendFin => {
                    log::send_fin(&self.span);
                    let _ = SockRef::from(&self.stream).shutdown(Shutdown::Write);
                    self.tx_wake.notify_one();
                }
                Event::Close => {
                    log::close(&self.span);
                    let _ = SockRef::from(&self.stream).shutdown(Shutdown::Both);
                    self.tx_wake.notify_one();
                }
                Event::Finished => {
                    log::finished(&self.span, inner.conn.error(), &inner.conn.stats());
                    // Nothing can complete any more: those waiting for a
                    // completion learn that the connection ended.
                    inner.waiters.finish();
                    self.tx_wake.notify_one();
                    self.done.notify_waiters();
                }
                Event::Notice(n) => log::notice(&self.span, &n),
                _ => {}
            }
        }
        blocked
    }

    /// Hands one completion to its waiter or queue.
    fn deliver(&self, inner: &mut Inner, c: Completion) {
        log::completion(&self.span, &c);
        if c.wr_id & INTERNAL_WR != 0 {
            inner.waiters.complete(c);
            return;
        }
        match c.opcode {
            CompletionOpcode::Recv => self.recv_cq.push(c),
            _ => self.send_cq.push(c),
        }
    }

    /// Waits until the connection has ended.
    pub(crate) async fn closed(&self) {
        loop {
            let notified = self.done.notified();
            if self.lock().conn.is_finished() {
                return;
            }
            notified.await;
        }
    }

    /// Every user handle was dropped: close the connection.
    pub(crate) fn abandon(&self) {
        self.with_engine(|inner| {
            if !inner.conn.is_finished() {
                log::abandoned(&self.span);
            }
            inner.conn.abort();
        });
    }

    /// Starts a graceful close, and waits until it is done or its timeout
    /// (the connection's disconnect timeout) has turned it into an
    /// abortive one.
    pub(crate) async fn disconnect(&self) {
        self.with_engine(|inner| {
            if !inner.conn.is_finished() {
                log::disconnect(&self.span);
            }
            inner.conn.close_gracefully(Instant::now());
        });
        loop {
            let notified = self.done.notified();
            let deadline = {
                let inner = self.lock();
                if inner.conn.is_finished() {
                    return;
                }
                inner.conn.next_timeout()
            };
            match deadline {
                Some(d) => {
                    let d = tokio::time::Instant::from_std(d);
                    if tokio::time::timeout_at(d, notified).await.is_err() {
                        self.with_engine(|inner| inner.conn.handle_timeout(Instant::now()));
                    }
                }
                None => notified.await,
            }
        }
    }

    pub(crate) fn state(&self) -> QpState {
        self.lock().conn.state()
    }
}

impl Inner {
    pub(crate) fn debug_state(&self) -> String {
        let c = &self.conn;
        format!(
            "qp {:?}; tx pending {} held {}; rx at boundary {} offset {} wants input {}; write closed {} finished {} err {:?}",
            c.state(),
            c.is_transmit_pending(),
            c.is_held(),
            c.deframer().at_boundary(),
            c.deframer().offset(),
            c.wants_input(),
            c.is_write_closed(),
            c.is_finished(),
            c.error()
        )
    }

    /// The MULPDU in force and the EMSS it follows.
    pub(crate) fn mulpdu(&self) -> (usize, usize) {
        (self.conn.qp().mulpdu(), self.conn.emss())
    }

    /// Octets written and read, and payload octets placed directly.
    pub(crate) fn octets(&self) -> (u64, u64, u64) {
        (
            self.conn.octets_written(),
            self.rx.octets,
            self.rx.direct_octets,
        )
    }

    /// System calls that wrote to the socket.
    pub(crate) fn socket_writes(&self) -> u64 {
        self.socket_writes
    }
}

/// The reader task: socket → connection, until the connection stops
/// reading.
async fn reader(shared: Arc<Shared>) {
    loop {
        let (step, deadline) = {
            let mut guard = shared.lock_async().await;
            let inner = &mut *guard;
            let step = read_turn(inner, &shared.stream);
            shared.after_engine_handoff(inner);
            // The connection says when reading is over.
            let step = match step {
                _ if !inner.conn.wants_input() => ReadStep::Done,
                ReadStep::Done => ReadStep::More,
                step => step,
            };
            (step, inner.conn.next_timeout())
        };
        match step {
            ReadStep::More => tokio::task::yield_now().await,
            ReadStep::Done => break,
            // `read_turn` has taken a drained read's octets in.
            ReadStep::Empty | ReadStep::Drained => {
                let readable = shared.stream.readable();
                let ready = match deadline {
                    Some(d) => {
                        let d = tokio::time::Instant::from_std(d);
                        match tokio::time::timeout_at(d, readable).await {
                            Ok(r) => r,
                            Err(_) => {
                                shared
                                    .with_engine(|inner| inner.conn.handle_timeout(Instant::now()));
                                continue;
                            }
                        }
                    }
                    None => readable.await,
                };
                if let Err(e) = ready {
                    shared
                        .with_engine(|inner| inner.conn.handle_read_error(LossReason::from_io(&e)));
                }
            }
        }
    }
}

/// Feeds staged octets and reads more, a few times.
fn read_turn(inner: &mut Inner, stream: &TcpStream) -> ReadStep {
    // Only an idle timer needs to know when octets arrived: without one,
    // the clock is not read for every turn.
    let now = match inner.conn.idle_timeout() {
        Some(_) => Instant::now(),
        None => inner.started,
    };
    for _ in 0..READS_PER_TURN {
        inner.rx.feed(&mut inner.conn, now);
        if !inner.conn.wants_input() {
            return ReadStep::Done;
        }
        match inner.rx.read(&mut inner.conn, stream, now) {
            ReadStep::More => {}
            ReadStep::Drained => {
                inner.rx.feed(&mut inner.conn, now);
                return ReadStep::Empty;
            }
            other => return other,
        }
    }
    inner.rx.feed(&mut inner.conn, now);
    ReadStep::More
}

/// The writer task: waits for the socket to drain when a write could not
/// finish, and ends once the write side is closed.
async fn writer(shared: Arc<Shared>) {
    loop {
        let notified = shared.tx_wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (pending, finished) = {
            let mut guard = shared.lock_async().await;
            let inner = &mut *guard;
            // The writer's own flush: a full socket is what it waits for
            // below, so no hand-over.
            shared.after_engine(inner);
            (
                inner.conn.is_transmit_pending(),
                inner.conn.is_write_closed(),
            )
        };
        if finished {
            break;
        }
        if pending {
            tokio::select! {
                r = shared.stream.writable() => if let Err(e) = r {
                    shared.with_engine(|inner| inner.conn.handle_write_error(LossReason::from_io(&e)));
                    break;
                },
                _ = &mut notified => {}
            }
        } else {
            notified.await;
        }
    }
}

/// The completion of one runtime-owned request: `None` if the connection
/// ended without it. Dropped early, it gives up its slot.
#[derive(Debug)]
pub(crate) struct Awaited<'a> {
    shared: &'a Shared,
    id: u64,
    answered: bool,
}

impl Future for Awaited<'_> {
    type Output = Option<Completion>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut inner = this.shared.lock();
        let finished = inner.conn.is_finished();
        let r = inner.waiters.poll(this.id, cx, finished);
        this.answered = r.is_ready();
        r
    }
}

impl Drop for Awaited<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.shared.lock().waiters.abandon(self.id);
        }
    }
}
