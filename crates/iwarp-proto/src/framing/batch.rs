//! The transmit output: the wire octets of a batch of PDUs, as pieces for
//! one vectored write, payload borrowed rather than copied.

use super::crc::crc32c_append;
use super::crc_marked::{self, Covers, PERIOD, RUN};
use super::{MarkerInterval, MARKER_LEN};

/// Payloads up to this many octets are copied into the batch instead of
/// borrowed. A small PDU then goes out as one piece (framing, payload, CRC):
/// the runtime writes one piece with `send`, several with `sendmsg`, whose
/// iovec import and per-iovec copy cost more in the kernel than copying a
/// few hundred octets costs here.
pub(crate) const COPY_PAYLOAD_UP_TO: usize = 512;

/// Marker periods from which [`WireBatch::push_marked_summed`] copies and
/// sums in one pass; below, the copy and then the CRC.
const FUSED_FROM: usize = 2;

/// A CRC32c over the batch's own octets from a given start, summed as far
/// as they have been: MPA's CRC of an FPDU copied with its markers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ControlCrc {
    /// Where the octets summed so far end in the batch's own.
    folded_to: usize,
    /// The CRC32c of the octets from the start to `folded_to`.
    value: u32,
}

impl ControlCrc {
    /// A CRC over the batch's own octets from `start` (a former
    /// [`WireBatch::control_len`]) on.
    pub(crate) fn starting_at(start: usize) -> Self {
        Self {
            folded_to: start,
            value: 0,
        }
    }

    /// Sums the batch's own octets not summed yet.
    fn catch_up(&mut self, control: &[u8]) {
        self.value = crc32c_append(self.value, &control[self.folded_to..]);
        self.folded_to = control.len();
    }
}

/// The CRC [`WireBatch::push_marked_summed`] carries along.
#[derive(Debug)]
pub(crate) enum Summed<'c> {
    /// Over the batch's own octets (MPA's).
    Wire(&'c mut ControlCrc),
    /// Over the payload alone (IFT's): its finished value so far.
    Payload(&'c mut u32),
}

/// One piece of the wire octets of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// `control[start..end]` of the batch.
    Control { start: usize, end: usize },
    /// `slices[slice][start..end]` of the caller's ULPDU slices.
    Ulpdu {
        slice: usize,
        start: usize,
        end: usize,
    },
}

/// The wire octets of one or more PDUs of a framing layer (MPA FPDUs or
/// IFT frames), as pieces to write in order: framing octets the batch owns
/// and ranges of the caller's ULPDU slices, which are not copied unless
/// they are short (at most 512 octets) or carry markers.
///
/// Reuse a batch: [`WireBatch::clear`] keeps its capacity.
#[derive(Debug, Clone, Default)]
pub struct WireBatch {
    control: Vec<u8>,
    pieces: Vec<Piece>,
    /// Caller slices referenced so far.
    slices: usize,
    pdus: usize,
    wire_len: usize,
}

