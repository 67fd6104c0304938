//! The out-of-order receiver: TCP segments in any order in, payload placed
//! as soon as its PDU is whole and checked, messages delivered in order.
//!
//! Each segment is taken apart in three ways:
//!
//! - what continues the stream at the in-order point goes straight to the
//!   in-order path, the very deframer and [`QueuePair`] receive path the
//!   in-order receiver runs, with no copy beyond that receiver's own;
//! - what lies beyond a hole is held ([`Reorder`]), and every PDU it makes
//!   whole is checked and, if DDP can tell where its payload goes without
//!   the segments before it ([`QueuePair::early_target`]), placed there at
//!   once; only a small record of it stays;
//! - when the hole fills, the in-order path goes on through what was held:
//!   held octets through the deframer as usual, each placed PDU's record
//!   through [`QueuePair::deliver_placed`], which runs every in-order
//!   check and delivers (completions, Read Requests, Terminates, errors)
//!   exactly where the in-order receiver would.
//!
//! Where two PDUs write the same octets, the later one in the stream wins,
//! as in order ([`Overlaps`]). A placed PDU that the in-order path finds
//! not to start at a PDU boundary (a guess confirmed by a CRC that matched
//! by chance, or a peer that put a fake PDU inside a payload) is
//! withdrawn: its octets become a hole again, for the sender to send
//! again, as draft-williams-iwarp-ift-01 §8 describes; whatever it wrote
//! went only where the peer may write.
//!
//! The final memory, the completions and their order, and every error are
//! those of the in-order receiver fed the same stream, except that octets
//! placed ahead of an error that stops the stream stay placed (RFC 5041
//! §5.3 lets DDP place out of order; delivery, which stops at the error,
//! is what the ULP relies on).

use crate::ddp::header::header_len;
use crate::ddp::UNTAGGED_HEADER_LEN;
use crate::framing::{Deframer, FeedError, LlpError, UlpduSink};
use crate::memory::RegionSlice;
use crate::rdmap::{ProtocolError, QueuePair};

use super::framing::OooFraming;
use super::held::Piece;
use super::overlap::Overlaps;
use super::pdu::Pdu;
use super::reorder::{Offer, Reorder};
use super::stats::OooStats;

/// Why an out-of-order receiver stopped: the error the in-order receiver
/// would have reported (framing, or DDP/RDMAP through the queue pair).
pub type OooError<F> = FeedError<<<F as OooFraming>::Deframer as Deframer>::Error, ProtocolError>;

/// Bounds on what a receiver holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OooConfig {
    /// Octets beyond the in-order point that are accepted (the TCP receive
    /// window): later ones are dropped, to be sent again.
    pub window: usize,
    /// The most octets held unplaced beyond the in-order point, plus a
    /// fixed charge per held piece; what would exceed it is dropped.
    pub budget: usize,
}

impl Default for OooConfig {
    fn default() -> Self {
        Self {
            window: 4 << 20,
            budget: 5 << 20,
        }
    }
}

/// A PDU placed ahead of delivery: what delivering it needs.
#[derive(Debug)]
struct Record {
    ulpdu_len: usize,
    header: [u8; UNTAGGED_HEADER_LEN],
    header_len: u8,
    target: RegionSlice,
}

impl Record {
    fn range(&self) -> (usize, usize, usize) {
        let t = &self.target;
        (t.buffer().id(), t.offset(), t.offset() + t.len())
    }
}

/// The records of PDUs placed ahead of delivery, by the number their held
/// piece keeps in their stead (so that held pieces stay small): slots
/// reused, nothing allocated per PDU once warm.
#[derive(Debug, Default)]
struct Records {
    slots: Vec<Option<Record>>,
    free: Vec<u32>,
}

impl Records {
    fn put(&mut self, record: Record) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(record);
                i
            }
            None => {
                self.slots.push(Some(record));
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn take(&mut self, i: u32) -> Option<Record> {
        let r = self.slots.get_mut(i as usize)?.take()?;
        self.free.push(i);
        Some(r)
    }
}

