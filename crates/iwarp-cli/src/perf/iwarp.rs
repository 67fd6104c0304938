//! The iWARP backend: RDMA Write, RDMA Read and Send over this crate's own
//! stack (`iwarp`), measured exactly as the TCP baseline is.
//!
//! # What each test does, and what "complete" means
//!
//! * **Write bandwidth**: the server registers a buffer (remote write) and
//!   announces its key; the client posts RDMA Writes of `size` octets into
//!   it. Locally a Write completes as soon as TCP has its last segment
//!   (RFC 5041 §5.4), long before the server has it; counting that would
//!   flatter iWARP next to the TCP baseline, whose operations complete when
//!   the receiving application has them. So the client fences: a
//!   zero-length RDMA Read after the Writes outstanding, whose response can
//!   only come back once the server has placed every Write before it (one
//!   ordered stream), and Writes count as complete when their fence does.
//!   The server reports what its engine counted of the peer's Writes.
//! * **Read bandwidth and latency**: the server registers a buffer (remote
//!   read); the client posts RDMA Reads into its own buffer. A Read
//!   completes when the last response octet is placed: a full round trip,
//!   like the TCP request/response pattern. The server reports the Read
//!   Responses its engine sent.
//! * **Send bandwidth**: iWARP has no receiver-not-ready, and a Send
//!   completes at the sender as soon as TCP has it, so a sender could
//!   overrun the receiver's posted buffers. As in the TCP baseline, the
//!   server therefore acknowledges what its application received, with a
//!   small Send carrying the cumulative message count after each batch of
//!   receive completions, and the client counts a Send complete when it is
//!   acknowledged. With at most `tx-depth` Sends unacknowledged and
//!   `tx-depth` receives kept posted, no Send can find the server without
//!   a buffer.
//! * **Send latency**: a ping-pong of `size`-octet Sends (half the round
//!   trip is reported).
//! * **Write latency**: a ping-pong of RDMA Writes, as `ib_write_lat` does
//!   it: each side polls the last octet of its buffer for the peer's
//!   sequence number, then writes back. The pong carries `pong_mark` of
//!   the ping's number, a value the client's own ping never leaves in its
//!   buffer, so the client never clears the octet and a pong that lands
//!   before the ping's completion is seen is never lost. Polling yields to
//!   the runtime between looks, since the same cores run the connection
//!   tasks.
//!
//! A data connection identifies itself with its session and index in the
//! MPA Request's private data (`IWPF`, session, index); the server rejects
//! a request for another session with a reason in its Reply. IFT's startup
//! carries no private data: there the same hello is the connection's first
//! Send, into a receive the server posted when accepting.

use std::net::{IpAddr, SocketAddr};

use iwarp::{
    Access, Completion, CompletionQueue, CompletionStatus, Config, Listener, MemoryRegion,
    Placement, PostList, ProtectionDomain, QpOptions, QueuePair, RemoteKey, Revision,
};

use super::backend::{Backend, ClientConn, DataListener, ServerConn, Stop};
use super::control::PeerTally;
use super::error::{PerfError, Result};
use super::spec::{
    CrcMode, FramingMode, Markers, Measure, MpaRev, PlacementMode, TestKind, TestSpec, Transport,
};

/// The magic opening a data connection's private data.
const HELLO_MAGIC: &[u8; 4] = b"IWPF";
/// Octets of the private data: magic, session (u64), index (u32).
const HELLO_LEN: usize = 16;
/// Octets of an acknowledgement: the cumulative message count.
const ACK_LEN: usize = 8;
/// Receives kept posted beyond the queue depth.
const SLACK: usize = 16;
/// The work request id of a Write fence (a zero-length RDMA Read).
const FENCE_WR: u64 = 1 << 62;
/// The work request id of the receive an IFT data connection's hello arrives in.
const HELLO_WR: u64 = 1 << 61;
/// How long an IFT data connection has to send its hello once accepted.
const HELLO_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// The work request id of a latency test's requests.
const LAT_WR: u64 = 1 << 60;
/// Fences in flight at most (each is an outstanding Read, within the ORD).
const MAX_FENCES: usize = 8;

/// The iWARP backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct IwarpBackend;

