//! The `iwarp` command line tool: a thin dispatcher over the `iwarp_cli` library.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use iwarp_cli::perf::{self, args::PerfArgs};
use iwarp_cli::ping::{self, args::PingArgs};

/// iWARP over TCP, from the command line.
#[derive(Parser, Debug)]
#[command(name = "iwarp", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Bandwidth and latency tests in the style of perftest (ib_write_bw, ib_read_lat, ...),
    /// iWARP and plain TCP side by side. With no arguments: a loopback write bandwidth test.
    Perf(PerfArgs),
    /// The rping connectivity test, wire-compatible with rdma-core's rping in both roles:
    /// --server (rping -s) or --connect HOST (rping -c -a HOST).
    Ping(PingArgs),
    // A capture decoder (`decode`) is planned and would go here.
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("iwarp: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Perf(args) => runtime.block_on(perf::run(args)),
        Command::Ping(args) => {
            let code = runtime.block_on(ping::main(args));
            runtime.shutdown_background();
            return code;
        }
    };
    // Do not wait for stray tasks (a loopback server blocked in accept, say).
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp perf: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