/// The out-of-order receiver of one half-connection. See the module
/// documentation.
#[derive(Debug)]
pub struct OooReceiver<F: OooFraming> {
    reorder: Reorder<F, u32>,
    records: Records,
    deframer: F::Deframer,
    /// The in-order deframer must start afresh here before its next use:
    /// placed PDUs up to it were delivered without it.
    restart_at: Option<u64>,
    /// An incomplete PDU a verifying deframer left.
    staging: Vec<u8>,
    /// The TCP sequence number of stream offset 0.
    isn: u32,
    overlaps: Overlaps,
    skips: Vec<(usize, usize)>,
    /// DDP header octets of the ULPDU in progress still to pass in order.
    header_left: usize,
    error: Option<OooError<F>>,
    stats: OooStats,
}

impl<F: OooFraming> OooReceiver<F> {
    /// A receiver whose stream offset 0 (the first octet of full
    /// operation, where the first PDU begins) has TCP sequence number
    /// `isn`.
    pub fn new(framing: F, isn: u32, config: OooConfig) -> Self {
        Self {
            deframer: framing.deframer_at(0),
            restart_at: None,
            reorder: Reorder::new(framing, 0, config.window, config.budget),
            records: Records::default(),
            staging: Vec::new(),
            isn,
            overlaps: Overlaps::new(),
            skips: Vec::new(),
            header_left: HEADER_UNKNOWN,
            error: None,
            stats: OooStats::default(),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> OooStats {
        self.stats
    }

    /// The error that stopped the receiver, if one did.
    pub fn error(&self) -> Option<&OooError<F>> {
        self.error.as_ref()
    }

    /// The stream offset up to which every octet has reached the in-order
    /// path: what TCP acknowledges. Every PDU before it has been delivered
    /// (or stopped the stream); a PDU after it, placed or not, has not.
    //= draft-ietf-rddp-mpa-01#1.2
    //# MPA implementations that support recovery of out of order ULPDUs MUST support a mechanism
    //# to indicate the ordering of ULPDUs as the sender transmitted them and indicate when
    //# missing intermediate segments arrive.
    pub fn in_order_offset(&self) -> u64 {
        self.reorder.next()
    }

    /// The acknowledgment number: the sequence number of the first octet
    /// not yet received in order.
    pub fn ack(&self) -> u32 {
        self.isn.wrapping_add(self.reorder.next() as u32)
    }

    /// The stream offset ranges held beyond the in-order point (placed or
    /// not): what a TCP receiver reports in SACK blocks. A withdrawn PDU's
    /// range drops out of it, so the sender sends it again.
    pub fn held_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.reorder.held().ranges()
    }

    /// Octets held unplaced now (beyond the in-order point, and an
    /// incomplete PDU at it).
    pub fn held_octets(&self) -> usize {
        self.reorder.held().octets() + self.staging.len()
    }

    /// The stream offset of TCP sequence number `seq`, nearest the
    /// in-order point (negative: before the stream began).
    fn offset_of(&self, seq: u32) -> i64 {
        let next = self.reorder.next();
        let next_seq = self.isn.wrapping_add(next as u32);
        next as i64 + i64::from(seq.wrapping_sub(next_seq) as i32)
    }

    /// A TCP segment: sequence number `seq`, payload `octets`, as soon as
    /// it arrives, in whatever order. Places what it can, delivers what it
    /// completes, into and through `qp`. The sequence number gives each
    /// PDU its place in the sender's order.
    //= draft-ietf-rddp-mpa-01#3.1.2
    //# When an MPA receive implementation and the MPA-aware receive side TCP implementation
    //# support handling out of order ULPDUs, the TCP receive implementation SHOULD be enabled to:
    //# * Pass incoming TCP segments to MPA as soon as they have been received and validated, even
    //# if not received in order.
    //= draft-ietf-rddp-mpa-01#3.1.2
    //# When MPA is enabled above an MPA-aware TCP, TCP SHOULD enable the in and out of order
    //# passing of data, and the separate ordering information as described above.
    //= draft-williams-iwarp-ift-01#6
    //# Note that this does not preclude a merged layer implementation from placing data out of
    //# order, but any such implementation MUST be functionally equivalent to a layered
    //# implementation in which TCP delivers all data in order.
    //= draft-ietf-rddp-mpa-01#3.2
    //# If an MPA implementation supports passing out of order ULPDUs to DDP, the MPA
    //# implementation SHOULD: * Pass each ULPDU with its length to DDP as soon as it has been
    //# fully received and validated. * Provide a mechanism to indicate the ordering of ULPDUs as
    //# the sender transmitted them.
    //= rfc5041#3
    //# The LLP MAY provide the incoming segments out of order for Placement, but if it does, it
    //# MUST also provide information that specifies what the sender specified order was.
    pub fn segment(
        &mut self,
        seq: u32,
        octets: &[u8],
        qp: &mut QueuePair,
    ) -> Result<(), OooError<F>> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.stats.segments += 1;
        self.stats.octets += octets.len() as u64;
        let next = self.reorder.next() as i64;
        let start = self.offset_of(seq);
        let end = start + octets.len() as i64;
        if end <= next || octets.is_empty() {
            self.stats.duplicate_octets += octets.len() as u64;
            return Ok(());
        }
        let mut from = 0usize;
        if start <= next {
            // What continues the stream goes straight to the in-order path,
            // up to the first octet held already.
            from = (next - start) as usize;
            self.stats.duplicate_octets += from as u64;
            let held = self
                .reorder
                .held()
                .first_start()
                .map_or(i64::MAX, |s| s as i64);
            let direct_end = (end.min(held) - start) as usize;
            if direct_end > from {
                self.reorder.advance((direct_end - from) as u64);
                self.feed(&octets[from..direct_end], qp)?;
                from = direct_end;
            }
        }
        if from < octets.len() {
            let at = (start + from as i64) as u64;
            let before = self.reorder.held().covered();
            let guess = (from == 0).then_some(at);
            let mut early = Early {
                qp,
                overlaps: &mut self.overlaps,
                skips: &mut self.skips,
                stats: &mut self.stats,
                records: &mut self.records,
                keep: self.reorder.framing().keeps_early_placements(),
                since: self.reorder.next(),
            };
            self.reorder
                .insert(at, &octets[from..], guess, &mut |pdu| early.place(pdu));
            let after = self.reorder.held().covered();
            self.stats.ahead_octets += after.saturating_sub(before);
        }
        self.drain(qp)?;
        self.update_peaks();
        Ok(())
    }

