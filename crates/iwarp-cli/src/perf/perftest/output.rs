//! What an `iwarp perf --perftest` end prints: perftest's own banner (`ctx_print_test_info`),
//! address lines (`ctx_print_pingpong_data`) and result table, line for line, so that the
//! two ends of a run can be read side by side and scripts that parse perftest parse us.
//!
//! The table rows reuse the native mode's renderings of perftest's `REPORT_FMT` and
//! `REPORT_FMT_LAT`; the bandwidth header is current perftest's (`MiB/sec`; perftest 6.06
//! labels the same figures `MB/sec`).

use std::fmt::Write as _;

use crate::perf::report::{
    bw_line, lat_line, BW_HEADER_GBITS, BW_HEADER_MIB, LAT_HEADER, RESULT_LINE,
};
use crate::perf::spec::{Measure, TestKind};

use super::figures::{BwFigures, LatFigures};
use super::params::{Length, Params, Side};
use super::wire::Dest;

/// perftest's `RESULT_FMT_LAT_DUR`: the latency header of `-D` runs.
pub const LAT_DUR_HEADER: &str = " #bytes        #iterations       t_avg[usec]    tps average";

/// The title line's verb (`testsStr`).
fn verb(test: TestKind) -> &'static str {
    match test {
        TestKind::Send => "Send",
        TestKind::Write => "RDMA_Write",
        TestKind::Read => "RDMA_Read",
    }
}

/// perftest's banner for this end: test, connection and queue settings.
pub fn test_info(p: &Params, qps: u32, mtu_octets: u32) -> String {
    let mut out = String::new();
    let kind = match (p.measure, p.duplex) {
        (Measure::Bw, false) => "BW ",
        (Measure::Bw, true) => "Bidirectional BW ",
        (Measure::Lat, _) => "Latency ",
    };
    let _ = writeln!(out, "{RESULT_LINE}");
    let _ = writeln!(out, "                    {} {kind}Test", verb(p.test));
    let _ = writeln!(out, " Dual-port       : OFF\t\tDevice         : iwarp");
    let _ = writeln!(out, " Number of qps   : {qps}\t\tTransport type : IW");
    let _ = writeln!(out, " Connection type : RC\t\tUsing SRQ      : OFF");
    let _ = writeln!(out, " PCIe relax order: Unsupported");
    let _ = writeln!(out, " ibv_wr* API     : OFF");
    if p.side == Side::Client || p.duplex {
        let _ = writeln!(out, " TX depth        : {}", p.tx_depth);
    }
    if p.test == TestKind::Send && (p.side == Side::Server || p.duplex) {
        let _ = writeln!(out, " RX depth        : {}", p.rx_depth);
    }
    if p.measure == Measure::Bw {
        let _ = writeln!(out, " CQ Moderation   : {}", p.cq_mod);
    }
    let _ = writeln!(out, " Mtu             : {mtu_octets}[B]");
    let _ = writeln!(out, " Link type       : Ethernet");
    let _ = writeln!(out, " GID index       : 0");
    if p.test == TestKind::Read {
        let _ = writeln!(out, " Outstand reads  : {}", p.out_reads);
    } else {
        let _ = writeln!(out, " Max inline data : 0[B]");
    }
    let _ = writeln!(out, " rdma_cm QPs\t : ON");
    let _ = write!(out, " Data ex. method : rdma_cm");
    if p.side == Side::Server {
        let _ = writeln!(out);
        let _ = writeln!(out, "{RESULT_LINE}");
        let _ = writeln!(out, " Waiting for client rdma_cm QP to connect");
        let _ = write!(
            out,
            " Please run the same command with the IB/RoCE interface IP"
        );
    }
    let _ = writeln!(out);
    let _ = write!(out, "{RESULT_LINE}");
    out
}

/// printf's `%#0Nx`: `0x` and zero padding to `width` in all, or plain zeros for 0.
fn alt_hex(v: u32, width: usize) -> String {
    if v == 0 {
        format!("{:0width$}", 0)
    } else {
        format!("{v:#0width$x}")
    }
}

