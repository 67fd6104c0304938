//! CRC32c on x86-64 CPUs without AVX-512: for long inputs, where AVX2 and
//! VPCLMULQDQ exist, carry-less folding and CRC32 instructions
//! interleaved; for short ones (the FPDUs of small messages), one plain
//! stream of 8-octet CRC32 instructions.
//!
//! On such a CPU (the project's AMD EPYC VM) each of the two ways alone
//! runs at about the same speed: the `crc32c` crate's three CRC32
//! instruction streams 18 to 22 GB/s on 64 KiB, a 256-bit carry-less fold
//! about 20 to 25. They use different execution units, so one loop that
//! does both, on two parts of the input, keeps both busy: 34.3 against
//! 22.1 GB/s on 64 KiB, 30.6 against 19.3 on 16 KiB, 15.9 against 14.8
//! on 1 KiB (`cargo bench -p iwarp-proto --bench mpa -- crc32c`, medians
//! after and before). Neither CRC crate has such a loop for this CPU:
//! `crc-fast`'s mixed path merges its streams at the end of every call and
//! ran slower here (see `crc`).
//!
//! The input is cut into a head, folded 128 octets at a time in eight
//! 16-octet lanes (four 256-bit registers), then three equal streams for
//! the CRC32 instruction, then a short tail left to the short loops below.
//! The parts are joined by the CRC's linearity: the CRC state after a part
//! is the state before it shifted over the part's length, XOR the part's
//! CRC from state 0.
//!
//! Notation. CRC32c is "reflected": in a 32-bit state bit `i` is the
//! coefficient of `x^(31-i)`, and in a 64-bit (or 128-bit) data word bit
//! `j` is the coefficient of `x^(63-j)` (or `x^(127-j)`). With that:
//! - `_mm_crc32_u64(s, d)` is `(s·x^32 + d)·x^32 mod P`;
//! - the carry-less product of two 32-bit (or 64-bit) reflected values,
//!   read as a 64-bit (or 128-bit) reflected value, is `a·b·x` (the
//!   product's top bit is the word's bit 63 or 127, always 0).
//!
//! So `_mm_crc32_u64(0, clmul(a, b))` is `a·b·x^33 mod P`, which is how
//! [`mul`] multiplies, and a fold constant for a distance of `D` bits is
//! `x^(D+63)` (low half) or `x^(D-1)` (high half) mod P, held in the
//! upper 32 bits of a 64-bit word.

use std::arch::x86_64::{
    __m128i, __m256i, _mm256_castsi256_si128, _mm256_clmulepi64_epi128, _mm256_extracti128_si256,
    _mm256_loadu_si256, _mm256_set_epi64x, _mm256_xor_si256, _mm_clmulepi64_si128, _mm_crc32_u64,
    _mm_crc32_u8, _mm_cvtsi128_si64, _mm_cvtsi64_si128, _mm_extract_epi64, _mm_set_epi64x,
    _mm_xor_si128,
};

/// Inputs shorter than this take [`serial`]: the `crc32c` crate first
/// walks octet by octet to an 8-octet boundary and has fixed costs that
/// dominate short inputs (18.3 ns for 84 octets here, 7.1 for the plain
/// loop; 65.7 against 49.8 for 512). From 768 octets its three streams
/// win (1000 octets: 89 against 115 ns).
const SERIAL_BELOW: usize = 768;

/// Inputs from this length up to [`SERIAL_BELOW`] take [`three_streams`].
const THREE_STREAMS_FROM: usize = 192;

/// Inputs shorter than this go to the `crc32c` crate: the joins cost a few
/// dozen cycles, and the crate's own short loop is as fast below it.
const MIN_LEN: usize = 1024;

/// Octets folded per loop turn (four 256-bit registers).
pub(super) const FOLD_BLOCK: usize = 128;

