//! Command line of `iwarp soak`.

use std::time::Duration;

use clap::Args;

/// The port `iwarp soak` listens on by default.
pub const DEFAULT_PORT: u16 = 7175;

/// `iwarp soak`: many connections of mixed, verified traffic for a while.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(after_help = "\
Examples:
  iwarp soak                                   both ends in this process, over loopback
  iwarp soak --server                          serve soak clients on port 7175 until killed
  iwarp soak --connect host --seconds 600 -q 16 --json

Each connection runs lanes of operations (Send, RDMA Write, RDMA Read, chosen at random with
random sizes); the server checks every octet of the Sends and Writes it receives and says so in
a Send back, which the client checks too, and the client checks every octet it Reads. The run
fails (exit status 1) if any octet is wrong or any connection fails.")]
pub struct SoakArgs {
    /// Serve soak clients until interrupted (SIGINT or SIGTERM).
    #[arg(long, conflicts_with = "connect")]
    pub server: bool,

    /// Run against the server at `HOST[:PORT]`.
    #[arg(
        long,
        value_name = "HOST[:PORT]",
        help = "Run against the server at HOST[:PORT]"
    )]
    pub connect: Option<String>,

    /// The address to listen on with --server.
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    pub addr: String,

    /// The port to listen on, or to connect to when --connect has none.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// How long the client issues operations.
    #[arg(short = 'D', long, default_value_t = 10.0, value_name = "SECONDS")]
    pub seconds: f64,

    /// Connections at once.
    #[arg(short = 'q', long, default_value_t = 8)]
    pub connections: u32,

    /// Operations in flight at once on each connection.
    #[arg(short = 't', long, default_value_t = 4)]
    pub depth: u16,

    /// The largest payload of one operation; sizes are spread from 1 octet up.
    #[arg(short = 's', long, default_value_t = 256 * 1024, value_name = "OCTETS")]
    pub max_size: u32,

    /// The run's seed: the same seed gives the same operations and data.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Each connection sits idle this long once it has run for half of
    /// --seconds, then goes on.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub idle: f64,

    /// How long one operation may take before it counts as an error.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub op_timeout: f64,

    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

impl SoakArgs {
    /// The run's length.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds.max(0.0))
    }

    /// The idle pause.
    pub fn idle(&self) -> Duration {
        Duration::from_secs_f64(self.idle.max(0.0))
    }

    /// The per-operation bound.
    pub fn op_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.op_timeout.max(0.001))
    }
}
