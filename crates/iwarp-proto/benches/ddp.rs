//! Segment processing throughput: DDP/RDMAP transmit (cutting segments of
//! an RDMA Write or Send from registered memory) and receive (checking and
//! placing them), per segment and per octet.

#![allow(missing_docs)]

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use iwarp_proto::framing::UlpduSink;
use iwarp_proto::memory::copy::copy_payload;
use iwarp_proto::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, StreamId};
use iwarp_proto::rdmap::{QueuePair, QueuePairConfig, SendFlags, Sge};

const MSG: usize = 1 << 20;
const MULPDU: usize = 1454;

struct Side {
    table: Arc<MemoryTable>,
    qp: QueuePair,
    sge: Sge,
}

fn side(access: Access) -> Side {
    let table = Arc::new(MemoryTable::with_seed(1));
    let pd = table.alloc_pd();
    let buf = MemoryBuffer::new(MSG);
    let stag = table
        .register(RegionSpec::whole(pd, buf, 0x10_0000, access))
        .unwrap();
    let mut cfg = QueuePairConfig::new(pd, StreamId(1));
    cfg.mulpdu = MULPDU;
    cfg.recv_queue_depth = 1024;
    cfg.send_queue_depth = 1024;
    let qp = QueuePair::new(cfg, Arc::clone(&table));
    Side {
        table,
        qp,
        sge: Sge {
            stag,
            to: 0x10_0000,
            len: MSG as u32,
        },
    }
}

/// Segments of one 1 MiB message, as whole ULPDUs.
fn segments(write: bool) -> (Vec<Vec<u8>>, Side) {
    let mut tx = side(Access::empty());
    let rx = side(Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    if write {
        tx.qp.rdma_write(1, tx.sge, rx.sge.stag, rx.sge.to).unwrap();
    } else {
        tx.qp.post_send(1, tx.sge, SendFlags::default()).unwrap();
    }
    let mut out = Vec::new();
    while let Some(t) = tx.qp.poll_transmit() {
        out.push(t.to_vec().unwrap());
    }
    let _ = tx.table;
    (out, rx)
}

fn bench(c: &mut Criterion) {
    let nseg = MSG.div_ceil(MULPDU - 14) as u64;
    let mut g = c.benchmark_group("ddp");
    g.throughput(Throughput::Bytes(MSG as u64));

    g.bench_function("transmit_write_1MiB", |b| {
        let mut tx = side(Access::empty());
        b.iter(|| {
            tx.qp.rdma_write(1, tx.sge, tx.sge.stag, 0).unwrap();
            let mut n = 0usize;
            while let Some(t) = tx.qp.poll_transmit() {
                let l = t.lock().unwrap();
                let [h, p] = l.slices();
                n += h.len() + p.len();
            }
            while tx.qp.poll_completion().is_some() {}
            n
        })
    });

    let (write_segs, _) = segments(true);
    g.bench_function("receive_write_1MiB", |b| {
        let mut rx = side(Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        // Aim the pre-built segments at this side's region.
        let segs: Vec<Vec<u8>> = write_segs
            .iter()
            .map(|s| {
                let mut s = s.clone();
                s[2..6].copy_from_slice(&rx.sge.stag.to_be_bytes());
                s
            })
            .collect();
        b.iter(|| {
            for s in &segs {
                rx.qp.ulpdu_begin(s.len()).unwrap();
                rx.qp.ulpdu_data(s).unwrap();
                rx.qp.ulpdu_end().unwrap();
            }
        })
    });

    let (send_segs, _) = segments(false);
    g.bench_function("receive_send_1MiB", |b| {
        b.iter_batched(
            || {
                let mut rx = side(Access::LOCAL_WRITE);
                rx.qp.post_recv(1, rx.sge).unwrap();
                rx
            },
            |mut rx| {
                for s in &send_segs {
                    rx.qp.ulpdu_begin(s.len()).unwrap();
                    rx.qp.ulpdu_data(s).unwrap();
                    rx.qp.ulpdu_end().unwrap();
                }
                rx
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("ddp_per_segment");
    g.throughput(Throughput::Elements(nseg));
    g.bench_function("transmit_write_segments", |b| {
        let mut tx = side(Access::empty());
        b.iter(|| {
            tx.qp.rdma_write(1, tx.sge, tx.sge.stag, 0).unwrap();
            while let Some(t) = tx.qp.poll_transmit() {
                criterion::black_box(t.header()[0]);
            }
            while tx.qp.poll_completion().is_some() {}
        })
    });
    g.finish();
}

/// Placement's copy of 64 KiB at a skew that is slow for one large
/// `memcpy` on some CPUs (`memory::copy`), and at a harmless one.
fn bench_copy(c: &mut Criterion) {
    const LEN: usize = 64 * 1024;
    let src = vec![0x5au8; LEN + 4096];
    let mut dst = vec![0u8; LEN + 8192];
    let mut g = c.benchmark_group("copy_64KiB");
    g.throughput(Throughput::Bytes(LEN as u64));
    for skew in [0usize, 16] {
        let base = (src.as_ptr() as usize) % 4096;
        let off = (base + skew + 4096 - (dst.as_ptr() as usize) % 4096) % 4096;
        g.bench_function(format!("copy_from_slice/skew_{skew}"), |b| {
            b.iter(|| dst[off..off + LEN].copy_from_slice(criterion::black_box(&src[..LEN])))
        });
        g.bench_function(format!("copy_payload/skew_{skew}"), |b| {
            b.iter(|| copy_payload(&mut dst[off..off + LEN], criterion::black_box(&src[..LEN])))
        });
    }
    g.finish();
}

criterion_group!(benches, bench, bench_copy);
criterion_main!(benches);
