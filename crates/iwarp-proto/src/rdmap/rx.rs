//! The receive side of a queue pair: DDP segment checks (RFC 5041 §7.1),
//! placement, in-order delivery (§5.3, §5.4) and the RDMAP processing of
//! each message (RFC 5040 §5, §7).
//!
//! A ULPDU arrives as `ulpdu_begin`, pieces, `ulpdu_end`
//! ([`UlpduSink`]). The header is gathered from the first pieces and
//! checked as soon as it is complete; payload is then placed piece by
//! piece, each piece under the region lock, so an STag invalidated in the
//! middle of a segment stops placement at once. An error is held until
//! `ulpdu_end`: if the framing layer finds the ULPDU damaged instead, the
//! runtime reports that ([`QueuePair::handle_llp_error`]) and the held
//! error is dropped. Nothing is delivered before `ulpdu_end`.

use crate::ddp::header::header_len;
use crate::ddp::{
    DdpError, HeaderError, Segment, SegmentHeader, TaggedError, TaggedHeader, UntaggedError,
    UntaggedHeader, UNTAGGED_HEADER_LEN,
};
use crate::framing::UlpduSink;
use crate::memory::copy::copy_payload;
use crate::memory::{Access, AccessViolation, MemoryBuffer, RegionSlice, STag};

use super::error::{OperationError, ProtectionError, ProtocolError, RdmapError};
use super::opcode::{
    control_opcode, control_version, Opcode, QN_READ_REQUEST, QN_SEND, RDMAP_VERSION,
};
use super::queue_pair::{Culprit, QueuePair, ReadJob};
use super::read_request::{ReadRequest, READ_REQUEST_LEN};
use super::terminate::{TerminateMessage, TerminatedDdp, TERMINATE_MAX_LEN};
use super::work::{Completion, CompletionOpcode, CompletionStatus};

/// Where the payload of the current segment goes.
#[derive(Debug)]
enum Target {
    /// Nowhere: zero-length, or the segment is being discarded.
    None,
    /// Into a region, from offset `at` of the slice on.
    Region { slice: RegionSlice, at: usize },
    /// Into the inline buffer (Read Request, Terminate).
    Inline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Between ULPDUs.
    Idle,
    /// Gathering the DDP header.
    Header,
    /// Header checked; payload flows to the target.
    Payload,
    /// Stream stopped: everything is dropped silently (RFC 5041 §7.1).
    Stopped,
}

/// An error found in the current ULPDU, reported at its end.
#[derive(Debug, Clone, Copy)]
struct Pending {
    error: ProtocolError,
    /// Include the D copy (the header layout is known).
    copy_ddp: bool,
    culprit: Culprit,
}

/// A tagged message whose last segment has not arrived yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TaggedInProgress {
    opcode: Opcode,
    stag: STag,
    next_to: u64,
}

/// Receive state of a queue pair.
#[derive(Debug)]
pub(super) struct Rx {
    phase: Phase,
    ulpdu_len: usize,
    consumed: usize,
    hdr: [u8; UNTAGGED_HEADER_LEN],
    hdr_have: usize,
    header: Option<SegmentHeader>,
    opcode: Option<Opcode>,
    target: Target,
    inline: [u8; TERMINATE_MAX_LEN],
    inline_len: usize,
    pending: Option<Pending>,
    /// Next expected MSN per untagged queue (RFC 5041 §4.3: starts at 1);
    /// queue 2's is never checked (a Terminate ends the stream anyway).
    msn: [u32; 3],
    /// Octets of the current Send message placed so far.
    send_progress: u32,
    tagged: Option<TaggedInProgress>,
    /// The payload of the segment being delivered by
    /// [`QueuePair::deliver_placed`], placed ahead of delivery there, until
    /// the checks take it for their target.
    placed: Option<RegionSlice>,
}

impl Rx {
    pub(super) fn new() -> Self {
        Self {
            phase: Phase::Idle,
            ulpdu_len: 0,
            consumed: 0,
            hdr: [0; UNTAGGED_HEADER_LEN],
            hdr_have: 0,
            header: None,
            opcode: None,
            target: Target::None,
            inline: [0; TERMINATE_MAX_LEN],
            inline_len: 0,
            pending: None,
            msn: [1; 3],
            send_progress: 0,
            tagged: None,
            placed: None,
        }
    }

    //= rfc5041#7.1
    //# DDP MUST silently drop any subsequent incoming DDP Segments.
    pub(super) fn stop(&mut self) {
        self.phase = Phase::Stopped;
        self.target = Target::None;
        self.pending = None;
    }

    fn hdr_need(&self) -> usize {
        if self.hdr_have == 0 {
            1
        } else {
            header_len(self.hdr[0])
        }
    }
}

/// Where the next payload octets of the current segment go, for direct
/// placement: `len` octets at `offset` of `buffer`.
#[derive(Debug, Clone)]
pub struct PlacementTarget {
    /// The region's buffer.
    pub buffer: MemoryBuffer,
    /// Offset of the next octet in it.
    pub offset: usize,
    /// Octets of this segment still to place there.
    pub len: usize,
}

