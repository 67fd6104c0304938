//! The seam between the shared measurement code and a transport.
//!
//! A backend supplies the *mechanics* of one connection: how to post an operation, how to wait
//! for completions, how to do one latency operation, and what the passive side does. Everything
//! that decides *what is measured* (warm-up, iterations or duration, timing, peak samples,
//! progress, the control protocol) lives in `measure.rs` and `session.rs` and is identical for
//! every backend, so that two transports are measured the same way.
//!
//! A new backend implements [`Backend`] (a factory for both ends), [`ClientConn`] (the active
//! side, driven by the measurement loop), [`DataListener`] and [`ServerConn`] (the passive
//! side), then gets a match arm in `session::run_client` and `session::serve_session`.
//! The trait methods return `impl Future + Send` so that the shared code can run each
//! connection on its own tokio task; implementations simply write `async fn`.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};

use tokio::sync::oneshot;

use super::control::PeerTally;
use super::error::Result;
use super::spec::{TestSpec, Transport};

/// A transport `iwarp perf` can measure: opens the data connections of one session.
pub trait Backend: Send + Sync + 'static {
    /// The client side of one data connection.
    type Client: ClientConn;
    /// The server's listener for one session's data connections.
    type Listener: DataListener;

    /// Which transport this is (for reports and the control handshake).
    fn transport(&self) -> Transport;

    /// Server side: starts listening for the data connections of one session on `ip:port`
    /// (`port` 0 = ephemeral). `spec` has been validated.
    fn listen(
        &self,
        ip: IpAddr,
        port: u16,
        spec: &TestSpec,
    ) -> impl Future<Output = Result<Self::Listener>> + Send;

    /// Client side: opens data connection `index` of `session` to `addr`, ready for
    /// [`ClientConn::prepare`]. The server identifies the connection by `(session, index)`.
    fn connect(
        &self,
        addr: SocketAddr,
        session: u64,
        index: u32,
        spec: &TestSpec,
    ) -> impl Future<Output = Result<Self::Client>> + Send;
}

/// The active side of one data connection. The measurement loop calls, per phase, `prepare`
/// once and then either `post`/`wait_completions` (bandwidth, keeping at most
/// [`TestSpec::effective_depth`] operations outstanding) or `lat_op` (latency).
pub trait ClientConn: Send + 'static {
    /// Gets ready for a phase of `size`-octet operations (buffers, registrations, counters).
    /// `peer_info` is what the server's [`ServerConn::prepare_phase`] returned for this
    /// connection (e.g. the STag, address and length of its buffer for RDMA Write and Read).
    /// The connection is idle when this is called.
    fn prepare(&mut self, size: u64, peer_info: &[u8]) -> impl Future<Output = Result<()>> + Send;

    /// Starts one bandwidth operation: an RDMA Write or Send of `size` octets, or an RDMA Read
    /// Request for `size` octets. Returns once it is posted; it may wait for local resources
    /// (socket buffer, send queue slot) but never for its own completion.
    fn post(&mut self) -> impl Future<Output = Result<()>> + Send;

    /// Waits until at least one posted operation has completed and returns how many did
    /// (>= 1). Only called while operations are outstanding.
    fn wait_completions(&mut self) -> impl Future<Output = Result<u64>> + Send;

    /// Performs one complete latency operation and returns when it is done: a ping-pong of
    /// `size` octets each way for write and send (the loop reports half the time), one RDMA
    /// Read of `size` octets for read (the loop reports the whole time), like perftest.
    fn lat_op(&mut self) -> impl Future<Output = Result<()>> + Send;

    /// The connection's counters in one line (`iwarp perf -v` prints them after the run),
    /// or `None` if the transport keeps none.
    fn counters(&self) -> Option<String> {
        None
    }
}

/// The server's listener for the data connections of one session.
pub trait DataListener: Send + 'static {
    /// The passive side of one data connection.
    type Conn: ServerConn;

    /// The port the client should connect its data connections to.
    fn port(&self) -> u16;

    /// Accepts the next data connection of `session` and returns the index it announced
    /// (the caller checks range and duplicates). Connections for other sessions, or that do
    /// not identify themselves, are turned away without ending the wait.
    fn accept(&mut self, session: u64) -> impl Future<Output = Result<(u32, Self::Conn)>> + Send;
}

/// The passive side of one data connection.
pub trait ServerConn: Send + 'static {
    /// Gets ready for a phase of `size`-octet operations and returns opaque information for
    /// the client side (handed to its [`ClientConn::prepare`]). Everything the client's first
    /// operation depends on must be in place when this returns (e.g. receive buffers posted
    /// for Send tests, since iWARP has no receiver-not-ready retry): the client starts only
    /// after every connection's `prepare_phase` has finished.
    fn prepare_phase(&mut self, size: u64) -> impl Future<Output = Result<Vec<u8>>> + Send;

    /// Serves one phase of `size`-octet operations until `stop` fires (the client has seen
    /// every operation complete by then), and returns what this side counted, or `None` if
    /// the transport gives the passive side nothing to count (one-sided operations).
    fn serve_phase(
        &mut self,
        size: u64,
        stop: Stop,
    ) -> impl Future<Output = Result<Option<PeerTally>>> + Send;

    /// The connection's counters in one line, as [`ClientConn::counters`].
    fn counters(&self) -> Option<String> {
        None
    }
}

/// The end-of-phase signal for [`ServerConn::serve_phase`].
#[derive(Debug)]
pub struct Stop(oneshot::Receiver<()>);

impl Stop {
    /// A new stop signal and the trigger that fires it (dropping the trigger fires it too,
    /// so a failing session never leaves a phase running).
    pub fn new() -> (oneshot::Sender<()>, Stop) {
        let (tx, rx) = oneshot::channel();
        (tx, Stop(rx))
    }

    /// Resolves when the phase should end.
    pub async fn wait(self) {
        // Err means the trigger was dropped: stop as well.
        let _ = self.0.await;
    }
}
