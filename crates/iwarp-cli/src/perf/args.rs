//! Command line of `iwarp perf`, in perftest's spirit, and its resolution into a
//! [`RunConfig`].
//!
//! Flags keep perftest's letters where perftest has them (`-s -a -n -D -t -o -q -p -N`);
//! the operation and bandwidth/latency choice, which perftest spreads over six binaries
//! (`ib_write_bw` …), are two positional words: `iwarp perf read lat`. Test-shaping options
//! are `Option`s here so that defaults can depend on the test (perftest's BW and latency
//! defaults differ) and so that `--server`, which learns the test from the client, can reject
//! them instead of silently ignoring them.

use std::net::IpAddr;

use clap::Args;

use super::error::PerfError;
use super::perftest::params::{Options as PerftestOptions, Side};
use super::perftest::{PerftestConfig, Role as PerftestRole};
use super::spec::{
    CrcMode, FramingMode, IftCrc, Markers, Measure, Mode, MpaRev, PlacementMode, ProtocolKnobs,
    RunConfig, RunLength, TestKind, TestSpec, Transport, DEFAULT_ITERS_BW, DEFAULT_ITERS_LAT,
    DEFAULT_OUTS, DEFAULT_PORT, DEFAULT_SIZE_BW, DEFAULT_SIZE_LAT, DEFAULT_TX_DEPTH,
    DEFAULT_WARMUP_LAT, MAX_SWEEP_SIZE,
};

/// `iwarp perf`: perftest-style bandwidth and latency tests, iWARP against plain TCP.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(after_help = "\
Examples:
  iwarp perf                                  loopback iWARP write bandwidth test on 127.0.0.1
  iwarp perf read lat -a                      loopback read latency, sizes 2 B .. 8 MiB
  iwarp perf --server                         serve tests on port 18515
  iwarp perf send bw -q 4 --connect host      4 connections to a server
  iwarp perf --baseline tcp                   iWARP and plain TCP side by side

Against perftest (rdma_cm mode, -R at both ends, the same test and options on both):
  iwarp perf write bw -R -s 4K -n 1000 --connect HOST   client of `ib_write_bw -R -s 4096 -n 1000`
  iwarp perf send lat -R -s 64 --server                 server for `ib_send_lat -R -s 64 HOST`
  iwarp perf read bw -R -a                               both ends here, over loopback")]
pub struct PerfArgs {
    /// Operation under test.
    #[arg(value_enum)]
    pub test: Option<TestKind>,

    /// Bandwidth (bw) or latency (lat).
    #[arg(value_enum)]
    pub measure: Option<Measure>,

    /// Message size in octets; accepts K, M, G suffixes (binary). [default: 65536 for bw, 2 for lat]
    #[arg(short = 's', long, value_parser = parse_size, conflicts_with = "all")]
    pub size: Option<u64>,

    /// Run all sizes 2, 4, 8 .. 8 MiB (2^1 .. 2^23), like perftest.
    #[arg(short = 'a', long)]
    pub all: bool,

    /// Measured operations per connection and size (min 5). [default: 5000 for bw, 1000 for lat]
    #[arg(short = 'n', long = "iters", conflicts_with = "duration")]
    pub iters: Option<u64>,

    /// Run each size for this many seconds instead of a fixed count (fractions allowed).
    #[arg(short = 'D', long)]
    pub duration: Option<f64>,

    /// Operations in flight per connection for bandwidth tests. [default: 128]
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,

    /// Outstanding RDMA Reads per connection (caps the depth of read tests). [default: 16]
    #[arg(short = 'o', long)]
    pub outs: Option<u32>,

    /// Number of connections, run concurrently and summed (perftest's number of QPs). [default: 1]
    #[arg(short = 'q', long = "qp", visible_alias = "connections")]
    pub connections: Option<u32>,

    /// Unmeasured operations per connection before each size. [default: the queue depth for bw, 16 for lat]
    #[arg(long)]
    pub warmup: Option<u64>,

