//! The stateful checks, the operations and the CRC resynchronisation, each
//! on a capture built here for it: one test per check, and clean traffic
//! that must show none.

use iwarp_decode::checks::FindingKind;
use iwarp_decode::event::{Event, GapAction, ResyncMethod};
use iwarp_decode::ops::OperationKind;
use iwarp_decode::synth::{read_request, tagged, untagged, Framer, Tcp, C2S, S2C};
use iwarp_decode::{Options, Record, Summary};

/// rping's Request (IRD 1, ORD 1) and a Reply with CRC.
const REQUEST: &[u8] = b"MPA ID Req Frame\x10\x02\x00\x04\x00\x01\x00\x01";
const REPLY_CRC: &[u8] = b"MPA ID Rep Frame\x50\x02\x00\x04\x00\x01\x00\x01";

fn decode_with(t: &Tcp, opts: Options) -> (Vec<Record>, Summary) {
    t.decode(opts)
}

fn decode(t: &Tcp) -> (Vec<Record>, Summary) {
    decode_with(t, Options::default())
}

fn findings(r: &[Record]) -> Vec<(FindingKind, Vec<u64>)> {
    r.iter()
        .filter_map(|r| match &r.event {
            Event::Finding(f) => Some((f.kind.clone(), f.frames.clone())),
            _ => None,
        })
        .collect()
}

/// The handshake and startup: client and server framers after it.
fn session(port: u16) -> (Tcp, Framer, Framer) {
    let mut t = Tcp::new(port, 4791);
    t.handshake();
    t.send(C2S, REQUEST);
    t.send(S2C, REPLY_CRC);
    (t, Framer::new(true, false), Framer::new(true, false))
}

fn send(msn: u32, payload: &[u8]) -> Vec<u8> {
    untagged(true, 3, 0, 0, msn, 0, payload)
}

