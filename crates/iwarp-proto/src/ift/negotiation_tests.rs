//! Tests of the two-phase negotiation: the state machine for each role,
//! the settlement of every flag combination, and the hand-off of the
//! octets that follow an indication to the frame receiver.

use super::indication::INDICATION_LEN;
use super::*;
use crate::framing::{CollectUlpdus, Deframer, Framer, LlpErrorCode, WireBatch};
use proptest::prelude::*;
use std::time::{Duration, Instant};

/// Runs A (initiator) and B (responder) back to back, passing every octet
/// in one piece, until neither has anything to send.
fn run_pair(a: IftConfig, b: IftConfig) -> (Negotiation, Negotiation) {
    let now = Instant::now();
    let mut na = Negotiation::new(Role::Initiator, a, now);
    let mut nb = Negotiation::new(Role::Responder, b, now);
    loop {
        let mut moved = false;
        if let Some(out) = na.poll_transmit() {
            let _ = nb.handle_input(&out);
            moved = true;
        }
        if let Some(out) = nb.poll_transmit() {
            let _ = na.handle_input(&out);
            moved = true;
        }
        if !moved {
            break;
        }
    }
    // A responder that refuses phase 0 just closes.
    if nb.error().is_some() {
        let _ = na.handle_eof();
    }
    (na, nb)
}

/// A configuration built from an 8-bit pattern (R, HC, PC, check HC,
/// check PC, SP, SM, RM) and a VTag.
fn config_from(bits: u16, vtag: u16) -> IftConfig {
    let on = |n: u16| bits & (1 << n) != 0;
    IftConfig {
        rdma: on(0),
        header_crc: on(1),
        payload_crc: on(2),
        check_header_crc: on(3),
        check_payload_crc: on(4),
        permit_speculative_placement: on(5),
        send_markers: on(6),
        receive_markers: if on(7) {
            MarkerInterval::new(256 + vtag % 512)
        } else {
            None
        },
        ..IftConfig::new(vtag)
    }
}

/// Every combination of both ends' flags (2^8 each, 65536 pairs) with the
/// default acceptance policy: the ends agree exactly when their R bits do,
/// and then what one end sends is what the other expects.
#[test]
fn every_flag_combination_settles_consistently() {
    for a_bits in 0..256u16 {
        for b_bits in 0..256u16 {
            let (a, b) = (config_from(a_bits, 0x1111), config_from(b_bits, 0x2222));
            let (na, nb) = run_pair(a, b);
            if a.rdma != b.rdma {
                assert!(matches!(
                    nb.error(),
                    Some(NegotiationError::ModeMismatch { .. })
                ));
                assert_eq!(na.error(), Some(NegotiationError::Closed { received: 0 }));
                continue;
            }
            let (pa, pb) = (na.params().unwrap(), nb.params().unwrap());
            assert_eq!(pa.mode, pb.mode);
            for (from, to, cfg_from, cfg_to) in [(pa, pb, a, b), (pb, pa, b, a)] {
                // Presence: the sender's HC / PC.
                assert_eq!(from.tx.header_crc, cfg_from.header_crc);
                assert_eq!(from.tx.payload_crc, cfg_from.payload_crc);
                assert_eq!(to.rx.header_crc.present(), from.tx.header_crc);
                assert_eq!(to.rx.payload_crc.present(), from.tx.payload_crc);
                // Checking: the receiver's IH / IP.
                assert_eq!(
                    to.rx.header_crc == RxCrc::Checked,
                    cfg_from.header_crc && cfg_to.check_header_crc
                );
                assert_eq!(
                    to.rx.payload_crc == RxCrc::Checked,
                    cfg_from.payload_crc && cfg_to.check_payload_crc
                );
                // Markers: sender's SM and receiver's RM, receiver's interval.
                let markers = if cfg_from.send_markers {
                    cfg_to.receive_markers
                } else {
                    None
                };
                assert_eq!(from.tx.markers, markers);
                assert_eq!(to.rx.markers, markers);
                // VTag: the receiver's.
                assert_eq!(from.tx.vtag, cfg_to.vtag);
                assert_eq!(to.rx.vtag, cfg_to.vtag);
                // Speculative placement: the sender permits the receiver.
                assert_eq!(to.may_speculate, cfg_from.permit_speculative_placement);
                assert_eq!(
                    from.peer_may_speculate,
                    cfg_from.permit_speculative_placement
                );
            }
        }
    }
}

