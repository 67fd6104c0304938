//! MPA markers: where they fall in the stream and what they must say.
//!
//! When a receiver asks for markers, the sender inserts a 4-octet marker at
//! every 512th octet of its stream, counted from the first octet of full
//! operation, so the very first octets sent are a marker
//! (draft-ietf-rddp-mpa-01 §5.1, RFC 5044 §7.1.2 rule 7). A marker holds a
//! 16-bit reserved field (zero) and a 16-bit FPDUPTR: the number of octets
//! back from the marker to the ULPDU_Length field of the FPDU it sits in,
//! or 0 when it falls exactly between two FPDUs; it then belongs to the
//! following FPDU and is covered by its CRC.
//!
//! Positions here are stream offsets: octets since full operation began in
//! one direction, so a marker starts wherever `offset % 512 == 0`. They are
//! independent of the TCP sequence number, which lets the same arithmetic
//! serve an in-order receiver and an out-of-order one that maps a segment's
//! sequence number to an offset.
//!
//! Where markers fall is [`MarkerInterval`]'s arithmetic, shared with IFT;
//! what they say is MPA's own, here.

use crate::framing::{MarkerInterval, MARKER_LEN};

/// MPA's marker interval: a marker every 512 octets of the stream. The
/// arithmetic of positions is [`MarkerInterval`]'s, shared with IFT.
//= draft-ietf-rddp-mpa-01#5.1
//# When Markers are enabled, MPA senders MUST insert a marker into the data stream at a 512
//# octet periodic interval in the TCP Sequence Number Space.
//= draft-ietf-rddp-mpa-01#5.1
//# the MPA markers MUST be inserted immediately following MPA connection establishment, and at
//# every 512th octet of the TCP octet stream thereafter.
pub const INTERVAL: MarkerInterval = match MarkerInterval::new(512) {
    Some(i) => i,
    None => panic!("512 is above the minimum interval"),
};

/// The FPDUPTR a sender writes into a marker at `marker_offset` inside the
/// FPDU whose ULPDU_Length field is at `header_offset`.
///
/// The field is 16 bits wide. FPDUs carrying ULPDUs up to the 64768 octets
/// that MPA allows keep the distance below 65536; a longer (65535-octet)
/// ULPDU can reach past it, and the value then wraps, the same way on both
/// ends.
#[inline]
//= draft-ietf-rddp-mpa-01#5.1
//# FPDUPTR MUST contain the number of octets in the TCP stream from the beginning of the
//# current FPDU to the first octet of the marker, unless the marker falls between FPDUs.
//= draft-ietf-rddp-mpa-01#5.1
//# If an FPDU is large enough to contain multiple markers, they MUST all point to the same
//# point in the TCP stream: the first octet of the FPDU.
//= draft-ietf-rddp-mpa-01#5.1
//# If a marker interval contains multiple FPDUs (the FPDUs are small), the marker MUST point to
//# the start of the FPDU containing the marker unless the marker falls between FPDUs, in which
//# case the marker MUST be zero.
pub const fn fpdu_ptr(marker_offset: u64, header_offset: u64) -> u16 {
    marker_offset.wrapping_sub(header_offset) as u16
}

/// Encodes a marker: reserved octets zero, then the FPDUPTR, big-endian.
#[inline]
//= draft-ietf-rddp-mpa-01#4.1
//# The format of a marker MUST be as specified in Figure 3
//= draft-ietf-rddp-mpa-01#4.1
//# The Reserved field MUST be set to zero on transmit and ignored on receive (except for CRC
//# calculation).
pub const fn encode(fpdu_ptr: u16) -> [u8; MARKER_LEN] {
    let p = fpdu_ptr.to_be_bytes();
    [0, 0, p[0], p[1]]
}

/// The FPDUPTR of a received marker. The reserved octets are ignored
/// (draft-ietf-rddp-mpa-01 §4.1).
#[inline]
pub const fn decode(marker: [u8; MARKER_LEN]) -> u16 {
    u16::from_be_bytes([marker[2], marker[3]])
}

/// Whether a received FPDUPTR agrees with the one expected. The two low
/// bits are reserved and treated as zero (draft-ietf-rddp-mpa-01 §5.1).
#[inline]
//= draft-ietf-rddp-mpa-01#5.1
//# MPA reserves these bits so they MUST be treated as zero for computation at the receiver.
pub const fn fpdu_ptr_matches(received: u16, expected: u16) -> bool {
    received & !3 == expected & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    //= draft-ietf-rddp-mpa-01#5.1
    //= type=test
    //# When Markers are enabled, MPA senders MUST insert a marker into the data stream at a 512
    //# octet periodic interval in the TCP Sequence Number Space.
    fn every_512th_octet() {
        assert!(INTERVAL.is_marker_at(0) && INTERVAL.is_marker_at(512));
        assert!(!INTERVAL.is_marker_at(4) && !INTERVAL.is_marker_at(511));
    }

    #[test]
    //= draft-ietf-rddp-mpa-01#4.1
    //= type=test
    //# The format of a marker MUST be as specified in Figure 3
    fn encoding() {
        // Figure 6 of draft-ietf-rddp-mpa-01: header at 0x1ec, marker at 0x200.
        let ptr = fpdu_ptr(0x200, 0x1ec);
        assert_eq!(ptr, 0x14);
        assert_eq!(encode(ptr), [0, 0, 0x00, 0x14]);
        assert_eq!(decode([0xff, 0xff, 0x00, 0x14]), 0x14);
        assert!(fpdu_ptr_matches(0x17, 0x14));
        assert!(!fpdu_ptr_matches(0x18, 0x14));
    }
}
