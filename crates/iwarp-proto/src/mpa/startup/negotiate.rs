//! The negotiation rules of the startup phase, as pure functions.
//!
//! Both machines call these, so the two ends of a connection apply one
//! rule set: revision, markers and CRC (RFC 5044 §7.1.1), IRD/ORD and the
//! RTR type of peer-to-peer mode (RFC 6581).

use super::config::{CrcPolicy, IrdOrdNegotiation, StartupConfig};
use super::enhanced::{EnhancedData, IrdOrd, RtrType, RtrTypes};
use super::error::StartupError;
use super::frame::Revision;
use super::Role;
use crate::mpa::FramingParams;

/// The framing both ends use, from this end's point of view.
///
/// RFC 5044 §7.1.1: each M bit declares the markers its sender needs to
/// *receive*; CRC is on if either frame set C.
pub(crate) fn framing(our_m: bool, peer_m: bool, crc: bool) -> FramingParams {
    FramingParams {
        crc,
        send_markers: peer_m,
        receive_markers: our_m,
    }
}

/// Whether CRC is on, given our policy and the peer's C bit.
///
/// RFC 5044 §7.1.1 C: "When this bit is '1' in either the MPA Request Frame
/// or MPA Reply Frame, CRCs MUST be generated and checked by both
/// endpoints."
pub(crate) fn crc_in_use(policy: CrcPolicy, peer_c: bool) -> bool {
    policy.sends_crc() || peer_c
}

/// Checks the peer's C bit against a [`CrcPolicy::Required`] policy.
pub(crate) fn check_crc(
    policy: CrcPolicy,
    peer_c: bool,
    detected_by: Role,
) -> Result<(), StartupError> {
    if policy == CrcPolicy::Required && !peer_c {
        Err(StartupError::CrcRefused { detected_by })
    } else {
        Ok(())
    }
}

/// Checks that this end can honour the peer's M bit.
pub(crate) fn check_markers(
    config: &StartupConfig,
    peer_m: bool,
    detected_by: Role,
) -> Result<(), StartupError> {
    if peer_m && !config.send_markers_on_request {
        Err(StartupError::MarkersRefused { detected_by })
    } else {
        Ok(())
    }
}

/// The revision a responder replies with: the lower of the request's and
/// its own highest, provided that is not below its lowest (RFC 5044 §7.1.1
/// Rev: a receiver that cannot interoperate closes).
pub(crate) fn responder_revision(
    config: &StartupConfig,
    requested: Revision,
) -> Result<Revision, StartupError> {
    let reply = requested.min(config.max_revision);
    if reply < config.min_revision {
        Err(StartupError::UnsupportedRevision {
            revision: requested.wire(),
        })
    } else {
        Ok(reply)
    }
}

/// Checks the revision of a Reply: at most what the initiator requested,
/// at least its configured lowest.
pub(crate) fn check_reply_revision(
    config: &StartupConfig,
    requested: Revision,
    replied: Revision,
) -> Result<(), StartupError> {
    if replied > requested {
        Err(StartupError::ReplyRevisionTooHigh {
            requested,
            replied: replied.wire(),
        })
    } else if replied < config.min_revision {
        Err(StartupError::UnsupportedRevision {
            revision: replied.wire(),
        })
    } else {
        Ok(())
    }
}

/// The responder's IRD and ORD (RFC 6581): the initiator's ORD becomes its
/// IRD and the initiator's IRD its ORD, each limited by what it has.
pub(crate) fn responder_ird_ord(initiator: IrdOrd, limits: IrdOrd) -> IrdOrd {
    IrdOrd {
        ird: initiator.ord.min(limits.ird),
        ord: initiator.ird.min(limits.ord),
    }
}

/// The initiator's IRD and ORD once the Reply is in (RFC 6581).
///
/// Our ORD drops to the responder's IRD: we may not have more Reads
/// outstanding than it serves. Our IRD becomes the responder's ORD: it may
/// have that many Reads outstanding, and every one of them must be
/// served. A responder ORD above our IRD is insufficient IRD: strict
/// negotiation fails the startup with LLP code 0x06; relaxed negotiation
/// raises our IRD to it, as Linux siw does (siw_proc_mpareply). Either
/// way the connection never starts with an IRD that would refuse, with a
/// Terminate later, a Read the responder was entitled to send.
pub(crate) fn initiator_ird_ord(
    ours: IrdOrd,
    reply: IrdOrd,
    mode: IrdOrdNegotiation,
) -> Result<IrdOrd, StartupError> {
    if reply.ord > ours.ird && mode == IrdOrdNegotiation::Strict {
        return Err(StartupError::InsufficientIrd {
            ird: ours.ird,
            peer_ord: reply.ord,
        });
    }
    Ok(IrdOrd {
        ird: reply.ord,
        ord: ours.ord.min(reply.ird),
    })
}

