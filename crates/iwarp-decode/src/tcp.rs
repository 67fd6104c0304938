//! TCP reassembly: one direction of a connection, put back in sequence order.
//!
//! Segments are placed by sequence number, unwrapped to a 64-bit stream
//! position (0 is the first octet after the SYN, or the first octet
//! captured when the SYN was not), so streams longer than 4 GiB and
//! sequence numbers that wrap are handled. What comes out is the stream as
//! the receiving TCP delivered it:
//!
//! - a segment entirely before the delivery point is a retransmission and
//!   is dropped; one that overlaps it contributes only its new octets (the
//!   octets delivered first win, as they did at the receiver);
//! - a segment beyond the delivery point is held until the hole before it
//!   is filled by a later (retransmitted) segment;
//! - a hole that will never be filled (octets the capture lost) is reported
//!   as a [`Chunk::Gap`] once it is certain: when the peer has acknowledged
//!   octets past it (the receiver had them, the capture did not) and octets
//!   after it arrive, when more than [`MAX_PENDING`] octets wait behind it,
//!   or at the end.
//!
//! The end of a direction is not a hole. A FIN takes one sequence number
//! (RFC 793 §3.3), so the peer's acknowledgment of it is one past the last
//! octet: the FIN's position is remembered ([`Reassembler::fin`]) and
//! acknowledgments are counted up to it only. When the FIN itself was not
//! captured, an acknowledgment one octet past everything captured is taken
//! as its acknowledgment too (judged at the end, or when octets after it
//! arrive).

use std::collections::BTreeMap;

/// Octets held behind a hole before the hole is declared lost.
pub const MAX_PENDING: usize = 32 << 20;

/// A piece of reassembled stream, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// The next octets of the stream.
    Data(&'a [u8]),
    /// This many octets of the stream were not captured.
    Gap(u64),
}

/// Counters of one direction's reassembly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReassemblyStats {
    /// Segments carrying payload.
    pub segments: u64,
    /// Octets delivered in order.
    pub octets: u64,
    /// Segments whose octets had all been delivered already.
    pub retransmitted: u64,
    /// Segments that overlapped octets already delivered or held.
    pub overlapping: u64,
    /// Segments that arrived ahead of a hole.
    pub out_of_order: u64,
    /// Holes never filled.
    pub gaps: u64,
    /// Octets in those holes.
    pub missing: u64,
}

/// Reassembles one direction of a TCP connection.
#[derive(Debug, Clone, Default)]
pub struct Reassembler {
    /// The sequence number of stream position 0, once known.
    base: Option<u32>,
    /// The stream position of the next octet to deliver.
    next: u64,
    /// Segments beyond a hole, by stream position.
    pending: BTreeMap<u64, Vec<u8>>,
    pending_octets: usize,
    /// The highest stream position the peer has acknowledged.
    acked: u64,
    /// The stream position of the FIN, once one is seen.
    fin: Option<u64>,
    stats: ReassemblyStats,
}

impl Reassembler {
    /// A direction with nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters so far.
    pub fn stats(&self) -> ReassemblyStats {
        self.stats
    }

    /// The stream position of the next octet to deliver.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// The stream position of sequence number `seq`, if the stream has
    /// started (negative: before its first octet).
    pub fn position_of(&self, seq: u32) -> Option<i64> {
        self.base.map(|base| self.unwrap(base, seq))
    }

    /// Whether the initial sequence number is known.
    pub fn started(&self) -> bool {
        self.base.is_some()
    }

    /// A SYN with sequence number `isn`: the stream starts right after it.
    /// Ignored once the stream has started (a retransmitted SYN).
    pub fn syn(&mut self, isn: u32) {
        if self.base.is_none() {
            self.base = Some(isn.wrapping_add(1));
        }
    }

    /// The stream position of `seq`, relative to the delivery point (it may
    /// be negative: before the start of the stream).
    fn unwrap(&self, base: u32, seq: u32) -> i64 {
        let next_seq = base.wrapping_add(self.next as u32);
        // The nearest position to `next` with these 32 low bits.
        let diff = i64::from(seq.wrapping_sub(next_seq) as i32);
        self.next as i64 + diff
    }