    /// Receive queue depth of Send tests: receives posted per connection (perftest `-r`;
    /// --perftest only). [default: 512, at most -n]
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,

    /// Ask for a completion every this many operations of a bandwidth test (perftest `-Q`;
    /// --perftest only). [default: 100, 1 above 8 KiB]
    #[arg(short = 'Q', long = "cq-mod")]
    pub cq_mod: Option<u32>,

    /// Bidirectional bandwidth: both ends send, each prints the sum (perftest `-b`;
    /// --perftest only).
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,

    /// Speak perftest's own protocol, as its rdma_cm mode (`-R`) does: run against, or
    /// serve, `ib_write_bw -R`, `ib_read_lat -R` and the rest. Both ends take the same test
    /// and options (-s/-a, -n/-D, -q, -t, -r, -b), as perftest requires.
    #[arg(short = 'R', long = "perftest", visible_alias = "rdma_cm")]
    pub perftest: bool,

    /// Do not measure peak bandwidth (prints 0.00, like perftest -N).
    #[arg(short = 'N', long = "no-peak")]
    pub no_peak: bool,

    /// MPA revision the iWARP transport requests.
    #[arg(long = "mpa-rev", value_enum)]
    pub mpa_rev: Option<MpaRev>,

    /// MPA CRC: on (ask for it), off (do not ask), required (insist).
    #[arg(long, value_enum)]
    pub crc: Option<CrcMode>,

    /// MPA markers: none, rx, tx or both.
    #[arg(long, value_enum)]
    pub markers: Option<Markers>,

    /// When received payload is placed: verified (each FPDU staged and checked first, RFC 5044
    /// §6) or direct (as it arrives, straight from the socket, checked at the FPDU's end).
    /// [default: verified]
    #[arg(long, value_enum)]
    pub placement: Option<PlacementMode>,

    /// Posts closer together than this many microseconds share system calls: a post soon after
    /// one that wrote leaves its octets to the next such post or to the connection's writer
    /// task. 0 makes every post write itself. [default: the library's, 5]
    #[arg(long = "post-burst", value_name = "MICROSECONDS")]
    pub post_burst: Option<u32>,

    /// Framing under DDP: mpa (with --mpa-rev, --crc, --placement) or ift (with --ift-crc);
    /// --markers applies to both. [default: mpa]
    #[arg(long, value_enum)]
    pub framing: Option<FramingMode>,

    /// IFT's CRC fields, sent and checked both ways: both, header, payload or none.
    /// [default: both]
    #[arg(long = "ift-crc", value_enum)]
    pub ift_crc: Option<IftCrc>,

    /// Serve tests (one client at a time) instead of running one.
    #[arg(long, conflicts_with_all = ["connect", "baseline", "json"])]
    pub server: bool,

    /// Run against a server at HOST or HOST:PORT instead of in-process loopback.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,

    /// Control port (the server's, or the one --connect uses without a port).
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Address the server listens on.
    #[arg(long, default_value = "0.0.0.0", requires = "server")]
    pub bind: IpAddr,

    /// Port of the server's data listener (0: a new ephemeral port per session).
    #[arg(long = "data-port", default_value_t = 0, requires = "server")]
    pub data_port: u16,

    /// Transport under test (client side; a server serves whichever transport a client asks for).
    #[arg(long, value_enum, default_value_t = Transport::Iwarp)]
    pub transport: Transport,

    /// Also run this transport with the same spec and print both side by side with the ratio,
    /// and the ratio of CPU time per octet (this process's, both ends in a loopback run).
    #[arg(long, value_enum)]
    pub baseline: Option<Transport>,

    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Report bandwidth in Gb/sec (10^9 bits) instead of MiB/sec.
    #[arg(long = "report-gbits", visible_alias = "report_gbits")]
    pub report_gbits: bool,
}

