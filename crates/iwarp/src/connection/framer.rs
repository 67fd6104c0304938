//! The framing layer under a connection, MPA or IFT, behind one interface.
//!
//! The data path (transmit batching, staged and direct reads) does not
//! care which framing carries the DDP segments: [`Framer`] frames a
//! segment into a [`WireBatch`], [`Deframer`] feeds received octets to the
//! engine and lays out upcoming payload for direct reads. The two framings
//! differ in how a segment is split (MPA frames header and payload as one
//! ULPDU; IFT keeps the DDP header apart, covered by its own CRC) and in
//! their error types, which become one [`FramingError`] here.

use arrayvec::ArrayVec;

use iwarp_proto::framing::{FeedError, WireBatch};
use iwarp_proto::ift::{IftReceiver, IftRxError, IftTransmitter, PayloadLayout};
use iwarp_proto::mpa::mulpdu::{mulpdu, MAX_ULPDU, MIN_MULPDU};
use iwarp_proto::mpa::{
    FpduReceiver, FpduTransmitter, LlpErrorCode, MpaError, Placement, Span, UlpduLayout,
};
use iwarp_proto::rdmap::QueuePair;

/// Why a framing layer stopped accepting the received stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    /// An MPA error (CRC, marker).
    #[error("MPA: {0}")]
    Mpa(MpaError),
    /// An IFT error (header or payload CRC, VTag, marker, header size).
    #[error("IFT: {0}")]
    Ift(IftRxError),
}

impl FramingError {
    /// The code to report in a Terminate message (layer LLP).
    pub const fn llp_code(&self) -> LlpErrorCode {
        match self {
            Self::Mpa(e) => e.llp_code(),
            Self::Ift(e) => e.llp_code(),
        }
    }
}

/// The transmit side of the framing layer.
#[derive(Debug)]
pub(crate) enum Framer {
    Mpa(FpduTransmitter),
    Ift(IftTransmitter),
}

impl Framer {
    /// Whether the framer holds back its first PDU (MPA rule 4).
    pub(crate) fn is_held(&self) -> bool {
        matches!(self, Self::Mpa(t) if t.is_held())
    }

    pub(crate) fn release(&mut self) {
        if let Self::Mpa(t) = self {
            t.release();
        }
    }

    /// The largest DDP segment that fits one TCP segment of `emss` octets
    /// under this framing.
    pub(crate) fn mulpdu(&self, emss: usize) -> usize {
        match self {
            // draft-ietf-rddp-mpa-01 §5.3.2.
            Self::Mpa(t) => mulpdu(emss, t.markers()),
            // IFT: 6-octet header, the CRCs in use, worst-case markers; no
            // padding.
            Self::Ift(t) => {
                let tx = t.params();
                let crcs = 4 * (usize::from(tx.header_crc) + usize::from(tx.payload_crc));
                let markers = tx
                    .markers
                    .map_or(0, |i| 4 * emss.div_ceil(usize::from(i.get()).max(1)));
                emss.saturating_sub(6 + crcs + markers)
                    .clamp(MIN_MULPDU, MAX_ULPDU)
            }
        }
    }

    /// Appends the PDU carrying the segment `[header, payload]` to `batch`.
    /// Fails only if the segment cannot be framed (never for a segment
    /// within the MULPDU).
    pub(crate) fn frame(&mut self, segment: [&[u8]; 2], batch: &mut WireBatch) -> bool {
        match self {
            Self::Mpa(t) => t.frame(&segment, batch).is_ok(),
            Self::Ift(t) => t.frame(segment[0], &segment[1..], batch).is_ok(),
        }
    }

    /// Pushes the slices of `segment` that a batch framed by this framer
    /// refers to: MPA borrows header and payload, IFT copied the header
    /// into the batch and borrows the payload only.
    pub(crate) fn batch_slices<'a, const N: usize>(
        &self,
        segment: [&'a [u8]; 2],
        out: &mut ArrayVec<&'a [u8], N>,
    ) {
        if let Self::Mpa(_) = self {
            out.push(segment[0]);
        }
        out.push(segment[1]);
    }
}

/// The stream layout of upcoming payload octets, from either framing.
#[derive(Debug, Clone)]
pub(crate) enum Layout {
    Mpa(UlpduLayout),
    Ift(PayloadLayout),
}

impl Iterator for Layout {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        match self {
            Self::Mpa(l) => l.next(),
            Self::Ift(l) => l.next(),
        }
    }
}

/// The receive side of the framing layer.
#[derive(Debug)]
pub(crate) enum Deframer {
    Mpa(FpduReceiver),
    Ift(IftReceiver),
}

