//! Segments in, PDUs out as soon as they are whole: the framing half of
//! the out-of-order path, shared by the receiver and the capture decoder.
//!
//! [`Reorder`] holds what arrived beyond the in-order point ([`Held`]) and
//! looks for whole PDUs in it. A PDU's first octet is known from:
//!
//! - a marker: its FPDUPTR (MPA) or FramePtr (IFT) points at it;
//! - the end of a PDU found before it: the lengths chain PDUs together;
//! - the start of a segment, when the framing allows the guess (a sender
//!   that aligns PDUs with segments makes it right; the PDU's own checks
//!   confirm it).
//!
//! A candidate whose PDU is not all there yet is kept and tried again when
//! octets arrive around it. A whole PDU is checked by a fresh in-order
//! deframer started at its first octet ([`Checker`]); one that passes is
//! offered to the caller, who may place it and hand back a record to keep
//! in its stead. One that fails is left where it is: the in-order path
//! reaches it in time and reports what is wrong with it, as it would
//! without this path.

use std::collections::BTreeMap;

use crate::framing::MARKER_LEN;

use super::framing::OooFraming;
use super::held::{Held, Piece};
use super::pdu::{Checker, Pdu};

/// The most candidate PDU starts remembered at once; beyond it, the
/// farthest are forgotten (the in-order path still reaches them).
const MAX_CANDIDATES: usize = 4096;

/// Octets enough to read any PDU's length fields, markers included.
const LENGTH_PREFIX: usize = 16;

/// What became of a PDU offered to the caller.
#[derive(Debug)]
pub enum Offer<R> {
    /// Placed: keep this record instead of its octets.
    Placed(R),
    /// Not placed: keep its octets for the in-order path.
    Kept,
}

/// The framing half of the out-of-order path. See the module
/// documentation.
#[derive(Debug, Clone)]
pub struct Reorder<F: OooFraming, R> {
    framing: F,
    held: Held<R>,
    /// PDU starts to try when the octets around them arrive, each with
    /// the end of what it waits for: its PDU's end once its length is
    /// known, else the end of its length fields.
    candidates: BTreeMap<u64, u64>,
    /// PDUs checked and kept (start to end), so that a duplicate segment
    /// does not check them again.
    kept: BTreeMap<u64, u64>,
    checker: Checker,
    scratch: Vec<u8>,
    new: Vec<(u64, u64)>,
    tries: Vec<u64>,
    /// The most octets held beyond the in-order point.
    window: u64,
    dropped: u64,
}

impl<F: OooFraming, R> Reorder<F, R> {
    /// Nothing held; the in-order point at stream offset `next`. Octets at
    /// or beyond `next + window` are not held; at most `budget` octets
    /// (plus a fixed charge per held piece) are.
    pub fn new(framing: F, next: u64, window: usize, budget: usize) -> Self {
        Self {
            framing,
            held: Held::new(next, budget),
            candidates: BTreeMap::new(),
            kept: BTreeMap::new(),
            checker: Checker::default(),
            scratch: Vec::new(),
            new: Vec::new(),
            tries: Vec::new(),
            window: window as u64,
            dropped: 0,
        }
    }

    /// The framing.
    pub fn framing(&self) -> &F {
        &self.framing
    }

    /// What is held.
    pub fn held(&self) -> &Held<R> {
        &self.held
    }

    /// The in-order point.
    pub fn next(&self) -> u64 {
        self.held.next()
    }

    /// Octets dropped so far for want of window or budget.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Candidates remembered.
    pub fn candidates(&self) -> usize {
        self.candidates.len()
    }

    /// Octets from the in-order point on went to the in-order path
    /// straight from a segment.
    pub fn advance(&mut self, n: u64) {
        self.held.advance(n);
        self.prune();
    }

    /// Takes the piece at the in-order point, moving the point past it.
    pub fn pop_front(&mut self) -> Option<Piece<R>> {
        let p = self.held.pop_front();
        self.prune();
        p
    }

    /// Takes back the buffer of a piece taken from the front, its octets
    /// used: see [`Held::recycle`].
    pub fn recycle(&mut self, v: Vec<u8>) {
        self.held.recycle(v);
    }

    /// Takes the piece at the in-order point without moving the point:
    /// then [`Reorder::advance`] past it, or leave it withdrawn (its
    /// octets must come again).
    pub fn take_front(&mut self) -> Option<Piece<R>> {
        self.held.withdraw_front()
    }

    /// The piece at the in-order point, if one starts there.
    pub fn front(&self) -> Option<&Piece<R>> {
        self.held.front()
    }