/// Parses `65536`, `64K`, `64KiB`, `1M`, `8m`: binary multiples.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, suffix) = lower.split_at(digits_end);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size (examples: 4096, 64K, 1M)"))?;
    let mult: u64 = match suffix {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("unknown size suffix in `{text}` (use K, M or G)")),
    };
    n.checked_mul(mult)
        .filter(|&s| s > 0)
        .ok_or_else(|| format!("size `{text}` out of range"))
}

impl PerfArgs {
    /// Resolves a `--perftest` invocation: perftest's own options, checked here and given
    /// perftest's defaults by [`Params`](super::perftest::params::Params).
    pub fn resolve_perftest(&self) -> Result<PerftestConfig, PerfError> {
        let native_only = [
            (self.baseline.is_some(), "--baseline"),
            (self.json, "--json"),
            (self.transport != Transport::Iwarp, "--transport"),
            (self.warmup.is_some(), "--warmup"),
            (self.mpa_rev.is_some(), "--mpa-rev"),
            (self.markers.is_some(), "--markers"),
            (self.placement.is_some(), "--placement"),
            (self.post_burst.is_some(), "--post-burst"),
            (self.framing.is_some(), "--framing"),
            (self.ift_crc.is_some(), "--ift-crc"),
            (self.data_port != 0, "--data-port"),
        ];
        if let Some(given) = given_flags(&native_only) {
            return Err(PerfError::Usage(format!(
                "{given} not available with --perftest (perftest has no such option)"
            )));
        }
        let duration = match self.duration {
            None => None,
            Some(d) if d >= 1.0 && d.fract() == 0.0 && d <= f64::from(u32::MAX) => Some(d as u32),
            Some(d) => {
                return Err(PerfError::Usage(format!(
                    "-D {d}: perftest counts whole seconds, at least 1"
                )))
            }
        };
        let opts = PerftestOptions {
            size: self.size,
            all: self.all,
            iters: self.iters,
            duration,
            tx_depth: self.tx_depth,
            rx_depth: self.rx_depth,
            qps: self.connections,
            out_reads: self.outs,
            cq_mod: self.cq_mod,
            no_peak: self.no_peak,
            gbits: self.report_gbits,
            duplex: self.bidirectional,
        };
        let test = self.test.unwrap_or(TestKind::Write);
        let measure = self.measure.unwrap_or(Measure::Bw);
        let role = if self.server {
            PerftestRole::Server {
                bind: self.bind,
                port: self.port,
            }
        } else if let Some(target) = &self.connect {
            let (host, port) = split_host_port(target, self.port)?;
            PerftestRole::Client { host, port }
        } else {
            PerftestRole::Loopback
        };
        let crc = match self.crc {
            None | Some(CrcMode::Off) => iwarp::CrcPolicy::Off,
            Some(CrcMode::On) => iwarp::CrcPolicy::Preferred,
            Some(CrcMode::Required) => iwarp::CrcPolicy::Required,
        };
        let cfg = PerftestConfig {
            test,
            measure,
            opts,
            role,
            crc,
        };
        // Check the options now, before any connection.
        cfg.params(Side::Client)?;
        Ok(cfg)
    }

