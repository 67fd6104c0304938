//! MULPDU: the largest ULPDU that fits one FPDU in one TCP segment.
//!
//! draft-ietf-rddp-mpa-01 §5.3.2 (unchanged in RFC 5044 §4.5) gives the
//! formulas, worst case for markers:
//!
//! - with markers: `EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4)`
//! - without markers: `EMSS - (6 + EMSS mod 4)`
//!
//! and two bounds: MULPDU is never below 128 octets, and no ULPDU may
//! exceed 64768 octets (§3.2), which is also the most DDP may post. The
//! bounds are shared with IFT ([`crate::framing::mulpdu`]).

use super::marker::INTERVAL;
use crate::framing::mulpdu::clamp;

/// The MULPDU for an effective maximum segment size `emss`, with or without
/// markers in the direction of transmission, clamped to
/// the bounds of [`crate::framing::mulpdu`].
//= rfc5044#5.1
//# MPA transmitters SHOULD calculate a MULPDU as described in Section 4.5.
//= draft-ietf-rddp-mpa-01#5.3.2
//# The maximum ULPDU Length for a single ULPDU when markers are present MUST be computed as:
//# MULPDU = EMSS - (6 + 4 * Ceiling(EMSS / 512) + EMSS mod 4)
//= draft-ietf-rddp-mpa-01#5.3.2
//# The maximum ULPDU Length for a single ULPDU when markers are NOT present MUST be computed
//# as: MULPDU = EMSS - (6 + EMSS mod 4)
pub const fn mulpdu(emss: usize, markers: bool) -> usize {
    let markers = if markers {
        INTERVAL.worst_case_octets(emss)
    } else {
        0
    };
    clamp(emss, 6 + markers + emss % 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::mulpdu::{MAX_ULPDU, MIN_MULPDU};

    #[test]
    //= rfc5044#5.1
    //= type=test
    //# MPA transmitters SHOULD calculate a MULPDU as described in Section 4.5.
    //= draft-ietf-rddp-mpa-01#5.3.2
    //= type=test
    //# The maximum ULPDU Length for a single ULPDU when markers are present MUST be computed
    //# as: MULPDU = EMSS - (6 + 4 * Ceiling(EMSS / 512) + EMSS mod 4)
    //= draft-ietf-rddp-mpa-01#5.3.2
    //= type=test
    //# The maximum ULPDU Length for a single ULPDU when markers are NOT present MUST be
    //# computed as: MULPDU = EMSS - (6 + EMSS mod 4)
    //= rfc5041#3
    //= type=test
    //# LLPs MUST expose MULPDU & MULPDU Changes.
    fn ethernet_emss() {
        // 1460 without markers: 1460 - 6 - 0.
        assert_eq!(mulpdu(1460, false), 1454);
        // With markers: ceil(1460/512) = 3 markers, 1460 - (6 + 12 + 0).
        assert_eq!(mulpdu(1460, true), 1442);
        // 1448 (timestamps on): 1448 - 6; with markers 1448 - 6 - 12.
        assert_eq!(mulpdu(1448, false), 1442);
        assert_eq!(mulpdu(1448, true), 1430);
        // An EMSS that is not a multiple of 4 loses the remainder too.
        assert_eq!(mulpdu(1459, false), 1459 - 6 - 3);
        assert_eq!(mulpdu(1459, true), 1459 - (6 + 12 + 3));
    }

    #[test]
    //= draft-ietf-rddp-mpa-01#3.2
    //= type=test
    //# The range of MULPDU values MUST be between 128 octets and 64768 octets, inclusive.
    //= draft-ietf-rddp-mpa-01#5.3.2
    //= type=test
    //# the MPA on TCP sender MUST NOT shrink the MULPDU below 128 octets
    //= draft-ietf-rddp-mpa-01#5.3.2
    //= type=test
    //# If one or more FPDUs are already packed into a TCP segment, such that the remaining room
    //# is less than 128 octets, MPA MUST NOT provide a MULPDU smaller than 128.
    fn never_below_128_never_above_64768() {
        for emss in 0..200 {
            assert!(mulpdu(emss, true) >= MIN_MULPDU);
            assert!(mulpdu(emss, false) >= MIN_MULPDU);
        }
        assert_eq!(mulpdu(100, false), MIN_MULPDU);
        assert_eq!(mulpdu(65483, false), MAX_ULPDU);
        assert_eq!(mulpdu(65483, true), MAX_ULPDU);
    }

    #[test]
    fn fpdu_of_mulpdu_fits_emss() {
        // The point of the formula: an FPDU built from a MULPDU-sized
        // ULPDU, with its worst-case markers, fits in one segment.
        for emss in 140..=9000usize {
            for markers in [false, true] {
                let m = mulpdu(emss, markers);
                let fpdu = 2 + m + (4 - (2 + m) % 4) % 4 + 4;
                let worst_markers = if markers { 4 * fpdu.div_ceil(512) } else { 0 };
                assert!(
                    fpdu + worst_markers <= emss,
                    "emss {emss} markers {markers}"
                );
            }
        }
    }
}
