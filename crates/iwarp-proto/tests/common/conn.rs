//! Two [`Connection`]s back to back through in-memory TCP connections:
//! each direction a pipe with a bounded buffer (so writes are taken in
//! part, as a full socket takes them) and a FIN, each end reading in
//! random chunks, staged or straight into its regions. Time is a value
//! the test moves on.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp_proto::connection::{Connection, ConnectionConfig, Event, Notice};
use iwarp_proto::ift::{settle, IftConfig, Phase};
use iwarp_proto::memory::{Access, MemoryTable, ProtectionDomain, StreamId};
use iwarp_proto::mpa::startup::{Established, Revision, Role, RtrType};
use iwarp_proto::mpa::{FramingParams, Placement};
use iwarp_proto::rdmap::{Completion, QueuePairConfig, SendFlags, Sge};

use super::{register, Region, Rng};

/// One direction of a TCP connection.
#[derive(Debug, Default)]
pub struct Pipe {
    /// Octets written and not yet read.
    pub bytes: VecDeque<u8>,
    /// The writer closed its side: once `bytes` is empty, the reader sees
    /// the end of the stream.
    pub fin: bool,
    /// Octets the pipe holds at most (the socket buffers).
    pub capacity: usize,
    /// Octets ever written.
    pub total: u64,
}

impl Pipe {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            ..Self::default()
        }
    }
}

/// How an end reads its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Into a staging buffer, then `handle_input` (with the placement its
    /// configuration says, direct or verified).
    Staged,
    /// Payload straight into its region with `read_direct` whenever the
    /// connection offers it, the rest staged.
    Direct,
}

/// What an end saw happen.
#[derive(Debug, Default)]
pub struct Seen {
    pub completions: Vec<Completion>,
    /// `Event::SendFin`, `Event::Close`, `Event::Finished`, counted.
    pub fins: usize,
    pub closes: usize,
    pub finished: usize,
    /// Events after `Finished` other than completions of work posted
    /// after it: must stay 0.
    pub after_finished: usize,
    /// The end of the stream was handed over.
    pub eof: bool,
    /// Payload octets placed by direct reads.
    pub placed_directly: usize,
    /// The most buffers one direct read was lent.
    pub direct_buffers_max: usize,
    /// The notices, in order (none may follow `Finished`).
    pub notices: Vec<Notice>,
}

/// One end: its memory, its connection and what it saw.
pub struct End {
    pub table: Arc<MemoryTable>,
    pub pd: ProtectionDomain,
    pub conn: Connection,
    pub seen: Seen,
    pub reading: Reading,
    /// Stream octets read and not taken yet.
    staged: Vec<u8>,
    tail: Vec<u8>,
}

impl End {
    /// An end whose connection `config` makes from a queue-pair
    /// configuration in a fresh memory table.
    pub fn new(
        stream: u64,
        reading: Reading,
        now: Instant,
        config: impl FnOnce(QueuePairConfig) -> ConnectionConfig,
    ) -> Self {
        let table = Arc::new(MemoryTable::with_seed(stream));
        let pd = table.alloc_pd();
        let mut qp = QueuePairConfig::new(pd, StreamId(stream));
        qp.ord = 8;
        qp.ird = 8;
        let conn = Connection::new(config(qp), Arc::clone(&table), now).expect("connection");
        Self {
            table,
            pd,
            conn,
            seen: Seen::default(),
            reading,
            staged: Vec::new(),
            tail: vec![0; 4096],
        }
    }

    pub fn region(&self, len: usize, access: Access, fill: u8) -> Region {
        register(&self.table, self.pd, len, 0, access, fill)
    }

    /// Posts a Send of `sge`, which must be accepted.
    pub fn send(&mut self, wr_id: u64, sge: Sge) {
        self.conn
            .post_send(wr_id, sge, SendFlags::default())
            .expect("Send posted");
    }

    /// Posts a receive into `sge`, which must be accepted.
    pub fn recv(&mut self, wr_id: u64, sge: Sge) {
        self.conn.post_recv(wr_id, sge).expect("receive posted");
    }

    /// Writes what the connection has to send into `out`, in random parts,
    /// until it has nothing more or the pipe is full. True if any octet
    /// moved.
    fn transmit(&mut self, out: &mut Pipe, rng: &mut Rng) -> bool {
        let mut moved = false;
        loop {
            let room = out.capacity.saturating_sub(out.bytes.len());
            let limit = if room == 0 { 0 } else { 1 + rng.below(room) };
            let written = self.conn.poll_transmit(|iov: &[IoSlice<'_>]| {
                let mut n = 0;
                for s in iov {
                    let k = s.len().min(limit - n);
                    out.bytes.extend(&s[..k]);
                    n += k;
                    if n == limit {
                        break;
                    }
                }
                n
            });
            match written {
                None | Some(0) => return moved,
                Some(n) => {
                    out.total += n as u64;
                    self.conn.handle_written(n);
                    moved = true;
                }
            }
        }
    }

