//! Command line of `iwarp decode`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use iwarp_decode::Options;

/// `iwarp decode`: what each TCP connection of a capture carried, layer by
/// layer (MPA or IFT, DDP, RDMAP).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(after_help = "\
Examples:
  iwarp decode rping.pcap                 one line per startup frame and PDU, then a summary
  iwarp decode -v cap.pcapng --port 4791  every field of every PDU, connections on port 4791
  iwarp decode --json cap.pcap | jq .     one JSON object per line (\"type\" names the event)
  tcpdump -i any -w - port 4791 | iwarp decode -

The summary shows each connection's operations (Sends, RDMA Writes, RDMA Reads:
count, octets, throughput, Read latency percentiles); --ops lists them one per line.
Stateful checks (MSN order, Read Responses against Requests, outstanding Reads against
the ORD, tagged offsets, Terminates) are reported as findings.

Connections are decoded when they open with an MPA Request/Reply or IFT Adaption
Indication. A connection whose startup was not captured is decoded only if --port names
it: its octets are then taken as MPA FPDUs from the first one (or --stream-offset), CRC
use is detected from the first FPDU, and markers are as --markers says.")]
pub struct DecodeArgs {
    /// The capture: pcap or pcapng (Ethernet, Linux cooked, raw IP or loopback link
    /// types); `-` reads standard input.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Decode only connections with this port at either end; they are decoded as MPA
    /// even without a captured startup. Repeat for several ports.
    #[arg(long = "port", value_name = "N")]
    pub ports: Vec<u16>,

    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,

    /// Every field of every PDU, as a tree under its line.
    #[arg(short, long)]
    pub verbose: bool,

    /// One line per RDMA operation (a whole Send, RDMA Write or RDMA Read)
    /// instead of one per PDU; errors and findings are still shown. JSON output
    /// always has the operations.
    #[arg(long)]
    pub ops: bool,

    /// Do not check CRCs (they are still shown): for captures of hardware that
    /// puts something else in the field, or to see past damage.
    #[arg(long)]
    pub no_crc_check: bool,

    /// MPA markers: as the startup frames say (auto, off when no startup was seen),
    /// or on or off in both directions whatever they say.
    #[arg(long, value_enum, default_value_t = MarkerMode::Auto)]
    pub markers: MarkerMode,

    /// Where FPDUs start when no startup was seen: this many octets into each
    /// direction's captured stream.
    #[arg(long, value_name = "OCTETS", default_value_t = 0)]
    pub stream_offset: u64,
}

/// `--markers`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MarkerMode {
    /// As the startup frames settle them.
    #[default]
    Auto,
    /// Markers both ways.
    On,
    /// No markers.
    Off,
}

impl From<MarkerMode> for iwarp_decode::MarkerMode {
    fn from(m: MarkerMode) -> Self {
        match m {
            MarkerMode::Auto => Self::Auto,
            MarkerMode::On => Self::On,
            MarkerMode::Off => Self::Off,
        }
    }
}

impl DecodeArgs {
    /// The decoding options these arguments ask for.
    pub fn options(&self) -> Options {
        Options {
            ports: self.ports.clone(),
            check_crc: !self.no_crc_check,
            markers: self.markers.into(),
            stream_offset: self.stream_offset,
        }
    }
}
