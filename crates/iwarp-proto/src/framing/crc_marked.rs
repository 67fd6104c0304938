//! Payload copied with a marker every 512 octets and CRC32c folded over
//! the copy in the same pass: MPA's transmit path with markers and CRC.
//!
//! With markers, an FPDU's payload is copied into the transmit batch with
//! a marker before every 508 octets of it (a marker period: 4 octets of
//! marker, 508 of payload), and MPA's CRC covers the copy, markers
//! included. Copied first and then summed, that is two passes over the
//! octets. On x86-64 with AVX2 and VPCLMULQDQ, [`append_periods`] makes
//! one: each 32-octet block of the wire octets is loaded from the payload
//! (shifted by the markers before it), stored into the batch and folded
//! at once with 256-bit carry-less multiplies, whose throughput bounds
//! the loop; the copy hides behind them. A 64 KiB FPDU took 2.73 µs
//! against 3.35–3.52 copied and then summed
//! (`cargo bench -p iwarp-proto --bench mpa -- fpdu_transmit/markers`).
//!
//! `crc_hybrid` sums long inputs faster by giving part of them to three
//! streams of CRC32 instructions beside the fold. Built into this loop
//! they made it slower (3.7 µs per 64 KiB FPDU, and 3.3 with the stores
//! left out), so it only folds.

use super::{MarkerInterval, MARKER_LEN};

/// Octets of a marker period: a marker and the payload run after it.
/// MPA's interval (and IFT's usual one); the loop's 16 blocks of 32
/// octets per period depend on it.
pub(crate) const PERIOD: usize = MarkerInterval::DEFAULT.get() as usize;
const _: () = assert!(PERIOD == 512);
/// Payload octets in a marker period.
pub(crate) const RUN: usize = PERIOD - MARKER_LEN;

/// What the CRC of [`append_periods`] covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Covers {
    /// The appended octets, markers included: MPA's CRC.
    Wire,
    /// The payload alone: IFT's payload CRC, which leaves markers out.
    Payload,
}

