//! Results: the perftest-style table for people and the `--json` document for machines.
//!
//! Both are rendered from the same [`Report`] (one [`RowReport`] per size and transport), so
//! they never disagree. The table reproduces perftest's banner, separator line (87 dashes) and
//! column layout (`REPORT_FMT`, `REPORT_FMT_LAT` in perftest's `perftest_parameters.h`,
//! including its tabs), so scripts that parse perftest output can parse ours.
//!
//! Units, stated in the banner and the JSON: bandwidth columns are **MiB/sec = 2^20 octets per
//! second** like modern perftest (its header says `MiB/sec`), or Gb/sec = 10^9 bits per second
//! with `--report-gbits`; message rate is Mpps = 10^6 operations per second; latencies are
//! microseconds. The JSON carries raw octets per second (no unit conversion to undo).
//!
//! `#iterations` is the number of measured operations on all connections together (perftest
//! prints its `-n`, which is the same with one connection; with `-D` perftest too prints the
//! number of operations completed).

use std::fmt::Write as _;

use serde::Serialize;

use super::control::PeerTally;
use super::measure::PhaseMeasurement;
use super::spec::{FramingMode, Measure, PlacementMode, RunLength, TestKind, TestSpec, Transport};
use super::stats::{BandwidthSummary, LatencySummary};

/// Octets in a GiB, for CPU time per octet.
const GIB: f64 = (1u64 << 30) as f64;

/// perftest's `RESULT_LINE`: 87 dashes.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's BW header with MiB/sec (modern perftest).
pub const BW_HEADER_MIB: &str =
    " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
/// perftest's BW header with `--report_gbits`.
pub const BW_HEADER_GBITS: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
/// perftest's latency header.
pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";

/// One connection's share of a row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConnReport {
    /// Measured operations completed on this connection.
    pub iterations: u64,
    /// Their payload octets, as the client counted them.
    pub bytes: u64,
    /// Payload octets the server counted in the test's direction (`null` if it cannot).
    pub peer_bytes: Option<u64>,
    /// Messages the server counted (`null` if it cannot).
    pub peer_messages: Option<u64>,
}

/// Bandwidth figures of a row, in octets per second.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BwReport {
    /// Peak rate; `null` when not measured (`-D`, `-N`).
    pub peak_bytes_per_sec: Option<f64>,
    /// Average rate.
    pub avg_bytes_per_sec: f64,
    /// Million operations per second.
    pub msg_rate_mpps: f64,
}

/// How latency samples relate to the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencyBasis {
    /// Half of a ping-pong round trip (write, send), like perftest.
    HalfRoundTrip,
    /// The whole operation (read: request out, data back), like perftest.
    RoundTrip,
}

/// Latency figures of a row, in microseconds (definitions in `stats.rs`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatReport {
    /// What one sample is.
    pub basis: LatencyBasis,
    /// Samples summarised (at most `MAX_LAT_SAMPLES` per connection).
    pub samples: u64,
    /// Minimum.
    pub t_min_usec: f64,
    /// Maximum.
    pub t_max_usec: f64,
    /// Median.
    pub t_typical_usec: f64,
    /// Mean.
    pub t_avg_usec: f64,
    /// Population standard deviation.
    pub t_stdev_usec: f64,
    /// Nearest-rank 99th percentile.
    pub p99_usec: f64,
    /// Nearest-rank 99.9th percentile.
    pub p99_9_usec: f64,
}

/// One message size measured over one transport.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RowReport {
    /// Message size in octets.
    pub size: u64,
    /// Measured operations on all connections.
    pub iterations: u64,
    /// Their payload octets (`size × iterations`), as the client counted them.
    pub bytes: u64,
    /// The server's count of the same, when every connection could count.
    pub peer_bytes: Option<u64>,
    /// Phase start to last completion, seconds.
    pub elapsed_s: f64,
    /// CPU seconds (user and system, every thread) the measuring process spent in the
    /// phase: in a loopback run both ends, against a server the client alone. `null` if
    /// the system would not say.
    pub cpu_s: Option<f64>,
    /// `cpu_s` per GiB of `bytes` (`null` without `cpu_s` or without octets).
    pub cpu_s_per_gib: Option<f64>,
    /// Per connection.
    pub connections: Vec<ConnReport>,
    /// Bandwidth figures (bandwidth tests).
    pub bw: Option<BwReport>,
    /// Latency figures (latency tests).
    pub lat: Option<LatReport>,
}

