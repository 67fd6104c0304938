//! Hand-made streams through the out-of-order receiver: the cases an
//! honest sender never makes, each against the in-order receiver fed the
//! same stream.

use std::sync::Arc;

use crate::ddp::{SegmentHeader, TaggedHeader, UntaggedHeader};
use crate::framing::{AnyFramer, Deframer, FeedError, Framer, FramingError, LlpError, WireBatch};
use crate::ift::{IftTransmitter, TxParams};
use crate::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, STag, StreamId};
use crate::mpa::{FpduTransmitter, FramingParams, Placement};
use crate::rdmap::{Completion, Event, Opcode, ProtocolError, QueuePair, QueuePairConfig, Sge};

use super::*;

const ISN: u32 = 0xffff_ff00;

/// A receiving end: a queue pair, a region the peer may write, receives.
struct End {
    qp: QueuePair,
    table: Arc<MemoryTable>,
    win: MemoryBuffer,
    win_stag: STag,
    rq: MemoryBuffer,
    rq_stag: STag,
}

impl End {
    fn new() -> Self {
        let table = Arc::new(MemoryTable::with_seed(77));
        let pd = table.alloc_pd();
        let win = MemoryBuffer::new(4096);
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let win_stag = table
            .register(RegionSpec::whole(pd, win.clone(), 0, rw))
            .unwrap();
        let rq = MemoryBuffer::new(4 * 4096);
        let rq_stag = table
            .register(RegionSpec::whole(pd, rq.clone(), 0, Access::LOCAL_WRITE))
            .unwrap();
        let mut qp = QueuePair::new(QueuePairConfig::new(pd, StreamId(9)), Arc::clone(&table));
        for i in 0..4u64 {
            let sge = Sge {
                stag: rq_stag,
                to: i * 4096,
                len: 4096,
            };
            qp.post_recv(i, sge).unwrap();
        }
        Self {
            qp,
            table,
            win,
            win_stag,
            rq,
            rq_stag,
        }
    }

    fn outcome(&mut self) -> (Vec<Completion>, Vec<Event>) {
        let mut c = Vec::new();
        let mut e = Vec::new();
        while let Some(x) = self.qp.poll_completion() {
            c.push(x);
        }
        while let Some(x) = self.qp.poll_event() {
            e.push(x);
        }
        (c, e)
    }
}

type Error = FeedError<FramingError, ProtocolError>;

fn tagged(opcode: Opcode, stag: STag, to: u64, payload: &[u8]) -> Vec<u8> {
    let (h, n) = SegmentHeader::Tagged(TaggedHeader {
        last: true,
        rsvd_ulp: opcode.control(),
        stag,
        to,
    })
    .to_bytes();
    [&h[..n], payload].concat()
}

fn send(msn: u32, payload: &[u8]) -> Vec<u8> {
    let (h, n) = SegmentHeader::Untagged(UntaggedHeader {
        last: true,
        rsvd_ulp: Opcode::Send.control(),
        rsvd_ulp_word: 0,
        qn: 0,
        msn,
        mo: 0,
    })
    .to_bytes();
    [&h[..n], payload].concat()
}

/// Frames each ULPDU (its DDP header as the framing's header) onto
/// `wire`; returns where each PDU starts.
fn frame(framer: &mut AnyFramer, ulpdus: &[Vec<u8>], wire: &mut Vec<u8>) -> Vec<usize> {
    let mut batch = WireBatch::new();
    let mut starts = Vec::new();
    for u in ulpdus {
        let hl = crate::ddp::header::header_len(u[0]);
        starts.push(wire.len());
        batch.clear();
        framer.frame(&u[..hl], &[&u[hl..]], &mut batch).unwrap();
        batch.write_to(&[&u[hl..]], wire);
    }
    starts
}

fn mpa(crc: bool, markers: bool) -> (AnyFramer, AnyFraming) {
    let params = FramingParams {
        crc,
        send_markers: markers,
        receive_markers: markers,
    };
    (
        AnyFramer::Mpa(FpduTransmitter::new(params)),
        AnyFraming::Mpa(MpaFraming {
            params,
            placement: Placement::Verified,
        }),
    )
}

fn ift_params(vtag: u16) -> TxParams {
    TxParams {
        header_crc: true,
        payload_crc: true,
        markers: None,
        vtag,
    }
}

fn ift() -> (AnyFramer, AnyFraming) {
    let tx = ift_params(0x77);
    (
        AnyFramer::Ift(IftTransmitter::new(tx)),
        AnyFraming::Ift(IftFraming {
            params: tx.checked_by_peer(),
            may_speculate: true,
        }),
    )
}

