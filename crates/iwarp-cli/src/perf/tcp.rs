//! The plain-TCP baseline backend: the same traffic pattern as the iWARP test, over ordinary
//! TCP sockets with `TCP_NODELAY`, so that the cost of the iWARP layers on this machine shows
//! up as a ratio in one command.
//!
//! # Patterns, and why each is the fair comparison
//!
//! TCP has one operation, the byte stream, so the three verbs map to three patterns:
//!
//! * **Stream (write and send, bandwidth).** The client writes one `size`-octet message per
//!   posted operation (one `write` each, as each RDMA Write or Send is one work request and one
//!   FPDU train), keeping at most `tx-depth` messages unacknowledged. The server reads in large
//!   chunks, counts octets, and after each read that completes at least one message sends a
//!   cumulative acknowledgement (the number of complete messages, a big-endian u64). The
//!   client counts an operation complete when it is acknowledged, so "outstanding" means what
//!   it means for RDMA (posted but not yet completed, bounded by the queue depth) and the
//!   measurement covers delivery to the receiving *application*, not just to the local socket
//!   buffer. Acknowledgements coalesce like moderated completions (`-Q` in perftest): one per
//!   server read, not one per message. Write and send are identical on TCP: the difference
//!   between them (direct placement vs. posted receive buffers and receive completions) is
//!   exactly the iWARP cost the comparison is meant to show.
//! * **Request/response (read, bandwidth and latency).** Each posted operation is an 8-octet
//!   read request (its sequence number, big-endian u64); the server answers each with `size`
//!   octets. At most `min(tx-depth, outs)` requests are outstanding, like RDMA Reads limited
//!   by the ORD. An operation completes when its whole response has arrived. This is the same
//!   round trip an RDMA Read makes (a small request one way, the data the other way).
//! * **Ping-pong (write and send, latency).** The client sends `size` octets, the server
//!   answers with `size` octets once it has all of them, the client waits for all of them.
//!   The measurement loop reports half of that round trip, like perftest's write/send latency.
//!
//! Multiple connections (`-q`) run concurrently, each with its own pattern instance, and are
//! summed by the shared code. Nothing else is tuned (socket buffers are the kernel's).
//!
//! # Data-connection handshake
//!
//! A data connection opens with one control frame (`DataHello{session, index}`, see
//! `control.rs`) answered by `DataWelcome`; after that it carries only test traffic.

use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::aligned::AlignedBuf;
use super::backend::{Backend, ClientConn, DataListener, ServerConn, Stop};
use super::control::{self, ControlMsg, PeerTally, CONTROL_TIMEOUT};
use super::error::{PerfError, Result};
use super::spec::{Measure, TestKind, TestSpec, Transport};

/// Size of the chunks the receiving ends read in; large enough to drain many small messages
/// per system call, small enough to stay in cache.
const READ_CHUNK: usize = 256 * 1024;
/// Octets in an acknowledgement (cumulative message count) or a read request (sequence).
const WORD: usize = 8;

/// The TCP baseline backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpBackend;

/// Which of the three TCP patterns a spec uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    Stream,
    RequestResponse,
    PingPong,
}

impl Pattern {
    fn of(spec: &TestSpec) -> Pattern {
        match (spec.test, spec.measure) {
            (TestKind::Read, _) => Pattern::RequestResponse,
            (_, Measure::Bw) => Pattern::Stream,
            (_, Measure::Lat) => Pattern::PingPong,
        }
    }
}

fn to_usize(size: u64) -> Result<usize> {
    usize::try_from(size)
        .map_err(|_| PerfError::Protocol(format!("message size {size} too large for this host")))
}

/// A payload buffer with a recognisable pattern (content is never checked; it only avoids
/// sending pages of zeroes that some paths could treat specially).
fn payload(size: usize) -> AlignedBuf {
    AlignedBuf::from_fn(size, |i| (i % 251) as u8)
}