/// perftest's address lines for one queue pair (`local` or `remote`), its GID included.
pub fn address(side: &str, d: &Dest) -> String {
    let gid: Vec<String> = d.gid.iter().map(|b| format!("{b:02}")).collect();
    format!(
        " {side} address: LID {} QPN {} PSN {}\n GID: {}",
        alt_hex(d.lid, 4),
        alt_hex(d.qpn, 6),
        alt_hex(d.psn, 6),
        gid.join(":")
    )
}

/// The table header, preceded by perftest's separator.
pub fn header(p: &Params) -> String {
    let h = match (p.measure, p.length, p.gbits) {
        (Measure::Lat, Length::Duration { .. }, _) => LAT_DUR_HEADER,
        (Measure::Lat, _, _) => LAT_HEADER,
        (Measure::Bw, _, false) => BW_HEADER_MIB,
        (Measure::Bw, _, true) => BW_HEADER_GBITS,
    };
    format!("{RESULT_LINE}\n{h}")
}

/// A bandwidth row (perftest's `REPORT_FMT`).
pub fn bw_row(f: &BwFigures) -> String {
    bw_line(f.size, f.iters, f.peak, f.avg, f.msg_rate)
}

/// A latency row (perftest's `REPORT_FMT_LAT`).
pub fn lat_row(f: &LatFigures) -> String {
    lat_line(
        f.size, f.iters, f.min, f.max, f.typical, f.avg, f.stdev, f.p99, f.p99_9,
    )
}

/// A `-D` latency row (perftest's `REPORT_FMT_LAT_DUR`).
pub fn lat_duration_row(size: u64, iters: u64, avg: f64, tps: f64) -> String {
    format!(" {size:<7}       {iters}            {avg:<7.2}        {tps:<7.2}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::perftest::params::Options;

    /// The lines perftest 6.06 printed in the recorded run, for a destination it sent.
    #[test]
    fn address_lines_as_perftest_prints_them() {
        let d = Dest {
            qpn: 2,
            psn: 0xe686e1,
            gid: [
                0x52, 0x54, 0, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
            ..Dest::default()
        };
        assert_eq!(
            address("remote", &d),
            " remote address: LID 0000 QPN 0x0002 PSN 0xe686e1\n \
             GID: 82:84:00:18:52:86:00:00:00:00:00:00:00:00:00:00"
        );
    }

    /// The recorded `ib_write_bw -R -n 20 -s 64` client banner, but for the device name,
    /// the relaxed ordering line, and the MTU we settle on.
    #[test]
    fn banner_like_perftest() {
        let p = Params::resolve(
            TestKind::Write,
            Measure::Bw,
            Side::Client,
            &Options {
                size: Some(64),
                iters: Some(20),
                ..Options::default()
            },
        )
        .unwrap();
        let b = test_info(&p, 1, 1024);
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines[1], "                    RDMA_Write BW Test");
        assert!(lines.contains(&" Number of qps   : 1\t\tTransport type : IW"));
        assert!(lines.contains(&" TX depth        : 20"));
        assert!(lines.contains(&" CQ Moderation   : 20"));
        assert!(lines.contains(&" Mtu             : 1024[B]"));
        assert!(lines.contains(&" rdma_cm QPs\t : ON"));
        assert!(lines.contains(&" Data ex. method : rdma_cm"));
        assert_eq!(lines.first(), lines.last());
        let s = Params::resolve(
            TestKind::Send,
            Measure::Lat,
            Side::Server,
            &Options::default(),
        )
        .unwrap();
        let b = test_info(&s, 1, 1024);
        assert!(b.contains(" Waiting for client rdma_cm QP to connect"));
        assert!(b.contains(" RX depth        : 512"));
        assert!(!b.contains("TX depth"));
        assert!(!b.contains("CQ Moderation"));
    }

    #[test]
    fn rows() {
        let f = BwFigures {
            size: 64,
            iters: 20,
            peak: 0.63,
            avg: 0.05,
            msg_rate: 0.000781,
        };
        assert_eq!(
            bw_row(&f),
            " 64         20               0.63               0.05   \t\t   0.000781"
        );
        assert_eq!(
            lat_duration_row(2, 1000, 1.5, 2000.0),
            " 2             1000            1.50           2000.00"
        );
    }
}
