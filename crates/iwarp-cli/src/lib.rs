//! The `iwarp` command line tool as a library: each subcommand is a module, so that the
//! binary stays a thin argument dispatcher and the pieces can be tested directly.
//!
//! * [`perf`]: perftest-style bandwidth and latency tests, iWARP and a plain-TCP baseline.
//!
//! `ping` (rping-compatible) and `decode` (capture decoder) will sit beside it.

#![forbid(unsafe_code)]

pub mod perf;
