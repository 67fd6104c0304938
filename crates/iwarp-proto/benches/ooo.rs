//! The out-of-order receiver on traces from the network simulator, against
//! the in-order receiver on the same stream.
//!
//! First a table (the README's): for each link model, the share of what
//! arrived ahead of a hole that was placed on arrival, the most octets the
//! out-of-order receiver held against what an in-order reassembly buffer
//! held for the same arrivals, and the placement throughput of the
//! out-of-order receiver (over the arrivals, duplicates and
//! retransmissions included) against the in-order receiver (over the
//! stream once, in the pieces TCP hands on) and against the in-order
//! receiver behind a reassembly buffer (over the arrivals): the fastest of
//! interleaved runs of each, the receivers taking turns to run first,
//! timed by the CPU time of the thread (on a machine shared with other
//! work, wall time also counts the time a run waits for a CPU, and a
//! longer run waits more often). Then criterion
//! measures a few of the same replays.
//!
//! `OOO_BENCH_RUNS` sets the interleaved runs per row (default 21); 0
//! leaves the table out. `OOO_BENCH_ROWS` keeps only the rows whose first
//! three cells contain it (`aligned | 5.0% | 64`, say): for a profiler.

#![allow(missing_docs)]

use std::time::Duration;

use cpu_time::ThreadTime;
use criterion::{BatchSize, Criterion, Throughput};
use iwarp_proto::sim::{LinkModel, Replay, Scenario, SimFraming, Workload};

const MSS: usize = 1460;

fn workload() -> Workload {
    Workload {
        ops: 600,
        reads: 0,
        max_len: 16 << 10,
        bad_op: false,
        recv_ahead: 600,
        // Writes at random places in 16 MiB seldom overlap, as Writes to
        // separate buffers do.
        region: 16 << 20,
    }
}

fn scenario(framing: SimFraming, loss: f64, reorder: usize) -> Scenario {
    Scenario {
        seed: 12,
        framing,
        link: LinkModel {
            loss,
            reorder,
            duplicate: 0.0,
            mss: MSS,
            resend_all: 0.0,
        },
        workload: workload(),
        window: 256 << 10,
    }
}

/// The fastest of the runs: on a machine shared with other work, the run
/// least disturbed by it (the work itself is the same every time).
fn fastest(v: Vec<Duration>) -> Duration {
    v.into_iter().min().unwrap_or_default()
}

/// Times one replay of each receiver, interleaved, `runs` times: MB/s of
/// stream out of order, in order, and in order behind a reassembly
/// buffer.
fn throughput(replay: &Replay, runs: usize) -> [f64; 3] {
    let mut times = [const { Vec::new() }; 3];
    for run in 0..runs {
        // Each receiver in turn first, so that none always follows the
        // same one.
        for k in 0..3 {
            let i = (run + k) % 3;
            let p = replay.prepare();
            let start = ThreadTime::now();
            match i {
                0 => drop(std::hint::black_box(replay.out_of_order(p))),
                1 => drop(std::hint::black_box(replay.in_order(p))),
                _ => drop(std::hint::black_box(replay.reassembled(p))),
            }
            times[i].push(start.elapsed());
        }
    }
    let mb = replay.stream_octets() as f64 / 1e6;
    times.map(|t| mb / fastest(t).as_secs_f64())
}

fn table(runs: usize, rows: &str) {
    println!("| framing | loss | reorder depth | arrived ahead of a hole | placed on arrival | peak held, out of order | peak held, in-order reassembly | out of order MB/s | in order MB/s | ratio | in order behind reassembly MB/s | ratio |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for framing in [SimFraming::MpaMarkers, SimFraming::MpaAligned] {
        for loss in [0.001, 0.01, 0.05] {
            for reorder in [1, 8, 64] {
                let name = match framing {
                    SimFraming::MpaMarkers => "MPA, markers",
                    _ => "MPA, aligned",
                };
                let row = format!("{name} | {:.1}% | {reorder}", loss * 100.0);
                if !row.contains(rows) {
                    continue;
                }
                let s = scenario(framing, loss, reorder);
                let replay = match Replay::record(&s) {
                    Ok(r) => r,
                    Err(e) => panic!("{s:?}: {e}"),
                };
                let st = replay.stats;
                let ahead = st.ahead_octets as f64 / replay.stream_octets() as f64;
                let placed = st.early_octets as f64 / st.ahead_octets.max(1) as f64;
                let [ooo, in_order, reassembled] = throughput(&replay, runs);
                println!(
                    "| {row} | {:.1}% | {:.1}% | {} KiB | {} KiB | {ooo:.0} | {in_order:.0} | {:.2} | {reassembled:.0} | {:.2} |",
                    ahead * 100.0,
                    placed * 100.0,
                    st.peak_held_octets.div_ceil(1024),
                    st.peak_reassembly_octets.div_ceil(1024),
                    ooo / in_order,
                    ooo / reassembled,
                );
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("ooo");
    g.sample_size(10);
    for (name, loss, reorder) in [
        ("clean", 0.0, 0),
        ("1% loss, depth 8", 0.01, 8),
        ("5% loss, depth 64", 0.05, 64),
    ] {
        let replay = Replay::record(&scenario(SimFraming::MpaMarkers, loss, reorder)).expect("run");
        g.throughput(Throughput::Bytes(replay.stream_octets() as u64));
        g.bench_function(format!("out of order, {name}"), |b| {
            b.iter_batched(
                || replay.prepare(),
                |p| replay.out_of_order(p),
                BatchSize::LargeInput,
            )
        });
        g.bench_function(format!("in order, {name}"), |b| {
            b.iter_batched(
                || replay.prepare(),
                |p| replay.in_order(p),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

fn main() {
    let runs = std::env::var("OOO_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(21);
    let rows = std::env::var("OOO_BENCH_ROWS").unwrap_or_default();
    if runs > 0 {
        table(runs, &rows);
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
