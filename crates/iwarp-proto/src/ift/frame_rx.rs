//! IFT frame reception: an incremental deframer for an in-order stream.
//!
//! The receiver is fed the octets that follow the peer's Adaption
//! Indication, in chunks of any size down to one octet. For each frame it
//! reads the IFT header, refuses a header_size above
//! [`MAX_HEADER_SIZE`] before buffering any of it, buffers the DDP header,
//! checks the header CRC (when the peer sends one and we check it) and
//! then the VTag, and only then announces the frame to the layer above and
//! hands over the DDP header and, as it arrives, the payload. The payload
//! CRC is checked at the end, before the frame is declared complete. After
//! an error it passes nothing more.
//!
//! This is IFT's advantage over MPA (draft-williams-iwarp-ift-01 §7.1):
//! MPA has one CRC at the end of the FPDU, so DDP must act on a header
//! nobody has verified yet (and suppress the header's own errors until the
//! CRC is in, see [`crate::framing`]). With a header CRC, the placement
//! information is verified before a single payload octet is placed; only
//! the payload itself remains unverified until the frame ends.
//!
//! It is driven through [`Deframer`], as MPA's receiver is: the one
//! [`crate::framing::receive`] loop hands each frame's DDP header and
//! payload to a sink as one ULPDU; the step API reports
//! [`FramingEvent::Begin`] once the header is verified (the DDP header is
//! then [`Deframer::header`]) and [`FramingEvent::End`] once the payload
//! CRC is.
//!
//! Speculative placement (§8) belongs to the out-of-order receive path
//! ([`crate::ooo`]), which is built of this receiver: it confirms a frame
//! guessed ahead of a hole by running it through a fresh receiver started
//! at the guess ([`IftReceiver::at_offset`]). Here TCP has delivered
//! everything before each octet seen, so there is nothing to guess and
//! nothing to re-place.

use super::frame::{IftHeaderView, CRC_LEN, IFT_HEADER_LEN, MAX_HEADER_SIZE};
use super::marker;
use super::params::{RxCrc, RxParams};
use super::IftRxError;
use crate::framing::crc::{self, Crc32c};
use crate::framing::{
    payload_due, push_spans_one_by_one, walk_spans, Deframer, FramingEvent, Layout, Next, Span,
    MARKER_LEN,
};

/// Where the receiver is inside the current frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// `got` octets of the IFT header read so far.
    IftHeader { got: u8 },
    /// `got` octets of the DDP header read so far.
    DdpHeader { got: usize },
    /// `got` octets of the header CRC field read so far.
    HeaderCrc { got: u8 },
    /// Payload octets still to come.
    Payload { remaining: usize },
    /// `got` octets of the payload CRC field read so far.
    PayloadCrc { got: u8 },
    /// Everything is in; [`FramingEvent::End`] is yet to be reported.
    Complete,
}

/// Deframes one half-connection's IFT frames, in stream order.
#[derive(Debug, Clone)]
pub struct IftReceiver {
    params: RxParams,
    /// Stream offset of the next octet expected.
    offset: u64,
    field: Field,
    /// Octets of a marker being read, if one is under way.
    marker: Option<(u8, [u8; MARKER_LEN])>,
    /// Stream offset of the current frame's header_size field.
    frame_offset: u64,
    ift_header: [u8; IFT_HEADER_LEN],
    ddp_header: [u8; MAX_HEADER_SIZE],
    header_len: usize,
    payload_len: usize,
    previous_payload_len: usize,
    crc_field: [u8; CRC_LEN],
    crc: Crc32c,
    failed: Option<IftRxError>,
    frames: u64,
}

impl IftReceiver {
    /// A receiver at the start of full operation.
    pub fn new(params: RxParams) -> Self {
        Self::at_offset(params, 0)
    }

    /// A receiver whose next octet is at stream offset `offset` (see
    /// [`super::IftTransmitter::at_offset`]); a frame must begin there.
    pub fn at_offset(params: RxParams, offset: u64) -> Self {
        Self {
            params,
            offset,
            field: Field::IftHeader { got: 0 },
            marker: None,
            frame_offset: offset,
            ift_header: [0; IFT_HEADER_LEN],
            ddp_header: [0; MAX_HEADER_SIZE],
            header_len: 0,
            payload_len: 0,
            previous_payload_len: 0,
            crc_field: [0; CRC_LEN],
            crc: Crc32c::new(),
            failed: None,
            frames: 0,
        }
    }

    /// The parameters in force.
    pub fn params(&self) -> &RxParams {
        &self.params
    }

