//! The counters of a connection ([`ConnectionStats`]) and its notices,
//! checked against what two ends back to back (`common::conn`) really put
//! on the wire: octets and FPDUs each way as the FPDU layout gives them
//! and as the pipes saw them, messages by type, a CRC error, a marker
//! error and Terminates, each counted once, where it happened.

mod common;

use common::conn::{ConnPair, End, Reading, Setup, Side};
use common::pattern;
use iwarp_proto::connection::{ConnectionError, ConnectionStats, Notice};
use iwarp_proto::framing::LlpErrorCode;
use iwarp_proto::memory::{Access, STag};
use iwarp_proto::mpa::{FramingParams, Placement};
use iwarp_proto::rdmap::{MessageCounters, ProtocolError, QpState, TerminateMessage};

const PLAIN: FramingParams = FramingParams {
    crc: true,
    send_markers: false,
    receive_markers: false,
};

/// Markers from the initiator only, no CRC: a damaged marker is found as
/// a marker error, not as a CRC error.
const MARKERS_NO_CRC: FramingParams = FramingParams {
    crc: false,
    send_markers: true,
    receive_markers: false,
};

/// DDP and RDMAP headers: untagged (Send, Read Request), tagged (Write,
/// Read Response); the Read Request's own fields.
const UNTAGGED: usize = 18;
const TAGGED: usize = 14;
const READ_REQUEST: usize = 28;

/// Octets of an FPDU without markers carrying a ULPDU of `ulpdu` octets:
/// the MPA length, the ULPDU, the pad to a multiple of 4, the CRC.
fn fpdu(ulpdu: usize) -> u64 {
    let pad = (4 - (2 + ulpdu) % 4) % 4;
    (2 + ulpdu + pad + 4) as u64
}

/// The FPDUs and octets of one message of `len` payload octets behind
/// `header`-octet headers, segmented at `mulpdu`.
fn message(len: usize, header: usize, mulpdu: usize) -> (u64, u64) {
    let per = mulpdu - header;
    let segments = len.div_ceil(per).max(1);
    let last = len - (segments - 1) * per;
    let octets = (segments as u64 - 1) * fpdu(mulpdu) + fpdu(header + last);
    (segments as u64, octets)
}

fn stats(end: &End) -> ConnectionStats {
    end.conn.stats()
}

/// N Sends of S octets, each way one direction: exactly the FPDUs and
/// octets the layout gives, as many as the pipe carried, on both ends;
/// nothing the other way; Sends counted with their payload.
#[test]
fn sends_are_counted_in_fpdus_and_octets_as_the_wire_carries_them() {
    for (n, len) in [(7usize, 100usize), (3, 10_000), (5, 1)] {
        let mut pair = ConnPair::mpa(31, PLAIN, Placement::Verified, [Reading::Staged; 2]);
        let out = pair.a.region(len, Access::empty(), 3);
        let inbox = pair.b.region(len * n, Access::LOCAL_WRITE, 0);
        for i in 0..n {
            pair.b.recv(i as u64, inbox.sge(i * len, len));
            pair.a.send(100 + i as u64, out.sge(0, len));
        }
        pair.drive();
        let mulpdu = pair.a.conn.qp().mulpdu();
        let (pdus, octets) = message(len, UNTAGGED, mulpdu);
        let (pdus, octets) = (pdus * n as u64, octets * n as u64);
        let (a, b) = (stats(&pair.a), stats(&pair.b));
        assert_eq!((a.pdus_sent, a.octets_sent), (pdus, octets), "{n} × {len}");
        assert_eq!(a.octets_sent, pair.ab.total);
        assert_eq!((b.pdus_received, b.octets_received), (pdus, octets));
        assert_eq!((b.pdus_sent, b.octets_sent), (0, 0));
        assert_eq!((a.pdus_received, a.octets_received), (0, 0));
        let total = (n * len) as u64;
        assert_eq!(
            a.messages,
            MessageCounters {
                sends_sent: n as u64,
                send_octets_sent: total,
                ..MessageCounters::default()
            }
        );
        assert_eq!(
            b.messages,
            MessageCounters {
                sends_received: n as u64,
                send_octets_received: total,
                ..MessageCounters::default()
            }
        );
        for s in [a, b] {
            assert_eq!(
                (s.crc_errors, s.marker_errors, s.other_framing_errors),
                (0, 0, 0)
            );
            assert_eq!((s.terminates_sent, s.terminates_received), (0, 0));
        }
        assert_eq!(inbox.bytes(), vec![3; len * n]);
    }
}

