//! Helpers shared by the loopback integration tests.
//!
//! Everything here goes through the public API of `iwarp` (and, for the
//! hostile peers, the public wire formats of `iwarp_proto`): connection
//! pairs over real loopback TCP, test patterns, bounded waits, a panic
//! watch, and a raw-socket peer that speaks hand-built MPA octets.
//!
//! Each test binary includes this module and uses part of it, hence the
//! `dead_code` allowance.

#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use iwarp::proto::framing::{CollectUlpdus, Deframer, Framer, WireBatch};
use iwarp::proto::mpa::startup::{EnhancedData, FrameKind, StartupFrameRepr, HEADER_LEN};
use iwarp::proto::mpa::{FpduReceiver, FpduTransmitter};
use iwarp::{
    connect, Access, Completion, CompletionOpcode, CompletionStatus, Config, Device, FramingParams,
    Listener, MemoryRegion, ProtectionDomain, QpOptions, QueuePair, Revision,
};

/// The tests' device: one per test process, as an application opens one
/// and makes every protection domain from it.
pub fn device() -> &'static Device {
    static DEVICE: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
    DEVICE.get_or_init(Device::new)
}

/// A new protection domain on the tests' device.
pub fn new_pd() -> ProtectionDomain {
    device().alloc_pd()
}

/// The longest any single wait in a test may take. Generous: the suite
/// runs on two cores in debug builds, in parallel with other tests. A
/// bound, never a timing assertion.
pub const WAIT: Duration = Duration::from_secs(30);

/// Awaits `f`, failing the test if it takes longer than [`WAIT`].
pub async fn within<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(WAIT, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: {what}"),
    }
}

/// `len` octets of a pattern that differs with `seed` and with the
/// position (no period a misplaced block could hide behind).
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while out.len() < len {
        // xorshift64*: cheap enough for 64 MiB in a debug build.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Asserts two buffers are equal, reporting the first difference rather
/// than dumping megabytes.
#[track_caller]
pub fn assert_same(what: &str, got: &[u8], want: &[u8]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at octet {i} of {}: got {:#04x}, want {:#04x}",
            want.len(),
            got[i],
            want[i]
        );
    }
}

/// Everything a region may be used for.
pub const ALL_ACCESS: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE);

/// Registers `len` zeroed octets with every right.
pub fn region(pd: &ProtectionDomain, len: usize) -> MemoryRegion {
    pd.register(vec![0u8; len], ALL_ACCESS).expect("register")
}

/// Registers `data` with every right.
pub fn region_with(pd: &ProtectionDomain, data: Vec<u8>) -> MemoryRegion {
    pd.register(data, ALL_ACCESS).expect("register")
}

/// Sets up one connection over loopback: a listener with `server_cfg`
/// accepts (answering with private data `b"server"`) the connection
/// `connect` makes with `client_cfg` (private data `b"client"`). Returns
/// (client, server).
pub async fn pair_with(
    client_cfg: &Config,
    client: QpOptions,
    server_cfg: Config,
    server: QpOptions,
) -> (QueuePair, QueuePair) {
    let mut listener = Listener::bind("127.0.0.1:0", server_cfg)
        .await
        .expect("bind");
    let addr = listener.local_addr();
    let accept = async move {
        let req = listener.accept().await?;
        assert_eq!(req.private_data(), b"client");
        req.accept(server, b"server").await
    };
    let (c, s) = within("connection setup", async {
        tokio::join!(connect(addr, client_cfg, client, b"client"), accept)
    })
    .await;
    let (c, s) = (c.expect("connect"), s.expect("accept"));
    assert_eq!(c.info().peer_private_data(), b"server");
    assert_eq!(s.info().peer_private_data(), b"client");
    (c, s)
}

/// A connection with the default configuration and no pre-posted
/// receives.
pub async fn pair(
    client_pd: &ProtectionDomain,
    server_pd: &ProtectionDomain,
) -> (QueuePair, QueuePair) {
    pair_with(
        &Config::default(),
        QpOptions::new(client_pd),
        Config::default(),
        QpOptions::new(server_pd),
    )
    .await
}

/// Waits for the next completion on `qp`'s receive queue.
pub async fn next_recv(qp: &QueuePair) -> Completion {
    within("a receive completion", qp.recv_cq().next()).await
}

/// Waits for the next completion on `qp`'s send queue.
pub async fn next_send(qp: &QueuePair) -> Completion {
    within("a send-queue completion", qp.send_cq().next()).await
}

/// Asserts a successful receive of `len` octets with id `wr_id`.
#[track_caller]
pub fn assert_recv(c: &Completion, wr_id: u64, len: usize) {
    assert_eq!(c.wr_id, wr_id, "{c:?}");
    assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
    assert_eq!(c.opcode, CompletionOpcode::Recv, "{c:?}");
    assert_eq!(c.byte_len as usize, len, "{c:?}");
}

