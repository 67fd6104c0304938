//! Client and server sessions: the control protocol around the measurement loop.
//!
//! A session is one control connection, one transport and one [`TestSpec`]: the client says
//! hello, opens the data connections, and runs a warm-up and a measured phase per size, each
//! bracketed by `StartPhase`/`EndPhase` (see `control.rs`). The server serves sessions one at
//! a time (a second client is told the server is busy, so measurements never overlap) until
//! it is stopped.
//!
//! Transport selection happens here, in [`run_client`] and [`serve_session`]: each has one
//! match arm per backend, the only place a new backend must be added.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::{StreamExt, TryStreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use tokio::task::JoinSet;

use super::backend::{Backend, ClientConn, DataListener, ServerConn, Stop};
use super::control::{self, Control, ControlMsg, PeerTally, Phase, CONTROL_TIMEOUT};
use super::error::{PerfError, Result};
use super::iwarp::IwarpBackend;
use super::measure::{run_phase, Limit, PhasePlan};
use super::progress::Counters;
use super::report::RowReport;
use super::spec::{RunLength, TestSpec, Transport};
use super::tcp::TcpBackend;

const VERSION: &str = concat!("iwarp ", env!("CARGO_PKG_VERSION"));
/// Data connections a client opens at once: well below the 256 startups an iWARP listener
/// keeps pending before it drops the oldest.
const CONNECT_CONCURRENCY: usize = 64;

/// Whether this build has a backend for `transport`.
pub fn is_available(transport: Transport) -> bool {
    match transport {
        Transport::Tcp => true,
        // The iWARP backend is not written yet; flip this when it plugs in below.
        Transport::Iwarp => true,
    }
}

/// Hears about a client session as it goes, to print while measuring.
pub trait Observer {
    /// The control and data connections are up; `server` is the control address used.
    fn connected(&mut self, server: SocketAddr);
    /// One size has been measured.
    fn row(&mut self, row: &RowReport);
    /// Every size has been measured: `lines` are the counters of the data connections
    /// that keep them (one per connection, with its index), before they close.
    fn counters(&mut self, lines: &[String]);
}

/// Runs one client session of `transport` against the server at one of `addrs` (tried in
/// order), telling `observer` as it goes, and returns all rows.
pub async fn run_client(
    transport: Transport,
    addrs: &[SocketAddr],
    spec: &TestSpec,
    counters: &Arc<Counters>,
    observer: &mut dyn Observer,
) -> Result<Vec<RowReport>> {
    match transport {
        Transport::Tcp => client_session(&TcpBackend, addrs, spec, counters, observer).await,
        Transport::Iwarp => client_session(&IwarpBackend, addrs, spec, counters, observer).await,
    }
}

/// Opens the control connection to the first address that accepts.
async fn connect_control(addrs: &[SocketAddr]) -> Result<(TcpStream, SocketAddr)> {
    let mut last = None;
    for &addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                // Control traffic is tiny request/response: never wait for Nagle.
                let _ = s.set_nodelay(true);
                return Ok((s, addr));
            }
            Err(source) => last = Some(PerfError::Connect { addr, source }),
        }
    }
    Err(last.unwrap_or_else(|| PerfError::Resolve {
        host: "server".into(),
        reason: "no address to connect to".into(),
    }))
}