/// Which end of the test this is, for the marker knob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// The runtime configuration the protocol knobs ask for. The client's
/// `--markers rx` means markers in what the client receives, so the client
/// requests them; `tx` means the server requests them.
fn config(spec: &TestSpec, side: Side) -> Config {
    let knobs = spec.protocol;
    let mut c = match (knobs.framing, knobs.mpa_rev) {
        (FramingMode::Ift, _) => Config::ift(),
        (_, MpaRev::V0) => Config::with_revision(Revision::Rev0),
        (_, MpaRev::V1) => Config::with_revision(Revision::Rev1),
        (_, MpaRev::V2) => Config::with_revision(Revision::Rev2),
        (_, MpaRev::Immediate) => Config::immediate_start(),
    };
    let (header_crc, payload_crc) = knobs.ift_crc.fields();
    c.ift.header_crc = header_crc;
    c.ift.check_header_crc = header_crc;
    c.ift.payload_crc = payload_crc;
    c.ift.check_payload_crc = payload_crc;
    c.startup.crc = match knobs.crc {
        CrcMode::On => iwarp::CrcPolicy::Preferred,
        CrcMode::Off => iwarp::CrcPolicy::Off,
        CrcMode::Required => iwarp::CrcPolicy::Required,
    };
    c.startup.request_markers = matches!(
        (side, knobs.markers),
        (Side::Client, Markers::Rx | Markers::Both) | (Side::Server, Markers::Tx | Markers::Both)
    );
    // IFT: either end sends markers if the other asks, at MPA's interval.
    c.ift.send_markers = true;
    c.ift.receive_markers = c
        .startup
        .request_markers
        .then_some(iwarp::proto::framing::MarkerInterval::DEFAULT);
    c.placement = match knobs.placement {
        PlacementMode::Direct => Placement::Direct,
        PlacementMode::Verified => Placement::Verified,
    };
    if let Some(us) = knobs.post_burst_us {
        c.post_burst = std::time::Duration::from_micros(u64::from(us));
    }
    let depth = spec.effective_depth() as usize + SLACK;
    c.send_queue_depth = depth.max(64) * 2;
    c.recv_queue_depth = depth.max(64) * 2;
    // Without revision 2 nothing is negotiated, so both ends use these.
    let reads = u16::try_from(spec.outs.max(16))
        .unwrap_or(u16::MAX)
        .min(16383);
    c.startup.ird = reads;
    c.startup.ord = reads;
    c
}

/// The largest message of the test: buffers are sized for it once, so
/// that receives posted for one size fit every later one.
fn max_size(spec: &TestSpec) -> Result<usize> {
    let max = spec.sizes.iter().copied().max().unwrap_or(0);
    usize::try_from(max)
        .map_err(|_| PerfError::Protocol(format!("message size {max} too large for this host")))
}

fn register(pd: &ProtectionDomain, len: usize, access: Access, what: &str) -> Result<MemoryRegion> {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    pd.register(data, access)
        .map_err(|e| PerfError::iwarp(format!("registering the {what} buffer"), e))
}

/// Queue pair options with separate send and receive completion queues,
/// so that each side's completions are told apart without looking.
fn qp_options(pd: &ProtectionDomain) -> QpOptions {
    QpOptions {
        pd: pd.clone(),
        send_cq: CompletionQueue::new(1024),
        recv_cq: CompletionQueue::new(1024),
        initial_recvs: Vec::new(),
    }
}

fn post_err(what: &'static str) -> impl Fn(iwarp::Error) -> PerfError {
    move |e| PerfError::iwarp(what, e)
}

/// Fails on a completion with an error status.
fn check(c: &Completion, what: &str) -> Result<()> {
    if c.status == CompletionStatus::Success {
        Ok(())
    } else {
        Err(PerfError::Protocol(format!(
            "{what}: work request {} completed with {:?}",
            c.wr_id, c.status
        )))
    }
}

/// A connection's counters, as the engine keeps them, in a line naming both addresses.
fn counters(qp: &QueuePair) -> String {
    let stats = qp.stats();
    format!(
        "{} -> {}: {}",
        qp.local_addr(),
        qp.peer_addr(),
        stats.connection
    )
}

fn connection_gone(qp: &QueuePair, peer: &'static str, what: &str) -> PerfError {
    match qp.error() {
        Some(e) => PerfError::Protocol(format!("{what}: {e}")),
        None => PerfError::PeerGone {
            peer,
            what: what.into(),
        },
    }
}

impl Backend for IwarpBackend {
    type Client = IwarpClient;
    type Listener = IwarpDataListener;

