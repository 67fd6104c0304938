//! `iwarp perf --perftest` against itself over loopback: a server process and a client
//! process speaking perftest's rdma_cm protocol, as `ib_*_* -R` would with the same
//! options. The tables must agree where perftest's would (a bandwidth server prints the
//! client's report; every row has the size and iteration count asked for); ends started
//! for different tests must each say so in one line and exit non-zero, without hanging.
//! No timing is asserted; every child is bounded in time.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

mod common;

use common::{drain, iwarp_command, output_bounded, under_file_limits, wait_bounded, Output};

const LIMIT: Duration = Duration::from_secs(120);

/// Runs a perftest-mode server with `server_args` and a client with `client_args`
/// against it; returns (server, client) outputs.
fn pair(server_args: &[&str], client_args: &[&str]) -> (Output, Output) {
    let mut server = iwarp_command(&[])
        .arg("perf")
        .args(server_args)
        .args(["--server", "--bind", "127.0.0.1", "-p", "0"])
        .spawn()
        .expect("spawn server");
    let out = drain(server.stdout.take().expect("stdout"));
    let err = server.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let err = thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let line = rx.recv_timeout(LIMIT).expect("the server's listening line");
    let addr: SocketAddr = line
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in `{line}`"));
    let target = addr.to_string();
    let client = iwarp_command(&[])
        .arg("perf")
        .args(client_args)
        .args(["--connect", &target])
        .spawn()
        .expect("spawn client");
    let client = output_bounded(client, LIMIT, &format!("client {client_args:?}"));
    let status = wait_bounded(&mut server, LIMIT, &format!("server {server_args:?}"));
    let server = Output {
        status,
        stdout: out.join().expect("stdout"),
        stderr: err.join().expect("stderr"),
    };
    (server, client)
}

/// The rows after the table header.
fn rows(out: &str) -> Vec<String> {
    out.lines()
        .skip_while(|l| !l.contains("#bytes"))
        .skip(1)
        .take_while(|l| !l.starts_with("---"))
        .map(str::to_string)
        .collect()
}

/// The first two columns of a row: size and iterations.
fn size_iters(row: &str) -> (u64, u64) {
    let mut f = row
        .split_whitespace()
        .map(|c| c.parse::<u64>().expect("a number"));
    (f.next().expect("size"), f.next().expect("iterations"))
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}",
        o.stderr,
        o.stdout
    );
}

#[test]
fn every_test_at_both_ends() {
    for (test, measure, qps) in [
        ("write", "bw", "2"),
        ("read", "bw", "2"),
        ("send", "bw", "2"),
        ("write", "lat", "1"),
        ("read", "lat", "1"),
        ("send", "lat", "1"),
    ] {
        let args = [test, measure, "-R", "-s", "4096", "-n", "50", "-q", qps];
        let (server, client) = pair(&args, &args);
        let what = format!("{test} {measure}");
        ok(&server, &format!("{what} server"));
        ok(&client, &format!("{what} client"));
        let c = rows(&client.stdout);
        assert_eq!(c.len(), 1, "{what}: {}", client.stdout);
        let q: u64 = qps.parse().unwrap();
        let iters = if measure == "bw" { 50 * q } else { 50 };
        assert_eq!(size_iters(&c[0]), (4096, iters), "{what}");
        assert!(client
            .stdout
            .contains(&format!(" Number of qps   : {qps}\t\t")));
        let s = rows(&server.stdout);
        match (test, measure) {
            // Write and read bandwidth servers print the client's report.
            ("write" | "read", "bw") => assert_eq!(s, c, "{what}"),
            // ib_read_lat's server prints no table.
            ("read", "lat") => assert!(s.is_empty(), "{what}: {}", server.stdout),
            _ => {
                assert_eq!(s.len(), 1, "{what}: {}", server.stdout);
                assert_eq!(size_iters(&s[0]), (4096, iters), "{what}");
            }
        }
        // Both ends print each other's queue pairs.
        for o in [&server, &client] {
            assert_eq!(
                o.stdout.matches(" remote address: LID 0000 QPN").count(),
                q as usize
            );
        }
    }
}

/// `-b`: both ends send and print the sum of the two reports, so the same row.
#[test]
fn bidirectional() {
    for test in ["write", "read", "send"] {
        let args = [test, "bw", "-R", "-b", "-s", "4096", "-n", "50", "-q", "2"];
        let (server, client) = pair(&args, &args);
        ok(&server, &format!("{test} server"));
        ok(&client, &format!("{test} client"));
        let c = rows(&client.stdout);
        assert_eq!(c.len(), 1, "{test}: {}", client.stdout);
        assert_eq!(size_iters(&c[0]), (4096, 100), "{test}");
        assert_eq!(rows(&server.stdout), c, "{test}");
        assert!(client.stdout.contains(" Bidirectional BW Test"));
    }
}

/// `-a` runs every size from 2 to 8 MiB at both ends, with a hand shake around each size
/// of a send test.
#[test]
fn all_sizes() {
    let args = ["send", "bw", "-R", "-a", "-n", "5"];
    let (server, client) = pair(&args, &args);
    ok(&server, "server");
    ok(&client, "client");
    for o in [&server, &client] {
        let sizes: Vec<u64> = rows(&o.stdout).iter().map(|r| size_iters(r).0).collect();
        assert_eq!(sizes, (1..24).map(|s| 1u64 << s).collect::<Vec<_>>());
    }
}

