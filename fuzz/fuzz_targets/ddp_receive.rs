//! Arbitrary ULPDU sequences into a receiving queue pair with registered
//! regions, interleaved with local work requests, invalidations, direct
//! placement and LLP errors: it must never panic, never write outside a
//! region, never write a region that grants no write right, and never
//! place anything once the stream has failed.
#![no_main]

use std::sync::Arc;

use iwarp_proto::framing::LlpErrorCode;
use iwarp_proto::framing::UlpduSink;
use iwarp_proto::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, STag, StreamId};
use iwarp_proto::rdmap::{QpState, QueuePair, QueuePairConfig, SendFlags, Sge};
use libfuzzer_sys::fuzz_target;

const GUARD: usize = 32;
const CANARY: u8 = 0xee;

struct Region {
    stag: STag,
    buffer: MemoryBuffer,
    base_to: u64,
    len: usize,
    writable: bool,
    fill: u8,
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes([self.byte()?, self.byte()?]))
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Some(cfg_byte) = input.byte() else { return };
    // Seeded: an input replays with the same STags.
    let table = Arc::new(MemoryTable::with_seed(0));
    let pd = table.alloc_pd();
    let other_pd = table.alloc_pd();
    let accesses = [
        Access::LOCAL_WRITE,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        Access::REMOTE_READ,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        Access::empty(),
    ];
    let mut regions = Vec::new();
    for (i, access) in accesses.iter().enumerate() {
        let len = 64 + i * 40;
        let fill = 0x10 + i as u8;
        let mut v = vec![CANARY; GUARD + len + GUARD];
        v[GUARD..GUARD + len].fill(fill);
        let buffer = MemoryBuffer::from(v);
        let base_to = if i == 3 {
            u64::MAX - len as u64 + 1
        } else {
            0x1000 * i as u64
        };
        let spec = RegionSpec {
            pd: if i == 4 { other_pd } else { pd },
            buffer: buffer.clone(),
            offset: GUARD,
            len,
            base_to,
            access: *access,
            stream: None,
            key: Some(i as u8),
        };
        let stag = table.register(spec).unwrap();
        regions.push(Region {
            stag,
            buffer,
            base_to,
            len,
            writable: access.intersects(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            fill,
        });
    }
    let mut cfg = QueuePairConfig::new(pd, StreamId(1));
    cfg.ird = 1 + (cfg_byte & 3) as usize;
    cfg.ord = 1 + (cfg_byte >> 2 & 3) as usize;
    cfg.recv_queue_depth = 4;
    cfg.send_queue_depth = 8;
    let mut qp = QueuePair::new(cfg, Arc::clone(&table));
    qp.set_mulpdu(64 + (cfg_byte as usize) * 8);
    let sge = |r: &Region, at: u8, len: u8| Sge {
        stag: r.stag,
        to: r.base_to.wrapping_add(at as u64),
        len: len as u32,
    };
    let mut failed_snapshot: Option<Vec<Vec<u8>>> = None;

    while let Some(cmd) = input.byte() {
        match cmd % 8 {
            // A ULPDU, optionally aimed at a registered STag, in pieces.
            0 | 1 | 2 => {
                let Some(len) = input.u16() else { break };
                let len = (len as usize) % 1200;
                let aim = input.byte().unwrap_or(0);
                let split = input.byte().unwrap_or(1).max(1) as usize;
                let mut ulpdu = input.take(len).to_vec();
                if aim & 0x80 != 0 && ulpdu.len() >= 6 {
                    let r = &regions[aim as usize % regions.len()];
                    ulpdu[2..6].copy_from_slice(&r.stag.to_be_bytes());
                }
                if aim & 0x40 != 0 && !ulpdu.is_empty() {
                    // A well-formed control pair.
                    ulpdu[0] = (ulpdu[0] & 0xc0) | 0x01;
                    if ulpdu.len() > 1 {
                        ulpdu[1] = 0x40 | (ulpdu[1] & 0x07);
                    }
                }
                let _ = qp.ulpdu_begin(ulpdu.len());
                let mut rest = &ulpdu[..];
                while !rest.is_empty() {
                    let n = split.min(rest.len());
                    if cmd % 8 == 2 && qp.placement_target().is_some() {
                        let k = qp.place_direct(n, |dst| {
                            dst.copy_from_slice(&rest[..dst.len()]);
                            dst.len()
                        });
                        if k > 0 {
                            rest = &rest[k..];
                            continue;
                        }
                    }
                    let _ = qp.ulpdu_data(&rest[..n]);
                    rest = &rest[n..];
                }
                if aim & 0x20 == 0 {
                    let _ = qp.ulpdu_end();
                } else {
                    qp.handle_llp_error(LlpErrorCode::CrcError);
                }
            }
            3 => {
                let r = &regions[input.byte().unwrap_or(0) as usize % regions.len()];
                let at = input.byte().unwrap_or(0);
                let len = input.byte().unwrap_or(0);
                let _ = qp.post_recv(u64::from(cmd), sge(r, at, len));
            }
            4 => {
                let r = &regions[input.byte().unwrap_or(0) as usize % regions.len()];
                let at = input.byte().unwrap_or(0);
                let len = input.byte().unwrap_or(0);
                let stag = STag(u32::from(input.u16().unwrap_or(0)) << 8);
                let _ = match at % 3 {
                    0 => qp.post_send(1, sge(r, at, len), SendFlags::default()),
                    1 => qp.rdma_write(2, sge(r, at, len), stag, 0),
                    _ => qp.rdma_read(3, sge(r, at, len), stag, 0),
                };
            }
            5 => {
                while let Some(t) = qp.poll_transmit() {
                    assert!(t.len() <= qp.mulpdu(), "segment above MULPDU");
                    match t.lock() {
                        Ok(l) => {
                            let [h, p] = l.slices();
                            assert_eq!(h.len() + p.len(), t.len());
                        }
                        Err(_) => qp.abort_transmit(),
                    }
                }
            }
            6 => {
                let r = &regions[input.byte().unwrap_or(0) as usize % regions.len()];
                let _ = table.invalidate(r.stag);
            }
            _ => {
                while qp.poll_completion().is_some() {}
                while qp.poll_event().is_some() {}
            }
        }
        // Once failed, nothing more is placed.
        if matches!(qp.state(), QpState::Terminate | QpState::Error) {
            let now: Vec<Vec<u8>> = regions.iter().map(|r| r.buffer.to_vec()).collect();
            if let Some(before) = &failed_snapshot {
                assert!(before == &now, "placement after the stream failed");
            } else {
                failed_snapshot = Some(now);
            }
        }
    }
    for r in &regions {
        let b = r.buffer.read();
        assert!(
            b[..GUARD].iter().all(|&x| x == CANARY),
            "wrote before a region"
        );
        assert!(
            b[GUARD + r.len..].iter().all(|&x| x == CANARY),
            "wrote after a region"
        );
        if !r.writable {
            assert!(
                b[GUARD..GUARD + r.len].iter().all(|&x| x == r.fill),
                "wrote a read-only region"
            );
        }
    }
});
