//! Whole RDMA operations rebuilt from their PDUs, and each connection's
//! statistics of them.
//!
//! A Send is all its segments (one MSN on QN 0) up to the one with L set;
//! an RDMA Write is its tagged segments up to L; an RDMA Read is the
//! Request and every Response segment, up to the last, timed from the
//! Request to the last Response as the capture saw them. The assembly
//! runs in the crate's tracker (`track`); the figures here are kept in bounded memory:
//! a throughput series whose interval doubles as the capture grows, and a
//! latency histogram ([`hdrhistogram`]) instead of every sample.

use hdrhistogram::Histogram;
use iwarp_proto::memory::STag;
use iwarp_proto::rdmap::Opcode;

/// A whole operation.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Operation {
    /// What it was.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub kind: OperationKind,
    /// Payload octets it moved.
    pub octets: u64,
    /// DDP segments it took (Read: the Response segments).
    pub segments: u64,
    /// The frame of its first PDU.
    pub first_frame: u64,
    /// Seconds from its first PDU to its last (Read: from the Request to
    /// the last Response).
    pub duration: f64,
    /// Whether its last segment was seen.
    pub complete: bool,
}

/// The kinds of operation, with what names their target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "operation", rename_all = "snake_case")
)]
pub enum OperationKind {
    /// A Send of any of the four kinds.
    Send {
        /// Its MSN on QN 0.
        msn: u32,
        /// Send with Solicited Event.
        solicited: bool,
        /// The STag it invalidates (Send with Invalidate).
        #[cfg_attr(
            feature = "serde",
            serde(
                skip_serializing_if = "Option::is_none",
                serialize_with = "crate::ser::stag_opt"
            )
        )]
        invalidate: Option<STag>,
    },
    /// An RDMA Write.
    Write {
        /// The data sink.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        stag: STag,
        /// Where it starts.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::to"))]
        to: u64,
    },
    /// An RDMA Read (src is the requester).
    Read {
        /// Its Request's MSN on QN 1.
        msn: u32,
        /// The requester's sink.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        sink_stag: STag,
        /// The responder's source.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        source_stag: STag,
        /// Octets asked for.
        size: u32,
    },
}

impl OperationKind {
    /// The kind, without its fields.
    pub fn class(&self) -> OperationClass {
        match self {
            Self::Send { .. } => OperationClass::Send,
            Self::Write { .. } => OperationClass::Write,
            Self::Read { .. } => OperationClass::Read,
        }
    }

    /// The kind of Send a Send opcode is.
    pub fn send(op: Opcode, msn: u32, invalidate: Option<STag>) -> Self {
        Self::Send {
            msn,
            solicited: matches!(op, Opcode::SendSolicited | Opcode::SendSolicitedInvalidate),
            invalidate,
        }
    }
}

/// Send, Write or Read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum OperationClass {
    /// Sends.
    Send,
    /// RDMA Writes.
    Write,
    /// RDMA Reads.
    Read,
}

impl std::fmt::Display for OperationClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Send => "Send",
            Self::Write => "RDMA Write",
            Self::Read => "RDMA Read",
        })
    }
}

/// Operations of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ClassCount {
    /// Complete operations.
    pub count: u64,
    /// Their payload octets.
    pub octets: u64,
    /// Operations whose last segment was never seen.
    pub incomplete: u64,
}

/// Read latency percentiles, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Latency {
    /// Reads timed.
    pub count: u64,
    /// The fastest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// The slowest.
    pub max: f64,
}

/// A connection's operations: by class, throughput over time, Read
/// latency.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct OperationSummary {
    /// Sends, Writes and Reads (in that order).
    pub classes: [ClassCount; 3],
    /// Seconds from the first operation's start to the last one's end.
    pub span: f64,
    /// Seconds per throughput interval.
    pub interval: f64,
    /// Payload octets completed in each interval, from the first
    /// operation's start.
    pub throughput: Vec<u64>,
    /// Read latency (Request to last Response), when Reads were timed.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub read_latency: Option<Latency>,
}

impl OperationSummary {
    /// Octets per second over the span.
    pub fn mean_throughput(&self) -> f64 {
        let octets: u64 = self.classes.iter().map(|c| c.octets).sum();
        if self.span > 0.0 {
            octets as f64 / self.span
        } else {
            0.0
        }
    }
}

/// Most throughput intervals kept: the interval doubles beyond this.
pub const MAX_INTERVALS: usize = 64;

