//! The shared measurement loop: the same code times every backend.
//!
//! A *phase* is one size's warm-up or measured run on all connections at once. Each connection
//! runs on its own tokio task and drives its [`ClientConn`]:
//!
//! * bandwidth: post until `depth` operations are outstanding, wait for completions, repeat;
//!   stop posting after `n` operations (`-n`) or once the deadline has passed (`-D`), then
//!   drain. Every operation posted is completed and counted, so octets = size × operations
//!   exactly, and elapsed time runs from the phase start to the last completion;
//! * latency: one operation at a time, each timed with a monotonic clock (`Instant`).
//!
//! Meanwhile this task samples the completed-octet counter every
//! [`SAMPLE_INTERVAL`] for peak bandwidth and watches for
//! stalls: if nothing completes for [`STALL_TIMEOUT`], the phase fails instead of hanging.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cpu_time::ProcessTime;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use super::backend::ClientConn;
use super::error::{PerfError, Result};
use super::progress::Counters;
use super::spec::Measure;
use super::stats::{Sample, SAMPLE_INTERVAL};

/// A phase fails if no operation completes for this long.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Latency samples kept per connection and phase (8 octets each, 128 MiB at most); a longer
/// `-D` latency run keeps counting operations but summarises the first this many.
pub const MAX_LAT_SAMPLES: usize = 16 * 1024 * 1024;

/// When a connection stops starting new operations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// After this many operations.
    Ops(u64),
    /// After this much time from the phase start.
    Time(Duration),
}

/// Everything the loop needs to know about one phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhasePlan {
    /// Bandwidth or latency.
    pub measure: Measure,
    /// Message size in octets.
    pub size: u64,
    /// Operations in flight per connection (bandwidth).
    pub depth: u32,
    /// When to stop posting.
    pub limit: Limit,
    /// Keep latency samples (false for warm-up).
    pub record: bool,
    /// Sample the octet counter for peak bandwidth.
    pub sample_peak: bool,
}

/// What one connection did in a phase.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnMeasurement {
    /// Operations completed.
    pub ops: u64,
    /// Payload octets of those operations (`ops × size`).
    pub bytes: u64,
    /// Per-operation times in nanoseconds (latency, measured phases only; full round trips).
    pub latencies_ns: Vec<u64>,
    /// When its last operation completed, relative to the phase start.
    pub finished_at: Duration,
}

/// What all connections did in a phase.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseMeasurement {
    /// Per connection, in index order.
    pub conns: Vec<ConnMeasurement>,
    /// Phase start to the last completion on any connection.
    pub elapsed: Duration,
    /// Completed-octet samples for peak bandwidth (first at 0, last at `elapsed`).
    pub samples: Option<Vec<Sample>>,
    /// CPU time (user and system, every thread) this process spent from the phase start
    /// until every connection had finished; in a loopback run that is both ends. `None` if
    /// the system would not say.
    pub cpu: Option<Duration>,
}

impl PhaseMeasurement {
    /// Operations on all connections.
    pub fn ops(&self) -> u64 {
        self.conns.iter().map(|c| c.ops).sum()
    }

    /// Octets on all connections.
    pub fn bytes(&self) -> u64 {
        self.conns.iter().map(|c| c.bytes).sum()
    }
}

