//! The order of a perftest run: which messages the two ends exchange on perftest's
//! exchange channel, when the data connections are made, when receives are posted and when
//! traffic flows, for each of the six tests and both ends.
//!
//! Every exchange is a pair of Sends: the client sends its message first and then waits
//! for the server's; the server waits first and answers (perftest's `ctx_hand_shake` and
//! `ctx_xchg_data`). The sequences are those of perftest's `write_bw.c`, `read_bw.c`,
//! `send_bw.c`, `write_lat.c`, `read_lat.c` and `send_lat.c` (6.06 to 6.27) in rdma_cm
//! mode, as recorded between two perftests over Linux `siw`: a script is plain data, so
//! tests compare it with the recordings and the runtime follows it step by step.

use crate::perf::spec::{Measure, TestKind};

use super::params::Side;
use super::wire;

/// The fields of perftest's bandwidth report exchange, in order (`xchg_bw_reports`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportField {
    /// Message size (`unsigned long`).
    Size,
    /// Iterations on all queue pairs (`uint64_t`).
    Iters,
    /// Peak bandwidth (`double`, in the sender's unit).
    Peak,
    /// Average bandwidth (`double`).
    Average,
    /// Message rate in Mpps (`double`).
    MsgRate,
}

impl ReportField {
    /// All fields, in exchange order.
    pub const ALL: [ReportField; 5] = [
        ReportField::Size,
        ReportField::Iters,
        ReportField::Peak,
        ReportField::Average,
        ReportField::MsgRate,
    ];
}

/// One message of the exchange channel, by its meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// The version strings.
    Version,
    /// The cycle buffer (page size); both ends take the larger.
    CycleBuffer,
    /// The cache line size; both ends take the larger.
    CacheLine,
    /// The MTU; both ends take the smaller.
    Mtu,
    /// A queue pair destination exchanged only to keep the two ends in step; `zeroed` before
    /// the destinations are known (perftest then sends all zeros).
    Sync {
        /// All zeros.
        zeroed: bool,
    },
    /// Queue pair `qp`'s destination; the peer's answer holds its keys for that pair.
    Keys {
        /// Queue pair index.
        qp: u32,
    },
    /// One field of the bandwidth report.
    Report(ReportField),
}

impl Message {
    /// What perftest calls it, for messages about a wrong one.
    pub fn what(self) -> &'static str {
        match self {
            Message::Version => "version string",
            Message::CycleBuffer => "cycle buffer size",
            Message::CacheLine => "cache line size",
            Message::Mtu => "MTU",
            Message::Sync { .. } => "synchronising hand shake",
            Message::Keys { .. } => "queue pair keys",
            Message::Report(ReportField::Size) => "report: message size",
            Message::Report(ReportField::Iters) => "report: iterations",
            Message::Report(ReportField::Peak) => "report: peak bandwidth",
            Message::Report(ReportField::Average) => "report: average bandwidth",
            Message::Report(ReportField::MsgRate) => "report: message rate",
        }
    }

    /// The octets perftest sends for it.
    pub fn octets(self) -> usize {
        match self {
            Message::Version => wire::VERSION_LEN,
            Message::CycleBuffer | Message::CacheLine => wire::INT_LEN,
            Message::Mtu => wire::MTU_LEN,
            Message::Sync { .. } | Message::Keys { .. } => wire::DEST_LEN,
            Message::Report(_) => wire::REPORT_FIELD_LEN,
        }
    }

    /// Whether a message of `got` octets may be this one (destinations come in two
    /// layouts).
    pub fn accepts_len(self, got: usize) -> bool {
        got == self.octets()
            || (matches!(self, Message::Sync { .. } | Message::Keys { .. })
                && got == wire::DEST_LEN_WITH_TAIL_MARKERS)
    }
}

/// One step of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Exchange one message (the client sends first).
    Exchange(Message),
    /// The client makes its data connections, one per queue pair; the server accepts them.
    Connect,
    /// This end posts its receives for `size`-octet Sends (before the exchange that lets
    /// the peer send).
    PostReceives {
        /// Message size.
        size: u64,
    },
    /// Test traffic of `size`-octet messages; this end takes part in it.
    Traffic {
        /// Message size.
        size: u64,
    },
    /// The peer runs traffic of `size`-octet messages that needs nothing from this end (the
    /// passive end of a one-sided bandwidth or read latency test): it waits at the next
    /// exchange.
    PeerTraffic {
        /// Message size.
        size: u64,
    },
}

/// Everything before the test proper, the same for all six tests: versions, buffer
/// geometry, MTU, a hand shake, the data connections, a hand shake.
pub fn prelude() -> Vec<Step> {
    vec![
        Step::Exchange(Message::Version),
        Step::Exchange(Message::CycleBuffer),
        Step::Exchange(Message::CacheLine),
        Step::Exchange(Message::Mtu),
        Step::Exchange(Message::Sync { zeroed: true }),
        Step::Connect,
        Step::Exchange(Message::Sync { zeroed: true }),
    ]
}

