//! What a soak run counts, and the line it prints.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Counters shared by every connection of a run.
#[derive(Debug, Default)]
pub struct Counters {
    /// Sends issued and acknowledged.
    pub sends: AtomicU64,
    /// RDMA Writes issued and acknowledged.
    pub writes: AtomicU64,
    /// RDMA Reads completed and checked.
    pub reads: AtomicU64,
    /// Octets checked against the pattern, at either end.
    pub bytes_verified: AtomicU64,
    /// Octets that did not match, found at this end (counted once per
    /// operation).
    pub mismatches: AtomicU64,
    /// Operations the other end reported as not matching, or malformed.
    pub peer_mismatches: AtomicU64,
    /// Connections that failed (startup, a lost connection, a Terminate).
    pub connection_errors: AtomicU64,
    /// Operations that took longer than the bound.
    pub timeouts: AtomicU64,
    /// Connections that ran to their end and closed cleanly.
    pub connections_completed: AtomicU64,
}

/// Adds one to a counter.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Adds `n` to a counter.
pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// A run's result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Always "summary" (JSON lines carry their type).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Seconds from the first connection to the last close.
    pub seconds: f64,
    /// Connections opened.
    pub connections: u32,
    /// Connections that ran to their end and closed cleanly.
    pub connections_completed: u64,
    /// Operations completed and checked, all kinds.
    pub operations: u64,
    /// Sends.
    pub sends: u64,
    /// RDMA Writes.
    pub writes: u64,
    /// RDMA Reads.
    pub reads: u64,
    /// Octets checked against the pattern, at either end.
    pub bytes_verified: u64,
    /// Mismatches found here.
    pub mismatches: u64,
    /// Mismatches the peer reported.
    pub peer_mismatches: u64,
    /// Failed connections.
    pub connection_errors: u64,
    /// Operations past their bound.
    pub timeouts: u64,
    /// The sum of the four error counts: 0 for a good run.
    pub errors: u64,
}

impl Summary {
    /// The counters as they stand.
    pub fn from_counters(c: &Counters, seconds: f64, connections: u32) -> Self {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (sends, writes, reads) = (get(&c.sends), get(&c.writes), get(&c.reads));
        let (m, pm, ce, t) = (
            get(&c.mismatches),
            get(&c.peer_mismatches),
            get(&c.connection_errors),
            get(&c.timeouts),
        );
        Self {
            kind: "summary",
            seconds,
            connections,
            connections_completed: get(&c.connections_completed),
            operations: sends + writes + reads,
            sends,
            writes,
            reads,
            bytes_verified: get(&c.bytes_verified),
            mismatches: m,
            peer_mismatches: pm,
            connection_errors: ce,
            timeouts: t,
            errors: m + pm + ce + t,
        }
    }

    /// The summary as one line, JSON or text.
    pub fn line(&self, json: bool) -> String {
        if json {
            return serde_json::to_string(self).unwrap_or_default();
        }
        format!(
            "soak: {:.1} s, {} connections ({} completed), {} operations ({} Send, {} Write, \
             {} Read), {} octets verified, errors {} (mismatches {}, reported by the peer {}, \
             connections {}, timeouts {})",
            self.seconds,
            self.connections,
            self.connections_completed,
            self.operations,
            self.sends,
            self.writes,
            self.reads,
            self.bytes_verified,
            self.errors,
            self.mismatches,
            self.peer_mismatches,
            self.connection_errors,
            self.timeouts
        )
    }
}
