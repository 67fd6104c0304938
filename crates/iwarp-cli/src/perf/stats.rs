//! Statistics of a measured phase: latency summaries and bandwidth figures.
//!
//! # Latency (`t_*` columns)
//!
//! Input: one duration per operation, in nanoseconds. With the samples sorted ascending
//! (`s[0] <= … <= s[n-1]`):
//!
//! * `t_min` = `s[0]`, `t_max` = `s[n-1]`;
//! * `t_typical` = the median: `s[n/2]` for odd `n`, `(s[n/2-1] + s[n/2]) / 2` for even `n`
//!   (perftest's `get_median`);
//! * `t_avg` = arithmetic mean; `t_stdev` = *population* standard deviation,
//!   `sqrt(Σ(x - mean)² / n)`, as perftest computes it;
//! * `99%` and `99.9%` = nearest-rank percentiles: `s[ceil(p·n) - 1]` (a value that was
//!   actually measured; for `n < 100`, the 99th percentile is the maximum).
//!
//! Unlike perftest we time each operation on its own (not the gaps between consecutive
//! posts) and do not drop the two largest samples; warm-up operations are excluded instead.
//! The percentiles are exact (all samples are kept, 8 octets each), which is why this is
//! hand-written rather than `hdrhistogram`, whose quantiles are bucketed approximations.
//!
//! # Bandwidth
//!
//! * average = payload octets of all measured operations / elapsed time, where elapsed runs
//!   from the start of the measured phase to the last completion;
//! * peak = the best rate over the sampling intervals (the shared loop samples the running
//!   octet count every [`SAMPLE_INTERVAL`]); intervals shorter than [`MIN_PEAK_INTERVAL`] (the
//!   tail of the run) are ignored, and the peak is never reported below the average. perftest
//!   computes its peak from per-operation post/completion times instead; both answer "how fast
//!   was the best stretch of the run";
//! * message rate = operations / elapsed time.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How often the measurement loop samples the completed octet count for peak bandwidth.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(10);
/// Intervals shorter than this do not count for peak bandwidth (too noisy).
pub const MIN_PEAK_INTERVAL: Duration = Duration::from_millis(5);

/// Summary of a set of latency samples, in nanoseconds (see the module docs for definitions).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Median (perftest's `t_typical`).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stdev: f64,
    /// Nearest-rank 99th percentile.
    pub p99: f64,
    /// Nearest-rank 99.9th percentile.
    pub p99_9: f64,
}

impl LatencySummary {
    /// Summarises `samples` (nanoseconds; sorted in place). `None` for no samples.
    pub fn from_nanos(samples: &mut [u64]) -> Option<LatencySummary> {
        let n = samples.len();
        if n == 0 {
            return None;
        }
        samples.sort_unstable();
        let median = if n % 2 == 1 {
            samples[n / 2] as f64
        } else {
            (samples[n / 2 - 1] as f64 + samples[n / 2] as f64) / 2.0
        };
        let mean = samples.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let var = samples
            .iter()
            .map(|&x| {
                let d = x as f64 - mean;
                d * d
            })
            .sum::<f64>()
            / n as f64;
        Some(LatencySummary {
            count: n as u64,
            min: samples[0] as f64,
            max: samples[n - 1] as f64,
            median,
            mean,
            stdev: var.sqrt(),
            p99: nearest_rank(samples, 990) as f64,
            p99_9: nearest_rank(samples, 999) as f64,
        })
    }

    /// The same summary with every figure divided by `divisor` (e.g. 2 × 1000 to turn a
    /// round trip in nanoseconds into a one-way latency in microseconds). Dividing by a
    /// positive constant commutes with every statistic here.
    pub fn scaled(&self, divisor: f64) -> LatencySummary {
        LatencySummary {
            count: self.count,
            min: self.min / divisor,
            max: self.max / divisor,
            median: self.median / divisor,
            mean: self.mean / divisor,
            stdev: self.stdev / divisor,
            p99: self.p99 / divisor,
            p99_9: self.p99_9 / divisor,
        }
    }
}

/// Nearest-rank percentile of sorted, non-empty `s`: `s[ceil(permille/1000 · n) - 1]`, in
/// integer arithmetic so that e.g. 99% of 100 is exactly rank 99.
fn nearest_rank(s: &[u64], permille: u64) -> u64 {
    let n = s.len() as u64;
    let rank = (n * permille).div_ceil(1000).max(1);
    s[(rank - 1) as usize]
}

/// The running total of completed payload octets at one instant of a measured phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Time since the start of the phase.
    pub at: Duration,
    /// Octets completed by then (all connections).
    pub bytes: u64,
}

/// Bandwidth figures of a measured phase, in octets and operations per second.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandwidthSummary {
    /// Average rate over the phase, octets per second.
    pub avg_bytes_per_sec: f64,
    /// Peak rate, octets per second; `None` when not measured (`-D`, `-N`).
    pub peak_bytes_per_sec: Option<f64>,
    /// Operations per second.
    pub ops_per_sec: f64,
}