    /// Whether a marker starts at the next octet.
    fn marker_due(&self) -> bool {
        self.marker.is_none()
            && self
                .params
                .markers
                .is_some_and(|i| i.is_marker_at(self.offset))
    }

    /// Octets before the next marker.
    fn room(&self) -> usize {
        self.params
            .markers
            .map_or(usize::MAX, |i| i.room(self.offset))
    }

    fn fail(&mut self, error: IftRxError) -> IftRxError {
        self.failed = Some(error);
        error
    }

    /// The fast path for the common case: the IFT header, DDP header and
    /// header CRC all in `bytes` (which holds no marker). Checks exactly
    /// what the octet-by-octet path checks, in the same order; returns
    /// `None`, consuming nothing, when the headers are not all there or
    /// header_size is too large (the slow path then reports it).
    fn read_headers_at_once(
        &mut self,
        bytes: &[u8],
    ) -> Result<Option<(usize, Option<FramingEvent>)>, IftRxError> {
        let Ok(h) = IftHeaderView::new_checked(bytes) else {
            return Ok(None);
        };
        let header_len = usize::from(h.header_size());
        let crc_len = if self.params.header_crc.present() {
            CRC_LEN
        } else {
            0
        };
        let covered = IFT_HEADER_LEN + header_len;
        if header_len > MAX_HEADER_SIZE || bytes.len() < covered + crc_len {
            return Ok(None);
        }
        self.frame_offset = self.offset;
        self.ift_header.copy_from_slice(&bytes[..IFT_HEADER_LEN]);
        self.ddp_header[..header_len].copy_from_slice(&bytes[IFT_HEADER_LEN..covered]);
        self.header_len = header_len;
        self.previous_payload_len = self.payload_len;
        self.payload_len = usize::from(h.payload_size());
        if self.params.header_crc == RxCrc::Checked {
            let f = &bytes[covered..covered + CRC_LEN];
            let received = crc::from_wire([f[0], f[1], f[2], f[3]]);
            let computed = crc::crc32c(&bytes[..covered]);
            if received != computed {
                return Err(self.fail(IftRxError::HeaderCrc {
                    frame_offset: self.frame_offset,
                    computed,
                    received,
                }));
            }
        }
        Ok(Some((covered + crc_len, Some(self.header_verified()?))))
    }

    fn read_ift_header(
        &mut self,
        got: u8,
        bytes: &[u8],
    ) -> Result<(usize, Option<FramingEvent>), IftRxError> {
        let got = usize::from(got);
        if got == 0 {
            self.frame_offset = self.offset;
            self.crc = Crc32c::new();
        }
        let n = (IFT_HEADER_LEN - got).min(bytes.len());
        self.ift_header[got..got + n].copy_from_slice(&bytes[..n]);
        self.crc.update(&bytes[..n]);
        let got = got + n;
        // Refuse an oversized header as soon as its size is known, before
        // buffering any of it.
        if got >= 2 {
            let header_size = u16::from_be_bytes([self.ift_header[0], self.ift_header[1]]);
            if usize::from(header_size) > MAX_HEADER_SIZE {
                return Err(self.fail(IftRxError::HeaderTooLong {
                    frame_offset: self.frame_offset,
                    header_size,
                    max: MAX_HEADER_SIZE,
                }));
            }
        }
        if got < IFT_HEADER_LEN {
            self.field = Field::IftHeader { got: got as u8 };
            return Ok((n, None));
        }
        let h = IftHeaderView::new_unchecked(&self.ift_header);
        self.header_len = usize::from(h.header_size());
        self.previous_payload_len = self.payload_len;
        self.payload_len = usize::from(h.payload_size());
        self.field = Field::DdpHeader { got: 0 };
        if self.header_len == 0 {
            return Ok((n, self.after_ddp_header()?));
        }
        Ok((n, None))
    }

    fn read_ddp_header(
        &mut self,
        got: usize,
        bytes: &[u8],
    ) -> Result<(usize, Option<FramingEvent>), IftRxError> {
        let n = (self.header_len - got).min(bytes.len());
        self.ddp_header[got..got + n].copy_from_slice(&bytes[..n]);
        self.crc.update(&bytes[..n]);
        if got + n < self.header_len {
            self.field = Field::DdpHeader { got: got + n };
            return Ok((n, None));
        }
        Ok((n, self.after_ddp_header()?))
    }

    fn after_ddp_header(&mut self) -> Result<Option<FramingEvent>, IftRxError> {
        if self.params.header_crc.present() {
            self.field = Field::HeaderCrc { got: 0 };
            return Ok(None);
        }
        self.header_verified().map(Some)
    }

