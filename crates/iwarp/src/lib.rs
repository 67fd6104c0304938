//! iWARP over TCP: the runtime around the `iwarp-proto` engines.
//!
//! This crate drives the sans-IO engines of `iwarp-proto` over real TCP
//! sockets with tokio, and offers a verbs-shaped API (protection domains,
//! memory regions, queue pairs, completion queues) with a connection
//! manager (`Listener::bind`, `accept`, `connect`).

pub use iwarp_proto as proto;