/// The in-order receiver, fed the whole stream.
fn in_order(framing: AnyFraming, stream: &[u8]) -> (End, Option<Error>) {
    let mut end = End::new();
    let mut d = framing.deframer_at(0);
    let error = match d.receive(stream, &mut end.qp) {
        Ok(_) => None,
        Err(e) => {
            if let FeedError::Framing(f) = &e {
                end.qp.handle_llp_error(f.llp_code());
            }
            Some(e)
        }
    };
    (end, error)
}

fn receiver(framing: AnyFraming) -> OooReceiver<AnyFraming> {
    OooReceiver::new(framing, ISN, OooConfig::default())
}

/// Feeds `pieces` (stream offset ranges) in order; returns the first error.
fn feed(
    rx: &mut OooReceiver<AnyFraming>,
    end: &mut End,
    stream: &[u8],
    pieces: &[(usize, usize)],
) -> Option<Error> {
    let mut first = None;
    for &(s, e) in pieces {
        if let Err(err) = rx.segment(ISN.wrapping_add(s as u32), &stream[s..e], &mut end.qp) {
            first.get_or_insert(err);
        }
    }
    first
}

/// The out-of-order receiver, after `pieces`, did what the in-order one
/// did with the whole stream.
fn same_as_in_order(
    framing: AnyFraming,
    stream: &[u8],
    mut end: End,
    error: Option<Error>,
) -> (End, End) {
    let (mut reference, ref_error) = in_order(framing, stream);
    assert_eq!(error, ref_error);
    assert_eq!(end.outcome(), reference.outcome());
    (end, reference)
}

#[test]
fn a_read_response_with_no_read_outstanding_is_not_placed_ahead() {
    let (mut framer, framing) = mpa(true, true);
    let mut stream = Vec::new();
    let end0 = End::new();
    let starts = frame(
        &mut framer,
        &[
            send(1, b"hello"),
            tagged(Opcode::ReadResponse, end0.win_stag, 0, &[7; 100]),
        ],
        &mut stream,
    );
    let mut end = end0;
    let mut rx = receiver(framing);
    let n = stream.len();
    assert_eq!(feed(&mut rx, &mut end, &stream, &[(starts[1], n)]), None);
    assert_eq!(rx.stats().early_pdus, 0);
    assert!(end.win.to_vec().iter().all(|&b| b == 0));
    let error = feed(&mut rx, &mut end, &stream, &[(0, starts[1])]);
    assert!(error.is_some(), "refused in order");
    let (end, reference) = same_as_in_order(framing, &stream, end, error);
    assert_eq!(end.win.to_vec(), reference.win.to_vec());
}

/// Appends a second frame, at the offset given, to the stream.
type SecondFrame<'a> = dyn Fn(&mut Vec<u8>, usize) + 'a;