/// The rest of the run, once both ends know the number of queue pairs (`-b`: `duplex`;
/// `-D`: `duration`).
pub fn body(
    test: TestKind,
    measure: Measure,
    side: Side,
    qps: u32,
    sizes: &[u64],
    duplex: bool,
    duration: bool,
) -> Vec<Step> {
    let keys = |out: &mut Vec<Step>| {
        out.extend((0..qps).map(|qp| Step::Exchange(Message::Keys { qp })));
    };
    let sync = Step::Exchange(Message::Sync { zeroed: false });
    let report = |out: &mut Vec<Step>| {
        out.extend(
            ReportField::ALL
                .iter()
                .map(|&f| Step::Exchange(Message::Report(f))),
        );
    };
    let client = side == Side::Client;
    // A one-sided test's traffic: the client moves it, the server's memory is moved.
    let one_sided = |size| {
        if client {
            Step::Traffic { size }
        } else {
            Step::PeerTraffic { size }
        }
    };
    let all = sizes.len() > 1;
    let mut s = Vec::new();
    match (test, measure) {
        // Bidirectional: both ends send; after each size they trade reports and each
        // prints the sum (write_bw.c, read_bw.c and send_bw.c with `duplex`).
        (TestKind::Write | TestKind::Read, Measure::Bw) if duplex => {
            keys(&mut s);
            keys(&mut s);
            s.push(sync);
            for &size in sizes {
                s.push(sync);
                s.push(Step::Traffic { size });
                if all {
                    s.push(sync);
                }
                report(&mut s);
            }
            s.push(sync);
        }
        (TestKind::Send, Measure::Bw) if duplex => {
            keys(&mut s);
            s.push(sync);
            keys(&mut s);
            for &size in sizes {
                s.push(Step::PostReceives { size });
                s.push(sync);
                s.push(Step::Traffic { size });
                if !duration {
                    report(&mut s);
                }
                if all {
                    s.push(sync);
                }
            }
            s.push(sync);
        }
        (TestKind::Write | TestKind::Read, Measure::Bw) => {
            keys(&mut s);
            keys(&mut s);
            s.push(sync);
            s.extend(sizes.iter().map(|&size| one_sided(size)));
            s.push(sync);
            report(&mut s);
            s.push(sync);
        }
        (TestKind::Send, Measure::Bw) => {
            keys(&mut s);
            s.push(sync);
            keys(&mut s);
            for &size in sizes {
                if !client {
                    s.push(Step::PostReceives { size });
                }
                s.push(sync);
                s.push(Step::Traffic { size });
                if all {
                    s.push(sync);
                }
            }
            s.push(sync);
        }
        (TestKind::Write, Measure::Lat) => {
            s.push(sync);
            keys(&mut s);
            keys(&mut s);
            s.push(sync);
            s.extend(sizes.iter().map(|&size| Step::Traffic { size }));
        }
        (TestKind::Read, Measure::Lat) => {
            s.push(sync);
            keys(&mut s);
            keys(&mut s);
            s.push(sync);
            s.extend(sizes.iter().map(|&size| one_sided(size)));
            s.push(sync);
        }
        (TestKind::Send, Measure::Lat) => {
            keys(&mut s);
            s.push(sync);
            keys(&mut s);
            for &size in sizes {
                s.push(Step::PostReceives { size });
                s.push(sync);
                s.push(Step::Traffic { size });
            }
            s.push(sync);
        }
    }
    s
}

