//! The errors of the runtime, one enum for the whole public API.

use std::io;
use std::net::SocketAddr;

use iwarp_proto::memory::{AccessViolation, RegisterError};
use iwarp_proto::mpa::startup::StartupError;
use iwarp_proto::rdmap::{Completion, PostError};

pub use crate::connection::ConnectionError;

/// What can go wrong, from setting a connection up to a work request.
#[derive(Debug, thiserror::Error)]
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
    /// why.
    #[error("connection rejected by the peer ({} octets of private data)", private_data.len())]
    Rejected {
        /// The peer's private data.
        private_data: Vec<u8>,
    },
    /// The configuration cannot be used.
    #[error("invalid configuration: {0}")]
    Config(String),
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
