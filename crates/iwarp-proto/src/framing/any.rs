//! The framing a connection settled on, MPA or IFT, as one type for each
//! direction.
//!
//! The startup exchange decides the framing at run time, so a connection
//! holds an [`AnyFramer`] and an [`AnyDeframer`]. Each forwards the
//! [`Framer`] or [`Deframer`] trait to the framing inside; the match costs
//! a predictable branch per call, and the [`super::receive`] loop and
//! everything above it stay one piece of code for both framings.

use super::batch::WireBatch;
use super::deframer::{Deframer, FramingEvent, Next};
use super::framer::{Framer, TxError};
use super::layout::{Layout, Span};
use super::llp::{LlpError, LlpErrorCode};
use super::sink::{FeedError, UlpduSink};
use crate::ift::{IftReceiver, IftRxError, IftTransmitter};
use crate::mpa::{FpduReceiver, FpduTransmitter, MpaError};

/// Why a deframer of either framing stopped accepting the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FramingError {
    /// An MPA error (CRC, marker).
    #[error("MPA: {0}")]
    Mpa(#[from] MpaError),
    /// An IFT error (header or payload CRC, VTag, marker, header size).
    #[error("IFT: {0}")]
    Ift(#[from] IftRxError),
}

impl LlpError for FramingError {
    fn llp_code(&self) -> LlpErrorCode {
        match self {
            Self::Mpa(e) => e.llp_code(),
            Self::Ift(e) => e.llp_code(),
        }
    }
}

/// The transmit side of whichever framing a connection uses.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyFramer {
    /// MPA FPDUs.
    Mpa(FpduTransmitter),
    /// IFT frames.
    Ift(IftTransmitter),
}

/// Forwards a call to the framing inside.
macro_rules! forward {
    ($self:ident, $x:ident => $call:expr) => {
        match $self {
            Self::Mpa($x) => $call,
            Self::Ift($x) => $call,
        }
    };
}

impl Framer for AnyFramer {
    fn frame(
        &mut self,
        header: &[u8],
        payload: &[&[u8]],
        batch: &mut WireBatch,
    ) -> Result<(), TxError> {
        forward!(self, t => t.frame(header, payload, batch))
    }

    fn wire_len(&self, header_len: usize, payload_len: usize) -> usize {
        forward!(self, t => t.wire_len(header_len, payload_len))
    }

    fn mulpdu(&self, emss: usize) -> usize {
        forward!(self, t => t.mulpdu(emss))
    }

    fn offset(&self) -> u64 {
        forward!(self, t => t.offset())
    }

    fn pdus_sent(&self) -> u64 {
        forward!(self, t => t.pdus_sent())
    }
}

/// The receive side of whichever framing a connection uses.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyDeframer {
    /// MPA FPDUs.
    Mpa(FpduReceiver),
    /// IFT frames.
    Ift(IftReceiver),
}

impl Deframer for AnyDeframer {
    type Error = FramingError;

    #[inline]
    fn next(&self) -> Next {
        forward!(self, r => r.next())
    }

    fn push_framing(
        &mut self,
        input: &[u8],
    ) -> Result<(usize, Option<FramingEvent>), FramingError> {
        forward!(self, r => r.push_framing(input).map_err(FramingError::from))
    }

    #[inline]
    fn push_payload(&mut self, bytes: &[u8]) -> Result<(), FramingError> {
        forward!(self, r => r.push_payload(bytes).map_err(FramingError::from))
    }

    #[inline]
    fn push_placed(&mut self, bytes: &[u8]) -> Result<(), FramingError> {
        forward!(self, r => r.push_placed(bytes).map_err(FramingError::from))
    }

    #[inline]
    fn fold_placed(&mut self, placed: &[u8]) {
        forward!(self, r => r.fold_placed(placed))
    }

    fn push_spans(&mut self, wire: &[u8], spans: &[Span]) -> Result<(), FramingError> {
        forward!(self, r => r.push_spans(wire, spans).map_err(FramingError::from))
    }

    fn header(&self) -> &[u8] {
        forward!(self, r => r.header())
    }

    fn layout(&self, max_payload: usize) -> Layout {
        forward!(self, r => r.layout(max_payload))
    }

    #[inline]
    fn payload_remaining(&self) -> usize {
        forward!(self, r => r.payload_remaining())
    }

    fn at_boundary(&self) -> bool {
        forward!(self, r => r.at_boundary())
    }

    fn offset(&self) -> u64 {
        forward!(self, r => r.offset())
    }

    fn pdus_received(&self) -> u64 {
        forward!(self, r => r.pdus_received())
    }

    fn payload_len(&self) -> usize {
        forward!(self, r => r.payload_len())
    }

    fn previous_payload_len(&self) -> usize {
        forward!(self, r => r.previous_payload_len())
    }

    fn error(&self) -> Option<FramingError> {
        forward!(self, r => r.error().map(FramingError::from))
    }

    /// Dispatches once per call, so that the loop runs on the framing
    /// inside without a match per step.
    fn receive<S: UlpduSink>(
        &mut self,
        input: &[u8],
        sink: &mut S,
    ) -> Result<usize, FeedError<FramingError, S::Error>> {
        // Each framing's own `receive`: MPA's may verify whole FPDUs first.
        forward!(self, r => r.receive(input, sink).map_err(|e| match e {
            FeedError::Framing(f) => FeedError::Framing(f.into()),
            FeedError::Sink(s) => FeedError::Sink(s),
        }))
    }
}
