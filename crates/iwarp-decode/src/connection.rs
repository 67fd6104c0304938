//! A TCP connection: its two directions reassembled, and their iWARP
//! decoding coordinated.
//!
//! Direction 0 is the client's (the end that sent the SYN, or that sent
//! first when the SYN was not captured). Each direction is reassembled
//! ([`Reassembler`]) and decoded ([`DirectionDecoder`]); this module looks
//! at both openings and decides:
//!
//! - an MPA Request one way and a Reply the other: the framing each way is
//!   settled from the two frames (RFC 5044 §7.1.1), unless the Reply
//!   rejects the connection, in which case MPA is over;
//! - two IFT indications: settled as the stack settles them;
//! - no startup at all: the connection is not iWARP, unless `--port` named
//!   it, in which case both directions are decoded as MPA FPDUs from their
//!   first octet (or `--stream-offset`) with CRC detected and markers as
//!   `--markers` says;
//! - anything else (a startup one way and not the other, two Requests, an
//!   invalid frame): reported, and not decoded further.
//!
//! `--markers on|off` and `--no-crc-check` override what the startup says.

use std::net::SocketAddr;

use iwarp_proto::mpa::startup::FrameKind;

use super::args::MarkerMode;
use super::event::{Event, Level, NoteInfo};
use super::mpa::CrcMode;
use super::startup::{ift_settle, mpa_settle, MpaFrame, Seen};
use super::stream::{DirectionDecoder, Status};
use super::tcp::{Chunk, Reassembler, ReassemblyStats};
use super::Options;

/// What a connection turned out to carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing seen yet.
    Undecided,
    /// MPA, with startup frames.
    Mpa,
    /// IFT, with Adaption Indications.
    Ift,
    /// No startup seen; decoded as MPA FPDUs because `--port` named it.
    Assumed,
    /// No startup seen and not named: not decoded.
    NotIwarp,
}

/// Events of a connection, each with its direction (0 client to server).
pub type DirEvents = Vec<(usize, Event)>;

/// One TCP connection.
#[derive(Debug, Clone)]
pub struct Connection {
    /// Number, from 1.
    pub id: usize,
    /// `ends[0]` is the client, `ends[1]` the server.
    pub ends: [SocketAddr; 2],
    /// The client's initial sequence number, when its SYN was seen.
    pub client_isn: Option<u32>,
    reasm: [Reassembler; 2],
    dirs: [DirectionDecoder; 2],
    /// Whether `--port` named it.
    forced: bool,
    kind: Kind,
    /// A short description of the settled framing, for the summary.
    framing: String,
    /// FIN or RST seen, per direction.
    closed: [bool; 2],
}

impl Connection {
    /// A connection from `client` to `server`.
    pub fn new(id: usize, client: SocketAddr, server: SocketAddr, forced: bool) -> Self {
        Self {
            id,
            ends: [client, server],
            client_isn: None,
            reasm: [Reassembler::new(), Reassembler::new()],
            dirs: [DirectionDecoder::new(), DirectionDecoder::new()],
            forced,
            kind: Kind::Undecided,
            framing: String::new(),
            closed: [false; 2],
        }
    }

    /// What it carries.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The framing, in words, once known.
    pub fn framing(&self) -> &str {
        &self.framing
    }

    /// Reassembly counters of direction `dir`.
    pub fn stats(&self, dir: usize) -> ReassemblyStats {
        self.reasm[dir % 2].stats()
    }

    /// Whether either direction carried payload.
    pub fn has_data(&self) -> bool {
        self.reasm.iter().any(|r| r.stats().segments > 0)
    }

    /// Whether both directions have ended (FIN or RST).
    pub fn closed(&self) -> bool {
        self.closed[0] && self.closed[1]
    }

    /// The direction of a segment from `src`.
    pub fn direction(&self, src: SocketAddr) -> usize {
        usize::from(src != self.ends[0])
    }

    /// A segment in direction `dir`. A FIN ends the direction after the
    /// payload; neither it nor an RST is a hole in the stream.
    #[allow(clippy::too_many_arguments)]
    pub fn segment(
        &mut self,
        dir: usize,
        seq: u32,
        syn: bool,
        ack: Option<u32>,
        fin: bool,
        rst: bool,
        payload: &[u8],
        opts: &Options,
        events: &mut DirEvents,
    ) {
        let dir = dir % 2;
        if syn {
            self.reasm[dir].syn(seq);
        }
        let data_seq = if syn { seq.wrapping_add(1) } else { seq };
        let mut out = Vec::new();
        {
            let (reasm, decoder) = (&mut self.reasm[dir], &mut self.dirs[dir]);
            reasm.segment(data_seq, payload, &mut |chunk| {
                feed(decoder, chunk, &mut out)
            });
        }
        if fin {
            self.reasm[dir].fin(data_seq.wrapping_add(payload.len() as u32));
        }
        events.extend(out.drain(..).map(|e| (dir, e)));
        self.coordinate(opts, events);
        if let Some(ack) = ack {
            let other = 1 - dir;
            {
                let (reasm, decoder) = (&mut self.reasm[other], &mut self.dirs[other]);
                reasm.acknowledged(ack, &mut |chunk| feed(decoder, chunk, &mut out));
            }
            events.extend(out.drain(..).map(|e| (other, e)));
            self.coordinate(opts, events);
        }
        if fin || rst {
            self.closed[dir] = true;
        }
    }

