//! IFT throughput: frame transmit and frame receive with both CRCs on,
//! without markers and with them every 512 octets (`crcs_markers`), for
//! 64 B, 1 KiB, 16 KiB and 64 KiB payloads behind an 18-octet DDP header.
//!
//! Run with `cargo bench -p iwarp-proto --bench ift`.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use iwarp_proto::framing::{Deframer, Framer, MarkerInterval, UlpduSink, WireBatch};
use iwarp_proto::ift::{IftReceiver, IftTransmitter, TxParams};

const SIZES: [(usize, &str); 4] = [
    (64, "64B"),
    (1024, "1KiB"),
    (16 * 1024, "16KiB"),
    (65535, "64KiB"),
];

const PARAMS: TxParams = TxParams {
    header_crc: true,
    payload_crc: true,
    markers: None,
    vtag: 0x5a5a,
};

/// Both CRCs, markers every 512 octets both ways.
const MARKED: TxParams = TxParams {
    markers: Some(MarkerInterval::DEFAULT),
    ..PARAMS
};

/// The variants measured, by name.
const VARIANTS: [(&str, TxParams); 2] = [("crcs", PARAMS), ("crcs_markers", MARKED)];

const HEADER: [u8; 18] = [0x41; 18];

fn sizes_and_variants() -> impl Iterator<Item = ((usize, &'static str), (&'static str, TxParams))> {
    VARIANTS
        .into_iter()
        .flat_map(|v| SIZES.into_iter().map(move |s| (s, v)))
}

fn bench_transmit(c: &mut Criterion) {
    let mut group = c.benchmark_group("ift_transmit");
    for ((size, name), (variant, params)) in sizes_and_variants() {
        let payload = vec![0x5au8; size];
        let mut tx = IftTransmitter::new(params);
        let mut batch = WireBatch::new();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::new(variant, name), |b| {
            b.iter(|| {
                batch.clear();
                tx.frame(&HEADER, &[&payload], &mut batch).unwrap();
                // Walk the pieces as a vectored write would.
                let slices = [&payload[..]];
                let total: usize = batch.pieces(&slices).map(<[u8]>::len).sum();
                black_box(total)
            })
        });
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
    let mut group = c.benchmark_group("ift_receive");
    for ((size, name), (variant, params)) in sizes_and_variants() {
        // About 1 MiB of payload, received in 64 KiB reads.
        let count = (1 << 20) / size + 1;
        let payload = vec![0x5au8; size];
        let mut tx = IftTransmitter::new(params);
        let mut batch = WireBatch::new();
        let mut wire = Vec::new();
        for _ in 0..count {
            batch.clear();
            tx.frame(&HEADER, &[&payload], &mut batch).unwrap();
            batch.write_to(&[&payload], &mut wire);
        }
        let mut sink = Place {
            dest: vec![0; HEADER.len() + size],
            at: 0,
        };
        group.throughput(Throughput::Bytes((count * size) as u64));
        group.bench_function(BenchmarkId::new(variant, name), |b| {
            b.iter(|| {
                let mut rx = IftReceiver::new(params.checked_by_peer());
                for chunk in wire.chunks(64 * 1024) {
                    rx.receive(chunk, &mut sink).unwrap();
                }
                black_box(rx.pdus_received())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = bench_transmit, bench_receive
}
criterion_main!(benches);