/// The smallest throughput interval, in seconds.
const BASE_INTERVAL: f64 = 0.001;

/// Accumulates a connection's operations in bounded memory.
#[derive(Debug, Clone)]
pub struct OperationStats {
    classes: [ClassCount; 3],
    start: Option<f64>,
    end: f64,
    interval: f64,
    buckets: Vec<u64>,
    /// Read latencies in nanoseconds, once there is one.
    latency: Option<Histogram<u64>>,
}

impl Default for OperationStats {
    fn default() -> Self {
        Self::new()
    }
}

impl OperationStats {
    /// Nothing counted.
    pub fn new() -> Self {
        Self {
            classes: [ClassCount::default(); 3],
            start: None,
            end: 0.0,
            interval: BASE_INTERVAL,
            buckets: Vec::new(),
            latency: None,
        }
    }

    /// Counts an operation that ended at `end` seconds.
    pub fn add(&mut self, op: &Operation, end: f64) {
        let class = &mut self.classes[op.kind.class() as usize];
        if !op.complete {
            class.incomplete += 1;
            return;
        }
        class.count += 1;
        class.octets += op.octets;
        let begin = end - op.duration;
        let start = *self.start.get_or_insert(begin);
        self.end = self.end.max(end);
        let mut at = ((end - start).max(0.0) / self.interval) as usize;
        while at >= MAX_INTERVALS {
            self.coarsen();
            at = ((end - start).max(0.0) / self.interval) as usize;
        }
        if self.buckets.len() <= at {
            self.buckets.resize(at + 1, 0);
        }
        self.buckets[at] += op.octets;
        if op.kind.class() == OperationClass::Read {
            // 1 ns to an hour, two significant digits (1%): about 34 KiB,
            // only for connections that have Reads.
            let h = self.latency.get_or_insert_with(|| {
                Histogram::new_with_bounds(1, 3_600_000_000_000, 2)
                    .expect("constant histogram bounds are valid")
            });
            let ns = (op.duration * 1e9).round().max(1.0) as u64;
            let _ = h.record(ns.min(h.high()));
        }
    }

    /// Doubles the interval, merging pairs of buckets.
    fn coarsen(&mut self) {
        self.interval *= 2.0;
        let merged: Vec<u64> = self.buckets.chunks(2).map(|p| p.iter().sum()).collect();
        self.buckets = merged;
    }

    /// The figures.
    pub fn summary(&self) -> OperationSummary {
        // The middle of each value's bucket: a single sample reads as
        // itself rather than as its bucket's bounds.
        let secs = |h: &Histogram<u64>, ns: u64| h.median_equivalent(ns) as f64 / 1e9;
        OperationSummary {
            classes: self.classes,
            span: self.start.map_or(0.0, |s| (self.end - s).max(0.0)),
            interval: self.interval,
            throughput: self.buckets.clone(),
            read_latency: self.latency.as_ref().map(|h| Latency {
                count: h.len(),
                min: secs(h, h.min()),
                p50: secs(h, h.value_at_quantile(0.5)),
                p90: secs(h, h.value_at_quantile(0.9)),
                p99: secs(h, h.value_at_quantile(0.99)),
                max: secs(h, h.max()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: OperationKind, octets: u64, duration: f64) -> Operation {
        Operation {
            kind,
            octets,
            segments: 1,
            first_frame: 1,
            duration,
            complete: true,
        }
    }

    #[test]
    fn throughput_intervals_double_and_latency_is_kept() {
        let mut s = OperationStats::new();
        let write = OperationKind::Write {
            stag: STag(1),
            to: 0,
        };
        for i in 0..1000 {
            s.add(&op(write, 1000, 0.0), f64::from(i) * 0.001);
        }
        let read = OperationKind::Read {
            msn: 1,
            sink_stag: STag(1),
            source_stag: STag(2),
            size: 10,
        };
        for us in [10.0, 20.0, 30.0, 1000.0] {
            s.add(&op(read, 10, us * 1e-6), 1.0);
        }
        let sum = s.summary();
        assert!(sum.throughput.len() <= MAX_INTERVALS);
        assert_eq!(sum.throughput.iter().sum::<u64>(), 1_000_040);
        assert_eq!(sum.classes[1].count, 1000);
        let l = sum.read_latency.unwrap();
        assert_eq!(l.count, 4);
        assert!((l.p50 - 20e-6).abs() < 1e-7, "{l:?}");
        assert!((l.max - 1e-3).abs() < 1e-5, "{l:?}");
    }
}