/// Runs one phase on every connection in `conns` concurrently and gives the connections back
/// (in `conns`) when all have finished. `peer_info[i]` goes to connection `i`'s `prepare`
/// (missing entries are empty). On error the connections are dropped: the session is over
/// anyway.
pub async fn run_phase<C: ClientConn>(
    conns: &mut Vec<C>,
    plan: PhasePlan,
    peer_info: Vec<Vec<u8>>,
    counters: &Arc<Counters>,
) -> Result<PhaseMeasurement> {
    let n = conns.len();
    let mut infos = peer_info.into_iter();
    let mut prepared = Vec::with_capacity(n);
    // Prepare every connection before the clock starts: buffer setup is not traffic.
    for mut conn in conns.drain(..) {
        conn.prepare(plan.size, &infos.next().unwrap_or_default())
            .await?;
        prepared.push(conn);
    }
    let base_bytes = counters.bytes();
    let cpu_start = ProcessTime::try_now().ok();
    let start = Instant::now();
    let mut set = JoinSet::new();
    for (index, mut conn) in prepared.into_iter().enumerate() {
        let counters = counters.clone();
        set.spawn(async move {
            let r = drive(&mut conn, plan, &counters, start).await;
            (index, conn, r)
        });
    }

    let mut done: Vec<Option<(C, ConnMeasurement)>> = (0..n).map(|_| None).collect();
    let mut remaining = n;
    let mut samples = vec![Sample {
        at: Duration::ZERO,
        bytes: 0,
    }];
    let mut sampler = tokio::time::interval_at(
        tokio::time::Instant::from_std(start) + SAMPLE_INTERVAL,
        SAMPLE_INTERVAL,
    );
    sampler.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut watchdog = tokio::time::interval(Duration::from_secs(1));
    let mut last_ops = counters.ops();
    let mut last_change = Instant::now();

    while remaining > 0 {
        tokio::select! {
            joined = set.join_next() => match joined {
                Some(Ok((index, conn, Ok(m)))) => {
                    if let Some(slot) = done.get_mut(index) {
                        *slot = Some((conn, m));
                    }
                    remaining -= 1;
                }
                Some(Ok((_, _, Err(e)))) => return Err(e),
                Some(Err(e)) => return Err(PerfError::Internal(format!("connection task failed: {e}"))),
                None => break,
            },
            _ = sampler.tick(), if plan.sample_peak => {
                samples.push(Sample {
                    at: start.elapsed(),
                    bytes: counters.bytes().saturating_sub(base_bytes),
                });
            }
            _ = watchdog.tick() => {
                let ops = counters.ops();
                if ops != last_ops {
                    last_ops = ops;
                    last_change = Instant::now();
                } else if last_change.elapsed() >= STALL_TIMEOUT {
                    return Err(PerfError::Stalled { secs: STALL_TIMEOUT.as_secs() });
                }
            }
        }
    }

    let mut measurements = Vec::with_capacity(n);
    for slot in done {
        let (conn, m) =
            slot.ok_or_else(|| PerfError::Internal("a connection task vanished".into()))?;
        conns.push(conn);
        measurements.push(m);
    }
    let elapsed = measurements
        .iter()
        .map(|m| m.finished_at)
        .max()
        .unwrap_or_default();
    let samples = plan.sample_peak.then(|| {
        // Ticks that fired after the last completion only measured idle time.
        samples.retain(|s| s.at < elapsed);
        samples.push(Sample {
            at: elapsed,
            bytes: measurements.iter().map(|m| m.bytes).sum(),
        });
        samples
    });
    Ok(PhaseMeasurement {
        conns: measurements,
        elapsed,
        samples,
        cpu: cpu_start.and_then(|t| t.try_elapsed().ok()),
    })
}

