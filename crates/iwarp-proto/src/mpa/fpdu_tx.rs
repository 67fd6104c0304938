//! FPDU transmission: ULPDUs in, wire octets out as a list of pieces.
//!
//! Without markers the transmitter never copies payload. The caller passes the ULPDU as a
//! DDP header and payload slices borrowed from registered memory
//! ([`Framer::frame`]) and gets back, in a [`WireBatch`], the wire octets
//! of the FPDU as an ordered list of pieces: framing octets owned by the
//! batch (ULPDU_Length and the DDP header behind it, markers, pad, CRC)
//! and ranges of the caller's payload slices, split wherever a marker
//! falls. The runtime turns the pieces into `IoSlice`s for one vectored
//! write. A batch keeps its capacity across uses, so steady-state
//! transmission allocates nothing.
//!
//! With markers it copies instead: payload split every 512 octets would be
//! about 130 pieces per 64 KiB FPDU and a CRC call per run; copied with
//! its markers into the batch's own buffer, an FPDU is one piece, and its
//! CRC is summed as the copy is made (`framing::crc_marked`). The copy
//! costs less than the slices and calls it saves (figures in README,
//! "Performance").
//!
//! MPA does not know where DDP's header ends; the split is the caller's,
//! and only decides what is copied: a ULPDU passed whole as payload, with
//! an empty header, gives the same octets on the wire.

use super::fpdu::{pad_len, CRC_LEN, MAX_ULPDU_LEN, PAD};
use super::marker::{self, INTERVAL};
use super::FramingParams;
use crate::framing::crc::Crc32c;
use crate::framing::{ControlCrc, Framer, Summed, TxError, WireBatch, MARKER_LEN};

/// Frames ULPDUs into FPDUs for one half-connection.
#[derive(Debug, Clone)]
pub struct FpduTransmitter {
    crc: bool,
    markers: bool,
    /// Stream offset of the next octet to send, counted from the first
    /// octet of full operation.
    offset: u64,
    fpdus: u64,
}

impl FpduTransmitter {
    /// [`Framer::frame`] for an FPDU without markers whose payload the
    /// batch copies whole (every small payload): length, header, payload,
    /// pad and CRC field appended as one run of the batch's octets, the CRC
    /// folded over that run. The general walk checks for a marker before
    /// each field, which cost more than the rest of a small FPDU's framing.
    fn frame_copied(
        &mut self,
        header: &[u8],
        payload: &[&[u8]],
        ulpdu_len: usize,
        batch: &mut WireBatch,
    ) {
        let fpdu_start = batch.control_len();
        batch.push_control(&(ulpdu_len as u16).to_be_bytes());
        batch.push_control(header);
        let first_slice = batch.add_slices(payload.len());
        for (i, slice) in payload.iter().enumerate() {
            batch.push_payload(first_slice + i, slice);
        }
        batch.push_control(&PAD[..pad_len(ulpdu_len)]);
        let crc = if self.crc {
            batch
                .finish_crc(ControlCrc::starting_at(fpdu_start))
                .to_le_bytes()
        } else {
            [0; CRC_LEN]
        };
        batch.push_control(&crc);
        self.offset += super::fpdu::fpdu_len(ulpdu_len) as u64;
        self.fpdus += 1;
        batch.finish_pdu();
    }

    /// A transmitter at the start of full operation.
    pub fn new(params: FramingParams) -> Self {
        Self::at_offset(params, 0)
    }

    /// A transmitter whose next octet is at stream offset `offset` of full
    /// operation (markers fall where `offset % 512 == 0`). MPA itself always
    /// starts at 0; other offsets serve a framer that takes over mid-stream
    /// and tests that put markers at every position of an FPDU.
    pub fn at_offset(params: FramingParams, offset: u64) -> Self {
        Self {
            crc: params.crc,
            markers: params.send_markers,
            offset,
            fpdus: 0,
        }
    }

    /// Whether markers are inserted.
    pub fn markers(&self) -> bool {
        self.markers
    }

    /// Whether the CRC field carries a CRC32c (otherwise it is zero).
    pub fn crc(&self) -> bool {
        self.crc
    }
}