    fn update_peaks(&mut self) {
        let s = &mut self.stats;
        let held = self.reorder.held();
        s.held_octets = held.octets() + self.staging.len();
        s.reassembly_octets = held.covered() as usize + self.staging.len();
        s.records = held.pieces();
        s.peak_held_octets = s.peak_held_octets.max(s.held_octets);
        s.peak_reassembly_octets = s.peak_reassembly_octets.max(s.reassembly_octets);
        s.peak_records = s.peak_records.max(s.records);
        s.dropped_octets = self.reorder.dropped();
    }

    /// Moves the in-order path on through what is held at the in-order
    /// point.
    //= draft-ietf-rddp-mpa-01#3.1.2
    //# DDP on MPA MUST utilize these two mechanisms to establish the Delivery semantics that
    //# DDP's consumers agree to.
    fn drain(&mut self, qp: &mut QueuePair) -> Result<(), OooError<F>> {
        while self.error.is_none() {
            let pos = self.reorder.next();
            match self.reorder.take_front() {
                None => break,
                Some(Piece::Octets(v)) => {
                    self.reorder.advance(v.len() as u64);
                    self.feed(&v, qp)?;
                    self.reorder.recycle(v);
                }
                Some(Piece::Done { len, record }) => {
                    let Some(record) = self.records.take(record) else {
                        // Not reached: every piece's record is kept.
                        break;
                    };
                    let aligned = self.staging.is_empty()
                        && match self.restart_at {
                            Some(at) => at == pos,
                            None => self.deframer.at_boundary() && self.deframer.offset() == pos,
                        };
                    //= draft-williams-iwarp-ift-01#8
                    //# If this verification fails, the PDU MUST be placed again.
                    //= draft-williams-iwarp-ift-01#8
                    //# If an implementation has discarded the original after placing it (which it
                    //# typically will do), then it MUST withhold TCP acknowledgement of this segment
                    //# and force the remote end to retransmit it.
                    if !aligned {
                        // Not a PDU after all: its octets must come again,
                        // and are neither acknowledged nor reported held.
                        let (b, s, e) = record.range();
                        self.overlaps.forget(b, s, e, pos);
                        self.stats.withdrawn += 1;
                        break;
                    }
                    self.reorder.advance(len);
                    // Every PDU placed from now on comes later in the
                    // stream: what this one wrote no longer counts.
                    let (b, s, e) = record.range();
                    self.overlaps.forget(b, s, e, pos);
                    let hl = usize::from(record.header_len);
                    let delivered =
                        qp.deliver_placed(&record.header[..hl], record.ulpdu_len, record.target);
                    if let Err(e) = delivered {
                        return Err(self.fail(FeedError::Sink(e), qp));
                    }
                    self.restart_at = Some(pos + len);
                }
            }
        }
        Ok(())
    }

