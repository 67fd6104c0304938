//! One direction's MPA FPDUs, deframed by the stack's own [`FpduReceiver`].
//!
//! The receiver is driven through its step API so that the decoder knows
//! where each FPDU starts and ends in the stream; the raw octets of the
//! current FPDU are kept (they give the CRC field and the markers for the
//! report), and the first [`HEAD`] octets of its ULPDU go to
//! [`super::ulpdu::interpret`].
//!
//! The stack's receiver stops for good at the first error, as RFC 5044 §8
//! requires of an endpoint. A decoder wants to go on where it still can:
//!
//! - **CRC error**: the FPDU's length field still says where the next one
//!   starts (the receiver has consumed the whole FPDU when it reports the
//!   error), so a fresh receiver takes over at that offset. The bad FPDU is
//!   reported with both CRC values.
//! - **Marker error**: the length and the marker disagree, so neither can
//!   be trusted; decoding resynchronises on the next marker (below).
//! - **Octets missing from the capture**: with markers, resynchronise on
//!   them; without markers but with CRC, hunt for the next FPDU by its CRC
//!   ([`crate::hunt`]); with neither, stop (nothing in the stream says
//!   where an FPDU begins).
//! - **No startup seen and the first octets fail the CRC** (the capture
//!   began inside an FPDU): hunt, as after a gap.
//!
//! Resynchronising (draft-ietf-rddp-mpa-01 §5.1, the reason markers exist):
//! at each marker position after the damage, the FPDUPTR points back to
//! the ULPDU_Length field of the FPDU the marker sits in, or is 0 when the
//! marker opens an FPDU. The first marker whose FPDU starts at or after the
//! damage gives a new FPDU boundary, where a fresh receiver starts.

use iwarp_proto::framing::{crc, Deframer, FramingEvent, Next, MARKER_LEN};
use iwarp_proto::mpa::marker::{self, INTERVAL};
use iwarp_proto::mpa::{fpdu, FpduReceiver, FramingParams, MpaError, Placement};
use iwarp_proto::ooo::{MpaFraming, OooFraming};

use crate::event::{
    CrcInfo, CrcStatus, CrcUse, Event, FramingKind, GapAction, GapInfo, MarkerInfo, PduError,
    PduInfo, ResyncInfo, ResyncMethod,
};
use crate::hunt::{boundary_at, Verdict};
use crate::note::Note;
use crate::ulpdu::{interpret, HEAD};

/// How this direction treats the CRC field.
pub type CrcMode = CrcUse;

fn checks(crc: CrcMode) -> bool {
    matches!(crc, CrcMode::On | CrcMode::Auto)
}

/// Keeps the last four octets of a stream in `tail` as `more` follows.
fn roll(tail: &mut [u8; 4], more: &[u8]) {
    if let Some(last) = more.last_chunk::<4>() {
        *tail = *last;
    } else {
        tail.rotate_left(more.len());
        tail[4 - more.len()..].copy_from_slice(more);
    }
}

/// Most octets kept while searching for a marker to resynchronise on:
/// an FPDUPTR reaches at most 65535 octets back.
const RESYNC_LOOKBACK: u64 = 65536 + 2 * INTERVAL.get() as u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Deframing.
    Running,
    /// Looking for an FPDU boundary at or after this stream offset, by
    /// the markers.
    Resync { from: u64, lost_at: u64 },
    /// Looking for an FPDU boundary at or after `from` by its CRC, having
    /// tried `tried` offsets.
    Hunt { from: u64, lost_at: u64, tried: u64 },
    /// Nothing more can be decoded.
    Stopped,
}

/// Deframes and reports one direction's FPDUs.
#[derive(Debug, Clone)]
pub struct MpaDirection {
    markers: bool,
    crc: CrcMode,
    rx: FpduReceiver,
    state: State,
    /// Raw octets from the start of the current FPDU (or, while
    /// resynchronising, from the oldest offset still of use).
    buf: Vec<u8>,
    /// Stream offset of `buf[0]`.
    buf_offset: u64,
    /// Octets of `buf` given to the receiver.
    fed: usize,
    /// The current ULPDU's length and first octets.
    ulpdu_len: usize,
    head: Vec<u8>,
    /// FPDUs reported so far (for the CRC auto-detection).
    pdus: u64,
    /// No more octets will come (the hunt may take a last FPDU alone).
    at_end: bool,
    /// Octets go straight through the receiver, not kept in `buf`: the
    /// current FPDU's raw length and last four octets are tracked instead.
    direct: bool,
    /// Direct: raw octets of the current FPDU so far.
    raw_len: usize,
    /// Direct: the last four raw octets (the CRC field, once it ends).
    tail: [u8; 4],
}

