//! Whole connections without sockets: two `Connection`s back to back
//! through in-memory TCP connections (`common::conn`), covering what the
//! framing and the queue pair do not know on their own: rule 4's hold,
//! the RTR of peer-to-peer mode, completions held while a batch is partly
//! written, framing errors turned into Terminates, FIN and half close,
//! close races, lost connections and both timers.

mod common;

use std::time::Duration;

use common::conn::{ConnPair, End, Reading, Setup, Side};
use common::{pattern, Region};
use iwarp_proto::connection::{ConnectionError, Event, LossReason};
use iwarp_proto::framing::{Deframer, FramingError, LlpError, LlpErrorCode};
use iwarp_proto::ift::IftConfig;
use iwarp_proto::memory::Access;
use iwarp_proto::mpa::startup::{Role, RtrType};
use iwarp_proto::mpa::{FramingParams, Placement};
use iwarp_proto::rdmap::{Completion, CompletionStatus, ProtocolError, QpState, SendFlags};
use proptest::prelude::*;

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
const RR: Access = Access::REMOTE_READ;

const PLAIN: FramingParams = FramingParams {
    crc: true,
    send_markers: false,
    receive_markers: false,
};
const MARKERS: FramingParams = FramingParams::IMMEDIATE_START;
const NO_CRC: FramingParams = FramingParams {
    crc: false,
    send_markers: true,
    receive_markers: false,
};

fn status(end: &End, wr_id: u64) -> Vec<CompletionStatus> {
    end.seen
        .completions
        .iter()
        .filter(|c| c.wr_id == wr_id)
        .map(|c| c.status)
        .collect()
}

fn ok(end: &End, wr_id: u64) -> Completion {
    let c: Vec<_> = end
        .seen
        .completions
        .iter()
        .filter(|c| c.wr_id == wr_id)
        .collect();
    assert_eq!(c.len(), 1, "one completion for {wr_id}: {c:?}");
    assert_eq!(c[0].status, CompletionStatus::Success, "{:?}", c[0]);
    *c[0]
}

/// Both ends finished, each reported `Finished` once and nothing after.
fn assert_finished(pair: &ConnPair) {
    for end in [&pair.a, &pair.b] {
        assert!(end.conn.is_finished());
        assert_eq!(end.seen.finished, 1);
        assert_eq!(end.seen.after_finished, 0);
        assert!(matches!(end.conn.state(), QpState::Closed | QpState::Error));
    }
}

/// The regions of one exchange of `len` octets each way.
struct Exchange {
    a_out: Region,
    a_sink: Region,
    b_inbox: Region,
    b_target: Region,
    b_source: Region,
}

/// a Sends, RDMA-Writes and RDMA-Reads `len` octets to and from b; b
/// Sends back. Posts only; drive the pair afterwards.
fn post_exchange(pair: &mut ConnPair, len: usize, base: u64) -> Exchange {
    let x = post_one_way(pair, len, base);
    pair.b.send(base + 5, x.b_source.sge(0, len));
    x
}

/// [`post_exchange`] without b's Send.
fn post_one_way(pair: &mut ConnPair, len: usize, base: u64) -> Exchange {
    let x = Exchange {
        a_out: pair.a.region(len, Access::LOCAL_WRITE, 0),
        a_sink: pair.a.region(len, RW, 0),
        b_inbox: pair.b.region(len, Access::LOCAL_WRITE, 0),
        b_target: pair.b.region(len, RW, 0),
        b_source: pair.b.region(len, RR, 0),
    };
    x.a_out.fill(&pattern(len, 1));
    x.b_source.fill(&pattern(len, 2));
    let a_inbox = pair.a.region(len, Access::LOCAL_WRITE, 0);
    pair.b.recv(base, x.b_inbox.sge(0, len));
    pair.a.recv(base + 1, a_inbox.sge(0, len));
    let sge = x.a_out.sge(0, len);
    pair.a.send(base + 2, sge);
    pair.a
        .conn
        .rdma_write(base + 3, sge, x.b_target.stag, 0)
        .unwrap();
    pair.a
        .conn
        .rdma_read(base + 4, x.a_sink.sge(0, len), x.b_source.stag, 0)
        .unwrap();
    x
}

fn check_exchange(pair: &ConnPair, x: &Exchange, len: usize, base: u64) {
    check_one_way(pair, x, len, base);
    assert_eq!(ok(&pair.a, base + 1).byte_len as usize, len);
    ok(&pair.b, base + 5);
}

fn check_one_way(pair: &ConnPair, x: &Exchange, len: usize, base: u64) {
    for id in [base + 2, base + 3, base + 4] {
        ok(&pair.a, id);
    }
    assert_eq!(ok(&pair.b, base).byte_len as usize, len);
    assert_eq!(x.b_inbox.bytes(), pattern(len, 1));
    assert_eq!(x.b_target.bytes(), pattern(len, 1));
    assert_eq!(x.a_sink.bytes(), pattern(len, 2));
    for r in [&x.a_out, &x.a_sink, &x.b_inbox, &x.b_target, &x.b_source] {
        r.assert_canaries();
    }
}

// ------------------------------------------------------------ data

