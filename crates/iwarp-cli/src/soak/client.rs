//! The soak client: connections of lanes, each lane a sequence of random
//! operations whose every octet is checked, at the server or here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use iwarp::{connect, Access, CompletionStatus, MemoryRegion, QpOptions, QueuePair};
use tokio::sync::oneshot;

use super::pattern::{self, Stream};
use super::summary::{add, bump, Counters};
use super::wire::{Header, Hello, Kind, Welcome, HEADER_LEN, STATUS_OK};
use super::{ack_len, ack_payload_len, SoakError};

/// What every connection of a run shares.
#[derive(Debug, Clone)]
pub struct Run {
    /// Where the server is.
    pub addr: std::net::SocketAddr,
    /// The run's seed.
    pub seed: u64,
    /// Operations in flight per connection.
    pub depth: u16,
    /// The largest payload.
    pub max_size: u32,
    /// When to stop issuing operations.
    pub until: Instant,
    /// The idle pause in the middle.
    pub idle: Duration,
    /// Where the pause starts.
    pub idle_at: Instant,
    /// The bound on one operation.
    pub op_timeout: Duration,
}

/// Acks waited for, by operation number.
type Waiting = Arc<Mutex<HashMap<u32, oneshot::Sender<Header>>>>;

/// One connection's regions.
struct Regions {
    /// Per lane: a header and `max_size` octets (Send, or the Write source
    /// and its notice).
    out: MemoryRegion,
    /// Per lane: `max_size` octets, where Reads land.
    sink: MemoryRegion,
    /// `depth + 1` ack receive slots.
    acks: MemoryRegion,
}

/// Runs connection number `n` to the end of the run; counts into
/// `counters`. An error is a failed connection.
pub async fn connection(run: &Run, n: u32, counters: &Counters) -> Result<(), SoakError> {
    let max = run.max_size as usize;
    let depth = usize::from(run.depth.max(1));
    let pd = crate::device().alloc_pd();
    let local = Access::LOCAL_WRITE;
    let ack_slot = HEADER_LEN + ack_len(max);
    let r = Arc::new(Regions {
        out: pd.register(vec![0; depth * (HEADER_LEN + max)], Access::empty())?,
        sink: pd.register(vec![0; depth * max], local | Access::REMOTE_WRITE)?,
        acks: pd.register(vec![0; (depth + 1) * ack_slot], local)?,
    });
    let mut opts = QpOptions::new(&pd);
    for i in 0..=depth {
        opts = opts.post_recv(i as u64, r.acks.sge(i * ack_slot..(i + 1) * ack_slot)?);
    }
    let hello = Hello {
        seed: run.seed,
        connection: n,
        max_size: run.max_size,
        depth: depth as u16,
    };
    let qp = connect(run.addr, &super::server::config(), opts, &hello.to_bytes()).await?;
    let welcome = Welcome::parse(qp.info().peer_private_data()).ok_or_else(|| {
        SoakError::Protocol("the server's private data is not a soak server's".into())
    })?;
    let mut source = vec![0u8; max];
    pattern::fill(&mut source, pattern::seed(run.seed, n, Stream::Source, 0));
    let source = Arc::new(source);
    let waiting: Waiting = Arc::default();
    let dispatcher = tokio::spawn(dispatch(
        qp.clone(),
        r.clone(),
        waiting.clone(),
        hello,
        ack_slot,
    ));
    let lanes = (0..depth).map(|lane| {
        let lane = Lane {
            run,
            qp: &qp,
            r: &r,
            welcome,
            source: &source,
            waiting: &waiting,
            counters,
            n,
            lane,
        };
        async move { lane.run().await }
    });
    let results = futures_util::future::join_all(lanes).await;
    let outcome = results.into_iter().collect::<Result<Vec<()>, SoakError>>();
    if outcome.is_ok() {
        qp.disconnect().await?;
    }
    dispatcher.abort();
    match (outcome, qp.error()) {
        (Err(e), _) => Err(e),
        (Ok(_), None | Some(iwarp::ConnectionError::LocallyClosed)) => {
            bump(&counters.connections_completed);
            Ok(())
        }
        (Ok(_), Some(e)) => Err(SoakError::Connection(e)),
    }
}

