//! The receive contract: how a framing layer hands ULPDUs to DDP.

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

    /// Several consecutive pieces of the current ULPDU at once, in order:
    /// what a framing layer with markers passes, the runs between the
    /// markers of one received buffer, so that the sink can place them in
    /// one go. The default passes them one by one to
    /// [`UlpduSink::ulpdu_data`].
    fn ulpdu_data_vectored(&mut self, pieces: &[&[u8]]) -> Result<(), Self::Error> {
        for piece in pieces {
            self.ulpdu_data(piece)?;
        }
        Ok(())
    }

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