/// Every framing and way of receiving moves the same data, through pipes
/// that take writes in random parts; with direct reading, large payloads
/// go straight into their regions.
#[test]
fn every_operation_through_every_receive_path() {
    let mut seed = 1;
    for framing in [PLAIN, MARKERS, NO_CRC] {
        for placement in [Placement::Direct, Placement::Verified] {
            for reading in [Reading::Staged, Reading::Direct] {
                for capacity in [300, 1 << 20] {
                    seed += 1;
                    let setup = Setup {
                        placement,
                        reading: [reading; 2],
                        capacity,
                        ..Setup::new(framing)
                    };
                    let mut pair = ConnPair::with(seed, setup);
                    let mut xs = Vec::new();
                    for (i, len) in [0, 1, 1000, 70_000].into_iter().enumerate() {
                        let base = 10 * i as u64;
                        xs.push((post_exchange(&mut pair, len, base), len, base));
                    }
                    pair.drive();
                    for (x, len, base) in &xs {
                        check_exchange(&pair, x, *len, *base);
                    }
                    let direct = placement == Placement::Direct && reading == Reading::Direct;
                    let placed = pair.a.seen.placed_directly + pair.b.seen.placed_directly;
                    assert_eq!(placed > 0, direct, "{framing:?} {placement:?} {reading:?}");
                    // One buffer for the payload (with markers, the
                    // scratch they and the payload are read into), one
                    // for the tail.
                    for end in [&pair.a, &pair.b] {
                        assert!(end.seen.direct_buffers_max <= 2, "{framing:?}");
                    }
                    assert!(pair.a.conn.error().is_none() && pair.b.conn.error().is_none());
                }
            }
        }
    }
}

/// The same through IFT framing, with and without its CRCs and markers.
#[test]
fn ift_connections_move_data_both_ways() {
    let plain = IftConfig::new(0x1111);
    let mut markers = IftConfig::new(0x2222);
    markers.send_markers = true;
    markers.receive_markers = Some(iwarp_proto::ift::MarkerInterval::new(512).unwrap());
    let mut bare = IftConfig::new(0x3333);
    bare.header_crc = false;
    bare.payload_crc = false;
    for (i, (a, b)) in [(plain, plain), (markers, markers), (bare, plain)]
        .into_iter()
        .enumerate()
    {
        for reading in [Reading::Staged, Reading::Direct] {
            let mut b = b;
            b.vtag ^= 0xff;
            let mut pair = ConnPair::ift(i as u64, a, b, [reading, reading]);
            let x = post_exchange(&mut pair, 50_000, 0);
            pair.drive();
            check_exchange(&pair, &x, 50_000, 0);
            if reading == Reading::Direct {
                assert!(pair.b.seen.placed_directly > 0);
            }
        }
    }
}

// ------------------------------------------------------------ rule 4

/// RFC 5044 §7.1.2 rule 4: the responder sends nothing, not even a
/// message posted at once, until the initiator's first FPDU has arrived
/// and passed the framing checks; then it goes.
//= rfc5044#7.1.2
//= type=test
//# MPA Responder mode implementations MUST receive and validate at least one FPDU before
//# sending any FPDUs or Markers.
#[test]
fn the_responder_sends_nothing_before_it_has_received_a_pdu() {
    let mut pair = ConnPair::mpa(7, MARKERS, Placement::Verified, [Reading::Staged; 2]);
    let a_inbox = pair.a.region(10, Access::LOCAL_WRITE, 0);
    let b_out = pair.b.region(10, Access::empty(), 5);
    pair.a.recv(1, a_inbox.sge(0, 10));
    pair.b.send(2, b_out.sge(0, 10));
    pair.drive();
    assert_eq!(pair.ba.total, 0, "not even a marker");
    assert!(pair.b.conn.is_held());
    assert!(pair.a.seen.completions.is_empty() && pair.b.seen.completions.is_empty());
    // The initiator's first FPDU (a zero-length Write) releases it.
    let none = pair.a.region(0, Access::empty(), 0);
    pair.a
        .conn
        .rdma_write(3, none.sge(0, 0), Default::default(), 0)
        .unwrap();
    pair.drive();
    assert!(!pair.b.conn.is_held());
    ok(&pair.a, 3);
    ok(&pair.b, 2);
    assert_eq!(ok(&pair.a, 1).byte_len, 10);
    assert_eq!(a_inbox.bytes(), vec![5; 10]);
}

/// A first FPDU that fails the framing checks (a bad CRC) validates
/// nothing: the responder may not answer it, so it closes without a word;
/// its receives are flushed and the initiator sees the stream close.
#[test]
fn a_first_pdu_failing_the_framing_checks_is_not_answered() {
    for placement in [Placement::Direct, Placement::Verified] {
        let mut pair = ConnPair::mpa(8, PLAIN, placement, [Reading::Staged; 2]);
        let inbox = pair.b.region(100, Access::LOCAL_WRITE, 0);
        pair.b.recv(1, inbox.sge(0, 50));
        pair.b.recv(2, inbox.sge(50, 50));
        let out = pair.a.region(20, Access::empty(), 9);
        pair.a.send(3, out.sge(0, 20));
        pair.transmit(Side::A);
        *pair.ab.bytes.back_mut().unwrap() ^= 1;
        pair.drive();
        assert_eq!(pair.ba.total, 0, "nothing sent");
        assert_eq!(pair.b.seen.closes, 1);
        assert!(
            matches!(pair.b.conn.error(), Some(ConnectionError::Framing(f)) if f.llp_code() == LlpErrorCode::CrcError),
            "{:?}",
            pair.b.conn.error()
        );
        assert_eq!(status(&pair.b, 1), [CompletionStatus::FlushError]);
        assert_eq!(status(&pair.b, 2), [CompletionStatus::FlushError]);
        assert_eq!(pair.a.conn.error(), Some(&ConnectionError::PeerClosed));
        ok(&pair.a, 3);
        assert_finished(&pair);
    }
}

