//! Runs the examples' own code, so that `cargo test` proves they work and
//! not only that they compile (which `cargo test` checks as well).
//!
//! Each example keeps its logic in public functions and only parses
//! arguments in `main`; the example's source is included here as a module
//! and its in-process mode (`run_local`, what `cargo run --example`
//! without arguments does) is called with small parameters.

#[path = "../examples/ping_pong.rs"]
#[allow(dead_code)]
mod ping_pong;

#[path = "../examples/read_file.rs"]
#[allow(dead_code)]
mod read_file;

use std::time::Duration;

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the example finished in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_pong_runs() {
    let summary = within(ping_pong::run_local(200, 64)).await.unwrap();
    assert_eq!(summary.rtts.len(), 200);
    assert!(summary.report().starts_with("200 round trips of 64 octets"));
    // Zero-length and multi-segment messages too.
    within(ping_pong::run_local(3, 0)).await.unwrap();
    within(ping_pong::run_local(3, 200_000)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_runs() {
    let dir = std::env::temp_dir();
    // Chunks that do not divide the file, a few in flight.
    within(read_file::run_local(3 * (1 << 20) + 5, 100_000, 3, &dir))
        .await
        .unwrap();
    // An empty file, and one smaller than a chunk.
    within(read_file::run_local(0, 1 << 20, 4, &dir))
        .await
        .unwrap();
    within(read_file::run_local(10, 1 << 20, 4, &dir))
        .await
        .unwrap();
}
