//! The data the soak test moves: a pseudo-random stream per (seed,
//! connection, stream, operation), which either end can regenerate to
//! check every octet it receives.
//!
//! xorshift64* (Vigna): fast enough to fill and check gigabytes, and any
//! misplaced, repeated or stale block differs from what belongs there.
//! This is test data, not secrecy; a generator crate would add nothing.

/// Which data a stream is, so that no two coincide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// A client Send's payload.
    Send = 1,
    /// A client RDMA Write's payload.
    Write = 2,
    /// The server's source region, which the client Reads.
    Source = 3,
    /// The payload of a server's ack.
    Ack = 4,
}

/// The seed of one stream of one operation.
pub fn seed(run: u64, connection: u32, stream: Stream, op: u32) -> u64 {
    // SplitMix64's finalizer over the fields: nearby inputs, unrelated seeds.
    let mut z = run ^ (u64::from(connection) << 40) ^ ((stream as u64) << 32) ^ u64::from(op);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

fn next(x: &mut u64) -> [u8; 8] {
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes()
}

/// Fills `buf` with the stream of `seed`.
pub fn fill(buf: &mut [u8], seed: u64) {
    let mut x = seed;
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&next(&mut x));
    }
    let rest = chunks.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&next(&mut x)[..n]);
}

/// The first octet of `buf` that differs from the stream of `seed`, if any.
pub fn first_mismatch(buf: &[u8], seed: u64) -> Option<usize> {
    let mut x = seed;
    buf.chunks(8)
        .enumerate()
        .find_map(|(i, c)| {
            let want = next(&mut x);
            (c != &want[..c.len()]).then_some(i)
        })
        .map(|i| {
            let mut want = vec![0u8; buf.len()];
            fill(&mut want, seed);
            let at = i * 8;
            at + buf[at..]
                .iter()
                .zip(&want[at..])
                .position(|(a, b)| a != b)
                .unwrap_or(0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_data_checks_and_any_change_is_found() {
        for len in [0, 1, 7, 8, 9, 4096, 4099] {
            let s = seed(1, 2, Stream::Send, 3);
            let mut b = vec![0u8; len];
            fill(&mut b, s);
            assert_eq!(first_mismatch(&b, s), None);
            if len >= 8 {
                // Another operation's data does not pass for this one's.
                assert!(first_mismatch(&b, seed(1, 2, Stream::Send, 4)).is_some());
            }
            if len > 0 {
                b[len - 1] ^= 1;
                assert_eq!(first_mismatch(&b, s), Some(len - 1));
            }
        }
    }

    #[test]
    fn streams_differ() {
        let a = seed(1, 0, Stream::Send, 0);
        assert_ne!(a, seed(1, 0, Stream::Write, 0));
        assert_ne!(a, seed(1, 1, Stream::Send, 0));
        assert_ne!(a, seed(1, 0, Stream::Send, 1));
        assert_ne!(a, seed(2, 0, Stream::Send, 0));
    }
}