    fn transport(&self) -> Transport {
        Transport::Iwarp
    }

    async fn listen(&self, ip: IpAddr, port: u16, spec: &TestSpec) -> Result<IwarpDataListener> {
        let addr = SocketAddr::new(ip, port);
        let listener = Listener::bind(addr, config(spec, Side::Server))
            .await
            .map_err(|e| match e {
                iwarp::Error::Io(source) => PerfError::Bind { addr, source },
                other => PerfError::iwarp(format!("listening on {addr}"), other),
            })?;
        Ok(IwarpDataListener {
            port: listener.local_addr().port(),
            listener,
            spec: spec.clone(),
        })
    }

    async fn connect(
        &self,
        addr: SocketAddr,
        session: u64,
        index: u32,
        spec: &TestSpec,
    ) -> Result<IwarpClient> {
        let pd = crate::device().alloc_pd();
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(HELLO_MAGIC);
        hello[4..12].copy_from_slice(&session.to_be_bytes());
        hello[12..].copy_from_slice(&index.to_be_bytes());
        // IFT's startup carries no private data: the hello goes as the first Send instead.
        let ift = spec.protocol.framing == FramingMode::Ift;
        let private = if ift { &[][..] } else { &hello[..] };
        let qp = iwarp::connect(addr, &config(spec, Side::Client), qp_options(&pd), private)
            .await
            .map_err(|e| match e {
                iwarp::Error::Refused(_) => PerfError::Connect {
                    addr,
                    source: std::io::ErrorKind::ConnectionRefused.into(),
                },
                iwarp::Error::Rejected { private_data, .. } => PerfError::Remote {
                    peer: "server",
                    message: String::from_utf8_lossy(&private_data).into_owned(),
                },
                other => PerfError::iwarp(format!("connecting to {addr}"), other),
            })?;
        if ift {
            let note = pd
                .register(hello.to_vec(), Access::empty())
                .map_err(post_err("registering the hello"))?;
            let sge = note.sge(..).map_err(post_err("describing the hello"))?;
            qp.send(sge)
                .await
                .map_err(|e| PerfError::iwarp("sending the hello", e))?;
        }
        let max = max_size(spec)?;
        let depth = spec.effective_depth() as usize;
        let access = match spec.test {
            // A Read sink is written by the tagged Read Response.
            TestKind::Read => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            // The write-latency ping-pong writes back into this buffer.
            TestKind::Write => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            TestKind::Send => Access::LOCAL_WRITE,
        };
        // Send tests ping from the first half and take pongs in the second.
        let local_len = if spec.test == TestKind::Send {
            2 * max
        } else {
            max
        };
        let local = register(&pd, local_len.max(2), access, "local")?;
        // Acknowledgement slots (send bandwidth) or pong buffers (send latency).
        let acks = register(&pd, (depth + SLACK) * ACK_LEN, Access::LOCAL_WRITE, "ack")?;
        Ok(IwarpClient {
            qp,
            pd,
            test: spec.test,
            measure: spec.measure,
            depth,
            local,
            acks,
            remote: None,
            size: 0,
            posted: 0,
            completed: 0,
            acks_posted: false,
            seq: 0,
            completions: Vec::with_capacity(256),
            fences: std::collections::VecDeque::with_capacity(MAX_FENCES),
            fenced: 0,
        })
    }
}

/// The client side of an iWARP data connection.
#[derive(Debug)]
pub struct IwarpClient {
    qp: QueuePair,
    pd: ProtectionDomain,
    test: TestKind,
    measure: Measure,
    depth: usize,
    local: MemoryRegion,
    acks: MemoryRegion,
    remote: Option<RemoteKey>,
    size: usize,
    posted: u64,
    completed: u64,
    acks_posted: bool,
    /// Write latency: the sequence number in the last octet, 1..=255.
    seq: u8,
    completions: Vec<Completion>,
    /// Write bandwidth: fences in flight, oldest first, each with the
    /// number of Writes posted before it; and how many Writes fences have
    /// been issued for. A fence follows every `depth / 8` Writes, so that
    /// completions flow steadily rather than a queue's worth at a time.
    fences: std::collections::VecDeque<u64>,
    fenced: u64,
}

impl IwarpClient {
    fn local_sge(&self) -> Result<iwarp::Sge> {
        self.local
            .sge(..self.size)
            .map_err(post_err("describing the local buffer"))
    }

