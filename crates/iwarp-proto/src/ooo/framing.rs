//! What the out-of-order path needs of a framing layer, for MPA and IFT:
//! its in-order deframer, started at any PDU boundary; where a marker says
//! a PDU starts; how long a PDU is from its first octets; and whether a
//! PDU may be guessed at the start of a segment.
//!
//! Everything here is the in-order receivers' own code: a PDU found out of
//! order is checked by a fresh [`FpduReceiver`] or [`IftReceiver`] started
//! at its first octet, so it passes exactly the checks (CRC, markers, VTag,
//! lengths) it would pass in order, and a PDU placed early is skipped in
//! order by starting a fresh receiver after it, which is the state the
//! in-order receiver would be in there.

use crate::framing::{AnyDeframer, Deframer, MarkerInterval, MARKER_LEN};
use crate::ift::frame::{frame_len, MAX_HEADER_SIZE};
use crate::ift::{IftReceiver, RxParams};
use crate::mpa::{marker as mpa_marker, FpduReceiver, FramingParams, Placement};

/// A framing layer as the out-of-order path uses it. See the module
/// documentation.
pub trait OooFraming {
    /// The in-order deframer.
    type Deframer: Deframer;

    /// An in-order deframer whose next octet, at stream offset `offset`,
    /// begins a PDU.
    fn deframer_at(&self, offset: u64) -> Self::Deframer;

    /// The marker interval of this direction, if it carries markers.
    fn markers(&self) -> Option<MarkerInterval>;

    /// The stream offset of the first octet of the PDU that the marker at
    /// `marker_offset`, reading `marker`, belongs to (its leading marker
    /// included, if it has one).
    fn marker_points_to(&self, marker_offset: u64, marker: [u8; MARKER_LEN]) -> Option<u64>;

    /// Stream octets, markers included, of the PDU that begins at
    /// `offset`, from its first octets; `None` when `octets` are too few
    /// to tell, or the length fields are out of range.
    fn pdu_len(&self, offset: u64, octets: &[u8]) -> Option<usize>;

    /// [`OooFraming::pdu_len`] of the PDU that `deframer`, fresh from
    /// [`OooFraming::deframer_at`] `offset`, is about to check: through it
    /// where that saves making another.
    fn pdu_len_for(&self, _deframer: &Self::Deframer, offset: u64, octets: &[u8]) -> Option<usize> {
        self.pdu_len(offset, octets)
    }

    /// Whether a PDU may be placed before it is in order at all.
    fn may_place_early(&self) -> bool;

    /// Whether the first octet of a segment may be taken for the first
    /// octet of a PDU, to be confirmed by its checks: what a sender that
    /// aligns PDUs with segments makes true.
    fn guesses_at_segment_starts(&self) -> bool;

    /// Whether a PDU placed ahead of delivery must leave alone every octet
    /// any other PDU placed ahead of delivery wrote (IFT's speculative
    /// placement, draft-williams-iwarp-ift-01 §8.2), rather than only
    /// those that PDUs later in the stream wrote. A PDU that would is left
    /// for the in-order path.
    fn keeps_early_placements(&self) -> bool {
        false
    }
}

/// The first octet of the PDU whose first field is at `field`: a marker
/// right before it opens the PDU, since a PDU never ends with a marker
/// (its last octets are its CRC field or its payload).
fn pdu_start(markers: Option<MarkerInterval>, field: u64) -> u64 {
    match markers {
        Some(i) if field >= MARKER_LEN as u64 && i.is_marker_at(field - MARKER_LEN as u64) => {
            field - MARKER_LEN as u64
        }
        _ => field,
    }
}

/// The first `N` octets of a PDU that begins at `offset`, markers left
/// out, if `octets` hold them.
fn demarked<const N: usize>(
    markers: Option<MarkerInterval>,
    offset: u64,
    octets: &[u8],
) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let (mut at, mut got) = (0usize, 0usize);
    while got < N {
        if markers.is_some_and(|i| i.is_marker_at(offset + at as u64)) {
            at += MARKER_LEN;
            continue;
        }
        out[got] = *octets.get(at)?;
        got += 1;
        at += 1;
    }
    Some(out)
}

/// MPA framing, with its receiver's placement mode for the in-order path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpaFraming {
    /// The framing settled by the startup.
    pub params: FramingParams,
    /// How the in-order receiver passes ULPDUs on.
    pub placement: Placement,
}

impl OooFraming for MpaFraming {
    type Deframer = FpduReceiver;