async fn client_session<B: Backend>(
    backend: &B,
    addrs: &[SocketAddr],
    spec: &TestSpec,
    counters: &Arc<Counters>,
    observer: &mut dyn Observer,
) -> Result<Vec<RowReport>> {
    let (stream, server) = connect_control(addrs).await?;
    let mut ctl = Control::new(stream, "server");
    let hello = ControlMsg::Hello {
        transport: backend.transport(),
        spec: spec.clone(),
        client: VERSION.into(),
    };
    let (session, data_port) = match ctl
        .request(&hello, "waiting for the server's welcome")
        .await?
    {
        ControlMsg::Welcome {
            session, data_port, ..
        } => (session, data_port),
        other => return Err(control::unexpected(&other, "welcome")),
    };
    let data_addr = SocketAddr::new(server.ip(), data_port);
    // Connections open concurrently: an iWARP connect waits out the startup (an MPA initiator
    // holds its first FPDU for a while after the Reply), so a thousand of them one after the
    // other would take most of a minute.
    let mut conns: Vec<B::Client> = futures_util::stream::iter(0..spec.connections)
        .map(|index| backend.connect(data_addr, session, index, spec))
        .buffered(CONNECT_CONCURRENCY)
        .try_collect()
        .await?;
    observer.connected(server);

    let limit = match spec.length {
        RunLength::Iterations(n) => Limit::Ops(n),
        RunLength::Duration(_) => Limit::Time(spec.length.duration().unwrap_or_default()),
    };
    let mut rows = Vec::with_capacity(spec.sizes.len());
    for &size in &spec.sizes {
        let plan = PhasePlan {
            measure: spec.measure,
            size,
            depth: spec.effective_depth(),
            limit: Limit::Ops(spec.warmup),
            record: false,
            sample_peak: false,
        };
        if spec.warmup > 0 {
            let info = start_phase(&mut ctl, size, Phase::Warmup).await?;
            if let Err(e) = run_phase(&mut conns, plan, info, counters).await {
                return Err(explain(&mut ctl, e).await);
            }
            end_phase(&mut ctl, spec).await?;
        }
        let plan = PhasePlan {
            limit,
            record: true,
            sample_peak: spec.measures_peak(),
            ..plan
        };
        let info = start_phase(&mut ctl, size, Phase::Measure).await?;
        let mut measured = match run_phase(&mut conns, plan, info, counters).await {
            Ok(m) => m,
            Err(e) => return Err(explain(&mut ctl, e).await),
        };
        let tallies = end_phase(&mut ctl, spec).await?;
        let row = RowReport::build(spec, size, &mut measured, &tallies);
        observer.row(&row);
        rows.push(row);
    }
    observer.counters(&counter_lines("client", &conns, ClientConn::counters));
    // Wait for the server to close its end after Bye: it frees its session slot before it
    // closes, so a next session (the baseline, or another run) is never told "busy".
    if ctl.send(&ControlMsg::Bye).await.is_ok() {
        ctl.wait_closed().await;
    }
    Ok(rows)
}

/// When a data connection fails, the server has usually said why on the control connection
/// before closing everything: prefer its message to our "connection reset".
async fn explain(ctl: &mut Control<TcpStream>, e: PerfError) -> PerfError {
    let wait = std::time::Duration::from_millis(500);
    match tokio::time::timeout(wait, ctl.recv("reading the server's last word")).await {
        Ok(Ok(ControlMsg::Error { message })) => PerfError::Remote {
            peer: "server",
            message,
        },
        _ => e,
    }
}

/// Starts a phase; returns the server's per-connection information for `prepare`.
async fn start_phase(
    ctl: &mut Control<TcpStream>,
    size: u64,
    phase: Phase,
) -> Result<Vec<Vec<u8>>> {
    match ctl
        .request(
            &ControlMsg::StartPhase { size, phase },
            "waiting for the server to start a phase",
        )
        .await?
    {
        ControlMsg::PhaseReady { peer_info } => Ok(peer_info),
        other => Err(control::unexpected(&other, "phase_ready")),
    }
}

async fn end_phase(
    ctl: &mut Control<TcpStream>,
    spec: &TestSpec,
) -> Result<Vec<Option<PeerTally>>> {
    match ctl
        .request(&ControlMsg::EndPhase, "waiting for the server's tallies")
        .await?
    {
        ControlMsg::PhaseDone { tallies } if tallies.len() == spec.connections as usize => {
            Ok(tallies)
        }
        ControlMsg::PhaseDone { tallies } => Err(PerfError::Protocol(format!(
            "server reported {} connections, we have {}",
            tallies.len(),
            spec.connections
        ))),
        other => Err(control::unexpected(&other, "phase_done")),
    }
}

/// The counters of each of `conns` that keeps them, a line each naming `side` and the index.
fn counter_lines<C>(side: &str, conns: &[C], counters: fn(&C) -> Option<String>) -> Vec<String> {
    let lines = conns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| counters(c).map(|line| format!("{side} data connection {i}: {line}")));
    lines.collect()
}

