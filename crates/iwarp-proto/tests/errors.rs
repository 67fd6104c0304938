//! One test per error condition of RFC 5041 §7.1 / §7.2 and of the RDMAP
//! error table (RFC 5040 §7): a crafted segment goes in, the exact
//! Terminate octets come out, the local user sees the completions the
//! error calls for, and the canary octets around every region (and the
//! regions themselves) show that nothing was written.

mod common;

use common::{feed, Node, Region, Rng};
use iwarp_proto::memory::{Access, MemoryBuffer, RegionSpec, STag, StreamId};
use iwarp_proto::mpa::LlpErrorCode;
use iwarp_proto::rdmap::{CompletionStatus, Event, PostError, ProtocolError, QpState, SendFlags};

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
const RECV_ID: u64 = 100;

/// The receiving end: a posted 64-octet receive, a writable region, a
/// readable region, a region with no remote rights.
struct Victim {
    node: Node,
    recv: Region,
    writable: Region,
    readable: Region,
    private: Region,
    rng: Rng,
}

impl Victim {
    fn new() -> Self {
        Self::with(|_| {})
    }

    fn with(tweak: impl FnOnce(&mut iwarp_proto::rdmap::QueuePairConfig)) -> Self {
        let mut node = Node::new(1, tweak);
        let recv = node.region(64, 0x100, Access::LOCAL_WRITE, 0x11);
        let writable = node.region(256, 0x1000, RW, 0x22);
        let readable = node.region(256, 0x8000, Access::REMOTE_READ, 0x33);
        let private = node.region(256, 0x9000, Access::LOCAL_WRITE, 0x44);
        node.qp.post_recv(RECV_ID, recv.sge(0, 64)).unwrap();
        Self {
            node,
            recv,
            writable,
            readable,
            private,
            rng: Rng::new(7),
        }
    }

    fn regions(&self) -> [(&Region, u8); 4] {
        [
            (&self.recv, 0x11),
            (&self.writable, 0x22),
            (&self.readable, 0x33),
            (&self.private, 0x44),
        ]
    }

    fn feed(&mut self, seg: &[u8]) -> Result<(), ProtocolError> {
        feed(&mut self.node.qp, seg, &mut self.rng)
    }

    /// Feeds `segs`; the last must fail with `error`. Then the Terminate
    /// must be the next transmit, with `payload`; nothing was placed.
    fn expect(&mut self, segs: &[&[u8]], error: ProtocolError, payload: &[u8]) {
        let (last, init) = segs.split_last().unwrap();
        for s in init {
            self.feed(s).expect("earlier segments are fine");
        }
        assert_eq!(self.feed(last), Err(error));
        assert_eq!(self.node.qp.state(), QpState::Terminate);
        let t = self.node.qp.poll_transmit().expect("a Terminate");
        let mut expect = vec![0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0];
        expect.extend_from_slice(payload);
        assert_eq!(t.to_vec().unwrap(), expect, "Terminate octets");
        assert!(self.node.qp.poll_transmit().is_none());
        assert_eq!(self.node.qp.state(), QpState::Error);
        self.node.drain();
        assert!(self.node.events.contains(&Event::LocalError(error)));
        assert!(self
            .node
            .events
            .iter()
            .any(|e| matches!(e, Event::TerminateSent(_))));
        // Nothing further is placed or delivered.
        let w = tagged(0, true, self.writable.stag.0, 0x1000, &[0xff; 8]);
        assert_eq!(self.feed(&w), Ok(()));
        self.assert_untouched();
    }

    fn assert_untouched(&self) {
        for (r, fill) in self.regions() {
            r.assert_canaries();
            assert!(r.bytes().iter().all(|&b| b == fill), "region changed");
        }
    }

    fn recv_status(&self) -> CompletionStatus {
        let c = self
            .node
            .completions
            .iter()
            .find(|c| c.wr_id == RECV_ID)
            .expect("the receive completed");
        c.status
    }
}

fn tagged(op: u8, last: bool, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x81 | if last { 0x40 } else { 0 }, 0x40 | op];
    v.extend_from_slice(&stag.to_be_bytes());
    v.extend_from_slice(&to.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

#[allow(clippy::too_many_arguments)]
fn untagged(op: u8, last: bool, inv: u32, qn: u32, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x01 | if last { 0x40 } else { 0 }, 0x40 | op];
    for w in [inv, qn, msn, mo] {
        v.extend_from_slice(&w.to_be_bytes());
    }
    v.extend_from_slice(payload);
    v
}

fn send(msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    untagged(3, true, 0, 0, msn, mo, payload)
}

fn read_request(msn: u32, sink: u32, sink_to: u64, size: u32, src: u32, src_to: u64) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&sink.to_be_bytes());
    p.extend_from_slice(&sink_to.to_be_bytes());
    p.extend_from_slice(&size.to_be_bytes());
    p.extend_from_slice(&src.to_be_bytes());
    p.extend_from_slice(&src_to.to_be_bytes());
    untagged(1, true, 0, 1, msn, 0, &p)
}

/// Terminate payload, built independently of the crate: control word,
/// then (D) the segment length and header, then (R) the Read Request.
fn term(layer: u8, etype: u8, code: u8, seg: Option<&[u8]>, r: bool) -> Vec<u8> {
    let mut flags = 0;
    let mut tail = Vec::new();
    if let Some(seg) = seg {
        flags |= 0xc0;
        tail.extend_from_slice(&(seg.len() as u16).to_be_bytes());
        let hl = if seg[0] & 0x80 != 0 { 14 } else { 18 };
        tail.extend_from_slice(&seg[..hl]);
        if r {
            flags |= 0x20;
            tail.extend_from_slice(&seg[18..46]);
        }
    }
    let mut v = vec![layer << 4 | etype, code, flags, 0];
    v.extend_from_slice(&tail);
    v
}