#[test]
fn defaults_settle_rdma_mode_with_both_crcs_checked_both_ways() {
    let (na, nb) = run_pair(IftConfig::new(0xaaaa), IftConfig::new(0xbbbb));
    let pa = na.params().unwrap();
    assert_eq!(pa.mode, Mode::Rdma);
    assert_eq!(
        pa.tx,
        TxParams {
            header_crc: true,
            payload_crc: true,
            markers: None,
            vtag: 0xbbbb
        }
    );
    assert_eq!(
        pa.rx,
        RxParams {
            header_crc: RxCrc::Checked,
            payload_crc: RxCrc::Checked,
            markers: None,
            vtag: 0xaaaa
        }
    );
    assert!(!pa.may_speculate && !pa.peer_may_speculate);
    assert_eq!(nb.params().unwrap().tx.vtag, 0xaaaa);
    assert_eq!(na.peer_indication().unwrap().vtag, 0xbbbb);
    assert_eq!(nb.peer_indication().unwrap().phase, Phase::Zero);
}

#[test]
fn ddp_mode_when_both_clear_r() {
    let ddp = IftConfig {
        rdma: false,
        ..IftConfig::new(1)
    };
    let (na, nb) = run_pair(ddp, ddp);
    assert_eq!(na.params().unwrap().mode, Mode::Ddp);
    assert_eq!(nb.params().unwrap().mode, Mode::Ddp);
}

/// §4.2 R: "If ends disagree, then the connection MUST be closed in error",
/// whichever end detects it.
#[test]
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# If ends disagree, then the connection MUST be closed in error.
fn mismatched_r_is_an_error_for_both_roles() {
    let rdma = IftConfig::new(1);
    let ddp = IftConfig {
        rdma: false,
        ..rdma
    };
    for (a, b) in [(rdma, ddp), (ddp, rdma)] {
        let (na, nb) = run_pair(a, b);
        let err = nb.error().unwrap();
        assert_eq!(
            err,
            NegotiationError::ModeMismatch {
                ours: if b.rdma { Mode::Rdma } else { Mode::Ddp },
                peer: if a.rdma { Mode::Rdma } else { Mode::Ddp },
            }
        );
        assert_eq!(err.llp_code(), LlpErrorCode::InvalidStartupFrame);
        // B does not answer, so A sees the connection close.
        assert_eq!(na.error(), Some(NegotiationError::Closed { received: 0 }));
        // A detects the same disagreement from B's indication.
        let peer = b.indication(Phase::One);
        assert!(matches!(
            settle(&a, &peer),
            Err(NegotiationError::ModeMismatch { .. })
        ));
    }
}

/// IH / IP: the sender of the indication will not check the CRC the
/// other end sends. The other end still sends it (its HC / PC decides the
/// field's presence); the indication's sender reads it unchecked.
#[test]
fn ih_and_ip_leave_the_field_on_the_wire_but_unchecked() {
    let a = IftConfig {
        check_header_crc: false,
        check_payload_crc: false,
        ..IftConfig::new(1)
    };
    let (na, nb) = run_pair(a, IftConfig::new(2));
    let (pa, pb) = (na.params().unwrap(), nb.params().unwrap());
    assert!(na.config().indication(Phase::Zero).ignore_header_crc);
    assert!(pb.tx.header_crc && pb.tx.payload_crc);
    assert_eq!(pa.rx.header_crc, RxCrc::Ignored);
    assert_eq!(pa.rx.payload_crc, RxCrc::Ignored);
    // The other direction is untouched.
    assert_eq!(pb.rx.header_crc, RxCrc::Checked);
}

/// §4.2 IH / IP: "If this is unacceptable to the receiver of the adaption
/// indication, the connection should be closed", for either role, and only
/// when that receiver sends the CRC in question.
#[test]
fn a_peer_ignoring_our_crc_can_be_refused() {
    let ignores = IftConfig {
        check_header_crc: false,
        check_payload_crc: false,
        ..IftConfig::new(1)
    };
    let insists = IftConfig {
        require_header_crc_checked: true,
        ..IftConfig::new(2)
    };
    // B insists, A ignores: B refuses phase 0.
    let (_, nb) = run_pair(ignores, insists);
    assert_eq!(nb.error(), Some(NegotiationError::HeaderCrcIgnored));
    // A insists, B ignores: A refuses phase 1 (B has already settled).
    let (na, nb) = run_pair(insists, ignores);
    assert_eq!(na.error(), Some(NegotiationError::HeaderCrcIgnored));
    assert!(nb.params().is_some());
    // Payload likewise.
    let insists_p = IftConfig {
        require_payload_crc_checked: true,
        ..IftConfig::new(2)
    };
    let (_, nb) = run_pair(ignores, insists_p);
    assert_eq!(nb.error(), Some(NegotiationError::PayloadCrcIgnored));
    // Insisting is moot when we send no such CRC.
    let insists_without = IftConfig {
        header_crc: false,
        payload_crc: false,
        require_payload_crc_checked: true,
        require_header_crc_checked: true,
        ..IftConfig::new(2)
    };
    let (na, nb) = run_pair(ignores, insists_without);
    assert!(na.params().is_some() && nb.params().is_some());
}

