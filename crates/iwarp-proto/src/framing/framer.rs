//! The transmit side of a framing layer: one trait for MPA's and IFT's
//! framers.
//!
//! A framer never copies payload. The caller passes a DDP segment as its
//! header (14 or 18 octets, copied into the batch next to the framing
//! octets, so that the PDU's first octets make one piece) and its payload
//! as slices, typically borrowed from registered memory; the framer
//! appends to a [`WireBatch`] the PDU's wire octets as framing pieces and
//! ranges of the payload slices, split wherever a marker falls. A batch
//! keeps its capacity across uses, so steady-state framing allocates
//! nothing.

use super::batch::WireBatch;

/// Why a framer refused a segment. None of these happens to a segment
/// within the MULPDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TxError {
    /// MPA: the ULPDU does not fit the 16-bit ULPDU_Length field.
    #[error("ULPDU of {len} octets exceeds the 65535 an FPDU can carry")]
    UlpduTooLong {
        /// The length offered.
        len: usize,
    },
    /// IFT: the DDP header does not fit the 16-bit header_size field.
    #[error("DDP header of {len} octets exceeds the 65535 header_size can describe")]
    HeaderTooLong {
        /// The length offered.
        len: usize,
    },
    /// IFT: the payload does not fit the 16-bit payload_size field.
    #[error("payload of {len} octets exceeds the 65535 payload_size can describe")]
    PayloadTooLong {
        /// The length offered.
        len: usize,
    },
}

/// The transmit side of a framing layer, for one half-connection: MPA's
/// [`crate::mpa::FpduTransmitter`] or IFT's [`crate::ift::IftTransmitter`].
pub trait Framer {
    /// Appends to `batch` the PDU carrying the segment made of `header`
    /// and the payload slices in order.
    ///
    /// The batch records ranges of the payload slices by index, counted
    /// across every PDU appended since the batch was last cleared: to
    /// write the batch, pass [`WireBatch::pieces`] all the payload slices
    /// of all those PDUs, in order (not the headers, which the batch
    /// holds).
    fn frame(
        &mut self,
        header: &[u8],
        payload: &[&[u8]],
        batch: &mut WireBatch,
    ) -> Result<(), TxError>;

    /// Octets the PDU for a segment of this header and payload length
    /// takes on the wire if sent next, markers included.
    fn wire_len(&self, header_len: usize, payload_len: usize) -> usize;

    /// The largest segment (DDP header and payload) that fits, framed,
    /// one TCP segment of `emss` octets: the MULPDU, within the bounds of
    /// [`super::mulpdu`].
    //= rfc5041#3
    //# LLPs MUST expose MULPDU & MULPDU Changes.
    fn mulpdu(&self, emss: usize) -> usize;

    /// Stream offset of the next octet this framer will produce.
    fn offset(&self) -> u64;

    /// PDUs produced so far.
    fn pdus_sent(&self) -> u64;
}