/// 64-bit words each CRC32 stream takes per loop turn: 128 octets folded
/// against 3 × 4 words puts 57% of the input in the fold. Against the
/// crate at the same moment, 3 to 8 words per stream gave 1.4 to 1.9 times
/// its speed on 4 and 64 KiB; 4 was never behind.
const STREAM_WORDS: usize = 4;

/// The reflected CRC32c polynomial without its `x^32` term.
const POLY: u32 = 0x82F6_3B78;

/// `x^e mod P` in the reflected 32-bit form.
const fn x_pow(mut e: u64) -> u32 {
    // Square-and-multiply; `x^0` is the top bit.
    let mut result = 0x8000_0000u32;
    let mut base = 0x4000_0000u32; // x^1
    while e > 0 {
        if e & 1 == 1 {
            result = soft_mul(result, base);
        }
        base = soft_mul(base, base);
        e >>= 1;
    }
    result
}

/// `a·b mod P`, one bit at a time: for the constants only.
const fn soft_mul(a: u32, b: u32) -> u32 {
    let mut product = 0u32;
    let mut shifted = b; // b·x^i
    let mut i = 0;
    while i < 32 {
        if a & (0x8000_0000 >> i) != 0 {
            product ^= shifted;
        }
        shifted = if shifted & 1 == 1 {
            (shifted >> 1) ^ POLY
        } else {
            shifted >> 1
        };
        i += 1;
    }
    product
}

/// A fold constant: `x^e mod P` in the upper half of a reflected 64-bit word.
const fn fold_constant(e: u64) -> i64 {
    ((x_pow(e) as u64) << 32) as i64
}

/// Folding a lane forward by `bits`: (low-half constant, high-half constant).
const fn fold_constants(bits: u64) -> (i64, i64) {
    (fold_constant(bits + 63), fold_constant(bits - 1))
}

/// One turn of the main loop moves each lane 1024 bits forward.
const FOLD_TURN: (i64, i64) = fold_constants(8 * FOLD_BLOCK as u64);
/// Joining a lane to the next one, 128 bits later.
const FOLD_LANE: (i64, i64) = fold_constants(128);

/// `SHIFT[i]` is `x^(8·2^i - 33) mod P`, for `i` from 3: with [`mul`],
/// shifting a state over `2^i` octets of zeros. Lengths reach 2^60.
const SHIFT: [u32; 61] = {
    let mut table = [0u32; 61];
    let mut i = 3;
    while i < 61 {
        table[i] = x_pow((8u64 << i) - 33);
        i += 1;
    }
    table
};

/// `a·b·x^33 mod P`.
#[inline]
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn mul(a: u32, b: u32) -> u32 {
    let product = _mm_clmulepi64_si128(
        _mm_cvtsi64_si128(i64::from(a)),
        _mm_cvtsi64_si128(i64::from(b)),
        0x00,
    );
    // The product of two 32-bit values fits in the low 64 bits.
    _mm_crc32_u64(0, _mm_cvtsi128_si64(product) as u64) as u32
}

/// The constant that shifts a state over `len` octets with [`mul`]:
/// `x^(8·len - 33) mod P`. `len` is a non-zero multiple of 8.
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn shift_constant(len: usize) -> u32 {
    debug_assert!(len >= 8 && len.is_multiple_of(8));
    let mut bits = len as u64;
    let mut constant = SHIFT[bits.trailing_zeros() as usize];
    bits &= bits - 1;
    while bits != 0 {
        // x^(8a-33) · x^(8b-33) · x^33 = x^(8(a+b)-33).
        constant = mul(constant, SHIFT[bits.trailing_zeros() as usize]);
        bits &= bits - 1;
    }
    constant
}

/// Loads 32 octets.
#[inline]
#[target_feature(enable = "avx2")]
fn load(block: &[u8; 32]) -> __m256i {
    // SAFETY: `block` is 32 readable octets, and the load is unaligned.
    unsafe { _mm256_loadu_si256(block.as_ptr().cast()) }
}

