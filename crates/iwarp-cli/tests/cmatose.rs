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

/// siw's ucmatose server, replayed from the rig (docs/interop.md): it answers rdma-core's
/// Request (`1002 0004 0001 0001`) with the same words and Sends its messages at once,
/// before our client's first FPDU (siw does not wait as MPA rule 4 asks; here they arrive
/// while our client still holds its first FPDU after the Reply). Our client must take them
/// all, answer with as many Sends of the same size, and end cleanly when siw disconnects.
#[test]
fn siws_ucmatose_server_sends_first_and_our_client_copes() {
    use std::io::{Read, Write};
    const KEY_REQ: &str = "4d504120494420526571204672616d65";
    const KEY_REP: &str = "4d504120494420526570204672616d65";
    // siw's two 64-octet Sends (MSN 1 and 2; the payload is what ucmatose's buffer held).
    const PAYLOAD: &str = "e927096405000000000000000000000010000000782d676e30987e9240560000\
                           0000000000000000e0e77e924056000002001d30000000000000000000000000";
    let send = |msn: u32| {
        common::hex(&format!(
            "0052 4143 00000000 00000000 {msn:08x} 00000000 {PAYLOAD} 00000000"
        ))
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let client = spawn(&[
        "cmatose", "-s", &addr, "-C", "2", "-S", "64", "--crc", "off",
    ]);
    let (mut stream, _) = listener.accept().expect("accept");
    stream.set_read_timeout(Some(LIMIT)).expect("timeout");
    let mut request = [0u8; 24];
    stream.read_exact(&mut request).expect("Request");
    assert_eq!(
        request[..],
        common::hex(&format!("{KEY_REQ} 1002 0004 0001 0001"))[..]
    );
    let mut burst = common::hex(&format!("{KEY_REP} 1002 0004 0001 0001"));
    burst.extend(send(1));
    burst.extend(send(2));
    stream.write_all(&burst).expect("Reply and Sends");
    // Our client's answers: two Sends (QN 0, MSN 1 and 2) of 64 octets each, no CRC.
    for msn in 1..=2u32 {
        let mut fpdu = [0u8; 2 + 18 + 64 + 4];
        stream.read_exact(&mut fpdu).expect("a Send");
        assert_eq!(fpdu[..2], [0x00, 0x52], "ULPDU_Length 82");
        assert_eq!(fpdu[2..4], [0x41, 0x43], "untagged last Send");
        assert_eq!(fpdu[8..12], [0, 0, 0, 0], "QN 0");
        assert_eq!(u32::from_be_bytes(fpdu[12..16].try_into().unwrap()), msn);
        assert_eq!(fpdu[84..], [0; 4], "no CRC");
    }
    // ucmatose's server disconnects once it has its messages.
    stream.shutdown(std::net::Shutdown::Both).expect("close");
    drop(stream);
    let out = output_bounded(client, LIMIT, "iwarp cmatose -s");
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("data transfers complete"),
        "{}",
        out.stdout
    );
}