impl Framer for FpduTransmitter {
    //= draft-ietf-rddp-mpa-01#4
    //# The format of an FPDU shown below MUST be used for all MPA FPDUs.
    //= draft-ietf-rddp-mpa-01#5.3
    //# MPA MUST encapsulate the ULPDU such that there is exactly one ULPDU contained in one
    //# FPDU.
    //= draft-ietf-rddp-mpa-01#5.3
    //# Once an ULPDU is provided to MPA, the MPA on TCP sender MUST transmit it or fail the
    //# connection; it cannot be repudiated.
    //= draft-ietf-rddp-mpa-01#5.3
    //# The sender MUST still format the FPDU according to FPDU format as shown in Figure 2.
    //= draft-ietf-rddp-mpa-01#5.1
    //# All MPA senders MUST be able to generate markers when their use is declared by the
    //# opposing receiver
    //= draft-ietf-rddp-mpa-01#5.1
    //# In this case, the marker MUST be placed in the following FPDU and viewed as being part
    //# of that FPDU (e.g. for CRC calculation).
    //= draft-ietf-rddp-mpa-01#5.2
    //# When sending an FPDU, the sender MUST include a CRC field.
    //= draft-ietf-rddp-mpa-01#5.2
    //# The fields which MUST be included in the CRC calculation when sending an FPDU are as
    //# follows
    //= rfc5041#3
    //# Any protocol that can serve as an LLP to DDP MUST meet the following requirements.
    //= rfc5041#3
    //# In the event of a MULPDU change, DDP MUST NOT be required by the LLP to re-segment DDP
    //# Segments that have been previously posted to the LLP.
    fn frame(
        &mut self,
        header: &[u8],
        payload: &[&[u8]],
        batch: &mut WireBatch,
    ) -> Result<(), TxError> {
        let ulpdu_len = header.len() + payload.iter().map(|s| s.len()).sum::<usize>();
        //= draft-ietf-rddp-mpa-01#3.2
        //# DDP MAY post a ULPDU of any size between one and 64768 octets, however MPA is NOT
        //# REQUIRED to support a ULPDU length that is greater than the current MULPDU.
        if ulpdu_len > MAX_ULPDU_LEN {
            return Err(TxError::UlpduTooLong { len: ulpdu_len });
        }
        // When the batch copies every payload slice, the whole FPDU is one
        // run of the batch's own octets: its CRC is then one call at the
        // end instead of one per piece. With markers it is copied too, by
        // the walk below, which puts them in.
        if !self.markers && payload.iter().all(|s| WireBatch::copies(s)) {
            self.frame_copied(header, payload, ulpdu_len, batch);
            return Ok(());
        }
        let fpdu_start = batch.control_len();
        let mut w = Writer {
            batch,
            offset: self.offset,
            markers: self.markers,
            crc_on: self.crc,
            sum_pieces: self.crc && !self.markers,
            crc: Crc32c::new(),
            control_crc: ControlCrc::starting_at(fpdu_start),
            header_offset: 0,
        };
        // A marker due exactly here falls between FPDUs: FPDUPTR 0, and it
        // belongs to (and is covered by the CRC of) this FPDU.
        if w.markers && INTERVAL.is_marker_at(w.offset) {
            w.marker(0);
        }
        w.header_offset = w.offset;
        w.control(&(ulpdu_len as u16).to_be_bytes());
        w.control(header);
        let first_slice = w.batch.add_slices(payload.len());
        for (i, slice) in payload.iter().enumerate() {
            w.ulpdu_slice(first_slice + i, slice);
        }
        //= draft-ietf-rddp-mpa-01#4
        //# The pad data MUST be set to zero by the sender and ignored by the receiver (except
        //# for CRC checking).
        w.control(&PAD[..pad_len(ulpdu_len)]);
        // A marker right after the pad precedes the CRC field and is
        // covered by it (draft-ietf-rddp-mpa-01 §5.2).
        w.marker_if_due();
        let crc = if !self.crc {
            [0; CRC_LEN]
        } else if w.markers {
            // Copied: everything the CRC covers is one run of the batch,
            // summed partly as it was copied.
            w.batch.finish_crc(w.control_crc).to_le_bytes()
        } else {
            w.crc.to_wire()
        };
        w.trailer(crc);
        self.offset = w.offset;
        self.fpdus += 1;
        w.batch.finish_pdu();
        Ok(())
    }