/// 32 octets of `bytes` from `at`.
#[inline]
fn block(bytes: &[u8], at: usize) -> &[u8; 32] {
    bytes[at..at + 32].try_into().expect("32 octets")
}

/// `lanes` folded forward over one turn, XOR the next 32 octets.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
pub(super) fn fold256(lanes: __m256i, constants: __m256i, next: __m256i) -> __m256i {
    let low = _mm256_clmulepi64_epi128(lanes, constants, 0x00);
    let high = _mm256_clmulepi64_epi128(lanes, constants, 0x11);
    _mm256_xor_si256(_mm256_xor_si256(low, high), next)
}

/// [`FOLD_TURN`] in both halves of a 256-bit register, for [`fold256`].
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn turn_constants() -> __m256i {
    _mm256_set_epi64x(FOLD_TURN.1, FOLD_TURN.0, FOLD_TURN.1, FOLD_TURN.0)
}

/// `lane` folded forward 128 bits, XOR `next`.
#[inline]
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn fold128(lane: __m128i, next: __m128i) -> __m128i {
    let constants = _mm_set_epi64x(FOLD_LANE.1, FOLD_LANE.0);
    let low = _mm_clmulepi64_si128(lane, constants, 0x00);
    let high = _mm_clmulepi64_si128(lane, constants, 0x11);
    _mm_xor_si128(_mm_xor_si128(low, high), next)
}

/// Whether this CPU has what [`append`] uses.
pub(super) fn available() -> bool {
    // The standard library caches the detection: atomic loads.
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("vpclmulqdq")
        && std::arch::is_x86_feature_detected!("pclmulqdq")
        && std::arch::is_x86_feature_detected!("sse4.2")
}

/// Appends `bytes` to a CRC32c value as the `crc32c` crate's
/// `crc32c_append` does (`crc` is a finished CRC value, 0 for none): with
/// the serial loop when the input is short, the interleaved loop when it
/// is long enough and the CPU has what it uses, the crate otherwise.
pub(crate) fn append(crc: u32, bytes: &[u8]) -> u32 {
    if bytes.len() < SERIAL_BELOW && std::arch::is_x86_feature_detected!("sse4.2") {
        if bytes.len() >= THREE_STREAMS_FROM && std::arch::is_x86_feature_detected!("pclmulqdq") {
            // SAFETY: SSE4.2 and PCLMULQDQ, the features `three_streams`
            // is compiled for, have just been detected.
            return unsafe { three_streams(crc, bytes) };
        }
        // SAFETY: SSE4.2, the one feature `serial` is compiled for, has
        // just been detected.
        return unsafe { serial(crc, bytes) };
    }
    if bytes.len() < MIN_LEN || !available() {
        return crc32c::crc32c_append(crc, bytes);
    }
    // SAFETY: `available()` has just confirmed AVX2, VPCLMULQDQ, PCLMULQDQ
    // and SSE4.2, the features `interleaved` is compiled for.
    let (state, tail) = unsafe { interleaved(!crc, bytes) };
    // The tail, shorter than a turn (224 octets), by the short loops: the
    // crate's alignment walk and fixed costs weigh on Ethernet-sized FPDUs
    // (1448 octets leave 200).
    if tail.len() >= THREE_STREAMS_FROM {
        // SAFETY: `available()` covers SSE4.2 and PCLMULQDQ.
        unsafe { three_streams(!state, tail) }
    } else {
        // SAFETY: `available()` covers SSE4.2.
        unsafe { serial(!state, tail) }
    }
}