    /// Passes octets that continue the stream to the in-order deframer
    /// (after the incomplete PDU it left, if any) and through it to `qp`.
    fn feed(&mut self, bytes: &[u8], qp: &mut QueuePair) -> Result<(), OooError<F>> {
        if let Some(at) = self.restart_at.take() {
            self.deframer = self.reorder.framing().deframer_at(at);
        }
        let mut sink = InOrder {
            qp: &mut *qp,
            overlaps: (!self.overlaps.is_empty()).then_some(&self.overlaps),
            since: self.reorder.next(),
            skips: &mut self.skips,
            header_left: &mut self.header_left,
        };
        let result = if self.staging.is_empty() {
            self.deframer
                .receive(bytes, &mut sink)
                .map(|used| self.staging.extend_from_slice(&bytes[used..]))
        } else {
            self.staging.extend_from_slice(bytes);
            self.deframer
                .receive(&self.staging, &mut sink)
                .map(|used| drop(self.staging.drain(..used)))
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(e, qp)),
        }
    }

    /// The in-order path failed: as the runtime does, an LLP error goes to
    /// the queue pair (a DDP or RDMAP one has already failed it), and the
    /// receiver stops.
    fn fail(&mut self, e: OooError<F>, qp: &mut QueuePair) -> OooError<F> {
        if let FeedError::Framing(f) = &e {
            qp.handle_llp_error(f.llp_code());
        }
        self.staging = Vec::new();
        self.error = Some(e.clone());
        e
    }
}

/// What placing a PDU ahead of delivery needs of the receiver.
struct Early<'a> {
    qp: &'a QueuePair,
    overlaps: &'a mut Overlaps,
    skips: &'a mut Vec<(usize, usize)>,
    stats: &'a mut OooStats,
    records: &'a mut Records,
    /// Leave alone whatever any undelivered PDU placed (IFT).
    keep: bool,
    /// The in-order point: records before it no longer count.
    since: u64,
}

