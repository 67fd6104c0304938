//! What an out-of-order receiver holds beyond its in-order point: octets
//! waiting for the hole before them to fill, and in their stead, for each
//! PDU already placed, a small record of it.
//!
//! Pieces are kept by stream offset, disjoint, all at or after the in-order
//! point. A segment that overlaps what is held contributes only its new
//! octets (the octets that arrived first win, as at a TCP receiver); octets
//! beyond the window, or beyond the budget, are dropped, as a TCP receiver
//! drops what it has no room for, and the sender sends them again.

/// What the budget charges for each piece besides its octets: its entry
/// and the vector header, roughly.
pub const PIECE_OVERHEAD: usize = 64;

/// Emptied piece buffers kept for reuse, at most.
const SPARES: usize = 32;

/// The largest buffer kept for reuse: a segment's worth or so (a larger
/// one is rare, and would sit idle).
const SPARE_CAPACITY: usize = 16 << 10;

/// One held piece of the stream.
#[derive(Debug, Clone)]
pub enum Piece<R> {
    /// Octets not yet placed.
    Octets(Vec<u8>),
    /// A PDU of `len` stream octets, placed already: its record.
    Done {
        /// Stream octets it took, markers included.
        len: u64,
        /// What delivering it in order needs.
        record: R,
    },
}

/// No octets: what a slot holds once its piece has been taken.
impl<R> Default for Piece<R> {
    fn default() -> Self {
        Self::Octets(Vec::new())
    }
}

impl<R> Piece<R> {
    /// Stream octets it covers.
    pub fn len(&self) -> u64 {
        match self {
            Self::Octets(v) => v.len() as u64,
            Self::Done { len, .. } => *len,
        }
    }

    /// True when it covers no octet (never, for a held piece).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The held pieces of one direction's stream.
///
/// Kept in a queue sorted by stream offset: pieces arrive near its end
/// (segments come roughly in order) and leave from its front (the in-order
/// point moves on), and a binary search finds any other place.
#[derive(Debug, Clone)]
pub struct Held<R> {
    /// Stream offset of the in-order point: everything before it has been
    /// handed to the in-order path.
    next: u64,
    /// (start, piece), by start; disjoint.
    pieces: Queue<(u64, Piece<R>)>,
    /// Octets held in [`Piece::Octets`].
    octets: usize,
    /// Stream octets covered by all pieces: what an in-order reassembly
    /// buffer would hold for the same arrivals.
    covered: u64,
    /// The most octets plus [`PIECE_OVERHEAD`] per piece held at once.
    budget: usize,
    /// Buffers of pieces gone, for new pieces: holding octets allocates
    /// nothing once warm.
    spare: Vec<Vec<u8>>,
}

impl<R> Held<R> {
    /// Nothing held; the in-order point at `next`.
    pub fn new(next: u64, budget: usize) -> Self {
        Self {
            next,
            pieces: Queue::default(),
            octets: 0,
            covered: 0,
            budget,
            spare: Vec::new(),
        }
    }

    /// A buffer holding a copy of `octets`: a spare one if there is one.
    fn buffer_of(&mut self, octets: &[u8]) -> Vec<u8> {
        match self.spare.pop() {
            Some(mut v) => {
                v.extend_from_slice(octets);
                v
            }
            None => octets.to_vec(),
        }
    }

    /// Takes back the buffer of a piece taken from the front (its octets
    /// used), to hold later pieces in.
    pub fn recycle(&mut self, mut v: Vec<u8>) {
        if self.spare.len() < SPARES && v.capacity() <= SPARE_CAPACITY {
            v.clear();
            self.spare.push(v);
        }
    }

    /// The in-order point.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Octets held unplaced.
    pub fn octets(&self) -> usize {
        self.octets
    }

    /// Stream octets covered by what is held, placed or not.
    pub fn covered(&self) -> u64 {
        self.covered
    }

