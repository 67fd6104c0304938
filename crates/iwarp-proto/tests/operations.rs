//! Every RDMAP operation between two queue pairs back to back, through a
//! framing that splits ULPDUs into random pieces.

mod common;

use common::{pattern, Node, Pair};
use iwarp_proto::memory::Access;
use iwarp_proto::rdmap::{
    Completion, CompletionOpcode, CompletionStatus, Event, QpState, SendFlags,
};
use proptest::prelude::*;

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

fn ok(wr_id: u64, opcode: CompletionOpcode, byte_len: u32) -> Completion {
    Completion {
        wr_id,
        status: CompletionStatus::Success,
        opcode,
        byte_len,
        solicited: false,
        invalidated: None,
    }
}

#[test]
//= rfc5041#4.2
//= type=test
//# At the Data Source, DDP MUST set RsvdULP Field to the value specified by the ULP.
//= rfc5041#4.3
//= type=test
//# At the Data Source, DDP MUST set RsvdULP Field to the value specified by the ULP.
fn first_send_is_octet_for_octet_what_siw_sends() {
    // siw-observed.md: rping's first Send, 16 octets.
    let mut a = Node::new(1, |_| {});
    let src = a.region(16, 0x5637_f5a0_d530, Access::empty(), 0);
    let payload = [
        0x00, 0x00, 0x56, 0x37, 0xf5, 0xa0, 0xd5, 0x30, 0x3f, 0xce, 0x29, 0x00, 0x00, 0x00, 0x00,
        0x20,
    ];
    src.fill(&payload);
    a.qp.post_send(1, src.sge(0, 16), SendFlags::default())
        .unwrap();
    let t = a.transmit_all();
    assert_eq!(t.len(), 1);
    let mut expect = vec![0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
    expect.extend_from_slice(&payload);
    assert_eq!(t[0], expect);
    a.drain();
    assert_eq!(a.completions, vec![ok(1, CompletionOpcode::Send, 16)]);
}

#[test]
//= rfc5041#5.2
//= type=test
//# At the Data Source, the DDP layer MUST send all the data contained in the ULP message.
//= rfc5041#4.1
//= type=test
//# If the Last flag is set to one, the DDP Message payload MUST be Delivered to the ULP after
//= rfc5041#5.4
//= type=test
//# At the Data Sink, DDP MUST Deliver a DDP Message if and only if all of the following are
//# true
//= rfc5041#5.4
//= type=test
//# At the Data Sink, DDP MUST provide the ULP Message Length to the ULP when an Untagged DDP
//# Message is Delivered.
fn send_across_many_segments() {
    let mut p = Pair::new(1);
    p.a.qp.set_mulpdu(128);
    let (dst, data) = post_one_send(&mut p, 5000, 6000);
    p.drive();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(&dst.bytes()[..5000], &data[..]);
    assert_eq!(p.b.completions, vec![ok(7, CompletionOpcode::Recv, 5000)]);
    assert_eq!(p.a.completions, vec![ok(8, CompletionOpcode::Send, 5000)]);
    dst.assert_canaries();
}

/// Whatever MULPDU the framing layer reports, no segment exceeds the
/// 64768 octets MPA carries: a 100,000-octet Send under a MULPDU of
/// 70,000 goes out in segments of at most 64768.
//= draft-ietf-rddp-mpa-01#3.2
//= type=test
//# The sending DDP MUST NOT post a ULPDU larger than 64768 octets to
//# MPA.
#[test]
fn no_segment_exceeds_the_largest_ulpdu() {
    let mut p = Pair::new(11);
    p.a.qp.set_mulpdu(70_000);
    assert_eq!(p.a.qp.mulpdu(), 64768);
    let (dst, data) = post_one_send(&mut p, 100_000, 100_000);
    let segments = p.a.transmit_all();
    assert_eq!(segments.len(), 2);
    assert!(
        segments.iter().all(|s| s.len() <= 64768),
        "{:?}",
        segments.iter().map(Vec::len).collect::<Vec<_>>()
    );
    for s in &segments {
        common::feed(&mut p.b.qp, s, &mut p.rng).unwrap();
    }
    p.drive();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(dst.bytes(), data);
}

/// At the data source, the segments of each message carry its header
/// fields: the same RsvdULP, queue, MSN or STag in every segment, the MO
/// or TO advancing by each segment's payload from the message's start,
/// the L flag on the last segment only, DV 1 and the reserved bits zero;
/// messages go out whole, in the order they were posted, each queue's
/// MSN counting from 1.
#[test]
//= rfc5041#4.1
//= type=test
//# It MUST be set to one on the last DDP Segment of every DDP Message.
//= rfc5041#4.1
//= type=test
//# It MUST NOT be set to one on any other DDP Segment.
//= rfc5041#4.1
//= type=test
//# The DDP Segment with the L bit set to 1 MUST be posted to the LLP after all other DDP
//# Segments of the associated DDP Message have been posted to the LLP.
//= rfc5041#4.1
//= type=test
//# For an Untagged DDP Message, the DDP Segment with the L bit set to 1 MUST carry the highest
//# MO.
//= rfc5041#4.1
//= type=test
//# This field MUST be set to zero on transmit, and not checked on receive.
//= rfc5041#4.1
//= type=test
//# This field MUST be set to one to indicate the version of the specification described in this
//# document.
//= rfc5041#4.2
//= type=test
//# Each DDP Segment within a specific DDP Message MUST contain the same value for this field.
//= rfc5041#4.2
//= type=test
//# The Data Source MUST ensure that each DDP Segment within a specific DDP Message contains the
//# same value for this field.
//= rfc5041#4.2
//= type=test
//# Each DDP Segment within a specific DDP Message MUST contain the same value for this field
//# and MUST be the value supplied by the ULP.
//= rfc5041#4.3
//= type=test
//# Each DDP Segment within a specific DDP Message MUST contain the same value for the
//= rfc5041#4.3
//= type=test
//# Each DDP segment within a specific DDP message MUST contain the same value for this field
//# and MUST be the value supplied by the ULP at the Data Source.
//= rfc5041#4.3
//= type=test
//# The Data Source MUST ensure that each DDP Segment within a specific DDP Message contains the
//# same value for this field.
//= rfc5041#4.3
//= type=test
//# The Message Sequence Number specifies a sequence number that MUST be increased by one
//# (modulo 2^32) with each DDP Message targeting the specific Queue Number on the DDP Stream
//# associated with this DDP Segment.
//= rfc5041#4.3
//= type=test
//# The initial value for MSN MUST be one.
//= rfc5041#4.3
//= type=test
//# The MO referencing the first octet of the DDP Message MUST be set to zero by the DDP layer.
//= rfc5041#4.4
//= type=test
//# Each DDP Segment MUST contain a DDP Header.
//= rfc5041#5.2
//= type=test
//# For each DDP Segment of a Untagged DDP Message, the MO MUST be set to the octet offset from
//# the first octet in the associated ULP Message (which is defined to be zero) to the first
//# octet in the ULP Payload contained in the DDP Segment.
//= rfc5041#5.2
//= type=test
//# For each DDP Segment of a Tagged DDP Message, the TO MUST be set to the octet offset from
//# the first octet in the associated ULP Message to the first octet in the ULP Payload
//# contained in the DDP Segment, plus the TO assigned to the first octet in the associated ULP
//# Message.
//= rfc5041#5.3
//= type=test
//# MUST transmit DDP Messages in the order they were submitted to the DDP layer, * SHOULD
//# transmit DDP Segments within a DDP Message in increasing MO order for Untagged DDP Messages
//# and in increasing TO order for Tagged DDP Messages.
//= rfc5041#4.3
//= type=test
//# 0xFFFFFFFF. Each DDP segment within a specific DDP message MUST contain the same value for
//# this field. The Data Source MUST ensure that each DDP Segment
//= rfc5041#4.2
//= type=test
//# MUST be the value supplied by the ULP. The Data Source MUST ensure that each DDP Segment
//# within a specific DDP Message contains the same value for this field.
fn segments_of_a_message_carry_its_header_fields() {
    use iwarp_proto::ddp::header::Segment;
    let mut p = Pair::new(12);
    p.a.qp.set_mulpdu(128);
    let src = p.a.region(1000, 0, Access::empty(), 9);
    let remote = p.b.region(1000, 0x9000, RW, 0);
    for id in 0..2 {
        p.b.qp.post_recv(id, remote.sge(0, 1000)).unwrap();
    }
    p.a.qp
        .post_send(1, src.sge(0, 1000), SendFlags::default())
        .unwrap();
    p.a.qp
        .rdma_write(2, src.sge(0, 1000), remote.stag, 0x9000 + 7)
        .unwrap();
    p.a.qp
        .post_send(3, src.sge(0, 300), SendFlags::default())
        .unwrap();
    let out = p.a.transmit_all();
    // (tagged, MSN or TO of the message's first octet, length) per message.
    let mut messages: Vec<(bool, u64, usize)> = Vec::new();
    let mut first: Option<Segment<&[u8]>> = None;
    let mut done = 0;
    for octets in &out {
        let s = Segment::new_checked(&octets[..]).unwrap();
        assert_eq!(octets[0] & 0x3c, 0, "reserved bits");
        assert_eq!(s.version(), 1);
        let start = first.get_or_insert(Segment::new_unchecked(&octets[..]));
        assert_eq!(s.tagged(), start.tagged());
        assert_eq!(s.rsvd_ulp(), start.rsvd_ulp());
        if s.tagged() {
            assert_eq!(s.stag(), start.stag());
            assert_eq!(s.tagged_offset(), start.tagged_offset() + done as u64);
        } else {
            assert_eq!(s.rsvd_ulp_word(), start.rsvd_ulp_word());
            assert_eq!((s.qn(), s.msn()), (start.qn(), start.msn()));
            assert_eq!(s.mo() as usize, done);
        }
        done += s.payload().len();
        if s.last() {
            let key = if s.tagged() {
                start.tagged_offset()
            } else {
                u64::from(start.msn())
            };
            messages.push((s.tagged(), key, done));
            first = None;
            done = 0;
        }
    }
    assert!(first.is_none(), "the last segment had no L flag");
    assert_eq!(
        messages,
        [(false, 1, 1000), (true, 0x9000 + 7, 1000), (false, 2, 300)]
    );
    assert_eq!(out.len(), 10 + 9 + 3);
}

#[test]
//= rfc5041#4.3
//= type=test
//# At the Data Sink, DDP MUST provide RsvdULP field to the ULP when the ULP Message is
//# Delivered.
//= rfc5041#4.3
//= type=test
//# At the Data Sink, the DDP implementation is NOT REQUIRED to verify that the same value is
//# present in the RsvdULP field of each DDP Segment
//= rfc5041#5.4
//= type=test
//# At the Data Sink, DDP MUST provide the RsvdULP Field of the DDP Message to the ULP when the
//# DDP Message is delivered.
//= rfc5040#5.4
//= type=test
//# On a Send with Invalidate, the Data Sink MUST invalidate the STag it names, after placing
//# the message and before delivering it; if the STag cannot be invalidated, that is an error.
fn send_with_solicited_event_and_invalidate() {
    let mut p = Pair::new(2);
    let victim = p.b.region(64, 0, RW, 0);
    let dst = p.b.region(64, 0x100, Access::LOCAL_WRITE, 0);
    let src = p.a.region(10, 0, Access::empty(), 9);
    p.b.qp.post_recv(1, dst.sge(0, 64)).unwrap();
    p.b.qp.post_recv(2, dst.sge(0, 64)).unwrap();
    let flags = SendFlags {
        solicited: true,
        invalidate: Some(victim.stag),
    };
    p.a.qp.post_send(3, src.sge(0, 10), flags).unwrap();
    p.a.qp
        .post_send(
            4,
            src.sge(0, 10),
            SendFlags {
                solicited: true,
                invalidate: None,
            },
        )
        .unwrap();
    p.drive();
    assert!(p.errors.is_empty());
    let c = &p.b.completions;
    assert_eq!(c[0].invalidated, Some(victim.stag));
    assert!(c[0].solicited && c[1].solicited);
    assert_eq!(c[1].invalidated, None);
    assert!(!p.b.table.is_valid(victim.stag));
}

#[test]
//= rfc5041#4.1
//= type=test
//# If set to one, the ULP Payload carried in this DDP Segment MUST be Placed into a Tagged
//# Buffer.
//= rfc5041#4.1
//= type=test
//# If set to zero, the ULP Payload carried in this DDP Segment MUST be Placed into an Untagged
//# Buffer.
//= rfc5041#5.2
//= type=test
//# The ULP at the Data Source MUST specify the STag and the initial TO when the ULP Message is
//# handed to DDP.
//= rfc5041#5.2
//= type=test
//# At the Data Sink, the DDP layer MUST Place the ULP Payload contained in all valid incoming
//# DDP Segments associated with a DDP Message into the ULP Buffer.
//= rfc5041#4.2
//= type=test
//# At the Data Source, DDP MUST set the STag field to the value specified by the ULP.
fn rdma_write_and_read() {
    let mut p = Pair::new(3);
    p.a.qp.set_mulpdu(200);
    p.b.qp.set_mulpdu(300);
    let remote = p.b.region(4096, 0xdead_0000, RW | Access::REMOTE_READ, 0);
    let src = p.a.region(3000, 0x10, Access::empty(), 0);
    let data = pattern(3000, 7);
    src.fill(&data);
    let sink = p.a.region(3000, 0x7000, RW, 0);
    p.a.qp
        .rdma_write(1, src.sge(0, 3000), remote.stag, 0xdead_0000 + 96)
        .unwrap();
    p.a.qp
        .rdma_read(2, sink.sge(0, 2000), remote.stag, 0xdead_0000 + 96)
        .unwrap();
    p.drive();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(&remote.bytes()[96..3096], &data[..]);
    assert_eq!(&sink.bytes()[..2000], &data[..2000]);
    assert_eq!(
        p.a.completions,
        vec![
            ok(1, CompletionOpcode::RdmaWrite, 3000),
            ok(2, CompletionOpcode::RdmaRead, 2000)
        ]
    );
    assert!(p.b.completions.is_empty());
    remote.assert_canaries();
    sink.assert_canaries();
}

#[test]
//= rfc5040#5
//= type=test
//# Zero-length RDMA Write, RDMA Read and Send Messages are valid and MUST be supported.
fn zero_length_operations() {
    let mut p = Pair::new(4);
    let dst = p.b.region(8, 0, Access::LOCAL_WRITE, 0);
    let sink = p.a.region(8, 0, RW, 0);
    p.b.qp.post_recv(1, dst.sge(0, 8)).unwrap();
    // Zero-length messages name STags that are never checked.
    let any = iwarp_proto::memory::STag(0x1234_5678);
    let none = iwarp_proto::rdmap::Sge {
        stag: any,
        to: 0,
        len: 0,
    };
    p.a.qp.post_send(2, none, SendFlags::default()).unwrap();
    p.a.qp.rdma_write(3, none, any, u64::MAX).unwrap();
    p.a.qp.rdma_read(4, sink.sge(0, 0), any, u64::MAX).unwrap();
    // Each is exactly one segment.
    let sent = p.a.transmit_all();
    assert_eq!(
        sent.iter().map(|s| s.len()).collect::<Vec<_>>(),
        [18, 14, 46]
    );
    for s in &sent {
        common::feed(&mut p.b.qp, s, &mut p.rng).unwrap();
    }
    p.drive();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.b.completions, vec![ok(1, CompletionOpcode::Recv, 0)]);
    assert_eq!(
        p.a.completions,
        vec![
            ok(2, CompletionOpcode::Send, 0),
            ok(3, CompletionOpcode::RdmaWrite, 0),
            ok(4, CompletionOpcode::RdmaRead, 0)
        ]
    );
}

