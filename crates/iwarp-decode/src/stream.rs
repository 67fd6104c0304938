//! One direction of a connection, from its first octet: the opening (an
//! MPA startup frame, an IFT indication, or neither), then the framed PDUs.
//!
//! A direction cannot always decode its FPDUs as soon as they arrive: the
//! framing it uses (CRC, markers, IFT's VTag) depends on what the *other*
//! direction sent in its startup. So after its opening a direction holds
//! what follows ([`Status::Held`]) until its connection
//! ([`crate::connection`]) has seen both openings and tells it how to
//! deframe ([`DirectionDecoder::start_mpa`], [`DirectionDecoder::start_ift`])
//! or that it will not ([`DirectionDecoder::stop`]).

use iwarp_proto::ift::RxParams;

use crate::ahead::Ahead;
use crate::event::{Basis, Event, FramingInfo, FramingKind, GapAction, GapInfo};
use crate::ift::{crc_use, IftDirection};
use crate::mpa::{CrcMode, MpaDirection};
use crate::note::Note;
use crate::startup::{indication, mpa_frame, opening, Opening, Seen};

/// Where a direction's framing settings come from, and what the startup
/// said about Reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provenance {
    /// The startup, or its absence.
    pub basis: Basis,
    /// CRC checking turned off by the options.
    pub crc_overridden: bool,
    /// Markers forced on or off by the options.
    pub markers_overridden: Option<bool>,
    /// The most Read Requests the sender may have outstanding.
    pub max_reads: Option<u16>,
}

/// Most octets held while the framing is not settled; beyond this the
/// direction gives up (the other direction's startup is not coming).
const MAX_HELD: usize = 64 << 20;

/// Where a direction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Reading its first octets.
    Opening,
    /// Its opening is known (a startup, `Some`, or none, `None`) and what
    /// follows is held until the framing is settled.
    Held(Option<Seen>),
    /// Deframing.
    Framing,
    /// Not decoding.
    Stopped,
}

#[derive(Debug, Clone)]
enum Phase {
    Opening,
    Held(Option<Seen>),
    Mpa(Box<MpaDirection>),
    Ift(Box<IftDirection>),
    Stopped,
}

/// Decodes one direction of a connection.
#[derive(Debug, Clone)]
pub struct DirectionDecoder {
    phase: Phase,
    /// Octets not yet given to a deframer: the opening, or what is held.
    buf: Vec<u8>,
    /// TCP stream offset of `buf[0]`.
    buf_offset: u64,
    /// Octets still to skip before the first FPDU (`--stream-offset`).
    skip: u64,
    /// The placement view, once framing has started.
    ahead: Option<Box<Ahead>>,
}

impl Default for DirectionDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl DirectionDecoder {
    /// A direction with nothing seen.
    pub fn new() -> Self {
        Self {
            phase: Phase::Opening,
            buf: Vec::new(),
            buf_offset: 0,
            skip: 0,
            ahead: None,
        }
    }

    /// Where it is.
    pub fn status(&self) -> Status {
        match &self.phase {
            Phase::Opening => Status::Opening,
            Phase::Held(seen) => Status::Held(*seen),
            Phase::Mpa(d) if d.stopped() => Status::Stopped,
            Phase::Mpa(_) | Phase::Ift(_) => Status::Framing,
            Phase::Stopped => Status::Stopped,
        }
    }

    /// The first octets held (for messages about an unexpected opening).
    pub fn held_prefix(&self) -> &[u8] {
        &self.buf[..self.buf.len().min(16)]
    }

    /// The next octets of the direction.
    pub fn push(&mut self, data: &[u8], events: &mut Vec<Event>) {
        match &mut self.phase {
            Phase::Opening => {
                self.buf.extend_from_slice(data);
                self.read_opening(events);
            }
            Phase::Held(_) => {
                self.buf.extend_from_slice(data);
                if self.buf.len() > MAX_HELD {
                    events.push(Event::Note(Note::NeverSettled(self.buf.len())));
                    self.stop();
                }
            }
            Phase::Mpa(_) | Phase::Ift(_) => {
                // Here `buf` is empty and `buf_offset` follows the stream.
                self.buf_offset += data.len() as u64;
                if let Some(a) = &mut self.ahead {
                    a.delivered(self.buf_offset);
                }
                let data = self.skip_some(data);
                match &mut self.phase {
                    Phase::Mpa(d) => d.push(data, events),
                    Phase::Ift(d) => d.push(data, events),
                    _ => {}
                }
            }
            Phase::Stopped => self.buf_offset += data.len() as u64,
        }
    }

