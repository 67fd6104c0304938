//! The connection manager: `connect`, `Listener::bind` / `accept`.
//!
//! A TCP connection is made (or taken over, for a delayed startup after a
//! streaming-mode exchange), the MPA startup frames are exchanged with the
//! sans-IO machines of `iwarp_proto::mpa::startup` (or none, for the
//! immediate-start profile), and the connection then runs in full
//! operation as a [`QueuePair`].
//!
//! The listener runs each incoming startup in its own task, so a slow or
//! silent peer holds up nobody (and when too many are pending, the oldest
//! is closed to make room), and hands only valid requests to
//! [`Listener::accept`]; the application then accepts with its own private
//! data or rejects with a reason.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::future::{AbortHandle, AbortRegistration, Abortable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{lookup_host, TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use iwarp_proto::connection::ConnectionConfig;
use iwarp_proto::framing::StartupMachine;
use iwarp_proto::ift::{self, IftParams, Negotiation};
use iwarp_proto::memory::StreamId;
use iwarp_proto::mpa::startup::{
    Established, Event, ImmediateStart, Initiator, IrdOrd, MpaStartup, PeerRequest, Responder,
    Revision, Role, StartupError,
};
use iwarp_proto::rdmap::QueuePairConfig;

use crate::config::{Config, Framing, QpOptions};
use crate::connection::{Shared, Startup};
use crate::error::ConfigError;
use crate::error::Error;
use crate::info::{ConnectionInfo, FramingInfo, MpaInfo};
use crate::qp::QueuePair;
use crate::socket;
use crate::startup_log::{self, StartupLog};

/// Startups a listener runs at once at most, so that a flood of silent
/// peers costs bounded memory; past it, the oldest is closed for the newest.
const MAX_PENDING_STARTUPS: usize = 256;

/// Accepted requests waiting for [`Listener::accept`].
const ACCEPT_BACKLOG: usize = 64;

/// Octets read at a time during startup.
const STARTUP_READ: usize = 4096;

fn next_stream_id() -> StreamId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    StreamId(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Connects to `addr`, runs the MPA startup as initiator with
/// `private_data`, and returns the queue pair.
pub async fn connect(
    addr: impl ToSocketAddrs,
    config: &Config,
    qp: QpOptions,
    private_data: &[u8],
) -> Result<QueuePair, Error> {
    if config.framing != Framing::Mpa && !private_data.is_empty() {
        return Err(Error::Config(ConfigError::PrivateDataWithoutStartupFrames(
            config.framing,
        )));
    }
    let mut last = None;
    for a in lookup_host(addr).await? {
        match tokio::time::timeout(config.connect_timeout, TcpStream::connect(a)).await {
            Ok(Ok(stream)) => return connect_stream(stream, config, qp, private_data).await,
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                last = Some(Error::Refused(a))
            }
            Ok(Err(e)) => last = Some(Error::Io(e)),
            Err(_) => last = Some(Error::ConnectTimeout(a)),
        }
    }
    Err(last.unwrap_or_else(|| {
        Error::Io(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            "no address to connect to",
        ))
    }))
}

