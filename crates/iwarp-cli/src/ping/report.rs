//! Round-trip statistics and the closing summary, in the spirit of ping(8).
//!
//! rping prints nothing at the end; a connectivity test that says how many round trips
//! worked and how long they took is more useful, and costs rping users nothing (the
//! per-ping `-v` lines are rping's). Statistics are kept as running values, so an unlimited
//! run uses constant memory.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

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

/// The summary as `--json` prints it.
#[derive(Debug, Serialize)]
struct SummaryJson<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    target: &'a str,
    size: u32,
    pings: u64,
    bytes: u64,
    elapsed_ms: f64,
    rtt_min_ms: Option<f64>,
    rtt_avg_ms: Option<f64>,
    rtt_max_ms: Option<f64>,
    interrupted: bool,
    error: Option<&'a str>,
}

impl Summary {
    /// The summary as one JSON object (no newline), with the error that ended the run, if
    /// one did.
    pub fn json(&self, error: Option<&str>) -> String {
        // Milliseconds to the microsecond, as the text says them.
        let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
        serde_json::to_string(&SummaryJson {
            kind: "summary",
            target: &self.target,
            size: self.size,
            pings: self.rtt.count,
            bytes: self.rtt.count * u64::from(self.size),
            elapsed_ms: ms(self.elapsed),
            rtt_min_ms: self.rtt.min.map(ms),
            rtt_avg_ms: self.rtt.avg().map(ms),
            rtt_max_ms: self.rtt.max.map(ms),
            interrupted: self.interrupted,
            error,
        })
        .unwrap_or_default()
    }
}

/// A server's line about one client, as `--json` prints it: who, how many pings, and the
/// error that ended the session, if one did.
pub fn served_json(peer: SocketAddr, pings: u64, error: Option<&str>) -> String {
    #[derive(Serialize)]
    struct Served<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        peer: String,
        pings: u64,
        error: Option<&'a str>,
    }
    serde_json::to_string(&Served {
        kind: "client",
        peer: peer.to_string(),
        pings,
        error,
    })
    .unwrap_or_default()
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
    fn json_forms() {
        let mut rtt = RttStats::default();
        rtt.add(Duration::from_micros(250));
        let s = Summary {
            target: "h (192.0.2.1:7174)".into(),
            size: 64,
            rtt,
            elapsed: Duration::from_micros(500),
            interrupted: false,
        };
        let v: serde_json::Value = serde_json::from_str(&s.json(None)).unwrap();
        assert_eq!(v["type"], "summary");
        assert_eq!(v["target"], "h (192.0.2.1:7174)");
        assert_eq!(
            (v["pings"].as_u64(), v["bytes"].as_u64()),
            (Some(1), Some(64))
        );
        assert_eq!(v["rtt_avg_ms"].as_f64(), Some(0.25));
        assert_eq!(v["elapsed_ms"].as_f64(), Some(0.5));
        assert!(v["error"].is_null());
        let empty = Summary {
            rtt: RttStats::default(),
            ..s
        };
        let v: serde_json::Value = serde_json::from_str(&empty.json(Some("refused"))).unwrap();
        assert!(v["rtt_min_ms"].is_null());
        assert_eq!(v["error"], "refused");
        let line = served_json("192.0.2.1:5000".parse().unwrap(), 3, None);
        assert_eq!(
            line,
            r#"{"type":"client","peer":"192.0.2.1:5000","pings":3,"error":null}"#
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