/// Appends to `out` the whole marker periods `payload` makes (its length
/// is a multiple of [`RUN`]): before each run of 508 octets, its marker,
/// `marker(i)` for the `i`-th. Returns `crc` (the finished CRC32c of what
/// came before, 0 for nothing) continued over the appended octets or over
/// `payload`, as `covers` says.
pub(crate) fn append_periods(
    crc: u32,
    out: &mut Vec<u8>,
    payload: &[u8],
    marker: impl Fn(usize) -> [u8; MARKER_LEN],
    covers: Covers,
) -> u32 {
    debug_assert!(payload.len().is_multiple_of(RUN));
    let periods = payload.len() / RUN;
    #[cfg(target_arch = "x86_64")]
    if periods > 0 && super::crc_hybrid::available() {
        return fused::append_periods(crc, out, payload, marker, covers);
    }
    let start = out.len();
    out.reserve(periods * PERIOD);
    for (i, run) in payload.chunks_exact(RUN).enumerate() {
        out.extend_from_slice(&marker(i));
        out.extend_from_slice(run);
    }
    let summed = match covers {
        Covers::Wire => &out[start..],
        Covers::Payload => payload,
    };
    super::crc::crc32c_append(crc, summed)
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod fused {
    use std::arch::x86_64::{
        __m256i, _mm256_blend_epi32, _mm256_loadu_si256, _mm256_permutevar8x32_epi32,
        _mm256_set1_epi32, _mm256_set_epi64x, _mm256_setr_epi32, _mm256_storeu_si256,
        _mm256_xor_si256,
    };
    use std::mem::MaybeUninit;

    use super::super::crc::crc32c_append;
    use super::super::crc_hybrid::{fold256, reduce_lanes, turn_constants, FOLD_BLOCK};
    use super::{Covers, MARKER_LEN, PERIOD, RUN};

    /// 32-octet blocks in a marker period.
    const BLOCKS: usize = PERIOD / 32;
    /// Blocks each fold turn takes (the four lanes).
    const LANES: usize = FOLD_BLOCK / 32;

    /// [`super::append_periods`] on a CPU with what `crc_hybrid` uses.
    pub(super) fn append_periods(
        crc: u32,
        out: &mut Vec<u8>,
        payload: &[u8],
        marker: impl Fn(usize) -> [u8; MARKER_LEN],
        covers: Covers,
    ) -> u32 {
        let periods = payload.len() / RUN;
        assert!(periods > 0 && payload.len() == periods * RUN);
        let len = periods * PERIOD;
        let start = out.len();
        out.reserve(len);
        let marker = move |i| u32::from_le_bytes(marker(i));
        let wire = Wire {
            payload: payload.as_ptr(),
            out: out.spare_capacity_mut()[..len].as_mut_ptr(),
            periods,
        };
        // Both calls' safety: the caller checked `crc_hybrid::available()`
        // (AVX2, VPCLMULQDQ, PCLMULQDQ and SSE4.2, the features `fused`
        // and `fused_payload` are compiled for), and `wire` holds
        // `periods` whole runs of payload and room for as many periods.
        let crc = match covers {
            Covers::Wire => {
                // SAFETY: as just said.
                !unsafe { fused(!crc, &wire, &marker) }
            }
            Covers::Payload => {
                // SAFETY: as just said.
                let (state, folded) = unsafe { fused_payload(!crc, &wire, &marker) };
                crc32c_append(!state, &payload[folded..])
            }
        };
        // SAFETY: `fused` and `fused_payload` stored every one of the
        // `len` octets after `start` (each block of each period once; see
        // their loops), and `reserve` made room for them.
        unsafe { out.set_len(start + len) };
        crc
    }

    /// Where the payload's runs are read and their periods written: raw
    /// pointers, so that the loop pays one length check (in
    /// `append_periods`) rather than two per 32 octets.
    struct Wire {
        /// `periods * RUN` readable octets.
        payload: *const u8,
        /// `periods * PERIOD` writable octets.
        out: *mut MaybeUninit<u8>,
        periods: usize,
    }

    impl Wire {
        /// Block `k` (1 to 15) of marker period `period`: 32 octets of
        /// the run from `32k - 4`, copied into place.
        ///
        /// # Safety
        ///
        /// `period < self.periods`, and `self` as its documentation says.
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn copy(&self, period: usize, k: usize) -> __m256i {
            debug_assert!(period < self.periods && (1..BLOCKS).contains(&k));
            // SAFETY: octets `32k - 4` to `32k + 28` of the run, within
            // its 508 for k from 1 to 15; block `k` of the period in
            // `out`. Loads and stores are unaligned.
            unsafe {
                let from = self.payload.add(period * RUN + 32 * k - MARKER_LEN);
                let octets = _mm256_loadu_si256(from.cast());
                _mm256_storeu_si256(self.out.add(period * PERIOD + 32 * k).cast(), octets);
                octets
            }
        }

        /// Block 0 of marker period `period` (1 or more): the marker and
        /// the run's first 28 octets, copied into place.
        ///
        /// # Safety
        ///
        /// `1 <= period < self.periods`, and `self` as its documentation
        /// says.
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn copy_first(&self, period: usize, marker: u32) -> __m256i {
            debug_assert!(period >= 1 && period < self.periods);
            // SAFETY: the previous run's last 4 octets and the run's first
            // 28, within the payload since `period >= 1`; block 0 of the
            // period in `out`.
            unsafe {
                let from = self.payload.add(period * RUN - MARKER_LEN);
                let octets = _mm256_loadu_si256(from.cast());
                let octets = _mm256_blend_epi32::<1>(octets, _mm256_set1_epi32(marker as i32));
                _mm256_storeu_si256(self.out.add(period * PERIOD).cast(), octets);
                octets
            }
        }

        /// 32 octets of the payload from `at`, for the payload's CRC.
        ///
        /// # Safety
        ///
        /// `at + 32 <= self.periods * RUN`, and `self` as its
        /// documentation says.
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn payload_block(&self, at: usize) -> __m256i {
            debug_assert!(at + 32 <= self.periods * RUN);
            // SAFETY: within the payload, the caller's promise.
            unsafe { _mm256_loadu_si256(self.payload.add(at).cast()) }
        }

        /// Copies marker period `period` whole into place.
        ///
        /// # Safety
        ///
        /// `period < self.periods`, and `self` as its documentation says.
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn copy_period(&self, period: usize, marker: u32) {
            // SAFETY: the caller's promise; `copy_first` from period 1.
            unsafe {
                if period == 0 {
                    self.copy_very_first(marker);
                } else {
                    self.copy_first(period, marker);
                }
                for k in 1..BLOCKS {
                    self.copy(period, k);
                }
            }
        }

        /// Block 0 of marker period 0, whose marker comes before the
        /// payload: the run's first 28 octets moved up one 4-octet word.
        ///
        /// # Safety
        ///
        /// `self` as its documentation says.
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn copy_very_first(&self, marker: u32) -> __m256i {
            // SAFETY: the first run's first 32 octets; block 0 in `out`.
            unsafe {
                let octets = _mm256_loadu_si256(self.payload.cast());
                let up =
                    _mm256_permutevar8x32_epi32(octets, _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6));
                let octets = _mm256_blend_epi32::<1>(up, _mm256_set1_epi32(marker as i32));
                _mm256_storeu_si256(self.out.cast(), octets);
                octets
            }
        }
    }

    /// [`fused`] for a CRC over the payload alone: the periods are copied
    /// one by one, and behind the copy the payload is folded 128 octets
    /// at a time. Returns the raw CRC state from raw state `initial` over
    /// the payload's first octets, and how many: the rest (less than 128
    /// octets) is left to the caller.
    ///
    /// # Safety
    ///
    /// As [`fused`].
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    unsafe fn fused_payload(
        initial: u32,
        wire: &Wire,
        marker: &impl Fn(usize) -> u32,
    ) -> (u32, usize) {
        let constants = turn_constants();
        // The loads' safety: each block lies within the payload, whose
        // first period (508 octets) alone holds the lanes' first 128.
        // SAFETY: as just said.
        let mut lanes = unsafe {
            [
                wire.payload_block(0),
                wire.payload_block(32),
                wire.payload_block(64),
                wire.payload_block(96),
            ]
        };
        lanes[0] = _mm256_xor_si256(lanes[0], _mm256_set_epi64x(0, 0, 0, i64::from(initial)));
        let mut folded = FOLD_BLOCK;
        for period in 0..wire.periods {
            // SAFETY: `period` is below `wire.periods`.
            unsafe { wire.copy_period(period, marker(period)) };
            let copied = (period + 1) * RUN;
            while folded + FOLD_BLOCK <= copied {
                // SAFETY: as said above, the blocks before `copied`.
                unsafe {
                    lanes[0] = fold256(lanes[0], constants, wire.payload_block(folded));
                    lanes[1] = fold256(lanes[1], constants, wire.payload_block(folded + 32));
                    lanes[2] = fold256(lanes[2], constants, wire.payload_block(folded + 64));
                    lanes[3] = fold256(lanes[3], constants, wire.payload_block(folded + 96));
                }
                folded += FOLD_BLOCK;
            }
        }
        (reduce_lanes(lanes), folded)
    }

    /// The raw CRC state after the wire octets of `wire`'s periods from
    /// raw state `initial`, those octets stored into place.
    ///
    /// # Safety
    ///
    /// `wire` as its documentation says, with one period or more.
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    unsafe fn fused(initial: u32, wire: &Wire, marker: &impl Fn(usize) -> u32) -> u32 {
        let constants = turn_constants();
        // The copies' safety: each period index is below `wire.periods`,
        // the caller's promise, and from 1 where `copy_first` takes it.
        // SAFETY: as just said.
        let mut lanes = unsafe {
            [
                wire.copy_very_first(marker(0)),
                wire.copy(0, 1),
                wire.copy(0, 2),
                wire.copy(0, 3),
            ]
        };
        // The initial state goes into the first 4 octets.
        lanes[0] = _mm256_xor_si256(lanes[0], _mm256_set_epi64x(0, 0, 0, i64::from(initial)));
        // Blocks 4 to 15 of each period, then the first four of the next,
        // each folded as soon as it is loaded: four blocks in an array
        // first ran 4% slower.
        for period in 0..wire.periods {
            for k in (LANES..BLOCKS).step_by(LANES) {
                // SAFETY: as said above.
                unsafe {
                    lanes[0] = fold256(lanes[0], constants, wire.copy(period, k));
                    lanes[1] = fold256(lanes[1], constants, wire.copy(period, k + 1));
                    lanes[2] = fold256(lanes[2], constants, wire.copy(period, k + 2));
                    lanes[3] = fold256(lanes[3], constants, wire.copy(period, k + 3));
                }
            }
            let next = period + 1;
            if next < wire.periods {
                // SAFETY: as said above.
                unsafe {
                    let first = wire.copy_first(next, marker(next));
                    lanes[0] = fold256(lanes[0], constants, first);
                    lanes[1] = fold256(lanes[1], constants, wire.copy(next, 1));
                    lanes[2] = fold256(lanes[2], constants, wire.copy(next, 2));
                    lanes[3] = fold256(lanes[3], constants, wire.copy(next, 3));
                }
            }
        }
        reduce_lanes(lanes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::scrambled as data;
    use proptest::prelude::*;

    fn marker(i: usize) -> [u8; MARKER_LEN] {
        (0x0102_0304u32.wrapping_mul(i as u32 + 1)).to_be_bytes()
    }

    /// The periods built octet run by octet run, and their CRC by the crate.
    fn reference(crc: u32, prefix: &[u8], payload: &[u8], covers: Covers) -> (Vec<u8>, u32) {
        let mut out = prefix.to_vec();
        for (i, run) in payload.chunks(RUN).enumerate() {
            out.extend_from_slice(&marker(i));
            out.extend_from_slice(run);
        }
        let crc = match covers {
            Covers::Wire => crc32c::crc32c_append(crc, &out[prefix.len()..]),
            Covers::Payload => crc32c::crc32c_append(crc, payload),
        };
        (out, crc)
    }

    #[test]
    fn every_period_count_to_a_64_kib_fpdu_matches_the_copy_then_the_crc() {
        let payload = data(130 * RUN + 3, 5);
        for covers in [Covers::Wire, Covers::Payload] {
            for periods in 0..=130 {
                for skew in [0, 3] {
                    let payload = &payload[skew..skew + periods * RUN];
                    let prefix = [0xAAu8; 6];
                    let (expected, expected_crc) = reference(0x1234_5678, &prefix, payload, covers);
                    let mut out = prefix.to_vec();
                    let crc = append_periods(0x1234_5678, &mut out, payload, marker, covers);
                    let case = format!("{covers:?}, {periods} periods, skew {skew}");
                    assert_eq!(out, expected, "{case}");
                    assert_eq!(crc, expected_crc, "{case}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::test_util::proptest_cases(64)))]
        #[test]
        fn matches_the_copy_then_the_crc(
            crc in any::<u32>(),
            periods in 0usize..40,
            seed in any::<u32>(),
            prefix in proptest::collection::vec(any::<u8>(), 0..40),
            covers in prop_oneof![Just(Covers::Wire), Just(Covers::Payload)],
        ) {
            let payload = data(periods * RUN, seed);
            let (expected, expected_crc) = reference(crc, &prefix, &payload, covers);
            let mut out = prefix.clone();
            let got = append_periods(crc, &mut out, &payload, marker, covers);
            prop_assert_eq!(out, expected);
            prop_assert_eq!(got, expected_crc);
        }
    }
}