/// Takes the server's acks off the receive queue, checks their payload and
/// hands each to the lane that waits for it.
async fn dispatch(qp: QueuePair, r: Arc<Regions>, waiting: Waiting, hello: Hello, slot: usize) {
    loop {
        let c = qp.recv_cq().next().await;
        if c.status != CompletionStatus::Success {
            return;
        }
        let at = c.wr_id as usize * slot;
        let received = c.byte_len as usize;
        let ack = r.acks.read_with(|m| {
            let h = Header::parse(&m[at..at + received])?;
            let payload = m.get(at + HEADER_LEN..at + received)?;
            let ok = h.kind == Kind::Ack
                && payload.len() == h.len as usize
                && h.len as usize == ack_payload_len(h.op, hello.max_size as usize)
                && pattern::first_mismatch(
                    payload,
                    pattern::seed(hello.seed, hello.connection, Stream::Ack, h.op),
                )
                .is_none();
            // A damaged ack reads as a mismatch in the lane.
            Some(if ok {
                h
            } else {
                Header {
                    status: u8::MAX,
                    ..h
                }
            })
        });
        let Ok(sge) = r.acks.sge(at..at + slot) else {
            return;
        };
        if qp.post_recv(c.wr_id, sge).is_err() {
            return;
        }
        let Some(ack) = ack else {
            continue;
        };
        let lane = waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&ack.op);
        if let Some(lane) = lane {
            let _ = lane.send(ack);
        }
    }
}

/// One lane of a connection: operations one after the other, on its own
/// slots of each region.
struct Lane<'a> {
    run: &'a Run,
    qp: &'a QueuePair,
    r: &'a Regions,
    welcome: Welcome,
    source: &'a [u8],
    waiting: &'a Waiting,
    counters: &'a Counters,
    n: u32,
    lane: usize,
}