impl RowReport {
    /// Summarises a measured phase (consumes its latency samples) with the server's tallies.
    pub fn build(
        spec: &TestSpec,
        size: u64,
        m: &mut PhaseMeasurement,
        tallies: &[Option<PeerTally>],
    ) -> RowReport {
        let connections: Vec<ConnReport> = m
            .conns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let t = tallies.get(i).copied().flatten();
                ConnReport {
                    iterations: c.ops,
                    bytes: c.bytes,
                    peer_bytes: t.map(|t| t.bytes),
                    peer_messages: t.map(|t| t.messages),
                }
            })
            .collect();
        let peer_bytes = connections
            .iter()
            .map(|c| c.peer_bytes)
            .sum::<Option<u64>>();
        let (iterations, bytes) = (m.ops(), m.bytes());
        let (bw, lat) = match spec.measure {
            Measure::Bw => {
                let s =
                    BandwidthSummary::compute(bytes, iterations, m.elapsed, m.samples.as_deref());
                (
                    Some(BwReport {
                        peak_bytes_per_sec: s.peak_bytes_per_sec,
                        avg_bytes_per_sec: s.avg_bytes_per_sec,
                        msg_rate_mpps: s.ops_per_sec / 1e6,
                    }),
                    None,
                )
            }
            Measure::Lat => {
                let mut all: Vec<u64> = m
                    .conns
                    .iter_mut()
                    .flat_map(|c| std::mem::take(&mut c.latencies_ns))
                    .collect();
                let basis = match spec.test {
                    TestKind::Read => LatencyBasis::RoundTrip,
                    _ => LatencyBasis::HalfRoundTrip,
                };
                let divisor = match basis {
                    LatencyBasis::RoundTrip => 1000.0,
                    LatencyBasis::HalfRoundTrip => 2000.0,
                };
                let lat = LatencySummary::from_nanos(&mut all).map(|l| {
                    let u = l.scaled(divisor);
                    LatReport {
                        basis,
                        samples: u.count,
                        t_min_usec: u.min,
                        t_max_usec: u.max,
                        t_typical_usec: u.median,
                        t_avg_usec: u.mean,
                        t_stdev_usec: u.stdev,
                        p99_usec: u.p99,
                        p99_9_usec: u.p99_9,
                    }
                });
                (None, lat)
            }
        };
        let cpu_s = m.cpu.map(|d| d.as_secs_f64());
        RowReport {
            size,
            iterations,
            bytes,
            peer_bytes,
            elapsed_s: m.elapsed.as_secs_f64(),
            cpu_s,
            cpu_s_per_gib: cpu_s
                .filter(|_| bytes > 0)
                .map(|c| c / (bytes as f64 / GIB)),
            connections,
            bw,
            lat,
        }
    }
}

/// Whether a run is the transport under test or the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `--transport`.
    Primary,
    /// `--baseline`.
    Baseline,
}

/// All rows of one transport.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// The transport.
    pub transport: Transport,
    /// Primary or baseline.
    pub role: Role,
    /// One row per size, in spec order.
    pub results: Vec<RowReport>,
}

/// One size of the side-by-side comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComparisonRow {
    /// Message size.
    pub size: u64,
    /// The metric for the primary transport.
    pub primary: f64,
    /// The metric for the baseline.
    pub baseline: f64,
    /// `primary / baseline` (`null` if the baseline is 0).
    pub ratio: Option<f64>,
    /// The primary's CPU per octet over the baseline's (`cpu_s_per_gib`; `null` if either
    /// is unknown or the baseline's is 0).
    pub cpu_ratio: Option<f64>,
}

/// Primary and baseline side by side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// What is compared: `avg_bytes_per_sec` (bandwidth) or `t_typical_usec` (latency).
    pub metric: &'static str,
    /// The primary transport.
    pub primary: Transport,
    /// The baseline transport.
    pub baseline: Transport,
    /// One row per size present in both runs.
    pub rows: Vec<ComparisonRow>,
}