/// The sizes of the Sends of a whole run on the exchange channel, in order, one per
/// exchange (the same both ways): what a recording shows.
pub fn exchange_lengths(steps: &[Step]) -> Vec<usize> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Exchange(m) => Some(m.octets()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(test: TestKind, measure: Measure, side: Side, qps: u32, sizes: &[u64]) -> Vec<Step> {
        let mut s = prelude();
        s.extend(body(test, measure, side, qps, sizes, false, false));
        s
    }

    /// The exchange channel of the recorded `-n 20 -s 64` runs between two perftest 6.06
    /// over siw: the lengths of the Sends, in order (the same in both directions).
    #[test]
    fn exchanges_as_recorded() {
        let prelude = [16, 4, 4, 2, 56, 56];
        let recorded: [(TestKind, Measure, &[usize]); 6] = [
            (
                TestKind::Write,
                Measure::Bw,
                &[56, 56, 56, 56, 8, 8, 8, 8, 8, 56],
            ),
            (
                TestKind::Read,
                Measure::Bw,
                &[56, 56, 56, 56, 8, 8, 8, 8, 8, 56],
            ),
            (TestKind::Send, Measure::Bw, &[56, 56, 56, 56, 56]),
            (TestKind::Write, Measure::Lat, &[56, 56, 56, 56]),
            (TestKind::Read, Measure::Lat, &[56, 56, 56, 56, 56]),
            (TestKind::Send, Measure::Lat, &[56, 56, 56, 56, 56]),
        ];
        for (test, measure, rest) in recorded {
            let want: Vec<usize> = prelude.iter().chain(rest.iter()).copied().collect();
            for side in [Side::Client, Side::Server] {
                let steps = full(test, measure, side, 1, &[64]);
                assert_eq!(exchange_lengths(&steps), want, "{test} {measure} {side:?}");
            }
        }
    }

    /// Where the traffic sits among the exchanges, as recorded: after the fourth
    /// destination exchange for write and read bandwidth, after the server posted its
    /// receives and one more hand shake for send tests.
    #[test]
    fn traffic_positions() {
        let steps = full(TestKind::Send, Measure::Bw, Side::Server, 1, &[64]);
        let tail: Vec<Step> = steps[7..].to_vec();
        assert_eq!(
            tail,
            vec![
                Step::Exchange(Message::Keys { qp: 0 }),
                Step::Exchange(Message::Sync { zeroed: false }),
                Step::Exchange(Message::Keys { qp: 0 }),
                Step::PostReceives { size: 64 },
                Step::Exchange(Message::Sync { zeroed: false }),
                Step::Traffic { size: 64 },
                Step::Exchange(Message::Sync { zeroed: false }),
            ]
        );
        let client = full(TestKind::Send, Measure::Bw, Side::Client, 1, &[64]);
        assert!(!client
            .iter()
            .any(|s| matches!(s, Step::PostReceives { .. })));
        let server = full(TestKind::Write, Measure::Bw, Side::Server, 1, &[64]);
        assert!(server.contains(&Step::PeerTraffic { size: 64 }));
        let lat = full(TestKind::Read, Measure::Lat, Side::Server, 1, &[64]);
        assert!(lat.contains(&Step::PeerTraffic { size: 64 }));
        let lat = full(TestKind::Send, Measure::Lat, Side::Client, 1, &[64]);
        assert!(lat.contains(&Step::PostReceives { size: 64 }));
    }

    /// Several queue pairs: one destination exchange per pair, each round; all sizes
    /// with -a, with a hand shake around each for send bandwidth.
    #[test]
    fn queue_pairs_and_sizes() {
        let steps = body(
            TestKind::Write,
            Measure::Bw,
            Side::Client,
            3,
            &[2, 4],
            false,
            false,
        );
        let keys = steps
            .iter()
            .filter(|s| matches!(s, Step::Exchange(Message::Keys { .. })))
            .count();
        assert_eq!(keys, 6);
        assert_eq!(steps[2], Step::Exchange(Message::Keys { qp: 2 }));
        let traffic = steps
            .iter()
            .filter(|s| matches!(s, Step::Traffic { .. }))
            .count();
        assert_eq!(traffic, 2);
        let send = body(
            TestKind::Send,
            Measure::Bw,
            Side::Client,
            1,
            &[2, 4],
            false,
            false,
        );
        assert_eq!(exchange_lengths(&send).len(), 1 + 1 + 1 + 2 * 2 + 1);
    }

    /// `-b`, as recorded between two perftests (`ib_write_bw -b`, `ib_send_bw -b`, -n 20
    /// -s 64): after the destinations, a hand shake, traffic both ways, the two reports,
    /// the closing hand shake. Both ends run traffic.
    #[test]
    fn bidirectional_as_recorded() {
        for test in [TestKind::Write, TestKind::Send] {
            for side in [Side::Client, Side::Server] {
                let mut steps = prelude();
                steps.extend(body(test, Measure::Bw, side, 1, &[64], true, false));
                assert_eq!(
                    exchange_lengths(&steps),
                    [16, 4, 4, 2, 56, 56, 56, 56, 56, 56, 8, 8, 8, 8, 8, 56],
                    "{test} {side:?}"
                );
                assert!(steps.contains(&Step::Traffic { size: 64 }));
                assert!(!steps.iter().any(|s| matches!(s, Step::PeerTraffic { .. })));
            }
        }
        // With -D, ib_send_bw -b trades no report.
        let d = body(
            TestKind::Send,
            Measure::Bw,
            Side::Server,
            1,
            &[64],
            true,
            true,
        );
        assert!(!d
            .iter()
            .any(|s| matches!(s, Step::Exchange(Message::Report(_)))));
    }

    #[test]
    fn message_lengths() {
        assert!(Message::Keys { qp: 0 }.accepts_len(64));
        assert!(Message::Sync { zeroed: true }.accepts_len(56));
        assert!(!Message::Mtu.accepts_len(4));
        assert_eq!(Message::Report(ReportField::Iters).octets(), 8);
    }
}