/// One connection's part of a phase.
async fn drive<C: ClientConn>(
    conn: &mut C,
    plan: PhasePlan,
    counters: &Counters,
    start: Instant,
) -> Result<ConnMeasurement> {
    let deadline = match plan.limit {
        Limit::Time(d) => Some(start + d),
        Limit::Ops(_) => None,
    };
    // True while more operations may be started.
    let more = |started: u64| match plan.limit {
        Limit::Ops(n) => started < n,
        Limit::Time(_) => deadline.is_some_and(|d| Instant::now() < d),
    };
    match plan.measure {
        Measure::Bw => {
            let depth = u64::from(plan.depth.max(1));
            let (mut posted, mut completed) = (0u64, 0u64);
            loop {
                while posted - completed < depth && more(posted) {
                    conn.post().await?;
                    posted += 1;
                }
                if posted == completed {
                    break;
                }
                let n = conn.wait_completions().await?;
                if n == 0 || n > posted - completed {
                    return Err(PerfError::Internal(format!(
                        "backend reported {n} completions with {} outstanding",
                        posted - completed
                    )));
                }
                completed += n;
                counters.add(n, n.saturating_mul(plan.size));
            }
            Ok(ConnMeasurement {
                ops: completed,
                bytes: completed.saturating_mul(plan.size),
                latencies_ns: Vec::new(),
                finished_at: start.elapsed(),
            })
        }
        Measure::Lat => {
            let expected = match plan.limit {
                Limit::Ops(n) if plan.record => usize::try_from(n).unwrap_or(usize::MAX),
                _ => 0,
            };
            let mut latencies = Vec::with_capacity(expected.min(MAX_LAT_SAMPLES));
            let mut ops = 0u64;
            while more(ops) {
                let t = Instant::now();
                conn.lat_op().await?;
                let ns = t.elapsed().as_nanos();
                if plan.record && latencies.len() < MAX_LAT_SAMPLES {
                    latencies.push(u64::try_from(ns).unwrap_or(u64::MAX));
                }
                ops += 1;
                counters.add(1, plan.size);
            }
            Ok(ConnMeasurement {
                ops,
                bytes: ops.saturating_mul(plan.size),
                latencies_ns: latencies,
                finished_at: start.elapsed(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend stand-in that completes posted operations two at a time.
    struct Fake {
        outstanding: u64,
        max_outstanding: u64,
        posts: u64,
    }

    impl ClientConn for Fake {
        async fn prepare(&mut self, _size: u64, _peer: &[u8]) -> Result<()> {
            self.outstanding = 0;
            Ok(())
        }
        async fn post(&mut self) -> Result<()> {
            self.outstanding += 1;
            self.posts += 1;
            self.max_outstanding = self.max_outstanding.max(self.outstanding);
            Ok(())
        }
        async fn wait_completions(&mut self) -> Result<u64> {
            let n = self.outstanding.min(2);
            self.outstanding -= n;
            Ok(n)
        }
        async fn lat_op(&mut self) -> Result<()> {
            self.posts += 1;
            Ok(())
        }
    }

    fn fake() -> Fake {
        Fake {
            outstanding: 0,
            max_outstanding: 0,
            posts: 0,
        }
    }

    #[tokio::test]
    async fn bandwidth_loop_respects_depth_and_count() {
        let counters = Arc::new(Counters::default());
        let mut conns = vec![fake(), fake()];
        let plan = PhasePlan {
            measure: Measure::Bw,
            size: 100,
            depth: 8,
            limit: Limit::Ops(101),
            record: true,
            sample_peak: true,
        };
        let m = run_phase(&mut conns, plan, vec![], &counters)
            .await
            .unwrap();
        assert_eq!(conns.len(), 2);
        assert_eq!(m.ops(), 202);
        assert_eq!(m.bytes(), 20_200);
        assert_eq!(counters.ops(), 202);
        for c in &conns {
            assert_eq!(c.posts, 101);
            assert_eq!(c.max_outstanding, 8);
        }
        let samples = m.samples.unwrap();
        assert_eq!(samples.first().map(|s| s.bytes), Some(0));
        assert_eq!(samples.last().map(|s| s.bytes), Some(20_200));
    }

    #[tokio::test]
    async fn latency_loop_records_each_operation() {
        let counters = Arc::new(Counters::default());
        let mut conns = vec![fake()];
        let plan = PhasePlan {
            measure: Measure::Lat,
            size: 2,
            depth: 1,
            limit: Limit::Ops(50),
            record: true,
            sample_peak: false,
        };
        let m = run_phase(&mut conns, plan, vec![], &counters)
            .await
            .unwrap();
        assert_eq!(m.ops(), 50);
        assert_eq!(m.conns[0].latencies_ns.len(), 50);
        assert!(m.samples.is_none());
        let warm = PhasePlan {
            record: false,
            ..plan
        };
        let m = run_phase(&mut conns, warm, vec![], &counters)
            .await
            .unwrap();
        assert!(m.conns[0].latencies_ns.is_empty());
    }

    #[tokio::test]
    async fn duration_loop_stops_after_deadline() {
        let counters = Arc::new(Counters::default());
        let mut conns = vec![fake()];
        let plan = PhasePlan {
            measure: Measure::Bw,
            size: 1,
            depth: 4,
            limit: Limit::Time(Duration::from_millis(20)),
            record: true,
            sample_peak: false,
        };
        let m = run_phase(&mut conns, plan, vec![], &counters)
            .await
            .unwrap();
        assert!(m.ops() > 0);
        assert_eq!(m.ops(), conns[0].posts);
        assert!(m.elapsed >= Duration::from_millis(20));
    }
}