/// Runs the MPA startup as initiator on a connected TCP stream: for a
/// delayed startup, where the application exchanged streaming-mode data
/// first (RFC 5044 §7.1.3); MPA starts at the stream's current position.
pub async fn connect_stream(
    mut stream: TcpStream,
    config: &Config,
    qp: QpOptions,
    private_data: &[u8],
) -> Result<QueuePair, Error> {
    let emss = socket::prepare(&stream, config.nodelay)?;
    let (established, leftover) = match config.framing {
        framing @ (Framing::ImmediateStart | Framing::Ift) if !private_data.is_empty() => {
            return Err(Error::Config(ConfigError::PrivateDataWithoutStartupFrames(
                framing,
            )));
        }
        Framing::ImmediateStart => (immediate(Role::Initiator), Vec::new()),
        Framing::Ift => {
            let (params, leftover) =
                negotiate_ift(&mut stream, ift::Role::Initiator, config).await?;
            return start(
                stream,
                Settled::Ift(params, Role::Initiator),
                &leftover,
                config,
                qp,
                emss,
            );
        }
        Framing::Mpa => {
            let mut m = Initiator::new(config.startup.clone(), private_data, Instant::now())?;
            let (event, leftover) = drive(&mut stream, &mut m, Vec::new()).await?;
            match event {
                Event::Established(e) => (e, leftover),
                // RFC 5044 §7.1.2 rule 3: MPA is over, TCP is not.
                Event::Rejected(r) => {
                    return Err(Error::Rejected {
                        private_data: r.private_data,
                        stream,
                        after_reply: leftover,
                    })
                }
                Event::Refused(e) => return Err(Error::Startup(e)),
                // An initiator receives no Request: it fails on one.
                _ => return Err(Error::Startup(StartupError::WrongState(m.state()))),
            }
        }
    };
    start(
        stream,
        Settled::Mpa(established),
        &leftover,
        config,
        qp,
        emss,
    )
}

/// What a startup settled, by framing.
#[derive(Debug)]
enum Settled {
    Mpa(Established),
    /// IFT's parameters and this end's role (node A initiates).
    Ift(IftParams, Role),
}

/// A VTag for a new IFT connection. draft-williams-iwarp-ift-01 §4.2: it
/// SHOULD be random; std's hasher keys come from the operating system's
/// random source, which is plenty for a 16-bit tag.
//= draft-williams-iwarp-ift-01#4.2
//# The sender's VTag is a 16 bit value that SHOULD be selected at random using a good random
//# number generator.
fn random_vtag() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(u64::from(std::process::id()));
    h.finish() as u16
}

/// Exchanges IFT Adaption Indications. Returns the settled parameters and
/// the octets read past the peer's indication (the first frames).
async fn negotiate_ift(
    stream: &mut TcpStream,
    role: ift::Role,
    config: &Config,
) -> Result<(IftParams, Vec<u8>), Error> {
    let mut ift_config = config.ift;
    ift_config.vtag = random_vtag();
    let mut n = Negotiation::new(role, ift_config, Instant::now());
    drive(stream, &mut n, Vec::new()).await
}

/// The outcome of the immediate-start profile, which has no exchange.
fn immediate(role: Role) -> Established {
    match ImmediateStart::new(role).poll_event() {
        Some(Event::Established(e)) => e,
        _ => unreachable!("the immediate-start profile is established at once"),
    }
}

/// One read during startup, bounded by the machine's deadline: `None`
/// when the deadline passed first, `Some(0)` at the end of the stream.
async fn read_until(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Option<Instant>,
) -> Result<Option<usize>, Error> {
    let read = match deadline {
        Some(d) => {
            let d = tokio::time::Instant::from_std(d);
            match tokio::time::timeout_at(d, stream.read(buf)).await {
                Ok(r) => r,
                Err(_elapsed) => return Ok(None),
            }
        }
        None => stream.read(buf).await,
    };
    Ok(Some(read?))
}

/// Exchanges startup octets, MPA's frames or IFT's indications, until the
/// machine reports an event. Returns the event and the octets read past
/// the peer's startup message.
///
/// A machine that fails may still owe the peer a last FPDU (the Terminate
/// an initiator sends after a valid Reply it cannot use, RFC 6581): it is
/// sent, and the write side closed, before the error is returned and the
/// stream dropped.
async fn drive<M>(
    stream: &mut TcpStream,
    m: &mut M,
    pending: Vec<u8>,
) -> Result<(M::Event, Vec<u8>), Error>
where
    M: StartupMachine,
    Error: From<M::Error>,
{
    let mut log = StartupLog::new(stream.peer_addr().ok());
    let result = exchange(stream, m, pending, &mut log).await;
    if let Err(e) = &result {
        log.failed(e);
        let mut owed = false;
        while let Some(out) = m.poll_transmit() {
            owed = true;
            log.sent(&out);
            if stream.write_all(&out).await.is_err() {
                break;
            }
        }
        if owed {
            let _ = stream.shutdown().await;
        }
    }
    result
}

