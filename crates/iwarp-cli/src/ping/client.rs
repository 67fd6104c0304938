//! The client side: rping's `-c`.
//!
//! The client owns the data. Per ping it writes the text into its start buffer (remote read
//! only), Sends the start buffer's advertisement, waits for the server's "go" (the server has
//! RDMA-Read the text by then), Sends its sink buffer's advertisement (remote write only),
//! waits for the second "go" (the server has RDMA-Written the text back), then optionally
//! compares the two buffers (`-V`) and prints the text (`-v`). A round trip is measured from
//! the first Send to the second "go": two Sends each way, one Read, one Write.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::net::{TcpSocket, TcpStream};

use iwarp::{Access, MemoryRegion};

use super::args::PingConfig;
use super::endpoint::{register, Buffers, Endpoint};
use super::error::{Peer, PingError, Result};
use super::message::{advertise, c_str, fill, ping_number};
use super::report::{RttStats, Summary};
use super::Log;

/// What the client was asked to do.
#[derive(Debug, Clone)]
pub struct ClientJob<'a> {
    /// The server as given.
    pub host: &'a str,
    /// The server's port.
    pub port: u16,
    /// Source address to bind to.
    pub source: Option<IpAddr>,
    /// Pings to run; `None`: until interrupted.
    pub count: Option<u64>,
    /// Compare what comes back with what was sent.
    pub validate: bool,
}

/// Connects, pings, disconnects, and prints the summary (also after an error, once
/// connected, so that a run that fails late still reports what worked).
pub async fn run(cfg: &PingConfig, job: &ClientJob<'_>) -> Result<()> {
    let log = Log::from(cfg);
    let addrs = resolve(job.host, job.port, job.source).await?;
    let (stream, addr) = tcp_connect(&addrs, job.source, cfg.timeout).await?;
    log.debug(format_args!("TCP connected to {addr}"));

    let buffers = Buffers::new()?;
    // Least privilege: the server only reads the start buffer and only writes the sink;
    // rping grants both rights on both, which makes no difference on the wire.
    let start = register(&buffers.pd, cfg.size as usize, Access::REMOTE_READ)?;
    let sink = register(&buffers.pd, cfg.size as usize, Access::REMOTE_WRITE)?;
    let options = buffers.qp_options()?;
    // rping sends no private data.
    let qp = iwarp::connect_stream(stream, &cfg.iwarp_config(), options, &[])
        .await
        .map_err(|e| PingError::startup(addr, e, cfg.startup.markers))?;
    let ep = Endpoint::new(qp, buffers, Peer::Server, cfg.timeout);
    log.debug(format_args!("connected: {}", ep.describe()));

    let target = if job.host == addr.ip().to_string() {
        addr.to_string()
    } else {
        format!("{} ({addr})", job.host)
    };
    let pinger = Pinger {
        ep: &ep,
        start,
        sink,
        size: cfg.size,
        validate: job.validate,
        log,
    };
    let (rtt, elapsed, interrupted, outcome) = pinger.run(job.count).await;
    // As rping: disconnect whatever happened.
    log.debug(format_args!("disconnecting"));
    ep.disconnect().await;
    let summary = Summary {
        target,
        size: cfg.size,
        rtt,
        elapsed,
        interrupted,
    };
    let text = if cfg.json {
        let error = outcome.as_ref().err().map(ToString::to_string);
        format!("{}\n", summary.json(error.as_deref()))
    } else {
        summary.render()
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    outcome
}

/// The buffers and settings of the ping loop.
struct Pinger<'a> {
    ep: &'a Endpoint,
    start: MemoryRegion,
    sink: MemoryRegion,
    size: u32,
    validate: bool,
    log: Log,
}