    /// The end of the capture (or of the connection): holes are lost,
    /// held octets are decoded as well as they can be, partial PDUs noted.
    pub fn finish(&mut self, opts: &Options, events: &mut DirEvents) {
        for dir in 0..2 {
            let mut out = Vec::new();
            {
                let (reasm, decoder) = (&mut self.reasm[dir], &mut self.dirs[dir]);
                reasm.finish(&mut |chunk| feed(decoder, chunk, &mut out));
            }
            events.extend(out.into_iter().map(|e| (dir, e)));
        }
        self.coordinate(opts, events);
        // A startup whose counterpart never came: decode with what is known.
        for dir in 0..2 {
            let mut out = Vec::new();
            match self.dirs[dir].status() {
                Status::Held(Some(Seen::Mpa(frame))) if !frame.rejected => {
                    let (crc, markers, basis) = overrides(
                        opts,
                        frame.crc.then_some(true),
                        None,
                        "no startup frame seen from the other end: assumed",
                    );
                    self.dirs[dir].start_mpa(markers, crc, 0, basis, &mut out);
                }
                Status::Held(Some(Seen::Ift(_))) => {
                    out.push(note(
                        Level::Error,
                        "no Adaption Indication seen from the other end: IFT frames cannot \
                         be decoded without its VTag"
                            .into(),
                    ));
                    self.dirs[dir].stop();
                }
                _ => {}
            }
            self.dirs[dir].finish(&mut out);
            events.extend(out.into_iter().map(|e| (dir, e)));
        }
    }

    /// Looks at both directions' openings and starts, settles or stops
    /// them.
    fn coordinate(&mut self, opts: &Options, events: &mut DirEvents) {
        for dir in 0..2 {
            let mut out = Vec::new();
            match self.dirs[dir].status() {
                Status::Held(None) => match self.kind {
                    Kind::Undecided if self.forced => {
                        self.kind = Kind::Assumed;
                        self.framing = "MPA assumed (no startup seen)".into();
                        self.start_assumed(dir, opts, &mut out);
                    }
                    Kind::Assumed => self.start_assumed(dir, opts, &mut out),
                    Kind::Undecided | Kind::NotIwarp => {
                        self.kind = Kind::NotIwarp;
                        self.dirs[0].stop();
                        self.dirs[1].stop();
                    }
                    Kind::Mpa | Kind::Ift => {
                        out.push(note(
                            Level::Error,
                            format!(
                                "the other end sent a startup, this one opens with {} instead: \
                                 not decoded",
                                super::event::hex(self.dirs[dir].held_prefix())
                            ),
                        ));
                        self.dirs[dir].stop();
                    }
                },
                Status::Held(Some(seen)) if self.kind == Kind::Undecided => {
                    self.kind = match seen {
                        Seen::Ift(_) => Kind::Ift,
                        _ => Kind::Mpa,
                    };
                }
                _ => {}
            }
            events.extend(out.into_iter().map(|e| (dir, e)));
        }
        if let (Status::Held(Some(a)), Status::Held(Some(b))) =
            (self.dirs[0].status(), self.dirs[1].status())
        {
            self.settle(a, b, opts, events);
        }
    }

    fn start_assumed(&mut self, dir: usize, opts: &Options, out: &mut Vec<Event>) {
        let (crc, markers, basis) =
            overrides(opts, None, None, "no startup seen: MPA FPDUs assumed");
        self.dirs[dir].start_mpa(markers, crc, opts.stream_offset, basis, out);
    }