impl Comparison {
    /// Pairs up the rows of two runs by size.
    pub fn build(measure: Measure, primary: &RunReport, baseline: &RunReport) -> Comparison {
        let metric = |r: &RowReport| match measure {
            Measure::Bw => r.bw.as_ref().map(|b| b.avg_bytes_per_sec),
            Measure::Lat => r.lat.as_ref().map(|l| l.t_typical_usec),
        };
        let rows = primary
            .results
            .iter()
            .filter_map(|p| {
                let b = baseline.results.iter().find(|b| b.size == p.size)?;
                let (pv, bv) = (metric(p)?, metric(b)?);
                let cpu_ratio = match (p.cpu_s_per_gib, b.cpu_s_per_gib) {
                    (Some(pc), Some(bc)) if bc > 0.0 => Some(pc / bc),
                    _ => None,
                };
                Some(ComparisonRow {
                    size: p.size,
                    primary: pv,
                    baseline: bv,
                    ratio: (bv != 0.0).then(|| pv / bv),
                    cpu_ratio,
                })
            })
            .collect();
        Comparison {
            metric: match measure {
                Measure::Bw => "avg_bytes_per_sec",
                Measure::Lat => "t_typical_usec",
            },
            primary: primary.transport,
            baseline: baseline.transport,
            rows,
        }
    }
}

/// Units of the JSON document and the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Units {
    /// Unit of every `*_bytes_per_sec` field.
    pub bandwidth: &'static str,
    /// Unit of every `*_usec` field.
    pub latency: &'static str,
    /// Unit of the table's bandwidth columns.
    pub table_bandwidth: &'static str,
}

/// Totals of the whole command.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Measured payload octets over every size and transport.
    pub total_bytes: u64,
    /// Wall-clock time of the whole command (setup, warm-up and all runs), seconds.
    pub elapsed_s: f64,
}

/// The whole result of an `iwarp perf` client run; what `--json` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// `"iwarp perf"`.
    pub tool: &'static str,
    /// Version of the tool.
    pub version: &'static str,
    /// `"loopback"` or `"client"`.
    pub mode: &'static str,
    /// The server's control address.
    pub server: String,
    /// The test spec as sent to the server.
    pub spec: TestSpec,
    /// Units.
    pub units: Units,
    /// The primary run, then the baseline if any.
    pub runs: Vec<RunReport>,
    /// Side by side, with `--baseline`.
    pub comparison: Option<Comparison>,
    /// Totals.
    pub summary: Summary,
}

/// Table options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStyle {
    /// Gb/sec instead of MiB/sec.
    pub gbits: bool,
}

impl TableStyle {
    fn convert(&self, bytes_per_sec: f64) -> f64 {
        if self.gbits {
            bytes_per_sec * 8.0 / 1e9
        } else {
            bytes_per_sec / (1u64 << 20) as f64
        }
    }

    fn unit(&self) -> &'static str {
        if self.gbits {
            "Gb/sec"
        } else {
            "MiB/sec"
        }
    }

    /// The units record for the JSON document.
    pub fn units(&self) -> Units {
        Units {
            bandwidth: "bytes/sec",
            latency: "usec",
            table_bandwidth: if self.gbits {
                "Gb/sec = 10^9 bits per second"
            } else {
                "MiB/sec = 2^20 bytes per second"
            },
        }
    }
}

/// Formats a bandwidth row exactly like perftest's `REPORT_FMT`
/// (`" %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf"`).
pub fn bw_line(size: u64, iterations: u64, peak: f64, avg: f64, mpps: f64) -> String {
    format!(
        " {size:<7}    {iterations:<10}       {peak:<7.2}            {avg:<7.2}\t\t   {mpps:<7.6}"
    )
}

/// Formats a latency row exactly like perftest's `REPORT_FMT_LAT`.
#[allow(clippy::too_many_arguments)] // mirrors the printf it reproduces, column by column
pub fn lat_line(
    size: u64,
    iterations: u64,
    min: f64,
    max: f64,
    typical: f64,
    avg: f64,
    stdev: f64,
    p99: f64,
    p99_9: f64,
) -> String {
    format!(
        " {size:<7} {iterations}          {min:<7.2}        {max:<7.2}      {typical:<7.2}  \t       {avg:<7.2}     \t{stdev:<7.2}\t\t{p99:<7.2} \t\t{p99_9:<7.2}"
    )
}

