//! The errors of the runtime, one enum for the whole public API.

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpStream;

use iwarp_proto::memory::{AccessViolation, RegisterError};
use iwarp_proto::mpa::startup::StartupError;
use iwarp_proto::rdmap::{Completion, PostError};

pub use crate::connection::ConnectionError;

use crate::config::Framing;

/// What can go wrong, from setting a connection up to a work request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket operation failed.
    #[error("I/O: {0}")]
    Io(#[from] io::Error),
    /// Nobody listens at the address.
    #[error("connection refused by {0}")]
    Refused(SocketAddr),
    /// The TCP connection could not be made in time.
    #[error("connecting to {0} timed out")]
    ConnectTimeout(SocketAddr),
    /// The MPA startup failed: a malformed or unacceptable frame from the
    /// peer, a timeout, or a local configuration the peer cannot meet. The
    /// TCP connection was closed.
    #[error("MPA startup: {0}")]
    Startup(#[from] StartupError),
    /// The IFT negotiation failed (an unacceptable or malformed Adaption
    /// Indication, a timeout). The TCP connection was closed.
    #[error("IFT negotiation: {0}")]
    Ift(#[from] iwarp_proto::ift::NegotiationError),
    /// The peer rejected the connection; its private data usually says
    /// why. MPA is over but the TCP connection is not (RFC 5044 §7.1.2
    /// rule 3): it is handed back, for the application to go on in
    /// streaming mode or drop to close.
    #[error("connection rejected by the peer ({} octets of private data)", private_data.len())]
    Rejected {
        /// The peer's private data.
        private_data: Vec<u8>,
        /// The TCP connection, still open, positioned after the octets of
        /// `after_reply`.
        stream: TcpStream,
        /// Octets the peer sent after its Reply that were already read
        /// off the stream: the first octets of what follows MPA.
        after_reply: Vec<u8>,
    },
    /// The configuration cannot be used.
    #[error("invalid configuration: {0}")]
    Config(ConfigError),
    /// A receive given in [`QpOptions::initial_recvs`](crate::QpOptions::initial_recvs)
    /// could not be posted.
    #[error("initial receive {wr_id}: {error}")]
    InitialReceive {
        /// Its work request id.
        wr_id: u64,
        /// Why it was refused.
        error: PostError,
    },
    /// The ready-to-receive message of peer-to-peer mode could not be
    /// posted (a Read RTR on a stream whose ORD is 0).
    #[error("RTR not accepted: {0}")]
    Rtr(PostError),
    /// The listener's task has stopped: no more requests will come.
    #[error("listener stopped")]
    ListenerClosed,
    /// The region could not be registered.
    #[error("registration: {0}")]
    Register(RegisterError),
    /// A local buffer is invalid or lacks a right.
    #[error("local protection: {0}")]
    LocalProtection(AccessViolation),
    /// A range does not fit the region.
    #[error("range {start}..{end} outside a region of {len} octets")]
    OutOfRange {
        /// Start of the range.
        start: usize,
        /// End of the range.
        end: usize,
        /// Length of the region.
        len: usize,
    },
    /// Regions are limited to 4 GiB (DDP lengths are 32 bits).
    #[error("region of {len} octets is too large")]
    RegionTooLarge {
        /// The length asked for.
        len: usize,
    },
    /// The work request was not accepted.
    #[error("post: {0}")]
    Post(#[from] PostError),
    /// The connection no longer moves data.
    #[error("connection: {0}")]
    Connection(#[from] ConnectionError),
    /// The work request completed with an error status.
    #[error("work request {} completed with {:?}", .0.wr_id, .0.status)]
    Completion(Completion),
}

/// Why a configuration cannot be used for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Private data was given for a framing whose startup carries none:
    /// only MPA startup frames do (not the immediate-start profile, nor
    /// IFT's Adaption Indications).
    #[error("only MPA startup frames carry private data, not {0:?}")]
    PrivateDataWithoutStartupFrames(Framing),
}