#[test]
//= rfc5040#5.2
//= type=test
//# The Data Sink MUST NOT have more RDMA Read Requests outstanding than the ORD it was given.
fn ord_limits_outstanding_reads_and_completions_keep_order() {
    let mut p = Pair::with(5, |c| c.ord = 2);
    let remote = p.b.region(100, 0, Access::REMOTE_READ, 5);
    let sink = p.a.region(500, 0, RW, 0);
    let src = p.a.region(4, 0, Access::empty(), 1);
    let dst = p.b.region(4, 0, Access::LOCAL_WRITE, 0);
    for i in 0..5u64 {
        p.a.qp
            .rdma_read(i, sink.sge(i as usize * 100, 100), remote.stag, 0)
            .unwrap();
    }
    p.b.qp.post_recv(99, dst.sge(0, 4)).unwrap();
    p.a.qp
        .post_send(5, src.sge(0, 4), SendFlags::default())
        .unwrap();
    // Only two Read Requests go out before a response comes back.
    let first = p.a.transmit_all();
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|s| s[1] == 0x41));
    for s in &first {
        common::feed(&mut p.b.qp, s, &mut p.rng).unwrap();
    }
    p.drive();
    assert!(p.errors.is_empty());
    assert_eq!(sink.bytes(), vec![5; 500]);
    let ids: Vec<u64> = p.a.completions.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4, 5]);
}

