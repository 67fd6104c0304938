//! The `iwarp` command line tool as a library: each subcommand is a module, so that the
//! binary stays a thin argument dispatcher and the pieces can be tested directly.
//!
//! * [`cmatose`]: rdma_cm's Send/Receive test, wire-compatible with rdma-core's `ucmatose`.
//! * [`perf`]: perftest-style bandwidth and latency tests, iWARP and a plain-TCP baseline.
//! * [`ping`]: the rping connectivity test, wire-compatible with rdma-core's `rping`.
//! * `decode`: a capture decoder, pcap or pcapng in, MPA/IFT, DDP and RDMAP out (feature
//!   `decode`, on by default).
//! * [`soak`]: a soak test, many connections of mixed traffic with every octet checked.
//!
//! Around them: [`cli`] (the command as a whole, its exit statuses), [`logging`] (the
//! `tracing` subscriber, `-v` and `RUST_LOG`), [`manual`] (shell completions and manual
//! pages generated from the command) and [`startup_args`] (the MPA startup options the
//! interoperability tools share).

#![forbid(unsafe_code)]

pub mod cli;
pub mod cmatose;
#[cfg(feature = "decode")]
pub mod decode;
pub mod logging;
pub mod manual;
pub mod perf;
pub mod ping;
pub mod soak;
pub mod startup_args;

/// The tool's iWARP device: one per process, opened on first use, as a
/// verbs tool opens one `ibv_context`; every subcommand's protection
/// domains come from it.
pub fn device() -> &'static iwarp::Device {
    static DEVICE: std::sync::OnceLock<iwarp::Device> = std::sync::OnceLock::new();
    DEVICE.get_or_init(iwarp::Device::new)
}