    fn remote(&self) -> Result<RemoteKey> {
        self.remote
            .ok_or_else(|| PerfError::Protocol("the server announced no buffer".into()))
    }

    /// Takes the local completions already in, failing on one that failed (`what`
    /// names the operation). A latency ping the server answered has left this end,
    /// so its completion is in.
    fn reap_sends(&self, what: &str) -> Result<()> {
        while let Some(c) = self.qp.send_cq().poll() {
            check(&c, what)?;
        }
        Ok(())
    }

    /// Send bandwidth: waits for acknowledgements; returns newly acknowledged messages.
    async fn ack_completions(&mut self) -> Result<u64> {
        loop {
            let first = self.qp.recv_cq().next().await;
            self.completions.clear();
            self.completions.push(first);
            self.qp.recv_cq().poll_many(&mut self.completions, 1024);
            // Local Send completions carry nothing we need; keep the queue short.
            self.reap_sends("send")?;
            let mut latest = self.completed;
            for c in &self.completions {
                if c.status != CompletionStatus::Success {
                    return Err(connection_gone(
                        &self.qp,
                        "server",
                        "waiting for acknowledgements",
                    ));
                }
                let at = c.wr_id as usize * ACK_LEN;
                let count = self.acks.read_with(|b| {
                    u64::from_be_bytes(b[at..at + ACK_LEN].try_into().unwrap_or([0; 8]))
                });
                latest = latest.max(count);
            }
            self.repost_acks(self.completions.iter().map(|c| c.wr_id as usize))?;
            if latest > self.posted {
                return Err(PerfError::Protocol(format!(
                    "server acknowledged {latest} messages; {} posted",
                    self.posted
                )));
            }
            if latest > self.completed {
                let n = latest - self.completed;
                self.completed = latest;
                return Ok(n);
            }
        }
    }

    /// Posts the receives of acknowledgement `slots` again, in one list.
    fn repost_acks(&self, slots: impl Iterator<Item = usize>) -> Result<()> {
        self.qp.post_list(|list| {
            slots.into_iter().try_for_each(|slot| {
                let at = slot * ACK_LEN;
                let sge = self
                    .acks
                    .sge(at..at + ACK_LEN)
                    .map_err(post_err("describing an ack buffer"))?;
                list.post_recv(slot as u64, sge)
                    .map_err(post_err("posting an ack receive"))
            })
        })
    }

    /// The zero-length sink of a fence.
    fn fence_sge(&self) -> Result<iwarp::Sge> {
        self.local.sge(..0).map_err(post_err("describing a fence"))
    }

    /// Posts a fence covering every Write posted so far.
    fn fence(&mut self) -> Result<()> {
        self.qp
            .rdma_read(FENCE_WR, self.fence_sge()?, self.remote()?)
            .map_err(post_err("posting a fence"))?;
        self.fenced_all();
        Ok(())
    }

    /// Notes a fence posted behind every Write posted so far.
    fn fenced_all(&mut self) {
        self.fences.push_back(self.posted);
        self.fenced = self.posted;
    }

    /// Write bandwidth: Writes are complete when a fence issued after them
    /// completes (see the module documentation).
    async fn fenced_completions(&mut self) -> Result<u64> {
        loop {
            if self.fences.is_empty() && self.fenced < self.posted {
                self.fence()?;
            }
            let first = self.qp.send_cq().next().await;
            self.completions.clear();
            self.completions.push(first);
            self.qp.send_cq().poll_many(&mut self.completions, 4096);
            let mut done = 0;
            for i in 0..self.completions.len() {
                let c = self.completions[i];
                if c.status != CompletionStatus::Success {
                    return Err(connection_gone(
                        &self.qp,
                        "server",
                        "waiting for completions",
                    ));
                }
                // Reads complete in order, so fences do too.
                if c.wr_id == FENCE_WR {
                    if let Some(upto) = self.fences.pop_front() {
                        done += upto - self.completed;
                        self.completed = upto;
                    }
                }
            }
            if done > 0 {
                return Ok(done);
            }
        }
    }

    /// Local completions of Reads: at least one.
    async fn local_completions(&mut self) -> Result<u64> {
        let first = self.qp.send_cq().next().await;
        self.completions.clear();
        self.completions.push(first);
        self.qp.send_cq().poll_many(&mut self.completions, 4096);
        for c in &self.completions {
            if c.status != CompletionStatus::Success {
                return Err(connection_gone(
                    &self.qp,
                    "server",
                    "waiting for completions",
                ));
            }
        }
        let n = self.completions.len() as u64;
        self.completed += n;
        Ok(n)
    }
}