impl Early<'_> {
    /// Offers a whole, checked PDU found ahead of the in-order point to
    /// DDP: if DDP can tell where its payload goes, it is placed there now.
    //= draft-williams-iwarp-ift-01#8
    //# The subset of these which exists SHOULD all be checked, and any field containing an
    //# invalid value disqualifies the PDU for speculative placement.
    //= draft-williams-iwarp-ift-01#8
    //# If the confirmation fails, speculative placement MUST NOT be done.
    //= draft-williams-iwarp-ift-01#8
    //# If the PDU identified appears to be in error, the error MUST NOT be reported
    //# speculatively.
    fn place(&mut self, pdu: &Pdu<'_>) -> Offer<u32> {
        // The framing checks passed (lengths, VTag, CRCs, markers); now
        // DDP's own fields (DV, STag, TO, QN, MSN, MO). A failure is no
        // error here: the PDU waits for the in-order path, which reports it.
        let mut header = [0u8; UNTAGGED_HEADER_LEN];
        let hl = pdu.ddp_header(&mut header).len();
        let Some(target) = self.qp.early_target(&header[..hl], pdu.ulpdu_len) else {
            return Offer::Kept;
        };
        let (buffer, s, e) = (
            target.buffer().id(),
            target.offset(),
            target.offset() + target.len(),
        );
        //= draft-williams-iwarp-ift-01#8
        //# 8.2 Overwrite checks Before speculative placement is done, the RDDP implementation MUST
        //# insure that no previously placed data is overwritten.
        if self.keep && self.overlaps.meets(buffer, s, e, self.since) {
            return Offer::Kept;
        }
        self.overlaps.place(buffer, s, e, pdu.start, self.skips);
        let skips = &*self.skips;
        let placed = target.write_with(0, target.len(), |dst| {
            let mut at = 0;
            let mut skip = hl;
            for piece in pdu.ulpdu() {
                let n = skip.min(piece.len());
                skip -= n;
                let piece = &piece[n..];
                copy_around(&mut dst[at..at + piece.len()], piece, at, skips);
                at += piece.len();
            }
        });
        if placed.is_err() {
            self.overlaps.forget(buffer, s, e, pdu.start);
            return Offer::Kept;
        }
        self.stats.early_pdus += 1;
        self.stats.early_octets += pdu.octets.len() as u64;
        self.stats.early_payload += target.len() as u64;
        Offer::Placed(self.records.put(Record {
            ulpdu_len: pdu.ulpdu_len,
            header,
            header_len: hl as u8,
            target,
        }))
    }
}

/// Copies `src` into `dst`, which sits at offset `at` of the placement,
/// except where `skips` (ascending, relative to the placement) say a PDU
/// later in the stream has written.
fn copy_around(dst: &mut [u8], src: &[u8], at: usize, skips: &[(usize, usize)]) {
    let end = at + src.len();
    let mut pos = at;
    for &(s, e) in skips.iter().filter(|&&(s, e)| e > at && s < end) {
        let s = s.max(at);
        if s > pos {
            dst[pos - at..s - at].copy_from_slice(&src[pos - at..s - at]);
        }
        pos = pos.max(e.min(end));
    }
    if pos < end {
        dst[pos - at..].copy_from_slice(&src[pos - at..]);
    }
}

/// The queue pair as the in-order path's sink. While no early placement
/// awaits delivery it is the queue pair itself; otherwise payload goes in
/// through [`QueuePair::place_direct`], around the octets PDUs later in
/// the stream have written.
struct InOrder<'a> {
    qp: &'a mut QueuePair,
    /// What PDUs placed ahead wrote, while one awaits delivery.
    overlaps: Option<&'a Overlaps>,
    /// The in-order point: what PDUs from it on wrote counts.
    since: u64,
    skips: &'a mut Vec<(usize, usize)>,
    /// DDP header octets of the current ULPDU still to pass
    /// ([`HEADER_UNKNOWN`] before its first octet). It outlives one feed:
    /// a deframer that passes octets as they come may stop in a header.
    header_left: &'a mut usize,
}

/// The DDP header's length is not known yet: no octet of it has passed.
const HEADER_UNKNOWN: usize = usize::MAX;

