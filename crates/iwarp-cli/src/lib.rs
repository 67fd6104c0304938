//! The `iwarp` command line tool as a library: each subcommand is a module, so that the
//! binary stays a thin argument dispatcher and the pieces can be tested directly.
//!
//! * [`perf`]: perftest-style bandwidth and latency tests, iWARP and a plain-TCP baseline.
//! * [`ping`]: the rping connectivity test, wire-compatible with rdma-core's `rping`.
//!
//! A capture decoder (`decode`) is planned but not written.

#![forbid(unsafe_code)]

pub mod perf;
pub mod ping;
