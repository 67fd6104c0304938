//! Fuzzes the MPA startup phase: the Request/Reply frame codec and both
//! startup machines, fed the same octets whole and in chunks derived from
//! the input. Checks that nothing panics, that a parsed frame re-emits and
//! re-parses to itself, and that chunking never changes an outcome.

#![no_main]

use std::time::{Duration, Instant};

use iwarp_proto::mpa::startup::{
    CrcPolicy, Event, FrameKind, Initiator, IrdOrd, IrdOrdNegotiation, MpaStartup, Responder,
    Revision, RtrTypes, StartupConfig, StartupError, StartupFrame, StartupFrameRepr,
    StartupMachine, State,
};
use libfuzzer_sys::fuzz_target;

/// A configuration chosen by the bits of `sel`.
fn config(sel: u16) -> StartupConfig {
    let bit = |n: u16| sel & (1 << n) != 0;
    let revs = [Revision::Rev0, Revision::Rev1, Revision::Rev2];
    let max = revs[usize::from(sel % 3)];
    let min = revs[usize::from((sel >> 2) % 3)].min(max);
    StartupConfig {
        max_revision: max,
        min_revision: min,
        enhanced: !bit(4),
        crc: [CrcPolicy::Preferred, CrcPolicy::Off, CrcPolicy::Required]
            [usize::from((sel >> 5) % 3)],
        request_markers: bit(7),
        send_markers_on_request: !bit(8),
        ird: if bit(9) { 1 } else { 16 },
        ord: if bit(10) { 0 } else { 16 },
        ird_ord_negotiation: if bit(11) {
            IrdOrdNegotiation::Strict
        } else {
            IrdOrdNegotiation::Relaxed
        },
        peer_to_peer: bit(12) && max == Revision::Rev2 && !bit(4),
        rtr_types: RtrTypes {
            write: !bit(13),
            read: bit(14),
            send: bit(15),
        },
        max_private_data: if bit(3) { 65535 } else { 512 },
        ..StartupConfig::default()
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Summary {
    consumed: Option<usize>,
    result: Result<(), StartupError>,
    state: State,
    events: Vec<Event>,
    transmit: Vec<Vec<u8>>,
    /// What the last call (timeout, or the responder's decision) gave.
    after: Result<(), StartupError>,
}

/// Feeds an initiator `chunks`, then (if `eof`) the end of the stream, and
/// lets time run out.
fn initiator_run(mut m: Initiator, chunks: &[&[u8]], eof: bool, now: Instant) -> Summary {
    let mut consumed = Some(0usize);
    let mut result = Ok(());
    for chunk in chunks {
        match m.handle_input(chunk, now) {
            Ok(n) => {
                assert!(n <= chunk.len());
                consumed = consumed.map(|c| c + n);
                if n < chunk.len() {
                    break;
                }
            }
            Err(e) => {
                assert!(e.closes_connection());
                consumed = None;
                result = Err(e);
                break;
            }
        }
    }
    if eof && result.is_ok() {
        result = m.handle_eof();
    }
    let after_timeout = m.handle_timeout(now + Duration::from_secs(3600));
    if m.state() != State::AwaitingReply {
        assert_eq!(m.poll_timeout(), None);
    }
    let transmit: Vec<Vec<u8>> = std::iter::from_fn(|| m.poll_transmit()).collect();
    // The Request, and after a valid Reply it cannot use (RFC 6581) the
    // Terminate the initiator owes; nothing else.
    let owes_terminate = result.as_ref().is_err_and(|e| e.terminate_queued());
    assert_eq!(transmit.len(), 1 + usize::from(owes_terminate));
    Summary {
        consumed,
        result,
        state: m.state(),
        events: std::iter::from_fn(|| m.poll_event()).collect(),
        transmit,
        after: after_timeout,
    }
}

/// Splits `bytes` into chunks of 1 to 32 octets drawn from `seed`.
fn chunks(bytes: &[u8], mut seed: u32) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let n = (seed as usize % 32 + 1).min(rest.len());
        let (head, tail) = rest.split_at(n);
        out.push(head);
        rest = tail;
    }
    out
}

/// Feeds a responder, then lets its application decide as `decide` says.
fn responder_run(
    cfg: &StartupConfig,
    chunks: &[&[u8]],
    eof: bool,
    decide: u8,
    now: Instant,
) -> Summary {
    let Ok(mut r) = Responder::new(cfg.clone(), now) else {
        return Summary {
            consumed: None,
            result: Ok(()),
            state: State::Failed,
            events: vec![],
            transmit: vec![],
            after: Ok(()),
        };
    };
    let mut consumed = Some(0usize);
    let mut result = Ok(());
    for chunk in chunks {
        match r.handle_input(chunk, now) {
            Ok(n) => {
                assert!(n <= chunk.len());
                consumed = consumed.map(|c| c + n);
                if n < chunk.len() {
                    break;
                }
            }
            Err(e) => {
                assert!(e.closes_connection());
                consumed = None;
                result = Err(e);
                break;
            }
        }
    }
    let pd = vec![0x5a; usize::from(decide & 0x3f) * 9];
    let after_decision = match decide >> 6 {
        0 => r.accept(&pd),
        1 => r.reject(&pd),
        2 => r.accept_with(&pd, Some(IrdOrd::new(u16::from(decide), 3))),
        _ => r.handle_timeout(now + Duration::from_secs(3600)),
    };
    if let Err(e) = &after_decision {
        // Only local errors and timeouts come out of a decision.
        assert!(
            matches!(
                e,
                StartupError::WrongState(_)
                    | StartupError::LocalPrivateDataTooLong { .. }
                    | StartupError::Timeout { .. }
                    | StartupError::ResponderResponder
            ) || r.state() == State::Failed
        );
    }
    if eof && result.is_ok() {
        result = r.handle_eof();
    }
    Summary {
        consumed,
        result,
        state: r.state(),
        events: std::iter::from_fn(|| r.poll_event()).collect(),
        transmit: std::iter::from_fn(|| r.poll_transmit()).collect(),
        after: after_decision,
    }
}

