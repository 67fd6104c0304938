//! The bounds of the MULPDU, the largest ULPDU (DDP segment) a framing
//! layer accepts so that one PDU fits one TCP segment.
//!
//! Each framing computes its MULPDU from the effective maximum segment size
//! (EMSS) by subtracting its worst-case overhead ([`super::Framer::mulpdu`]:
//! MPA's formula of draft-ietf-rddp-mpa-01 §5.3.2, IFT's header, CRCs and
//! markers); both then clamp it to the same bounds with [`clamp`]. MPA
//! states them (§5.3.2, §3.2); IFT keeps them so that DDP works the same
//! over either.

/// The smallest MULPDU a framing layer offers (draft-ietf-rddp-mpa-01
/// §5.3.2): room for DDP's largest Terminate.
pub const MIN_MULPDU: usize = 128;

/// The largest ULPDU a sender may post (draft-ietf-rddp-mpa-01 §3.2),
/// which is also the most DDP may post.
pub const MAX_ULPDU: usize = 64768;

/// EMSS assumed when the TCP stack cannot report one (§3.1.1).
pub const DEFAULT_EMSS: usize = 1460;

/// A MULPDU to start with before the framing layer has computed one: MPA's
/// for [`DEFAULT_EMSS`] without markers (1460 - 6).
pub const DEFAULT_MULPDU: usize = clamp(DEFAULT_EMSS, 6);

/// The MULPDU for an EMSS of which `overhead` octets go to framing:
/// `emss - overhead`, clamped to [`MIN_MULPDU`]..=[`MAX_ULPDU`].
//= draft-ietf-rddp-mpa-01#3.2
//# The range of MULPDU values MUST be between 128 octets and 64768 octets, inclusive.
//= draft-ietf-rddp-mpa-01#5.3.2
//# the MPA on TCP sender MUST NOT shrink the MULPDU below 128 octets
//= draft-ietf-rddp-mpa-01#5.3.2
//# If one or more FPDUs are already packed into a TCP segment, such that the remaining room is
//# less than 128 octets, MPA MUST NOT provide a MULPDU smaller than 128.
pub const fn clamp(emss: usize, overhead: usize) -> usize {
    let raw = emss.saturating_sub(overhead);
    if raw < MIN_MULPDU {
        MIN_MULPDU
    } else if raw > MAX_ULPDU {
        MAX_ULPDU
    } else {
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamped_to_the_bounds() {
        assert_eq!(clamp(1460, 6), 1454);
        assert_eq!(clamp(100, 6), MIN_MULPDU);
        assert_eq!(clamp(0, 6), MIN_MULPDU);
        assert_eq!(clamp(65483, 6), MAX_ULPDU);
    }
}