/// `append` for inputs of a few hundred octets: three independent chains
/// of CRC32 instructions over three equal parts, joined by two shifts,
/// then the tail serially. One chain waits three cycles for each
/// instruction; three keep the unit busy. This is the length of the runs
/// between markers (508 octets), which IFT's payload CRC takes one by
/// one since it does not cover the markers.
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn three_streams(crc: u32, bytes: &[u8]) -> u32 {
    let part = bytes.len() / 24 * 8;
    let (first, rest) = bytes.split_at(part);
    let (second, rest) = rest.split_at(part);
    let (third, tail) = rest.split_at(part);
    let word = |stream: &[u8], at: usize| -> u64 {
        u64::from_le_bytes(stream[at..at + 8].try_into().expect("8 octets"))
    };
    let mut crcs = [u64::from(!crc), 0, 0];
    for at in (0..part).step_by(8) {
        crcs[0] = _mm_crc32_u64(crcs[0], word(first, at));
        crcs[1] = _mm_crc32_u64(crcs[1], word(second, at));
        crcs[2] = _mm_crc32_u64(crcs[2], word(third, at));
    }
    // Raw states: each part's from 0 joined after the one before it.
    let shift = shift_constant(part);
    let state = mul(mul(crcs[0] as u32, shift) ^ crcs[1] as u32, shift) ^ crcs[2] as u32;
    serial(!state, tail)
}

/// `append` for short inputs: one CRC32 instruction per 8 octets, loaded
/// unaligned, then one per octet left.
#[target_feature(enable = "sse4.2")]
fn serial(crc: u32, bytes: &[u8]) -> u32 {
    let mut state = u64::from(!crc);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        state = _mm_crc32_u64(state, u64::from_le_bytes(w));
    }
    // The instruction leaves the state in the low 32 bits.
    let mut state = state as u32;
    for &octet in words.remainder() {
        state = _mm_crc32_u8(state, octet);
    }
    !state
}

/// The raw CRC state after `bytes` from raw state `state`, over all of
/// `bytes` but a tail shorter than one loop turn, which is returned.
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn interleaved(state: u32, bytes: &[u8]) -> (u32, &[u8]) {
    const TURN: usize = FOLD_BLOCK + 3 * 8 * STREAM_WORDS;
    // The head's first block loads the lanes; each turn folds one more.
    let turns = (bytes.len() - FOLD_BLOCK) / TURN;
    let head_len = FOLD_BLOCK * (turns + 1);
    let stream_len = 8 * STREAM_WORDS * turns;
    let (head, rest) = bytes.split_at(head_len);
    let (streams, tail) = rest.split_at(3 * stream_len);
    let (first, rest) = streams.split_at(stream_len);
    let (second, third) = rest.split_at(stream_len);

    // The head from `state`: the state is XORed into its first 4 octets.
    let turn_constants = turn_constants();
    let initial = _mm256_set_epi64x(0, 0, 0, i64::from(state));
    let mut lanes = [
        _mm256_xor_si256(load(block(head, 0)), initial),
        load(block(head, 32)),
        load(block(head, 64)),
        load(block(head, 96)),
    ];
    let mut crcs = [0u64; 3];
    let words = |stream: &[u8], at: usize| -> u64 {
        u64::from_le_bytes(stream[at..at + 8].try_into().expect("8 octets"))
    };
    for turn in 0..turns {
        let at = FOLD_BLOCK * (turn + 1);
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = fold256(*lane, turn_constants, load(block(head, at + 32 * i)));
        }
        let at = 8 * STREAM_WORDS * turn;
        for word in 0..STREAM_WORDS {
            let at = at + 8 * word;
            crcs[0] = _mm_crc32_u64(crcs[0], words(first, at));
            crcs[1] = _mm_crc32_u64(crcs[1], words(second, at));
            crcs[2] = _mm_crc32_u64(crcs[2], words(third, at));
        }
    }

    (join_streams(reduce_lanes(lanes), crcs, stream_len), tail)
}