#[test]
//= rfc5040#5.2
//= type=test
//# The Data Source MUST send its RDMA Read Response Messages in the order in which it received
//# the RDMA Read Request Messages.
//= rfc5040#5.5
//= type=test
//# A Tagged message MUST NOT be interleaved with another Tagged message on the same stream: all
//# segments of an RDMA Write or RDMA Read Response are sent before the next message starts.
fn read_responses_interleave_with_the_responders_sends() {
    let mut p = Pair::new(6);
    p.b.qp.set_mulpdu(100);
    let remote = p.b.region(1000, 0, Access::REMOTE_READ, 0);
    remote.fill(&pattern(1000, 1));
    let sink = p.a.region(1000, 0, RW, 0);
    let bsrc = p.b.region(1000, 0, Access::empty(), 2);
    let adst = p.a.region(1000, 0, Access::LOCAL_WRITE, 0);
    p.a.qp
        .rdma_read(1, sink.sge(0, 500), remote.stag, 0)
        .unwrap();
    p.a.qp
        .rdma_read(2, sink.sge(500, 500), remote.stag, 500)
        .unwrap();
    for i in 0..3 {
        p.a.qp.post_recv(10 + i, adst.sge(0, 1000)).unwrap();
        p.b.qp
            .post_send(20 + i, bsrc.sge(0, 300), SendFlags::default())
            .unwrap();
    }
    // Deliver A's two requests, then look at B's output order.
    for s in p.a.transmit_all() {
        common::feed(&mut p.b.qp, &s, &mut p.rng).unwrap();
    }
    let out = p.b.transmit_all();
    // Messages never interleave mid-message; responses keep request order.
    let kinds: Vec<u8> = out.iter().map(|s| s[1] & 0x0f).collect();
    let mut msgs = Vec::new();
    let mut last_flag = true;
    for (s, k) in out.iter().zip(&kinds) {
        if last_flag {
            msgs.push(*k);
        } else {
            assert_eq!(Some(k), msgs.last());
        }
        last_flag = s[0] & 0x40 != 0;
    }
    assert_eq!(msgs, [3, 2, 3, 2, 3]);
    for s in &out {
        common::feed(&mut p.a.qp, s, &mut p.rng).unwrap();
    }
    p.drive();
    assert_eq!(sink.bytes(), pattern(1000, 1));
}

