//! The contract between a framing layer (MPA or IFT) and DDP.
//!
//! A framing layer recovers ULPDUs from the TCP stream and hands them to
//! DDP. To let DDP place payload directly where it belongs, a ULPDU is not
//! handed over whole: the framing layer announces its length, then passes
//! its octets in stream order, in pieces of any size (markers already
//! removed), then says it is complete and valid. DDP reads its header from
//! the first octets, decides where the rest goes, and copies each piece
//! there as it arrives.
//!
//! Placement therefore happens before the framing layer has checked the
//! CRC, which it can only do once the last octet is in. That is why
//! [`UlpduSink::ulpdu_end`] is separate: DDP must not *deliver* a message
//! (complete a work request) before it, and when the framing layer reports
//! an error instead, the ULPDU is discarded and the stream stops. An error
//! that DDP finds in a header must likewise wait for `ulpdu_end` before it
//! is reported, so that a header damaged in transit is reported as the CRC
//! error it is and not as, say, an invalid STag.

/// Receives the ULPDUs a framing layer recovers, piece by piece.
pub trait UlpduSink {
    /// What the sink reports when it refuses a ULPDU; it stops the feed.
    type Error;

    /// A ULPDU of `len` octets begins.
    fn ulpdu_begin(&mut self, len: usize) -> Result<(), Self::Error>;

    /// The next octets of the current ULPDU, in order. Over one ULPDU the
    /// pieces add up to the length given to [`UlpduSink::ulpdu_begin`];
    /// an empty piece is never passed.
    fn ulpdu_data(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;

    /// The current ULPDU is complete and passed every framing check (CRC
    /// included): it may be delivered.
    fn ulpdu_end(&mut self) -> Result<(), Self::Error>;
}

/// Why feeding received octets through a framing layer into a sink stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeedError<F, S> {
    /// The framing layer found the stream invalid.
    #[error("framing: {0}")]
    Framing(F),
    /// The sink refused a ULPDU.
    #[error("upper layer: {0}")]
    Sink(S),
}

/// A sink that collects whole ULPDUs into vectors: for tests, tools and
/// anywhere a copy does not matter.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CollectUlpdus {
    /// ULPDUs completed so far, in order.
    pub complete: Vec<Vec<u8>>,
    current: Option<Vec<u8>>,
}

impl CollectUlpdus {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// The octets of the ULPDU in progress, if one has begun and not ended.
    pub fn partial(&self) -> Option<&[u8]> {
        self.current.as_deref()
    }
}

impl UlpduSink for CollectUlpdus {
    type Error = std::convert::Infallible;

    fn ulpdu_begin(&mut self, len: usize) -> Result<(), Self::Error> {
        self.current = Some(Vec::with_capacity(len));
        Ok(())
    }

    fn ulpdu_data(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        if let Some(current) = self.current.as_mut() {
            current.extend_from_slice(bytes);
        }
        Ok(())
    }

    fn ulpdu_end(&mut self) -> Result<(), Self::Error> {
        if let Some(done) = self.current.take() {
            self.complete.push(done);
        }
        Ok(())
    }
}
