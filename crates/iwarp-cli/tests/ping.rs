//! End-to-end tests of `iwarp ping` over loopback: our client against our server, run as the
//! built binary. They check what rping users look at: the `-v` data lines of both sides (the
//! exact rping text), `-V` validation, the summary, the persistent server, and that failures
//! end with a clear message and a non-zero exit. Every child process is bounded in time and
//! killed if it overruns; nothing leaves 127.0.0.1.

use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus};
use std::thread;
use std::time::Duration;

mod common;

use common::{drain, output_bounded, Output, Server};

/// Far above what any of these runs needs.
const LIMIT: Duration = Duration::from_secs(60);

/// Waits for `child` at most [`LIMIT`], killing it on overrun.
fn wait_bounded(child: &mut Child, what: &str) -> ExitStatus {
    common::wait_bounded(child, LIMIT, what)
}

fn spawn_ping(args: &[&str]) -> Child {
    let mut all = vec!["ping"];
    all.extend_from_slice(args);
    common::spawn(&all)
}

/// Runs `iwarp ping ARGS` to the end.
fn ping(args: &[&str]) -> Output {
    output_bounded(spawn_ping(args), LIMIT, &format!("iwarp ping {args:?}"))
}

/// A running `iwarp ping --server ARGS` on an ephemeral loopback port.
fn start_server(args: &[&str]) -> Server {
    let mut all = vec!["ping", "--server", "-a", "127.0.0.1", "-p", "0"];
    all.extend_from_slice(args);
    Server::start(&all, LIMIT)
}

/// rping's text for ping `n` in a buffer of `size` octets (the NUL not included), written
/// out independently of the implementation.
fn rping_text(n: u64, size: usize) -> String {
    let mut s = format!("rdma-ping-{n}: ");
    let mut c = b'A' + (n % 58) as u8;
    while s.len() < size - 1 {
        s.push(char::from(c));
        c = if c == b'z' { b'A' } else { c + 1 };
    }
    s
}

fn data_lines<'a>(stdout: &'a str, prefix: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .collect()
}

fn expected_texts(count: u64, size: usize) -> Vec<String> {
    (0..count).map(|n| rping_text(n, size)).collect()
}

fn pings(count: u64) -> String {
    format!("{count} {}", if count == 1 { "ping" } else { "pings" })
}

#[test]
fn validated_pings_at_rping_sizes() {
    // Sizes: rping's minimum, its default, one past the server's default buffer (so the
    // server grows it), and rping's maximum. The server keeps its default -S throughout.
    for (size, count, crc) in [
        (26usize, 1u64, "on"),
        (64, 5, "on"),
        (1000, 3, "off"),
        (65535, 2, "on"),
    ] {
        let server = start_server(&["-v", "--crc", crc]);
        let addr = server.addr.to_string();
        let (s, c) = (size.to_string(), count.to_string());
        let out = ping(&[
            "--connect",
            &addr,
            "-S",
            &s,
            "-C",
            &c,
            "-V",
            "-v",
            "--crc",
            crc,
        ]);
        assert!(
            out.status.success(),
            "size {size}: client failed: {}",
            out.stderr
        );
        let want = expected_texts(count, size);
        assert_eq!(data_lines(&out.stdout, "ping data: "), want, "size {size}");
        assert!(
            out.stdout
                .contains(&format!("{} of {size} bytes, ", pings(count))),
            "{}",
            out.stdout
        );
        assert!(out.stdout.contains("rtt min/avg/max = "), "{}", out.stdout);

        // Without -P the server ends with its one client, successfully.
        let served = server.finish();
        assert!(served.status.success(), "server failed: {}", served.stderr);
        assert_eq!(data_lines(&served.stdout, "server ping data: "), want);
        assert!(
            served
                .stderr
                .contains(&format!("disconnected after {}", pings(count))),
            "{}",
            served.stderr
        );
    }
}

#[test]
fn rping_command_line_works_unchanged() {
    // rping -s -a ADDR -p PORT / rping -c -a ADDR -p PORT -C 3 -vV, grouped flags included.
    let server = start_server(&["-v"]);
    let port = server.addr.port().to_string();
    let out = ping(&["-c", "-a", "127.0.0.1", "-p", &port, "-C3", "-vV", "-S50"]);
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(
        data_lines(&out.stdout, "ping data: "),
        expected_texts(3, 50)
    );
    assert!(server.finish().status.success());
}