impl ClientConn for IwarpClient {
    fn counters(&self) -> Option<String> {
        Some(counters(&self.qp))
    }

    async fn prepare(&mut self, size: u64, peer_info: &[u8]) -> Result<()> {
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| {
                s > 0 && s <= self.local.len() / if self.test == TestKind::Send { 2 } else { 1 }
            })
            .ok_or_else(|| PerfError::Protocol(format!("message size {size} out of range")))?;
        self.size = size;
        self.posted = 0;
        self.completed = 0;
        self.fences.clear();
        self.fenced = 0;
        self.remote = RemoteKey::from_bytes(peer_info);
        match (self.test, self.measure) {
            (TestKind::Send, Measure::Bw) if !self.acks_posted => {
                self.repost_acks(0..self.depth + SLACK)?;
                self.acks_posted = true;
            }
            (TestKind::Write, Measure::Lat) => {
                // The server writes its pongs back here: tell it where, once
                // per phase (it has posted a receive for this).
                let note = self
                    .pd
                    .register(self.local.remote_key().to_bytes().to_vec(), Access::empty())
                    .map_err(post_err("registering the key message"))?;
                let sge = note
                    .sge(..)
                    .map_err(post_err("describing the key message"))?;
                self.qp
                    .send(sge)
                    .await
                    .map_err(|e| PerfError::iwarp("announcing the write-back buffer", e))?;
                self.seq = 0;
            }
            _ => {}
        }
        Ok(())
    }

    async fn post(&mut self) -> Result<()> {
        let sge = self.local_sge()?;
        let id = self.posted;
        match self.test {
            TestKind::Write => {
                let every = (self.depth as u64 / 8).max(1);
                let fence = (self.measure == Measure::Bw
                    && self.fences.len() < MAX_FENCES
                    && self.posted + 1 - self.fenced >= every)
                    .then(|| self.fence_sge())
                    .transpose()?;
                let remote = self.remote()?;
                // The Write and its fence in one list: one write to the
                // socket, as the TCP baseline makes one per message.
                self.qp
                    .post_list(|list| {
                        list.rdma_write(id, sge, remote)?;
                        match fence {
                            Some(empty) => list.rdma_read(FENCE_WR, empty, remote),
                            None => Ok(()),
                        }
                    })
                    .map_err(post_err("posting an RDMA Write and its fence"))?;
                self.posted += 1;
                if fence.is_some() {
                    self.fenced_all();
                }
                return Ok(());
            }
            TestKind::Read => self
                .qp
                .rdma_read(id, sge, self.remote()?)
                .map_err(post_err("posting an RDMA Read"))?,
            TestKind::Send => self
                .qp
                .post_send(id, sge)
                .map_err(post_err("posting a Send"))?,
        }
        self.posted += 1;
        Ok(())
    }

    async fn wait_completions(&mut self) -> Result<u64> {
        match self.test {
            TestKind::Send => self.ack_completions().await,
            TestKind::Write => self.fenced_completions().await,
            TestKind::Read => self.local_completions().await,
        }
    }

    /// One round trip, posted and reaped through the completion queues as
    /// perftest's latency tests do, rather than through the awaiting
    /// convenience calls.
    async fn lat_op(&mut self) -> Result<()> {
        let sge = self.local_sge()?;
        match self.test {
            TestKind::Read => {
                self.qp
                    .rdma_read(LAT_WR, sge, self.remote()?)
                    .map_err(post_err("posting an RDMA Read"))?;
                let c = self.qp.send_cq().next().await;
                if c.status != CompletionStatus::Success {
                    return Err(connection_gone(&self.qp, "server", "RDMA Read"));
                }
            }
            TestKind::Send => {
                let half = self.local.len() / 2;
                let pong = self
                    .local
                    .sge(half..half + self.size)
                    .map_err(post_err("describing the pong buffer"))?;
                // The pong's receive before the ping, in one list.
                self.qp
                    .post_list(|list| {
                        list.post_recv(LAT_WR, pong)?;
                        list.post_send(LAT_WR, sge)
                    })
                    .map_err(post_err("posting a Send ping and its pong's receive"))?;
                let c = self.qp.recv_cq().next().await;
                if c.status != CompletionStatus::Success {
                    return Err(connection_gone(&self.qp, "server", "receiving the pong"));
                }
                self.reap_sends("Send ping")?;
            }
            TestKind::Write => {
                self.seq = self.seq % 255 + 1;
                let seq = self.seq;
                let last = self.size - 1;
                self.local.write_with(|b| b[last] = seq);
                self.qp
                    .rdma_write(LAT_WR, sge, self.remote()?)
                    .map_err(post_err("posting an RDMA Write ping"))?;
                // The server writes the ping's mark back; it may already be here.
                poll_for(&self.qp, &self.local, last, pong_mark(seq), "server").await?;
                self.reap_sends("RDMA Write ping")?;
            }
        }
        Ok(())
    }
}