fn ddp_tagged(code: u8) -> ProtocolError {
    ProtocolError::from_parts(1, 1, code).unwrap()
}

fn ddp_untagged(code: u8) -> ProtocolError {
    ProtocolError::from_parts(1, 2, code).unwrap()
}

fn rdmap(etype: u8, code: u8) -> ProtocolError {
    ProtocolError::from_parts(0, etype, code).unwrap()
}

// ---- RFC 5041 §7.1, tagged buffer model ------------------------------

#[test]
//= rfc5041#4.2
//= type=test
//# The STag MUST be valid for this DDP Stream.
//= rfc5041#7.1
//= type=test
//# For non-zero length Tagged DDP Segments, the segment MUST be validated before Placement by
//# verifying: 1.
//= rfc5041#7.1
//= type=test
//# If the DDP layer detects any of the receive errors listed in this section, it MUST cease
//# placing the remainder of the DDP Segment and report the error(s) to the ULP.
//= rfc5041#7.1
//= type=test
//# The DDP layer SHOULD include in the error report the DDP Header, the type of error, and the
//# length of the DDP segment, if available.
//= rfc5041#7.1
//= type=test
//# DDP MUST silently drop any subsequent incoming DDP Segments.
//= rfc5041#7.1
//= type=test
//# Since each of these errors represents a failure of the sending ULP or protocol, DDP SHOULD
//# enable the ULP to send one additional DDP Message before terminating the DDP Stream.
//= rfc5041#6.2.2
//= type=test
//# Thus any of the following fatal errors on a DDP Stream MUST cause DDP to indicate to the ULP
//# that a fatal error has occurred
//= rfc5041#8.3
//= type=test
//# If an STag is not valid on a DDP Stream, DDP MUST pass the invalid access attempt to the
//# ULP.
//= rfc5040#6
//= type=test
//# The Terminate Message MUST be the last message sent on the stream.
//= rfc5040#7
//= type=test
//# When an error is detected on the stream, the RDMAP layer MUST send a Terminate Message
//# naming it, when the LLP is still able to carry one, and complete outstanding work with an
//# error.
fn tagged_1_invalid_stag() {
    let mut v = Victim::new();
    let s = tagged(0, true, 0x7777_7700, 0x1000, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x00), &term(1, 1, 0x00, Some(&s), false));
    assert_eq!(v.recv_status(), CompletionStatus::FlushError);
}

#[test]
fn tagged_1_wrong_key_is_an_invalid_stag() {
    let mut v = Victim::new();
    let stag = STag::new(v.writable.stag.index(), v.writable.stag.key() ^ 1);
    let s = tagged(0, true, stag.0, 0x1000, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x00), &term(1, 1, 0x00, Some(&s), false));
}

#[test]
fn tagged_1_invalidated_stag() {
    let mut v = Victim::new();
    v.node.table.invalidate(v.writable.stag).unwrap();
    let s = tagged(0, true, v.writable.stag.0, 0x1000, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x00), &term(1, 1, 0x00, Some(&s), false));
}

#[test]
//= rfc5041#8.2
//= type=test
//# For an incoming DDP Segment of a Tagged DDP Message on a DDP Stream, if the PD ID of the DDP
//# Stream is not the same as the PD ID of the STag targeted by the Tagged DDP Message, then the
//# DDP Segment is not placed and the DDP layer MUST surface a local error to the ULP.
//= rfc5041#8.3.1
//= type=test
//# An RNIC MUST ensure that a specific DDP Stream in a specific Protection Domain cannot access
//# an STag in a different Protection Domain.
fn tagged_1_stag_of_another_protection_domain() {
    let mut v = Victim::new();
    let other = v.node.table.alloc_pd();
    let foreign = common::register(&v.node.table, other, 64, 0, RW, 0x55);
    let s = tagged(0, true, foreign.stag.0, 0, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x02), &term(1, 1, 0x02, Some(&s), false));
    foreign.assert_canaries();
    assert_eq!(foreign.bytes(), vec![0x55; 64]);
}

#[test]
//= rfc5041#8.2
//= type=test
//# In this case, for an incoming DDP Segment of a Tagged DDP Message on a DDP Stream, if the
//# DDP Stream ID of the DDP Stream is not the same as the DDP Stream ID of the STag targeted by
//# the Tagged DDP Message, then the DDP Segment is not placed and the DDP layer MUST surface a
//# local error to the ULP.
//= rfc5041#8.3.1
//= type=test
//# An RNIC MUST ensure that if an STag is limited in scope to a single DDP Stream, no other DDP
//# Stream can use the STag.
fn tagged_1_stag_bound_to_another_stream() {
    let mut v = Victim::new();
    let buf = MemoryBuffer::new(64);
    let mut spec = RegionSpec::whole(v.node.pd, buf.clone(), 0, RW);
    spec.stream = Some(StreamId(99));
    let stag = v.node.table.register(spec).unwrap();
    let s = tagged(0, true, stag.0, 0, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x02), &term(1, 1, 0x02, Some(&s), false));
    assert_eq!(buf.to_vec(), vec![0; 64]);
}

//= rfc5041#7.2
//= type=test
//# The following error numbers MUST be used when reporting errors to
//# the ULP.
#[test]
//= rfc5041#8.3.1
//= type=test
//# An RNIC MUST provide a mechanism for the ULP to establish and revoke read, write, or read
//# and write access to the ULP Buffer referenced by an STag.
fn tagged_2_no_remote_write_right() {
    // Tagged check 2 (a buffer that allows Placement) fails: DDP tagged
    // buffer error, invalid STag (the table has no access-rights code), as
    // Linux siw reports it. Not RDMAP's remote protection code.
    let mut v = Victim::new();
    let s = tagged(0, true, v.private.stag.0, 0x9000, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x00), &term(1, 1, 0x00, Some(&s), false));
}