    /// Acts on the connection's events. True if there were any.
    pub fn events(&mut self, out: &mut Pipe) -> bool {
        let mut any = false;
        while let Some(e) = self.conn.poll_event() {
            any = true;
            if self.seen.finished > 0 && !matches!(e, Event::Completion(_)) {
                self.seen.after_finished += 1;
            }
            match e {
                Event::Completion(c) => self.seen.completions.push(c),
                Event::SendFin => {
                    self.seen.fins += 1;
                    out.fin = true;
                }
                Event::Close => {
                    self.seen.closes += 1;
                    out.fin = true;
                }
                Event::Finished => self.seen.finished += 1,
                Event::Notice(n) => self.seen.notices.push(n),
                _ => {}
            }
        }
        any
    }

    /// Reads a random chunk of `inp`, staged or direct. True if anything
    /// happened.
    fn receive(&mut self, inp: &mut Pipe, rng: &mut Rng, now: Instant) -> bool {
        if self.seen.closes > 0 {
            // Closed both ways: what arrives is dropped.
            let any = !inp.bytes.is_empty();
            inp.bytes.clear();
            return any;
        }
        if !self.conn.wants_input() {
            return false;
        }
        if inp.bytes.is_empty() {
            if inp.fin && !self.seen.eof {
                self.seen.eof = true;
                self.conn.handle_eof();
                return true;
            }
            return false;
        }
        let chunk = 1 + rng.below(inp.bytes.len().min(70_000));
        if self.reading == Reading::Direct && self.conn.direct_payload() > 0 && rng.below(4) > 0 {
            let max = 1 + rng.below(self.conn.direct_payload());
            let tail_len = 1 + rng.below(self.tail.len());
            let mut tail = std::mem::take(&mut self.tail);
            let mut buffers = 0;
            let r = self
                .conn
                .read_direct(now, max, &mut tail[..tail_len], |iov| {
                    buffers = iov.len();
                    let mut n = 0;
                    for s in iov.iter_mut() {
                        let k = s.len().min(chunk - n);
                        for (d, b) in s[..k].iter_mut().zip(inp.bytes.drain(..k)) {
                            *d = b;
                        }
                        n += k;
                        if n == chunk {
                            break;
                        }
                    }
                    Ok::<usize, ()>(n)
                })
                .expect("reading a pipe cannot fail");
            self.seen.direct_buffers_max = self.seen.direct_buffers_max.max(buffers);
            if let Some(d) = r {
                assert!(d.octets > 0);
                self.seen.placed_directly += d.placed;
                self.staged.extend_from_slice(&tail[..d.tail]);
            }
            self.tail = tail;
        } else {
            self.staged.extend(inp.bytes.drain(..chunk));
        }
        // Fed even when empty: an IFT frame whose last payload octet a
        // direct read placed is complete only at the next call.
        let used = self.conn.handle_input(now, &self.staged);
        self.staged.drain(..used);
        true
    }
}

/// Which end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

/// Two ends back to back: `a` the initiator, `b` the responder.
pub struct ConnPair {
    pub a: End,
    pub b: End,
    /// a to b, and b to a.
    pub ab: Pipe,
    pub ba: Pipe,
    pub rng: Rng,
    pub now: Instant,
}

/// What an MPA startup between two ends settles, from `role`'s side.
pub fn established(role: Role, framing: FramingParams, rtr: Option<RtrType>) -> Established {
    let framing = match role {
        Role::Initiator => framing,
        Role::Responder => framing.mirrored(),
    };
    Established {
        role,
        revision: Some(Revision::Rev2),
        framing,
        ird_ord: None,
        rtr,
        private_data: Vec::new(),
    }
}

/// How an MPA pair is set up.
#[derive(Clone, Copy)]
pub struct Setup {
    /// CRC and markers, from the initiator's side.
    pub framing: FramingParams,
    pub placement: Placement,
    /// How each end reads.
    pub reading: [Reading; 2],
    /// The RTR of peer-to-peer mode, if used.
    pub rtr: Option<RtrType>,
    /// Octets each pipe holds.
    pub capacity: usize,
    /// Adjusts each end's configuration, given its role.
    pub tweak: fn(Role, &mut ConnectionConfig),
}

impl Setup {
    /// `framing`, verified placement, staged reads, no RTR, 1 MiB pipes.
    pub fn new(framing: FramingParams) -> Self {
        Self {
            framing,
            placement: Placement::Verified,
            reading: [Reading::Staged; 2],
            rtr: None,
            capacity: 1 << 20,
            tweak: |_, _| {},
        }
    }
}