/// The column header for `measure`.
pub fn header(measure: Measure, style: TableStyle) -> &'static str {
    match (measure, style.gbits) {
        (Measure::Lat, _) => LAT_HEADER,
        (Measure::Bw, false) => BW_HEADER_MIB,
        (Measure::Bw, true) => BW_HEADER_GBITS,
    }
}

/// One table row.
pub fn row_line(row: &RowReport, style: TableStyle) -> String {
    if let Some(bw) = &row.bw {
        bw_line(
            row.size,
            row.iterations,
            style.convert(bw.peak_bytes_per_sec.unwrap_or(0.0)),
            style.convert(bw.avg_bytes_per_sec),
            bw.msg_rate_mpps,
        )
    } else if let Some(l) = &row.lat {
        lat_line(
            row.size,
            row.iterations,
            l.t_min_usec,
            l.t_max_usec,
            l.t_typical_usec,
            l.t_avg_usec,
            l.t_stdev_usec,
            l.p99_usec,
            l.p99_9_usec,
        )
    } else {
        format!(" {:<7} {}          (no samples)", row.size, row.iterations)
    }
}

/// What the banner needs besides the spec.
#[derive(Clone, Debug, PartialEq)]
pub struct BannerInfo<'a> {
    /// The transport of this table.
    pub transport: Transport,
    /// Primary or baseline.
    pub role: Role,
    /// `"loopback"` or `"client"`.
    pub mode: &'a str,
    /// Server control address.
    pub server: &'a str,
}

/// perftest-style banner: separator, centred title, `name : value` lines, separator, and the
/// duration-mode peak warning where perftest prints it.
pub fn banner(spec: &TestSpec, info: &BannerInfo<'_>, style: TableStyle) -> String {
    let kind = match spec.measure {
        Measure::Bw => "BW",
        Measure::Lat => "Latency",
    };
    let mut title = format!("{} {} Test", spec.test.perftest_name(), kind);
    if info.role == Role::Baseline {
        title.push_str(" (baseline)");
    }
    let transport = match info.transport {
        Transport::Tcp => "tcp (plain TCP sockets, TCP_NODELAY)",
        Transport::Iwarp => "iwarp (RDMAP/DDP/MPA over TCP)",
    };
    let depth = match (spec.measure, spec.test) {
        (Measure::Lat, _) => "1".to_string(),
        (Measure::Bw, TestKind::Read) => {
            format!(
                "{} (tx depth {}, outstanding reads {})",
                spec.effective_depth(),
                spec.tx_depth,
                spec.outs
            )
        }
        (Measure::Bw, _) => spec.tx_depth.to_string(),
    };
    let length = match spec.length {
        RunLength::Iterations(n) => format!("{n} iterations per connection and size"),
        RunLength::Duration(s) => format!("{s} s per size"),
    };
    let framing = match spec.protocol.framing {
        FramingMode::Mpa => format!(
            "MPA rev {}, CRC {}",
            spec.protocol.mpa_rev, spec.protocol.crc
        ),
        FramingMode::Ift => format!("IFT, CRC {}", spec.protocol.ift_crc),
    };
    let knobs = format!(
        "{framing}, markers {}{}{}",
        spec.protocol.markers,
        if spec.protocol.placement == PlacementMode::default() {
            String::new()
        } else {
            format!(", placement {}", spec.protocol.placement)
        },
        if info.transport == Transport::Tcp {
            " (iwarp only; unused here)"
        } else {
            ""
        }
    );
    let mut out = String::new();
    let _ = writeln!(out, "{RESULT_LINE}");
    let _ = writeln!(out, "{:>20}{title}", "");
    let _ = writeln!(out, " Transport type  : {transport}");
    let _ = writeln!(
        out,
        " Mode            : {} (server {})",
        info.mode, info.server
    );
    let _ = writeln!(out, " Number of conns : {}", spec.connections);
    let _ = writeln!(out, " TX depth        : {depth}");
    let _ = writeln!(out, " Run length      : {length}");
    let _ = writeln!(
        out,
        " Warm-up         : {} operations per connection and size",
        spec.warmup
    );
    let _ = writeln!(out, " Protocol knobs  : {knobs}");
    match spec.measure {
        Measure::Bw => {
            let _ = writeln!(out, " BW unit         : {}", style.units().table_bandwidth);
        }
        Measure::Lat => {
            let basis = match spec.test {
                TestKind::Read => "whole read (request and response), like perftest",
                _ => "half of the ping-pong round trip, like perftest",
            };
            let _ = writeln!(out, " Latency         : {basis}");
        }
    }
    let _ = write!(out, "{RESULT_LINE}");
    if spec.measure == Measure::Bw && matches!(spec.length, RunLength::Duration(_)) {
        let _ = write!(out, "\n WARNING: BW peak won't be measured in this run.");
    }
    out
}