impl MpaDirection {
    /// A direction whose FPDUs start at stream offset 0 with these settings.
    pub fn new(markers: bool, crc: CrcMode) -> Self {
        Self {
            markers,
            crc,
            rx: FpduReceiver::new(Self::params(markers, crc)),
            state: State::Running,
            buf: Vec::new(),
            buf_offset: 0,
            fed: 0,
            ulpdu_len: 0,
            head: Vec::new(),
            pdus: 0,
            at_end: false,
            direct: false,
            raw_len: 0,
            tail: [0; 4],
        }
    }

    fn params(markers: bool, crc: CrcMode) -> FramingParams {
        FramingParams {
            crc: checks(crc),
            send_markers: false,
            receive_markers: markers,
        }
    }

    /// Whether decoding has stopped for good.
    pub fn stopped(&self) -> bool {
        self.state == State::Stopped
    }

    /// The next octets of the stream.
    pub fn push(&mut self, data: &[u8], events: &mut Vec<Event>) {
        if self.state == State::Stopped {
            return;
        }
        // Without markers to list, once the CRC use is known and everything
        // kept has been fed, the octets need not be kept at all: the data
        // path of a capture decoder is this copy.
        if !self.direct
            && !self.markers
            && self.state == State::Running
            && self.crc != CrcMode::Auto
            && self.fed == self.buf.len()
        {
            self.raw_len = self.fed;
            self.tail = [0; 4];
            roll(&mut self.tail, &self.buf[..self.fed]);
            self.buf.clear();
            self.fed = 0;
            self.direct = true;
        }
        if self.direct {
            self.push_direct(data, events);
        } else {
            self.buf.extend_from_slice(data);
            self.run(events);
        }
    }

    /// Feeds `input` straight through the receiver (see [`Self::direct`]).
    fn push_direct(&mut self, mut input: &[u8], events: &mut Vec<Event>) {
        while !input.is_empty() {
            if self.state != State::Running {
                // An error changed the course: what is left is kept.
                self.direct = false;
                self.buf.extend_from_slice(input);
                self.run(events);
                return;
            }
            match self.rx.next() {
                Next::Failed => {
                    self.state = State::Stopped;
                    return;
                }
                Next::Payload { run, .. } => {
                    let n = run.min(input.len());
                    let bytes = &input[..n];
                    if let Err(e) = self.rx.push_payload(bytes) {
                        self.error(e, events);
                        continue;
                    }
                    let keep = HEAD.saturating_sub(self.head.len()).min(n);
                    self.head.extend_from_slice(&bytes[..keep]);
                    self.raw_len += n;
                    roll(&mut self.tail, bytes);
                    input = &input[n..];
                }
                Next::Framing => {
                    if self.rx.at_boundary() {
                        self.buf_offset = self.rx.offset();
                        self.raw_len = 0;
                    }
                    let before = self.rx.offset();
                    let result = self.rx.push_framing(input);
                    let n = usize::try_from(self.rx.offset() - before).unwrap_or(0);
                    self.raw_len += n;
                    roll(&mut self.tail, &input[..n.min(input.len())]);
                    input = &input[n.min(input.len())..];
                    match result {
                        Ok((_, event)) => self.framing_event(event, events),
                        Err(e) => self.error(e, events),
                    }
                }
            }
        }
    }

    /// The current FPDU's raw octets so far and its last four.
    fn raw(&self) -> (usize, u32) {
        if self.direct {
            (self.raw_len, crc::from_wire(self.tail))
        } else {
            (self.fed, self.crc_field())
        }
    }

    /// Handles what a `push_framing` completed.
    fn framing_event(&mut self, event: Option<FramingEvent>, events: &mut Vec<Event>) {
        match event {
            Some(FramingEvent::Begin {
                payload_len: len, ..
            }) => {
                self.ulpdu_len = len;
                self.head.clear();
            }
            Some(FramingEvent::End) => {
                let status = match self.crc {
                    CrcMode::On => CrcStatus::Ok,
                    CrcMode::Off => CrcStatus::Off,
                    CrcMode::Unchecked => CrcStatus::Unchecked,
                    CrcMode::Auto => {
                        self.crc = CrcMode::On;
                        events.push(Event::Note(Note::CrcDetectedOn));
                        CrcStatus::Ok
                    }
                };
                let crc = CrcInfo {
                    status,
                    received: Some(self.raw().1),
                    computed: None,
                };
                self.report(crc, None, events);
            }
            None => {}
        }
    }