/// A Send, an RDMA Write and an RDMA Read of `len` octets: each message
/// type counted on the end that sent it and the end that took it, and
/// the FPDUs each way are those messages' segments.
#[test]
fn each_operation_type_is_counted_on_both_ends() {
    for reading in [Reading::Staged, Reading::Direct] {
        let len = 9_000;
        let mut pair = ConnPair::mpa(32, PLAIN, Placement::Direct, [reading; 2]);
        let out = pair.a.region(len, Access::empty(), 1);
        let sink = pair
            .a
            .region(len, Access::LOCAL_WRITE.union(Access::REMOTE_WRITE), 0);
        let inbox = pair.b.region(len, Access::LOCAL_WRITE, 0);
        let target = pair.b.region(len, Access::REMOTE_WRITE, 0);
        let source = pair.b.region(len, Access::REMOTE_READ, 0);
        source.fill(&pattern(len, 2));
        pair.b.recv(1, inbox.sge(0, len));
        pair.a.send(2, out.sge(0, len));
        pair.a
            .conn
            .rdma_write(3, out.sge(0, len), target.stag, 0)
            .unwrap();
        pair.a
            .conn
            .rdma_read(4, sink.sge(0, len), source.stag, 0)
            .unwrap();
        pair.drive();
        assert_eq!(sink.bytes(), pattern(len, 2));
        let mulpdu = pair.a.conn.qp().mulpdu();
        let (send_pdus, send_octets) = message(len, UNTAGGED, mulpdu);
        let (write_pdus, write_octets) = message(len, TAGGED, mulpdu);
        let (a, b) = (stats(&pair.a), stats(&pair.b));
        assert_eq!(
            (a.pdus_sent, a.octets_sent),
            (
                send_pdus + write_pdus + 1,
                send_octets + write_octets + fpdu(UNTAGGED + READ_REQUEST)
            )
        );
        // The Read Response is tagged, segmented as a Write is.
        assert_eq!((b.pdus_sent, b.octets_sent), (write_pdus, write_octets));
        assert_eq!(
            (a.pdus_received, a.octets_received),
            (b.pdus_sent, b.octets_sent)
        );
        assert_eq!(
            (b.pdus_received, b.octets_received),
            (a.pdus_sent, a.octets_sent)
        );
        let len = len as u64;
        assert_eq!(
            a.messages,
            MessageCounters {
                sends_sent: 1,
                send_octets_sent: len,
                writes_sent: 1,
                write_octets_sent: len,
                read_requests_sent: 1,
                read_responses_received: 1,
                read_response_octets_received: len,
                ..MessageCounters::default()
            }
        );
        assert_eq!(
            b.messages,
            MessageCounters {
                sends_received: 1,
                send_octets_received: len,
                writes_received: 1,
                write_octets_received: len,
                read_requests_received: 1,
                read_responses_sent: 1,
                read_response_octets_sent: len,
                ..MessageCounters::default()
            }
        );
        assert_eq!(
            b.messages.one_sided(),
            pair.b.conn.qp().one_sided_counters()
        );
        // Direct reads place payload with no copy, and say how much.
        if reading == Reading::Direct {
            assert_eq!(
                b.direct_octets + a.direct_octets,
                (pair.a.seen.placed_directly + pair.b.seen.placed_directly) as u64
            );
            assert!(b.direct_reads > 0);
        } else {
            assert_eq!((a.direct_reads, b.direct_reads), (0, 0));
        }
    }
}

fn terminate_sent(end: &End) -> Vec<TerminateMessage> {
    let sent = end.seen.notices.iter().filter_map(|n| match n {
        Notice::TerminateSent(m) => Some(*m),
        _ => None,
    });
    sent.collect()
}

fn terminate_received(end: &End) -> Vec<TerminateMessage> {
    let received = end.seen.notices.iter().filter_map(|n| match n {
        Notice::TerminateReceived(m) => Some(*m),
        _ => None,
    });
    received.collect()
}