fn client_err(what: &str, e: std::io::Error) -> PerfError {
    PerfError::io("server", what, e)
}

fn server_err(what: &str, e: std::io::Error) -> PerfError {
    PerfError::io("client", what, e)
}

impl Backend for TcpBackend {
    type Client = TcpClient;
    type Listener = TcpDataListener;

    fn transport(&self) -> Transport {
        Transport::Tcp
    }

    async fn listen(&self, ip: IpAddr, port: u16, spec: &TestSpec) -> Result<TcpDataListener> {
        let addr = SocketAddr::new(ip, port);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| PerfError::Bind { addr, source })?;
        let port = listener
            .local_addr()
            .map_err(|e| PerfError::io("client", "reading the data listener's address", e))?
            .port();
        Ok(TcpDataListener {
            listener,
            port,
            pattern: Pattern::of(spec),
        })
    }

    async fn connect(
        &self,
        addr: SocketAddr,
        session: u64,
        index: u32,
        spec: &TestSpec,
    ) -> Result<TcpClient> {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|source| PerfError::Connect { addr, source })?;
        stream
            .set_nodelay(true)
            .map_err(|e| client_err("setting TCP_NODELAY", e))?;
        control::write_msg(&mut stream, &ControlMsg::DataHello { session, index })
            .await
            .map_err(|e| client_err("opening a data connection", e))?;
        let reply = tokio::time::timeout(CONTROL_TIMEOUT, control::read_msg(&mut stream))
            .await
            .map_err(|_| PerfError::Timeout {
                what: "waiting for the server to accept a data connection".into(),
                secs: CONTROL_TIMEOUT.as_secs(),
            })?
            .map_err(|e| e.into_perf("server", "opening a data connection"))?;
        match reply {
            ControlMsg::DataWelcome => {}
            ControlMsg::Error { message } => {
                return Err(PerfError::Remote {
                    peer: "server",
                    message,
                })
            }
            other => return Err(control::unexpected(&other, "data_welcome")),
        }
        Ok(TcpClient {
            stream,
            pattern: Pattern::of(spec),
            size: 0,
            tx: AlignedBuf::default(),
            rx: AlignedBuf::default(),
            posted: 0,
            completed: 0,
            word: [0; WORD],
            word_fill: 0,
            partial: 0,
        })
    }
}

/// The client side of a TCP data connection.
#[derive(Debug)]
pub struct TcpClient {
    stream: TcpStream,
    pattern: Pattern,
    size: usize,
    /// Message payload (stream, ping-pong).
    tx: AlignedBuf,
    /// Receive buffer: acknowledgements, responses or pongs.
    rx: AlignedBuf,
    /// Operations posted in this phase.
    posted: u64,
    /// Operations completed in this phase.
    completed: u64,
    /// A partly received acknowledgement.
    word: [u8; WORD],
    word_fill: usize,
    /// Octets received of the current read response.
    partial: u64,
}

impl TcpClient {
    /// Reads exactly `n` octets into the receive buffer, chunk by chunk.
    async fn read_n(&mut self, mut n: usize, what: &str) -> Result<()> {
        while n > 0 {
            let want = n.min(self.rx.len());
            let got = self
                .stream
                .read(&mut self.rx[..want])
                .await
                .map_err(|e| client_err(what, e))?;
            if got == 0 {
                return Err(PerfError::PeerGone {
                    peer: "server",
                    what: what.into(),
                });
            }
            n -= got;
        }
        Ok(())
    }

