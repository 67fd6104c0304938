//! Errors of `iwarp perf`, worded for the person at the terminal.
//!
//! Network failures are classified (refused, server gone, protocol violation, stall) so that
//! the message says what happened rather than an errno, and `main` maps every error to a
//! non-zero exit code.

use std::io;
use std::net::SocketAddr;

use super::spec::Transport;

/// Everything that can end a `perf` run early.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// The command line asked for something inconsistent.
    #[error("{0}")]
    Usage(String),
    /// The selected transport has no backend in this build.
    #[error(
        "transport `{0}` is not available yet in this build of iwarp perf; use `--transport tcp`"
    )]
    TransportUnavailable(Transport),
    /// Name resolution failed or gave no address.
    #[error("cannot resolve `{host}`: {reason}")]
    Resolve {
        /// The host as given.
        host: String,
        /// Why.
        reason: String,
    },
    /// A TCP connect failed.
    #[error("cannot connect to {addr}: {}", describe_connect(.source))]
    Connect {
        /// Where we tried to connect.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// Binding a listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address we tried to bind.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// The process may not open enough files for the connections asked for.
    #[error(
        "{connections} connections need about {needed} open files, but this process may open \
         only {limit} (RLIMIT_NOFILE, raised to its hard limit); raise the hard limit \
         (`ulimit -Hn`) or ask for fewer connections"
    )]
    FileLimit {
        /// Connections asked for.
        connections: u32,
        /// Descriptors they need, with a margin.
        needed: u64,
        /// The soft limit in force.
        limit: u64,
    },
    /// The peer closed or reset a connection in the middle of the test.
    #[error("{peer} closed the connection during the test ({what})")]
    PeerGone {
        /// "server" or "client".
        peer: &'static str,
        /// What we were doing.
        what: String,
    },
    /// The peer rejected the session or broke the control protocol.
    #[error("{0}")]
    Protocol(String),
    /// The peer reported an error of its own.
    #[error("the {peer} reported an error: {message}")]
    Remote {
        /// "server" or "client".
        peer: &'static str,
        /// Its message.
        message: String,
    },
    /// Nothing completed for too long.
    #[error("no progress for {secs} s: the peer seems stuck")]
    Stalled {
        /// How long we waited.
        secs: u64,
    },
    /// A control step did not finish in time.
    #[error("timed out after {secs} s while {what}")]
    Timeout {
        /// What we were waiting for.
        what: String,
        /// How long.
        secs: u64,
    },
    /// Any other I/O error.
    #[error("{what}: {source}")]
    Io {
        /// What we were doing.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// An iWARP operation failed (connection setup, registration, a work request).
    #[error("{what}: {source}")]
    Iwarp {
        /// What we were doing.
        what: String,
        /// The runtime's error.
        source: iwarp::Error,
    },
    /// A task of ours failed unexpectedly (a bug, reported instead of a panic).
    #[error("internal error: {0}")]
    Internal(String),
}

fn describe_connect(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            "connection refused (is `iwarp perf --server` running there?)".into()
        }
        _ => e.to_string(),
    }
}

impl PerfError {
    /// Wraps an I/O error on a connection to `peer`, recognising the ways a peer disappears.
    pub fn io(peer: &'static str, what: impl Into<String>, source: io::Error) -> Self {
        let what = what.into();
        match source.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => PerfError::PeerGone { peer, what },
            _ => PerfError::Io { what, source },
        }
    }

    /// Wraps an error of the iWARP runtime.
    pub fn iwarp(what: impl Into<String>, source: iwarp::Error) -> Self {
        PerfError::Iwarp {
            what: what.into(),
            source,
        }
    }

    /// The process exit code for this error: 2 for usage errors (like clap), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            PerfError::Usage(_) => 2,
            _ => 1,
        }
    }
}

/// Shorthand used throughout the `perf` modules.
pub type Result<T, E = PerfError> = std::result::Result<T, E>;
