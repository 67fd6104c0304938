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

use crate::decoder::{MarkerMode, Options};
use crate::event::{Basis, Event};
use crate::mpa::CrcMode;
use crate::note::Note;
use crate::startup::{ift_settle, mpa_settle, Seen};
use crate::stream::{DirectionDecoder, Provenance, Status};
use crate::summary::ConnectionFraming;
use crate::tcp::{Chunk, Reassembler, ReassemblyStats};

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
    /// The settled framing, for the summary.
    framing: ConnectionFraming,
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
            framing: ConnectionFraming::NotSettled,
            closed: [false; 2],
        }
    }

    /// What it carries.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The framing, once known.
    pub fn framing(&self) -> ConnectionFraming {
        self.framing
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
        let mut out = Vec::new();
        // The acknowledgment first: the sender had those octets before it
        // sent this segment's, so a hole it reveals comes before them.
        if let Some(ack) = ack {
            let other = 1 - dir;
            {
                let (reasm, decoder) = (&mut self.reasm[other], &mut self.dirs[other]);
                reasm.acknowledged(ack, &mut |chunk| feed(decoder, chunk, &mut out));
            }
            events.extend(out.drain(..).map(|e| (other, e)));
            self.coordinate(opts, events);
        }
        let data_seq = if syn { seq.wrapping_add(1) } else { seq };
        // Beyond a hole: what an out-of-order receiver could place now.
        let next = self.reasm[dir].position();
        if let Some(start) = self.reasm[dir].position_of(data_seq) {
            if start > next as i64 && !payload.is_empty() {
                self.dirs[dir].ahead(start as u64, payload, next, &mut out);
            }
        }
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
                    out.push(Event::Note(Note::OneSidedStartup));
                    let (crc, markers, how) = overrides(
                        opts,
                        frame.crc.then_some(true),
                        None,
                        Basis::OneSidedStartup,
                    );
                    self.dirs[dir].start_mpa(markers, crc, 0, how, &mut out);
                }
                Status::Held(Some(Seen::Ift(_))) => {
                    out.push(Event::Note(Note::NoPeerIndication));
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
                        self.framing = ConnectionFraming::Assumed;
                        self.start_assumed(dir, opts, &mut out);
                    }
                    Kind::Assumed => self.start_assumed(dir, opts, &mut out),
                    Kind::Undecided | Kind::NotIwarp => {
                        self.kind = Kind::NotIwarp;
                        self.dirs[0].stop();
                        self.dirs[1].stop();
                    }
                    Kind::Mpa | Kind::Ift => {
                        out.push(Event::Note(Note::UnexpectedOpening(
                            self.dirs[dir].held_prefix().to_vec(),
                        )));
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
        let (crc, markers, how) = overrides(opts, None, None, Basis::NoStartup);
        self.dirs[dir].start_mpa(markers, crc, opts.stream_offset, how, out);
    }

    /// Both directions have sent their startup.
    fn settle(&mut self, a: Seen, b: Seen, opts: &Options, events: &mut DirEvents) {
        match (a, b) {
            (Seen::Mpa(fa), Seen::Mpa(fb)) if fa.kind != fb.kind => {
                // Direction 0 is the client's; whichever sent the Request.
                let req_dir = if fa.kind == FrameKind::Request { 0 } else { 1 };
                let (req, rep) = if req_dir == 0 { (fa, fb) } else { (fb, fa) };
                if rep.rejected {
                    self.framing = ConnectionFraming::MpaRejected {
                        revision: rep.revision.wire(),
                    };
                    events.push((1 - req_dir, Event::Note(Note::Rejected)));
                    self.stop_both();
                    return;
                }
                // The stack's own rules, applied to the two frames.
                let observed = mpa_settle(&req, &rep);
                let initiator = observed.initiator_framing;
                self.framing = ConnectionFraming::Mpa {
                    revision: observed.revision.wire(),
                    crc: initiator.crc,
                    markers_to_initiator: initiator.receive_markers,
                    markers_to_responder: initiator.send_markers,
                    overridden: !opts.check_crc || opts.markers != MarkerMode::Auto,
                };
                for (dir, framing) in [
                    (req_dir, initiator),
                    (1 - req_dir, observed.responder_framing()),
                ] {
                    let max_reads =
                        observed
                            .ird_ord
                            .map(|(i, r)| if dir == req_dir { i.ord } else { r.ord });
                    let (crc, markers, mut how) = overrides(
                        opts,
                        Some(framing.crc),
                        Some(framing.send_markers),
                        Basis::StartupFrames,
                    );
                    how.max_reads = max_reads;
                    let mut out = Vec::new();
                    self.dirs[dir].start_mpa(markers, crc, 0, how, &mut out);
                    events.extend(out.into_iter().map(|e| (dir, e)));
                }
            }
            (Seen::Ift(ia), Seen::Ift(ib)) => {
                let settled = ift_settle(&ia, &ib, opts.check_crc)
                    .and_then(|ab| ift_settle(&ib, &ia, opts.check_crc).map(|ba| (ab, ba)));
                match settled {
                    Ok((ab, ba)) => {
                        self.framing = ConnectionFraming::Ift { rdma: ia.rdma };
                        for (dir, params) in [(0, ab), (1, ba)] {
                            let mut out = Vec::new();
                            let how = Provenance {
                                basis: Basis::AdaptionIndications,
                                crc_overridden: !opts.check_crc,
                                markers_overridden: None,
                                max_reads: None,
                            };
                            self.dirs[dir].start_ift(params, ia.rdma, how, &mut out);
                            events.extend(out.into_iter().map(|e| (dir, e)));
                        }
                    }
                    Err(e) => {
                        events.push((1, Event::Note(Note::IndicationsDisagree(e))));
                        self.stop_both();
                    }
                }
            }
            (Seen::Invalid, _) | (_, Seen::Invalid) => {
                let dir = usize::from(a != Seen::Invalid);
                events.push((dir, Event::Note(Note::InvalidStartup)));
                self.stop_both();
            }
            _ => {
                events.push((1, Event::Note(Note::StartupsDoNotPair)));
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
/// (`None`: unknown), overridden by the options; with where they come from.
fn overrides(
    opts: &Options,
    crc: Option<bool>,
    markers: Option<bool>,
    basis: Basis,
) -> (CrcMode, bool, Provenance) {
    let crc = match (crc, opts.check_crc) {
        (Some(false), _) => CrcMode::Off,
        (Some(true), true) => CrcMode::On,
        (None, true) => CrcMode::Auto,
        (_, false) => CrcMode::Unchecked,
    };
    let (markers, markers_overridden) = match (opts.markers, markers) {
        (MarkerMode::On, _) => (true, Some(true)),
        (MarkerMode::Off, _) => (false, Some(false)),
        (MarkerMode::Auto, m) => (m.unwrap_or(false), None),
    };
    let how = Provenance {
        basis,
        crc_overridden: crc == CrcMode::Unchecked,
        markers_overridden,
        max_reads: None,
    };
    (crc, markers, how)
}
