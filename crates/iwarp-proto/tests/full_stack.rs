//! Two full stacks, RDMAP over DDP over MPA, back to back through a byte
//! channel that splits and merges the stream arbitrarily. Each side
//! receives in one of three ways: through the `UlpduSink` path as octets
//! arrive, placing payload directly (MPA step API plus `place_direct`),
//! or verifying each FPDU whole before anything is placed (RFC 5044 §6).

mod common;

use common::{drive, op, pattern, Node, Op, Rng, Wire};
use iwarp_proto::framing::{
    Deframer, FeedError, Framer, FramingEvent, LlpError, LlpErrorCode, Next, WireBatch,
};
use iwarp_proto::memory::Access;
use iwarp_proto::mpa::mulpdu::mulpdu;
use iwarp_proto::mpa::{FpduReceiver, FpduTransmitter, FramingParams, Placement};
use iwarp_proto::rdmap::{CompletionOpcode, CompletionStatus, Event, QpState, SendFlags};
use proptest::prelude::*;

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

/// How a stack receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rx {
    /// Octets through the `UlpduSink` path as they arrive.
    Sink,
    /// Payload placed straight from the "socket" with `place_direct`.
    Direct,
    /// Each FPDU staged whole and verified before anything is placed.
    Verified,
}

const RX: [Rx; 3] = [Rx::Sink, Rx::Direct, Rx::Verified];

struct Stack {
    node: Node,
    tx: FpduTransmitter,
    rx: FpduReceiver,
    batch: WireBatch,
    mode: Rx,
    /// What a verifying receiver left: an incomplete FPDU.
    staged: Vec<u8>,
    sink_errors: usize,
}

impl Stack {
    fn new(stream: u64, params: FramingParams, emss: usize, mode: Rx) -> Self {
        let mut node = Node::new(stream, |c| {
            c.ord = 8;
            c.ird = 8;
        });
        node.qp.set_mulpdu(mulpdu(emss, params.send_markers));
        let placement = if mode == Rx::Verified {
            Placement::Verified
        } else {
            Placement::Direct
        };
        Self {
            node,
            tx: FpduTransmitter::new(params),
            rx: FpduReceiver::new(params).with_placement(placement),
            batch: WireBatch::new(),
            mode,
            staged: Vec::new(),
            sink_errors: 0,
        }
    }

    /// Frames everything the queue pair has to send onto `wire`.
    fn pump_out_frames(&mut self, wire: &mut Vec<u8>) {
        while let Some(t) = self.node.qp.poll_transmit() {
            let locked = t.lock().expect("source valid");
            let [header, payload] = locked.slices();
            self.batch.clear();
            self.tx
                .frame(header, &[payload], &mut self.batch)
                .expect("ULPDU fits");
            self.batch.write_to(&[payload], wire);
        }
    }

    /// Receives a chunk of stream octets.
    fn pump_in_stream(&mut self, chunk: &[u8]) {
        if self.mode == Rx::Direct {
            self.pump_in_direct(chunk);
            return;
        }
        // A verifying receiver takes whole FPDUs only: what it leaves is
        // presented again with the next chunk.
        self.staged.extend_from_slice(chunk);
        match self.rx.receive(&self.staged, &mut self.node.qp) {
            Ok(used) => {
                self.staged.drain(..used);
            }
            Err(FeedError::Framing(e)) => {
                self.staged.clear();
                self.node.qp.handle_llp_error(e.llp_code())
            }
            Err(FeedError::Sink(_)) => {
                self.staged.clear();
                self.sink_errors += 1
            }
        }
        if self.mode == Rx::Sink {
            assert!(self.staged.is_empty(), "a direct-mode receiver takes all");
        }
    }

    /// The runtime's direct placement loop: framing octets to MPA, payload
    /// read straight into the target region, then shown to MPA for its CRC.
    fn pump_in_direct(&mut self, chunk: &[u8]) {
        use iwarp_proto::framing::UlpduSink;
        let qp = &mut self.node.qp;
        let mut pos = 0;
        while pos < chunk.len() {
            match self.rx.next() {
                Next::Failed => return,
                Next::Framing => match self.rx.push_framing(&chunk[pos..]) {
                    Ok((used, ev)) => {
                        pos += used;
                        let r = match ev {
                            Some(FramingEvent::Begin { payload_len: n, .. }) => qp.ulpdu_begin(n),
                            Some(FramingEvent::End) => qp.ulpdu_end(),
                            None => Ok(()),
                        };
                        if r.is_err() {
                            self.sink_errors += 1;
                        }
                    }
                    Err(e) => {
                        qp.handle_llp_error(e.llp_code());
                        return;
                    }
                },
                Next::Payload { run, .. } => {
                    let n = run.min(chunk.len() - pos);
                    let src = &chunk[pos..pos + n];
                    let k = if qp.placement_target().is_some() {
                        qp.place_direct(n, |dst| {
                            dst.copy_from_slice(&src[..dst.len()]);
                            dst.len()
                        })
                    } else {
                        0
                    };
                    let k = if k == 0 {
                        let _ = qp.ulpdu_data(src);
                        n
                    } else {
                        k
                    };
                    // CRC over the received octets, not the region, which
                    // the user may be writing concurrently (as siw does).
                    if let Err(e) = self.rx.push_payload(&chunk[pos..pos + k]) {
                        qp.handle_llp_error(e.llp_code());
                        return;
                    }
                    pos += k;
                }
            }
        }
    }
}

