//! The decoder: frames in, [`Record`]s out.
//!
//! [`Decoder::frame`] takes one captured frame and returns what it
//! completed; [`Decoder::finish`] ends the capture and returns what is
//! left and the [`Summary`]. Records come out of a buffer the decoder
//! reuses, so decoding allocates nothing per PDU.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::capture::Frame;
use crate::connection::{Connection, Kind};
use crate::event::{Event, Record};
use crate::packet::{self, Skip};
use crate::summary::{ConnectionSummary, Summary, Tally};
use crate::track::Tracker;

/// Markers: as negotiated, or forced on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MarkerMode {
    /// As the startup frames settle them (off when no startup was seen).
    #[default]
    Auto,
    /// Markers both ways.
    On,
    /// No markers.
    Off,
}

/// How to decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Only connections with one of these ports (all if empty); they are
    /// decoded even without a captured startup.
    pub ports: Vec<u16>,
    /// Check CRCs.
    pub check_crc: bool,
    /// Markers: as negotiated, or forced on or off.
    pub markers: MarkerMode,
    /// Where FPDUs start when no startup was seen.
    pub stream_offset: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            ports: Vec::new(),
            check_crc: true,
            markers: MarkerMode::Auto,
            stream_offset: 0,
        }
    }
}

/// Feeds frames through connections, turning what they report into
/// records.
#[derive(Debug)]
pub struct Decoder {
    opts: Options,
    connections: Vec<Connection>,
    /// Stateful checks and operations, per connection.
    trackers: Vec<Tracker>,
    /// Whether each connection has been finished.
    finished: Vec<bool>,
    /// (source, destination) to index in `connections`, both ways.
    by_ends: HashMap<(SocketAddr, SocketAddr), usize>,
    first: Option<Duration>,
    /// The frame being decoded: number and time since the first.
    now: (u64, f64),
    summary: Summary,
    tally: Tally,
    /// Records of the current frame, reused.
    out: Vec<Record>,
    /// Events of the current connection, reused.
    events: Vec<(usize, Event)>,
    /// What the tracker adds, reused.
    extra: Vec<(usize, Event)>,
}

impl Decoder {
    /// A decoder with nothing seen.
    pub fn new(opts: Options) -> Self {
        Self {
            opts,
            connections: Vec::new(),
            trackers: Vec::new(),
            finished: Vec::new(),
            by_ends: HashMap::new(),
            first: None,
            now: (0, 0.0),
            summary: Summary::default(),
            tally: Tally::default(),
            out: Vec::new(),
            events: Vec::new(),
            extra: Vec::new(),
        }
    }

