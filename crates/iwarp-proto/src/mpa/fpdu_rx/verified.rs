//! Verify-before-place reception: each FPDU is held until it has arrived
//! whole and passed its checks, and only then is its ULPDU handed to DDP.
//!
//! RFC 5044 §6 puts the rule first among the receiver's duties: "An MPA
//! receiver MUST first verify the FPDU before passing the ULPDU to DDP."
//!
//! The receiver needs no buffer of its own for it: in this mode
//! [`Deframer::receive`] takes whole FPDUs only, leaving the octets of
//! an incomplete one to the caller, who presents them again with more
//! (as the startup machines leave what follows a frame). It first checks
//! an FPDU in full (markers, CRC), computing where its fields and markers
//! fall rather than stepping through them (the incremental walk remains
//! for what that does not vouch for, and reports the error), then passes
//! the runs of its ULPDU, markers left out, to the sink.
//! [`FpduReceiver::next_fpdu_len`] tells the caller how many octets the
//! FPDU at the front of its buffer needs, so that it can read that many.

use super::{Field, FpduReceiver};
use crate::framing::crc::{self, Crc32c};
use crate::framing::{
    Deframer, FeedError, FramingEvent, Layout, Next, Span, UlpduSink, MARKER_LEN,
};
use crate::mpa::error::MpaError;
use crate::mpa::fpdu::{fpdu_len, pad_len, CRC_LEN, HEADER_LEN, MAX_ULPDU_LEN};
use crate::mpa::marker::{self, INTERVAL};

/// Payload runs handed to the sink in one call at most, as the
/// [`crate::framing::receive`] loop gathers them.
const GATHER: usize = 16;

/// When an FPDU receiver passes a ULPDU's octets to the layer above. A
/// receiver starts in [`Placement::Direct`], whose [`Deframer::receive`]
/// consumes every octet it is given;
/// [`FpduReceiver::with_placement`] selects [`Placement::Verified`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Placement {
    /// As they arrive, so that DDP can place payload at once (and a
    /// runtime can read it straight from the socket into its region);
    /// the FPDU is checked at its end, before anything is delivered. A
    /// damaged FPDU may thus have been placed, though only where the peer
    /// was entitled to write, and is never delivered: a deviation from
    /// RFC 5044 §6, which asks for the check first.
    Direct,
    /// Once the whole FPDU has arrived and passed every check (RFC 5044
    /// §6): nothing of a damaged FPDU is ever placed.
    /// [`Deframer::receive`] then consumes whole FPDUs only.
    Verified,
}

/// The most stream octets one FPDU can take: the longest ULPDU, its pad
/// and CRC, and the markers that can fall among them (one every 508
/// octets of FPDU, plus one at either end).
//= draft-ietf-rddp-mpa-01#11.2.2
//# If the MTU is smaller than 140 octets, the buffer MUST be at least 140 octets long to
//# support the minimum FPDU size.
pub const MAX_FPDU_WIRE_LEN: usize = fpdu_len(MAX_ULPDU_LEN)
    + MARKER_LEN * (fpdu_len(MAX_ULPDU_LEN).div_ceil(INTERVAL.get() as usize - MARKER_LEN) + 1);

impl FpduReceiver {
    /// The same receiver with `placement`. Set it before the first octet,
    /// or between FPDUs.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// When this receiver passes ULPDU octets on.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The stream octets, markers included, from here to the end of the
    /// FPDU that starts here, if the receiver sits between FPDUs and
    /// `input` (the octets that follow) holds its ULPDU_Length.
    pub fn next_fpdu_len(&self, input: &[u8]) -> Option<usize> {
        if !self.at_boundary() {
            return None;
        }
        let mut offset = self.offset;
        let mut at = 0;
        let mut header = [0u8; HEADER_LEN];
        let mut got = 0;
        while got < HEADER_LEN {
            if self.markers && INTERVAL.is_marker_at(offset) {
                at += MARKER_LEN;
                offset += MARKER_LEN as u64;
                continue;
            }
            header[got] = *input.get(at)?;
            got += 1;
            at += 1;
            offset += 1;
        }
        let ulpdu_len = usize::from(u16::from_be_bytes(header));
        let left = ulpdu_len + pad_len(ulpdu_len) + CRC_LEN;
        Some(if self.markers {
            at + INTERVAL.wire_len(offset, left)
        } else {
            at + left
        })
    }

