//! The queue pair: the application's handle on one connection.
//!
//! As in verbs, work is posted with an id and reported later as a
//! completion on the queue pair's completion queues. The `async`
//! convenience methods ([`QueuePair::send`], [`QueuePair::write`],
//! [`QueuePair::read`], [`QueuePair::recv`]) post one request and wait for
//! its own completion; they never take completions meant for the queues.

use std::net::SocketAddr;
use std::sync::Arc;

use iwarp_proto::connection::ConnectionStats;
use iwarp_proto::rdmap::{
    Completion, CompletionStatus, OneSidedCounters, PostError, QpState, SendFlags, Sge,
};

use crate::connection::{ConnectionError, Inner, Shared};
use crate::cq::CompletionQueue;
use crate::error::Error;
use crate::info::ConnectionInfo;
use crate::memory::RemoteKey;

/// Drops the connection when the last user handle goes.
#[derive(Debug)]
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.abandon();
    }
}

/// One iWARP connection: post work to it, collect completions from its
/// completion queues. Cloning gives another handle to the same connection;
/// dropping the last one closes it abruptly ([`QueuePair::disconnect`]
/// closes it gracefully).
#[derive(Debug, Clone)]
pub struct QueuePair {
    handle: Arc<Handle>,
}

/// The counters of a connection, as `rdma statistic` shows a kernel
/// device's: what the protocol engine counted ([`ConnectionStats`]: octets
/// and PDUs each way, CRC and marker errors, Terminates, messages by
/// type), and what the runtime sees of the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QpStats {
    /// Octets written to the socket (framing included): the same as
    /// `connection.octets_sent`.
    pub octets_sent: u64,
    /// Octets read from the socket (framing included), some perhaps not
    /// yet taken by the framing layer (`connection.octets_received`).
    pub octets_received: u64,
    /// Payload octets read from the socket straight into their region.
    pub octets_placed_directly: u64,
    /// System calls that wrote to the socket: one per post when posts are
    /// far apart, fewer in a burst (see `Config::post_burst`).
    pub socket_writes: u64,
    /// The peer's RDMA Writes into, and Reads from, this end's memory:
    /// one-sided operations leave no completion here, only these counts
    /// (a view of `connection.messages`).
    pub one_sided: OneSidedCounters,
    /// What the protocol engine counted.
    pub connection: ConnectionStats,
    /// The EMSS as last read from the socket (it grows as a connection
    /// warms up) and the MULPDU that follows it.
    pub emss: usize,
    /// The largest DDP segment this end sends now.
    pub mulpdu: usize,
}

/// Work requests being posted together to one queue pair
/// ([`QueuePair::post_list`]): each method is the [`QueuePair`] method of
/// the same name, except that nothing is written until the list is done.
#[derive(Debug)]
pub struct PostList<'a> {
    inner: &'a mut Inner,
}

impl PostList<'_> {
    /// See [`QueuePair::post_recv`].
    pub fn post_recv(&mut self, wr_id: u64, sge: Sge) -> Result<(), Error> {
        self.inner.conn.post_recv(wr_id, sge).map_err(Error::Post)
    }

    /// See [`QueuePair::post_send`].
    pub fn post_send(&mut self, wr_id: u64, sge: Sge) -> Result<(), Error> {
        self.post_send_with(wr_id, sge, SendFlags::default())
    }

    /// See [`QueuePair::post_send_with`].
    pub fn post_send_with(&mut self, wr_id: u64, sge: Sge, flags: SendFlags) -> Result<(), Error> {
        self.inner
            .conn
            .post_send(wr_id, sge, flags)
            .map_err(Error::Post)
    }

    /// See [`QueuePair::rdma_write`].
    pub fn rdma_write(&mut self, wr_id: u64, sge: Sge, remote: RemoteKey) -> Result<(), Error> {
        self.inner
            .conn
            .rdma_write(wr_id, sge, remote.stag, remote.addr)
            .map_err(Error::Post)
    }

    /// See [`QueuePair::rdma_read`].
    pub fn rdma_read(&mut self, wr_id: u64, sge: Sge, remote: RemoteKey) -> Result<(), Error> {
        self.inner
            .conn
            .rdma_read(wr_id, sge, remote.stag, remote.addr)
            .map_err(Error::Post)
    }
}