#[test]
fn clean_traffic_has_no_findings_and_its_operations_add_up() {
    let (mut t, mut c, mut s) = session(42000);
    // A Send in two segments, a Write in two, a Read answered in two.
    t.send(C2S, &c.fpdu(&untagged(false, 3, 0, 0, 1, 0, &[1; 100])));
    t.send(C2S, &c.fpdu(&untagged(true, 3, 0, 0, 1, 100, &[1; 50])));
    t.send(C2S, &c.fpdu(&tagged(false, 0, 0x100, 0x1000, &[2; 64])));
    t.send(C2S, &c.fpdu(&tagged(true, 0, 0x100, 0x1040, &[2; 36])));
    let rr = read_request(0x200, 0x2000, 80, 0x300, 0x3000);
    t.send(C2S, &c.fpdu(&untagged(true, 1, 0, 1, 1, 0, &rr)));
    t.send(S2C, &s.fpdu(&tagged(false, 2, 0x200, 0x2000, &[3; 40])));
    t.send(S2C, &s.fpdu(&tagged(true, 2, 0x200, 0x2028, &[3; 40])));
    t.send(S2C, &s.fpdu(&untagged(true, 5, 0, 0, 1, 0, b"se")));
    t.fin(C2S);
    t.fin(S2C);
    let (r, summary) = decode(&t);
    assert!(findings(&r).is_empty(), "{:?}", findings(&r));
    assert_eq!(summary.errors.total(), 0);
    let ops: Vec<_> = r
        .iter()
        .filter_map(|r| match &r.event {
            Event::Operation(o) => Some((r.src.port(), o.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(ops.len(), 4, "{ops:?}");
    assert!(matches!(
        ops[0].1.kind,
        OperationKind::Send {
            msn: 1,
            solicited: false,
            ..
        }
    ));
    assert_eq!((ops[0].1.octets, ops[0].1.segments), (150, 2));
    assert!(matches!(
        ops[1].1.kind,
        OperationKind::Write { to: 0x1000, .. }
    ));
    assert_eq!(ops[1].1.octets, 100);
    // The Read is the requester's (the client's), timed Request to last Response.
    assert_eq!(ops[2].0, 42000);
    assert!(matches!(
        ops[2].1.kind,
        OperationKind::Read {
            size: 80,
            msn: 1,
            ..
        }
    ));
    assert_eq!((ops[2].1.octets, ops[2].1.segments), (80, 2));
    assert!((ops[2].1.duration - 0.0002).abs() < 1e-6, "{:?}", ops[2].1);
    assert!(matches!(
        ops[3].1.kind,
        OperationKind::Send {
            solicited: true,
            ..
        }
    ));
    let o = &summary.connections[0].operations;
    assert_eq!(o.classes[0].count, 2);
    assert_eq!(o.classes[1].octets, 100);
    assert_eq!(o.classes[2].count, 1);
    let latency = o.read_latency.expect("a Read was timed");
    assert_eq!(latency.count, 1);
    assert!((latency.p50 - 0.0002).abs() < 1e-6);
}

#[test]
fn msn_gap_and_repeat() {
    let (mut t, mut c, _) = session(42001);
    t.send(C2S, &c.fpdu(&send(1, b"a")));
    t.send(C2S, &c.fpdu(&send(3, b"b")));
    t.send(C2S, &c.fpdu(&send(3, b"c")));
    t.send(C2S, &c.fpdu(&send(4, b"d")));
    let (r, _) = decode(&t);
    let f = findings(&r);
    assert_eq!(
        f,
        [
            (
                FindingKind::MsnGap {
                    qn: 0,
                    expected: 2,
                    got: 3
                },
                vec![6, 7]
            ),
            (
                FindingKind::MsnRepeat {
                    qn: 0,
                    expected: 4,
                    got: 3
                },
                vec![7, 8]
            ),
        ]
    );
}

#[test]
fn message_offsets_and_tagged_offsets_must_continue() {
    let (mut t, mut c, _) = session(42002);
    t.send(C2S, &c.fpdu(&untagged(false, 3, 0, 0, 1, 0, &[0; 10])));
    t.send(C2S, &c.fpdu(&untagged(true, 3, 0, 0, 1, 12, &[0; 10])));
    t.send(C2S, &c.fpdu(&tagged(false, 0, 7, 0x100, &[0; 16])));
    t.send(C2S, &c.fpdu(&tagged(true, 0, 7, 0x200, &[0; 16])));
    let (r, _) = decode(&t);
    let f = findings(&r);
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!(
        f[0].0,
        FindingKind::MoDiscontinuity {
            qn: 0,
            msn: 1,
            expected: 10,
            got: 12
        }
    );
    assert!(matches!(
        f[1].0,
        FindingKind::ToDiscontinuity {
            expected: 0x110,
            got: 0x200,
            ..
        }
    ));
    assert_eq!(f[1].1, [8, 9]);
}

#[test]
fn read_responses_against_their_requests() {
    let (mut t, mut c, mut s) = session(42003);
    // Request 1: 32 octets into STag 0x10 at 0x1000. Answered with the
    // wrong TO and too few octets.
    t.send(
        C2S,
        &c.fpdu(&untagged(
            true,
            1,
            0,
            1,
            1,
            0,
            &read_request(0x10, 0x1000, 32, 1, 0),
        )),
    );
    t.send(S2C, &s.fpdu(&tagged(true, 2, 0x10, 0x1008, &[0; 24])));
    // A Response nobody asked for.
    t.send(S2C, &s.fpdu(&tagged(true, 2, 0x99, 0, &[0; 4])));
    // Request 2 answered with another STag.
    t.send(
        C2S,
        &c.fpdu(&untagged(
            true,
            1,
            0,
            1,
            2,
            0,
            &read_request(0x20, 0, 8, 1, 0),
        )),
    );
    t.send(S2C, &s.fpdu(&tagged(true, 2, 0x21, 0, &[0; 8])));
    let (r, _) = decode(&t);
    let f = findings(&r);
    let kinds: Vec<&FindingKind> = f.iter().map(|(k, _)| k).collect();
    assert!(
        kinds.contains(&&FindingKind::ReadResponseTo {
            expected: 0x1000,
            got: 0x1008
        }),
        "{f:?}"
    );
    assert!(
        kinds.contains(&&FindingKind::ReadResponseSize {
            expected: 32,
            got: 24
        }),
        "{f:?}"
    );
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, FindingKind::UnexpectedReadResponse { .. })),
        "{f:?}"
    );
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, FindingKind::ReadResponseStag { .. })),
        "{f:?}"
    );
    // With the frames of the Request and of the Response.
    let size = f
        .iter()
        .find(|(k, _)| matches!(k, FindingKind::ReadResponseSize { .. }))
        .unwrap();
    assert_eq!(size.1, [6, 7]);
}