/// A first FPDU that passes the framing checks but is refused above them
/// (a Send with no receive posted) was validated: its Terminate goes out.
#[test]
fn a_first_pdu_refused_above_the_framing_gets_its_terminate() {
    let mut pair = ConnPair::mpa(9, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let out = pair.a.region(20, Access::empty(), 9);
    let a_inbox = pair.a.region(20, Access::LOCAL_WRITE, 0);
    pair.a.recv(1, a_inbox.sge(0, 20));
    pair.a.send(2, out.sge(0, 20));
    pair.drive();
    assert!(pair.ba.total > 0, "a Terminate");
    let Some(ConnectionError::TerminateReceived(t)) = pair.a.conn.error() else {
        panic!("{:?}", pair.a.conn.error());
    };
    assert_eq!(t.layer, 1, "a DDP error: {t:?}");
    assert!(matches!(
        pair.b.conn.error(),
        Some(ConnectionError::TerminateSent(ProtocolError::Ddp(_)))
    ));
    assert_eq!(status(&pair.a, 1), [CompletionStatus::FlushError]);
    // The Send left completely before the Terminate came back.
    ok(&pair.a, 2);
    assert_finished(&pair);
}

/// Work a held responder posts is queued, up to the send queue's depth
/// (one more is refused), and none of it completes before the
/// initiator's first FPDU releases it; then all of it goes, in order.
//= rfc5044#7.1.2
//= type=test
//# MPA Responder mode implementations MUST receive and validate at least one FPDU before
//# sending any FPDUs or Markers.
#[test]
fn a_held_responder_queues_up_to_its_send_queue_depth() {
    let setup = Setup {
        tweak: |role, c| {
            if role == Role::Responder {
                c.queue_pair.send_queue_depth = 4;
            }
        },
        ..Setup::new(PLAIN)
    };
    let mut pair = ConnPair::with(22, setup);
    let target = pair.a.region(400, RW | RR, 0);
    let data = pair.b.region(400, Access::empty(), 0);
    data.fill(&pattern(400, 53));
    for i in 0..4u64 {
        let at = i as usize * 100;
        pair.b
            .conn
            .rdma_write(i, data.sge(at, 100), target.stag, at as u64)
            .unwrap();
    }
    assert_eq!(
        pair.b.conn.rdma_write(4, data.sge(0, 400), target.stag, 0),
        Err(iwarp_proto::rdmap::PostError::QueueFull)
    );
    pair.drive();
    assert!(
        pair.b.seen.completions.is_empty(),
        "held until the first FPDU"
    );
    assert_eq!(pair.ba.total, 0);
    // The initiator's first FPDU, a zero-length Read, releases the queue.
    let probe = pair.a.region(0, RW, 0);
    pair.a
        .conn
        .rdma_read(10, probe.sge(0, 0), data.stag, 0)
        .unwrap();
    pair.drive();
    ok(&pair.a, 10);
    let ids: Vec<u64> = pair.b.seen.completions.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [0, 1, 2, 3]);
    for i in 0..4 {
        ok(&pair.b, i);
    }
    assert_eq!(target.bytes(), pattern(400, 53));
    target.assert_canaries();
}

// ------------------------------------------------------ peer to peer

/// RFC 6581: in peer-to-peer mode the initiator's first FPDU is the RTR
/// message, which releases the responder; the RTR's completion is the
/// connection's own and never reported.
//= rfc6581#4
//= type=test
//# The Initiator MUST send the selected zero-length RTR message as its first FPDU, which lets
//# the Responder send.
#[test]
fn the_rtr_goes_first_releases_the_responder_and_is_not_reported() {
    for rtr in [RtrType::Write, RtrType::Read, RtrType::Send] {
        let setup = Setup {
            rtr: Some(rtr),
            ..Setup::new(PLAIN)
        };
        let mut pair = ConnPair::with(10, setup);
        let b_rtr_inbox = pair.b.region(0, Access::LOCAL_WRITE, 0);
        if rtr == RtrType::Send {
            // A zero-length Send consumes a receive like any Send.
            pair.b.recv(99, b_rtr_inbox.sge(0, 0));
        }
        // The responder reads first, before the initiator's application
        // has posted anything.
        let a_source = pair.a.region(64, RR, 3);
        let b_sink = pair.b.region(64, RW, 0);
        pair.b
            .conn
            .rdma_read(1, b_sink.sge(0, 64), a_source.stag, 0)
            .unwrap();
        // The first octets on the wire are the RTR's FPDU: an empty
        // message of the chosen kind.
        pair.transmit(Side::A);
        let first: Vec<u8> = pair.ab.bytes.iter().copied().take(4).collect();
        let opcode = first[3] & 0x0f;
        let expected = match rtr {
            RtrType::Write => 0,
            RtrType::Read => 1,
            RtrType::Send => 3,
        };
        assert_eq!(opcode, expected, "{rtr:?}: {first:02x?}");
        pair.drive();
        ok(&pair.b, 1);
        assert_eq!(b_sink.bytes(), vec![3; 64]);
        assert!(
            pair.a.seen.completions.is_empty(),
            "{:?}",
            pair.a.seen.completions
        );
        if rtr == RtrType::Send {
            assert_eq!(ok(&pair.b, 99).byte_len, 0);
        }
    }
}

// ------------------------------------------------ partly written batches

/// A send-queue request completes only once every octet of its last
/// segment has been written: while the socket takes a batch in small
/// parts, nothing of it is reported; receives are not held back.
//= rfc5041#3
//= type=test
//# The LLP MUST ensure that if it accepts a DDP Segment, it will transfer it reliably to the
//# receiver or return with an error stating that the transfer failed to complete.
#[test]
fn completions_wait_for_their_octets_to_be_written() {
    let setup = Setup {
        capacity: 100,
        ..Setup::new(PLAIN)
    };
    let mut pair = ConnPair::with(11, setup);
    let out = pair.a.region(5000, Access::empty(), 1);
    let inbox = pair.b.region(5000, Access::LOCAL_WRITE, 0);
    pair.b.recv(1, inbox.sge(0, 5000));
    for i in 0..5 {
        pair.a
            .conn
            .post_send(
                10 + i,
                out.sge(1000 * i as usize, 1000),
                SendFlags::default(),
            )
            .unwrap();
    }
    let mut steps = 0;
    while pair.step() {
        steps += 1;
        let written = pair.ab.total as usize;
        for c in &pair.a.seen.completions {
            // Each Send's FPDU is 2 + 18 + 1000 + 4 octets (length,
            // header, payload, CRC): Send i ends at 1024 * (i + 1).
            let end = 1024 * (c.wr_id as usize - 9);
            assert!(written >= end, "Send {} reported at {written}", c.wr_id);
        }
    }
    assert!(steps > 20, "written in many parts");
    for i in 0..5 {
        ok(&pair.a, 10 + i);
    }
}