impl WireBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.control.clear();
        self.pieces.clear();
        self.slices = 0;
        self.pdus = 0;
        self.wire_len = 0;
    }

    /// Whether no PDU has been appended since the last clear.
    pub fn is_empty(&self) -> bool {
        self.pdus == 0
    }

    /// PDUs (FPDUs or IFT frames) in the batch.
    pub fn pdu_count(&self) -> usize {
        self.pdus
    }

    /// Total octets on the wire.
    pub fn wire_len(&self) -> usize {
        self.wire_len
    }

    /// Number of pieces (each a separate slice for a vectored write).
    pub fn piece_count(&self) -> usize {
        self.pieces.len()
    }

    /// Whether any piece is a range of a caller slice (rather than the
    /// batch's own octets): whether [`WireBatch::pieces`] needs the
    /// slices at all.
    pub fn borrows(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Ulpdu { .. }))
    }

    /// Number of caller slices the batch refers to: the length `slices`
    /// must have in [`WireBatch::pieces`].
    pub fn slice_count(&self) -> usize {
        self.slices
    }

    /// Reserves indices for `count` more caller slices; returns the first.
    pub(crate) fn add_slices(&mut self, count: usize) -> usize {
        let first = self.slices;
        self.slices += count;
        first
    }

    /// Appends `slices[slice][start..end]` of the caller's slices.
    pub(crate) fn push_slice(&mut self, slice: usize, start: usize, end: usize) {
        if start < end {
            self.pieces.push(Piece::Ulpdu { slice, start, end });
            self.wire_len += end - start;
        }
    }

    /// Whether [`WireBatch::push_payload`] copies `bytes` into the batch
    /// (rather than borrowing them).
    pub(crate) fn copies(bytes: &[u8]) -> bool {
        bytes.len() <= COPY_PAYLOAD_UP_TO
    }

    /// Appends caller slice `slice`, whose octets are `bytes`, whole:
    /// copied into the batch when it is at most [`COPY_PAYLOAD_UP_TO`]
    /// octets long, else borrowed.
    pub(crate) fn push_payload(&mut self, slice: usize, bytes: &[u8]) {
        if Self::copies(bytes) {
            self.push_control(bytes);
        } else {
            self.push_slice(slice, 0, bytes.len());
        }
    }

    /// Framing octets owned by the batch so far: where the next
    /// [`WireBatch::push_control`] starts in them.
    pub(crate) fn control_len(&self) -> usize {
        self.control.len()
    }

    /// Counts one more complete PDU.
    pub(crate) fn finish_pdu(&mut self) {
        self.pdus += 1;
    }

    /// Appends framing octets, owned by the batch.
    pub(crate) fn push_control(&mut self, bytes: &[u8]) {
        let start = self.control.len();
        self.control.extend_from_slice(bytes);
        self.commit_control(start);
    }

    /// Appends `payload` as framing octets owned by the batch, with a
    /// marker wherever `interval` puts one, from stream offset `offset`
    /// (`marker` gives a marker's octets from its offset); returns the
    /// offset after it. The transmitters' copy with markers: one piece,
    /// with no bookkeeping per 512-octet run.
    pub(crate) fn push_marked(
        &mut self,
        interval: MarkerInterval,
        offset: u64,
        payload: &[u8],
        marker: impl Fn(u64) -> [u8; MARKER_LEN],
    ) -> u64 {
        let start = self.control.len();
        let offset = interval.append_marked(&mut self.control, offset, payload, marker);
        self.commit_control(start);
        offset
    }

    /// [`WireBatch::push_marked`], carrying a CRC along: over what it
    /// appends (MPA's, [`Summed::Wire`]) or over `payload` alone (IFT's,
    /// [`Summed::Payload`]). With 512-octet periods, the whole periods of
    /// `payload` are copied and summed in one pass ([`crc_marked`]); the
    /// rest is summed apart (MPA's when needed, by
    /// [`WireBatch::finish_crc`]).
    pub(crate) fn push_marked_summed(
        &mut self,
        interval: MarkerInterval,
        offset: u64,
        payload: &[u8],
        marker: impl Fn(u64) -> [u8; MARKER_LEN],
        mut crc: Summed<'_>,
    ) -> u64 {
        let start = self.control.len();
        // Up to the first marker, the marker periods, then the rest.
        let head = payload.len().min(interval.room(offset));
        let (head, rest) = payload.split_at(head);
        let mut offset = interval.append_marked(&mut self.control, offset, head, &marker);
        let periods = if interval.get() as usize == PERIOD {
            rest.len() / RUN
        } else {
            0
        };
        let (whole, rest) = rest.split_at(if periods >= FUSED_FROM {
            periods * RUN
        } else {
            0
        });
        if let Summed::Payload(crc) = &mut crc {
            **crc = crc32c_append(**crc, head);
        }
        if !whole.is_empty() {
            let first = offset;
            let marker = |i| marker(first + (i * PERIOD) as u64);
            let out = &mut self.control;
            match &mut crc {
                Summed::Wire(crc) => {
                    crc.catch_up(out);
                    crc.value =
                        crc_marked::append_periods(crc.value, out, whole, marker, Covers::Wire);
                    crc.folded_to = out.len();
                }
                Summed::Payload(crc) => {
                    **crc = crc_marked::append_periods(**crc, out, whole, marker, Covers::Payload);
                }
            }
            offset += (whole.len() / RUN * PERIOD) as u64;
        }
        if let Summed::Payload(crc) = &mut crc {
            **crc = crc32c_append(**crc, rest);
        }
        let offset = interval.append_marked(&mut self.control, offset, rest, &marker);
        self.commit_control(start);
        offset
    }

    /// The CRC32c of the batch's own octets from `crc`'s start to the end.
    pub(crate) fn finish_crc(&self, mut crc: ControlCrc) -> u32 {
        crc.catch_up(&self.control);
        crc.value
    }

    /// Puts the batch's octets from `start` (a former
    /// [`WireBatch::control_len`]) on the wire, after everything before.
    fn commit_control(&mut self, start: usize) {
        let end = self.control.len();
        if start >= end {
            return;
        }
        self.wire_len += end - start;
        // Adjacent framing octets (pad then CRC, say) form one piece.
        if let Some(Piece::Control { end: last_end, .. }) = self.pieces.last_mut() {
            if *last_end == start {
                *last_end = end;
                return;
            }
        }
        self.pieces.push(Piece::Control { start, end });
    }

    /// The wire octets, in order: framing octets from the batch and ranges
    /// of `slices`, which must be the ULPDU slices passed to
    /// the framing layer's transmitter since the last clear, in the same order.
    ///
    /// # Panics
    ///
    /// If `slices` is shorter than [`WireBatch::slice_count`] or a slice is
    /// shorter than when it was framed: a caller bug, not a peer's doing.
    pub fn pieces<'a>(&'a self, slices: &'a [&'a [u8]]) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.pieces.iter().map(move |piece| match *piece {
            Piece::Control { start, end } => &self.control[start..end],
            Piece::Ulpdu { slice, start, end } => &slices[slice][start..end],
        })
    }

    /// Appends the wire octets to `out`: a copy, for tests and tools.
    pub fn write_to(&self, slices: &[&[u8]], out: &mut Vec<u8>) {
        out.reserve(self.wire_len);
        for piece in self.pieces(slices) {
            out.extend_from_slice(piece);
        }
    }
}
