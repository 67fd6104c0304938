//! IFT periodic markers: where they fall and what they say.
//!
//! draft-williams-iwarp-ift-01 §9 introduces periodic markers "as a means
//! of locating the beginning of RDDP PDUs when TCP segments are received
//! out of order" and leaves their details "TBD". This implementation
//! decides them as follows, borrowing MPA's design (draft-ietf-rddp-mpa-01
//! §5.1) where it fits:
//!
//! - **Negotiation** (§4.2 SM, RM, marker interval): markers flow from X to
//!   Y exactly when X's indication sets SM and Y's sets RM; the interval is
//!   the one Y's indication carries (the receiver chooses), at least
//!   [`crate::framing::MIN_MARKER_INTERVAL`] octets.
//! - **Position**: a 4-octet marker starts at every stream offset that is a
//!   multiple of the interval, 0 included, where offsets count the octets
//!   sent in one direction since the first octet after the sender's
//!   Adaption Indication. Frames have no padding (§7.2), so markers fall
//!   anywhere: inside the length fields, the DDP header, a CRC field.
//!   Positions are [`crate::framing::MarkerInterval`]'s arithmetic, shared
//!   with MPA.
//! - **Format**: a 32-bit big-endian FramePtr: the number of stream octets
//!   from the first octet of the frame the marker sits in (its header_size
//!   field) to the first octet of the marker; 0 when the marker falls
//!   exactly between two frames, in which case it belongs to the next one.
//!   An IFT frame (up to 6 + 65535 + 4 + 65535 + 4 octets plus markers) can
//!   be longer than 65535 octets, so the pointer is 32 bits wide rather than
//!   MPA's 16; for distances below 65536 a marker is octet-for-octet an MPA
//!   marker.
//! - **CRC coverage**: markers are covered by neither CRC. They are removed
//!   before the CRCs are computed, so the header CRC still covers exactly
//!   the header octets §5.1 names; an in-order receiver checks each marker
//!   against the position it knows, which catches a damaged marker without
//!   a CRC.

use crate::framing::MARKER_LEN;

/// The FramePtr of a marker at `marker_offset` inside the frame whose
/// header_size field is at `frame_offset`. Frames are far shorter than
/// 2^32 octets, so the distance always fits.
#[inline]
pub const fn frame_ptr(marker_offset: u64, frame_offset: u64) -> u32 {
    marker_offset.wrapping_sub(frame_offset) as u32
}

/// Encodes a marker: the FramePtr, big-endian.
#[inline]
pub const fn encode(frame_ptr: u32) -> [u8; MARKER_LEN] {
    frame_ptr.to_be_bytes()
}

/// The FramePtr of a received marker.
#[inline]
pub const fn decode(marker: [u8; MARKER_LEN]) -> u32 {
    u32::from_be_bytes(marker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_pointers_look_like_mpa_markers() {
        assert_eq!(encode(frame_ptr(0x200, 0x1ec)), [0, 0, 0x00, 0x14]);
        assert_eq!(encode(frame_ptr(0x20000, 0x1)), [0, 1, 0xff, 0xff]);
        assert_eq!(decode([0, 1, 0xff, 0xff]), 0x1ffff);
    }
}