/// Once the write side closes with a batch partly written (the socket
/// failed), the rest never goes: a Send the queue pair had completed
/// reports a fatal error, since it may never have left, and nothing
/// waits for the batch any more.
#[test]
fn a_partly_written_batch_that_can_never_finish_fails_its_sends() {
    let mut pair = ConnPair::with(12, Setup::new(PLAIN));
    let out = pair.a.region(1000, Access::empty(), 1);
    pair.a.send(1, out.sge(0, 1000));
    let mut taken = 0;
    let r = pair.a.conn.poll_transmit(|iov| {
        taken = iov.iter().map(|s| s.len()).sum::<usize>();
        100
    });
    assert_eq!(r, Some(100));
    pair.a.conn.handle_written(100);
    assert!(taken > 1000 && pair.a.conn.is_transmit_pending());
    assert!(pair.a.conn.poll_event().is_none(), "held while pending");
    let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    pair.a.conn.handle_write_error(LossReason::from_io(&reset));
    let events: Vec<Event> = std::iter::from_fn(|| pair.a.conn.poll_event()).collect();
    assert!(events.contains(&Event::Close), "{events:?}");
    assert!(events.iter().any(|e| matches!(e,
        Event::Completion(c) if c.wr_id == 1 && c.status == CompletionStatus::FatalError)));
    assert_eq!(events.last(), Some(&Event::Finished));
    assert_eq!(
        pair.a.conn.error(),
        Some(&ConnectionError::Lost(LossReason::from_io(&reset)))
    );
}

