//! The `iwarp` command as clap sees it: the subcommands, the options before them, and what
//! each exit status means. The binary parses it; `iwarp man` and `iwarp completions`
//! describe it, so the manual pages and the shell completions say what `--help` says.

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::cmatose::args::CmatoseArgs;
#[cfg(feature = "decode")]
use crate::decode::args::DecodeArgs;
use crate::manual::{CompletionsArgs, ManArgs};
use crate::perf::args::PerfArgs;
use crate::ping::args::PingArgs;
use crate::soak::args::SoakArgs;

/// The process exit statuses, the same for every subcommand.
pub mod exit {
    /// The subcommand did what was asked: the tests ran, the pings completed, the
    /// capture was read, the soak counted no error.
    pub const SUCCESS: u8 = 0;
    /// It failed, or found what it looks for: a connection refused, rejected, lost or
    /// timed out, a peer's error, data that did not match, a soak error, a file that could
    /// not be read or written.
    pub const FAILURE: u8 = 1;
    /// The command line is wrong (clap's own status for its errors too).
    pub const USAGE: u8 = 2;
}

/// What `iwarp --help` says after the subcommands: logging and exit statuses.
const AFTER_HELP: &str = "\
Logging: events of the stack and the tool go to standard error. Warnings by default;
-v adds information, -vv debugging (each connection's startup frame by frame), -vvv
everything. RUST_LOG, when set, replaces that filter (tracing's syntax, for example
RUST_LOG=iwarp=debug or RUST_LOG=iwarp::cm=trace). `iwarp ping -d` turns debugging on.

Exit status (every subcommand):
  0  success
  1  failure: a connection refused, rejected, lost or timed out, an error the peer
     reported, data that did not match, errors a soak counted, a file not readable
  2  the command line is wrong
Each subcommand's --help says what they mean for it.";

/// Each subcommand's reading of the exit statuses, appended to its `--help`.
const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "perf",
        "0 the tests ran; 1 a test could not run or did not finish (refused, rejected, \
         the peer gone or stalled, an error either end reported); 2 usage.",
    ),
    (
        "ping",
        "0 every ping completed, or Ctrl-C stopped the client between pings; a server: \
         its client disconnected between pings; 1 a failure (refused, rejected, no answer \
         in time, the connection lost, a malformed message, a mismatch with -V); 2 usage.",
    ),
    (
        "cmatose",
        "0 every message went both ways; 1 a failure (refused, rejected, no answer in time, \
         the connection lost, a message of the wrong size, a mismatch with -V); 2 usage.",
    ),
    (
        "decode",
        "0 the capture was read, whatever errors the traffic holds (a capture cut short \
         is decoded up to the cut, with a warning); 1 it could not be read, or the output \
         could not be written; 2 usage.",
    ),
    (
        "soak",
        "0 the run counted no error; 1 it counted errors (mismatches, failed connections, \
         timeouts) or could not start (the address, the listener); 2 usage.",
    ),
    (
        "completions",
        "0 the script was written; 1 it could not be written; 2 usage.",
    ),
    (
        "man",
        "0 the pages were written; 1 they could not be written; 2 usage.",
    ),
];

/// iWARP over TCP, from the command line.
#[derive(Parser, Debug)]
#[command(name = "iwarp", version, about, propagate_version = true, after_help = AFTER_HELP)]
pub struct Cli {
    /// Log more on standard error: -v information, -vv debugging, -vvv everything
    /// (overridden by RUST_LOG). Before the subcommand: `iwarp -vv ping ...`.
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Bandwidth and latency tests in the style of perftest (ib_write_bw, ib_read_lat, ...),
    /// iWARP and plain TCP side by side. With no arguments: a loopback write bandwidth test.
    Perf(PerfArgs),
    /// The rping connectivity test, wire-compatible with rdma-core's rping in both roles:
    /// --server (rping -s) or --connect HOST (rping -c -a HOST).
    Ping(PingArgs),
    /// rdma_cm's Send/Receive test, wire-compatible with rdma-core's ucmatose in both roles:
    /// a server by default, a client with -s HOST.
    Cmatose(CmatoseArgs),
    /// Decode a pcap or pcapng capture of iWARP traffic: MPA startup frames (or IFT
    /// indications), FPDUs with CRC and markers, DDP and RDMAP, like tshark.
    #[cfg(feature = "decode")]
    Decode(DecodeArgs),
    /// A soak test: many connections of mixed Send, RDMA Write and RDMA Read traffic for a
    /// while, every octet checked; a summary with the errors (0 for a good run).
    Soak(SoakArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print the manual page (roff), or write one per subcommand into a directory.
    Man(ManArgs),
}

impl Cli {
    /// Parses the process's arguments, exiting with clap's message (and status 2) when they
    /// are wrong.
    pub fn parse_args() -> Self {
        let matches = command().get_matches();
        Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }

    /// The most detailed log level asked for: `-v`s, or debugging for `iwarp ping -d`.
    pub fn verbosity(&self) -> u8 {
        match &self.command {
            Command::Ping(p) if p.debug => self.verbose.max(2),
            _ => self.verbose,
        }
    }
}

/// The whole command with its help texts, each subcommand's exit statuses included.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for (name, text) in EXIT_STATUS {
        // `decode` is absent without its feature.
        if cmd.find_subcommand(name).is_none() {
            continue;
        }
        cmd = cmd.mut_subcommand(*name, |sub| {
            let help = match sub.get_after_help() {
                Some(h) => format!("{h}\n\nExit status: {text}"),
                None => format!("Exit status: {text}"),
            };
            sub.after_help(help)
        });
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_is_consistent_and_every_subcommand_documents_its_exit_status() {
        let mut cmd = command();
        cmd.build();
        cmd.clone().debug_assert();
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let help = sub.get_after_help().map(ToString::to_string);
            assert!(
                help.as_deref()
                    .is_some_and(|h| h.contains("Exit status: 0 ")),
                "{}: {help:?}",
                sub.get_name()
            );
        }
        // No entry names a subcommand that does not exist.
        for (name, _) in EXIT_STATUS {
            if *name != "decode" || cfg!(feature = "decode") {
                assert!(cmd.find_subcommand(name).is_some(), "{name}");
            }
        }
    }

    #[test]
    fn verbosity_counts_v_and_ping_debug() {
        let parse = |args: &[&str]| {
            let m = command().try_get_matches_from(args).unwrap();
            Cli::from_arg_matches(&m).unwrap()
        };
        assert_eq!(parse(&["iwarp", "soak"]).verbosity(), 0);
        assert_eq!(parse(&["iwarp", "-vv", "soak"]).verbosity(), 2);
        assert_eq!(parse(&["iwarp", "ping", "-s", "-d"]).verbosity(), 2);
        assert_eq!(parse(&["iwarp", "-vvv", "ping", "-s", "-d"]).verbosity(), 3);
        // ping's own -v (rping's: print the data) is not the log's.
        assert_eq!(parse(&["iwarp", "ping", "-s", "-v"]).verbosity(), 0);
    }
}
