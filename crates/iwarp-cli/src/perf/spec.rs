//! What a `perf` run measures: the plain [`TestSpec`] and the run configuration around it.
//!
//! A [`TestSpec`] describes the traffic pattern only (operation, bandwidth or latency, sizes,
//! how long, queue depth, connections, warm-up, protocol knobs). It is what the client sends to
//! the server in the control handshake, so that `--server` learns the test from the client
//! instead of needing the same options on both sides as perftest does. Everything about *where*
//! the test runs (loopback, server, client address, output format) lives in [`RunConfig`].

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// perftest's default TCP port for its out-of-band exchange (`DEF_PORT`), used for our control
/// connection.
pub const DEFAULT_PORT: u16 = 18515;
/// Largest size `-a` sweeps to: 2^23 octets, perftest's `MAX_SIZE`.
pub const MAX_SWEEP_SIZE: u64 = 8 * 1024 * 1024;
/// Smallest iteration count perftest accepts (`MIN_ITER`).
pub const MIN_ITERATIONS: u64 = 5;
/// Largest iteration count perftest accepts (`MAX_ITER`).
pub const MAX_ITERATIONS: u64 = 100_000_000;
/// Default iterations for bandwidth tests: perftest's `DEF_ITERS_WB` (5000), enough for a
/// stable average at 64 KiB.
pub const DEFAULT_ITERS_BW: u64 = 5000;
/// Default iterations for latency tests: perftest's `DEF_ITERS`.
pub const DEFAULT_ITERS_LAT: u64 = 1000;
/// Default message size for bandwidth tests (what perftest prints without `-s`).
pub const DEFAULT_SIZE_BW: u64 = 65536;
/// Default message size for latency tests (perftest's `DEF_SIZE_LAT`).
pub const DEFAULT_SIZE_LAT: u64 = 2;
/// Default send queue depth for bandwidth tests (perftest `-t`, 128).
pub const DEFAULT_TX_DEPTH: u32 = 128;
/// Default outstanding RDMA Reads (`-o`). perftest asks the device for its maximum; we have
/// no device, so we pick 16 (perftest's `MAX_OUT_READ_HERMON`, a common RNIC ORD) and apply
/// it to both transports alike.
pub const DEFAULT_OUTS: u32 = 16;
/// Default warm-up operations per connection for latency tests.
pub const DEFAULT_WARMUP_LAT: u64 = 16;
/// Upper bound on the queue depth and outstanding reads; keeps buffers and counters small.
pub const MAX_DEPTH: u32 = 16384;
/// Upper bound on connections (`-q`).
pub const MAX_CONNECTIONS: u32 = 1024;
/// Upper bound on a single message size (1 GiB); each connection holds a buffer this large.
pub const MAX_SIZE: u64 = 1 << 30;

/// The operation under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// RDMA Write (`ib_write_*`).
    Write,
    /// RDMA Read (`ib_read_*`).
    Read,
    /// Send / Receive (`ib_send_*`).
    Send,
}

impl TestKind {
    /// perftest's name for the verb, as in its banner (`RDMA_Write BW Test`).
    pub fn perftest_name(self) -> &'static str {
        match self {
            TestKind::Write => "RDMA_Write",
            TestKind::Read => "RDMA_Read",
            TestKind::Send => "Send",
        }
    }
}

impl fmt::Display for TestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TestKind::Write => "write",
            TestKind::Read => "read",
            TestKind::Send => "send",
        })
    }
}

/// Bandwidth or latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Bandwidth: many operations in flight, throughput reported.
    Bw,
    /// Latency: one operation at a time, per-operation times reported.
    Lat,
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Measure::Bw => "bw",
            Measure::Lat => "lat",
        })
    }
}

/// How long each size runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunLength {
    /// A fixed number of measured operations per connection (`-n`).
    Iterations(u64),
    /// Post operations for this many seconds per size (`-D`); operations posted before the
    /// deadline are completed and counted.
    Duration(f64),
}