    /// `missing` octets were not captured here. `found_ahead`: the
    /// placement view found a whole, valid FPDU right after them.
    pub fn gap(
        &mut self,
        tcp_offset: u64,
        missing: u64,
        found_ahead: bool,
        events: &mut Vec<Event>,
    ) {
        // Directly, every octet that came has been consumed.
        let end = if self.direct {
            self.rx.offset()
        } else {
            self.buf_offset + self.buf.len() as u64
        };
        let action = if found_ahead {
            GapAction::Ahead
        } else if self.markers {
            GapAction::Resync
        } else if checks(self.crc) {
            GapAction::Hunt
        } else {
            GapAction::Stop
        };
        if self.state == State::Stopped {
            return;
        }
        events.push(Event::Gap(GapInfo {
            offset: tcp_offset,
            octets: missing,
            action,
        }));
        if action == GapAction::Stop {
            events.push(Event::Note(Note::GapStops { missing, at: end }));
            self.state = State::Stopped;
            return;
        }
        if self.state == State::Running && (!self.rx.at_boundary() || self.fed < self.buf.len()) {
            events.push(Event::Note(Note::CutByGap {
                framing: "FPDU",
                start: self.buf_offset,
                at: end,
            }));
        }
        let lost_at = match self.state {
            State::Resync { lost_at, .. } | State::Hunt { lost_at, .. } => lost_at,
            _ => end,
        };
        let from = end + missing;
        self.state = match action {
            GapAction::Ahead => {
                if self.crc == CrcMode::Auto {
                    // Found with its CRC checked: CRC is on.
                    self.crc = CrcMode::On;
                }
                self.rx = FpduReceiver::at_offset(Self::params(self.markers, self.crc), from);
                self.head.clear();
                events.push(Event::Resync(ResyncInfo {
                    framing: FramingKind::Mpa,
                    offset: from,
                    skipped: from.saturating_sub(lost_at),
                    method: ResyncMethod::Ahead,
                }));
                State::Running
            }
            GapAction::Resync => State::Resync { from, lost_at },
            _ => State::Hunt {
                from,
                lost_at,
                tried: 0,
            },
        };
        self.buf.clear();
        self.buf_offset = from;
        self.fed = 0;
        self.direct = false;
    }

    /// The end of the capture.
    pub fn finish(&mut self, events: &mut Vec<Event>) {
        if let State::Hunt {
            from,
            lost_at,
            tried,
        } = self.state
        {
            // Nothing more will come: a last FPDU alone will do.
            self.at_end = true;
            if self.hunt(from, lost_at, tried, events) {
                self.run(events);
            }
        }
        match self.state {
            State::Running if self.fed < self.buf.len() || !self.rx.at_boundary() => {
                let captured = if self.direct {
                    self.raw_len
                } else {
                    self.buf.len()
                };
                events.push(Event::Note(Note::EndsInside {
                    framing: "FPDU",
                    start: self.buf_offset,
                    captured,
                }));
            }
            State::Resync { lost_at, .. } | State::Hunt { lost_at, .. } => {
                events.push(Event::Note(Note::EndsUnsynchronised(lost_at)));
            }
            _ => {}
        }
        self.state = State::Stopped;
    }

    fn run(&mut self, events: &mut Vec<Event>) {
        loop {
            match self.state {
                State::Stopped => return,
                State::Resync { from, lost_at } => {
                    if !self.resync(from, lost_at, events) {
                        return;
                    }
                }
                State::Hunt {
                    from,
                    lost_at,
                    tried,
                } => {
                    if !self.hunt(from, lost_at, tried, events) {
                        return;
                    }
                }
                State::Running => {
                    if !self.step(events) {
                        return;
                    }
                }
            }
        }
    }

