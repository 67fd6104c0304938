//! The `iwarp` command line tool: a thin dispatcher over the `iwarp_cli` library.

#![forbid(unsafe_code)]

use std::future::Future;
use std::io;
use std::process::ExitCode;

use iwarp_cli::cli::{exit, Cli, Command};
#[cfg(feature = "decode")]
use iwarp_cli::decode;
use iwarp_cli::{cmatose, logging, manual, perf, ping, soak};

fn main() -> ExitCode {
    let cli = Cli::parse_args();
    logging::init(cli.verbosity());
    match cli.command {
        Command::Perf(args) => on_runtime(async {
            match perf::run(args, cli.verbose > 0).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("iwarp perf: error: {e}");
                    ExitCode::from(e.exit_code())
                }
            }
        }),
        Command::Ping(args) => on_runtime(ping::main(args)),
        Command::Cmatose(args) => on_runtime(cmatose::main(args)),
        Command::Soak(args) => on_runtime(soak::main(args)),
        // The decoder and the generated documents are synchronous: no runtime for them.
        #[cfg(feature = "decode")]
        Command::Decode(args) => decode::run(args),
        Command::Completions(args) => written(
            "completions",
            manual::completions(args.shell, &mut io::stdout()),
        ),
        Command::Man(args) => written(
            "man",
            match &args.dir {
                Some(dir) => manual::pages(dir).map(drop),
                None => manual::page(&mut io::stdout()),
            },
        ),
    }
}

/// Runs a subcommand on a multi-threaded tokio runtime.
fn on_runtime(subcommand: impl Future<Output = ExitCode>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("iwarp: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let code = runtime.block_on(subcommand);
    // Do not wait for stray tasks (a loopback server blocked in accept, say).
    runtime.shutdown_background();
    code
}

/// The exit status of a subcommand that writes a document.
fn written(what: &str, result: io::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): not a failure of ours.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp {what}: cannot write: {e}");
            ExitCode::from(exit::FAILURE)
        }
    }
}
