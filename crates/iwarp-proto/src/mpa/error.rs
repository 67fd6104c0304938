//! Errors of MPA full operation, on either half-connection.

use crate::framing::{LlpError, LlpErrorCode};

/// Why an MPA receiver stopped accepting FPDUs. Once one is reported, the
/// receiver passes nothing more on that half-connection (RFC 5044 §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MpaError {
    /// The CRC computed over an FPDU differs from its CRC field
    /// (RFC 5044 §8 code 2).
    #[error(
        "CRC mismatch in the FPDU at stream offset {fpdu_offset}: \
         computed {computed:#010x}, received {received:#010x}"
    )]
    Crc {
        /// Stream offset of the FPDU's first octet (its leading marker, if any).
        fpdu_offset: u64,
        /// The CRC32c of the covered octets.
        computed: u32,
        /// The value in the CRC field.
        received: u32,
    },
    /// A marker's FPDUPTR disagrees with the FPDU start known from the
    /// ULPDU lengths (RFC 5044 §8 code 3).
    #[error(
        "marker at stream offset {marker_offset} has FPDUPTR {found:#06x}, \
         the ULPDU lengths put the FPDU start at {expected:#06x} octets back"
    )]
    Marker {
        /// Stream offset of the marker's first octet.
        marker_offset: u64,
        /// The FPDUPTR the lengths call for (0 between FPDUs).
        expected: u16,
        /// The FPDUPTR received.
        found: u16,
    },
}

impl LlpError for MpaError {
    fn llp_code(&self) -> LlpErrorCode {
        match self {
            Self::Crc { .. } => LlpErrorCode::CrcError,
            Self::Marker { .. } => LlpErrorCode::MarkerMismatch,
        }
    }
}
