//! A deterministic network simulator for the out-of-order receive path.
//!
//! It carries a real sender's segments to the receiver: a
//! [`crate::rdmap::QueuePair`] posts Sends and RDMA Writes (and answers
//! the receiver's RDMA Reads), our own FPDU or IFT transmitter frames its
//! ULPDUs, a TCP sender cuts the stream into segments that start with a
//! PDU, and a link loses, reorders and duplicates them; after a
//! retransmission timeout the sender sends what the receiver has neither
//! acknowledged nor reported held, cut at other places. Time is a slot
//! counter and every random choice follows from one seed: no sockets, no
//! clock, the same run every time.
//!
//! At the far end an [`crate::ooo::OooReceiver`] takes the segments as they
//! arrive, and its twin, the in-order receiver with the same memory and
//! the same posted work, is fed the same stream in order as far as the
//! out-of-order one has it in order. [`run`] compares everything the two
//! do: completions (slot by slot), events, what they send back, the error
//! that stops them, and the memory (exactly, when no error stopped the
//! stream); it checks that nothing was written outside a region and that
//! what the receiver held stayed within its window.
//!
//! This module is test support, behind the `sim` feature: the property
//! tests, the benchmark and the fuzz target use it; nothing else does.
//! [`Replay`] records a run and replays its arrivals against fresh
//! receivers, to measure placement against in-order reception of the same
//! stream.

mod link;
mod replay;
mod rng;
mod scenario;
mod sender;

pub use link::{Link, LinkModel, Segment};
pub use replay::{Prepared, Replay};
pub use rng::Rng;
pub use scenario::{run, Report, Scenario, SimFraming, Workload, WINDOW_REGION};
pub use sender::TcpSender;
