//! A recorded run replayed against a fresh receiving end, for measuring:
//! the segments as they arrived through the out-of-order receiver, or the
//! same stream in order through the in-order receiver.

use crate::framing::Deframer;
use crate::ooo::{OooConfig, OooReceiver, OooStats};

use super::link::Segment;
use super::scenario::{run, ReceiverSide, Scenario};

/// A run's arrivals and stream, ready to replay.
#[derive(Debug)]
pub struct Replay {
    scenario: Scenario,
    trace: Vec<Segment>,
    stream: Vec<u8>,
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
        Ok(Self {
            scenario: *s,
            trace: report.trace,
            stream: report.stream,
            isn: report.isn,
            stats: report.stats,
            payload_octets: report.payload_octets,
        })
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
        for seg in &self.trace {
            let _ = rx.segment(seg.seq, &seg.octets, &mut p.0.qp);
        }
        rx.stats()
    }

    /// The stream in order, in segments of the MSS, through the in-order
    /// receiver (with an incomplete FPDU staged, as a runtime stages it);
    /// returns the octets it consumed.
    pub fn in_order(&self, mut p: Prepared) -> usize {
        let framing = self.scenario.framing.ooo();
        let mut deframer = crate::ooo::OooFraming::deframer_at(&framing, 0);
        let mut staging: Vec<u8> = Vec::new();
        let mut consumed = 0;
        for chunk in self.stream.chunks(self.scenario.link.mss.max(64)) {
            let input: &[u8] = if staging.is_empty() {
                chunk
            } else {
                staging.extend_from_slice(chunk);
                &staging
            };
            let Ok(used) = deframer.receive(input, &mut p.0.qp) else {
                break;
            };
            consumed += used;
            if staging.is_empty() {
                staging.extend_from_slice(&chunk[used..]);
            } else {
                staging.drain(..used);
            }
        }
        consumed
    }
}
