//! The `iwarp` command line tool: a thin dispatcher over the `iwarp_cli` library.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use iwarp_cli::cmatose::{self, args::CmatoseArgs};
use iwarp_cli::decode::{self, args::DecodeArgs};
use iwarp_cli::perf::{self, args::PerfArgs};
use iwarp_cli::ping::{self, args::PingArgs};
use iwarp_cli::soak::{self, args::SoakArgs};

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
    /// Decode a pcap or pcapng capture of iWARP traffic: MPA startup frames (or IFT
    /// indications), FPDUs with CRC and markers, DDP and RDMAP, like tshark.
    Decode(DecodeArgs),
    /// rdma_cm's Send/Receive test, wire-compatible with rdma-core's ucmatose in both roles:
    /// a server by default, a client with -s HOST.
    Cmatose(CmatoseArgs),
    /// A soak test: many connections of mixed Send, RDMA Write and RDMA Read traffic for a
    /// while, every octet checked; a summary with the errors (0 for a good run).
    Soak(SoakArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The decoder is synchronous: no runtime for it.
    let cli = match cli.command {
        Command::Decode(args) => return decode::run(args),
        command => Cli { command },
    };
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
        Command::Decode(args) => return decode::run(args),
        Command::Cmatose(args) => {
            let code = runtime.block_on(cmatose::main(args));
            runtime.shutdown_background();
            return code;
        }
        Command::Soak(args) => {
            let code = runtime.block_on(soak::main(args));
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