#[test]
//= rfc5044#7.2
//= type=test
//# A mechanism SHOULD be provided by MPA to DDP for DDP to be made aware that a graceful close
//# of the TCP connection has been received by the TCP (e.g., FIN is received).
//= rfc5041#3
//= type=test
//# For a specific LLP Stream, the LLP MUST provide a mechanism to indicate that the LLP Stream
//# has been gracefully torn down.
//= rfc5041#3
//= type=test
//# For a specific LLP Connection, the LLP MUST provide a mechanism to indicate that the LLP
//# Connection has been gracefully torn down.
//= rfc5041#6.2.1
//= type=test
//# If the Local Peer ULP indicates graceful teardown, the DDP layer on the Local Peer SHOULD
//# ensure that all ULP data would be transferred before the underlying LLP Stream & Connection
//# are torn down, and any further data transfer requests by the Local Peer ULP MUST return an
//# error.
//= rfc5041#6.2
//= type=test
//# DDP MUST NOT independently initiate Stream Teardown.
fn graceful_close_finishes_queued_work_first() {
    let mut p = Pair::new(7);
    let src = p.a.region(3000, 0, Access::empty(), 4);
    let dst = p.b.region(3000, 0, Access::LOCAL_WRITE, 0);
    p.b.qp.post_recv(1, dst.sge(0, 3000)).unwrap();
    p.b.qp.post_recv(2, dst.sge(0, 3000)).unwrap();
    p.a.qp
        .post_send(3, src.sge(0, 3000), SendFlags::default())
        .unwrap();
    p.a.qp.close();
    assert_eq!(p.a.qp.state(), QpState::Closing);
    assert!(p
        .a
        .qp
        .post_send(4, src.sge(0, 1), SendFlags::default())
        .is_err());
    p.drive();
    assert!(p.a.events.contains(&Event::ReadyToClose));
    assert_eq!(dst.bytes(), vec![4; 3000]);
    p.a.qp.handle_llp_closed();
    p.b.qp.handle_llp_closed();
    p.a.drain();
    p.b.drain();
    assert_eq!(p.a.qp.state(), QpState::Closed);
    assert_eq!(p.b.qp.state(), QpState::Error);
    assert_eq!(p.b.completions[0].status, CompletionStatus::Success);
    assert_eq!(p.b.completions[1].status, CompletionStatus::FlushError);
    assert_eq!(p.a.completions, vec![ok(3, CompletionOpcode::Send, 3000)]);
}

