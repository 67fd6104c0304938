//! Tests of the startup machines: each rule of RFC 5044 §7.1.2 and RFC
//! 6581 from both ends, the negotiation matrices, stream handling (chunks,
//! truncation, what follows a frame) and the octets Linux siw exchanges.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::framing::Deframer;
use crate::mpa::{FramingParams, LlpErrorCode};

// ---------------------------------------------------------------------------
// Harness

use crate::test_util::hex;

/// A frame: the key of `kind`, then `rest` in hex.
fn frame(kind: FrameKind, rest: &str) -> Vec<u8> {
    let mut v = kind.key().to_vec();
    v.extend(hex(rest));
    v
}

fn request(rest: &str) -> Vec<u8> {
    frame(FrameKind::Request, rest)
}

fn reply(rest: &str) -> Vec<u8> {
    frame(FrameKind::Reply, rest)
}

/// Everything a machine wants to send, concatenated.
fn drain(m: &mut impl StartupMachine) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(t) = m.poll_transmit() {
        out.extend(t);
    }
    out
}

fn events(m: &mut impl MpaStartup) -> Vec<Event> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

/// What feeding a machine produced: compared across chunkings.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Summary {
    /// Octets taken; `None` if `handle_input` failed (the connection must
    /// then close, so the count means nothing).
    consumed: Option<usize>,
    result: Result<(), StartupError>,
    state: State,
    events: Vec<Event>,
    transmit: Vec<u8>,
}

/// Feeds `chunks` in order until the machine fails or stops taking octets,
/// then (if `eof`) ends the stream.
fn feed<'a, M: MpaStartup>(
    m: &mut M,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    eof: bool,
    now: Instant,
) -> Summary {
    let mut consumed = Some(0);
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
                assert!(e.closes_connection(), "{e:?}");
                consumed = None;
                result = Err(e);
                break;
            }
        }
    }
    if eof && result.is_ok() {
        result = m.handle_eof();
    }
    if result.is_ok() {
        result = sit_out_hold(m);
    }
    Summary {
        consumed,
        result,
        state: m.state(),
        events: events(m),
        transmit: drain(m),
    }
}

fn feed_whole<M: MpaStartup>(m: &mut M, bytes: &[u8], eof: bool, now: Instant) -> Summary {
    feed(m, [bytes], eof, now)
}

fn feed_bytewise<M: MpaStartup>(m: &mut M, bytes: &[u8], eof: bool, now: Instant) -> Summary {
    feed(m, bytes.chunks(1), eof, now)
}

fn responder(config: StartupConfig, now: Instant) -> Responder {
    let mut r = Responder::new(config, now).unwrap();
    assert_eq!(drain(&mut r), b"");
    r
}

/// An initiator with its Request already taken off the transmit queue.
fn initiator(config: StartupConfig, pd: &[u8], now: Instant) -> (Initiator, Vec<u8>) {
    let mut i = Initiator::new(config, pd, now).unwrap();
    let req = drain(&mut i);
    (i, req)
}

fn established(events: &[Event]) -> Option<&Established> {
    events.iter().find_map(|e| match e {
        Event::Established(e) => Some(e),
        _ => None,
    })
}

fn refusal(events: &[Event]) -> Option<&StartupError> {
    events.iter().find_map(|e| match e {
        Event::Refused(e) => Some(e),
        _ => None,
    })
}

fn request_event(events: &[Event]) -> Option<&PeerRequest> {
    events.iter().find_map(|e| match e {
        Event::RequestReceived(r) => Some(r),
        _ => None,
    })
}

/// Lets the hold after an accepted Reply pass, if the initiator is
/// holding one: nothing is reported before it is over, and the first
/// instant it is over establishes the connection.
fn sit_out_hold<M: MpaStartup>(m: &mut M) -> Result<(), StartupError> {
    if m.state() != State::Holding {
        return Ok(());
    }
    let until = m.poll_timeout().expect("a hold has an end");
    m.handle_timeout(until - Duration::from_nanos(1))?;
    assert_eq!(m.state(), State::Holding);
    assert_eq!(m.established(), None);
    assert_eq!(m.poll_event(), None);
    m.handle_timeout(until)?;
    assert_eq!(m.state(), State::Established);
    Ok(())
}