impl Deframer {
    /// Feeds received octets to the engine; returns how many it took (all
    /// of them, but for an incomplete FPDU a verifying MPA receiver
    /// leaves).
    pub(crate) fn receive(&mut self, input: &[u8], qp: &mut QueuePair) -> Result<usize, FeedEnd> {
        match self {
            Self::Mpa(r) => r.receive(input, qp).map_err(|e| match e {
                FeedError::Framing(f) => FeedEnd::Framing(FramingError::Mpa(f)),
                FeedError::Sink(_) => FeedEnd::Engine,
            }),
            Self::Ift(r) => r.receive(input, qp).map_err(|e| match e {
                FeedError::Framing(f) => FeedEnd::Framing(FramingError::Ift(f)),
                FeedError::Sink(_) => FeedEnd::Engine,
            }),
        }
    }

    /// Whether PDUs are passed on only once whole and verified (MPA with
    /// [`Placement::Verified`]): the receive path then stages whole PDUs.
    pub(crate) fn verifies_first(&self) -> bool {
        matches!(self, Self::Mpa(r) if r.placement() == Placement::Verified)
    }

    /// For a receiver that verifies first: the octets the PDU at the front
    /// of `staged` takes, once its length can be read there.
    pub(crate) fn next_pdu_len(&self, staged: &[u8]) -> Option<usize> {
        match self {
            Self::Mpa(r) if r.placement() == Placement::Verified => r.next_fpdu_len(staged),
            _ => None,
        }
    }

    /// The layout of the next payload octets of the current PDU (none
    /// unless payload comes next).
    pub(crate) fn layout(&self, max: usize) -> Layout {
        match self {
            Self::Mpa(r) => Layout::Mpa(r.ulpdu_layout(max)),
            Self::Ift(r) => Layout::Ift(r.payload_layout(max)),
        }
    }

    /// Records payload octets the caller placed itself.
    pub(crate) fn push_payload(&mut self, bytes: &[u8]) -> Result<(), FramingError> {
        match self {
            Self::Mpa(r) => r.push_ulpdu(bytes).map_err(FramingError::Mpa),
            Self::Ift(r) => r.push_payload(bytes).map_err(FramingError::Ift),
        }
    }

    /// Records the octets of a marker read into scratch space.
    pub(crate) fn push_marker(&mut self, bytes: &[u8]) -> Result<(), FramingError> {
        match self {
            Self::Mpa(r) => r.push_framing(bytes).map(|_| ()).map_err(FramingError::Mpa),
            Self::Ift(r) => r.push_framing(bytes).map(|_| ()).map_err(FramingError::Ift),
        }
    }

    /// Whether the stream sits between two PDUs.
    pub(crate) fn at_boundary(&self) -> bool {
        match self {
            Self::Mpa(r) => r.at_fpdu_boundary(),
            Self::Ift(r) => r.at_frame_boundary(),
        }
    }

    /// PDUs received and validated so far.
    pub(crate) fn pdus_received(&self) -> u64 {
        match self {
            Self::Mpa(r) => r.fpdus_received(),
            Self::Ift(r) => r.frames_received(),
        }
    }

    /// The larger of the current (or last) PDU's payload length and the
    /// one before: the receive path's guess at the next PDU's size.
    pub(crate) fn recent_payload_len(&self) -> usize {
        match self {
            Self::Mpa(r) => r.ulpdu_len().max(r.previous_ulpdu_len()),
            Self::Ift(r) => r.payload_len().max(r.previous_payload_len()),
        }
    }

    /// Stream offset of the next octet expected.
    pub(crate) fn offset(&self) -> u64 {
        match self {
            Self::Mpa(r) => r.offset(),
            Self::Ift(r) => r.offset(),
        }
    }
}

/// Why feeding stopped.
#[derive(Debug)]
pub(crate) enum FeedEnd {
    Framing(FramingError),
    Engine,
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_proto::ift::{MarkerInterval, TxParams};
    use iwarp_proto::mpa::FramingParams;

    fn ift(header_crc: bool, payload_crc: bool, markers: Option<u16>) -> Framer {
        Framer::Ift(IftTransmitter::new(TxParams {
            header_crc,
            payload_crc,
            markers: markers.and_then(MarkerInterval::new),
            vtag: 1,
        }))
    }

    #[test]
    fn mulpdu_per_framing() {
        let plain = FramingParams::default();
        let marked = FramingParams::IMMEDIATE_START;
        // MPA: the formula of draft-ietf-rddp-mpa-01 §5.3.2.
        assert_eq!(Framer::Mpa(FpduTransmitter::new(plain)).mulpdu(1460), 1454);
        assert_eq!(Framer::Mpa(FpduTransmitter::new(marked)).mulpdu(1460), 1442);
        assert_eq!(
            Framer::Mpa(FpduTransmitter::new(plain)).mulpdu(65483),
            MAX_ULPDU
        );
        // IFT: 6-octet header plus the CRCs in use, no pad.
        assert_eq!(ift(true, true, None).mulpdu(1460), 1460 - 14);
        assert_eq!(ift(false, false, None).mulpdu(1460), 1460 - 6);
        assert_eq!(ift(true, false, Some(512)).mulpdu(1460), 1460 - 10 - 12);
        // Never below what DDP needs for its largest Terminate.
        assert_eq!(ift(true, true, None).mulpdu(40), MIN_MULPDU);
    }
}
