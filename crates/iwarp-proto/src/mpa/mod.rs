//! MPA: Marker PDU Aligned framing for TCP.
//!
//! MPA turns the TCP byte stream into a sequence of framed PDUs (FPDUs),
//! each carrying one ULPDU handed down by DDP, protected by a CRC32c and,
//! when the receiver asked for them, interleaved with markers every 512
//! octets of the stream. Before framing starts, the two ends exchange
//! startup frames (MPA Request and Reply) that settle the revision, CRC and
//! marker use and carry private data.
//!
//! The transmitter and receiver implement the framing traits of
//! [`crate::framing`], which also holds what MPA shares with IFT: the
//! CRC32c, marker positions, the MULPDU bounds and the LLP error codes.

mod error;
pub mod fpdu;
mod fpdu_rx;
mod fpdu_tx;
pub mod marker;
pub mod mulpdu;
mod params;
pub mod startup;

#[cfg(test)]
mod fpdu_tests;

/// MPA's error codes (RFC 5044 §8, RFC 6581 §9), which IFT shares.
pub use crate::framing::LlpErrorCode;
pub use error::MpaError;
pub use fpdu_rx::FpduReceiver;
pub use fpdu_tx::FpduTransmitter;
pub use params::FramingParams;
pub use startup::{
    CrcPolicy, Established, Event as StartupEvent, ImmediateStart, Initiator, Responder, Revision,
    Role, StartupConfig, StartupError, StartupMachine,
};