#[test]
fn read_source_without_the_read_right_is_rdmaps_to_report() {
    // The Read Request is checked by RDMAP at the Data Source (RFC 5040
    // §5.2), not by DDP placement: there the access-rights code exists.
    read_source_error(|v| (v.private.stag.0, 0x9000, 8), 0x02);
}

#[test]
//= rfc5041#8.3.1
//= type=test
//# An RNIC MUST ensure that a Remote Peer is not able to access memory outside of the buffer
//# specified when the STag was enabled for remote access.
fn tagged_3_to_below_the_region() {
    let mut v = Victim::new();
    let s = tagged(0, true, v.writable.stag.0, 0xfff, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x01), &term(1, 1, 0x01, Some(&s), false));
}

#[test]
//= rfc5041#8.3.1
//= type=test
//# An RNIC MUST ensure that a Remote Peer is not able to access memory outside of the buffer
//# specified when the STag was enabled for remote access.
fn tagged_4_end_beyond_the_region() {
    let mut v = Victim::new();
    let s = tagged(0, true, v.writable.stag.0, 0x1000 + 250, &[1; 7]);
    v.expect(&[&s], ddp_tagged(0x01), &term(1, 1, 0x01, Some(&s), false));
}

#[test]
fn tagged_5_to_wrap() {
    let mut v = Victim::new();
    let top = v.node.region(64, u64::MAX - 63, RW, 0x66);
    let s = tagged(0, true, top.stag.0, u64::MAX - 7, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x03), &term(1, 1, 0x03, Some(&s), false));
    top.assert_canaries();
    assert_eq!(top.bytes(), vec![0x66; 64]);
}

#[test]
//= rfc5041#4.1
//= type=test
//# The value of DV MUST be the same for all the DDP Segments transmitted or received on a DDP
//# Stream.
fn tagged_invalid_ddp_version() {
    let mut v = Victim::new();
    let mut s = tagged(0, true, v.writable.stag.0, 0x1000, &[1; 16]);
    s[0] = (s[0] & !0x03) | 0x02;
    // No D copy: the layout of another DDP version is unknown.
    v.expect(&[&s], ddp_tagged(0x04), &term(1, 1, 0x04, None, false));
}

#[test]
//= rfc5040#5.5
//= type=test
//# The Data Sink MUST treat a Tagged segment that does not continue the Tagged message in
//# progress as an error.
fn tagged_write_continuity() {
    // A second segment of a Write must carry the same STag...
    let mut v = Victim::new();
    let first = tagged(0, false, v.writable.stag.0, 0x1000, &[]);
    let second = tagged(0, true, v.readable.stag.0, 0x1000, &[1; 4]);
    v.expect(
        &[&first, &second],
        ddp_tagged(0x00),
        &term(1, 1, 0x00, Some(&second), false),
    );
    // ...and the next TO.
    let mut v = Victim::new();
    let first = tagged(0, false, v.writable.stag.0, 0x1000, &[]);
    let second = tagged(0, true, v.writable.stag.0, 0x1008, &[1; 4]);
    v.expect(
        &[&first, &second],
        ddp_tagged(0x01),
        &term(1, 1, 0x01, Some(&second), false),
    );
}

#[test]
//= rfc5041#5.2
//= type=test
//# Only the DDP Control and RsvdULP Fields MUST be valid for a zero length Tagged DDP Segment.
//= rfc5041#5.2
//= type=test
//# The STag and TO fields MUST NOT be checked for a zero-length Tagged DDP Message.
fn zero_length_tagged_segments_are_not_checked() {
    let mut v = Victim::new();
    v.feed(&tagged(0, true, 0xdead_beef, u64::MAX, &[]))
        .unwrap();
    assert_eq!(v.node.qp.state(), QpState::ReadyToSend);
    assert!(v.node.qp.poll_transmit().is_none());
}

#[test]
//= rfc5041#7.1
//= type=test
//# If the DDP layer detects any of the receive errors listed in this section, it MUST cease
//# placing the remainder of the DDP Segment and report the error(s) to the ULP.
fn stag_invalidated_in_the_middle_of_a_segment_stops_placement() {
    use iwarp_proto::framing::UlpduSink;
    let mut v = Victim::new();
    let s = tagged(0, true, v.writable.stag.0, 0x1000, &[0xab; 100]);
    let qp = &mut v.node.qp;
    qp.ulpdu_begin(s.len()).unwrap();
    qp.ulpdu_data(&s[..14 + 40]).unwrap();
    v.node.table.invalidate(v.writable.stag).unwrap();
    qp.ulpdu_data(&s[14 + 40..]).unwrap();
    assert_eq!(qp.ulpdu_end(), Err(ddp_tagged(0x00)));
    let b = v.writable.bytes();
    assert!(b[..40].iter().all(|&x| x == 0xab), "placed before");
    assert!(b[40..].iter().all(|&x| x == 0x22), "nothing after");
    v.writable.assert_canaries();
    let t = v.node.qp.poll_transmit().unwrap().to_vec().unwrap();
    assert_eq!(t[18..], term(1, 1, 0x00, Some(&s), false)[..]);
}

// ---- RFC 5041 §7.1, untagged buffer model ----------------------------

#[test]
//= rfc5041#7.1
//= type=test
//# For non-zero length Untagged DDP Segments, the DDP Segment MUST be validated before
//# Placement by verifying: 1.
fn untagged_1_invalid_qn() {
    let mut v = Victim::new();
    let s = untagged(3, true, 0, 5, 1, 0, &[1; 8]);
    v.expect(
        &[&s],
        ddp_untagged(0x01),
        &term(1, 2, 0x01, Some(&s), false),
    );
    assert_eq!(v.recv_status(), CompletionStatus::FlushError);
}

