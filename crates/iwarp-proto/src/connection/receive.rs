//! The receive half of a connection: stream octets into the deframer and
//! the queue pair, from a buffer or read straight into a region.
//!
//! A runtime reads the socket in one of two ways (see DESIGN.md, "Receive
//! path"): into a staging buffer it then passes to
//! [`Connection::handle_input`], or, when the current PDU still has much
//! payload to come and DDP has a region for it, with one vectored read
//! that [`Connection::read_direct`] lays out: the payload straight into
//! the region, split around markers (which land in a small scratch
//! array), and a short tail for what follows the payload. Both end in the
//! same deframer and queue pair, through the same checks.

use std::io::IoSliceMut;
use std::time::Instant;

use arrayvec::ArrayVec;

use crate::framing::{replay_read, Deframer, FeedError, LlpErrorCode, Span, MARKER_LEN};
use crate::memory::copy::copy_payload;
use crate::mpa::Placement;

use super::error::{ConnectionError, LossReason};
use super::event::{Event, Notice};
use super::Connection;
use crate::framing::AnyDeframer;

/// Markers one direct read can cover: 64 KiB of payload at most.
const MAX_MARKERS: usize = 130;

/// What one [`Connection::read_direct`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectRead {
    /// Octets the read returned in all; 0 is the end of the stream.
    pub octets: usize,
    /// Payload octets placed straight into the region.
    pub placed: usize,
    /// Octets that landed in the tail buffer, after the payload: the
    /// start of the next input, to pass to [`Connection::handle_input`].
    pub tail: usize,
}

impl Connection {
    /// Feeds received stream octets through the deframer into the queue
    /// pair; `now` is when they arrived. Returns how many were taken: all
    /// of them, except that a receiver verifying each FPDU before placing
    /// it ([`Placement::Verified`]) leaves an incomplete FPDU at the end,
    /// which the caller keeps and passes again, at the front of the next
    /// input, once more octets have arrived.
    ///
    /// A framing error (CRC, marker) stops receiving and, when the LLP can
    /// still carry it, queues a Terminate naming it; so does an error the
    /// queue pair finds. The first validated PDU lifts rule 4's hold.
    pub fn handle_input(&mut self, now: Instant, input: &[u8]) -> usize {
        if self.read_closed {
            return input.len();
        }
        // What the last call left is presented again: only what follows
        // is new, and only new octets show the peer is alive.
        if input.len() > self.unconsumed {
            self.last_input = now;
        }
        let used = match self.deframer.receive(input, &mut self.qp) {
            Ok(used) => used,
            Err(FeedError::Framing(f)) => {
                self.framing_failed(f);
                input.len()
            }
            // The queue pair refused a segment and queued a Terminate.
            Err(FeedError::Sink(_)) => {
                self.read_closed = true;
                input.len()
            }
        };
        self.unconsumed = input.len() - used;
        self.release_hold();
        self.settle();
        used
    }

    /// RFC 5044 §7.1.2 rule 4: the responder's hold is lifted once the
    /// framing layer has validated a PDU, even when the queue pair refused
    /// its contents: the Terminate it queued must go out, and the framing
    /// did validate the PDU. A first PDU that fails the framing checks
    /// lifts nothing, so the responder closes without a word.
    //= rfc5044#7.1.2
    //# MPA Responder mode implementations MUST receive and validate at least one FPDU before
    //# sending any FPDUs or Markers.
    fn release_hold(&mut self) {
        if self.tx.held && self.deframer.pdus_received() > 0 {
            self.tx.held = false;
            self.events.push_back(Event::Notice(Notice::HoldLifted));
        }
    }

    /// The peer closed its half of the TCP connection (a read returned 0).
    /// Between PDUs that is a close: after this end's own graceful close
    /// the stream ends closed, otherwise every outstanding request is
    /// flushed. Inside a PDU the connection is lost.
    pub fn handle_eof(&mut self) {
        if self.read_closed {
            return;
        }
        self.read_closed = true;
        self.events.push_back(Event::Notice(Notice::PeerFin));
        if self.deframer.at_boundary() && self.unconsumed == 0 {
            self.note(if self.closing_locally {
                ConnectionError::LocallyClosed
            } else {
                ConnectionError::PeerClosed
            });
            self.qp.handle_llp_closed();
        } else {
            self.note(ConnectionError::Lost(LossReason::EndedInsidePdu));
            self.qp.handle_llp_error(LlpErrorCode::ConnectionLost);
        }
        self.settle();
    }

    /// Reading from the TCP connection failed: the connection is lost.
    pub fn handle_read_error(&mut self, reason: LossReason) {
        if self.read_closed {
            return;
        }
        self.read_closed = true;
        self.note(ConnectionError::Lost(reason));
        self.qp.handle_llp_error(LlpErrorCode::ConnectionLost);
        self.settle();
    }

    /// Whether the connection still reads: false once the peer closed, an
    /// error stopped the stream or the connection was closed.
    pub fn wants_input(&self) -> bool {
        !self.read_closed
    }

