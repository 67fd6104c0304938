//! Test harness: queue pairs wired back to back through an in-memory
//! framing that hands each ULPDU over in random pieces.

#![allow(dead_code)]

pub mod conn;

use std::sync::Arc;

use iwarp_proto::framing::UlpduSink;
use iwarp_proto::memory::{
    Access, MemoryBuffer, MemoryTable, ProtectionDomain, RegionSpec, STag, StreamId,
};
use iwarp_proto::rdmap::{Completion, Event, ProtocolError, QueuePair, QueuePairConfig, Sge};

/// The simulator's small deterministic generator (splitmix64).
pub use iwarp_proto::sim::Rng;

/// Octets around every test region, checked untouched afterwards.
pub const CANARY: u8 = 0xee;
pub const GUARD: usize = 64;

/// A region inside a larger buffer with canary octets on both sides.
#[derive(Debug, Clone)]
pub struct Region {
    pub stag: STag,
    pub buffer: MemoryBuffer,
    pub base_to: u64,
    pub len: usize,
}

impl Region {
    pub fn sge(&self, at: usize, len: usize) -> Sge {
        Sge {
            stag: self.stag,
            to: self.base_to + at as u64,
            len: len as u32,
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.buffer.read()[GUARD..GUARD + self.len].to_vec()
    }

    pub fn fill(&self, data: &[u8]) {
        self.buffer.write()[GUARD..GUARD + data.len()].copy_from_slice(data);
    }

    /// Panics if an octet outside the region changed.
    pub fn assert_canaries(&self) {
        let b = self.buffer.read();
        assert!(
            b[..GUARD].iter().all(|&x| x == CANARY),
            "canary before region"
        );
        assert!(
            b[GUARD + self.len..].iter().all(|&x| x == CANARY),
            "canary after region"
        );
    }
}

pub fn register(
    table: &MemoryTable,
    pd: ProtectionDomain,
    len: usize,
    base_to: u64,
    access: Access,
    fill: u8,
) -> Region {
    let mut v = vec![CANARY; GUARD + len + GUARD];
    v[GUARD..GUARD + len].fill(fill);
    let buffer = MemoryBuffer::from(v);
    let spec = RegionSpec {
        pd,
        buffer: buffer.clone(),
        offset: GUARD,
        len,
        base_to,
        access,
        stream: None,
        key: Some(0x42),
    };
    let stag = table.register(spec).unwrap();
    Region {
        stag,
        buffer,
        base_to,
        len,
    }
}

/// One end: a memory table, a domain, a queue pair.
pub struct Node {
    pub table: Arc<MemoryTable>,
    pub pd: ProtectionDomain,
    pub qp: QueuePair,
    pub completions: Vec<Completion>,
    pub events: Vec<Event>,
}

impl Node {
    pub fn new(stream: u64, tweak: impl FnOnce(&mut QueuePairConfig)) -> Self {
        // Seeded: every run sees the same STags.
        let table = Arc::new(MemoryTable::with_seed(stream));
        let pd = table.alloc_pd();
        let mut cfg = QueuePairConfig::new(pd, StreamId(stream));
        tweak(&mut cfg);
        let qp = QueuePair::new(cfg, Arc::clone(&table));
        Self {
            table,
            pd,
            qp,
            completions: Vec::new(),
            events: Vec::new(),
        }
    }

    pub fn region(&self, len: usize, base_to: u64, access: Access, fill: u8) -> Region {
        register(&self.table, self.pd, len, base_to, access, fill)
    }

    pub fn drain(&mut self) {
        while let Some(c) = self.qp.poll_completion() {
            self.completions.push(c);
        }
        while let Some(e) = self.qp.poll_event() {
            self.events.push(e);
        }
    }

    /// Everything the queue pair wants to send now, as whole ULPDUs.
    pub fn transmit_all(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(t) = self.qp.poll_transmit() {
            assert!(t.len() <= self.qp.mulpdu(), "segment above MULPDU");
            out.push(t.to_vec().expect("source valid"));
        }
        out
    }
}

/// Hands one ULPDU to a sink in random pieces, as a framing layer does.
pub fn feed<S: UlpduSink>(sink: &mut S, ulpdu: &[u8], rng: &mut Rng) -> Result<(), S::Error> {
    sink.ulpdu_begin(ulpdu.len())?;
    let mut rest = ulpdu;
    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(300));
        sink.ulpdu_data(&rest[..n])?;
        rest = &rest[n..];
    }
    sink.ulpdu_end()
}

