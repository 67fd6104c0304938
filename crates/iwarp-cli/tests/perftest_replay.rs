//! Wire compatibility with perftest's rdma_cm mode, proven against recordings.
//!
//! `tests/data/perftest/` holds every octet of a run of each of the six tests between two
//! perftest 6.06 over Linux `siw` (see its README). Each test here plays one of the two
//! recorded ends, octet for octet, against `iwarp perf --perftest` in the other role, and
//! checks everything `iwarp perf` sends against what the recorded perftest sent in its
//! place:
//!
//! * MPA startup frames: identical (revision 2, enhanced, no CRC, the same IRD/ORD words,
//!   no private data);
//! * every message, reassembled from its DDP segments: the same RDMAP opcode, DDP queue,
//!   MSN and length; the same payload where perftest's is determined by the test (the
//!   version, buffer geometry, zeroed hand shakes, credits, write latency's sequence
//!   numbers, the report's size and iteration count), the same STag and tagged offset
//!   where the message targets a buffer the recorded end announced;
//! * both ends closing with FIN, and `iwarp perf` printing perftest's table with the
//!   recorded peer's figures where perftest prints the peer's (the bandwidth servers).
//!
//! Where `iwarp perf` announces buffers of its own (its keys, a Read Request's sink) the
//! replayed end learns them from what it receives and sends its recorded Writes, Reads and
//! Read Responses there instead. Everything is decoded by hand here, without the stack's
//! parsers; there is no CRC on these connections (as over siw).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Child;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

mod common;

use common::iwarp_command;

const LIMIT: Duration = Duration::from_secs(60);

/// Which recorded end a test plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Dir {
    /// Sent by the client.
    C2s,
    /// Sent by the server.
    S2c,
}

/// One item of a recorded connection, in recorded order.
#[derive(Clone, Debug)]
enum Item {
    /// An MPA Request or Reply, whole.
    Frame(Vec<u8>),
    /// A whole RDMAP message (its segments reassembled).
    Message(Msg),
}

/// An RDMAP message: the fields of its first DDP segment, the payload of all.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Msg {
    opcode: u8,
    tagged: bool,
    stag: u32,
    to: u64,
    qn: u32,
    msn: u32,
    payload: Vec<u8>,
}

const WRITE: u8 = 0;
const READ_REQUEST: u8 = 1;
const READ_RESPONSE: u8 = 2;
const SEND: u8 = 3;

fn hexdec(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 octets"))
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 octets"))
}

/// Splits one DDP segment (a ULPDU) into its header fields and payload.
fn segment(u: &[u8]) -> (Msg, bool) {
    let (ctrl, rctrl) = (u[0], u[1]);
    let tagged = ctrl & 0x80 != 0;
    let last = ctrl & 0x40 != 0;
    assert_eq!(ctrl & 0x03, 1, "DDP version 1");
    assert_eq!(rctrl >> 6, 1, "RDMAP version 1");
    let opcode = rctrl & 0x0f;
    let msg = if tagged {
        Msg {
            opcode,
            tagged,
            stag: be32(&u[2..]),
            to: be64(&u[6..]),
            qn: 0,
            msn: 0,
            payload: u[14..].to_vec(),
        }
    } else {
        Msg {
            opcode,
            tagged,
            stag: 0,
            to: 0,
            qn: be32(&u[6..]),
            msn: be32(&u[10..]),
            payload: u[18..].to_vec(),
        }
    };
    (msg, last)
}

/// Builds the single-segment ULPDU of `m`.
fn ulpdu(m: &Msg) -> Vec<u8> {
    let mut u = vec![if m.tagged { 0xc1 } else { 0x41 }, 0x40 | m.opcode];
    if m.tagged {
        u.extend(m.stag.to_be_bytes());
        u.extend(m.to.to_be_bytes());
    } else {
        u.extend([0; 4]);
        u.extend(m.qn.to_be_bytes());
        u.extend(m.msn.to_be_bytes());
        u.extend([0; 4]);
    }
    u.extend(&m.payload);
    u
}