    /// Drops what `--stream-offset` says to skip from the front of `data`.
    fn skip_some<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        let n = usize::try_from(self.skip)
            .unwrap_or(usize::MAX)
            .min(data.len());
        self.skip -= n as u64;
        &data[n..]
    }

    fn read_opening(&mut self, events: &mut Vec<Event>) {
        let seen = match opening(&self.buf) {
            Opening::Unknown => return,
            Opening::Neither => None,
            Opening::Mpa => {
                let Some((info, len, frame)) = mpa_frame(&self.buf, self.buf_offset) else {
                    return;
                };
                events.push(Event::MpaStartup(info));
                self.consume(len);
                Some(frame.map_or(Seen::Invalid, Seen::Mpa))
            }
            Opening::Ift => {
                let Some((info, ind)) = indication(&self.buf, self.buf_offset) else {
                    return;
                };
                events.push(Event::IftIndication(info));
                self.consume(iwarp_proto::ift::indication::INDICATION_LEN);
                Some(ind.map_or(Seen::Invalid, Seen::Ift))
            }
        };
        self.phase = Phase::Held(seen);
    }

    fn consume(&mut self, len: usize) {
        let len = len.min(self.buf.len());
        self.buf.drain(..len);
        self.buf_offset += len as u64;
    }

    /// A segment whose payload starts at TCP stream offset `start`, beyond
    /// `delivered`, the first octet the reassembly still waits for: the
    /// placement view reports what it makes whole.
    pub fn ahead(&mut self, start: u64, payload: &[u8], delivered: u64, events: &mut Vec<Event>) {
        if let (Phase::Mpa(_) | Phase::Ift(_), Some(a)) = (&self.phase, &mut self.ahead) {
            a.segment(start, payload, delivered, events);
        }
    }

    /// `missing` octets of this direction were not captured.
    pub fn gap(&mut self, missing: u64, events: &mut Vec<Event>) {
        let tcp_offset = self.buf_offset + self.buf.len() as u64;
        if matches!(self.phase, Phase::Mpa(_) | Phase::Ift(_) | Phase::Stopped) {
            self.buf_offset += missing;
        }
        // The PDU right after the hole, if the placement view found it.
        let found = self
            .ahead
            .as_ref()
            .is_some_and(|a| a.pdu_at(tcp_offset + missing));
        if let Some(a) = &mut self.ahead {
            a.delivered(tcp_offset + missing);
        }
        match &mut self.phase {
            Phase::Mpa(d) => d.gap(tcp_offset, missing, found, events),
            Phase::Ift(d) => d.gap(tcp_offset, missing, found, events),
            Phase::Stopped => {
                events.push(Event::Gap(GapInfo {
                    offset: tcp_offset,
                    octets: missing,
                    action: GapAction::None,
                }));
            }
            Phase::Opening | Phase::Held(_) => {
                events.push(Event::Gap(GapInfo {
                    offset: tcp_offset,
                    octets: missing,
                    action: GapAction::Stop,
                }));
                events.push(Event::Note(Note::GapBeforeFraming(missing)));
                self.stop();
            }
        }
    }

    /// Starts deframing MPA FPDUs from the held octets on. `skip` octets
    /// are skipped first (where FPDUs are taken to start when no startup
    /// was seen).
    pub fn start_mpa(
        &mut self,
        markers: bool,
        crc: CrcMode,
        skip: u64,
        how: Provenance,
        events: &mut Vec<Event>,
    ) {
        if !matches!(self.phase, Phase::Held(_)) {
            return;
        }
        self.skip = skip;
        events.push(Event::Framing(FramingInfo {
            framing: FramingKind::Mpa,
            start: self.buf_offset + skip,
            crc,
            header_crc: None,
            markers: markers.then_some(iwarp_proto::mpa::marker::INTERVAL.get()),
            vtag: None,
            max_reads: how.max_reads,
            basis: how.basis,
            crc_overridden: how.crc_overridden,
            markers_overridden: how.markers_overridden,
        }));
        self.phase = Phase::Mpa(Box::new(MpaDirection::new(markers, crc)));
        let checked = matches!(crc, CrcMode::On | CrcMode::Auto);
        self.ahead = Some(Box::new(Ahead::mpa(
            markers,
            checked,
            self.buf_offset + skip,
        )));
        self.release(events);
    }

    /// Starts deframing IFT frames from the held octets on.
    pub fn start_ift(
        &mut self,
        params: RxParams,
        rdma: bool,
        how: Provenance,
        events: &mut Vec<Event>,
    ) {
        if !matches!(self.phase, Phase::Held(_)) {
            return;
        }
        events.push(Event::Framing(FramingInfo {
            framing: FramingKind::Ift,
            start: self.buf_offset,
            crc: crc_use(params.payload_crc),
            header_crc: Some(crc_use(params.header_crc)),
            markers: params.markers.map(|m| m.get()),
            vtag: Some(params.vtag),
            max_reads: how.max_reads,
            basis: how.basis,
            crc_overridden: how.crc_overridden,
            markers_overridden: how.markers_overridden,
        }));
        self.phase = Phase::Ift(Box::new(IftDirection::new(params, rdma)));
        self.ahead = Some(Box::new(Ahead::ift(params, rdma, self.buf_offset)));
        self.release(events);
    }

    /// Hands the held octets to the deframer just started.
    fn release(&mut self, events: &mut Vec<Event>) {
        let held = std::mem::take(&mut self.buf);
        self.push(&held, events);
    }

    /// Stops decoding this direction.
    pub fn stop(&mut self) {
        self.buf_offset += self.buf.len() as u64;
        self.buf = Vec::new();
        self.phase = Phase::Stopped;
        self.ahead = None;
    }

    /// The end of the capture.
    pub fn finish(&mut self, events: &mut Vec<Event>) {
        match &mut self.phase {
            Phase::Opening if !self.buf.is_empty() => {
                events.push(Event::Note(Note::ShortOpening(self.buf.len())))
            }
            Phase::Mpa(d) => d.finish(events),
            Phase::Ift(d) => d.finish(events),
            _ => {}
        }
        self.stop();
    }
}