fn tagged_error(v: AccessViolation) -> ProtocolError {
    match v {
        AccessViolation::InvalidStag => DdpError::Tagged(TaggedError::InvalidStag).into(),
        AccessViolation::NotAssociated => DdpError::Tagged(TaggedError::NotAssociated).into(),
        AccessViolation::BaseBounds => DdpError::Tagged(TaggedError::BaseBounds).into(),
        AccessViolation::ToWrap => DdpError::Tagged(TaggedError::ToWrap).into(),
        // A region without the right to be written fails tagged check 2:
        //= rfc5041#7.1
        //# 2.  The STag has an associated buffer that allows Placement of
        //#     the payload.
        // and DDP's own numbers are the ones to report:
        //= rfc5041#7.2
        //# The following error numbers MUST be used when reporting errors to
        //# the ULP. They correspond to the checks enumerated in section 7.1.
        // The table has no access-rights code; invalid STag is the one that
        // fits (this STag is not valid for placement), and the one Linux
        // siw sends (siw_tagged_error). RDMAP's access-rights code (RFC
        // 5040) is for what RDMAP checks itself: a Read Request's source.
        AccessViolation::AccessRights => DdpError::Tagged(TaggedError::InvalidStag).into(),
    }
}

fn protection_error(v: AccessViolation) -> ProtocolError {
    let p = match v {
        AccessViolation::InvalidStag => ProtectionError::InvalidStag,
        AccessViolation::NotAssociated => ProtectionError::NotAssociated,
        AccessViolation::BaseBounds => ProtectionError::BaseBounds,
        AccessViolation::ToWrap => ProtectionError::ToWrap,
        AccessViolation::AccessRights => ProtectionError::AccessRights,
    };
    RdmapError::RemoteProtection(p).into()
}

/// The work request a segment was checked against at its header is gone
/// at its end: the queues were flushed in between. Receiving stops before
/// any flush, so only a caller that breaks the sink contract gets here;
/// it gets an error, not a panic.
const WORK_GONE: Pending = Pending {
    error: ProtocolError::Ddp(DdpError::LocalCatastrophic),
    copy_ddp: false,
    culprit: Culprit::None,
};

fn untagged(e: UntaggedError) -> ProtocolError {
    DdpError::Untagged(e).into()
}

fn operation(e: OperationError) -> ProtocolError {
    RdmapError::RemoteOperation(e).into()
}

fn held(error: ProtocolError, culprit: Culprit) -> Pending {
    Pending {
        error,
        copy_ddp: true,
        culprit,
    }
}

/// RFC 5040 §4.2 and §4.3 for a parsed DDP header: RV is 1, and the
/// opcode is defined and uses the buffer model it is defined for.
//= rfc5040#4.2
//# RDMA Version (RV): This field MUST be set to one to indicate the version of the
//# specification described in this document.
//= rfc5040#4.3
//# Opcodes 1000b to 1111b are reserved; a reserved opcode MUST be treated as an error.
fn rdmap_opcode(header: &SegmentHeader) -> Result<Opcode, Pending> {
    let control = header.rsvd_ulp();
    if control_version(control) != RDMAP_VERSION {
        return Err(held(
            operation(OperationError::InvalidVersion),
            Culprit::None,
        ));
    }
    let tagged = matches!(header, SegmentHeader::Tagged(_));
    match Opcode::from_bits(control_opcode(control)) {
        Some(op) if op.is_tagged() == tagged => Ok(op),
        _ => Err(held(
            operation(OperationError::UnexpectedOpcode),
            Culprit::None,
        )),
    }
}

/// Untagged check 3 (RFC 5041 §7.1) against a buffer of `cap` octets: a
/// segment with payload starts inside it, an empty one at most at its end.
pub(super) const fn mo_in_buffer(cap: usize, mo: usize, len: usize) -> bool {
    !((len > 0 && mo >= cap) || mo > cap)
}

/// Untagged check 4 (RFC 5041 §7.1): the segment ends inside the buffer.
pub(super) const fn fits_buffer(cap: usize, mo: usize, len: usize) -> bool {
    mo + len <= cap
}

/// The DDP header and RDMAP opcode of a ULPDU's first octets, if they
/// pass the checks [`QueuePair`] makes of them first (DV, RV, opcode):
/// for the out-of-order path, which must not act on one that does not.
pub(super) fn parse_opcode(octets: &[u8]) -> Option<(SegmentHeader, Opcode)> {
    let header = SegmentHeader::parse(&Segment::new_checked(octets).ok()?).ok()?;
    let opcode = rdmap_opcode(&header).ok()?;
    Some((header, opcode))
}

impl QueuePair {
    /// Tagged checks 1 to 5 (RFC 5041 §7.1) against the memory table: the
    /// region `len` octets at the header's STag and TO go to.
    pub(super) fn tagged_region(
        &self,
        h: &TaggedHeader,
        len: usize,
    ) -> Result<RegionSlice, AccessViolation> {
        self.table.check_remote(
            h.stag,
            self.cfg.pd,
            self.cfg.stream,
            Access::REMOTE_WRITE,
            h.to,
            len as u64,
        )
    }

    /// The MSN the next message of untagged queue `qn` carries, in order.
    pub(super) fn expected_msn(&self, qn: u32) -> Option<u32> {
        self.rx.msn.get(qn as usize).copied()
    }

    /// True while received ULPDUs are processed.
    pub fn is_receiving(&self) -> bool {
        self.rx.phase != Phase::Stopped
    }

