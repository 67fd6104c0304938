//! The transmit half of a connection: ULPDUs from the queue pair, framed
//! into batches for one vectored write each, and what is left of a batch
//! the socket took only part of.
//!
//! Segments are taken from the queue pair in batches (up to
//! [`MAX_BATCH_OCTETS`] or [`MAX_BATCH_ULPDUS`]) and framed into a reusable
//! [`WireBatch`] whose pieces borrow the payload straight from the
//! registered regions. The regions are locked only while the runtime
//! writes (inside [`Connection::poll_transmit`](super::Connection::poll_transmit)),
//! and a batch written only in part stays pending until the rest is.
//! Nothing here allocates once the batch and the pending list have grown
//! to their working size.

use std::io::IoSlice;

use arrayvec::ArrayVec;

use crate::framing::{AnyFramer, Framer, WireBatch};
use crate::memory::AccessViolation;
use crate::rdmap::{LockedTransmit, QueuePair, Transmit};

/// Octets gathered into one batch at most (before framing).
pub const MAX_BATCH_OCTETS: usize = 256 * 1024;
/// ULPDUs gathered into one batch at most.
pub const MAX_BATCH_ULPDUS: usize = 32;
/// Slices handed to one vectored write at most (Linux's `IOV_MAX` is 1024).
pub const MAX_IOV: usize = 1024;
/// Octets written before the EMSS is first read again, and the longest
/// interval between two reads.
const EMSS_FIRST_CHECK: u64 = 64 * 1024;
const EMSS_CHECK_MAX: u64 = 16 << 20;

/// The transmit half of a connection's framing state.
#[derive(Debug)]
pub(super) struct TxHalf {
    pub(super) framer: AnyFramer,
    /// A responder sends nothing until it has received a PDU
    /// (RFC 5044 §7.1.2 rule 4).
    pub(super) held: bool,
    batch: WireBatch,
    pending: Vec<Transmit>,
    /// Octets of `batch` already written.
    written: usize,
    /// Octets written over the connection's life.
    pub(super) octets: u64,
    /// When `octets` reaches this, the EMSS is wanted again.
    emss_check_at: u64,
    /// The EMSS the current MULPDU was computed from.
    pub(super) emss: usize,
}

impl TxHalf {
    pub(super) fn new(framer: AnyFramer, held: bool, emss: usize) -> Self {
        Self {
            framer,
            held,
            batch: WireBatch::new(),
            pending: Vec::with_capacity(MAX_BATCH_ULPDUS),
            written: 0,
            octets: 0,
            emss_check_at: EMSS_FIRST_CHECK,
            emss,
        }
    }

    /// Whether a batch is partly written.
    pub(super) fn is_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether enough has been written since the EMSS was last read, and
    /// the next batch is still to be taken (the MULPDU changes between
    /// batches).
    pub(super) fn wants_emss(&self) -> bool {
        self.octets >= self.emss_check_at && self.pending.is_empty()
    }

    /// Follows a fresh EMSS with the MULPDU (draft-ietf-rddp-mpa-01
    /// §5.3.2: "If the TCP implementation needs to adjust EMSS…, the
    /// MULPDU value is changed accordingly"). Linux starts a connection
    /// with the MSS bounded by half the peer's window and raises it as the
    /// window opens (loopback: 32741, then 65483 after about 1 MiB), so
    /// checks come at doubling intervals, then every 16 MiB.
    pub(super) fn follow_emss(&mut self, qp: &mut QueuePair, emss: usize) {
        self.emss_check_at = (self.octets * 2)
            .min(self.octets + EMSS_CHECK_MAX)
            .max(EMSS_FIRST_CHECK);
        if emss != self.emss {
            self.emss = emss;
            qp.set_mulpdu(self.framer.mulpdu(emss));
        }
    }

    /// Takes a batch of segments from the queue pair and frames it.
    /// Returns false when there is nothing to send (or rule 4 holds it).
    pub(super) fn gather(&mut self, qp: &mut QueuePair) -> bool {
        if self.held {
            return false;
        }
        if !qp.may_transmit() {
            // Tests hold the queue pair to its word: it has nothing, and
            // asking changes nothing when it has nothing.
            #[cfg(debug_assertions)]
            assert!(qp.poll_transmit().is_none(), "may_transmit was wrong");
            return false;
        }
        let mut octets = 0;
        while self.pending.len() < MAX_BATCH_ULPDUS && octets < MAX_BATCH_OCTETS {
            let Some(t) = qp.poll_transmit() else { break };
            octets += t.len();
            self.pending.push(t);
        }
        if self.pending.is_empty() {
            return false;
        }
        self.batch.clear();
        self.written = 0;
        let mut framed = 0;
        for t in &self.pending {
            let Ok(locked) = t.lock() else { break };
            let [header, payload] = locked.slices();
            // A segment never exceeds the MULPDU, itself at most 64768
            // octets, so framing cannot refuse it.
            if self
                .framer
                .frame(header, &[payload], &mut self.batch)
                .is_err()
            {
                break;
            }
            framed += 1;
        }
        if framed < self.pending.len() {
            // A source region was invalidated after the queue pair handed
            // the segment out: what came before it still goes, the queue
            // pair turns the rest into a Terminate.
            self.pending.truncate(framed);
            qp.abort_transmit();
            if self.pending.is_empty() {
                return self.gather(qp);
            }
        }
        true
    }

    /// Calls `write` with the unwritten octets of the pending batch as
    /// slices, payload borrowed from the regions, which stay locked for
    /// the call. Fails if a source region was invalidated since the batch
    /// was framed. A batch that borrows nothing (every payload copied in
    /// when it was framed, its region locked then: small payloads, and
    /// all with markers) locks nothing: its octets were read already.
    pub(super) fn write_with<R>(
        &self,
        write: impl FnOnce(&[IoSlice<'_>]) -> R,
    ) -> Result<R, AccessViolation> {
        let mut guards: ArrayVec<LockedTransmit<'_>, MAX_BATCH_ULPDUS> = ArrayVec::new();
        if self.batch.borrows() {
            for t in &self.pending {
                guards.push(t.lock()?);
            }
        }
        // The batch holds the headers; it refers to the payloads.
        let mut slices: ArrayVec<&[u8], MAX_BATCH_ULPDUS> = ArrayVec::new();
        for g in &guards {
            slices.push(g.slices()[1]);
        }
        let mut iov: ArrayVec<IoSlice<'_>, MAX_IOV> = ArrayVec::new();
        let mut skip = self.written;
        for piece in self.batch.pieces(&slices) {
            if skip >= piece.len() {
                skip -= piece.len();
                continue;
            }
            if iov.is_full() {
                break;
            }
            iov.push(IoSlice::new(&piece[skip..]));
            skip = 0;
        }
        Ok(write(&iov))
    }

    /// PDUs whose every octet was written: all those framed, less the
    /// pending batch's.
    pub(super) fn pdus_written(&self) -> u64 {
        self.framer.pdus_sent() - self.pending.len() as u64
    }

    /// Records `n` more octets of the pending batch as written. Returns
    /// true when that completed the batch.
    pub(super) fn written(&mut self, n: usize) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        self.written += n;
        self.octets += n as u64;
        if self.written < self.batch.wire_len() {
            return false;
        }
        self.pending.clear();
        self.batch.clear();
        self.written = 0;
        true
    }
}
