//! `iwarp soak` over loopback, run as the built binary: a short run with
//! both ends in one process must verify data on every connection and end
//! without errors; a client without a server must fail clearly. Bounded in
//! time; nothing leaves 127.0.0.1.

use std::time::Duration;

mod common;

use common::{iwarp_command, output_bounded};

const LIMIT: Duration = Duration::from_secs(120);

fn soak(args: &[&str]) -> common::Output {
    let child = iwarp_command(&[])
        .arg("soak")
        .args(args)
        .spawn()
        .expect("spawn iwarp");
    output_bounded(child, LIMIT, &format!("iwarp soak {args:?}"))
}

#[test]
fn a_loopback_run_verifies_every_operation() {
    let out = soak(&[
        "-D", "1", "-q", "3", "-t", "2", "-s", "20000", "--json", "--seed", "7",
    ]);
    assert!(out.status.success(), "{}", out.stderr);
    let line = out.stdout.lines().last().expect("a summary line");
    let s: serde_json::Value = serde_json::from_str(line).expect("JSON");
    assert_eq!(s["type"], "summary");
    assert_eq!(s["errors"], 0, "{line}");
    assert_eq!(s["connections"], 3);
    assert_eq!(s["connections_completed"], 3);
    for kind in ["sends", "writes", "reads"] {
        assert!(s[kind].as_u64().unwrap() > 0, "no {kind}: {line}");
    }
    let ops = s["operations"].as_u64().unwrap();
    assert_eq!(
        ops,
        ["sends", "writes", "reads"]
            .iter()
            .map(|k| s[k].as_u64().unwrap())
            .sum::<u64>()
    );
    assert!(s["bytes_verified"].as_u64().unwrap() >= ops);
}

#[test]
fn a_client_without_a_server_fails_with_errors_counted() {
    // A port nobody listens on: every connection fails, and says so.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("127.0.0.1:{port}");
    let out = soak(&["--connect", &target, "-D", "1", "-q", "2", "--json"]);
    assert!(!out.status.success());
    let s: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(s["connection_errors"], 2);
    assert_eq!(s["errors"], 2);
    assert!(out.stderr.contains("refused"), "{}", out.stderr);
}
