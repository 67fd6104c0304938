//! Which octets of which buffers PDUs placed ahead of delivery wrote, so
//! that the final contents are those of in-order placement.
//!
//! In order, when two PDUs write the same octet, the later one in the
//! stream wins. Out of order the later one may be placed first; the
//! earlier one, placed afterwards, must then leave that octet alone. So
//! every early placement is recorded here with its PDU's stream offset
//! until the PDU is delivered (or withdrawn), and every placement (early
//! or in order) skips the octets a PDU later in the stream has written.
//! Once delivered, a PDU no longer counts (every PDU placed after that
//! comes later in the stream), and its record goes.
//!
//! Records are kept per PDU, as written, in a hash table of short chains
//! by granule (a [`GRANULE`]-octet stretch of a buffer): a record sits in
//! the chain of each granule it touches. Placing, finding what meets a
//! range and forgetting cost a few chain entries each, whatever the number
//! of records. The chains are threaded through one vector of entries whose
//! freed slots are reused: nothing is allocated per record once it has
//! grown to the traffic, and a new table costs two allocations, not one
//! per chain.
//!
//! draft-williams-iwarp-ift-01 §8.2 puts it the other way round: an
//! in-order placement that would overwrite a speculative one is done and
//! the speculative one placed again. Skipping gives the same contents
//! without the second placement (and without keeping the PDU for it).

/// Octets per granule: a PDU of one MSS touches one or two.
pub const GRANULE: usize = 8 << 10;

/// Chains in the table at first; it doubles when the records outnumber
/// them.
const FIRST_CHAINS: usize = 256;

/// No entry: the end of a chain, or of the free list.
const NIL: u32 = u32::MAX;

/// What one PDU placed ahead of delivery wrote: `start..end` of the buffer
/// named `buffer`; `pos` is its stream offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Written {
    buffer: usize,
    start: usize,
    end: usize,
    pos: u64,
}

impl Written {
    fn meets(&self, buffer: usize, start: usize, end: usize) -> bool {
        self.buffer == buffer && self.start < end && start < self.end
    }
}

/// A record in one chain; `next` is the entry after it in that chain (or
/// in the free list).
#[derive(Debug, Clone, Copy)]
struct Entry {
    w: Written,
    next: u32,
}

/// Octets written by PDUs placed ahead of delivery. See the module
/// documentation.
#[derive(Debug)]
pub struct Overlaps {
    /// The first entry of each chain, by the hash of (buffer, granule); a
    /// power of two of them.
    heads: Vec<u32>,
    entries: Vec<Entry>,
    /// The first free entry.
    free: u32,
    /// Records (each counted once, however many granules it touches).
    records: usize,
}

impl Default for Overlaps {
    fn default() -> Self {
        Self::new()
    }
}

/// The entries of one chain, from its head on.
struct Chain<'a> {
    entries: &'a [Entry],
    at: u32,
}

impl<'a> Iterator for Chain<'a> {
    type Item = &'a Written;

    fn next(&mut self) -> Option<&'a Written> {
        let e = self.entries.get(self.at as usize)?;
        self.at = e.next;
        Some(&e.w)
    }
}

impl Overlaps {
    /// Nothing recorded.
    pub fn new() -> Self {
        Self {
            heads: vec![NIL; FIRST_CHAINS],
            entries: Vec::new(),
            free: NIL,
            records: 0,
        }
    }

    /// PDUs recorded.
    pub fn len(&self) -> usize {
        self.records
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The granules `start..end` touches (none for an empty range).
    fn granules(start: usize, end: usize) -> std::ops::Range<usize> {
        if start >= end {
            return 0..0;
        }
        start / GRANULE..(end - 1) / GRANULE + 1
    }

    fn chain_of(&self, buffer: usize, granule: usize) -> usize {
        chain_of(self.heads.len(), buffer, granule)
    }

    fn chain(&self, i: usize) -> Chain<'_> {
        Chain {
            entries: &self.entries,
            at: self.heads[i],
        }
    }

