//! perftest's exchange channel over the stack: the first connection of a run, on which the
//! two ends trade their messages as Sends (perftest's `rdma_write_keys` / `rdma_read_keys`
//! and `rdma_write_data` / `rdma_read_data`, used when both ends run with `-R`).
//!
//! Each end keeps exactly one receive posted, as perftest does, and the exchanges alternate
//! strictly: the client sends and then receives, the server receives and then answers, and
//! a receive is posted again before this end sends. Since perftest's own receive holds one
//! `struct pingpong_dest`, no message of ours is longer than that.

use std::time::Duration;

use iwarp::{Access, CompletionStatus, MemoryRegion, ProtectionDomain, QueuePair};

use crate::perf::error::{PerfError, Result};

use super::params::Side;
use super::script::Message;
use super::wire;

/// perftest's work request id on this channel (`SYNC_SPEC_ID`).
pub const SYNC_SPEC_ID: u64 = 5;
/// The receive buffer: larger than any perftest message, so that an unexpected one is
/// reported by its size rather than ending the connection.
pub const RECV_LEN: usize = 4096;
/// How long an exchange may wait for the peer when no traffic is under way.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a connection stopped, in words: the runtime's own wording, except that a
/// Terminate is spelled out (layer, error, offending message) rather than dumped.
pub struct Why<'a>(pub &'a iwarp::ConnectionError);

impl std::fmt::Display for Why<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            iwarp::ConnectionError::TerminateReceived(t) => {
                write!(f, "the peer terminated the stream: {t}")
            }
            other => write!(f, "{other}"),
        }
    }
}

/// The exchange channel.
#[derive(Debug)]
pub struct Comm {
    qp: QueuePair,
    side: Side,
    recv: MemoryRegion,
    send: MemoryRegion,
    /// A message the server already received while it was accepting data connections.
    pending: Option<Vec<u8>>,
}

/// The receive buffer a channel needs posted before its connection carries anything.
pub fn recv_region(pd: &ProtectionDomain) -> Result<MemoryRegion> {
    pd.register(vec![0; RECV_LEN], Access::LOCAL_WRITE)
        .map_err(|e| PerfError::iwarp("registering the exchange buffer", e))
}

impl Comm {
    /// Wraps the channel's queue pair, whose one receive (`SYNC_SPEC_ID`, all of `recv`)
    /// was posted before the connection started.
    pub fn new(
        qp: QueuePair,
        pd: &ProtectionDomain,
        side: Side,
        recv: MemoryRegion,
    ) -> Result<Self> {
        let send = pd
            .register(
                vec![0; wire::DEST_LEN_WITH_TAIL_MARKERS],
                Access::LOCAL_WRITE,
            )
            .map_err(|e| PerfError::iwarp("registering the exchange buffer", e))?;
        Ok(Self {
            qp,
            side,
            recv,
            send,
            pending: None,
        })
    }

    /// The channel's queue pair.
    pub fn qp(&self) -> &QueuePair {
        &self.qp
    }

    /// One exchange of `what`: sends `mine`, receives the peer's, in the order the side
    /// demands. `watch` are queue pairs whose failure ends the wait (the data connections
    /// while the peer runs traffic); without them the wait is bounded.
    pub async fn exchange(
        &mut self,
        what: Message,
        mine: &[u8],
        watch: &[QueuePair],
    ) -> Result<Vec<u8>> {
        match self.side {
            Side::Client => {
                self.send(mine).await?;
                self.receive(what, watch).await
            }
            Side::Server => {
                let theirs = match self.pending.take() {
                    Some(m) => m,
                    None => self.receive(what, watch).await?,
                };
                self.send(mine).await?;
                Ok(theirs)
            }
        }
    }

    /// Server: keeps a message received outside [`Comm::exchange`] (while accepting data
    /// connections) for the next exchange.
    pub fn keep(&mut self, msg: Vec<u8>) {
        self.pending = Some(msg);
    }

    async fn send(&mut self, mine: &[u8]) -> Result<()> {
        let n = mine.len().min(self.send.len());
        self.send
            .copy_from(0, &mine[..n])
            .map_err(|e| PerfError::iwarp("filling the exchange buffer", e))?;
        let sge = self
            .send
            .sge(..n)
            .map_err(|e| PerfError::iwarp("describing the exchange buffer", e))?;
        let done = tokio::time::timeout(EXCHANGE_TIMEOUT, self.qp.send(sge))
            .await
            .map_err(|_| PerfError::Timeout {
                what: "sending on perftest's exchange channel".into(),
                secs: EXCHANGE_TIMEOUT.as_secs(),
            })?;
        done.map(|_| ())
            .map_err(|e| self.gone(format!("sending on perftest's exchange channel: {e}")))
    }

    /// Waits for the peer's next message and posts the receive again. Cancel-safe: nothing
    /// is taken before the message is there.
    pub async fn receive(&self, what: Message, watch: &[QueuePair]) -> Result<Vec<u8>> {
        let next = self.qp.recv_cq().next();
        tokio::pin!(next);
        // A data connection the peer closed gracefully is no failure (perftest's server
        // closes its data connections as soon as it has answered its last exchange); one
        // that failed is.
        let mut watching: Vec<(usize, &QueuePair)> = watch.iter().enumerate().collect();
        let c = loop {
            if watching.is_empty() {
                break tokio::time::timeout(EXCHANGE_TIMEOUT, &mut next)
                    .await
                    .map_err(|_| PerfError::Timeout {
                        what: format!("waiting for the peer's {}", what.what()),
                        secs: EXCHANGE_TIMEOUT.as_secs(),
                    })?;
            }
            let closed = futures_util::future::select_all(
                watching.iter().map(|(_, q)| Box::pin(q.closed())),
            );
            tokio::select! {
                c = &mut next => break c,
                (_, at, _) = closed => {
                    let (i, qp) = watching.remove(at);
                    match qp.error() {
                        None
                        | Some(iwarp::ConnectionError::PeerClosed)
                        | Some(iwarp::ConnectionError::LocallyClosed) => {}
                        Some(e) => {
                            return Err(PerfError::Protocol(format!(
                                "data connection {i}: {}",
                                Why(&e)
                            )))
                        }
                    }
                }
            }
        };
        if c.status != CompletionStatus::Success || c.wr_id != SYNC_SPEC_ID {
            return Err(self.gone(format!("waiting for the peer's {}", what.what())));
        }
        let len = c.byte_len as usize;
        let msg = self
            .recv
            .read_with(|b| b.get(..len).map(<[u8]>::to_vec))
            .ok_or_else(|| PerfError::Internal("receive longer than its buffer".into()))?;
        let sge = self
            .recv
            .sge(..)
            .map_err(|e| PerfError::iwarp("describing the exchange buffer", e))?;
        self.qp
            .post_recv(SYNC_SPEC_ID, sge)
            .map_err(|e| PerfError::iwarp("posting the exchange receive", e))?;
        Ok(msg)
    }

    /// The channel failed: the connection's own reason if it has one.
    fn gone(&self, what: String) -> PerfError {
        match self.qp.error() {
            Some(iwarp::ConnectionError::PeerClosed) | None => {
                PerfError::PeerGone { peer: "peer", what }
            }
            Some(e) => PerfError::Protocol(format!("{what}: {}", Why(&e))),
        }
    }

    /// Closes the channel gracefully (as perftest's `rdma_disconnect`).
    pub async fn disconnect(&self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.qp.disconnect()).await;
    }
}
