//! The receive path: octets from the socket into the engine, payload
//! straight into registered memory when it is worth it.
//!
//! Two kinds of reads (see DESIGN.md, "Receive path"):
//!
//! - **staged**: into the connection's staging buffer; the MPA receiver
//!   and the engine then take the octets from there, copying payload into
//!   place. Used for headers, small FPDUs and whatever follows a direct
//!   read.
//! - **direct**: when the current FPDU still has at least
//!   [`DIRECT_MIN`] payload octets to come and the engine has validated its
//!   header, one vectored read puts them straight into the target region,
//!   markers into a scratch array, and a short tail (the CRC and the next
//!   headers) into the staging buffer. The framing layer then folds the
//!   placed octets into its CRC.

use std::io::{self, IoSliceMut};

use arrayvec::ArrayVec;
use tokio::net::TcpStream;

use iwarp_proto::framing::{
    AnyDeframer, Deframer, FeedError, FramingError, LlpError, LlpErrorCode, Span,
};
use iwarp_proto::rdmap::QueuePair;

/// Octets of staging buffer per connection.
pub(crate) const STAGING_LEN: usize = 64 * 1024;
/// Payload octets left in an FPDU from which a direct read pays off.
pub(crate) const DIRECT_MIN: usize = 2048;
/// Staging octets read after a direct read, and at the start of an FPDU
/// while large ones arrive: enough for the CRC, markers and the next MPA
/// and DDP headers, so that the next payload can be read directly, plus
/// some of that payload. A system call costs more than copying a few KiB:
/// on a 2-core VM's loopback, 64 octets here gave 2.4 to 3.3 GiB/s of
/// 64 KiB RDMA Writes, 4 KiB gave 3.6 to 3.8 (16 KiB: 3.7 to 3.9, copying
/// more), while staged reads alone gave 3.7 to 3.8 with every octet copied.
const TAIL_LEN: usize = 4096;
/// Markers one direct read can cover: 64 KiB of payload at most.
const MAX_MARKERS: usize = 130;

/// Why reading stopped.
#[derive(Debug)]
pub(crate) enum RxEnd {
    /// The peer closed its half of the connection between FPDUs.
    Closed,
    /// The connection ended in the middle of an FPDU, or failed.
    Lost(Option<io::Error>),
    /// The framing layer found the stream invalid (CRC, marker, …).
    Framing(FramingError),
    /// The engine refused a segment (it has queued a Terminate).
    Engine,
}

impl RxEnd {
    /// The LLP code to report to the engine, if the engine does not know
    /// about this end yet.
    pub(crate) fn llp_code(&self) -> Option<LlpErrorCode> {
        match self {
            Self::Closed | Self::Engine => None,
            Self::Lost(_) => Some(LlpErrorCode::ConnectionLost),
            Self::Framing(e) => Some(e.llp_code()),
        }
    }
}

/// The receive half of a connection's framing state and buffers.
#[derive(Debug)]
pub(crate) struct RxPath {
    pub(crate) deframer: AnyDeframer,
    staging: Box<[u8]>,
    /// Staged octets not yet fed: `staging[start..end]`.
    start: usize,
    end: usize,
    /// Octets received over the connection's life.
    pub(crate) octets: u64,
    /// Payload octets placed by direct reads.
    pub(crate) direct_octets: u64,
}

impl RxPath {
    /// A receive path whose first octets (already read while the startup
    /// frames were) are `initial`.
    pub(crate) fn new(deframer: AnyDeframer, initial: &[u8]) -> Self {
        let mut staging = vec![0u8; STAGING_LEN.max(initial.len())].into_boxed_slice();
        staging[..initial.len()].copy_from_slice(initial);
        Self {
            deframer,
            staging,
            start: 0,
            end: initial.len(),
            octets: 0,
            direct_octets: 0,
        }
    }

    /// Feeds the staged octets to the deframer and the engine.
    pub(crate) fn feed_staged(&mut self, qp: &mut QueuePair) -> Result<(), RxEnd> {
        // Called even with nothing staged: an IFT frame without a payload
        // CRC is complete with its last payload octet, which a direct read
        // may have placed; only the framing layer's next call reports it.
        let input = &self.staging[self.start..self.end];
        let result = self.deframer.receive(input, qp);
        self.start = 0;
        self.end = 0;
        match result {
            Ok(_) => Ok(()),
            Err(FeedError::Framing(f)) => Err(RxEnd::Framing(f)),
            Err(FeedError::Sink(_)) => Err(RxEnd::Engine),
        }
    }

