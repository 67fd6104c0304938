//! Two full stacks, RDMAP over DDP over IFT, back to back through a byte
//! channel that splits and merges the stream arbitrarily: first the
//! Adaption Indications, then every operation. DDP and RDMAP are the same
//! engines that run over MPA; only the framing layer differs. One side may
//! place payload directly (IFT step API plus `place_direct`), the other
//! through the `UlpduSink` path.

mod common;

use std::time::Instant;

use common::{drive, op, pattern, Node, Op, Rng, Wire};
use iwarp_proto::framing::LlpErrorCode;
use iwarp_proto::framing::{
    Deframer, FeedError, Framer, FramingEvent, LlpError, Next, UlpduSink, WireBatch,
};
use iwarp_proto::ift::{IftConfig, IftReceiver, IftTransmitter, MarkerInterval, Negotiation, Role};
use iwarp_proto::memory::Access;
use iwarp_proto::rdmap::{CompletionStatus, Event, ProtocolError, QpState, SendFlags};
use proptest::prelude::*;

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

/// One end: negotiation first, then frames.
struct Stack {
    node: Node,
    negotiation: Negotiation,
    framing: Option<(IftTransmitter, IftReceiver)>,
    batch: WireBatch,
    direct: bool,
    sink_errors: usize,
}

impl Stack {
    fn new(stream: u64, role: Role, config: IftConfig, emss: usize, direct: bool) -> Self {
        let mut node = Node::new(stream, |c| {
            c.ord = 8;
            c.ird = 8;
        });
        // IFT header, header CRC and payload CRC; markers not counted.
        node.qp.set_mulpdu(emss.saturating_sub(6 + 4 + 4).max(128));
        Self {
            node,
            negotiation: Negotiation::new(role, config, Instant::now()),
            framing: None,
            batch: WireBatch::new(),
            direct,
            sink_errors: 0,
        }
    }

    /// The indication, then (once settled) every frame the queue pair has.
    fn pump_out_frames(&mut self, wire: &mut Vec<u8>) {
        if let Some(indication) = self.negotiation.poll_transmit() {
            wire.extend_from_slice(&indication);
        }
        if self.framing.is_none() {
            if let Some(p) = self.negotiation.params() {
                self.framing = Some((IftTransmitter::new(p.tx), IftReceiver::new(p.rx)));
            }
        }
        let Some((tx, _)) = self.framing.as_mut() else {
            return;
        };
        while let Some(t) = self.node.qp.poll_transmit() {
            let locked = t.lock().expect("source valid");
            let [header, payload] = locked.slices();
            self.batch.clear();
            tx.frame(header, &[payload], &mut self.batch)
                .expect("segment fits");
            self.batch.write_to(&[payload], wire);
        }
    }

    /// Receives a chunk of stream octets: what completes the peer's
    /// indication goes to the negotiation, the rest to the frame receiver.
    fn pump_in_stream(&mut self, chunk: &[u8]) {
        let used = self.negotiation.handle_input(chunk).expect("negotiation");
        let chunk = &chunk[used..];
        if chunk.is_empty() {
            return;
        }
        if self.framing.is_none() {
            let p = self.negotiation.params().expect("settled");
            self.framing = Some((IftTransmitter::new(p.tx), IftReceiver::new(p.rx)));
        }
        if self.direct {
            self.pump_in_direct(chunk);
            return;
        }
        let (_, rx) = self.framing.as_mut().unwrap();
        match rx.receive(chunk, &mut self.node.qp) {
            Ok(_) => {}
            Err(FeedError::Framing(e)) => self.node.qp.handle_llp_error(e.llp_code()),
            Err(FeedError::Sink(_)) => self.sink_errors += 1,
        }
    }