/// An FPDU around `u`: length, ULPDU, pad, and a zero CRC field (no CRC negotiated).
fn fpdu(u: &[u8]) -> Vec<u8> {
    let mut f = (u.len() as u16).to_be_bytes().to_vec();
    f.extend(u);
    while !f.len().is_multiple_of(4) {
        f.push(0);
    }
    f.extend([0; 4]);
    f
}

/// Reads whole messages off a byte stream.
#[derive(Default)]
struct Reader {
    buf: Vec<u8>,
    started: bool,
    partial: Option<Msg>,
}

impl Reader {
    /// Takes in octets, returning the items they complete.
    fn push(&mut self, octets: &[u8]) -> Vec<Item> {
        self.buf.extend_from_slice(octets);
        let mut out = Vec::new();
        if !self.started {
            if self.buf.len() < 20 {
                return out;
            }
            let pd = u16::from_be_bytes([self.buf[18], self.buf[19]]) as usize;
            if self.buf.len() < 20 + pd {
                return out;
            }
            out.push(Item::Frame(self.buf.drain(..20 + pd).collect()));
            self.started = true;
        }
        while self.buf.len() >= 2 {
            let len = u16::from_be_bytes([self.buf[0], self.buf[1]]) as usize;
            let total = (2 + len).div_ceil(4) * 4 + 4;
            if self.buf.len() < total {
                break;
            }
            let f: Vec<u8> = self.buf.drain(..total).collect();
            let (seg, last) = segment(&f[2..2 + len]);
            let msg = match self.partial.take() {
                Some(mut m) => {
                    m.payload.extend(seg.payload);
                    m
                }
                None => seg,
            };
            if last {
                out.push(Item::Message(msg));
            } else {
                self.partial = Some(msg);
            }
        }
        out
    }
}

/// A recording: items of every connection, in the order they completed.
struct Recording {
    items: Vec<(u32, Dir, Item)>,
}

impl Recording {
    fn load(name: &str) -> Self {
        let path = format!("{}/tests/data/perftest/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("recording");
        let mut readers: HashMap<(u32, Dir), Reader> = HashMap::new();
        let mut items = Vec::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            let Some(hex) = v["hex"].as_str() else {
                continue;
            };
            let conn = v["conn"].as_u64().expect("conn") as u32;
            let dir = if v["dir"] == "c2s" {
                Dir::C2s
            } else {
                Dir::S2c
            };
            for item in readers.entry((conn, dir)).or_default().push(&hexdec(hex)) {
                items.push((conn, dir, item));
            }
        }
        Self { items }
    }
}

/// A live connection to `iwarp perf`.
struct Live {
    stream: TcpStream,
    reader: Reader,
    ready: Vec<Item>,
    /// Messages read ahead of their turn: another kind of message may come first (a
    /// bidirectional end sends its Sends and its credit Writes, or its Read Requests and
    /// Read Responses, in whatever order its timing gives; each kind keeps its own).
    ahead: Vec<Msg>,
}