    /// Pieces held.
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// Where the first held piece starts.
    pub fn first_start(&self) -> Option<u64> {
        self.pieces.front().map(|&(s, _)| s)
    }

    fn charge(&self) -> usize {
        self.octets + self.pieces.len() * PIECE_OVERHEAD
    }

    /// The index of the first piece that starts at or after `at`.
    fn first_from(&self, at: u64) -> usize {
        self.pieces.partition_point(|&(s, _)| s < at)
    }

    /// The index of the last piece that starts at or before `at`.
    fn last_upto(&self, at: u64) -> Option<usize> {
        self.pieces
            .partition_point(|&(s, _)| s <= at)
            .checked_sub(1)
    }

    /// The piece that holds stream offset `at`, if one does.
    fn holding(&self, at: u64) -> Option<usize> {
        self.last_upto(at)
            .filter(|&i| self.pieces[i].0 + self.pieces[i].1.len() > at)
    }

    /// Octets handed to the in-order path straight from a segment: the
    /// in-order point moves on. Nothing held may start before the new one.
    pub fn advance(&mut self, n: u64) {
        self.next += n;
        debug_assert!(self.first_start().is_none_or(|s| s >= self.next));
    }

    /// Holds the octets of `bytes`, which start at stream offset `start`,
    /// that are not held yet, not before the in-order point and not at or
    /// past `limit`. Pushes each new range onto `new`; returns the octets
    /// dropped for want of budget.
    pub fn insert(
        &mut self,
        start: u64,
        bytes: &[u8],
        limit: u64,
        new: &mut Vec<(u64, u64)>,
    ) -> u64 {
        let end = (start + bytes.len() as u64).min(limit);
        let mut at = start.max(self.next);
        if at >= end {
            return 0;
        }
        if let Some(i) = self.holding(at) {
            at = self.pieces[i].0 + self.pieces[i].1.len();
        }
        let first_new = new.len();
        let mut i = self.first_from(at);
        while at < end {
            let gap_end = self.pieces.get(i).map_or(end, |&(s, _)| s.min(end));
            if gap_end > at {
                new.push((at, gap_end));
            }
            match self.pieces.get(i) {
                Some((s, p)) if *s < end => at = at.max(s + p.len()),
                _ => at = end,
            }
            i += 1;
        }
        let mut dropped = 0;
        let mut kept = first_new;
        for k in first_new..new.len() {
            let (s, e) = new[k];
            let n = (e - s) as usize;
            if self.charge() + n + PIECE_OVERHEAD > self.budget {
                dropped += n as u64;
                continue;
            }
            let from = (s - start) as usize;
            let at = self.first_from(s);
            let v = self.buffer_of(&bytes[from..from + n]);
            self.pieces.insert(at, (s, Piece::Octets(v)));
            self.octets += n;
            self.covered += n as u64;
            new[kept] = (s, e);
            kept += 1;
        }
        new.truncate(kept);
        dropped
    }

    /// Moves the in-order point on to `to` (if it is not past it already),
    /// dropping what is held before it: for a user that follows the stream
    /// some other way (a capture decoder that reassembles it itself).
    pub fn skip_to(&mut self, to: u64) {
        if to <= self.next {
            return;
        }
        self.next = to;
        while self.pieces.front().is_some_and(|&(s, _)| s < to) {
            let Some((start, piece)) = self.pieces.pop_front() else {
                break;
            };
            self.forget(&piece);
            if let Piece::Octets(mut v) = piece {
                if start + v.len() as u64 > to {
                    let tail = v.split_off((to - start) as usize);
                    self.octets += tail.len();
                    self.covered += tail.len() as u64;
                    self.pieces.push_front((to, Piece::Octets(tail)));
                    break;
                }
            }
        }
    }

    /// Whether a placed PDU's record starts at `at`.
    pub fn done_at(&self, at: u64) -> bool {
        self.last_upto(at).is_some_and(|i| {
            self.pieces[i].0 == at && matches!(self.pieces[i].1, Piece::Done { .. })
        })
    }