/// §4.2 HC / PC: the sender's choice to use or not use a CRC may be
/// unacceptable to the receiver, which then aborts.
#[test]
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# If the senders choice to use or not use a header CRC is unacceptable to the receiver, the
//# receiver SHOULD abort the connection.
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# If the senders choice to use or not use a payload CRC is unacceptable to the receiver, the
//# receiver SHOULD abort the connection.
fn crc_demands_on_the_peer() {
    let no_crcs = IftConfig {
        header_crc: false,
        payload_crc: false,
        ..IftConfig::new(1)
    };
    let crcs = IftConfig::new(2);
    let demand = |h: CrcDemand, p: CrcDemand| IftConfig {
        peer_header_crc: h,
        peer_payload_crc: p,
        ..IftConfig::new(3)
    };
    let cases = [
        (
            no_crcs,
            demand(CrcDemand::Required, CrcDemand::Any),
            Some(NegotiationError::HeaderCrcUnacceptable { peer_sends: false }),
        ),
        (
            no_crcs,
            demand(CrcDemand::Any, CrcDemand::Required),
            Some(NegotiationError::PayloadCrcUnacceptable { peer_sends: false }),
        ),
        (
            crcs,
            demand(CrcDemand::Forbidden, CrcDemand::Any),
            Some(NegotiationError::HeaderCrcUnacceptable { peer_sends: true }),
        ),
        (
            crcs,
            demand(CrcDemand::Any, CrcDemand::Forbidden),
            Some(NegotiationError::PayloadCrcUnacceptable { peer_sends: true }),
        ),
        (crcs, demand(CrcDemand::Required, CrcDemand::Required), None),
        (
            no_crcs,
            demand(CrcDemand::Forbidden, CrcDemand::Forbidden),
            None,
        ),
        (crcs, demand(CrcDemand::Any, CrcDemand::Any), None),
    ];
    for (sender, receiver, expected) in cases {
        // The demanding end as B (judges phase 0) and as A (judges phase 1).
        let (_, nb) = run_pair(sender, receiver);
        assert_eq!(nb.error(), expected);
        let (na, _) = run_pair(receiver, sender);
        assert_eq!(na.error(), expected);
    }
}

#[test]
fn markers_need_sm_on_one_end_and_rm_on_the_other() {
    let interval = MarkerInterval::new(1000).unwrap();
    let sends = IftConfig {
        send_markers: true,
        ..IftConfig::new(1)
    };
    let wants = IftConfig {
        receive_markers: Some(interval),
        ..IftConfig::new(2)
    };
    let (na, nb) = run_pair(sends, wants);
    assert_eq!(na.params().unwrap().tx.markers, Some(interval));
    assert_eq!(nb.params().unwrap().rx.markers, Some(interval));
    assert_eq!(na.params().unwrap().rx.markers, None);
    assert_eq!(nb.params().unwrap().tx.markers, None);
    // RM without the peer's SM: no markers, and no error (§4.2 RM: "if and
    // only if").
    let (na, nb) = run_pair(wants, IftConfig::new(3));
    assert_eq!(na.params().unwrap().rx.markers, None);
    assert_eq!(nb.params().unwrap().tx.markers, None);
}

#[test]
fn responder_answers_only_after_phase_0_and_only_once() {
    let now = Instant::now();
    let mut na = Negotiation::new(Role::Initiator, IftConfig::new(1), now);
    let mut nb = Negotiation::new(Role::Responder, IftConfig::new(2), now);
    assert_eq!(nb.poll_transmit(), None);
    let phase0 = na.poll_transmit().unwrap();
    assert_eq!(na.poll_transmit(), None);
    assert_eq!(phase0[11] & 0x80, 0, "PH clear");
    assert_eq!(phase0[8] & 0x80, 0, "PH clear");
    // One octet at a time: nothing until the 64th.
    for (i, octet) in phase0.iter().enumerate() {
        assert_eq!(nb.status(), Status::Negotiating);
        assert_eq!(
            nb.handle_input(std::slice::from_ref(octet)),
            Ok(1),
            "octet {i}"
        );
    }
    let phase1 = nb.poll_transmit().unwrap();
    assert_eq!(nb.poll_transmit(), None);
    assert_eq!(phase1[8] & 0x80, 0x80, "PH set");
    assert!(nb.params().is_some());
    assert_eq!(na.handle_input(&phase1), Ok(INDICATION_LEN));
    assert!(na.params().is_some());
}