/// The octet a Write-latency pong carries for ping number `seq` (1..=255):
/// never `seq` itself, and a different value for every `seq`.
fn pong_mark(seq: u8) -> u8 {
    seq ^ 0x80
}

/// Polls `region[at]` until it holds `value`, yielding between looks.
async fn poll_for(
    qp: &QueuePair,
    region: &MemoryRegion,
    at: usize,
    value: u8,
    peer: &'static str,
) -> Result<()> {
    let mut spins: u32 = 0;
    loop {
        if region.read_with(|b| b[at]) == value {
            return Ok(());
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1024) && qp.error().is_some() {
            return Err(connection_gone(qp, peer, "waiting for a write-back"));
        }
        tokio::task::yield_now().await;
    }
}

/// The connection index a hello names, if it is one of `session`'s.
fn hello_index(hello: &[u8], session: u64) -> Option<u32> {
    match (hello.get(..4), hello.get(4..12), hello.get(12..HELLO_LEN)) {
        (Some(m), Some(s), Some(i)) if m == HELLO_MAGIC => {
            let s = u64::from_be_bytes(s.try_into().unwrap_or_default());
            let i = u32::from_be_bytes(i.try_into().unwrap_or_default());
            (s == session).then_some(i)
        }
        _ => None,
    }
}

/// The server's listener for one session's iWARP data connections.
#[derive(Debug)]
pub struct IwarpDataListener {
    listener: Listener,
    port: u16,
    spec: TestSpec,
}

impl DataListener for IwarpDataListener {
    type Conn = IwarpServerConn;

    fn port(&self) -> u16 {
        self.port
    }

    async fn accept(&mut self, session: u64) -> Result<(u32, IwarpServerConn)> {
        loop {
            let request = self
                .listener
                .accept()
                .await
                .map_err(|e| PerfError::iwarp("accepting a data connection", e))?;
            let pd = crate::device().alloc_pd();
            let (index, qp) = if self.spec.protocol.framing == FramingMode::Ift {
                // No private data: the hello is the connection's first Send.
                let hello = register(&pd, HELLO_LEN, Access::LOCAL_WRITE, "hello")?;
                let sge = hello.sge(..).map_err(post_err("describing the hello"))?;
                let qp = request
                    .accept(qp_options(&pd).post_recv(HELLO_WR, sge), b"")
                    .await
                    .map_err(|e| PerfError::iwarp("accepting a data connection", e))?;
                // A stranger that never says hello, or closes instead, does not stall the
                // session: its connection is dropped and the listener keeps waiting.
                let said = tokio::time::timeout(HELLO_WAIT, qp.recv_cq().next()).await;
                let index = match said {
                    Ok(c) if c.status == CompletionStatus::Success => {
                        hello_index(&hello.to_vec(), session)
                    }
                    _ => None,
                };
                match index {
                    Some(index) => (index, qp),
                    // Another session's or a stranger's connection: drop it, keep waiting.
                    None => continue,
                }
            } else {
                let Some(index) = hello_index(request.private_data(), session) else {
                    // Another session's or a stranger's connection: say why, keep waiting.
                    let _ = request.reject(b"unknown session").await;
                    continue;
                };
                let qp = request
                    .accept(qp_options(&pd), b"")
                    .await
                    .map_err(|e| PerfError::iwarp("accepting a data connection", e))?;
                (index, qp)
            };
            let max = max_size(&self.spec)?.max(1);
            let buf = register(
                &pd,
                max,
                Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
                "server",
            )?;
            let depth = self.spec.effective_depth() as usize;
            let acks = register(&pd, (depth + SLACK) * ACK_LEN, Access::LOCAL_WRITE, "ack")?;
            return Ok((
                index,
                IwarpServerConn {
                    qp,
                    test: self.spec.test,
                    measure: self.spec.measure,
                    depth,
                    buf,
                    acks,
                    recvs_posted: 0,
                    key: None,
                    completions: Vec::with_capacity(256),
                    next_ack: 0,
                    at_start: Default::default(),
                },
            ));
        }
    }
}

