//! The command's conventions, end to end: the exit statuses `iwarp --help` documents (2 for
//! a wrong command line, 1 for a failure, 0 for success, the same in every subcommand),
//! shell completions and manual pages generated from the command, and `--json` on `ping`.
//! Every child process is bounded in time; nothing leaves 127.0.0.1.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::time::Duration;

mod common;

use common::{drain, iwarp_command, output_bounded, wait_bounded, Output};

/// Far above what any of these runs needs.
const LIMIT: Duration = Duration::from_secs(60);

fn iwarp(args: &[&str]) -> Output {
    let child = iwarp_command(args).spawn().expect("spawn iwarp");
    output_bounded(child, LIMIT, &format!("iwarp {args:?}"))
}

#[test]
fn a_wrong_command_line_exits_2_in_every_subcommand() {
    for sub in ["perf", "ping", "decode", "soak", "completions", "man"] {
        let out = iwarp(&[sub, "--no-such-option"]);
        assert_eq!(out.status.code(), Some(2), "{sub}: {}", out.stderr);
    }
    assert_eq!(iwarp(&["no-such-subcommand"]).status.code(), Some(2));
    assert_eq!(iwarp(&["completions", "tcsh"]).status.code(), Some(2));
    // The subcommands' own checks agree with clap's.
    let out = iwarp(&["ping", "--connect", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
}

#[test]
fn a_failure_exits_1_in_every_subcommand() {
    // A port that is taken: the servers cannot listen; a port nobody listens on: the
    // clients are refused.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut runs: Vec<Vec<&str>> = vec![
        vec!["soak", "--server", "--addr", "127.0.0.1", "--port", &port],
        vec!["soak", "--connect", &closed, "-D", "0.2", "-q", "1"],
        vec!["ping", "--server", "-a", "127.0.0.1", "-p", &port],
        vec!["perf", "--connect", &closed, "-n", "5"],
    ];
    if cfg!(feature = "decode") {
        runs.push(vec!["decode", "/nonexistent/capture.pcap"]);
    }
    for args in &runs {
        let out = iwarp(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
}

#[test]
fn completions_and_manual_pages_come_from_the_command() {
    let out = iwarp(&["completions", "zsh"]);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stdout.starts_with("#compdef iwarp"), "{}", out.stdout);
    for word in ["perf", "ping", "soak", "--baseline", "--persistent"] {
        assert!(out.stdout.contains(word), "zsh completion lacks {word}");
    }
    let out = iwarp(&["completions", "fish"]);
    assert!(out.stdout.contains("complete -c iwarp"), "{}", out.stdout);

    let out = iwarp(&["man"]);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stdout.contains(".TH iwarp 1"), "{}", out.stdout);
    assert!(out.stdout.contains("Exit status"), "{}", out.stdout);

    let dir = std::env::temp_dir().join(format!("iwarp-cli-man-{}", std::process::id()));
    let out = iwarp(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", out.stderr);
    let perf = std::fs::read_to_string(dir.join("iwarp-perf.1")).unwrap();
    assert!(perf.contains(".TH iwarp-perf 1"), "{perf}");
    assert!(perf.contains("baseline"), "{perf}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ping_reports_json_on_both_sides() {
    let mut server = iwarp_command(&["ping", "--server", "-a", "127.0.0.1", "-p", "0", "--json"])
        .spawn()
        .expect("spawn the server");
    let served = drain(server.stdout.take().unwrap());
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("listening on ")
        .nth(1)
        .unwrap_or_else(|| panic!("no address in `{line}`"))
        .trim()
        .to_string();
    let _rest = drain(stderr);

    let out = iwarp(&["ping", "--connect", &addr, "-C", "3", "-S", "100", "--json"]);
    assert!(out.status.success(), "{}", out.stderr);
    let summary: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["pings"], 3);
    assert_eq!(summary["size"], 100);
    assert_eq!(summary["bytes"], 300);
    assert!(summary["rtt_min_ms"].as_f64().unwrap() <= summary["rtt_max_ms"].as_f64().unwrap());
    assert!(summary["error"].is_null());

    assert!(wait_bounded(&mut server, LIMIT, "the server").success());
    let served = served.join().unwrap();
    let client: serde_json::Value = serde_json::from_str(served.trim()).unwrap();
    assert_eq!(client["type"], "client");
    assert_eq!(client["pings"], 3);
    assert!(client["peer"].as_str().unwrap().starts_with("127.0.0.1:"));

    // rping's data lines would break the JSON: the two do not go together.
    assert_eq!(
        iwarp(&["ping", "--connect", &addr, "--json", "-v"])
            .status
            .code(),
        Some(2)
    );
}
