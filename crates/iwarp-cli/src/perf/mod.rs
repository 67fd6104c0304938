//! `iwarp perf`: perftest-style bandwidth and latency tests for the iWARP stack, with a plain
//! TCP baseline measured the same way in the same run.
//!
//! Three modes: with no arguments, a complete loopback test (server and client in this
//! process on 127.0.0.1); `--server` to serve tests; `--connect HOST:PORT` to run one against
//! a server. The pieces:
//!
//! | module | role |
//! | --- | --- |
//! | [`args`] | command line (clap) and its resolution into a [`spec::RunConfig`] |
//! | [`spec`] | the [`spec::TestSpec`] the client sends the server |
//! | [`control`] | the control protocol (handshake, phase brackets, tallies) |
//! | [`session`] | client and server sessions; transport selection |
//! | [`backend`] | the seam a transport implements |
//! | [`measure`] | the shared measurement loop |
//! | [`stats`] | latency and bandwidth statistics |
//! | [`report`] | perftest-style table, side-by-side comparison, JSON |
//! | [`progress`] | counters and the progress bar |
//! | [`tcp`] | the plain-TCP baseline backend |
//! | [`perftest`] | `--perftest`: a wire peer of perftest's rdma_cm mode, both roles |

mod aligned;
pub mod args;
pub mod backend;
pub mod control;
pub mod error;
pub mod iwarp;
pub mod measure;
pub mod perftest;
pub mod progress;
pub mod report;
pub mod session;
pub mod spec;
pub mod stats;
pub mod tcp;

use std::io::{IsTerminal, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use tokio::net::TcpListener;

use args::PerfArgs;
use error::{PerfError, Result};
use progress::{Plan, Progress};
use report::{
    banner, comparison_table, header, row_line, summary_line, BannerInfo, Comparison, Report, Role,
    RunReport, Summary, TableStyle, RESULT_LINE,
};
use session::ServerLog;
use spec::{Mode, RunConfig, RunLength, Transport};

/// Runs `iwarp perf` with parsed arguments; with `counters` (`-v`), each iWARP data
/// connection's counters are printed at the end of its session, both ends' in a loopback run
/// (not in `--perftest` mode, whose output is perftest's).
pub async fn run(args: PerfArgs, counters: bool) -> Result<()> {
    if args.perftest {
        return perftest::run(args.resolve_perftest()?).await;
    }
    let cfg = args.resolve()?;
    match cfg.mode.clone() {
        Mode::Server {
            bind,
            port,
            data_port,
        } => {
            // A server serves whatever a client asks for: as many files as it may have.
            let _ = rlimit::increase_nofile_limit(u64::MAX);
            run_server(bind, port, data_port, counters).await
        }
        Mode::Loopback => {
            check_transports(&cfg)?;
            // Both ends of every connection are in this process.
            raise_file_limit(connections(&cfg), 2)?;
            let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
            let addr = SocketAddr::new(ip, 0);
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| PerfError::Bind { addr, source })?;
            let addr = listener
                .local_addr()
                .map_err(|e| PerfError::io("server", "reading the listener's address", e))?;
            let log = ServerLog {
                sessions: false,
                // Standard output is the JSON document's alone.
                counters: counters && !cfg.json,
            };
            let server = tokio::spawn(session::serve(listener, ip, 0, log));
            let result = run_client(&cfg, &[addr], "loopback", counters).await;
            server.abort();
            result
        }
        Mode::Client { host, port } => {
            check_transports(&cfg)?;
            raise_file_limit(connections(&cfg), 1)?;
            let addrs = spec::resolve(&host, port)
                .await
                .map_err(|e| PerfError::Resolve {
                    host: host.clone(),
                    reason: e.to_string(),
                })?;
            if addrs.is_empty() {
                return Err(PerfError::Resolve {
                    host,
                    reason: "no addresses".into(),
                });
            }
            run_client(&cfg, &addrs, "client", counters).await
        }
    }
}

/// Descriptors a run needs besides one per connection end: the control connections,
/// listeners, the runtime's own, standard streams.
const SPARE_FILES: u64 = 64;

/// Raises the soft limit on open files to the hard limit (1,024 by default on Linux, the hard
/// limit often far higher) and checks that `ends` connection ends fit, so that a thousand
/// connections fail here with the reason rather than half-way with `EMFILE`.
pub(crate) fn raise_file_limit(connections: u32, ends: u64) -> Result<()> {
    let needed = u64::from(connections) * ends + SPARE_FILES;
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        // Not raised: the current limit decides.
        Err(_) => rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(u64::MAX, |(soft, _)| soft),
    };
    if limit < needed {
        return Err(PerfError::FileLimit {
            connections,
            needed,
            limit,
        });
    }
    Ok(())
}

/// Connections a client run opens.
fn connections(cfg: &RunConfig) -> u32 {
    cfg.spec.as_ref().map_or(1, |s| s.connections)
}

/// Fails early, before any output, if a requested transport has no backend.
fn check_transports(cfg: &RunConfig) -> Result<()> {
    for t in std::iter::once(cfg.transport).chain(cfg.baseline) {
        if !session::is_available(t) {
            return Err(PerfError::TransportUnavailable(t));
        }
    }
    Ok(())
}