/// Where server status lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLog {
    /// One line per session on stderr.
    pub sessions: bool,
    /// Each data connection's counters on stdout at the end of a session (`-v`).
    pub counters: bool,
}

/// Serves sessions on `listener` one at a time, forever; data listeners bind to
/// `data_ip:data_port`. Errors of one session are logged and do not stop the server.
pub async fn serve(listener: TcpListener, data_ip: IpAddr, data_port: u16, log: ServerLog) {
    let busy = Arc::new(Semaphore::new(1));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Typically out of file descriptors: back off instead of spinning.
                if log.sessions {
                    eprintln!("iwarp perf server: accept failed: {e}");
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let busy = busy.clone();
        tokio::spawn(async move {
            let mut ctl = Control::new(stream, "client");
            let Ok(permit) = busy.try_acquire_owned() else {
                let msg = ControlMsg::Error {
                    message: "server busy with another session; try again later".into(),
                };
                let _ = ctl.send(&msg).await;
                return;
            };
            let result = serve_session(&mut ctl, data_ip, data_port).await;
            // Printed before the close, which the client waits for: a loopback run's lines
            // come out in order.
            if let (Ok((_, lines)), true) = (&result, log.counters) {
                for line in lines {
                    super::out(line);
                }
            }
            // Free the slot before closing the control connection: the client waits for the
            // close before it starts its next session.
            drop(permit);
            drop(ctl);
            match result {
                Ok((summary, _)) if log.sessions => {
                    eprintln!("iwarp perf server: {peer}: {summary}");
                }
                Err(e) if log.sessions => {
                    eprintln!("iwarp perf server: {peer}: session failed: {e}");
                }
                _ => {}
            }
        });
    }
}

/// Serves one session on an accepted control connection; returns a one-line summary and
/// the counters of its data connections.
pub async fn serve_session(
    ctl: &mut Control<TcpStream>,
    data_ip: IpAddr,
    data_port: u16,
) -> Result<(String, Vec<String>)> {
    let (transport, spec) = match ctl.recv_reply("waiting for the client's hello").await? {
        ControlMsg::Hello {
            transport, spec, ..
        } => (transport, spec),
        other => {
            let e = control::unexpected(&other, "hello");
            refuse(ctl, &e).await;
            return Err(e);
        }
    };
    if let Err(reason) = spec.validate() {
        let e = PerfError::Protocol(format!("invalid test spec: {reason}"));
        refuse(ctl, &e).await;
        return Err(e);
    }
    let result = match transport {
        Transport::Tcp => serve_with(&TcpBackend, ctl, &spec, data_ip, data_port).await,
        Transport::Iwarp => serve_with(&IwarpBackend, ctl, &spec, data_ip, data_port).await,
    };
    match result {
        Ok(counters) => Ok((
            format!(
                "{} {} over {transport}, {} size(s), {} connection(s): done",
                spec.test,
                spec.measure,
                spec.sizes.len(),
                spec.connections
            ),
            counters,
        )),
        Err(e) => {
            refuse(ctl, &e).await;
            Err(e)
        }
    }
}

/// Tells the client why the session ends (best effort: it may be gone already).
async fn refuse(ctl: &mut Control<TcpStream>, e: &PerfError) {
    let msg = ControlMsg::Error {
        message: e.to_string(),
    };
    let _ = ctl.send(&msg).await;
}

fn next_session_id() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // Unique within this server; the clock part makes ids of a restarted server differ.
    let clock = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    clock ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(48)
}

