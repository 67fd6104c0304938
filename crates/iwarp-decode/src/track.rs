//! Per connection, the messages behind the PDUs: the state the stateful
//! checks ([`crate::checks`]) and the operations ([`crate::ops`]) need.
//!
//! Each direction keeps, per untagged queue, the next MSN and the message
//! under way; the RDMA Write under way; the Read Requests it sent that the
//! other direction has not yet answered; a short history of the PDUs it
//! sent (for the Terminate checks); and whether it sent a Terminate. A
//! hole in the capture drops what a direction expected (nothing is known
//! across it) and makes unmatched Read Responses tolerated until one
//! matches again, so that a lossy capture is not reported as a lossy peer.

use std::collections::VecDeque;

use iwarp_proto::ddp::SegmentHeader;
use iwarp_proto::memory::STag;
use iwarp_proto::rdmap::pretty::Pdu;
use iwarp_proto::rdmap::{Opcode, ReadRequest};

use crate::checks::{Finding, FindingKind, MessageRef};
use crate::event::{Basis, Event, PduInfo};
use crate::ops::{Operation, OperationKind, OperationStats, OperationSummary};

/// PDUs remembered per direction for the Terminate checks.
const RECENT: usize = 64;

/// Read Requests kept waiting for Responses at most: beyond this the
/// oldest is dropped (a capture that lost the Responses must not grow the
/// decoder's memory without bound; more than the largest ORD, 16383, were
/// reported already).
const MAX_PENDING_READS: usize = 1 << 14;

/// What an operation under way has moved so far.
#[derive(Debug, Clone, Copy)]
struct Progress {
    octets: u64,
    segments: u64,
    first_frame: u64,
    start: f64,
}

impl Progress {
    fn new(frame: u64, time: f64) -> Self {
        Self {
            octets: 0,
            segments: 0,
            first_frame: frame,
            start: time,
        }
    }

    fn add(&mut self, len: u64) {
        self.octets += len;
        self.segments += 1;
    }

    /// The message named, left incomplete.
    fn incomplete(&self, what: MessageRef) -> FindingKind {
        FindingKind::IncompleteMessage {
            what,
            octets: self.octets,
            segments: self.segments,
        }
    }
}

/// An untagged message under way.
#[derive(Debug, Clone, Copy)]
struct OpenUntagged {
    msn: u32,
    opcode: Opcode,
    invalidate: Option<STag>,
    next_mo: u32,
    progress: Progress,
    /// Its first segments were not seen (the capture began, or a hole
    /// fell, inside it).
    partial: bool,
}

/// An RDMA Write under way.
#[derive(Debug, Clone, Copy)]
struct OpenWrite {
    stag: STag,
    to: u64,
    next_to: u64,
    progress: Progress,
}

/// A Read Request waiting for its Responses.
#[derive(Debug, Clone, Copy)]
struct PendingRead {
    msn: u32,
    request: ReadRequest,
    next_to: u64,
    /// The Responses so far; it starts at the Request.
    progress: Progress,
    /// A TO mismatch was reported already.
    reported: bool,
}

/// A PDU sent, as a Terminate's copy would name it.
#[derive(Debug, Clone, Copy)]
struct Sent {
    header: SegmentHeader,
    ulpdu_len: usize,
    frame: u64,
    read_request: Option<ReadRequest>,
}

#[derive(Debug, Clone, Default)]
struct Direction {
    msn_next: [Option<u32>; 3],
    last_frame: [u64; 3],
    open: [Option<OpenUntagged>; 3],
    write: Option<OpenWrite>,
    /// Read Requests this direction sent, oldest first.
    reads: VecDeque<PendingRead>,
    max_reads: Option<u16>,
    /// Responses to this direction's Requests may have been lost, or
    /// Requests may be missing: which Response answers which Request is no
    /// longer known for sure, so the Read checks are off (for good: with
    /// many Reads of the same STag in flight, nothing tells when the two
    /// queues line up again). Operations are still paired, best effort.
    reads_uncertain: bool,
    recent: VecDeque<Sent>,
    /// The frame of the Terminate this direction sent, and the PDUs after.
    terminated: Option<u64>,
    after_terminate: u64,
    first_after: u64,
    /// A hole fell in this direction.
    lost: bool,
}

impl Direction {
    /// A hole: nothing is known across it.
    fn hole(&mut self) {
        self.msn_next = [None; 3];
        self.open = [None; 3];
        self.write = None;
        self.recent.clear();
        self.lost = true;
    }
}

/// The tracker of one connection.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    dirs: [Direction; 2],
    stats: OperationStats,
}

type Out = Vec<(usize, Event)>;

fn finding(out: &mut Out, dir: usize, kind: FindingKind, frames: &[u64]) {
    out.push((
        dir,
        Event::Finding(Finding {
            kind,
            frames: frames.iter().copied().filter(|&f| f != 0).collect(),
        }),
    ));
}