    fn hold(&mut self, p: Pending) {
        if self.rx.pending.is_none() {
            self.rx.pending = Some(p);
        }
        self.rx.target = match self.rx.opcode {
            // Keep gathering a Read Request for the Terminate's R copy.
            Some(Opcode::ReadRequest) if self.rx.header.is_some() => Target::Inline,
            _ => Target::None,
        };
    }

    /// The header is complete: check it and decide where the payload goes.
    fn on_header(&mut self) {
        // RFC 5041 §4.1: DV must be 1. Checked first, because the rest of
        // the header's layout depends on it; no D copy for the same reason.
        let header =
            match SegmentHeader::parse(&Segment::new_unchecked(&self.rx.hdr[..self.rx.hdr_have])) {
                Ok(header) => header,
                Err(e) => {
                    let error = match e {
                        HeaderError::Version(e) => e,
                        // The whole header was gathered: not reached.
                        HeaderError::Truncated(_) => DdpError::LocalCatastrophic,
                    };
                    self.hold(Pending {
                        error: error.into(),
                        copy_ddp: false,
                        culprit: Culprit::None,
                    });
                    return;
                }
            };
        //= rfc5041#4.1
        //# If set to one, the ULP Payload carried in this DDP Segment MUST be Placed into a
        //# Tagged Buffer.
        //= rfc5041#4.1
        //# If set to zero, the ULP Payload carried in this DDP Segment MUST be Placed into an
        //# Untagged Buffer.
        //= rfc5041#4.2
        //# At the Data Sink, DDP MUST provide the RsvdULP field to the ULP when the DDP Message
        //# is delivered.
        self.rx.header = Some(header);
        let payload_len = self.rx.ulpdu_len - header.buffer_len();
        let opcode = match rdmap_opcode(&header) {
            Ok(op) => op,
            Err(p) => return self.hold(p),
        };
        self.rx.opcode = Some(opcode);
        if opcode == Opcode::Terminate {
            // RFC 5040 §4.8 lays a Terminate out as the one last segment
            // of a message on queue 2, MO 0, the next MSN, its payload at
            // most a control word and header copies. One that breaks the
            // layout still ends the stream: the peer has stopped, and a
            // Terminate answering a Terminate helps no one (Linux siw,
            // siw_proc_terminate, drops such a stream as well). So none of
            // the untagged checks apply; what fits the layout is kept.
            self.rx.target = Target::Inline;
            return;
        }
        let checked = match header {
            SegmentHeader::Tagged(h) => self.check_tagged(opcode, &h, payload_len),
            SegmentHeader::Untagged(h) => self.check_untagged(opcode, &h, payload_len),
        };
        match checked {
            Ok(target) => self.rx.target = target,
            Err(p) => self.hold(p),
        }
    }

    /// RFC 5041 §7.1, tagged checks, for an RDMA Write or Read Response.
    //= rfc5041#4.2
    //# The STag MUST be valid for this DDP Stream.
    //= rfc5041#4.2
    //# At the Data Sink, the DDP MUST provide the STag field when the ULP Message is delivered.
    //= rfc5041#7.1
    //# For non-zero length Tagged DDP Segments, the segment MUST be validated before Placement
    //# by verifying: 1.
    //= rfc5040#5.5
    //# The Data Sink MUST treat a Tagged segment that does not continue the Tagged message in
    //# progress as an error.
    //= rfc5040#5.2
    //# An RDMA Read Response MUST match the RDMA Read Request outstanding at the head of the
    //# queue: its sink STag, its Tagged Offset and no more than its size.
    fn check_tagged(
        &mut self,
        opcode: Opcode,
        h: &TaggedHeader,
        len: usize,
    ) -> Result<Target, Pending> {
        // Segments of one tagged message follow each other (RFC 5040 §5.5:
        // a tagged message is not interleaved with another tagged one);
        // each carries the same STag and the next TO (RFC 5041 §5.2).
        let expect = match opcode {
            Opcode::ReadResponse => {
                let Some(head) = self.orq.front() else {
                    // A Read Response with no Read outstanding.
                    return Err(held(
                        operation(OperationError::UnexpectedOpcode),
                        Culprit::None,
                    ));
                };
                Some(TaggedInProgress {
                    opcode,
                    stag: head.sink_stag,
                    next_to: head.sink_to.wrapping_add(head.received as u64),
                })
            }
            _ => self.rx.tagged,
        };
        let culprit = |s| {
            if opcode == Opcode::ReadResponse {
                Culprit::Read(s)
            } else {
                Culprit::None
            }
        };
        let fatal = culprit(CompletionStatus::FatalError);
        if let Some(t) = self.rx.tagged {
            if t.opcode != opcode {
                return Err(held(operation(OperationError::UnexpectedOpcode), fatal));
            }
        }
        if opcode == Opcode::ReadResponse {
            let head = self.orq.front().expect("checked above");
            let total = head.received as u64 + len as u64;
            // More than was asked for would write past the sink. Less,
            // with L set, is a check DDP may leave out:
            //= rfc5041#5.2
            //# For either Untagged or Tagged DDP Messages, the Data Sink is not
            //# required to verify that the entire ULP Message has been received.
            // Not required, so allowed, and without it the Read would
            // complete as a success over octets never written. Both are
            // base-or-bounds errors, as Linux siw reports them
            // (siw_rresp_check_ntoh).
            if total > head.len as u64 || (h.last && total != head.len as u64) {
                return Err(held(
                    DdpError::Tagged(TaggedError::BaseBounds).into(),
                    fatal,
                ));
            }
        }
        if len == 0 {
            //= rfc5041#5.2
            //# Only the DDP Control and RsvdULP Fields MUST be valid for a zero length Tagged
            //# DDP Segment.
            //= rfc5041#5.2
            //# The STag and TO fields MUST NOT be checked for a zero-length Tagged DDP Message.
            // RFC 5041 §5.2: STag and TO of a zero-length segment are not
            // checked.
            return Ok(Target::None);
        }
        if let Some(t) = expect {
            if h.stag != t.stag {
                return Err(held(
                    DdpError::Tagged(TaggedError::InvalidStag).into(),
                    fatal,
                ));
            }
            if h.to != t.next_to {
                return Err(held(
                    DdpError::Tagged(TaggedError::BaseBounds).into(),
                    fatal,
                ));
            }
        }
        match self.tagged_target(h, len) {
            Ok(slice) => Ok(Target::Region { slice, at: 0 }),
            Err(v) => Err(held(
                tagged_error(v),
                culprit(CompletionStatus::LocalProtectionError),
            )),
        }
    }

