//! The parameters of a perftest run, with perftest's defaults and the adjustments it makes
//! to them (`init_perftest_params` and `force_dependecies` in its `perftest_parameters.c`).
//!
//! perftest does not tell its peer the test, the size or the iteration count: both ends
//! must be started with the same options, and each derives the rest (queue depths, CQ
//! moderation, whether peak bandwidth is measured) by the same rules. Those rules decide
//! what goes on the wire (how many Sends a receiver posts for, when it returns credits), so
//! they are reproduced here exactly.

use crate::perf::spec::{Measure, TestKind, MAX_ITERATIONS, MAX_SWEEP_SIZE, MIN_ITERATIONS};

/// perftest's default number of iterations (`DEF_ITERS`).
pub const DEF_ITERS: u64 = 1000;
/// perftest's default number of iterations of `ib_write_bw` (`DEF_ITERS_WB`).
pub const DEF_ITERS_WB: u64 = 5000;
/// Default bandwidth test size (`DEF_SIZE_BW`).
pub const DEF_SIZE_BW: u64 = 65536;
/// Default latency test size (`DEF_SIZE_LAT`).
pub const DEF_SIZE_LAT: u64 = 2;
/// Default send queue depth of bandwidth tests (`DEF_TX_BW`).
pub const DEF_TX_BW: u32 = 128;
/// Default send queue depth of latency tests (`DEF_TX_LAT`).
pub const DEF_TX_LAT: u32 = 1;
/// Default receive queue depth of Send tests (`DEF_RX_SEND`).
pub const DEF_RX_SEND: u32 = 512;
/// Default receive queue depth of the others (`DEF_RX_RDMA`).
pub const DEF_RX_RDMA: u32 = 1;
/// Default CQ moderation (`DEF_CQ_MOD`): one completion asked for every so many.
pub const DEF_CQ_MOD: u32 = 100;
/// Above this size CQ moderation is turned off (`MSG_SIZE_CQ_MOD_LIMIT`).
pub const MSG_SIZE_CQ_MOD_LIMIT: u64 = 8192;
/// Above this many iterations perftest stops measuring peak bandwidth.
pub const PEAK_ITERS_LIMIT: u64 = 20000;
/// perftest's largest queue depth (`MAX_TX`, `MAX_RX` is larger; one bound here).
pub const MAX_DEPTH: u32 = 15000;
/// perftest's largest number of queue pairs (`MAX_QP_NUM`); kept lower here, each has a
/// connection.
pub const MAX_QPS: u32 = 1024;
/// Outstanding RDMA Reads offered when `-o` is not given. perftest asks the device; Linux
/// `siw` answers 128 (`SIW_MAX_ORD_QP`), so an `iwarp perf` peer looks like a `siw` one.
pub const DEF_OUT_READS: u32 = 128;
/// The largest `-o`: what an MPA revision 2 IRD/ORD word holds.
pub const MAX_OUT_READS: u32 = 16383;
/// Page size perftest announces as its cycle buffer on Linux x86-64 (`sysconf(_SC_PAGESIZE)`).
pub const CYCLE_BUFFER: u32 = 4096;
/// Cache line size perftest announces on x86-64.
pub const CACHE_LINE_SIZE: u32 = 64;
/// The `ibv_mtu` this end announces: 5 (4096), the largest, so that the peer keeps its own
/// (perftest runs with the smaller of the two).
pub const ANNOUNCED_MTU: u8 = 5;

/// Which end: perftest's client is the one given a server address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Connects (the `servername` end).
    Client,
    /// Listens.
    Server,
}

/// How long each size runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// `-n`: iterations per queue pair.
    Iterations(u64),
    /// `-D`: whole seconds, of which `margin` at each end are not measured (`-f`, default a
    /// quarter).
    Duration {
        /// Seconds in all.
        secs: u32,
        /// Unmeasured seconds at the start and at the end.
        margin: u32,
    },
}

/// What the user asked for, before perftest's rules are applied.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Options {
    /// `-s`.
    pub size: Option<u64>,
    /// `-a`.
    pub all: bool,
    /// `-n`.
    pub iters: Option<u64>,
    /// `-D` in seconds.
    pub duration: Option<u32>,
    /// `-t`.
    pub tx_depth: Option<u32>,
    /// `-r`.
    pub rx_depth: Option<u32>,
    /// `-q`; `None` on a server learns it from the client's connections.
    pub qps: Option<u32>,
    /// `-o`.
    pub out_reads: Option<u32>,
    /// `-Q`.
    pub cq_mod: Option<u32>,
    /// `-N`.
    pub no_peak: bool,
    /// `--report_gbits`.
    pub gbits: bool,
    /// `-b`: both ends send.
    pub duplex: bool,
}