    fn read_header_crc(
        &mut self,
        got: u8,
        bytes: &[u8],
    ) -> Result<(usize, Option<FramingEvent>), IftRxError> {
        let n = self.read_crc_field(got, bytes);
        if usize::from(got) + n < CRC_LEN {
            self.field = Field::HeaderCrc { got: got + n as u8 };
            return Ok((n, None));
        }
        if self.params.header_crc == RxCrc::Checked {
            let received = crc::from_wire(self.crc_field);
            let computed = self.crc.value();
            if received != computed {
                return Err(self.fail(IftRxError::HeaderCrc {
                    frame_offset: self.frame_offset,
                    computed,
                    received,
                }));
            }
        }
        Ok((n, Some(self.header_verified()?)))
    }

    /// The headers passed the header CRC (if any): check the VTag, then
    /// begin the payload. The VTag is checked after the CRC so that a VTag
    /// damaged in transit is reported as the CRC error it is.
    //= draft-williams-iwarp-ift-01#4.2
    //# If not set, the receiver MUST NOT do speculative placement.
    fn header_verified(&mut self) -> Result<FramingEvent, IftRxError> {
        let found = IftHeaderView::new_unchecked(&self.ift_header).vtag();
        if found != self.params.vtag {
            return Err(self.fail(IftRxError::VTag {
                frame_offset: self.frame_offset,
                expected: self.params.vtag,
                found,
            }));
        }
        self.crc = Crc32c::new();
        self.field = Field::Payload {
            remaining: self.payload_len,
        };
        if self.payload_len == 0 {
            self.after_payload();
        }
        Ok(FramingEvent::Begin {
            header_len: self.header_len,
            payload_len: self.payload_len,
        })
    }

    /// Records payload octets received: the checks and the position, not
    /// the CRC (`push_payload` and `fold_placed` fold).
    fn advance_payload(&mut self, bytes: &[u8]) -> Result<(), IftRxError> {
        let Some(remaining) = payload_due(self, bytes.len())? else {
            return Ok(());
        };
        self.offset += bytes.len() as u64;
        let remaining = remaining - bytes.len();
        self.field = Field::Payload { remaining };
        if remaining == 0 {
            self.after_payload();
        }
        Ok(())
    }

    fn after_payload(&mut self) {
        self.field = if self.params.payload_crc.present() {
            Field::PayloadCrc { got: 0 }
        } else {
            Field::Complete
        };
    }

    fn read_payload_crc(
        &mut self,
        got: u8,
        bytes: &[u8],
    ) -> Result<(usize, Option<FramingEvent>), IftRxError> {
        let n = self.read_crc_field(got, bytes);
        if usize::from(got) + n < CRC_LEN {
            self.field = Field::PayloadCrc { got: got + n as u8 };
            return Ok((n, None));
        }
        if self.params.payload_crc == RxCrc::Checked {
            let received = crc::from_wire(self.crc_field);
            let computed = self.crc.value();
            if received != computed {
                return Err(self.fail(IftRxError::PayloadCrc {
                    frame_offset: self.frame_offset,
                    computed,
                    received,
                }));
            }
        }
        self.field = Field::Complete;
        // End is reported by the next push_framing call's first step.
        Ok((n, None))
    }

    /// Copies CRC field octets; returns how many.
    fn read_crc_field(&mut self, got: u8, bytes: &[u8]) -> usize {
        let got = usize::from(got);
        let n = (CRC_LEN - got).min(bytes.len());
        self.crc_field[got..got + n].copy_from_slice(&bytes[..n]);
        n
    }

    fn check_marker(&mut self, buf: [u8; MARKER_LEN]) -> Result<(), IftRxError> {
        let marker_offset = self.offset - MARKER_LEN as u64;
        let expected = if self.field == (Field::IftHeader { got: 0 }) {
            0
        } else {
            marker::frame_ptr(marker_offset, self.frame_offset)
        };
        let found = marker::decode(buf);
        if found != expected {
            return Err(self.fail(IftRxError::Marker {
                marker_offset,
                expected,
                found,
            }));
        }
        Ok(())
    }
}

impl Deframer for IftReceiver {
    type Error = IftRxError;

    fn next(&self) -> Next {
        if self.failed.is_some() {
            return Next::Failed;
        }
        match self.field {
            Field::Payload { remaining } if self.marker.is_none() && !self.marker_due() => {
                Next::Payload {
                    run: remaining.min(self.room()),
                    remaining,
                }
            }
            _ => Next::Framing,
        }
    }