    /// Whether nothing held meets `start..end`.
    pub fn is_clear(&self, start: u64, end: u64) -> bool {
        // Pieces are disjoint: the last one that starts before `end` is
        // the only one that can reach into `start..end` from the left.
        self.first_from(end)
            .checked_sub(1)
            .is_none_or(|i| self.pieces[i].0 + self.pieces[i].1.len() <= start)
    }

    /// Where pieces for `start..end` go, if nothing held meets it (see
    /// [`Held::is_clear`]): for [`Held::insert_done_at`].
    pub fn gap(&self, start: u64, end: u64) -> Option<usize> {
        let i = self.first_from(end);
        let clear = i
            .checked_sub(1)
            .is_none_or(|j| self.pieces[j].0 + self.pieces[j].1.len() <= start);
        clear.then_some(i)
    }

    /// Holds the record of a PDU of `len` stream octets at `start` whose
    /// octets were never held (see [`Held::is_clear`]).
    pub fn insert_done(&mut self, start: u64, len: u64, record: R) {
        let at = self.first_from(start);
        self.insert_done_at(at, start, len, record);
    }

    /// [`Held::insert_done`] at index `i`: [`Held::gap`] of a range
    /// `start..start + len` lies in, plus the records put there since.
    pub fn insert_done_at(&mut self, i: usize, start: u64, len: u64, record: R) {
        debug_assert_eq!(i, self.first_from(start));
        self.covered += len;
        self.pieces.insert(i, (start, Piece::Done { len, record }));
    }

    /// The piece at the in-order point, if one starts there.
    pub fn front(&self) -> Option<&Piece<R>> {
        self.pieces
            .front()
            .filter(|&&(s, _)| s == self.next)
            .map(|(_, p)| p)
    }

    /// Takes the piece at the in-order point and moves the point past it.
    pub fn pop_front(&mut self) -> Option<Piece<R>> {
        let piece = self.withdraw_front()?;
        self.next += piece.len();
        Some(piece)
    }

    /// Removes the piece at the in-order point without moving the point:
    /// its octets must come again (or [`Held::advance`] moves past them).
    pub fn withdraw_front(&mut self) -> Option<Piece<R>> {
        if self.pieces.front()?.0 != self.next {
            return None;
        }
        let (_, piece) = self.pieces.pop_front()?;
        self.forget(&piece);
        Some(piece)
    }

    fn forget(&mut self, piece: &Piece<R>) {
        if let Piece::Octets(v) = piece {
            self.octets -= v.len();
        }
        self.covered -= piece.len();
    }