/// The server side of an iWARP data connection.
#[derive(Debug)]
pub struct IwarpServerConn {
    qp: QueuePair,
    test: TestKind,
    measure: Measure,
    depth: usize,
    buf: MemoryRegion,
    acks: MemoryRegion,
    /// Receives posted and not yet completed.
    recvs_posted: usize,
    /// Write latency: where the client wants its pongs.
    key: Option<MemoryRegion>,
    completions: Vec<Completion>,
    next_ack: usize,
    /// The engine's one-sided counts when the phase was prepared.
    at_start: iwarp::OneSidedCounters,
}

impl IwarpServerConn {
    /// Keeps `want` receives (into the whole buffer: benchmark data is
    /// overwritten freely, as perftest does) posted.
    fn top_up(&mut self, want: usize) -> Result<()> {
        if self.recvs_posted >= want {
            return Ok(());
        }
        self.top_up_with(want, "posting a receive", |_| Ok(()))
    }

    /// [`IwarpServerConn::top_up`], then what `then` posts, in one list: one lock for
    /// the batch, not one per request. `what` names the posting in an error.
    fn top_up_with(
        &mut self,
        want: usize,
        what: &'static str,
        then: impl FnOnce(&mut PostList<'_>) -> std::result::Result<(), iwarp::Error>,
    ) -> Result<()> {
        let missing = want.saturating_sub(self.recvs_posted);
        let sge = self
            .buf
            .sge(..)
            .map_err(post_err("describing the receive buffer"))?;
        self.qp
            .post_list(|list| {
                (0..missing).try_for_each(|_| list.post_recv(0, sge))?;
                then(list)
            })
            .map_err(post_err(what))?;
        self.recvs_posted += missing;
        Ok(())
    }

    /// Send bandwidth: receives, reposts, and acknowledges each batch.
    async fn serve_sends(&mut self, tally: &mut PeerTally) -> Result<()> {
        let want = self.depth + SLACK;
        loop {
            let first = self.qp.recv_cq().next().await;
            self.completions.clear();
            self.completions.push(first);
            self.qp.recv_cq().poll_many(&mut self.completions, 4096);
            for c in &self.completions {
                if c.status != CompletionStatus::Success {
                    return Err(connection_gone(&self.qp, "client", "receiving Sends"));
                }
                tally.bytes += u64::from(c.byte_len);
                tally.messages += 1;
            }
            self.recvs_posted -= self.completions.len();
            self.top_up(want)?;
            // Completed acknowledgements free their slots; errors end the test.
            while let Some(c) = self.qp.send_cq().poll() {
                check(&c, "acknowledgement")?;
            }
            let slot = self.next_ack;
            self.next_ack = (self.next_ack + 1) % (self.depth + SLACK);
            let at = slot * ACK_LEN;
            let count = tally.messages;
            self.acks
                .copy_from(at, &count.to_be_bytes())
                .map_err(post_err("writing an acknowledgement"))?;
            let sge = self
                .acks
                .sge(at..at + ACK_LEN)
                .map_err(post_err("describing an acknowledgement"))?;
            self.qp
                .post_send(slot as u64, sge)
                .map_err(post_err("sending an acknowledgement"))?;
        }
    }

    /// Send latency: answers each ping with a pong of the same size.
    async fn serve_send_pongs(&mut self, size: usize, tally: &mut PeerTally) -> Result<()> {
        loop {
            let c = self.qp.recv_cq().next().await;
            if c.status != CompletionStatus::Success {
                return Err(connection_gone(&self.qp, "client", "receiving pings"));
            }
            self.recvs_posted -= 1;
            tally.bytes += u64::from(c.byte_len);
            tally.messages += 1;
            let sge = self
                .buf
                .sge(..size)
                .map_err(post_err("describing the pong"))?;
            self.top_up_with(4, "sending a pong and its receives", |list| {
                list.post_send(1, sge)
            })?;
            while let Some(c) = self.qp.send_cq().poll() {
                check(&c, "pong")?;
            }
        }
    }

    /// Write latency: waits for each ping's sequence number, writes back.
    async fn serve_write_pongs(&mut self, size: usize, tally: &mut PeerTally) -> Result<()> {
        let c = self.qp.recv_cq().next().await;
        if c.status != CompletionStatus::Success {
            return Err(connection_gone(
                &self.qp,
                "client",
                "waiting for the client's buffer",
            ));
        }
        self.recvs_posted -= 1;
        let note = self
            .key
            .as_ref()
            .map(MemoryRegion::to_vec)
            .unwrap_or_default();
        let remote = RemoteKey::from_bytes(&note)
            .ok_or_else(|| PerfError::Protocol("the client announced no buffer".into()))?;
        let last = size - 1;
        let sge = self
            .buf
            .sge(..size)
            .map_err(post_err("describing the pong"))?;
        let mut seq: u8 = 0;
        loop {
            seq = seq % 255 + 1;
            poll_for(&self.qp, &self.buf, last, seq, "client").await?;
            tally.bytes += size as u64;
            tally.messages += 1;
            // The client's next ping cannot arrive before this pong is sent.
            self.buf.write_with(|b| b[last] = pong_mark(seq));
            self.qp
                .rdma_write(u64::from(seq), sge, remote)
                .map_err(post_err("writing a pong"))?;
            while let Some(c) = self.qp.send_cq().poll() {
                check(&c, "pong")?;
            }
        }
    }
}

impl ServerConn for IwarpServerConn {
    fn counters(&self) -> Option<String> {
        Some(counters(&self.qp))
    }