/// Two nodes back to back.
pub struct Pair {
    pub a: Node,
    pub b: Node,
    pub rng: Rng,
    pub errors: Vec<ProtocolError>,
}

impl Pair {
    pub fn new(seed: u64) -> Self {
        Self::with(seed, |_| {})
    }

    pub fn with(seed: u64, tweak: impl Fn(&mut QueuePairConfig)) -> Self {
        Self {
            a: Node::new(1, &tweak),
            b: Node::new(2, &tweak),
            rng: Rng::new(seed),
            errors: Vec::new(),
        }
    }

    /// Moves at most `burst` ULPDUs each way; true if anything moved.
    pub fn step(&mut self, burst: usize) -> bool {
        let mut moved = false;
        for dir in 0..2 {
            let (src, dst) = if dir == 0 {
                (&mut self.a, &mut self.b)
            } else {
                (&mut self.b, &mut self.a)
            };
            for _ in 0..burst {
                let Some(t) = src.qp.poll_transmit() else {
                    break;
                };
                let v = t.to_vec().expect("source valid");
                drop(t);
                moved = true;
                if let Err(e) = feed(&mut dst.qp, &v, &mut self.rng) {
                    self.errors.push(e);
                }
            }
        }
        self.a.drain();
        self.b.drain();
        moved
    }

    /// Steps until nothing moves.
    pub fn drive(&mut self) {
        for _ in 0..1_000_000 {
            let burst = 1 + self.rng.below(4);
            if !self.step(burst) {
                return;
            }
        }
        panic!("pair did not settle");
    }
}

/// Test data: a pattern that differs per `seed`, so that misplaced octets
/// show.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// One end of a full stack (engine over a real framing layer), as the
/// back-to-back tests drive it.
pub trait Wire {
    /// Frames everything the queue pair has to send onto `wire`.
    fn pump_out(&mut self, wire: &mut Vec<u8>);
    /// Feeds received stream octets.
    fn pump_in(&mut self, chunk: &[u8]);
    /// The engine and its regions.
    fn node(&mut self) -> &mut Node;
}

/// Runs both ends until quiet, moving stream octets in random prefixes and
/// random chunks: the channel splits and merges what TCP would carry.
pub fn drive<W: Wire>(a: &mut W, b: &mut W, rng: &mut Rng) {
    let mut ab = Vec::new();
    let mut ba = Vec::new();
    for _ in 0..1_000_000 {
        a.pump_out(&mut ab);
        b.pump_out(&mut ba);
        if ab.is_empty() && ba.is_empty() {
            break;
        }
        for (wire, dst) in [(&mut ab, &mut *b), (&mut ba, &mut *a)] {
            let mut take = if wire.is_empty() {
                0
            } else {
                1 + rng.below(wire.len())
            };
            if rng.below(4) == 0 {
                take = wire.len();
            }
            let mut pos = 0;
            while pos < take {
                let n = 1 + rng.below((take - pos).min(4000));
                dst.pump_in(&wire[pos..pos + n]);
                pos += n;
            }
            wire.drain(..take);
        }
    }
    a.node().drain();
    b.node().drain();
}

/// An operation of the random interleavings.
#[derive(Debug, Clone)]
pub enum Op {
    /// A Send of this many octets.
    Send(usize),
    /// An RDMA Write of this many octets.
    Write(usize),
    /// An RDMA Read of this many octets.
    Read(usize),
}

impl Op {
    /// Its length.
    pub fn len(&self) -> usize {
        match self {
            Op::Send(l) | Op::Write(l) | Op::Read(l) => *l,
        }
    }
}

/// Random operations of 0 to 40000 octets (many segments at small MULPDUs).
pub fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0usize..40_000).prop_map(Op::Send),
        (0usize..40_000).prop_map(Op::Write),
        (0usize..40_000).prop_map(Op::Read),
    ]
}

/// Cases for a property test: `default`, or `PROPTEST_CASES` when it is
/// set, so that one variable runs every property test longer (a config
/// that names its count, as `with_cases` does, would ignore it).
/// (The crate's own unit tests have the same in `test_util`, which
/// integration tests cannot reach.)
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