    fn wire_len(&self, header_len: usize, payload_len: usize) -> usize {
        let fpdu = super::fpdu::fpdu_len(header_len + payload_len);
        if self.markers {
            INTERVAL.wire_len(self.offset, fpdu)
        } else {
            fpdu
        }
    }

    /// draft-ietf-rddp-mpa-01 §5.3.2, with markers if this end sends them.
    fn mulpdu(&self, emss: usize) -> usize {
        super::mulpdu::mulpdu(emss, self.markers)
    }

    fn offset(&self) -> u64 {
        self.offset
    }

    fn pdus_sent(&self) -> u64 {
        self.fpdus
    }
}

/// Appends the pieces of one FPDU to a batch, inserting markers.
struct Writer<'b> {
    batch: &'b mut WireBatch,
    offset: u64,
    markers: bool,
    /// Whether the CRC field carries a CRC.
    crc_on: bool,
    /// The CRC is summed piece by piece (`crc`): CRC on, no markers. With
    /// markers the FPDU is copied whole into the batch and its CRC summed
    /// over the batch's octets (`control_crc`); with the CRC off nothing is
    /// summed.
    sum_pieces: bool,
    crc: Crc32c,
    control_crc: ControlCrc,
    header_offset: u64,
}

impl Writer<'_> {
    /// Octets that can be written before the next marker is due.
    fn room(&self) -> usize {
        if !self.markers {
            return usize::MAX;
        }
        INTERVAL.room(self.offset)
    }

    fn marker(&mut self, ptr: u16) {
        let m = marker::encode(ptr);
        self.covered(&m);
        self.offset += MARKER_LEN as u64;
    }

    fn marker_if_due(&mut self) {
        if self.markers && INTERVAL.is_marker_at(self.offset) {
            let ptr = marker::fpdu_ptr(self.offset, self.header_offset);
            self.marker(ptr);
        }
    }

    /// Framing octets covered by the CRC, split around markers.
    fn control(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            self.marker_if_due();
            let n = bytes.len().min(self.room());
            self.covered(&bytes[..n]);
            self.offset += n as u64;
            bytes = &bytes[n..];
        }
    }

    /// Octets the batch owns and the CRC covers.
    fn covered(&mut self, bytes: &[u8]) {
        if self.sum_pieces {
            self.crc.update(bytes);
        }
        self.batch.push_control(bytes);
    }

    /// Caller slice `index`: borrowed whole (copied if short), or with
    /// markers copied into the batch with them.
    fn ulpdu_slice(&mut self, index: usize, slice: &[u8]) {
        if self.markers {
            let header_offset = self.header_offset;
            let marker = |at| marker::encode(marker::fpdu_ptr(at, header_offset));
            self.offset = if self.crc_on {
                // Copied and summed in one pass.
                let crc = Summed::Wire(&mut self.control_crc);
                self.batch
                    .push_marked_summed(INTERVAL, self.offset, slice, marker, crc)
            } else {
                self.batch.push_marked(INTERVAL, self.offset, slice, marker)
            };
        } else {
            if self.sum_pieces {
                self.crc.update(slice);
            }
            self.batch.push_payload(index, slice);
            self.offset += slice.len() as u64;
        }
    }

    /// The CRC field. A marker due inside it (only possible when the
    /// stream offset is not a multiple of 4, which MPA never produces) is
    /// sent but, unlike markers before the field, not covered by the CRC.
    fn trailer(&mut self, crc: [u8; CRC_LEN]) {
        let mut bytes = &crc[..];
        while !bytes.is_empty() {
            if self.markers && INTERVAL.is_marker_at(self.offset) {
                let m = marker::encode(marker::fpdu_ptr(self.offset, self.header_offset));
                self.batch.push_control(&m);
                self.offset += MARKER_LEN as u64;
            }
            let n = bytes.len().min(self.room());
            self.batch.push_control(&bytes[..n]);
            self.offset += n as u64;
            bytes = &bytes[n..];
        }
    }
}
