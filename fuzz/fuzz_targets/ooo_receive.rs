//! The out-of-order receiver on arbitrary segments, in two ways chosen by
//! the first octet:
//!
//! - a stream of arbitrary octets, cut into segments at arbitrary places
//!   and fed in arbitrary order, duplicated and overlapping, then sent
//!   again whole (as a sender would after a timeout): it must never panic,
//!   never write outside a region, never hold more than its window allows,
//!   and complete the same work and report the same error as the in-order
//!   receiver fed the same stream;
//! - a simulated run (`iwarp_proto::sim`) whose seed, framing, link and
//!   workload come from the input: the simulator's own comparison with the
//!   in-order receiver must find no difference.
#![no_main]

use std::sync::Arc;

use iwarp_proto::framing::{AnyDeframer, Deframer, FeedError, LlpError};
use iwarp_proto::ift::TxParams;
use iwarp_proto::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, StreamId};
use iwarp_proto::mpa::{FramingParams, Placement, MAX_FPDU_WIRE_LEN};
use iwarp_proto::ooo::{AnyFraming, IftFraming, MpaFraming, OooConfig, OooFraming, OooReceiver};
use iwarp_proto::rdmap::{QueuePair, QueuePairConfig, Sge};
use iwarp_proto::sim::{run, LinkModel, Scenario, SimFraming, Workload};
use libfuzzer_sys::fuzz_target;

const GUARD: usize = 32;
const CANARY: u8 = 0xee;
const ISN: u32 = 0xffff_f000;

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }
}

/// A receiving end: a writable region (with canaries around it), a
/// read-only one, receives posted into a third.
struct End {
    qp: QueuePair,
    buffers: Vec<(MemoryBuffer, usize)>,
}

