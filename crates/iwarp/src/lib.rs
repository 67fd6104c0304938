//! iWARP over TCP: the runtime around the `iwarp-proto` engines.
//!
//! This crate drives the sans-IO engines of `iwarp-proto` over real TCP
//! sockets with tokio, and offers a verbs-shaped API:
//!
//! - [`Device`] (the table of STags, as verbs' `ibv_context`), its
//!   [`ProtectionDomain`]s and their [`MemoryRegion`]s: registered memory,
//!   with the [`RemoteKey`] (STag, address, length) a peer needs to reach
//!   it;
//! - [`QueuePair`]: `post_send`, `post_recv`, `rdma_write`, `rdma_read`,
//!   several at once with `post_list` (one write to the socket), their
//!   awaiting counterparts `send`, `recv`, `write`, `read`, and a
//!   graceful `disconnect`;
//! - [`CompletionQueue`]: `poll`, `next().await`, or a stream;
//! - the connection manager: [`connect`], [`Listener::bind`] and
//!   [`Listener::accept`], which yields a [`ConnectRequest`] to accept with
//!   the application's private data or reject with a reason.
//!
//! ```no_run
//! use iwarp::{connect, Access, Config, Device, QpOptions};
//!
//! # async fn demo() -> Result<(), iwarp::Error> {
//! let device = Device::new();
//! let pd = device.alloc_pd();
//! let qp = connect("192.0.2.1:4791", &Config::default(), QpOptions::new(&pd), b"hello").await?;
//! let mr = pd.register(b"ping".to_vec(), Access::empty())?;
//! qp.send(mr.sge(..)?).await?;
//! qp.disconnect().await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

pub use iwarp_proto as proto;

// The user guide's Rust blocks, compiled (and the first one run) as doc
// tests. The guide is docs/guide.md, linked into this crate so that its
// package carries it too.
#[cfg(doctest)]
#[doc = include_str!("../guide.md")]
struct Guide;

mod cm;
mod config;
mod connection;
mod cq;
mod error;
mod info;
mod memory;
mod qp;
mod socket;
mod startup_log;

pub use cm::{accept_stream, connect, connect_stream, ConnectRequest, Listener};
pub use config::{Config, Framing, QpOptions};
pub use cq::{Completion, CompletionOpcode, CompletionQueue, CompletionStatus};
pub use error::{ConfigError, ConnectionError, Error};
pub use info::{ConnectionInfo, FramingInfo, MpaInfo};
pub use memory::{
    Access, Device, MemoryRegion, ProtectionDomain, RegionMut, RegionRef, RegisterOptions,
    RemoteKey, STag,
};
pub use qp::{PostList, QpStats, QueuePair};

pub use iwarp_proto::connection::ConnectionStats;
pub use iwarp_proto::framing::FramingError;
pub use iwarp_proto::mpa::startup::{
    Awaiting, CrcPolicy, FrameKind, IrdOrd, Revision, Role, RtrType, RtrTypes, StartupConfig,
    StartupError,
};
pub use iwarp_proto::mpa::{FramingParams, Placement};
pub use iwarp_proto::rdmap::{MessageCounters, OneSidedCounters, QpState, SendFlags, Sge};