#[test]
//= rfc5040#4.3
//= type=test
//# Each RDMAP message MUST use the DDP buffer model and the untagged queue number that its
//# opcode is assigned.
fn untagged_1_send_on_the_read_queue() {
    let mut v = Victim::new();
    let s = untagged(3, true, 0, 1, 1, 0, &[1; 8]);
    v.expect(
        &[&s],
        ddp_untagged(0x01),
        &term(1, 2, 0x01, Some(&s), false),
    );
}

#[test]
//= rfc5041#7.1
//= type=test
//# Implementers note: DDP implementations SHOULD consider lack of an associated buffer as a
//# system fault.
//= rfc5041#7.1
//= type=test
//# DDP implementations SHOULD NOT permit system faults to occur repeatedly or frequently.
fn untagged_2_no_buffer_posted() {
    // No RNR in iWARP: a Send with no posted receive is fatal.
    let mut v = Victim::new();
    v.feed(&send(1, 0, &[9; 4])).unwrap();
    let s = send(2, 0, &[1; 8]);
    v.recv.fill(&[0x11; 4]); // the first Send's octets, for assert_untouched
    v.expect(
        &[&s],
        ddp_untagged(0x02),
        &term(1, 2, 0x02, Some(&s), false),
    );
    assert_eq!(v.node.completions[0].status, CompletionStatus::Success);
}

#[test]
//= rfc5040#5.2
//= type=test
//# A Data Source that receives more RDMA Read Requests than its IRD allows MUST treat it as an
//# error.
fn untagged_2_ird_exceeded() {
    let mut v = Victim::with(|c| c.ird = 1);
    let r1 = read_request(1, 5, 0, 8, v.readable.stag.0, 0x8000);
    let r2 = read_request(2, 5, 0, 8, v.readable.stag.0, 0x8000);
    v.expect(
        &[&r1, &r2],
        ddp_untagged(0x02),
        &term(1, 2, 0x02, Some(&r2), true),
    );
}

#[test]
fn untagged_2_ird_zero_serves_no_read() {
    // IRD 0 (RFC 6581: this end accepted no Reads): the first Read Request
    // already finds no "buffer" on queue 1.
    let mut v = Victim::with(|c| c.ird = 0);
    let r = read_request(1, 5, 0, 8, v.readable.stag.0, 0x8000);
    v.expect(&[&r], ddp_untagged(0x02), &term(1, 2, 0x02, Some(&r), true));
}

#[test]
fn ord_zero_refuses_reads_at_the_post() {
    // ORD 0: the peer serves no Reads, so a Read must fail where it is
    // posted, not go out for the peer to refuse.
    let mut v = Victim::with(|c| c.ord = 0);
    let posted = v
        .node
        .qp
        .rdma_read(7, v.writable.sge(0, 16), STag(0x4242), 0);
    assert_eq!(posted, Err(PostError::ZeroOrd));
    assert!(v.node.qp.poll_transmit().is_none());
    assert_eq!(v.node.qp.state(), QpState::ReadyToSend);
    v.node.drain();
    assert!(v.node.completions.is_empty());
}

#[test]
fn untagged_3_mo_out_of_range() {
    let mut v = Victim::new();
    let s = send(1, 64, &[1; 8]);
    v.expect(
        &[&s],
        ddp_untagged(0x04),
        &term(1, 2, 0x04, Some(&s), false),
    );
}

#[test]
fn untagged_3_mo_not_continuing_the_message() {
    let mut v = Victim::new();
    let first = untagged(3, false, 0, 0, 1, 0, &[]);
    let second = send(1, 8, &[1; 8]);
    v.expect(
        &[&first, &second],
        ddp_untagged(0x04),
        &term(1, 2, 0x04, Some(&second), false),
    );
    assert_eq!(v.recv_status(), CompletionStatus::FatalError);
}

#[test]
fn untagged_4_message_too_long() {
    let mut v = Victim::new();
    let s = send(1, 0, &[1; 65]);
    v.expect(
        &[&s],
        ddp_untagged(0x05),
        &term(1, 2, 0x05, Some(&s), false),
    );
    assert_eq!(v.recv_status(), CompletionStatus::LocalLengthError);
}

#[test]
fn untagged_5_msn_out_of_range() {
    let mut v = Victim::new();
    let s = send(7, 0, &[1; 8]);
    v.expect(
        &[&s],
        ddp_untagged(0x03),
        &term(1, 2, 0x03, Some(&s), false),
    );
}

#[test]
fn untagged_5_msn_skipping_a_message() {
    let mut v = Victim::new();
    v.node.qp.post_recv(101, v.recv.sge(0, 64)).unwrap();
    let s = send(2, 0, &[1; 8]);
    v.expect(
        &[&s],
        ddp_untagged(0x03),
        &term(1, 2, 0x03, Some(&s), false),
    );
}

#[test]
fn untagged_5_read_request_msn() {
    let mut v = Victim::new();
    let r = read_request(2, 5, 0, 8, v.readable.stag.0, 0x8000);
    v.expect(&[&r], ddp_untagged(0x03), &term(1, 2, 0x03, Some(&r), true));
}

#[test]
//= rfc5041#4.1
//= type=test
//# The value of DV MUST be the same for all the DDP Segments transmitted or received on a DDP
//# Stream.
fn untagged_invalid_ddp_version() {
    let mut v = Victim::new();
    let mut s = send(1, 0, &[1; 8]);
    s[0] &= !0x03;
    v.expect(&[&s], ddp_untagged(0x06), &term(1, 2, 0x06, None, false));
}