/// A perftest run's parameters, as perftest would settle them.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// The operation.
    pub test: TestKind,
    /// Bandwidth or latency.
    pub measure: Measure,
    /// Which end this is.
    pub side: Side,
    /// Message sizes, in run order.
    pub sizes: Vec<u64>,
    /// `-a`: every size from 2 to 2^23.
    pub run_all: bool,
    /// The size buffers are made for (`ctx->size`: the largest size).
    pub buffer_size: u64,
    /// Iterations or duration.
    pub length: Length,
    /// Send queue depth.
    pub tx_depth: u32,
    /// Receive queue depth (Send tests: receives posted per queue pair).
    pub rx_depth: u32,
    /// A completion is asked for every `cq_mod` Writes, Reads or Sends (bandwidth tests).
    pub cq_mod: u32,
    /// Queue pairs; `None` until a server has counted the client's connections.
    pub qps: Option<u32>,
    /// Outstanding RDMA Reads offered (read tests; 1 otherwise, as perftest sends it).
    pub out_reads: u32,
    /// Peak bandwidth is not measured.
    pub no_peak: bool,
    /// Bandwidth in Gb/s instead of MiB/s.
    pub gbits: bool,
    /// `-b`: both ends send, and each prints the sum of the two reports.
    pub duplex: bool,
}

impl Params {
    /// Applies perftest's defaults and rules to `opts` for `test`/`measure` on `side`.
    pub fn resolve(
        test: TestKind,
        measure: Measure,
        side: Side,
        opts: &Options,
    ) -> Result<Self, String> {
        let bw = measure == Measure::Bw;
        let send = test == TestKind::Send;
        if opts.all && opts.size.is_some() {
            return Err("-a and -s exclude each other".into());
        }
        if opts.duration.is_some() && opts.iters.is_some() {
            return Err("-n and -D exclude each other".into());
        }
        if opts.duplex && !bw {
            return Err("-b (bidirectional) is for bandwidth tests".into());
        }
        let length = match opts.duration {
            Some(0) => return Err("-D must be at least 1 second".into()),
            Some(secs) => {
                if opts.all {
                    return Err(
                        "perftest's duration mode does not run all sizes (-a with -D)".into(),
                    );
                }
                Length::Duration {
                    secs,
                    margin: secs / 4,
                }
            }
            None => {
                let n = opts.iters.unwrap_or(if bw && test == TestKind::Write {
                    DEF_ITERS_WB
                } else {
                    DEF_ITERS
                });
                if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&n) {
                    return Err(format!(
                        "-n {n} out of perftest's range {MIN_ITERATIONS}..={MAX_ITERATIONS}"
                    ));
                }
                Length::Iterations(n)
            }
        };
        let size = opts
            .size
            .unwrap_or(if bw { DEF_SIZE_BW } else { DEF_SIZE_LAT });
        if size == 0 || size > MAX_SWEEP_SIZE {
            return Err(format!("-s {size} out of range 1..={MAX_SWEEP_SIZE}"));
        }
        let sizes: Vec<u64> = if opts.all {
            (1..24).map(|shift| 1u64 << shift).collect()
        } else {
            vec![size]
        };
        let buffer_size = sizes.iter().copied().max().unwrap_or(size);