    /// Whether received PDUs are passed on only once whole and verified
    /// (MPA with [`Placement::Verified`]): the runtime then stages whole
    /// FPDUs and never reads directly.
    pub fn verifies_first(&self) -> bool {
        matches!(&self.deframer, AnyDeframer::Mpa(r) if r.placement() == Placement::Verified)
    }

    /// Payload octets of the PDU being received that can be read straight
    /// into their region now, with [`Connection::read_direct`]: 0 unless
    /// DDP has validated the header and has a region for them, and never
    /// for a receiver that verifies first.
    pub fn direct_payload(&self) -> usize {
        if self.read_closed || self.verifies_first() {
            return 0;
        }
        let remaining = self.deframer.layout(usize::MAX).payload_len();
        if remaining > 0 && self.qp.placement_target().is_some() {
            remaining
        } else {
            0
        }
    }

    /// Reads up to `max` payload octets of the current PDU straight into
    /// their region: `read` is called once with the vectored buffers to
    /// read into, then `tail`, and returns how many octets it read. The
    /// deframer then folds the placed octets into its CRC and checks the
    /// markers; what landed in `tail` is the start of the next input.
    ///
    /// Without markers the buffers are the region's octets. With markers
    /// the payload and its markers are read into one scratch buffer and
    /// the payload runs copied into the region: read into the region's
    /// runs and a marker array (some 260 buffers per 64 KiB), the kernel's
    /// copy cost more than the extra copy does (IFT with markers,
    /// `_copy_to_iter` 1,498 profile samples against 890 for the sender's
    /// `_copy_from_iter`).
    ///
    /// Returns `Ok(None)` when nothing was read: no region to read into
    /// ([`Connection::direct_payload`] is 0), or the region was invalidated
    /// under the queue pair, which then stops receiving and queues a
    /// Terminate. A read error is returned as it came (the caller decides
    /// whether it is fatal: see [`Connection::handle_read_error`]); a read
    /// of 0 octets is the end of the stream ([`Connection::handle_eof`]).
    pub fn read_direct<E>(
        &mut self,
        now: Instant,
        max: usize,
        tail: &mut [u8],
        read: impl FnOnce(&mut [IoSliceMut<'_>]) -> Result<usize, E>,
    ) -> Result<Option<DirectRead>, E> {
        if self.direct_payload() == 0 {
            return Ok(None);
        }
        let deframer = &mut self.deframer;
        let scratch = &mut self.marked_scratch;
        let mut outcome: Option<Result<usize, E>> = None;
        let mut framing_error = None;
        let mut tail_len = 0;
        let placed = self.qp.place_direct(max, |dst| {
            // The spans one read covers, as many as the span array holds.
            let mut spans: ArrayVec<Span, { 2 * MAX_MARKERS + 2 }> = ArrayVec::new();
            let (mut payload, mut marker_count) = (0, 0);
            for span in deframer.layout(dst.len()) {
                if spans.is_full() {
                    break;
                }
                match span {
                    Span::Payload(n) => payload += n,
                    Span::Marker => marker_count += 1,
                }
                spans.push(span);
            }
            let marked = marker_count > 0;
            let spans_len = payload + MARKER_LEN * marker_count;
            let into: &mut [u8] = if marked {
                if scratch.len() < spans_len {
                    scratch.resize(spans_len, 0);
                }
                &mut scratch[..spans_len]
            } else {
                &mut dst[..payload]
            };
            let n = match read(&mut [IoSliceMut::new(into), IoSliceMut::new(&mut tail[..])]) {
                Ok(n) => n,
                Err(e) => {
                    outcome = Some(Err(e));
                    return 0;
                }
            };
            outcome = Some(Ok(n));
            // Replay what was read through the deframer, in stream order;
            // read into the scratch, payload runs are copied into place.
            // The rest of the read went into `tail`.
            let in_spans = n.min(spans_len);
            let mut at = 0;
            let r = if marked {
                replay_read(
                    deframer,
                    &scratch[..in_spans],
                    &spans,
                    Deframer::push_spans,
                    |run| {
                        copy_payload(&mut dst[at..at + run.len()], run);
                        at += run.len();
                    },
                )
            } else {
                replay_read(
                    deframer,
                    &dst[..in_spans],
                    &spans,
                    Deframer::push_spans,
                    |run| {
                        at += run.len();
                    },
                )
            };
            if let Err(e) = r {
                framing_error = Some(e);
            }
            // The payload runs lie end to end in `dst`: a deframer whose
            // CRC skips its markers folds them in one call.
            deframer.fold_placed(&dst[..at]);
            tail_len = n - in_spans;
            at
        });
        let Some(outcome) = outcome else {
            // No call at all: the queue pair refused the placement (its
            // target was invalidated under it) and has queued a Terminate.
            self.read_closed = true;
            self.settle();
            return Ok(None);
        };
        let octets = outcome?;
        if octets > 0 {
            self.last_input = now;
        }
        if placed > 0 {
            self.stats.direct_reads += 1;
            self.stats.direct_octets += placed as u64;
        }
        if let Some(e) = framing_error {
            self.framing_failed(e);
        }
        self.unconsumed = 0;
        self.settle();
        Ok(Some(DirectRead {
            octets,
            placed,
            tail: tail_len,
        }))
    }
}