    /// Tagged checks 1 to 5 of the segment at hand: the memory table's
    /// verdict, or for a segment placed ahead of delivery the verdict it
    /// had when it was placed, as long as its STag is still valid. Nothing
    /// the checks read changes while it is: a registration's domain,
    /// stream, rights and bounds are fixed, and the table maps its STag to
    /// it until deregistration, which invalidates it. Once invalid, the
    /// table is asked again and answers as it would in order.
    fn tagged_target(
        &mut self,
        h: &TaggedHeader,
        len: usize,
    ) -> Result<RegionSlice, AccessViolation> {
        match self.rx.placed.take() {
            Some(p) if p.stag() == h.stag && p.len() == len && p.is_valid() => Ok(p),
            p => {
                self.rx.placed = p;
                self.tagged_region(h, len)
            }
        }
    }

    /// RFC 5041 §7.1, untagged checks, for Sends, Read Requests and
    /// Terminates.
    //= rfc5041#7.1
    //# For non-zero length Untagged DDP Segments, the DDP Segment MUST be validated before
    //# Placement by verifying: 1.
    //= rfc5041#7.1
    //# Implementers note: DDP implementations SHOULD consider lack of an associated buffer as a
    //# system fault.
    //= rfc5041#7.1
    //# DDP implementations SHOULD NOT permit system faults to occur repeatedly or frequently.
    fn check_untagged(
        &mut self,
        opcode: Opcode,
        h: &UntaggedHeader,
        len: usize,
    ) -> Result<Target, Pending> {
        // Check 1: the QN is valid for this stream; RDMAP gives each
        // message type its own queue (RFC 5040 §4.2).
        if opcode.queue() != Some(h.qn) {
            return Err(held(untagged(UntaggedError::InvalidQn), Culprit::None));
        }
        let expected = self.rx.msn[h.qn as usize];
        let ahead = h.msn.wrapping_sub(expected) as usize;
        let (cap, progress) = match h.qn {
            QN_SEND => {
                // Check 2: a posted receive for this MSN.
                if self.rq.is_empty() {
                    return Err(held(untagged(UntaggedError::NoBuffer), Culprit::None));
                }
                // Outside the window of posted buffers, the MSN has no
                // buffer and is out of range (check 5).
                let Some(buf) = self.rq.get(ahead) else {
                    return Err(held(untagged(UntaggedError::MsnRange), Culprit::None));
                };
                (buf.len as usize, self.rx.send_progress)
            }
            QN_READ_REQUEST => {
                // Check 2: the "buffers" of QN 1 are the IRD slots; with
                // IRD 0 there are none.
                //= rfc5040#5.2
                //# A Data Source that receives more RDMA Read Requests than its IRD allows MUST
                //# treat it as an error.
                if self.irq.len() >= self.cfg.ird {
                    return Err(held(untagged(UntaggedError::NoBuffer), Culprit::None));
                }
                (READ_REQUEST_LEN, 0)
            }
            // Check 1 tied the opcode to its queue, and a Terminate (queue
            // 2) is never checked: no other queue is valid.
            _ => return Err(held(untagged(UntaggedError::InvalidQn), Culprit::None)),
        };
        let recv = |s| {
            if h.qn == QN_SEND && ahead == 0 {
                Culprit::Recv(s)
            } else {
                Culprit::None
            }
        };
        let mo = h.mo as usize;
        // Check 3: MO within the buffer. Over an in-order LLP it must also
        // continue the message exactly where the last segment ended.
        if !mo_in_buffer(cap, mo, len) || (ahead == 0 && h.mo != progress) {
            return Err(held(
                untagged(UntaggedError::InvalidMo),
                recv(CompletionStatus::FatalError),
            ));
        }
        // Check 4: MO + length within the buffer.
        if !fits_buffer(cap, mo, len) {
            return Err(held(
                untagged(UntaggedError::TooLong),
                recv(CompletionStatus::LocalLengthError),
            ));
        }
        // Check 5: the MSN is the one in order (messages are delivered in
        // order, one at a time per queue).
        if ahead != 0 {
            return Err(held(untagged(UntaggedError::MsnRange), Culprit::None));
        }
        match opcode {
            Opcode::ReadRequest if !h.last || len != READ_REQUEST_LEN => {
                //= rfc5040#4.4
                //# The RDMA Read Request Message MUST be sent as a single DDP Segment on
                //# untagged queue 1, with an MO of zero, carrying the whole Read Request
                //# header.
                // RFC 5040 §4.4: one segment carrying the whole header.
                Err(held(operation(OperationError::Unspecified), Culprit::None))
            }
            Opcode::ReadRequest => Ok(Target::Inline),
            _ if len == 0 => Ok(Target::None),
            _ => {
                let buf = self.rq.front().expect("checked non-empty");
                let slice = buf
                    .buffer
                    .as_ref()
                    .and_then(|b| b.sub(mo, len))
                    .expect("MO and length checked against the buffer");
                // Placed ahead of delivery into this very slice: the
                // target, as long as the receive's buffer is valid.
                if let Some(p) = self
                    .rx
                    .placed
                    .take_if(|p| p.same_as(&slice) && p.is_valid())
                {
                    return Ok(Target::Region { slice: p, at: 0 });
                }
                Ok(Target::Region { slice, at: 0 })
            }
        }
    }

