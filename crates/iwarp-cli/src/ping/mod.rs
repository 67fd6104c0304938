//! `iwarp ping`: the rping connectivity test, wire-compatible with rdma-core's `rping` in
//! both roles.
//!
//! rping is the first thing an iWARP user runs, so ours speaks exactly its protocol: the
//! same MPA startup parameters (revision 2, enhanced, IRD/ORD 1/1, no private data), the same
//! 16-octet buffer advertisements (`struct rping_rdma_info`: big-endian address, STag,
//! length) in Sends, the same RDMA Read and RDMA Write of the same ping text, in the same
//! order. Either side can be rping (over Linux `siw` or a hardware RNIC) and the other
//! `iwarp ping`.
//!
//! | module | role |
//! | --- | --- |
//! | [`args`] | command line (rping's letters and long forms) |
//! | [`message`] | the ping text and the advertisement layout |
//! | [`endpoint`] | buffers and the four operations both roles use |
//! | [`client`] | the client loop, Ctrl-C, the summary |
//! | [`server`] | one client, or `-P` for many |
//! | [`report`] | round-trip statistics and the summary lines |
//! | [`error`] | what can go wrong, in words |
//!
//! Output: `-v` data lines on stdout exactly as rping prints them (`ping data: ...`,
//! `server ping data: ...`); the client's closing summary on stdout (`--json`: as one JSON
//! object, and a server's line per client); the server's connection notices and errors on
//! stderr. `-d` lines are `tracing` debug events (`iwarp -vv ping` or `RUST_LOG` show them
//! too), next to the stack's own.

pub mod args;
pub mod client;
pub mod endpoint;
pub mod error;
pub mod message;
pub mod report;
pub mod server;

use std::fmt;
use std::net::SocketAddr;
use std::process::ExitCode;

use args::{PingArgs, PingConfig, Role};
use error::Result;

/// Runs `iwarp ping` and turns the outcome into an exit code, printing any error.
pub async fn main(args: PingArgs) -> ExitCode {
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp ping: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs `iwarp ping` with parsed arguments.
pub async fn run(args: PingArgs) -> Result<()> {
    let cfg = args.resolve()?;
    match &cfg.role {
        Role::Server {
            bind,
            port,
            persistent,
        } => server::run(&cfg, bind, *port, *persistent).await,
        Role::Client {
            host,
            port,
            source,
            count,
            validate,
        } => {
            let job = client::ClientJob {
                host,
                port: *port,
                source: *source,
                count: *count,
                validate: *validate,
            };
            client::run(&cfg, &job).await
        }
    }
}

/// Where `-v` and `-d` output goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Log {
    /// `-v`: print each ping's data.
    pub verbose: bool,
    /// The client a server's debug line is about.
    peer: Option<SocketAddr>,
}

impl From<&PingConfig> for Log {
    fn from(cfg: &PingConfig) -> Self {
        Self {
            verbose: cfg.verbose,
            peer: None,
        }
    }
}

impl Log {
    /// The same, with debug lines naming `peer` (a persistent server serves several).
    fn for_peer(self, peer: SocketAddr) -> Self {
        Self {
            peer: Some(peer),
            ..self
        }
    }

    /// A `-d` line: a debug event, shown when the log's filter lets it through (`-d` sets
    /// it to debugging).
    fn debug(&self, args: fmt::Arguments<'_>) {
        match self.peer {
            Some(peer) => tracing::debug!(%peer, "{args}"),
            None => tracing::debug!("{args}"),
        }
    }
}