/// How the responder's application decides.
#[derive(Debug, Clone, Copy)]
enum Decide<'a> {
    Accept(&'a [u8]),
    Reject(&'a [u8]),
}

/// Both ends of one startup, run to completion over a perfect stream.
struct Run {
    initiator: Initiator,
    responder: Responder,
    initiator_result: Result<(), StartupError>,
    responder_result: Result<(), StartupError>,
    initiator_events: Vec<Event>,
    responder_events: Vec<Event>,
    reply: Vec<u8>,
}

fn connect(ic: StartupConfig, rc: StartupConfig, pd: &[u8], decide: Decide<'_>) -> Run {
    let now = Instant::now();
    let (mut i, req) = initiator(ic, pd, now);
    let mut r = responder(rc, now);
    let mut responder_result = r.handle_input(&req, now).map(|n| assert_eq!(n, req.len()));
    let mut responder_events = events(&mut r);
    if r.state() == State::AwaitingDecision {
        responder_result = match decide {
            Decide::Accept(pd) => r.accept(pd),
            Decide::Reject(pd) => r.reject(pd),
        };
        responder_events.extend(events(&mut r));
    }
    let reply = drain(&mut r);
    let initiator_result = if reply.is_empty() {
        // A responder that sends nothing closes the connection.
        i.handle_eof()
    } else {
        i.handle_input(&reply, now)
            .map(|n| assert_eq!(n, reply.len()))
            .and_then(|()| sit_out_hold(&mut i))
    };
    let initiator_events = events(&mut i);
    Run {
        initiator: i,
        responder: r,
        initiator_result,
        responder_result,
        initiator_events,
        responder_events,
        reply,
    }
}

fn accept_all(ic: StartupConfig, rc: StartupConfig) -> Run {
    connect(ic, rc, b"", Decide::Accept(b""))
}

/// Asserts both ends established, mirroring each other; returns
/// (initiator, responder) outcomes.
fn both_established(run: &Run) -> (Established, Established) {
    assert_eq!(run.initiator_result, Ok(()), "initiator");
    assert_eq!(run.responder_result, Ok(()), "responder");
    let i = established(&run.initiator_events)
        .expect("initiator established")
        .clone();
    let r = established(&run.responder_events)
        .expect("responder established")
        .clone();
    assert_eq!(run.initiator.established(), Some(&i));
    assert_eq!(run.responder.established(), Some(&r));
    assert_eq!(i.role, Role::Initiator);
    assert_eq!(r.role, Role::Responder);
    assert_eq!(i.revision, r.revision);
    assert_eq!(i.framing, r.framing.mirrored());
    assert_eq!(
        i.ird_ord.map(|v| IrdOrd::new(v.ord, v.ird)),
        r.ird_ord,
        "IRD/ORD mirror"
    );
    assert_eq!(i.rtr, r.rtr);
    assert_eq!(i.rtr_to_send(), r.rtr_to_expect());
    assert!(r.must_receive_before_sending());
    assert!(!i.must_receive_before_sending());
    (i, r)
}

fn siw() -> StartupConfig {
    StartupConfig::siw_like()
}

fn cfg() -> StartupConfig {
    StartupConfig::default()
}

// ---------------------------------------------------------------------------
// Octet-exact interoperability with Linux siw (siw-observed.md)

/// "siw as responder": each request sent to siw, and siw's reply (None:
/// siw closed without replying).
const SIW_RESPONDER: &[(&str, Option<&str>)] = &[
    ("0001 0000", Some("0001 0000")),
    ("4001 0000", Some("4001 0000")),
    ("1002 0004 0010 0010", Some("1002 0004 0010 0010")),
    ("5002 0004 0010 0010", Some("5002 0004 0010 0010")),
    ("0002 0000", Some("0002 0000")),
    (
        "1002 000d 0010 0010 68656c6c6f2d736977",
        Some("1002 0004 0010 0010"),
    ),
    ("1002 0004 8010 8010", Some("1002 0004 8010 8010")),
    ("8001 0000", Some("2001 0000")),
    ("9002 0004 0010 0010", Some("3002 0004 0000 0000")),
    ("d002 0004 0010 0010", Some("7002 0004 0000 0000")),
    ("0003 0000", None),
];

#[test]
fn siw_rping_request_from_equivalent_config() {
    // rping: revision 2, enhanced, no CRC, no markers, IRD 1, ORD 1.
    let config = StartupConfig {
        crc: CrcPolicy::Off,
        ird: 1,
        ord: 1,
        ..cfg()
    };
    let (_, req) = initiator(config, b"", Instant::now());
    assert_eq!(
        req,
        hex("4d504120494420526571204672616d65 1002 0004 0001 0001")
    );
}

#[test]
fn our_responder_answers_siws_requests_as_siw_does() {
    let now = Instant::now();
    for (req, siw_reply) in SIW_RESPONDER {
        let mut r = responder(siw(), now);
        let bytes = request(req);
        let s = feed_whole(&mut r, &bytes, false, now);
        let mut out = s.transmit.clone();
        if s.state == State::AwaitingDecision {
            // The application accepts without private data of its own.
            r.accept(b"").unwrap();
            out.extend(drain(&mut r));
        }
        match siw_reply {
            Some(want) => assert_eq!(out, reply(want), "request {req}"),
            None => {
                assert_eq!(out, b"", "request {req}");
                assert_eq!(
                    s.result,
                    Err(StartupError::UnsupportedRevision { revision: 3 })
                );
                assert!(s.result.unwrap_err().closes_connection());
            }
        }
    }
}

#[test]
fn with_crc_preferred_only_the_c_bit_differs_from_siw() {
    let now = Instant::now();
    let config = StartupConfig {
        crc: CrcPolicy::Preferred,
        ..siw()
    };
    for (req, siw_reply) in SIW_RESPONDER {
        let Some(want) = siw_reply else { continue };
        let mut r = responder(config.clone(), now);
        let mut out = feed_whole(&mut r, &request(req), false, now).transmit;
        if r.state() == State::AwaitingDecision {
            r.accept(b"").unwrap();
            out.extend(drain(&mut r));
        }
        let mut want = reply(want);
        want[16] |= FLAG_CRC;
        assert_eq!(out, want, "request {req}");
    }
}

#[test]
fn siw_responder_policy_rejects_report_why() {
    let now = Instant::now();
    let cases = [
        ("8001 0000", Revision::Rev1),
        ("9002 0004 0010 0010", Revision::Rev2),
    ];
    for (req, _) in cases {
        let mut r = responder(siw(), now);
        let bytes = request(req);
        let s = feed_whole(&mut r, &bytes, false, now);
        // Not a failure: the request is refused, the whole frame taken.
        assert_eq!(s.result, Ok(()));
        assert_eq!(s.consumed, Some(bytes.len()));
        assert_eq!(s.state, State::Rejected);
        let e = refusal(&s.events).unwrap().clone();
        assert_eq!(
            e,
            StartupError::MarkersRefused {
                detected_by: Role::Responder
            }
        );
        assert!(e.reply_queued());
        // Rule 2: a rejection leaves TCP open for the upper layer.
        assert!(!e.closes_connection());
        assert_eq!(e.llp_error_code(), LlpErrorCode::InvalidStartupFrame);
        assert_eq!(r.error(), Some(&e));
        assert_eq!(r.poll_timeout(), None);
        assert_eq!(r.handle_input(b"other purposes", now), Ok(0));
    }
}

/// The initiator configuration that sends each request of the table.
fn initiator_config_for(req: &str) -> (StartupConfig, &'static [u8]) {
    let rev1 = StartupConfig {
        max_revision: Revision::Rev1,
        crc: CrcPolicy::Off,
        ..cfg()
    };
    let rev2 = StartupConfig {
        crc: CrcPolicy::Off,
        ..cfg()
    };
    match req {
        "0001 0000" => (rev1, b""),
        "4001 0000" => (
            StartupConfig {
                crc: CrcPolicy::Preferred,
                ..rev1
            },
            b"",
        ),
        "1002 0004 0010 0010" => (rev2, b""),
        "5002 0004 0010 0010" => (
            StartupConfig {
                crc: CrcPolicy::Preferred,
                ..rev2
            },
            b"",
        ),
        "0002 0000" => (
            StartupConfig {
                enhanced: false,
                ..rev2
            },
            b"",
        ),
        "1002 000d 0010 0010 68656c6c6f2d736977" => (rev2, b"hello-siw"),
        "1002 0004 8010 8010" => (
            StartupConfig {
                peer_to_peer: true,
                rtr_types: RtrTypes::only(RtrType::Write),
                ..rev2
            },
            b"",
        ),
        "8001 0000" => (
            StartupConfig {
                request_markers: true,
                ..rev1
            },
            b"",
        ),
        "9002 0004 0010 0010" => (
            StartupConfig {
                request_markers: true,
                ..rev2
            },
            b"",
        ),
        "d002 0004 0010 0010" => (
            StartupConfig {
                request_markers: true,
                crc: CrcPolicy::Preferred,
                ..rev2
            },
            b"",
        ),
        _ => unreachable!("{req}"),
    }
}

#[test]
fn our_initiator_takes_every_siw_reply() {
    let now = Instant::now();
    for (req, siw_reply) in SIW_RESPONDER {
        let Some(siw_reply) = siw_reply else { continue };
        let (config, pd) = initiator_config_for(req);
        let (mut i, sent) = initiator(config, pd, now);
        assert_eq!(sent, request(req), "our request matches the table");
        let bytes = reply(siw_reply);
        let s = feed_whole(&mut i, &bytes, false, now);
        assert_eq!(s.result, Ok(()), "{req}");
        assert_eq!(s.consumed, Some(bytes.len()));
        let flags = bytes[16];
        if flags & FLAG_REJECT != 0 {
            assert_eq!(s.state, State::Rejected);
            assert_eq!(
                s.events,
                vec![Event::Rejected(PeerRejection {
                    revision: Revision::from_wire(bytes[17]).unwrap(),
                    private_data: vec![],
                })]
            );
            assert_eq!(i.rejection().map(|r| r.private_data.len()), Some(0));
            continue;
        }
        assert_eq!(s.state, State::Established, "{req}");
        let e = established(&s.events).unwrap();
        assert_eq!(e.framing.crc, flags & FLAG_CRC != 0);
        assert!(!e.framing.send_markers && !e.framing.receive_markers);
        assert_eq!(e.revision.map(Revision::wire), Some(bytes[17]));
        assert!(e.private_data.is_empty());
        if flags & FLAG_ENHANCED != 0 {
            assert_eq!(e.ird_ord, Some(IrdOrd::new(16, 16)));
        } else {
            assert_eq!(e.ird_ord, None);
        }
        if req.starts_with("1002 0004 8010") {
            assert_eq!(e.rtr_to_send(), Some(RtrType::Write));
        } else {
            assert_eq!(e.rtr, None);
        }
    }
}

#[test]
fn siw_rping_request_and_first_fpdu() {
    // siw as initiator: its Request, then (once our Reply is in) its first
    // FPDU, a 34-octet Send. Fed in one piece, only the Request is taken.
    let now = Instant::now();
    let mut stream = hex("4d504120494420526571204672616d65 1002 0004 0001 0001");
    let req_len = stream.len();
    let fpdu = hex(
        "0022 4143 00000000 00000000 00000001 00000000 00005637f5a0d530 3fce2900 00000020 00000000",
    );
    stream.extend(&fpdu);
    let mut r = responder(cfg(), now);
    let s = feed_whole(&mut r, &stream, false, now);
    assert_eq!(s.consumed, Some(req_len));
    let req = request_event(&s.events).unwrap();
    assert_eq!(req.revision, Revision::Rev2);
    assert_eq!(req.enhanced.map(|e| e.ird_ord()), Some(IrdOrd::new(1, 1)));
    assert!(!req.crc && !req.markers);
    r.accept(b"").unwrap();
    // Our default asks for CRC; IRD/ORD limited to siw's 1/1.
    assert_eq!(drain(&mut r), reply("5002 0004 0001 0001"));
    let e = r.established().unwrap();
    assert_eq!(
        e.framing,
        FramingParams {
            crc: true,
            send_markers: false,
            receive_markers: false
        }
    );
    assert_eq!(e.ird_ord, Some(IrdOrd::new(1, 1)));
    // The FPDU is left for the FPDU receiver.
    assert_eq!(r.handle_input(&stream[req_len..], now), Ok(0));
}

// ---------------------------------------------------------------------------
// RFC 5044 §7.1.2, rule by rule

#[test]
//= rfc5044#7.1.2
//= type=test
//# When MPA is started in the Initiator mode, the MPA implementation MUST send a valid MPA
//# Request Frame.
fn rule_1_initiator_sends_a_valid_request_at_once() {
    let now = Instant::now();
    let mut i = Initiator::new(cfg(), b"pd", now).unwrap();
    assert_eq!(i.state(), State::AwaitingReply);
    let req = i.poll_transmit().unwrap();
    assert_eq!(i.poll_transmit(), None);
    let (repr, len) = StartupFrameRepr::parse_bytes(&req).unwrap();
    assert_eq!(len, req.len());
    assert_eq!(repr.kind, FrameKind::Request);
    assert_eq!(repr.revision, Revision::Rev2);
    assert!(repr.crc && !repr.markers);
    assert_eq!(repr.private_data, b"pd");
    assert_eq!(
        repr.enhanced,
        Some(EnhancedData {
            ird: 16,
            ord: 16,
            peer_to_peer: false,
            rtr: RtrTypes::NONE
        })
    );
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# When MPA is started in the Responder mode, the MPA implementation MUST wait until an MPA
//# Request Frame is received and validated before entering Full MPA/DDP Operation.
//= rfc5044#7.1.2
//= type=test
//# If the MPA Request Frame is properly formatted and the Private Data is acceptable, the
//# implementation SHOULD return an MPA Reply Frame with the Rejected Connection bit set to '0'
fn rule_2_responder_accepts_with_its_private_data() {
    let run = connect(
        cfg(),
        cfg(),
        b"from initiator",
        Decide::Accept(b"from responder"),
    );
    let (i, r) = both_established(&run);
    let req = request_event(&run.responder_events).unwrap();
    assert_eq!(req.private_data, b"from initiator");
    assert_eq!(run.responder.request(), Some(req));
    assert_eq!(r.private_data, b"from initiator");
    assert_eq!(i.private_data, b"from responder");
    // Enhanced octets are not part of the application's data on the wire
    // either: PD_Length = 4 + 14.
    assert_eq!(&run.reply[18..20], &[0, 18]);
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# If the MPA Request Frame is properly formatted but the Private Data is not acceptable, the
//# implementation SHOULD return an MPA Reply Frame with the Rejected Connection bit set to '1';
//# the MPA Reply Frame MAY include ULP-supplied Private Data; the implementation MUST exit MPA,
//# leaving the TCP connection open.
//= rfc5044#7.1.2
//= type=test
//# If the MPA Reply Frame is properly formatted but is the Private Data is not acceptable, or
//# if the Rejected Connection bit is set to '1', the implementation MUST exit MPA, leaving the
//# TCP connection open.
fn rule_2_and_3_rejection_leaves_tcp_open() {
    let run = connect(cfg(), cfg(), b"hello", Decide::Reject(b"go away"));
    assert_eq!(run.responder_result, Ok(()));
    assert_eq!(run.initiator_result, Ok(()));
    assert_eq!(run.responder.state(), State::Rejected);
    assert_eq!(run.initiator.state(), State::Rejected);
    assert_eq!(run.responder.established(), None);
    assert_eq!(
        run.initiator_events,
        vec![Event::Rejected(PeerRejection {
            revision: Revision::Rev2,
            private_data: b"go away".to_vec(),
        })]
    );
    // The rejecting Reply: R set, M clear, C as negotiated, IRD/ORD zero.
    let (repr, _) = StartupFrameRepr::parse_bytes(&run.reply).unwrap();
    assert!(repr.rejected && !repr.markers && repr.crc);
    assert_eq!(repr.enhanced, Some(EnhancedData::REJECT));
    // MPA is over but neither end failed: no error, no timer, and
    // whatever follows belongs to the upper layer.
    let mut i = run.initiator;
    let mut r = run.responder;
    let now = Instant::now();
    assert_eq!(i.poll_timeout(), None);
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(i.handle_input(b"streaming", now), Ok(0));
    assert_eq!(r.handle_input(b"streaming", now), Ok(0));
    assert_eq!(i.handle_eof(), Ok(()));
    assert_eq!(r.handle_eof(), Ok(()));
    assert_eq!(i.error(), None);
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# If the MPA Request Frame is improperly formatted, the implementation MUST close the TCP
//# connection and exit MPA.
//= rfc5044#8
//= type=test
//# Invalid MPA Request Frame or MPA Response Frame received. In this case, the TCP connection
//# MUST be immediately closed.
fn rule_2_malformed_request_closes() {
    let now = Instant::now();
    let mut r = responder(cfg(), now);
    // Revision 1 with 600 octets of private data.
    let mut bad = request("0001 0258");
    bad.resize(20 + 600, 0);
    let s = feed_whole(&mut r, &bad, false, now);
    let e = s.result.unwrap_err();
    assert_eq!(
        e,
        StartupError::PrivateDataTooLong {
            revision: Revision::Rev1,
            length: 600,
            max: 512
        }
    );
    assert!(e.closes_connection());
    assert_eq!(e.llp_error_code(), LlpErrorCode::InvalidStartupFrame);
    assert_eq!(s.transmit, b"");
    assert_eq!(s.state, State::Failed);
    // Detected on the header: a reader needs no private data to judge it.
    let mut r = responder(cfg(), now);
    assert_eq!(r.handle_input(&bad[..19], now), Ok(19));
    assert!(r.handle_input(&bad[19..20], now).is_err());
    // Later calls report the same failure.
    assert_eq!(r.handle_input(b"x", now), Err(e.clone()));
    assert_eq!(r.handle_eof(), Err(e.clone()));
    assert_eq!(r.handle_timeout(now + Duration::from_secs(60)), Err(e));
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# If the MPA Reply Frame is improperly formatted, the implementation MUST close the TCP
//# connection and exit MPA.
//= rfc5044#7.1.2
//= type=test
//# MPA Initiator mode implementations MUST receive and validate an MPA Reply Frame.
fn rule_3_malformed_reply_closes() {
    let now = Instant::now();
    let (mut i, _) = initiator(cfg(), b"", now);
    // Enhanced flag with PD_Length 2.
    let s = feed_whole(&mut i, &reply("1002 0002 0000"), false, now);
    let e = s.result.unwrap_err();
    assert_eq!(e, StartupError::EnhancedDataMissing { pd_length: 2 });
    assert!(e.closes_connection());
    assert_eq!(s.state, State::Failed);
    assert_eq!(i.error(), Some(&e));
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# MPA Responder mode implementations MUST receive and validate at least one FPDU before
//# sending any FPDUs or Markers.
fn rule_4_only_the_responder_waits_for_an_fpdu() {
    let run = accept_all(cfg(), cfg());
    let (i, r) = both_established(&run);
    assert!(r.must_receive_before_sending());
    assert!(!i.must_receive_before_sending());
}

#[test]
fn rule_5_garbage_keys() {
    let now = Instant::now();
    let garbage: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"MPA ID Req FrameX\x01\x00\x00",
        &[0u8; 20],
        b"mpa id req frame\x00\x01\x00\x00",
    ];
    for g in garbage {
        let key: [u8; 16] = g[..16].try_into().unwrap();
        if FrameKind::from_key(&key).is_some() {
            continue;
        }
        let mut r = responder(cfg(), now);
        let s = feed_whole(&mut r, g, false, now);
        assert_eq!(
            s.result,
            Err(StartupError::BadKey {
                expected: FrameKind::Request,
                seen: key
            })
        );
        let (mut i, _) = initiator(cfg(), b"", now);
        let s = feed_whole(&mut i, g, false, now);
        assert_eq!(
            s.result,
            Err(StartupError::BadKey {
                expected: FrameKind::Reply,
                seen: key
            })
        );
        assert!(s.result.unwrap_err().closes_connection());
    }
}

#[test]
//= rfc5044#7.1.1
//= type=test
//# Responder mode receivers MUST check this field for the same value, and close the connection
//# and report an error locally if any other value is detected.
//= rfc5044#7.1.1
//= type=test
//# Initiator mode receivers MUST check this field for the same value, and close the connection
//# and report an error locally if any other value is detected.
//= rfc5044#7.1.2
//= type=test
//# If a received "Key" does not match the expected value (see Section 7.1.1, MPA Request and
//# Reply Frame Format) the TCP/DDP connection MUST be closed, and an error returned to the ULP.
fn rule_5_every_corrupted_key_octet() {
    let now = Instant::now();
    let good = request("0001 0000");
    for pos in 0..KEY_LEN {
        for flip in [0x01u8, 0x20, 0x80] {
            let mut bad = good.clone();
            bad[pos] ^= flip;
            let want = if bad[..16] == REPLY_KEY {
                StartupError::UnexpectedReply
            } else {
                StartupError::BadKey {
                    expected: FrameKind::Request,
                    seen: bad[..16].try_into().unwrap(),
                }
            };
            let mut r = responder(cfg(), now);
            assert_eq!(
                feed_bytewise(&mut r, &bad, false, now).result,
                Err(want.clone())
            );
            // Judged on the 16th octet, not before.
            let mut r = responder(cfg(), now);
            assert_eq!(r.handle_input(&bad[..15], now), Ok(15));
            assert_eq!(r.handle_input(&bad[15..], now), Err(want));
        }
    }
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# MPA implementations MUST use the difference between the MPA Request Frame and the MPA Reply
//# Frame to check for incorrect "Initiator/Initiator" startups.
fn rule_8_initiator_initiator() {
    let now = Instant::now();
    let (mut a, req_a) = initiator(cfg(), b"", now);
    let (mut b, req_b) = initiator(cfg(), b"", now);
    let sa = feed_whole(&mut a, &req_b, false, now);
    let sb = feed_whole(&mut b, &req_a, false, now);
    for s in [sa, sb] {
        let e = s.result.unwrap_err();
        assert_eq!(e, StartupError::InitiatorInitiator);
        assert!(e.closes_connection());
        assert_eq!(e.llp_error_code(), LlpErrorCode::InvalidStartupFrame);
    }
}

#[test]
fn rule_8_responder_receiving_a_reply() {
    let now = Instant::now();
    let mut r = responder(cfg(), now);
    let s = feed_whole(&mut r, &reply("0001 0000"), false, now);
    assert_eq!(s.result, Err(StartupError::UnexpectedReply));
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# Implementations SHOULD put a timeout on waiting for the MPA Request Frame when started in
//# Responder mode, to detect incorrect "Responder/Responder" startups.
fn rule_8_responder_responder_detected_by_timeout() {
    let t0 = Instant::now();
    let mut a = responder(cfg(), t0);
    let mut b = responder(cfg(), t0);
    // Neither sends anything; both wait for a Request until the deadline.
    for m in [&mut a, &mut b] {
        let deadline = m.poll_timeout().unwrap();
        assert_eq!(deadline, t0 + Duration::from_secs(5));
        assert_eq!(m.handle_timeout(deadline - Duration::from_nanos(1)), Ok(()));
        assert_eq!(m.state(), State::AwaitingRequest);
        let e = m.handle_timeout(deadline).unwrap_err();
        assert_eq!(e, StartupError::ResponderResponder);
        assert_eq!(e.llp_error_code(), LlpErrorCode::ConnectionLost);
        assert!(e.closes_connection());
        assert_eq!(m.poll_timeout(), None);
        assert_eq!(m.state(), State::Failed);
    }
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# MPA implementations MUST validate the PD_Length field.
//= rfc5044#7.1.2
//= type=test
//# The buffer that receives the Private Data field MUST be large enough to receive that data;
//# the amount of Private Data MUST not exceed the PD_Length or the application buffer.
fn rule_9_local_private_data_limit() {
    let now = Instant::now();
    let config = StartupConfig {
        max_private_data: 100,
        ..cfg()
    };
    for (len, ok) in [(100usize, true), (101, false)] {
        let mut bytes = request("0001");
        bytes.extend_from_slice(&(len as u16).to_be_bytes());
        bytes.resize(20 + len, 0x55);
        let mut r = responder(config.clone(), now);
        let s = feed_whole(&mut r, &bytes, false, now);
        if ok {
            assert_eq!(s.result, Ok(()));
            assert_eq!(request_event(&s.events).unwrap().private_data.len(), 100);
        } else {
            assert_eq!(
                s.result,
                Err(StartupError::PrivateDataOverLocalLimit {
                    length: 101,
                    limit: 100
                })
            );
        }
        // The same limit at the initiator.
        let (mut i, _) = initiator(config.clone(), b"", now);
        let mut bytes = reply("0001");
        bytes.extend_from_slice(&(len as u16).to_be_bytes());
        bytes.resize(20 + len, 0x55);
        let s = feed_whole(&mut i, &bytes, false, now);
        assert_eq!(
            s.result.is_ok(),
            ok,
            "initiator with reply of {len}: {:?}",
            s.result
        );
    }
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# MPA implementations SHOULD implement a reasonable timeout while waiting for the entire set
//# of startup frames; this prevents certain denial-of-service attacks.
fn rule_10_reply_timeout() {
    let t0 = Instant::now();
    let (mut i, _) = initiator(cfg(), b"", t0);
    let deadline = i.poll_timeout().unwrap();
    assert_eq!(deadline, t0 + Duration::from_secs(10));
    // Half a Reply, then silence.
    assert_eq!(i.handle_input(&reply("0001 0000")[..7], t0), Ok(7));
    assert_eq!(i.handle_timeout(t0 + Duration::from_secs(9)), Ok(()));
    let e = i.handle_timeout(deadline).unwrap_err();
    assert_eq!(
        e,
        StartupError::Timeout {
            waiting_for: Awaiting::Reply,
            received: 7
        }
    );
    assert_eq!(e.llp_error_code(), LlpErrorCode::ConnectionLost);
}

#[test]
//= rfc5044#7.1.2
//= type=test
//# MPA implementations SHOULD implement a reasonable timeout while waiting for the entire set
//# of startup frames; this prevents certain denial-of-service attacks.
fn rule_10_partial_request_timeout() {
    let t0 = Instant::now();
    let config = StartupConfig {
        request_timeout: Duration::from_millis(1500),
        ..cfg()
    };
    let mut r = responder(config, t0);
    assert_eq!(r.handle_input(&request("0001 0000")[..19], t0), Ok(19));
    let e = r
        .handle_timeout(t0 + Duration::from_millis(1500))
        .unwrap_err();
    assert_eq!(
        e,
        StartupError::Timeout {
            waiting_for: Awaiting::Request,
            received: 19
        }
    );
}

#[test]
fn decision_timeout_counts_from_the_request() {
    let t0 = Instant::now();
    let mut r = responder(cfg(), t0);
    let arrival = t0 + Duration::from_secs(3);
    feed_whole(&mut r, &request("0001 0000"), false, arrival);
    assert_eq!(r.state(), State::AwaitingDecision);
    let deadline = r.poll_timeout().unwrap();
    assert_eq!(deadline, arrival + Duration::from_secs(10));
    assert_eq!(r.handle_timeout(deadline - Duration::from_nanos(1)), Ok(()));
    assert_eq!(
        r.handle_timeout(deadline),
        Err(StartupError::Timeout {
            waiting_for: Awaiting::Decision,
            received: 0
        })
    );
    assert_eq!(r.accept(b""), Err(StartupError::WrongState(State::Failed)));
    assert_eq!(drain(&mut r), b"");

    // Without a decision timeout the responder waits for ever.
    let config = StartupConfig {
        decision_timeout: None,
        ..cfg()
    };
    let mut r = responder(config, t0);
    feed_whole(&mut r, &request("0001 0000"), false, t0);
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(r.handle_timeout(t0 + Duration::from_secs(86400)), Ok(()));
    assert_eq!(r.accept(b""), Ok(()));
}

#[test]
fn timers_stop_once_established() {
    let run = accept_all(cfg(), cfg());
    both_established(&run);
    assert_eq!(run.initiator.poll_timeout(), None);
    assert_eq!(run.responder.poll_timeout(), None);
    let (mut i, mut r) = (run.initiator, run.responder);
    let later = Instant::now() + Duration::from_secs(3600);
    assert_eq!(i.handle_timeout(later), Ok(()));
    assert_eq!(r.handle_timeout(later), Ok(()));
    assert_eq!(i.state(), State::Established);
}

#[test]
fn peer_closing_while_the_application_decides() {
    let now = Instant::now();
    let mut r = responder(cfg(), now);
    feed_whole(&mut r, &request("0001 0000"), false, now);
    let e = r.handle_eof().unwrap_err();
    assert_eq!(
        e,
        StartupError::ConnectionClosed {
            waiting_for: Awaiting::Decision
        }
    );
    assert_eq!(e.llp_error_code(), LlpErrorCode::ConnectionLost);
}

// ---------------------------------------------------------------------------
// The hold after an accepted Reply (Linux siw's accept race)

fn holding(hold: Duration) -> StartupConfig {
    StartupConfig {
        hold_after_reply: hold,
        ..cfg()
    }
}

#[test]
fn an_accepted_reply_is_held_then_established_unchanged() {
    let now = Instant::now();
    let hold = Duration::from_millis(25);
    let rep = reply("5002 0004 0010 0010");
    let (mut at_once, req_at_once) = initiator(holding(Duration::ZERO), b"", now);
    at_once.handle_input(&rep, now).unwrap();
    assert_eq!(at_once.state(), State::Established);
    let want = established(&events(&mut at_once)).unwrap().clone();

    let (mut i, req) = initiator(holding(hold), b"", now);
    // The hold changes no octet of the Request.
    assert_eq!(req, req_at_once);
    let later = now + Duration::from_millis(3);
    assert_eq!(i.handle_input(&rep, later), Ok(rep.len()));
    assert_eq!(i.state(), State::Holding);
    assert!(!i.state().is_finished());
    assert_eq!(i.established(), None);
    assert_eq!(i.poll_event(), None);
    assert_eq!(i.poll_transmit(), None);
    // Counted from the Reply's arrival; the Reply timeout no longer runs.
    assert_eq!(i.poll_timeout(), Some(later + hold));
    // What a peer sends meanwhile is not the machine's: it stays with the
    // caller, for the FPDU receiver.
    assert_eq!(i.handle_input(&[0x00, 0x04, 0xC1, 0x40], later), Ok(0));
    assert_eq!(i.handle_timeout(later + hold / 2), Ok(()));
    assert_eq!(i.poll_event(), None);
    assert_eq!(i.handle_timeout(later + hold), Ok(()));
    assert_eq!(i.state(), State::Established);
    assert_eq!(i.poll_timeout(), None);
    assert_eq!(events(&mut i), vec![Event::Established(want.clone())]);
    assert_eq!(i.established(), Some(&want));
    assert_eq!(i.poll_transmit(), None);
    // Later timeouts change nothing.
    assert_eq!(i.handle_timeout(later + Duration::from_secs(3600)), Ok(()));
    assert_eq!(i.poll_event(), None);
}

#[test]
fn the_peer_closing_during_the_hold_ends_it() {
    let now = Instant::now();
    let (mut i, _) = initiator(holding(Duration::from_secs(1)), b"", now);
    i.handle_input(&reply("1002 0004 0010 0010"), now).unwrap();
    assert_eq!(i.state(), State::Holding);
    // The connection, not the startup, sees the end of the stream.
    assert_eq!(i.handle_eof(), Ok(()));
    assert_eq!(i.state(), State::Established);
    assert!(established(&events(&mut i)).is_some());
}

#[test]
fn rejections_and_failures_are_not_held() {
    let now = Instant::now();
    let hold = Duration::from_secs(1);
    // A rejection is reported at once.
    let (mut i, _) = initiator(holding(hold), b"", now);
    let s = feed_whole(&mut i, &reply("3002 0004 0000 0000"), false, now);
    assert_eq!(s.state, State::Rejected);
    assert!(matches!(s.events.as_slice(), [Event::Rejected(_)]));
    // So is a valid Reply this end cannot use, with its Terminate.
    let strict = StartupConfig {
        ird: 1,
        ird_ord_negotiation: IrdOrdNegotiation::Strict,
        ..holding(hold)
    };
    let (mut i, _) = initiator(strict, b"", now);
    let e = i
        .handle_input(&reply("5002 0004 0010 0010"), now)
        .unwrap_err();
    assert_eq!(e.llp_error_code(), LlpErrorCode::InsufficientIrd);
    assert_eq!(i.state(), State::Failed);
    assert!(i.poll_transmit().is_some());
}

#[test]
fn the_default_hold_is_the_documented_one() {
    assert_eq!(cfg().hold_after_reply, DEFAULT_HOLD_AFTER_REPLY);
    assert!(DEFAULT_HOLD_AFTER_REPLY > Duration::ZERO);
}

#[test]
fn only_the_initiator_holds() {
    let now = Instant::now();
    let mut r = responder(holding(Duration::from_secs(3600)), now);
    let (_, req) = initiator(cfg(), b"", now);
    r.handle_input(&req, now).unwrap();
    r.accept(b"").unwrap();
    assert_eq!(r.state(), State::Established);
    assert!(!drain(&mut r).is_empty());
    assert_eq!(r.poll_timeout(), None);
}

// ---------------------------------------------------------------------------
// Delayed startup and the last streaming message (RFC 5044 §7.1.3, §7.1.5)

#[test]
//= rfc5044#7.1
//= type=test
//# MPA requires that the Consumer MUST activate MPA, and any TCP enhancements for MPA, on a TCP
//# half connection at the same location in the octet stream at both the sender and the
//# receiver.
//= rfc5044#7.1.5
//= type=test
//# Enabling the DDP/MPA stack SHOULD be done only when no incoming stream data is expected.
fn delayed_startup_after_streaming_mode() {
    // Two in-memory byte streams; the upper layers talk in streaming mode
    // first, then start MPA at the agreed positions.
    let now = Instant::now();
    let mut to_responder: Vec<u8> = Vec::new();
    let mut to_initiator: Vec<u8> = Vec::new();

    // Streaming mode: a greeting, some chatter, then "let's go MPA".
    to_responder.extend_from_slice(b"HELLO streaming mode\n");
    to_initiator.extend_from_slice(b"WELCOME, arbitrary octets: \x00\xff\x13\n");
    to_responder.extend_from_slice(b"UPGRADE to MPA\n");

    // The responder's upper layer reads up to its "UPGRADE" line and starts
    // MPA there, sending its last streaming message through the machine.
    let mut r_pos = to_responder.len();
    let mut r = Responder::with_last_streaming_message(cfg(), b"OK, MPA now\n", now).unwrap();
    to_initiator.extend(drain(&mut r));

    // The initiator's upper layer reads the acknowledgement, then starts.
    let ack_end = to_initiator.len();
    assert!(to_initiator.ends_with(b"OK, MPA now\n"));
    let mut i_pos = ack_end;
    let mut i = Initiator::new(cfg(), b"after streaming", now).unwrap();
    to_responder.extend(drain(&mut i));

    r_pos += r.handle_input(&to_responder[r_pos..], now).unwrap();
    let req = request_event(&events(&mut r)).unwrap().clone();
    assert_eq!(req.private_data, b"after streaming");
    r.accept(b"ok").unwrap();
    to_initiator.extend(drain(&mut r));
    // The initiator's first FPDU follows the Request on the same stream.
    to_responder.extend_from_slice(&[0x00, 0x04, 0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0]);

    i_pos += i.handle_input(&to_initiator[i_pos..], now).unwrap();
    assert_eq!(i_pos, to_initiator.len());
    sit_out_hold(&mut i).unwrap();
    assert_eq!(i.state(), State::Established);
    assert_eq!(i.established().unwrap().private_data, b"ok");
    // Nothing of the FPDU was taken by the responder's machine.
    assert_eq!(r.handle_input(&to_responder[r_pos..], now), Ok(0));
    assert_eq!(&to_responder[r_pos..r_pos + 2], &[0x00, 0x04]);
}

#[test]
fn last_streaming_message_goes_out_first() {
    let now = Instant::now();
    let mut r = Responder::with_last_streaming_message(cfg(), b"bye, streaming\n", now).unwrap();
    assert_eq!(r.poll_transmit(), Some(b"bye, streaming\n".to_vec()));
    assert_eq!(r.poll_transmit(), None);
    assert_eq!(r.state(), State::AwaitingRequest);
    // An empty message sends nothing.
    let mut r = Responder::with_last_streaming_message(cfg(), b"", now).unwrap();
    assert_eq!(r.poll_transmit(), None);
    // If the Request comes back very fast, it is still the Reply that
    // follows the message.
    let mut r = Responder::with_last_streaming_message(cfg(), b"msg", now).unwrap();
    r.handle_input(&request("0001 0000"), now).unwrap();
    r.accept(b"").unwrap();
    assert_eq!(r.poll_transmit(), Some(b"msg".to_vec()));
    assert_eq!(r.poll_transmit(), Some(reply("4001 0000")));
}

// ---------------------------------------------------------------------------
// Revision negotiation: every initiator range against every responder range

#[test]
//= rfc5044#7.1.1
//= type=test
//# For this version of the specification, senders MUST set this field to one.
//= rfc5044#7.1.1
//= type=test
//# MPA receivers compliant with this version of the specification MUST check this field.
//= draft-ietf-rddp-mpa-01#6.1.1
//= type=test
//# MPA receivers compliant with this version of the specification MUST check this field for
//# zero, and close the connection and report an error locally if any other value is detected.
fn every_revision_pair() {
    let ranges: Vec<(Revision, Revision)> = Revision::ALL
        .iter()
        .flat_map(|lo| {
            Revision::ALL
                .iter()
                .filter(move |hi| *hi >= lo)
                .map(move |hi| (*lo, *hi))
        })
        .collect();
    assert_eq!(ranges.len(), 6);
    for &(ilo, ihi) in &ranges {
        for &(rlo, rhi) in &ranges {
            let ic = StartupConfig {
                min_revision: ilo,
                max_revision: ihi,
                ..cfg()
            };
            let rc = StartupConfig {
                min_revision: rlo,
                max_revision: rhi,
                ..cfg()
            };
            let run = accept_all(ic, rc);
            let reply_rev = ihi.min(rhi);
            let ctx = format!("initiator {ilo}..={ihi}, responder {rlo}..={rhi}");
            if reply_rev < rlo {
                // The responder cannot go that low: it closes, unanswered.
                assert_eq!(
                    run.responder_result,
                    Err(StartupError::UnsupportedRevision {
                        revision: ihi.wire()
                    }),
                    "{ctx}"
                );
                assert!(run.reply.is_empty());
                assert_eq!(
                    run.initiator_result,
                    Err(StartupError::ConnectionClosed {
                        waiting_for: Awaiting::Reply
                    }),
                    "{ctx}"
                );
            } else if reply_rev < ilo {
                // The responder goes lower than the initiator accepts: it
                // has accepted, the initiator refuses the Reply and closes.
                assert_eq!(run.responder_result, Ok(()), "{ctx}");
                assert_eq!(
                    run.initiator_result,
                    Err(StartupError::UnsupportedRevision {
                        revision: reply_rev.wire()
                    }),
                    "{ctx}"
                );
            } else {
                let (i, _) = both_established(&run);
                assert_eq!(i.revision, Some(reply_rev), "{ctx}");
                // Enhanced data only when both speak revision 2.
                assert_eq!(i.ird_ord.is_some(), reply_rev == Revision::Rev2, "{ctx}");
            }
        }
    }
}

#[test]
//= rfc5044#7.1.1
//= type=test
//# If the MPA receiver cannot interoperate with the received version, then it MUST close the
//# connection and report an error locally.
fn initiator_refuses_a_reply_below_its_minimum() {
    let now = Instant::now();
    let config = StartupConfig {
        min_revision: Revision::Rev2,
        ..cfg()
    };
    let (mut i, _) = initiator(config, b"", now);
    let s = feed_whole(&mut i, &reply("0001 0000"), false, now);
    assert_eq!(
        s.result,
        Err(StartupError::UnsupportedRevision { revision: 1 })
    );
}

#[test]
fn initiator_refuses_a_reply_above_its_request() {
    let now = Instant::now();
    let config = StartupConfig {
        max_revision: Revision::Rev1,
        ..cfg()
    };
    let (mut i, _) = initiator(config, b"", now);
    let s = feed_whole(&mut i, &reply("0002 0000"), false, now);
    assert_eq!(
        s.result,
        Err(StartupError::ReplyRevisionTooHigh {
            requested: Revision::Rev1,
            replied: 2
        })
    );
    let s = feed_whole(
        &mut initiator(cfg(), b"", now).0,
        &reply("0003 0000"),
        false,
        now,
    );
    assert_eq!(
        s.result,
        Err(StartupError::UnsupportedRevision { revision: 3 })
    );
}

#[test]
fn enhanced_reply_consistency() {
    let now = Instant::now();
    // Enhanced request, revision 2 reply without enhanced data.
    let (mut i, _) = initiator(cfg(), b"", now);
    let s = feed_whole(&mut i, &reply("0002 0000"), false, now);
    assert_eq!(s.result, Err(StartupError::ReplyNotEnhanced));
    // Enhanced request, revision 1 reply: fine, no IRD/ORD.
    let (mut i, _) = initiator(cfg(), b"", now);
    let s = feed_whole(&mut i, &reply("0001 0000"), false, now);
    assert_eq!(s.result, Ok(()));
    assert_eq!(established(&s.events).unwrap().ird_ord, None);
    // Plain revision 2 request, enhanced reply.
    let plain = StartupConfig {
        enhanced: false,
        ..cfg()
    };
    let (mut i, _) = initiator(plain.clone(), b"", now);
    let s = feed_whole(&mut i, &reply("1002 0004 0010 0010"), false, now);
    assert_eq!(s.result, Err(StartupError::UnexpectedEnhancedReply));
    // Plain revision 2 both ways: no IRD/ORD.
    let run = accept_all(plain, cfg());
    let (i, _) = both_established(&run);
    assert_eq!(i.revision, Some(Revision::Rev2));
    assert_eq!(i.ird_ord, None);
    assert_eq!(&run.reply[16..20], &[0x40, 0x02, 0x00, 0x00]);
}

// ---------------------------------------------------------------------------
// Markers and CRC: every combination, both ends

#[test]
//= rfc5044#7.1.1
//= type=test
//# When in a received MPA Request Frame or MPA Reply Frame and the value is '0', Markers MUST
//# NOT be added to the data stream by that endpoint.
//= rfc5044#7.1.1
//= type=test
//# When '1' Markers MUST be added as described in Section 4.3, MPA Markers.
fn every_marker_and_crc_combination() {
    let policies = [CrcPolicy::Required, CrcPolicy::Preferred, CrcPolicy::Off];
    for i_m in [false, true] {
        for r_m in [false, true] {
            for i_crc in policies {
                for r_crc in policies {
                    let ic = StartupConfig {
                        request_markers: i_m,
                        crc: i_crc,
                        ..cfg()
                    };
                    let rc = StartupConfig {
                        request_markers: r_m,
                        crc: r_crc,
                        ..cfg()
                    };
                    let ctx = format!("M {i_m}/{r_m}, CRC {i_crc:?}/{r_crc:?}");
                    let run = accept_all(ic, rc);
                    let i_c = i_crc.sends_crc();
                    if r_crc == CrcPolicy::Required && !i_c {
                        // The responder insists and the Request has C=0.
                        assert_eq!(
                            refusal(&run.responder_events),
                            Some(&StartupError::CrcRefused {
                                detected_by: Role::Responder
                            }),
                            "{ctx}"
                        );
                        assert_eq!(run.responder.state(), State::Rejected, "{ctx}");
                        assert_eq!(run.initiator.state(), State::Rejected, "{ctx}");
                        continue;
                    }
                    let crc = i_c || r_crc.sends_crc();
                    // The Reply's C bit is the connection's CRC state, so an
                    // initiator that requires CRC always sees it.
                    let (i, r) = both_established(&run);
                    assert_eq!(
                        i.framing,
                        FramingParams {
                            crc,
                            send_markers: r_m,
                            receive_markers: i_m
                        },
                        "{ctx}"
                    );
                    assert_eq!(
                        r.framing,
                        FramingParams {
                            crc,
                            send_markers: i_m,
                            receive_markers: r_m
                        },
                        "{ctx}"
                    );
                    let req = request_event(&run.responder_events).unwrap();
                    assert_eq!(req.markers, i_m);
                    assert_eq!(req.crc, i_c);
                    assert_eq!(req.framing, r.framing);
                }
            }
        }
    }
}

#[test]
fn crc_required_initiator_refuses_a_reply_without_c() {
    let now = Instant::now();
    let config = StartupConfig {
        crc: CrcPolicy::Required,
        ..cfg()
    };
    let (mut i, req) = initiator(config.clone(), b"", now);
    assert_eq!(req[16] & FLAG_CRC, FLAG_CRC);
    let s = feed_whole(&mut i, &reply("1002 0004 0010 0010"), false, now);
    let e = s.result.unwrap_err();
    assert_eq!(
        e,
        StartupError::CrcRefused {
            detected_by: Role::Initiator
        }
    );
    // The responder is already in full operation: close.
    assert!(e.closes_connection());
    let (mut i, _) = initiator(config, b"", now);
    let s = feed_whole(&mut i, &reply("5002 0004 0010 0010"), false, now);
    assert!(established(&s.events).unwrap().framing.crc);
}

#[test]
fn crc_off_honours_the_peers_request() {
    let now = Instant::now();
    let (mut i, req) = initiator(siw(), b"", now);
    assert_eq!(req[16] & FLAG_CRC, 0);
    let s = feed_whole(&mut i, &reply("5002 0004 0010 0010"), false, now);
    assert!(established(&s.events).unwrap().framing.crc);
    let (mut i, _) = initiator(siw(), b"", now);
    let s = feed_whole(&mut i, &reply("1002 0004 0010 0010"), false, now);
    assert!(!established(&s.events).unwrap().framing.crc);
}

#[test]
fn markers_refused_by_either_end() {
    // The responder cannot send markers the initiator asks for.
    let ic = StartupConfig {
        request_markers: true,
        ..cfg()
    };
    let run = accept_all(ic, siw());
    assert_eq!(
        refusal(&run.responder_events),
        Some(&StartupError::MarkersRefused {
            detected_by: Role::Responder
        })
    );
    assert_eq!(run.initiator.state(), State::Rejected);
    // The initiator cannot send markers the responder asks for.
    let rc = StartupConfig {
        request_markers: true,
        ..cfg()
    };
    let run = accept_all(siw(), rc);
    assert_eq!(run.responder_result, Ok(()));
    let e = run.initiator_result.unwrap_err();
    assert_eq!(
        e,
        StartupError::MarkersRefused {
            detected_by: Role::Initiator
        }
    );
    assert!(e.closes_connection());
}

// ---------------------------------------------------------------------------
// IRD/ORD (RFC 6581)

#[test]
fn ird_ord_clamped_to_the_responders_limits() {
    let ic = StartupConfig {
        ird: 100,
        ord: 3,
        ..cfg()
    };
    let rc = StartupConfig {
        ird: 8,
        ord: 20,
        ..cfg()
    };
    let run = accept_all(ic, rc);
    let (i, r) = both_established(&run);
    // Responder IRD = min(initiator ORD 3, 8); ORD = min(initiator IRD 100, 20).
    assert_eq!(r.ird_ord, Some(IrdOrd::new(3, 20)));
    assert_eq!(i.ird_ord, Some(IrdOrd::new(20, 3)));
    assert_eq!(&run.reply[20..24], &[0x00, 0x03, 0x00, 0x14]);
    let req = request_event(&run.responder_events).unwrap();
    assert_eq!(req.enhanced.unwrap().ird_ord(), IrdOrd::new(100, 3));
}

#[test]
fn application_may_grant_less_never_more() {
    let now = Instant::now();
    for (wanted, granted) in [
        (IrdOrd::new(16, 0), IrdOrd::new(16, 0)),
        (IrdOrd::new(1000, 1000), IrdOrd::new(16, 16)),
    ] {
        let (mut i, req) = initiator(cfg(), b"", now);
        let mut r = responder(cfg(), now);
        r.handle_input(&req, now).unwrap();
        r.accept_with(b"", Some(wanted)).unwrap();
        assert_eq!(r.established().unwrap().ird_ord, Some(granted));
        let rep = drain(&mut r);
        i.handle_input(&rep, now).unwrap();
        sit_out_hold(&mut i).unwrap();
        assert_eq!(
            i.established().unwrap().ird_ord,
            Some(IrdOrd::new(granted.ord, granted.ird))
        );
    }
}

#[test]
//= rfc6581#7.1
//= type=test
//# An Initiator whose IRD is less than the Responder's ORD MUST either raise its IRD or
//# terminate the connection with the insufficient IRD error.
fn insufficient_ird_strict_and_relaxed() {
    let now = Instant::now();
    // Our IRD 4; the responder's ORD 16 (above) and IRD 16.
    for (mode, ok) in [
        (IrdOrdNegotiation::Strict, false),
        (IrdOrdNegotiation::Relaxed, true),
    ] {
        let config = StartupConfig {
            ird: 4,
            ird_ord_negotiation: mode,
            ..cfg()
        };
        let (mut i, _) = initiator(config, b"", now);
        let s = feed_whole(&mut i, &reply("5002 0004 0010 0010"), false, now);
        if ok {
            // Relaxed, as Linux siw: our IRD rises to the responder's ORD.
            assert_eq!(
                established(&s.events).unwrap().ird_ord,
                Some(IrdOrd::new(16, 16))
            );
        } else {
            let e = s.result.unwrap_err();
            assert_eq!(
                e,
                StartupError::InsufficientIrd {
                    ird: 4,
                    peer_ord: 16
                }
            );
            assert_eq!(e.llp_error_code(), LlpErrorCode::InsufficientIrd);
            assert!(e.closes_connection());
        }
    }
    // A conforming responder never causes it: it clamps its ORD to our IRD.
    let ic = StartupConfig {
        ird: 4,
        ird_ord_negotiation: IrdOrdNegotiation::Strict,
        ..cfg()
    };
    let run = accept_all(ic, cfg());
    both_established(&run);
}

/// The ULPDU of an LLP Terminate with `code`, MSN 1, no header copies:
/// written out from RFC 5040 §4.8 and RFC 6581, not built by the crate.
fn llp_terminate_ulpdu(code: u8) -> Vec<u8> {
    let mut u = hex("4147 00000000 00000002 00000001 00000000");
    u.extend([0x20, code, 0, 0]);
    u
}

/// The ULPDUs a receiver with `framing` finds in `wire`, and whether any
/// octet was left over or failed the framing checks.
fn deframe(framing: FramingParams, wire: &[u8]) -> Vec<Vec<u8>> {
    let mut rx = crate::mpa::FpduReceiver::new(framing);
    let mut out = crate::framing::CollectUlpdus::new();
    assert_eq!(rx.receive(wire, &mut out), Ok(wire.len()), "well framed");
    assert!(rx.at_boundary(), "whole FPDUs");
    out.complete
}

/// RFC 6581: an initiator that cannot go on with a valid Reply (the
/// responder's ORD above its IRD under strict negotiation, no RTR type in
/// common) owes the responder, already in full operation, a Terminate
/// with LLP code 0x06 or 0x07 as its first and only FPDU, framed as the
/// Reply settled (CRC, markers). A Reply it refuses as such (malformed,
/// markers or CRC it will not do) gets none: RFC 5044 §7.1.2 rule 3
/// closes.
#[test]
//= rfc6581#9
//= type=test
//# An Initiator that cannot use a valid Reply MUST send a Terminate Message carrying the LLP
//# error code as its first FPDU before it closes.
fn initiator_terminates_after_a_valid_reply_it_cannot_use() {
    let now = Instant::now();
    let strict = StartupConfig {
        ird: 4,
        ird_ord_negotiation: IrdOrdNegotiation::Strict,
        ..cfg()
    };
    let p2p = StartupConfig {
        peer_to_peer: true,
        rtr_types: RtrTypes::WRITE_READ,
        ..cfg()
    };
    let cases = [
        // (config, Reply after the key, code, framing our end sends with)
        (strict.clone(), "5002 0004 0010 0010", 0x06, (true, false)),
        (
            StartupConfig {
                crc: CrcPolicy::Off,
                ..strict.clone()
            },
            "1002 0004 0010 0010",
            0x06,
            (false, false),
        ),
        // The responder wants markers in what we send.
        (strict, "d002 0004 0010 0010", 0x06, (true, true)),
        // Send selected, Write and Read offered.
        (p2p.clone(), "1002 0004 c010 0010", 0x07, (true, false)),
        // Nothing selected.
        (p2p.clone(), "1002 0004 8010 0010", 0x07, (true, false)),
        // A revision 1 Reply cannot select an RTR.
        (p2p, "4001 0000", 0x07, (true, false)),
    ];
    for (config, words, code, (crc, markers)) in cases {
        let (mut i, _) = initiator(config, b"", now);
        let s = feed_whole(&mut i, &reply(words), false, now);
        let e = s.result.unwrap_err();
        assert_eq!(e.llp_error_code().code(), code, "{words}: {e:?}");
        assert!(e.closes_connection());
        assert!(e.terminate_queued());
        assert_eq!(s.state, State::Failed);
        assert!(s.events.is_empty(), "{words}: {:?}", s.events);
        let ours = FramingParams {
            crc,
            send_markers: markers,
            receive_markers: false,
        };
        let ulpdus = deframe(ours.mirrored(), &s.transmit);
        assert_eq!(ulpdus, [llp_terminate_ulpdu(code)], "{words}");
        if markers {
            assert_eq!(s.transmit[..4], [0; 4], "a marker opens the stream");
        }
        if !crc {
            // Written out whole: ULPDU_Length 22, the ULPDU, no pad, a
            // zero CRC field.
            let mut want = hex("0016");
            want.extend(llp_terminate_ulpdu(code));
            want.extend([0; 4]);
            assert_eq!(s.transmit, want);
        }
        // Nothing more, whatever comes next.
        assert!(i.handle_input(b"more", now).is_err());
        assert_eq!(drain(&mut i), b"");
    }
    // Replies refused as such: no Terminate.
    let markers_refused = StartupConfig {
        send_markers_on_request: false,
        ..cfg()
    };
    let crc_required = StartupConfig {
        crc: CrcPolicy::Required,
        ..cfg()
    };
    for (config, words) in [
        (cfg(), "5003 0004 0010 0010"),
        (markers_refused, "d002 0004 0010 0010"),
        (crc_required, "1002 0004 0010 0010"),
        (cfg(), "4002 0000"),
    ] {
        let (mut i, _) = initiator(config, b"", now);
        let s = feed_whole(&mut i, &reply(words), false, now);
        assert!(!s.result.unwrap_err().terminate_queued(), "{words}");
        assert_eq!(s.transmit, b"", "{words}");
    }
}

// ---------------------------------------------------------------------------
// Peer-to-peer RTR selection (RFC 6581)

fn rtr_sets() -> Vec<RtrTypes> {
    (0..8u8)
        .map(|b| RtrTypes {
            write: b & 1 != 0,
            read: b & 2 != 0,
            send: b & 4 != 0,
        })
        .collect()
}

#[test]
fn every_rtr_combination() {
    for offered in rtr_sets().into_iter().filter(|s| !s.is_empty()) {
        for acceptable in rtr_sets() {
            let ic = StartupConfig {
                peer_to_peer: true,
                rtr_types: offered,
                ..cfg()
            };
            let rc = StartupConfig {
                rtr_types: acceptable,
                ..cfg()
            };
            let run = accept_all(ic, rc);
            let ctx = format!("offered {offered:?}, acceptable {acceptable:?}");
            let both = offered.intersection(acceptable);
            let want = [RtrType::Write, RtrType::Read, RtrType::Send]
                .into_iter()
                .find(|t| both.contains(*t));
            match want {
                Some(rtr) => {
                    let (i, r) = both_established(&run);
                    assert_eq!(i.rtr_to_send(), Some(rtr), "{ctx}");
                    assert_eq!(r.rtr_to_expect(), Some(rtr), "{ctx}");
                    let (repr, _) = StartupFrameRepr::parse_bytes(&run.reply).unwrap();
                    let e = repr.enhanced.unwrap();
                    assert!(e.peer_to_peer);
                    assert_eq!(e.rtr, RtrTypes::only(rtr), "exactly one selected: {ctx}");
                }
                None => {
                    assert_eq!(run.responder_result, Ok(()), "{ctx}");
                    assert_eq!(run.responder.state(), State::Rejected, "{ctx}");
                    let e = refusal(&run.responder_events).unwrap().clone();
                    assert_eq!(
                        e,
                        StartupError::NoMatchingRtr {
                            offered,
                            other: acceptable,
                            detected_by: Role::Responder
                        },
                        "{ctx}"
                    );
                    assert_eq!(e.llp_error_code(), LlpErrorCode::NoMatchingRtr);
                    assert!(e.reply_queued());
                    // The initiator sees a rejection.
                    assert_eq!(run.initiator.state(), State::Rejected, "{ctx}");
                }
            }
        }
    }
}

#[test]
fn no_p2p_means_no_rtr() {
    let run = accept_all(cfg(), cfg());
    let (i, r) = both_established(&run);
    assert_eq!(i.rtr, None);
    assert_eq!(r.rtr, None);
    assert_eq!(&run.reply[20..24], &[0x00, 0x10, 0x00, 0x10]);
}

#[test]
//= rfc6581#4
//= type=test
//# An Initiator that receives no RTR type it offered MUST terminate the connection with the no
//# matching RTR model error.
fn initiator_checks_the_replys_rtr_selection() {
    let now = Instant::now();
    let config = StartupConfig {
        peer_to_peer: true,
        rtr_types: RtrTypes::WRITE_READ,
        ..cfg()
    };
    // (reply words, expected selection)
    let cases = [
        ("8010 8010", Some(RtrType::Write)),
        ("8010 4010", Some(RtrType::Read)),
        ("0010 4010", Some(RtrType::Read)), // P2P bit not echoed: tolerated
        ("c010 0010", None),                // Send, not offered
        ("8010 0010", None),                // none selected
        // Several selected: any type in common is taken, Write first, as
        // Linux siw does (siw_proc_mpareply, siw_qp_mpa_rts).
        ("8010 c010", Some(RtrType::Write)),
        ("c010 c010", Some(RtrType::Write)),
        ("c010 4010", Some(RtrType::Read)), // Send and Read: Read offered
    ];
    for (words, want) in cases {
        let (mut i, _) = initiator(config.clone(), b"", now);
        let s = feed_whole(&mut i, &reply(&format!("1002 0004 {words}")), false, now);
        match want {
            Some(rtr) => assert_eq!(
                established(&s.events).unwrap().rtr_to_send(),
                Some(rtr),
                "{words}"
            ),
            None => {
                let e = s.result.unwrap_err();
                assert!(
                    matches!(
                        e,
                        StartupError::NoMatchingRtr {
                            detected_by: Role::Initiator,
                            ..
                        }
                    ),
                    "{words}: {e:?}"
                );
                assert!(e.closes_connection());
                assert_eq!(e.llp_error_code().code(), 0x07);
            }
        }
    }
    // A revision 1 reply cannot select an RTR.
    let (mut i, _) = initiator(config, b"", now);
    let s = feed_whole(&mut i, &reply("0001 0000"), false, now);
    assert!(matches!(s.result, Err(StartupError::NoMatchingRtr { .. })));
}

/// A zero-length Read RTR takes an ORD slot at the initiator and an IRD
/// slot at the responder: with a 0 there (no longer taken as 1), it is
/// neither offered, nor selected, nor accepted, nor granted away.
#[test]
fn a_read_rtr_needs_a_read_slot_at_both_ends() {
    let now = Instant::now();
    let p2p = |rtr_types, ird, ord| StartupConfig {
        peer_to_peer: true,
        rtr_types,
        ird,
        ord,
        ..cfg()
    };
    let read_only = RtrTypes::only(RtrType::Read);
    // Nothing left to offer.
    assert!(matches!(
        Initiator::new(p2p(read_only, 16, 0), b"", now),
        Err(StartupError::InvalidConfig(ConfigError::ReadRtrWithoutOrd))
    ));
    // Write and Read configured, ORD 0: only Write offered.
    let (_, req) = initiator(p2p(RtrTypes::WRITE_READ, 16, 0), b"", now);
    assert_eq!(&req[16..24], &hex("5002 0004 8010 8000")[..]);
    // A responder that would run with IRD 0 refuses a Read-only offer...
    let no_ird = StartupConfig { ird: 0, ..cfg() };
    let run = accept_all(p2p(read_only, 16, 16), no_ird.clone());
    assert!(matches!(
        refusal(&run.responder_events),
        Some(StartupError::NoMatchingRtr {
            detected_by: Role::Responder,
            ..
        })
    ));
    // ...and picks Write when it can.
    let run = accept_all(p2p(RtrTypes::ALL, 16, 16), no_ird);
    let (i, _) = both_established(&run);
    assert_eq!(i.rtr_to_send(), Some(RtrType::Write));
    // An application granting IRD 0 keeps the slot a Read RTR needs.
    let (mut i, req) = initiator(p2p(read_only, 16, 16), b"", now);
    let mut r = responder(cfg(), now);
    r.handle_input(&req, now).unwrap();
    r.accept_with(b"", Some(IrdOrd::new(0, 16))).unwrap();
    assert_eq!(r.established().unwrap().ird_ord, Some(IrdOrd::new(1, 16)));
    i.handle_input(&drain(&mut r), now).unwrap();
    sit_out_hold(&mut i).unwrap();
    assert_eq!(i.established().unwrap().rtr_to_send(), Some(RtrType::Read));
    // A Reply selecting Read while granting IRD 0 cannot be met: 0x07,
    // with the Terminate.
    let (mut i, _) = initiator(p2p(read_only, 16, 16), b"", now);
    let s = feed_whole(&mut i, &reply("5002 0004 8000 4010"), false, now);
    let e = s.result.unwrap_err();
    assert_eq!(e.llp_error_code(), LlpErrorCode::NoMatchingRtr);
    assert!(e.terminate_queued());
    assert_eq!(
        deframe(
            FramingParams {
                crc: true,
                ..FramingParams::default()
            },
            &s.transmit
        ),
        [llp_terminate_ulpdu(0x07)]
    );
}

#[test]
fn siw_as_initiator_with_p2p_meets_our_responder() {
    // siw offers Write and Read; we prefer Write.
    let ic = StartupConfig {
        peer_to_peer: true,
        ..siw()
    };
    let run = accept_all(ic, cfg());
    let (i, _) = both_established(&run);
    assert_eq!(i.rtr_to_send(), Some(RtrType::Write));
}

// ---------------------------------------------------------------------------
// Stream handling

/// A valid Request and Reply of each revision.
fn valid_frames() -> Vec<(&'static str, Vec<u8>, FrameKind)> {
    vec![
        ("rev1", request("4001 0003 616263"), FrameKind::Request),
        (
            "rev2 enhanced",
            request("5002 0007 0010 0010 616263"),
            FrameKind::Request,
        ),
        ("rev0", request("c000 0002 0102"), FrameKind::Request),
        ("rev1 reply", reply("4001 0003 616263"), FrameKind::Reply),
        (
            "rev2 reply",
            reply("5002 0006 0010 0010 6869"),
            FrameKind::Reply,
        ),
    ]
}

/// A machine that waits for `kind`, configured to take every valid frame.
fn machine_for(kind: FrameKind, now: Instant) -> Box<dyn MpaStartup> {
    match kind {
        FrameKind::Request => Box::new(responder(cfg(), now)),
        FrameKind::Reply => Box::new(initiator(cfg(), b"", now).0),
    }
}

fn run_boxed(kind: FrameKind, chunks: &[&[u8]], eof: bool, now: Instant) -> Summary {
    let mut m = machine_for(kind, now);
    feed(&mut m, chunks.iter().copied(), eof, now)
}

#[test]
fn valid_frames_every_prefix_then_eof() {
    let now = Instant::now();
    for (name, bytes, kind) in valid_frames() {
        let waiting_for = match kind {
            FrameKind::Request => Awaiting::Request,
            FrameKind::Reply => Awaiting::Reply,
        };
        for cut in 0..bytes.len() {
            let whole = run_boxed(kind, &[&bytes[..cut]], true, now);
            let want = if cut == 0 {
                StartupError::ConnectionClosed { waiting_for }
            } else {
                StartupError::Truncated {
                    received: cut,
                    expected: (cut >= HEADER_LEN).then_some(bytes.len()),
                }
            };
            assert_eq!(whole.result, Err(want.clone()), "{name} cut {cut}");
            assert_eq!(whole.consumed, Some(cut));
            assert_eq!(want.llp_error_code().code(), if cut == 0 { 1 } else { 4 });
            assert!(want.closes_connection());
            let mut m = machine_for(kind, now);
            let bytewise = feed_bytewise(&mut m, &bytes[..cut], true, now);
            assert_eq!(bytewise, whole, "{name} cut {cut} byte by byte");
        }
        // The whole frame, then EOF: for the initiator the startup is over
        // and the EOF is the upper layer's business; the responder was
        // still waiting for its application.
        let s = run_boxed(kind, &[&bytes], true, now);
        assert_eq!(s.consumed, Some(bytes.len()));
        let want = match kind {
            FrameKind::Request => Err(StartupError::ConnectionClosed {
                waiting_for: Awaiting::Decision,
            }),
            FrameKind::Reply => Ok(()),
        };
        assert_eq!(s.result, want, "{name}");
    }
}

/// Malformed frames: name, octets, expected kind, the error, and the
/// length of the prefix at which it shows.
fn malformed_frames() -> Vec<(&'static str, Vec<u8>, FrameKind, StartupError, usize)> {
    let mut garbage_key = request("0001 0000");
    garbage_key[3] = b'!';
    let mut big = request("0001 0201");
    big.resize(20 + 513, 0);
    vec![
        (
            "bad key",
            garbage_key.clone(),
            FrameKind::Request,
            StartupError::BadKey {
                expected: FrameKind::Request,
                seen: garbage_key[..16].try_into().unwrap(),
            },
            16,
        ),
        (
            "request to initiator",
            request("0001 0000"),
            FrameKind::Reply,
            StartupError::InitiatorInitiator,
            16,
        ),
        (
            "reply to responder",
            reply("0001 0000"),
            FrameKind::Request,
            StartupError::UnexpectedReply,
            16,
        ),
        (
            "revision 3",
            request("0003 0000"),
            FrameKind::Request,
            StartupError::UnsupportedRevision { revision: 3 },
            20,
        ),
        (
            "revision 255 reply",
            reply("00ff 0000"),
            FrameKind::Reply,
            StartupError::UnsupportedRevision { revision: 255 },
            20,
        ),
        (
            "PD_Length 513",
            big,
            FrameKind::Request,
            StartupError::PrivateDataTooLong {
                revision: Revision::Rev1,
                length: 513,
                max: 512,
            },
            20,
        ),
        (
            "enhanced, PD_Length 3",
            request("1002 0003 000000"),
            FrameKind::Request,
            StartupError::EnhancedDataMissing { pd_length: 3 },
            20,
        ),
        (
            "enhanced reply, PD_Length 0",
            reply("1002 0000"),
            FrameKind::Reply,
            StartupError::EnhancedDataMissing { pd_length: 0 },
            20,
        ),
    ]
}

#[test]
//= rfc5044#7.1.1
//= type=test
//# If the receiver detects that the PD_Length field does not match the length of the Private
//# Data field, or if the length of the Private Data field exceeds 512 octets, the receiver MUST
//# close the connection and report an error locally.
//= rfc5044#7.1.2
//= type=test
//# If any of the above fails, the startup frame MUST be considered improperly formatted.
fn malformed_frames_cut_at_every_length() {
    let now = Instant::now();
    for (name, bytes, kind, error, shows_at) in malformed_frames() {
        for cut in 0..=bytes.len() {
            let whole = run_boxed(kind, &[&bytes[..cut]], true, now);
            let want = if cut >= shows_at {
                error.clone()
            } else if cut == 0 {
                StartupError::ConnectionClosed {
                    waiting_for: match kind {
                        FrameKind::Request => Awaiting::Request,
                        FrameKind::Reply => Awaiting::Reply,
                    },
                }
            } else {
                StartupError::Truncated {
                    received: cut,
                    expected: None,
                }
            };
            assert_eq!(whole.result, Err(want), "{name} cut {cut}");
            assert!(whole.result.as_ref().unwrap_err().closes_connection());
            assert_eq!(whole.transmit, b"", "{name}: no reply to a malformed frame");
            let mut m = machine_for(kind, now);
            assert_eq!(
                feed_bytewise(&mut m, &bytes[..cut], true, now),
                whole,
                "{name} cut {cut} byte by byte"
            );
        }
    }
}

#[test]
fn frames_followed_by_extra_octets_leave_them() {
    let now = Instant::now();
    for (name, bytes, kind) in valid_frames() {
        let mut stream = bytes.clone();
        stream.extend_from_slice(b"\x00\x22\x41\x43 the first FPDU");
        let whole = run_boxed(kind, &[&stream], false, now);
        assert_eq!(whole.result, Ok(()), "{name}");
        assert_eq!(whole.consumed, Some(bytes.len()), "{name}");
        // Byte by byte, the machine stops taking at the same octet.
        let mut m = machine_for(kind, now);
        let bytewise = feed_bytewise(&mut m, &stream, false, now);
        assert_eq!(bytewise, whole, "{name}");
        // Later input is not taken either.
        assert_eq!(m.handle_input(&stream[bytes.len()..], now), Ok(0));
    }
}

#[test]
fn large_revision_0_private_data_both_ways() {
    let now = Instant::now();
    let big: Vec<u8> = (0..65535u32).map(|i| (i * 7 % 256) as u8).collect();
    let config = StartupConfig {
        max_revision: Revision::Rev0,
        max_private_data: 65535,
        ..cfg()
    };
    let run = connect(config.clone(), config, &big, Decide::Accept(&big));
    let (i, r) = both_established(&run);
    assert_eq!(i.revision, Some(Revision::Rev0));
    assert_eq!(r.private_data, big);
    assert_eq!(i.private_data, big);
    // The default local limit refuses it (rule 9).
    let (_, req) = initiator(
        StartupConfig {
            max_revision: Revision::Rev0,
            ..cfg()
        },
        &big,
        now,
    );
    let mut r = responder(cfg(), now);
    let s = feed_whole(&mut r, &req, false, now);
    assert_eq!(
        s.result,
        Err(StartupError::PrivateDataOverLocalLimit {
            length: 65535,
            limit: 512
        })
    );
}

#[test]
fn private_data_too_long_to_send() {
    let now = Instant::now();
    let pd = vec![0u8; 509];
    // Revision 2 enhanced: 512 - 4 = 508 octets for the application.
    assert_eq!(
        Initiator::new(cfg(), &pd, now).unwrap_err(),
        StartupError::LocalPrivateDataTooLong {
            length: 509,
            max: 508,
            revision: Revision::Rev2
        }
    );
    assert!(Initiator::new(cfg(), &pd[..508], now).is_ok());
    let rev1 = StartupConfig {
        max_revision: Revision::Rev1,
        ..cfg()
    };
    assert!(Initiator::new(rev1.clone(), &vec![0u8; 512], now).is_ok());
    assert!(Initiator::new(rev1, &vec![0u8; 513], now).is_err());

    // At the responder, a refused accept or reject changes nothing.
    let (_, req) = initiator(cfg(), b"", now);
    let mut r = responder(cfg(), now);
    r.handle_input(&req, now).unwrap();
    let e = r.accept(&pd).unwrap_err();
    assert!(!e.closes_connection());
    assert_eq!(e.llp_error_code(), LlpErrorCode::LocalCatastrophic);
    assert!(r.reject(&pd).is_err());
    assert_eq!(r.state(), State::AwaitingDecision);
    assert_eq!(drain(&mut r), b"");
    r.accept(&pd[..508]).unwrap();
    assert_eq!(drain(&mut r).len(), 20 + 512);
}

#[test]
fn application_calls_out_of_turn() {
    let now = Instant::now();
    let mut r = responder(cfg(), now);
    assert_eq!(
        r.accept(b""),
        Err(StartupError::WrongState(State::AwaitingRequest))
    );
    assert_eq!(
        r.reject(b""),
        Err(StartupError::WrongState(State::AwaitingRequest))
    );
    r.handle_input(&request("0001 0000"), now).unwrap();
    r.accept(b"").unwrap();
    assert_eq!(
        r.accept(b""),
        Err(StartupError::WrongState(State::Established))
    );
    assert_eq!(
        r.reject(b""),
        Err(StartupError::WrongState(State::Established))
    );
    assert_eq!(drain(&mut r), reply("4001 0000"));
}

#[test]
fn input_while_the_application_decides_is_left_alone() {
    let now = Instant::now();
    let mut r = responder(cfg(), now);
    let mut stream = request("0001 0000");
    stream.extend_from_slice(b"early");
    assert_eq!(r.handle_input(&stream, now), Ok(20));
    assert_eq!(r.handle_input(b"early", now), Ok(0));
    assert_eq!(r.state(), State::AwaitingDecision);
}

#[test]
fn invalid_configs_are_refused_up_front() {
    let now = Instant::now();
    let bad = StartupConfig {
        min_revision: Revision::Rev2,
        max_revision: Revision::Rev0,
        ..cfg()
    };
    assert!(matches!(
        Responder::new(bad.clone(), now),
        Err(StartupError::InvalidConfig(ConfigError::RevisionRange))
    ));
    assert!(Initiator::new(bad, b"", now).is_err());
}

// ---------------------------------------------------------------------------
// Property tests

/// Splits `bytes` at the given cut points.
fn chunked<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

fn arb_request() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        any::<bool>(),
        0u8..=2,
        any::<bool>(),
        any::<[u8; 4]>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(m, c, rev, enhanced, words, pd)| {
            let revision = Revision::from_wire(rev).unwrap();
            let enhanced = (enhanced && revision == Revision::Rev2)
                .then(|| EnhancedData::parse(&words).unwrap());
            StartupFrameRepr {
                kind: FrameKind::Request,
                markers: m,
                crc: c,
                rejected: false,
                revision,
                enhanced,
                private_data: &pd,
            }
            .to_bytes()
            .unwrap()
        })
}

fn arb_reply() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0u8..=2,
        any::<[u8; 4]>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(m, c, r, rev, words, pd)| {
            let revision = Revision::from_wire(rev).unwrap();
            // Our default initiator sends enhanced data; a revision 2
            // reply answers in kind.
            let enhanced =
                (revision == Revision::Rev2).then(|| EnhancedData::parse(&words).unwrap());
            StartupFrameRepr {
                kind: FrameKind::Reply,
                markers: m,
                crc: c,
                rejected: r,
                revision,
                enhanced,
                private_data: &pd,
            }
            .to_bytes()
            .unwrap()
        })
}

proptest! {
    #[test]
    fn valid_request_in_any_chunking(
        frame in arb_request(),
        tail in proptest::collection::vec(any::<u8>(), 0..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        eof: bool,
    ) {
        let now = Instant::now();
        let mut stream = frame.clone();
        stream.extend(&tail);
        let whole = run_boxed(FrameKind::Request, &[&stream], eof, now);
        let pieces = chunked(&stream, &cuts);
        let split = run_boxed(FrameKind::Request, &pieces, eof, now);
        prop_assert_eq!(&split, &whole);
        // A well-formed request is always taken whole, and either handed
        // to the application or refused by policy.
        prop_assert_eq!(whole.consumed, Some(frame.len()));
        prop_assert!(request_event(&whole.events).is_some() || refusal(&whole.events).is_some());
    }

    #[test]
    //= rfc5044#7.1.2
    //= type=test
    //# If the MPA Reply Frame is properly formatted and the Private Data is acceptable, and the
    //# Reject Connection bit is set to '0', the implementation SHOULD enter Full MPA/DDP
    //# Operation Phase; interpreting any received data as FPDUs and sending DDP ULPDUs as
    //# FPDUs.
    fn valid_reply_in_any_chunking(
        frame in arb_reply(),
        tail in proptest::collection::vec(any::<u8>(), 0..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        eof: bool,
    ) {
        let now = Instant::now();
        let mut stream = frame.clone();
        stream.extend(&tail);
        let whole = run_boxed(FrameKind::Reply, &[&stream], eof, now);
        let pieces = chunked(&stream, &cuts);
        let split = run_boxed(FrameKind::Reply, &pieces, eof, now);
        prop_assert_eq!(&split, &whole);
        // A well-formed reply is always taken whole; what it leads to
        // (established, rejected, or a negotiation failure) does not depend
        // on the chunking.
        prop_assert!(whole.consumed == Some(frame.len()) || whole.result.is_err());
    }

    #[test]
    fn arbitrary_octets_in_any_chunking(
        prefix in prop_oneof![Just(Vec::new()), Just(REQUEST_KEY.to_vec()), Just(REPLY_KEY.to_vec())],
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        eof: bool,
    ) {
        let now = Instant::now();
        let mut stream = prefix;
        stream.extend(&bytes);
        for kind in [FrameKind::Request, FrameKind::Reply] {
            let whole = run_boxed(kind, &[&stream], eof, now);
            let split = run_boxed(kind, &chunked(&stream, &cuts), eof, now);
            prop_assert_eq!(&split, &whole);
            prop_assert!(whole.consumed.unwrap_or(0) <= stream.len());
        }
    }
}