    /// Where the next payload octets of the current segment go, if they go
    /// into a region: for a runtime that reads them from the socket
    /// straight into place with [`QueuePair::place_direct`]. `None` when
    /// the payload must come through [`UlpduSink::ulpdu_data`] (header not
    /// yet complete, inline payload, or a segment being discarded).
    pub fn placement_target(&self) -> Option<PlacementTarget> {
        match (&self.rx.phase, &self.rx.target) {
            (Phase::Payload, Target::Region { slice, at }) if *at < slice.len() => {
                Some(PlacementTarget {
                    buffer: slice.buffer().clone(),
                    offset: slice.offset() + at,
                    len: slice.len() - at,
                })
            }
            _ => None,
        }
    }

    /// [`QueuePair::placement_target`] as (buffer id, offset, length),
    /// without taking a reference to the buffer.
    pub(crate) fn placement_range(&self) -> Option<(usize, usize, usize)> {
        match (&self.rx.phase, &self.rx.target) {
            (Phase::Payload, Target::Region { slice, at }) if *at < slice.len() => {
                Some((slice.buffer().id(), slice.offset() + at, slice.len() - at))
            }
            _ => None,
        }
    }

    /// Direct placement: calls `fill` with the next at most `max` octets
    /// of the target region (see [`QueuePair::placement_target`]), while
    /// the STag is held valid; `fill` writes the payload there (from the
    /// socket, say) and returns how many octets it wrote. Returns that
    /// count (0 if there is no region target). The octets count as
    /// received ULPDU data exactly as if passed to `ulpdu_data`, and go
    /// through the same checks.
    pub fn place_direct(&mut self, max: usize, fill: impl FnOnce(&mut [u8]) -> usize) -> usize {
        let (slice, at) = match (&self.rx.phase, &self.rx.target) {
            (Phase::Payload, Target::Region { slice, at }) => (slice.clone(), *at),
            _ => return 0,
        };
        let n = max.min(slice.len() - at);
        if n == 0 {
            return 0;
        }
        match slice.write_with(at, n, |dst| fill(dst).min(n)) {
            Ok(k) => {
                self.rx.consumed += k;
                if let Target::Region { at, .. } = &mut self.rx.target {
                    *at += k;
                }
                k
            }
            Err(v) => {
                self.placement_failed(v);
                0
            }
        }
    }

    /// [`UlpduSink::ulpdu_data`] with the whole DDP header of the segment
    /// begun, in one piece: what it does with it, without gathering it
    /// octet run by octet run.
    pub(super) fn ulpdu_header(&mut self, header: &[u8]) -> Result<(), ProtocolError> {
        let n = header.len();
        let whole = self.rx.phase == Phase::Header
            && self.rx.hdr_have == 0
            && header.first().is_some_and(|&c| header_len(c) == n);
        if !whole {
            return self.ulpdu_data(header);
        }
        self.rx.consumed += n;
        self.rx.hdr[..n].copy_from_slice(header);
        self.rx.hdr_have = n;
        self.rx.phase = Phase::Payload;
        if n <= self.rx.ulpdu_len {
            self.on_header();
        }
        Ok(())
    }

    /// Hands the checks of the segment about to be delivered its payload's
    /// slice, placed ahead of delivery ([`QueuePair::deliver_placed`]).
    pub(super) fn offer_placed(&mut self, placed: RegionSlice) {
        self.rx.placed = Some(placed);
    }

    /// Counts the whole payload of the current segment as received, placed
    /// already ahead of delivery, if its checks took the slice offered
    /// ([`QueuePair::offer_placed`]) for their target, its STag valid:
    /// [`QueuePair::place_direct`] without writing the octets again.
    /// `None` when the checks put it nowhere (the segment is refused);
    /// `Some(false)` when they put it elsewhere or the STag went invalid
    /// (the segment then fails, as placement into an invalid STag does).
    pub(super) fn count_placed(&mut self) -> Option<bool> {
        let offered = self.rx.placed.take();
        let (Phase::Payload, Target::Region { slice, at }) = (&self.rx.phase, &mut self.rx.target)
        else {
            return None;
        };
        if *at != 0 || offered.is_some() {
            self.placement_failed(AccessViolation::InvalidStag);
            return Some(false);
        }
        *at = slice.len();
        self.rx.consumed += slice.len();
        Some(true)
    }