#[test]
fn reads_out_of_order_and_beyond_the_ord() {
    let (mut t, mut c, mut s) = session(42004);
    // ORD 1 negotiated: the second outstanding Request is one too many.
    t.send(
        C2S,
        &c.fpdu(&untagged(
            true,
            1,
            0,
            1,
            1,
            0,
            &read_request(0x10, 0, 4, 1, 0),
        )),
    );
    t.send(
        C2S,
        &c.fpdu(&untagged(
            true,
            1,
            0,
            1,
            2,
            0,
            &read_request(0x20, 0, 4, 1, 0),
        )),
    );
    // Answered in the wrong order.
    t.send(S2C, &s.fpdu(&tagged(true, 2, 0x20, 0, &[0; 4])));
    let (r, _) = decode(&t);
    let f = findings(&r);
    assert_eq!(
        f[0],
        (
            FindingKind::TooManyReads {
                outstanding: 2,
                ord: 1
            },
            vec![6, 7]
        )
    );
    assert!(matches!(f[1].0, FindingKind::ReadResponseOutOfOrder { .. }));
    // Both Requests never answered: warnings at the end.
    assert_eq!(
        f.iter()
            .filter(|(k, _)| matches!(k, FindingKind::UnansweredRead { .. }))
            .count(),
        2
    );
}

#[test]
fn messages_left_incomplete_at_the_end() {
    let (mut t, mut c, _) = session(42005);
    t.send(C2S, &c.fpdu(&untagged(false, 3, 0, 0, 1, 0, &[0; 10])));
    t.send(C2S, &c.fpdu(&tagged(false, 0, 5, 0, &[0; 10])));
    let (r, summary) = decode(&t);
    let f = findings(&r);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(f.iter().all(|(k, _)| matches!(
        k,
        FindingKind::IncompleteMessage {
            octets: 10,
            segments: 1,
            ..
        }
    )));
    // Warnings, not errors; and counted as incomplete operations.
    assert_eq!(summary.errors.findings, 0);
    let o = &summary.connections[0].operations;
    assert_eq!((o.classes[0].incomplete, o.classes[1].incomplete), (1, 1));
}

#[test]
fn terminate_copies_and_traffic_after_a_terminate() {
    let (mut t, mut c, mut s) = session(42006);
    let sent = send(1, b"hello");
    t.send(C2S, &c.fpdu(&sent));
    // The Terminate names that Send but with a wrong segment length, and a
    // Read Request the client never sent.
    let mut term = vec![0x12, 0x02, 0xe0, 0x00, 0x00, 0x30];
    term.extend_from_slice(&sent[..18]);
    term.extend_from_slice(&read_request(1, 2, 3, 4, 5));
    t.send(S2C, &s.fpdu(&untagged(true, 7, 0, 2, 1, 0, &term)));
    // The server goes on after its Terminate.
    t.send(S2C, &s.fpdu(&send(1, b"late")));
    t.send(S2C, &s.fpdu(&send(2, b"later")));
    let (r, _) = decode(&t);
    let f = findings(&r);
    assert!(
        f.contains(&(
            FindingKind::TerminateLength {
                expected: 23,
                got: 0x30
            },
            vec![6, 7]
        )),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|(k, _)| *k == FindingKind::TerminateReadUnmatched),
        "{f:?}"
    );
    assert!(
        f.contains(&(FindingKind::AfterTerminate(2), vec![7, 8])),
        "{f:?}"
    );

    // A copy that names nothing the client sent.
    let (mut t, mut c, mut s) = session(42007);
    t.send(C2S, &c.fpdu(&send(1, b"hello")));
    let mut term = vec![0x12, 0x02, 0x40, 0x00, 0x00, 0x00];
    term.extend_from_slice(&send(9, b"")[..18]);
    t.send(S2C, &s.fpdu(&untagged(true, 7, 0, 2, 1, 0, &term)));
    let (r, _) = decode(&t);
    assert_eq!(
        findings(&r),
        [(FindingKind::TerminateCopyUnmatched, vec![7])]
    );
}

