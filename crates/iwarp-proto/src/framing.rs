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

/// One piece of the wire octets of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// `control[start..end]` of the batch.
    Control { start: usize, end: usize },
    /// `slices[slice][start..end]` of the caller's ULPDU slices.
    Ulpdu {
        slice: usize,
        start: usize,
        end: usize,
    },
}

/// The wire octets of one or more PDUs of a framing layer (MPA FPDUs or
/// IFT frames), as pieces to write in order: framing octets the batch owns
/// and ranges of the caller's ULPDU slices, which are never copied.
///
/// Reuse a batch: [`WireBatch::clear`] keeps its capacity.
#[derive(Debug, Clone, Default)]
pub struct WireBatch {
    control: Vec<u8>,
    pieces: Vec<Piece>,
    /// Caller slices referenced so far.
    slices: usize,
    pdus: usize,
    wire_len: usize,
}

impl WireBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.control.clear();
        self.pieces.clear();
        self.slices = 0;
        self.pdus = 0;
        self.wire_len = 0;
    }

    /// Whether no PDU has been appended since the last clear.
    pub fn is_empty(&self) -> bool {
        self.pdus == 0
    }

    /// PDUs (FPDUs or IFT frames) in the batch.
    pub fn pdu_count(&self) -> usize {
        self.pdus
    }

    /// Total octets on the wire.
    pub fn wire_len(&self) -> usize {
        self.wire_len
    }

    /// Number of pieces (each a separate slice for a vectored write).
    pub fn piece_count(&self) -> usize {
        self.pieces.len()
    }

    /// Number of caller slices the batch refers to: the length `slices`
    /// must have in [`WireBatch::pieces`].
    pub fn slice_count(&self) -> usize {
        self.slices
    }

    /// Reserves indices for `count` more caller slices; returns the first.
    pub(crate) fn add_slices(&mut self, count: usize) -> usize {
        let first = self.slices;
        self.slices += count;
        first
    }

    /// Appends `slices[slice][start..end]` of the caller's slices.
    pub(crate) fn push_slice(&mut self, slice: usize, start: usize, end: usize) {
        if start < end {
            self.pieces.push(Piece::Ulpdu { slice, start, end });
            self.wire_len += end - start;
        }
    }

    /// Counts one more complete PDU.
    pub(crate) fn finish_pdu(&mut self) {
        self.pdus += 1;
    }

    /// Appends framing octets, owned by the batch.
    pub(crate) fn push_control(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let start = self.control.len();
        self.control.extend_from_slice(bytes);
        let end = self.control.len();
        self.wire_len += bytes.len();
        // Adjacent framing octets (pad then CRC, say) form one piece.
        if let Some(Piece::Control { end: last_end, .. }) = self.pieces.last_mut() {
            if *last_end == start {
                *last_end = end;
                return;
            }
        }
        self.pieces.push(Piece::Control { start, end });
    }

    /// The wire octets, in order: framing octets from the batch and ranges
    /// of `slices`, which must be the ULPDU slices passed to
    /// the framing layer's transmitter since the last clear, in the same order.
    ///
    /// # Panics
    ///
    /// If `slices` is shorter than [`WireBatch::slice_count`] or a slice is
    /// shorter than when it was framed: a caller bug, not a peer's doing.
    pub fn pieces<'a>(&'a self, slices: &'a [&'a [u8]]) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.pieces.iter().map(move |piece| match *piece {
            Piece::Control { start, end } => &self.control[start..end],
            Piece::Ulpdu { slice, start, end } => &slices[slice][start..end],
        })
    }

    /// Appends the wire octets to `out`: a copy, for tests and tools.
    pub fn write_to(&self, slices: &[&[u8]], out: &mut Vec<u8>) {
        out.reserve(self.wire_len);
        for piece in self.pieces(slices) {
            out.extend_from_slice(piece);
        }
    }
}
