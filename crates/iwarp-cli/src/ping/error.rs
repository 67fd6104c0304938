//! Errors of `iwarp ping`, worded for the person at the terminal.
//!
//! A connectivity test is judged by its failure messages: each says which side did what
//! (refused, rejected, stopped answering, closed the connection, sent a malformed message)
//! and during which step of the ping, rather than an errno or a completion status.

use std::io;
use std::net::SocketAddr;

use iwarp::{CompletionStatus, ConnectionError, QueuePair};

/// Which end of the connection we are talking about, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The remote end is the server (we are the client).
    Server,
    /// The remote end is a client (we are the server).
    Client,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Peer::Server => "server",
            Peer::Client => "client",
        })
    }
}

/// Everything that can end a ping run with a non-zero exit.
#[derive(Debug, thiserror::Error)]
pub enum PingError {
    /// The command line asked for something inconsistent.
    #[error("{0}")]
    Usage(String),
    /// Name resolution failed or gave no usable address.
    #[error("cannot resolve `{host}`: {reason}")]
    Resolve {
        /// The host as given.
        host: String,
        /// Why.
        reason: String,
    },
    /// The server could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: iwarp::Error,
    },
    /// Nobody listens at the server's address.
    #[error("cannot connect to {addr}: connection refused (is a server listening there?)")]
    Refused {
        /// The server's address.
        addr: SocketAddr,
    },
    /// The TCP connection or the MPA startup did not finish in time.
    #[error("cannot connect to {addr}: {what} timed out")]
    ConnectTimeout {
        /// The server's address.
        addr: SocketAddr,
        /// What timed out.
        what: &'static str,
    },
    /// Any other failure to make the TCP connection.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The server's address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// The server answered the MPA Request with a rejection.
    #[error("{addr} rejected the connection{}{}", describe_reject(.private_data),
            if *.asked_markers { MARKERS_HINT } else { "" })]
    Rejected {
        /// The server's address.
        addr: SocketAddr,
        /// Its private data (usually the reason).
        private_data: Vec<u8>,
        /// Whether our Request asked for markers, the usual reason (Linux `siw` rejects
        /// every such Request).
        asked_markers: bool,
    },
    /// The MPA startup failed (a malformed or unacceptable frame, a timeout, the peer
    /// closed).
    #[error("MPA startup with {addr} failed: {reason}")]
    Startup {
        /// The peer's address.
        addr: SocketAddr,
        /// What the runtime reported.
        reason: String,
    },
    /// The peer closed the connection in the middle of a ping.
    #[error("the {peer} closed the connection {during}")]
    PeerClosed {
        /// Which peer.
        peer: Peer,
        /// What we were doing.
        during: String,
    },
    /// The connection failed: a Terminate either way, a framing error, a reset.
    #[error("the connection to the {peer} failed {during}: {reason}")]
    ConnectionFailed {
        /// Which peer.
        peer: Peer,
        /// What we were doing.
        during: String,
        /// What the runtime reported.
        reason: String,
    },
    /// The peer did not answer in time.
    #[error("no answer from the {peer} within {secs} s {during}")]
    Timeout {
        /// Which peer.
        peer: Peer,
        /// What we were waiting for.
        during: String,
        /// How long we waited.
        secs: f64,
    },
    /// A received message was not a 16-octet buffer advertisement (rping's check, and its
    /// wording).
    #[error("Received bogus data, size {size} (expected {expected}) {during}")]
    BogusData {
        /// Octets received (or a lower bound, for a Send too long for the buffer).
        size: String,
        /// Octets expected.
        expected: usize,
        /// What we were doing.
        during: String,
    },
    /// The peer advertised a buffer rping could never have sent.
    #[error(
        "the {peer} advertised a {len}-octet buffer, more than the {max} rping allows {during}"
    )]
    AdvertisementTooLarge {
        /// Which peer.
        peer: Peer,
        /// The advertised length.
        len: u32,
        /// The limit.
        max: u32,
        /// What we were doing.
        during: String,
    },
    /// `-V`: what came back differs from what was sent.
    #[error("data mismatch in ping {ping}: sent `{sent}`, received `{received}`")]
    Mismatch {
        /// The ping number.
        ping: u32,
        /// The text sent (up to its NUL).
        sent: String,
        /// The text received (up to its NUL).
        received: String,
    },
    /// A local resource or operation failed (registration, posting).
    #[error("{what}: {source}")]
    Local {
        /// What we were doing.
        what: String,
        /// What the runtime reported.
        source: iwarp::Error,
    },
}

