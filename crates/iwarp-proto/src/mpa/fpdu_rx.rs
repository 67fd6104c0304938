//! FPDU reception: an incremental deframer for an in-order stream.
//!
//! The receiver is fed the stream octets of full operation in chunks of any
//! size. It strips markers and checks each one's FPDUPTR against the FPDU
//! start it knows from the lengths (RFC 5044 §8 code 3), checks the CRC
//! when it is in use (code 2), and hands the ULPDU octets to the layer
//! above. After an error it passes nothing more (RFC 5044 §8).
//!
//! It is driven through [`Deframer`]: the one [`crate::framing::receive`]
//! loop into a sink, or the step API for direct placement. MPA knows
//! nothing of DDP's header: a ULPDU begins with no header octets of its
//! own ([`FramingEvent::Begin`] with `header_len` 0) and all of it comes as
//! payload.
//!
//! The out-of-order receive path ([`crate::ooo`]: TCP segments tagged with
//! sequence numbers, FPDUs located through markers, draft-ietf-rddp-mpa-01
//! §3.1.2 and §5.4) sits beside this one and is built of it: it checks each
//! FPDU it finds ahead of a hole with a fresh receiver started at the
//! FPDU's first octet ([`FpduReceiver::at_offset`]), measures it with
//! [`FpduReceiver::next_fpdu_len`], and runs this receiver itself for
//! everything it passes on in order.

mod verified;

pub use verified::{Placement, MAX_FPDU_WIRE_LEN};

use super::error::MpaError;
use super::fpdu::{pad_len, CRC_LEN, HEADER_LEN};
use super::marker::{self, INTERVAL};
use super::FramingParams;
use crate::framing::crc::{self, Crc32c};
use crate::framing::{
    payload_due, push_spans_one_by_one, walk_spans, Deframer, FeedError, FramingEvent, Layout,
    Next, Span, UlpduSink, MARKER_LEN,
};

/// Where the receiver is inside the current FPDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// `got` octets of ULPDU_Length read so far.
    Header { got: u8 },
    /// ULPDU octets still to come.
    Ulpdu { remaining: usize },
    /// Pad octets still to come.
    Pad { remaining: u8 },
    /// `got` octets of the CRC field read so far.
    Crc { got: u8 },
}

/// Deframes one half-connection's FPDUs, in stream order.
#[derive(Debug, Clone)]
pub struct FpduReceiver {
    crc_enabled: bool,
    markers: bool,
    /// Stream offset of the next octet expected.
    offset: u64,
    field: Field,
    /// Octets of a marker being read, if one is under way.
    marker: Option<(u8, [u8; MARKER_LEN])>,
    /// Stream offset of the current FPDU's first octet (its leading marker
    /// if it has one) and of its ULPDU_Length field.
    fpdu_offset: u64,
    header_offset: u64,
    header: [u8; HEADER_LEN],
    ulpdu_len: usize,
    previous_ulpdu_len: usize,
    crc_field: [u8; CRC_LEN],
    crc: Crc32c,
    /// The CRC of an FPDU checked whole, computed in one call over it
    /// before its fields are walked; while set, the walk folds nothing in
    /// (with markers, a call per 512-octet run cost more than the CRC).
    whole_crc: Option<u32>,
    failed: Option<MpaError>,
    fpdus: u64,
    placement: Placement,
}

impl FpduReceiver {
    /// A receiver at the start of full operation.
    pub fn new(params: FramingParams) -> Self {
        Self::at_offset(params, 0)
    }

    /// A receiver whose next octet is at stream offset `offset` (see
    /// [`super::FpduTransmitter::at_offset`]); an FPDU must begin there.
    pub fn at_offset(params: FramingParams, offset: u64) -> Self {
        Self {
            crc_enabled: params.crc,
            markers: params.receive_markers,
            offset,
            field: Field::Header { got: 0 },
            marker: None,
            fpdu_offset: offset,
            header_offset: offset,
            header: [0; HEADER_LEN],
            ulpdu_len: 0,
            previous_ulpdu_len: 0,
            crc_field: [0; CRC_LEN],
            crc: Crc32c::new(),
            whole_crc: None,
            failed: None,
            fpdus: 0,
            placement: Placement::Direct,
        }
    }

