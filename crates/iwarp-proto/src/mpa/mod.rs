//! MPA: Marker PDU Aligned framing for TCP.
//!
//! MPA turns the TCP byte stream into a sequence of framed PDUs (FPDUs),
//! each carrying one ULPDU handed down by DDP, protected by a CRC32c and,
//! when the receiver asked for them, interleaved with markers every 512
//! octets of the stream. Before framing starts, the two ends exchange
//! startup frames (MPA Request and Reply) that settle the revision, CRC and
//! marker use and carry private data.
//!
pub mod crc;
mod error;
mod error_code;
pub mod fpdu;
mod fpdu_rx;
mod fpdu_tx;
pub mod marker;
pub mod mulpdu;
mod params;
pub mod startup;

#[cfg(test)]
mod fpdu_tests;

pub use error::{MpaError, TxError};
pub use error_code::LlpErrorCode;
pub use fpdu_rx::{
    FpduReceiver, FramingEvent, Next, Placement, Span, UlpduLayout, MAX_FPDU_WIRE_LEN,
};
pub use fpdu_tx::FpduTransmitter;
pub use params::FramingParams;
pub use startup::{
    CrcPolicy, Established, Event as StartupEvent, ImmediateStart, Initiator, Responder, Revision,
    Role, StartupConfig, StartupError, StartupMachine,
};