/// What a rejection of a Request with markers most likely means.
const MARKERS_HINT: &str =
    " (we asked for MPA markers, which it does not send; Linux siw supports none: \
     leave out --markers)";

fn describe_reject(private_data: &[u8]) -> String {
    let text = String::from_utf8_lossy(private_data);
    let text = text.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    if text.is_empty() || text.chars().any(char::is_control) {
        String::new()
    } else {
        format!(": {text}")
    }
}

impl PingError {
    /// Classifies a failure of `connect` or `accept` with `addr`; `asked_markers`: our
    /// Request asked the peer for markers.
    pub fn startup(addr: SocketAddr, error: iwarp::Error, asked_markers: bool) -> Self {
        match error {
            iwarp::Error::Rejected { private_data, .. } => Self::Rejected {
                addr,
                private_data,
                asked_markers,
            },
            iwarp::Error::Refused(addr) => Self::Refused { addr },
            iwarp::Error::ConnectTimeout(addr) => Self::ConnectTimeout {
                addr,
                what: "TCP connect",
            },
            iwarp::Error::Startup(e) => Self::Startup {
                addr,
                reason: e.to_string(),
            },
            other => Self::Startup {
                addr,
                reason: other.to_string(),
            },
        }
    }

    /// The process exit code: 2 for usage errors (like clap), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            PingError::Usage(_) => 2,
            _ => 1,
        }
    }

    /// Classifies an error of an operation on `qp`: the peer closing, the connection
    /// failing, or a local problem.
    pub fn from_qp(qp: &QueuePair, peer: Peer, during: &str, error: iwarp::Error) -> Self {
        match error {
            iwarp::Error::Connection(e) => Self::connection(peer, during, &e),
            iwarp::Error::Completion(c) => Self::completion(qp, peer, during, c.status),
            iwarp::Error::Post(e) => match qp.error() {
                // Posting fails once the connection is down: say why it is down.
                Some(e) => Self::connection(peer, during, &e),
                None => Self::Local {
                    what: during.to_string(),
                    source: iwarp::Error::Post(e),
                },
            },
            other => Self::Local {
                what: during.to_string(),
                source: other,
            },
        }
    }

    /// Classifies a work request that completed with `status`.
    pub fn completion(qp: &QueuePair, peer: Peer, during: &str, status: CompletionStatus) -> Self {
        match (status, qp.error()) {
            // A flushed request says nothing itself; the connection's end does.
            (CompletionStatus::FlushError | CompletionStatus::FatalError, Some(e)) => {
                Self::connection(peer, during, &e)
            }
            (CompletionStatus::RemoteAccessError, _) => Self::ConnectionFailed {
                peer,
                during: during.to_string(),
                reason: format!("the {peer} refused the access (remote protection error)"),
            },
            (status, e) => Self::ConnectionFailed {
                peer,
                during: during.to_string(),
                reason: match e {
                    Some(e) => format!("work request ended with {status:?}: {e}"),
                    None => format!("work request ended with {status:?}"),
                },
            },
        }
    }

    /// Classifies the end of a connection.
    pub fn connection(peer: Peer, during: &str, e: &ConnectionError) -> Self {
        match e {
            ConnectionError::PeerClosed => Self::PeerClosed {
                peer,
                during: during.to_string(),
            },
            other => Self::ConnectionFailed {
                peer,
                during: during.to_string(),
                reason: other.to_string(),
            },
        }
    }
}

/// Shorthand used throughout the `ping` modules.
pub type Result<T, E = PingError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejection_reason_is_shown_only_when_printable() {
        let addr: SocketAddr = "192.0.2.1:7174".parse().unwrap();
        let e = PingError::Rejected {
            addr,
            private_data: b"busy\0".to_vec(),
            asked_markers: false,
        };
        assert_eq!(
            e.to_string(),
            "192.0.2.1:7174 rejected the connection: busy"
        );
        let e = PingError::Rejected {
            addr,
            private_data: vec![1, 2, 3],
            asked_markers: false,
        };
        assert_eq!(e.to_string(), "192.0.2.1:7174 rejected the connection");
        // A Request with markers: the reason is almost certainly that, said in one line.
        let e = PingError::Rejected {
            addr,
            private_data: vec![],
            asked_markers: true,
        };
        let line = e.to_string();
        assert!(
            line.starts_with("192.0.2.1:7174 rejected the connection (we asked for MPA markers")
        );
        assert!(!line.contains('\n'));
    }
}
