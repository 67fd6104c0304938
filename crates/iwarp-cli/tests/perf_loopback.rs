//! End-to-end tests of `iwarp perf` over loopback TCP: they run the built binary and check
//! that the reported byte and iteration counts (client's and server's) equal what the spec
//! implies. No timing is asserted; every child process is bounded in time and killed if it
//! overruns.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use serde_json::Value;

mod common;

use common::{iwarp_command, output_bounded, under_file_limits, Output, BIN};

/// Far above what any of these runs needs (well under a second each in release builds).
const LIMIT: Duration = Duration::from_secs(120);

fn perf(args: &[&str]) -> Output {
    let child = iwarp_command(&[])
        .arg("perf")
        .args(args)
        .spawn()
        .expect("spawn iwarp");
    output_bounded(child, LIMIT, &format!("iwarp perf {args:?}"))
}

fn perf_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = perf(&all);
    assert!(
        out.status.success(),
        "iwarp perf {args:?} failed: {}",
        out.stderr
    );
    // stdout must be exactly one JSON document: no table, no progress.
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", out.stdout))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// Checks one result row against `size × iters` per connection.
fn check_row(row: &Value, size: u64, iters: u64, conns: u64) {
    assert_eq!(u(&row["size"]), size);
    assert_eq!(u(&row["iterations"]), iters * conns, "{row}");
    assert_eq!(u(&row["bytes"]), size * iters * conns, "{row}");
    assert_eq!(u(&row["peer_bytes"]), size * iters * conns, "{row}");
    let per_conn = row["connections"].as_array().expect("connections");
    assert_eq!(per_conn.len() as u64, conns);
    for c in per_conn {
        assert_eq!(u(&c["iterations"]), iters);
        assert_eq!(u(&c["bytes"]), size * iters);
        assert_eq!(u(&c["peer_bytes"]), size * iters);
        assert_eq!(u(&c["peer_messages"]), iters);
    }
}

#[test]
fn every_test_kind_moves_exactly_the_specified_bytes() {
    // Over iWARP the server's counts come from its engine (one-sided
    // operations leave no completion there), over TCP from its reads.
    for transport in ["iwarp", "tcp"] {
        for test in ["write", "read", "send"] {
            for measure in ["bw", "lat"] {
                let (size, iters, conns) = (4096u64, 40u64, 2u64);
                let report = perf_json(&[
                    test,
                    measure,
                    "-s",
                    "4096",
                    "-n",
                    "40",
                    "-q",
                    "2",
                    "--warmup",
                    "7",
                    "--transport",
                    transport,
                ]);
                assert_eq!(report["spec"]["test"], test);
                assert_eq!(report["spec"]["measure"], measure);
                assert_eq!(report["mode"], "loopback");
                let runs = report["runs"].as_array().expect("runs");
                assert_eq!(runs.len(), 1);
                assert_eq!(runs[0]["transport"], transport);
                assert_eq!(runs[0]["role"], "primary");
                let rows = runs[0]["results"].as_array().expect("results");
                assert_eq!(rows.len(), 1);
                let row = &rows[0];
                // Warm-up operations are not part of the measured counts.
                check_row(row, size, iters, conns);
                assert_eq!(u(&report["summary"]["total_bytes"]), size * iters * conns);
                match measure {
                    "bw" => {
                        assert!(row["lat"].is_null());
                        assert!(row["bw"]["avg_bytes_per_sec"].as_f64().is_some());
                        assert!(row["bw"]["peak_bytes_per_sec"].as_f64().is_some());
                    }
                    _ => {
                        assert!(row["bw"].is_null());
                        assert_eq!(u(&row["lat"]["samples"]), iters * conns);
                        let basis = if test == "read" {
                            "round_trip"
                        } else {
                            "half_round_trip"
                        };
                        assert_eq!(row["lat"]["basis"], basis);
                    }
                }
            }
        }
    }
}

#[test]
fn ift_framing_moves_exactly_the_specified_bytes() {
    // IFT carries no private data in its startup: each data connection's
    // hello is its first Send, so several connections, each kind, and a
    // separate server (which learns the framing from the client's spec).
    let server = Server::start();
    let target = format!("127.0.0.1:{}", server.port);
    for (test, crc, markers) in [
        ("write", "both", "none"),
        ("read", "header", "both"),
        ("send", "none", "rx"),
    ] {
        let knobs = ["--framing", "ift", "--ift-crc", crc, "--markers", markers];
        let common = [
            test, "bw", "-s", "3000", "-n", "20", "-q", "3", "--warmup", "2",
        ];
        let loopback = perf_json(&[&common[..], &knobs[..]].concat());
        assert_eq!(loopback["spec"]["protocol"]["framing"], "ift");
        assert_eq!(loopback["spec"]["protocol"]["ift_crc"], crc);
        check_row(&loopback["runs"][0]["results"][0], 3000, 20, 3);
        let remote = perf_json(&[&common[..], &knobs[..], &["--connect", &target]].concat());
        check_row(&remote["runs"][0]["results"][0], 3000, 20, 3);
    }
}