impl Live {
    fn new(stream: TcpStream) -> Self {
        stream.set_read_timeout(Some(LIMIT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            reader: Reader::default(),
            ready: Vec::new(),
            ahead: Vec::new(),
        }
    }

    /// The next message of the kind of `like` (opcode, tagged or not, queue).
    fn next_like(&mut self, like: &Msg) -> Msg {
        let kind = |m: &Msg| (m.opcode, m.tagged, m.qn);
        if let Some(at) = self.ahead.iter().position(|m| kind(m) == kind(like)) {
            return self.ahead.remove(at);
        }
        loop {
            match self.next() {
                Item::Message(m) if kind(&m) == kind(like) => return m,
                Item::Message(m) => {
                    self.ahead.push(m);
                    assert!(
                        self.ahead.len() < 4096,
                        "no {like:?} among {:?}",
                        self.ahead
                    );
                }
                Item::Frame(f) => panic!("a startup frame {f:02x?} where {like:?} was due"),
            }
        }
    }

    fn next(&mut self) -> Item {
        let mut buf = [0u8; 65536];
        while self.ready.is_empty() {
            let n = self.stream.read(&mut buf).expect("read from iwarp perf");
            assert!(n > 0, "iwarp perf closed the connection early");
            let items = self.reader.push(&buf[..n]);
            self.ready.extend(items);
        }
        self.ready.remove(0)
    }

    fn send(&mut self, octets: &[u8]) {
        self.stream.write_all(octets).expect("write to iwarp perf");
    }

    /// Closes our side and reads to the end: `iwarp perf` must close with FIN, nothing more
    /// sent.
    fn close(mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        let mut rest = Vec::new();
        match self.stream.read_to_end(&mut rest) {
            Ok(_) => assert!(
                self.ready.is_empty()
                    && self.ahead.is_empty()
                    && rest.is_empty()
                    && self.reader.buf.is_empty(),
                "octets after the end: {rest:02x?} {:?}",
                self.ahead
            ),
            Err(e) => panic!("iwarp perf did not close cleanly: {e}"),
        }
    }
}

/// What a replay learns as it goes.
#[derive(Default)]
struct Keys {
    /// The buffers `iwarp perf` announced in place of the recorded end's: recorded STag to
    /// (its STag, tagged offset difference).
    map: HashMap<u32, (u32, i128)>,
    /// Report fields seen (size and iterations come first).
    report_fields: u32,
    /// Write latency: the last octet of each Write is a sequence number.
    write_lat: bool,
    /// `iwarp perf` sends a real report (a client, or either end with -b); a passive
    /// server sends whatever.
    live_reports: bool,
}

impl Keys {
    fn learn(&mut self, recorded: (u32, u64), live: (u32, u64)) {
        if recorded.0 != 0 {
            self.map.insert(
                recorded.0,
                (live.0, i128::from(live.1) - i128::from(recorded.1)),
            );
        }
    }

    fn map(&self, stag: u32, to: u64) -> (u32, u64) {
        match self.map.get(&stag) {
            Some(&(s, d)) => (s, (i128::from(to) + d) as u64),
            None => (stag, to),
        }
    }
}

/// A 56-octet message that is a queue pair destination (perftest sends zeros before its
/// queue pairs exist).
fn dest(payload: &[u8]) -> Option<(u32, u64)> {
    (payload.len() == 56 && payload.iter().any(|&b| b != 0))
        .then(|| (be32(&payload[16..]), be64(&payload[24..])))
}

/// The running `iwarp perf`; killed when dropped.
struct Peer {
    child: Option<Child>,
    stderr: Receiver<String>,
}

impl Peer {
    fn spawn(args: &[&str]) -> Self {
        let mut child = iwarp_command(&[]).args(args).spawn().expect("spawn iwarp");
        let err = child.stderr.take().expect("stderr");
        let (tx, stderr) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child: Some(child),
            stderr,
        }
    }

    fn listening(&self) -> SocketAddr {
        let line = self
            .stderr
            .recv_timeout(LIMIT)
            .expect("the server's listening line");
        line.rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in `{line}`"))
    }

