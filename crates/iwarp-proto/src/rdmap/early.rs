//! Placement ahead of delivery: where the payload of a DDP segment that
//! arrived before the segments ahead of it may go at once.
//!
//! RFC 5041 separates placement (writing payload into its buffer) from
//! delivery (telling the ULP a message is complete, in order). An
//! out-of-order receive path (`crate::ooo`) places a verified segment on
//! arrival and delivers it later, through the same [`QueuePair`] receive
//! path as any in-order segment. What it may place early is what passes
//! the checks that do not depend on the segments before it, run with the
//! same code the in-order path runs:
//!
//! - DV, RV and the opcode (`rdmap_opcode` in `rx.rs`);
//! - tagged (RDMA Write, Read Response): RFC 5041 §7.1 checks 1 to 5
//!   against the memory table (`QueuePair::tagged_region`); a Read
//!   Response must also fall inside the sink of a Read this end has
//!   outstanding;
//! - untagged Send: the posted receive its MSN names, counted from the MSN
//!   expected next, and checks 3 and 4 against it (`mo_in_buffer`,
//!   `fits_buffer`).
//!
//! The checks that depend on order (a tagged message continuing the one in
//! progress, a Read Response at the head of the outstanding reads, MO
//! continuity, the MSN being the next one) run when the segment is
//! delivered in order. Read Requests and Terminates are never placed early:
//! acting on them is delivery. Nothing here reports an error: a segment
//! that fails these checks waits for the in-order path, which reports what
//! it finds exactly as for any other segment (draft-williams-iwarp-ift-01
//! §8: "the error MUST NOT be reported speculatively").

use crate::ddp::{SegmentHeader, UntaggedHeader};
use crate::framing::UlpduSink;
use crate::memory::RegionSlice;

use super::error::ProtocolError;
use super::opcode::{Opcode, QN_SEND};
use super::queue_pair::QueuePair;
use super::rx::{fits_buffer, mo_in_buffer, parse_opcode};

impl QueuePair {
    /// Where the payload of a ULPDU of `ulpdu_len` octets that begins with
    /// `header` (its first octets, at least the whole DDP header) may be
    /// placed ahead of delivery, if it may: the slice its payload fills.
    /// `None` when the stream has stopped, the ULPDU carries no payload, or
    /// a check fails or depends on segments not yet delivered.
    //= rfc5041#5.3
    //# At the Data Sink, DDP (Note: The following rules are motivated by LLP implementations
    //# that separate Placement and Delivery.): * MAY perform Placement of DDP Segments out of
    //# order,
    pub fn early_target(&self, header: &[u8], ulpdu_len: usize) -> Option<RegionSlice> {
        if !self.is_receiving() {
            return None;
        }
        let (parsed, opcode) = parse_opcode(header)?;
        let len = ulpdu_len.checked_sub(parsed.buffer_len())?;
        if len == 0 {
            return None;
        }
        match parsed {
            SegmentHeader::Tagged(h) => {
                if opcode == Opcode::ReadResponse {
                    // Inside the sink of a Read still outstanding: where the
                    // in-order path will check it against the head.
                    let end = h.to.checked_add(len as u64)?;
                    let asked = self.orq.iter().any(|r| {
                        r.sink_stag == h.stag
                            && h.to >= r.sink_to
                            && end <= r.sink_to.saturating_add(u64::from(r.len))
                    });
                    if !asked {
                        return None;
                    }
                }
                self.tagged_region(&h, len).ok()
            }
            SegmentHeader::Untagged(h) => self.send_buffer(opcode, &h, len),
        }
    }

    /// The receive buffer a Send segment fills: the receive posted for its
    /// MSN, checks 1 to 4 of RFC 5041 §7.1 passed: the combination of QN
    /// and MSN names the message (RFC 5041 §5.2), and so the buffer.
    fn send_buffer(&self, opcode: Opcode, h: &UntaggedHeader, len: usize) -> Option<RegionSlice> {
        if h.qn != QN_SEND || opcode.queue() != Some(QN_SEND) {
            return None;
        }
        let ahead = h.msn.wrapping_sub(self.expected_msn(QN_SEND)?) as usize;
        let recv = self.rq.get(ahead)?;
        let (cap, mo) = (recv.len as usize, h.mo as usize);
        if !mo_in_buffer(cap, mo, len) || !fits_buffer(cap, mo, len) {
            return None;
        }
        recv.buffer.as_ref()?.sub(mo, len)
    }
}

/// Octets passed for payload that was placed already, where the in-order
/// path refuses the segment: counted, never written.
static NOTHING: [u8; 1024] = [0; 1024];

impl QueuePair {
    /// Delivers in order a ULPDU of `ulpdu_len` octets whose payload was
    /// placed ahead of delivery into `placed` (what
    /// [`QueuePair::early_target`] gave for it), `header` being its DDP
    /// header. It goes through the same receive path as any ULPDU: every
    /// check in order, then completion or the error, exactly as if its
    /// octets were passed through [`UlpduSink`]; only its payload is not
    /// written again, and the memory table is not asked again while the
    /// STag stays valid (the verdict it gave at placement stands; see
    /// `tagged_target` in `rx.rs`). Should the in-order checks name
    /// another target (they cannot while the STag or the receive stays
    /// what it was), the segment fails as one whose STag went invalid.
    pub fn deliver_placed(
        &mut self,
        header: &[u8],
        ulpdu_len: usize,
        placed: RegionSlice,
    ) -> Result<(), ProtocolError> {
        self.ulpdu_begin(ulpdu_len)?;
        self.offer_placed(placed);
        self.ulpdu_header(header)?;
        let mut left = ulpdu_len.saturating_sub(header.len());
        if left > 0 {
            if self.count_placed() == Some(true) {
                left = 0;
            }
            // A segment the in-order checks refused: its payload counts
            // towards its length and goes nowhere, as in order.
            while left > 0 {
                let n = left.min(NOTHING.len());
                self.ulpdu_data(&NOTHING[..n])?;
                left -= n;
            }
        }
        self.ulpdu_end()
    }
}