    /// Both directions have sent their startup.
    fn settle(&mut self, a: Seen, b: Seen, opts: &Options, events: &mut DirEvents) {
        match (a, b) {
            (Seen::Mpa(fa), Seen::Mpa(fb)) if fa.kind != fb.kind => {
                let (req, rep) = if fa.kind == FrameKind::Request {
                    (fa, fb)
                } else {
                    (fb, fa)
                };
                let rep_dir = if fa.kind == FrameKind::Reply { 0 } else { 1 };
                if rep.rejected {
                    self.framing = format!("MPA rev {}, rejected", rep.revision);
                    events.push((
                        rep_dir,
                        note(
                            Level::Info,
                            "the responder rejected the connection (R set): MPA is over, \
                             nothing further is decoded"
                                .into(),
                        ),
                    ));
                    self.stop_both();
                    return;
                }
                self.framing = describe_mpa(&req, &rep, opts);
                for (dir, sender, receiver) in [(0, fa, fb), (1, fb, fa)] {
                    let (crc, markers) = mpa_settle(&sender, &receiver);
                    let (crc, markers, basis) =
                        overrides(opts, Some(crc), Some(markers), "startup frames");
                    let mut out = Vec::new();
                    self.dirs[dir].start_mpa(markers, crc, 0, basis, &mut out);
                    events.extend(out.into_iter().map(|e| (dir, e)));
                }
            }
            (Seen::Ift(ia), Seen::Ift(ib)) => {
                let settled = ift_settle(&ia, &ib, opts.check_crc)
                    .and_then(|ab| ift_settle(&ib, &ia, opts.check_crc).map(|ba| (ab, ba)));
                match settled {
                    Ok((ab, ba)) => {
                        self.framing =
                            format!("IFT, {} mode", if ia.rdma { "RDMA" } else { "DDP" });
                        for (dir, params) in [(0, ab), (1, ba)] {
                            let mut out = Vec::new();
                            self.dirs[dir].start_ift(
                                params,
                                ia.rdma,
                                "Adaption Indications".into(),
                                &mut out,
                            );
                            events.extend(out.into_iter().map(|e| (dir, e)));
                        }
                    }
                    Err(e) => {
                        events.push((
                            1,
                            note(
                                Level::Error,
                                format!("the Adaption Indications do not agree ({e}): the connection would be closed"),
                            ),
                        ));
                        self.stop_both();
                    }
                }
            }
            (Seen::Invalid, _) | (_, Seen::Invalid) => {
                let dir = usize::from(a != Seen::Invalid);
                events.push((
                    dir,
                    note(
                        Level::Error,
                        "invalid startup: the receiving end closes the connection; \
                         nothing further is decoded"
                            .into(),
                    ),
                ));
                self.stop_both();
            }
            _ => {
                events.push((
                    1,
                    note(
                        Level::Error,
                        "the two ends' startups do not pair (two Requests, two Replies, or \
                         MPA against IFT): nothing further is decoded"
                            .into(),
                    ),
                ));
                self.stop_both();
            }
        }
    }

    fn stop_both(&mut self) {
        self.dirs[0].stop();
        self.dirs[1].stop();
    }
}

/// Passes a reassembled chunk to a direction's decoder.
fn feed(decoder: &mut DirectionDecoder, chunk: Chunk<'_>, out: &mut Vec<Event>) {
    match chunk {
        Chunk::Data(data) => decoder.push(data, out),
        Chunk::Gap(missing) => decoder.gap(missing, out),
    }
}

/// The CRC mode and markers a direction uses: what the startup settled
/// (`None`: unknown), overridden by the command line; with the reason.
fn overrides(
    opts: &Options,
    crc: Option<bool>,
    markers: Option<bool>,
    basis: &str,
) -> (CrcMode, bool, String) {
    let mut basis = basis.to_string();
    let crc = match (crc, opts.check_crc) {
        (Some(false), _) => CrcMode::Off,
        (Some(true), true) => CrcMode::On,
        (None, true) => CrcMode::Auto,
        (_, false) => {
            basis.push_str(", --no-crc-check");
            CrcMode::Unchecked
        }
    };
    let markers = match (opts.markers, markers) {
        (MarkerMode::On, _) => {
            basis.push_str(", --markers on");
            true
        }
        (MarkerMode::Off, _) => {
            basis.push_str(", --markers off");
            false
        }
        (MarkerMode::Auto, m) => m.unwrap_or(false),
    };
    (crc, markers, basis)
}

fn describe_mpa(req: &MpaFrame, rep: &MpaFrame, opts: &Options) -> String {
    let (crc, to_responder) = mpa_settle(req, rep);
    let (_, to_initiator) = mpa_settle(rep, req);
    let markers = match (to_responder, to_initiator) {
        (false, false) => "no markers".to_string(),
        (true, true) => "markers both ways".to_string(),
        (true, false) => "markers to the responder only".to_string(),
        (false, true) => "markers to the initiator only".to_string(),
    };
    let mut s = format!(
        "MPA rev {}, CRC {}, {markers}",
        rep.revision,
        if crc { "on" } else { "off" }
    );
    if !opts.check_crc || opts.markers != MarkerMode::Auto {
        s.push_str(" (overridden on the command line)");
    }
    s
}

fn note(level: Level, message: String) -> Event {
    Event::Note(NoteInfo { level, message })
}