    /// The runtime's direct placement loop: framing octets to IFT, which
    /// hands over each verified DDP header; payload read straight into the
    /// target region, then shown to IFT for its CRC.
    fn pump_in_direct(&mut self, chunk: &[u8]) {
        let (_, rx) = self.framing.as_mut().unwrap();
        let qp = &mut self.node.qp;
        let mut pos = 0;
        loop {
            match rx.next() {
                Next::Failed => return,
                Next::Framing => match rx.push_framing(&chunk[pos..]) {
                    Ok((used, ev)) => {
                        pos += used;
                        let r = match ev {
                            Some(FramingEvent::Begin {
                                header_len,
                                payload_len,
                            }) => qp.ulpdu_begin(header_len + payload_len).and_then(|()| {
                                if header_len > 0 {
                                    qp.ulpdu_data(rx.header())
                                } else {
                                    Ok(())
                                }
                            }),
                            Some(FramingEvent::End) => qp.ulpdu_end(),
                            None if pos == chunk.len() => return,
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
                    if n == 0 {
                        return;
                    }
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
                    if let Err(e) = rx.push_payload(&chunk[pos..pos + k]) {
                        qp.handle_llp_error(e.llp_code());
                        return;
                    }
                    pos += k;
                }
            }
        }
    }
}

fn config(vtag: u16, bits: u8) -> IftConfig {
    IftConfig {
        header_crc: bits & 1 != 0,
        payload_crc: bits & 2 != 0,
        check_header_crc: bits & 4 != 0,
        send_markers: bits & 8 != 0,
        receive_markers: if bits & 16 != 0 {
            MarkerInterval::new(64 + u16::from(bits))
        } else {
            None
        },
        ..IftConfig::new(vtag)
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
    //= rfc5041#3
    //= type=test
    //# Any protocol that can serve as an LLP to DDP MUST meet the following requirements.
    fn every_operation_over_ift(
        ops in prop::collection::vec((op(), any::<bool>()), 1..10),
        bits_a in any::<u8>(),
        bits_b in any::<u8>(),
        vtags in any::<(u16, u16)>(),
        emss in 200usize..9000,
        direct_a in any::<bool>(),
        direct_b in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut a = Stack::new(1, Role::Initiator, config(vtags.0, bits_a), emss, direct_a);
        let mut b = Stack::new(2, Role::Responder, config(vtags.1, bits_b), emss, direct_b);
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
        prop_assert!(a.negotiation.params().is_some() && b.negotiation.params().is_some());
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

/// A header damaged in transit is caught by the header CRC before a single
/// payload octet reaches the target region, and reported as a CRC error in
/// a Terminate sent back over IFT.
#[test]
fn damaged_header_is_caught_before_placement() {
    for direct in [false, true] {
        let mut a = Stack::new(1, Role::Initiator, IftConfig::new(0x1111), 1460, false);
        let mut b = Stack::new(2, Role::Responder, IftConfig::new(0x2222), 1460, direct);
        let mut rng = Rng::new(7);
        drive(&mut a, &mut b, &mut rng);
        let target = b.node.region(100, 0x1000, RW, 0);
        let src = a.node.region(100, 0, Access::empty(), 0x55);
        a.node
            .qp
            .rdma_write(1, src.sge(0, 100), target.stag, 0x1000)
            .unwrap();
        let mut wire = Vec::new();
        a.pump_out(&mut wire);
        // The low octet of the tagged offset: the write would land 1 octet
        // further in, still in bounds, so only the CRC can tell.
        wire[6 + 13] ^= 0x01;
        b.pump_in(&wire);
        b.node.drain();
        assert!(
            target.bytes().iter().all(|&x| x == 0),
            "nothing placed (direct: {direct})"
        );
        target.assert_canaries();
        assert!(b.node.events.iter().any(|e| matches!(
            e,
            Event::LocalError(ProtocolError::Llp(LlpErrorCode::CrcError))
        )));
        // The Terminate travels back over IFT; A stops.
        let mut back = Vec::new();
        b.pump_out(&mut back);
        a.pump_in(&back);
        a.node.drain();
        assert!(a.node.events.iter().any(
            |e| matches!(e, Event::TerminateReceived(t) if (t.layer, t.etype, t.code) == (2, 0, 2))
        ));
        assert_eq!(a.node.qp.state(), QpState::Error);
    }
}