    fn deframer_at(&self, offset: u64) -> FpduReceiver {
        FpduReceiver::at_offset(self.params, offset).with_placement(self.placement)
    }

    fn markers(&self) -> Option<MarkerInterval> {
        self.params.receive_markers.then_some(mpa_marker::INTERVAL)
    }

    //= rfc5044#6
    //# 2: For optimized MPA/TCP receivers that support out-of-order reception of FPDUs (see
    //# Section 4.3, MPA Markers) a Marker can always be used to locate the beginning of an FPDU
    //# (in FPDUs with valid CRCs).
    fn marker_points_to(&self, marker_offset: u64, marker: [u8; MARKER_LEN]) -> Option<u64> {
        // The two low bits are reserved and count as zero.
        let ptr = u64::from(mpa_marker::decode(marker) & !3);
        if ptr == 0 {
            // Between two FPDUs: the marker opens the next one.
            return Some(marker_offset);
        }
        Some(pdu_start(self.markers(), marker_offset.checked_sub(ptr)?))
    }

    fn pdu_len(&self, offset: u64, octets: &[u8]) -> Option<usize> {
        FpduReceiver::at_offset(self.params, offset).next_fpdu_len(octets)
    }

    fn pdu_len_for(&self, deframer: &FpduReceiver, _: u64, octets: &[u8]) -> Option<usize> {
        deframer.next_fpdu_len(octets)
    }

    fn may_place_early(&self) -> bool {
        self.params.receive_markers || self.params.crc
    }

    //= draft-ietf-rddp-mpa-01#5.4.1
    //# A single Aligned and complete FPDU, either in order, or out of order: This can be passed
    //# to DDP as soon as validated, and Delivered when ordering is established.
    fn guesses_at_segment_starts(&self) -> bool {
        self.params.crc
    }
}

/// IFT framing, with the peer's permission to place speculatively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IftFraming {
    /// How frames are received.
    pub params: RxParams,
    /// The peer set SP (draft-williams-iwarp-ift-01 §4.2): this end may
    /// place its frames speculatively.
    pub may_speculate: bool,
}

impl OooFraming for IftFraming {
    type Deframer = IftReceiver;

    fn deframer_at(&self, offset: u64) -> IftReceiver {
        IftReceiver::at_offset(self.params, offset)
    }

    fn markers(&self) -> Option<MarkerInterval> {
        self.params.markers
    }

    fn marker_points_to(&self, marker_offset: u64, marker: [u8; MARKER_LEN]) -> Option<u64> {
        let ptr = u64::from(crate::ift::marker::decode(marker));
        if ptr == 0 {
            return Some(marker_offset);
        }
        Some(pdu_start(self.markers(), marker_offset.checked_sub(ptr)?))
    }

    fn pdu_len(&self, offset: u64, octets: &[u8]) -> Option<usize> {
        let sizes: [u8; 4] = demarked(self.markers(), offset, octets)?;
        let header = usize::from(u16::from_be_bytes([sizes[0], sizes[1]]));
        let payload = usize::from(u16::from_be_bytes([sizes[2], sizes[3]]));
        if header > MAX_HEADER_SIZE {
            return None;
        }
        let len = frame_len(
            header,
            payload,
            self.params.header_crc.present(),
            self.params.payload_crc.present(),
        );
        // A marker that opens the frame counts with it, one due right
        // after it does not.
        Some(self.markers().map_or(len, |i| i.wire_len(offset, len)))
    }

    //= draft-williams-iwarp-ift-01#4.2
    //# If not set, the receiver MUST NOT do speculative placement.
    fn may_place_early(&self) -> bool {
        self.may_speculate
    }

    fn guesses_at_segment_starts(&self) -> bool {
        self.may_speculate
    }

    fn keeps_early_placements(&self) -> bool {
        true
    }
}

/// Whichever framing a connection settled on, as one type (its in-order
/// deframer is an [`AnyDeframer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnyFraming {
    /// MPA.
    Mpa(MpaFraming),
    /// IFT.
    Ift(IftFraming),
}

/// Forwards a call to the framing inside.
macro_rules! forward {
    ($self:ident, $x:ident => $call:expr) => {
        match $self {
            Self::Mpa($x) => $call,
            Self::Ift($x) => $call,
        }
    };
}

impl OooFraming for AnyFraming {
    type Deframer = AnyDeframer;