#[test]
fn persistent_server_serves_clients_one_after_another() {
    let mut server = start_server(&["-P", "-d"]);
    let addr = server.addr.to_string();
    for (count, size) in [(3u64, "64"), (4, "300")] {
        let c = count.to_string();
        let out = ping(&["--connect", &addr, "-C", &c, "-S", size, "-V"]);
        assert!(out.status.success(), "{}", out.stderr);
        assert!(out
            .stdout
            .contains(&format!("{} of {size} bytes", pings(count))));
        server.wait_for_line(&format!("disconnected after {}", pings(count)));
    }
    // Two at once as well: each has its own connection and buffers.
    let mut a = spawn_ping(&["--connect", &addr, "-C", "20", "-V"]);
    let mut b = spawn_ping(&["--connect", &addr, "-C", "20", "-V", "-S", "2000"]);
    assert!(wait_bounded(&mut a, "client a").success());
    assert!(wait_bounded(&mut b, "client b").success());
    server.wait_for_line("disconnected after 20 pings");
    server.wait_for_line("disconnected after 20 pings");
    let out = server.stop();
    let connected = out.stderr.lines().filter(|l| l.ends_with(" connected"));
    assert_eq!(connected.count(), 4, "{}", out.stderr);
    // Our client's MPA Request has rping's parameters (revision 2, enhanced, IRD/ORD 1/1,
    // no private data) except C: our default asks for CRC, where rping over siw does not.
    assert!(
        out.stderr
            .contains("MPA Request: revision 2, C=1, M=0, IRD/ORD 1/1, 0 octets of private data"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("IRD/ORD 1/1"), "{}", out.stderr);
}

#[test]
fn refused_connection_is_a_clear_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let out = ping(&["--connect", &format!("127.0.0.1:{port}"), "-C", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("connection refused"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

#[test]
fn silent_peer_times_out() {
    // A TCP server that never answers the MPA Request.
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let holder = thread::spawn(move || {
        let conn = l.accept();
        thread::sleep(Duration::from_secs(3));
        drop(conn);
    });
    let out = ping(&["--connect", &addr.to_string(), "--timeout", "0.5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    holder.join().expect("holder");
}

#[test]
fn server_going_away_mid_run_is_reported() {
    let server = start_server(&[]);
    let mut client = spawn_ping(&["--connect", &server.addr.to_string()]);
    let out = drain(client.stdout.take().expect("stdout"));
    let err = drain(client.stderr.take().expect("stderr"));
    thread::sleep(Duration::from_millis(500));
    drop(server); // kills it
    let status = wait_bounded(&mut client, "client");
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(status.code(), Some(1), "{out}{err}");
    assert!(
        err.contains("the server closed the connection")
            || err.contains("the connection to the server failed"),
        "{err}"
    );
    // What worked before is still summarised.
    assert!(out.contains("iwarp ping statistics"), "{out}");
}

#[test]
fn usage_errors_exit_with_2() {
    for args in [
        &["-s", "-S", "25"][..],
        &["-s", "-S", "65536"],
        &[],
        &["-c"],
        &["-s", "--connect", "h"],
    ] {
        let out = ping(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn ctrl_c_ends_an_unlimited_run_between_pings() {
    let mut server = start_server(&[]);
    let mut client = spawn_ping(&["--connect", &server.addr.to_string(), "-V"]);
    let out = drain(client.stdout.take().expect("stdout"));
    let err = drain(client.stderr.take().expect("stderr"));
    // The client watches for Ctrl-C once connected; give it time to start pinging.
    server.wait_for_line(" connected");
    thread::sleep(Duration::from_millis(300));
    let sent = Command::new("kill")
        .args(["-INT", &client.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let status = wait_bounded(&mut client, "client");
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(status.success(), "{err}");
    assert!(out.contains("(interrupted)"), "{out}");
    // The ping in progress was finished, so both sides counted the same pings and the
    // server saw a disconnect between two of them.
    let count: u64 = out
        .lines()
        .nth(1)
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {out}"));
    assert!(count > 0, "{out}");
    let served = server.finish();
    assert!(served.status.success(), "{}", served.stderr);
    assert!(
        served
            .stderr
            .contains(&format!("disconnected after {}", pings(count))),
        "client: {out}\nserver: {}",
        served.stderr
    );
}
