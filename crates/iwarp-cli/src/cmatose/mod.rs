//! `iwarp cmatose`: rdma_cm's Send/Receive test, wire-compatible with rdma-core's
//! `ucmatose` in both roles.
//!
//! ucmatose's exchange, which ours follows: each end keeps `-C` receives of `-S` octets
//! posted from before its connection is up (iWARP has no receiver-not-ready). Once every
//! connection is established, the server Sends `-C` messages of `-S` octets on each; the
//! client takes them all, then Sends as many back; the server takes those and disconnects,
//! and the client, seeing the disconnect, disconnects too. IRD/ORD 1/1, no private data
//! from ucmatose (ours may send some, `--private-data`). Messages carry whatever ucmatose's
//! buffer held; ours carry a pattern, checked with `-V` between two `iwarp cmatose`.
//!
//! | module | role |
//! | --- | --- |
//! | [`args`] | command line (ucmatose's letters) |
//! | [`node`] | one connection's buffers, and the waits for its completions |
//! | [`client`] | connects, receives, answers, waits for the disconnect |
//! | [`server`] | accepts, sends, receives, disconnects |
//!
//! Progress goes to stdout in ucmatose's words; errors to stderr.

pub mod args;
pub mod client;
pub mod node;
pub mod server;

use std::io::Write as _;
use std::process::ExitCode;

use args::CmatoseArgs;

use crate::ping::error::Result;

/// Runs `iwarp cmatose` and turns the outcome into an exit code, printing any error.
pub async fn main(args: CmatoseArgs) -> ExitCode {
    let outcome = match args.resolve() {
        Ok(cfg) if cfg.server.is_some() => client::run(&cfg).await,
        Ok(cfg) => server::run(&cfg).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(()) => {
            say("test complete");
            say("return status 0");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("iwarp cmatose: error: {e}");
            say("test complete");
            say("return status 1");
            ExitCode::from(e.exit_code())
        }
    }
}

/// A progress line on stdout, as ucmatose prints them.
pub(crate) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Runs `f` on every connection at once and waits for all of them: the first error, if
/// any, is returned (the others still run to their end).
pub(crate) async fn on_each<'a, T, F, Fut>(items: &'a [T], f: F) -> Result<()>
where
    F: Fn(&'a T) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    futures_util::future::join_all(items.iter().map(f))
        .await
        .into_iter()
        .collect::<Result<Vec<()>>>()
        .map(drop)
}
