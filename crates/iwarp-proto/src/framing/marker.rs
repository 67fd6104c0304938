//! Where periodic markers fall in a stream, for either framing.
//!
//! MPA (draft-ietf-rddp-mpa-01 §5.1) and IFT (as `ift::marker` decides
//! what draft-williams-iwarp-ift-01 §9 leaves open) both put a 4-octet
//! marker at every stream offset that is a multiple of an interval, 0
//! included, counting the octets of full operation in one direction. MPA's
//! interval is fixed at 512 (`mpa::marker::INTERVAL`); IFT's receiver
//! chooses one. What a marker *says* (MPA's 16-bit FPDUPTR, IFT's 32-bit
//! FramePtr) is each framing's own and lives with it.

/// Octets in a marker.
pub const MARKER_LEN: usize = 4;

/// The smallest marker interval accepted, so that markers cost at most
/// 1/16 of the stream. MPA's 512 is well above it; for IFT it is an
/// interpretation (draft-williams-iwarp-ift-01 §9 leaves markers "TBD")
/// that its indication enforces.
pub const MIN_MARKER_INTERVAL: u16 = 64;

/// A marker interval: octets between the starts of two markers, at least
/// [`MIN_MARKER_INTERVAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MarkerInterval(u16);

impl MarkerInterval {
    /// MPA's interval, a sensible default for IFT too.
    pub const DEFAULT: Self = Self(512);