    /// [`Deframer::receive`] in [`Placement::Verified`] mode.
    //= rfc5044#6
    //# An MPA receiver MUST first verify the FPDU before passing the ULPDU
    //# to DDP.
    //= rfc5044#6
    //# The ULPDU Length field (see Section 4) MUST be used to determine if the entire FPDU is
    //# present before forwarding the ULPDU to DDP.
    pub(super) fn receive_verified<S: UlpduSink>(
        &mut self,
        input: &[u8],
        sink: &mut S,
    ) -> Result<usize, FeedError<MpaError, S::Error>> {
        let mut used = 0;
        loop {
            if let Some(e) = self.failed {
                return Err(FeedError::Framing(e));
            }
            let rest = &input[used..];
            let Some(len) = self.next_fpdu_len(rest).filter(|n| *n <= rest.len()) else {
                return Ok(used);
            };
            let fpdu = &rest[..len];
            let (at, offset, ulpdu_len) = self.check_whole(fpdu).map_err(FeedError::Framing)?;
            used += len;
            // Verified: now DDP may have it, in runs between the markers.
            sink.ulpdu_begin(ulpdu_len).map_err(FeedError::Sink)?;
            let mut pieces: [&[u8]; GATHER] = [&[]; GATHER];
            let mut count = 0;
            let mut pos = at;
            let layout = Layout::new(offset, ulpdu_len, self.markers.then_some(INTERVAL));
            for span in layout {
                match span {
                    Span::Marker => pos += MARKER_LEN,
                    Span::Payload(n) => {
                        pieces[count] = &fpdu[pos..pos + n];
                        pos += n;
                        count += 1;
                        if count == GATHER {
                            sink.ulpdu_data_vectored(&pieces).map_err(FeedError::Sink)?;
                            count = 0;
                        }
                    }
                }
            }
            if count > 0 {
                sink.ulpdu_data_vectored(&pieces[..count])
                    .map_err(FeedError::Sink)?;
            }
            sink.ulpdu_end().map_err(FeedError::Sink)?;
        }
    }

    /// Runs one whole FPDU through the checks (markers, CRC). Returns where
    /// its ULPDU starts in `fpdu` and in the stream, and its length.
    ///
    /// A sound FPDU takes [`FpduReceiver::check_sound`]'s direct path;
    /// anything it does not vouch for is walked field by field, which
    /// finds the same first error the incremental receiver would.
    pub(crate) fn check_whole(&mut self, fpdu: &[u8]) -> Result<(usize, u64, usize), MpaError> {
        match self.check_sound(fpdu) {
            Some(found) => Ok(found),
            None => self.check_walking(fpdu),
        }
    }