    fn deframer_at(&self, offset: u64) -> AnyDeframer {
        match self {
            Self::Mpa(f) => AnyDeframer::Mpa(f.deframer_at(offset)),
            Self::Ift(f) => AnyDeframer::Ift(f.deframer_at(offset)),
        }
    }

    fn markers(&self) -> Option<MarkerInterval> {
        forward!(self, f => f.markers())
    }

    fn marker_points_to(&self, marker_offset: u64, marker: [u8; MARKER_LEN]) -> Option<u64> {
        forward!(self, f => f.marker_points_to(marker_offset, marker))
    }

    fn pdu_len(&self, offset: u64, octets: &[u8]) -> Option<usize> {
        forward!(self, f => f.pdu_len(offset, octets))
    }

    fn pdu_len_for(&self, deframer: &AnyDeframer, offset: u64, octets: &[u8]) -> Option<usize> {
        match (self, deframer) {
            (Self::Mpa(f), AnyDeframer::Mpa(d)) => f.pdu_len_for(d, offset, octets),
            _ => self.pdu_len(offset, octets),
        }
    }

    fn may_place_early(&self) -> bool {
        forward!(self, f => f.may_place_early())
    }

    fn guesses_at_segment_starts(&self) -> bool {
        forward!(self, f => f.guesses_at_segment_starts())
    }

    fn keeps_early_placements(&self) -> bool {
        forward!(self, f => f.keeps_early_placements())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::{Framer, WireBatch};
    use crate::ift::{IftTransmitter, RxCrc, TxParams};
    use crate::mpa::FpduTransmitter;

    /// Frames ULPDUs of the given lengths with `framer`; returns the stream
    /// and each PDU's first offset.
    fn stream<F: Framer>(framer: &mut F, lens: &[usize]) -> (Vec<u8>, Vec<u64>) {
        let mut wire = Vec::new();
        let mut starts = Vec::new();
        let mut batch = WireBatch::new();
        for (i, &len) in lens.iter().enumerate() {
            let header = vec![i as u8; len.min(14)];
            let payload = vec![0xa5u8; len - header.len()];
            starts.push(wire.len() as u64);
            batch.clear();
            framer.frame(&header, &[&payload], &mut batch).unwrap();
            batch.write_to(&[&payload], &mut wire);
        }
        (wire, starts)
    }

    fn check_locating<F: OooFraming>(framing: &F, wire: &[u8], starts: &[u64]) {
        let end = wire.len() as u64;
        for (i, &s) in starts.iter().enumerate() {
            let next = starts.get(i + 1).copied().unwrap_or(end);
            let len = framing.pdu_len(s, &wire[s as usize..]).unwrap();
            assert_eq!(s + len as u64, next, "PDU {i} at {s}");
        }
        // Every marker points at the PDU it sits in (or opens).
        if let Some(interval) = framing.markers() {
            let mut m = 0u64;
            while m + 4 <= end {
                let octets: [u8; 4] = wire[m as usize..m as usize + 4].try_into().unwrap();
                let to = framing.marker_points_to(m, octets).unwrap();
                let owner = starts.iter().rev().find(|&&s| s <= m).copied().unwrap();
                assert_eq!(to, owner, "marker at {m}");
                m += u64::from(interval.get());
            }
        }
    }

    #[test]
    fn mpa_pdus_are_found_from_markers_and_lengths() {
        let lens = [14, 100, 507, 508, 509, 1200, 3000, 18, 40, 2000];
        for (crc, markers) in [(true, true), (true, false), (false, true)] {
            let params = FramingParams {
                crc,
                send_markers: markers,
                receive_markers: markers,
            };
            let (wire, starts) = stream(&mut FpduTransmitter::new(params), &lens);
            let framing = MpaFraming {
                params,
                placement: Placement::Verified,
            };
            check_locating(&framing, &wire, &starts);
        }
    }

    #[test]
    fn ift_frames_are_found_from_markers_and_lengths() {
        let lens = [14, 100, 507, 508, 509, 1200, 3000, 18, 40, 2000];
        for (hc, pc, markers) in [(true, true, None), (true, false, MarkerInterval::new(64))] {
            let tx = TxParams {
                header_crc: hc,
                payload_crc: pc,
                markers,
                vtag: 0x1234,
            };
            let (wire, starts) = stream(&mut IftTransmitter::new(tx), &lens);
            let mut params = tx.checked_by_peer();
            if pc {
                params.payload_crc = RxCrc::Checked;
            }
            let framing = IftFraming {
                params,
                may_speculate: true,
            };
            check_locating(&framing, &wire, &starts);
        }
    }
}