/// A source region invalidated while its segment is partly written: the
/// rest can never be sent, so the connection is lost and closed.
#[test]
fn a_source_invalidated_in_the_middle_of_a_batch_loses_the_connection() {
    let mut pair = ConnPair::mpa(13, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let out = pair.a.region(1000, Access::empty(), 1);
    pair.a.send(1, out.sge(0, 1000));
    assert_eq!(pair.a.conn.poll_transmit(|_| 10), Some(10));
    pair.a.conn.handle_written(10);
    pair.a.table.invalidate(out.stag).unwrap();
    assert_eq!(pair.a.conn.poll_transmit(|_| 10), None);
    assert_eq!(
        pair.a.conn.error(),
        Some(&ConnectionError::Lost(LossReason::SourceInvalidated))
    );
    pair.events();
    assert_eq!(pair.a.seen.closes, 1);
    assert_eq!(status(&pair.a, 1), [CompletionStatus::FatalError]);
}

/// A small payload is copied into the batch when it is framed, its region
/// locked then: invalidated while the batch is partly written, it is
/// sent whole all the same (its octets were read before the revocation),
/// and the connection goes on.
#[test]
fn a_copied_payload_invalidated_in_the_middle_of_a_batch_is_sent_whole() {
    let mut pair = ConnPair::mpa(13, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let inbox = pair.b.region(100, Access::LOCAL_WRITE, 0);
    pair.b.recv(2, inbox.sge(0, 100));
    let out = pair.a.region(100, Access::empty(), 1);
    pair.a.send(1, out.sge(0, 100));
    // Takes what a offers (at most `max` octets) into the pipe to b.
    let take = |pair: &mut ConnPair, max: usize| {
        let mut wire = Vec::new();
        let r = pair.a.conn.poll_transmit(|iov| {
            iov.iter().for_each(|s| wire.extend_from_slice(s));
            wire.truncate(max);
            wire.len()
        });
        if let Some(n) = r {
            pair.a.conn.handle_written(n);
            pair.ab.bytes.extend(&wire);
        }
        r
    };
    assert_eq!(take(&mut pair, 10), Some(10));
    pair.a.table.invalidate(out.stag).unwrap();
    // The rest of the batch, all of it, after the invalidation.
    assert!(take(&mut pair, usize::MAX).is_some_and(|n| n > 90));
    assert_eq!(pair.a.conn.error(), None);
    pair.drive();
    assert_eq!(ok(&pair.b, 2).byte_len, 100);
    assert_eq!(ok(&pair.a, 1).byte_len, 100);
    assert_eq!(pair.a.conn.error(), None);
}

// ------------------------------------------- errors and Terminates

/// A damaged FPDU in the middle of the stream (after a good one): the
/// receiver sends the LLP Terminate naming a CRC error (RFC 5044 §8: MPA
/// does not close the connection itself), then closes; the peer stops on
/// it, sends nothing back, and every outstanding request on both ends
/// completes with an error.
//= rfc5044#8
//= type=test
//# For Error codes 2 and 3, MPA MUST NOT close the TCP connection following a reported error.
#[test]
fn a_crc_error_is_answered_with_a_terminate_then_a_close() {
    for (placement, reading) in [
        (Placement::Verified, Reading::Staged),
        (Placement::Direct, Reading::Direct),
    ] {
        let mut pair = ConnPair::mpa(14, PLAIN, placement, [reading; 2]);
        let inbox = pair.b.region(20_000, Access::LOCAL_WRITE, 0);
        pair.b.recv(1, inbox.sge(0, 10));
        pair.b.recv(2, inbox.sge(10, 10_000));
        pair.b.recv(3, inbox.sge(10_010, 100));
        let out = pair.a.region(10_000, Access::empty(), 4);
        let a_inbox = pair.a.region(10, Access::LOCAL_WRITE, 0);
        pair.a.recv(9, a_inbox.sge(0, 10));
        // An octet of the second Send's payload damaged.
        pair.send_good_then_damaged(&out, 3000, 100);
        assert_eq!(ok(&pair.b, 1).byte_len, 10);
        let Some(ConnectionError::TerminateReceived(t)) = pair.a.conn.error() else {
            panic!("{:?}", pair.a.conn.error());
        };
        assert_eq!(
            t.error(),
            Some(ProtocolError::Llp(LlpErrorCode::CrcError)),
            "{t:?}"
        );
        assert!(
            matches!(
                pair.b.conn.error(),
                Some(ConnectionError::Framing(FramingError::Mpa(_)))
            ),
            "{:?}",
            pair.b.conn.error()
        );
        // Never delivered, whatever was placed.
        assert_eq!(status(&pair.b, 2), [CompletionStatus::FlushError]);
        assert_eq!(status(&pair.b, 3), [CompletionStatus::FlushError]);
        assert_eq!(status(&pair.a, 9), [CompletionStatus::FlushError]);
        assert_eq!((pair.a.seen.closes, pair.b.seen.closes), (1, 1));
        assert_finished(&pair);
    }
}

/// The same through IFT with markers: a damaged payload octet is found
/// by the payload CRC however the payload was read (staged, or placed
/// directly around the markers and folded into the CRC in one piece), and
/// the Send it belongs to is never delivered.
#[test]
fn an_ift_payload_crc_error_is_found_whether_staged_or_placed() {
    let mut markers = IftConfig::new(0x2222);
    markers.send_markers = true;
    markers.receive_markers = Some(iwarp_proto::ift::MarkerInterval::new(512).unwrap());
    for reading in [Reading::Staged, Reading::Direct] {
        let mut peer = markers;
        peer.vtag ^= 0xff;
        let mut pair = ConnPair::ift(15, markers, peer, [reading; 2]);
        let inbox = pair.b.region(20_000, Access::LOCAL_WRITE, 0);
        pair.b.recv(1, inbox.sge(0, 10));
        pair.b.recv(2, inbox.sge(10, 10_000));
        let out = pair.a.region(10_000, Access::empty(), 4);
        pair.send_good_then_damaged(&out, 9000, 3000);
        assert_eq!(ok(&pair.b, 1).byte_len, 10);
        assert!(
            matches!(
                pair.b.conn.error(),
                Some(ConnectionError::Framing(FramingError::Ift(_)))
            ),
            "{reading:?}: {:?}",
            pair.b.conn.error()
        );
        assert_eq!(status(&pair.b, 2), [CompletionStatus::FlushError]);
        if reading == Reading::Direct {
            assert!(pair.b.seen.placed_directly > 0);
        }
        assert_finished(&pair);
    }
}

/// A Terminate received stops the stream at once: it is not answered
/// (RFC 5040 §6), the receiver closes, and its outstanding work is
/// flushed.
//= rfc5040#6
//= type=test
//# A Terminate Message MUST NOT be sent in answer to a received Terminate Message; the stream
//# is then closed.
#[test]
fn a_received_terminate_closes_without_an_answer() {
    let mut pair = ConnPair::mpa(15, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let a_inbox = pair.a.region(10, Access::LOCAL_WRITE, 0);
    pair.a.recv(1, a_inbox.sge(0, 10));
    // b refuses a's Write into an STag that does not exist.
    let out = pair.a.region(10, Access::empty(), 0);
    pair.a
        .conn
        .rdma_write(2, out.sge(0, 10), iwarp_proto::memory::STag(0x1234_5600), 0)
        .unwrap();
    pair.drive();
    let terminate_octets = pair.ba.total;
    assert!(matches!(
        pair.a.conn.error(),
        Some(ConnectionError::TerminateReceived(_))
    ));
    // MPA length, tagged header, payload, pad, CRC: the Write alone.
    assert_eq!(
        pair.ab.total,
        2 + 14 + 10 + 2 + 4,
        "nothing after the Write"
    );
    assert!(terminate_octets > 0);
    assert_eq!(status(&pair.a, 1), [CompletionStatus::FlushError]);
    assert_eq!(pair.a.conn.state(), QpState::Error);
    assert_finished(&pair);
}

/// The stream ending in the middle of an FPDU is a lost connection, not
/// a close; between FPDUs it is the peer's close.
#[test]
fn the_stream_ending_inside_a_pdu_is_a_lost_connection() {
    for cut in [true, false] {
        let mut pair = ConnPair::mpa(16, PLAIN, Placement::Direct, [Reading::Staged; 2]);
        let inbox = pair.b.region(100, Access::LOCAL_WRITE, 0);
        pair.b.recv(1, inbox.sge(0, 100));
        pair.b.recv(2, inbox.sge(0, 100));
        let out = pair.a.region(100, Access::empty(), 0);
        pair.a.send(3, out.sge(0, 100));
        pair.transmit(Side::A);
        if cut {
            let n = pair.ab.bytes.len();
            pair.ab.bytes.truncate(n - 10);
        }
        pair.ab.fin = true;
        for _ in 0..100 {
            pair.receive(Side::B);
        }
        let expected = if cut {
            ConnectionError::Lost(LossReason::EndedInsidePdu)
        } else {
            ConnectionError::PeerClosed
        };
        assert_eq!(pair.b.conn.error(), Some(&expected));
        let first = if cut {
            CompletionStatus::FlushError
        } else {
            CompletionStatus::Success
        };
        assert_eq!(status(&pair.b, 1), [first]);
        assert_eq!(status(&pair.b, 2), [CompletionStatus::FlushError]);
        assert_eq!(pair.b.conn.state(), QpState::Error);
    }
}

/// A failed read loses the connection: every request is flushed, and
/// the connection closes once nothing is left to write.
#[test]
fn a_failed_read_loses_the_connection() {
    let mut pair = ConnPair::mpa(17, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let inbox = pair.a.region(10, Access::LOCAL_WRITE, 0);
    pair.a.recv(1, inbox.sge(0, 10));
    let reset = std::io::Error::from_raw_os_error(104);
    pair.a.conn.handle_read_error(LossReason::from_io(&reset));
    pair.drive();
    assert_eq!(
        pair.a.conn.error().map(|e| e.to_string()),
        Some(format!("connection lost: {reset}"))
    );
    assert_eq!(status(&pair.a, 1), [CompletionStatus::FlushError]);
    assert_finished(&pair);
    assert_eq!(pair.b.conn.error(), Some(&ConnectionError::PeerClosed));
}

// ------------------------------------------------ closing

/// A graceful close lets everything already posted finish, then sends
/// FIN; the peer flushes what it still had posted and closes; the stream
/// ends closed on the side that asked. New work is refused meanwhile.
//= rfc5041#6.2.1
//= type=test
//# If the Local Peer ULP indicates graceful teardown, the DDP layer on the Local Peer SHOULD
//# ensure that all ULP data would be transferred before the underlying LLP Stream & Connection
//# are torn down, and any further data transfer requests by the Local Peer ULP MUST return an
//# error.
#[test]
fn a_graceful_close_finishes_posted_work_then_sends_fin() {
    let setup = Setup {
        placement: Placement::Direct,
        reading: [Reading::Direct; 2],
        capacity: 5000,
        ..Setup::new(MARKERS)
    };
    let mut pair = ConnPair::with(18, setup);
    let x = post_one_way(&mut pair, 30_000, 0);
    let spare = pair.b.region(10, Access::LOCAL_WRITE, 0);
    pair.b.recv(50, spare.sge(0, 10));
    let now = pair.now;
    pair.a.conn.close_gracefully(now);
    assert_eq!(
        pair.a
            .conn
            .post_send(60, x.a_out.sge(0, 1), SendFlags::default()),
        Err(iwarp_proto::rdmap::PostError::Closing)
    );
    pair.drive();
    check_one_way(&pair, &x, 30_000, 0);
    assert_eq!(status(&pair.a, 1), [CompletionStatus::FlushError]);
    assert_eq!(pair.a.seen.fins, 1);
    assert_eq!(pair.a.conn.state(), QpState::Closed);
    assert_eq!(pair.a.conn.error(), Some(&ConnectionError::LocallyClosed));
    assert_eq!(pair.b.conn.error(), Some(&ConnectionError::PeerClosed));
    assert_eq!(status(&pair.b, 50), [CompletionStatus::FlushError]);
    // The side that saw FIN first closes both ways; the other was already
    // half closed.
    assert_eq!((pair.a.seen.closes, pair.b.seen.closes), (0, 1));
    assert_finished(&pair);
}

/// Both ends close gracefully at once: each sends FIN and the stream
/// ends closed on both, whichever FIN is read first.
#[test]
fn both_ends_closing_at_once() {
    for seed in 0..20 {
        let mut pair = ConnPair::mpa(seed, PLAIN, Placement::Verified, [Reading::Staged; 2]);
        let x = post_exchange(&mut pair, 3000, 0);
        pair.drive();
        check_exchange(&pair, &x, 3000, 0);
        let now = pair.now;
        pair.a.conn.close_gracefully(now);
        // The other end's close comes a random number of steps later, or
        // not at all before it has seen the FIN.
        for _ in 0..pair.rng.below(4) {
            pair.step();
        }
        pair.b.conn.close_gracefully(now);
        pair.drive();
        assert_eq!(pair.a.conn.state(), QpState::Closed);
        assert_eq!(pair.a.conn.error(), Some(&ConnectionError::LocallyClosed));
        assert!(matches!(
            pair.b.conn.state(),
            QpState::Closed | QpState::Error
        ));
        assert_finished(&pair);
        // Closing again is harmless.
        pair.a.conn.close_gracefully(now);
        pair.drive();
        assert_eq!(pair.a.seen.after_finished, 0);
    }
}

/// An abortive close (every handle dropped) flushes this end's work and
/// closes at once; the peer sees the stream end and flushes its own.
#[test]
fn an_abortive_close_flushes_both_ends() {
    let mut pair = ConnPair::mpa(19, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let a_inbox = pair.a.region(10, Access::LOCAL_WRITE, 0);
    let b_inbox = pair.b.region(10, Access::LOCAL_WRITE, 0);
    pair.a.recv(1, a_inbox.sge(0, 10));
    pair.b.recv(2, b_inbox.sge(0, 10));
    pair.b.recv(3, b_inbox.sge(0, 10));
    let out = pair.a.region(10, Access::empty(), 7);
    pair.a.send(4, out.sge(0, 10));
    pair.drive();
    ok(&pair.b, 2);
    pair.a.conn.abort();
    pair.drive();
    assert_eq!(pair.a.seen.closes, 1);
    assert_eq!(pair.a.conn.error(), Some(&ConnectionError::LocallyClosed));
    assert_eq!(status(&pair.a, 1), [CompletionStatus::FlushError]);
    assert_eq!(pair.b.conn.error(), Some(&ConnectionError::PeerClosed));
    assert_eq!(status(&pair.b, 3), [CompletionStatus::FlushError]);
    assert_finished(&pair);
}

// ------------------------------------------------ timers

/// With an idle timeout, a connection on which nothing arrives is lost
/// when it runs out (counted from the last octet received), and the peer
/// sees it close.
//= rfc5044#7.1.2
//= type=test
//# ULPs SHOULD implement a reasonable timeout while waiting for FPDUs, ULPDUs, and application
//# level messages to guard against application failures and certain denial-of-service attacks.
#[test]
fn the_idle_timeout_ends_a_silent_connection() {
    let idle = Duration::from_secs(30);
    let setup = Setup {
        tweak: |role, c| {
            if role == Role::Initiator {
                c.idle_timeout = Some(Duration::from_secs(30));
            }
        },
        ..Setup::new(PLAIN)
    };
    let mut pair = ConnPair::with(20, setup);
    let now = pair.now;
    assert_eq!(pair.a.conn.next_timeout(), Some(now + idle));
    assert_eq!(pair.b.conn.next_timeout(), None);
    let inbox = pair.a.region(10, Access::LOCAL_WRITE, 0);
    pair.a.recv(1, inbox.sge(0, 10));
    // Traffic 20 s in restarts the timer.
    pair.advance(Duration::from_secs(20));
    let out = pair.b.region(10, Access::empty(), 1);
    let none = pair.a.region(0, Access::empty(), 0);
    pair.a
        .conn
        .rdma_write(2, none.sge(0, 0), Default::default(), 0)
        .unwrap();
    pair.b.send(3, out.sge(0, 10));
    pair.drive();
    ok(&pair.a, 1);
    assert_eq!(pair.a.conn.next_timeout(), Some(pair.now + idle));
    let inbox2 = pair.a.region(10, Access::LOCAL_WRITE, 0);
    pair.a.recv(4, inbox2.sge(0, 10));
    pair.advance(Duration::from_secs(29));
    assert!(pair.a.conn.error().is_none());
    pair.advance(Duration::from_secs(1));
    pair.drive();
    assert_eq!(
        pair.a.conn.error(),
        Some(&ConnectionError::Lost(LossReason::IdleTimeout))
    );
    assert_eq!(status(&pair.a, 4), [CompletionStatus::FlushError]);
    assert_eq!(pair.b.conn.error(), Some(&ConnectionError::PeerClosed));
    assert_finished(&pair);
}

/// A graceful close the peer never answers (it stopped reading) becomes
/// abortive at the disconnect timeout.
#[test]
fn a_graceful_close_without_an_answer_times_out() {
    let mut pair = ConnPair::mpa(21, PLAIN, Placement::Verified, [Reading::Staged; 2]);
    let x = post_exchange(&mut pair, 100, 0);
    pair.drive();
    check_exchange(&pair, &x, 100, 0);
    let now = pair.now;
    pair.a.conn.close_gracefully(now);
    assert_eq!(
        pair.a.conn.next_timeout(),
        Some(now + Duration::from_secs(5))
    );
    // b never reads again: only a moves.
    for _ in 0..10 {
        pair.transmit(Side::A);
        pair.receive(Side::A);
    }
    assert_eq!(pair.a.seen.fins, 1);
    assert!(!pair.a.conn.is_finished());
    pair.advance(Duration::from_millis(4999));
    assert!(!pair.a.conn.is_finished());
    pair.advance(Duration::from_millis(1));
    assert!(pair.a.conn.is_finished());
    assert_eq!(pair.a.conn.state(), QpState::Error);
    assert_eq!(pair.a.conn.error(), Some(&ConnectionError::LocallyClosed));
    assert_eq!(pair.a.conn.next_timeout(), None);
}

// ------------------------------------------------ anything at all

#[derive(Debug, Clone)]
enum Action {
    /// a (true) or b posts a Send, a Write and a Read of this length.
    Post(bool, usize),
    /// That end closes gracefully.
    Close(bool),
    /// That end closes abortively.
    Abort(bool),
    /// A stream octet in flight is damaged.
    Damage(bool, usize),
    /// Steps.
    Steps(usize),
    /// Time passes (seconds).
    Wait(u64),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (any::<bool>(), 0usize..20_000).prop_map(|(s, n)| Action::Post(s, n)),
        1 => any::<bool>().prop_map(Action::Close),
        1 => any::<bool>().prop_map(Action::Abort),
        1 => (any::<bool>(), any::<usize>()).prop_map(|(s, n)| Action::Damage(s, n)),
        4 => (0usize..30).prop_map(Action::Steps),
        1 => (0u64..8).prop_map(Action::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::proptest_cases(64)))]

    /// Whatever the two applications do and whatever happens to the
    /// stream, both connections end, each work request completes exactly
    /// once, nothing is reported after the end, and nothing panics.
    #[test]
    fn any_life_ends_cleanly_with_every_request_completed(
        seed in any::<u64>(),
        markers in any::<bool>(),
        direct in any::<bool>(),
        capacity in 64usize..200_000,
        actions in proptest::collection::vec(action(), 0..24),
    ) {
        let framing = if markers { MARKERS } else { PLAIN };
        let (placement, reading) = if direct {
            (Placement::Direct, Reading::Direct)
        } else {
            (Placement::Verified, Reading::Staged)
        };
        let setup = Setup {
            placement,
            reading: [reading; 2],
            capacity,
            ..Setup::new(framing)
        };
        let mut pair = ConnPair::with(seed, setup);
        let mut posted: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        let mut keep = Vec::new();
        let mut next_id = 0;
        for action in actions {
            match action {
                Action::Post(on_a, len) => {
                    let (mine, theirs) = if on_a { (Side::A, Side::B) } else { (Side::B, Side::A) };
                    let index = |side| usize::from(side == Side::B);
                    let out = pair.end(mine).region(len, Access::LOCAL_WRITE, 3);
                    let sink = pair.end(mine).region(len, RW, 0);
                    let inbox = pair.end(theirs).region(len, Access::LOCAL_WRITE, 0);
                    let target = pair.end(theirs).region(len, RW | RR, 0);
                    let ids = [next_id, next_id + 1, next_id + 2, next_id + 3];
                    next_id += 4;
                    if pair.end(theirs).conn.post_recv(ids[0], inbox.sge(0, len)).is_ok() {
                        posted[index(theirs)].push(ids[0]);
                    }
                    let me = &mut pair.end(mine).conn;
                    let mut done = Vec::new();
                    if me.post_send(ids[1], out.sge(0, len), SendFlags::default()).is_ok() {
                        done.push(ids[1]);
                    }
                    if me.rdma_write(ids[2], out.sge(0, len), target.stag, 0).is_ok() {
                        done.push(ids[2]);
                    }
                    if me.rdma_read(ids[3], sink.sge(0, len), target.stag, 0).is_ok() {
                        done.push(ids[3]);
                    }
                    posted[index(mine)].extend(done);
                    keep.extend([out, sink, inbox, target]);
                }
                Action::Close(on_a) => {
                    let now = pair.now;
                    pair.end(if on_a { Side::A } else { Side::B }).conn.close_gracefully(now);
                }
                Action::Abort(on_a) => pair.end(if on_a { Side::A } else { Side::B }).conn.abort(),
                Action::Damage(on_a, at) => {
                    let pipe = if on_a { &mut pair.ab } else { &mut pair.ba };
                    if !pipe.bytes.is_empty() {
                        let at = at % pipe.bytes.len();
                        pipe.bytes[at] ^= 0x10;
                    }
                }
                Action::Steps(n) => {
                    for _ in 0..n {
                        pair.step();
                    }
                }
                Action::Wait(s) => pair.advance(Duration::from_secs(s)),
            }
            pair.events();
        }
        // Both applications close and wait.
        let now = pair.now;
        pair.a.conn.close_gracefully(now);
        pair.b.conn.close_gracefully(now);
        pair.drive();
        pair.advance(Duration::from_secs(6));
        pair.drive();
        for (end, ids) in [(&pair.a, &posted[0]), (&pair.b, &posted[1])] {
            prop_assert!(end.conn.is_finished());
            prop_assert_eq!(end.seen.finished, 1);
            prop_assert_eq!(end.seen.after_finished, 0);
            let mut done: Vec<u64> = end.seen.completions.iter().map(|c| c.wr_id).collect();
            done.sort_unstable();
            let mut want = ids.clone();
            want.sort_unstable();
            prop_assert_eq!(done, want);
            prop_assert!(end.conn.error().is_some());
        }
        for r in &keep {
            r.assert_canaries();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::proptest_cases(128)))]

    /// Arbitrary octets from the peer, in arbitrary chunks, staged or read
    /// straight into a region, then the end of the stream: nothing panics,
    /// the connection ends, and every receive posted completes once.
    #[test]
    fn arbitrary_octets_from_the_peer_end_the_connection_cleanly(
        seed in any::<u64>(),
        setup in any::<u8>(),
        octets in proptest::collection::vec(any::<u8>(), 0..3000),
        chunks in proptest::collection::vec(1usize..600, 1..20),
    ) {
        let framing = FramingParams {
            crc: setup & 1 != 0,
            send_markers: setup & 2 != 0,
            receive_markers: setup & 4 != 0,
        };
        let (placement, reading) = if setup & 8 != 0 {
            (Placement::Direct, Reading::Direct)
        } else {
            (Placement::Verified, Reading::Staged)
        };
        let mut pair = ConnPair::mpa(seed, framing, placement, [reading; 2]);
        let inbox = pair.b.region(4096, RW, 0);
        for i in 0..4 {
            pair.b.recv(i, inbox.sge(1024 * i as usize, 1024));
        }
        let mut rest = &octets[..];
        for n in chunks.iter().cycle().take(200) {
            if rest.is_empty() {
                break;
            }
            let k = (*n).min(rest.len());
            pair.ab.bytes.extend(&rest[..k]);
            rest = &rest[k..];
            pair.receive(Side::B);
            pair.transmit(Side::B);
        }
        pair.ab.fin = true;
        pair.drive();
        prop_assert!(pair.b.conn.is_finished());
        prop_assert_eq!(pair.b.seen.after_finished, 0);
        let mut ids: Vec<u64> = pair.b.seen.completions.iter().map(|c| c.wr_id).collect();
        ids.sort_unstable();
        prop_assert_eq!(ids, vec![0, 1, 2, 3]);
        inbox.assert_canaries();
    }
}

/// The MULPDU follows the EMSS the runtime reads when the connection asks
/// (after 64 KiB written, then at doubling intervals), and only between
/// batches: a batch partly written keeps the segment sizes it was framed
/// with.
#[test]
fn the_mulpdu_follows_the_emss_between_batches() {
    let setup = Setup {
        capacity: 3000,
        ..Setup::new(PLAIN)
    };
    let mut pair = ConnPair::with(23, setup);
    let out = pair.a.region(200_000, Access::empty(), 1);
    let inbox = pair.b.region(200_000, Access::LOCAL_WRITE, 0);
    pair.b.recv(1, inbox.sge(0, 100_000));
    pair.b.recv(2, inbox.sge(100_000, 100_000));
    pair.a.send(3, out.sge(0, 100_000));
    assert!(!pair.a.conn.wants_emss(), "nothing written yet");
    let mut asked = 0;
    for _ in 0..100_000 {
        if pair.a.conn.wants_emss() {
            assert!(!pair.a.conn.is_transmit_pending());
            asked += 1;
            pair.a.conn.handle_emss(1460);
            assert_eq!(pair.a.conn.emss(), 1460);
            assert_eq!(pair.a.conn.qp().mulpdu(), 1460 - 6);
        }
        if !pair.step() {
            break;
        }
    }
    assert_eq!(asked, 1, "once, after 64 KiB");
    assert_eq!(ok(&pair.b, 1).byte_len, 100_000);
    // The next Send goes out in segments of the new MULPDU: 1454 octets,
    // an 18-octet untagged header and 1436 of payload each.
    let before = pair.b.conn.deframer().pdus_received();
    pair.a.send(4, out.sge(100_000, 100_000));
    pair.drive();
    assert_eq!(ok(&pair.b, 2).byte_len, 100_000);
    assert_eq!(
        pair.b.conn.deframer().pdus_received() - before,
        100_000u64.div_ceil(1436)
    );
    assert_eq!(inbox.bytes(), vec![1; 200_000]);
}