    /// Waits for it to exit; returns its exit code.
    fn wait(&mut self) -> Option<i32> {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(s) = child.try_wait().expect("try_wait") {
                return s.code();
            }
            assert!(Instant::now() < deadline, "iwarp perf did not exit");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for it to exit; returns its stdout, failing on a non-zero exit.
    fn finish(mut self) -> String {
        let code = self.wait();
        let mut out = String::new();
        self.child
            .as_mut()
            .and_then(|c| c.stdout.take())
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("stdout");
        let err: Vec<String> = self.stderr.try_iter().collect();
        assert_eq!(code, Some(0), "iwarp perf failed: {err:?}\n{out}");
        out
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Checks a message `iwarp perf` sent against the one the recorded perftest sent in its
/// place (`client`: iwarp perf plays the client), learning the buffers it announced.
fn check(live: &Msg, rec: &Msg, keys: &mut Keys, what: &str) {
    assert_eq!(
        (
            live.opcode,
            live.tagged,
            live.qn,
            live.msn,
            live.payload.len()
        ),
        (rec.opcode, rec.tagged, rec.qn, rec.msn, rec.payload.len()),
        "{what}: opcode, tagged, queue, MSN, length"
    );
    match rec.opcode {
        // Writes and Read Responses target the recorded end's buffers, which it announced
        // as recorded: the same place.
        WRITE | READ_RESPONSE => {
            assert_eq!((live.stag, live.to), (rec.stag, rec.to), "{what}: target");
            match rec.payload.len() {
                // An ib_send_bw credit: the receiver's count.
                4 => assert_eq!(live.payload, rec.payload, "{what}: credit"),
                // Write latency: the last octet is the sequence number.
                _ if rec.opcode == WRITE && keys.write_lat => {
                    assert_eq!(
                        live.payload.last(),
                        rec.payload.last(),
                        "{what}: sequence number"
                    )
                }
                _ => {}
            }
        }
        READ_REQUEST => {
            // Sink: iwarp perf's own; source: the recorded end's buffer.
            let (l, r) = (&live.payload, &rec.payload);
            keys.learn((be32(r), be64(&r[4..])), (be32(l), be64(&l[4..])));
            assert_eq!(&l[12..], &r[12..], "{what}: length and source");
        }
        // The report, on the exchange channel: size and iterations as recorded and rates
        // of our own; a passive server's is whatever perftest's buffer held.
        SEND if rec.qn == 0 && rec.payload.len() == 8 => {
            keys.report_fields += 1;
            if keys.live_reports && keys.report_fields <= 2 {
                assert_eq!(live.payload, rec.payload, "{what}: report");
            } else if keys.live_reports {
                let v = f64::from_be_bytes(live.payload[..8].try_into().unwrap());
                assert!(v.is_finite() && v >= 0.0, "{what}: {v}");
            }
        }
        SEND if rec.qn == 0 && rec.payload.len() <= 56 && live.payload != rec.payload => {
            // The exchange channel: what may differ is what describes this end.
            let p = &live.payload;
            match rec.payload.len() {
                56 => {
                    let (l, r) = (dest(p), dest(&rec.payload));
                    assert!(
                        l.is_some() == r.is_some(),
                        "{what}: a destination where perftest sent {:02x?}",
                        rec.payload
                    );
                    if let (Some(l), Some(r)) = (l, r) {
                        keys.learn(r, l);
                        assert_eq!(p[4..8], rec.payload[4..8], "{what}: outstanding reads");
                    }
                }
                // Our MTU: 5 (4096), so that the peer keeps its own.
                2 => assert_eq!(p, b"5\0", "{what}: MTU"),
                _ => panic!("{what}: {p:02x?} where perftest sent {:02x?}", rec.payload),
            }
        }
        _ => {}
    }
}

/// Plays the recorded end `me` of `name` against `iwarp perf` in the other role.
fn replay(name: &str, args: &[&str], me: Dir) -> String {
    let rec = Recording::load(name);
    let mut keys = Keys {
        write_lat: name.starts_with("write_lat"),
        live_reports: me == Dir::S2c || args.contains(&"-b"),
        ..Keys::default()
    };
    let mut conns: HashMap<u32, Live> = HashMap::new();
    let (peer, listener) = match me {
        Dir::C2s => {
            let mut a = vec!["perf"];
            a.extend(args);
            a.extend(["--server", "--bind", "127.0.0.1", "-p", "0"]);
            (Peer::spawn(&a), None)
        }
        Dir::S2c => {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            let target = l.local_addr().expect("addr").to_string();
            let mut a = vec!["perf"];
            a.extend(args);
            a.extend(["--connect", &target]);
            (Peer::spawn(&a), Some(l))
        }
    };
    let addr = match me {
        Dir::C2s => Some(peer.listening()),
        Dir::S2c => None,
    };
    for (i, (conn, dir, item)) in rec.items.iter().enumerate() {
        let what = format!("{name} item {i} (connection {conn})");
        if !conns.contains_key(conn) {
            let stream = match (&listener, addr) {
                (Some(l), _) => l.accept().expect("accept").0,
                (None, Some(a)) => TcpStream::connect(a).expect("connect"),
                _ => unreachable!(),
            };
            conns.insert(*conn, Live::new(stream));
        }
        let live = conns.get_mut(conn).expect("connection");
        match (item, *dir == me) {
            (Item::Frame(f), true) => live.send(f),
            (Item::Frame(f), false) => match live.next() {
                Item::Frame(l) => assert_eq!(&l, f, "{what}: MPA frame"),
                Item::Message(m) => panic!("{what}: {m:?} where perftest sent its MPA frame"),
            },
            (Item::Message(m), true) => {
                let mut m = m.clone();
                if m.tagged {
                    (m.stag, m.to) = keys.map(m.stag, m.to);
                } else if m.opcode == READ_REQUEST {
                    let (s, t) = keys.map(be32(&m.payload[16..]), be64(&m.payload[20..]));
                    m.payload[16..20].copy_from_slice(&s.to_be_bytes());
                    m.payload[20..28].copy_from_slice(&t.to_be_bytes());
                }
                live.send(&fpdu(&ulpdu(&m)));
            }
            (Item::Message(m), false) => {
                let l = live.next_like(m);
                check(&l, m, &mut keys, &what);
            }
        }
    }
    // perftest's client closes first, data connections before the exchange channel.
    let mut ids: Vec<u32> = conns.keys().copied().collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    for id in ids {
        if let Some(c) = conns.remove(&id) {
            c.close();
        }
    }
    peer.finish()
}

/// The result row `iwarp perf` printed.
fn row(out: &str) -> &str {
    let mut lines = out.lines().skip_while(|l| !l.contains("#bytes"));
    lines.next();
    lines.next().unwrap_or("")
}

const OPTS: [&str; 5] = ["-R", "-s", "64", "-n", "20"];

fn args<'a>(test: &'a str, measure: &'a str) -> Vec<&'a str> {
    let mut a = vec![test, measure];
    a.extend(OPTS);
    a
}

/// The bandwidth servers print the client's report: the recorded perftest's figures.
#[test]
fn write_bw_server_against_recorded_client() {
    let out = replay("write_bw-s64-n20.jsonl", &args("write", "bw"), Dir::C2s);
    assert_eq!(
        row(&out),
        " 64         20               0.63               0.05   \t\t   0.000781"
    );
}

#[test]
fn write_bw_client_against_recorded_server() {
    let out = replay("write_bw-s64-n20.jsonl", &args("write", "bw"), Dir::S2c);
    assert!(row(&out).starts_with(" 64         20  "), "{out}");
}

#[test]
fn read_bw_server_against_recorded_client() {
    let out = replay("read_bw-s64-n20.jsonl", &args("read", "bw"), Dir::C2s);
    assert_eq!(
        row(&out),
        " 64         20               0.00               0.00   \t\t   0.000035"
    );
}

#[test]
fn read_bw_client_against_recorded_server() {
    let out = replay("read_bw-s64-n20.jsonl", &args("read", "bw"), Dir::S2c);
    assert!(row(&out).starts_with(" 64         20  "), "{out}");
}

/// The send bandwidth server measures what it received itself.
#[test]
fn send_bw_server_against_recorded_client() {
    let out = replay("send_bw-s64-n20.jsonl", &args("send", "bw"), Dir::C2s);
    assert!(
        row(&out).starts_with(" 64         20               0.00  "),
        "{out}"
    );
}

#[test]
fn send_bw_client_against_recorded_server() {
    let out = replay("send_bw-s64-n20.jsonl", &args("send", "bw"), Dir::S2c);
    assert!(row(&out).starts_with(" 64         20  "), "{out}");
}

#[test]
fn write_lat_server_against_recorded_client() {
    let out = replay("write_lat-s64-n20.jsonl", &args("write", "lat"), Dir::C2s);
    assert!(row(&out).starts_with(" 64      20  "), "{out}");
}

#[test]
fn write_lat_client_against_recorded_server() {
    let out = replay("write_lat-s64-n20.jsonl", &args("write", "lat"), Dir::S2c);
    assert!(row(&out).starts_with(" 64      20  "), "{out}");
}

/// ib_read_lat's server prints no table: only perftest's separator after the addresses.
#[test]
fn read_lat_server_against_recorded_client() {
    let out = replay("read_lat-s64-n20.jsonl", &args("read", "lat"), Dir::C2s);
    assert!(!out.contains("#bytes"), "{out}");
    assert!(
        out.contains(" remote address: LID 0000 QPN 0x0002"),
        "{out}"
    );
}

#[test]
fn read_lat_client_against_recorded_server() {
    let out = replay("read_lat-s64-n20.jsonl", &args("read", "lat"), Dir::S2c);
    assert!(row(&out).starts_with(" 64      20  "), "{out}");
}

#[test]
fn send_lat_server_against_recorded_client() {
    let out = replay("send_lat-s64-n20.jsonl", &args("send", "lat"), Dir::C2s);
    assert!(row(&out).starts_with(" 64      20  "), "{out}");
}

#[test]
fn send_lat_client_against_recorded_server() {
    let out = replay("send_lat-s64-n20.jsonl", &args("send", "lat"), Dir::S2c);
    assert!(row(&out).starts_with(" 64      20  "), "{out}");
}

/// Bidirectional: both ends write (the server without waiting for anything from the
/// client), trade real reports and print their sum, the same row at both ends.
#[test]
fn write_bw_bidirectional_server_against_recorded_client() {
    let mut a = args("write", "bw");
    a.push("-b");
    let out = replay("write_bw-b-s64-n20.jsonl", &a, Dir::C2s);
    assert!(row(&out).starts_with(" 64         20  "), "{out}");
    assert!(out.contains("RDMA_Write Bidirectional BW Test"));
}

#[test]
fn write_bw_bidirectional_client_against_recorded_server() {
    let mut a = args("write", "bw");
    a.push("-b");
    let out = replay("write_bw-b-s64-n20.jsonl", &a, Dir::S2c);
    assert!(row(&out).starts_with(" 64         20  "), "{out}");
}

/// Bidirectional Sends: each end sends within the credit the other returns.
#[test]
fn send_bw_bidirectional_server_against_recorded_client() {
    let mut a = args("send", "bw");
    a.push("-b");
    let out = replay("send_bw-b-s64-n20.jsonl", &a, Dir::C2s);
    assert!(row(&out).starts_with(" 64         20  "), "{out}");
}

#[test]
fn send_bw_bidirectional_client_against_recorded_server() {
    let mut a = args("send", "bw");
    a.push("-b");
    let out = replay("send_bw-b-s64-n20.jsonl", &a, Dir::S2c);
    assert!(row(&out).starts_with(" 64         20  "), "{out}");
}

/// A perftest older than 5.70 (whose messages differ) is told so in one line, and sees its
/// connection closed cleanly after `iwarp perf`'s own version, as perftest would send it.
#[test]
fn an_old_perftest_is_refused_cleanly() {
    let mut peer = Peer::spawn(&[
        "perf",
        "write",
        "bw",
        "-R",
        "--server",
        "--bind",
        "127.0.0.1",
        "-p",
        "0",
    ]);
    let mut live = Live::new(TcpStream::connect(peer.listening()).expect("connect"));
    // perftest's MPA Request over siw: revision 2, enhanced, IRD 0, ORD 0.
    live.send(&hexdec("4d504120494420526571204672616d651002000400000000"));
    assert!(matches!(live.next(), Item::Frame(_)));
    let mut version = b"5.60".to_vec();
    version.resize(16, 0);
    let msg = Msg {
        opcode: SEND,
        tagged: false,
        stag: 0,
        to: 0,
        qn: 0,
        msn: 1,
        payload: version,
    };
    live.send(&fpdu(&ulpdu(&msg)));
    match live.next() {
        Item::Message(m) => assert_eq!(&m.payload[..4], b"6.06"),
        Item::Frame(f) => panic!("a frame {f:02x?}"),
    }
    live.close();
    assert_eq!(peer.wait(), Some(1));
    let err: Vec<String> = peer.stderr.try_iter().collect();
    assert!(
        err.iter()
            .any(|l| l.contains("error:") && l.contains("perftest 5.60")),
        "{err:?}"
    );
}