    /// A segment with sequence number `seq` and `payload`; calls `out` with
    /// whatever it makes deliverable, in order.
    pub fn segment(&mut self, seq: u32, payload: &[u8], out: &mut dyn FnMut(Chunk<'_>)) {
        if payload.is_empty() {
            return;
        }
        self.stats.segments += 1;
        let base = *self.base.get_or_insert(seq);
        let start = self.unwrap(base, seq);
        let end = start + payload.len() as i64;
        let next = self.next as i64;
        if end <= next {
            self.stats.retransmitted += 1;
            return;
        }
        if start <= next {
            if start < next {
                self.stats.overlapping += 1;
            }
            // In this branch next - start < payload.len().
            let fresh = &payload[usize::try_from(next - start).unwrap_or(0)..];
            self.deliver(fresh, out);
            self.drain(out);
            return;
        }
        self.stats.out_of_order += 1;
        let start = start as u64;
        match self.pending.get(&start) {
            Some(held) if held.len() >= payload.len() => self.stats.overlapping += 1,
            _ => {
                if let Some(old) = self.pending.insert(start, payload.to_vec()) {
                    self.stats.overlapping += 1;
                    self.pending_octets -= old.len();
                }
                self.pending_octets += payload.len();
            }
        }
        if self.pending_octets > MAX_PENDING {
            self.skip_to_pending(out);
        } else {
            self.settle_acknowledged(out);
        }
    }

    /// A FIN whose sequence number is `seq` (that of the segment's first
    /// payload octet plus its payload length): the direction ends there.
    pub fn fin(&mut self, seq: u32) {
        let base = *self.base.get_or_insert(seq);
        let at = self.unwrap(base, seq);
        if at >= 0 && self.fin.is_none() {
            self.fin = Some(at as u64);
        }
    }

    /// The peer acknowledges octets up to `ack`: a hole before that was
    /// received by the peer but lost by the capture.
    pub fn acknowledged(&mut self, ack: u32, out: &mut dyn FnMut(Chunk<'_>)) {
        let Some(base) = self.base else { return };
        let acked = self.unwrap(base, ack);
        let next = self.next as i64;
        // Far beyond what was sent: a bogus number, not evidence of a loss.
        if acked <= next || acked - next > 1 << 30 {
            return;
        }
        let mut acked = acked as u64;
        if let Some(fin) = self.fin {
            // RFC 793 §3.3: the FIN's sequence number is acknowledged, not
            // an octet.
            acked = acked.min(fin);
        }
        self.acked = self.acked.max(acked);
        self.settle_acknowledged(out);
    }

    /// Declares lost what the peer acknowledged before the first held
    /// segment, and delivers what follows. One octet acknowledged past
    /// everything, with no FIN seen and nothing held, is left for later: it
    /// may be the acknowledgment of a FIN the capture missed.
    fn settle_acknowledged(&mut self, out: &mut dyn FnMut(Chunk<'_>)) {
        while self.next < self.acked {
            match self.pending.keys().next() {
                Some(&first) if first <= self.acked => self.skip_to_pending(out),
                None if self.fin.is_none() && self.acked == self.next + 1 => return,
                _ => {
                    self.gap(self.acked - self.next, out);
                    self.drain(out);
                }
            }
        }
    }

    /// The end of the capture: every hole left is lost, and so is what the
    /// peer acknowledged past the last captured octet, short of the FIN.
    pub fn finish(&mut self, out: &mut dyn FnMut(Chunk<'_>)) {
        while !self.pending.is_empty() {
            self.skip_to_pending(out);
        }
        let end = match self.fin {
            Some(fin) => fin.max(self.next),
            // One octet acknowledged past everything: the uncaptured FIN's.
            None if self.acked == self.next + 1 => self.next,
            None => self.acked.max(self.next),
        };
        if end > self.next {
            self.gap(end - self.next, out);
        }
    }

    fn deliver(&mut self, data: &[u8], out: &mut dyn FnMut(Chunk<'_>)) {
        if data.is_empty() {
            return;
        }
        self.next += data.len() as u64;
        self.stats.octets += data.len() as u64;
        out(Chunk::Data(data));
    }

    fn gap(&mut self, missing: u64, out: &mut dyn FnMut(Chunk<'_>)) {
        self.next += missing;
        self.stats.gaps += 1;
        self.stats.missing += missing;
        out(Chunk::Gap(missing));
    }

    /// Declares the hole before the first held segment lost, and delivers
    /// what follows it.
    fn skip_to_pending(&mut self, out: &mut dyn FnMut(Chunk<'_>)) {
        if let Some(&first) = self.pending.keys().next() {
            if first > self.next {
                self.gap(first - self.next, out);
            }
            self.drain(out);
        }
    }

    /// Delivers held segments that now continue the stream.
    fn drain(&mut self, out: &mut dyn FnMut(Chunk<'_>)) {
        while let Some(entry) = self.pending.first_entry() {
            let start = *entry.key();
            if start > self.next {
                return;
            }
            let data = entry.remove();
            self.pending_octets -= data.len();
            let end = start + data.len() as u64;
            if end <= self.next {
                continue;
            }
            let skip = usize::try_from(self.next - start).unwrap_or(0);
            self.deliver(&data[skip..], out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a reassembler and returns what came out, gaps as `!N`.
    fn collect(
        r: &mut Reassembler,
        f: impl FnOnce(&mut Reassembler, &mut dyn FnMut(Chunk<'_>)),
    ) -> String {
        let mut s = String::new();
        f(r, &mut |c| match c {
            Chunk::Data(d) => s.push_str(std::str::from_utf8(d).unwrap()),
            Chunk::Gap(n) => s.push_str(&format!("!{n}")),
        });
        s
    }

    #[test]
    fn in_order_duplicates_and_overlaps() {
        let mut r = Reassembler::new();
        r.syn(99);
        assert_eq!(collect(&mut r, |r, o| r.segment(100, b"abc", o)), "abc");
        assert_eq!(collect(&mut r, |r, o| r.segment(100, b"abc", o)), "");
        assert_eq!(collect(&mut r, |r, o| r.segment(101, b"bcdef", o)), "def");
        let st = r.stats();
        assert_eq!((st.retransmitted, st.overlapping, st.octets), (1, 1, 6));
    }

    #[test]
    fn out_of_order_is_held_until_the_hole_fills() {
        let mut r = Reassembler::new();
        assert_eq!(collect(&mut r, |r, o| r.segment(0, b"ab", o)), "ab");
        assert_eq!(collect(&mut r, |r, o| r.segment(4, b"ef", o)), "");
        assert_eq!(collect(&mut r, |r, o| r.segment(6, b"gh", o)), "");
        assert_eq!(collect(&mut r, |r, o| r.segment(2, b"cd", o)), "cdefgh");
        assert_eq!(r.stats().gaps, 0);
    }

    #[test]
    fn holes_become_gaps_when_acknowledged_or_at_the_end() {
        let mut r = Reassembler::new();
        assert_eq!(collect(&mut r, |r, o| r.segment(10, b"ab", o)), "ab");
        assert_eq!(collect(&mut r, |r, o| r.segment(15, b"xy", o)), "");
        // Octets 12 and 13 were received but not captured; 14 may still come.
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(14, o)), "!2");
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(20, o)), "!1xy!3");
        assert_eq!(collect(&mut r, |r, o| r.segment(30, b"z", o)), "");
        assert_eq!(collect(&mut r, |r, o| r.finish(o)), "!10z");
        assert_eq!(r.stats().missing, 16);
    }

    #[test]
    fn one_octet_acknowledged_waits_for_octets_after_it() {
        let mut r = Reassembler::new();
        assert_eq!(collect(&mut r, |r, o| r.segment(10, b"ab", o)), "ab");
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(13, o)), "");
        assert_eq!(collect(&mut r, |r, o| r.segment(13, b"cd", o)), "!1cd");
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(17, o)), "!2");
        assert_eq!(collect(&mut r, |r, o| r.finish(o)), "");
    }

    #[test]
    fn the_fin_is_not_a_hole() {
        let mut r = Reassembler::new();
        r.syn(9);
        assert_eq!(collect(&mut r, |r, o| r.segment(10, b"abc", o)), "abc");
        r.fin(13);
        // The FIN's acknowledgment, twice (a retransmitted FIN).
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(14, o)), "");
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(14, o)), "");
        assert_eq!(collect(&mut r, |r, o| r.finish(o)), "");
        assert_eq!(r.stats().gaps, 0);

        // The FIN not captured, its acknowledgment captured.
        let mut r = Reassembler::new();
        assert_eq!(collect(&mut r, |r, o| r.segment(10, b"abc", o)), "abc");
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(14, o)), "");
        assert_eq!(collect(&mut r, |r, o| r.finish(o)), "");

        // The last octets and the FIN not captured, but acknowledged.
        let mut r = Reassembler::new();
        assert_eq!(collect(&mut r, |r, o| r.segment(10, b"abc", o)), "abc");
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(18, o)), "!5");
        assert_eq!(collect(&mut r, |r, o| r.finish(o)), "");

        // A FIN seen after a hole: the hole is lost, the FIN is not.
        let mut r = Reassembler::new();
        assert_eq!(collect(&mut r, |r, o| r.segment(10, b"abc", o)), "abc");
        r.fin(20);
        assert_eq!(collect(&mut r, |r, o| r.acknowledged(21, o)), "!7");
        assert_eq!(collect(&mut r, |r, o| r.finish(o)), "");
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut r = Reassembler::new();
        r.syn(u32::MAX - 2);
        assert_eq!(
            collect(&mut r, |r, o| r.segment(u32::MAX - 1, b"ab", o)),
            "ab"
        );
        assert_eq!(collect(&mut r, |r, o| r.segment(1, b"d", o)), "");
        assert_eq!(collect(&mut r, |r, o| r.segment(0, b"c", o)), "cd");
        assert_eq!(r.position(), 4);
    }
}
