//! Loopback runs: the server and the client of one `iwarp perf` process, each on
//! its own runtime and its own threads, as two hosts would run them.
//!
//! Sharing one work-stealing runtime, the two ends' tasks moved between threads: a
//! connection's reader, writer and application tasks then ran on different cores and
//! contended for the connection's lock, and every hand-over between them was a
//! cross-core wake-up. On the 2-core VM, 64 KiB RDMA Writes (`-n 30000 -t 128`) took
//! 2.0 to 2.2 s of CPU and 9,000 to 10,000 context switches that way; with one thread
//! per end, 1.5 s and 4,700 to 7,000, and 1.6 to 1.9 times the bandwidth. Plain TCP
//! gained too (1.7 to 3.2 GiB/s against 1.7), so the baseline is measured the same way.

use std::future::Future;
use std::thread;

use tokio::runtime::{Builder, Runtime};
use tokio::sync::oneshot;

use super::error::{PerfError, Result};

/// Worker threads each end's runtime gets: half the machine's cores, at least one.
fn workers_per_end() -> usize {
    thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// A runtime for one end: single-threaded when an end gets one core.
fn runtime(name: &str) -> std::io::Result<Runtime> {
    match workers_per_end() {
        1 => Builder::new_current_thread().enable_all().build(),
        n => Builder::new_multi_thread()
            .worker_threads(n)
            .thread_name(name)
            .enable_all()
            .build(),
    }
}

/// Runs the future `make` returns on a new thread named `name`, with a runtime of its
/// own; its output arrives through the returned receiver. The future is built on that
/// thread, so it need not be `Send`.
pub(crate) fn spawn_end<T, F>(
    name: &'static str,
    make: impl FnOnce() -> F + Send + 'static,
) -> Result<oneshot::Receiver<Result<T>>>
where
    T: Send + 'static,
    F: Future<Output = Result<T>>,
{
    let (done, output) = oneshot::channel();
    thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let out = match runtime(name) {
                Ok(rt) => {
                    let out = rt.block_on(make());
                    // Stray tasks (a listener's accept loop) are dropped, not awaited.
                    rt.shutdown_background();
                    out
                }
                Err(e) => Err(PerfError::io("loopback", format!("starting the {name} runtime"), e)),
            };
            let _ = done.send(out);
        })
        .map_err(|e| PerfError::io("loopback", format!("starting the {name} thread"), e))?;
    Ok(output)
}

/// Waits for an end started with [`spawn_end`].
pub(crate) async fn join<T>(name: &'static str, end: oneshot::Receiver<Result<T>>) -> Result<T> {
    end.await
        .map_err(|_| PerfError::Protocol(format!("the {name} thread ended without a result")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_end_runs_on_its_own_thread_and_returns_its_output() {
        let caller = thread::current().id();
        let end = spawn_end("test-end", move || async move {
            // A runtime of its own: tasks spawned here run there.
            let inner = tokio::spawn(async { thread::current().name().map(str::to_owned) });
            let name = inner.await.map_err(|e| PerfError::Protocol(e.to_string()))?;
            Ok((thread::current().id(), name))
        })
        .expect("thread starts");
        let (id, name) = join("test-end", end).await.expect("end's output");
        assert_ne!(id, caller);
        if workers_per_end() == 1 {
            assert_eq!(name.as_deref(), Some("test-end"));
        }
        let failing = spawn_end("test-end", || async { Err::<(), _>(PerfError::Protocol("no".into())) })
            .expect("thread starts");
        assert!(matches!(join("test-end", failing).await, Err(PerfError::Protocol(m)) if m == "no"));
    }
}