    async fn stream_completions(&mut self) -> Result<u64> {
        loop {
            let got = self
                .stream
                .read(&mut self.rx)
                .await
                .map_err(|e| client_err("waiting for acknowledgements", e))?;
            if got == 0 {
                return Err(PerfError::PeerGone {
                    peer: "server",
                    what: "waiting for acknowledgements".into(),
                });
            }
            let mut latest = None;
            for &b in &self.rx[..got] {
                self.word[self.word_fill] = b;
                self.word_fill += 1;
                if self.word_fill == WORD {
                    latest = Some(u64::from_be_bytes(self.word));
                    self.word_fill = 0;
                }
            }
            if let Some(acked) = latest {
                if acked > self.posted || acked < self.completed {
                    return Err(PerfError::Protocol(format!(
                        "server acknowledged {acked} messages; {} posted, {} already acknowledged",
                        self.posted, self.completed
                    )));
                }
                if acked > self.completed {
                    let n = acked - self.completed;
                    self.completed = acked;
                    return Ok(n);
                }
            }
        }
    }

    async fn response_completions(&mut self) -> Result<u64> {
        let size = self.size as u64;
        loop {
            // Never read past the responses we asked for, so a misbehaving server is caught
            // rather than counted.
            let expected = (self.posted.saturating_sub(self.completed))
                .saturating_mul(size)
                .saturating_sub(self.partial);
            let want = usize::try_from(expected)
                .unwrap_or(usize::MAX)
                .min(self.rx.len());
            if want == 0 {
                return Err(PerfError::Internal(
                    "waiting for read responses with none outstanding".into(),
                ));
            }
            let got = self
                .stream
                .read(&mut self.rx[..want])
                .await
                .map_err(|e| client_err("waiting for read responses", e))?;
            if got == 0 {
                return Err(PerfError::PeerGone {
                    peer: "server",
                    what: "waiting for read responses".into(),
                });
            }
            self.partial += got as u64;
            let done = self.partial / size;
            self.partial %= size;
            if done > 0 {
                self.completed += done;
                return Ok(done);
            }
        }
    }
}

impl ClientConn for TcpClient {
    async fn prepare(&mut self, size: u64, _peer_info: &[u8]) -> Result<()> {
        let size = to_usize(size)?;
        if size == 0 {
            return Err(PerfError::Protocol("message size 0".into()));
        }
        if self.size != size {
            self.size = size;
            self.tx = match self.pattern {
                Pattern::RequestResponse => AlignedBuf::zeroed(WORD),
                _ => payload(size),
            };
            self.rx = AlignedBuf::zeroed(match self.pattern {
                Pattern::Stream => 4096,
                _ => size.min(READ_CHUNK),
            });
        }
        self.posted = 0;
        self.completed = 0;
        self.word_fill = 0;
        self.partial = 0;
        Ok(())
    }

    async fn post(&mut self) -> Result<()> {
        match self.pattern {
            Pattern::Stream | Pattern::PingPong => {
                self.stream
                    .write_all(&self.tx)
                    .await
                    .map_err(|e| client_err("sending a message", e))?;
            }
            Pattern::RequestResponse => {
                self.stream
                    .write_all(&self.posted.to_be_bytes())
                    .await
                    .map_err(|e| client_err("sending a read request", e))?;
            }
        }
        self.posted += 1;
        Ok(())
    }

    async fn wait_completions(&mut self) -> Result<u64> {
        match self.pattern {
            Pattern::Stream => self.stream_completions().await,
            Pattern::RequestResponse => self.response_completions().await,
            Pattern::PingPong => Err(PerfError::Internal(
                "bandwidth completions requested on a latency connection".into(),
            )),
        }
    }

    async fn lat_op(&mut self) -> Result<()> {
        match self.pattern {
            Pattern::PingPong => {
                self.stream
                    .write_all(&self.tx)
                    .await
                    .map_err(|e| client_err("sending a ping", e))?;
                self.read_n(self.size, "waiting for a pong").await?;
            }
            Pattern::RequestResponse => {
                self.stream
                    .write_all(&self.posted.to_be_bytes())
                    .await
                    .map_err(|e| client_err("sending a read request", e))?;
                self.read_n(self.size, "waiting for a read response")
                    .await?;
            }
            Pattern::Stream => {
                return Err(PerfError::Internal(
                    "latency operation requested on a bandwidth connection".into(),
                ))
            }
        }
        self.posted += 1;
        self.completed += 1;
        Ok(())
    }
}

