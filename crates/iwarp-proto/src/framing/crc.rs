//! CRC32c (Castagnoli) as MPA uses it.
//!
//! The CRC is the one iSCSI uses for header and data digests (RFC 3720),
//! computed with the `crc-fast` crate, which picks the fastest method the
//! CPU offers at run time (carry-less multiplication with AVX-512
//! VPCLMULQDQ, PCLMULQDQ or ARMv8 PMULL, a table otherwise). Where AVX-512
//! VPCLMULQDQ exists it ran 2 to 3 times faster than the `crc32c` crate's
//! SSE4.2 code (62 against 29 GB/s for 64 KiB), which matters: with CRC
//! on, every payload octet is folded in once on each side. Without AVX-512
//! (the project's 2-core AMD EPYC VM) it takes its SSE path, 17 to 18 GB/s
//! against `crc32c`'s 20 to 22, a difference `iwarp perf` did not show in
//! four interleaved pairs. It is incremental: the receiver folds bytes in
//! as they arrive, whatever the chunking.
//!
//! On the wire the 32-bit CRC value is stored least significant octet
//! first. This is fixed by the annotated FPDUs of draft-ietf-rddp-mpa-01
//! §5.2: the CRC32c of figure 5's 48 covered octets is `0x84B3864C` and the
//! dump shows `4C 86 B3 84`; Linux `siw` stores it the same way.

use crc_fast::{CrcAlgorithm, Digest};

/// A running CRC32c over a sequence of byte slices.
#[derive(Debug, Clone, Copy)]
pub struct Crc32c {
    digest: Digest,
}

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32c {
    /// A CRC over no bytes yet.
    pub fn new() -> Self {
        Self {
            digest: Digest::new(CrcAlgorithm::Crc32Iscsi),
        }
    }

    /// Folds `bytes` into the CRC.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        self.digest.update(bytes);
    }

    /// The CRC32c of everything folded in so far.
    #[inline]
    pub fn value(&self) -> u32 {
        // CRC-32C fits 32 bits; the crate returns every width as u64.
        self.digest.finalize() as u32
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
    crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, bytes) as u32
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