impl QueuePair {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            handle: Arc::new(Handle { shared }),
        }
    }

    fn shared(&self) -> &Shared {
        &self.handle.shared
    }

    /// What the connection's startup settled.
    pub fn info(&self) -> &ConnectionInfo {
        &self.shared().info
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.shared().peer
    }

    /// This end's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared().local
    }

    /// The queue that reports Sends, RDMA Writes and RDMA Reads.
    pub fn send_cq(&self) -> &CompletionQueue {
        &self.shared().send_cq
    }

    /// The queue that reports receives.
    pub fn recv_cq(&self) -> &CompletionQueue {
        &self.shared().recv_cq
    }

    /// The queue pair's state.
    pub fn state(&self) -> QpState {
        self.shared().state()
    }

    /// Why the connection stopped moving data, once it has.
    pub fn error(&self) -> Option<ConnectionError> {
        self.shared().lock().conn.error().cloned()
    }

    /// The connection's counters so far.
    pub fn stats(&self) -> QpStats {
        let inner = self.shared().lock();
        let (sent, received, direct) = inner.octets();
        let (mulpdu, emss) = inner.mulpdu();
        QpStats {
            emss,
            mulpdu,
            octets_sent: sent,
            octets_received: received,
            octets_placed_directly: direct,
            socket_writes: inner.socket_writes(),
            one_sided: inner.conn.qp().one_sided_counters(),
            connection: inner.conn.stats(),
        }
    }

    /// Posts several work requests at once: `f` posts them to the list
    /// it is given, and what they send is written after it returns, with
    /// as few system calls as the socket allows (one, when it has room).
    /// Verbs' chained work requests (one `ibv_post_send` with a list, one
    /// doorbell) do the same for a hardware queue pair. Each post of the
    /// list succeeds or fails on its own, as it would alone; `f` decides
    /// whether to go on after a failure.
    ///
    /// ```no_run
    /// # fn demo(qp: &iwarp::QueuePair, a: iwarp::Sge, b: iwarp::Sge, to: iwarp::RemoteKey) -> Result<(), iwarp::Error> {
    /// // An RDMA Write and a zero-length Read behind it, in one segment.
    /// qp.post_list(|list| {
    ///     list.rdma_write(1, a, to)?;
    ///     list.rdma_read(2, b, to)
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn post_list<R>(&self, f: impl FnOnce(&mut PostList<'_>) -> R) -> R {
        self.shared()
            .post_with_engine(|inner| f(&mut PostList { inner }))
    }

    /// Posts a receive buffer for an incoming Send. iWARP has no
    /// receiver-not-ready: a Send that finds no posted buffer ends the
    /// connection, so keep receives posted ahead of the peer's Sends.
    pub fn post_recv(&self, wr_id: u64, sge: Sge) -> Result<(), Error> {
        self.post_list(|l| l.post_recv(wr_id, sge))
    }

    /// Posts a Send of `sge`.
    pub fn post_send(&self, wr_id: u64, sge: Sge) -> Result<(), Error> {
        self.post_send_with(wr_id, sge, SendFlags::default())
    }

    /// Posts a Send with Solicited Event and/or Invalidate.
    pub fn post_send_with(&self, wr_id: u64, sge: Sge, flags: SendFlags) -> Result<(), Error> {
        self.post_list(|l| l.post_send_with(wr_id, sge, flags))
    }

    /// Posts an RDMA Write of `sge` to the peer's memory at `remote`'s
    /// STag and address.
    pub fn rdma_write(&self, wr_id: u64, sge: Sge, remote: RemoteKey) -> Result<(), Error> {
        self.post_list(|l| l.rdma_write(wr_id, sge, remote))
    }

    /// Posts an RDMA Read of `sge.len` octets from the peer's memory at
    /// `remote`'s STag and address into `sge`, which must allow local and
    /// remote write (the Read Response is a tagged write into it).
    pub fn rdma_read(&self, wr_id: u64, sge: Sge, remote: RemoteKey) -> Result<(), Error> {
        self.post_list(|l| l.rdma_read(wr_id, sge, remote))
    }

    /// Posts one runtime-owned request and waits for its completion.
    async fn run(
        &self,
        f: impl FnOnce(&mut Inner, u64) -> Result<(), PostError>,
    ) -> Result<Completion, Error> {
        match self.shared().post_awaited(f)?.await {
            Some(c) if c.status == CompletionStatus::Success => Ok(c),
            Some(c) => Err(Error::Completion(c)),
            None => Err(Error::Connection(
                self.error().unwrap_or(ConnectionError::LocallyClosed),
            )),
        }
    }

    /// Sends `sge` and waits until the Send is complete.
    pub async fn send(&self, sge: Sge) -> Result<Completion, Error> {
        self.send_with(sge, SendFlags::default()).await
    }

    /// Sends `sge` with Solicited Event and/or Invalidate and waits until
    /// the Send is complete.
    pub async fn send_with(&self, sge: Sge, flags: SendFlags) -> Result<Completion, Error> {
        self.run(|i, id| i.conn.post_send(id, sge, flags)).await
    }

    /// Posts `sge` as a receive buffer and waits for a Send to fill it.
    pub async fn recv(&self, sge: Sge) -> Result<Completion, Error> {
        self.run(|i, id| i.conn.post_recv(id, sge)).await
    }

    /// RDMA-Writes `sge` to `remote` and waits until the Write is complete.
    pub async fn write(&self, sge: Sge, remote: RemoteKey) -> Result<Completion, Error> {
        self.run(|i, id| i.conn.rdma_write(id, sge, remote.stag, remote.addr))
            .await
    }

    /// RDMA-Reads `sge.len` octets from `remote` into `sge` and waits until
    /// they are placed.
    pub async fn read(&self, sge: Sge, remote: RemoteKey) -> Result<Completion, Error> {
        self.run(|i, id| i.conn.rdma_read(id, sge, remote.stag, remote.addr))
            .await
    }

    /// Closes the connection gracefully: work already posted finishes (and
    /// completes), nothing new is accepted, then both ends close. Waits up
    /// to [`Config::disconnect_timeout`](crate::Config::disconnect_timeout)
    /// (5 s by default) for the peer to close its side, then closes
    /// abruptly.
    pub async fn disconnect(&self) -> Result<(), Error> {
        self.shared().disconnect().await;
        Ok(())
    }

    /// A one-line description of the connection's internal state, for
    /// diagnosing a stalled connection.
    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        self.shared().lock().debug_state()
    }

    /// Waits until the connection has ended, for whatever reason.
    pub async fn closed(&self) {
        self.shared().closed().await;
    }
}
