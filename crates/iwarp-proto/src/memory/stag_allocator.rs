//! Where new STags come from: unpredictable to a peer, never repeated
//! soon, with no state beyond a key and a counter.
//!
//! A peer that knows or guesses another client's STag can read or write
//! that client's region if both share a protection domain (the usual case
//! for a server). A counter (`0x100`, `0x200`, ...) lets it guess them all,
//! so STags are drawn from a keyed pseudo-random permutation of a 32-bit
//! counter instead (RFC 5042's analysis of STag guessing; Linux `siw`
//! starts its index search at a random point for the same reason):
//!
//! - step `n` (a 32-bit counter) splits into `c = n mod 2^24` and
//!   `epoch = n / 2^24`;
//! - the index is `P(c)`, a keyed permutation of the 24-bit indices;
//! - the key, unless the consumer chose one, is `Q_index(epoch)`, a keyed
//!   permutation of the 256 epochs that differs for every index.
//!
//! What this promises, exactly:
//!
//! - **Unpredictable.** Without the secret (128 bits from the operating
//!   system's generator), the STags a peer has seen say nothing useful
//!   about the others: every STag not yet seen is, to the peer, about
//!   equally likely among the 2^32 - 2^8 possible (index 0 is never used).
//!   The odds of a blind guess are in the [module documentation](super).
//! - **An index comes back only after a full cycle.** Since `P` is a
//!   permutation, the 2^24 steps of a cycle visit every index once: two
//!   registrations at the same index are at least 2^24 - 1 allocation
//!   steps apart (a step issues an STag, or passes over an index that is
//!   still in use). So even with a fixed consumer key, a stale STag that
//!   a peer kept names nothing new for at least 2^24 registrations.
//! - **A table-chosen STag comes back only after 2^32 steps.** The map from
//!   `n` to (index, key) is a bijection of the 32-bit counter, so with
//!   table-chosen keys no STag is issued twice in 2^32 allocation steps,
//!   and at one index, 256 registrations in a row get 256 different keys.
//!   8 key bits cannot promise more than that without remembering every
//!   index ever used, which is the table that grows with the index space
//!   this design avoids. A consumer who chooses keys is responsible for
//!   them (as with verbs `ibv_inc_rkey`).
//!
//! Each permutation is a balanced Feistel network (two 12-bit halves for
//! the index, two 4-bit halves for the key) whose round function is
//! SipHash-2-4, a keyed pseudo-random function made for short inputs
//! (`siphasher` crate). A Feistel network is a permutation whatever its
//! round function, so the guarantees above hold by construction; ten
//! rounds, as NIST's FF1 format-preserving cipher uses on small domains,
//! keep it far from distinguishable at the few thousand outputs a peer
//! can see. This is written here rather than taken from a format-preserving
//! encryption crate because it is a dozen lines over a well-kept PRF, and
//! an FF1 crate would bring AES and an allocation per call to a path that
//! needs neither.

use siphasher::sip::SipHasher24;

use super::STag;

/// Feistel rounds for each permutation (as FF1).
const ROUNDS: u8 = 10;
/// Index bits (the STag's upper 24) and the halves the network splits them in.
const INDEX_BITS: u32 = 24;
/// Key bits (the STag's low 8).
const KEY_BITS: u32 = 8;

/// Round-function domains, so that the two permutations never share an
/// input.
const INDEX_DOMAIN: u8 = b'I';
const KEY_DOMAIN: u8 = b'K';

/// The STag sequence of one memory table.
#[derive(Clone)]
pub(crate) struct StagAllocator {
    prf: SipHasher24,
    /// The next step. Wraps at 2^32, which is where the sequence repeats.
    step: u32,
}

impl StagAllocator {
    /// A sequence keyed by `key` (128 bits): from the operating system's
    /// generator in production, a fixed value in tests.
    pub(crate) fn new(key: [u8; 16]) -> Self {
        Self {
            prf: SipHasher24::new_with_key(&key),
            step: 0,
        }
    }

    /// The next candidate STag, with `consumer_key` as its key if given.
    /// The caller skips candidates whose index is 0 or still in use; every
    /// call advances the sequence, so a skipped index is not offered again
    /// for a whole cycle.
    pub(crate) fn next_candidate(&mut self, consumer_key: Option<u8>) -> STag {
        let n = self.step;
        self.step = n.wrapping_add(1);
        let index = self.index_at(n & STag::MAX_INDEX);
        let epoch = (n >> INDEX_BITS) as u8;
        let key = consumer_key.unwrap_or_else(|| self.key_at(index, epoch));
        STag::new(index, key)
    }

    /// `P(c)`: the index of cycle position `c`.
    fn index_at(&self, c: u32) -> u32 {
        feistel(INDEX_BITS, c, |round, half| {
            self.round(INDEX_DOMAIN, round, 0, half)
        })
    }

    /// `Q_index(epoch)`: the key of `index` in `epoch`.
    fn key_at(&self, index: u32, epoch: u8) -> u8 {
        feistel(KEY_BITS, u32::from(epoch), |round, half| {
            self.round(KEY_DOMAIN, round, index, half)
        }) as u8
    }