#[test]
//= rfc5041#3
//= type=test
//# The LLP MUST ensure that if it accepts a DDP Segment, it will transfer it reliably to the
//# receiver or return with an error stating that the transfer failed to complete.
//= rfc5041#6.2.2
//= type=test
//# If the LLP indicates to the ULP that a fatal error has occurred, the DDP layer SHOULD report
//# the error to the ULP (see Section 7.2, DDP Error Numbers) and complete all outstanding ULP
//# requests with an error.
fn everything_outstanding_is_flushed_when_the_connection_is_lost() {
    let mut p = Pair::new(8);
    let src = p.a.region(100, 0, Access::empty(), 0);
    let sink = p.a.region(100, 0, RW, 0);
    p.a.qp.post_recv(1, sink.sge(0, 100)).unwrap();
    p.a.qp
        .post_send(2, src.sge(0, 100), SendFlags::default())
        .unwrap();
    p.a.qp
        .rdma_read(3, sink.sge(0, 100), iwarp_proto::memory::STag(5), 0)
        .unwrap();
    let _ = p.a.qp.poll_transmit();
    p.a.qp
        .handle_llp_error(iwarp_proto::mpa::LlpErrorCode::ConnectionLost);
    assert!(p.a.qp.poll_transmit().is_none());
    p.a.drain();
    let mut statuses: Vec<_> =
        p.a.completions
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect();
    statuses.sort_by_key(|s| s.0);
    assert_eq!(
        statuses,
        vec![
            (1, CompletionStatus::FlushError),
            (2, CompletionStatus::Success),
            (3, CompletionStatus::FlushError)
        ]
    );
    // Work posted afterwards is flushed at once.
    p.a.qp
        .post_send(4, src.sge(0, 1), SendFlags::default())
        .unwrap();
    assert_eq!(
        p.a.qp.poll_completion().unwrap().status,
        CompletionStatus::FlushError
    );
}

