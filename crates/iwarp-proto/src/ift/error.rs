//! Errors of IFT full operation, and the Terminate codes they map to.
//!
//! IFT has no error codes of its own; a Terminate message reports framing
//! errors with layer 2 (LLP) and MPA's codes (RFC 5044 §8, see
//! `rdmap-and-mpa2.md`). The mapping chosen here:
//!
//! - a header or payload CRC mismatch is code 2, "CRC error";
//! - a VTag mismatch, a marker whose FramePtr disagrees with the frame
//!   lengths, and a header_size above [`super::MAX_HEADER_SIZE`] are code 3,
//!   "marker and ULPDU length disagree": MPA's code for a receiver whose idea
//!   of where PDUs begin cannot be trusted, which is what each of them says
//!   (the VTag exists to confirm the header's position, §4.2).

use crate::framing::{LlpError, LlpErrorCode};

/// Why an IFT receiver stopped accepting frames. Once one is reported, the
/// receiver passes nothing more on that half-connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IftRxError {
    /// header_size is larger than this receiver accepts.
    #[error("frame at stream offset {frame_offset} has header_size {header_size}, above the maximum of {max}")]
    HeaderTooLong {
        /// Stream offset of the frame's first octet.
        frame_offset: u64,
        /// The header_size received.
        header_size: u16,
        /// The largest accepted.
        max: usize,
    },
    /// The header CRC does not match the IFT and DDP headers.
    #[error("header CRC mismatch in the frame at stream offset {frame_offset}: computed {computed:#010x}, received {received:#010x}")]
    HeaderCrc {
        /// Stream offset of the frame's first octet.
        frame_offset: u64,
        /// The CRC32c of the covered octets.
        computed: u32,
        /// The value in the header CRC field.
        received: u32,
    },
    /// The frame's VTag is not ours.
    #[error(
        "frame at stream offset {frame_offset} carries VTag {found:#06x}, expected {expected:#06x}"
    )]
    VTag {
        /// Stream offset of the frame's first octet.
        frame_offset: u64,
        /// Our VTag.
        expected: u16,
        /// The VTag received.
        found: u16,
    },
    /// The payload CRC does not match the payload.
    #[error("payload CRC mismatch in the frame at stream offset {frame_offset}: computed {computed:#010x}, received {received:#010x}")]
    PayloadCrc {
        /// Stream offset of the frame's first octet.
        frame_offset: u64,
        /// The CRC32c of the payload.
        computed: u32,
        /// The value in the payload CRC field.
        received: u32,
    },
    /// A marker's FramePtr disagrees with the frame start known from the
    /// lengths.
    #[error("marker at stream offset {marker_offset} has FramePtr {found:#x}, the lengths call for {expected:#x}")]
    Marker {
        /// Stream offset of the marker's first octet.
        marker_offset: u64,
        /// The FramePtr the lengths call for (0 between frames).
        expected: u32,
        /// The FramePtr received.
        found: u32,
    },
}

impl LlpError for IftRxError {
    fn llp_code(&self) -> LlpErrorCode {
        match self {
            Self::HeaderCrc { .. } | Self::PayloadCrc { .. } => LlpErrorCode::CrcError,
            Self::HeaderTooLong { .. } | Self::VTag { .. } | Self::Marker { .. } => {
                LlpErrorCode::MarkerMismatch
            }
        }
    }
}