#[test]
//= draft-williams-iwarp-ift-01#8
//= type=test
//# If the confirmation fails, speculative placement MUST NOT be done.
//= draft-williams-iwarp-ift-01#8
//= type=test
//# If the PDU identified appears to be in error, the error MUST NOT be reported
//# speculatively.
//= draft-williams-iwarp-ift-01#8
//= type=test
//# The subset of these which exists SHOULD all be checked, and any field containing an
//# invalid value disqualifies the PDU for speculative placement.
fn a_frame_failing_its_checks_ahead_is_neither_placed_nor_reported_early() {
    let end0 = End::new();
    let stag = end0.win_stag;
    let write = tagged(Opcode::RdmaWrite, stag, 0, &[5; 300]);
    // IFT: the second frame carries another VTag; an unknown STag; a
    // Write to an STag that is fine but with a damaged payload CRC.
    let cases: [(&str, Box<SecondFrame<'_>>); 3] = [
        (
            "VTag",
            Box::new(|wire: &mut Vec<u8>, at: usize| {
                let mut bad =
                    AnyFramer::Ift(IftTransmitter::at_offset(ift_params(0x78), at as u64));
                frame(
                    &mut bad,
                    &[tagged(Opcode::RdmaWrite, stag, 0, &[5; 300])],
                    wire,
                );
            }),
        ),
        (
            "STag",
            Box::new(|wire: &mut Vec<u8>, at: usize| {
                let mut f = AnyFramer::Ift(IftTransmitter::at_offset(ift_params(0x77), at as u64));
                frame(
                    &mut f,
                    &[tagged(Opcode::RdmaWrite, STag(0x1234_5600), 0, &[5; 300])],
                    wire,
                );
            }),
        ),
        (
            "payload CRC",
            Box::new(|wire: &mut Vec<u8>, at: usize| {
                let mut f = AnyFramer::Ift(IftTransmitter::at_offset(ift_params(0x77), at as u64));
                frame(&mut f, std::slice::from_ref(&write), wire);
                let n = wire.len();
                wire[n - 10] ^= 0x40;
            }),
        ),
    ];
    for (what, second) in cases {
        let (mut framer, framing) = ift();
        let mut stream = Vec::new();
        frame(&mut framer, &[send(1, b"first")], &mut stream);
        let at = stream.len();
        second(&mut stream, at);
        let mut end = End::new();
        let mut rx = receiver(framing);
        let n = stream.len();
        assert_eq!(feed(&mut rx, &mut end, &stream, &[(at, n)]), None, "{what}");
        assert_eq!(rx.stats().early_pdus, 0, "{what}");
        assert!(end.win.to_vec().iter().all(|&b| b == 0), "{what}");
        assert_eq!(end.outcome(), (Vec::new(), Vec::new()), "{what}");
        let error = feed(&mut rx, &mut end, &stream, &[(0, at)]);
        assert!(error.is_some(), "{what}: refused in order");
        let (end, reference) = same_as_in_order(framing, &stream, end, error);
        assert_eq!(end.win.to_vec(), reference.win.to_vec(), "{what}");
    }
}

#[test]
fn a_damaged_fpdu_ahead_waits_for_its_error_in_order() {
    let (mut framer, framing) = mpa(true, true);
    let end0 = End::new();
    let mut stream = Vec::new();
    let starts = frame(
        &mut framer,
        &[
            send(1, b"first"),
            tagged(Opcode::RdmaWrite, end0.win_stag, 8, &[9; 2000]),
        ],
        &mut stream,
    );
    stream[starts[1] + 700] ^= 1;
    let mut end = end0;
    let mut rx = receiver(framing);
    let n = stream.len();
    assert_eq!(feed(&mut rx, &mut end, &stream, &[(starts[1], n)]), None);
    assert!(end.win.to_vec().iter().all(|&b| b == 0));
    let error = feed(&mut rx, &mut end, &stream, &[(0, starts[1])]);
    assert!(matches!(error, Some(FeedError::Framing(_))));
    same_as_in_order(framing, &stream, end, error);
}

#[test]
//= draft-williams-iwarp-ift-01#8
//= type=test
//# If this verification fails, the PDU MUST be placed again.
//= draft-williams-iwarp-ift-01#8
//= type=test
//# If an implementation has discarded the original after placing it (which it typically will
//# do), then it MUST withhold TCP acknowledgement of this segment and force the remote end to
//# retransmit it.
fn a_fake_fpdu_inside_a_payload_is_withdrawn_and_received_again() {
    // Without markers, a segment that starts inside a Send's payload
    // where the peer put a whole FPDU of its own with a valid CRC looks
    // like an aligned FPDU.
    let (_, framing) = mpa(true, false);
    let end0 = End::new();
    let mut fake = Vec::new();
    let (mut f, _) = mpa(true, false);
    frame(
        &mut f,
        &[tagged(Opcode::RdmaWrite, end0.win_stag, 100, &[0xab; 200])],
        &mut fake,
    );
    let payload = [&[0x11; 40][..], &fake, &[0x22; 40]].concat();
    let (mut framer, _) = mpa(true, false);
    let mut stream = Vec::new();
    frame(&mut framer, &[send(1, &payload)], &mut stream);
    let fake_at = 2 + 18 + 40;
    let n = stream.len();
    let mut end = end0;
    let mut rx = receiver(framing);
    assert_eq!(feed(&mut rx, &mut end, &stream, &[(fake_at, n)]), None);
    assert_eq!(rx.stats().early_pdus, 1, "taken for an FPDU and placed");
    assert_eq!(end.win.to_vec()[100..300], [0xab; 200]);
    // The hole fills: the Send's FPDU runs on where the fake one began.
    assert_eq!(feed(&mut rx, &mut end, &stream, &[(0, fake_at)]), None);
    assert_eq!(rx.stats().withdrawn, 1);
    assert_eq!(rx.ack(), ISN.wrapping_add(fake_at as u32));
    let fake_end = (fake_at + fake.len()) as u64;
    assert_eq!(rx.held_ranges().collect::<Vec<_>>(), [(fake_end, n as u64)]);
    assert_eq!(end.outcome(), (Vec::new(), Vec::new()));
    // Sent again, it completes the Send, as in order.
    assert_eq!(feed(&mut rx, &mut end, &stream, &[(fake_at, n)]), None);
    assert_eq!(rx.in_order_offset(), n as u64);
    let (end, reference) = same_as_in_order(framing, &stream, end, None);
    assert_eq!(end.rq.to_vec(), reference.rq.to_vec());
    // What the fake wrote stays: in a region the peer may write.
    let (a, b) = (end.win.to_vec(), reference.win.to_vec());
    assert!(a
        .iter()
        .zip(&b)
        .enumerate()
        .all(|(i, (x, y))| x == y || (100..300).contains(&i)));
}

#[test]
//= draft-williams-iwarp-ift-01#8
//= type=test
//# 8.2 Overwrite checks Before speculative placement is done, the RDDP implementation MUST
//# insure that no previously placed data is overwritten.
fn overlapping_writes_end_as_in_order() {
    for (name, (mut framer, framing), early) in [("IFT", ift(), 1), ("MPA", mpa(true, true), 2)] {
        let end0 = End::new();
        let stag = end0.win_stag;
        let mut stream = Vec::new();
        let starts = frame(
            &mut framer,
            &[
                send(1, b"hole"),
                tagged(Opcode::RdmaWrite, stag, 0, &[1; 300]),
                tagged(Opcode::RdmaWrite, stag, 100, &[2; 300]),
            ],
            &mut stream,
        );
        let n = stream.len();
        let mut end = end0;
        let mut rx = receiver(framing);
        // The later Write first, then the earlier one, then the hole.
        let pieces = [(starts[2], n), (starts[1], starts[2]), (0, starts[1])];
        assert_eq!(feed(&mut rx, &mut end, &stream, &pieces), None, "{name}");
        // IFT places nothing over a speculative placement; MPA places both.
        assert_eq!(rx.stats().early_pdus, early, "{name}");
        let (end, reference) = same_as_in_order(framing, &stream, end, None);
        let win = end.win.to_vec();
        assert_eq!(win, reference.win.to_vec(), "{name}");
        assert_eq!(win[..100], [1; 100]);
        assert_eq!(win[100..400], [2; 300]);
    }
}

#[test]
fn an_fpdu_in_pieces_ahead_is_placed_once_whole() {
    let (mut framer, framing) = mpa(true, true);
    let end0 = End::new();
    let mut stream = Vec::new();
    let starts = frame(
        &mut framer,
        &[
            send(1, b"hole"),
            tagged(Opcode::RdmaWrite, end0.win_stag, 0, &[3; 3000]),
        ],
        &mut stream,
    );
    let n = stream.len();
    let mut end = end0;
    let mut rx = receiver(framing);
    // The Write in seven pieces, last first.
    let cuts: Vec<usize> = (0..=7)
        .map(|i| starts[1] + (n - starts[1]) * i / 7)
        .collect();
    for i in (1..7).rev() {
        feed(&mut rx, &mut end, &stream, &[(cuts[i], cuts[i + 1])]);
        assert_eq!(rx.stats().early_pdus, 0);
        assert!(rx.held_octets() <= n - starts[1]);
    }
    feed(&mut rx, &mut end, &stream, &[(cuts[0], cuts[1])]);
    assert_eq!(rx.stats().early_pdus, 1);
    assert_eq!(rx.held_octets(), 0);
    assert_eq!(end.win.to_vec()[..3000], [3; 3000]);
    feed(&mut rx, &mut end, &stream, &[(0, starts[1])]);
    let (end, reference) = same_as_in_order(framing, &stream, end, None);
    assert_eq!(end.win.to_vec(), reference.win.to_vec());
}

#[test]
fn octets_beyond_the_window_are_dropped_and_received_again() {
    let (mut framer, framing) = mpa(true, true);
    let end0 = End::new();
    let mut stream = Vec::new();
    let ulpdus: Vec<Vec<u8>> = (0..8u64)
        .map(|i| tagged(Opcode::RdmaWrite, end0.win_stag, i * 400, &[i as u8; 400]))
        .collect();
    let starts = frame(&mut framer, &ulpdus, &mut stream);
    let n = stream.len();
    let mut end = end0;
    let config = OooConfig {
        window: 1500,
        budget: 1 << 20,
    };
    let mut rx = OooReceiver::new(framing, ISN, config);
    feed(&mut rx, &mut end, &stream, &[(starts[1], n)]);
    assert!(rx.stats().dropped_octets > 0);
    assert!(rx.held_ranges().all(|(_, e)| e <= 1500));
    // The sender sends again from the first octet not acknowledged.
    while rx.in_order_offset() < n as u64 {
        let at = rx.in_order_offset() as usize;
        feed(&mut rx, &mut end, &stream, &[(at, n)]);
    }
    let (end, reference) = same_as_in_order(framing, &stream, end, None);
    assert_eq!(end.win.to_vec(), reference.win.to_vec());
}

#[test]
fn a_write_placed_ahead_into_an_stag_invalidated_before_it_fails_as_in_order() {
    let (mut framer, framing) = mpa(true, true);
    let end0 = End::new();
    let stag = end0.win_stag;
    let (h, n) = SegmentHeader::Untagged(UntaggedHeader {
        last: true,
        rsvd_ulp: Opcode::SendInvalidate.control(),
        rsvd_ulp_word: stag.0,
        qn: 0,
        msn: 1,
        mo: 0,
    })
    .to_bytes();
    let send_invalidate = [&h[..n], b"bye"].concat();
    let mut stream = Vec::new();
    let starts = frame(
        &mut framer,
        &[
            send_invalidate,
            tagged(Opcode::RdmaWrite, stag, 0, &[6; 500]),
        ],
        &mut stream,
    );
    let n = stream.len();
    let mut end = end0;
    let mut rx = receiver(framing);
    // The Write arrives first, while its STag is still valid: placed.
    assert_eq!(feed(&mut rx, &mut end, &stream, &[(starts[1], n)]), None);
    assert_eq!(rx.stats().early_pdus, 1);
    // In order, the Send invalidates it first: the Write is refused.
    let error = feed(&mut rx, &mut end, &stream, &[(0, starts[1])]);
    assert!(matches!(error, Some(FeedError::Sink(_))), "{error:?}");
    same_as_in_order(framing, &stream, end, error);
}

/// What the local user may do to a region between the arrival of a PDU
/// placed into it and its delivery.
#[derive(Debug, Clone, Copy)]
enum Revoke {
    Invalidate,
    Deregister,
}

impl Revoke {
    fn apply(self, end: &End, stag: STag) {
        match self {
            Self::Invalidate => end.table.invalidate(stag).unwrap(),
            Self::Deregister => end.table.deregister(stag).unwrap(),
        }
    }
}

/// A PDU placed ahead of delivery whose region the local user revokes
/// before its turn: delivered, it fails exactly as in order, where the
/// revocation came before it was received; the memory table is asked
/// again, not the verdict it gave on arrival taken.
fn revoked_between_arrival_and_delivery(
    ulpdus: [Vec<u8>; 2],
    stag: impl Fn(&End) -> STag,
    how: Revoke,
) {
    let (mut framer, framing) = mpa(true, true);
    let mut stream = Vec::new();
    let starts = frame(&mut framer, &ulpdus, &mut stream);
    let n = stream.len();
    let mut end = End::new();
    let mut rx = receiver(framing);
    assert_eq!(feed(&mut rx, &mut end, &stream, &[(starts[1], n)]), None);
    assert_eq!(rx.stats().early_pdus, 1, "{how:?}");
    how.apply(&end, stag(&end));
    let error = feed(&mut rx, &mut end, &stream, &[(0, starts[1])]);
    assert!(
        matches!(error, Some(FeedError::Sink(_))),
        "{how:?}: {error:?}"
    );
    let mut reference = End::new();
    how.apply(&reference, stag(&reference));
    let mut d = framing.deframer_at(0);
    let ref_error = d.receive(&stream, &mut reference.qp).err();
    assert_eq!(error, ref_error, "{how:?}");
    assert_eq!(end.outcome(), reference.outcome(), "{how:?}");
}

#[test]
fn a_write_placed_ahead_whose_stag_the_user_revokes_before_delivery_fails_as_in_order() {
    for how in [Revoke::Invalidate, Revoke::Deregister] {
        let stag = End::new().win_stag;
        let write = tagged(Opcode::RdmaWrite, stag, 100, &[6; 500]);
        revoked_between_arrival_and_delivery([send(1, &[1; 300]), write], |e| e.win_stag, how);
    }
}

#[test]
fn a_send_placed_ahead_whose_receive_the_user_revokes_before_delivery_fails_as_in_order() {
    for how in [Revoke::Invalidate, Revoke::Deregister] {
        let stag = End::new().win_stag;
        let write = tagged(Opcode::RdmaWrite, stag, 100, &[6; 300]);
        revoked_between_arrival_and_delivery([write, send(1, &[7; 500])], |e| e.rq_stag, how);
    }
}