    /// The round function: SipHash of (domain, round, tweak, half).
    fn round(&self, domain: u8, round: u8, tweak: u32, half: u32) -> u32 {
        let mut input = [0u8; 10];
        input[0] = domain;
        input[1] = round;
        input[2..6].copy_from_slice(&tweak.to_le_bytes());
        input[6..].copy_from_slice(&half.to_le_bytes());
        self.prf.hash(&input) as u32
    }
}

/// Shows the position, never the secret.
impl std::fmt::Debug for StagAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagAllocator")
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

/// A balanced Feistel network on `bits` bits (even, at most 32): a
/// permutation of `0..2^bits` for any round function `f`.
fn feistel(bits: u32, x: u32, f: impl Fn(u8, u32) -> u32) -> u32 {
    let half_bits = bits / 2;
    let mask = (1u32 << half_bits) - 1;
    let (mut left, mut right) = ((x >> half_bits) & mask, x & mask);
    for round in 0..ROUNDS {
        (left, right) = (right, left ^ (f(round, right) & mask));
    }
    (left << half_bits) | right
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The inverse of [`feistel`], to show it is a bijection.
    fn feistel_inverse(bits: u32, y: u32, f: impl Fn(u8, u32) -> u32) -> u32 {
        let half_bits = bits / 2;
        let mask = (1u32 << half_bits) - 1;
        let (mut left, mut right) = ((y >> half_bits) & mask, y & mask);
        for round in (0..ROUNDS).rev() {
            (left, right) = (right ^ (f(round, left) & mask), left);
        }
        (left << half_bits) | right
    }

    fn allocator(seed: u8) -> StagAllocator {
        StagAllocator::new([seed; 16])
    }

    #[test]
    fn every_key_permutation_is_a_bijection() {
        let a = allocator(1);
        for index in [1, 2, 0x12_3456, STag::MAX_INDEX] {
            let keys: HashSet<u8> = (0..=255).map(|e| a.key_at(index, e)).collect();
            assert_eq!(keys.len(), 256, "index {index:#x}");
        }
    }

    #[test]
    fn the_index_permutation_inverts() {
        let a = allocator(2);
        let f = |round, half| a.round(INDEX_DOMAIN, round, 0, half);
        for c in (0..=STag::MAX_INDEX).step_by(997).chain([STag::MAX_INDEX]) {
            let i = a.index_at(c);
            assert!(i <= STag::MAX_INDEX);
            assert_eq!(feistel_inverse(INDEX_BITS, i, f), c);
        }
    }

    /// A full cycle of 2^24 steps visits every index exactly once. Run in
    /// release builds only (16 M SipHash networks), by
    /// `cargo test --release -p iwarp-proto -- --ignored`.
    #[test]
    #[ignore = "a full 2^24 cycle; run with --release -- --ignored"]
    fn a_cycle_visits_every_index_once() {
        let mut a = allocator(3);
        let mut seen = vec![0u64; 1 << 18];
        for _ in 0..=STag::MAX_INDEX {
            let i = a.next_candidate(None).index() as usize;
            assert_eq!(seen[i / 64] & (1 << (i % 64)), 0, "index {i:#x} twice");
            seen[i / 64] |= 1 << (i % 64);
        }
    }

    #[test]
    fn consecutive_stags_look_unrelated() {
        let mut a = allocator(4);
        let stags: Vec<STag> = (0..4096).map(|_| a.next_candidate(None)).collect();
        // No two share an index within a cycle.
        let indices: HashSet<u32> = stags.iter().map(|s| s.index()).collect();
        assert_eq!(indices.len(), stags.len());
        // Index and key bits are balanced: each of the 32 bits is set in
        // about half the STags (4096 draws: 2048 ± 4.5 sigma = ±144).
        for bit in 0..32 {
            let ones = stags.iter().filter(|s| s.0 & (1 << bit) != 0).count();
            assert!((1904..=2192).contains(&ones), "bit {bit}: {ones} of 4096");
        }
        // Neighbours differ in about half their bits, not in one.
        let close = stags
            .windows(2)
            .filter(|w| (w[0].0 ^ w[1].0).count_ones() < 6)
            .count();
        assert!(close < 20, "{close} neighbours within 5 bits");
    }

    #[test]
    fn the_same_key_gives_the_same_sequence_and_another_key_another() {
        let run = |seed| {
            let mut a = allocator(seed);
            (0..64).map(|_| a.next_candidate(None)).collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn a_consumer_key_replaces_the_key_only() {
        let (mut a, mut b) = (allocator(7), allocator(7));
        for _ in 0..100 {
            let (chosen, own) = (a.next_candidate(Some(0x5a)), b.next_candidate(None));
            assert_eq!(chosen.key(), 0x5a);
            assert_eq!(chosen.index(), own.index());
        }
    }

    #[test]
    fn one_index_gets_a_new_key_every_cycle() {
        // The step at which cycle position c comes back is c + k * 2^24:
        // the same index, each time with the next epoch's key.
        let a = allocator(8);
        let c = 0x00_abcd;
        let mut keys = HashSet::new();
        let mut index = None;
        for epoch in 0..=255u32 {
            let mut b = a.clone();
            b.step = c + (epoch << INDEX_BITS);
            let s = b.next_candidate(None);
            assert_eq!(*index.get_or_insert(s.index()), s.index());
            assert!(keys.insert(s.key()), "key {:#04x} twice", s.key());
        }
    }
}