/// The server's listener for one session's TCP data connections.
#[derive(Debug)]
pub struct TcpDataListener {
    listener: TcpListener,
    port: u16,
    pattern: Pattern,
}

impl DataListener for TcpDataListener {
    type Conn = TcpServerConn;

    fn port(&self) -> u16 {
        self.port
    }

    async fn accept(&mut self, session: u64) -> Result<(u32, TcpServerConn)> {
        loop {
            let (mut stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| server_err("accepting a data connection", e))?;
            if stream.set_nodelay(true).is_err() {
                continue;
            }
            let hello = tokio::time::timeout(CONTROL_TIMEOUT, control::read_msg(&mut stream)).await;
            let index = match hello {
                Ok(Ok(ControlMsg::DataHello { session: s, index })) if s == session => index,
                Ok(Ok(ControlMsg::DataHello { .. })) => {
                    // A connection for another session (a stale client): tell it, keep going.
                    let msg = ControlMsg::Error {
                        message: "unknown session".into(),
                    };
                    let _ = control::write_msg(&mut stream, &msg).await;
                    continue;
                }
                // Garbage, timeout or a vanished peer: drop it and wait for the real ones.
                _ => continue,
            };
            control::write_msg(&mut stream, &ControlMsg::DataWelcome)
                .await
                .map_err(|e| server_err("accepting a data connection", e))?;
            return Ok((
                index,
                TcpServerConn {
                    stream,
                    pattern: self.pattern,
                    rx: AlignedBuf::default(),
                    tx: AlignedBuf::default(),
                },
            ));
        }
    }
}

/// The server side of a TCP data connection.
#[derive(Debug)]
pub struct TcpServerConn {
    stream: TcpStream,
    pattern: Pattern,
    rx: AlignedBuf,
    tx: AlignedBuf,
}

impl ServerConn for TcpServerConn {
    async fn prepare_phase(&mut self, _size: u64) -> Result<Vec<u8>> {
        // Nothing to announce: the socket buffers whatever arrives before `serve_phase` reads.
        Ok(Vec::new())
    }

    async fn serve_phase(&mut self, size: u64, stop: Stop) -> Result<Option<PeerTally>> {
        let size_usize = to_usize(size)?;
        if size == 0 {
            return Err(PerfError::Protocol("message size 0".into()));
        }
        if self.rx.len() != READ_CHUNK {
            self.rx = AlignedBuf::zeroed(READ_CHUNK);
        }
        if self.tx.len() != size_usize && self.pattern != Pattern::Stream {
            self.tx = payload(size_usize);
        }
        let mut tally = PeerTally::default();
        let result = {
            let work = serve(
                &mut self.stream,
                self.pattern,
                size,
                &mut self.rx,
                &self.tx,
                &mut tally,
            );
            // The client sends EndPhase only once every operation has completed, so the
            // connection is idle when `stop` fires and dropping `work` loses nothing.
            tokio::select! {
                biased;
                () = stop.wait() => Ok(()),
                r = work => r,
            }
        };
        result.map(|()| Some(tally))
    }
}

/// Runs the server side of one pattern until an error (or forever; the caller stops it).
async fn serve(
    stream: &mut TcpStream,
    pattern: Pattern,
    size: u64,
    rx: &mut [u8],
    tx: &[u8],
    tally: &mut PeerTally,
) -> Result<()> {
    match pattern {
        Pattern::Stream => serve_stream(stream, size, rx, tally).await,
        Pattern::RequestResponse => serve_requests(stream, size, rx, tx, tally).await,
        Pattern::PingPong => serve_ping_pong(stream, size, rx, tx, tally).await,
    }
}