/// A run whose connections cannot fit under the hard limit on open files
/// fails at once, saying so; under a low soft limit alone it raises the
/// soft limit and runs.
#[cfg(target_os = "linux")]
#[test]
fn open_file_limit_is_raised_or_reported() {
    let soft = under_file_limits("perf write bw -s 1K -n 20 -q 120", LIMIT);
    if let Some(out) = soft {
        assert!(out.status.success(), "{}", out.stderr);
        assert!(out.stdout.contains("120 connections"), "{}", out.stdout);
    }
}

#[test]
fn all_sizes_sweep_reports_every_power_of_two() {
    let report = perf_json(&["write", "bw", "-a", "-n", "5", "--warmup", "0"]);
    let rows = report["runs"][0]["results"].as_array().expect("results");
    assert_eq!(rows.len(), 23);
    for (i, row) in rows.iter().enumerate() {
        check_row(row, 2u64 << i, 5, 1);
    }
}

#[test]
fn duration_mode_counts_what_it_posted_and_skips_peak() {
    let report = perf_json(&["send", "bw", "-s", "1K", "-D", "0.2", "-t", "8"]);
    assert_eq!(report["spec"]["length"]["duration"], 0.2);
    let row = &report["runs"][0]["results"][0];
    let iters = u(&row["iterations"]);
    assert!(iters > 0);
    check_row(row, 1024, iters, 1);
    assert!(row["bw"]["peak_bytes_per_sec"].is_null());
}

#[test]
fn baseline_runs_side_by_side() {
    let report = perf_json(&["read", "bw", "-s", "2K", "-n", "30", "--baseline", "tcp"]);
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["role"], "primary");
    assert_eq!(runs[1]["role"], "baseline");
    for run in runs {
        check_row(&run["results"][0], 2048, 30, 1);
    }
    let cmp = &report["comparison"];
    assert_eq!(cmp["metric"], "avg_bytes_per_sec");
    assert_eq!(cmp["primary"], "iwarp");
    assert_eq!(cmp["baseline"], "tcp");
    let row = &cmp["rows"][0];
    assert_eq!(u(&row["size"]), 2048);
    let (p, b, r) = (
        row["primary"].as_f64().unwrap(),
        row["baseline"].as_f64().unwrap(),
        row["ratio"].as_f64().unwrap(),
    );
    assert!((r - p / b).abs() <= 1e-9 * r.abs());
    // Each run says what CPU time the process spent on it, and per GiB moved; the
    // comparison sets the two per-octet figures side by side.
    let per_gib: Vec<f64> = runs
        .iter()
        .map(|run| {
            let res = &run["results"][0];
            let cpu = res["cpu_s"].as_f64().expect("cpu_s");
            assert!(cpu > 0.0, "{res}");
            let gib = u(&res["bytes"]) as f64 / f64::from(1u32 << 30);
            let per = res["cpu_s_per_gib"].as_f64().expect("cpu_s_per_gib");
            assert!((per - cpu / gib).abs() <= 1e-9 * per);
            per
        })
        .collect();
    let cpu_ratio = row["cpu_ratio"].as_f64().expect("cpu_ratio");
    assert!((cpu_ratio - per_gib[0] / per_gib[1]).abs() <= 1e-9 * cpu_ratio);
    assert_eq!(u(&report["summary"]["total_bytes"]), 2 * 2048 * 30);
}

#[test]
fn human_table_has_perftest_layout() {
    let out = perf(&["write", "bw", "-s", "4096", "-n", "20"]);
    assert!(out.status.success(), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let header =
        " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
    let at = lines
        .iter()
        .position(|l| *l == header)
        .unwrap_or_else(|| panic!("no BW header in:\n{}", out.stdout));
    assert!(lines[at + 1].starts_with(" 4096       20               "));
    assert_eq!(lines[at + 1].matches('\t').count(), 2);
    assert!(lines.contains(&"                    RDMA_Write BW Test"));
    assert!(lines.contains(&" BW unit         : MiB/sec = 2^20 bytes per second"));
    let last = lines.last().expect("summary line");
    assert!(
        last.starts_with(" iwarp perf: write bw over iwarp: 81920 bytes measured in "),
        "{last}"
    );

    let out = perf(&["read", "lat", "-n", "20"]);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stdout.lines().any(
        |l| l.starts_with(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]")
    ));
    assert!(out
        .stdout
        .lines()
        .any(|l| l.starts_with(" 2       20          ")));
}