/// The raw CRC state of the octets folded into `lanes` (the folding's
/// initial state included): the eight 16-octet lanes into one, in stream
/// order, then its 16 octets through CRC32.
#[inline]
#[target_feature(enable = "avx2,pclmulqdq,sse4.2")]
pub(super) fn reduce_lanes(lanes: [__m256i; 4]) -> u32 {
    let mut folded = _mm256_castsi256_si128(lanes[0]);
    for (i, lane) in lanes.iter().enumerate() {
        if i > 0 {
            folded = fold128(folded, _mm256_castsi256_si128(*lane));
        }
        folded = fold128(folded, _mm256_extracti128_si256::<1>(*lane));
    }
    let low = _mm_extract_epi64::<0>(folded) as u64;
    let high = _mm_extract_epi64::<1>(folded) as u64;
    _mm_crc32_u64(_mm_crc32_u64(0, low), high) as u32
}

/// The raw state `state` continued over three streams of `stream_len`
/// octets each, whose CRC32 chains from state 0 ended at `crcs`: each
/// joined after the one before it.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.2")]
fn join_streams(mut state: u32, crcs: [u64; 3], stream_len: usize) -> u32 {
    if stream_len > 0 {
        let shift = shift_constant(stream_len);
        for crc in crcs {
            state = mul(state, shift) ^ crc as u32;
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::scrambled as data;
    use proptest::prelude::*;

    #[test]
    fn constants_are_powers_of_x() {
        assert_eq!(x_pow(0), 0x8000_0000);
        assert_eq!(x_pow(31), 1);
        // x^32 mod P is P's low part.
        assert_eq!(x_pow(32), POLY);
        assert_eq!(soft_mul(x_pow(40), x_pow(60)), x_pow(100));
    }

    #[test]
    fn a_shift_equals_appending_zeros() {
        if !available() {
            return;
        }
        for len in (8..4096).step_by(8) {
            let state = 0x1234_5678u32;
            let zeros = vec![0u8; len];
            let expected = !crc32c::crc32c_append(!state, &zeros);
            // SAFETY: `available()` holds.
            let shifted = unsafe { mul(state, shift_constant(len)) };
            assert_eq!(shifted, expected, "{len}");
        }
    }

    #[test]
    fn agrees_with_the_crate_at_every_length_around_the_turns() {
        if !available() {
            return;
        }
        let bytes = data(4 * 4096 + 400, 7);
        for len in (0..2000).chain(16_000..bytes.len()) {
            let slice = &bytes[..len];
            assert_eq!(append(0, slice), crc32c::crc32c(slice), "length {len}");
        }
    }

    #[test]
    fn the_short_loops_agree_with_the_crate_at_every_short_length() {
        if !std::arch::is_x86_feature_detected!("sse4.2") {
            return;
        }
        let bytes = data(SERIAL_BELOW + 64, 11);
        for start in 0..9 {
            for len in 0..SERIAL_BELOW.min(bytes.len() - start) {
                let slice = &bytes[start..start + len];
                for crc in [0, 0xdead_beef] {
                    assert_eq!(
                        append(crc, slice),
                        crc32c::crc32c_append(crc, slice),
                        "start {start}, length {len}, crc {crc:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn agrees_with_the_crate_on_a_64_kib_fpdu_and_continues_a_crc() {
        if !available() {
            return;
        }
        let bytes = data(70_000, 3);
        for (start, len) in [(0, 65_536), (1, 65_536), (5, 69_990), (0, 1024)] {
            let slice = &bytes[start..start + len];
            assert_eq!(append(0, slice), crc32c::crc32c(slice));
            let (a, b) = slice.split_at(len / 3);
            let first = crc32c::crc32c(a);
            assert_eq!(append(first, b), crc32c::crc32c_append(first, b));
        }
    }

    proptest! {
        #[test]
        fn agrees_with_the_crate(
            crc in any::<u32>(),
            bytes in proptest::collection::vec(any::<u8>(), 0..20_000),
            start in 0usize..64,
        ) {
            prop_assume!(available());
            let slice = &bytes[start.min(bytes.len())..];
            prop_assert_eq!(append(crc, slice), crc32c::crc32c_append(crc, slice));
        }
    }
}