async fn serve_with<B: Backend>(
    backend: &B,
    ctl: &mut Control<TcpStream>,
    spec: &TestSpec,
    data_ip: IpAddr,
    data_port: u16,
) -> Result<Vec<String>> {
    let mut listener = backend.listen(data_ip, data_port, spec).await?;
    let session = next_session_id();
    ctl.send(&ControlMsg::Welcome {
        session,
        data_port: listener.port(),
        server: VERSION.into(),
    })
    .await?;

    let n = spec.connections as usize;
    let mut slots: Vec<Option<<B::Listener as DataListener>::Conn>> =
        (0..n).map(|_| None).collect();
    let accept_all = async {
        for _ in 0..n {
            let (index, conn) = listener.accept(session).await?;
            match slots.get_mut(index as usize) {
                Some(slot @ None) => *slot = Some(conn),
                _ => {
                    return Err(PerfError::Protocol(format!(
                        "data connection index {index} out of range or duplicated"
                    )))
                }
            }
        }
        Ok(())
    };
    tokio::time::timeout(CONTROL_TIMEOUT, accept_all)
        .await
        .map_err(|_| PerfError::Timeout {
            what: "waiting for the client's data connections".into(),
            secs: CONTROL_TIMEOUT.as_secs(),
        })??;
    let mut conns: Vec<_> = slots.into_iter().flatten().collect();
    drop(listener);

    loop {
        match ctl.recv("waiting for the client's next phase").await? {
            ControlMsg::StartPhase { size, .. } => {
                if !spec.sizes.contains(&size) {
                    return Err(PerfError::Protocol(format!(
                        "phase size {size} is not in the session's spec"
                    )));
                }
                serve_phase(ctl, &mut conns, size).await?;
            }
            ControlMsg::Bye => return Ok(counter_lines("server", &conns, ServerConn::counters)),
            other => return Err(control::unexpected(&other, "start_phase or bye")),
        }
    }
}

/// What a server phase task hands back when joined.
type Joined<S> = std::result::Result<(usize, S, Result<Option<PeerTally>>), tokio::task::JoinError>;

/// Runs one phase on all data connections: starts them, acknowledges, waits for `EndPhase`
/// (failing early if a connection fails), stops them and reports their tallies.
async fn serve_phase<S: ServerConn>(
    ctl: &mut Control<TcpStream>,
    conns: &mut Vec<S>,
    size: u64,
) -> Result<()> {
    let n = conns.len();
    let mut peer_info = Vec::with_capacity(n);
    for conn in conns.iter_mut() {
        peer_info.push(conn.prepare_phase(size).await?);
    }
    let mut stops: Vec<oneshot::Sender<()>> = Vec::with_capacity(n);
    let mut set = JoinSet::new();
    for (index, mut conn) in conns.drain(..).enumerate() {
        let (trigger, stop) = Stop::new();
        stops.push(trigger);
        set.spawn(async move {
            let r = conn.serve_phase(size, stop).await;
            (index, conn, r)
        });
    }
    ctl.send(&ControlMsg::PhaseReady { peer_info }).await?;

    let mut done: Vec<Option<(S, Option<PeerTally>)>> = (0..n).map(|_| None).collect();
    let mut collect = |joined: Option<Joined<S>>| match joined {
        Some(Ok((index, conn, Ok(tally)))) => {
            if let Some(slot) = done.get_mut(index) {
                *slot = Some((conn, tally));
            }
            Ok(())
        }
        Some(Ok((_, _, Err(e)))) => Err(e),
        Some(Err(e)) => Err(PerfError::Internal(format!("connection task failed: {e}"))),
        None => Ok(()),
    };

    // Wait for EndPhase; a connection that ends on its own before that has failed (or has
    // nothing to do), so check each as it finishes. `recv` is pinned outside the loop so that
    // a half-read control frame is never dropped.
    let msg = {
        let recv = ctl.recv("waiting for the end of the phase");
        tokio::pin!(recv);
        loop {
            tokio::select! {
                msg = &mut recv => break msg?,
                joined = set.join_next(), if !set.is_empty() => collect(joined)?,
            }
        }
    };
    match msg {
        ControlMsg::EndPhase => {}
        other => return Err(control::unexpected(&other, "end_phase")),
    }
    for trigger in stops {
        let _ = trigger.send(());
    }
    while !set.is_empty() {
        let joined = tokio::time::timeout(CONTROL_TIMEOUT, set.join_next())
            .await
            .map_err(|_| PerfError::Timeout {
                what: "stopping the data connections".into(),
                secs: CONTROL_TIMEOUT.as_secs(),
            })?;
        collect(joined)?;
    }
    let mut tallies = Vec::with_capacity(n);
    for slot in done {
        let (conn, tally) =
            slot.ok_or_else(|| PerfError::Internal("a data connection task vanished".into()))?;
        conns.push(conn);
        tallies.push(tally);
    }
    ctl.send(&ControlMsg::PhaseDone { tallies }).await
}
