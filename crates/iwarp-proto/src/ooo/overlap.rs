//! Which octets of which buffers PDUs placed ahead of delivery wrote, so
//! that the final contents are those of in-order placement.
//!
//! In order, when two PDUs write the same octet, the later one in the
//! stream wins. Out of order the later one may be placed first; the
//! earlier one, placed afterwards, must then leave that octet alone. So
//! every early placement is recorded here with its PDU's stream offset,
//! and every placement (early or in order) skips the octets a PDU later in
//! the stream has written. A record is forgotten when its PDU is delivered
//! in order: every PDU placed after that comes later in the stream.
//!
//! draft-williams-iwarp-ift-01 §8.2 puts it the other way round: an
//! in-order placement that would overwrite a speculative one is done and
//! the speculative one placed again. Skipping gives the same contents
//! without the second placement (and without keeping the PDU for it).

use std::collections::BTreeMap;

/// One written range: its end and the stream offset of the PDU that last
/// wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Written {
    end: usize,
    pos: u64,
}

/// Octets written by PDUs placed ahead of delivery, per buffer: disjoint
/// ranges, each with the latest writer's stream offset.
#[derive(Debug, Default)]
pub struct Overlaps {
    /// (buffer, start) to the range from there.
    ranges: BTreeMap<(usize, usize), Written>,
}

impl Overlaps {
    /// Nothing recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when nothing is recorded (no early placement awaits delivery).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Ranges recorded.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The recorded ranges of `buffer` that meet `start..end`, clipped.
    fn meeting(
        &self,
        buffer: usize,
        start: usize,
        end: usize,
    ) -> impl Iterator<Item = (usize, Written)> + '_ {
        let before = self
            .ranges
            .range((buffer, 0)..(buffer, start))
            .next_back()
            .filter(|(_, w)| w.end > start);
        before
            .into_iter()
            .chain(self.ranges.range((buffer, start)..(buffer, end)))
            .map(|(&(_, s), &w)| (s, w))
    }

    /// Pushes onto `out` the parts of `start..end` of `buffer`, relative to
    /// `start`, that a PDU after stream offset `pos` wrote (any recorded
    /// PDU, for `None`: one being placed in order precedes them all).
    pub fn later_writes(
        &self,
        buffer: usize,
        start: usize,
        end: usize,
        pos: Option<u64>,
        out: &mut Vec<(usize, usize)>,
    ) {
        out.clear();
        for (s, w) in self.meeting(buffer, start, end) {
            if pos.is_none_or(|p| w.pos > p) {
                out.push((s.max(start) - start, w.end.min(end) - start));
            }
        }
    }

    /// Whether any PDU placed ahead of delivery wrote any of `start..end`
    /// of `buffer`.
    pub fn meets(&self, buffer: usize, start: usize, end: usize) -> bool {
        self.meeting(buffer, start, end).next().is_some()
    }

    /// Records that the PDU at stream offset `pos` wrote `start..end` of
    /// `buffer`, except where a later PDU had.
    pub fn record(&mut self, buffer: usize, start: usize, end: usize, pos: u64) {
        if start >= end {
            return;
        }
        let old: Vec<(usize, Written)> = self.meeting(buffer, start, end).collect();
        let mut at = start;
        for (s, w) in old {
            self.ranges.remove(&(buffer, s));
            // What lies outside start..end keeps its writer.
            if s < start {
                self.put(buffer, s, start, w.pos);
            }
            if w.end > end {
                self.put(buffer, end, w.end, w.pos);
            }
            let (is, ie) = (s.max(start), w.end.min(end));
            if is > at {
                self.put(buffer, at, is, pos);
            }
            self.put(buffer, is, ie, w.pos.max(pos));
            at = ie;
        }
        if at < end {
            self.put(buffer, at, end, pos);
        }
    }

    /// Forgets what the PDU at `pos` wrote in `start..end` of `buffer`.
    pub fn forget(&mut self, buffer: usize, start: usize, end: usize, pos: u64) {
        let mine: Vec<(usize, Written)> = self
            .meeting(buffer, start, end)
            .filter(|(_, w)| w.pos == pos)
            .collect();
        for (s, w) in mine {
            self.ranges.remove(&(buffer, s));
            if s < start {
                self.put(buffer, s, start, w.pos);
            }
            if w.end > end {
                self.put(buffer, end, w.end, w.pos);
            }
        }
    }

    fn put(&mut self, buffer: usize, start: usize, end: usize, pos: u64) {
        if start < end {
            self.ranges.insert((buffer, start), Written { end, pos });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn later_writers_win() {
        let mut o = Overlaps::new();
        let mut out = Vec::new();
        o.record(1, 10, 20, 500);
        o.later_writes(1, 0, 30, Some(400), &mut out);
        assert_eq!(out, [(10, 20)]);
        o.later_writes(1, 0, 30, Some(600), &mut out);
        assert!(out.is_empty());
        o.later_writes(2, 0, 30, None, &mut out);
        assert!(out.is_empty());
        // An earlier PDU over a wider range keeps the later one's part.
        o.record(1, 5, 25, 300);
        o.later_writes(1, 5, 25, Some(300), &mut out);
        assert_eq!(out, [(5, 15)]);
        o.later_writes(1, 0, 30, Some(400), &mut out);
        assert_eq!(out, [(10, 20)]);
        // Delivered: forgotten.
        o.forget(1, 5, 25, 300);
        o.later_writes(1, 0, 30, None, &mut out);
        assert_eq!(out, [(10, 20)]);
        o.forget(1, 10, 20, 500);
        assert!(o.is_empty());
    }

    proptest! {
        /// Against a model that keeps, per octet, the latest writer.
        #[test]
        fn agrees_with_a_per_octet_model(
            writes in proptest::collection::vec((0usize..64, 0usize..64, 0u64..16), 1..30),
            forgets in proptest::collection::vec(0u64..16, 0..8),
        ) {
            let mut o = Overlaps::new();
            let mut model = [None::<u64>; 64];
            for &(a, b, pos) in &writes {
                let (s, e) = (a.min(b), a.max(b));
                o.record(0, s, e, pos);
                for m in &mut model[s..e] {
                    *m = Some(m.map_or(pos, |p| p.max(pos)));
                }
            }
            for &pos in &forgets {
                o.forget(0, 0, 64, pos);
                for m in &mut model {
                    if *m == Some(pos) {
                        *m = None;
                    }
                }
            }
            for p in 0..16u64 {
                let mut out = Vec::new();
                o.later_writes(0, 0, 64, Some(p), &mut out);
                let mut got = [false; 64];
                for (s, e) in out {
                    got[s..e].iter_mut().for_each(|g| *g = true);
                }
                for i in 0..64 {
                    prop_assert_eq!(got[i], model[i].is_some_and(|w| w > p), "octet {} after {}", i, p);
                }
            }
        }
    }
}
