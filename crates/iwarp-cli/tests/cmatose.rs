//! End-to-end tests of `iwarp cmatose` over loopback, our client against our server, run as
//! the built binary: ucmatose's exchange on several connections with every octet checked,
//! the client's private data reaching the server, each RTR type of peer-to-peer mode, and
//! MPA's rule that a server sends nothing first, said in words. Every child process is
//! bounded in time and killed if it overruns; nothing leaves 127.0.0.1.

use std::time::Duration;

mod common;

use common::{output_bounded, spawn, Output, Server};

/// Far above what any of these runs needs.
const LIMIT: Duration = Duration::from_secs(60);

fn server(args: &[&str]) -> Server {
    let mut all = vec!["cmatose", "-b", "127.0.0.1", "-p", "0"];
    all.extend_from_slice(args);
    Server::start(&all, LIMIT)
}

fn client(server: &Server, args: &[&str]) -> Output {
    let addr = server.addr.to_string();
    let mut all = vec!["cmatose", "-s", &addr];
    all.extend_from_slice(args);
    output_bounded(spawn(&all), LIMIT, "iwarp cmatose -s")
}

/// The progress lines of `out`, without the per-connection ones.
fn steps(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| !l.starts_with("connection"))
        .collect()
}

#[test]
fn ucmatose_exchange_in_peer_to_peer_mode_with_each_rtr() {
    for rtr in ["write", "read", "send"] {
        let s = server(&["-c", "3", "-C", "25", "-S", "4000", "-V", "--p2p", rtr]);
        let c = client(
            &s,
            &[
                "-c",
                "3",
                "-C",
                "25",
                "-S",
                "4000",
                "-V",
                "-v",
                "--p2p",
                rtr,
                "--private-data",
                "hello siw",
            ],
        );
        assert!(
            c.status.success(),
            "{rtr}: client: {}{}",
            c.stdout,
            c.stderr
        );
        let served = s.finish();
        assert!(
            served.status.success(),
            "{rtr}: server: {}{}",
            served.stdout,
            served.stderr
        );
        assert_eq!(
            steps(&c.stdout),
            [
                "cmatose: starting client",
                "cmatose: connecting",
                "receiving data transfers",
                "sending replies",
                "data transfers complete",
                "test complete",
                "return status 0"
            ],
            "{rtr}"
        );
        assert_eq!(
            steps(&served.stdout),
            [
                "cmatose: starting server",
                "initiating data transfers",
                "completing sends",
                "receiving data transfers",
                "data transfers complete",
                "cmatose: disconnecting",
                "disconnected",
                "test complete",
                "return status 0"
            ],
            "{rtr}"
        );
        let requests: Vec<&str> = served
            .stdout
            .lines()
            .filter(|l| l.starts_with("connection request from 127.0.0.1:"))
            .collect();
        assert_eq!(requests.len(), 3, "{}", served.stdout);
        for r in requests {
            assert!(
                r.ends_with("MPA revision 2, 9 octets of private data: \"hello siw\""),
                "{r}"
            );
        }
        // -v: each connection's parameters, the RTR type among them.
        let want = format!(
            "peer-to-peer with a {}{} RTR",
            &rtr[..1].to_uppercase(),
            &rtr[1..]
        );
        let described = c.stdout.lines().filter(|l| l.contains(&want)).count();
        assert_eq!(described, 3, "{}", c.stdout);
    }
}

#[test]
fn a_server_waiting_for_the_first_message_says_why() {
    // Without peer-to-peer mode the server may not send first (RFC 5044 §7.1.2 rule 4) and
    // the client waits for the server: both give up after their timeout, and the server
    // says why.
    let s = server(&["-C", "3", "--timeout", "2"]);
    let c = client(&s, &["-C", "3", "--timeout", "2"]);
    let served = s.finish();
    assert!(!c.status.success());
    assert!(!served.status.success());
    assert!(
        c.stderr.contains(
            "no answer from the server within 2 s on connection 0 (receiving message 1 of 3)"
        ),
        "{}",
        c.stderr
    );
    assert!(
        served.stderr.contains(
            "the client has sent nothing, and an MPA server may send nothing before the \
             client's first message (RFC 5044, 7.1.2 rule 4)"
        ),
        "{}",
        served.stderr
    );
    assert!(
        served.stdout.ends_with("return status 1\n"),
        "{}",
        served.stdout
    );
}
