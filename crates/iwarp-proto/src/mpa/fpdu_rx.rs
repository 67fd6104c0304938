//! FPDU reception: an incremental deframer for an in-order stream.
//!
//! The receiver is fed the stream octets of full operation in chunks of any
//! size. It strips markers and checks each one's FPDUPTR against the FPDU
//! start it knows from the lengths (RFC 5044 §8 code 3), checks the CRC
//! when it is in use (code 2), and hands the ULPDU octets to the layer
//! above. After an error it passes nothing more (RFC 5044 §8).
//!
//! Two ways to drive it:
//!
//! - [`FpduReceiver::receive`] takes a buffer of received octets and a
//!   [`UlpduSink`], and calls the sink with each ULPDU's length, its octets
//!   and its end, copying nothing itself.
//! - The step API, for a runtime that places payload straight from the
//!   socket into its destination: [`FpduReceiver::next`] says whether
//!   framing octets or ULPDU octets come next (and how many ULPDU octets
//!   before the next marker); framing octets go to
//!   [`FpduReceiver::push_framing`], ULPDU octets are read wherever the
//!   caller likes and then shown to [`FpduReceiver::push_ulpdu`] (which folds
//!   them into the CRC).
//!
//! An out-of-order receive path (TCP segments tagged with sequence numbers,
//! FPDUs located through markers, draft-ietf-rddp-mpa-01 §3.1.2 and §5.4)
//! would sit beside this one: it shares the marker arithmetic of
//! [`super::marker`] and the format of [`super::fpdu`], and hands ULPDUs to
//! the same sink, while this in-order receiver stays as it is.

mod verified;

pub use verified::{Placement, MAX_FPDU_WIRE_LEN};

use super::crc::{self, Crc32c};
use super::error::MpaError;
use super::fpdu::{pad_len, CRC_LEN, HEADER_LEN};
use super::marker::{self, MARKER_LEN};
use super::FramingParams;
use crate::framing::{FeedError, UlpduSink};

/// Runs between markers handed to the sink in one call at most (8 KiB of
/// ULPDU octets): enough to amortise the sink's per-call cost, small
/// enough that the array costs little for a small ULPDU.
const GATHER: usize = 16;

/// What the receiver expects next in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Framing octets (ULPDU_Length, marker, pad or CRC): pass them to
    /// [`FpduReceiver::push_framing`].
    Framing,
    /// ULPDU octets: up to `run` of them come before the next marker or the
    /// end of the ULPDU; `remaining` are left in the ULPDU in all.
    Ulpdu {
        /// ULPDU octets contiguous in the stream from here.
        run: usize,
        /// ULPDU octets not yet received.
        remaining: usize,
    },
    /// An error was reported; nothing more is accepted.
    Failed,
}

/// One stretch of stream octets in an [`UlpduLayout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// This many ULPDU octets, contiguous in the stream.
    Ulpdu(usize),
    /// A 4-octet marker.
    Marker,
}

/// The stream layout of upcoming ULPDU octets: see
/// [`FpduReceiver::ulpdu_layout`].
#[derive(Debug, Clone)]
pub struct UlpduLayout {
    offset: u64,
    left: usize,
    markers: bool,
}

impl Iterator for UlpduLayout {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        if self.left == 0 {
            return None;
        }
        if self.markers && marker::is_marker_at(self.offset) {
            self.offset += MARKER_LEN as u64;
            return Some(Span::Marker);
        }
        let run = if self.markers {
            let room = marker::next_marker_at(self.offset) - self.offset;
            self.left.min(usize::try_from(room).unwrap_or(usize::MAX))
        } else {
            self.left
        };
        self.left -= run;
        self.offset += run as u64;
        Some(Span::Ulpdu(run))
    }
}

/// What a call to [`FpduReceiver::push_framing`] completed, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingEvent {
    /// A ULPDU of this many octets begins.
    UlpduBegin(usize),
    /// The current ULPDU is complete and its FPDU passed every check.
    UlpduEnd,
}

/// Where the receiver is inside the current FPDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// `got` octets of ULPDU_Length read so far.
    Header { got: u8 },
    /// ULPDU octets still to come.
    Ulpdu { remaining: usize },
    /// Pad octets still to come.
    Pad { remaining: u8 },
    /// `got` octets of the CRC field read so far.
    Crc { got: u8 },
}

/// Deframes one half-connection's FPDUs, in stream order.
#[derive(Debug, Clone)]
pub struct FpduReceiver {
    crc_enabled: bool,
    markers: bool,
    /// Stream offset of the next octet expected.
    offset: u64,
    field: Field,
    /// Octets of a marker being read, if one is under way.
    marker: Option<(u8, [u8; MARKER_LEN])>,
    /// Stream offset of the current FPDU's first octet (its leading marker
    /// if it has one) and of its ULPDU_Length field.
    fpdu_offset: u64,
    header_offset: u64,
    header: [u8; HEADER_LEN],
    ulpdu_len: usize,
    previous_ulpdu_len: usize,
    crc_field: [u8; CRC_LEN],
    crc: Crc32c,
    failed: Option<MpaError>,
    fpdus: u64,
    placement: Placement,
}