#[test]
fn a_hole_without_markers_is_crossed_by_the_crc() {
    let (mut t, mut c, _) = session(42008);
    let fpdus: Vec<Vec<u8>> = (1..=8)
        .map(|m| c.fpdu(&send(m, &vec![m as u8; 50 + 30 * m as usize])))
        .collect();
    let mut stream: Vec<u8> = fpdus.concat();
    // Octets 300..700 are lost: inside FPDUs 3 to 5.
    let tail = stream.split_off(700);
    t.send_split(C2S, &stream[..300], &[120]);
    t.lose(C2S, 400);
    for chunk in tail.chunks(90) {
        t.send(C2S, chunk);
    }
    t.ack(S2C);
    let (r, summary) = decode(&t);
    let gap = r.iter().find_map(|r| match &r.event {
        Event::Gap(g) => Some(*g),
        _ => None,
    });
    assert_eq!(
        gap.map(|g| (g.octets, g.action)),
        Some((400, GapAction::Hunt))
    );
    let resync = r.iter().find_map(|r| match &r.event {
        Event::Resync(x) => Some(*x),
        _ => None,
    });
    let resync = resync.expect("resynchronised");
    assert!(matches!(resync.method, ResyncMethod::Crc { .. }));
    // The first FPDU starting after 700 is where decoding resumes.
    let starts: Vec<u64> = fpdus
        .iter()
        .scan(0u64, |at, f| {
            let s = *at;
            *at += f.len() as u64;
            Some(s)
        })
        .collect();
    let next = *starts.iter().find(|&&s| s >= 700).unwrap();
    assert_eq!(resync.offset, next);
    assert_eq!(resync.skipped, next - 300);
    let msns: Vec<u32> = r
        .iter()
        .filter_map(|r| match &r.event {
            Event::Pdu(p) => match p.header() {
                Some(iwarp_proto::ddp::SegmentHeader::Untagged(h)) => Some(h.msn),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(msns.first(), Some(&1));
    assert_eq!(msns.last(), Some(&8));
    // The gap is the only error: the MSNs skipped across it are not findings.
    assert!(findings(&r).is_empty(), "{:?}", findings(&r));
    assert_eq!(summary.errors.total(), 1);
}

#[test]
fn a_capture_that_begins_inside_an_fpdu_hunts_for_the_first_one() {
    let mut t = Tcp::new(42009, 4791);
    let mut c = Framer::new(true, false);
    let fpdus: Vec<Vec<u8>> = (1..=4).map(|m| c.fpdu(&send(m, &[m as u8; 77]))).collect();
    let stream = fpdus.concat();
    // The capture starts 30 octets into the first FPDU.
    t.send(C2S, &stream[30..]);
    let opts = Options {
        ports: vec![4791],
        ..Options::default()
    };
    let (r, summary) = decode_with(&t, opts);
    let pdus = r
        .iter()
        .filter(|r| matches!(r.event, Event::Pdu(_)))
        .count();
    assert_eq!(pdus, 3);
    let second = fpdus[0].len() as u64 - 30;
    assert!(
        r.iter()
            .any(|r| matches!(r.event, Event::Resync(x) if x.offset == second)),
        "{r:?}"
    );
    assert_eq!(summary.errors.total(), 0, "{r:?}");
}

#[test]
fn holes_in_the_capture_are_not_reported_as_the_peers_faults() {
    let (mut t, mut c, mut s) = session(42010);
    // Two Reads in flight; the first one's Response is lost from the
    // capture, then the MSNs of the Sends jump over Sends lost too.
    t.send(
        C2S,
        &c.fpdu(&untagged(
            true,
            1,
            0,
            1,
            1,
            0,
            &read_request(0x10, 0, 8, 1, 0),
        )),
    );
    let lost = s.fpdu(&tagged(true, 2, 0x10, 0, &[0; 8]));
    t.lose(S2C, lost.len() as u32);
    t.send(
        C2S,
        &c.fpdu(&untagged(
            true,
            1,
            0,
            1,
            2,
            0,
            &read_request(0x10, 0, 8, 1, 0),
        )),
    );
    t.send(S2C, &s.fpdu(&tagged(true, 2, 0x10, 0, &[0; 8])));
    t.send(S2C, &s.fpdu(&send(1, b"x")));
    let lost: Vec<u8> = (2..5).flat_map(|m| s.fpdu(&send(m, b"y"))).collect();
    t.lose(S2C, lost.len() as u32);
    t.send(S2C, &s.fpdu(&send(5, b"z")));
    t.ack(C2S);
    let (r, summary) = decode(&t);
    assert!(findings(&r).is_empty(), "{:?}", findings(&r));
    assert_eq!(summary.errors.gaps, 2);
    assert_eq!(summary.errors.total(), 2);
}