/// The side-by-side table.
pub fn comparison_table(c: &Comparison, measure: Measure, style: TableStyle) -> String {
    let (metric, convert): (String, Box<dyn Fn(f64) -> f64>) = match measure {
        Measure::Bw => (
            format!("BW average[{}]", style.unit()),
            Box::new(move |v| style.convert(v)),
        ),
        Measure::Lat => ("t_typical[usec]".to_string(), Box::new(|v| v)),
    };
    let (p, b) = (c.primary.to_string(), c.baseline.to_string());
    let mut out = String::new();
    let _ = writeln!(out, "{RESULT_LINE}");
    let _ = writeln!(out, " Side by side: {p} vs {b} baseline");
    let _ = writeln!(
        out,
        " #bytes     {:<34}{:<34}{:<20}CPU per octet {p}/{b}",
        format!("{p} {metric}"),
        format!("{b} baseline {metric}"),
        format!("ratio {p}/{b}")
    );
    let three = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"));
    for r in &c.rows {
        let _ = writeln!(
            out,
            " {:<7}    {:<34.2}{:<34.2}{:<20}{}",
            r.size,
            convert(r.primary),
            convert(r.baseline),
            three(r.ratio),
            three(r.cpu_ratio)
        );
    }
    let _ = write!(out, "{RESULT_LINE}");
    out
}

/// A run's CPU time, as this process spent it, per GiB moved (bandwidth) or per operation
/// (latency), over all its sizes; `None` unless every size has a CPU time and some traffic.
pub fn cpu_figure(run: &RunReport, measure: Measure) -> Option<String> {
    let cpu: f64 = run.results.iter().map(|r| r.cpu_s).sum::<Option<f64>>()?;
    match measure {
        Measure::Bw => {
            let bytes: u64 = run.results.iter().map(|r| r.bytes).sum();
            (bytes > 0).then(|| format!("{:.3} s/GiB", cpu / (bytes as f64 / GIB)))
        }
        Measure::Lat => {
            let ops: u64 = run.results.iter().map(|r| r.iterations).sum();
            (ops > 0).then(|| format!("{:.2} usec/op", cpu * 1e6 / ops as f64))
        }
    }
}

