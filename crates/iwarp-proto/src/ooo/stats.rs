//! What an out-of-order receiver counts: what came, what it placed ahead
//! of delivery, and what it held compared with an in-order reassembly
//! buffer fed the same segments.

/// Counters of an [`super::OooReceiver`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OooStats {
    /// Segments received.
    pub segments: u64,
    /// Octets they carried.
    pub octets: u64,
    /// Octets received again (already in order, or held).
    pub duplicate_octets: u64,
    /// New octets that arrived beyond a hole: what an in-order receiver
    /// must hold until the hole fills.
    pub ahead_octets: u64,
    /// PDUs placed ahead of delivery.
    pub early_pdus: u64,
    /// Their octets on the wire.
    pub early_octets: u64,
    /// Their payload octets, placed into their buffers on arrival.
    pub early_payload: u64,
    /// PDUs placed ahead of delivery that turned out not to start at a
    /// PDU boundary, withdrawn and left for the sender to send again.
    pub withdrawn: u64,
    /// Octets dropped for want of window or budget.
    pub dropped_octets: u64,
    /// Octets held unplaced now (waiting for a hole, or an incomplete PDU).
    pub held_octets: usize,
    /// The most held at once.
    pub peak_held_octets: usize,
    /// Octets an in-order reassembly buffer would hold now: everything
    /// received beyond the in-order point, placed or not.
    pub reassembly_octets: usize,
    /// The most it would have held at once.
    pub peak_reassembly_octets: usize,
    /// Pieces held now (runs of octets, and records of placed PDUs).
    pub records: usize,
    /// The most pieces held at once.
    pub peak_records: usize,
}