/// A damaged payload octet: one CRC error on the receiver, which sends
/// one Terminate naming it; the sender receives that one Terminate (its
/// only FPDU received) and its notice carries the same message.
#[test]
fn a_crc_error_and_its_terminate_are_counted_once() {
    let mut pair = ConnPair::mpa(33, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let inbox = pair.b.region(5_000, Access::LOCAL_WRITE, 0);
    pair.b.recv(1, inbox.sge(0, 10));
    pair.b.recv(2, inbox.sge(10, 3_000));
    let out = pair.a.region(3_000, Access::empty(), 4);
    pair.send_good_then_damaged(&out, 3_000, 100);
    let (a, b) = (stats(&pair.a), stats(&pair.b));
    assert_eq!(
        (b.crc_errors, b.marker_errors, b.other_framing_errors),
        (1, 0, 0)
    );
    assert_eq!((b.terminates_sent, b.terminates_received), (1, 0));
    assert_eq!((a.terminates_sent, a.terminates_received), (0, 1));
    assert_eq!((a.crc_errors, a.marker_errors), (0, 0));
    // Only the first, good Send was received and delivered.
    assert_eq!(b.pdus_received, 1);
    assert_eq!(b.messages.sends_received, 1);
    assert_eq!(a.pdus_received, 1);
    assert_eq!(a.octets_received, pair.ba.total);
    let sent = terminate_sent(&pair.b);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].error(),
        Some(ProtocolError::Llp(LlpErrorCode::CrcError))
    );
    assert_eq!(terminate_received(&pair.a), sent);
    assert!(terminate_sent(&pair.a).is_empty());
    // Why each end stopped, once each.
    let stopped = |end: &End| -> Vec<ConnectionError> {
        let s = end.seen.notices.iter().filter_map(|n| match n {
            Notice::Stopped(e) => Some(*e),
            _ => None,
        });
        s.collect()
    };
    assert!(
        matches!(stopped(&pair.b)[..], [ConnectionError::Framing(_)]),
        "{:?}",
        pair.b.seen.notices
    );
    assert_eq!(
        stopped(&pair.a),
        [ConnectionError::TerminateReceived(sent[0])]
    );
}

/// A damaged marker (one every 512 octets of the stream, the first at 0)
/// in the second FPDU is a marker error, and only that. (The first FPDU
/// is good: a responder does not answer a first PDU that fails.)
#[test]
fn a_marker_error_is_counted_as_one() {
    let mut pair = ConnPair::mpa(
        34,
        MARKERS_NO_CRC,
        Placement::Verified,
        [Reading::Staged; 2],
    );
    let inbox = pair.b.region(3_010, Access::LOCAL_WRITE, 0);
    pair.b.recv(1, inbox.sge(0, 10));
    pair.b.recv(2, inbox.sge(10, 3_000));
    let out = pair.a.region(3_000, Access::empty(), 4);
    pair.a.send(10, out.sge(0, 10));
    pair.drive();
    let before = pair.ab.total as usize;
    pair.a.send(11, out.sge(0, 3_000));
    pair.transmit(Side::A);
    assert!(pair.ab.bytes.len() > 1_000);
    let marker = before.next_multiple_of(512) - before;
    pair.ab.bytes[marker + 3] ^= 0x10;
    pair.drive();
    let (a, b) = (stats(&pair.a), stats(&pair.b));
    assert_eq!(
        (b.crc_errors, b.marker_errors, b.other_framing_errors),
        (0, 1, 0)
    );
    assert_eq!((b.pdus_received, b.messages.sends_received), (1, 1));
    assert_eq!((b.terminates_sent, a.terminates_received), (1, 1));
    assert_eq!(
        terminate_sent(&pair.b)[0].error(),
        Some(ProtocolError::Llp(LlpErrorCode::MarkerMismatch))
    );
    assert_eq!(a.octets_sent, pair.ab.total);
}

/// An RDMA Write to an STag the peer does not have: the Write counted as
/// sent, not as received; the Terminate it draws counted once each way,
/// its notices carrying the decoded message; the queue pairs' states
/// reported as they change.
#[test]
fn a_terminate_for_a_refused_write_is_counted_and_reported() {
    let mut pair = ConnPair::with(35, Setup::new(PLAIN));
    let out = pair.a.region(10, Access::empty(), 0);
    pair.a
        .conn
        .rdma_write(2, out.sge(0, 10), STag(0x1234_5600), 0)
        .unwrap();
    pair.drive();
    let (a, b) = (stats(&pair.a), stats(&pair.b));
    assert_eq!(
        (a.messages.writes_sent, a.messages.write_octets_sent),
        (1, 10)
    );
    assert_eq!(b.messages.writes_received, 0);
    assert_eq!((a.pdus_sent, a.octets_sent), (1, fpdu(TAGGED + 10)));
    assert_eq!((b.terminates_sent, b.terminates_received), (1, 0));
    assert_eq!((a.terminates_sent, a.terminates_received), (0, 1));
    assert_eq!((b.crc_errors, b.marker_errors), (0, 0));
    assert_eq!((b.pdus_sent, a.pdus_received), (1, 1));
    let sent = terminate_sent(&pair.b);
    assert_eq!(sent.len(), 1);
    assert!(
        matches!(sent[0].error(), Some(ProtocolError::Ddp(_))),
        "{sent:?}"
    );
    assert_eq!(terminate_received(&pair.a), sent);
    // The Terminate's sender moves to Terminate then Error (RFC 5040
    // §6); its receiver straight to Error.
    let states = |end: &End| -> Vec<QpState> {
        let s = end.seen.notices.iter().filter_map(|n| match n {
            Notice::StateChanged(s) => Some(*s),
            _ => None,
        });
        s.collect()
    };
    let (sa, sb) = (states(&pair.a), states(&pair.b));
    assert!(sb.contains(&QpState::Terminate), "{sb:?}");
    assert_eq!(sb.last(), Some(&QpState::Error), "{sb:?}");
    assert_eq!(sa.last(), Some(&QpState::Error), "{sa:?}");
    assert!(!sa.contains(&QpState::Terminate), "{sa:?}");
}

