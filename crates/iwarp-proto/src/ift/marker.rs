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
//!   [`super::indication::MIN_MARKER_INTERVAL`] octets.
//! - **Position**: a 4-octet marker starts at every stream offset that is a
//!   multiple of the interval, 0 included, where offsets count the octets
//!   sent in one direction since the first octet after the sender's
//!   Adaption Indication. Frames have no padding (§7.2), so markers fall
//!   anywhere: inside the length fields, the DDP header, a CRC field.
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

/// Octets in a marker.
pub const MARKER_LEN: usize = 4;

/// A negotiated marker interval: octets between the starts of two markers,
/// at least [`super::indication::MIN_MARKER_INTERVAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MarkerInterval(u16);

impl MarkerInterval {
    /// MPA's interval, a sensible default.
    pub const DEFAULT: Self = Self(512);

    /// The interval, if `octets` is an acceptable one.
    pub const fn new(octets: u16) -> Option<Self> {
        if octets >= super::indication::MIN_MARKER_INTERVAL {
            Some(Self(octets))
        } else {
            None
        }
    }

    /// The interval in octets.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// Whether a marker starts at stream offset `offset`.
    #[inline]
    pub const fn is_marker_at(self, offset: u64) -> bool {
        offset % self.0 as u64 == 0
    }

    /// The stream offset of the first marker at or after `offset`.
    #[inline]
    pub const fn next_marker_at(self, offset: u64) -> u64 {
        offset.next_multiple_of(self.0 as u64)
    }

    /// Octets from `offset` to the next marker at or after it.
    #[inline]
    pub fn room(self, offset: u64) -> usize {
        usize::try_from(self.next_marker_at(offset) - offset).unwrap_or(usize::MAX)
    }

    /// How many markers start in the stream offsets `start..end`.
    #[inline]
    pub const fn markers_in(self, start: u64, end: u64) -> u64 {
        if end <= start {
            return 0;
        }
        let i = self.0 as u64;
        (end - 1) / i + 1 - start.div_ceil(i)
    }
}

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
    fn intervals_below_the_minimum_are_refused() {
        assert_eq!(MarkerInterval::new(0), None);
        assert_eq!(MarkerInterval::new(63), None);
        assert_eq!(MarkerInterval::new(64).map(MarkerInterval::get), Some(64));
        assert_eq!(
            MarkerInterval::new(u16::MAX).map(MarkerInterval::get),
            Some(65535)
        );
    }

    #[test]
    fn positions_for_an_odd_interval() {
        let i = MarkerInterval::new(100).unwrap();
        assert!(i.is_marker_at(0) && i.is_marker_at(300) && !i.is_marker_at(301));
        assert_eq!(i.next_marker_at(1), 100);
        assert_eq!(i.room(250), 50);
        assert_eq!(i.room(300), 0);
    }

    #[test]
    fn counting_agrees_with_enumeration() {
        for interval in [64u16, 100, 512, 65535] {
            let i = MarkerInterval::new(interval).unwrap();
            for start in (0..1200u64).step_by(7) {
                for len in [0u64, 1, 63, 64, 65, 511, 512, 1500] {
                    let brute = (start..start + len).filter(|&o| i.is_marker_at(o)).count() as u64;
                    assert_eq!(i.markers_in(start, start + len), brute);
                }
            }
        }
    }

    #[test]
    fn small_pointers_look_like_mpa_markers() {
        assert_eq!(encode(frame_ptr(0x200, 0x1ec)), [0, 0, 0x00, 0x14]);
        assert_eq!(encode(frame_ptr(0x20000, 0x1)), [0, 1, 0xff, 0xff]);
        assert_eq!(decode([0, 1, 0xff, 0xff]), 0x1ffff);
    }
}