    /// The octets `start..end`, if every one of them is held unplaced:
    /// borrowed when one piece holds them all, else copied into `scratch`.
    pub fn octets_in<'a>(
        &'a self,
        start: u64,
        end: u64,
        scratch: &'a mut Vec<u8>,
    ) -> Option<&'a [u8]> {
        if start < self.next || end < start {
            return None;
        }
        let mut i = self.holding(start)?;
        let (s, Piece::Octets(v)) = &self.pieces[i] else {
            return None;
        };
        let pe = s + v.len() as u64;
        if pe >= end {
            return Some(&v[(start - s) as usize..(end - s) as usize]);
        }
        scratch.clear();
        scratch.extend_from_slice(&v[(start - s) as usize..]);
        let mut at = pe;
        while at < end {
            i += 1;
            let Some((s, Piece::Octets(v))) = self.pieces.get(i) else {
                return None;
            };
            if *s != at {
                return None;
            }
            let n = v.len().min((end - at) as usize);
            scratch.extend_from_slice(&v[..n]);
            at += n as u64;
        }
        Some(scratch)
    }

    /// Up to `out.len()` octets from `start` on, as far as they are held
    /// unplaced and contiguous, copied into `out`; returns how many.
    pub fn prefix(&self, start: u64, out: &mut [u8]) -> usize {
        if start < self.next {
            return 0;
        }
        let Some(mut i) = self.holding(start) else {
            return 0;
        };
        let mut got = 0;
        let mut at = start;
        while got < out.len() {
            let Some((s, Piece::Octets(v))) = self.pieces.get(i) else {
                break;
            };
            if *s > at {
                break;
            }
            let from = (at - s) as usize;
            let n = (v.len() - from).min(out.len() - got);
            out[got..got + n].copy_from_slice(&v[from..from + n]);
            got += n;
            at += n as u64;
            i += 1;
        }
        got
    }

    /// Whether a placed PDU's record covers any of `start..end`.
    pub fn any_done_in(&self, start: u64, end: u64) -> bool {
        let from = self
            .holding(start)
            .unwrap_or_else(|| self.first_from(start));
        self.pieces
            .iter()
            .skip(from)
            .take_while(|&&(s, _)| s < end)
            .any(|(_, p)| matches!(p, Piece::Done { .. }))
    }

    /// Replaces the held octets `start..end` (all held unplaced, see
    /// [`Held::octets_in`]) by the record of the PDU they made up.
    pub fn mark_done(&mut self, start: u64, end: u64, record: R) {
        let Some(mut i) = self.holding(start) else {
            return;
        };
        // The piece holding `start`, cut short there.
        if self.pieces[i].0 < start {
            let (s, piece) = &mut self.pieces[i];
            let Piece::Octets(v) = piece else { return };
            let tail = v.split_off((start - *s) as usize);
            i += 1;
            self.pieces.insert(i, (start, Piece::Octets(tail)));
        }
        let mut at = start;
        while at < end && i < self.pieces.len() && self.pieces[i].0 == at {
            let Some((_, Piece::Octets(_))) = self.pieces.get(i) else {
                // Not reached: the caller checked these octets are held.
                break;
            };
            let Some((_, Piece::Octets(mut v))) = self.pieces.remove(i) else {
                break;
            };
            if at + v.len() as u64 > end {
                let tail = v.split_off((end - at) as usize);
                self.pieces.insert(i, (end, Piece::Octets(tail)));
            }
            self.octets -= v.len();
            at += v.len() as u64;
            self.recycle(v);
        }
        self.pieces.insert(
            i,
            (
                start,
                Piece::Done {
                    len: end - start,
                    record,
                },
            ),
        );
    }

    /// The held ranges, adjacent pieces merged: what a TCP receiver would
    /// report in SACK blocks.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut it = self.pieces.iter().peekable();
        std::iter::from_fn(move || {
            let (s, p) = it.next()?;
            let mut e = s + p.len();
            while let Some((ns, np)) = it.peek() {
                if *ns != e {
                    break;
                }
                e += np.len();
                it.next();
            }
            Some((*s, e))
        })
    }
}

/// A queue kept in a vector from `head` on: its live part is one slice
/// (a binary search and an insertion near the end cost what they cost in
/// a vector), and taking from the front is moving `head` on, the slots
/// before it reclaimed when they are half the vector or all of it.
#[derive(Debug, Clone)]
struct Queue<T> {
    items: Vec<T>,
    head: usize,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            head: 0,
        }
    }
}

impl<T> std::ops::Index<usize> for Queue<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.items[self.head + i]
    }
}

impl<T> std::ops::IndexMut<usize> for Queue<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        let head = self.head;
        &mut self.items[head + i]
    }
}

impl<T: Default> Queue<T> {
    fn live(&self) -> &[T] {
        &self.items[self.head..]
    }

    fn len(&self) -> usize {
        self.items.len() - self.head
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn front(&self) -> Option<&T> {
        self.live().first()
    }

    fn get(&self, i: usize) -> Option<&T> {
        self.live().get(i)
    }

    fn iter(&self) -> std::slice::Iter<'_, T> {
        self.live().iter()
    }