    /// Resolves defaults and checks the combination; returns the run configuration.
    pub fn resolve(&self) -> Result<RunConfig, PerfError> {
        let perftest_only = [
            (self.rx_depth.is_some(), "--rx-depth"),
            (self.cq_mod.is_some(), "--cq-mod"),
            (self.bidirectional, "--bidirectional"),
        ];
        if let Some((_, name)) = perftest_only.iter().find(|(g, _)| *g) {
            return Err(PerfError::Usage(format!("{name} needs --perftest")));
        }
        let protocol = ProtocolKnobs {
            mpa_rev: self.mpa_rev.unwrap_or(ProtocolKnobs::default().mpa_rev),
            crc: self.crc.unwrap_or(ProtocolKnobs::default().crc),
            markers: self.markers.unwrap_or(ProtocolKnobs::default().markers),
            placement: self.placement.unwrap_or(ProtocolKnobs::default().placement),
            framing: self.framing.unwrap_or_default(),
            ift_crc: self.ift_crc.unwrap_or_default(),
            post_burst_us: self.post_burst,
        };
        if self.server {
            let shaping = [
                (self.test.is_some(), "TEST"),
                (self.measure.is_some(), "MEASURE"),
                (self.size.is_some(), "--size"),
                (self.all, "--all"),
                (self.iters.is_some(), "--iters"),
                (self.duration.is_some(), "--duration"),
                (self.tx_depth.is_some(), "--tx-depth"),
                (self.outs.is_some(), "--outs"),
                (self.connections.is_some(), "--qp"),
                (self.warmup.is_some(), "--warmup"),
                (self.no_peak, "--no-peak"),
                (self.mpa_rev.is_some(), "--mpa-rev"),
                (self.crc.is_some(), "--crc"),
                (self.markers.is_some(), "--markers"),
                (self.placement.is_some(), "--placement"),
                (self.post_burst.is_some(), "--post-burst"),
                (self.framing.is_some(), "--framing"),
                (self.ift_crc.is_some(), "--ift-crc"),
                (self.report_gbits, "--report-gbits"),
            ];
            if let Some(given) = given_flags(&shaping) {
                return Err(PerfError::Usage(format!(
                    "--server learns the test from each client; pass {given} to the client instead"
                )));
            }
            return Ok(RunConfig {
                spec: None,
                mode: Mode::Server {
                    bind: self.bind,
                    port: self.port,
                    data_port: self.data_port,
                },
                transport: self.transport,
                baseline: None,
                json: false,
                report_gbits: false,
            });
        }

        let test = self.test.unwrap_or(TestKind::Write);
        let measure = self.measure.unwrap_or(Measure::Bw);
        let sizes = if self.all {
            (1..=23)
                .map(|shift| 1u64 << shift)
                .take_while(|&s| s <= MAX_SWEEP_SIZE)
                .collect()
        } else {
            vec![self.size.unwrap_or(match measure {
                Measure::Bw => DEFAULT_SIZE_BW,
                Measure::Lat => DEFAULT_SIZE_LAT,
            })]
        };
        let length = match (self.iters, self.duration) {
            (Some(_), Some(_)) => {
                return Err(PerfError::Usage(
                    "--iters and --duration exclude each other".into(),
                ))
            }
            (_, Some(d)) => RunLength::Duration(d),
            (Some(n), None) => RunLength::Iterations(n),
            (None, None) => RunLength::Iterations(match measure {
                Measure::Bw => DEFAULT_ITERS_BW,
                Measure::Lat => DEFAULT_ITERS_LAT,
            }),
        };
        let mut spec = TestSpec {
            test,
            measure,
            sizes,
            length,
            tx_depth: self.tx_depth.unwrap_or(DEFAULT_TX_DEPTH),
            outs: self.outs.unwrap_or(DEFAULT_OUTS),
            connections: self.connections.unwrap_or(1),
            warmup: 0,
            no_peak: self.no_peak,
            protocol,
        };
        spec.warmup = self.warmup.unwrap_or(match measure {
            Measure::Bw => u64::from(spec.effective_depth()),
            Measure::Lat => DEFAULT_WARMUP_LAT,
        });
        spec.validate().map_err(PerfError::Usage)?;
        if spec.warmup > super::spec::MAX_ITERATIONS {
            return Err(PerfError::Usage(format!(
                "--warmup {} above the maximum {}",
                spec.warmup,
                super::spec::MAX_ITERATIONS
            )));
        }

        let mode = match &self.connect {
            None => Mode::Loopback,
            Some(target) => {
                let (host, port) = split_host_port(target, self.port)?;
                Mode::Client { host, port }
            }
        };
        Ok(RunConfig {
            spec: Some(spec),
            mode,
            transport: self.transport,
            baseline: self.baseline,
            json: self.json,
            report_gbits: self.report_gbits,
        })
    }
}

