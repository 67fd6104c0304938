//! The transmit side of a queue pair: which message goes next (send-queue
//! work and read responses alternate, Read Requests wait for ORD), how it
//! is cut into segments of at most the MULPDU (RFC 5041 §5.2), and the
//! Terminate that replaces everything once the stream fails (RFC 5040
//! §5.6.2). Segments come out as [`Transmit`]s: header octets inline,
//! payload borrowed from the source region, so nothing is copied or
//! allocated.

use crate::ddp::{
    SegmentHeader, Segmenter, TaggedHeader, UntaggedHeader, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN,
};
use crate::memory::{RegionSlice, STag};

use super::error::{ProtocolError, RdmapError};
use super::opcode::{Opcode, QN_READ_REQUEST, QN_SEND, QN_TERMINATE};
use super::queue_pair::{Culprit, OutstandingRead, QueuePair, SqWork};
use super::read_request::{ReadRequest, READ_REQUEST_LEN};
use super::terminate::{terminate_header, TerminateMessage};
use super::transmit::{InlinePayload, Transmit, TxPayload};
use super::work::{CompletionStatus, Event, QpState};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TxKind {
    Send {
        seq: u64,
        opcode: Opcode,
        invalidate: STag,
        msn: u32,
    },
    Write {
        seq: u64,
        stag: STag,
        to: u64,
    },
    ReadRequest {
        request: ReadRequest,
        msn: u32,
    },
    ReadResponse {
        stag: STag,
        to: u64,
    },
}

/// The message being segmented.
#[derive(Debug)]
pub(super) struct TxMessage {
    kind: TxKind,
    seg: Segmenter,
    source: Option<RegionSlice>,
}

