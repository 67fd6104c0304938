//! The tool's log, end to end: `iwarp ping -d`, `iwarp -vv` and `RUST_LOG` show the stack's
//! startup events (each MPA frame in the words of iwarp-proto's pretty-printers, then the
//! settled connection), and nothing of the kind appears unless asked for. Our client against
//! our server over loopback, each run bounded in time.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Child;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

mod common;

use common::{drain, iwarp_command, output_bounded, wait_bounded, Output};

/// Far above what any of these runs needs.
const LIMIT: Duration = Duration::from_secs(60);

/// `iwarp ARGS`, with `RUST_LOG` set to `rust_log` or removed.
fn spawn(args: &[&str], rust_log: Option<&str>) -> Child {
    let mut cmd = iwarp_command(args);
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    cmd.spawn().expect("spawn iwarp")
}

/// A one-client `iwarp ping --server` on an ephemeral loopback port, its stderr collected.
struct Server {
    child: Child,
    addr: SocketAddr,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Server {
    fn start(before: &[&str], after: &[&str], rust_log: Option<&str>) -> Self {
        let mut args = before.to_vec();
        args.extend(["ping", "--server", "-a", "127.0.0.1", "-p", "0"]);
        args.extend_from_slice(after);
        let mut child = spawn(&args, rust_log);
        let _stdout = drain(child.stdout.take().expect("stdout piped"));
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = Vec::new();
        let deadline = Instant::now() + LIMIT;
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("server did not start: {seen:?}"));
            seen.push(line.clone());
            if let Some(a) = line.split("listening on ").nth(1) {
                break a.trim().parse().expect("the listening address");
            }
        };
        Self {
            child,
            addr,
            lines,
            seen,
        }
    }

    /// Waits for the server to exit after its client; returns everything it logged.
    fn finish(mut self) -> String {
        let status = wait_bounded(&mut self.child, LIMIT, "iwarp ping --server");
        self.seen.extend(self.lines.iter());
        let log = self.seen.join("\n");
        assert!(status.success(), "{log}");
        log
    }
}

fn client(before: &[&str], addr: SocketAddr, rust_log: Option<&str>) -> Output {
    let target = addr.to_string();
    let mut args = before.to_vec();
    args.extend(["ping", "--connect", &target, "-C", "1"]);
    let out = output_bounded(spawn(&args, rust_log), LIMIT, "iwarp ping --connect");
    assert!(out.status.success(), "{}", out.stderr);
    out
}

/// The index of the first line containing `needle`, failing with the whole log otherwise.
fn line_of(log: &str, needle: &str) -> usize {
    log.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with `{needle}` in:\n{log}"))
}

#[test]
fn ping_debug_and_vv_log_each_startup_frame_in_words() {
    let server = Server::start(&[], &["-d"], None);
    let addr = server.addr;
    let out = client(&["-vv"], addr, None);
    let served = server.finish();

    // The responder: the Request in, then its Reply out, then the settled connection.
    let request = line_of(
        &served,
        "iwarp::cm: received MPA Request rev 2 enhanced IRD 1 ORD 1, M 0 C 1",
    );
    let reply = line_of(
        &served,
        "iwarp::cm: sent MPA Reply rev 2 enhanced IRD 1 ORD 1, M 0 C 1 R 0",
    );
    let up = line_of(
        &served,
        "iwarp::cm: established: Responder, MPA revision 2, CRC on",
    );
    assert!(request < reply && reply < up, "{served}");
    assert!(served.contains("DEBUG"), "{served}");
    // Each event names the peer.
    assert!(served
        .lines()
        .nth(request)
        .unwrap()
        .contains("peer=127.0.0.1:"));
    // ping's own -d steps go through the same log.
    line_of(&served, "iwarp_cli::ping: connected: MPA revision 2");

    // The initiator, with -vv instead of -d.
    let log = &out.stderr;
    let request = line_of(log, "sent MPA Request rev 2 enhanced IRD 1 ORD 1, M 0 C 1");
    let reply = line_of(
        log,
        "received MPA Reply rev 2 enhanced IRD 1 ORD 1, M 0 C 1 R 0",
    );
    let up = line_of(log, "established: Initiator, MPA revision 2, CRC on");
    assert!(request < reply && reply < up, "{log}");
    assert!(
        log.lines()
            .nth(request)
            .unwrap()
            .contains(&format!("peer={addr}")),
        "{log}"
    );
}

#[test]
fn quiet_unless_asked_and_rust_log_replaces_the_filter() {
    // RUST_LOG at info for the connection manager: the settled connection, not the frames.
    let server = Server::start(&[], &[], Some("iwarp::cm=info"));
    // Neither -v nor RUST_LOG: warnings only, so no startup events at all.
    let out = client(&[], server.addr, None);
    let served = server.finish();
    line_of(&served, "INFO iwarp::cm: established: Responder");
    assert!(!served.contains("MPA Request rev"), "{served}");
    assert!(!out.stderr.contains("iwarp::cm"), "{}", out.stderr);
    assert!(out.stdout.contains("1 ping of 64 bytes"), "{}", out.stdout);
}
