//! Copying payload between buffers whatever their relative alignment.
//!
//! glibc's `memcpy` moves a large block with `rep movsb`, which on some
//! CPUs (AMD Zen 3, the project's VM) runs more than 15 times slower when
//! the destination lies 1 to 31 octets past the source modulo 4096 (4 KiB
//! aliasing): a 64 KiB copy ran at 2.8–2.9 GB/s there against 46–49 at
//! other skews. Below glibc's threshold for `rep movsb` (2 KiB and up,
//! by CPU) `memcpy` moves vectors, which keep 39–49 GB/s at every skew.
//! Where a received FPDU's payload lands in the staging buffer depends on
//! how the reads fell, so the verified copy into its region hit the slow
//! case in some runs and not others: 30,000 RDMA Writes of 64 KiB took
//! 1.9–2.8 s of CPU instead of 1.2 in such runs, `memmove` 31% of the
//! samples. So a copy at such a skew goes in [`SKEWED_PIECE`]-octet
//! pieces, and any other in one call.

use core::ops::Range;

/// The piece a skewed copy is made in: under every x86-64 glibc's
/// threshold for `rep movsb`. 1 and 2 KiB pieces ran equally fast.
pub const SKEWED_PIECE: usize = 1024;

/// Whether a copy from `src` to `dst` is at a skew where one large
/// `memcpy` may be slow.
#[inline]
fn skewed(dst: *const u8, src: *const u8) -> bool {
    // 32 to 63 measured fast or a little slower (36 against 49 GB/s);
    // pieces cost nothing there either.
    let skew = (dst as usize).wrapping_sub(src as usize) % 4096;
    (1..64).contains(&skew)
}

/// Copies `src` into `dst`, as `dst.copy_from_slice(src)` does, at the
/// same speed at every relative alignment.
///
/// # Panics
///
/// If the two lengths differ, as `copy_from_slice` does.
#[inline]
pub fn copy_payload(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_payload: lengths differ");
    if dst.len() > SKEWED_PIECE && skewed(dst.as_ptr(), src.as_ptr()) {
        for (d, s) in dst.chunks_mut(SKEWED_PIECE).zip(src.chunks(SKEWED_PIECE)) {
            d.copy_from_slice(s);
        }
    } else {
        dst.copy_from_slice(src);
    }
}

/// Moves `buf[range]` to the front of `buf`, as
/// `buf.copy_within(range, 0)` does, at the same speed wherever the range
/// starts.
///
/// # Panics
///
/// If `range` is not within `buf`, as `copy_within` does.
pub fn move_to_front(buf: &mut [u8], range: Range<usize>) {
    let Range { start, end } = range;
    assert!(start <= end && end <= buf.len(), "move_to_front: bad range");
    let len = end - start;
    if len > SKEWED_PIECE && skewed(buf.as_ptr(), buf[start..].as_ptr()) {
        // Front to back: each piece's destination ends before the source
        // of every later piece begins (the destination is lower), so no
        // octet is overwritten before it has been moved.
        let mut at = 0;
        while at < len {
            let n = SKEWED_PIECE.min(len - at);
            buf.copy_within(start + at..start + at + n, at);
            at += n;
        }
    } else {
        buf.copy_within(range, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn copies_at_every_skew_near_a_page() {
        let src = pattern(70_000);
        let mut dst = vec![0u8; 80_000];
        for skew in (0..130).chain(4000..4096) {
            for len in [0, 1, SKEWED_PIECE, SKEWED_PIECE + 1, 5000, 64_754] {
                dst.fill(0);
                // Pick a destination `skew` octets past the source mod 4096.
                let base = (src.as_ptr() as usize) % 4096;
                let off = (base + skew + 4096 - (dst.as_ptr() as usize) % 4096) % 4096;
                let to = &mut dst[off..off + len];
                assert_eq!(
                    (to.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) % 4096,
                    skew
                );
                copy_payload(to, &src[..len]);
                assert_eq!(&dst[off..off + len], &src[..len], "skew {skew}, {len}");
                assert!(dst[..off].iter().all(|&b| b == 0));
                assert!(dst[off + len..].iter().all(|&b| b == 0));
            }
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn refuses_different_lengths() {
        copy_payload(&mut [0u8; 4], &[1u8; 5]);
    }

    proptest! {
        #[test]
        fn move_to_front_is_copy_within(
            len in 0usize..12_000,
            start in 0usize..12_000,
            take in 0usize..12_000,
        ) {
            let start = start.min(len);
            let end = (start + take).min(len);
            let original = pattern(len);
            let mut expected = original.clone();
            expected.copy_within(start..end, 0);
            let mut got = original;
            move_to_front(&mut got, start..end);
            prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn move_to_front_at_skewed_starts() {
        for start in (4030..4100).chain([1, 31, 8191]) {
            for len in [SKEWED_PIECE + 3, 3 * SKEWED_PIECE, 20_000] {
                let original = pattern(start + len + 50);
                let mut got = original.clone();
                move_to_front(&mut got, start..start + len);
                let mut expected = original;
                expected.copy_within(start..start + len, 0);
                assert_eq!(got, expected, "start {start}, {len}");
            }
        }
    }
}
