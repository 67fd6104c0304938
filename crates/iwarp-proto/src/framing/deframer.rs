//! The receive side of a framing layer: one trait for MPA's and IFT's
//! deframers, and the one loop that feeds a buffer through either into a
//! [`UlpduSink`].
//!
//! Two ways to drive a deframer:
//!
//! - [`Deframer::receive`] (the [`receive`] loop) takes a buffer of
//!   received octets and a sink, and calls the sink with each ULPDU's
//!   length, its octets and its end, copying nothing itself.
//! - The step API, for a runtime that places payload straight from the
//!   socket into its destination, and for a capture decoder that wants to
//!   see every PDU boundary: [`Deframer::next`] says whether framing
//!   octets or payload octets come next (and how many payload octets
//!   before the next marker); framing octets go to
//!   [`Deframer::push_framing`], which reports each PDU's
//!   [`FramingEvent::Begin`] and [`FramingEvent::End`]; payload octets are
//!   read wherever the caller likes and then shown to
//!   [`Deframer::push_payload`] (which folds them into the CRC).
//!
//! After an error a deframer passes nothing more (RFC 5044 §8): every
//! later call returns the same error.

use super::layout::{Layout, Span};
use super::llp::LlpError;
use super::marker::MARKER_LEN;
use super::sink::{FeedError, UlpduSink};

/// Payload runs handed to the sink in one call at most (8 KiB of payload
/// between MPA's markers): enough to amortise the sink's per-call cost,
/// small enough that the array costs little for a small PDU.
const GATHER: usize = 16;

/// What a deframer expects next in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Framing octets (length fields, a marker, pad, a CRC field), or a
    /// pending [`FramingEvent::End`]: call [`Deframer::push_framing`].
    Framing,
    /// Payload octets: up to `run` of them come before the next marker or
    /// the end of the payload; `remaining` are left in the PDU in all.
    Payload {
        /// Payload octets contiguous in the stream from here.
        run: usize,
        /// Payload octets not yet received.
        remaining: usize,
    },
    /// An error was reported; nothing more is accepted.
    Failed,
}

/// What a call to [`Deframer::push_framing`] completed, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingEvent {
    /// A PDU begins: a ULPDU of `header_len + payload_len` octets. Its
    /// first `header_len` octets came with the framing and are
    /// [`Deframer::header`] (IFT's DDP header, already verified by the
    /// header CRC; none for MPA, whose framing does not know where DDP's
    /// header ends); `payload_len` octets follow as payload.
    Begin {
        /// ULPDU octets held by the deframer, in [`Deframer::header`].
        header_len: usize,
        /// ULPDU octets that follow as payload.
        payload_len: usize,
    },
    /// The current PDU is complete and passed every check (CRCs included).
    End,
}

/// [`Deframer::push_spans`] span by span: its default, and what a
/// framing's own falls back to for anything its one step does not take.
pub(crate) fn push_spans_one_by_one<D: Deframer + ?Sized>(
    deframer: &mut D,
    wire: &[u8],
    spans: &[Span],
) -> Result<(), D::Error> {
    let mut at = 0;
    for span in spans {
        match *span {
            Span::Payload(n) => {
                deframer.push_placed(&wire[at..at + n])?;
                at += n;
            }
            Span::Marker => {
                deframer.push_framing(&wire[at..at + MARKER_LEN])?;
                at += MARKER_LEN;
            }
        }
    }
    Ok(())
}

/// A way to record whole spans: [`Deframer::push_spans`] or
/// [`push_spans_one_by_one`].
pub(crate) type PushSpans<D> = fn(&mut D, &[u8], &[Span]) -> Result<(), <D as Deframer>::Error>;

/// Replays one direct read through `deframer`: `read` holds the stream
/// octets of the first of `spans`, and may end inside a span. Each payload
/// run read goes to `place` first, in order; then the spans read whole go
/// to `push` in one call ([`Deframer::push_spans`], or
/// [`push_spans_one_by_one`]) and a partial last one span by span. What
/// the runtime's direct reads do, and the tests that model them.
pub(crate) fn replay_read<D: Deframer + ?Sized>(
    deframer: &mut D,
    read: &[u8],
    spans: &[Span],
    push: PushSpans<D>,
    mut place: impl FnMut(&[u8]),
) -> Result<(), D::Error> {
    let (mut whole, mut wire_len) = (0, 0);
    for span in spans {
        let end = wire_len + span.wire_len();
        if end > read.len() {
            break;
        }
        if let Span::Payload(_) = span {
            place(&read[wire_len..end]);
        }
        wire_len = end;
        whole += 1;
    }
    push(deframer, &read[..wire_len], &spans[..whole])?;
    let part = &read[wire_len..];
    if part.is_empty() {
        return Ok(());
    }
    // Octets of one more span, not all of it.
    match spans[whole] {
        Span::Payload(_) => {
            place(part);
            deframer.push_placed(part)
        }
        Span::Marker => deframer.push_framing(part).map(|_| ()),
    }
}