impl End {
    fn new() -> Self {
        let table = Arc::new(MemoryTable::with_seed(3));
        let pd = table.alloc_pd();
        let mut buffers = Vec::new();
        let mut stags = Vec::new();
        for (len, access) in [
            (4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            (512, Access::REMOTE_READ),
            (8 * 1024, Access::LOCAL_WRITE),
        ] {
            let buffer = MemoryBuffer::from(vec![CANARY; GUARD + len + GUARD]);
            let spec = RegionSpec {
                pd,
                buffer: buffer.clone(),
                offset: GUARD,
                len,
                base_to: 0,
                access,
                stream: None,
                key: Some(0x42),
            };
            stags.push(table.register(spec).expect("register"));
            buffers.push((buffer, len));
        }
        let mut qp = QueuePair::new(QueuePairConfig::new(pd, StreamId(1)), table);
        for i in 0..8u64 {
            let sge = Sge {
                stag: stags[2],
                to: i * 1024,
                len: 1024,
            };
            qp.post_recv(i, sge).expect("post");
        }
        Self { qp, buffers }
    }

    fn outcome(&mut self) -> (Vec<String>, Vec<String>) {
        let mut c = Vec::new();
        let mut e = Vec::new();
        while let Some(x) = self.qp.poll_completion() {
            c.push(format!("{x:?}"));
        }
        while let Some(x) = self.qp.poll_event() {
            e.push(format!("{x:?}"));
        }
        (c, e)
    }

    fn canaries_intact(&self) -> bool {
        self.buffers.iter().all(|(b, len)| {
            let b = b.read();
            b[..GUARD]
                .iter()
                .chain(&b[GUARD + len..])
                .all(|&x| x == CANARY)
        })
    }
}

fn framing(choice: u8) -> AnyFraming {
    let mpa = |crc, markers| {
        AnyFraming::Mpa(MpaFraming {
            params: FramingParams {
                crc,
                send_markers: markers,
                receive_markers: markers,
            },
            placement: if choice & 8 == 0 {
                Placement::Verified
            } else {
                Placement::Direct
            },
        })
    };
    match choice % 5 {
        0 => mpa(true, true),
        1 => mpa(true, false),
        2 => mpa(false, true),
        n => AnyFraming::Ift(IftFraming {
            params: TxParams {
                header_crc: true,
                payload_crc: n == 3,
                markers: None,
                vtag: 0x77,
            }
            .checked_by_peer(),
            may_speculate: true,
        }),
    }
}

fn arbitrary_segments(mut input: Input<'_>) {
    let framing = framing(input.byte());
    let window = 256 + usize::from(input.u16());
    let count = usize::from(input.byte() % 32);
    let cuts: Vec<(usize, usize)> = (0..count)
        .map(|_| (usize::from(input.u16()), usize::from(input.u16() % 2048)))
        .collect();
    let stream = input.0;
    if stream.is_empty() {
        return;
    }
    let mut end = End::new();
    let config = OooConfig {
        window,
        budget: window + (64 << 10),
    };
    let mut rx = OooReceiver::new(framing, ISN, config);
    let mut error = None;
    let feed = |rx: &mut OooReceiver<AnyFraming>, end: &mut End, s: usize, e: usize| {
        let seq = ISN.wrapping_add(s as u32);
        let result = rx.segment(seq, &stream[s..e], &mut end.qp);
        assert!(
            rx.held_octets() <= window + MAX_FPDU_WIRE_LEN,
            "held {} octets",
            rx.held_octets()
        );
        result.err()
    };
    for &(at, len) in &cuts {
        let s = at % stream.len();
        let e = (s + len).min(stream.len());
        if let Some(err) = feed(&mut rx, &mut end, s, e) {
            error.get_or_insert(err);
        }
    }
    // The sender sends again from the first octet not acknowledged, as
    // TCP does, until everything is acknowledged or the receiver stops. One
    // pass over the stream is not enough: a small window drops the part of
    // a segment beyond it, which must come again.
    while error.is_none() && rx.in_order_offset() < stream.len() as u64 {
        let s = rx.in_order_offset() as usize;
        if let Some(err) = feed(&mut rx, &mut end, s, (s + 1000).min(stream.len())) {
            error.get_or_insert(err);
        }
        assert!(
            error.is_some() || rx.in_order_offset() > s as u64,
            "no progress at {s}: a segment at the in-order point was not taken"
        );
    }
    assert!(end.canaries_intact(), "a write outside a region");

    // The in-order receiver on the same stream.
    let mut twin = End::new();
    let mut d: AnyDeframer = framing.deframer_at(0);
    let twin_error = match d.receive(stream, &mut twin.qp) {
        Ok(_) => None,
        Err(e) => {
            if let FeedError::Framing(f) = &e {
                twin.qp.handle_llp_error(f.llp_code());
            }
            Some(e)
        }
    };
    assert_eq!(error, twin_error);
    assert_eq!(end.outcome(), twin.outcome());
}

fn simulated(mut input: Input<'_>) {
    let seed = u64::from(input.u16()) << 16 | u64::from(input.u16());
    let framing = SimFraming::ALL[usize::from(input.byte()) % SimFraming::ALL.len()];
    let link = LinkModel {
        loss: f64::from(input.byte() % 32) / 100.0,
        reorder: usize::from(input.byte() % 65),
        duplicate: f64::from(input.byte() % 32) / 100.0,
        mss: 64 + usize::from(input.u16() % 2000),
        resend_all: f64::from(input.byte() % 2) / 4.0,
    };
    let workload = Workload {
        ops: 1 + usize::from(input.byte() % 24),
        reads: usize::from(input.byte() % 4),
        max_len: usize::from(input.u16() % 8000),
        bad_op: input.byte() % 4 == 0,
        recv_ahead: 1 + usize::from(input.byte() % 16),
        ..Workload::SMALL
    };
    let window = 4096 + (usize::from(input.u16()) << 4);
    let s = Scenario {
        seed,
        framing,
        link,
        workload,
        window,
    };
    let report = run(&s, false);
    assert_eq!(report.mismatch, None, "{s:?}");
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    if input.byte() & 0x80 == 0 {
        arbitrary_segments(input);
    } else {
        simulated(input);
    }
});
