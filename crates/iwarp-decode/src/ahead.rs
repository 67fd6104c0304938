//! The placement view: what a receiver could place before a hole fills.
//!
//! The capture shows segments in the order they reached the capture
//! point. When one lands beyond a hole (a loss the sender will repair, or
//! a reordering), an in-order receiver can only hold it; an out-of-order
//! receiver ([`iwarp_proto::ooo`]) finds the PDUs it completes through the
//! markers, the lengths of PDUs found before, or the start of the segment
//! (aligned FPDUs, IFT's speculation), checks each one whole, and places
//! its payload at once. This module runs the stack's own [`Reorder`] on
//! the segments that arrive ahead of a hole and reports each PDU it finds
//! ([`Event::Placeable`]), at the frame that made it whole.
//!
//! A passive observer knows neither the receiver's STags nor its posted
//! receives, so a PDU is reported as placeable when its DDP header names a
//! buffer (an RDMA Write, a Read Response, a Send); a Read Request or a
//! Terminate is found as well, but waits for delivery. When the hole is
//! lost from the capture for good, decoding resumes at the PDU found right
//! after it, if there is one ([`Ahead::pdu_at`]).

use iwarp_proto::ift::{RxCrc, RxParams};
use iwarp_proto::mpa::{FramingParams, Placement};
use iwarp_proto::ooo::{AnyFraming, IftFraming, MpaFraming, Offer, Pdu, Reorder};
use iwarp_proto::rdmap::Opcode;

use crate::event::{CrcInfo, CrcStatus, Event, FramingKind, PduInfo, PlaceableInfo};
use crate::tcp::MAX_PENDING;
use crate::ulpdu::{interpret, HEAD};

/// The placement view of one direction.
#[derive(Debug, Clone)]
pub struct Ahead {
    reorder: Reorder<AnyFraming, ()>,
    framing: FramingKind,
    rdma: bool,
    /// How the PDUs it finds fared with their CRC (they passed it, or it
    /// is not in use).
    crc: CrcStatus,
    /// TCP stream offset of framing offset 0.
    origin: u64,
    head: Vec<u8>,
}

impl Ahead {
    /// For MPA FPDUs from TCP stream offset `origin` on; `crc`: the CRC
    /// is in use and checked.
    pub fn mpa(markers: bool, crc: bool, origin: u64) -> Self {
        let params = FramingParams {
            crc,
            send_markers: false,
            receive_markers: markers,
        };
        let framing = AnyFraming::Mpa(MpaFraming {
            params,
            placement: Placement::Verified,
        });
        let crc = if crc { CrcStatus::Ok } else { CrcStatus::Off };
        Self::new(framing, FramingKind::Mpa, true, crc, origin)
    }

    /// For IFT frames from TCP stream offset `origin` on (speculating, as
    /// a receiver with the peer's permission would).
    pub fn ift(params: RxParams, rdma: bool, origin: u64) -> Self {
        let framing = AnyFraming::Ift(IftFraming {
            params,
            may_speculate: true,
        });
        let crc = match params.payload_crc {
            RxCrc::Checked => CrcStatus::Ok,
            RxCrc::Ignored => CrcStatus::Unchecked,
            RxCrc::Absent => CrcStatus::Off,
        };
        Self::new(framing, FramingKind::Ift, rdma, crc, origin)
    }

    fn new(
        framing: AnyFraming,
        kind: FramingKind,
        rdma: bool,
        crc: CrcStatus,
        origin: u64,
    ) -> Self {
        Self {
            reorder: Reorder::new(framing, 0, MAX_PENDING, MAX_PENDING + (MAX_PENDING >> 2)),
            framing: kind,
            rdma,
            crc,
            origin,
            head: Vec::with_capacity(HEAD),
        }
    }

    fn framing_offset(&self, tcp: u64) -> u64 {
        tcp.saturating_sub(self.origin)
    }

    /// The direction has reached TCP stream offset `tcp` in order (or lost
    /// what lies before it): what is held before it goes.
    pub fn delivered(&mut self, tcp: u64) {
        let at = self.framing_offset(tcp);
        self.reorder.skip_to(at);
    }

    /// Whether a PDU found ahead starts at TCP stream offset `tcp`.
    pub fn pdu_at(&self, tcp: u64) -> bool {
        tcp >= self.origin && self.reorder.pdu_at(self.framing_offset(tcp))
    }

    /// A segment whose payload starts at TCP stream offset `start`, beyond
    /// the hole at `delivered` (the first octet not yet in order): reports
    /// each PDU it makes whole.
    pub fn segment(&mut self, start: u64, payload: &[u8], delivered: u64, events: &mut Vec<Event>) {
        self.delivered(delivered);
        if start + payload.len() as u64 <= self.origin {
            return;
        }
        let skip = usize::try_from(self.origin.saturating_sub(start)).unwrap_or(usize::MAX);
        let at = self.framing_offset(start);
        // A segment that began before framing did is no guess for a PDU.
        let segment_start = (skip == 0).then_some(at);
        let hole = self.reorder.next();
        let (kind, rdma, crc, head) = (self.framing, self.rdma, self.crc, &mut self.head);
        let payload = &payload[skip.min(payload.len())..];
        self.reorder.insert(at, payload, segment_start, &mut |pdu| {
            events.push(Event::Placeable(describe(pdu, kind, rdma, crc, hole, head)));
            // Nothing of it need be kept: the decoder reads the stream
            // in order from its own reassembly.
            Offer::Placed(())
        });
    }
}

/// The report of a PDU found ahead of the hole at `hole`.
fn describe(
    pdu: &Pdu<'_>,
    framing: FramingKind,
    rdma: bool,
    crc: CrcStatus,
    hole: u64,
    head: &mut Vec<u8>,
) -> PlaceableInfo {
    head.clear();
    for piece in pdu.ulpdu() {
        let n = piece.len().min(HEAD - head.len());
        head.extend_from_slice(&piece[..n]);
        if head.len() == HEAD {
            break;
        }
    }
    let mut errors = Vec::new();
    let interpreted = interpret(head, pdu.ulpdu_len, rdma, &mut errors);
    let names_a_buffer = interpreted
        .segment
        .is_some_and(|s| match (rdma, s.opcode()) {
            (true, Some(op)) => {
                matches!(op, Opcode::RdmaWrite | Opcode::ReadResponse) || op.is_send()
            }
            (true, None) => false,
            // DDP mode: every segment names its buffer.
            (false, _) => true,
        });
    PlaceableInfo {
        hole,
        placeable: errors.is_empty() && names_a_buffer && interpreted.payload_len > 0,
        pdu: PduInfo {
            framing,
            offset: pdu.start,
            wire_len: pdu.octets.len() as u64,
            ulpdu_len: pdu.ulpdu_len,
            crc: CrcInfo::status(crc),
            header_crc: None,
            vtag: None,
            markers: Vec::new(),
            segment: interpreted.segment,
            rdma,
            payload_len: interpreted.payload_len,
            payload: interpreted.payload,
            errors,
        },
    }
}