/// Splits `host:port`, `[v6]:port`, `v6` or `host` (then `default_port`).
fn split_host_port(target: &str, default_port: u16) -> Result<(String, u16), PerfError> {
    let bad = || PerfError::Usage(format!("--connect `{target}`: expected HOST or HOST:PORT"));
    if let Some(rest) = target.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None if after.is_empty() => default_port,
            None => return Err(bad()),
        };
        return Ok((host.to_string(), port));
    }
    match target.rsplit_once(':') {
        // More than one colon and no brackets: a bare IPv6 address.
        Some((host, _)) if host.contains(':') => Ok((target.to_string(), default_port)),
        Some((host, port)) if !host.is_empty() => {
            Ok((host.to_string(), port.parse().map_err(|_| bad())?))
        }
        Some(_) => Err(bad()),
        None if target.is_empty() => Err(bad()),
        None => Ok((target.to_string(), default_port)),
    }
}

/// The names of the flags given among `flags` (whether given, name), joined with
/// commas; `None` if none was.
fn given_flags(flags: &[(bool, &str)]) -> Option<String> {
    let names: Vec<&str> = flags.iter().filter(|(g, _)| *g).map(|(_, n)| *n).collect();
    (!names.is_empty()).then(|| names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        perf: PerfArgs,
    }

    fn parse(args: &[&str]) -> Result<PerfArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("perf").chain(args.iter().copied())).map(|c| c.perf)
    }

    fn spec(args: &[&str]) -> TestSpec {
        parse(args).unwrap().resolve().unwrap().spec.unwrap()
    }

    #[test]
    fn defaults_are_perftests() {
        let cfg = parse(&[]).unwrap().resolve().unwrap();
        assert_eq!(cfg.mode, Mode::Loopback);
        assert_eq!(cfg.transport, Transport::Iwarp);
        assert_eq!(cfg.baseline, None);
        let s = cfg.spec.unwrap();
        assert_eq!((s.test, s.measure), (TestKind::Write, Measure::Bw));
        assert_eq!(s.sizes, vec![65536]);
        assert_eq!(s.length, RunLength::Iterations(5000));
        assert_eq!((s.tx_depth, s.outs, s.connections), (128, 16, 1));
        assert_eq!(s.warmup, 128);
        assert_eq!(s.protocol, ProtocolKnobs::default());

        let s = spec(&["read", "lat"]);
        assert_eq!((s.test, s.measure), (TestKind::Read, Measure::Lat));
        assert_eq!(s.sizes, vec![2]);
        assert_eq!(s.length, RunLength::Iterations(1000));
        assert_eq!(s.warmup, 16);
        assert_eq!(s.effective_depth(), 1);

        assert_eq!(
            spec(&["read"]).warmup,
            16,
            "read bw warms up with min(tx depth, outs)"
        );
    }

    #[test]
    fn all_sizes_are_powers_of_two_to_8_mib() {
        let s = spec(&["-a"]);
        assert_eq!(s.sizes.len(), 23);
        assert_eq!(s.sizes.first(), Some(&2));
        assert_eq!(s.sizes.last(), Some(&(8 << 20)));
        assert!(s.sizes.windows(2).all(|w| w[1] == 2 * w[0]));
    }

    #[test]
    fn options_and_knobs() {
        let s = spec(&[
            "send",
            "bw",
            "-s",
            "64K",
            "-n",
            "10",
            "-t",
            "4",
            "-q",
            "3",
            "--warmup",
            "0",
            "--mpa-rev",
            "immediate",
            "--crc",
            "required",
            "--markers",
            "both",
            "-N",
        ]);
        assert_eq!(s.sizes, vec![65536]);
        assert_eq!(s.length, RunLength::Iterations(10));
        assert_eq!(
            (s.tx_depth, s.connections, s.warmup, s.no_peak),
            (4, 3, 0, true)
        );
        assert_eq!(s.protocol.mpa_rev, MpaRev::Immediate);
        assert_eq!(s.protocol.crc, CrcMode::Required);
        assert_eq!(s.protocol.markers, Markers::Both);
        // The library's window for posts in a burst, unless asked for.
        assert_eq!(spec(&[]).protocol.post_burst_us, None);
        assert_eq!(spec(&["--post-burst", "0"]).protocol.post_burst_us, Some(0));
        assert!(parse(&["--post-burst", "-1"]).is_err());
        assert!(parse(&["--server", "--post-burst", "5"])
            .unwrap()
            .resolve()
            .is_err());
        // The runtime's default placement, unless asked for.
        assert_eq!(spec(&[]).protocol.placement, PlacementMode::Verified);
        assert_eq!(
            spec(&["--placement", "direct"]).protocol.placement,
            PlacementMode::Direct
        );
        assert!(parse(&["--placement", "sideways"]).is_err());
        assert!(parse(&["--server", "--placement", "direct"])
            .unwrap()
            .resolve()
            .is_err());
        let ift = spec(&["--framing", "ift", "--ift-crc", "header"]).protocol;
        assert_eq!(
            (ift.framing, ift.ift_crc),
            (FramingMode::Ift, IftCrc::Header)
        );
        assert_eq!(spec(&[]).protocol.framing, FramingMode::Mpa);
        assert!(parse(&["--server", "--framing", "ift"])
            .unwrap()
            .resolve()
            .is_err());
        assert_eq!(spec(&["-D", "2.5"]).length, RunLength::Duration(2.5));
        assert_eq!(spec(&["--connections", "2"]).connections, 2);
    }

    #[test]
    fn conflicts_and_bad_values() {
        assert!(parse(&["-n", "10", "-D", "1"]).is_err());
        assert!(parse(&["-a", "-s", "4"]).is_err());
        assert!(parse(&["--server", "--connect", "h:1"]).is_err());
        assert!(parse(&["--server", "--json"]).is_err());
        assert!(
            parse(&["--bind", "127.0.0.1"]).is_err(),
            "--bind needs --server"
        );
        assert!(parse(&["-s", "12Q"]).is_err());
        assert!(parse(&["--mpa-rev", "3"]).is_err());
        let usage = |args: &[&str]| match parse(args).unwrap().resolve() {
            Err(PerfError::Usage(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        };
        assert!(usage(&["-n", "4"]).contains("iterations 4"));
        assert!(usage(&["-q", "0"]).contains("connections 0"));
        assert!(usage(&["-D", "0"]).contains("duration"));
        assert!(usage(&["-t", "0"]).contains("tx depth"));
        assert!(usage(&["--server", "write", "-s", "4"]).contains("TEST, --size"));
        assert!(usage(&["--connect", "host:notaport"]).contains("HOST:PORT"));
    }

    #[test]
    fn server_and_client_modes() {
        let cfg = parse(&["--server", "-p", "9999", "--bind", "127.0.0.1"])
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(
            cfg.mode,
            Mode::Server {
                bind: "127.0.0.1".parse().unwrap(),
                port: 9999,
                data_port: 0
            }
        );
        assert!(cfg.spec.is_none());
        let client = |t: &str| match parse(&["--connect", t]).unwrap().resolve().unwrap().mode {
            Mode::Client { host, port } => (host, port),
            m => panic!("{m:?}"),
        };
        assert_eq!(client("example.org:7000"), ("example.org".into(), 7000));
        assert_eq!(client("example.org"), ("example.org".into(), 18515));
        assert_eq!(client("[::1]:7000"), ("::1".into(), 7000));
        assert_eq!(client("fe80::1"), ("fe80::1".into(), 18515));
    }

    #[test]
    fn size_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("8m"), Ok(8 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }
}