    /// Decodes one captured frame; returns the records it completed.
    pub fn frame(&mut self, frame: &Frame) -> std::vec::Drain<'_, Record> {
        self.out.clear();
        self.decode_frame(frame);
        self.out.drain(..)
    }

    fn decode_frame(&mut self, frame: &Frame) {
        self.summary.frames += 1;
        let first = *self.first.get_or_insert(frame.timestamp);
        let since = frame.timestamp.saturating_sub(first).as_secs_f64();
        self.now = (frame.number, since);
        let seg = match packet::parse(frame.link, &frame.data) {
            Ok(seg) => seg,
            Err(skip) => {
                *self.summary.skipped.entry(skip).or_default() += 1;
                return;
            }
        };
        self.summary.tcp_segments += 1;
        let ports = &self.opts.ports;
        let named = ports.contains(&seg.src.port()) || ports.contains(&seg.dst.port());
        if !ports.is_empty() && !named {
            *self.summary.skipped.entry(Skip::OtherPorts).or_default() += 1;
            return;
        }
        let pure_syn = seg.syn && seg.ack.is_none();
        let existing = self.by_ends.get(&(seg.src, seg.dst)).copied();
        // A SYN that is not a retransmission of the one seen, on ends that
        // already carried a connection: a new connection.
        let reused = existing.filter(|&i| {
            let c = &self.connections[i];
            !(pure_syn && c.client_isn != Some(seg.seq) && (c.client_isn.is_some() || c.has_data()))
        });
        let index = match reused {
            Some(i) => i,
            None => {
                if let Some(old) = existing {
                    self.finish_connection(old);
                }
                // A SYN-ACK's receiver is the client.
                let (client, server) = if seg.syn && seg.ack.is_some() {
                    (seg.dst, seg.src)
                } else {
                    (seg.src, seg.dst)
                };
                let i = self.connections.len();
                self.connections
                    .push(Connection::new(i + 1, client, server, named));
                self.trackers.push(Tracker::new());
                self.finished.push(false);
                self.by_ends.insert((client, server), i);
                self.by_ends.insert((server, client), i);
                i
            }
        };
        let conn = &mut self.connections[index];
        if conn.kind() == Kind::NotIwarp {
            return;
        }
        let dir = conn.direction(seg.src);
        if pure_syn {
            conn.client_isn = Some(seg.seq);
        }
        let mut events = std::mem::take(&mut self.events);
        conn.segment(
            dir,
            seg.seq,
            seg.syn,
            seg.ack,
            seg.fin,
            seg.rst,
            seg.payload,
            &self.opts,
            &mut events,
        );
        self.emit(index, &mut events);
        self.events = events;
    }

    /// Finishes connection `index` (the capture ended, or its ends were
    /// reused) unless it was already.
    fn finish_connection(&mut self, index: usize) {
        if self.finished.get(index).copied().unwrap_or(true) {
            return;
        }
        self.finished[index] = true;
        let mut events = std::mem::take(&mut self.events);
        self.connections[index].finish(&self.opts, &mut events);
        self.emit(index, &mut events);
        self.trackers[index].finish(self.now.1, &mut events);
        self.emit(index, &mut events);
        self.events = events;
    }

    /// Turns a connection's events into records, each followed by what its
    /// tracker made of it (findings, operations).
    fn emit(&mut self, index: usize, events: &mut Vec<(usize, Event)>) {
        let conn = &self.connections[index];
        let tracker = &mut self.trackers[index];
        let (frame, time) = self.now;
        let mut extra = std::mem::take(&mut self.extra);
        let push = |out: &mut Vec<Record>, tally: &mut Tally, dir: usize, event: Event| {
            let dir = dir % 2;
            tally.observe(conn.id, dir, &event);
            out.push(Record {
                frame,
                time,
                connection: conn.id,
                src: conn.ends[dir],
                dst: conn.ends[1 - dir],
                event,
            });
        };
        for (dir, event) in events.drain(..) {
            tracker.observe(dir % 2, &event, frame, time, &mut extra);
            push(&mut self.out, &mut self.tally, dir, event);
            for (dir, event) in extra.drain(..) {
                push(&mut self.out, &mut self.tally, dir, event);
            }
        }
        self.extra = extra;
    }

    /// The end of the capture: finishes every connection; returns the
    /// records that produced and the summary.
    pub fn finish(mut self) -> (Vec<Record>, Summary) {
        self.out.clear();
        // What is found now belongs to no frame.
        self.now.0 = 0;
        for index in 0..self.connections.len() {
            self.finish_connection(index);
        }
        let mut summary = std::mem::take(&mut self.summary);
        summary.pdus = self.tally.pdus_by_name();
        summary.errors = std::mem::take(&mut self.tally.errors);
        for (conn, tracker) in self.connections.iter().zip(&self.trackers) {
            match conn.kind() {
                Kind::NotIwarp | Kind::Undecided => summary.not_decoded += 1,
                Kind::Mpa | Kind::Ift | Kind::Assumed => {
                    let mut directions = self.tally.directions.remove(&conn.id).unwrap_or_default();
                    for (dir, d) in directions.iter_mut().enumerate() {
                        d.src = Some(conn.ends[dir]);
                        d.dst = Some(conn.ends[1 - dir]);
                        d.tcp = conn.stats(dir);
                    }
                    summary.connections.push(ConnectionSummary {
                        id: conn.id,
                        client: conn.ends[0],
                        server: conn.ends[1],
                        framing: conn.framing(),
                        directions,
                        operations: tracker.summary(),
                    });
                }
            }
        }
        (std::mem::take(&mut self.out), summary)
    }
}