    /// Whether large FPDUs are arriving: the current or the previous one
    /// carries at least [`DIRECT_MIN`] octets. Two FPDUs of memory cover
    /// the short tail segment a large message ends with.
    fn large_recently(&self) -> bool {
        self.deframer
            .payload_len()
            .max(self.deframer.previous_payload_len())
            >= DIRECT_MIN
    }

    /// One non-blocking read from the socket, direct or staged. Returns
    /// `Ok(false)` when the socket had nothing (would block).
    pub(crate) fn read(&mut self, qp: &mut QueuePair, stream: &TcpStream) -> Result<bool, RxEnd> {
        debug_assert_eq!(self.start, self.end);
        let remaining = self.deframer.layout(usize::MAX).payload_len();
        if remaining >= DIRECT_MIN && qp.placement_target().is_some() {
            return self.read_direct(qp, stream, remaining);
        }
        // While large FPDUs arrive, read only up to just past the next
        // FPDU's headers, so that its payload can be read directly; a
        // stream of small FPDUs is read in large batches instead.
        let want = if self.large_recently() {
            (remaining + 8 + TAIL_LEN).min(self.staging.len())
        } else {
            self.staging.len()
        };
        match stream.try_read(&mut self.staging[..want]) {
            Ok(0) => Err(self.eof()),
            Ok(n) => {
                self.octets += n as u64;
                self.start = 0;
                self.end = n;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(RxEnd::Lost(Some(e))),
        }
    }

    fn eof(&self) -> RxEnd {
        if self.deframer.at_boundary() {
            RxEnd::Closed
        } else {
            RxEnd::Lost(None)
        }
    }

    /// Reads up to `max` payload octets of the current FPDU straight into
    /// the engine's placement target.
    fn read_direct(
        &mut self,
        qp: &mut QueuePair,
        stream: &TcpStream,
        max: usize,
    ) -> Result<bool, RxEnd> {
        let Self {
            deframer,
            staging,
            start,
            end,
            ..
        } = self;
        let mut markers = [[0u8; 4]; MAX_MARKERS];
        let mut outcome: Option<io::Result<usize>> = None;
        let mut framing_error = None;
        let placed = qp.place_direct(max, |dst| {
            let mut iov: ArrayVec<IoSliceMut<'_>, { 2 * MAX_MARKERS + 2 }> = ArrayVec::new();
            let mut rest = &mut dst[..];
            let mut marker_slots = markers.iter_mut();
            let mut spans: ArrayVec<Span, { 2 * MAX_MARKERS + 2 }> = ArrayVec::new();
            for span in deframer.layout(rest.len()) {
                if spans.len() + 2 > spans.capacity() {
                    break;
                }
                match span {
                    Span::Payload(n) => {
                        let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
                        iov.push(IoSliceMut::new(head));
                        rest = tail;
                    }
                    Span::Marker => match marker_slots.next() {
                        Some(slot) => iov.push(IoSliceMut::new(&mut slot[..])),
                        None => break,
                    },
                }
                spans.push(span);
            }
            iov.push(IoSliceMut::new(&mut staging[..TAIL_LEN]));
            let n = match stream.try_read_vectored(&mut iov) {
                Ok(n) => n,
                Err(e) => {
                    outcome = Some(Err(e));
                    return 0;
                }
            };
            drop(iov);
            outcome = Some(Ok(n));
            // Replay what was read through the deframer, in stream order.
            let mut left = n;
            let mut at = 0;
            let mut marker_index = 0;
            for span in spans {
                if left == 0 {
                    break;
                }
                let r = match span {
                    Span::Payload(len) => {
                        let k = len.min(left);
                        let r = deframer.push_payload(&dst[at..at + k]);
                        at += k;
                        left -= k;
                        r
                    }
                    Span::Marker => {
                        let k = 4.min(left);
                        left -= k;
                        let r = deframer
                            .push_framing(&markers[marker_index][..k])
                            .map(|_| ());
                        marker_index += 1;
                        r
                    }
                };
                if let Err(e) = r {
                    framing_error = Some(e);
                    break;
                }
            }
            *start = 0;
            *end = left;
            at
        });
        if let Some(e) = framing_error {
            return Err(RxEnd::Framing(e));
        }
        // No call at all: the engine refused the placement (its target was
        // invalidated under it) and has queued a Terminate.
        let Some(outcome) = outcome else {
            return Err(RxEnd::Engine);
        };
        match outcome {
            Ok(0) => Err(self.eof()),
            Ok(n) => {
                self.octets += n as u64;
                self.direct_octets += placed as u64;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(RxEnd::Lost(Some(e))),
        }
    }
}
