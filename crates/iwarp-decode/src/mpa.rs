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
//! - **Octets missing from the capture**: with markers, resynchronise;
//!   without, stop (there is nothing in an MPA stream without markers that
//!   says where an FPDU begins).
//!
//! Resynchronising (draft-ietf-rddp-mpa-01 §5.1, the reason markers exist):
//! at each marker position after the damage, the FPDUPTR points back to
//! the ULPDU_Length field of the FPDU the marker sits in, or is 0 when the
//! marker opens an FPDU. The first marker whose FPDU starts at or after the
//! damage gives a new FPDU boundary, where a fresh receiver starts.

use iwarp_proto::mpa::{
    crc, fpdu, marker, FpduReceiver, FramingEvent, FramingParams, MpaError, Next,
};

use super::event::{
    crc_value, CrcInfo, CrcStatus, Event, GapInfo, Level, MarkerInfo, NoteInfo, PduInfo, ResyncInfo,
};
use super::ulpdu::{interpret, HEAD};

/// How this direction treats the CRC field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrcMode {
    /// Negotiated on: checked.
    On,
    /// Negotiated off: the field is there and means nothing.
    Off,
    /// On the wire but not checked (`--no-crc-check`).
    Unchecked,
    /// Not known (no startup seen): checked; if the first FPDU fails with
    /// a zero CRC field, CRC is taken as off from then on.
    Auto,
}

impl CrcMode {
    /// The word for it in reports.
    pub fn word(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Unchecked => "unchecked",
            Self::Auto => "auto",
        }
    }

    fn checks(self) -> bool {
        matches!(self, Self::On | Self::Auto)
    }
}

