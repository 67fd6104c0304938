//! IFT frame transmission: a DDP header and payload in, wire octets out as
//! a list of pieces ([`Framer`]).
//!
//! Without markers the payload is never copied: the caller passes it as
//! slices (typically borrowed from registered memory) and gets back, in a
//! [`WireBatch`], the frame as an ordered list of pieces: framing octets
//! owned by the batch and ranges of the caller's payload slices. With
//! markers the payload is copied into the batch with its markers, as MPA
//! does (`mpa::fpdu_tx`): split wherever a marker falls, a 64 KiB frame
//! was some 260 pieces for one vectored write, and the kernel's copy from
//! that many (`_copy_from_iter`, `__import_iovec`) cost more than the
//! copy. The DDP header (14 or 18 octets) is copied into the batch next to
//! the IFT header and header CRC, so that the frame's first bytes up to the
//! payload make a single piece. A batch keeps its capacity across uses, so
//! steady-state transmission allocates nothing.

use super::frame::{frame_len, IftHeader, IFT_HEADER_LEN, MAX_SIZE};
use super::marker;
use super::TxParams;
use crate::framing::crc::Crc32c;
use crate::framing::mulpdu::clamp;
use crate::framing::{Framer, MarkerInterval, Summed, TxError, WireBatch, MARKER_LEN};

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
}

impl Framer for IftTransmitter {
    fn frame(
        &mut self,
        header: &[u8],
        payload: &[&[u8]],
        batch: &mut WireBatch,
    ) -> Result<(), TxError> {
        // draft-williams-iwarp-ift-01 §5.1: 16-bit header_size and
        // payload_size fields.
        let header_size = u16::try_from(header.len())
            .map_err(|_| TxError::HeaderTooLong { len: header.len() })?;
        let payload_len: usize = payload.iter().map(|s| s.len()).sum();
        if payload_len > MAX_SIZE {
            return Err(TxError::PayloadTooLong { len: payload_len });
        }
        let ift = IftHeader {
            header_size,
            payload_size: payload_len as u16,
            vtag: self.params.vtag,
        }
        .to_bytes();
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
        let mut crc = self.params.payload_crc.then(Crc32c::new);
        for (i, slice) in payload.iter().enumerate() {
            w.payload_slice(first_slice + i, slice, crc.as_mut());
        }
        if let Some(crc) = crc {
            w.control(&crc.to_wire());
        }
        self.offset = w.offset;
        self.frames += 1;
        w.batch.finish_pdu();
        Ok(())
    }

    fn wire_len(&self, header_len: usize, payload_len: usize) -> usize {
        let len = frame_len(
            header_len,
            payload_len,
            self.params.header_crc,
            self.params.payload_crc,
        );
        match self.params.markers {
            Some(interval) => interval.wire_len(self.offset, len),
            None => len,
        }
    }

    /// The IFT header, the CRCs in use and worst-case markers; no padding
    /// (§5.1, §7.2). The bounds are MPA's, so that DDP's largest Terminate
    /// always fits.
    fn mulpdu(&self, emss: usize) -> usize {
        let tx = &self.params;
        let crcs = 4 * (usize::from(tx.header_crc) + usize::from(tx.payload_crc));
        let markers = tx.markers.map_or(0, |i| i.worst_case_octets(emss));
        clamp(emss, IFT_HEADER_LEN + crcs + markers)
    }

    fn offset(&self) -> u64 {
        self.offset
    }

    fn pdus_sent(&self) -> u64 {
        self.frames
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

    /// Caller slice `index`, whole (copied if short), or copied with its
    /// markers; folded into the payload CRC `crc` if there is one.
    fn payload_slice(&mut self, index: usize, slice: &[u8], crc: Option<&mut Crc32c>) {
        let Some(interval) = self.markers else {
            if let Some(crc) = crc {
                crc.update(slice);
            }
            self.batch.push_payload(index, slice);
            self.offset += slice.len() as u64;
            return;
        };
        let frame_offset = self.frame_offset;
        let marker = move |at| marker::encode(marker::frame_ptr(at, frame_offset));
        self.offset = match crc {
            // Copied and summed in one pass.
            Some(crc) => {
                let mut value = crc.value();
                let summed = Summed::Payload(&mut value);
                let offset =
                    self.batch
                        .push_marked_summed(interval, self.offset, slice, marker, summed);
                *crc = Crc32c::resume(value);
                offset
            }
            None => self.batch.push_marked(interval, self.offset, slice, marker),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::mulpdu::{MAX_ULPDU, MIN_MULPDU};

    fn tx(header_crc: bool, payload_crc: bool, markers: Option<u16>) -> IftTransmitter {
        IftTransmitter::new(TxParams {
            header_crc,
            payload_crc,
            markers: markers.and_then(MarkerInterval::new),
            vtag: 1,
        })
    }

    #[test]
    //= rfc5041#3
    //= type=test
    //# LLPs MUST expose MULPDU & MULPDU Changes.
    fn mulpdu_leaves_room_for_header_crcs_and_markers() {
        // 6-octet header plus the CRCs in use, no pad.
        assert_eq!(tx(true, true, None).mulpdu(1460), 1460 - 14);
        assert_eq!(tx(false, false, None).mulpdu(1460), 1460 - 6);
        assert_eq!(tx(true, false, Some(512)).mulpdu(1460), 1460 - 10 - 12);
        // Never below what DDP needs for its largest Terminate, never above
        // what it may post.
        assert_eq!(tx(true, true, None).mulpdu(40), MIN_MULPDU);
        assert_eq!(tx(false, false, None).mulpdu(65483), MAX_ULPDU);
    }
}