#[test]
fn ulpdu_shorter_than_its_ddp_header() {
    let mut v = Victim::new();
    let s = send(1, 0, &[])[..10].to_vec();
    v.expect(
        &[&s],
        ProtocolError::from_parts(1, 0, 0).unwrap(),
        &term(1, 0, 0, None, false),
    );
}

// ---- RFC 5040 §7: RDMAP errors ----------------------------------------

#[test]
//= rfc5040#4.2
//= type=test
//# RDMA Version (RV): This field MUST be set to one to indicate the version of the
//# specification described in this document.
fn rdmap_invalid_version() {
    let mut v = Victim::new();
    let mut s = send(1, 0, &[1; 8]);
    s[1] = 0x83;
    v.expect(&[&s], rdmap(2, 0x05), &term(0, 2, 0x05, Some(&s), false));
}

#[test]
//= rfc5041#4.2
//= type=test
//# At the Data Sink, DDP MUST provide the RsvdULP field to the ULP when the DDP Message is
//# delivered.
//= rfc5040#4.3
//= type=test
//# Opcodes 1000b to 1111b are reserved; a reserved opcode MUST be treated as an error.
fn rdmap_unknown_opcode() {
    let mut v = Victim::new();
    let s = untagged(8, true, 0, 0, 1, 0, &[1; 8]);
    v.expect(&[&s], rdmap(2, 0x06), &term(0, 2, 0x06, Some(&s), false));
}

#[test]
//= rfc5040#4.3
//= type=test
//# Each RDMAP message MUST use the DDP buffer model and the untagged queue number that its
//# opcode is assigned.
fn rdmap_opcode_in_the_wrong_buffer_model() {
    let mut v = Victim::new();
    let s = untagged(0, true, 0, 0, 1, 0, &[1; 8]);
    v.expect(&[&s], rdmap(2, 0x06), &term(0, 2, 0x06, Some(&s), false));
}

#[test]
fn rdmap_read_response_without_a_read() {
    let mut v = Victim::new();
    let s = tagged(2, true, v.writable.stag.0, 0x1000, &[1; 8]);
    v.expect(&[&s], rdmap(2, 0x06), &term(0, 2, 0x06, Some(&s), false));
}

fn read_source_error(src: impl FnOnce(&Victim) -> (u32, u64, u32), code: u8) {
    let mut v = Victim::new();
    let (stag, to, size) = src(&v);
    let r = read_request(1, 0x5555, 0, size, stag, to);
    v.expect(&[&r], rdmap(1, code), &term(0, 1, code, Some(&r), true));
}

#[test]
fn rdmap_read_source_invalid_stag() {
    read_source_error(|_| (0x0bad_0000, 0, 8), 0x00);
}

#[test]
fn rdmap_read_source_base_or_bounds() {
    read_source_error(|v| (v.readable.stag.0, 0x8000 + 250, 8), 0x01);
    read_source_error(|v| (v.readable.stag.0, 0x7fff, 8), 0x01);
}

#[test]
//= rfc5040#7.2
//= type=test
//# The Data Source MUST validate the Data Source STag, Tagged Offset and length of an RDMA Read
//# Request, and access rights to read, before it responds; a failure is a Remote Protection
//# Error.
fn rdmap_read_source_access_rights() {
    read_source_error(|v| (v.writable.stag.0, 0x1000, 8), 0x02);
}

#[test]
fn rdmap_read_source_not_associated() {
    read_source_error(
        |v| {
            let other = v.node.table.alloc_pd();
            let r = common::register(&v.node.table, other, 64, 0, Access::REMOTE_READ, 0);
            (r.stag.0, 0, 8)
        },
        0x03,
    );
}

#[test]
fn rdmap_read_source_to_wrap() {
    read_source_error(
        |v| {
            let r = common::register(
                &v.node.table,
                v.node.pd,
                64,
                u64::MAX - 63,
                Access::REMOTE_READ,
                0,
            );
            (r.stag.0, u64::MAX - 3, 8)
        },
        0x04,
    );
}

#[test]
//= rfc5040#4.4
//= type=test
//# The RDMA Read Request Message MUST be sent as a single DDP Segment on untagged queue 1, with
//# an MO of zero, carrying the whole Read Request header.
fn rdmap_malformed_read_request() {
    let mut v = Victim::new();
    let mut r = read_request(1, 5, 0, 8, v.readable.stag.0, 0x8000);
    r.truncate(40);
    v.expect(&[&r], rdmap(2, 0xff), &term(0, 2, 0xff, Some(&r), false));
}

#[test]
fn rdmap_send_with_invalidate_of_an_unknown_stag() {
    let mut v = Victim::new();
    // Zero-length, so that no payload is (legitimately) placed.
    let s = untagged(4, true, 0x0bad_0000, 0, 1, 0, &[]);
    v.expect(&[&s], rdmap(2, 0x09), &term(0, 2, 0x09, Some(&s), false));
    assert_eq!(v.recv_status(), CompletionStatus::RemoteInvalidateError);
}

#[test]
//= rfc5040#5.4
//= type=test
//# On a Send with Invalidate, the Data Sink MUST invalidate the STag it names, after placing
//# the message and before delivering it; if the STag cannot be invalidated, that is an error.
fn rdmap_send_with_invalidate_of_another_domains_stag() {
    let mut v = Victim::new();
    let other = v.node.table.alloc_pd();
    let foreign = common::register(&v.node.table, other, 64, 0, RW, 0);
    let s = untagged(6, true, foreign.stag.0, 0, 1, 0, &[]);
    v.expect(&[&s], rdmap(1, 0x09), &term(0, 1, 0x09, Some(&s), false));
    assert!(v.node.table.is_valid(foreign.stag));
}