/// Writes a line on stdout, ignoring a closed pipe (`iwarp perf | head` must not panic).
pub fn out(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

async fn run_server(bind: IpAddr, port: u16, data_port: u16, counters: bool) -> Result<()> {
    let addr = SocketAddr::new(bind, port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| PerfError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|e| PerfError::io("client", "reading the listener's address", e))?;
    out(&format!(
        "iwarp perf server listening on {local}; serving one client at a time, Ctrl-C to stop"
    ));
    tokio::select! {
        () = session::serve(listener, bind, data_port, ServerLog { sessions: true, counters }) => Ok(()),
        r = tokio::signal::ctrl_c() => r.map_err(|e| PerfError::Io {
            what: "waiting for Ctrl-C".into(),
            source: e,
        }),
    }
}

async fn run_client(
    cfg: &RunConfig,
    addrs: &[SocketAddr],
    mode: &'static str,
    counters: bool,
) -> Result<()> {
    let spec = cfg
        .spec
        .clone()
        .ok_or_else(|| PerfError::Internal("client run without a test spec".into()))?;
    let style = TableStyle {
        gbits: cfg.report_gbits,
    };
    let mut plan: Vec<(Transport, Role)> = vec![(cfg.transport, Role::Primary)];
    if let Some(b) = cfg.baseline {
        plan.push((b, Role::Baseline));
    }
    let runs = plan.len() as u64;
    let sizes = spec.sizes.len() as u64;
    let conns = u64::from(spec.connections);
    let progress_plan = match spec.length {
        RunLength::Iterations(n) => Plan::Ops(
            runs.saturating_mul(sizes)
                .saturating_mul(conns)
                .saturating_mul(n.saturating_add(spec.warmup)),
        ),
        RunLength::Duration(_) => {
            let per_size = spec.length.duration().unwrap_or_default();
            Plan::Time(per_size.saturating_mul(u32::try_from(runs * sizes).unwrap_or(u32::MAX)))
        }
    };
    let show_progress = !cfg.json && std::io::stderr().is_terminal();
    let progress = Progress::start(show_progress, progress_plan);
    let started = Instant::now();

    let mut reports = Vec::with_capacity(plan.len());
    let mut server = addrs.first().map(|a| a.to_string()).unwrap_or_default();
    for (transport, role) in plan {
        progress.set_label(format!("{} {} over {transport}", spec.test, spec.measure));
        let mut printer = TablePrinter {
            progress: &progress,
            spec: &spec,
            style,
            json: cfg.json,
            transport,
            role,
            mode,
            server: &mut server,
            counters,
        };
        let results =
            session::run_client(transport, addrs, &spec, &progress.counters(), &mut printer)
                .await?;
        if !cfg.json {
            progress.println(RESULT_LINE);
        }
        reports.push(RunReport {
            transport,
            role,
            results,
        });
    }
    let elapsed = started.elapsed();
    progress.finish().await;

    let comparison = match reports.as_slice() {
        [primary, baseline] => Some(Comparison::build(spec.measure, primary, baseline)),
        _ => None,
    };
    let total_bytes = reports
        .iter()
        .flat_map(|r| r.results.iter().map(|row| row.bytes))
        .sum();
    let report = Report {
        tool: "iwarp perf",
        version: env!("CARGO_PKG_VERSION"),
        mode,
        server,
        spec,
        units: style.units(),
        runs: reports,
        comparison,
        summary: Summary {
            total_bytes,
            elapsed_s: elapsed.as_secs_f64(),
        },
    };
    if cfg.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| PerfError::Internal(format!("encoding the JSON report: {e}")))?;
        out(&text);
    } else {
        if let Some(c) = &report.comparison {
            out(&comparison_table(c, report.spec.measure, style));
        }
        out(&summary_line(&report));
    }
    Ok(())
}

/// Prints the banner once a session is connected and each row as it is measured (nothing in
/// JSON mode); remembers the server address actually used for the report.
struct TablePrinter<'a> {
    progress: &'a Progress,
    spec: &'a spec::TestSpec,
    style: TableStyle,
    json: bool,
    transport: Transport,
    role: Role,
    mode: &'static str,
    server: &'a mut String,
    /// Print the data connections' counters (`-v`).
    counters: bool,
}

impl session::Observer for TablePrinter<'_> {
    fn connected(&mut self, server: SocketAddr) {
        *self.server = server.to_string();
        if self.json {
            return;
        }
        let info = BannerInfo {
            transport: self.transport,
            role: self.role,
            mode: self.mode,
            server: self.server,
        };
        self.progress.println(&banner(self.spec, &info, self.style));
        self.progress.println(header(self.spec.measure, self.style));
    }

    fn row(&mut self, row: &report::RowReport) {
        if !self.json {
            self.progress.println(&row_line(row, self.style));
        }
    }

    fn counters(&mut self, lines: &[String]) {
        if self.counters && !self.json {
            for line in lines {
                self.progress.println(line);
            }
        }
    }
}