    fn partition_point(&self, pred: impl FnMut(&T) -> bool) -> usize {
        self.live().partition_point(pred)
    }

    fn insert(&mut self, i: usize, item: T) {
        if i == 0 && self.head > 0 {
            self.head -= 1;
            self.items[self.head] = item;
        } else {
            self.items.insert(self.head + i, item);
        }
    }

    fn push_front(&mut self, item: T) {
        self.insert(0, item);
    }

    fn remove(&mut self, i: usize) -> Option<T> {
        if i == 0 {
            return self.pop_front();
        }
        (i < self.len()).then(|| self.items.remove(self.head + i))
    }

    fn pop_front(&mut self) -> Option<T> {
        let item = std::mem::take(self.items.get_mut(self.head)?);
        self.head += 1;
        if self.head == self.items.len() {
            self.items.clear();
            self.head = 0;
        } else if self.head >= 32 && self.head * 2 >= self.items.len() {
            self.items.drain(..self.head);
            self.head = 0;
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held() -> Held<u32> {
        Held::new(100, 1 << 20)
    }

    #[test]
    fn insert_keeps_what_arrived_first() {
        let mut h = held();
        let mut new = Vec::new();
        h.insert(110, b"abcd", 1000, &mut new);
        assert_eq!(new, [(110, 114)]);
        new.clear();
        // Overlaps on both sides: only the octets around it are new.
        h.insert(108, b"XXYYYYZZ", 1000, &mut new);
        assert_eq!(new, [(108, 110), (114, 116)]);
        let mut scratch = Vec::new();
        assert_eq!(h.octets_in(108, 116, &mut scratch), Some(&b"XXabcdZZ"[..]));
        assert_eq!(h.octets_in(110, 113, &mut scratch), Some(&b"abc"[..]));
        assert_eq!(h.octets_in(107, 110, &mut scratch), None);
        assert_eq!(h.octets(), 8);
        // Before the in-order point, and past the limit: not held.
        new.clear();
        h.insert(90, &[7u8; 32], 120, &mut new);
        assert_eq!(new, [(100, 108), (116, 120)]);
        assert_eq!(h.ranges().collect::<Vec<_>>(), [(100, 120)]);
    }

    #[test]
    fn done_pieces_replace_their_octets() {
        let mut h = held();
        let mut new = Vec::new();
        h.insert(100, b"0123", 1000, &mut new);
        h.insert(104, b"4567", 1000, &mut new);
        h.insert(108, b"89", 1000, &mut new);
        h.mark_done(102, 109, 7);
        assert_eq!(h.octets(), 3);
        assert_eq!(h.covered(), 10);
        assert!(h.any_done_in(108, 110) && !h.any_done_in(109, 110));
        let mut out = [0u8; 4];
        assert_eq!(h.prefix(100, &mut out), 2);
        assert_eq!(&out[..2], b"01");
        match h.pop_front() {
            Some(Piece::Octets(v)) => assert_eq!(v, b"01"),
            other => panic!("{other:?}"),
        }
        match h.pop_front() {
            Some(Piece::Done { len: 7, record: 7 }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(h.next(), 109);
        assert!(matches!(h.front(), Some(Piece::Octets(v)) if v == b"9"));
    }

    #[test]
    fn skipping_drops_what_lies_before() {
        let mut h = held();
        let mut new = Vec::new();
        h.insert(104, b"abcd", 1000, &mut new);
        h.insert(110, b"efgh", 1000, &mut new);
        h.mark_done(110, 114, 1);
        h.insert(120, b"ijkl", 1000, &mut new);
        h.skip_to(106);
        assert_eq!(h.next(), 106);
        assert_eq!(h.octets(), 6);
        assert!(matches!(h.front(), Some(Piece::Octets(v)) if v == b"cd"));
        assert!(h.done_at(110) && !h.done_at(106));
        h.skip_to(112);
        assert_eq!(h.ranges().collect::<Vec<_>>(), [(120, 124)]);
        assert_eq!((h.octets(), h.covered()), (4, 4));
        h.skip_to(50);
        assert_eq!(h.next(), 112);
    }

    #[test]
    fn the_budget_bounds_what_is_held() {
        let mut h: Held<u32> = Held::new(0, 3 * PIECE_OVERHEAD + 10);
        let mut new = Vec::new();
        let mut dropped = 0;
        for i in 0..10u64 {
            dropped += h.insert(10 + i * 4, &[1, 2], 1 << 20, &mut new);
        }
        assert!(h.octets() + h.pieces() * PIECE_OVERHEAD <= 3 * PIECE_OVERHEAD + 10);
        assert_eq!(dropped, 20 - h.octets() as u64);
    }

    /// Against a model that keeps, per stream offset, whether its octet is
    /// held, placed, or not there.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Slot {
        Missing,
        Held,
        /// Part of the placed PDU that starts there.
        Done(u64),
    }

    fn octet(at: u64) -> u8 {
        (at * 7 % 251) as u8
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_a_per_octet_model(
            ops in proptest::collection::vec((0u8..4, 0u64..300, 1u64..60), 1..60),
        ) {
            let base = 100u64;
            let mut h: Held<u64> = Held::new(base, 1 << 20);
            let mut model = vec![Slot::Missing; 500];
            let mut next = base;
            let mut new = Vec::new();
            for (op, a, n) in ops {
                let start = base + a;
                match op {
                    0 | 1 => {
                        let bytes: Vec<u8> = (start..start + n).map(octet).collect();
                        new.clear();
                        h.insert(start, &bytes, 1000, &mut new);
                        for at in start.max(next)..start + n {
                            if model[at as usize] == Slot::Missing {
                                model[at as usize] = Slot::Held;
                            }
                        }
                    }
                    2 => {
                        // Place a run held whole, as a PDU.
                        let end = start + n;
                        let all_held = start >= next
                            && (start..end).all(|x| model[x as usize] == Slot::Held);
                        let mut scratch = Vec::new();
                        let got = h.octets_in(start, end, &mut scratch).map(<[u8]>::to_vec);
                        proptest::prop_assert_eq!(got.is_some(), all_held);
                        if let Some(v) = got {
                            let want: Vec<u8> = (start..end).map(octet).collect();
                            proptest::prop_assert_eq!(v, want);
                            h.mark_done(start, end, start);
                            for x in start..end {
                                model[x as usize] = Slot::Done(start);
                            }
                        }
                    }
                    _ => {
                        let to = start.min(base + 400);
                        h.skip_to(to);
                        next = next.max(to);
                        // A placed PDU that begins before goes whole.
                        for m in &mut model {
                            if matches!(*m, Slot::Done(s) if s < next) {
                                *m = Slot::Missing;
                            }
                        }
                        for m in &mut model[..next as usize] {
                            *m = Slot::Missing;
                        }
                    }
                }
                // Every view agrees with the model.
                let held = model.iter().filter(|&&m| m == Slot::Held).count();
                let covered = model.iter().filter(|&&m| m != Slot::Missing).count();
                proptest::prop_assert_eq!(h.octets(), held);
                proptest::prop_assert_eq!(h.covered(), covered as u64);
                let mut from_ranges = vec![false; 500];
                for (s, e) in h.ranges() {
                    from_ranges[s as usize..e as usize].iter_mut().for_each(|x| *x = true);
                }
                for (x, m) in model.iter().enumerate() {
                    proptest::prop_assert_eq!(from_ranges[x], *m != Slot::Missing, "octet {}", x);
                    let mut one = [0u8];
                    let got = h.prefix(x as u64, &mut one);
                    proptest::prop_assert_eq!(got == 1, *m == Slot::Held && x as u64 >= next);
                    if got == 1 {
                        proptest::prop_assert_eq!(one[0], octet(x as u64));
                    }
                }
            }
        }
    }
}
