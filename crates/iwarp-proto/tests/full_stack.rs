//! Two full stacks, RDMAP over DDP over MPA, back to back through a byte
//! channel that splits and merges the stream arbitrarily. One side may
//! place payload directly (MPA step API plus `place_direct`), the other
//! through the `UlpduSink` path.

mod common;

use common::{drive, op, pattern, Node, Op, Rng, Wire};
use iwarp_proto::framing::{
    Deframer, FeedError, Framer, FramingEvent, LlpError, LlpErrorCode, Next, WireBatch,
};
use iwarp_proto::memory::Access;
use iwarp_proto::mpa::mulpdu::mulpdu;
use iwarp_proto::mpa::{FpduReceiver, FpduTransmitter, FramingParams};
use iwarp_proto::rdmap::{CompletionOpcode, CompletionStatus, Event, QpState, SendFlags};
use proptest::prelude::*;

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

struct Stack {
    node: Node,
    tx: FpduTransmitter,
    rx: FpduReceiver,
    batch: WireBatch,
    direct: bool,
    sink_errors: usize,
}

impl Stack {
    fn new(stream: u64, params: FramingParams, emss: usize, direct: bool) -> Self {
        let mut node = Node::new(stream, |c| {
            c.ord = 8;
            c.ird = 8;
        });
        node.qp.set_mulpdu(mulpdu(emss, params.send_markers));
        Self {
            node,
            tx: FpduTransmitter::new(params),
            rx: FpduReceiver::new(params),
            batch: WireBatch::new(),
            direct,
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
        if self.direct {
            self.pump_in_direct(chunk);
            return;
        }
        match self.rx.receive(chunk, &mut self.node.qp) {
            Ok(_) => {}
            Err(FeedError::Framing(e)) => self.node.qp.handle_llp_error(e.llp_code()),
            Err(FeedError::Sink(_)) => self.sink_errors += 1,
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
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn every_operation_over_mpa(
        ops in prop::collection::vec((op(), any::<bool>()), 1..10),
        crc in any::<bool>(),
        markers_ab in any::<bool>(),
        markers_ba in any::<bool>(),
        emss in 200usize..9000,
        direct_a in any::<bool>(),
        direct_b in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let pa = FramingParams { crc, send_markers: markers_ab, receive_markers: markers_ba };
        let mut a = Stack::new(1, pa, emss, direct_a);
        let mut b = Stack::new(2, pa.mirrored(), emss, direct_b);
        let mut rng = Rng(seed);
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
    let mut a = Stack::new(1, params, 1460, false);
    let mut b = Stack::new(2, params.mirrored(), 1460, false);
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
