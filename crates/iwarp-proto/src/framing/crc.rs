//! CRC32c (Castagnoli) as MPA uses it.
//!
//! The CRC is the one iSCSI uses for header and data digests (RFC 3720).
//! With CRC on, every payload octet is folded in once on each side, so it
//! is the largest cost per octet after the kernel's copies, and two crates
//! compute it, each where it is the faster:
//!
//! - `crc-fast` where AVX-512 VPCLMULQDQ exists (x86-64; it ran 62 GB/s
//!   on 64 KiB there, 2 to 3 times the `crc32c` crate), and on other
//!   architectures (ARMv8 PMULL, or a table).
//! - The `crc32c` crate's SSE4.2 code on x86-64 without AVX-512 (the
//!   project's 2-core AMD EPYC VM): there `crc-fast` takes a path that
//!   mixes PCLMULQDQ with CRC32 instructions and merges the streams at the
//!   end of each call (`xnmodp`), 14 to 18 GB/s on 64 KiB and about
//!   7.3 on 508-octet runs, against 18 to 22 and 7.8. In `iwarp perf`'s
//!   profile of 30,000 RDMA Writes of 64 KiB the CRC took 512 and 536
//!   samples against 593 and 677 with `crc-fast` (about 4% of the CPU).
//!   A hand-written AVX2 VPCLMULQDQ fold alone ran no faster than the
//!   `crc32c` crate here (20 to 21 GB/s: this CPU issues a 256-bit
//!   carry-less multiply every two cycles or so). But the fold and the
//!   CRC32 instruction use different units, so inputs of 1 KiB and more
//!   take `crc_hybrid`'s loop, which runs both at once on two parts of
//!   the input: 1.4 to 1.9 times the crate's speed on 4 and 64 KiB.
//!
//! The choice is made at run time. Both are incremental: the receiver
//! folds bytes in as they arrive, whatever the chunking.
//!
//! On the wire the 32-bit CRC value is stored least significant octet
//! first. This is fixed by the annotated FPDUs of draft-ietf-rddp-mpa-01
//! §5.2: the CRC32c of figure 5's 48 covered octets is `0x84B3864C` and the
//! dump shows `4C 86 B3 84`; Linux `siw` stores it the same way.

use crc_fast::{CrcAlgorithm, Digest};

/// A running CRC32c over a sequence of byte slices.
#[derive(Debug, Clone, Copy)]
pub struct Crc32c {
    state: State,
}

/// The running state, in the form of the implementation chosen.
#[derive(Debug, Clone, Copy)]
enum State {
    /// `crc-fast`'s running state. Its `Digest` also carries the CRC's
    /// parameters, some 200 octets: held here, they made every `Crc32c`
    /// that was created or moved a 200-octet copy (one per FPDU each way,
    /// whichever implementation ran), so the digest is rebuilt from the
    /// state, from constants, for each update instead.
    Fast(u64),
    /// The `crc32c` crate's: the CRC value of the octets so far.
    Sse42(u32),
}

/// CRC32c in `crc-fast`'s catalogue.
const CRC_FAST_ALGORITHM: CrcAlgorithm = CrcAlgorithm::Crc32Iscsi;

/// `crc-fast`'s digest at running state `state` (its parameters are
/// constants, filled in here rather than carried in every [`Crc32c`]).
#[inline]
fn fast_digest(state: u64) -> Digest {
    Digest::new_with_init_state(CRC_FAST_ALGORITHM, state)
}

/// Whether `crc-fast` is the faster here (see the module documentation).
#[inline]
fn crc_fast_is_faster() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // The standard library caches the detection: an atomic load.
        std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("vpclmulqdq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
    }
}

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32c {
    /// A CRC over no bytes yet.
    pub fn new() -> Self {
        if crc_fast_is_faster() {
            Self::with_crc_fast()
        } else {
            Self::with_crc32c()
        }
    }

    fn with_crc_fast() -> Self {
        Self {
            state: State::Fast(Digest::new(CRC_FAST_ALGORITHM).get_state()),
        }
    }

    fn with_crc32c() -> Self {
        Self {
            state: State::Sse42(0),
        }
    }

    /// A CRC that continues from `crc`, the finished CRC32c of the octets
    /// so far (as [`Crc32c::value`] gives it).
    pub fn resume(crc: u32) -> Self {
        // `crc-fast`'s digest cannot start from a finished value.
        Self {
            state: State::Sse42(crc),
        }
    }

    /// Folds `bytes` into the CRC.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        match &mut self.state {
            State::Fast(state) => {
                let mut digest = fast_digest(*state);
                digest.update(bytes);
                *state = digest.get_state();
            }
            State::Sse42(value) => *value = sse42_append(*value, bytes),
        }
    }

    /// The CRC32c of everything folded in so far.
    #[inline]
    pub fn value(&self) -> u32 {
        match &self.state {
            // CRC-32C fits 32 bits; the crate returns every width as u64.
            State::Fast(state) => fast_digest(*state).finalize() as u32,
            State::Sse42(value) => *value,
        }
    }

    /// The CRC value as its four octets on the wire (least significant first).
    #[inline]
    pub fn to_wire(&self) -> [u8; 4] {
        self.value().to_le_bytes()
    }
}