/// The exchange of [`drive`].
async fn exchange<M>(
    stream: &mut TcpStream,
    m: &mut M,
    mut pending: Vec<u8>,
    log: &mut StartupLog,
) -> Result<(M::Event, Vec<u8>), Error>
where
    M: StartupMachine,
    Error: From<M::Error>,
{
    let mut buf = vec![0u8; STARTUP_READ];
    loop {
        while let Some(out) = m.poll_transmit() {
            log.sent(&out);
            stream.write_all(&out).await?;
        }
        if let Some(event) = m.poll_event() {
            return Ok((event, pending));
        }
        if let Some(e) = m.error() {
            return Err(e.clone().into());
        }
        if !pending.is_empty() {
            let used = m.handle_input(&pending, Instant::now())?;
            log.took(&pending[..used]);
            pending.drain(..used);
            if used > 0 {
                continue;
            }
        }
        match read_until(stream, &mut buf, m.poll_timeout()).await? {
            None => m.handle_timeout(Instant::now())?,
            Some(0) => m.handle_eof()?,
            Some(n) => {
                let used = m.handle_input(&buf[..n], Instant::now())?;
                log.took(&buf[..used]);
                pending.extend_from_slice(&buf[used..n]);
            }
        }
    }
}

/// Starts full operation on an established connection.
fn start(
    stream: TcpStream,
    settled: Settled,
    leftover: &[u8],
    config: &Config,
    qp: QpOptions,
    emss: usize,
) -> Result<QueuePair, Error> {
    let mut engine = QueuePairConfig::new(qp.pd.id, next_stream_id());
    engine.send_queue_depth = config.send_queue_depth;
    engine.recv_queue_depth = config.recv_queue_depth;
    engine.ird = usize::from(config.startup.ird);
    engine.ord = usize::from(config.startup.ord);
    let (role, framing, mut conn) = match settled {
        Settled::Mpa(established) => {
            let mut conn = ConnectionConfig::mpa(&established, config.placement, engine);
            // RFC 5044 §7.1.2 rule 4, unless the application asked to
            // behave as Linux siw does.
            conn.hold_until_received &= !config.responder_sends_first;
            let framing = match established.revision {
                Some(revision) => FramingInfo::Mpa(MpaInfo {
                    revision,
                    params: established.framing,
                    ird_ord: established.ird_ord,
                    rtr: established.rtr,
                    peer_private_data: established.private_data,
                }),
                None => FramingInfo::ImmediateStart,
            };
            (established.role, framing, conn)
        }
        Settled::Ift(params, role) => (
            role,
            FramingInfo::Ift(params),
            ConnectionConfig::ift(params, engine),
        ),
    };
    conn.emss = emss;
    conn.idle_timeout = config.idle_timeout;
    conn.disconnect_timeout = config.disconnect_timeout;
    let info = ConnectionInfo {
        role,
        framing,
        emss,
        // Set from the connection, which derives it from the EMSS.
        mulpdu: 0,
    };
    let shared = Shared::start(Startup {
        stream,
        table: qp.pd.device().table().clone(),
        config: conn,
        info,
        leftover,
        send_cq: qp.send_cq,
        recv_cq: qp.recv_cq,
        initial_recvs: qp.initial_recvs,
        post_burst: config.post_burst,
    })?;
    startup_log::established(&shared.span, &shared.info);
    Ok(QueuePair::new(shared))
}