/// The receive side of a framing layer, for one half-connection, fed in
/// stream order: MPA's [`crate::mpa::FpduReceiver`] or IFT's
/// [`crate::ift::IftReceiver`]. See the module documentation.
pub trait Deframer {
    /// Why the deframer stopped accepting the stream.
    type Error: LlpError + Copy + core::fmt::Debug;

    /// What comes next.
    fn next(&self) -> Next;

    /// Consumes framing octets from the front of `input`, stopping at the
    /// first payload octet, at the end of `input`, or right after
    /// completing an event. Returns the octets consumed and the event, if
    /// any. A pending [`FramingEvent::End`] is reported even with empty
    /// `input`. Call it when [`Deframer::next`] says [`Next::Framing`];
    /// when payload octets come next it consumes nothing.
    fn push_framing(&mut self, input: &[u8]) -> Result<(usize, Option<FramingEvent>), Self::Error>;

    /// Records that the caller has received `bytes`, the next payload
    /// octets (at most the `run` that [`Deframer::next`] announced),
    /// wherever it put them. They are folded into the CRC.
    ///
    /// # Panics
    ///
    /// If more octets are pushed than [`Next::Payload`] allowed: a caller
    /// bug, not a peer's doing.
    fn push_payload(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;

    /// [`Deframer::push_payload`] for payload the caller has placed right
    /// after the payload it gave here before, since the last
    /// [`Deframer::fold_placed`]: a deframer whose CRC does not cover its
    /// markers (IFT) leaves these octets out of its CRC until
    /// `fold_placed` gives them all at once, one CRC call instead of one
    /// per run between markers. By default it is `push_payload`.
    ///
    /// # Panics
    ///
    /// As `push_payload`.
    fn push_placed(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        self.push_payload(bytes)
    }

    /// Folds into the CRC the payload given to [`Deframer::push_placed`]
    /// since the last call: `placed` must be exactly those octets, in
    /// order, in one piece. Call it before any framing octet that ends
    /// the PDU. By default it does nothing (`push_placed` folded them).
    fn fold_placed(&mut self, placed: &[u8]) {
        let _ = placed;
    }

    /// Records whole [`Span`]s of a [`Deframer::layout`] that the caller
    /// read in one piece: `wire` is exactly their octets in stream order,
    /// payload runs and markers, the payload already placed by the caller.
    /// It is [`Deframer::push_placed`] for each run and
    /// [`Deframer::push_framing`] for each marker, which is what it does
    /// by default; a framing may check the markers and take the runs in
    /// one step instead (with one CRC call over `wire` when its CRC
    /// covers the markers), with the same outcome.
    ///
    /// # Panics
    ///
    /// If `wire` is shorter than `spans`, or the spans are not the
    /// layout's: a caller bug, not a peer's doing.
    fn push_spans(&mut self, wire: &[u8], spans: &[Span]) -> Result<(), Self::Error> {
        push_spans_one_by_one(self, wire, spans)
    }

    /// The ULPDU octets that came with [`FramingEvent::Begin`], from then
    /// until [`FramingEvent::End`]; empty otherwise (and always for MPA).
    fn header(&self) -> &[u8];

    /// The layout of the next stream octets while inside a PDU's payload:
    /// runs of payload and the markers between them, covering at most
    /// `max_payload` payload octets. Empty unless [`Deframer::next`] says
    /// payload octets or a marker inside the payload come next.
    fn layout(&self, max_payload: usize) -> Layout;

    /// Payload octets still to come in the current PDU (0 outside one).
    fn payload_remaining(&self) -> usize;

    /// Whether the deframer sits between two PDUs (nothing of the next one
    /// read, the last one reported complete): the only place where the
    /// stream may cleanly end.
    fn at_boundary(&self) -> bool;

    /// Stream offset of the next octet expected.
    fn offset(&self) -> u64;

    /// PDUs received and validated so far.
    fn pdus_received(&self) -> u64;

    /// The payload length of the PDU being received, or of the last one
    /// between PDUs (0 before the first).
    fn payload_len(&self) -> usize;

    /// The payload length of the PDU before that: with
    /// [`Deframer::payload_len`], a runtime's guess at the next size.
    fn previous_payload_len(&self) -> usize;

    /// The error that stopped this deframer, if one did.
    fn error(&self) -> Option<Self::Error>;

    /// Feeds received octets through [`receive`].
    fn receive<S: UlpduSink>(
        &mut self,
        input: &[u8],
        sink: &mut S,
    ) -> Result<usize, FeedError<Self::Error, S::Error>>
    where
        Self: Sized,
    {
        receive(self, input, sink)
    }
}

/// The checks every [`Deframer::push_payload`] starts with: the error
/// that stopped the deframer, or the payload octets still to come in the
/// PDU before `len` more are recorded (`None` when no payload is due, and
/// `len` is then 0).
///
/// # Panics
///
/// If `len` octets are more than [`Deframer::next`] allows: a caller bug.
pub(crate) fn payload_due<D: Deframer + ?Sized>(
    deframer: &D,
    len: usize,
) -> Result<Option<usize>, D::Error> {
    if let Some(e) = deframer.error() {
        return Err(e);
    }
    let Next::Payload { run, remaining } = deframer.next() else {
        assert!(
            len == 0,
            "payload octets pushed where framing octets are due"
        );
        return Ok(None);
    };
    assert!(len <= run, "more payload octets pushed than the run allows");
    Ok(Some(remaining))
}

/// Feeds received octets through `deframer`, calling `sink` for each ULPDU
/// (its length, its octets, its end). Consumes all of `input` unless an
/// error stops it; returns the octets consumed. Copies nothing: the sink
/// sees slices of `input`, and the runs between the markers of `input`
/// arrive together in one [`UlpduSink::ulpdu_data_vectored`] call.
//= draft-ietf-rddp-mpa-01#5.2
//# The process MUST be invisible to the ULP.
pub fn receive<D: Deframer + ?Sized, S: UlpduSink>(
    deframer: &mut D,
    input: &[u8],
    sink: &mut S,
) -> Result<usize, FeedError<D::Error, S::Error>> {
    let mut used = 0;
    loop {
        match deframer.next() {
            Next::Failed => {
                return deframer
                    .error()
                    .map_or(Ok(used), |e| Err(FeedError::Framing(e)))
            }
            Next::Payload { .. } => {
                let mut pieces: [&[u8]; GATHER] = [&[]; GATHER];
                let mut count = 0;
                // A bad marker ends the gathering; what came before it
                // still goes to the sink, as it would piece by piece.
                let mut error = None;
                while count < GATHER {
                    match deframer.next() {
                        Next::Payload { run, .. } => {
                            let n = run.min(input.len() - used);
                            if n == 0 {
                                break;
                            }
                            let bytes = &input[used..used + n];
                            // Within the run `next` allowed: cannot fail.
                            if let Err(e) = deframer.push_payload(bytes) {
                                error = Some(e);
                                break;
                            }
                            used += n;
                            pieces[count] = bytes;
                            count += 1;
                        }
                        // A marker inside the payload: no event.
                        Next::Framing if deframer.payload_remaining() > 0 && used < input.len() => {
                            match deframer.push_framing(&input[used..]) {
                                Ok((n, _)) => used += n,
                                Err(e) => {
                                    error = Some(e);
                                    break;
                                }
                            }
                        }
                        _ => break,
                    }
                }
                match count {
                    0 => {}
                    1 => sink.ulpdu_data(pieces[0]).map_err(FeedError::Sink)?,
                    _ => sink
                        .ulpdu_data_vectored(&pieces[..count])
                        .map_err(FeedError::Sink)?,
                }
                if let Some(e) = error {
                    return Err(FeedError::Framing(e));
                }
                if count == 0 && used == input.len() {
                    return Ok(used);
                }
            }
            Next::Framing => {
                let (n, event) = deframer
                    .push_framing(&input[used..])
                    .map_err(FeedError::Framing)?;
                used += n;
                match event {
                    Some(FramingEvent::Begin {
                        header_len,
                        payload_len,
                    }) => {
                        sink.ulpdu_begin(header_len + payload_len)
                            .map_err(FeedError::Sink)?;
                        if header_len > 0 {
                            sink.ulpdu_data(deframer.header())
                                .map_err(FeedError::Sink)?;
                        }
                    }
                    Some(FramingEvent::End) => sink.ulpdu_end().map_err(FeedError::Sink)?,
                    // Nothing more to take from `input`.
                    None if n == 0 => return Ok(used),
                    None => {}
                }
            }
        }
    }
}
