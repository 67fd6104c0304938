//! Sans-IO engines for the iWARP protocol suite.
//!
//! This crate holds the wire formats and the protocol state machines of
//! iWARP: MPA framing (RFC 5044, its drafts and RFC 6581), DDP (RFC 5041),
//! RDMAP (RFC 5040) and the memory-protection model they rely on. Nothing
//! here owns a socket, spawns a thread or reads a clock: bytes and time come
//! in as values, bytes and events go out, in the style of `quinn-proto`.
//! The `iwarp` crate drives these engines over real TCP sockets.
//!
//! Normative text is cited where it is implemented, as
//! `RFC 5044 §7.1.2 rule 4` or `draft-ietf-rddp-mpa-01 §5.1`, so that a reader
//! can go from a requirement to its code and its tests.

// The only `unsafe` is in `framing::crc_hybrid` and `framing::crc_marked`
// (vector loads and stores, and calls into code compiled for CPU features
// detected at run time); every parser and state machine is safe code.
#![deny(unsafe_code)]

pub mod connection;
pub mod ddp;
pub mod framing;
pub mod ift;
pub mod memory;
pub mod mpa;
pub mod ooo;
pub mod rdmap;
#[cfg(feature = "sim")]
pub mod sim;
#[cfg(test)]
mod test_util;
pub mod wire;