    /// One step of the receiver; false when it needs more octets.
    fn step(&mut self, events: &mut Vec<Event>) -> bool {
        let input = &self.buf[self.fed..];
        match self.rx.next() {
            Next::Failed => {
                self.state = State::Stopped;
                false
            }
            Next::Payload { run, .. } => {
                let n = run.min(input.len());
                if n == 0 {
                    return false;
                }
                let bytes = &input[..n];
                if let Err(e) = self.rx.push_payload(bytes) {
                    self.error(e, events);
                    return true;
                }
                let keep = HEAD.saturating_sub(self.head.len()).min(n);
                self.head.extend_from_slice(&bytes[..keep]);
                self.fed += n;
                true
            }
            Next::Framing => {
                if input.is_empty() {
                    return false;
                }
                if self.rx.at_boundary() && self.fed > 0 {
                    // Keep only the FPDU now starting.
                    self.buf.drain(..self.fed);
                    self.buf_offset += self.fed as u64;
                    self.fed = 0;
                }
                let before = self.rx.offset();
                match self.rx.push_framing(&self.buf[self.fed..]) {
                    Ok((n, event)) => {
                        self.fed += n;
                        self.framing_event(event, events);
                    }
                    Err(e) => {
                        self.fed += usize::try_from(self.rx.offset() - before).unwrap_or(0);
                        self.error(e, events);
                    }
                }
                true
            }
        }
    }

    /// The CRC field of the FPDU that just ended: its last four octets.
    fn crc_field(&self) -> u32 {
        let end = &self.buf[..self.fed];
        match end.len().checked_sub(fpdu::CRC_LEN).map(|at| &end[at..]) {
            Some([a, b, c, d]) => crc::from_wire([*a, *b, *c, *d]),
            _ => 0,
        }
    }

    fn error(&mut self, e: MpaError, events: &mut Vec<Event>) {
        match e {
            MpaError::Crc {
                computed, received, ..
            } => {
                if self.crc == CrcMode::Auto && self.pdus == 0 && received != 0 {
                    // No startup was seen and the first octets are not an
                    // FPDU with a valid CRC: the capture began inside one.
                    events.push(Event::Note(Note::NotAtBoundary));
                    self.state = State::Hunt {
                        from: self.buf_offset + 1,
                        lost_at: self.buf_offset,
                        tried: 0,
                    };
                    self.fed = 0;
                    return;
                }
                let (crc, error) = if self.crc == CrcMode::Auto && self.pdus == 0 {
                    // A zero CRC field on the first FPDU: the sender does
                    // not compute CRCs (what siw sends when CRC is off).
                    self.crc = CrcMode::Off;
                    events.push(Event::Note(Note::CrcDetectedOff));
                    (
                        CrcInfo {
                            status: CrcStatus::Off,
                            received: Some(0),
                            computed: None,
                        },
                        None,
                    )
                } else {
                    if self.crc == CrcMode::Auto {
                        self.crc = CrcMode::On;
                    }
                    (
                        CrcInfo {
                            status: CrcStatus::Bad,
                            received: Some(received),
                            computed: Some(computed),
                        },
                        Some(PduError::Crc { computed, received }),
                    )
                };
                self.report(crc, error, events);
                // The length still delimits the FPDU: go on after it.
                let offset = self.rx.offset();
                self.rx = FpduReceiver::at_offset(Self::params(self.markers, self.crc), offset);
            }
            MpaError::Marker {
                marker_offset,
                expected,
                found,
            } => {
                events.push(Event::Note(Note::MarkerMismatch {
                    marker: marker_offset,
                    found,
                    expected,
                    fpdu: self.buf_offset,
                }));
                let from = marker_offset + MARKER_LEN as u64;
                self.state = State::Resync {
                    from,
                    lost_at: self.buf_offset,
                };
            }
        }
    }

    /// Reports the FPDU just ended (its octets are `buf[..fed]`, or were
    /// passed straight through).
    fn report(&mut self, crc: CrcInfo, error: Option<PduError>, events: &mut Vec<Event>) {
        self.pdus += 1;
        let (wire_len, _) = self.raw();
        let raw = &self.buf[..self.fed];
        let markers = if self.markers {
            MarkerInfo::list(
                raw,
                self.buf_offset,
                INTERVAL.next_marker_at(self.buf_offset),
                u64::from(INTERVAL.get()),
                |m| u32::from(marker::decode(m)),
            )
        } else {
            Vec::new()
        };
        // A header damaged in transit shows as the CRC error it is, first;
        // its own complaints are noise then (as in the stack, see
        // `iwarp_proto::framing`), but still worth a look.
        let mut errors: Vec<PduError> = error.into_iter().collect();
        let interpreted = interpret(&self.head, self.ulpdu_len, true, &mut errors);
        events.push(Event::Pdu(PduInfo {
            framing: FramingKind::Mpa,
            offset: self.buf_offset,
            wire_len: wire_len as u64,
            ulpdu_len: self.ulpdu_len,
            crc,
            header_crc: None,
            vtag: None,
            markers,
            segment: interpreted.segment,
            rdma: true,
            payload_len: interpreted.payload_len,
            payload: interpreted.payload,
            errors,
        }));
        self.head.clear();
    }