impl Pinger<'_> {
    /// Pings `count` times (for ever if `None`) or until Ctrl-C or an error. Ctrl-C lets the
    /// ping in progress finish. Returns the
    /// statistics, the elapsed time, whether Ctrl-C stopped it, and the error, if any.
    async fn run(&self, count: Option<u64>) -> (RttStats, Duration, bool, Result<()>) {
        let interrupt = interrupted();
        tokio::pin!(interrupt);
        let mut rtt = RttStats::default();
        let began = Instant::now();
        let mut index = 0u64;
        let mut was_interrupted = false;
        let outcome = loop {
            if was_interrupted || count.is_some_and(|c| index >= c) {
                break Ok(());
            }
            let t0 = Instant::now();
            let ping = self.ping(index);
            tokio::pin!(ping);
            let r = tokio::select! {
                r = &mut ping => r,
                () = &mut interrupt, if !was_interrupted => {
                    was_interrupted = true;
                    // Finish this ping, so that both ends stop between pings (a server
                    // sees a clean disconnect, not one in the middle of its work); a
                    // second Ctrl-C abandons it.
                    tokio::select! {
                        r = &mut ping => r,
                        () = interrupted() => break Ok(()),
                    }
                }
            };
            match r {
                Ok(()) => rtt.add(t0.elapsed()),
                Err(e) => break Err(e),
            }
            index += 1;
        };
        (rtt, began.elapsed(), was_interrupted, outcome)
    }

    /// One ping: the four steps of rping's client loop.
    async fn ping(&self, index: u64) -> Result<()> {
        let n = ping_number(index);
        let local = |what: &str, source| PingError::Local {
            what: what.to_string(),
            source,
        };
        self.start.write_with(|b| fill(b, index));
        // A fresh sink each time, so that a server that writes nothing cannot pass -V with
        // the previous ping's data.
        self.sink.write_with(|b| b.fill(0));

        let start = advertise(self.start.remote_key(), self.size);
        self.log.debug(format_args!(
            "ping {n}: start buffer at {:#x}, STag {:#x}, {} octets",
            self.start.remote_key().addr,
            self.start.stag().0,
            self.size
        ));
        self.ep
            .send_info(
                &start,
                &format!("during ping {n} (sending the start buffer)"),
            )
            .await?;
        self.ep
            .recv_info(&format!(
                "during ping {n} (waiting for the server's RDMA Read and \"go\")"
            ))
            .await?;
        self.log
            .debug(format_args!("ping {n}: server has read the start buffer"));

        let sink = advertise(self.sink.remote_key(), self.size);
        self.log.debug(format_args!(
            "ping {n}: sink buffer at {:#x}, STag {:#x}, {} octets",
            self.sink.remote_key().addr,
            self.sink.stag().0,
            self.size
        ));
        self.ep
            .send_info(&sink, &format!("during ping {n} (sending the sink buffer)"))
            .await?;
        self.ep
            .recv_info(&format!(
                "during ping {n} (waiting for the server's RDMA Write and \"go\")"
            ))
            .await?;
        self.log
            .debug(format_args!("ping {n}: server has written the data back"));

        let sent = self.start.to_vec();
        let received = self.sink.to_vec();
        if self.validate && sent != received {
            return Err(PingError::Mismatch {
                ping: n,
                sent: String::from_utf8_lossy(c_str(&sent)).into_owned(),
                received: String::from_utf8_lossy(c_str(&received)).into_owned(),
            });
        }
        if self.log.verbose {
            let mut out = std::io::stdout().lock();
            let line = [b"ping data: ", c_str(&received), b"\n"].concat();
            out.write_all(&line)
                .and_then(|()| out.flush())
                .map_err(|e| local("writing to stdout", iwarp::Error::Io(e)))?;
        }
        Ok(())
    }
}

/// Resolves once, at the first Ctrl-C. If the signal cannot be watched, it never resolves
/// (and Ctrl-C ends the process the usual way).
async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The server's addresses, of the source address's family if one is given.
pub(crate) async fn resolve(
    host: &str,
    port: u16,
    source: Option<IpAddr>,
) -> Result<Vec<SocketAddr>> {
    let resolve_error = |reason: String| PingError::Resolve {
        host: host.to_string(),
        reason,
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| resolve_error(e.to_string()))?
        .filter(|a| source.is_none_or(|s| s.is_ipv4() == a.is_ipv4()))
        .collect();
    if addrs.is_empty() {
        return Err(resolve_error(match source {
            Some(s) => format!("no address of the source address {s}'s family"),
            None => "no address".into(),
        }));
    }
    Ok(addrs)
}

/// Makes the TCP connection, from `source` if given, trying each address in turn.
pub(crate) async fn tcp_connect(
    addrs: &[SocketAddr],
    source: Option<IpAddr>,
    timeout: Option<Duration>,
) -> Result<(TcpStream, SocketAddr)> {
    let mut last = None;
    for &addr in addrs {
        match connect_one(addr, source, timeout).await {
            Ok(stream) => return Ok((stream, addr)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| PingError::Usage("no address to connect to".into())))
}

async fn connect_one(
    addr: SocketAddr,
    source: Option<IpAddr>,
    timeout: Option<Duration>,
) -> Result<TcpStream> {
    let io_error = |source| PingError::Connect { addr, source };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(io_error)?;
    if let Some(src) = source {
        socket
            .bind(SocketAddr::new(src, 0))
            .map_err(|e| PingError::Connect {
                addr,
                source: std::io::Error::new(e.kind(), format!("binding to {src}: {e}")),
            })?;
    }
    let attempt = socket.connect(addr);
    let result = match timeout {
        Some(t) => {
            tokio::time::timeout(t, attempt)
                .await
                .map_err(|_| PingError::ConnectTimeout {
                    addr,
                    what: "TCP connect",
                })?
        }
        None => attempt.await,
    };
    result.map_err(|e| match e.kind() {
        std::io::ErrorKind::ConnectionRefused => PingError::Refused { addr },
        _ => io_error(e),
    })
}
