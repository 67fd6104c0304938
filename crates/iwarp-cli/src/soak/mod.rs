//! `iwarp soak`: a soak test. Many connections of mixed Send, RDMA Write and
//! RDMA Read traffic for a set time, every octet checked, and a summary:
//! operations done, octets verified, errors (0 for a good run).
//!
//! It is a subcommand of the tool rather than a test binary so that the
//! same build runs on both ends of any network (two hosts, two network
//! namespaces across a lossy router, as `scripts/soak.sh` does), and so
//! that one end can be killed, stopped or starved while the other goes on.
//! Without `--server` or `--connect` both ends run in this process over
//! loopback.
//!
//! | module | role |
//! | --- | --- |
//! | [`args`] | command line |
//! | [`wire`] | the private data and the header of every Send |
//! | [`pattern`] | the data, which either end regenerates to check |
//! | [`client`] | connections of lanes of random operations |
//! | [`server`] | checks what arrives, acknowledges each operation |
//! | [`summary`] | counters and the closing line |
//!
//! Each client connection runs `--depth` lanes; a lane issues one operation
//! at a time on its own slots: a Send (header and payload, checked by the
//! server), an RDMA Write into its landing slot followed by a Send that
//! names it (checked by the server), or an RDMA Read of a random range of
//! the server's source region (checked here). The server answers every
//! Send with an ack Send that says what it verified and carries a payload
//! of its own, which the client checks.

pub mod args;
pub mod client;
pub mod pattern;
pub mod server;
pub mod summary;
pub mod wire;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use args::SoakArgs;
use summary::{bump, Counters, Summary};

/// What stops a soak connection or run.
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    /// The stack refused or failed something.
    #[error("{0}")]
    Iwarp(#[from] iwarp::Error),
    /// The connection stopped.
    #[error("connection: {0}")]
    Connection(#[from] iwarp::ConnectionError),
    /// The other end did not speak the soak protocol.
    #[error("protocol: {0}")]
    Protocol(String),
    /// An operation took longer than `--op-timeout`.
    #[error("an operation took longer than {0:?}")]
    Timeout(Duration),
    /// A socket address or a signal handler.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The largest ack payload for operations of at most `max` octets.
pub fn ack_len(max: usize) -> usize {
    max.min(64 * 1024)
}

/// The ack payload length of operation `op`: from 0 to [`ack_len`],
/// known to both ends.
pub fn ack_payload_len(op: u32, max: usize) -> usize {
    (pattern::seed(0, op, pattern::Stream::Ack, op) % (ack_len(max) as u64 + 1)) as usize
}

/// Runs `iwarp soak`; the exit status is 0 only for a run without errors, 1 for a run
/// with errors or one that could not start (status 2 is kept for usage errors).
pub async fn main(args: SoakArgs) -> ExitCode {
    match run(&args).await {
        Ok(summary) if summary.errors == 0 => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("iwarp soak: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `iwarp soak` with parsed arguments and returns its summary (also
/// printed).
pub async fn run(args: &SoakArgs) -> Result<Summary, SoakError> {
    let counters = Arc::new(Counters::default());
    let start = Instant::now();
    if args.server {
        let listener = server::listen(&args.addr, args.port).await?;
        eprintln!("iwarp soak: serving on {}", listener.local_addr());
        let lines = if args.json {
            server::Lines::Json
        } else {
            server::Lines::Text
        };
        server::serve(listener, counters.clone(), lines, interrupted()).await;
        let summary = Summary::from_counters(&counters, start.elapsed().as_secs_f64(), 0);
        println!("{}", summary.line(args.json));
        return Ok(summary);
    }
    let (addr, server) = match &args.connect {
        Some(target) => (resolve(target, args.port).await?, None),
        None => {
            let listener = server::listen("127.0.0.1", 0).await?;
            let addr = listener.local_addr();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            // Its own counters: the client's acks already report what it
            // verified, and its errors are the client's too.
            let server_counters = Arc::new(Counters::default());
            let task = tokio::spawn(server::serve(
                listener,
                server_counters,
                server::Lines::Quiet,
                async {
                    let _ = stopped.await;
                },
            ));
            (addr, Some((stop, task)))
        }
    };
    let now = Instant::now();
    let run = client::Run {
        addr,
        seed: args.seed,
        depth: args.depth.max(1),
        max_size: args.max_size.max(1),
        until: now + args.duration() + args.idle(),
        idle: args.idle(),
        idle_at: now + args.duration() / 2,
        op_timeout: args.op_timeout(),
    };
    let progress = tokio::spawn(progress(counters.clone(), start, args.json));
    let connections = (0..args.connections).map(|n| {
        let (run, counters) = (&run, &counters);
        async move {
            if let Err(e) = client::connection(run, n, counters).await {
                if !matches!(e, SoakError::Timeout(_)) {
                    bump(&counters.connection_errors);
                }
                eprintln!("iwarp soak: connection {n}: {e}");
            }
        }
    });
    futures_util::future::join_all(connections).await;
    progress.abort();
    if let Some((stop, task)) = server {
        let _ = stop.send(());
        let _ = task.await;
    }
    let summary =
        Summary::from_counters(&counters, start.elapsed().as_secs_f64(), args.connections);
    println!("{}", summary.line(args.json));
    Ok(summary)
}

/// A line on standard error every 10 seconds, so that a long run shows it
/// is alive.
async fn progress(counters: Arc<Counters>, start: Instant, json: bool) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    tick.tick().await;
    loop {
        tick.tick().await;
        let s = Summary::from_counters(&counters, start.elapsed().as_secs_f64(), 0);
        if !json {
            eprintln!(
                "  {:.0} s: {} operations, {} octets verified, {} errors",
                s.seconds, s.operations, s.bytes_verified, s.errors
            );
        }
    }
}

/// Completes on SIGINT or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// `HOST[:PORT]` to an address.
async fn resolve(target: &str, default_port: u16) -> Result<SocketAddr, SoakError> {
    let with_port = if target.parse::<SocketAddr>().is_ok()
        || target
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok())
    {
        target.to_string()
    } else {
        format!("{target}:{default_port}")
    };
    tokio::net::lookup_host(with_port)
        .await?
        .next()
        .ok_or_else(|| SoakError::Protocol(format!("no address for {target}")))
}