/// Most octets kept while searching for a marker to resynchronise on:
/// an FPDUPTR reaches at most 65535 octets back.
const RESYNC_LOOKBACK: u64 = 65536 + 2 * marker::MARKER_INTERVAL;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Deframing.
    Running,
    /// Looking for an FPDU boundary at or after this stream offset.
    Resync { from: u64, lost_at: u64 },
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
        }
    }

    fn params(markers: bool, crc: CrcMode) -> FramingParams {
        FramingParams {
            crc: crc.checks(),
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
        self.buf.extend_from_slice(data);
        self.run(events);
    }

    /// `missing` octets were not captured here.
    pub fn gap(&mut self, tcp_offset: u64, missing: u64, events: &mut Vec<Event>) {
        let end = self.buf_offset + self.buf.len() as u64;
        match self.state {
            State::Stopped => {}
            _ if !self.markers => {
                events.push(Event::Gap(GapInfo {
                    offset: tcp_offset,
                    octets: missing,
                    action: "stop",
                }));
                events.push(note(
                    Level::Error,
                    format!(
                        "{missing} octets missing from the capture at stream offset {end}: \
                         without markers nothing says where the next FPDU starts, \
                         so decoding of this direction stops"
                    ),
                ));
                self.state = State::Stopped;
            }
            State::Running | State::Resync { .. } => {
                events.push(Event::Gap(GapInfo {
                    offset: tcp_offset,
                    octets: missing,
                    action: "resync",
                }));
                if let State::Running = self.state {
                    if !self.rx.at_fpdu_boundary() || self.fed < self.buf.len() {
                        events.push(note(
                            Level::Warning,
                            format!(
                                "the FPDU at stream offset {} is incomplete: \
                                 octets from {end} on were not captured",
                                self.buf_offset
                            ),
                        ));
                    }
                }
                let lost_at = match self.state {
                    State::Resync { lost_at, .. } => lost_at,
                    _ => end,
                };
                let after = end + missing;
                self.state = State::Resync {
                    from: after,
                    lost_at,
                };
                self.buf.clear();
                self.buf_offset = after;
                self.fed = 0;
            }
        }
    }

    /// The end of the capture.
    pub fn finish(&mut self, events: &mut Vec<Event>) {
        match self.state {
            State::Running if self.fed < self.buf.len() || !self.rx.at_fpdu_boundary() => {
                events.push(note(
                    Level::Warning,
                    format!(
                        "the capture ends inside the FPDU at stream offset {} \
                         ({} octets of it captured)",
                        self.buf_offset,
                        self.buf.len()
                    ),
                ));
            }
            State::Resync { lost_at, .. } => events.push(note(
                Level::Warning,
                format!(
                    "the capture ends before framing was found again after stream offset {lost_at}"
                ),
            )),
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
            Next::Ulpdu { run, .. } => {
                let n = run.min(input.len());
                if n == 0 {
                    return false;
                }
                let bytes = &input[..n];
                if let Err(e) = self.rx.push_ulpdu(bytes) {
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
                if self.rx.at_fpdu_boundary() && self.fed > 0 {
                    // Keep only the FPDU now starting.
                    self.buf.drain(..self.fed);
                    self.buf_offset += self.fed as u64;
                    self.fed = 0;
                }
                let before = self.rx.offset();
                match self.rx.push_framing(&self.buf[self.fed..]) {
                    Ok((n, event)) => {
                        self.fed += n;
                        match event {
                            Some(FramingEvent::UlpduBegin(len)) => {
                                self.ulpdu_len = len;
                                self.head.clear();
                            }
                            Some(FramingEvent::UlpduEnd) => {
                                let status = match self.crc {
                                    CrcMode::On => CrcStatus::Ok,
                                    CrcMode::Off => CrcStatus::Off,
                                    CrcMode::Unchecked => CrcStatus::Unchecked,
                                    CrcMode::Auto => {
                                        self.crc = CrcMode::On;
                                        events.push(note(
                                            Level::Info,
                                            "the first FPDU's CRC is correct: CRC is in use".into(),
                                        ));
                                        CrcStatus::Ok
                                    }
                                };
                                let crc = CrcInfo {
                                    status,
                                    received: Some(crc_value(self.crc_field())),
                                    computed: None,
                                };
                                self.report(crc, Vec::new(), events);
                            }
                            None => {}
                        }
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
                let crc = if self.crc == CrcMode::Auto && self.pdus == 0 && received == 0 {
                    // A zero CRC field on the first FPDU: the sender does
                    // not compute CRCs (what siw sends when CRC is off).
                    self.crc = CrcMode::Off;
                    events.push(note(
                        Level::Info,
                        "the first FPDU's CRC field is zero: CRC taken as not in use".into(),
                    ));
                    CrcInfo {
                        status: CrcStatus::Off,
                        received: Some(crc_value(0)),
                        computed: None,
                    }
                } else {
                    if self.crc == CrcMode::Auto {
                        self.crc = CrcMode::On;
                    }
                    CrcInfo {
                        status: CrcStatus::Bad,
                        received: Some(crc_value(received)),
                        computed: Some(crc_value(computed)),
                    }
                };
                let errors = if crc.status == CrcStatus::Bad {
                    vec![format!(
                        "CRC error: computed {computed:#010x}, received {received:#010x}"
                    )]
                } else {
                    Vec::new()
                };
                self.report(crc, errors, events);
                // The length still delimits the FPDU: go on after it.
                let offset = self.rx.offset();
                self.rx = FpduReceiver::at_offset(Self::params(self.markers, self.crc), offset);
            }
            MpaError::Marker {
                marker_offset,
                expected,
                found,
            } => {
                events.push(note(
                    Level::Error,
                    format!(
                        "marker at stream offset {marker_offset} has FPDUPTR {found:#06x}, but \
                         the FPDU at stream offset {} puts it at {expected:#06x}: framing lost, \
                         looking for the next marker",
                        self.buf_offset
                    ),
                ));
                let from = marker_offset + marker::MARKER_LEN as u64;
                self.state = State::Resync {
                    from,
                    lost_at: self.buf_offset,
                };
            }
        }
    }

    /// Reports the FPDU that occupies `buf[..fed]`.
    fn report(&mut self, crc: CrcInfo, mut errors: Vec<String>, events: &mut Vec<Event>) {
        self.pdus += 1;
        let raw = &self.buf[..self.fed];
        let mut markers = Vec::new();
        if self.markers {
            let start = self.buf_offset;
            let mut at = marker::next_marker_at(start);
            while at + marker::MARKER_LEN as u64 <= start + raw.len() as u64 {
                let i = (at - start) as usize;
                if let Some(&[a, b, c, d]) = raw.get(i..i + marker::MARKER_LEN) {
                    markers.push(MarkerInfo {
                        offset: at,
                        pointer: u32::from(marker::decode([a, b, c, d])),
                    });
                }
                at += marker::MARKER_INTERVAL;
            }
        }
        let interpreted = interpret(&self.head, self.ulpdu_len, true);
        // A header damaged in transit shows as the CRC error it is; its
        // own complaints are noise then (as in the stack, see
        // `iwarp_proto::framing`), but still worth a look.
        errors.extend(interpreted.errors);
        events.push(Event::Pdu(Box::new(PduInfo {
            framing: "mpa",
            offset: self.buf_offset,
            wire_len: raw.len() as u64,
            ulpdu_len: self.ulpdu_len,
            crc,
            header_crc: None,
            vtag: None,
            markers,
            ddp: interpreted.ddp,
            rdmap: interpreted.rdmap,
            payload_len: interpreted.payload_len,
            payload: interpreted.payload,
            errors,
        })));
        self.head.clear();
    }

    /// Looks for an FPDU boundary at or after `from` using the markers;
    /// true once decoding can go on (found, or stopped).
    fn resync(&mut self, from: u64, lost_at: u64, events: &mut Vec<Event>) -> bool {
        let mut from = from.max(self.buf_offset);
        let end = self.buf_offset + self.buf.len() as u64;
        loop {
            let at = marker::next_marker_at(from);
            if at + marker::MARKER_LEN as u64 > end {
                // Not there yet: keep what a later marker may point back to.
                let keep_from = at.saturating_sub(RESYNC_LOOKBACK).max(self.buf_offset);
                let drop = usize::try_from(keep_from - self.buf_offset).unwrap_or(0);
                self.buf.drain(..drop.min(self.buf.len()));
                self.buf_offset = keep_from;
                self.state = State::Resync { from, lost_at };
                return false;
            }
            let i = usize::try_from(at - self.buf_offset).unwrap_or(usize::MAX);
            let Some(&[a, b, c, d]) = self.buf.get(i..i + marker::MARKER_LEN) else {
                self.state = State::Stopped;
                return true;
            };
            // The two low bits are reserved (draft-ietf-rddp-mpa-01 §5.1).
            let ptr = u64::from(marker::decode([a, b, c, d]) & !3);
            let start = if ptr == 0 {
                // The marker opens an FPDU.
                Some(at)
            } else {
                at.checked_sub(ptr).map(|header| {
                    // An FPDU that begins with a marker starts at it.
                    match header.checked_sub(marker::MARKER_LEN as u64) {
                        Some(m) if marker::is_marker_at(m) => m,
                        _ => header,
                    }
                })
            };
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
                        offset: start,
                        skipped: start.saturating_sub(lost_at),
                        method: format!("marker at stream offset {at} (FPDUPTR {ptr:#06x})"),
                    }));
                    return true;
                }
                // That FPDU began in what was lost: try the next marker.
                _ => from = at + marker::MARKER_LEN as u64,
            }
        }
    }
}

fn note(level: Level, message: String) -> Event {
    Event::Note(NoteInfo { level, message })
}