/// One end of [`exercise`]: its domain and the regions the exchange uses,
/// with the receives to pre-post so that the peer can Send at once.
pub struct Endpoint {
    /// The end's protection domain.
    pub pd: ProtectionDomain,
    /// What this end sends, writes, and lets the peer read.
    pub out: MemoryRegion,
    /// Receives the peer's Send.
    pub inbox: MemoryRegion,
    /// Where the peer RDMA-Writes.
    pub landing: MemoryRegion,
    /// Where this end's RDMA Read lands.
    pub sink: MemoryRegion,
    /// Receives the peer's zero-length "written" notice.
    pub note: MemoryRegion,
}

/// Receive ids [`exercise`] uses.
pub const WR_INBOX: u64 = 1;
/// Receive id of the notice that follows an RDMA Write.
pub const WR_NOTE: u64 = 2;

impl Endpoint {
    /// An endpoint moving `size` octets of pattern `seed`.
    pub fn new(size: usize, seed: u64) -> Self {
        let pd = new_pd();
        Self {
            out: region_with(&pd, pattern(size, seed)),
            inbox: region(&pd, size),
            landing: region(&pd, size),
            sink: region(&pd, size),
            note: region(&pd, 16),
            pd,
        }
    }

    /// Queue-pair options with the inbox and note receives pre-posted.
    pub fn options(&self) -> QpOptions {
        QpOptions::new(&self.pd)
            .post_recv(WR_INBOX, self.inbox.sge(..).unwrap())
            .post_recv(WR_NOTE, self.note.sge(..).unwrap())
    }
}

/// Moves data both ways over an established pair and verifies every
/// octet: a Send each way, an RDMA Write each way (each followed by a
/// zero-length Send so that the target knows it has landed: placement is
/// in order), and an RDMA Read each way, the two Reads at once. The
/// client goes first, as RFC 5044 §7.1.2 rule 4 requires unless
/// peer-to-peer mode has released the server already.
pub async fn exercise(client: &QueuePair, c: &Endpoint, server: &QueuePair, s: &Endpoint) {
    let size = c.out.len();
    // Send, client to server.
    within("client Send", client.send(c.out.sge(..).unwrap()))
        .await
        .expect("client Send");
    assert_recv(&next_recv(server).await, WR_INBOX, size);
    assert_same("server inbox", &s.inbox.to_vec(), &c.out.to_vec());
    // Send, server to client.
    within("server Send", server.send(s.out.sge(..).unwrap()))
        .await
        .expect("server Send");
    assert_recv(&next_recv(client).await, WR_INBOX, size);
    assert_same("client inbox", &c.inbox.to_vec(), &s.out.to_vec());
    // RDMA Write, client to server, then the notice.
    within(
        "client Write",
        client.write(c.out.sge(..).unwrap(), s.landing.remote_key()),
    )
    .await
    .expect("client Write");
    within("client notice", client.send(c.note.sge(0..0).unwrap()))
        .await
        .expect("client notice");
    assert_recv(&next_recv(server).await, WR_NOTE, 0);
    assert_same("server landing", &s.landing.to_vec(), &c.out.to_vec());
    // RDMA Write, server to client, then the notice.
    within(
        "server Write",
        server.write(s.out.sge(..).unwrap(), c.landing.remote_key()),
    )
    .await
    .expect("server Write");
    within("server notice", server.send(s.note.sge(0..0).unwrap()))
        .await
        .expect("server notice");
    assert_recv(&next_recv(client).await, WR_NOTE, 0);
    assert_same("client landing", &c.landing.to_vec(), &s.out.to_vec());
    // RDMA Reads, both ways at once.
    let (cr, sr) = within("Reads both ways", async {
        tokio::join!(
            client.read(c.sink.sge(..).unwrap(), s.out.remote_key()),
            server.read(s.sink.sge(..).unwrap(), c.out.remote_key()),
        )
    })
    .await;
    assert_eq!(cr.expect("client Read").byte_len as usize, size);
    assert_eq!(sr.expect("server Read").byte_len as usize, size);
    assert_same("client sink", &c.sink.to_vec(), &s.out.to_vec());
    assert_same("server sink", &s.sink.to_vec(), &c.out.to_vec());
}

/// Counts panics on tokio's worker threads, where the connection tasks
/// run and where tokio would otherwise swallow a panic. A test's own
/// assertions run on its own thread and are not counted, so one failing
/// test does not make the others fail too.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Starts counting panics. Call at the start of a test that must prove
/// the process never panics.
pub fn watch_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // "tokio-rt-worker" (tokio 1.4x and later) or
            // "tokio-runtime-worker" (earlier).
            let worker = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("tokio-r"));
            if worker {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
}