impl Wire for Stack {
    fn pump_out(&mut self, wire: &mut Vec<u8>) {
        self.pump_out_frames(wire);
    }

    fn pump_in(&mut self, chunk: &[u8]) {
        self.pump_in_stream(chunk);
    }

    fn node(&mut self) -> &mut Node {
        &mut self.node
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::proptest_cases(32), ..ProptestConfig::default() })]

    #[test]
    //= rfc5044#7.1
    //= type=test
    //# A DDP endpoint MUST be "bound" to the MPA connection at entry to this phase.
    //= draft-ietf-rddp-mpa-01#5.2
    //= type=test
    //# The process MUST be invisible to the ULP.
    //= rfc5041#3
    //= type=test
    //# Any protocol that can serve as an LLP to DDP MUST meet the following requirements.
    //= rfc5041#8.3.1
    //= type=test
    //# The RNIC MUST implement the DDP wire Protocol and perform the security semantics
    //# described below.
    fn every_operation_over_mpa(
        ops in prop::collection::vec((op(), any::<bool>()), 1..10),
        crc in any::<bool>(),
        markers_ab in any::<bool>(),
        markers_ba in any::<bool>(),
        emss in 200usize..9000,
        rx_a in 0usize..3,
        rx_b in 0usize..3,
        seed in any::<u64>(),
    ) {
        let pa = FramingParams { crc, send_markers: markers_ab, receive_markers: markers_ba };
        let mut a = Stack::new(1, pa, emss, RX[rx_a]);
        let mut b = Stack::new(2, pa.mirrored(), emss, RX[rx_b]);
        let mut rng = Rng::new(seed);
        let mut checks = Vec::new();
        for (i, (o, reverse)) in ops.iter().enumerate() {
            let (src, dst) = if *reverse { (&mut b, &mut a) } else { (&mut a, &mut b) };
            let id = i as u64;
            let data = pattern(o.len(), i as u8);
            let len = data.len();
            match o {
                Op::Send(_) => {
                    let s = src.node.region(len, 0, Access::empty(), 0);
                    s.fill(&data);
                    let d = dst.node.region(len, 0x5000, Access::LOCAL_WRITE, 0);
                    dst.node.qp.post_recv(id, d.sge(0, len)).unwrap();
                    src.node.qp.post_send(id, s.sge(0, len), SendFlags::default()).unwrap();
                    checks.push((d, data));
                }
                Op::Write(_) => {
                    let s = src.node.region(len, 0, Access::empty(), 0);
                    s.fill(&data);
                    let d = dst.node.region(len, 0x7fff_0000_0000, RW, 0);
                    src.node.qp.rdma_write(id, s.sge(0, len), d.stag, d.base_to).unwrap();
                    checks.push((d, data));
                }
                Op::Read(_) => {
                    let r = dst.node.region(len, 3, Access::REMOTE_READ, 0);
                    r.fill(&data);
                    let sink = src.node.region(len, 0, RW, 0);
                    src.node.qp.rdma_read(id, sink.sge(0, len), r.stag, 3).unwrap();
                    checks.push((sink, data));
                }
            }
        }
        drive(&mut a, &mut b, &mut rng);
        prop_assert_eq!(a.sink_errors + b.sink_errors, 0);
        for (region, data) in &checks {
            prop_assert!(region.bytes() == *data);
            region.assert_canaries();
        }
        let n = a.node.completions.len() + b.node.completions.len();
        let sends = ops.iter().filter(|(o, _)| matches!(o, Op::Send(_))).count();
        prop_assert_eq!(n, ops.len() + sends);
        for c in a.node.completions.iter().chain(&b.node.completions) {
            prop_assert_eq!(c.status, CompletionStatus::Success);
        }
        prop_assert_eq!(a.node.qp.state(), QpState::ReadyToSend);
        prop_assert_eq!(b.node.qp.state(), QpState::ReadyToSend);
    }
}

