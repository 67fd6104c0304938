//! What both roles share: rping's two small buffers, the receive kept posted, and the four
//! operations of a ping (Send an advertisement, wait for one, RDMA Read, RDMA Write), each
//! bounded by the run's timeout and turned into a [`PingError`] that names the step.
//!
//! Like rping, each end keeps exactly one receive posted and re-posts it as soon as it
//! completes. That is enough: every Send in the protocol answers one from the other side, so
//! a second Send can never arrive before the receive for it is back (iWARP has no
//! receiver-not-ready; a Send finding no receive would end the connection).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use iwarp::{
    Access, CompletionStatus, FramingInfo, MemoryRegion, ProtectionDomain, QpOptions, QueuePair,
    RegisterOptions, RemoteKey, Sge,
};

use super::error::{Peer, PingError, Result};
use super::message::INFO_LEN;

/// The work request id of the one receive.
const RECV_WR: u64 = 1;

/// Hands out the tagged offsets our regions start at. rping advertises virtual addresses;
/// ours are address-like, non-zero and different for every region, so that a peer that
/// ignores the advertised address (or assumes 0) fails visibly instead of by luck, and a
/// capture shows which buffer an operation aimed at. Slots are 64 KiB apart, room for the
/// largest rping buffer, so no two regions ever appear to overlap.
pub fn next_base_to() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    0x0000_7170_0000_0000 + (NEXT.fetch_add(1, Ordering::Relaxed) << 16)
}

/// Registers a zeroed region of `len` octets with `access` in `pd`, at an address-like base.
pub fn register(pd: &ProtectionDomain, len: usize, access: Access) -> Result<MemoryRegion> {
    pd.register_with(
        vec![0; len],
        RegisterOptions {
            base_to: next_base_to(),
            ..RegisterOptions::new(access)
        },
    )
    .map_err(|source| PingError::Local {
        what: format!("registering a {len}-octet buffer"),
        source,
    })
}

/// rping's receive and send buffers: registered, with the receive ready to post before the
/// connection exists (the peer may Send the moment it is up).
#[derive(Debug)]
pub struct Buffers {
    /// The domain every region of this connection lives in.
    pub pd: ProtectionDomain,
    recv: MemoryRegion,
    send: MemoryRegion,
}

impl Buffers {
    /// Registers the two 16-octet buffers in a new protection domain: the receive buffer
    /// with local write only, the send buffer with no rights, as rping does.
    pub fn new() -> Result<Self> {
        let pd = crate::device().alloc_pd();
        let recv = register(&pd, INFO_LEN, Access::LOCAL_WRITE)?;
        let send = register(&pd, INFO_LEN, Access::empty())?;
        Ok(Self { pd, recv, send })
    }

    /// Queue pair options with the receive posted.
    pub fn qp_options(&self) -> Result<QpOptions> {
        Ok(QpOptions::new(&self.pd).post_recv(RECV_WR, self.recv_sge()?))
    }

    fn recv_sge(&self) -> Result<Sge> {
        self.recv.sge(..).map_err(|source| PingError::Local {
            what: "describing the receive buffer".into(),
            source,
        })
    }
}

/// One connection in the ping protocol.
#[derive(Debug)]
pub struct Endpoint {
    /// The connection.
    pub qp: QueuePair,
    buffers: Buffers,
    peer: Peer,
    timeout: Option<Duration>,
}

impl Endpoint {
    /// Wraps a connection whose receive was posted from `buffers`.
    pub fn new(qp: QueuePair, buffers: Buffers, peer: Peer, timeout: Option<Duration>) -> Self {
        Self {
            qp,
            buffers,
            peer,
            timeout,
        }
    }

    /// Runs `op` within the timeout; `during` says what for, in errors.
    async fn bounded<T>(
        &self,
        during: &str,
        op: impl Future<Output = Result<T, iwarp::Error>>,
    ) -> Result<T> {
        let r = match self.timeout {
            Some(t) => tokio::time::timeout(t, op)
                .await
                .map_err(|_| self.timeout_error(during, t))?,
            None => op.await,
        };
        r.map_err(|e| PingError::from_qp(&self.qp, self.peer, during, e))
    }

    fn timeout_error(&self, during: &str, t: Duration) -> PingError {
        PingError::Timeout {
            peer: self.peer,
            during: during.to_string(),
            secs: t.as_secs_f64(),
        }
    }