/// The octets after the peer's indication are not consumed: node B may
/// send frames right behind phase 1, in the same TCP segment.
#[test]
fn octets_after_the_indication_go_to_the_frame_receiver() {
    let now = Instant::now();
    let mut na = Negotiation::new(Role::Initiator, IftConfig::new(0xa), now);
    let mut nb = Negotiation::new(Role::Responder, IftConfig::new(0xb), now);
    nb.handle_input(&na.poll_transmit().unwrap()).unwrap();
    let mut tx = IftTransmitter::new(nb.params().unwrap().tx);
    let mut stream = nb.poll_transmit().unwrap().to_vec();
    let mut batch = WireBatch::new();
    let payload = b"right behind phase 1";
    tx.frame(&[0x41; 18], &[payload], &mut batch).unwrap();
    batch.write_to(&[payload], &mut stream);
    for chunk in [1, 7, 64, 65, stream.len()] {
        let mut na = na.clone();
        let mut rx = None;
        let mut sink = CollectUlpdus::new();
        for piece in stream.chunks(chunk) {
            let used = na.handle_input(piece).unwrap();
            let rest = &piece[used..];
            if let Some(params) = na.params() {
                let rx = rx.get_or_insert_with(|| IftReceiver::new(params.rx));
                assert_eq!(rx.receive(rest, &mut sink), Ok(rest.len()));
            } else {
                assert!(rest.is_empty());
            }
        }
        assert_eq!(sink.complete, vec![[&[0x41; 18][..], payload].concat()]);
        assert_eq!(na.handle_input(b"more"), Ok(0));
    }
    let _ = na.poll_transmit();
}

#[test]
fn two_initiators_or_two_responders_do_not_settle() {
    let now = Instant::now();
    let mut a1 = Negotiation::new(Role::Initiator, IftConfig::new(1), now);
    let mut a2 = Negotiation::new(Role::Initiator, IftConfig::new(2), now);
    let (o1, o2) = (a1.poll_transmit().unwrap(), a2.poll_transmit().unwrap());
    let expected = NegotiationError::WrongPhase {
        expected: Phase::One,
        found: Phase::Zero,
    };
    assert_eq!(a1.handle_input(&o2), Err(expected));
    assert_eq!(a2.handle_input(&o1), Err(expected));
    // Two responders wait for each other until the timeout.
    let mut b = Negotiation::new(Role::Responder, IftConfig::new(3), now);
    assert_eq!(b.poll_transmit(), None);
    assert_eq!(b.poll_timeout(), Some(now + Duration::from_secs(10)));
    // A phase 1 sent to a responder is refused too.
    let mut b2 = Negotiation::new(Role::Responder, IftConfig::new(4), now);
    let phase1 = IftConfig::new(5).indication(Phase::One).to_bytes();
    assert_eq!(
        b2.handle_input(&phase1),
        Err(NegotiationError::WrongPhase {
            expected: Phase::Zero,
            found: Phase::One
        })
    );
}

#[test]
fn timeout_fails_only_after_the_deadline() {
    let now = Instant::now();
    let cfg = IftConfig {
        timeout: Duration::from_secs(5),
        ..IftConfig::new(1)
    };
    let mut n = Negotiation::new(Role::Initiator, cfg, now);
    let deadline = n.poll_timeout().unwrap();
    assert_eq!(deadline, now + Duration::from_secs(5));
    assert_eq!(n.handle_timeout(now + Duration::from_secs(4)), Ok(()));
    assert_eq!(n.status(), Status::Negotiating);
    let err = n.handle_timeout(deadline).unwrap_err();
    assert_eq!(err, NegotiationError::Timeout);
    assert_eq!(err.llp_code(), LlpErrorCode::ConnectionLost);
    assert_eq!(n.poll_timeout(), None);
    // Sticky: a late indication changes nothing.
    let late = IftConfig::new(2).indication(Phase::One).to_bytes();
    assert_eq!(n.handle_input(&late), Err(NegotiationError::Timeout));
    // A timeout too long to represent never expires.
    let forever = IftConfig {
        timeout: Duration::MAX,
        ..IftConfig::new(1)
    };
    let mut n = Negotiation::new(Role::Responder, forever, now);
    assert_eq!(n.poll_timeout(), None);
    assert_eq!(n.handle_timeout(now + Duration::from_secs(1 << 40)), Ok(()));
    // Once done, time no longer matters.
    let (mut na, _) = run_pair(IftConfig::new(1), IftConfig::new(2));
    assert_eq!(na.poll_timeout(), None);
    assert_eq!(na.handle_timeout(now + Duration::from_secs(3600)), Ok(()));
    assert!(na.params().is_some());
}