/// A header damaged in transit reports as the CRC error it is, not as the
/// invalid STag it now looks like: DDP held its error until MPA's verdict.
#[test]
fn damaged_header_reports_crc_error_not_invalid_stag() {
    let params = FramingParams {
        crc: true,
        send_markers: false,
        receive_markers: false,
    };
    let mut a = Stack::new(1, params, 1460, Rx::Sink);
    let mut b = Stack::new(2, params.mirrored(), 1460, Rx::Sink);
    let target = b.node.region(100, 0x1000, RW, 0);
    let src = a.node.region(100, 0, Access::empty(), 0x55);
    let sink = a.node.region(8, 0, Access::LOCAL_WRITE, 0);
    a.node.qp.post_recv(9, sink.sge(0, 8)).unwrap();
    a.node
        .qp
        .rdma_write(1, src.sge(0, 100), target.stag, 0x1000)
        .unwrap();
    let mut wire = Vec::new();
    a.pump_out(&mut wire);
    // Flip a bit of the STag (octets 2..4 are MPA length and DDP control).
    wire[4] ^= 0x01;
    b.pump_in(&wire);
    b.node.drain();
    assert!(matches!(
        b.node
            .events
            .iter()
            .find(|e| matches!(e, Event::LocalError(_))),
        Some(Event::LocalError(iwarp_proto::rdmap::ProtocolError::Llp(
            LlpErrorCode::CrcError
        )))
    ));
    // The Terminate: LLP layer 2, type 0, code 2, no header copies.
    let mut back = Vec::new();
    b.pump_out(&mut back);
    let mut c = iwarp_proto::framing::CollectUlpdus::new();
    FpduReceiver::new(params).receive(&back, &mut c).unwrap();
    assert_eq!(
        c.complete,
        vec![vec![
            0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x20, 0x02, 0x00, 0x00
        ]]
    );
    // A receives it: the stream stops, A's receive is flushed.
    a.pump_in(&back);
    a.node.drain();
    assert!(a.node.events.iter().any(
        |e| matches!(e, Event::TerminateReceived(t) if (t.layer, t.etype, t.code) == (2, 0, 2))
    ));
    assert_eq!(a.node.qp.state(), QpState::Error);
    let recv = a
        .node
        .completions
        .iter()
        .find(|c| c.opcode == CompletionOpcode::Recv)
        .unwrap();
    assert_eq!(recv.status, CompletionStatus::FlushError);
    target.assert_canaries();
}

/// RFC 5044 §6: "An MPA receiver MUST first verify the FPDU before passing
/// the ULPDU to DDP." A payload bit flipped in transit: a verifying
/// receiver places nothing of the Write, in whatever chunks it arrives;
/// one that places as octets arrive (the documented deviation) has
/// placed them when the CRC fails, and delivers nothing either way.
//= rfc5044#6
//= type=test
//# An MPA receiver MUST first verify the FPDU before passing the ULPDU
//# to DDP.
#[test]
fn damaged_payload_is_placed_only_without_verification() {
    let params = FramingParams {
        crc: true,
        send_markers: true,
        receive_markers: true,
    };
    for mode in RX {
        for chunk in [1, 7, 512, 100_000] {
            let mut a = Stack::new(1, params, 1460, Rx::Sink);
            let mut b = Stack::new(2, params.mirrored(), 1460, mode);
            let target = b.node.region(1000, 0x1000, RW, 0);
            let src = a.node.region(1000, 0, Access::empty(), 0x55);
            a.node
                .qp
                .rdma_write(1, src.sge(0, 1000), target.stag, 0x1000)
                .unwrap();
            let mut wire = Vec::new();
            a.pump_out(&mut wire);
            // A payload octet of the only FPDU, past its headers.
            wire[600] ^= 0x10;
            for piece in wire.chunks(chunk) {
                b.pump_in(piece);
            }
            b.node.drain();
            assert!(b.node.events.contains(&Event::LocalError(
                iwarp_proto::rdmap::ProtocolError::Llp(LlpErrorCode::CrcError)
            )));
            assert_eq!(b.node.qp.one_sided_counters().writes_received, 0);
            let placed = target.bytes().iter().filter(|&&x| x != 0).count();
            if mode == Rx::Verified {
                assert_eq!(placed, 0, "chunks of {chunk}");
            } else {
                assert!(placed > 900, "{mode:?}, chunks of {chunk}: {placed}");
            }
            target.assert_canaries();
        }
    }
}
