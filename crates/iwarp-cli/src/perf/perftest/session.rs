//! One perftest run at one end: the exchange channel, the data connections, the script of
//! [`super::script`] step by step, and what perftest prints along the way.
//!
//! Whatever goes wrong, the peer sees a clean end: the data connections and the exchange
//! channel are closed gracefully (or a data connection for another test is refused with an
//! MPA Reject), and this end reports one line saying why.

use std::net::SocketAddr;
use std::time::Duration;

use iwarp::{
    CompletionQueue, Config, CrcPolicy, IrdOrd, Listener, ProtectionDomain, QpOptions, QueuePair,
    Revision,
};

use crate::perf::error::{PerfError, Result};
use crate::perf::out;
use crate::perf::report::RESULT_LINE;
use crate::perf::spec::{Measure, TestKind};

use super::comm::{self, Comm, SYNC_SPEC_ID};
use super::data::Data;
use super::figures::BwFigures;
use super::output;
use super::params::{Params, Side, ANNOUNCED_MTU, CACHE_LINE_SIZE, CYCLE_BUFFER};
use super::script::{self, Message, ReportField, Step};
use super::traffic::{self, Outcome};
use super::wire::{self, Dest, Version};

/// The version this end announces: the perftest whose protocol it speaks (and was checked
/// against). Below 6.28, so a newer perftest skips the parameter negotiation it added then.
pub const ANNOUNCED_VERSION: &str = "6.06";
/// The oldest perftest this end talks to (perftest itself refuses older peers).
pub const MIN_PEER_VERSION: f64 = 5.70;
/// How many times a client tries a data connection the server is not listening for yet
/// (perftest's server listens again only after the first hand shake).
const CONNECT_TRIES: u32 = 50;
/// Pause between those tries (perftest's own: 100 ms).
const CONNECT_PAUSE: Duration = Duration::from_millis(100);
/// How long a server waits at the end for its client to close first, as it does.
const PEER_CLOSES_FIRST: Duration = Duration::from_secs(5);

/// A report before any figure.
const NO_REPORT: BwFigures = BwFigures {
    size: 0,
    iters: 0,
    peak: 0.0,
    avg: 0.0,
    msg_rate: 0.0,
};

/// Knobs of the connections themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Net {
    /// The CRC policy (perftest over `siw` asks for none).
    pub crc: CrcPolicy,
    /// Print the banner and table (off for the server of an in-process loopback run).
    pub print: bool,
}

/// The connection configuration of a perftest end: MPA revision 2 with enhanced data, the
/// IRD/ORD of `ird_ord`, no markers, the responder free to send first (as `siw`).
pub fn config(p: &Params, net: Net, ird_ord: u16) -> Config {
    let mut c = Config::with_revision(Revision::Rev2);
    c.startup.crc = net.crc;
    c.startup.ird = ird_ord;
    c.startup.ord = ird_ord;
    c.responder_sends_first = true;
    let tx = p.tx_depth as usize;
    let rx = p.rx_depth as usize;
    c.send_queue_depth = 2 * tx + 64;
    c.recv_queue_depth = rx + 64;
    c
}

fn qp_options(
    pd: &ProtectionDomain,
    send_cq: &CompletionQueue,
    recv_cq: &CompletionQueue,
) -> QpOptions {
    QpOptions {
        pd: pd.clone(),
        send_cq: send_cq.clone(),
        recv_cq: recv_cq.clone(),
        initial_recvs: Vec::new(),
    }
}

/// The exchange channel's queue pair options, its one receive posted before the
/// connection starts (the peer may send at once), and that receive's buffer.
fn comm_options(pd: &ProtectionDomain) -> Result<(QpOptions, iwarp::MemoryRegion)> {
    let recv = comm::recv_region(pd)?;
    let mut opts = qp_options(pd, &CompletionQueue::new(64), &CompletionQueue::new(64));
    let sge = recv
        .sge(..)
        .map_err(|e| PerfError::iwarp("describing the exchange buffer", e))?;
    opts.initial_recvs.push((SYNC_SPEC_ID, sge));
    Ok((opts, recv))
}