/// A server process, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(BIN)
            .args(["perf", "--server", "--port", "0", "--bind", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let stdout = child.stdout.take().expect("stdout piped");
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("server did not announce its port");
            }
        };
        // "iwarp perf server listening on 127.0.0.1:PORT; ..."
        let port = line
            .split_once("listening on ")
            .and_then(|(_, rest)| rest.split(';').next())
            .and_then(|addr| addr.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected server banner: {line}"));
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn separate_server_learns_the_test_from_the_client() {
    let server = Server::start();
    let target = format!("127.0.0.1:{}", server.port);
    // Two sessions in a row against the same server, with different specs.
    let report = perf_json(&[
        "read",
        "bw",
        "-s",
        "512",
        "-n",
        "25",
        "-q",
        "3",
        "--connect",
        &target,
    ]);
    assert_eq!(report["mode"], "client");
    check_row(&report["runs"][0]["results"][0], 512, 25, 3);
    let report = perf_json(&["send", "lat", "-s", "100", "-n", "10", "--connect", &target]);
    check_row(&report["runs"][0]["results"][0], 100, 10, 1);
}

#[test]
fn errors_are_clear_and_exit_non_zero() {
    // A port with nobody listening: bind one, note it, close it.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("ephemeral port")
        .port();
    let out = perf(&["--connect", &format!("127.0.0.1:{port}")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("connection refused"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "nothing printed before connecting");

    let out = perf(&["-n", "10", "-D", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = perf(&["-n", "4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.contains("iterations 4"), "{}", out.stderr);

    // A "server" that hangs up at once, and one that is not an iwarp perf server at all.
    for (reply, expect) in [
        (&b""[..], "closed the connection"),
        (
            &b"HTTP/1.1 400 Bad Request\r\n\r\n"[..],
            "not an iwarp perf peer",
        ),
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let fake = thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                let _ = s.write_all(reply);
            }
        });
        let out = perf(&["--connect", &format!("127.0.0.1:{port}")]);
        let _ = fake.join();
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stderr.contains(expect), "{}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
}

/// `iwarp -v perf`: after the run, each end's data connection prints its counters on
/// stdout, the client's then the server's; they agree with each other and with the run (the
/// measured and warm-up Writes, each one FPDU of 2 + 14 + 4096 + 4 octets, and the
/// zero-length Reads that fence them, 2 + 18 + 28 + 4 octets each).
#[test]
fn verbose_prints_both_ends_counters() {
    let child = iwarp_command(&[])
        .args([
            "-v", "perf", "write", "bw", "-s", "4096", "-n", "20", "--warmup", "5",
        ])
        .spawn()
        .expect("spawn iwarp");
    let out = output_bounded(child, LIMIT, "iwarp -v perf");
    assert!(out.status.success(), "{}", out.stderr);
    let line = |side: &str| {
        let prefix = format!("{side} data connection 0: 127.0.0.1:");
        out.stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {side} counters in:\n{}", out.stdout))
            .to_owned()
    };
    let (client, server) = (line("client"), line("server"));
    let at = |l: &str| out.stdout.lines().position(|x| x == l).unwrap();
    assert!(at(&client) < at(&server));
    // "sent A octets in B PDUs, received C octets in D PDUs; ..."
    let numbers = |l: &str| -> Vec<u64> {
        let (_, rest) = l.split_once(": sent ").expect(l);
        let words = rest.split(|c: char| !c.is_ascii_digit());
        words.filter_map(|w| w.parse().ok()).collect()
    };
    let (c, s) = (numbers(&client), numbers(&server));
    assert_eq!(c[..4], [s[2], s[3], s[0], s[1]], "{client}\n{server}");
    assert!(client.contains("RDMA Writes 25/0"), "{client}");
    assert!(server.contains("RDMA Writes 0/25"), "{server}");
    let reads = |l: &str| -> u64 {
        let (_, rest) = l.split_once("Read Requests ").expect(l);
        rest.split('/').next().unwrap().parse().unwrap()
    };
    let fences = reads(&client);
    assert_eq!(c[0], 25 * (2 + 14 + 4096 + 4) + fences * (2 + 18 + 28 + 4));
    assert_eq!(c[1], 25 + fences);
    assert!(!client.contains("CRC") && !server.contains("CRC"));
}
