//! Which octets of which buffers PDUs placed ahead of delivery wrote, so
//! that the final contents are those of in-order placement.
//!
//! In order, when two PDUs write the same octet, the later one in the
//! stream wins. Out of order the later one may be placed first; the
//! earlier one, placed afterwards, must then leave that octet alone. So
//! every early placement is recorded here with its PDU's stream offset,
//! and every placement (early or in order) skips the octets a PDU later in
//! the stream has written. A record no longer counts once its PDU has been
//! delivered in order (every PDU placed after that comes later in the
//! stream): queries name the in-order point, records before it are
//! ignored, and [`Overlaps::prune`] drops them now and then, so that a
//! delivery costs nothing here.
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
    /// Reused by [`Overlaps::place`] and [`Overlaps::forget`].
    scratch: Vec<(usize, Written)>,
}

impl Overlaps {
    /// Nothing recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ranges recorded (some may be of PDUs delivered since).
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Drops the records of PDUs before stream offset `since` (delivered).
    pub fn prune(&mut self, since: u64) {
        self.ranges.retain(|_, w| w.pos >= since);
    }

    /// The recorded ranges of `buffer` that meet `start..end`.
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
    /// `start`, that a PDU at or after stream offset `since` wrote.
    pub fn later_writes(
        &self,
        buffer: usize,
        start: usize,
        end: usize,
        since: u64,
        out: &mut Vec<(usize, usize)>,
    ) {
        out.clear();
        for (s, w) in self.meeting(buffer, start, end) {
            if w.pos >= since {
                out.push((s.max(start) - start, w.end.min(end) - start));
            }
        }
    }

    /// Whether a PDU at or after stream offset `since` wrote any of
    /// `start..end` of `buffer`.
    pub fn meets(&self, buffer: usize, start: usize, end: usize, since: u64) -> bool {
        self.meeting(buffer, start, end)
            .any(|(_, w)| w.pos >= since)
    }

    /// The PDU at stream offset `pos` is about to write `start..end` of
    /// `buffer`: pushes onto `skips` the parts (relative to `start`) that a
    /// later PDU wrote and it must leave alone, and records that it wrote
    /// the rest.
    pub fn place(
        &mut self,
        buffer: usize,
        start: usize,
        end: usize,
        pos: u64,
        skips: &mut Vec<(usize, usize)>,
    ) {
        skips.clear();
        if start >= end {
            return;
        }
        // Ranges are disjoint: when the last one that starts before `end`
        // ends by `start`, none meets `start..end` (the common case).
        let clear = self
            .ranges
            .range(..(buffer, end))
            .next_back()
            .is_none_or(|(&(b, _), w)| b != buffer || w.end <= start);
        if clear {
            self.put(buffer, start, end, pos);
            return;
        }
        let mut old = std::mem::take(&mut self.scratch);
        old.clear();
        old.extend(self.meeting(buffer, start, end));
        let mut at = start;
        for &(s, w) in &old {
            if w.pos > pos {
                skips.push((s.max(start) - start, w.end.min(end) - start));
            }
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
        self.scratch = old;
    }

    /// Forgets what the PDU at `pos` wrote in `start..end` of `buffer`.
    pub fn forget(&mut self, buffer: usize, start: usize, end: usize, pos: u64) {
        let mut mine = std::mem::take(&mut self.scratch);
        mine.clear();
        mine.extend(
            self.meeting(buffer, start, end)
                .filter(|(_, w)| w.pos == pos),
        );
        for &(s, w) in &mine {
            self.ranges.remove(&(buffer, s));
            if s < start {
                self.put(buffer, s, start, w.pos);
            }
            if w.end > end {
                self.put(buffer, end, w.end, w.pos);
            }
        }
        self.scratch = mine;
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
        o.place(1, 10, 20, 500, &mut out);
        assert!(out.is_empty());
        o.later_writes(1, 0, 30, 401, &mut out);
        assert_eq!(out, [(10, 20)]);
        o.later_writes(1, 0, 30, 601, &mut out);
        assert!(out.is_empty());
        o.later_writes(2, 0, 30, 0, &mut out);
        assert!(out.is_empty());
        // An earlier PDU over a wider range keeps the later one's part.
        o.place(1, 5, 25, 300, &mut out);
        assert_eq!(out, [(5, 15)]);
        o.later_writes(1, 0, 30, 401, &mut out);
        assert_eq!(out, [(10, 20)]);
        // Delivered up to 400: the earlier one no longer counts.
        assert!(o.meets(1, 0, 8, 0) && !o.meets(1, 0, 8, 400));
        o.prune(400);
        o.later_writes(1, 0, 30, 0, &mut out);
        assert_eq!(out, [(10, 20)]);
        // Withdrawn: forgotten.
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
            let mut skips = Vec::new();
            for &(a, b, pos) in &writes {
                let (s, e) = (a.min(b), a.max(b));
                o.place(0, s, e, pos, &mut skips);
                let mut skipped = [false; 64];
                for &(x, y) in &skips {
                    skipped[s + x..s + y].iter_mut().for_each(|k| *k = true);
                }
                for (i, m) in model.iter_mut().enumerate().take(e).skip(s) {
                    prop_assert_eq!(skipped[i], m.is_some_and(|w| w > pos));
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
                o.later_writes(0, 0, 64, p + 1, &mut out);
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