    /// Moves the in-order point on to `to`, dropping what is held before
    /// it (see [`Held::skip_to`]).
    pub fn skip_to(&mut self, to: u64) {
        if to > self.held.next() {
            self.held.skip_to(to);
            self.prune();
        }
    }

    /// Whether a PDU found ahead, and offered, starts at `at`.
    pub fn pdu_at(&self, at: u64) -> bool {
        self.held.done_at(at) || self.kept.contains_key(&at)
    }

    /// Drops the piece at the in-order point: its octets must come again.
    pub fn withdraw_front(&mut self) -> Option<Piece<R>> {
        self.held.withdraw_front()
    }

    fn prune(&mut self) {
        // One by one: few are behind at a time, and splitting the maps
        // would allocate.
        let next = self.held.next();
        while self
            .candidates
            .first_key_value()
            .is_some_and(|(&c, _)| c < next)
        {
            self.candidates.pop_first();
        }
        while self.kept.first_key_value().is_some_and(|(&c, _)| c < next) {
            self.kept.pop_first();
        }
    }

    /// Holds `octets`, which start at stream offset `start` (those not
    /// held already, not before the in-order point, within the window),
    /// then offers each PDU this makes whole to `offer`. `segment_start`
    /// is where the TCP segment they came in began, if that is `start`:
    /// a place where a PDU may be guessed to begin.
    pub fn insert(
        &mut self,
        start: u64,
        octets: &[u8],
        segment_start: Option<u64>,
        offer: &mut dyn FnMut(&Pdu<'_>) -> Offer<R>,
    ) {
        let next = self.held.next();
        let limit = next + self.window;
        let full_end = start + octets.len() as u64;
        self.dropped += full_end.saturating_sub(limit.max(start));
        if !self.framing.may_place_early() {
            let mut new = std::mem::take(&mut self.new);
            new.clear();
            self.dropped += self.held.insert(start, octets, limit, &mut new);
            self.new = new;
            return;
        }
        // PDUs that lie whole in a segment nothing of which is held yet
        // (a sender that aligns PDUs with segments makes that the rule)
        // are checked and offered straight from it: nothing is copied.
        let (mut start, mut octets) = (start, octets);
        let gap = (start >= next && full_end <= limit)
            .then(|| self.held.gap(start, full_end))
            .flatten();
        if let Some(gap) = gap {
            let placed = self.place_whole(gap, start, octets, segment_start, offer);
            start += placed as u64;
            octets = &octets[placed..];
            if octets.is_empty() {
                return;
            }
        }
        let mut new = std::mem::take(&mut self.new);
        new.clear();
        self.dropped += self.held.insert(start, octets, limit, &mut new);
        let end = (start + octets.len() as u64).min(limit);
        if new.is_empty() {
            self.new = new;
            return;
        }
        if let Some(s) = segment_start.filter(|&s| s >= next && s < end) {
            if s == start && self.framing.guesses_at_segment_starts() {
                self.add_candidate(s);
            }
        }
        for &(s, e) in &new {
            self.markers_in(s, e);
        }
        // Candidates whose PDU may have just become whole: those that wait
        // for octets among the new ones.
        let lo = new[0]
            .0
            .saturating_sub(crate::mpa::MAX_FPDU_WIRE_LEN as u64);
        let hi = new[new.len() - 1].1;
        let mut tries = std::mem::take(&mut self.tries);
        tries.clear();
        tries.extend(
            self.candidates
                .range(lo..hi)
                .filter(|&(_, &wait)| new.iter().any(|&(s, _)| wait > s))
                .map(|(&c, _)| c),
        );
        while let Some(c) = tries.pop() {
            if let Some(end) = self.try_candidate(c, offer) {
                // The lengths chain the PDUs together, into octets held
                // before as well.
                if !self.candidates.contains_key(&end) {
                    self.add_candidate(end);
                    tries.push(end);
                }
            }
        }
        self.tries = tries;
        self.new = new;
        while self.candidates.len() > MAX_CANDIDATES {
            self.candidates.pop_last();
        }
    }

    /// Checks and offers the PDUs at the front of `octets`, a segment at
    /// `start` none of whose octets is held (`gap`: where its pieces go
    /// among the held ones), as long as each begins where a PDU is known
    /// or guessed to begin and lies whole in it. Returns the octets it
    /// took.
    fn place_whole(
        &mut self,
        gap: usize,
        start: u64,
        octets: &[u8],
        segment_start: Option<u64>,
        offer: &mut dyn FnMut(&Pdu<'_>) -> Offer<R>,
    ) -> usize {
        let mut at = 0usize;
        let mut gap = Some(gap);
        while at < octets.len() {
            let pos = start + at as u64;
            let rest = &octets[at..];
            let guessed =
                at == 0 && segment_start == Some(start) && self.framing.guesses_at_segment_starts();
            let known = guessed
                || self.marker_in(pos, rest) == Some(pos)
                || self.candidates.contains_key(&pos);
            if !known {
                break;
            }
            let mut deframer = self.framing.deframer_at(pos);
            let Some(len) = self
                .framing
                .pdu_len_for(&deframer, pos, rest)
                .filter(|&l| l <= rest.len())
            else {
                break;
            };
            let Some(pdu) = self.checker.check(&mut deframer, pos, &rest[..len]) else {
                break;
            };
            match offer(&pdu) {
                Offer::Placed(record) => match &mut gap {
                    Some(i) => {
                        self.held.insert_done_at(*i, pos, len as u64, record);
                        *i += 1;
                    }
                    None => self.held.insert_done(pos, len as u64, record),
                },
                Offer::Kept => {
                    // Held octets go in too: find the place of the next
                    // record again.
                    gap = None;
                    let mut new = std::mem::take(&mut self.new);
                    new.clear();
                    self.dropped += self.held.insert(pos, &rest[..len], u64::MAX, &mut new);
                    self.new = new;
                    self.kept.insert(pos, pos + len as u64);
                }
            }
            if !guessed {
                self.candidates.remove(&pos);
            }
            at += len;
        }
        // Where the last one ended another begins: worth remembering when
        // what follows is held, or when no segment start is a guess.
        if at > 0 && (at < octets.len() || !self.framing.guesses_at_segment_starts()) {
            self.add_candidate(start + at as u64);
        }
        at
    }

    /// Where the first marker among `octets` (at stream offset `pos`)
    /// says its PDU begins.
    fn marker_in(&self, pos: u64, octets: &[u8]) -> Option<u64> {
        let interval = self.framing.markers()?;
        let m = interval.next_marker_at(pos);
        let i = usize::try_from(m - pos).ok()?;
        let bytes: [u8; MARKER_LEN] = octets.get(i..i + MARKER_LEN)?.try_into().ok()?;
        self.framing.marker_points_to(m, bytes)
    }

    fn add_candidate(&mut self, at: u64) {
        if at >= self.held.next() {
            self.candidates
                .entry(at)
                .or_insert(at + LENGTH_PREFIX as u64);
        }
    }

    /// Adds the starts that the markers among the new octets `s..e` (or
    /// completed by them) point at.
    fn markers_in(&mut self, s: u64, e: u64) {
        let Some(interval) = self.framing.markers() else {
            return;
        };
        let mut m = interval.next_marker_at(s.saturating_sub(MARKER_LEN as u64 - 1));
        while m < e {
            let mut octets = [0u8; MARKER_LEN];
            if m >= self.held.next() && self.held.prefix(m, &mut octets) == MARKER_LEN {
                if let Some(to) = self.framing.marker_points_to(m, octets) {
                    self.add_candidate(to);
                }
            }
            m += u64::from(interval.get());
        }
    }

    /// Tries the PDU that starts at `at`: when it is all there, checks it
    /// and offers it. Returns where it ends once that is known for sure
    /// (it passed its checks).
    fn try_candidate(
        &mut self,
        at: u64,
        offer: &mut dyn FnMut(&Pdu<'_>) -> Offer<R>,
    ) -> Option<u64> {
        if at < self.held.next() || self.kept.contains_key(&at) {
            self.candidates.remove(&at);
            return self.kept.get(&at).copied();
        }
        let mut prefix = [0u8; LENGTH_PREFIX];
        let got = self.held.prefix(at, &mut prefix);
        // Not enough octets to read the length: wait for them.
        let len = self.framing.pdu_len(at, &prefix[..got])?;
        let end = at + len as u64;
        if self.held.any_done_in(at, end) || end > self.held.next() + self.window {
            self.candidates.remove(&at);
            return None;
        }
        let Some(pdu_octets) = self.held.octets_in(at, end, &mut self.scratch) else {
            // Wait for the rest of it.
            self.candidates.insert(at, end);
            return None;
        };
        // All there: checked now, whatever the outcome.
        self.candidates.remove(&at);
        let mut deframer = self.framing.deframer_at(at);
        let pdu = self.checker.check(&mut deframer, at, pdu_octets)?;
        match offer(&pdu) {
            Offer::Placed(record) => self.held.mark_done(at, end, record),
            Offer::Kept => {
                self.kept.insert(at, end);
            }
        }
        Some(end)
    }
}