impl RunLength {
    /// The duration of a `-D` run.
    pub fn duration(&self) -> Option<Duration> {
        match *self {
            RunLength::Duration(secs) => Duration::try_from_secs_f64(secs).ok(),
            RunLength::Iterations(_) => None,
        }
    }
}

/// The transports `iwarp perf` knows about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Plain TCP sockets: the baseline.
    Tcp,
    /// The iWARP stack (MPA/DDP/RDMAP over TCP) of the `iwarp` crate.
    Iwarp,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Iwarp => "iwarp",
        })
    }
}

/// MPA revision to request (`--mpa-rev`). Opaque here: read by the iWARP backend only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum MpaRev {
    /// Revision 0 (the pre-RFC draft).
    #[value(name = "0")]
    #[serde(rename = "0")]
    V0,
    /// Revision 1 (RFC 5044).
    #[value(name = "1")]
    #[serde(rename = "1")]
    V1,
    /// Revision 2 (RFC 6581, enhanced connection establishment).
    #[value(name = "2")]
    #[serde(rename = "2")]
    V2,
    /// The legacy immediate-start profile of draft-culley-iwarp-mpa-02: no startup frames,
    /// markers and CRC always on in both directions.
    Immediate,
}

impl fmt::Display for MpaRev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MpaRev::V0 => "0",
            MpaRev::V1 => "1",
            MpaRev::V2 => "2",
            MpaRev::Immediate => "immediate",
        })
    }
}

/// MPA CRC policy (`--crc`). Opaque here: read by the iWARP backend only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum CrcMode {
    /// Ask for CRC, accept a peer that declines.
    On,
    /// Do not ask for CRC (the peer may still insist).
    Off,
    /// Insist on CRC; fail the connection otherwise.
    Required,
}

impl fmt::Display for CrcMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CrcMode::On => "on",
            CrcMode::Off => "off",
            CrcMode::Required => "required",
        })
    }
}

/// MPA marker policy (`--markers`). Opaque here: read by the iWARP backend only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Markers {
    /// No markers in either direction.
    None,
    /// Ask the peer to send markers to us.
    Rx,
    /// Send markers to the peer.
    Tx,
    /// Markers in both directions.
    Both,
}

impl fmt::Display for Markers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Markers::None => "none",
            Markers::Rx => "rx",
            Markers::Tx => "tx",
            Markers::Both => "both",
        })
    }
}

/// When received payload is placed (`--placement`). Opaque here: read by the iWARP backend only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PlacementMode {
    /// As it arrives, straight from the socket; each FPDU is checked at its end.
    Direct,
    /// Each FPDU staged whole and checked (CRC, markers) before its payload is placed: the
    /// runtime's default.
    #[default]
    Verified,
}

impl fmt::Display for PlacementMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PlacementMode::Direct => "direct",
            PlacementMode::Verified => "verified",
        })
    }
}

/// The framing under DDP (`--framing`). Opaque here: read by the iWARP backend only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum FramingMode {
    /// MPA (RFC 5044), with the revision `--mpa-rev` asks for.
    #[default]
    Mpa,
    /// IFT (draft-williams-iwarp-ift-01): Adaption Indications, then frames with a header CRC
    /// and a payload CRC as `--ift-crc` says.
    Ift,
}

impl fmt::Display for FramingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FramingMode::Mpa => "mpa",
            FramingMode::Ift => "ift",
        })
    }
}

/// Which CRC fields IFT frames carry, both ways (`--ift-crc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum IftCrc {
    /// A header CRC and a payload CRC, sent and checked.
    #[default]
    Both,
    /// The header CRC only.
    Header,
    /// The payload CRC only.
    Payload,
    /// Neither.
    None,
}