    /// Sends a 16-octet advertisement and waits for the Send to complete.
    pub async fn send_info(&self, info: &[u8; INFO_LEN], during: &str) -> Result<()> {
        let local = |source| PingError::Local {
            what: "filling the send buffer".into(),
            source,
        };
        self.buffers.send.copy_from(0, info).map_err(local)?;
        let sge = self.buffers.send.sge(..).map_err(local)?;
        self.bounded(during, self.qp.send(sge)).await.map(drop)
    }

    /// Waits for the peer's next Send, checks that it is one 16-octet advertisement (rping's
    /// "bogus data" check), re-posts the receive and returns the octets.
    pub async fn recv_info(&self, during: &str) -> Result<[u8; INFO_LEN]> {
        let cq = self.qp.recv_cq();
        let wait = async {
            tokio::select! {
                biased;
                c = cq.next() => Some(c),
                // Belt and braces: the runtime flushes the posted receive when the
                // connection ends, but do not rely on it to stop waiting.
                () = self.qp.closed() => cq.poll(),
            }
        };
        let completion = match self.timeout {
            Some(t) => tokio::time::timeout(t, wait)
                .await
                .map_err(|_| self.timeout_error(during, t))?,
            None => wait.await,
        };
        let Some(c) = completion else {
            let e = self
                .qp
                .error()
                .unwrap_or(iwarp::ConnectionError::LocallyClosed);
            return Err(PingError::connection(self.peer, during, &e));
        };
        match c.status {
            CompletionStatus::Success => {}
            CompletionStatus::LocalLengthError => {
                return Err(PingError::BogusData {
                    size: format!("over {INFO_LEN}"),
                    expected: INFO_LEN,
                    during: during.to_string(),
                })
            }
            status => return Err(PingError::completion(&self.qp, self.peer, during, status)),
        }
        if c.byte_len as usize != INFO_LEN {
            return Err(PingError::BogusData {
                size: c.byte_len.to_string(),
                expected: INFO_LEN,
                during: during.to_string(),
            });
        }
        let mut info = [0u8; INFO_LEN];
        self.buffers
            .recv
            .read_with(|b| info.copy_from_slice(&b[..INFO_LEN]));
        let sge = self.buffers.recv_sge()?;
        self.qp
            .post_recv(RECV_WR, sge)
            .map_err(|e| PingError::from_qp(&self.qp, self.peer, during, e))?;
        Ok(info)
    }

    /// RDMA-Reads `sge.len` octets from `remote` into `sge` and waits until they are placed.
    pub async fn read(&self, sge: Sge, remote: RemoteKey, during: &str) -> Result<()> {
        self.bounded(during, self.qp.read(sge, remote))
            .await
            .map(drop)
    }

    /// RDMA-Writes `sge` to `remote` and waits until the Write is complete.
    pub async fn write(&self, sge: Sge, remote: RemoteKey, during: &str) -> Result<()> {
        self.bounded(during, self.qp.write(sge, remote))
            .await
            .map(drop)
    }

    /// Closes the connection gracefully (rping's `rdma_disconnect`); the runtime bounds the
    /// wait for the peer.
    pub async fn disconnect(&self) {
        let _ = self.qp.disconnect().await;
    }

    /// One line on the connection's negotiated parameters, for `-d`.
    pub fn describe(&self) -> String {
        describe(&self.qp)
    }
}

/// One line on a connection's negotiated parameters.
pub fn describe(qp: &QueuePair) -> String {
    let info = qp.info();
    let mpa = info.mpa();
    let revision = match &info.framing {
        FramingInfo::Mpa(m) => (m.revision as u8).to_string(),
        FramingInfo::ImmediateStart => "none (immediate start)".to_string(),
        _ => "none (IFT)".to_string(),
    };
    let ird_ord = mpa
        .and_then(|m| m.ird_ord)
        .map_or("not negotiated".to_string(), |io| {
            format!("{}/{}", io.ird, io.ord)
        });
    let rtr = mpa.and_then(|m| m.rtr).map_or(String::new(), |r| {
        format!(", peer-to-peer with a {r:?} RTR")
    });
    let framing = info.framing_params();
    format!(
        "MPA revision {revision}, CRC {}, markers {}/{} (tx/rx), IRD/ORD {ird_ord}{rtr}, MULPDU {}",
        on_off(framing.crc),
        on_off(framing.send_markers),
        on_off(framing.receive_markers),
        info.mulpdu,
    )
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}