#[test]
//= rfc5041#4.2
//= type=test
//# At the Data Sink, the DDP MUST provide the STag field when the ULP Message is delivered.
//= rfc5040#5.2
//= type=test
//# An RDMA Read Response MUST match the RDMA Read Request outstanding at the head of the queue:
//# its sink STag, its Tagged Offset and no more than its size.
fn read_response_must_match_the_outstanding_read() {
    let mk = || {
        let mut v = Victim::new();
        v.node
            .qp
            .rdma_read(7, v.writable.sge(0, 16), STag(0x4242), 0)
            .unwrap();
        assert!(v.node.qp.poll_transmit().is_some());
        v
    };
    // Another STag than the read's sink.
    let mut v = mk();
    let s = tagged(2, true, v.recv.stag.0, 0x100, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x00), &term(1, 1, 0x00, Some(&s), false));
    // Another TO.
    let mut v = mk();
    let s = tagged(2, true, v.writable.stag.0, 0x1001, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x01), &term(1, 1, 0x01, Some(&s), false));
    // More than was asked for.
    let mut v = mk();
    let s = tagged(2, true, v.writable.stag.0, 0x1000, &[1; 17]);
    v.expect(&[&s], ddp_tagged(0x01), &term(1, 1, 0x01, Some(&s), false));
    let c = v.node.completions.iter().find(|c| c.wr_id == 7).unwrap();
    assert_eq!(c.status, CompletionStatus::FatalError);
}

#[test]
fn read_response_shorter_than_the_read() {
    // RFC 5041 §5.2: "the Data Sink is not required to verify that the
    // entire ULP Message has been received"; not required, so allowed.
    // A Read Response whose L flag comes before the requested size would
    // otherwise complete the Read as a success over octets never written,
    // so it is a base-or-bounds error, as Linux siw reports it
    // (siw_rresp_check_ntoh). What came before it stays placed; the
    // short segment is not; the Read completes with a fatal error and the
    // octets it did receive.
    for (segments, placed) in [
        (vec![(true, 0x1000, 12)], 0),
        (vec![(false, 0x1000, 8), (true, 0x1008, 4)], 8),
        (vec![(true, 0x1000, 0)], 0),
    ] {
        let mut v = Victim::new();
        v.node
            .qp
            .rdma_read(7, v.writable.sge(0, 16), STag(0x4242), 0)
            .unwrap();
        assert!(v.node.qp.poll_transmit().is_some());
        let segs: Vec<Vec<u8>> = segments
            .iter()
            .map(|&(last, to, len)| tagged(2, last, v.writable.stag.0, to, &vec![0xab; len]))
            .collect();
        // `expect` checks that nothing at all was placed; here the
        // segments before the short one legitimately were.
        let (last, init) = segs.split_last().unwrap();
        for s in init {
            v.feed(s).unwrap();
        }
        assert_eq!(v.feed(last), Err(ddp_tagged(0x01)), "{segments:?}");
        let t = v.node.qp.poll_transmit().unwrap().to_vec().unwrap();
        assert_eq!(t[18..], term(1, 1, 0x01, Some(last), false)[..]);
        v.node.drain();
        let c = v.node.completions.iter().find(|c| c.wr_id == 7).unwrap();
        assert_eq!(c.status, CompletionStatus::FatalError, "{segments:?}");
        assert_eq!(c.byte_len, placed, "{segments:?}");
        let b = v.writable.bytes();
        assert!(b[..placed as usize].iter().all(|&x| x == 0xab));
        assert!(b[placed as usize..].iter().all(|&x| x == 0x22));
        v.writable.assert_canaries();
    }
}

#[test]
fn read_sink_invalidated_before_the_response() {
    let mut v = Victim::new();
    v.node
        .qp
        .rdma_read(7, v.writable.sge(0, 16), STag(0x4242), 0)
        .unwrap();
    assert!(v.node.qp.poll_transmit().is_some());
    v.node.table.invalidate(v.writable.stag).unwrap();
    let s = tagged(2, true, v.writable.stag.0, 0x1000, &[1; 16]);
    v.expect(&[&s], ddp_tagged(0x00), &term(1, 1, 0x00, Some(&s), false));
    let c = v.node.completions.iter().find(|c| c.wr_id == 7).unwrap();
    assert_eq!(c.status, CompletionStatus::LocalProtectionError);
}

// ---- LLP errors -----------------------------------------------------------

#[test]
//= rfc5044#8
//= type=test
//# The following errors MUST be detected by MPA and the codes SHOULD be provided to DDP or
//# other Consumer
//= rfc5041#7
//= type=test
//# All LLP errors reported to DDP SHOULD be passed up to the ULP.
fn llp_errors_terminate_with_layer_2() {
    for code in [
        LlpErrorCode::CrcError,
        LlpErrorCode::MarkerMismatch,
        LlpErrorCode::InvalidStartupFrame,
        LlpErrorCode::LocalCatastrophic,
        LlpErrorCode::InsufficientIrd,
        LlpErrorCode::NoMatchingRtr,
    ] {
        let mut v = Victim::new();
        // A header error held for the ULPDU in progress is dropped: the
        // LLP's verdict is what is reported.
        use iwarp_proto::framing::UlpduSink;
        let bad = tagged(0, true, 0x0bad_0000, 0, &[1; 8]);
        v.node.qp.ulpdu_begin(bad.len()).unwrap();
        v.node.qp.ulpdu_data(&bad).unwrap();
        v.node.qp.handle_llp_error(code);
        let t = v.node.qp.poll_transmit().unwrap().to_vec().unwrap();
        assert_eq!(t[18..], [0x20, code.code(), 0, 0]);
        v.node.drain();
        assert_eq!(v.recv_status(), CompletionStatus::FlushError);
        assert!(v
            .node
            .events
            .contains(&Event::LocalError(ProtocolError::Llp(code))));
        v.assert_untouched();
    }
}