impl FpduReceiver {
    /// A receiver at the start of full operation.
    pub fn new(params: FramingParams) -> Self {
        Self::at_offset(params, 0)
    }

    /// A receiver whose next octet is at stream offset `offset` (see
    /// [`super::FpduTransmitter::at_offset`]); an FPDU must begin there.
    pub fn at_offset(params: FramingParams, offset: u64) -> Self {
        Self {
            crc_enabled: params.crc,
            markers: params.receive_markers,
            offset,
            field: Field::Header { got: 0 },
            marker: None,
            fpdu_offset: offset,
            header_offset: offset,
            header: [0; HEADER_LEN],
            ulpdu_len: 0,
            previous_ulpdu_len: 0,
            crc_field: [0; CRC_LEN],
            crc: Crc32c::new(),
            failed: None,
            fpdus: 0,
            placement: Placement::Direct,
        }
    }

    /// Stream offset of the next octet expected.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The length of the ULPDU being received, or of the last one when the
    /// receiver sits between FPDUs (0 before the first).
    pub fn ulpdu_len(&self) -> usize {
        self.ulpdu_len
    }

    /// The length of the ULPDU before the one [`FpduReceiver::ulpdu_len`]
    /// gives. A runtime uses the two to guess the size of the next FPDU.
    pub fn previous_ulpdu_len(&self) -> usize {
        self.previous_ulpdu_len
    }

    /// FPDUs received and validated so far.
    pub fn fpdus_received(&self) -> u64 {
        self.fpdus
    }

    /// The error that stopped this receiver, if one did.
    pub fn error(&self) -> Option<MpaError> {
        self.failed
    }

    /// Whether the receiver sits between two FPDUs (nothing of the next one
    /// read yet): the only place where the stream may cleanly end.
    pub fn at_fpdu_boundary(&self) -> bool {
        self.failed.is_none() && self.field == Field::Header { got: 0 } && self.marker.is_none()
    }

    /// Whether a marker starts at the next octet.
    fn marker_due(&self) -> bool {
        self.markers && self.marker.is_none() && marker::is_marker_at(self.offset)
    }

    /// What comes next.
    pub fn next(&self) -> Next {
        if self.failed.is_some() {
            return Next::Failed;
        }
        match self.field {
            Field::Ulpdu { remaining } if remaining > 0 && self.marker.is_none() => {
                if self.marker_due() {
                    return Next::Framing;
                }
                let run = if self.markers {
                    let room = marker::next_marker_at(self.offset) - self.offset;
                    remaining.min(usize::try_from(room).unwrap_or(usize::MAX))
                } else {
                    remaining
                };
                Next::Ulpdu { run, remaining }
            }
            _ => Next::Framing,
        }
    }

    fn fail(&mut self, error: MpaError) -> MpaError {
        self.failed = Some(error);
        error
    }

