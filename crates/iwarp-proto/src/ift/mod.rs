//! IFT: iWARP Framing for TCP (draft-williams-iwarp-ift-01), the
//! alternative to MPA under DDP.
//!
//! Like MPA, IFT turns the TCP byte stream into frames that each carry one
//! DDP segment, and hands DDP whole ULPDUs through the same
//! [`crate::framing`] contract, so DDP does not know which framing is below
//! it. It differs from MPA in these ways:
//!
//! - **Lengths, no padding.** Each frame starts with a 16-bit header_size
//!   and a 16-bit payload_size that delimit the DDP header and the DDP
//!   payload; nothing pads a frame to four octets (§5.1, §7.2).
//! - **Split CRCs.** An optional header CRC follows the DDP header and an
//!   optional payload CRC the payload, each chosen by the sender per
//!   direction (§5.1, §7.1). The header CRC lets the receiver verify where
//!   the payload goes *before* placing any of it, which MPA's single
//!   trailing CRC cannot ([`IftReceiver`] does exactly that).
//! - **VTag.** Every frame carries the receiver's 16-bit VTag, announced in
//!   the receiver's indication: a check that a header really is one (§4.2).
//! - **Negotiation by indication.** Instead of MPA's Request/Reply frames
//!   with private data, each end sends one 64-octet, CRC-protected Adaption
//!   Indication (magic `0x52444450`) in two phases, settling RDMA or DDP
//!   mode, CRCs, markers and speculative placement per direction (§4).
//! - **Speculative placement** (§8): a receiver with the peer's permission
//!   may place an out-of-order segment's payload after guessing where a
//!   frame begins.
//!
//! What is implemented: the Adaption Indication format ([`indication`]),
//! the two-phase negotiation for both roles as a sans-IO state machine
//! ([`Negotiation`], [`settle`]), the frame transmitter ([`IftTransmitter`],
//! zero-copy into a [`crate::framing::WireBatch`]) and the in-order,
//! incremental receiver ([`IftReceiver`]) with VTag, header CRC, payload CRC
//! and marker checks, and markers ([`marker`]), whose details the draft
//! leaves "TBD" (§9) and which are decided there.
//!
//! Speculative placement lives on the out-of-order receive path
//! ([`crate::ooo`], with [`crate::ooo::IftFraming`]): the in-order receiver
//! needs nothing for it, because every octet it sees follows every earlier
//! one and its positions are certain. With the negotiated permission
//! ([`IftParams::may_speculate`]) that path guesses a frame at the start of
//! a segment, confirms it with §8.1's checks (lengths, VTag, header and
//! payload CRC through this receiver, DDP's fields through the queue
//! pair), never places over another speculative placement (§8.2), and
//! withdraws a frame the in-order path finds misplaced. IFT defines no
//! error message or teardown of its own; errors map to MPA's LLP Terminate
//! codes ([`crate::framing::LlpError`]).
//!
//! Every place the draft leaves a detail open is decided in the module that
//! implements it, with the section it interprets: flag bit positions and
//! the indication CRC in [`indication`], the negotiation's silent cases in
//! [`negotiation`], CRC byte order and header CRC coverage in [`frame`],
//! markers in [`marker`], Terminate codes in `error`.

mod error;
pub mod frame;
mod frame_rx;
mod frame_tx;
pub mod indication;
pub mod marker;
pub mod negotiation;
mod params;
pub mod pretty;

#[cfg(test)]
mod frame_tests;
#[cfg(test)]
mod indication_tests;
#[cfg(test)]
mod negotiation_tests;

/// The marker interval type IFT's configuration and indication carry,
/// shared with MPA.
pub use crate::framing::MarkerInterval;
pub use error::IftRxError;
pub use frame::MAX_HEADER_SIZE;
pub use frame_rx::IftReceiver;
pub use frame_tx::IftTransmitter;
pub use indication::{Indication, IndicationError, Phase};
pub use negotiation::{settle, CrcDemand, IftConfig, Negotiation, NegotiationError, Role, Status};
pub use params::{IftParams, Mode, RxCrc, RxParams, TxParams};