/// SplitMix64: the lanes' choices of operation, size and offset.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Lane<'_> {
    async fn run(self) -> Result<(), SoakError> {
        let mut rng = pattern::seed(self.run.seed, self.n, Stream::Send, self.lane as u32) ^ 0x5eed;
        let depth = usize::from(self.run.depth.max(1));
        let mut idled = self.run.idle.is_zero();
        for k in 0.. {
            if !idled && Instant::now() >= self.run.idle_at {
                tokio::time::sleep(self.run.idle).await;
                idled = true;
            }
            if Instant::now() >= self.run.until {
                return Ok(());
            }
            let op = (self.lane + k * depth) as u32;
            let choice = next_random(&mut rng);
            // Sizes spread over the orders of magnitude: 1 octet up to max.
            let max = u64::from(self.run.max_size);
            let bits = 64 - max.leading_zeros();
            let cap = (1u64 << ((choice >> 8) % u64::from(bits + 1))).min(max);
            let len = (1 + (choice >> 16) % cap) as usize;
            let step = match choice % 3 {
                0 => self.send(op, len).await,
                1 => self.write(op, len).await,
                _ => self.read(len, (choice >> 40) as usize).await,
            };
            step?;
        }
        Ok(())
    }

    fn out_slot(&self) -> usize {
        self.lane * (HEADER_LEN + self.run.max_size as usize)
    }

    /// A Send of `len` octets of pattern after the header; waits for its ack.
    async fn send(&self, op: u32, len: usize) -> Result<(), SoakError> {
        let at = self.out_slot();
        let seed = pattern::seed(self.run.seed, self.n, Stream::Send, op);
        self.r.out.write_with(|m| {
            m[at..at + HEADER_LEN].copy_from_slice(&self.header(Kind::Send, op, len).to_bytes());
            pattern::fill(&mut m[at + HEADER_LEN..at + HEADER_LEN + len], seed);
        });
        let ack = self.expect_ack(op);
        self.bounded(self.qp.send(self.r.out.sge(at..at + HEADER_LEN + len)?))
            .await??;
        self.await_ack(ack, op, len).await?;
        bump(&self.counters.sends);
        Ok(())
    }

    /// An RDMA Write of `len` octets into this lane's landing slot, then
    /// the notice; waits for the ack.
    async fn write(&self, op: u32, len: usize) -> Result<(), SoakError> {
        let at = self.out_slot();
        let seed = pattern::seed(self.run.seed, self.n, Stream::Write, op);
        self.r.out.write_with(|m| {
            m[at..at + HEADER_LEN].copy_from_slice(&self.header(Kind::Written, op, len).to_bytes());
            pattern::fill(&mut m[at + HEADER_LEN..at + HEADER_LEN + len], seed);
        });
        let max = u64::from(self.run.max_size);
        let target = self
            .welcome
            .landing
            .slice(self.lane as u64 * max, len as u32)
            .ok_or_else(|| SoakError::Protocol("the landing region is too small".into()))?;
        let payload = self.r.out.sge(at + HEADER_LEN..at + HEADER_LEN + len)?;
        self.bounded(self.qp.write(payload, target)).await??;
        let ack = self.expect_ack(op);
        self.bounded(self.qp.send(self.r.out.sge(at..at + HEADER_LEN)?))
            .await??;
        self.await_ack(ack, op, len).await?;
        bump(&self.counters.writes);
        Ok(())
    }

    /// An RDMA Read of `len` octets from the server's source at an offset
    /// drawn from `pick`; checks them here.
    async fn read(&self, len: usize, pick: usize) -> Result<(), SoakError> {
        let max = self.run.max_size as usize;
        let offset = pick % (max - len + 1);
        let from = self
            .welcome
            .source
            .slice(offset as u64, len as u32)
            .ok_or_else(|| SoakError::Protocol("the source region is too small".into()))?;
        let at = self.lane * max;
        self.bounded(self.qp.read(self.r.sink.sge(at..at + len)?, from))
            .await??;
        let same = self
            .r
            .sink
            .read_with(|m| m[at..at + len] == self.source[offset..offset + len]);
        if same {
            add(&self.counters.bytes_verified, len as u64);
        } else {
            bump(&self.counters.mismatches);
        }
        bump(&self.counters.reads);
        Ok(())
    }

    fn header(&self, kind: Kind, op: u32, len: usize) -> Header {
        Header {
            kind,
            status: 0,
            lane: self.lane as u16,
            op,
            len: len as u32,
            verified: 0,
        }
    }

    /// Registers for `op`'s ack before the operation can produce it.
    fn expect_ack(&self, op: u32) -> oneshot::Receiver<Header> {
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(op, tx);
        rx
    }

    /// Waits for `op`'s ack and counts what it says.
    async fn await_ack(
        &self,
        ack: oneshot::Receiver<Header>,
        op: u32,
        len: usize,
    ) -> Result<(), SoakError> {
        let ack = tokio::select! {
            a = self.bounded(ack) => a?,
            () = self.qp.closed() => return Err(self.lost()),
        };
        let Ok(ack) = ack else {
            return Err(self.lost());
        };
        if ack.status == u8::MAX {
            bump(&self.counters.mismatches);
        } else if ack.status != STATUS_OK || ack.verified as usize != len || ack.op != op {
            bump(&self.counters.peer_mismatches);
        } else {
            add(
                &self.counters.bytes_verified,
                len as u64 + u64::from(ack.len),
            );
        }
        Ok(())
    }

    fn lost(&self) -> SoakError {
        match self.qp.error() {
            Some(e) => SoakError::Connection(e),
            None => SoakError::Protocol("the connection ended before an ack".into()),
        }
    }

    /// `f`, bounded by the operation timeout; a timeout is counted.
    async fn bounded<F: std::future::Future>(&self, f: F) -> Result<F::Output, SoakError> {
        match tokio::time::timeout(self.run.op_timeout, f).await {
            Ok(v) => Ok(v),
            Err(_) => {
                bump(&self.counters.timeouts);
                Err(SoakError::Timeout(self.run.op_timeout))
            }
        }
    }
}