impl QueuePair {
    /// The next ULPDU to transmit, or `None` when there is nothing to send
    /// now. A send-queue request completes when its last segment is
    /// returned here: the LLP has taken it (RFC 5041 §5.4), so the runtime
    /// must hand each `Transmit` to the framing layer before it delivers
    /// completions polled after this call.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        if let Some(term) = self.terminate_out.take() {
            let t = self.terminate_transmit(&term);
            self.events.push_back(Event::TerminateSent(term));
            self.set_state(QpState::Error);
            return Some(t);
        }
        if !matches!(self.state, QpState::ReadyToSend | QpState::Closing) {
            return None;
        }
        if self.tx.is_none() && !self.start_message() {
            self.check_drained();
            return None;
        }
        let t = self.next_segment();
        if t.is_none() {
            // The message failed locally: the Terminate goes out instead.
            return self.poll_transmit();
        }
        t
    }

    /// Whether [`QueuePair::poll_transmit`] may have work now: when false,
    /// it would return `None` and change nothing, so a runtime polling
    /// after each input and each write can skip it. Conservative: true
    /// while closing (the drained queues are noticed there) and while a
    /// Read Request waits for a free ORD slot.
    pub fn may_transmit(&self) -> bool {
        self.terminate_out.is_some()
            || match self.state {
                QpState::ReadyToSend => {
                    self.tx.is_some() || !self.sq_pending.is_empty() || !self.irq.is_empty()
                }
                QpState::Closing => true,
                _ => false,
            }
    }

    fn terminate_transmit(&mut self, term: &TerminateMessage) -> Transmit {
        let (payload, n) = term.to_bytes();
        let msn = self.tx_msn[QN_TERMINATE as usize];
        self.tx_msn[QN_TERMINATE as usize] = msn.wrapping_add(1);
        let h = SegmentHeader::Untagged(terminate_header(msn));
        Transmit::new(&h, TxPayload::Inline(InlinePayload::new(&payload[..n])))
    }

    /// Picks the next message: read responses and send-queue messages
    /// alternate, a Read Request waits while ORD reads are outstanding.
    //= rfc5041#4.2
    //# The Data Source MUST ensure that each DDP Segment within a specific DDP Message contains
    //# the same value for this field.
    //= rfc5041#4.3
    //# The Data Source MUST ensure that each DDP Segment within a specific DDP Message contains
    //# the same value for this field.
    //= rfc5041#4.3
    //# The Message Sequence Number specifies a sequence number that MUST be increased by one
    //# (modulo 2^32) with each DDP Message targeting the specific Queue Number on the DDP
    //# Stream associated with this DDP Segment.
    //= rfc5041#4.3
    //# The MSN value MUST wrap to 0 after a value of 0xFFFFFFFF.
    //= rfc5041#5.3
    //# MUST transmit DDP Messages in the order they were submitted to the DDP layer, * SHOULD
    //# transmit DDP Segments within a DDP Message in increasing MO order for Untagged DDP
    //# Messages and in increasing TO order for Tagged DDP Messages.
    //= rfc5041#4.3
    //# 0xFFFFFFFF. Each DDP segment within a specific DDP message MUST contain the same value
    //# for this field. The Data Source MUST ensure that each DDP Segment
    //= rfc5041#4.2
    //# MUST be the value supplied by the ULP. The Data Source MUST ensure that each DDP Segment
    //# within a specific DDP Message contains the same value for this field.
    //= rfc5040#5.2
    //# The Data Source MUST send its RDMA Read Response Messages in the order in which it
    //# received the RDMA Read Request Messages.
    //= rfc5040#5.5
    //# A Tagged message MUST NOT be interleaved with another Tagged message on the same stream:
    //# all segments of an RDMA Write or RDMA Read Response are sent before the next message
    //# starts.
    fn start_message(&mut self) -> bool {
        let sq_ready = match self.sq_pending.front() {
            //= rfc5040#5.2
            //# The Data Sink MUST NOT have more RDMA Read Requests outstanding than the ORD it
            //# was given.
            Some(SqWork::Read { .. }) => self.orq.len() < self.cfg.ord,
            Some(_) => true,
            None => false,
        };
        let irq_ready = !self.irq.is_empty();
        let from_irq = match (sq_ready, irq_ready) {
            (false, false) => return false,
            (true, false) => false,
            (false, true) => true,
            (true, true) => !self.last_from_irq,
        };
        self.last_from_irq = from_irq;
        if from_irq {
            let job = self.irq.front().expect("checked non-empty");
            self.tx = Some(TxMessage {
                kind: TxKind::ReadResponse {
                    stag: job.request.sink_stag,
                    to: job.request.sink_to,
                },
                seg: Segmenter::new(job.request.size as u64),
                source: job.source.clone(),
            });
            return true;
        }
        let work = self.sq_pending.pop_front().expect("checked non-empty");
        let msg = match work {
            SqWork::Send {
                seq,
                opcode,
                invalidate,
                source,
                len,
            } => {
                let msn = self.tx_msn[QN_SEND as usize];
                self.tx_msn[QN_SEND as usize] = msn.wrapping_add(1);
                TxMessage {
                    kind: TxKind::Send {
                        seq,
                        opcode,
                        invalidate,
                        msn,
                    },
                    seg: Segmenter::new(len as u64),
                    source,
                }
            }
            SqWork::Write {
                seq,
                source,
                len,
                stag,
                to,
            } => TxMessage {
                kind: TxKind::Write { seq, stag, to },
                seg: Segmenter::new(len as u64),
                source,
            },
            SqWork::Read { seq, request } => {
                let msn = self.tx_msn[QN_READ_REQUEST as usize];
                self.tx_msn[QN_READ_REQUEST as usize] = msn.wrapping_add(1);
                self.orq.push_back(OutstandingRead {
                    seq,
                    sink_stag: request.sink_stag,
                    sink_to: request.sink_to,
                    len: request.size,
                    received: 0,
                });
                TxMessage {
                    kind: TxKind::ReadRequest { request, msn },
                    seg: Segmenter::new(READ_REQUEST_LEN as u64),
                    source: None,
                }
            }
        };
        self.tx = Some(msg);
        true
    }

    /// Cuts the next segment of the current message. `None` if its source
    /// turned out invalid (the stream then fails).
    //= rfc5041#4.1
    //# It MUST be set to one on the last DDP Segment of every DDP Message.
    //= rfc5041#4.1
    //# It MUST NOT be set to one on any other DDP Segment.
    //= rfc5041#4.1
    //# The DDP Segment with the L bit set to 1 MUST be posted to the LLP after all other DDP
    //# Segments of the associated DDP Message have been posted to the LLP.
    //= rfc5041#4.1
    //# For an Untagged DDP Message, the DDP Segment with the L bit set to 1 MUST carry the
    //# highest MO.
    //= rfc5041#4.2
    //# At the Data Source, DDP MUST set RsvdULP Field to the value specified by the ULP.
    //= rfc5041#4.2
    //# Each DDP Segment within a specific DDP Message MUST contain the same value for this
    //# field.
    //= rfc5041#4.2
    //# At the Data Source, DDP MUST set the STag field to the value specified by the ULP.
    //= rfc5041#4.2
    //# Each DDP Segment within a specific DDP Message MUST contain the same value for this
    //# field and MUST be the value supplied by the ULP.
    //= rfc5041#4.3
    //# At the Data Source, DDP MUST set RsvdULP Field to the value specified by the ULP.
    //= rfc5041#4.3
    //# Each DDP Segment within a specific DDP Message MUST contain the same value for the
    //= rfc5041#4.3
    //# Each DDP segment within a specific DDP message MUST contain the same value for this
    //# field and MUST be the value supplied by the ULP at the Data Source.
    //= rfc5041#4.3
    //# The MO referencing the first octet of the DDP Message MUST be set to zero by the DDP
    //# layer.
    //= rfc5041#4.4
    //# Each DDP Segment MUST contain a DDP Header.
    //= rfc5041#5.2
    //# For each DDP Segment of a Untagged DDP Message, the MO MUST be set to the octet offset
    //# from the first octet in the associated ULP Message (which is defined to be zero) to the
    //# first octet in the ULP Payload contained in the DDP Segment.
    //= rfc5041#5.2
    //# For each DDP Segment of a Tagged DDP Message, the TO MUST be set to the octet offset
    //# from the first octet in the associated ULP Message to the first octet in the ULP Payload
    //# contained in the DDP Segment, plus the TO assigned to the first octet in the associated
    //# ULP Message.
    fn next_segment(&mut self) -> Option<Transmit> {
        let mulpdu = self.mulpdu;
        let msg = self.tx.as_mut().expect("a message is in progress");
        let tagged = matches!(msg.kind, TxKind::Write { .. } | TxKind::ReadResponse { .. });
        let hlen = if tagged {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        };
        let span = match msg.kind {
            // RDMA Read Request: one segment, MO 0 (RFC 5040 §4.4).
            TxKind::ReadRequest { .. } => msg.seg.next_segment(usize::MAX, 0),
            _ => msg.seg.next_segment(mulpdu, hlen),
        }
        .expect("message not finished");
        let payload = match &msg.source {
            Some(src) if span.len > 0 => {
                let slice = src
                    .sub(span.offset as usize, span.len)
                    .expect("segment lies within the message");
                if !slice.is_valid() {
                    self.source_invalidated();
                    return None;
                }
                TxPayload::Region(slice)
            }
            _ => TxPayload::None,
        };
        let kind = msg.kind;
        let header = match kind {
            TxKind::Send {
                opcode,
                invalidate,
                msn,
                ..
            } => SegmentHeader::Untagged(UntaggedHeader {
                last: span.last,
                rsvd_ulp: opcode.control(),
                rsvd_ulp_word: invalidate.0,
                qn: QN_SEND,
                msn,
                mo: span.offset as u32,
            }),
            TxKind::ReadRequest { msn, .. } => SegmentHeader::Untagged(UntaggedHeader {
                last: true,
                rsvd_ulp: Opcode::ReadRequest.control(),
                rsvd_ulp_word: 0,
                qn: QN_READ_REQUEST,
                msn,
                mo: 0,
            }),
            TxKind::Write { stag, to, .. } => SegmentHeader::Tagged(TaggedHeader {
                last: span.last,
                rsvd_ulp: Opcode::RdmaWrite.control(),
                stag,
                to: to.wrapping_add(span.offset),
            }),
            TxKind::ReadResponse { stag, to } => SegmentHeader::Tagged(TaggedHeader {
                last: span.last,
                rsvd_ulp: Opcode::ReadResponse.control(),
                stag,
                to: to.wrapping_add(span.offset),
            }),
        };
        let payload = match kind {
            TxKind::ReadRequest { request, .. } => {
                TxPayload::Inline(InlinePayload::new(&request.to_bytes()))
            }
            _ => payload,
        };
        let t = Transmit::new(&header, payload);
        if span.last {
            self.tx = None;
            let counters = &mut self.counters;
            match kind {
                TxKind::Send { seq, .. } => {
                    let len = self.sq_slots[(seq - self.sq_base) as usize].byte_len;
                    counters.sends_sent += 1;
                    counters.send_octets_sent += u64::from(len);
                    self.complete_sq(seq, CompletionStatus::Success, len);
                }
                TxKind::Write { seq, .. } => {
                    let len = self.sq_slots[(seq - self.sq_base) as usize].byte_len;
                    counters.writes_sent += 1;
                    counters.write_octets_sent += u64::from(len);
                    self.complete_sq(seq, CompletionStatus::Success, len);
                }
                TxKind::ReadRequest { .. } => counters.read_requests_sent += 1,
                TxKind::ReadResponse { .. } => {
                    if let Some(job) = self.irq.pop_front() {
                        counters.read_responses_sent += 1;
                        counters.read_response_octets_sent += u64::from(job.request.size);
                    }
                }
            }
            self.check_drained();
        }
        Some(t)
    }

    /// The source of the message being sent was invalidated. For a Read
    /// Response that is the peer's remote protection error (invalid STag)
    /// and the Terminate carries its Read Request; for the local user's
    /// own Send or Write it is a local error.
    fn source_invalidated(&mut self) {
        let msg = self.tx.take().expect("a message is in progress");
        match msg.kind {
            TxKind::ReadResponse { .. } => {
                let job = self.irq.pop_front().expect("response has a job");
                let error = ProtocolError::Rdmap(RdmapError::RemoteProtection(
                    super::error::ProtectionError::InvalidStag,
                ));
                let mut term = TerminateMessage::new(error);
                term.ddp = job.ddp;
                term.rdmap = Some(job.request.to_bytes());
                self.fail(error, term, Culprit::None);
            }
            TxKind::Send { seq, .. } | TxKind::Write { seq, .. } => {
                let error = ProtocolError::Rdmap(RdmapError::LocalCatastrophic);
                self.fail(
                    error,
                    TerminateMessage::new(error),
                    Culprit::Sq(seq, CompletionStatus::LocalProtectionError),
                );
            }
            TxKind::ReadRequest { .. } => unreachable!("a Read Request has no region payload"),
        }
    }
}
