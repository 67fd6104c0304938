//! Round-trip statistics and the closing summary, in the spirit of ping(8).
//!
//! rping prints nothing at the end; a connectivity test that says how many round trips
//! worked and how long they took is more useful, and costs rping users nothing (the
//! per-ping `-v` lines are rping's). Statistics are kept as running values, so an unlimited
//! run uses constant memory.

use std::fmt::Write as _;
use std::time::Duration;

/// Running round-trip statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttStats {
    /// Completed pings.
    pub count: u64,
    /// Sum of their round trips.
    pub total: Duration,
    /// Shortest round trip.
    pub min: Option<Duration>,
    /// Longest round trip.
    pub max: Option<Duration>,
}

impl RttStats {
    /// Adds one completed ping.
    pub fn add(&mut self, rtt: Duration) {
        self.count += 1;
        self.total += rtt;
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        self.max = Some(self.max.map_or(rtt, |m| m.max(rtt)));
    }

    /// Mean round trip, if any ping completed.
    pub fn avg(&self) -> Option<Duration> {
        u32::try_from(self.count)
            .ok()
            .filter(|&n| n > 0)
            .map(|n| self.total / n)
            .or_else(|| {
                // More pings than a u32 counts: divide in floating point.
                (self.count > 0).then(|| self.total.div_f64(self.count as f64))
            })
    }
}

/// What the client prints at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The server, as the user named it, and its address.
    pub target: String,
    /// Octets per ping.
    pub size: u32,
    /// Round trips.
    pub rtt: RttStats,
    /// Wall time from the first ping to the last.
    pub elapsed: Duration,
    /// Whether the run was cut short by Ctrl-C.
    pub interrupted: bool,
}

impl Summary {
    /// The summary lines (ending in a newline).
    pub fn render(&self) -> String {
        let mut s = String::new();
        let n = self.rtt.count;
        let bytes = n * u64::from(self.size);
        let _ = writeln!(s, "--- {} iwarp ping statistics ---", self.target);
        let _ = writeln!(
            s,
            "{n} {} of {} bytes, {bytes} bytes each way, time {}{}",
            if n == 1 { "ping" } else { "pings" },
            self.size,
            ms(self.elapsed),
            if self.interrupted {
                " (interrupted)"
            } else {
                ""
            }
        );
        if let (Some(min), Some(avg), Some(max)) = (self.rtt.min, self.rtt.avg(), self.rtt.max) {
            let _ = writeln!(
                s,
                "rtt min/avg/max = {}/{}/{} ms",
                ms_value(min),
                ms_value(avg),
                ms_value(max)
            );
        }
        s
    }
}

fn ms_value(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn ms(d: Duration) -> String {
    format!("{} ms", ms_value(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_summary() {
        let mut rtt = RttStats::default();
        assert_eq!(rtt.avg(), None);
        for us in [300, 100, 200] {
            rtt.add(Duration::from_micros(us));
        }
        assert_eq!(rtt.count, 3);
        assert_eq!(rtt.min, Some(Duration::from_micros(100)));
        assert_eq!(rtt.max, Some(Duration::from_micros(300)));
        assert_eq!(rtt.avg(), Some(Duration::from_micros(200)));
        let s = Summary {
            target: "127.0.0.1:7174".into(),
            size: 64,
            rtt,
            elapsed: Duration::from_micros(1500),
            interrupted: false,
        };
        assert_eq!(
            s.render(),
            "--- 127.0.0.1:7174 iwarp ping statistics ---\n\
             3 pings of 64 bytes, 192 bytes each way, time 1.500 ms\n\
             rtt min/avg/max = 0.100/0.200/0.300 ms\n"
        );
    }

    #[test]
    fn empty_interrupted_run() {
        let s = Summary {
            target: "h:1".into(),
            size: 26,
            rtt: RttStats::default(),
            elapsed: Duration::ZERO,
            interrupted: true,
        };
        assert_eq!(
            s.render(),
            "--- h:1 iwarp ping statistics ---\n0 pings of 26 bytes, 0 bytes each way, time 0.000 ms (interrupted)\n"
        );
    }
}