impl IftCrc {
    /// Whether frames carry a header CRC and a payload CRC.
    pub fn fields(self) -> (bool, bool) {
        match self {
            IftCrc::Both => (true, true),
            IftCrc::Header => (true, false),
            IftCrc::Payload => (false, true),
            IftCrc::None => (false, false),
        }
    }
}

impl fmt::Display for IftCrc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IftCrc::Both => "both",
            IftCrc::Header => "header",
            IftCrc::Payload => "payload",
            IftCrc::None => "none",
        })
    }
}

/// The iWARP protocol knobs. The TCP backend ignores them; they travel in the spec so that an
/// iWARP server configures itself like the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolKnobs {
    /// MPA revision to request.
    pub mpa_rev: MpaRev,
    /// CRC policy.
    pub crc: CrcMode,
    /// Marker policy.
    pub markers: Markers,
    /// When received payload is placed; absent from older clients' specs.
    #[serde(default)]
    pub placement: PlacementMode,
    /// MPA or IFT; absent from older clients' specs.
    #[serde(default)]
    pub framing: FramingMode,
    /// IFT's CRC fields; absent from older clients' specs.
    #[serde(default)]
    pub ift_crc: IftCrc,
    /// The window in which posts share writes, in microseconds (`Config::post_burst`);
    /// `None`, or absent from older clients' specs, for the library's default.
    #[serde(default)]
    pub post_burst_us: Option<u32>,
}

impl Default for ProtocolKnobs {
    /// Revision 2 as Linux siw sends by default, CRC on, no markers.
    fn default() -> Self {
        ProtocolKnobs {
            mpa_rev: MpaRev::V2,
            crc: CrcMode::On,
            markers: Markers::None,
            placement: PlacementMode::default(),
            framing: FramingMode::default(),
            ift_crc: IftCrc::default(),
            post_burst_us: None,
        }
    }
}

/// One test, as the client tells it to the server. Plain data: no defaults are applied here
/// (that is `args.rs`'s job) and it is always [`validate`](TestSpec::validate)d on receipt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    /// Operation under test.
    pub test: TestKind,
    /// Bandwidth or latency.
    pub measure: Measure,
    /// Message sizes in octets, run in this order.
    pub sizes: Vec<u64>,
    /// Iterations or duration, per size.
    pub length: RunLength,
    /// Send queue depth for bandwidth tests (perftest `-t`).
    pub tx_depth: u32,
    /// Outstanding RDMA Reads (perftest `-o`); caps the depth of read bandwidth tests.
    pub outs: u32,
    /// Number of connections (perftest `-q`, one QP each), run concurrently and summed.
    pub connections: u32,
    /// Unmeasured operations per connection before each size's measured phase.
    pub warmup: u64,
    /// Do not measure peak bandwidth (perftest `-N`); always so with a duration.
    pub no_peak: bool,
    /// iWARP protocol knobs.
    pub protocol: ProtocolKnobs,
}

impl TestSpec {
    /// Operations in flight per connection: 1 for latency, `tx_depth` for write/send
    /// bandwidth, `min(tx_depth, outs)` for read bandwidth (reads are limited by the ORD).
    pub fn effective_depth(&self) -> u32 {
        match (self.measure, self.test) {
            (Measure::Lat, _) => 1,
            (Measure::Bw, TestKind::Read) => self.tx_depth.min(self.outs),
            (Measure::Bw, _) => self.tx_depth,
        }
    }

    /// Whether peak bandwidth is measured: bandwidth tests, not `-N`, not `-D` (like perftest).
    pub fn measures_peak(&self) -> bool {
        self.measure == Measure::Bw
            && !self.no_peak
            && matches!(self.length, RunLength::Iterations(_))
    }

