//! perftest's figures, computed the way perftest computes them (`print_report_bw`,
//! `print_report_lat`, `print_report_lat_duration` in its `perftest_parameters.c`), from
//! timestamps in nanoseconds where perftest has CPU cycles.
//!
//! Reproducing the arithmetic, quirks included, is what makes the two ends of a run agree:
//! the peak is the best per-operation time over any run of consecutive operations ending on
//! a signalled completion; latencies are the gaps between consecutive posts, sorted, with
//! the two largest left out, a median that averages two neighbours for an odd count, and a
//! standard deviation over differences truncated to whole microseconds.

/// Octets per MiB, perftest's unit without `--report_gbits` (`0x100000`).
const MIB: f64 = 1_048_576.0;
/// Octets per Gb (`125000000`), with `--report_gbits`.
const GBIT: f64 = 125_000_000.0;

/// A bandwidth row, as perftest prints and exchanges it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BwFigures {
    /// Message size.
    pub size: u64,
    /// Iterations on all queue pairs.
    pub iters: u64,
    /// Peak bandwidth in the report's unit (0 when not measured).
    pub peak: f64,
    /// Average bandwidth in the report's unit.
    pub avg: f64,
    /// Millions of messages per second.
    pub msg_rate: f64,
}

/// What a bandwidth measurement recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BwSamples {
    /// When each operation was posted, nanoseconds from any fixed origin (all queue pairs
    /// in posting order; only the first one without peak measurement).
    pub posted: Vec<u64>,
    /// When each operation's completion was seen, in completion order (only the last one
    /// without peak measurement).
    pub completed: Vec<u64>,
    /// Operations counted.
    pub iters: u64,
}

/// perftest's `print_report_bw` for one row.
pub fn bw_figures(size: u64, s: &BwSamples, cq_mod: u32, no_peak: bool, gbits: bool) -> BwFigures {
    let unit = if gbits { GBIT } else { MIB };
    let n = s.iters;
    let first_post = s.posted.first().copied().unwrap_or(0);
    let last_completion = s.completed.last().copied().unwrap_or(first_post);
    let elapsed = last_completion.saturating_sub(first_post) as f64;
    let (avg, msg_rate) = if elapsed > 0.0 {
        let secs = elapsed / 1e9;
        (size as f64 * n as f64 / secs / unit, n as f64 / secs / 1e6)
    } else {
        (0.0, 0.0)
    };
    let peak = if no_peak {
        0.0
    } else {
        best_op_time(&s.posted, &s.completed, cq_mod)
            .filter(|&t| t > 0.0)
            .map_or(0.0, |t| size as f64 / (t / 1e9) / unit)
    };
    BwFigures {
        size,
        iters: n,
        peak,
        avg,
        msg_rate,
    }
}

/// The shortest time per operation over runs from post `i` to a signalled completion `j`:
/// perftest looks at `j = ROUND_UP(i + 1, cq_mod) - 1` and every `cq_mod` after, plus the
/// last operation.
fn best_op_time(posted: &[u64], completed: &[u64], cq_mod: u32) -> Option<f64> {
    let n = posted.len().min(completed.len());
    let m = cq_mod.max(1) as usize;
    let mut best: Option<f64> = None;
    let mut consider = |i: usize, j: usize| {
        let t = completed[j].saturating_sub(posted[i]) as f64 / (j - i + 1) as f64;
        if best.is_none_or(|b| t < b) {
            best = Some(t);
        }
    };
    for i in 0..n {
        let mut j = (i + 1).div_ceil(m) * m - 1;
        while j < n {
            consider(i, j);
            j += m;
        }
        if !n.is_multiple_of(m) {
            consider(i, n - 1);
        }
    }
    best
}

/// A latency row, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatFigures {
    /// Message size.
    pub size: u64,
    /// Iterations (perftest prints its `-n`).
    pub iters: u64,
    /// Smallest.
    pub min: f64,
    /// What perftest prints as the maximum: the largest sample kept after dropping two.
    pub max: f64,
    /// Median.
    pub typical: f64,
    /// Mean.
    pub avg: f64,
    /// Standard deviation (over whole-microsecond differences, as perftest has it).
    pub stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
}

/// perftest's `LAT_MEASURE_TAIL`: the largest samples left out.
const LAT_MEASURE_TAIL: usize = 2;