/// Listens for iWARP connections.
#[derive(Debug)]
pub struct Listener {
    local: SocketAddr,
    incoming: mpsc::Receiver<ConnectRequest>,
    task: JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Listener {
    /// Binds a TCP listener at `addr`; incoming connections run their
    /// startup with `config`.
    pub async fn bind(addr: impl ToSocketAddrs, config: Config) -> Result<Self, Error> {
        let tcp = TcpListener::bind(addr).await?;
        let local = tcp.local_addr()?;
        let (tx, incoming) = mpsc::channel(ACCEPT_BACKLOG);
        let config = Arc::new(config);
        let task = tokio::spawn(listen(tcp, config, tx));
        Ok(Self {
            local,
            incoming,
            task,
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next connection request whose startup frame was valid.
    /// Connections whose startup failed (malformed or silent peers) are
    /// closed and never show up here.
    pub async fn accept(&mut self) -> Result<ConnectRequest, Error> {
        self.incoming.recv().await.ok_or(Error::ListenerClosed)
    }
}

/// The startups a listener is running, oldest first, each with the handle
/// that ends it.
#[derive(Debug, Default)]
struct PendingStartups {
    next_id: u64,
    queue: VecDeque<(u64, AbortHandle)>,
}

impl PendingStartups {
    /// Makes room for one more startup: at the limit, the oldest gives way
    /// (its connection is closed). Waiting for a slot instead would let a
    /// flood of silent peers hold every slot and keep real clients out.
    fn admit(&mut self) -> (u64, AbortRegistration) {
        if self.queue.len() >= MAX_PENDING_STARTUPS {
            if let Some((_, oldest)) = self.queue.pop_front() {
                oldest.abort();
            }
        }
        let (handle, registration) = AbortHandle::new_pair();
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back((id, handle));
        (id, registration)
    }

    fn finished(&mut self, id: u64) {
        if let Some(at) = self.queue.iter().position(|(i, _)| *i == id) {
            self.queue.remove(at);
        }
    }
}

async fn listen(tcp: TcpListener, config: Arc<Config>, tx: mpsc::Sender<ConnectRequest>) {
    let pending = Arc::new(Mutex::new(PendingStartups::default()));
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                // Out of descriptors and the like: do not spin.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let (id, registration) = lock(&pending).admit();
        let config = config.clone();
        let tx = tx.clone();
        let pending = pending.clone();
        let startup = async move {
            match accept_stream(stream, &config, &[]).await {
                Ok(request) => {
                    let _ = tx.send(request).await;
                }
                Err(e) => tracing::debug!(%peer, error = %e, "incoming startup failed"),
            }
        };
        // A request waiting for `accept` still counts until it is taken.
        tokio::spawn(async move {
            if Abortable::new(startup, registration).await.is_err() {
                tracing::debug!(%peer, "incoming startup closed to make room for a newer one");
            }
            lock(&pending).finished(id);
        });
    }
}

fn lock(pending: &Mutex<PendingStartups>) -> std::sync::MutexGuard<'_, PendingStartups> {
    pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs the MPA startup as responder on a connected TCP stream, up to the
/// application's decision: for a delayed startup (RFC 5044 §7.1.3). A
/// non-empty `last_streaming_message` is sent first, as the responder's
/// last streaming-mode message (RFC 5044 §7.1.5 item 2).
pub async fn accept_stream(
    mut stream: TcpStream,
    config: &Config,
    last_streaming_message: &[u8],
) -> Result<ConnectRequest, Error> {
    let peer = stream.peer_addr()?;
    let emss = socket::prepare(&stream, config.nodelay)?;
    let (machine, request, leftover) = match config.framing {
        Framing::ImmediateStart => {
            if !last_streaming_message.is_empty() {
                stream.write_all(last_streaming_message).await?;
            }
            (Machine::Immediate, None, Vec::new())
        }
        Framing::Ift => {
            if !last_streaming_message.is_empty() {
                stream.write_all(last_streaming_message).await?;
            }
            // IFT has no application decision in its exchange: the
            // indications are traded here, the application then accepts
            // (starts the data path) or rejects (closes).
            let (params, leftover) =
                negotiate_ift(&mut stream, ift::Role::Responder, config).await?;
            (Machine::Ift(params), None, leftover)
        }
        Framing::Mpa => {
            let mut m = Responder::with_last_streaming_message(
                config.startup.clone(),
                last_streaming_message,
                Instant::now(),
            )?;
            let (event, leftover) = drive(&mut stream, &mut m, Vec::new()).await?;
            let request = match event {
                Event::RequestReceived(request) => request,
                Event::Refused(e) => return Err(Error::Startup(e)),
                // A responder settles nothing before its application's
                // decision.
                _ => return Err(Error::Startup(StartupError::WrongState(m.state()))),
            };
            (Machine::Mpa(Box::new(m)), Some(request), leftover)
        }
    };
    Ok(ConnectRequest {
        stream,
        machine,
        request,
        leftover,
        peer,
        emss,
        config: config.clone(),
    })
}

#[derive(Debug)]
enum Machine {
    Mpa(Box<Responder>),
    Immediate,
    Ift(IftParams),
}

/// A connection request waiting for the application's decision.
#[derive(Debug)]
pub struct ConnectRequest {
    stream: TcpStream,
    machine: Machine,
    request: Option<PeerRequest>,
    leftover: Vec<u8>,
    peer: SocketAddr,
    emss: usize,
    config: Config,
}

impl ConnectRequest {
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The MPA Request as received; `None` for the immediate-start
    /// profile, which has none.
    pub fn request(&self) -> Option<&PeerRequest> {
        self.request.as_ref()
    }

    /// The MPA revision the peer sent.
    pub fn revision(&self) -> Option<Revision> {
        self.request.as_ref().map(|r| r.revision)
    }

    /// The peer's private data (without revision 2's enhanced octets).
    pub fn private_data(&self) -> &[u8] {
        self.request.as_ref().map_or(&[], |r| &r.private_data)
    }

    /// Accepts the connection, answering with `private_data`.
    pub async fn accept(self, qp: QpOptions, private_data: &[u8]) -> Result<QueuePair, Error> {
        self.accept_with(qp, private_data, None).await
    }

    /// Accepts with this end's own IRD/ORD, at most what the request
    /// proposed (revision 2 enhanced requests).
    pub async fn accept_with(
        mut self,
        qp: QpOptions,
        private_data: &[u8],
        ird_ord: Option<IrdOrd>,
    ) -> Result<QueuePair, Error> {
        let settled = match &mut self.machine {
            Machine::Immediate => Settled::Mpa(immediate(Role::Responder)),
            Machine::Ift(params) => Settled::Ift(*params, Role::Responder),
            Machine::Mpa(m) => {
                // The application may have taken longer than allowed.
                m.handle_timeout(Instant::now())?;
                m.accept_with(private_data, ird_ord)?;
                while let Some(out) = m.poll_transmit() {
                    StartupLog::new(Some(self.peer)).sent(&out);
                    self.stream.write_all(&out).await?;
                }
                Settled::Mpa(
                    m.established()
                        .cloned()
                        .ok_or_else(|| Error::Startup(StartupError::WrongState(m.state())))?,
                )
            }
        };
        start(
            self.stream,
            settled,
            &self.leftover,
            &self.config,
            qp,
            self.emss,
        )
    }

    /// Rejects the connection with `private_data` (usually the reason):
    /// an MPA Reply with the Rejected bit is sent and MPA ends. The TCP
    /// connection is left open and handed back (RFC 5044 §7.1.2 rule 2):
    /// drop it to close it. With the immediate-start profile there is no
    /// frame to send, nor with IFT; the stream is handed back as it is.
    pub async fn reject(mut self, private_data: &[u8]) -> Result<TcpStream, Error> {
        if let Machine::Mpa(m) = &mut self.machine {
            m.reject(private_data)?;
            while let Some(out) = m.poll_transmit() {
                StartupLog::new(Some(self.peer)).sent(&out);
                self.stream.write_all(&out).await?;
            }
        }
        Ok(self.stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each connection draws its own VTag: eight in a row are not all the
    /// same (the chance that they would be, drawn at random, is 2^-112).
    //= draft-williams-iwarp-ift-01#4.2
    //= type=test
    //# The sender's VTag is a 16 bit value that SHOULD be selected at
    //# random using a good random number generator.
    #[test]
    fn vtags_are_drawn_at_random() {
        let first = random_vtag();
        assert!((0..7).any(|_| random_vtag() != first));
    }
}
