//! Memory per idle connection, measured: 200 connections are opened in
//! this process (so both ends of each are here), and the live heap
//! (counted by a wrapping global allocator) and the resident set size
//! (`VmRSS` of `/proc/self/status`, Linux only) are compared before and
//! after. The same is done with shallow queues (the queues grow on
//! demand, so their depths must not show), and after one small Send each
//! way, which must not grow the receive staging buffer. Dropping every connection must give the heap back.
//!
//! Run `cargo test -p iwarp --test idle_memory -- --nocapture` for the
//! figures. Each scenario runs in a child process of its own; the
//! assertions are generous bounds against regressions and leaks, not
//! measurements of their own.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use common::*;
use iwarp::{Config, ProtectionDomain, QpOptions, QueuePair};

/// Counts the octets live on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds the contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is; `ptr` came from this allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is; `ptr` came from this allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Octets live on the heap now.
fn heap() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The resident set size in octets, where the platform says.
fn rss() -> Option<isize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: isize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

const N: usize = 200;

/// One connection, both ends, with their domains.
struct Conn {
    client: QueuePair,
    server: QueuePair,
    cpd: ProtectionDomain,
    spd: ProtectionDomain,
}

/// Opens `N` connections with `cfg`; returns them with the heap and RSS
/// growth per connection (both ends).
async fn open(cfg: &Config) -> (Vec<Conn>, isize, Option<isize>) {
    let (heap0, rss0) = (heap(), rss());
    let mut conns = Vec::with_capacity(N);
    for _ in 0..N {
        let (cpd, spd) = (new_pd(), new_pd());
        let (client, server) =
            pair_with(cfg, QpOptions::new(&cpd), cfg.clone(), QpOptions::new(&spd)).await;
        conns.push(Conn {
            client,
            server,
            cpd,
            spd,
        });
    }
    // Let the tasks settle into their idle waits.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let per_heap = (heap() - heap0) / N as isize;
    let per_rss = rss().zip(rss0).map(|(a, b)| (a - b) / N as isize);
    (conns, per_heap, per_rss)
}

/// Drops every connection (the last handle of each: they close) and
/// waits until the heap is back near `base`: the connection tasks have
/// ended and released everything.
async fn close_all(conns: Vec<Conn>, base: isize) -> isize {
    drop(conns);
    within("the heap to come back", async {
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if heap() - base < 64 * 1024 {
                return heap() - base;
            }
        }
    })
    .await
}

fn kib(octets: isize) -> String {
    format!("{:.1} KiB", octets as f64 / 1024.0)
}

/// Selects the scenario a child process measures.
const SCENARIO: &str = "IWARP_IDLE_MEMORY_SCENARIO";

/// Runs each scenario in a fresh child process (this same test binary),
/// so that memory a previous scenario freed, and the allocator kept,
/// does not blur the next one's RSS; prints the figures and checks them
/// against generous bounds.
#[test]
fn memory_per_idle_connection() {
    if let Ok(scenario) = std::env::var(SCENARIO) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        return rt.block_on(child(&scenario));
    }
    let mut heap_of = std::collections::HashMap::new();
    for scenario in ["idle", "shallow", "used"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "memory_per_idle_connection", "--nocapture"])
            .env(SCENARIO, scenario)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{scenario}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find(|l| l.starts_with("scenario "))
            .expect("the child's figures");
        println!("{line}");
        // "scenario NAME heap H rss R left L", in octets.
        let f: Vec<&str> = line.split_whitespace().collect();
        let (heap, left): (isize, isize) = (f[3].parse().unwrap(), f[7].parse().unwrap());
        assert!(left < 64 * 1024, "{scenario}: {} not freed", kib(left));
        heap_of.insert(scenario, heap);
    }
    // Both ends of a connection: the queues grow as work is posted and the
    // staging buffer as reads fill it, so neither the queue depths nor one
    // small Send each way may cost more than a few KiB. Bounds against a
    // regression (the figures are about 36 KiB), not measurements.
    for (scenario, heap) in &heap_of {
        assert!(*heap < 128 * 1024, "{scenario}: {}", kib(*heap));
    }
    assert!(
        (heap_of["idle"] - heap_of["shallow"]).abs() < 4 * 1024,
        "queue depths cost memory up front: {} deep, {} shallow",
        kib(heap_of["idle"]),
        kib(heap_of["shallow"])
    );
    assert!(
        heap_of["used"] - heap_of["idle"] < 8 * 1024,
        "one small Send each way grew the staging buffers: {}",
        kib(heap_of["used"])
    );
}

/// Measures one scenario and prints
/// `scenario NAME heap H rss R left L` (octets per connection, both
/// ends; R is -1 where there is no `/proc`).
async fn child(scenario: &str) {
    // Warm up: the runtime, the global STag table, the listener path.
    drop(pair(&new_pd(), &new_pd()).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let base = heap();
    let cfg = match scenario {
        "shallow" => Config {
            send_queue_depth: 16,
            recv_queue_depth: 16,
            ..Config::default()
        },
        _ => Config::default(),
    };
    let rss0 = rss();
    let (conns, mut heap_per, _) = open(&cfg).await;
    if scenario == "used" {
        // One small Send each way touches each end's staging buffer.
        for c in &conns {
            one_send_each_way(c).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        heap_per = (heap() - base) / N as isize;
    }
    let rss_per = rss().zip(rss0).map_or(-1, |(a, b)| (a - b) / N as isize);
    let left = close_all(conns, base).await;
    println!(
        "scenario {scenario} heap {heap_per} rss {rss_per} left {left} \
         (per connection, both ends: heap {}, RSS {})",
        kib(heap_per),
        kib(rss_per)
    );
}

async fn one_send_each_way(c: &Conn) {
    let (client, server) = (&c.client, &c.server);
    let cbuf = region(&c.cpd, 8);
    let sbuf = region(&c.spd, 8);
    server.post_recv(1, sbuf.sge(..).unwrap()).unwrap();
    within("Send", client.send(cbuf.sge(..).unwrap()))
        .await
        .unwrap();
    next_recv(server).await;
    client.post_recv(1, cbuf.sge(..).unwrap()).unwrap();
    within("Send back", server.send(sbuf.sge(..).unwrap()))
        .await
        .unwrap();
    next_recv(client).await;
}
