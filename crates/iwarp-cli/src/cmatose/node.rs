//! One connection of `iwarp cmatose`: its receive buffer (every receive is posted on the
//! same `-S` octets, as ucmatose does), its send buffer holding the pattern, its two
//! completion queues, and the waits for what they report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iwarp::{Access, CompletionQueue, CompletionStatus, MemoryRegion, QpOptions, QueuePair};

use crate::ping::endpoint::register;
use crate::ping::error::{Peer, PingError, Result};

/// The work request id of every receive (and, plus one, of every Send).
const RECV_WR: u64 = 1;
const SEND_WR: u64 = 2;

/// The octet at `offset` of every message `iwarp cmatose` sends.
pub fn pattern(offset: usize) -> u8 {
    (offset.wrapping_mul(31) ^ (offset >> 8)) as u8
}

/// A connection's buffers before it exists.
#[derive(Debug)]
pub struct Buffers {
    recv: MemoryRegion,
    send: MemoryRegion,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
}

impl Buffers {
    /// Registers the two `size`-octet buffers in a new domain, and returns them with the
    /// queue pair options that post `count` receives before the connection moves data.
    pub fn new(size: u32, count: u32) -> Result<(Self, QpOptions)> {
        let pd = crate::device().alloc_pd();
        let size = size as usize;
        let recv = register(&pd, size, Access::LOCAL_WRITE)?;
        let send = register(&pd, size, Access::empty())?;
        send.write_with(|b| {
            for (i, o) in b.iter_mut().enumerate() {
                *o = pattern(i);
            }
        });
        let (send_cq, recv_cq) = (CompletionQueue::new(1024), CompletionQueue::new(1024));
        let sge = recv.sge(..).map_err(|source| PingError::Local {
            what: "describing the receive buffer".into(),
            source,
        })?;
        let mut options = QpOptions {
            pd,
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            initial_recvs: Vec::new(),
        };
        for _ in 0..count {
            options = options.post_recv(RECV_WR, sge);
        }
        Ok((
            Self {
                recv,
                send,
                send_cq,
                recv_cq,
            },
            options,
        ))
    }
}

/// One established connection.
#[derive(Debug)]
pub struct Node {
    /// The connection.
    pub qp: QueuePair,
    buffers: Buffers,
    peer: Peer,
    /// Which connection this is, from 0, for messages.
    pub index: usize,
    timeout: Option<Duration>,
    /// A zero-length Send RTR (RFC 6581) is due in one of the receives, ahead of the
    /// messages.
    rtr_in_receive: AtomicBool,
}

impl Node {
    /// Wraps an established connection made with `buffers`' options.
    pub fn new(
        qp: QueuePair,
        buffers: Buffers,
        peer: Peer,
        index: usize,
        timeout: Option<Duration>,
    ) -> Self {
        Self {
            qp,
            buffers,
            peer,
            index,
            timeout,
            rtr_in_receive: AtomicBool::new(false),
        }
    }

