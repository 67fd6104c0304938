//! Helpers shared by the end-to-end tests that run the built `iwarp`
//! binary: every child process is bounded in time and killed on overrun,
//! and its output is drained on threads so that a full pipe never blocks
//! it.

#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_iwarp");

/// `iwarp ARGS`, ready to spawn: no standard input, both outputs piped, and no
/// `RUST_LOG` from the test's environment (set one with `.env` to test it).
pub fn iwarp_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Starts `iwarp ARGS` as [`iwarp_command`] prepares it.
pub fn spawn(args: &[&str]) -> Child {
    iwarp_command(args).spawn().expect("spawn iwarp")
}

/// What a finished child printed, and how it ended.
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Reads `r` to the end on a thread.
pub fn drain(mut r: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// Waits for `child` at most `limit`, killing it (and failing the test) on
/// overrun.
pub fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Collects a child's piped stdout and stderr and waits for it, bounded.
pub fn output_bounded(mut child: Child, limit: Duration, what: &str) -> Output {
    let out = drain(child.stdout.take().expect("stdout piped"));
    let err = drain(child.stderr.take().expect("stderr piped"));
    let status = wait_bounded(&mut child, limit, what);
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// Runs `iwarp perf_args` under low open-file limits (shell `ulimit`), each run
/// bounded by `limit`. Under `ulimit -n 100` (both limits low) it must fail at once
/// naming RLIMIT_NOFILE with nothing on stdout, which this asserts; the run under a
/// low soft limit alone is returned for the caller's checks (`None` when this machine
/// cannot lower the hard limit to 400).
pub fn under_file_limits(perf_args: &str, limit: Duration) -> Option<Output> {
    let run = |limits: &str| {
        let script = format!("{limits}; exec \"$0\" {perf_args}");
        let child = Command::new("sh")
            .args(["-c", &script, BIN])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        output_bounded(child, limit, &format!("iwarp {perf_args} under {limits}"))
    };
    let low = run("ulimit -n 100");
    assert_eq!(low.status.code(), Some(1), "{}", low.stderr);
    assert!(low.stderr.contains("RLIMIT_NOFILE"), "{}", low.stderr);
    assert!(low.stdout.is_empty(), "nothing printed before the check");
    let soft = run("ulimit -Sn 100 && ulimit -Hn 400 2>/dev/null || exit 77");
    (soft.status.code() != Some(77)).then_some(soft)
}

/// Stderr lines as they come, so that a server's address can be read while it runs.
pub fn lines(stderr: ChildStderr) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A running `iwarp` server (`ping --server`, `cmatose`) on an ephemeral loopback port,
/// found from its "listening on ADDR" line; killed when dropped.
pub struct Server {
    child: Option<Child>,
    /// Where it listens.
    pub addr: SocketAddr,
    stdout: Option<thread::JoinHandle<String>>,
    stderr: Receiver<String>,
    seen: Vec<String>,
    limit: Duration,
}

impl Server {
    /// Runs `iwarp ARGS` and waits (at most `limit`, as every later wait) for it to
    /// listen.
    pub fn start(args: &[&str], limit: Duration) -> Self {
        let mut child = spawn(args);
        let stdout = drain(child.stdout.take().expect("stdout piped"));
        let stderr = lines(child.stderr.take().expect("stderr piped"));
        let mut server = Self {
            child: Some(child),
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            stdout: Some(stdout),
            stderr,
            seen: Vec::new(),
            limit,
        };
        let line = server.wait_for_line("listening on ");
        let addr = line.rsplit(' ').next().unwrap_or_default();
        server.addr = addr
            .parse()
            .unwrap_or_else(|e| panic!("bad address in `{line}`: {e}"));
        server
    }

    /// Waits for a stderr line containing `needle`.
    pub fn wait_for_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + self.limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "the server never said `{needle}`; it said:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    fn collect(&mut self, status: ExitStatus) -> Output {
        let stdout = self
            .stdout
            .take()
            .map(|h| h.join().expect("stdout reader"))
            .unwrap_or_default();
        // Every line up to the end of the stream: the reader thread may still be
        // reading the last ones when the child has exited (taking only those already
        // received lost a server's last line now and then).
        let deadline = Instant::now() + self.limit;
        while let Ok(line) = self
            .stderr
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line);
        }
        Output {
            status,
            stdout,
            stderr: self.seen.join("\n"),
        }
    }

    /// Waits for the server to exit by itself.
    pub fn finish(mut self) -> Output {
        let mut child = self.child.take().expect("running");
        let status = wait_bounded(&mut child, self.limit, "the iwarp server");
        self.collect(status)
    }

    /// Stops a server that would run for ever; it must still be running.
    pub fn stop(mut self) -> Output {
        let mut child = self.child.take().expect("running");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the server exited by itself"
        );
        let _ = child.kill();
        let status = child.wait().expect("wait");
        self.collect(status)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Octets from hex digits; spaces and other separators are ignored.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// Captures of hand-made TCP traffic.
#[allow(unused_imports)] // only the decoder tests build captures
pub use iwarp_decode::synth as capture;