impl Tracker {
    /// Nothing seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// The operations' figures.
    pub fn summary(&self) -> OperationSummary {
        self.stats.summary()
    }

    /// Looks at an event of direction `dir` at `frame`, `time`; adds
    /// findings and operations to `out`.
    pub fn observe(&mut self, dir: usize, event: &Event, frame: u64, time: f64, out: &mut Out) {
        match event {
            Event::Framing(f) => {
                let d = &mut self.dirs[dir];
                d.max_reads = f.max_reads;
                // RFC 5041 §4.3: every queue's MSN starts at 1; without the
                // startup, the first one seen is taken.
                let fresh = matches!(
                    f.basis,
                    Basis::StartupFrames | Basis::AdaptionIndications | Basis::OneSidedStartup
                );
                d.msn_next = [fresh.then_some(1); 3];
            }
            Event::Gap(_) | Event::Resync(_) => {
                self.dirs[dir].hole();
                // Responses in this direction may be lost, Requests from it too.
                self.dirs[1 - dir].reads_uncertain = true;
                self.dirs[dir].reads_uncertain = true;
            }
            Event::Pdu(p) => self.pdu(dir, p, frame, time, out),
            _ => {}
        }
    }

    fn pdu(&mut self, dir: usize, p: &PduInfo, frame: u64, time: f64, out: &mut Out) {
        let Some(segment) = p.segment.filter(|_| p.rdma) else {
            return;
        };
        let d = &mut self.dirs[dir];
        if d.recent.len() == RECENT {
            d.recent.pop_front();
        }
        d.recent.push_back(Sent {
            header: segment.header,
            ulpdu_len: p.ulpdu_len,
            frame,
            read_request: segment.read_request,
        });
        if d.terminated.is_some() {
            d.after_terminate += 1;
            if d.after_terminate == 1 {
                d.first_after = frame;
            }
        }
        // A damaged PDU is not delivered (RFC 5044 §8): nothing to track.
        if p.crc_bad() || !p.errors.is_empty() {
            return;
        }
        let Some(op) = segment.opcode() else { return };
        let len = p.payload_len as u64;
        match segment.header {
            SegmentHeader::Untagged(h) if h.qn < 3 => {
                let q = h.qn as usize;
                self.untagged(dir, q, op, h.msn, h.mo, h.last, len, frame, time, out);
                if h.last {
                    self.message_done(dir, q, op, &segment, p, frame, time, out);
                }
            }
            SegmentHeader::Tagged(h) if op == Opcode::RdmaWrite => {
                self.write(dir, h.stag, h.to, h.last, len, frame, time, out);
            }
            SegmentHeader::Tagged(h) if op == Opcode::ReadResponse => {
                self.read_response(dir, h.stag, h.to, h.last, len, frame, time, out);
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn untagged(
        &mut self,
        dir: usize,
        q: usize,
        op: Opcode,
        msn: u32,
        mo: u32,
        last: bool,
        len: u64,
        frame: u64,
        time: f64,
        out: &mut Out,
    ) {
        let d = &mut self.dirs[dir];
        let qn = q as u32;
        match d.open[q] {
            Some(mut o) if o.msn == msn => {
                if mo != o.next_mo {
                    finding(
                        out,
                        dir,
                        FindingKind::MoDiscontinuity {
                            qn,
                            msn,
                            expected: o.next_mo,
                            got: mo,
                        },
                        &[o.progress.first_frame, frame],
                    );
                }
                o.next_mo = mo.wrapping_add(len as u32);
                o.progress.add(len);
                d.open[q] = Some(o);
            }
            open => {
                if let Some(o) = open {
                    let kind = o
                        .progress
                        .incomplete(MessageRef::Untagged { qn, msn: o.msn });
                    finding(out, dir, kind, &[o.progress.first_frame, frame]);
                }
                let known = d.msn_next[q];
                if let Some(expected) = known.filter(|&e| e != msn) {
                    let kind = if (msn.wrapping_sub(expected) as i32) > 0 {
                        FindingKind::MsnGap {
                            qn,
                            expected,
                            got: msn,
                        }
                    } else {
                        FindingKind::MsnRepeat {
                            qn,
                            expected,
                            got: msn,
                        }
                    };
                    finding(out, dir, kind, &[d.last_frame[q], frame]);
                }
                if mo != 0 && known.is_some() {
                    let kind = FindingKind::MoDiscontinuity {
                        qn,
                        msn,
                        expected: 0,
                        got: mo,
                    };
                    finding(out, dir, kind, &[frame]);
                }
                d.open[q] = Some(OpenUntagged {
                    msn,
                    opcode: op,
                    invalidate: None,
                    next_mo: mo.wrapping_add(len as u32),
                    progress: Progress {
                        octets: len,
                        segments: 1,
                        first_frame: frame,
                        start: time,
                    },
                    partial: mo != 0,
                });
            }
        }
        d.last_frame[q] = frame;
        if last {
            d.msn_next[q] = Some(msn.wrapping_add(1));
        }
    }

    /// The last segment of an untagged message has come.
    #[allow(clippy::too_many_arguments)]
    fn message_done(
        &mut self,
        dir: usize,
        q: usize,
        op: Opcode,
        segment: &Pdu,
        p: &PduInfo,
        frame: u64,
        time: f64,
        out: &mut Out,
    ) {
        let Some(mut o) = self.dirs[dir].open[q].take() else {
            return;
        };
        o.invalidate = segment.invalidate_stag();
        match op {
            Opcode::ReadRequest => {
                if let Some(request) = segment.read_request {
                    self.read_request(dir, o.msn, request, frame, time, out);
                }
            }
            Opcode::Terminate => {
                self.dirs[dir].terminated = Some(frame);
                self.check_terminate(dir, p, frame, out);
            }
            op if op.is_send() => {
                let kind = OperationKind::send(o.opcode, o.msn, o.invalidate);
                self.operation(dir, kind, &o.progress, !o.partial, time, out);
            }
            _ => {}
        }
    }

    fn read_request(
        &mut self,
        dir: usize,
        msn: u32,
        request: ReadRequest,
        frame: u64,
        time: f64,
        out: &mut Out,
    ) {
        let d = &mut self.dirs[dir];
        if d.reads.len() == MAX_PENDING_READS {
            d.reads.pop_front();
        }
        d.reads.push_back(PendingRead {
            msn,
            request,
            next_to: request.sink_to,
            progress: Progress::new(frame, time),
            reported: false,
        });
        if let Some(ord) = d.max_reads {
            if d.reads.len() > usize::from(ord) && !d.reads_uncertain {
                let first = d.reads.front().map_or(0, |r| r.progress.first_frame);
                let kind = FindingKind::TooManyReads {
                    outstanding: d.reads.len(),
                    ord,
                };
                finding(out, dir, kind, &[first, frame]);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        dir: usize,
        stag: STag,
        to: u64,
        last: bool,
        len: u64,
        frame: u64,
        time: f64,
        out: &mut Out,
    ) {
        let d = &mut self.dirs[dir];
        let mut w = match d.write.take() {
            Some(w) if w.stag == stag => {
                if to != w.next_to {
                    let kind = FindingKind::ToDiscontinuity {
                        stag,
                        expected: w.next_to,
                        got: to,
                    };
                    finding(out, dir, kind, &[w.progress.first_frame, frame]);
                }
                w
            }
            other => {
                if let Some(w) = other {
                    let kind = w.progress.incomplete(MessageRef::Tagged { stag: w.stag });
                    finding(out, dir, kind, &[w.progress.first_frame, frame]);
                }
                OpenWrite {
                    stag,
                    to,
                    next_to: to,
                    progress: Progress::new(frame, time),
                }
            }
        };
        w.next_to = to.wrapping_add(len);
        w.progress.add(len);
        if last {
            let kind = OperationKind::Write { stag, to: w.to };
            self.operation(dir, kind, &w.progress, true, time, out);
        } else {
            self.dirs[dir].write = Some(w);
        }
    }

    /// A Read Response in `dir` answers a Request the other direction sent.
    #[allow(clippy::too_many_arguments)]
    fn read_response(
        &mut self,
        dir: usize,
        stag: STag,
        to: u64,
        last: bool,
        len: u64,
        frame: u64,
        time: f64,
        out: &mut Out,
    ) {
        let requester = &mut self.dirs[1 - dir];
        let tolerant = requester.reads_uncertain;
        let Some(r) = requester.reads.front_mut() else {
            if !tolerant {
                finding(
                    out,
                    dir,
                    FindingKind::UnexpectedReadResponse { stag },
                    &[frame],
                );
            }
            return;
        };
        if r.request.sink_stag != stag {
            if !tolerant {
                let later = requester.reads.iter().any(|r| r.request.sink_stag == stag);
                let expected = requester
                    .reads
                    .front()
                    .map_or(STag(0), |r| r.request.sink_stag);
                let kind = if later {
                    FindingKind::ReadResponseOutOfOrder {
                        expected,
                        got: stag,
                    }
                } else {
                    FindingKind::ReadResponseStag {
                        expected,
                        got: stag,
                    }
                };
                let first = requester
                    .reads
                    .front()
                    .map_or(0, |r| r.progress.first_frame);
                finding(out, dir, kind, &[first, frame]);
            }
            return;
        }
        if to != r.next_to && !r.reported && !tolerant {
            r.reported = true;
            let kind = FindingKind::ReadResponseTo {
                expected: r.next_to,
                got: to,
            };
            finding(out, dir, kind, &[r.progress.first_frame, frame]);
        }
        r.next_to = to.wrapping_add(len);
        r.progress.add(len);
        if !last {
            return;
        }
        let Some(r) = requester.reads.pop_front() else {
            return;
        };
        if r.progress.octets != u64::from(r.request.size) && !requester.reads_uncertain {
            let kind = FindingKind::ReadResponseSize {
                expected: u64::from(r.request.size),
                got: r.progress.octets,
            };
            finding(out, dir, kind, &[r.progress.first_frame, frame]);
        }
        self.operation(1 - dir, r.kind(), &r.progress, true, time, out);
    }

    /// A Terminate sent in `dir`: its copies name what the other direction
    /// sent (RFC 5040 §4.8).
    fn check_terminate(&mut self, dir: usize, p: &PduInfo, frame: u64, out: &mut Out) {
        let Some(t) = p.terminate() else { return };
        let other = &self.dirs[1 - dir];
        if other.lost {
            return;
        }
        if let Some(copy) = &t.ddp {
            let header = copy.header();
            let named = Pdu::parse(header, header.len()).ok().map(|p| p.header);
            let sent = named.and_then(|h| other.recent.iter().rev().find(|s| s.header == h));
            match sent {
                None => finding(out, dir, FindingKind::TerminateCopyUnmatched, &[frame]),
                Some(s) => {
                    if let Some(len) = copy.segment_length {
                        if usize::from(len) != s.ulpdu_len {
                            let kind = FindingKind::TerminateLength {
                                expected: s.ulpdu_len as u64,
                                got: len,
                            };
                            finding(out, dir, kind, &[s.frame, frame]);
                        }
                    }
                }
            }
        }
        if let Some(copy) = t
            .rdmap
            .as_ref()
            .and_then(|r| ReadRequest::parse_bytes(r).ok())
        {
            let seen = other.recent.iter().any(|s| s.read_request == Some(copy))
                || other.reads.iter().any(|r| r.request == copy);
            if !seen {
                finding(out, dir, FindingKind::TerminateReadUnmatched, &[frame]);
            }
        }
    }

    fn operation(
        &mut self,
        dir: usize,
        kind: OperationKind,
        progress: &Progress,
        complete: bool,
        end: f64,
        out: &mut Out,
    ) {
        let op = Operation {
            kind,
            octets: progress.octets,
            segments: progress.segments,
            first_frame: progress.first_frame,
            duration: (end - progress.start).max(0.0),
            complete,
        };
        self.stats.add(&op, end);
        out.push((dir, Event::Operation(op)));
    }

    /// The end of the connection: what is still under way was cut short.
    pub fn finish(&mut self, time: f64, out: &mut Out) {
        for dir in 0..2 {
            let d = &self.dirs[dir];
            if d.after_terminate > 0 {
                let at = d.terminated.unwrap_or(0);
                let kind = FindingKind::AfterTerminate(d.after_terminate);
                finding(out, dir, kind, &[at, d.first_after]);
            }
            for q in 0..3 {
                if let Some(o) = self.dirs[dir].open[q].take() {
                    let what = MessageRef::Untagged {
                        qn: q as u32,
                        msn: o.msn,
                    };
                    let kind = o.progress.incomplete(what);
                    finding(out, dir, kind, &[o.progress.first_frame]);
                    if o.opcode.is_send() {
                        let kind = OperationKind::send(o.opcode, o.msn, None);
                        self.operation(dir, kind, &o.progress, false, time, out);
                    }
                }
            }
            if let Some(w) = self.dirs[dir].write.take() {
                let kind = w.progress.incomplete(MessageRef::Tagged { stag: w.stag });
                finding(out, dir, kind, &[w.progress.first_frame]);
                let kind = OperationKind::Write {
                    stag: w.stag,
                    to: w.to,
                };
                self.operation(dir, kind, &w.progress, false, time, out);
            }
            while let Some(r) = self.dirs[dir].reads.pop_front() {
                if !self.dirs[dir].reads_uncertain {
                    let kind = FindingKind::UnansweredRead {
                        stag: r.request.sink_stag,
                        size: r.request.size,
                        got: r.progress.octets,
                    };
                    finding(out, dir, kind, &[r.progress.first_frame]);
                }
                self.operation(dir, r.kind(), &r.progress, false, time, out);
            }
        }
    }
}

impl PendingRead {
    /// The operation it is.
    fn kind(&self) -> OperationKind {
        OperationKind::Read {
            msn: self.msn,
            sink_stag: self.request.sink_stag,
            source_stag: self.request.source_stag,
            size: self.request.size,
        }
    }
}