    async fn prepare_phase(&mut self, size: u64) -> Result<Vec<u8>> {
        if size == 0 || size > self.buf.len() as u64 {
            return Err(PerfError::Protocol(format!(
                "message size {size} out of range"
            )));
        }
        self.at_start = self.qp.stats().one_sided;
        match (self.test, self.measure) {
            (TestKind::Send, Measure::Bw) => self.top_up(self.depth + SLACK)?,
            (TestKind::Send, Measure::Lat) => self.top_up(4)?,
            (TestKind::Write, Measure::Lat) => {
                // Forget the last phase's ping; receive the client's key.
                let last = size as usize - 1;
                self.buf.write_with(|b| b[last] = 0);
                let key = self
                    .buf
                    .pd()
                    .register(vec![0u8; RemoteKey::WIRE_LEN], Access::LOCAL_WRITE)
                    .map_err(post_err("registering the key buffer"))?;
                let sge = key.sge(..).map_err(post_err("describing the key buffer"))?;
                self.qp
                    .post_recv(2, sge)
                    .map_err(post_err("posting the key receive"))?;
                self.recvs_posted += 1;
                self.key = Some(key);
            }
            _ => {}
        }
        Ok(self.buf.remote_key().to_bytes().to_vec())
    }

    async fn serve_phase(&mut self, size: u64, stop: Stop) -> Result<Option<PeerTally>> {
        let size = usize::try_from(size)
            .unwrap_or(usize::MAX)
            .min(self.buf.len());
        let mut tally = PeerTally::default();
        let result = {
            let work = async {
                match (self.test, self.measure) {
                    (TestKind::Send, Measure::Bw) => self.serve_sends(&mut tally).await,
                    (TestKind::Send, Measure::Lat) => self.serve_send_pongs(size, &mut tally).await,
                    (TestKind::Write, Measure::Lat) => {
                        self.serve_write_pongs(size, &mut tally).await
                    }
                    // One-sided: the client's operations need nothing from us.
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = stop.wait() => Ok(()),
                r = work => r,
            }
        };
        result?;
        let now = self.qp.stats().one_sided;
        let start = self.at_start;
        match (self.test, self.measure) {
            // One-sided: what the engine saw of the peer's operations.
            (TestKind::Write, Measure::Bw) => {
                tally.bytes = now.write_octets_received - start.write_octets_received;
                tally.messages = now.writes_received - start.writes_received;
            }
            (TestKind::Read, _) => {
                tally.bytes = now.read_response_octets_sent - start.read_response_octets_sent;
                tally.messages = now.read_responses_sent - start.read_responses_sent;
            }
            _ => {}
        }
        Ok(Some(tally))
    }
}