    /// The interval, if `octets` is an acceptable one.
    pub const fn new(octets: u16) -> Option<Self> {
        if octets >= MIN_MARKER_INTERVAL {
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
    ///
    /// The receivers ask this (and [`MarkerInterval::room`]) for every
    /// run between markers. The interval is a run-time value (IFT
    /// negotiates it), so the remainder would be a 64-bit division each
    /// time, tens of cycles; the usual intervals (512) are powers of two,
    /// which a mask serves.
    #[inline]
    pub const fn is_marker_at(self, offset: u64) -> bool {
        let i = self.0 as u64;
        if i.is_power_of_two() {
            offset & (i - 1) == 0
        } else {
            offset.is_multiple_of(i)
        }
    }

    /// The stream offset of the first marker at or after `offset`.
    #[inline]
    pub const fn next_marker_at(self, offset: u64) -> u64 {
        let i = self.0 as u64;
        if i.is_power_of_two() {
            (offset + (i - 1)) & !(i - 1)
        } else {
            offset.next_multiple_of(i)
        }
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

    /// Octets a PDU of `len` octets takes on the wire when it starts at
    /// stream offset `start`: each marker inside pushes the rest 4 octets
    /// further; a marker due right after the PDU belongs to the next one.
    pub const fn wire_len(self, start: u64, len: usize) -> usize {
        let mut end = start + len as u64;
        let mut counted = 0;
        loop {
            let n = self.markers_in(start, end);
            if n == counted {
                return (end - start) as usize;
            }
            end += (n - counted) * MARKER_LEN as u64;
            counted = n;
        }
    }

    /// Appends `payload` to `out`, starting at stream offset `offset`,
    /// with a marker wherever one is due before a payload octet (`marker`
    /// gives the marker for its stream offset). Returns the offset after
    /// the payload. The transmitters' copy with markers: this loop runs
    /// every 512 octets of payload, so it holds nothing else.
    #[inline]
    pub(crate) fn append_marked(
        self,
        out: &mut Vec<u8>,
        mut offset: u64,
        payload: &[u8],
        marker: impl Fn(u64) -> [u8; MARKER_LEN],
    ) -> u64 {
        out.reserve(self.wire_len(offset, payload.len()));
        // One division here, none per run: the markers that follow are a
        // fixed stride apart (the interval is a run-time value, IFT's).
        let stride = u64::from(self.0);
        let mut next = self.next_marker_at(offset);
        let mut rest = payload;
        while !rest.is_empty() {
            if offset == next {
                out.extend_from_slice(&marker(offset));
                offset += MARKER_LEN as u64;
                next += stride;
            }
            let n = rest
                .len()
                .min(usize::try_from(next - offset).unwrap_or(usize::MAX));
            out.extend_from_slice(&rest[..n]);
            offset += n as u64;
            rest = &rest[n..];
        }
        offset
    }

    /// The most marker octets a run of `len` stream octets can hold,
    /// wherever it starts: what the MULPDU rule reserves
    /// (draft-ietf-rddp-mpa-01 §5.3.2, `4 * ceil(EMSS / 512)`).
    pub const fn worst_case_octets(self, len: usize) -> usize {
        MARKER_LEN * len.div_ceil(self.0 as usize)
    }
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
    fn positions() {
        let mpa = MarkerInterval::DEFAULT;
        assert!(mpa.is_marker_at(0) && mpa.is_marker_at(512) && !mpa.is_marker_at(4));
        assert_eq!(mpa.next_marker_at(0), 0);
        assert_eq!(mpa.next_marker_at(1), 512);
        assert_eq!(mpa.next_marker_at(513), 1024);
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
                for len in [0u64, 1, 3, 4, 63, 64, 65, 511, 512, 513, 1024, 1500] {
                    let brute = (start..start + len).filter(|&o| i.is_marker_at(o)).count() as u64;
                    assert_eq!(i.markers_in(start, start + len), brute, "{start}+{len}");
                }
            }
        }
    }

    #[test]
    fn wire_len_counts_the_markers_a_pdu_meets() {
        let i = MarkerInterval::DEFAULT;
        // A marker at 0 opens the PDU; 508 octets then reach the next one.
        assert_eq!(i.wire_len(0, 8), 12);
        assert_eq!(i.wire_len(4, 508), 508);
        assert_eq!(i.wire_len(4, 509), 513);
        // Brute force: walk the stream octet by octet.
        for start in (0..1100u64).step_by(13) {
            for len in [0usize, 1, 100, 508, 512, 2000] {
                let (mut at, mut left) = (start, len);
                while left > 0 {
                    if i.is_marker_at(at) {
                        at += MARKER_LEN as u64;
                    } else {
                        at += 1;
                        left -= 1;
                    }
                }
                assert_eq!(i.wire_len(start, len) as u64, at - start, "{start}+{len}");
            }
        }
    }

    #[test]
    fn append_marked_puts_each_marker_where_the_stream_walk_does() {
        // The reference: octet by octet, a marker (its offset's low octets)
        // before any payload octet that falls on a marker position.
        let marker = |at: u64| (at as u32).to_be_bytes();
        for interval in [64u16, 100, 512, 4096] {
            let i = MarkerInterval::new(interval).unwrap();
            for start in (0..1300u64).step_by(11).chain([0, 60, 64, 508, 512, 4092]) {
                for len in [0usize, 1, 4, 63, 64, 65, 508, 1000, 5000] {
                    let payload: Vec<u8> = (0..len).map(|k| k as u8).collect();
                    let mut expected = vec![0xee];
                    let mut at = start;
                    for &octet in &payload {
                        if i.is_marker_at(at) {
                            expected.extend_from_slice(&marker(at));
                            at += MARKER_LEN as u64;
                        }
                        expected.push(octet);
                        at += 1;
                    }
                    let mut out = vec![0xee];
                    let end = i.append_marked(&mut out, start, &payload, marker);
                    assert_eq!(out, expected, "interval {interval}, {start}+{len}");
                    assert_eq!(end, at, "interval {interval}, {start}+{len}");
                    assert_eq!(out.len() - 1, i.wire_len(start, len));
                }
            }
        }
    }

    #[test]
    fn masks_and_divisions_agree() {
        for interval in [64u16, 100, 256, 512, 513, 1000, 4096, 32768, 65535] {
            let i = MarkerInterval::new(interval).unwrap();
            let n = u64::from(interval);
            for offset in (0..70_000u64).step_by(3).chain([n - 1, n, n + 1, 1 << 40]) {
                assert_eq!(
                    i.is_marker_at(offset),
                    offset % n == 0,
                    "{interval} {offset}"
                );
                assert_eq!(
                    i.next_marker_at(offset),
                    offset.div_ceil(n) * n,
                    "{interval} {offset}"
                );
            }
        }
    }
}