    /// Hunts for an FPDU boundary at or after `from` by its CRC
    /// ([`crate::hunt`]); true once decoding can go on.
    fn hunt(&mut self, from: u64, lost_at: u64, mut tried: u64, events: &mut Vec<Event>) -> bool {
        let mut at = from.max(self.buf_offset);
        loop {
            let i = usize::try_from(at - self.buf_offset).unwrap_or(usize::MAX);
            let Some(rest) = self.buf.get(i..) else {
                self.wait_hunting(at, lost_at, tried);
                return false;
            };
            match boundary_at(rest, self.at_end) {
                Verdict::NeedMore => {
                    self.wait_hunting(at, lost_at, tried);
                    return false;
                }
                Verdict::NotFpdu => {
                    at += 1;
                    tried += 1;
                }
                Verdict::Fpdu(_) => {
                    self.buf.drain(..i);
                    self.buf_offset = at;
                    self.fed = 0;
                    self.head.clear();
                    if self.crc == CrcMode::Auto {
                        self.crc = CrcMode::On;
                    }
                    self.rx = FpduReceiver::at_offset(Self::params(self.markers, self.crc), at);
                    self.state = State::Running;
                    events.push(Event::Resync(ResyncInfo {
                        framing: FramingKind::Mpa,
                        offset: at,
                        skipped: at.saturating_sub(lost_at),
                        method: ResyncMethod::Crc {
                            candidates: tried + 1,
                        },
                    }));
                    return true;
                }
            }
        }
    }

    /// Keeps only the octets from `at` on while the hunt waits for more.
    fn wait_hunting(&mut self, at: u64, lost_at: u64, tried: u64) {
        let drop = usize::try_from(at - self.buf_offset).unwrap_or(usize::MAX);
        self.buf.drain(..drop.min(self.buf.len()));
        self.buf_offset = at;
        self.state = State::Hunt {
            from: at,
            lost_at,
            tried,
        };
    }

    /// Looks for an FPDU boundary at or after `from` using the markers;
    /// true once decoding can go on (found, or stopped).
    fn resync(&mut self, from: u64, lost_at: u64, events: &mut Vec<Event>) -> bool {
        let mut from = from.max(self.buf_offset);
        let end = self.buf_offset + self.buf.len() as u64;
        loop {
            let at = INTERVAL.next_marker_at(from);
            if at + MARKER_LEN as u64 > end {
                // Not there yet: keep what a later marker may point back to.
                let keep_from = at.saturating_sub(RESYNC_LOOKBACK).max(self.buf_offset);
                let drop = usize::try_from(keep_from - self.buf_offset).unwrap_or(0);
                self.buf.drain(..drop.min(self.buf.len()));
                self.buf_offset = keep_from;
                self.state = State::Resync { from, lost_at };
                return false;
            }
            let i = usize::try_from(at - self.buf_offset).unwrap_or(usize::MAX);
            let Some(&[a, b, c, d]) = self.buf.get(i..i + MARKER_LEN) else {
                self.state = State::Stopped;
                return true;
            };
            // The two low bits are reserved (draft-ietf-rddp-mpa-01 §5.1).
            let ptr = u64::from(marker::decode([a, b, c, d]) & !3);
            // Where the FPDU starts, as the out-of-order receive path reads
            // the marker (its leading marker, if it has one, included).
            let framing = MpaFraming {
                params: Self::params(self.markers, self.crc),
                placement: Placement::Verified,
            };
            let start = framing.marker_points_to(at, [a, b, c, d]);
            match start {
                Some(start) if start >= from => {
                    let skip = usize::try_from(start - self.buf_offset).unwrap_or(0);
                    self.buf.drain(..skip.min(self.buf.len()));
                    self.buf_offset = start;
                    self.fed = 0;
                    self.head.clear();
                    self.rx = FpduReceiver::at_offset(Self::params(self.markers, self.crc), start);
                    self.state = State::Running;
                    events.push(Event::Resync(ResyncInfo {
                        framing: FramingKind::Mpa,
                        offset: start,
                        skipped: start.saturating_sub(lost_at),
                        method: ResyncMethod::Marker {
                            marker: at,
                            pointer: ptr as u16,
                        },
                    }));
                    return true;
                }
                // That FPDU began in what was lost: try the next marker.
                _ => from = at + MARKER_LEN as u64,
            }
        }
    }
}
