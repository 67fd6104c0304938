//! Out-of-order placement: the receive path that markers and DDP exist
//! for.
//!
//! A receiver that sees TCP segments as they arrive, in any order, can
//! place the payload of each one straight into its final buffer without
//! waiting for the segments before it, because markers (or FPDUs aligned
//! with segments) show where each PDU begins, its CRC proves it whole, and
//! its DDP header says where its payload goes (RFC 5041 §5.3 separates
//! this placement from delivery; draft-ietf-rddp-mpa-01 §3.1.2 and §5.4,
//! draft-williams-iwarp-ift-01 §8). Delivery (completions, Read Request
//! processing, Terminates, errors) still happens in order, once the stream
//! is contiguous up to it.
//!
//! - [`OooReceiver`]: segments in, placement and in-order delivery through
//!   a [`crate::rdmap::QueuePair`], with the same final memory, completions
//!   and errors as the in-order receiver.
//! - [`Reorder`]: its framing half, segments in and whole, checked PDUs
//!   out, for any user (the capture decoder shows with it what a receiver
//!   could place before a hole fills).
//! - [`OooFraming`]: what either needs of MPA ([`MpaFraming`]) or IFT
//!   ([`IftFraming`]), all of it the in-order receivers' own code.
//!
//! A sockets runtime never needs this: the kernel's TCP hands it the
//! stream in order. A runtime over a user-space TCP, or an offload, sees
//! segments as they arrive, and gains what `crate::sim` measures.

mod framing;
mod held;
mod overlap;
mod pdu;
mod receiver;
mod reorder;
mod stats;

pub use framing::{AnyFraming, IftFraming, MpaFraming, OooFraming};
pub use held::{Held, Piece, PIECE_OVERHEAD};
pub use overlap::Overlaps;
pub use pdu::{Checker, Pdu};
pub use receiver::{OooConfig, OooError, OooReceiver};
pub use reorder::{Offer, Reorder};
pub use stats::OooStats;

#[cfg(test)]
mod tests;