/// Asserts that no tokio worker has panicked since [`watch_panics`]
/// (in any test of this binary: a task spawned by a test that fails
/// counts too, but that test fails anyway).
#[track_caller]
pub fn assert_no_panics() {
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a tokio worker panicked");
}

/// A peer on a plain TCP socket that speaks hand-built MPA: startup
/// frames built with `StartupFrameRepr`, FPDUs framed with the
/// `FpduTransmitter` (or corrupted by hand), received FPDUs deframed
/// with the `FpduReceiver`.
pub struct RawPeer {
    /// The socket.
    pub stream: TcpStream,
    /// The framing settled by the startup, from this end's view.
    pub framing: FramingParams,
    tx: FpduTransmitter,
    rx: FpduReceiver,
    ulpdus: CollectUlpdus,
    /// Every octet received after the startup frame, as it came.
    pub received: Vec<u8>,
}

/// A startup frame of `kind` at `revision` with CRC as asked, no markers,
/// revision 2 enhanced data (IRD/ORD 16/16) at revision 2, and
/// `private_data`.
pub fn startup_frame(
    kind: FrameKind,
    revision: Revision,
    crc: bool,
    private_data: &[u8],
) -> Vec<u8> {
    StartupFrameRepr {
        kind,
        markers: false,
        crc,
        rejected: false,
        revision,
        enhanced: (revision == Revision::Rev2).then(|| EnhancedData::from_words(16, 16)),
        private_data,
    }
    .to_bytes()
    .expect("valid frame")
}

/// Reads one whole startup frame off `stream`.
pub async fn read_startup_frame(stream: &mut TcpStream) -> Vec<u8> {
    let mut frame = vec![0u8; HEADER_LEN];
    within("a startup frame", stream.read_exact(&mut frame))
        .await
        .expect("startup frame header");
    let pd_len = u16::from_be_bytes([frame[18], frame[19]]) as usize;
    frame.resize(HEADER_LEN + pd_len, 0);
    within(
        "startup private data",
        stream.read_exact(&mut frame[HEADER_LEN..]),
    )
    .await
    .expect("startup private data");
    frame
}

impl RawPeer {
    /// Wraps a stream in full operation with `framing` (this end's view).
    pub fn new(stream: TcpStream, framing: FramingParams) -> Self {
        Self {
            stream,
            framing,
            tx: FpduTransmitter::new(framing),
            rx: FpduReceiver::new(framing),
            ulpdus: CollectUlpdus::new(),
            received: Vec::new(),
        }
    }

    /// Connects to `addr` as MPA initiator, sends `request` and reads the
    /// Reply. The framing is CRC if either frame asked for it, no markers.
    pub async fn initiate(addr: std::net::SocketAddr, request: &[u8]) -> (Self, Vec<u8>) {
        let mut stream = within("raw connect", TcpStream::connect(addr))
            .await
            .expect("raw connect");
        stream.set_nodelay(true).unwrap();
        stream.write_all(request).await.expect("send Request");
        let reply = read_startup_frame(&mut stream).await;
        let (repr, _) = StartupFrameRepr::parse_bytes(&reply).expect("a valid Reply");
        assert_eq!(repr.kind, FrameKind::Reply);
        assert!(!repr.rejected, "rejected: {repr:?}");
        let (req, _) = StartupFrameRepr::parse_bytes(request).expect("a valid Request");
        let framing = FramingParams {
            crc: req.crc || repr.crc,
            send_markers: false,
            receive_markers: false,
        };
        (Self::new(stream, framing), reply)
    }

    /// Accepts one connection on `listener` as MPA responder: reads the
    /// Request and answers with `reply`. Returns the peer and the Request.
    pub async fn respond(listener: &TcpListener, reply: &[u8]) -> (Self, Vec<u8>) {
        let (mut stream, _) = within("raw accept", listener.accept())
            .await
            .expect("raw accept");
        stream.set_nodelay(true).unwrap();
        let request = read_startup_frame(&mut stream).await;
        stream.write_all(reply).await.expect("send Reply");
        let (req, _) = StartupFrameRepr::parse_bytes(&request).expect("a valid Request");
        let (rep, _) = StartupFrameRepr::parse_bytes(reply).expect("a valid Reply");
        let framing = FramingParams {
            crc: req.crc || rep.crc,
            send_markers: false,
            receive_markers: false,
        };
        (Self::new(stream, framing), request)
    }

    /// The FPDU that carries `ulpdu` next on this stream.
    pub fn frame(&mut self, ulpdu: &[u8]) -> Vec<u8> {
        let mut batch = WireBatch::new();
        self.tx.frame(&[], &[ulpdu], &mut batch).expect("frame");
        let mut out = Vec::new();
        batch.write_to(&[ulpdu], &mut out);
        out
    }

