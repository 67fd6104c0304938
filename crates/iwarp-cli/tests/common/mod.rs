//! Helpers shared by the end-to-end tests that run the built `iwarp`
//! binary: every child process is bounded in time and killed on overrun,
//! and its output is drained on threads so that a full pipe never blocks
//! it.

#![allow(dead_code)] // each test file uses its own subset

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
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