#[test]
fn eof_before_the_indication_is_complete_fails() {
    let now = Instant::now();
    let mut n = Negotiation::new(Role::Responder, IftConfig::new(1), now);
    let phase0 = IftConfig::new(2).indication(Phase::Zero).to_bytes();
    assert_eq!(n.handle_input(&phase0[..40]), Ok(40));
    let err = n.handle_eof().unwrap_err();
    assert_eq!(err, NegotiationError::Closed { received: 40 });
    assert_eq!(err.llp_code(), LlpErrorCode::ConnectionLost);
    assert_eq!(n.handle_input(&phase0[40..]), Err(err));
    assert_eq!(n.poll_transmit(), None);
    // After the indication, EOF is the frame receiver's business.
    let (mut na, _) = run_pair(IftConfig::new(1), IftConfig::new(2));
    assert_eq!(na.handle_eof(), Ok(()));
    assert!(na.params().is_some());
}

#[test]
fn a_non_ift_peer_is_rejected_after_four_octets() {
    let mut n = Negotiation::new(Role::Responder, IftConfig::new(1), Instant::now());
    assert_eq!(n.handle_input(b"MPA"), Ok(3));
    let err = n.handle_input(b" ID Req Frame").unwrap_err();
    assert_eq!(
        err,
        NegotiationError::Indication(IndicationError::BadMagic { found: 0x4d50_4120 })
    );
    assert_eq!(err.llp_code(), LlpErrorCode::InvalidStartupFrame);
    assert_eq!(n.poll_transmit(), None);
}

#[test]
fn a_damaged_indication_is_refused_and_not_answered() {
    let mut n = Negotiation::new(Role::Responder, IftConfig::new(1), Instant::now());
    let mut phase0 = IftConfig::new(2).indication(Phase::Zero).to_bytes();
    phase0[13] ^= 1; // the VTag
    assert!(matches!(
        n.handle_input(&phase0),
        Err(NegotiationError::Indication(IndicationError::BadCrc { .. }))
    ));
    assert_eq!(n.poll_transmit(), None);
    assert!(n.peer_indication().is_none());
}

proptest! {
    /// Arbitrary octets into either role never panic, never consume more
    /// than 64 octets, and chunking does not change the outcome.
    #[test]
    fn arbitrary_input_never_panics_and_chunking_does_not_matter(
        responder in any::<bool>(),
        data in prop::collection::vec(any::<u8>(), 0..200),
        valid_prefix in any::<bool>(),
        chunk in 1usize..70,
    ) {
        let role = if responder { Role::Responder } else { Role::Initiator };
        let mut data = data;
        if valid_prefix && data.len() >= 64 {
            let phase = if responder { Phase::Zero } else { Phase::One };
            data[..64].copy_from_slice(&IftConfig::new(9).indication(phase).to_bytes());
        }
        let now = Instant::now();
        let feed = |chunk: usize| {
            let mut n = Negotiation::new(role, IftConfig::new(1), now);
            let mut consumed = 0;
            for piece in data.chunks(chunk) {
                match n.handle_input(piece) {
                    Ok(used) => {
                        assert!(used <= piece.len());
                        consumed += used;
                        if used < piece.len() {
                            assert!(n.params().is_some());
                        }
                    }
                    Err(_) => break,
                }
            }
            assert!(consumed <= INDICATION_LEN);
            (n.status(), consumed.min(INDICATION_LEN))
        };
        let (whole, _) = feed(data.len().max(1));
        let (chunked, _) = feed(chunk);
        prop_assert_eq!(whole, chunked);
        if valid_prefix && data.len() >= 64 {
            prop_assert!(matches!(whole, Status::Done(_)));
        }
    }
}
