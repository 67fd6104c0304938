//! MPA throughput: CRC32c, FPDU transmit and FPDU receive (placing as
//! octets arrive, or verifying each FPDU first), with and without markers,
//! for 64 B, 1 KiB, 16 KiB and 64 KiB ULPDUs.
//!
//! Run with `cargo bench -p iwarp-proto --bench mpa`.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use iwarp_proto::framing::{crc, Deframer, Framer, UlpduSink, WireBatch};
use iwarp_proto::mpa::{
    FpduReceiver, FpduTransmitter, FramingParams, Placement, MAX_FPDU_WIRE_LEN,
};

const SIZES: [(usize, &str); 4] = [
    (64, "64B"),
    (1024, "1KiB"),
    (16 * 1024, "16KiB"),
    (65535, "64KiB"),
];

fn params(markers: bool) -> FramingParams {
    FramingParams {
        crc: true,
        send_markers: markers,
        receive_markers: markers,
    }
}

fn bench_crc(c: &mut Criterion) {
    let mut group = c.benchmark_group("crc32c");
    // A run between markers and an FPDU of an Ethernet-sized MULPDU (EMSS
    // 1448) besides the rest.
    for (size, name) in SIZES.into_iter().chain([(508, "508B"), (1448, "1448B")]) {
        let data = vec![0xa5u8; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(name, |b| b.iter(|| crc::crc32c(black_box(&data))));
    }
    group.finish();
}

fn bench_transmit(c: &mut Criterion) {
    let mut group = c.benchmark_group("fpdu_transmit");
    for (kind, markers, crc) in [
        ("no_markers", false, true),
        ("markers", true, true),
        ("no_crc", false, false),
    ] {
        for (size, name) in SIZES {
            let header = [0x41u8; 18];
            let payload = vec![0x5au8; size - 18.min(size)];
            let mut tx = FpduTransmitter::new(FramingParams {
                crc,
                ..params(markers)
            });
            let mut batch = WireBatch::new();
            group.throughput(Throughput::Bytes(size as u64));
            let id = BenchmarkId::new(kind, name);
            group.bench_function(id, |b| {
                b.iter(|| {
                    batch.clear();
                    tx.frame(&header, &[&payload], &mut batch).unwrap();
                    // Walk the pieces as a vectored write would.
                    let slices = [&payload[..]];
                    let total: usize = batch.pieces(&slices).map(<[u8]>::len).sum();
                    black_box(total)
                })
            });
        }
    }
    group.finish();
}

/// Copies each ULPDU into one destination buffer, as placement would.
struct Place {
    dest: Vec<u8>,
    at: usize,
}

impl UlpduSink for Place {
    type Error = ();
    fn ulpdu_begin(&mut self, _len: usize) -> Result<(), ()> {
        self.at = 0;
        Ok(())
    }
    fn ulpdu_data(&mut self, bytes: &[u8]) -> Result<(), ()> {
        self.dest[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
        Ok(())
    }
    fn ulpdu_end(&mut self) -> Result<(), ()> {
        Ok(())
    }
}

fn bench_receive(c: &mut Criterion) {
    let mut group = c.benchmark_group("fpdu_receive");
    for placement in [Placement::Direct, Placement::Verified] {
        for markers in [false, true] {
            for (size, name) in SIZES {
                // About 1 MiB of stream, received in 64 KiB reads.
                let count = (1 << 20) / size + 1;
                let ulpdu = vec![0x5au8; size];
                let mut tx = FpduTransmitter::new(params(markers));
                let mut batch = WireBatch::new();
                let mut wire = Vec::new();
                for _ in 0..count {
                    batch.clear();
                    tx.frame(&[], &[&ulpdu], &mut batch).unwrap();
                    batch.write_to(&[&ulpdu], &mut wire);
                }
                let mut sink = Place {
                    dest: vec![0; size],
                    at: 0,
                };
                group.throughput(Throughput::Bytes((count * size) as u64));
                let kind = match (markers, placement) {
                    (false, Placement::Direct) => "no_markers",
                    (true, Placement::Direct) => "markers",
                    (false, _) => "no_markers_verified",
                    (true, _) => "markers_verified",
                };
                let mut staged = Vec::with_capacity(2 * MAX_FPDU_WIRE_LEN);
                group.bench_function(BenchmarkId::new(kind, name), |b| {
                    b.iter(|| {
                        let mut rx = FpduReceiver::new(params(markers)).with_placement(placement);
                        staged.clear();
                        // Verifying, the receiver takes whole FPDUs only: the
                        // rest stays staged for the next read, as in the runtime.
                        for chunk in wire.chunks(64 * 1024) {
                            if placement == Placement::Direct {
                                rx.receive(chunk, &mut sink).unwrap();
                                continue;
                            }
                            staged.extend_from_slice(chunk);
                            let used = rx.receive(&staged, &mut sink).unwrap();
                            staged.drain(..used);
                        }
                        black_box(rx.pdus_received())
                    })
                });
            }
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = bench_crc, bench_transmit, bench_receive
}
criterion_main!(benches);