/// `--report_gbits` (perftest's spelling): Gb/s columns at both ends, the same row.
#[test]
fn report_in_gbits() {
    let args = [
        "read",
        "bw",
        "-R",
        "-s",
        "65536",
        "-n",
        "50",
        "--report_gbits",
    ];
    let (server, client) = pair(&args, &args);
    ok(&server, "server");
    ok(&client, "client");
    for o in [&server, &client] {
        assert!(
            o.stdout.contains("BW peak[Gb/sec]    BW average[Gb/sec]"),
            "{}",
            o.stdout
        );
    }
    assert_eq!(rows(&server.stdout), rows(&client.stdout));
}

/// `-D`: the client posts for the duration; the peak is not measured.
#[test]
fn duration_mode() {
    let args = ["write", "bw", "-R", "-s", "1024", "-D", "2"];
    let (server, client) = pair(&args, &args);
    ok(&server, "server");
    ok(&client, "client");
    let c = rows(&client.stdout);
    let cols: Vec<&str> = c[0].split_whitespace().collect();
    assert_eq!(cols[0], "1024");
    assert!(cols[1].parse::<u64>().unwrap() > 0, "{c:?}");
    assert_eq!(cols[2], "0.00", "no peak with -D");
    assert_eq!(rows(&server.stdout), c);
}

/// In-process loopback: `iwarp perf read lat -R` alone.
#[test]
fn loopback_in_one_process() {
    let child = iwarp_command(&[])
        .args(["perf", "read", "lat", "-R", "-n", "20", "-s", "64"])
        .spawn()
        .expect("spawn");
    let out = output_bounded(child, LIMIT, "loopback");
    ok(&out, "loopback");
    assert_eq!(size_iters(&rows(&out.stdout)[0]), (64, 20));
    assert!(out.stdout.contains("RDMA_Read Latency Test"));
}

/// `-q` beyond what the open-file limit allows fails at once, saying so, as outside
/// perftest mode; a low soft limit alone is raised.
#[cfg(target_os = "linux")]
#[test]
fn open_file_limit_is_raised_or_reported() {
    let soft = under_file_limits("perf write bw -R -s 1024 -n 20 -q 120", LIMIT);
    if let Some(out) = soft {
        ok(&out, "under a raised soft limit");
        assert_eq!(size_iters(&rows(&out.stdout)[0]), (1024, 20 * 120));
    }
}

/// The one line each end prints for a run it cannot serve.
fn error_line(o: &Output) -> &str {
    assert!(!o.status.success(), "expected a failure: {}", o.stdout);
    o.stderr
        .lines()
        .find(|l| l.starts_with("iwarp perf: error:"))
        .unwrap_or_else(|| panic!("no error line: {}", o.stderr))
}

/// A read client at a write server: the server refuses its data connection (MPA Reject);
/// both say why.
#[test]
fn a_read_test_against_a_write_server() {
    let (server, client) = pair(
        &["write", "bw", "-R", "-s", "64", "-n", "20"],
        &["read", "bw", "-R", "-s", "64", "-n", "20"],
    );
    let s = error_line(&server);
    assert!(
        s.contains("runs a read test") && s.contains("ib_write_bw"),
        "{s}"
    );
    let c = error_line(&client);
    assert!(
        c.contains("refused data connection 0") && c.contains("ib_read_bw"),
        "{c}"
    );
}

/// A send bandwidth client at a write bandwidth server: the same exchanges up to the test,
/// then Sends the server never posted receives for.
#[test]
fn a_send_test_against_a_write_server() {
    let (server, client) = pair(
        &["write", "bw", "-R", "-s", "64", "-n", "20"],
        &["send", "bw", "-R", "-s", "64", "-n", "20"],
    );
    let s = error_line(&server);
    assert!(
        s.contains("data connection 0") && s.contains("ib_write_bw"),
        "{s}"
    );
    // The server's DDP layer refused the first Send (no receive posted for it) with a
    // Terminate, which the client reads, or has no time to read before the connection
    // is gone.
    let c = error_line(&client);
    assert!(
        c.contains("data connection 0") && c.contains("ib_send_bw"),
        "{c}"
    );
}

/// Write latency with different sizes: each end sees the other's Writes miss its polled
/// octet and says which size the peer uses.
#[test]
fn write_latency_with_different_sizes() {
    let (server, client) = pair(
        &["write", "lat", "-R", "-s", "64", "-n", "20"],
        &["write", "lat", "-R", "-s", "128", "-n", "20"],
    );
    let c = error_line(&client);
    assert!(c.contains("the peer writes 64-octet messages"), "{c}");
    error_line(&server);
}

/// A client with more queue pairs than the server was started for: the server says so.
#[test]
fn a_different_number_of_queue_pairs() {
    let (server, client) = pair(
        &["write", "bw", "-R", "-s", "64", "-n", "20", "-q", "2"],
        &["write", "bw", "-R", "-s", "64", "-n", "20", "-q", "3"],
    );
    let s = error_line(&server);
    assert!(
        s.contains("made 3 data connections") && s.contains("-q 2"),
        "{s}"
    );
    error_line(&client);
}

/// Native-only options are refused with --perftest, and the other way round.
#[test]
fn options_of_the_other_mode_are_refused() {
    for args in [
        vec!["perf", "-R", "--json"],
        vec!["perf", "-R", "--baseline", "tcp"],
        vec!["perf", "-R", "-D", "1.5"],
        vec!["perf", "-r", "16"],
    ] {
        let child = iwarp_command(&[]).args(&args).spawn().expect("spawn");
        let out = output_bounded(child, LIMIT, &format!("{args:?}"));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", out.stderr);
    }
}