/// The closing one-line summary, with each run's CPU figure ([`cpu_figure`]) when known.
pub fn summary_line(report: &Report) -> String {
    let transports: Vec<String> = report
        .runs
        .iter()
        .map(|r| match r.role {
            Role::Primary => r.transport.to_string(),
            Role::Baseline => format!("{} baseline", r.transport),
        })
        .collect();
    let sizes = report.spec.sizes.len();
    let conns = report.spec.connections;
    let cpu: Vec<String> = report
        .runs
        .iter()
        .zip(&transports)
        .filter_map(|(r, name)| Some(format!("{name} {}", cpu_figure(r, report.spec.measure)?)))
        .collect();
    let cpu = if cpu.is_empty() {
        String::new()
    } else {
        format!("; this process's CPU: {}", cpu.join(", "))
    };
    format!(
        " iwarp perf: {} {} over {}: {} bytes measured in {:.3} s ({} size{}, {} connection{}){cpu}",
        report.spec.test,
        report.spec.measure,
        transports.join(" + "),
        report.summary.total_bytes,
        report.summary.elapsed_s,
        sizes,
        if sizes == 1 { "" } else { "s" },
        conns,
        if conns == 1 { "" } else { "s" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::measure::ConnMeasurement;
    use crate::perf::spec::ProtocolKnobs;
    use std::time::Duration;

    #[test]
    fn bw_row_matches_perftest_layout() {
        assert_eq!(
            bw_line(65536, 5000, 1101.34, 1101.11, 0.017618),
            " 65536      5000             1101.34            1101.11\t\t   0.017618"
        );
        assert_eq!(
            bw_line(2, 1000, 4.42, 1.09, 0.570447),
            " 2          1000             4.42               1.09   \t\t   0.570447"
        );
    }

    #[test]
    fn lat_row_matches_perftest_layout() {
        assert_eq!(
            lat_line(2, 1000, 1.5, 12.25, 1.75, 1.8, 0.33, 3.1, 9.0),
            " 2       1000          1.50           12.25        1.75     \t       1.80        \t0.33   \t\t3.10    \t\t9.00   "
        );
    }

    #[test]
    fn headers_are_perftests() {
        assert_eq!(RESULT_LINE.len(), 87);
        assert!(BW_HEADER_MIB.starts_with(" #bytes     #iterations    BW peak[MiB/sec]"));
        assert!(LAT_HEADER
            .contains("t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]"));
    }

    #[test]
    fn banner_golden() {
        let mut s = spec(Measure::Bw, TestKind::Write);
        s.length = RunLength::Duration(2.0);
        let info = BannerInfo {
            transport: Transport::Tcp,
            role: Role::Baseline,
            mode: "loopback",
            server: "127.0.0.1:18515",
        };
        let expected = [
            RESULT_LINE,
            "                    RDMA_Write BW Test (baseline)",
            " Transport type  : tcp (plain TCP sockets, TCP_NODELAY)",
            " Mode            : loopback (server 127.0.0.1:18515)",
            " Number of conns : 2",
            " TX depth        : 128",
            " Run length      : 2 s per size",
            " Warm-up         : 0 operations per connection and size",
            " Protocol knobs  : MPA rev 2, CRC on, markers none (iwarp only; unused here)",
            " BW unit         : MiB/sec = 2^20 bytes per second",
            RESULT_LINE,
            " WARNING: BW peak won't be measured in this run.",
        ]
        .join("\n");
        assert_eq!(banner(&s, &info, TableStyle { gbits: false }), expected);

        let s = spec(Measure::Lat, TestKind::Read);
        let info = BannerInfo {
            transport: Transport::Iwarp,
            role: Role::Primary,
            ..info
        };
        let text = banner(&s, &info, TableStyle { gbits: true });
        assert!(text.contains("\n                    RDMA_Read Latency Test\n"));
        assert!(text.contains(" TX depth        : 1\n"));
        assert!(text.contains(" Protocol knobs  : MPA rev 2, CRC on, markers none\n"));
        assert!(text.contains(" Latency         : whole read (request and response)"));
        assert!(!text.contains("WARNING"));
    }

    fn spec(measure: Measure, test: TestKind) -> TestSpec {
        TestSpec {
            test,
            measure,
            sizes: vec![4096],
            length: RunLength::Iterations(10),
            tx_depth: 128,
            outs: 16,
            connections: 2,
            warmup: 0,
            no_peak: false,
            protocol: ProtocolKnobs::default(),
        }
    }

    fn conn(ops: u64, lat: Vec<u64>) -> ConnMeasurement {
        ConnMeasurement {
            ops,
            bytes: ops * 4096,
            latencies_ns: lat,
            finished_at: Duration::from_millis(100),
        }
    }

    #[test]
    fn bw_row_report_and_json_shape() {
        let s = spec(Measure::Bw, TestKind::Write);
        let mut m = PhaseMeasurement {
            conns: vec![conn(10, vec![]), conn(10, vec![])],
            elapsed: Duration::from_millis(100),
            samples: None,
            cpu: Some(Duration::from_millis(50)),
        };
        let tally = Some(PeerTally {
            bytes: 40960,
            messages: 10,
        });
        let row = RowReport::build(&s, 4096, &mut m, &[tally, tally]);
        assert_eq!(row.iterations, 20);
        assert_eq!(row.bytes, 81920);
        assert_eq!(row.peer_bytes, Some(81920));
        let bw = row.bw.as_ref().unwrap();
        assert_eq!(bw.avg_bytes_per_sec, 819200.0);
        assert_eq!(bw.peak_bytes_per_sec, None);
        assert_eq!(bw.msg_rate_mpps, 200.0 / 1e6);
        // 50 ms of CPU for 81,920 octets.
        assert_eq!(row.cpu_s, Some(0.05));
        assert_eq!(row.cpu_s_per_gib, Some(0.05 / (81920.0 / GIB)));
        assert_eq!(
            row_line(&row, TableStyle { gbits: false }),
            bw_line(4096, 20, 0.0, 0.78125, 0.0002)
        );

        let json = serde_json::to_value(&row).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "bw",
                "bytes",
                "connections",
                "cpu_s",
                "cpu_s_per_gib",
                "elapsed_s",
                "iterations",
                "lat",
                "peer_bytes",
                "size"
            ]
        );
        assert_eq!(json["connections"][1]["peer_messages"], 10);
        assert!(json["lat"].is_null());
        assert!(json["bw"]["peak_bytes_per_sec"].is_null());
    }

    #[test]
    fn lat_row_report_halves_ping_pong_only() {
        let s = spec(Measure::Lat, TestKind::Send);
        let mut m = PhaseMeasurement {
            conns: vec![conn(2, vec![2000, 4000]), conn(1, vec![6000])],
            elapsed: Duration::from_millis(1),
            samples: None,
            cpu: None,
        };
        let row = RowReport::build(&s, 4096, &mut m, &[None, None]);
        assert_eq!(row.peer_bytes, None);
        let l = row.lat.unwrap();
        assert_eq!(l.basis, LatencyBasis::HalfRoundTrip);
        assert_eq!(
            (l.t_min_usec, l.t_typical_usec, l.t_max_usec),
            (1.0, 2.0, 3.0)
        );

        let s = spec(Measure::Lat, TestKind::Read);
        let mut m = PhaseMeasurement {
            conns: vec![conn(1, vec![5000])],
            elapsed: Duration::from_millis(1),
            samples: None,
            cpu: None,
        };
        let l = RowReport::build(&s, 4096, &mut m, &[None]).lat.unwrap();
        assert_eq!(l.basis, LatencyBasis::RoundTrip);
        assert_eq!(l.t_avg_usec, 5.0);
    }

    #[test]
    fn comparison_ratio_and_table() {
        let row = |size, avg: f64, cpu_s_per_gib: Option<f64>| RowReport {
            size,
            iterations: 1,
            bytes: size,
            peer_bytes: None,
            elapsed_s: 1.0,
            cpu_s: cpu_s_per_gib,
            cpu_s_per_gib,
            connections: vec![],
            bw: Some(BwReport {
                peak_bytes_per_sec: None,
                avg_bytes_per_sec: avg,
                msg_rate_mpps: 0.0,
            }),
            lat: None,
        };
        let p = RunReport {
            transport: Transport::Iwarp,
            role: Role::Primary,
            results: vec![row(2, 1048576.0, Some(1.5)), row(4, 2097152.0, Some(1.0))],
        };
        let b = RunReport {
            transport: Transport::Tcp,
            role: Role::Baseline,
            results: vec![row(2, 4194304.0, Some(1.0)), row(4, 0.0, None)],
        };
        let c = Comparison::build(Measure::Bw, &p, &b);
        assert_eq!(c.rows[0].ratio, Some(0.25));
        assert_eq!(c.rows[1].ratio, None);
        assert_eq!(c.rows[0].cpu_ratio, Some(1.5));
        assert_eq!(c.rows[1].cpu_ratio, None);
        // A run's CPU figure needs every size's CPU time: the baseline lacks one.
        assert_eq!(cpu_figure(&b, Measure::Bw), None);
        // 2.5 s over 6 octets; per operation, 2.5 s over 2 operations.
        let gib = 2.5 / (6.0 / GIB);
        assert_eq!(cpu_figure(&p, Measure::Bw), Some(format!("{gib:.3} s/GiB")));
        assert_eq!(
            cpu_figure(&p, Measure::Lat),
            Some("1250000.00 usec/op".into())
        );
        let table = comparison_table(&c, Measure::Bw, TableStyle { gbits: false });
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[1], " Side by side: iwarp vs tcp baseline");
        assert_eq!(
            lines[2],
            " #bytes     iwarp BW average[MiB/sec]         tcp baseline BW average[MiB/sec]  ratio iwarp/tcp     CPU per octet iwarp/tcp"
        );
        assert_eq!(
            lines[3],
            " 2          1.00                              4.00                              0.250               1.500"
        );
        assert_eq!(
            lines[4],
            " 4          2.00                              0.00                              -                   -"
        );
    }
}