    /// A server whose client chose the zero-length Send as its RTR (RFC 6581): the RTR
    /// takes one of the receives posted for the messages, so one more is posted, and the
    /// RTR's empty completion is not counted as a message. ucmatose itself never meets
    /// this: siw offers no Send RTR.
    pub fn make_room_for_a_send_rtr(&self) -> Result<()> {
        if self.qp.info().mpa().and_then(|m| m.rtr) != Some(iwarp::RtrType::Send) {
            return Ok(());
        }
        let during = self.during("posting a receive for the client's Send RTR");
        let sge = self
            .buffers
            .recv
            .sge(..)
            .map_err(|source| PingError::Local {
                what: during.clone(),
                source,
            })?;
        self.qp
            .post_recv(RECV_WR, sge)
            .map_err(|e| PingError::from_qp(&self.qp, self.peer, &during, e))?;
        self.rtr_in_receive.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Posts `count` Sends of the whole send buffer.
    pub fn post_sends(&self, count: u32) -> Result<()> {
        let during = self.during("posting the Sends");
        let sge = self
            .buffers
            .send
            .sge(..)
            .map_err(|source| PingError::Local {
                what: during.clone(),
                source,
            })?;
        for _ in 0..count {
            self.qp
                .post_send(SEND_WR, sge)
                .map_err(|e| PingError::from_qp(&self.qp, self.peer, &during, e))?;
        }
        Ok(())
    }

    /// Waits for `count` Sends to complete.
    pub async fn sends_completed(&self, count: u32, hint: &str) -> Result<()> {
        for i in 0..count {
            let during = self.during(&format!("completing Send {} of {count}{hint}", i + 1));
            let c = self.next(&self.buffers.send_cq, &during).await?;
            self.check(c.status, &during)?;
        }
        Ok(())
    }

    /// Waits for `count` messages of `size` octets; with `validate`, checks each one's
    /// octets against the pattern.
    pub async fn messages_received(&self, count: u32, size: u32, validate: bool) -> Result<()> {
        if self.rtr_in_receive.swap(false, Ordering::Relaxed) {
            let during = self.during("receiving the client's Send RTR");
            let c = self.next(&self.buffers.recv_cq, &during).await?;
            self.check(c.status, &during)?;
            if c.byte_len != 0 {
                return Err(self.failed(&during, format!("{} octets, not 0", c.byte_len)));
            }
        }
        for i in 0..count {
            let during = self.during(&format!("receiving message {} of {count}", i + 1));
            let c = self.next(&self.buffers.recv_cq, &during).await?;
            self.check(c.status, &during)?;
            if c.byte_len != size {
                return Err(self.failed(
                    &during,
                    format!("a message of {} octets, not {size}", c.byte_len),
                ));
            }
            if validate {
                let bad = self
                    .buffers
                    .recv
                    .read_with(|b| b.iter().enumerate().position(|(i, &o)| o != pattern(i)));
                if let Some(at) = bad {
                    return Err(self.failed(&during, format!("octet {at} differs")));
                }
            }
        }
        Ok(())
    }

    /// Waits for the peer to close the connection (the client's last step).
    pub async fn peer_closed(&self) -> Result<()> {
        let during = self.during("waiting for the server to disconnect");
        self.bounded(&during, self.qp.closed()).await
    }

    async fn next(&self, cq: &CompletionQueue, during: &str) -> Result<iwarp::Completion> {
        let wait = async {
            tokio::select! {
                biased;
                c = cq.next() => Some(c),
                () = self.qp.closed() => cq.poll(),
            }
        };
        match self.bounded(during, wait).await? {
            Some(c) => Ok(c),
            None => {
                let e = self
                    .qp
                    .error()
                    .unwrap_or(iwarp::ConnectionError::LocallyClosed);
                Err(PingError::connection(self.peer, during, &e))
            }
        }
    }

    async fn bounded<T>(
        &self,
        during: &str,
        op: impl std::future::Future<Output = T>,
    ) -> Result<T> {
        match self.timeout {
            Some(t) => tokio::time::timeout(t, op)
                .await
                .map_err(|_| PingError::Timeout {
                    peer: self.peer,
                    during: during.to_string(),
                    secs: t.as_secs_f64(),
                }),
            None => Ok(op.await),
        }
    }

    fn check(&self, status: CompletionStatus, during: &str) -> Result<()> {
        match status {
            CompletionStatus::Success => Ok(()),
            status => Err(PingError::completion(&self.qp, self.peer, during, status)),
        }
    }

    fn failed(&self, during: &str, reason: String) -> PingError {
        PingError::ConnectionFailed {
            peer: self.peer,
            during: during.to_string(),
            reason,
        }
    }

    fn during(&self, what: &str) -> String {
        format!("on connection {} ({what})", self.index)
    }

    /// Prints each connection's negotiated parameters, one line each.
    pub fn describe_all(nodes: &[Node]) {
        for n in nodes {
            super::say(&format!(
                "connection {}: {}",
                n.index,
                crate::ping::endpoint::describe(&n.qp)
            ));
        }
    }

    /// Whether the peer has sent anything on this connection yet.
    pub fn heard_from_peer(&self) -> bool {
        self.qp.stats().octets_received > 0
    }
}