    /// The checks of a whole FPDU at a 4-aligned stream offset (MPA's
    /// always), computed from the offsets where the fields and markers
    /// must fall, without the incremental state machine: with markers, its
    /// walk cost a few steps per 512 octets, more than the CRC of them.
    /// Where a marker can fall is simple there: at the FPDU's first octet
    /// (FPDUPTR 0), or anywhere in the ULPDU and pad, or right before the
    /// CRC field (covered by the CRC), never in the ULPDU_Length or CRC
    /// fields.
    ///
    /// On success it leaves the receiver exactly as the walk would and
    /// returns what [`FpduReceiver::check_whole`] returns. If anything
    /// fails (a marker, the CRC, a length) it changes nothing and returns
    /// `None`, so that the walk finds and reports the error.
    pub(crate) fn check_sound(&mut self, fpdu: &[u8]) -> Option<(usize, u64, usize)> {
        if self.failed.is_some() || !self.at_boundary() || !self.offset.is_multiple_of(4) {
            return None;
        }
        let markers = self.markers;
        let marker_ok = |at: usize, expected: u16| {
            let m: [u8; MARKER_LEN] = fpdu.get(at..at + MARKER_LEN)?.try_into().ok()?;
            marker::fpdu_ptr_matches(marker::decode(m), expected).then_some(())
        };
        let fpdu_offset = self.offset;
        let mut at = 0;
        let mut offset = fpdu_offset;
        if markers && INTERVAL.is_marker_at(offset) {
            // Between two FPDUs: it opens this one.
            marker_ok(at, 0)?;
            at += MARKER_LEN;
            offset += MARKER_LEN as u64;
        }
        let header_offset = offset;
        let header: [u8; HEADER_LEN] = fpdu.get(at..at + HEADER_LEN)?.try_into().ok()?;
        let ulpdu_len = usize::from(u16::from_be_bytes(header));
        at += HEADER_LEN;
        offset += HEADER_LEN as u64;
        let ulpdu = (at, offset, ulpdu_len);
        // The ULPDU and pad, with the markers among them and one that may
        // follow the pad.
        let mut left = ulpdu_len + pad_len(ulpdu_len);
        loop {
            if markers && INTERVAL.is_marker_at(offset) {
                marker_ok(at, marker::fpdu_ptr(offset, header_offset))?;
                at += MARKER_LEN;
                offset += MARKER_LEN as u64;
            }
            if left == 0 {
                break;
            }
            let run = if markers {
                left.min(INTERVAL.room(offset))
            } else {
                left
            };
            at += run;
            offset += run as u64;
            left -= run;
        }
        let crc_field: [u8; CRC_LEN] = fpdu.get(at..)?.try_into().ok()?;
        if self.crc_enabled && crc::crc32c(&fpdu[..at]) != crc::from_wire(crc_field) {
            return None;
        }
        self.offset = offset + CRC_LEN as u64;
        self.fpdu_offset = fpdu_offset;
        self.header_offset = header_offset;
        self.header = header;
        self.previous_ulpdu_len = self.ulpdu_len;
        self.ulpdu_len = ulpdu_len;
        self.crc_field = crc_field;
        self.crc = Crc32c::new();
        self.fpdus += 1;
        self.field = Field::Header { got: 0 };
        Some(ulpdu)
    }

    /// [`FpduReceiver::check_whole`] by the incremental walk: every case,
    /// and the first error in stream order.
    pub(crate) fn check_walking(&mut self, fpdu: &[u8]) -> Result<(usize, u64, usize), MpaError> {
        // At a 4-aligned offset (MPA's always; other offsets serve tests)
        // no marker can fall inside the CRC field, so the CRC covers
        // exactly the octets before the field's last four: one call.
        if self.crc_enabled && self.offset.is_multiple_of(4) {
            if let Some(covered) = fpdu.len().checked_sub(CRC_LEN) {
                self.whole_crc = Some(crc::crc32c(&fpdu[..covered]));
            }
        }
        let mut at = 0;
        let mut ulpdu = None;
        while at < fpdu.len() {
            match self.next() {
                Next::Payload { run, .. } => {
                    let n = run.min(fpdu.len() - at);
                    self.push_payload(&fpdu[at..at + n])?;
                    at += n;
                }
                Next::Framing => {
                    let (n, event) = self.push_framing(&fpdu[at..])?;
                    at += n;
                    match event {
                        Some(FramingEvent::Begin { payload_len, .. }) => {
                            ulpdu = Some((at, self.offset, payload_len))
                        }
                        Some(FramingEvent::End) => break,
                        None => {}
                    }
                }
                Next::Failed => break,
            }
        }
        // Taken by the CRC check, unless the walk failed before it.
        self.whole_crc = None;
        if let Some(e) = self.failed {
            return Err(e);
        }
        // `next_fpdu_len` measured the FPDU with the same arithmetic: it
        // ends exactly with its CRC field.
        debug_assert_eq!(at, fpdu.len());
        Ok(ulpdu.unwrap_or((at, self.offset, 0)))
    }
}