#[test]
//= rfc5041#6.2.1
//= type=test
//# If the DDP layer on the Local Peer receives a graceful teardown request from the LLP, any
//# further data received after the request is considered an error and MUST cause the DDP Stream
//# to be abortively torn down.
fn feeding_after_the_llp_closed_is_ignored() {
    // A caller that goes on feeding the ULPDU in progress after
    // `handle_llp_closed` (a misuse: the stream is gone) must not make the
    // engine panic, place or deliver anything: receiving stops with the
    // LLP. The work the ULPDU would have completed was flushed.
    use iwarp_proto::framing::UlpduSink;
    for read_response in [true, false] {
        for cut in [1, 14, 20] {
            let mut v = Victim::new();
            let ulpdu = if read_response {
                tagged(2, true, v.writable.stag.0, 0x1000, &[0xab; 16])
            } else {
                send(1, 0, &[0xcd; 8])
            };
            v.node
                .qp
                .rdma_read(7, v.writable.sge(0, 16), STag(0x4242), 0)
                .unwrap();
            assert!(v.node.qp.poll_transmit().is_some());
            let qp = &mut v.node.qp;
            qp.ulpdu_begin(ulpdu.len()).unwrap();
            qp.ulpdu_data(&ulpdu[..cut]).unwrap();
            qp.handle_llp_closed();
            assert!(!qp.is_receiving());
            let before: Vec<_> = v.regions().iter().map(|(r, _)| r.bytes()).collect();
            let qp = &mut v.node.qp;
            assert_eq!(qp.ulpdu_data(&ulpdu[cut..]), Ok(()));
            assert_eq!(qp.ulpdu_end(), Ok(()));
            assert_eq!(qp.place_direct(8, |d| d.len()), 0);
            assert!(qp.placement_target().is_none());
            v.node.drain();
            assert_eq!(v.node.qp.state(), QpState::Error);
            assert!(v.node.qp.poll_transmit().is_none());
            let statuses: Vec<_> = v.node.completions.iter().map(|c| c.status).collect();
            assert_eq!(statuses, [CompletionStatus::FlushError; 2], "{cut}");
            let after: Vec<_> = v.regions().iter().map(|(r, _)| r.bytes()).collect();
            assert_eq!(before, after, "placed after the close");
            for (r, _) in v.regions() {
                r.assert_canaries();
            }
        }
    }
}

/// An engine call, for the misuse property test.
#[derive(Debug, Clone)]
enum Call {
    Begin(usize),
    Data(Vec<u8>),
    End,
    PlaceDirect(usize),
    LlpClosed,
    LlpError,
    Close,
    PostRecv,
    PostRead,
    PollTransmit,
}

fn call() -> impl proptest::strategy::Strategy<Value = Call> {
    use proptest::prelude::*;
    prop_oneof![
        (0usize..80).prop_map(Call::Begin),
        proptest::collection::vec(any::<u8>(), 1..40).prop_map(Call::Data),
        Just(Call::End),
        (0usize..40).prop_map(Call::PlaceDirect),
        Just(Call::LlpClosed),
        Just(Call::LlpError),
        Just(Call::Close),
        Just(Call::PostRecv),
        Just(Call::PostRead),
        Just(Call::PollTransmit),
    ]
}

proptest::proptest! {
    /// The engine's entry points called in any order, ULPDUs cut anywhere
    /// and pieces fed outside any ULPDU or after the LLP closed: nothing
    /// panics, and once the LLP has closed nothing more is placed.
    #[test]
    fn engine_calls_in_any_order_never_panic(
        calls in proptest::collection::vec(call(), 0..60),
        header in 0usize..3,
    ) {
        use iwarp_proto::framing::UlpduSink;
        let mut v = Victim::new();
        // Real header octets, so that some calls go past the checks.
        let prefix = match header {
            0 => tagged(2, true, v.writable.stag.0, 0x1000, &[]),
            1 => send(1, 0, &[]),
            _ => tagged(0, true, v.writable.stag.0, 0x1000, &[]),
        };
        let mut closed: Option<Vec<Vec<u8>>> = None;
        for c in calls {
            let qp = &mut v.node.qp;
            let closes = matches!(c, Call::LlpClosed);
            match c {
                Call::Begin(n) => {
                    let _ = qp.ulpdu_begin(prefix.len() + n);
                    let _ = qp.ulpdu_data(&prefix);
                }
                Call::Data(d) => {
                    let _ = qp.ulpdu_data(&d);
                }
                Call::End => {
                    let _ = qp.ulpdu_end();
                }
                Call::PlaceDirect(n) => {
                    qp.place_direct(n, |d| d.len());
                }
                Call::LlpClosed => qp.handle_llp_closed(),
                Call::LlpError => qp.handle_llp_error(LlpErrorCode::CrcError),
                Call::Close => qp.close(),
                Call::PostRecv => {
                    let _ = qp.post_recv(1, v.recv.sge(0, 64));
                }
                Call::PostRead => {
                    let _ = qp.rdma_read(2, v.writable.sge(0, 64), STag(0x4242), 0);
                }
                Call::PollTransmit => while qp.poll_transmit().is_some() {},
            }
            v.node.drain();
            let now: Vec<_> = v.regions().iter().map(|(r, _)| r.bytes()).collect();
            if let Some(then) = &closed {
                proptest::prop_assert_eq!(then, &now, "placed after the LLP closed");
            } else if closes {
                closed = Some(now);
            }
        }
        for (r, _) in v.regions() {
            r.assert_canaries();
        }
    }
}