impl ConnPair {
    /// Two ends as an MPA startup settled them (`framing` from the
    /// initiator's side), pipes of 1 MiB each way.
    pub fn mpa(
        seed: u64,
        framing: FramingParams,
        placement: Placement,
        reading: [Reading; 2],
    ) -> Self {
        Self::with(
            seed,
            Setup {
                placement,
                reading,
                ..Setup::new(framing)
            },
        )
    }

    /// Two ends as `setup` says.
    pub fn with(seed: u64, setup: Setup) -> Self {
        let now = Instant::now();
        let end = |stream, role, reading| {
            End::new(stream, reading, now, |qp| {
                let e = established(role, setup.framing, setup.rtr);
                let mut c = ConnectionConfig::mpa(&e, setup.placement, qp);
                c.emss = 4000;
                (setup.tweak)(role, &mut c);
                c
            })
        };
        let a = end(1, Role::Initiator, setup.reading[0]);
        let b = end(2, Role::Responder, setup.reading[1]);
        Self::of(seed, a, b, setup.capacity, now)
    }

    /// Two ends as an IFT negotiation with these configurations settles
    /// them.
    pub fn ift(seed: u64, a: IftConfig, b: IftConfig, reading: [Reading; 2]) -> Self {
        let now = Instant::now();
        let pa = settle(&a, &b.indication(Phase::One)).expect("settles");
        let pb = settle(&b, &a.indication(Phase::Zero)).expect("settles");
        let a = End::new(1, reading[0], now, |qp| ConnectionConfig::ift(pa, qp));
        let b = End::new(2, reading[1], now, |qp| ConnectionConfig::ift(pb, qp));
        Self::of(seed, a, b, 1 << 20, now)
    }

    pub fn of(seed: u64, a: End, b: End, capacity: usize, now: Instant) -> Self {
        Self {
            a,
            b,
            ab: Pipe::new(capacity),
            ba: Pipe::new(capacity),
            rng: Rng::new(seed),
            now,
        }
    }

    pub fn end(&mut self, side: Side) -> &mut End {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// `side` writes what it can. True if anything moved.
    pub fn transmit(&mut self, side: Side) -> bool {
        let (end, out) = match side {
            Side::A => (&mut self.a, &mut self.ab),
            Side::B => (&mut self.b, &mut self.ba),
        };
        let moved = end.transmit(out, &mut self.rng);
        end.events(out) || moved
    }

    /// `side` reads a chunk. True if anything happened.
    pub fn receive(&mut self, side: Side) -> bool {
        let (end, inp, out) = match side {
            Side::A => (&mut self.a, &mut self.ba, &mut self.ab),
            Side::B => (&mut self.b, &mut self.ab, &mut self.ba),
        };
        let moved = end.receive(inp, &mut self.rng, self.now);
        end.events(out) || moved
    }

    /// Acts on the events of both ends (after posting work, say).
    pub fn events(&mut self) -> bool {
        let a = self.a.events(&mut self.ab);
        let b = self.b.events(&mut self.ba);
        a || b
    }

    /// Moves time on by `d` and fires the timers that are due.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        for side in [Side::A, Side::B] {
            let now = self.now;
            let end = self.end(side);
            if end.conn.next_timeout().is_some_and(|t| t <= now) {
                end.conn.handle_timeout(now);
            }
        }
        self.events();
    }

    /// One round: both write, both read, in random order. True if anything
    /// happened.
    pub fn step(&mut self) -> bool {
        let mut any = self.events();
        let first = if self.rng.below(2) == 0 {
            Side::A
        } else {
            Side::B
        };
        let second = if first == Side::A { Side::B } else { Side::A };
        for side in [first, second] {
            any |= self.transmit(side);
        }
        for side in [second, first] {
            any |= self.receive(side);
        }
        any
    }

    /// `a` sends the first 10 octets of `out` (work request 10, taken
    /// whole by `b`), then its first `len` (work request 11); that second
    /// Send's wire octet `back` from its end is damaged before `b` reads
    /// it, so that `b` finds a CRC error there.
    pub fn send_good_then_damaged(&mut self, out: &Region, len: usize, back: usize) {
        self.a.send(10, out.sge(0, 10));
        self.drive();
        self.a.send(11, out.sge(0, len));
        self.transmit(Side::A);
        let n = self.ab.bytes.len();
        self.ab.bytes[n - back] ^= 0x40;
        self.drive();
    }

    /// Steps until nothing happens any more.
    pub fn drive(&mut self) {
        for _ in 0..1_000_000 {
            if !self.step() {
                return;
            }
        }
        panic!("the pair did not settle");
    }
}