/// Reads a CRC field as transmitted on the wire.
#[inline]
pub const fn from_wire(octets: [u8; 4]) -> u32 {
    u32::from_le_bytes(octets)
}

/// CRC32c of one byte slice.
#[inline]
//= draft-ietf-rddp-mpa-01#5.2
//# When CRCs are enabled, the CRC field in the MPA FPDU MUST be computed using the CRC32C
//# polynomial in the manner described in the iSCSI Protocol [iSCSI] document for Header and
//# Data Digests.
//= rfc5041#3
//# LLP MUST provide a strong digest (at least equivalent to CRC32- C) to cover at least the DDP
//# Segment.
pub fn crc32c(bytes: &[u8]) -> u32 {
    if crc_fast_is_faster() {
        crc_fast::checksum(CRC_FAST_ALGORITHM, bytes) as u32
    } else {
        sse42_append(0, bytes)
    }
}

/// Continues `crc`, the finished CRC32c of some octets (0 for none), over
/// `bytes`: the CRC32c of those octets followed by `bytes`.
#[inline]
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    // `crc-fast`'s digest cannot start from a finished value; this way is
    // as fast everywhere but on CPUs with AVX-512 (see the module
    // documentation), and gives the same value.
    sse42_append(crc, bytes)
}

/// Appends `bytes` to a CRC value without `crc-fast`: on x86-64 with
/// AVX2 and VPCLMULQDQ, long inputs take the interleaved loop of
/// `crc_hybrid`; everything else the `crc32c` crate.
#[inline]
fn sse42_append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    return super::crc_hybrid::append(crc, bytes);
    #[cfg(not(target_arch = "x86_64"))]
    crc32c::crc32c_append(crc, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    //= draft-ietf-rddp-mpa-01#5.2
    //= type=test
    //# When CRCs are enabled, the CRC field in the MPA FPDU MUST be computed using the CRC32C
    //# polynomial in the manner described in the iSCSI Protocol [iSCSI] document for Header and
    //# Data Digests.
    fn known_vector_iscsi() {
        // RFC 3720 appendix B.4: 32 octets of zeros give 0x8A9136AA.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        // The standard check value of CRC-32C over "123456789".
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn both_implementations_agree_whatever_the_chunking() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [0, 1, 7, 8, 255, 256, 508, 4096, 65_536, 70_000] {
            let whole = &data[..len];
            let expected = crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, whole) as u32;
            assert_eq!(crc32c::crc32c(whole), expected, "{len}");
            for make in [Crc32c::with_crc_fast, Crc32c::with_crc32c] {
                for chunk in [1, 3, 508, 4096, usize::MAX] {
                    let mut c = make();
                    whole.chunks(chunk).for_each(|p| c.update(p));
                    assert_eq!(c.value(), expected, "{len} in chunks of {chunk}");
                }
            }
        }
        assert_eq!(crc32c(&data), crc32c::crc32c(&data));
    }

    #[test]
    fn incremental_equals_one_shot_for_every_split() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = crc32c(&data);
        for split in 0..=data.len() {
            let mut c = Crc32c::new();
            c.update(&data[..split]);
            c.update(&data[split..]);
            assert_eq!(c.value(), whole, "split at {split}");
        }
    }

    #[test]
    fn wire_order_is_least_significant_first() {
        let mut c = Crc32c::new();
        c.update(b"123456789");
        assert_eq!(c.to_wire(), [0x83, 0x92, 0x06, 0xE3]);
        assert_eq!(from_wire(c.to_wire()), c.value());
    }
}