    /// Checks every field against its bounds. Used on the client after parsing and on the
    /// server on the spec it receives, so a hostile or buggy peer cannot make us allocate
    /// absurd buffers or loop forever.
    pub fn validate(&self) -> Result<(), String> {
        if self.sizes.is_empty() {
            return Err("no message sizes".into());
        }
        if let Some(&bad) = self.sizes.iter().find(|&&s| s == 0 || s > MAX_SIZE) {
            return Err(format!("message size {bad} out of range 1..={MAX_SIZE}"));
        }
        if self.sizes.len() > 64 {
            return Err("more than 64 message sizes".into());
        }
        match self.length {
            RunLength::Iterations(n) if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&n) => {
                return Err(format!(
                    "iterations {n} out of range {MIN_ITERATIONS}..={MAX_ITERATIONS}"
                ))
            }
            RunLength::Duration(secs) if !(secs > 0.0 && secs <= 86_400.0) => {
                return Err(format!("duration {secs} s out of range (0, 86400]"))
            }
            _ => {}
        }
        if self.tx_depth == 0 || self.tx_depth > MAX_DEPTH {
            return Err(format!(
                "tx depth {} out of range 1..={MAX_DEPTH}",
                self.tx_depth
            ));
        }
        if self.outs == 0 || self.outs > MAX_DEPTH {
            return Err(format!(
                "outstanding reads {} out of range 1..={MAX_DEPTH}",
                self.outs
            ));
        }
        if self.connections == 0 || self.connections > MAX_CONNECTIONS {
            return Err(format!(
                "connections {} out of range 1..={MAX_CONNECTIONS}",
                self.connections
            ));
        }
        Ok(())
    }
}

/// Where and how a run happens. Not sent to the server.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Server and client in this process on 127.0.0.1, ephemeral ports.
    Loopback,
    /// Serve clients, one session at a time, until interrupted.
    Server {
        /// Address the control listener binds to.
        bind: IpAddr,
        /// Control port.
        port: u16,
        /// Port for the data connections, 0 for an ephemeral one per session.
        data_port: u16,
    },
    /// Connect to a running `iwarp perf --server`.
    Client {
        /// Host name or address of the server.
        host: String,
        /// Control port of the server.
        port: u16,
    },
}

/// A fully resolved `iwarp perf` invocation.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// The traffic pattern (client side; `None` for a server, which learns it per session).
    pub spec: Option<TestSpec>,
    /// Loopback, server or client.
    pub mode: Mode,
    /// The transport under test.
    pub transport: Transport,
    /// A second transport run with the same spec and printed side by side.
    pub baseline: Option<Transport>,
    /// Machine-readable JSON on stdout instead of the table.
    pub json: bool,
    /// Report bandwidth in Gb/sec (10^9 bits) instead of MiB/sec.
    pub report_gbits: bool,
}

/// Resolves `host` to socket addresses (numeric or by name), for the client.
pub async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TestSpec {
        TestSpec {
            test: TestKind::Read,
            measure: Measure::Bw,
            sizes: vec![65536],
            length: RunLength::Iterations(1000),
            tx_depth: 128,
            outs: 16,
            connections: 1,
            warmup: 0,
            no_peak: false,
            protocol: ProtocolKnobs::default(),
        }
    }

    #[test]
    fn depth_rules() {
        let mut s = spec();
        assert_eq!(s.effective_depth(), 16);
        s.test = TestKind::Write;
        assert_eq!(s.effective_depth(), 128);
        s.measure = Measure::Lat;
        assert_eq!(s.effective_depth(), 1);
    }

    #[test]
    fn validate_rejects_bad_fields() {
        assert!(spec().validate().is_ok());
        let mut s = spec();
        s.sizes = vec![0];
        assert!(s.validate().is_err());
        let mut s = spec();
        s.length = RunLength::Iterations(4);
        assert!(s.validate().is_err());
        let mut s = spec();
        s.length = RunLength::Duration(f64::NAN);
        assert!(s.validate().is_err());
        let mut s = spec();
        s.connections = 0;
        assert!(s.validate().is_err());
    }

    #[test]
    fn spec_json_round_trip() {
        let s = spec();
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains(r#""mpa_rev":"2""#), "{text}");
        let back: TestSpec = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }
}
