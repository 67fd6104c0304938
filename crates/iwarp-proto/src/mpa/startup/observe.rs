//! What a Request and its Reply settle, seen from outside: for a capture
//! decoder, which has both frames and neither end's configuration.
//!
//! The same rules the two machines apply ([`super::negotiate`]) are applied
//! to the two frames as they were sent, so an observer follows exactly the
//! framing and Read depths the stack itself would have agreed to.

use super::config::IrdOrdNegotiation;
use super::enhanced::{IrdOrd, RtrType};
use super::frame::{Revision, StartupFrameRepr};
use super::negotiate;
use crate::mpa::FramingParams;

/// The outcome of a Request/Reply pair, as both ends apply it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// The revision of the Reply, which both ends use.
    pub revision: Revision,
    /// The responder rejected the connection: MPA is over, no FPDUs
    /// follow.
    pub rejected: bool,
    /// The initiator's framing (its `send_markers` are the markers in what
    /// it sends; `receive_markers` in what it receives). The responder's
    /// is the mirror image.
    pub initiator_framing: FramingParams,
    /// The initiator's IRD and ORD once the Reply is in, and the
    /// responder's as its Reply states them (RFC 6581); `None` without
    /// enhanced data in both frames.
    pub ird_ord: Option<(IrdOrd, IrdOrd)>,
    /// The RTR message of peer-to-peer mode, when the Reply confirms it and
    /// selects one the Request offered.
    pub rtr: Option<RtrType>,
}

impl Observed {
    /// The framing of the responder's end.
    pub fn responder_framing(&self) -> FramingParams {
        self.initiator_framing.mirrored()
    }
}

/// Applies the startup rules to a `request` and the `reply` it got.
///
/// RFC 5044 §7.1.1: CRC is on if either frame set C; each M asks for
/// markers in what its sender receives. RFC 6581: the initiator's ORD drops
/// to the responder's IRD and its IRD to the responder's ORD (relaxed, as
/// Linux `siw` negotiates: an observer reports, it does not refuse).
pub fn observe(request: &StartupFrameRepr<'_>, reply: &StartupFrameRepr<'_>) -> Observed {
    let crc = request.crc || reply.crc;
    let initiator_framing = negotiate::framing(request.markers, reply.markers, crc);
    let ird_ord = match (request.enhanced, reply.enhanced) {
        (Some(req), Some(rep)) => {
            negotiate::initiator_ird_ord(req.ird_ord(), rep.ird_ord(), IrdOrdNegotiation::Relaxed)
                .ok()
                .map(|initiator| (initiator, rep.ird_ord()))
        }
        _ => None,
    };
    let rtr = match (request.enhanced, reply.enhanced) {
        (Some(req), Some(rep)) if req.peer_to_peer && rep.peer_to_peer => {
            negotiate::check_reply_rtr(req.rtr, Some(&rep)).ok()
        }
        _ => None,
    };
    Observed {
        revision: reply.revision,
        rejected: reply.rejected,
        initiator_framing,
        ird_ord,
        rtr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpa::startup::{EnhancedData, FrameKind, RtrTypes};

    fn frame(
        kind: FrameKind,
        m: bool,
        c: bool,
        enhanced: Option<EnhancedData>,
    ) -> StartupFrameRepr<'static> {
        StartupFrameRepr {
            kind,
            markers: m,
            crc: c,
            rejected: false,
            revision: Revision::Rev2,
            enhanced,
            private_data: &[],
        }
    }

    #[test]
    fn crc_either_markers_per_receiver_ird_ord_swapped() {
        let req = frame(
            FrameKind::Request,
            true,
            false,
            Some(EnhancedData {
                ird: 4,
                ord: 32,
                ..EnhancedData::default()
            }),
        );
        let rep = frame(
            FrameKind::Reply,
            false,
            true,
            Some(EnhancedData {
                ird: 16,
                ord: 4,
                ..EnhancedData::default()
            }),
        );
        let o = observe(&req, &rep);
        assert!(o.initiator_framing.crc);
        assert!(o.initiator_framing.receive_markers);
        assert!(!o.initiator_framing.send_markers);
        assert!(o.responder_framing().send_markers);
        assert_eq!(o.ird_ord, Some((IrdOrd::new(4, 16), IrdOrd::new(16, 4))));
        assert_eq!(o.rtr, None);
    }

    #[test]
    fn peer_to_peer_rtr() {
        let offer = EnhancedData {
            ird: 1,
            ord: 1,
            peer_to_peer: true,
            rtr: RtrTypes::WRITE_READ,
        };
        let pick = EnhancedData {
            rtr: RtrTypes::only(RtrType::Read),
            ..offer
        };
        let o = observe(
            &frame(FrameKind::Request, false, false, Some(offer)),
            &frame(FrameKind::Reply, false, false, Some(pick)),
        );
        assert_eq!(o.rtr, Some(RtrType::Read));
        assert!(!o.initiator_framing.crc);
    }
}