    /// Whether a marker starts at the next octet.
    fn marker_due(&self) -> bool {
        self.markers && self.marker.is_none() && INTERVAL.is_marker_at(self.offset)
    }

    //= rfc5044#8
    //# Once MPA delivers an error of any type, it MUST NOT pass or deliver any additional FPDUs
    //# on that half connection.
    fn fail(&mut self, error: MpaError) -> MpaError {
        self.failed = Some(error);
        error
    }

    /// Folds octets the CRC covers into it, unless it is not checked or
    /// was computed whole.
    #[inline]
    fn fold(&mut self, bytes: &[u8]) {
        if self.crc_enabled && self.whole_crc.is_none() {
            self.crc.update(bytes);
        }
    }

    /// A new FPDU starts at the current offset.
    fn start_fpdu(&mut self) {
        self.fpdu_offset = self.offset;
        self.crc = Crc32c::new();
    }

    /// A new FPDU starts with its header here, unless a leading marker
    /// already opened it.
    fn start_fpdu_unless_marked(&mut self) {
        let opened_by_marker = self.markers
            && self.fpdu_offset + MARKER_LEN as u64 == self.offset
            && INTERVAL.is_marker_at(self.fpdu_offset);
        if !opened_by_marker {
            self.start_fpdu();
        }
    }

    fn after_ulpdu(&mut self) {
        let pad = pad_len(self.ulpdu_len) as u8;
        self.field = if pad > 0 {
            Field::Pad { remaining: pad }
        } else {
            Field::Crc { got: 0 }
        };
    }

    //= rfc5044#8
    //# If the FPDU start determined from previous ULPDU Length fields does not match with the
    //# MPA Marker position, MPA SHOULD deliver an error to DDP.
    //= rfc5044#8
    //# the check SHOULD be made when a gap creating an out-of-order sequence is closed and any
    //# time a Marker points to an already identified FPDU.
    fn check_marker(&mut self, buf: [u8; MARKER_LEN]) -> Result<(), MpaError> {
        let marker_offset = self.offset - MARKER_LEN as u64;
        let between_fpdus = self.field == (Field::Header { got: 0 });
        let expected = if between_fpdus {
            0
        } else {
            marker::fpdu_ptr(marker_offset, self.header_offset)
        };
        let found = marker::decode(buf);
        // Markers before the CRC field are covered by the CRC; one inside
        // the CRC field (possible only at offsets MPA never uses) is not.
        if !matches!(self.field, Field::Crc { got } if got > 0) {
            self.fold(&buf);
        }
        if !marker::fpdu_ptr_matches(found, expected) {
            return Err(self.fail(MpaError::Marker {
                marker_offset,
                expected,
                found,
            }));
        }
        Ok(())
    }

    //= rfc5044#6
    //# To do this, the receiver MUST: * locate the start of the FPDU unambiguously, * verify
    //# its CRC (if CRC checking is enabled).
    //= rfc5044#7.1.1
    //# When CRCs are not in use, the CRC field MUST be considered valid for FPDU checking
    //# regardless of its contents.
    //= draft-ietf-rddp-mpa-01#4
    //# When CRCs are not enabled, this field is still present, may contain any value, and MUST
    //# NOT be checked.
    //= draft-ietf-rddp-mpa-01#5.2
    //# When an FPDU is received, and CRC checking is enabled, the receiver MUST first perform
    //# the following: 1) Calculate the CRC of the incoming FPDU in the same fashion as defined
    //# above.
    //= draft-ietf-rddp-mpa-01#5.2
    //# If not, the receiver MUST treat the FPDU as an invalid FPDU.
    fn finish_fpdu(&mut self) -> Result<(), MpaError> {
        if self.crc_enabled {
            let received = crc::from_wire(self.crc_field);
            let computed = self.whole_crc.take().unwrap_or_else(|| self.crc.value());
            if received != computed {
                return Err(self.fail(MpaError::Crc {
                    fpdu_offset: self.fpdu_offset,
                    computed,
                    received,
                }));
            }
        }
        self.fpdus += 1;
        self.field = Field::Header { got: 0 };
        self.crc = Crc32c::new();
        Ok(())
    }
}

impl Deframer for FpduReceiver {
    type Error = MpaError;