/// Peer-to-peer mode: the RTR is reported once, on the initiator, and the
/// hold lifted once, on the responder; the RTR counts as the message it
/// is (a zero-length RDMA Write here).
#[test]
fn the_rtr_and_the_hold_are_reported_once() {
    use iwarp_proto::mpa::startup::RtrType;
    let mut pair = ConnPair::with(
        36,
        Setup {
            rtr: Some(RtrType::Write),
            ..Setup::new(PLAIN)
        },
    );
    let inbox = pair.a.region(10, Access::LOCAL_WRITE, 0);
    pair.a.recv(1, inbox.sge(0, 10));
    let out = pair.b.region(10, Access::empty(), 0);
    pair.b.send(2, out.sge(0, 10));
    pair.drive();
    let count = |end: &End, n: Notice| end.seen.notices.iter().filter(|&&m| m == n).count();
    assert_eq!(count(&pair.a, Notice::RtrSent(RtrType::Write)), 1);
    assert_eq!(count(&pair.b, Notice::RtrSent(RtrType::Write)), 0);
    assert_eq!(count(&pair.b, Notice::HoldLifted), 1);
    assert_eq!(count(&pair.a, Notice::HoldLifted), 0);
    let (a, b) = (stats(&pair.a), stats(&pair.b));
    assert_eq!(
        (a.messages.writes_sent, a.messages.write_octets_sent),
        (1, 0)
    );
    assert_eq!((a.pdus_sent, a.octets_sent), (1, fpdu(TAGGED)));
    assert_eq!((b.messages.sends_sent, a.messages.sends_received), (1, 1));
}

const RW_RR: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// `send_queue_posted` counts accepted Sends, Writes and Reads, and
/// nothing else: a runtime reads from it whether a post left anything to
/// transmit (receives never do; a refused post queued nothing).
#[test]
fn send_queue_posted_counts_accepted_send_queue_requests_only() {
    let mut pair = ConnPair::mpa(34, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let out = pair.a.region(64, Access::LOCAL_WRITE, 1);
    let inbox = pair.a.region(64, Access::LOCAL_WRITE, 0);
    let sink = pair
        .a
        .region(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE, 0);
    let remote = pair.b.region(64, RW_RR, 0);
    let posted = |end: &End| end.conn.qp().send_queue_posted();
    assert_eq!(posted(&pair.a), 0);
    pair.a.recv(1, inbox.sge(0, 64));
    assert_eq!(posted(&pair.a), 0, "a receive is no send-queue request");
    pair.a.send(2, out.sge(0, 64));
    assert_eq!(posted(&pair.a), 1);
    pair.a
        .conn
        .rdma_write(3, out.sge(0, 64), remote.stag, remote.base_to)
        .expect("Write posted");
    pair.a
        .conn
        .rdma_read(4, sink.sge(0, 64), remote.stag, remote.base_to)
        .expect("Read posted");
    assert_eq!(posted(&pair.a), 3);
    let unknown = STag(out.stag.0 ^ 0xffff_ff00);
    let refused = pair.a.conn.post_send(
        5,
        iwarp_proto::rdmap::Sge {
            stag: unknown,
            to: 0,
            len: 8,
        },
        iwarp_proto::rdmap::SendFlags::default(),
    );
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(posted(&pair.a), 3, "a refused post queued nothing");
    pair.drive();
    assert_eq!(posted(&pair.a), 3, "completions do not change it");
}
