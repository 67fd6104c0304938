//! Progress display for runs longer than a second, and the counters that feed it.
//!
//! The measurement loop bumps [`Counters`] (two relaxed atomic adds per completion batch);
//! the same counters serve the peak-bandwidth sampler and the stall watchdog. A separate task
//! draws an `indicatif` bar on **stderr**, and only if stderr is a terminal, the output is
//! not `--json`, and the run is still going after [`SHOW_AFTER`]: short runs and scripted runs
//! never see it, and stdout only ever carries results.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long a run must last before the bar appears.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);
/// How often the bar is refreshed.
const TICK: Duration = Duration::from_millis(100);

/// Running totals of completed operations and octets, shared by all connections of a run.
#[derive(Debug, Default)]
pub struct Counters {
    ops: AtomicU64,
    bytes: AtomicU64,
}

impl Counters {
    /// Records `ops` completed operations carrying `bytes` payload octets.
    pub fn add(&self, ops: u64, bytes: u64) {
        // Relaxed: these are statistics read by samplers, not synchronisation.
        self.ops.fetch_add(ops, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Operations completed so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    /// Octets completed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// What "done" means for the bar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Plan {
    /// This many operations in total (iterations mode, warm-up included).
    Ops(u64),
    /// About this much time in total (duration mode).
    Time(Duration),
}

/// A progress display (possibly disabled) and its counters.
pub struct Progress {
    counters: Arc<Counters>,
    label: Arc<Mutex<String>>,
    bar: Arc<OnceLock<ProgressBar>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts the display task if `enabled` (the caller decides: terminal stderr, not JSON).
    /// Must be called inside a tokio runtime.
    pub fn start(enabled: bool, plan: Plan) -> Progress {
        let counters = Arc::new(Counters::default());
        let label = Arc::new(Mutex::new(String::new()));
        let bar = Arc::new(OnceLock::new());
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = enabled.then(|| {
            tokio::spawn(display(
                plan,
                counters.clone(),
                label.clone(),
                bar.clone(),
                stop_rx,
            ))
        });
        Progress {
            counters,
            label,
            bar,
            stop: Some(stop_tx),
            task,
        }
    }

    /// The counters the measurement loop updates.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Sets the text shown next to the bar (e.g. the transport and size being measured).
    pub fn set_label(&self, text: String) {
        if let Ok(mut l) = self.label.lock() {
            *l = text;
        }
    }

    /// Prints a line on stdout without tearing the bar.
    pub fn println(&self, line: &str) {
        match self.bar.get() {
            Some(bar) => bar.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    }

    /// Removes the bar and ends the display task.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // On an error path `finish` is skipped: still make sure the bar disappears.
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn display(
    plan: Plan,
    counters: Arc<Counters>,
    label: Arc<Mutex<String>>,
    slot: Arc<OnceLock<ProgressBar>>,
    mut stop: oneshot::Receiver<()>,
) {
    let start = Instant::now();
    tokio::select! {
        _ = &mut stop => return,
        () = tokio::time::sleep(SHOW_AFTER) => {}
    }
    let (len, template) = match plan {
        Plan::Ops(total) => (
            total,
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} ops  {msg}",
        ),
        Plan::Time(total) => (
            total.as_millis().try_into().unwrap_or(u64::MAX),
            "{spinner} [{elapsed_precise}] {bar:30} {msg}",
        ),
    };
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let bar = slot.get_or_init(|| bar).clone();
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tick.tick() => {}
        }
        let text = label.lock().map(|l| l.clone()).unwrap_or_default();
        match plan {
            Plan::Ops(_) => {
                bar.set_position(counters.ops().min(len));
                bar.set_message(text);
            }
            Plan::Time(_) => {
                let ms = start.elapsed().as_millis().try_into().unwrap_or(u64::MAX);
                bar.set_position(ms.min(len));
                bar.set_message(format!("{}  {} ops", text, counters.ops()));
            }
        }
    }
    bar.finish_and_clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn disabled_progress_counts_and_prints_nothing() {
        let p = Progress::start(false, Plan::Ops(10));
        p.counters().add(3, 300);
        p.counters().add(2, 200);
        assert_eq!(p.counters().ops(), 5);
        assert_eq!(p.counters().bytes(), 500);
        assert!(p.bar.get().is_none());
        p.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn short_run_never_shows_a_bar() {
        let p = Progress::start(true, Plan::Ops(10));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(p.bar.get().is_none());
        p.finish().await;
    }
}