/// Two machines with configurations `ic` and `rc`, wired back to back
/// through `chunks`-style splitting: whatever they settle must agree.
fn pair(ic: StartupConfig, rc: StartupConfig, pd: &[u8], seed: u32, now: Instant) {
    let (Ok(mut i), Ok(mut r)) = (Initiator::new(ic, pd, now), Responder::new(rc, now)) else {
        return;
    };
    let request: Vec<u8> = std::iter::from_fn(|| i.poll_transmit()).flatten().collect();
    let mut taken = 0;
    for piece in chunks(&request, seed) {
        match r.handle_input(piece, now) {
            Ok(n) => taken += n,
            Err(e) => {
                // Our own Request is well formed: only the revision ranges
                // can fail to meet. The responder closes, unanswered.
                assert!(
                    matches!(e, StartupError::UnsupportedRevision { .. }),
                    "{e:?}"
                );
                assert!(r.poll_transmit().is_none());
                assert!(i.handle_eof().is_err());
                return;
            }
        }
    }
    assert_eq!(taken, request.len());
    if r.state() == State::AwaitingDecision {
        r.accept(&pd[..pd.len().min(200)]).expect("fits");
    }
    let reply: Vec<u8> = std::iter::from_fn(|| r.poll_transmit()).flatten().collect();
    if reply.is_empty() {
        // The responder closed (no common revision).
        assert_eq!(r.state(), State::Failed);
        assert!(i.handle_eof().is_err());
        return;
    }
    let mut result = Ok(0);
    for piece in chunks(&reply, seed.rotate_left(11)) {
        result = i.handle_input(piece, now);
        if result.is_err() {
            break;
        }
    }
    // An accepted Reply is held a moment before the initiator is established.
    if i.state() == State::Holding {
        let until = i.poll_timeout().expect("a hold has an end");
        assert!(i.established().is_none());
        i.handle_timeout(until).expect("the hold ends");
    }
    match (i.established(), r.established()) {
        (Some(a), Some(b)) => {
            assert_eq!(a.framing, b.framing.mirrored());
            assert_eq!(a.revision, b.revision);
            assert_eq!(a.rtr, b.rtr);
            assert_eq!(a.ird_ord.map(|v| IrdOrd::new(v.ord, v.ird)), b.ird_ord);
            assert_eq!(a.private_data, &pd[..pd.len().min(200)]);
            assert_eq!(b.private_data, pd);
        }
        (None, Some(_)) => assert!(result.is_err()),
        (_, None) => assert_eq!(r.state(), State::Rejected),
    }
}

fuzz_target!(|data: &[u8]| {
    let [s0, s1, s2, s3, rest @ ..] = data else {
        return;
    };
    let sel = u16::from_le_bytes([*s0, *s1]);
    let seed = u32::from_le_bytes([*s2, *s3, 0x5a, 0xa5]) | 1;
    let eof = s3 & 0x80 != 0;
    let decide = *s2;
    let now = Instant::now();

    // The codec: whatever parses re-emits and re-parses to itself.
    if let Ok((repr, len)) = StartupFrameRepr::parse_bytes(rest) {
        assert!(len <= rest.len());
        let out = repr.to_bytes().expect("a parsed frame re-emits");
        assert_eq!(out.len(), len);
        let (again, len2) = StartupFrameRepr::parse_bytes(&out).expect("and re-parses");
        assert_eq!(again, repr);
        assert_eq!(len2, len);
    }
    if let Ok(view) = StartupFrame::new_checked(rest) {
        let _ = (view.key(), view.kind(), view.flags(), view.revision());
        assert_eq!(view.private_data().len(), usize::from(view.pd_length()));
        let _ = StartupFrameRepr::parse(&view);
    }

    let cfg = config(sel);
    let pieces = chunks(rest, seed);

    // The initiator, fed the input as the Reply.
    if let Ok(i) = Initiator::new(cfg.clone(), b"fuzz", now) {
        let whole = initiator_run(i.clone(), &[rest], eof, now);
        let split = initiator_run(i, &pieces, eof, now);
        assert_eq!(whole, split);
        if let Some(c) = whole.consumed {
            assert!(c <= rest.len());
        }
        // A frame once taken is taken whole: what remains is not MPA's.
        if whole.state == State::Established || whole.state == State::Rejected {
            let c = whole.consumed.expect("no error");
            assert!(StartupFrameRepr::parse_bytes(&rest[..c]).is_ok());
            assert_eq!(
                StartupFrameRepr::parse_bytes(rest).map(|(r, l)| (r.kind, l)),
                Ok((FrameKind::Reply, c))
            );
        }
    }

    // Our own two ends, configured by the selector octets.
    let rc = config(u16::from_le_bytes([*s2, *s3]));
    pair(cfg.clone(), rc, &rest[..rest.len().min(300)], seed, now);

    // The responder, fed the input as the Request.
    let whole = responder_run(&cfg, &[rest], eof, decide, now);
    let split = responder_run(&cfg, &pieces, eof, decide, now);
    assert_eq!(whole, split);
    if let Some(c) = whole.consumed {
        assert!(c <= rest.len());
    }
});