/// Sink with cumulative acknowledgements. Reading and acknowledging run concurrently (the
/// acknowledgement writer takes the latest count from a watch channel), so the reader never
/// blocks on a full send buffer and the two directions cannot deadlock, whatever the depth.
async fn serve_stream(
    stream: &mut TcpStream,
    size: u64,
    rx: &mut [u8],
    tally: &mut PeerTally,
) -> Result<()> {
    let (mut rd, mut wr) = stream.split();
    let (ack_tx, mut ack_rx) = watch::channel(0u64);
    let reader = async {
        loop {
            let got = rd
                .read(rx)
                .await
                .map_err(|e| server_err("receiving messages", e))?;
            if got == 0 {
                return Err(PerfError::PeerGone {
                    peer: "client",
                    what: "receiving messages".into(),
                });
            }
            tally.bytes += got as u64;
            let messages = tally.bytes / size;
            if messages != tally.messages {
                tally.messages = messages;
                ack_tx.send_replace(messages);
            }
        }
    };
    let acker = async {
        while ack_rx.changed().await.is_ok() {
            let acked = *ack_rx.borrow_and_update();
            wr.write_all(&acked.to_be_bytes())
                .await
                .map_err(|e| server_err("sending acknowledgements", e))?;
        }
        Ok::<(), PerfError>(())
    };
    tokio::select! {
        r = reader => r,
        r = acker => r,
    }
}

/// Read responder: a request reader and a response writer, decoupled by a watch channel for
/// the same no-deadlock reason as [`serve_stream`].
async fn serve_requests(
    stream: &mut TcpStream,
    size: u64,
    rx: &mut [u8],
    tx: &[u8],
    tally: &mut PeerTally,
) -> Result<()> {
    let (mut rd, mut wr) = stream.split();
    let (req_tx, mut req_rx) = watch::channel(0u64);
    let reader = async {
        let mut word = [0u8; WORD];
        let mut fill = 0;
        let mut requested = 0u64;
        loop {
            let got = rd
                .read(rx)
                .await
                .map_err(|e| server_err("receiving read requests", e))?;
            if got == 0 {
                return Err(PerfError::PeerGone {
                    peer: "client",
                    what: "receiving read requests".into(),
                });
            }
            for &b in &rx[..got] {
                word[fill] = b;
                fill += 1;
                if fill == WORD {
                    fill = 0;
                    let seq = u64::from_be_bytes(word);
                    if seq != requested {
                        return Err(PerfError::Protocol(format!(
                            "read request {seq} out of sequence (expected {requested})"
                        )));
                    }
                    requested += 1;
                }
            }
            req_tx.send_replace(requested);
        }
    };
    let responder = async {
        let mut sent = 0u64;
        while req_rx.changed().await.is_ok() {
            let target = *req_rx.borrow_and_update();
            while sent < target {
                wr.write_all(tx)
                    .await
                    .map_err(|e| server_err("sending read responses", e))?;
                sent += 1;
                tally.bytes += size;
                tally.messages += 1;
            }
        }
        Ok::<(), PerfError>(())
    };
    tokio::select! {
        r = reader => r,
        r = responder => r,
    }
}

/// Ping-pong responder: answer each complete `size`-octet message with `size` octets.
async fn serve_ping_pong(
    stream: &mut TcpStream,
    size: u64,
    rx: &mut [u8],
    tx: &[u8],
    tally: &mut PeerTally,
) -> Result<()> {
    let mut have = 0u64;
    loop {
        // Read at most the rest of the current ping: the client never sends the next one
        // before our pong, so there is nothing beyond it to read anyway.
        let want = usize::try_from(size - have)
            .unwrap_or(usize::MAX)
            .min(rx.len());
        let got = stream
            .read(&mut rx[..want])
            .await
            .map_err(|e| server_err("receiving pings", e))?;
        if got == 0 {
            return Err(PerfError::PeerGone {
                peer: "client",
                what: "receiving pings".into(),
            });
        }
        have += got as u64;
        tally.bytes += got as u64;
        if have == size {
            have = 0;
            tally.messages += 1;
            stream
                .write_all(tx)
                .await
                .map_err(|e| server_err("sending pongs", e))?;
        }
    }
}