    /// The region was invalidated in the middle of the segment.
    //= rfc5041#7.1
    //# If the DDP layer detects any of the receive errors listed in this section, it MUST cease
    //# placing the remainder of the DDP Segment and report the error(s) to the ULP.
    pub(super) fn placement_failed(&mut self, v: AccessViolation) {
        let p = match self.rx.opcode {
            Some(op) if op.is_tagged() => held(
                tagged_error(v),
                if op == Opcode::ReadResponse {
                    Culprit::Read(CompletionStatus::LocalProtectionError)
                } else {
                    Culprit::None
                },
            ),
            // The local user invalidated their own receive buffer.
            _ => held(
                DdpError::LocalCatastrophic.into(),
                Culprit::Recv(CompletionStatus::LocalProtectionError),
            ),
        };
        self.hold(p);
    }

    //= rfc5041#5.2
    //# At the Data Sink, the DDP layer MUST Place the ULP Payload contained in all valid
    //# incoming DDP Segments associated with a DDP Message into the ULP Buffer.
    fn on_payload(&mut self, bytes: &[u8]) {
        match &mut self.rx.target {
            Target::None => {}
            Target::Inline => {
                let room = TERMINATE_MAX_LEN - self.rx.inline_len;
                let n = bytes.len().min(room);
                self.rx.inline[self.rx.inline_len..self.rx.inline_len + n]
                    .copy_from_slice(&bytes[..n]);
                self.rx.inline_len += n;
            }
            Target::Region { slice, at } => {
                let n = bytes.len().min(slice.len() - *at);
                match slice.write_with(*at, n, |dst| copy_payload(dst, &bytes[..n])) {
                    Ok(()) => *at += n,
                    Err(v) => self.placement_failed(v),
                }
            }
        }
    }

    /// Builds the Terminate for a held error: D copy (segment length as
    /// MPA carried it, then the DDP header) and, for a Read Request, the
    /// R copy.
    //= rfc5041#7.1
    //# The DDP layer SHOULD include in the error report the DDP Header, the type of error, and
    //# the length of the DDP segment, if available.
    fn terminate_for(&self, p: &Pending) -> TerminateMessage {
        let mut t = TerminateMessage::new(p.error);
        if p.copy_ddp && self.rx.header.is_some() {
            let seg_len = u16::try_from(self.rx.ulpdu_len).ok();
            t.ddp = TerminatedDdp::new(seg_len, &self.rx.hdr[..self.rx.hdr_have]);
            if self.rx.opcode == Some(Opcode::ReadRequest) && self.rx.inline_len >= READ_REQUEST_LEN
            {
                let mut r = [0u8; READ_REQUEST_LEN];
                r.copy_from_slice(&self.rx.inline[..READ_REQUEST_LEN]);
                t.rdmap = Some(r);
            }
        }
        t
    }

    fn fail_rx(&mut self, p: Pending) -> ProtocolError {
        let term = self.terminate_for(&p);
        self.fail(p.error, term, p.culprit);
        p.error
    }

    /// The segment passed every check and is complete: advance, and
    /// deliver its message if this was the last segment (RFC 5041 §5.4).
    //= rfc5041#4.1
    //# If the Last flag is set to one, the DDP Message payload MUST be Delivered to the ULP
    //# after
    //= rfc5041#5.3
    //# Messages passed through the DDP MUST conform to the ordering rules defined in this
    //# section.
    //= rfc5041#5.3
    //# MUST Deliver a DDP Message to the ULP at most once, * MUST Deliver DDP Messages to the
    //# ULP in the order they were sent by the Data Source.
    //= rfc5041#5.4
    //# At the Data Sink, DDP MUST Deliver a DDP Message if and only if all of the following are
    //# true
    fn on_segment_end(&mut self) -> Result<(), Pending> {
        let header = self.rx.header.expect("header parsed");
        let opcode = self.rx.opcode.expect("opcode parsed");
        let len = (self.rx.ulpdu_len - header.buffer_len()) as u32;
        if opcode == Opcode::Terminate {
            let msg = TerminateMessage::parse_bytes(&self.rx.inline[..self.rx.inline_len])
                .unwrap_or(TerminateMessage {
                    layer: 0xf,
                    etype: 0xf,
                    code: 0xff,
                    ddp: None,
                    rdmap: None,
                });
            self.terminated_by_peer(msg);
            return Ok(());
        }
        match header {
            SegmentHeader::Tagged(h) => {
                self.rx.tagged = (!h.last).then_some(TaggedInProgress {
                    opcode,
                    stag: h.stag,
                    next_to: h.to.wrapping_add(len as u64),
                });
                if opcode == Opcode::RdmaWrite {
                    self.counters.write_octets_received += u64::from(len);
                    if h.last {
                        self.counters.writes_received += 1;
                    }
                }
                if opcode == Opcode::ReadResponse {
                    // Checked at the header; gone only if the queue was
                    // flushed since, which stops receiving first.
                    let head = self.orq.front_mut().ok_or(WORK_GONE)?;
                    head.received += len;
                    self.counters.read_response_octets_received += u64::from(len);
                    if h.last {
                        let (seq, received) = (head.seq, head.received);
                        self.counters.read_responses_received += 1;
                        self.orq.pop_front();
                        self.complete_sq(seq, CompletionStatus::Success, received);
                        self.read_finished();
                    }
                }
                Ok(())
            }
            SegmentHeader::Untagged(h) => match h.qn {
                QN_SEND => {
                    self.rx.send_progress += len;
                    if h.last {
                        self.deliver_send(opcode, &h)?;
                    }
                    Ok(())
                }
                // The untagged checks tied every other opcode to its
                // queue: this one is queue 1.
                _ => {
                    self.rx.msn[QN_READ_REQUEST as usize] = h.msn.wrapping_add(1);
                    self.accept_read_request()
                }
            },
        }
    }