    fn push_framing(&mut self, input: &[u8]) -> Result<(usize, Option<FramingEvent>), IftRxError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut used = 0;
        loop {
            if self.field == Field::Complete {
                self.frames += 1;
                self.field = Field::IftHeader { got: 0 };
                return Ok((used, Some(FramingEvent::End)));
            }
            if used == input.len() {
                return Ok((used, None));
            }
            // A marker can fall anywhere; it is read before the field it
            // interrupts continues, and is covered by no CRC.
            if let Some((got, mut buf)) = self.marker.take() {
                let got = usize::from(got);
                let n = (MARKER_LEN - got).min(input.len() - used);
                buf[got..got + n].copy_from_slice(&input[used..used + n]);
                used += n;
                self.offset += n as u64;
                if got + n < MARKER_LEN {
                    self.marker = Some(((got + n) as u8, buf));
                } else {
                    self.check_marker(buf)?;
                }
                continue;
            }
            if self.marker_due() {
                self.marker = Some((0, [0; MARKER_LEN]));
                continue;
            }
            let avail = (input.len() - used).min(self.room());
            let bytes = &input[used..used + avail];
            let (n, event) = match self.field {
                Field::IftHeader { got: 0 } => match self.read_headers_at_once(bytes)? {
                    Some(done) => done,
                    None => self.read_ift_header(0, bytes)?,
                },
                Field::IftHeader { got } => self.read_ift_header(got, bytes)?,
                Field::DdpHeader { got } => self.read_ddp_header(got, bytes)?,
                Field::HeaderCrc { got } => self.read_header_crc(got, bytes)?,
                Field::Payload { .. } => return Ok((used, None)),
                Field::PayloadCrc { got } => self.read_payload_crc(got, bytes)?,
                Field::Complete => (0, None),
            };
            used += n;
            self.offset += n as u64;
            if event.is_some() {
                return Ok((used, event));
            }
        }
    }

    fn push_payload(&mut self, bytes: &[u8]) -> Result<(), IftRxError> {
        self.advance_payload(bytes)?;
        self.fold_placed(bytes);
        Ok(())
    }

    /// IFT's markers are outside its payload CRC (`ift::marker`), so the
    /// payload placed around them can be folded in one piece.
    fn push_placed(&mut self, bytes: &[u8]) -> Result<(), IftRxError> {
        self.advance_payload(bytes)
    }

    fn fold_placed(&mut self, placed: &[u8]) {
        if self.params.payload_crc == RxCrc::Checked {
            self.crc.update(placed);
        }
    }

    /// In one step when the spans start inside the payload, with no
    /// marker under way, and every marker says what it must (its FramePtr
    /// checked by its offset); the CRC is left to
    /// [`Deframer::fold_placed`], as for `push_placed`. Anything else goes
    /// span by span, which reports any error as it always has.
    fn push_spans(&mut self, wire: &[u8], spans: &[Span]) -> Result<(), IftRxError> {
        let sound = match self.field {
            Field::Payload { remaining } if self.failed.is_none() && self.marker.is_none() => {
                let frame = self.frame_offset;
                walk_spans(
                    self.offset,
                    wire,
                    spans,
                    remaining,
                    self.params.markers,
                    |at, m| marker::decode(m) == marker::frame_ptr(at, frame),
                )
            }
            _ => None,
        };
        let Some((end, remaining)) = sound else {
            return push_spans_one_by_one(self, wire, spans);
        };
        self.offset = end;
        self.field = Field::Payload { remaining };
        if remaining == 0 {
            self.after_payload();
        }
        Ok(())
    }

    fn header(&self) -> &[u8] {
        match self.field {
            Field::Payload { .. } | Field::PayloadCrc { .. } | Field::Complete => {
                &self.ddp_header[..self.header_len]
            }
            _ => &[],
        }
    }

    fn layout(&self, max_payload: usize) -> Layout {
        let remaining = match (self.failed, self.field, self.marker) {
            (None, Field::Payload { remaining }, None) => remaining,
            _ => 0,
        };
        Layout::new(self.offset, remaining.min(max_payload), self.params.markers)
    }

    fn payload_remaining(&self) -> usize {
        match self.field {
            Field::Payload { remaining } => remaining,
            _ => 0,
        }
    }

    fn at_boundary(&self) -> bool {
        self.failed.is_none()
            && self.field == (Field::IftHeader { got: 0 })
            && self.marker.is_none()
    }

    fn offset(&self) -> u64 {
        self.offset
    }

    fn pdus_received(&self) -> u64 {
        self.frames
    }

    fn payload_len(&self) -> usize {
        self.payload_len
    }

    fn previous_payload_len(&self) -> usize {
        self.previous_payload_len
    }

    fn error(&self) -> Option<IftRxError> {
        self.failed
    }
}