// ---- Terminate received ---------------------------------------------------

#[test]
//= rfc5040#6
//= type=test
//# A Terminate Message MUST NOT be sent in answer to a received Terminate Message; the stream
//# is then closed.
fn a_received_terminate_stops_the_stream_and_is_not_answered() {
    let mut v = Victim::new();
    let payload = term(1, 2, 0x02, Some(&send(1, 0, &[0; 4])), false);
    let t = untagged(7, true, 0, 2, 1, 0, &payload);
    v.feed(&t).unwrap();
    v.node.drain();
    assert_eq!(v.node.qp.state(), QpState::Error);
    assert!(v.node.qp.poll_transmit().is_none());
    let got = v.node.events.iter().find_map(|e| match e {
        Event::TerminateReceived(m) => Some(*m),
        _ => None,
    });
    let m = got.unwrap();
    assert_eq!(m.error(), Some(ddp_untagged(0x02)));
    assert_eq!(m.ddp.unwrap().segment_length, Some(22));
    assert_eq!(v.recv_status(), CompletionStatus::FlushError);
    v.feed(&send(1, 0, &[1; 4])).unwrap();
    v.assert_untouched();
}

#[test]
fn any_received_terminate_ends_the_stream_without_an_answer() {
    // RFC 5040 §4.8 lays a Terminate out as one last segment on queue 2,
    // MO 0, next MSN, at most a control word and the header copies. One
    // that breaks the layout still ends the stream: the peer has stopped,
    // and answering a Terminate with one helps no one (Linux siw drops
    // such a stream as well, siw_proc_terminate).
    let payload = term(1, 2, 0x02, Some(&send(1, 0, &[0; 4])), false);
    let long: Vec<u8> = payload.iter().copied().chain([0xab; 80]).collect();
    let cases: [(&str, Vec<u8>, Option<u8>); 7] = [
        (
            "L clear",
            untagged(7, false, 0, 2, 1, 0, &payload),
            Some(0x02),
        ),
        (
            "longer than the layout",
            untagged(7, true, 0, 2, 1, 0, &long),
            Some(0x02),
        ),
        (
            "MSN not the next",
            untagged(7, true, 0, 2, 5, 0, &payload),
            Some(0x02),
        ),
        (
            "MO not 0",
            untagged(7, true, 0, 2, 1, 8, &payload),
            Some(0x02),
        ),
        (
            "another queue",
            untagged(7, true, 0, 0, 1, 0, &payload),
            Some(0x02),
        ),
        ("no payload", untagged(7, true, 0, 2, 1, 0, &[]), None),
        (
            "cut in the control word",
            untagged(7, true, 0, 2, 1, 0, &payload[..3]),
            None,
        ),
    ];
    for (what, segment, code) in cases {
        let mut v = Victim::new();
        assert_eq!(v.feed(&segment), Ok(()), "{what}");
        v.node.drain();
        assert_eq!(v.node.qp.state(), QpState::Error, "{what}");
        assert!(v.node.qp.poll_transmit().is_none(), "{what}: answered");
        assert!(
            !v.node
                .events
                .iter()
                .any(|e| matches!(e, Event::TerminateSent(_) | Event::LocalError(_))),
            "{what}: {:?}",
            v.node.events
        );
        let m = v
            .node
            .events
            .iter()
            .find_map(|e| match e {
                Event::TerminateReceived(m) => Some(*m),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{what}: not reported"));
        if let Some(code) = code {
            assert_eq!(m.error(), Some(ddp_untagged(code)), "{what}");
        }
        assert_eq!(v.recv_status(), CompletionStatus::FlushError, "{what}");
        v.feed(&send(1, 0, &[1; 4])).unwrap();
        v.assert_untouched();
    }
}

proptest::proptest! {
    /// Whatever its queue, MSN, MO, L flag and payload, an untagged
    /// Terminate ends the stream unanswered, however it is cut into
    /// pieces.
    #[test]
    fn no_terminate_is_answered(
        last: bool,
        qn in proptest::prop_oneof![0u32..4, proptest::num::u32::ANY],
        msn: u32,
        mo: u32,
        payload in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
        seed: u64,
    ) {
        let mut v = Victim::new();
        v.rng = Rng::new(seed);
        let segment = untagged(7, last, 0, qn, msn, mo, &payload);
        proptest::prop_assert_eq!(v.feed(&segment), Ok(()));
        proptest::prop_assert_eq!(v.node.qp.state(), QpState::Error);
        proptest::prop_assert!(v.node.qp.poll_transmit().is_none());
        v.node.drain();
        proptest::prop_assert!(v
            .node
            .events
            .iter()
            .any(|e| matches!(e, Event::TerminateReceived(_))));
        v.assert_untouched();
    }
}

#[test]
fn a_refused_read_completes_with_the_peers_verdict() {
    let mut p = common::Pair::new(1);
    let sink = p.a.region(64, 0, RW, 0);
    let src = p.b.region(64, 0, Access::empty(), 0);
    // B's region has no REMOTE_READ: B refuses with RDMAP 1/0x02 and the
    // Read Request as its R copy; A's read completes with that verdict.
    p.a.qp.rdma_read(1, sink.sge(0, 64), src.stag, 0).unwrap();
    p.a.qp
        .post_send(2, sink.sge(0, 0), SendFlags::default())
        .unwrap();
    p.drive();
    let c = &p.a.completions;
    assert_eq!(c[0].wr_id, 1);
    assert_eq!(c[0].status, CompletionStatus::RemoteAccessError);
    assert_eq!(p.a.qp.state(), QpState::Error);
    assert_eq!(p.b.qp.state(), QpState::Error);
    sink.assert_canaries();
}