    /// Consumes framing octets from the front of `input`, stopping at the
    /// first ULPDU octet, at the end of `input`, or right after completing
    /// an event. Returns the octets consumed and the event, if any.
    ///
    /// Call it when [`FpduReceiver::next`] says [`Next::Framing`]; when ULPDU
    /// octets come next it consumes nothing.
    pub fn push_framing(
        &mut self,
        input: &[u8],
    ) -> Result<(usize, Option<FramingEvent>), MpaError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut used = 0;
        while used < input.len() {
            // A marker can fall anywhere; it is read before the field it
            // interrupts continues.
            if let Some((got, mut buf)) = self.marker.take() {
                let n = (MARKER_LEN - got as usize).min(input.len() - used);
                buf[got as usize..got as usize + n].copy_from_slice(&input[used..used + n]);
                used += n;
                self.offset += n as u64;
                let got = got + n as u8;
                if (got as usize) < MARKER_LEN {
                    self.marker = Some((got, buf));
                    continue;
                }
                self.check_marker(buf)?;
                continue;
            }
            if self.marker_due() {
                if self.field == (Field::Header { got: 0 }) {
                    // Between FPDUs: this marker opens the next FPDU.
                    self.start_fpdu();
                }
                self.marker = Some((0, [0; MARKER_LEN]));
                continue;
            }
            let room = if self.markers {
                (marker::next_marker_at(self.offset) - self.offset) as usize
            } else {
                usize::MAX
            };
            let avail = (input.len() - used).min(room);
            match self.field {
                Field::Header { got } => {
                    if got == 0 {
                        self.start_fpdu_unless_marked();
                        self.header_offset = self.offset;
                    }
                    let n = (HEADER_LEN - got as usize).min(avail);
                    let bytes = &input[used..used + n];
                    self.header[got as usize..got as usize + n].copy_from_slice(bytes);
                    self.crc.update(bytes);
                    used += n;
                    self.offset += n as u64;
                    let got = got + n as u8;
                    if (got as usize) < HEADER_LEN {
                        self.field = Field::Header { got };
                        continue;
                    }
                    self.previous_ulpdu_len = self.ulpdu_len;
                    self.ulpdu_len = u16::from_be_bytes(self.header) as usize;
                    self.field = Field::Ulpdu {
                        remaining: self.ulpdu_len,
                    };
                    if self.ulpdu_len == 0 {
                        self.after_ulpdu();
                    }
                    return Ok((used, Some(FramingEvent::UlpduBegin(self.ulpdu_len))));
                }
                Field::Ulpdu { .. } => return Ok((used, None)),
                Field::Pad { remaining } => {
                    let n = (remaining as usize).min(avail);
                    self.crc.update(&input[used..used + n]);
                    used += n;
                    self.offset += n as u64;
                    let remaining = remaining - n as u8;
                    self.field = if remaining == 0 {
                        Field::Crc { got: 0 }
                    } else {
                        Field::Pad { remaining }
                    };
                }
                Field::Crc { got } => {
                    let n = (CRC_LEN - got as usize).min(avail);
                    self.crc_field[got as usize..got as usize + n]
                        .copy_from_slice(&input[used..used + n]);
                    used += n;
                    self.offset += n as u64;
                    let got = got + n as u8;
                    if (got as usize) < CRC_LEN {
                        self.field = Field::Crc { got };
                        continue;
                    }
                    self.finish_fpdu()?;
                    return Ok((used, Some(FramingEvent::UlpduEnd)));
                }
            }
        }
        Ok((used, None))
    }

    /// Records that the caller has received `bytes`, the next ULPDU octets
    /// (at most the `run` that [`FpduReceiver::next`] announced), wherever it
    /// put them. They are folded into the CRC.
    ///
    /// # Panics
    ///
    /// If more octets are pushed than [`Next::Ulpdu`] allowed: a caller bug.
    pub fn push_ulpdu(&mut self, bytes: &[u8]) -> Result<(), MpaError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let Next::Ulpdu { run, remaining } = self.next() else {
            assert!(
                bytes.is_empty(),
                "ULPDU octets pushed where framing octets are due"
            );
            return Ok(());
        };
        assert!(
            bytes.len() <= run,
            "more ULPDU octets pushed than the run allows"
        );
        self.crc.update(bytes);
        self.offset += bytes.len() as u64;
        let remaining = remaining - bytes.len();
        self.field = Field::Ulpdu { remaining };
        if remaining == 0 {
            self.after_ulpdu();
        }
        Ok(())
    }

    /// The layout of the next stream octets while the receiver is inside a
    /// ULPDU: runs of ULPDU octets and the markers between them, covering
    /// at most `max_ulpdu` ULPDU octets and ending with the last ULPDU
    /// octet or run before that limit. Empty unless [`FpduReceiver::next`]
    /// says ULPDU octets or a marker inside a ULPDU come next.
    ///
    /// A runtime uses it to build one vectored read that puts payload
    /// straight into its destination and markers into a scratch array,
    /// then replays the same layout through [`FpduReceiver::push_ulpdu`]
    /// and [`FpduReceiver::push_framing`].
    pub fn ulpdu_layout(&self, max_ulpdu: usize) -> UlpduLayout {
        let remaining = match (self.failed, self.field, self.marker) {
            (None, Field::Ulpdu { remaining }, None) if remaining > 0 => remaining,
            _ => 0,
        };
        UlpduLayout {
            offset: self.offset,
            left: remaining.min(max_ulpdu),
            markers: self.markers,
        }
    }

    /// Feeds received octets, calling `sink` for each ULPDU; returns the
    /// octets consumed. With [`Placement::Direct`] it consumes all of
    /// `input` unless an error stops it. With [`Placement::Verified`] it
    /// consumes whole FPDUs only: the octets of an FPDU not yet complete
    /// are left, for the caller to present again with what follows.
    pub fn receive<S: UlpduSink>(
        &mut self,
        input: &[u8],
        sink: &mut S,
    ) -> Result<usize, FeedError<MpaError, S::Error>> {
        if self.placement == Placement::Verified {
            return self.receive_verified(input, sink);
        }
        let mut used = 0;
        loop {
            if let Some(e) = self.failed {
                return Err(FeedError::Framing(e));
            }
            match self.next() {
                Next::Failed => return Ok(used),
                Next::Ulpdu { run, .. } if !self.markers => {
                    // Without markers the ULPDU is one run.
                    let n = run.min(input.len() - used);
                    if n == 0 {
                        return Ok(used);
                    }
                    let bytes = &input[used..used + n];
                    self.push_ulpdu(bytes).map_err(FeedError::Framing)?;
                    used += n;
                    sink.ulpdu_data(bytes).map_err(FeedError::Sink)?;
                }
                Next::Ulpdu { .. } => {
                    // Gather the runs between the markers of this input
                    // into one call, so that the sink places them at once.
                    let mut pieces: [&[u8]; GATHER] = [&[]; GATHER];
                    let mut count = 0;
                    // A bad marker ends the gathering; what came before it
                    // still goes to the sink, as it would piece by piece.
                    let mut error = None;
                    while count < GATHER {
                        match self.next() {
                            Next::Ulpdu { run, .. } => {
                                let n = run.min(input.len() - used);
                                if n == 0 {
                                    break;
                                }
                                let bytes = &input[used..used + n];
                                // Within the run `next` allowed: cannot fail.
                                if let Err(e) = self.push_ulpdu(bytes) {
                                    error = Some(e);
                                    break;
                                }
                                used += n;
                                pieces[count] = bytes;
                                count += 1;
                            }
                            Next::Framing if self.inside_ulpdu() && used < input.len() => {
                                // A marker inside the ULPDU: no event.
                                match self.push_framing(&input[used..]) {
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
                    if count > 0 {
                        sink.ulpdu_data_vectored(&pieces[..count])
                            .map_err(FeedError::Sink)?;
                    }
                    if let Some(e) = error {
                        return Err(FeedError::Framing(e));
                    }
                    if count == 0 && used == input.len() {
                        return Ok(used);
                    }
                }
                Next::Framing => {
                    if used == input.len() {
                        return Ok(used);
                    }
                    let (n, event) = self
                        .push_framing(&input[used..])
                        .map_err(FeedError::Framing)?;
                    used += n;
                    match event {
                        Some(FramingEvent::UlpduBegin(len)) => {
                            sink.ulpdu_begin(len).map_err(FeedError::Sink)?
                        }
                        Some(FramingEvent::UlpduEnd) => {
                            sink.ulpdu_end().map_err(FeedError::Sink)?
                        }
                        None => {}
                    }
                }
            }
        }
    }

    /// Whether ULPDU octets are still to come in the current FPDU (a marker
    /// read now falls inside the ULPDU).
    fn inside_ulpdu(&self) -> bool {
        matches!(self.field, Field::Ulpdu { remaining } if remaining > 0)
    }

    /// A new FPDU starts at the current offset.
    fn start_fpdu(&mut self) {
        self.fpdu_offset = self.offset;
        self.crc = Crc32c::new();
    }

    /// A new FPDU starts with its header here, unless a leading marker
    /// already opened it.
    fn start_fpdu_unless_marked(&mut self) {
        let opened_by_marker = self.markers
            && self.fpdu_offset + MARKER_LEN as u64 == self.offset
            && marker::is_marker_at(self.fpdu_offset);
        if !opened_by_marker {
            self.start_fpdu();
        }
    }

    fn after_ulpdu(&mut self) {
        let pad = pad_len(self.ulpdu_len) as u8;
        self.field = if pad > 0 {
            Field::Pad { remaining: pad }
        } else {
            Field::Crc { got: 0 }
        };
    }

    fn check_marker(&mut self, buf: [u8; MARKER_LEN]) -> Result<(), MpaError> {
        let marker_offset = self.offset - MARKER_LEN as u64;
        let between_fpdus = self.field == (Field::Header { got: 0 });
        let expected = if between_fpdus {
            0
        } else {
            marker::fpdu_ptr(marker_offset, self.header_offset)
        };
        let found = marker::decode(buf);
        // Markers before the CRC field are covered by the CRC; one inside
        // the CRC field (possible only at offsets MPA never uses) is not.
        if !matches!(self.field, Field::Crc { got } if got > 0) {
            self.crc.update(&buf);
        }
        if !marker::fpdu_ptr_matches(found, expected) {
            return Err(self.fail(MpaError::Marker {
                marker_offset,
                expected,
                found,
            }));
        }
        Ok(())
    }

    fn finish_fpdu(&mut self) -> Result<(), MpaError> {
        if self.crc_enabled {
            let received = crc::from_wire(self.crc_field);
            let computed = self.crc.value();
            if received != computed {
                return Err(self.fail(MpaError::Crc {
                    fpdu_offset: self.fpdu_offset,
                    computed,
                    received,
                }));
            }
        }
        self.fpdus += 1;
        self.field = Field::Header { got: 0 };
        self.crc = Crc32c::new();
        Ok(())
    }
}