    /// Puts `w` in the chain of each granule it touches, once in each.
    fn push(&mut self, w: Written) {
        let granules = Self::granules(w.start, w.end);
        let first = granules.start;
        for g in granules {
            let i = self.chain_of(w.buffer, g);
            // Granules before it that hash to the same chain put it there.
            if (first..g).all(|h| self.chain_of(w.buffer, h) != i) {
                let next = self.heads[i];
                let entry = Entry { w, next };
                let k = match self.free {
                    NIL => {
                        self.entries.push(entry);
                        self.entries.len() - 1
                    }
                    k => {
                        self.free = self.entries[k as usize].next;
                        self.entries[k as usize] = entry;
                        k as usize
                    }
                };
                self.heads[i] = k as u32;
            }
        }
    }

    /// The records that meet `start..end` of `buffer` and satisfy `keep`,
    /// each once, as parts of `start..end` relative to `start`, ascending,
    /// onto `out` (cleared first).
    fn collect(
        &self,
        buffer: usize,
        start: usize,
        end: usize,
        keep: impl Fn(&Written) -> bool,
        out: &mut Vec<(usize, usize)>,
    ) {
        out.clear();
        for g in Self::granules(start, end) {
            for w in self.chain(self.chain_of(buffer, g)) {
                // A record that touches several granules is taken in the
                // first of them that this range touches too.
                let first = (w.start / GRANULE).max(start / GRANULE);
                if first == g && w.meets(buffer, start, end) && keep(w) {
                    out.push((w.start.max(start) - start, w.end.min(end) - start));
                }
            }
        }
        if out.len() > 1 {
            out.sort_unstable();
        }
    }

    /// Pushes onto `out` (cleared first) the parts of `start..end` of
    /// `buffer`, relative to `start` and ascending (they may overlap),
    /// that a PDU at or after stream offset `since` wrote.
    pub fn later_writes(
        &self,
        buffer: usize,
        start: usize,
        end: usize,
        since: u64,
        out: &mut Vec<(usize, usize)>,
    ) {
        if self.records == 0 {
            out.clear();
            return;
        }
        self.collect(buffer, start, end, |w| w.pos >= since, out);
    }

    /// Whether a PDU at or after stream offset `since` wrote any of
    /// `start..end` of `buffer`.
    pub fn meets(&self, buffer: usize, start: usize, end: usize, since: u64) -> bool {
        self.records > 0
            && Self::granules(start, end).any(|g| {
                self.chain(self.chain_of(buffer, g))
                    .any(|w| w.meets(buffer, start, end) && w.pos >= since)
            })
    }

    /// The PDU at stream offset `pos` is about to write `start..end` of
    /// `buffer`: pushes onto `skips` (cleared first) the parts, relative to
    /// `start` and ascending, that a later PDU wrote and it must leave
    /// alone, and records that it wrote `start..end`.
    pub fn place(
        &mut self,
        buffer: usize,
        start: usize,
        end: usize,
        pos: u64,
        skips: &mut Vec<(usize, usize)>,
    ) {
        if self.records == 0 {
            skips.clear();
        } else {
            self.collect(buffer, start, end, |w| w.pos > pos, skips);
        }
        if start >= end {
            return;
        }
        if self.records >= self.heads.len() {
            self.grow();
        }
        self.push(Written {
            buffer,
            start,
            end,
            pos,
        });
        self.records += 1;
    }

    /// Forgets what the PDU at `pos` wrote in `start..end` of `buffer`
    /// (what [`Overlaps::place`] recorded for it): it was delivered, or
    /// withdrawn.
    pub fn forget(&mut self, buffer: usize, start: usize, end: usize, pos: u64) {
        let w = Written {
            buffer,
            start,
            end,
            pos,
        };
        let mut found = false;
        for g in Self::granules(start, end) {
            let i = self.chain_of(buffer, g);
            // Unlinks its entry from this chain, if it is there (once).
            let mut prev = NIL;
            let mut at = self.heads[i];
            while let Some(e) = self.entries.get(at as usize) {
                let next = e.next;
                if e.w == w {
                    match prev {
                        NIL => self.heads[i] = next,
                        p => self.entries[p as usize].next = next,
                    }
                    self.entries[at as usize].next = self.free;
                    self.free = at;
                    found = true;
                    break;
                }
                prev = at;
                at = next;
            }
        }
        self.records -= usize::from(found);
    }

    /// Twice the chains, the records spread over them again.
    fn grow(&mut self) {
        let n = self.heads.len();
        let mut records = Vec::with_capacity(self.records);
        for i in 0..n {
            // Each record once: from the chain of its first granule.
            records.extend(
                self.chain(i)
                    .filter(|w| chain_of(n, w.buffer, w.start / GRANULE) == i)
                    .copied(),
            );
        }
        self.heads = vec![NIL; n * 2];
        self.entries.clear();
        self.free = NIL;
        for w in records {
            self.push(w);
        }
    }
}