    fn next(&self) -> Next {
        if self.failed.is_some() {
            return Next::Failed;
        }
        match self.field {
            Field::Ulpdu { remaining } if remaining > 0 && self.marker.is_none() => {
                if self.marker_due() {
                    return Next::Framing;
                }
                let run = if self.markers {
                    remaining.min(INTERVAL.room(self.offset))
                } else {
                    remaining
                };
                Next::Payload { run, remaining }
            }
            _ => Next::Framing,
        }
    }

    fn push_framing(&mut self, input: &[u8]) -> Result<(usize, Option<FramingEvent>), MpaError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut used = 0;
        while used < input.len() {
            // A marker can fall anywhere; it is read before the field it
            // interrupts continues.
            if let Some((got, mut buf)) = self.marker.take() {
                let n = (MARKER_LEN - got as usize).min(input.len() - used);
                buf[got as usize..got as usize + n].copy_from_slice(&input[used..used + n]);
                used += n;
                self.offset += n as u64;
                let got = got + n as u8;
                if (got as usize) < MARKER_LEN {
                    self.marker = Some((got, buf));
                    continue;
                }
                self.check_marker(buf)?;
                continue;
            }
            if self.marker_due() {
                if self.field == (Field::Header { got: 0 }) {
                    // Between FPDUs: this marker opens the next FPDU.
                    self.start_fpdu();
                }
                self.marker = Some((0, [0; MARKER_LEN]));
                continue;
            }
            let room = if self.markers {
                INTERVAL.room(self.offset)
            } else {
                usize::MAX
            };
            let avail = (input.len() - used).min(room);
            match self.field {
                Field::Header { got } => {
                    if got == 0 {
                        self.start_fpdu_unless_marked();
                        self.header_offset = self.offset;
                    }
                    let n = (HEADER_LEN - got as usize).min(avail);
                    let bytes = &input[used..used + n];
                    self.header[got as usize..got as usize + n].copy_from_slice(bytes);
                    self.fold(bytes);
                    used += n;
                    self.offset += n as u64;
                    let got = got + n as u8;
                    if (got as usize) < HEADER_LEN {
                        self.field = Field::Header { got };
                        continue;
                    }
                    self.previous_ulpdu_len = self.ulpdu_len;
                    //= rfc5044#5.1
                    //# MPA receivers are REQUIRED to be able to operate correctly even if
                    //# alignment is lost
                    //= rfc5044#5.2
                    //# The receivers MUST identify FPDU boundaries by using the ULPDU_LENGTH
                    //# field
                    //= rfc5044#6
                    //# In an ordered TCP stream, the ULPDU Length field in the current FPDU
                    //# when FPDU has a valid CRC, can be used to identify the beginning of the
                    //# next FPDU.
                    //= draft-ietf-rddp-mpa-01#5.4.1
                    //# However, MPA receivers MUST NOT depend on FPDU Alignment on TCP segment
                    //# boundaries.
                    self.ulpdu_len = u16::from_be_bytes(self.header) as usize;
                    self.field = Field::Ulpdu {
                        remaining: self.ulpdu_len,
                    };
                    if self.ulpdu_len == 0 {
                        self.after_ulpdu();
                    }
                    return Ok((
                        used,
                        Some(FramingEvent::Begin {
                            header_len: 0,
                            //= draft-ietf-rddp-mpa-01#3.2
                            //# On receive, MPA MUST pass each ULPDU with its length to DDP when
                            //# it has been validated.
                            //= draft-ietf-rddp-mpa-01#5.1
                            //# MPA Receivers MUST preserve ULPDU boundaries when passing data
                            //# to DDP.
                            //= draft-ietf-rddp-mpa-01#5.1
                            //# MPA Receivers MUST pass the ULPDU data and the ULPDU Length to
                            //# DDP and not the markers, headers, and CRC.
                            //= rfc5041#3
                            //# The LLP MUST preserve DDP Segment and Message boundaries at the
                            //# Data Sink.
                            //= rfc5041#3
                            //# On receive, the LLP MUST provide the length of the DDP Segment
                            //# received.
                            //= rfc5041#3
                            //# The LLP MUST NOT pass a duplicate DDP Segment to the DDP Layer
                            payload_len: self.ulpdu_len,
                        }),
                    ));
                }
                Field::Ulpdu { .. } => return Ok((used, None)),
                Field::Pad { remaining } => {
                    let n = (remaining as usize).min(avail);
                    self.fold(&input[used..used + n]);
                    used += n;
                    self.offset += n as u64;
                    let remaining = remaining - n as u8;
                    self.field = if remaining == 0 {
                        Field::Crc { got: 0 }
                    } else {
                        Field::Pad { remaining }
                    };
                }
                Field::Crc { got } => {
                    let n = (CRC_LEN - got as usize).min(avail);
                    self.crc_field[got as usize..got as usize + n]
                        .copy_from_slice(&input[used..used + n]);
                    used += n;
                    self.offset += n as u64;
                    let got = got + n as u8;
                    if (got as usize) < CRC_LEN {
                        self.field = Field::Crc { got };
                        continue;
                    }
                    self.finish_fpdu()?;
                    return Ok((used, Some(FramingEvent::End)));
                }
            }
        }
        Ok((used, None))
    }

    fn push_payload(&mut self, bytes: &[u8]) -> Result<(), MpaError> {
        let Some(remaining) = payload_due(self, bytes.len())? else {
            return Ok(());
        };
        self.fold(bytes);
        self.offset += bytes.len() as u64;
        let remaining = remaining - bytes.len();
        self.field = Field::Ulpdu { remaining };
        if remaining == 0 {
            self.after_ulpdu();
        }
        Ok(())
    }

    /// In one step when the spans start inside the ULPDU, with no marker
    /// under way, and every marker says what it must (its FPDUPTR checked
    /// by its offset), the CRC over `wire` in one call (MPA's covers its
    /// markers). Anything else goes span by span, which reports any error
    /// as it always has.
    fn push_spans(&mut self, wire: &[u8], spans: &[Span]) -> Result<(), MpaError> {
        let sound = match self.field {
            Field::Ulpdu { remaining } if self.failed.is_none() && self.marker.is_none() => {
                let header = self.header_offset;
                let markers = self.markers.then_some(INTERVAL);
                walk_spans(self.offset, wire, spans, remaining, markers, |at, m| {
                    marker::fpdu_ptr_matches(marker::decode(m), marker::fpdu_ptr(at, header))
                })
            }
            _ => None,
        };
        let Some((end, remaining)) = sound else {
            return push_spans_one_by_one(self, wire, spans);
        };
        self.fold(wire);
        self.offset = end;
        self.field = Field::Ulpdu { remaining };
        if remaining == 0 {
            self.after_ulpdu();
        }
        Ok(())
    }

    fn header(&self) -> &[u8] {
        &[]
    }

    fn layout(&self, max_payload: usize) -> Layout {
        let remaining = match (self.failed, self.field, self.marker) {
            (None, Field::Ulpdu { remaining }, None) => remaining,
            _ => 0,
        };
        Layout::new(
            self.offset,
            remaining.min(max_payload),
            self.markers.then_some(INTERVAL),
        )
    }

    fn payload_remaining(&self) -> usize {
        match self.field {
            Field::Ulpdu { remaining } => remaining,
            _ => 0,
        }
    }

    fn at_boundary(&self) -> bool {
        self.failed.is_none() && self.field == Field::Header { got: 0 } && self.marker.is_none()
    }

    fn offset(&self) -> u64 {
        self.offset
    }

    fn pdus_received(&self) -> u64 {
        self.fpdus
    }

    fn payload_len(&self) -> usize {
        self.ulpdu_len
    }

    fn previous_payload_len(&self) -> usize {
        self.previous_ulpdu_len
    }

    fn error(&self) -> Option<MpaError> {
        self.failed
    }

    /// The [`crate::framing::receive`] loop, or, with
    /// [`Placement::Verified`], whole FPDUs only, each checked before its
    /// ULPDU reaches the sink.
    fn receive<S: UlpduSink>(
        &mut self,
        input: &[u8],
        sink: &mut S,
    ) -> Result<usize, FeedError<MpaError, S::Error>> {
        match self.placement {
            Placement::Direct => crate::framing::receive(self, input, sink),
            Placement::Verified => self.receive_verified(input, sink),
        }
    }
}