    /// Sends `ulpdu` in one FPDU.
    pub async fn send_ulpdu(&mut self, ulpdu: &[u8]) {
        let fpdu = self.frame(ulpdu);
        self.stream.write_all(&fpdu).await.expect("raw send");
    }

    /// Sends `ulpdu` in one FPDU whose CRC field is damaged.
    pub async fn send_ulpdu_bad_crc(&mut self, ulpdu: &[u8]) {
        let mut fpdu = self.frame(ulpdu);
        let n = fpdu.len();
        fpdu[n - 1] ^= 0xff;
        self.stream.write_all(&fpdu).await.expect("raw send");
    }

    /// The next complete ULPDU the other end sent, or `None` once the
    /// stream has ended (closed or reset) without one.
    pub async fn next_ulpdu(&mut self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 65536];
        loop {
            if !self.ulpdus.complete.is_empty() {
                return Some(self.ulpdus.complete.remove(0));
            }
            let n = match within("raw read", self.stream.read(&mut buf)).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => n,
            };
            self.received.extend_from_slice(&buf[..n]);
            self.rx
                .receive(&buf[..n], &mut self.ulpdus)
                .expect("the other end's FPDUs are well framed");
        }
    }

    /// Reads until the other end closes or resets the connection; returns
    /// every octet received after the startup frame, and whether the
    /// stream ended with an orderly close (as opposed to a reset).
    pub async fn read_to_end(&mut self) -> (Vec<u8>, bool) {
        let mut buf = vec![0u8; 65536];
        let clean = loop {
            match within("the other end to close", self.stream.read(&mut buf)).await {
                Ok(0) => break true,
                Ok(n) => self.received.extend_from_slice(&buf[..n]),
                Err(_) => break false,
            }
        };
        (self.received.clone(), clean)
    }
}

/// The first FPDU a transmitter with `framing` sends, carrying `ulpdu`:
/// what a hand-checked expectation is compared against.
pub fn first_fpdu(framing: FramingParams, ulpdu: &[u8]) -> Vec<u8> {
    let mut batch = WireBatch::new();
    FpduTransmitter::new(framing)
        .frame(&[], &[ulpdu], &mut batch)
        .expect("frame");
    let mut out = Vec::new();
    batch.write_to(&[ulpdu], &mut out);
    out
}

/// An RDMA Write segment (tagged, last) to `stag` at `to`.
pub fn write(stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut u = hex("c140");
    u.extend(stag.to_be_bytes());
    u.extend(to.to_be_bytes());
    u.extend(payload);
    u
}

/// The Terminate segment (untagged, last, QN 2, MSN 1) our end sends
/// first, carrying `payload`.
pub fn terminate(payload: &[u8]) -> Vec<u8> {
    let mut u = hex("4147 00000000 00000002 00000001 00000000");
    u.extend(payload);
    u
}

/// A raw MPA initiator connects to our listener (configured with `cfg`)
/// with a revision 1 Request asking for CRC as `crc` says; we accept with
/// `opts` and no private data. Checks the Reply octets.
pub async fn raw_initiator(cfg: Config, crc: bool, opts: QpOptions) -> (RawPeer, QueuePair) {
    let mut listener = Listener::bind("127.0.0.1:0", cfg.clone()).await.unwrap();
    let addr = listener.local_addr();
    let request = startup_frame(FrameKind::Request, Revision::Rev1, crc, b"");
    let accept = async move {
        let req = listener.accept().await.unwrap();
        req.accept(opts, b"").await.unwrap()
    };
    let ((raw, reply), qp) = within("raw startup", async {
        tokio::join!(RawPeer::initiate(addr, &request), accept)
    })
    .await;
    // Revision 1, C as either asked, M as our end asks, no private data.
    let flags = if crc || cfg.startup.crc.sends_crc() {
        0x40
    } else {
        0
    } | if cfg.startup.request_markers { 0x80 } else { 0 };
    let mut want = b"MPA ID Rep Frame".to_vec();
    want.extend([flags, 1, 0, 0]);
    assert_eq!(reply, want);
    (raw, qp)
}

/// Reads what our end sends until it closes, and checks it is exactly
/// one FPDU carrying `ulpdu`, framed as `raw` receives.
pub async fn expect_terminate(raw: &mut RawPeer, ulpdu: &[u8]) -> Vec<u8> {
    let (got, _) = raw.read_to_end().await;
    let want = first_fpdu(raw.framing.mirrored(), ulpdu);
    assert_eq!(got, want, "\n got {got:02x?}\nwant {want:02x?}");
    got
}

/// Reads `stream` until it ends; returns what arrived.
pub async fn drain_to_end(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match within("the other end to close", stream.read(&mut buf)).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Parses a hex string, spaces ignored: for octets written out in tests.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).expect("hex"))
        .collect()
}