        let mut tx_depth = opts
            .tx_depth
            .unwrap_or(if bw { DEF_TX_BW } else { DEF_TX_LAT });
        let mut rx_depth = opts
            .rx_depth
            .unwrap_or(if send { DEF_RX_SEND } else { DEF_RX_RDMA });
        for (name, v) in [("-t", tx_depth), ("-r", rx_depth)] {
            if v == 0 || v > MAX_DEPTH {
                return Err(format!("{name} {v} out of range 1..={MAX_DEPTH}"));
            }
        }
        if let Length::Iterations(n) = length {
            tx_depth = tx_depth.min(u32::try_from(n).unwrap_or(u32::MAX));
            if send {
                rx_depth = rx_depth.min(u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        // perftest: "WA for a bug when rx_depth is odd in SEND".
        if send && rx_depth % 2 == 1 && !opts.all {
            rx_depth += 1;
        }

        let mut cq_mod = match opts.cq_mod {
            Some(0) => return Err("-Q must be at least 1".into()),
            Some(q) => q,
            None => DEF_CQ_MOD,
        };
        if size > MSG_SIZE_CQ_MOD_LIMIT && !opts.all && opts.cq_mod.is_none() {
            cq_mod = 1;
        }
        cq_mod = cq_mod.min(tx_depth);

        if let Some(q) = opts.qps {
            if q == 0 || q > MAX_QPS {
                return Err(format!("-q {q} out of range 1..={MAX_QPS}"));
            }
        }
        let out_reads = if test == TestKind::Read {
            let o = opts.out_reads.unwrap_or(DEF_OUT_READS);
            if o == 0 || o > MAX_OUT_READS {
                return Err(format!("-o {o} out of range 1..={MAX_OUT_READS}"));
            }
            o
        } else {
            1
        };

        let mut no_peak = opts.no_peak;
        match length {
            Length::Duration { .. } => no_peak = true,
            Length::Iterations(n) if bw && n > PEAK_ITERS_LIMIT => no_peak = true,
            Length::Iterations(_) => {}
        }
        if send && bw && side == Side::Server && !opts.duplex {
            no_peak = true;
        }
        Ok(Self {
            test,
            measure,
            side,
            sizes,
            run_all: opts.all,
            buffer_size,
            length,
            tx_depth,
            rx_depth,
            cq_mod,
            qps: opts.qps.or(match side {
                Side::Client => Some(1),
                Side::Server => None,
            }),
            out_reads,
            no_peak,
            gbits: opts.gbits,
            duplex: opts.duplex,
        })
    }

    /// Iterations per queue pair, 0 in duration mode (perftest's `iters` before it counts).
    pub fn iters(&self) -> u64 {
        match self.length {
            Length::Iterations(n) => n,
            Length::Duration { .. } => 0,
        }
    }

    /// IRD and ORD this end asks for or grants on its data connections: the outstanding
    /// reads for read tests, none otherwise (perftest's `responder_resources` and
    /// `initiator_depth`).
    pub fn ird_ord(&self) -> u16 {
        if self.test == TestKind::Read {
            u16::try_from(self.out_reads).unwrap_or(u16::MAX)
        } else {
            0
        }
    }

    /// Whether this end sends test traffic: a client, or either end of a bidirectional
    /// test, or either end of a latency test but `ib_read_lat`'s server.
    pub fn active(&self) -> bool {
        match (self.side, self.measure, self.test) {
            (Side::Client, _, _) => true,
            (Side::Server, Measure::Bw, _) => self.duplex,
            (Side::Server, Measure::Lat, t) => t != TestKind::Read,
        }
    }

    /// Whether this is `-D`.
    pub fn duration(&self) -> bool {
        matches!(self.length, Length::Duration { .. })
    }

    /// perftest's test name, as in its banner and its binary (`ib_write_bw`).
    pub fn binary(&self) -> String {
        format!("ib_{}_{}", self.test, self.measure)
    }
}

/// perftest's `BUFF_SIZE`: buffers never smaller than the cycle buffer.
pub fn buff_size(size: u64, cycle_buffer: u64) -> u64 {
    size.max(cycle_buffer)
}

/// perftest's `INC`: the stride between consecutive messages in a cycle buffer, at least a
/// cache line.
pub fn inc(size: u64, cache_line: u64) -> u64 {
    if size > cache_line && cache_line > 0 {
        size.div_ceil(cache_line) * cache_line
    } else {
        cache_line.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(test: TestKind, measure: Measure, side: Side, o: Options) -> Params {
        Params::resolve(test, measure, side, &o).unwrap()
    }

    #[test]
    fn perftest_defaults() {
        let p = resolve(
            TestKind::Write,
            Measure::Bw,
            Side::Client,
            Options::default(),
        );
        assert_eq!(p.sizes, vec![65536]);
        assert_eq!(p.length, Length::Iterations(5000));
        assert_eq!((p.tx_depth, p.rx_depth), (128, 1));
        // 64 KiB is above the CQ moderation limit.
        assert_eq!(p.cq_mod, 1);
        assert_eq!(p.out_reads, 1);
        assert!(!p.no_peak);
        assert_eq!(p.qps, Some(1));

        let p = resolve(
            TestKind::Read,
            Measure::Lat,
            Side::Server,
            Options::default(),
        );
        assert_eq!(p.sizes, vec![2]);
        assert_eq!(p.length, Length::Iterations(1000));
        assert_eq!((p.tx_depth, p.cq_mod, p.out_reads), (1, 1, 128));
        assert_eq!(p.qps, None);
        assert_eq!(p.ird_ord(), 128);
        assert_eq!(p.binary(), "ib_read_lat");
    }

    /// What the recorded `-n 20 -s 64` runs printed: TX depth 20, CQ Moderation 20, and
    /// `ib_send_bw` posting 20 receives and crediting every 6.
    #[test]
    fn small_runs_as_recorded() {
        let o = Options {
            size: Some(64),
            iters: Some(20),
            ..Options::default()
        };
        let p = resolve(TestKind::Write, Measure::Bw, Side::Client, o.clone());
        assert_eq!((p.tx_depth, p.cq_mod), (20, 20));
        let p = resolve(TestKind::Send, Measure::Bw, Side::Server, o.clone());
        assert_eq!(p.rx_depth, 20);
        assert!(p.no_peak, "a send bandwidth server measures no peak");
        let p = resolve(TestKind::Send, Measure::Bw, Side::Client, o.clone());
        assert!(!p.no_peak);
        // An odd receive depth is made even, except with -a.
        let odd = Options {
            iters: Some(21),
            ..o.clone()
        };
        assert_eq!(
            resolve(TestKind::Send, Measure::Lat, Side::Client, odd).rx_depth,
            22
        );
        let p = resolve(TestKind::Write, Measure::Lat, Side::Client, o.clone());
        assert_eq!((p.tx_depth, p.cq_mod), (1, 1));
        // Bidirectional: a send server measures its peak too; latency tests have no -b.
        let b = Options {
            duplex: true,
            ..o.clone()
        };
        let p = resolve(TestKind::Send, Measure::Bw, Side::Server, b.clone());
        assert!(!p.no_peak && p.active());
        assert!(Params::resolve(TestKind::Send, Measure::Lat, Side::Client, &b).is_err());
        assert!(!resolve(TestKind::Read, Measure::Lat, Side::Server, o.clone()).active());
        assert!(resolve(TestKind::Send, Measure::Lat, Side::Server, o).active());
    }

    #[test]
    fn all_sizes_and_duration() {
        let p = resolve(
            TestKind::Send,
            Measure::Bw,
            Side::Client,
            Options {
                all: true,
                iters: Some(7),
                ..Options::default()
            },
        );
        assert_eq!(p.sizes.len(), 23);
        assert_eq!((p.sizes[0], p.buffer_size), (2, 8 << 20));
        assert_eq!(p.rx_depth, 7, "odd, but -a keeps it");
        assert_eq!(p.cq_mod, 7, "-a keeps CQ moderation, capped at the depth");
        let p = resolve(
            TestKind::Write,
            Measure::Bw,
            Side::Client,
            Options {
                duration: Some(5),
                ..Options::default()
            },
        );
        assert_eq!(p.length, Length::Duration { secs: 5, margin: 1 });
        assert!(p.no_peak);
        assert_eq!(p.iters(), 0);
        assert_eq!(p.tx_depth, 128);
        let e = Params::resolve(
            TestKind::Write,
            Measure::Bw,
            Side::Client,
            &Options {
                duration: Some(5),
                all: true,
                ..Options::default()
            },
        );
        assert!(e.unwrap_err().contains("-a with -D"));
    }

    #[test]
    fn bounds() {
        let bad = |o: Options| Params::resolve(TestKind::Read, Measure::Bw, Side::Client, &o);
        assert!(bad(Options {
            iters: Some(4),
            ..Options::default()
        })
        .is_err());
        assert!(bad(Options {
            size: Some(0),
            ..Options::default()
        })
        .is_err());
        assert!(bad(Options {
            qps: Some(0),
            ..Options::default()
        })
        .is_err());
        assert!(bad(Options {
            out_reads: Some(20000),
            ..Options::default()
        })
        .is_err());
        assert!(
            bad(Options {
                iters: Some(30000),
                ..Options::default()
            })
            .unwrap()
            .no_peak
        );
    }

    #[test]
    fn buffer_geometry() {
        assert_eq!(buff_size(64, 4096), 4096);
        assert_eq!(buff_size(65536, 4096), 65536);
        assert_eq!(inc(2, 64), 64);
        assert_eq!(inc(64, 64), 64);
        assert_eq!(inc(65, 64), 128);
        assert_eq!(inc(4096, 64), 4096);
        assert_eq!(inc(5, 0), 1);
    }
}
