//! One direction's IFT frames, deframed by the stack's own [`IftReceiver`].
//!
//! As for MPA (see [`super::mpa`]), the receiver is driven step by step so
//! that each frame's place in the stream is known. A payload CRC error
//! leaves the framing intact (the header, already verified, gave the
//! length), so decoding goes on with a fresh receiver after the frame. A
//! header CRC, VTag or header-size error or a marker error means the frame
//! boundaries can no longer be trusted, and decoding of the direction
//! stops: IFT's markers are a draft's "TBD" and its VTag only confirms a
//! boundary, so no resynchronisation is attempted. After a gap, decoding
//! goes on only where the placement view ([`crate::ahead`]) found a whole
//! frame, its header CRC and VTag checked, right after the hole.

use iwarp_proto::ddp::header::header_len;
use iwarp_proto::framing::{Deframer, FramingEvent, Next};
use iwarp_proto::ift::{marker, IftReceiver, IftRxError, RxCrc, RxParams};

use crate::event::{
    CrcInfo, CrcStatus, CrcUse, Event, FramingKind, GapAction, GapInfo, MarkerInfo, PduError,
    PduInfo, ResyncInfo, ResyncMethod,
};
use crate::note::Note;
use crate::ulpdu::{interpret, HEAD};

/// Deframes and reports one direction's IFT frames.
#[derive(Debug, Clone)]
pub struct IftDirection {
    params: RxParams,
    rdma: bool,
    rx: IftReceiver,
    stopped: bool,
    /// Raw octets from the start of the current frame.
    buf: Vec<u8>,
    /// Stream offset of `buf[0]`.
    buf_offset: u64,
    /// Octets of `buf` given to the receiver.
    fed: usize,
    header_len: usize,
    payload_len: usize,
    head: Vec<u8>,
}

/// How a CRC field is handled.
pub fn crc_use(crc: RxCrc) -> CrcUse {
    match crc {
        RxCrc::Absent => CrcUse::Off,
        RxCrc::Ignored => CrcUse::Unchecked,
        RxCrc::Checked => CrcUse::On,
    }
}

fn status(crc: RxCrc) -> CrcStatus {
    match crc {
        RxCrc::Absent => CrcStatus::Off,
        RxCrc::Ignored => CrcStatus::Unchecked,
        RxCrc::Checked => CrcStatus::Ok,
    }
}

impl IftDirection {
    /// A direction whose frames start at stream offset 0. `rdma`: RDMAP
    /// runs over DDP (IFT's R flag).
    pub fn new(params: RxParams, rdma: bool) -> Self {
        Self {
            params,
            rdma,
            rx: IftReceiver::new(params),
            stopped: false,
            buf: Vec::new(),
            buf_offset: 0,
            fed: 0,
            header_len: 0,
            payload_len: 0,
            head: Vec::new(),
        }
    }

    /// The next octets of the stream.
    pub fn push(&mut self, data: &[u8], events: &mut Vec<Event>) {
        if self.stopped {
            return;
        }
        self.buf.extend_from_slice(data);
        while !self.stopped && self.step(events) {}
    }

    /// `missing` octets were not captured here. `found_ahead`: the
    /// placement view found a whole, valid frame right after them, where
    /// decoding goes on; otherwise it stops.
    pub fn gap(
        &mut self,
        tcp_offset: u64,
        missing: u64,
        found_ahead: bool,
        events: &mut Vec<Event>,
    ) {
        if self.stopped {
            return;
        }
        events.push(Event::Gap(GapInfo {
            offset: tcp_offset,
            octets: missing,
            action: if found_ahead {
                GapAction::Ahead
            } else {
                GapAction::Stop
            },
        }));
        if !found_ahead {
            events.push(Event::Note(Note::IftGap(missing)));
            self.stopped = true;
            return;
        }
        let end = self.buf_offset + self.buf.len() as u64;
        if self.fed < self.buf.len() || !self.rx.at_boundary() {
            events.push(Event::Note(Note::CutByGap {
                framing: "frame",
                start: self.buf_offset,
                at: end,
            }));
        }
        let from = end + missing;
        // From the start of the frame the hole cut (or the hole itself).
        let lost_at = self.buf_offset;
        self.rx = IftReceiver::at_offset(self.params, from);
        self.buf.clear();
        self.buf_offset = from;
        self.fed = 0;
        self.head.clear();
        events.push(Event::Resync(ResyncInfo {
            framing: FramingKind::Ift,
            offset: from,
            skipped: from - lost_at,
            method: ResyncMethod::Ahead,
        }));
    }