#[derive(Debug, Clone)]
enum Op {
    Send(usize),
    Write(usize, usize),
    Read(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..20_000).prop_map(Op::Send),
        (0usize..20_000, 0usize..1000).prop_map(|(l, o)| Op::Write(l, o)),
        (0usize..20_000, 0usize..1000).prop_map(|(l, o)| Op::Read(l, o)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::proptest_cases(48), ..ProptestConfig::default() })]

    /// Random interleavings of sends, writes and reads in both directions,
    /// random sizes and MULPDUs: every octet lands where it should, every
    /// work request completes successfully and in order.
    #[test]
    //= rfc5041#5.3
    //= type=test
    //# Messages passed through the DDP MUST conform to the ordering rules defined in this
    //# section.
    //= rfc5041#5.3
    //= type=test
    //# MUST Deliver a DDP Message to the ULP at most once, * MUST Deliver DDP Messages to the
    //# ULP in the order they were sent by the Data Source.
    fn random_operations_both_ways(
        ops_a in prop::collection::vec(op(), 1..12),
        ops_b in prop::collection::vec(op(), 0..6),
        mulpdu_a in 64usize..3000,
        mulpdu_b in 64usize..3000,
        seed in any::<u64>(),
    ) {
        let mut p = Pair::with(seed, |c| { c.ord = 4; c.ird = 4; });
        p.a.qp.set_mulpdu(mulpdu_a);
        p.b.qp.set_mulpdu(mulpdu_b);
        let mut checks = Vec::new();
        for (dir, ops) in [(0, &ops_a), (1, &ops_b)] {
            let (src, dst) = if dir == 0 { (&mut p.a, &mut p.b) } else { (&mut p.b, &mut p.a) };
            for (i, o) in ops.iter().enumerate() {
                let seedb = (i * 7 + dir * 3) as u8;
                let id = i as u64;
                match *o {
                    Op::Send(len) => {
                        let s = src.region(len, 0x1000, Access::empty(), 0);
                        s.fill(&pattern(len, seedb));
                        let d = dst.region(len + 5, 0x2000, Access::LOCAL_WRITE, 0);
                        dst.qp.post_recv(id, d.sge(0, len + 5)).unwrap();
                        src.qp.post_send(id, s.sge(0, len), SendFlags::default()).unwrap();
                        checks.push((d, 0, pattern(len, seedb)));
                    }
                    Op::Write(len, off) => {
                        let s = src.region(len, 0, Access::empty(), 0);
                        s.fill(&pattern(len, seedb));
                        let d = dst.region(len + off, u64::MAX / 2, RW, 0);
                        src.qp.rdma_write(id, s.sge(0, len), d.stag, u64::MAX / 2 + off as u64).unwrap();
                        checks.push((d, off, pattern(len, seedb)));
                    }
                    Op::Read(len, off) => {
                        let r = dst.region(len + off, 77, Access::REMOTE_READ, 0);
                        r.fill(&[pattern(off, 0), pattern(len, seedb)].concat());
                        let sink = src.region(len, 1 << 40, RW, 0);
                        src.qp.rdma_read(id, sink.sge(0, len), r.stag, 77 + off as u64).unwrap();
                        checks.push((sink, 0, pattern(len, seedb)));
                    }
                }
            }
        }
        p.drive();
        prop_assert!(p.errors.is_empty(), "{:?}", p.errors);
        for (region, off, data) in &checks {
            prop_assert_eq!(&region.bytes()[*off..off + data.len()], &data[..]);
            region.assert_canaries();
        }
        for (node, ops) in [(&p.a, &ops_a), (&p.b, &ops_b)] {
            let sq: Vec<u64> = node.completions.iter()
                .filter(|c| c.opcode != CompletionOpcode::Recv).map(|c| c.wr_id).collect();
            prop_assert_eq!(sq, (0..ops.len() as u64).collect::<Vec<_>>());
            prop_assert!(node.completions.iter().all(|c| c.status == CompletionStatus::Success));
        }
        prop_assert_eq!(p.a.qp.state(), QpState::ReadyToSend);
    }
}

/// Posts, from A to B, a receive of `recv_len` octets (work request 7)
/// and a Send of `len` patterned octets (work request 8); returns B's
/// receive region and the data sent.
fn post_one_send(p: &mut Pair, len: usize, recv_len: usize) -> (common::Region, Vec<u8>) {
    let data = pattern(len, 3);
    let src = p.a.region(len, 0x1000, Access::empty(), 0);
    src.fill(&data);
    let dst = p.b.region(recv_len, 0x9000, Access::LOCAL_WRITE, 0);
    p.b.qp.post_recv(7, dst.sge(0, recv_len)).unwrap();
    p.a.qp
        .post_send(8, src.sge(0, len), SendFlags::default())
        .unwrap();
    (dst, data)
}