    /// Delivers a complete Send into its receive (RFC 5040 §5.3), after
    /// invalidating the STag a Send with Invalidate names (§5.4).
    //= rfc5041#4.3
    //# At the Data Sink, DDP MUST provide RsvdULP field to the ULP when the ULP Message is
    //# Delivered.
    //= rfc5041#4.3
    //# At the Data Sink, the DDP implementation is NOT REQUIRED to verify that the same value
    //# is present in the RsvdULP field of each DDP Segment
    //= rfc5041#5.4
    //# At the Data Sink, DDP MUST provide the ULP Message Length to the ULP when an Untagged
    //# DDP Message is Delivered.
    //= rfc5041#5.4
    //# At the Data Sink, DDP MUST provide the RsvdULP Field of the DDP Message to the ULP when
    //# the DDP Message is delivered.
    //= rfc5040#5.4
    //# On a Send with Invalidate, the Data Sink MUST invalidate the STag it names, after
    //# placing the message and before delivering it; if the STag cannot be invalidated, that is
    //# an error.
    fn deliver_send(&mut self, opcode: Opcode, h: &UntaggedHeader) -> Result<(), Pending> {
        let byte_len = self.rx.send_progress;
        self.rx.send_progress = 0;
        self.rx.msn[QN_SEND as usize] = h.msn.wrapping_add(1);
        let mut invalidated = None;
        if matches!(
            opcode,
            Opcode::SendInvalidate | Opcode::SendSolicitedInvalidate
        ) {
            let stag = STag(h.rsvd_ulp_word);
            match self
                .table
                .invalidate_remote(stag, self.cfg.pd, self.cfg.stream)
            {
                Ok(()) => invalidated = Some(stag),
                Err(v) => {
                    // Another domain's STag is a protection matter; an STag
                    // that does not exist or is already invalid is an
                    // operation error (as Intel irdma reports them).
                    let e = if v == AccessViolation::NotAssociated {
                        RdmapError::RemoteProtection(ProtectionError::CannotInvalidate)
                    } else {
                        RdmapError::RemoteOperation(OperationError::CannotInvalidate)
                    };
                    return Err(held(
                        e.into(),
                        Culprit::Recv(CompletionStatus::RemoteInvalidateError),
                    ));
                }
            }
        }
        let recv = self.rq.pop_front().ok_or(WORK_GONE)?;
        self.counters.sends_received += 1;
        self.counters.send_octets_received += u64::from(byte_len);
        self.push_completion(Completion {
            wr_id: recv.wr_id,
            status: CompletionStatus::Success,
            opcode: CompletionOpcode::Recv,
            byte_len,
            solicited: matches!(
                opcode,
                Opcode::SendSolicited | Opcode::SendSolicitedInvalidate
            ),
            invalidated,
        });
        Ok(())
    }

    /// RFC 5040 §5.2 and §7: the responder checks the data source (valid,
    /// associated, readable remotely, in bounds, no wrap) and queues the
    /// response. A zero-length Read's source is not checked.
    //= rfc5040#7.2
    //# The Data Source MUST validate the Data Source STag, Tagged Offset and length of an RDMA
    //# Read Request, and access rights to read, before it responds; a failure is a Remote
    //# Protection Error.
    fn accept_read_request(&mut self) -> Result<(), Pending> {
        // The length was checked at the header: never refused here.
        let request = ReadRequest::parse_bytes(&self.rx.inline[..self.rx.inline_len])
            .map_err(|_| held(operation(OperationError::Unspecified), Culprit::None))?;
        let source = if request.size == 0 {
            None
        } else {
            match self.table.check_remote(
                request.source_stag,
                self.cfg.pd,
                self.cfg.stream,
                Access::REMOTE_READ,
                request.source_to,
                request.size as u64,
            ) {
                Ok(s) => Some(s),
                Err(v) => return Err(held(protection_error(v), Culprit::None)),
            }
        };
        let seg_len = u16::try_from(self.rx.ulpdu_len).ok();
        self.counters.read_requests_received += 1;
        self.irq.push_back(ReadJob {
            source,
            request,
            ddp: TerminatedDdp::new(seg_len, &self.rx.hdr[..self.rx.hdr_have]),
        });
        Ok(())
    }
}

impl UlpduSink for QueuePair {
    type Error = ProtocolError;

    fn ulpdu_begin(&mut self, len: usize) -> Result<(), ProtocolError> {
        if self.rx.phase == Phase::Stopped {
            return Ok(());
        }
        let rx = &mut self.rx;
        rx.phase = Phase::Header;
        rx.ulpdu_len = len;
        rx.consumed = 0;
        rx.hdr_have = 0;
        rx.header = None;
        rx.opcode = None;
        rx.target = Target::None;
        rx.inline_len = 0;
        rx.pending = None;
        rx.placed = None;
        Ok(())
    }