/// The RTR types an end can take part in with `ird_ord` (its own IRD and
/// ORD): a zero-length Read RTR still takes an ORD slot at the initiator
/// and an IRD slot at the responder, so with a 0 there it is out.
pub(crate) fn usable_rtr(types: RtrTypes, role: Role, ird_ord: Option<IrdOrd>) -> RtrTypes {
    let slots = ird_ord.map(|v| match role {
        Role::Initiator => v.ord,
        Role::Responder => v.ird,
    });
    RtrTypes {
        read: types.read && slots != Some(0),
        ..types
    }
}

/// The RTR type a responder picks: one the initiator offered and the
/// responder accepts, preferring Write, then Read, then Send.
pub(crate) fn select_rtr(offered: RtrTypes, acceptable: RtrTypes) -> Option<RtrType> {
    let both = offered.intersection(acceptable);
    RtrType::PREFERENCE.into_iter().find(|t| both.contains(*t))
}

/// The RTR type the initiator sends, from the Reply's selection: one of
/// the selected types that was offered (RFC 6581, code 0x07 if there is
/// none). A Reply without enhanced data selects nothing.
///
/// A responder should select exactly one type, but a Reply that selects
/// several is taken as Linux siw takes it: any type in common will do, and
/// the initiator sends the one the responder would prefer (Write, then
/// Read, then Send), since every selected type is one the responder said
/// it accepts.
pub(crate) fn check_reply_rtr(
    offered: RtrTypes,
    reply: Option<&EnhancedData>,
) -> Result<RtrType, StartupError> {
    let selected = reply.map(|e| e.rtr).unwrap_or(RtrTypes::NONE);
    match select_rtr(offered, selected) {
        Some(rtr) => Ok(rtr),
        None => Err(StartupError::NoMatchingRtr {
            offered,
            other: selected,
            detected_by: Role::Initiator,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::enhanced::MAX_IRD_ORD;
    use super::*;

    fn cfg(min: Revision, max: Revision) -> StartupConfig {
        StartupConfig {
            min_revision: min,
            max_revision: max,
            ..StartupConfig::default()
        }
    }

    #[test]
    fn crc_is_on_if_either_side_asks() {
        for policy in [CrcPolicy::Required, CrcPolicy::Preferred, CrcPolicy::Off] {
            for peer in [false, true] {
                let expected = policy != CrcPolicy::Off || peer;
                assert_eq!(crc_in_use(policy, peer), expected, "{policy:?} {peer}");
                let ok = policy != CrcPolicy::Required || peer;
                assert_eq!(check_crc(policy, peer, Role::Responder).is_ok(), ok);
            }
        }
    }

    #[test]
    fn markers_follow_the_receivers_m_bit() {
        for our_m in [false, true] {
            for peer_m in [false, true] {
                let f = framing(our_m, peer_m, false);
                assert_eq!(f.receive_markers, our_m);
                assert_eq!(f.send_markers, peer_m);
                assert_eq!(framing(peer_m, our_m, false), f.mirrored());
            }
        }
    }

    #[test]
    fn responder_revision_is_the_lower_within_range() {
        for lo in Revision::ALL {
            for hi in Revision::ALL.into_iter().filter(|h| *h >= lo) {
                for req in Revision::ALL {
                    let got = responder_revision(&cfg(lo, hi), req);
                    let want = req.min(hi);
                    if want >= lo {
                        assert_eq!(got, Ok(want));
                    } else {
                        assert_eq!(
                            got,
                            Err(StartupError::UnsupportedRevision {
                                revision: req.wire()
                            })
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn reply_revision_at_most_requested() {
        let c = cfg(Revision::Rev1, Revision::Rev2);
        assert!(check_reply_revision(&c, Revision::Rev2, Revision::Rev2).is_ok());
        assert!(check_reply_revision(&c, Revision::Rev2, Revision::Rev1).is_ok());
        assert_eq!(
            check_reply_revision(&c, Revision::Rev2, Revision::Rev0),
            Err(StartupError::UnsupportedRevision { revision: 0 })
        );
        assert_eq!(
            check_reply_revision(&c, Revision::Rev1, Revision::Rev2),
            Err(StartupError::ReplyRevisionTooHigh {
                requested: Revision::Rev1,
                replied: 2
            })
        );
    }

    #[test]
    fn ird_ord_swap_and_clamp() {
        // Initiator IRD 4 / ORD 32; responder has 16/16.
        let r = responder_ird_ord(IrdOrd::new(4, 32), IrdOrd::new(16, 16));
        assert_eq!(r, IrdOrd::new(16, 4));
        let i = initiator_ird_ord(IrdOrd::new(4, 32), r, IrdOrdNegotiation::Strict).unwrap();
        // The two ends mirror each other.
        assert_eq!(i, IrdOrd::new(r.ord, r.ird));
    }

    #[test]
    fn responder_ord_above_our_ird() {
        let ours = IrdOrd::new(2, 8);
        let reply = IrdOrd::new(8, 5);
        assert_eq!(
            initiator_ird_ord(ours, reply, IrdOrdNegotiation::Strict),
            Err(StartupError::InsufficientIrd {
                ird: 2,
                peer_ord: 5
            })
        );
        // Relaxed: our IRD rises to the responder's ORD, so that every
        // Read it may have outstanding is served.
        assert_eq!(
            initiator_ird_ord(ours, reply, IrdOrdNegotiation::Relaxed),
            Ok(IrdOrd::new(5, 8))
        );
    }

    proptest::proptest! {
        /// Whatever the Reply says, the initiator either fails with
        /// insufficient IRD or ends with an IRD that covers the
        /// responder's ORD and an ORD within the responder's IRD: never a
        /// connection whose legitimate Reads are refused later.
        #[test]
        fn initiator_never_accepts_an_ord_it_cannot_serve(
            ours_ird in 0..=MAX_IRD_ORD, ours_ord in 0..=MAX_IRD_ORD,
            reply_ird in 0..=MAX_IRD_ORD, reply_ord in 0..=MAX_IRD_ORD,
            strict: bool,
        ) {
            let mode = if strict { IrdOrdNegotiation::Strict } else { IrdOrdNegotiation::Relaxed };
            let reply = IrdOrd::new(reply_ird, reply_ord);
            match initiator_ird_ord(IrdOrd::new(ours_ird, ours_ord), reply, mode) {
                Ok(got) => {
                    proptest::prop_assert!(got.ird >= reply.ord);
                    proptest::prop_assert!(got.ord <= reply.ird && got.ord <= ours_ord);
                    proptest::prop_assert!(!strict || got.ird <= ours_ird);
                }
                Err(e) => {
                    proptest::prop_assert!(strict && reply_ord > ours_ird);
                    proptest::prop_assert_eq!(e.llp_error_code(), crate::mpa::LlpErrorCode::InsufficientIrd);
                }
            }
        }
    }

    #[test]
    fn a_read_rtr_needs_a_read_slot() {
        for role in [Role::Initiator, Role::Responder] {
            let none = match role {
                Role::Initiator => IrdOrd::new(16, 0),
                Role::Responder => IrdOrd::new(0, 16),
            };
            assert_eq!(
                usable_rtr(RtrTypes::ALL, role, Some(none)),
                RtrTypes {
                    read: false,
                    ..RtrTypes::ALL
                }
            );
            let one = IrdOrd::new(1, 1);
            assert_eq!(usable_rtr(RtrTypes::ALL, role, Some(one)), RtrTypes::ALL);
            assert_eq!(usable_rtr(RtrTypes::ALL, role, None), RtrTypes::ALL);
        }
    }

    #[test]
    fn rtr_preference_is_write_read_send() {
        assert_eq!(
            select_rtr(RtrTypes::ALL, RtrTypes::ALL),
            Some(RtrType::Write)
        );
        assert_eq!(
            select_rtr(
                RtrTypes {
                    write: false,
                    ..RtrTypes::ALL
                },
                RtrTypes::ALL
            ),
            Some(RtrType::Read)
        );
        assert_eq!(
            select_rtr(RtrTypes::only(RtrType::Send), RtrTypes::ALL),
            Some(RtrType::Send)
        );
        assert_eq!(
            select_rtr(RtrTypes::only(RtrType::Send), RtrTypes::WRITE_READ),
            None
        );
        assert_eq!(select_rtr(RtrTypes::NONE, RtrTypes::ALL), None);
    }

    #[test]
    fn reply_must_pick_a_type_offered() {
        let offered = RtrTypes::WRITE_READ;
        let pick = |rtr| EnhancedData {
            rtr,
            ..EnhancedData::default()
        };
        assert_eq!(
            check_reply_rtr(offered, Some(&pick(RtrTypes::only(RtrType::Read)))),
            Ok(RtrType::Read)
        );
        // Several selected: the preferred one in common with the offer.
        for (selected, want) in [
            (RtrTypes::WRITE_READ, RtrType::Write),
            (RtrTypes::ALL, RtrType::Write),
            (
                RtrTypes {
                    write: false,
                    ..RtrTypes::ALL
                },
                RtrType::Read,
            ),
        ] {
            assert_eq!(
                check_reply_rtr(offered, Some(&pick(selected))),
                Ok(want),
                "{selected:?}"
            );
        }
        for bad in [RtrTypes::NONE, RtrTypes::only(RtrType::Send)] {
            assert!(matches!(
                check_reply_rtr(offered, Some(&pick(bad))),
                Err(StartupError::NoMatchingRtr { .. })
            ));
        }
        assert!(check_reply_rtr(offered, None).is_err());
    }
}