/// The chain of (`buffer`, `granule`) in a table of `chains` chains (a
/// power of two): Fibonacci hashing of the pair (buffers are addresses,
/// granules small counts; the high bits of the product mix both).
fn chain_of(chains: usize, buffer: usize, granule: usize) -> usize {
    let h = (buffer as u64 ^ (granule as u64).rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - chains.trailing_zeros())) as usize
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
        assert!(o.meets(1, 0, 8, 0) && !o.meets(1, 0, 8, 400));
        // Delivered: forgotten.
        o.forget(1, 5, 25, 300);
        o.later_writes(1, 0, 30, 0, &mut out);
        assert_eq!(out, [(10, 20)]);
        o.forget(1, 10, 20, 500);
        assert!(o.is_empty());
    }

    #[test]
    fn records_across_granules_are_found_once_and_survive_growth() {
        let mut o = Overlaps::new();
        let mut out = Vec::new();
        // Far more records than chains, some across three granules.
        let n = 4 * FIRST_CHAINS;
        for i in 0..n {
            let start = i * 3 * GRANULE + GRANULE / 2;
            o.place(7, start, start + 2 * GRANULE, i as u64, &mut out);
            assert!(out.is_empty());
        }
        assert_eq!(o.len(), n);
        for i in 0..n {
            let start = i * 3 * GRANULE + GRANULE / 2;
            o.later_writes(7, start - 1, start + 2 * GRANULE + 1, 0, &mut out);
            assert_eq!(out, [(1, 2 * GRANULE + 1)], "record {i}");
        }
        for i in 0..n {
            let start = i * 3 * GRANULE + GRANULE / 2;
            o.forget(7, start, start + 2 * GRANULE, i as u64);
        }
        assert!(o.is_empty());
        assert!(o.heads.iter().all(|&h| h == NIL));
    }

    proptest! {
        // Each case checks some 10^6 octets.
        #![proptest_config(ProptestConfig::with_cases(crate::test_util::proptest_cases(64)))]

        /// Against a model that keeps, per octet, the PDUs that wrote it.
        #[test]
        fn agrees_with_a_per_octet_model(
            writes in proptest::collection::vec((0usize..4 * GRANULE, 0usize..3 * GRANULE, 0u64..16), 1..30),
            forgets in proptest::collection::vec(0usize..30, 0..12),
        ) {
            const N: usize = 7 * GRANULE;
            let mut o = Overlaps::new();
            let mut model = vec![0u32; N];
            let mut placed = Vec::new();
            let mut skips = Vec::new();
            for &(s, n, pos) in &writes {
                let e = s + n;
                // One PDU per stream offset.
                if placed.iter().any(|&(_, _, p)| p == pos) {
                    continue;
                }
                o.place(0, s, e, pos, &mut skips);
                let mut skipped = vec![false; N];
                for &(x, y) in &skips {
                    skipped[s + x..s + y].iter_mut().for_each(|k| *k = true);
                }
                for i in s..e {
                    prop_assert_eq!(skipped[i], model[i] >> (pos + 1) != 0, "octet {}", i);
                    model[i] |= 1 << pos;
                }
                placed.push((s, e, pos));
            }
            for &k in &forgets {
                if k < placed.len() {
                    let (s, e, pos) = placed.swap_remove(k);
                    o.forget(0, s, e, pos);
                    for m in &mut model[s..e] {
                        *m &= !(1 << pos);
                    }
                }
            }
            // A PDU that wrote nothing leaves no record.
            let recorded = placed.iter().filter(|&&(s, e, _)| s < e).count();
            prop_assert_eq!(o.len(), recorded);
            for p in 0..17u64 {
                let mut out = Vec::new();
                o.later_writes(0, 0, N, p, &mut out);
                let mut got = vec![false; N];
                for (s, e) in out {
                    got[s..e].iter_mut().for_each(|g| *g = true);
                }
                for i in 0..N {
                    prop_assert_eq!(got[i], model[i] >> p != 0, "octet {} since {}", i, p);
                }
                prop_assert_eq!(o.meets(0, 0, N, p), model.iter().any(|m| m >> p != 0));
            }
        }
    }
}
