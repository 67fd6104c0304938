//! IFT frame transmission: a DDP header and payload in, wire octets out as
//! a list of pieces.
//!
//! The payload is never copied: the caller passes it as slices (typically
//! borrowed from registered memory) and gets back, in a [`WireBatch`], the
//! frame as an ordered list of pieces: framing octets owned by the batch
//! and ranges of the caller's payload slices, split wherever a marker
//! falls. The DDP header (14 or 18 octets) is copied into the batch next to
//! the IFT header and header CRC, so that the frame's first bytes up to the
//! payload make a single piece. A batch keeps its capacity across uses, so
//! steady-state transmission allocates nothing.

use super::frame::{IftHeader, MAX_SIZE};
use super::marker::{self, MarkerInterval, MARKER_LEN};
use super::{IftTxError, TxParams};
use crate::framing::WireBatch;
use crate::mpa::crc::Crc32c;

/// Frames DDP segments into IFT frames for one half-connection.
#[derive(Debug, Clone)]
pub struct IftTransmitter {
    params: TxParams,
    /// Stream offset of the next octet to send, counted from the first
    /// octet after our Adaption Indication.
    offset: u64,
    frames: u64,
}

impl IftTransmitter {
    /// A transmitter at the start of full operation.
    pub fn new(params: TxParams) -> Self {
        Self::at_offset(params, 0)
    }

    /// A transmitter whose next octet is at stream offset `offset` (markers
    /// fall where `offset` is a multiple of the interval): for tests that
    /// put markers at every position of a frame.
    pub fn at_offset(params: TxParams, offset: u64) -> Self {
        Self {
            params,
            offset,
            frames: 0,
        }
    }

    /// The parameters in force.
    pub fn params(&self) -> &TxParams {
        &self.params
    }

    /// Stream offset of the next octet this transmitter will produce.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Frames produced so far.
    pub fn frames_sent(&self) -> u64 {
        self.frames
    }

    /// Octets the frame for this header and payload length takes on the
    /// wire if sent next, markers included.
    pub fn wire_len(&self, header_len: usize, payload_len: usize) -> usize {
        let len = super::frame::frame_len(
            header_len,
            payload_len,
            self.params.header_crc,
            self.params.payload_crc,
        ) as u64;
        let Some(interval) = self.params.markers else {
            return len as usize;
        };
        // Each marker pushes the rest of the frame 4 octets further; a
        // marker due right after the frame belongs to the next one.
        let mut end = self.offset + len;
        let mut counted = 0;
        loop {
            let n = interval.markers_in(self.offset, end);
            if n == counted {
                return (end - self.offset) as usize;
            }
            end += (n - counted) * MARKER_LEN as u64;
            counted = n;
        }
    }

    /// Appends to `batch` the frame carrying the DDP `header` and the DDP
    /// payload made of `payload`'s slices in order.
    ///
    /// The batch records ranges of the payload slices by index, counted
    /// across every frame appended since the batch was last cleared: to
    /// write the batch, pass [`WireBatch::pieces`] all the payload slices of
    /// all those frames, in order (not the headers, which the batch holds).
    pub fn frame(
        &mut self,
        header: &[u8],
        payload: &[&[u8]],
        batch: &mut WireBatch,
    ) -> Result<(), IftTxError> {
        // draft-williams-iwarp-ift-01 §5.1: 16-bit header_size and
        // payload_size fields.
        let header_size = u16::try_from(header.len())
            .map_err(|_| IftTxError::HeaderTooLong { len: header.len() })?;
        let payload_len: usize = payload.iter().map(|s| s.len()).sum();
        if payload_len > MAX_SIZE {
            return Err(IftTxError::PayloadTooLong { len: payload_len });
        }
        let ift = IftHeader {
            header_size,
            payload_size: payload_len as u16,
            vtag: self.params.vtag,
        }
        .emit();
        let mut w = Writer {
            batch,
            offset: self.offset,
            markers: self.params.markers,
            frame_offset: self.offset,
        };
        // A marker due exactly here falls between frames: FramePtr 0.
        if let Some(interval) = w.markers {
            if interval.is_marker_at(w.offset) {
                w.marker(0);
            }
        }
        w.frame_offset = w.offset;
        // §5.1: the header CRC covers the IFT header (VTag included, see
        // `frame`) and the DDP header, markers excluded.
        let mut crc = Crc32c::new();
        crc.update(&ift);
        crc.update(header);
        w.control(&ift);
        w.control(header);
        if self.params.header_crc {
            w.control(&crc.to_wire());
        }
        let first_slice = w.batch.add_slices(payload.len());
        let mut crc = Crc32c::new();
        for (i, slice) in payload.iter().enumerate() {
            if self.params.payload_crc {
                crc.update(slice);
            }
            w.payload_slice(first_slice + i, slice.len());
        }
        if self.params.payload_crc {
            w.control(&crc.to_wire());
        }
        self.offset = w.offset;
        self.frames += 1;
        w.batch.finish_pdu();
        Ok(())
    }
}

/// Appends the pieces of one frame to a batch, inserting markers.
struct Writer<'b> {
    batch: &'b mut WireBatch,
    offset: u64,
    markers: Option<MarkerInterval>,
    /// Stream offset of the frame's header_size field.
    frame_offset: u64,
}

impl Writer<'_> {
    /// Octets that can be written before the next marker is due.
    fn room(&self) -> usize {
        self.markers.map_or(usize::MAX, |i| i.room(self.offset))
    }

    fn marker(&mut self, ptr: u32) {
        self.batch.push_control(&marker::encode(ptr));
        self.offset += MARKER_LEN as u64;
    }

    fn marker_if_due(&mut self) {
        if let Some(interval) = self.markers {
            if interval.is_marker_at(self.offset) {
                self.marker(marker::frame_ptr(self.offset, self.frame_offset));
            }
        }
    }

    /// Framing octets, split around markers.
    fn control(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            self.marker_if_due();
            let n = bytes.len().min(self.room());
            self.batch.push_control(&bytes[..n]);
            self.offset += n as u64;
            bytes = &bytes[n..];
        }
    }

    /// `len` octets of caller slice `index`, split around markers.
    fn payload_slice(&mut self, index: usize, len: usize) {
        let mut start = 0;
        while start < len {
            self.marker_if_due();
            let n = (len - start).min(self.room());
            self.batch.push_slice(index, start, start + n);
            self.offset += n as u64;
            start += n;
        }
    }
}