/// The hint added to errors that usually mean the two ends were started differently.
fn same_options(p: &Params) -> String {
    format!(
        "both ends must run {} with the same -s/-a, -n/-D, -q, -t/-r and -b options",
        p.binary()
    )
}

/// Runs the client end against the server at `addr`.
pub async fn client(p: Params, addr: SocketAddr, net: Net) -> Result<()> {
    let pd = crate::device().alloc_pd();
    let (opts, recv) = comm_options(&pd)?;
    let qp = iwarp::connect(addr, &config(&p, net, 0), opts, b"")
        .await
        .map_err(|e| connect_error(addr, &p, e))?;
    let comm = Comm::new(qp, &pd, Side::Client, recv)?;
    // perftest's ib_write_bw sleeps a second here; the others go at once (siw's accept
    // race is the runtime's business: it holds a first FPDU after the Reply).
    if p.test == TestKind::Write && p.measure == Measure::Bw {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut run = Run::new(p, comm, pd, net);
    let result = run.steps(Peer::Server(addr)).await;
    run.finish(result).await
}

/// Runs the server end on `listener`: serves one client, like perftest.
pub async fn server(p: Params, mut listener: Listener, net: Net) -> Result<()> {
    if net.print {
        out("\n************************************\n* Waiting for client to connect... *\n************************************");
    }
    let pd = crate::device().alloc_pd();
    let (opts, recv) = comm_options(&pd)?;
    let req = listener
        .accept()
        .await
        .map_err(|e| PerfError::iwarp("waiting for a client", e))?;
    let peer = req.peer_addr();
    let qp = req
        .accept_with(opts, b"", Some(IrdOrd::new(0, 0)))
        .await
        .map_err(|e| PerfError::iwarp(format!("accepting {peer}"), e))?;
    let comm = Comm::new(qp, &pd, Side::Server, recv)?;
    let mut run = Run::new(p, comm, pd, net);
    let result = run.steps(Peer::Client(&mut listener)).await;
    run.finish(result).await
}

fn connect_error(addr: SocketAddr, p: &Params, e: iwarp::Error) -> PerfError {
    match e {
        iwarp::Error::Refused(_) => PerfError::Connect {
            addr,
            source: std::io::ErrorKind::ConnectionRefused.into(),
        },
        iwarp::Error::Rejected { .. } => PerfError::Protocol(format!(
            "{addr} refused the connection (MPA Reject): {}",
            same_options(p)
        )),
        other => PerfError::iwarp(format!("connecting to {addr}"), other),
    }
}

/// Where the data connections come from.
enum Peer<'a> {
    /// The client connects to the server's address.
    Server(SocketAddr),
    /// The server accepts them on its listener.
    Client(&'a mut Listener),
}

/// A run in progress.
struct Run {
    p: Params,
    comm: Comm,
    pd: ProtectionDomain,
    net: Net,
    cycle: u32,
    cache_line: u32,
    mtu: u8,
    data: Option<Data>,
    /// Destination exchanges done so far (to tell the first round from the second).
    keys_seen: u32,
    /// This end's last bandwidth row.
    report: BwFigures,
    /// The peer's report, as it arrives.
    peer_report: BwFigures,
    /// Whether the table header has been printed.
    header: bool,
    /// Traffic ran (or the peer's did) since the last exchange: the next one waits as long
    /// as the peer's test takes, watching the data connections.
    after_traffic: bool,
}

impl Run {
    fn new(p: Params, comm: Comm, pd: ProtectionDomain, net: Net) -> Self {
        Self {
            p,
            comm,
            pd,
            net,
            cycle: CYCLE_BUFFER,
            cache_line: CACHE_LINE_SIZE,
            mtu: ANNOUNCED_MTU,
            data: None,
            keys_seen: 0,
            report: NO_REPORT,
            peer_report: NO_REPORT,
            header: false,
            after_traffic: false,
        }
    }

    fn print(&self, text: &str) {
        if self.net.print {
            out(text);
        }
    }

    fn data(&self) -> Result<&Data> {
        self.data
            .as_ref()
            .ok_or_else(|| PerfError::Internal("no data connections yet".into()))
    }

    async fn steps(&mut self, mut peer: Peer<'_>) -> Result<()> {
        for step in script::prelude() {
            self.step(step, &mut peer).await?;
        }
        let qps = self.data()?.len() as u32;
        let p = &self.p;
        let body = script::body(
            p.test,
            p.measure,
            p.side,
            qps,
            &p.sizes,
            p.duplex,
            p.duration(),
        );
        for step in body {
            self.step(step, &mut peer).await?;
        }
        Ok(())
    }

    async fn step(&mut self, step: Step, peer: &mut Peer<'_>) -> Result<()> {
        match step {
            Step::Exchange(m) => self.exchange(m).await,
            Step::Connect => self.connect(peer).await,
            Step::PostReceives { size } => {
                self.print_header();
                traffic::post_receives(self.data()?, &self.p, size).map(|_| ())
            }
            Step::Traffic { size } => {
                self.print_header();
                self.after_traffic = true;
                self.traffic(size).await
            }
            Step::PeerTraffic { .. } => {
                self.print_header();
                self.after_traffic = true;
                Ok(())
            }
        }
    }

    fn print_header(&mut self) {
        if self.header {
            return;
        }
        self.header = true;
        // ib_read_lat's server prints no table.
        if self.p.test == TestKind::Read
            && self.p.measure == Measure::Lat
            && self.p.side == Side::Server
        {
            return;
        }
        self.print(&output::header(&self.p));
    }

    /// This end's message for `m`.
    fn mine(&self, m: Message) -> Result<Vec<u8>> {
        Ok(match m {
            Message::Version => Version::parse(ANNOUNCED_VERSION)
                .map_err(|e| PerfError::Internal(e.to_string()))?
                .encode()
                .to_vec(),
            Message::CycleBuffer => wire::encode_int(CYCLE_BUFFER).to_vec(),
            Message::CacheLine => wire::encode_int(CACHE_LINE_SIZE).to_vec(),
            Message::Mtu => wire::encode_mtu(ANNOUNCED_MTU).to_vec(),
            Message::Sync { zeroed: true } => Dest::default().encode().to_vec(),
            Message::Sync { zeroed: false } => self.dest(0)?.encode().to_vec(),
            Message::Keys { qp } => self.dest(qp)?.encode().to_vec(),
            Message::Report(f) => {
                // perftest's passive server sends whatever its report buffer held; zeros
                // here.
                if !self.p.active() {
                    vec![0; wire::REPORT_FIELD_LEN]
                } else {
                    let r = &self.report;
                    match f {
                        ReportField::Size => wire::encode_u64(r.size),
                        ReportField::Iters => wire::encode_u64(r.iters),
                        ReportField::Peak => wire::encode_f64(r.peak),
                        ReportField::Average => wire::encode_f64(r.avg),
                        ReportField::MsgRate => wire::encode_f64(r.msg_rate),
                    }
                    .to_vec()
                }
            }
        })
    }

    fn dest(&self, qp: u32) -> Result<Dest> {
        self.data()?
            .mine
            .get(qp as usize)
            .copied()
            .ok_or_else(|| PerfError::Internal(format!("no destination {qp}")))
    }

    async fn exchange(&mut self, m: Message) -> Result<()> {
        let mine = self.mine(m)?;
        // After traffic the peer may still be at it (or runs all of it, at the passive
        // end): the wait is as long as its test, the data connections watched instead.
        let watch: Vec<QueuePair> = match (&self.data, std::mem::take(&mut self.after_traffic)) {
            (Some(d), true) => d.qps.clone(),
            _ => Vec::new(),
        };
        let theirs = match self.comm.exchange(m, &mine, &watch).await {
            Ok(t) => t,
            Err(e @ PerfError::PeerGone { .. }) => {
                // The channel ended because a data connection failed first: say that.
                return Err(match self.data.as_ref().and_then(Data::failure) {
                    Some((i, why)) => {
                        PerfError::Protocol(format!("data connection {i}: {}", comm::Why(&why)))
                    }
                    None => e,
                });
            }
            Err(e) => return Err(e),
        };
        if !m.accepts_len(theirs.len()) {
            return Err(PerfError::Protocol(format!(
                "the peer sent {} octets where perftest sends its {} ({} octets): {}",
                theirs.len(),
                m.what(),
                m.octets(),
                same_options(&self.p)
            )));
        }
        self.take(m, &theirs)
    }

    /// Takes in the peer's message `m`.
    fn take(&mut self, m: Message, theirs: &[u8]) -> Result<()> {
        let bad = |e: wire::WireError| PerfError::Protocol(e.to_string());
        match m {
            Message::Version => {
                let v = Version::decode(theirs).map_err(bad)?;
                if v.number < MIN_PEER_VERSION {
                    return Err(PerfError::Protocol(format!(
                        "the peer runs perftest {v}; this end speaks the protocol of perftest \
                         {MIN_PEER_VERSION:.2} and later"
                    )));
                }
            }
            Message::CycleBuffer => {
                self.cycle = self
                    .cycle
                    .max(wire::decode_int(theirs, "cycle buffer").map_err(bad)?);
            }
            Message::CacheLine => {
                self.cache_line = self
                    .cache_line
                    .max(wire::decode_int(theirs, "cache line size").map_err(bad)?);
            }
            Message::Mtu => {
                let theirs = wire::decode_mtu(theirs).map_err(bad)?;
                if (1..=5).contains(&theirs) {
                    self.mtu = self.mtu.min(theirs);
                }
            }
            Message::Sync { .. } => {}
            Message::Keys { qp } => {
                let d = Dest::decode(theirs).map_err(bad)?;
                let qps = self.data()?.len() as u32;
                let first_round = self.keys_seen < qps;
                self.keys_seen += 1;
                if let Some(data) = self.data.as_mut() {
                    if let Some(slot) = data.peer.get_mut(qp as usize) {
                        *slot = d;
                    }
                }
                if first_round && self.keys_seen == qps {
                    // perftest prints this end's queue pairs after the first round and the
                    // peer's as the second comes in.
                    let lines: Vec<String> = self
                        .data()?
                        .mine
                        .iter()
                        .map(|m| output::address("local", m))
                        .collect();
                    self.print(&lines.join("\n"));
                } else if !first_round {
                    self.print(&output::address("remote", &d));
                }
            }
            Message::Report(f) => {
                let r = &mut self.peer_report;
                match f {
                    ReportField::Size => r.size = wire::decode_u64(theirs, "size").map_err(bad)?,
                    ReportField::Iters => {
                        r.iters = wire::decode_u64(theirs, "iterations").map_err(bad)?
                    }
                    ReportField::Peak => r.peak = wire::decode_f64(theirs, "peak").map_err(bad)?,
                    ReportField::Average => {
                        r.avg = wire::decode_f64(theirs, "average").map_err(bad)?
                    }
                    ReportField::MsgRate => {
                        r.msg_rate = wire::decode_f64(theirs, "message rate").map_err(bad)?
                    }
                }
                if f == ReportField::MsgRate {
                    if self.p.duplex {
                        // Bidirectional: both ends print the sum of the two reports.
                        let (m, t) = (&self.report, &self.peer_report);
                        let sum = BwFigures {
                            peak: m.peak + t.peak,
                            avg: m.avg + t.avg,
                            msg_rate: m.msg_rate + t.msg_rate,
                            ..*m
                        };
                        self.print(&output::bw_row(&sum));
                    } else if self.p.side == Side::Server {
                        // ib_write_bw / ib_read_bw servers print the client's report.
                        self.print(&output::bw_row(&self.peer_report));
                    }
                }
            }
        }
        Ok(())
    }

    /// The data connections: the client makes them in order, the server accepts them
    /// until the client's next hand shake arrives (perftest's client sends it once every
    /// connection is established, so by then all have been accepted).
    async fn connect(&mut self, peer: &mut Peer<'_>) -> Result<()> {
        let send_cq = CompletionQueue::new(4096);
        let recv_cq = CompletionQueue::new(4096);
        let ird_ord = self.p.ird_ord();
        let cfg = config(&self.p, self.net, ird_ord);
        let mut qps = Vec::new();
        match peer {
            Peer::Server(addr) => {
                let n = self.p.qps.unwrap_or(1);
                for i in 0..n {
                    let qp =
                        connect_retrying(*addr, &cfg, || qp_options(&self.pd, &send_cq, &recv_cq))
                            .await
                            .map_err(|e| match e {
                                iwarp::Error::Rejected { .. } => PerfError::Protocol(format!(
                                    "the server refused data connection {i} (MPA Reject): {}",
                                    same_options(&self.p)
                                )),
                                other => PerfError::iwarp(
                                    format!("data connection {i} to {addr}"),
                                    other,
                                ),
                            })?;
                    // A read test needs Reads granted (our ORD); any other test none at all
                    // (a server granting Reads raised our IRD to its ORD).
                    let read = self.p.test == TestKind::Read;
                    let granted = qp.info().mpa().and_then(|m| m.ird_ord).map(|v| {
                        if read {
                            v.ord
                        } else {
                            v.ird.max(v.ord)
                        }
                    });
                    check_reads(&self.p, granted, "the server")?;
                    qps.push(qp);
                }
            }
            Peer::Client(listener) => {
                let what = Message::Sync { zeroed: true };
                loop {
                    let req = tokio::select! {
                        msg = self.comm.receive(what, &[]) => {
                            self.comm.keep(msg?);
                            break;
                        }
                        req = listener.accept() => req.map_err(|e| PerfError::iwarp("accepting a data connection", e))?,
                    };
                    // What the client asked for, before our limits.
                    let asked = req
                        .request()
                        .and_then(|r| r.enhanced)
                        .map(|v| v.ird.max(v.ord));
                    if let Err(e) = check_reads(&self.p, asked, "the client") {
                        let _ = req.reject(b"").await;
                        return Err(e);
                    }
                    let ird = asked.map_or(ird_ord, |a| a.min(ird_ord));
                    let qp = req
                        .accept_with(
                            qp_options(&self.pd, &send_cq, &recv_cq),
                            b"",
                            Some(IrdOrd::new(ird, ird)),
                        )
                        .await
                        .map_err(|e| PerfError::iwarp("accepting a data connection", e))?;
                    qps.push(qp);
                }
                if qps.is_empty() {
                    return Err(PerfError::Protocol(format!(
                        "the client made no data connection before its next hand shake: {}",
                        same_options(&self.p)
                    )));
                }
                if let Some(q) = self.p.qps {
                    if q as usize != qps.len() {
                        return Err(PerfError::Protocol(format!(
                            "the client made {} data connections, this end was started with -q {q}",
                            qps.len()
                        )));
                    }
                }
                self.p.qps = Some(qps.len() as u32);
            }
        }
        let n = qps.len() as u32;
        let data = Data::new(
            &self.p,
            &self.pd,
            qps,
            send_cq,
            recv_cq,
            self.cycle,
            self.cache_line,
        )?;
        self.data = Some(data);
        self.print(&output::test_info(&self.p, n, wire::mtu_octets(self.mtu)));
        Ok(())
    }

    async fn traffic(&mut self, size: u64) -> Result<()> {
        let p = &self.p;
        let d = self.data()?;
        let client = p.side == Side::Client;
        let outcome = match (p.test, p.measure) {
            (TestKind::Send, Measure::Bw) if p.duplex => {
                Outcome::Bw(traffic::bw_both_ways_send(d, p, size).await?)
            }
            (TestKind::Send, Measure::Bw) if !client => {
                Outcome::Bw(traffic::bw_server_send(d, p, size).await?)
            }
            (_, Measure::Bw) if client || p.duplex => {
                Outcome::Bw(traffic::bw_client(d, p, size).await?)
            }
            (_, Measure::Lat) => traffic::lat(d, p, size, client).await?,
            (_, Measure::Bw) => {
                return Err(PerfError::Internal(
                    "a passive server has no traffic".into(),
                ))
            }
        };
        if let Outcome::Bw(f) = outcome {
            self.report = f;
            // Bidirectional rows are printed once the peer's report is in (ib_send_bw -b
            // -D trades none: it prints its own).
            if self.p.duplex && !(self.p.test == TestKind::Send && self.p.duration()) {
                return Ok(());
            }
        }
        let row = match outcome {
            Outcome::Bw(f) => output::bw_row(&f),
            Outcome::Lat(Some(f)) => output::lat_row(&f),
            Outcome::Lat(None) => {
                format!(" {size:<7} (too few iterations for perftest's statistics)")
            }
            Outcome::LatDuration {
                size,
                iters,
                avg,
                tps,
            } => output::lat_duration_row(size, iters, avg, tps),
        };
        self.print(&row);
        Ok(())
    }

    /// Ends the run: closes the connections gracefully whatever happened, prints the
    /// closing line of a good run.
    async fn finish(&mut self, result: Result<()>) -> Result<()> {
        if self.p.side == Side::Server && result.is_ok() {
            // perftest's client closes first, its server after; a perftest client whose
            // server closed first was seen to crash on its way out (6.06 over siw).
            let closed = async {
                if let Some(d) = &self.data {
                    for qp in &d.qps {
                        qp.closed().await;
                    }
                }
                self.comm.qp().closed().await;
            };
            let _ = tokio::time::timeout(PEER_CLOSES_FIRST, closed).await;
        }
        if let Some(d) = &self.data {
            d.disconnect().await;
        }
        self.comm.disconnect().await;
        match result {
            Ok(()) => {
                self.print(RESULT_LINE);
                Ok(())
            }
            // What breaks in the middle of a run is most often two ends started
            // differently: say what they must agree on.
            Err(PerfError::Protocol(m)) if !m.contains("both ends must") => Err(
                PerfError::Protocol(format!("{m} ({})", same_options(&self.p))),
            ),
            Err(e) => Err(e),
        }
    }
}

/// A read test needs Reads granted on its data connections, the others none: a mismatch
/// means the two ends run different tests.
fn check_reads(p: &Params, ird_ord: Option<u16>, who: &str) -> Result<()> {
    let Some(v) = ird_ord else { return Ok(()) };
    let read = p.test == TestKind::Read;
    if read && v == 0 {
        return Err(PerfError::Protocol(format!(
            "{who} allows no RDMA Reads on its data connection, so it is not running a read \
             test: {}",
            same_options(p)
        )));
    }
    if !read && v > 0 {
        return Err(PerfError::Protocol(format!(
            "{who} asks for {v} outstanding RDMA Reads on its data connection, so it runs a \
             read test: {}",
            same_options(p)
        )));
    }
    Ok(())
}

/// Connects a data connection, trying again while the server is not listening yet.
async fn connect_retrying(
    addr: SocketAddr,
    cfg: &Config,
    opts: impl Fn() -> QpOptions,
) -> std::result::Result<QueuePair, iwarp::Error> {
    let mut tries = 0;
    loop {
        tries += 1;
        match iwarp::connect(addr, cfg, opts(), b"").await {
            Ok(qp) => return Ok(qp),
            Err(e @ iwarp::Error::Rejected { .. }) => return Err(e),
            // Refused, or (through a forwarder that accepts for the host) closed before
            // the Reply: not listening yet.
            Err(e) if tries >= CONNECT_TRIES => return Err(e),
            Err(_) => tokio::time::sleep(CONNECT_PAUSE).await,
        }
    }
}