    fn ulpdu_data_vectored(&mut self, pieces: &[&[u8]]) -> Result<(), ProtocolError> {
        // Headers go piece by piece; once a region target is set, the rest
        // is placed under one hold of the region's locks.
        let mut rest = pieces;
        while let [first, tail @ ..] = rest {
            if self.rx.phase == Phase::Payload && matches!(self.rx.target, Target::Region { .. }) {
                break;
            }
            self.ulpdu_data(first)?;
            rest = tail;
        }
        if rest.is_empty() {
            return Ok(());
        }
        let total: usize = rest.iter().map(|p| p.len()).sum();
        self.rx.consumed += total;
        if let Target::Region { slice, at } = &mut self.rx.target {
            let n = total.min(slice.len() - *at);
            let placed = slice.write_with(*at, n, |dst| {
                let mut off = 0;
                for p in rest {
                    let k = p.len().min(n - off);
                    copy_payload(&mut dst[off..off + k], &p[..k]);
                    off += k;
                }
            });
            match placed {
                Ok(()) => *at += n,
                Err(v) => self.placement_failed(v),
            }
        }
        Ok(())
    }

    fn ulpdu_data(&mut self, mut bytes: &[u8]) -> Result<(), ProtocolError> {
        if self.rx.phase == Phase::Stopped || self.rx.phase == Phase::Idle {
            return Ok(());
        }
        self.rx.consumed += bytes.len();
        while self.rx.phase == Phase::Header && !bytes.is_empty() {
            let need = self.rx.hdr_need() - self.rx.hdr_have;
            let n = need.min(bytes.len());
            self.rx.hdr[self.rx.hdr_have..self.rx.hdr_have + n].copy_from_slice(&bytes[..n]);
            self.rx.hdr_have += n;
            bytes = &bytes[n..];
            if self.rx.hdr_have == header_len(self.rx.hdr[0]) {
                self.rx.phase = Phase::Payload;
                if self.rx.hdr_have <= self.rx.ulpdu_len {
                    self.on_header();
                }
            }
        }
        if !bytes.is_empty() && self.rx.phase == Phase::Payload {
            self.on_payload(bytes);
        }
        Ok(())
    }

    fn ulpdu_end(&mut self) -> Result<(), ProtocolError> {
        if matches!(self.rx.phase, Phase::Stopped | Phase::Idle) {
            return Ok(());
        }
        let complete = self.rx.phase == Phase::Payload
            && self.rx.hdr_have <= self.rx.ulpdu_len
            && self.rx.consumed == self.rx.ulpdu_len;
        self.rx.phase = Phase::Idle;
        self.rx.target = Target::None;
        if !complete {
            // A ULPDU shorter than its DDP header (or a framing layer that
            // broke the sink contract): no header to copy.
            return Err(self.fail_rx(Pending {
                error: DdpError::LocalCatastrophic.into(),
                copy_ddp: false,
                culprit: Culprit::None,
            }));
        }
        if let Some(p) = self.rx.pending.take() {
            return Err(self.fail_rx(p));
        }
        match self.on_segment_end() {
            Ok(()) => Ok(()),
            Err(p) => Err(self.fail_rx(p)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::ddp::header::Segment;
    use crate::framing::UlpduSink;
    use crate::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, StreamId};
    use crate::rdmap::{CompletionStatus, QueuePair, QueuePairConfig, SendFlags, Sge, QN_SEND};

    /// A queue pair with one 8-octet region it may send from and receive
    /// into.
    fn node(seed: u64) -> (QueuePair, Sge) {
        let table = Arc::new(MemoryTable::with_seed(seed));
        let pd = table.alloc_pd();
        let stag = table
            .register(RegionSpec {
                pd,
                buffer: MemoryBuffer::from(vec![7u8; 8]),
                offset: 0,
                len: 8,
                base_to: 0,
                access: Access::LOCAL_WRITE,
                stream: None,
                key: None,
            })
            .unwrap();
        let qp = QueuePair::new(QueuePairConfig::new(pd, StreamId(seed)), table);
        (
            qp,
            Sge {
                stag,
                to: 0,
                len: 8,
            },
        )
    }

    /// The MSN of a queue wraps from 0xFFFFFFFF to 0, at the data source
    /// and at the data sink alike: two Sends across the wrap are numbered
    /// 0xFFFFFFFF and 0 and both are delivered.
    //= rfc5041#4.3
    //= type=test
    //# The MSN value MUST wrap to 0 after a value of 0xFFFFFFFF.
    #[test]
    fn msn_wraps_to_zero() {
        let (mut a, sge) = node(1);
        let (mut b, buf) = node(2);
        a.tx_msn[QN_SEND as usize] = u32::MAX;
        b.rx.msn[QN_SEND as usize] = u32::MAX;
        for id in 0..2 {
            b.post_recv(id, buf).unwrap();
            a.post_send(id, sge, SendFlags::default()).unwrap();
        }
        let mut msns = Vec::new();
        while let Some(t) = a.poll_transmit() {
            let octets = t.to_vec().unwrap();
            msns.push(Segment::new_checked(&octets[..]).unwrap().msn());
            b.ulpdu_begin(octets.len()).unwrap();
            b.ulpdu_data(&octets).unwrap();
            b.ulpdu_end().unwrap();
        }
        assert_eq!(msns, [u32::MAX, 0]);
        let mut delivered = 0;
        while let Some(c) = b.poll_completion() {
            assert_eq!(c.status, CompletionStatus::Success);
            delivered += 1;
        }
        assert_eq!(delivered, 2);
    }
}