/// perftest's `print_report_lat`: `posted` are the post times of the `iters` operations;
/// `round_trips` is 2 when one sample is a round trip of two messages (write and send
/// ping-pong) and 1 when it is one operation (read). `None` with fewer than four posts.
pub fn lat_figures(size: u64, posted: &[u64], round_trips: u32) -> Option<LatFigures> {
    let mut delta: Vec<u64> = posted
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    if delta.len() <= LAT_MEASURE_TAIL {
        return None;
    }
    delta.sort_unstable();
    let kept = delta.len() - LAT_MEASURE_TAIL;
    let q = 1000.0 * f64::from(round_trips.max(1));
    let us = |d: u64| d as f64 / q;
    // perftest's get_median: the mean of the two middle values when (n - 1) is odd.
    let median = if (kept - 1) % 2 == 1 {
        (delta[kept / 2] + delta[kept / 2 - 1]) / 2
    } else {
        delta[kept / 2]
    };
    let avg = delta[..kept].iter().map(|&d| us(d)).sum::<f64>() / kept as f64;
    // perftest truncates each difference, and its square, to an int.
    let var = delta[..kept]
        .iter()
        .map(|&d| {
            let diff = (avg - us(d)).trunc();
            (diff * diff).trunc()
        })
        .sum::<f64>()
        / kept as f64;
    let at = |f: f64| delta[((kept as f64 * f).ceil() as usize).min(delta.len() - 1)];
    Some(LatFigures {
        size,
        iters: posted.len() as u64,
        min: us(delta[0]),
        max: us(delta[kept]),
        typical: us(median),
        avg,
        stdev: var.sqrt(),
        p99: us(at(0.99)),
        p99_9: us(at(0.999)),
    })
}

/// perftest's `print_report_lat_duration`: the average latency and the transactions per
/// second of a `-D` latency run that counted `iters` operations in `sample_ns`.
pub fn lat_duration_figures(iters: u64, sample_ns: u64, round_trips: u32) -> (f64, f64) {
    if iters == 0 || sample_ns == 0 {
        return (0.0, 0.0);
    }
    let us = sample_ns as f64 / 1000.0;
    (
        us / f64::from(round_trips.max(1)) / iters as f64,
        iters as f64 / (us / 1e6),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    /// Ten 1 MiB operations posted at 0 and completing at 1, 2 .. 10 ms: 1 GiB/s average,
    /// 1000 messages per second; with CQ moderation 5 the best run is a whole group of five.
    #[test]
    fn bandwidth_average_and_peak() {
        let mib = 1 << 20;
        let s = BwSamples {
            posted: vec![0; 10],
            completed: (1..=10).map(|k| k * 1_000_000).collect(),
            iters: 10,
        };
        let f = bw_figures(mib, &s, 5, false, false);
        assert!(close(f.avg, 1000.0), "{f:?}");
        assert!(close(f.msg_rate, 0.001));
        // Best: 10 ops to completion 10 ms (posts all at 0) = 1 ms each.
        assert!(close(f.peak, 1000.0));
        let g = bw_figures(mib, &s, 5, false, true);
        assert!(close(g.avg, 1000.0 * MIB / GBIT), "{g:?}");
        assert_eq!(bw_figures(mib, &s, 5, true, false).peak, 0.0);
        assert_eq!(f.iters, 10);
    }

    /// A burst inside the run: posts every 1 ms, completions 1 ms later, except operations
    /// 4..6 which complete 0.1 ms after their post: the peak comes from the best window
    /// ending on a signalled completion (every operation with CQ moderation 1).
    #[test]
    fn peak_is_the_best_window() {
        let posted: Vec<u64> = (0..8).map(|k| k * 1_000_000).collect();
        let mut completed: Vec<u64> = posted.iter().map(|p| p + 1_000_000).collect();
        completed[5] = posted[5] + 100_000;
        let s = BwSamples {
            posted,
            completed,
            iters: 8,
        };
        let f = bw_figures(1_000_000, &s, 1, false, false);
        // Operation 5 alone: 1 MB in 0.1 ms = 10^10 octets per second.
        assert!(close(f.peak, 1e10 / MIB), "{f:?}");
    }

    /// perftest's latency statistics on a known set: 9 posts, 8 gaps of 10, 20 .. 80 us
    /// (scrambled); the two largest (70, 80) are dropped; six kept: median = mean of the 3rd
    /// and 4th (30, 40), max printed = 70, the first dropped.
    #[test]
    fn latency_statistics() {
        let gaps = [30u64, 10, 80, 20, 60, 40, 70, 50];
        let mut posted = vec![0u64];
        for g in gaps {
            posted.push(posted.last().unwrap() + g * 1000);
        }
        let f = lat_figures(2, &posted, 1).unwrap();
        assert_eq!(f.iters, 9);
        assert!(close(f.min, 10.0));
        assert!(close(f.max, 70.0));
        assert!(close(f.typical, 35.0), "{f:?}");
        assert!(close(f.avg, 35.0));
        // Differences 25, 15, 5, -5, -15, -25 (whole already): variance 291.67.
        assert!(close(f.stdev, (1750.0f64 / 6.0).sqrt()), "{f:?}");
        // ceil(6 * 0.99) = 6: the 7th smallest.
        assert!(close(f.p99, 70.0));
        // Half round trips for ping-pong tests.
        let h = lat_figures(2, &posted, 2).unwrap();
        assert!(close(h.typical, 17.5));
        assert!(lat_figures(2, &posted[..3], 1).is_none());
    }

    #[test]
    fn latency_duration() {
        let (lat, tps) = lat_duration_figures(1000, 2_000_000_000, 2);
        assert!(close(lat, 1000.0));
        assert!(close(tps, 500.0));
        assert_eq!(lat_duration_figures(0, 5, 1), (0.0, 0.0));
    }
}