impl InOrder<'_> {
    /// Counts the DDP header octets at the front of `bytes`; returns how
    /// many there are.
    fn header_part(&mut self, bytes: &[u8]) -> usize {
        if *self.header_left == HEADER_UNKNOWN {
            match bytes.first() {
                Some(&c) => *self.header_left = header_len(c),
                None => return 0,
            }
        }
        let h = (*self.header_left).min(bytes.len());
        *self.header_left -= h;
        h
    }

    fn around(&mut self, bytes: &[u8]) -> Result<(), ProtocolError> {
        let h = self.header_part(bytes);
        if h > 0 {
            self.qp.ulpdu_data(&bytes[..h])?;
        }
        let mut bytes = &bytes[h..];
        while !bytes.is_empty() {
            let Some((buffer, offset, len)) = self.qp.placement_range() else {
                return self.qp.ulpdu_data(bytes);
            };
            let n = bytes.len().min(len);
            if let Some(o) = self.overlaps {
                o.later_writes(buffer, offset, offset + n, self.since, self.skips);
            }
            if self.skips.is_empty() {
                self.qp.ulpdu_data(&bytes[..n])?;
            } else {
                let skips = &*self.skips;
                let src = &bytes[..n];
                let placed = self.qp.place_direct(n, |dst| {
                    copy_around(dst, src, 0, skips);
                    n
                });
                if placed < n {
                    // The region went away: the rest counts, as in order.
                    return self.qp.ulpdu_data(&bytes[placed..]);
                }
            }
            bytes = &bytes[n..];
        }
        Ok(())
    }
}

impl UlpduSink for InOrder<'_> {
    type Error = ProtocolError;

    fn ulpdu_begin(&mut self, len: usize) -> Result<(), ProtocolError> {
        *self.header_left = HEADER_UNKNOWN;
        self.qp.ulpdu_begin(len)
    }

    fn ulpdu_data(&mut self, bytes: &[u8]) -> Result<(), ProtocolError> {
        if self.overlaps.is_none() {
            self.header_part(bytes);
            return self.qp.ulpdu_data(bytes);
        }
        self.around(bytes)
    }

    fn ulpdu_data_vectored(&mut self, pieces: &[&[u8]]) -> Result<(), ProtocolError> {
        if self.overlaps.is_none() {
            if *self.header_left > 0 {
                for piece in pieces {
                    self.header_part(piece);
                }
            }
            return self.qp.ulpdu_data_vectored(pieces);
        }
        // The pieces that hold DDP header octets one by one; then, when
        // no PDU placed ahead wrote where the payload goes, the rest under
        // one hold of the region, as in order.
        let mut rest = pieces;
        while let [first, tail @ ..] = rest {
            if *self.header_left == 0 {
                break;
            }
            self.around(first)?;
            rest = tail;
        }
        if rest.is_empty() {
            return Ok(());
        }
        let total: usize = rest.iter().map(|p| p.len()).sum();
        if let (Some(o), Some((buffer, offset, len))) = (self.overlaps, self.qp.placement_range()) {
            if total <= len && !o.meets(buffer, offset, offset + total, self.since) {
                return self.qp.ulpdu_data_vectored(rest);
            }
        }
        for piece in rest {
            self.around(piece)?;
        }
        Ok(())
    }

    fn ulpdu_end(&mut self) -> Result<(), ProtocolError> {
        self.qp.ulpdu_end()
    }
}

#[cfg(test)]
mod tests {
    use super::copy_around;

    #[test]
    fn copies_around_later_writes() {
        let mut dst = [0u8; 10];
        let src = [1u8; 6];
        // The piece lands at 2..8 of the placement; 3..5 and 7..9 are later.
        copy_around(&mut dst[2..8], &src, 2, &[(3, 5), (7, 9)]);
        assert_eq!(dst, [0, 0, 1, 0, 0, 1, 1, 0, 0, 0]);
    }
}