    /// The end of the capture.
    pub fn finish(&mut self, events: &mut Vec<Event>) {
        if !self.stopped && (self.fed < self.buf.len() || !self.rx.at_boundary()) {
            events.push(Event::Note(Note::EndsInside {
                framing: "frame",
                start: self.buf_offset,
                captured: self.buf.len(),
            }));
        }
        self.stopped = true;
    }

    /// One step of the receiver; false when it needs more octets.
    fn step(&mut self, events: &mut Vec<Event>) -> bool {
        match self.rx.next() {
            Next::Failed => {
                self.stopped = true;
                false
            }
            Next::Payload { run, .. } => {
                let input = &self.buf[self.fed..];
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
                if self.rx.at_boundary() && self.fed > 0 {
                    self.buf.drain(..self.fed);
                    self.buf_offset += self.fed as u64;
                    self.fed = 0;
                }
                let before = self.rx.offset();
                // Called even with no input: a finished frame's End is
                // reported by the next call.
                match self.rx.push_framing(&self.buf[self.fed..]) {
                    Ok((0, None)) => false,
                    Ok((n, event)) => {
                        self.fed += n;
                        match event {
                            Some(FramingEvent::Begin {
                                header_len,
                                payload_len,
                            }) => {
                                self.header_len = header_len;
                                self.payload_len = payload_len;
                                self.head.clear();
                                self.head.extend_from_slice(self.rx.header());
                            }
                            Some(FramingEvent::End) => self.report(
                                CrcInfo::status(status(self.params.payload_crc)),
                                None,
                                events,
                            ),
                            None => {}
                        }
                        true
                    }
                    Err(e) => {
                        self.fed += usize::try_from(self.rx.offset() - before).unwrap_or(0);
                        self.error(e, events);
                        true
                    }
                }
            }
        }
    }

    fn error(&mut self, e: IftRxError, events: &mut Vec<Event>) {
        match e {
            IftRxError::PayloadCrc {
                computed, received, ..
            } => {
                self.report(
                    CrcInfo {
                        status: CrcStatus::Bad,
                        received: Some(received),
                        computed: Some(computed),
                    },
                    Some(PduError::PayloadCrc { computed, received }),
                    events,
                );
                // The verified header gave the length: go on after it.
                self.rx = IftReceiver::at_offset(self.params, self.rx.offset());
                // The next frame starts where this one ended.
                self.buf.drain(..self.fed.min(self.buf.len()));
                self.buf_offset = self.rx.offset();
                self.fed = 0;
            }
            other => {
                events.push(Event::Note(Note::IftFramingLost(other)));
                self.stopped = true;
            }
        }
    }

    /// Reports the frame that occupies `buf[..fed]`.
    fn report(&mut self, crc: CrcInfo, error: Option<PduError>, events: &mut Vec<Event>) {
        let raw = &self.buf[..self.fed];
        let markers = match self.params.markers {
            Some(interval) => MarkerInfo::list(
                raw,
                self.buf_offset,
                interval.next_marker_at(self.buf_offset),
                u64::from(interval.get()),
                marker::decode,
            ),
            None => Vec::new(),
        };
        let ulpdu_len = self.header_len + self.payload_len;
        let mut errors: Vec<PduError> = error.into_iter().collect();
        let interpreted = interpret(&self.head, ulpdu_len, self.rdma, &mut errors);
        // The frame's header_size delimits the DDP header; it must be the
        // length the header's own T flag gives (draft-williams-iwarp-ift-01
        // §5.1: header_size covers the DDP header).
        if let Some(&control) = self.head.first() {
            let ddp_len = header_len(control);
            if self.header_len != ddp_len {
                errors.push(PduError::HeaderSize {
                    header_size: self.header_len,
                    ddp: ddp_len,
                });
            }
        }
        events.push(Event::Pdu(PduInfo {
            framing: FramingKind::Ift,
            offset: self.buf_offset,
            wire_len: raw.len() as u64,
            ulpdu_len,
            crc,
            header_crc: Some(CrcInfo::status(status(self.params.header_crc))),
            vtag: Some(self.params.vtag),
            markers,
            segment: interpreted.segment,
            rdma: self.rdma,
            payload_len: interpreted.payload_len,
            payload: interpreted.payload,
            errors,
        }));
        self.head.clear();
    }
}