impl BandwidthSummary {
    /// Computes the figures from totals and, when peak is measured, the samples (the first at
    /// time 0, the last at the end of the phase).
    pub fn compute(
        bytes: u64,
        ops: u64,
        elapsed: Duration,
        samples: Option<&[Sample]>,
    ) -> BandwidthSummary {
        let secs = elapsed.as_secs_f64();
        let rate = |x: u64| if secs > 0.0 { x as f64 / secs } else { 0.0 };
        let avg = rate(bytes);
        let peak = samples.map(|s| peak_rate(s, MIN_PEAK_INTERVAL).unwrap_or(avg).max(avg));
        BandwidthSummary {
            avg_bytes_per_sec: avg,
            peak_bytes_per_sec: peak,
            ops_per_sec: rate(ops),
        }
    }
}

/// The best rate between consecutive samples at least `min_interval` apart, octets per second;
/// `None` if no such pair exists.
pub fn peak_rate(samples: &[Sample], min_interval: Duration) -> Option<f64> {
    samples
        .windows(2)
        .filter_map(|w| {
            let dt = w[1].at.checked_sub(w[0].at)?;
            if dt < min_interval || dt.is_zero() {
                return None;
            }
            Some(w[1].bytes.saturating_sub(w[0].bytes) as f64 / dt.as_secs_f64())
        })
        .fold(None, |best: Option<f64>, r| {
            Some(best.map_or(r, |b| b.max(r)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_of_one_to_hundred() {
        let mut s: Vec<u64> = (1..=100).rev().collect();
        let l = LatencySummary::from_nanos(&mut s).unwrap();
        assert_eq!(l.count, 100);
        assert_eq!(l.min, 1.0);
        assert_eq!(l.max, 100.0);
        assert_eq!(l.median, 50.5);
        assert_eq!(l.mean, 50.5);
        // Population variance of 1..=100 is (100² - 1) / 12 = 833.25.
        assert_eq!(l.stdev, 833.25f64.sqrt());
        assert_eq!(l.p99, 99.0);
        assert_eq!(l.p99_9, 100.0);
    }

    #[test]
    fn latency_odd_count_and_small_sets() {
        let mut s = vec![5, 1, 3];
        let l = LatencySummary::from_nanos(&mut s).unwrap();
        assert_eq!(l.median, 3.0);
        assert_eq!(l.mean, 3.0);
        assert_eq!(l.stdev, (8.0f64 / 3.0).sqrt());
        assert_eq!(l.p99, 5.0);
        let mut one = vec![7];
        let l = LatencySummary::from_nanos(&mut one).unwrap();
        assert_eq!(
            (l.min, l.max, l.median, l.stdev, l.p99),
            (7.0, 7.0, 7.0, 0.0, 7.0)
        );
        assert!(LatencySummary::from_nanos(&mut []).is_none());
    }

    #[test]
    fn percentiles_of_thousand() {
        let mut s: Vec<u64> = (1..=1000).collect();
        let l = LatencySummary::from_nanos(&mut s).unwrap();
        assert_eq!(l.p99, 990.0);
        assert_eq!(l.p99_9, 999.0);
        assert_eq!(l.median, 500.5);
        let mut s: Vec<u64> = (1..=2000).collect();
        let l = LatencySummary::from_nanos(&mut s).unwrap();
        assert_eq!(l.p99, 1980.0);
        assert_eq!(l.p99_9, 1998.0);
    }

    #[test]
    fn scaling_to_one_way_microseconds() {
        let mut s = vec![2000, 4000];
        let l = LatencySummary::from_nanos(&mut s).unwrap().scaled(2000.0);
        assert_eq!(
            (l.min, l.max, l.median, l.mean, l.stdev),
            (1.0, 2.0, 1.5, 1.5, 0.5)
        );
    }

    fn ms(m: u64) -> Duration {
        Duration::from_millis(m)
    }

    #[test]
    fn bandwidth_average_and_peak() {
        let samples = [
            Sample {
                at: ms(0),
                bytes: 0,
            },
            Sample {
                at: ms(10),
                bytes: 1_000_000,
            },
            Sample {
                at: ms(20),
                bytes: 3_000_000,
            },
            Sample {
                at: ms(30),
                bytes: 4_000_000,
            },
            // A 1 ms tail at a silly rate: ignored for the peak.
            Sample {
                at: ms(31),
                bytes: 4_500_000,
            },
        ];
        let bw = BandwidthSummary::compute(4_500_000, 450, ms(31), Some(&samples));
        assert_eq!(bw.avg_bytes_per_sec, 4_500_000.0 / 0.031);
        assert_eq!(bw.peak_bytes_per_sec, Some(2_000_000.0 / 0.010));
        assert_eq!(bw.ops_per_sec, 450.0 / 0.031);
    }

    #[test]
    fn peak_never_below_average_or_missing() {
        let samples = [
            Sample {
                at: ms(0),
                bytes: 0,
            },
            Sample {
                at: ms(2),
                bytes: 10,
            },
        ];
        let bw = BandwidthSummary::compute(10, 1, ms(2), Some(&samples));
        assert_eq!(bw.peak_bytes_per_sec, Some(bw.avg_bytes_per_sec));
        let bw = BandwidthSummary::compute(10, 1, ms(2), None);
        assert_eq!(bw.peak_bytes_per_sec, None);
        let bw = BandwidthSummary::compute(10, 1, Duration::ZERO, None);
        assert_eq!(bw.avg_bytes_per_sec, 0.0);
    }
}
