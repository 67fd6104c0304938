//! The link between sender and receiver: it loses, delays (and so
//! reorders) and duplicates segments, in slots of simulated time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::rng::Rng;

/// A TCP segment: its sequence number and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Sequence number of its first octet.
    pub seq: u32,
    /// Its payload.
    pub octets: Vec<u8>,
}

/// What the link does to segments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkModel {
    /// The chance that a segment is lost.
    pub loss: f64,
    /// Reorder depth: a segment is held back up to this many slots, so it
    /// can arrive after that many segments sent after it.
    pub reorder: usize,
    /// The chance that a segment arrives twice.
    pub duplicate: f64,
    /// The largest segment payload (TCP's MSS).
    pub mss: usize,
    /// The chance that a retransmission timeout sends everything not yet
    /// acknowledged again, held by the receiver or not, as a sender that
    /// does not use SACK would; otherwise only the holes are sent again.
    pub resend_all: f64,
}

impl LinkModel {
    /// A link that delivers everything in order.
    pub const PERFECT: Self = Self {
        loss: 0.0,
        reorder: 0,
        duplicate: 0.0,
        mss: 1460,
        resend_all: 0.0,
    };
}

/// A segment in flight, ordered by arrival slot, then sending order.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    due: u64,
    order: u64,
    seq: u32,
    octets: Vec<u8>,
}

/// The link: segments in flight.
#[derive(Debug)]
pub struct Link {
    model: LinkModel,
    rng: Rng,
    queue: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    /// Segments lost so far.
    pub lost: u64,
    /// Segments duplicated so far.
    pub duplicated: u64,
}

impl Link {
    /// An empty link.
    pub fn new(model: LinkModel, seed: u64) -> Self {
        Self {
            model,
            rng: Rng::new(seed),
            queue: BinaryHeap::new(),
            order: 0,
            lost: 0,
            duplicated: 0,
        }
    }

    /// The model.
    pub fn model(&self) -> LinkModel {
        self.model
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Sends `segment` at slot `now`.
    pub fn send(&mut self, segment: Segment, now: u64) {
        if self.rng.chance(self.model.loss) {
            self.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.model.duplicate) {
            self.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let due = now + 1 + self.rng.below(self.model.reorder + 1) as u64;
            self.order += 1;
            self.queue.push(Reverse(InFlight {
                due,
                order: self.order,
                seq: segment.seq,
                octets: segment.octets.clone(),
            }));
        }
    }

    /// The next segment due by slot `now`, if any.
    pub fn arrive(&mut self, now: u64) -> Option<Segment> {
        if self.queue.peek()?.0.due > now {
            return None;
        }
        let Reverse(f) = self.queue.pop()?;
        Some(Segment {
            seq: f.seq,
            octets: f.octets,
        })
    }
}
