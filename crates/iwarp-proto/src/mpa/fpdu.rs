//! The FPDU format: ULPDU_Length, ULPDU, pad, CRC.
//!
//! draft-ietf-rddp-mpa-01 §4 (RFC 5044 §4.1): an FPDU is a 16-bit
//! ULPDU_Length, the ULPDU, zero to three octets of zero pad that make the
//! FPDU a multiple of four octets, and a 32-bit CRC field that is present
//! even when CRC is not in use. Markers (see [`super::marker`]) may fall
//! anywhere inside; the lengths here do not count them.

/// Octets of the ULPDU_Length field.
pub const HEADER_LEN: usize = 2;

/// Octets of the CRC field.
pub const CRC_LEN: usize = 4;

/// The longest ULPDU the 16-bit length field can describe.
pub const MAX_ULPDU_LEN: usize = u16::MAX as usize;

/// Pad octets after a ULPDU of `ulpdu_len` octets.
#[inline]
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (HEADER_LEN + ulpdu_len) % 4) % 4
}

/// Octets of an FPDU carrying `ulpdu_len` octets, markers not counted.
#[inline]
pub const fn fpdu_len(ulpdu_len: usize) -> usize {
    HEADER_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN
}

/// The zero octets used for padding.
pub(crate) const PAD: [u8; 3] = [0; 3];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fpdu_is_a_multiple_of_four() {
        for len in 0..=MAX_ULPDU_LEN {
            assert_eq!(fpdu_len(len) % 4, 0);
            assert!(pad_len(len) < 4);
        }
        assert_eq!(fpdu_len(0), 8);
        assert_eq!(pad_len(0), 2);
        assert_eq!(fpdu_len(42), 48);
        assert_eq!(fpdu_len(MAX_ULPDU_LEN), 2 + 65535 + 3 + 4);
    }
}
