//! A recorded run replayed against a fresh receiving end, for measuring:
//! the segments as they arrived through the out-of-order receiver, or the
//! same stream in order through the in-order receiver.

use std::collections::BTreeMap;

use crate::framing::{AnyDeframer, Deframer};
use crate::ooo::{OooConfig, OooFraming, OooReceiver, OooStats};

use super::scenario::{run, ReceiverSide, Scenario};

/// A run's arrivals and stream, ready to replay.
#[derive(Debug)]
pub struct Replay {
    scenario: Scenario,
    /// The arrivals, in order: sequence number and the range of their
    /// octets in `arrived`.
    trace: Vec<(u32, usize, usize)>,
    /// The arrivals' octets back to back, as a receive ring holds them
    /// (segments copied one by one as the simulation made them would lie
    /// scattered among its other allocations).
    arrived: Vec<u8>,
    stream: Vec<u8>,
    /// The stream as a TCP receiver hands it on: (start, end) pieces.
    chunks: Vec<(usize, usize)>,
    isn: u32,
    /// What the recorded run's receiver counted.
    pub stats: OooStats,
    /// Payload octets the run carried.
    pub payload_octets: u64,
}

/// A fresh receiving end, set up as the recorded run's was.
#[derive(Debug)]
pub struct Prepared(ReceiverSide);

impl Replay {
    /// Records `s`, whose receiver must not act on what it receives (no
    /// RDMA Reads, every receive posted from the start), so that a replay
    /// meets the same state.
    pub fn record(s: &Scenario) -> Result<Self, String> {
        let w = s.workload;
        if w.reads > 0 || w.recv_ahead < w.ops {
            return Err("a replay needs no Reads and every receive posted".into());
        }
        let report = run(s, true);
        if let Some(m) = report.mismatch {
            return Err(m);
        }
        let mut arrived = Vec::with_capacity(report.trace.iter().map(|t| t.octets.len()).sum());
        let trace = report
            .trace
            .iter()
            .map(|t| {
                let start = arrived.len();
                arrived.extend_from_slice(&t.octets);
                (t.seq, start, arrived.len())
            })
            .collect();
        let mut replay = Self {
            scenario: *s,
            trace,
            arrived,
            chunks: Vec::new(),
            stream: report.stream,
            isn: report.isn,
            stats: report.stats,
            payload_octets: report.payload_octets,
        };
        let mut chunks = Vec::new();
        let mut at = 0;
        reassemble(replay.arrivals(), report.isn, |bytes| {
            chunks.push((at, at + bytes.len()));
            at += bytes.len();
        });
        replay.chunks = chunks;
        Ok(replay)
    }

    /// The arrivals in order: sequence number and octets.
    fn arrivals(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.trace
            .iter()
            .map(|&(seq, s, e)| (seq, &self.arrived[s..e]))
    }

    /// Stream octets.
    pub fn stream_octets(&self) -> usize {
        self.stream.len()
    }

    /// Segments that arrived (duplicates and retransmissions included).
    pub fn segments(&self) -> usize {
        self.trace.len()
    }

    /// A fresh receiving end.
    pub fn prepare(&self) -> Prepared {
        let w = &self.scenario.workload;
        let mut side = ReceiverSide::new(w, w.recv_ahead.max(1));
        for _ in 0..w.recv_ahead {
            side.post_recv(w.recv_ahead.max(1));
        }
        Prepared(side)
    }

    /// The arrivals through the out-of-order receiver; returns its
    /// counters.
    pub fn out_of_order(&self, mut p: Prepared) -> OooStats {
        let config = OooConfig {
            window: self.scenario.window,
            budget: self.scenario.window + (self.scenario.window >> 2) + (64 << 10),
        };
        let mut rx = OooReceiver::new(self.scenario.framing.ooo(), self.isn, config);
        for (seq, octets) in self.arrivals() {
            let _ = rx.segment(seq, octets, &mut p.0.qp);
        }
        rx.stats()
    }

    /// The stream in order, in the pieces a TCP receiver hands on as the
    /// arrivals make them contiguous (with the same segment boundaries),
    /// through the in-order receiver (with an incomplete FPDU staged, as a
    /// runtime stages it); returns the octets it consumed.
    pub fn in_order(&self, mut p: Prepared) -> usize {
        let mut rx = InOrder::new(&self.scenario);
        for &(s, e) in &self.chunks {
            rx.feed(&self.stream[s..e], &mut p.0.qp);
        }
        rx.consumed
    }

    /// The arrivals through a reassembly buffer (what a TCP receiver
    /// without out-of-order placement keeps: segments beyond a hole, held
    /// until it fills) and then the in-order receiver; returns the octets
    /// it consumed.
    pub fn reassembled(&self, mut p: Prepared) -> usize {
        let mut rx = InOrder::new(&self.scenario);
        reassemble(self.arrivals(), self.isn, |bytes| {
            rx.feed(bytes, &mut p.0.qp)
        });
        rx.consumed
    }
}

/// Passes the octets of `trace` to `deliver` in order, as a TCP receiver
/// does: a segment beyond a hole is held until the hole fills; what was
/// delivered already is dropped.
fn reassemble<'a>(
    trace: impl Iterator<Item = (u32, &'a [u8])>,
    isn: u32,
    mut deliver: impl FnMut(&[u8]),
) {
    let mut next = 0u64;
    let mut ahead: BTreeMap<u64, &[u8]> = BTreeMap::new();
    for (seq, octets) in trace {
        let gap = seq.wrapping_sub(isn.wrapping_add(next as u32)) as i32;
        let start = next as i64 + i64::from(gap);
        let end = start + octets.len() as i64;
        if end <= next as i64 {
            continue;
        }
        if start > next as i64 {
            ahead.entry(start as u64).or_insert(octets);
            continue;
        }
        deliver(&octets[(next as i64 - start) as usize..]);
        next = end as u64;
        while let Some(e) = ahead.first_entry() {
            let s = *e.key();
            if s > next {
                break;
            }
            let v = e.remove();
            if s + v.len() as u64 > next {
                deliver(&v[(next - s) as usize..]);
                next = s + v.len() as u64;
            }
        }
    }
}

/// The in-order receiver with its staging buffer, as a runtime drives it.
struct InOrder {
    deframer: AnyDeframer,
    staging: Vec<u8>,
    consumed: usize,
    failed: bool,
}

impl InOrder {
    fn new(s: &Scenario) -> Self {
        Self {
            deframer: s.framing.ooo().deframer_at(0),
            staging: Vec::new(),
            consumed: 0,
            failed: false,
        }
    }

    fn feed(&mut self, chunk: &[u8], qp: &mut crate::rdmap::QueuePair) {
        if self.failed {
            return;
        }
        let input: &[u8] = if self.staging.is_empty() {
            chunk
        } else {
            self.staging.extend_from_slice(chunk);
            &self.staging
        };
        let Ok(used) = self.deframer.receive(input, qp) else {
            self.failed = true;
            return;
        };
        self.consumed += used;
        if self.staging.is_empty() {
            self.staging.extend_from_slice(&chunk[used..]);
        } else {
            self.staging.drain(..used);
        }
    }
}
