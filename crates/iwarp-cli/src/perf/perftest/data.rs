//! The data side of a perftest run: the data connections, the buffer they share, the
//! destinations this end announces and the peer's.
//!
//! The buffer is laid out as perftest lays out its own (`alloc_ctx`, `create_mr`,
//! `set_up_connection`, one region for all queue pairs): `2 × qps` slots of
//! `BUFF_SIZE(size, cycle buffer)` octets; queue pair `i` sends from (or reads into) slot
//! `i` and announces slot `qps + i` for the peer to write or read. `ib_send_bw` on iWARP
//! announces a credit word instead (`ctx_alloc_credit`): the peer's receiver writes its
//! message count there.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::AtomicU64;

use iwarp::{
    Access, CompletionQueue, MemoryRegion, ProtectionDomain, QueuePair, RegisterOptions, RemoteKey,
    STag, Sge,
};

use crate::perf::error::{PerfError, Result};
use crate::perf::spec::{Measure, TestKind};

use super::params::{buff_size, inc, Params};
use super::wire::{self, Dest};

/// Tagged offset of the data buffer's first octet: a user-space-looking address, as a
/// verbs peer announces.
const DATA_BASE: u64 = 0x5555_5550_0000;
/// Tagged offset of the credit words.
const CREDIT_BASE: u64 = 0x5555_6660_0000;

/// The connections and buffers of a run.
#[derive(Debug)]
pub struct Data {
    /// One per queue pair, in the order the peer numbers them.
    pub qps: Vec<QueuePair>,
    /// Where every data connection's Sends, Writes and Reads complete.
    pub send_cq: CompletionQueue,
    /// Where every data connection's receives complete.
    pub recv_cq: CompletionQueue,
    /// The shared buffer.
    pub region: MemoryRegion,
    /// `ib_send_bw`: this end's credit words (`qps` to send from, then `qps` the peer
    /// writes into).
    pub credit: Option<MemoryRegion>,
    /// `ib_send_bw`: words in each queue pair's ring of outgoing credits. A credit Write
    /// goes out from its own word, which nothing changes until the Write completes: its
    /// octets may be taken from the region after the next credit is counted (posts in a
    /// burst share writes), and a word rewritten in between would send the later count
    /// twice. At most this many credit Writes of one queue pair are outstanding.
    pub credit_ring: u64,
    /// Octets per slot: `BUFF_SIZE` of the largest size.
    pub slot: u64,
    /// The cycle buffer both ends settled on.
    pub cycle: u64,
    /// The cache line size both ends settled on.
    pub cache_line: u64,
    /// What this end announced, per queue pair.
    pub mine: Vec<Dest>,
    /// What the peer announced, per queue pair.
    pub peer: Vec<Dest>,
    /// Write latency: the peer's Writes of the sizes finished so far, and their octets
    /// (each size is exactly `-n` Writes), to tell a peer writing another size.
    pub peer_writes_done: AtomicU64,
    /// See `peer_writes_done`.
    pub peer_octets_done: AtomicU64,
}

/// A credit read while `sent` messages of the current size have been sent: a count above
/// `sent` is no receiver's count of this size but the previous size's last credit Write,
/// placed after [`Data::reset_credits`] zeroed the word. That Write travels on the data
/// connection and the hand shake that starts the next size on the exchange connection, so
/// nothing orders the two. It counts as no credit yet: taken at its value, the sender's
/// window (`sent + 1 - credit`, as perftest's `uint32_t`) wraps, and the sender waits for
/// a credit the receiver, having received nothing, never writes.
fn this_size(credit: u32, sent: u64) -> u32 {
    if u64::from(credit) > sent {
        0
    } else {
        credit
    }
}

fn random_u32() -> u32 {
    // The std hasher is seeded at random per process: enough for a PSN nobody checks.
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish() as u32
}

impl Data {
    /// Sets up the buffers for `qps` connected queue pairs and this end's destinations.
    #[allow(clippy::too_many_arguments)] // the pieces a run has gathered by now
    pub fn new(
        params: &Params,
        pd: &ProtectionDomain,
        qps: Vec<QueuePair>,
        send_cq: CompletionQueue,
        recv_cq: CompletionQueue,
        cycle: u32,
        cache_line: u32,
    ) -> Result<Self> {
        let n = qps.len() as u64;
        let (cycle, cache_line) = (u64::from(cycle.max(1)), u64::from(cache_line.max(1)));
        let slot = buff_size(params.buffer_size, cycle);
        let len = inc(slot, cache_line)
            .checked_mul(2 * n)
            .filter(|&l| l <= u64::from(u32::MAX))
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| {
                PerfError::Usage(format!(
                    "{n} queue pairs of {} octets need a buffer larger than 4 GiB",
                    params.buffer_size
                ))
            })?;
        let access = match params.test {
            TestKind::Write => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            // An iWARP Read sink is written by the tagged Read Response: perftest adds
            // remote write for iWARP too.
            TestKind::Read => Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            TestKind::Send => Access::LOCAL_WRITE,
        };
        // perftest fills its buffer with random octets, except for write latency, whose
        // peers poll the last octet of each message and must start from zero.
        let contents = if params.test == TestKind::Write && params.measure == Measure::Lat {
            vec![0u8; len]
        } else {
            let mut x = u64::from(random_u32()) | 1;
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        let region = pd
            .register_with(
                contents,
                RegisterOptions {
                    base_to: DATA_BASE,
                    ..RegisterOptions::new(access)
                },
            )
            .map_err(|e| PerfError::iwarp("registering the test buffer", e))?;
        let credit_ring = u64::from(params.tx_depth.max(1));
        let credit = if params.test == TestKind::Send && params.measure == Measure::Bw {
            // The words perftest lays out (ours, then the peer's), then a ring of
            // `credit_ring` words per queue pair that our credit Writes go out from.
            let words = (2 + credit_ring) * n * wire::CREDIT_LEN as u64;
            let words = usize::try_from(words).unwrap_or(usize::MAX);
            Some(
                pd.register_with(
                    vec![0; words],
                    RegisterOptions {
                        base_to: CREDIT_BASE,
                        ..RegisterOptions::new(Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                    },
                )
                .map_err(|e| PerfError::iwarp("registering the credit words", e))?,
            )
        } else {
            None
        };
        let psn = random_u32();
        let mine = (0..n)
            .map(|i| {
                let (rkey, vaddr) = match &credit {
                    Some(c) => (c.stag().0, CREDIT_BASE + (n + i) * wire::CREDIT_LEN as u64),
                    None => (region.stag().0, DATA_BASE + (n + i) * slot),
                };
                Dest {
                    lid: 0,
                    out_reads: params.out_reads,
                    qpn: i as u32 + 2,
                    psn: psn.wrapping_add(i as u32 * 0x1_0001) & 0xff_ffff,
                    rkey,
                    vaddr,
                    gid: [0; 16],
                    srqn: 0,
                    gid_index: 0,
                }
            })
            .collect();
        Ok(Self {
            qps,
            send_cq,
            recv_cq,
            region,
            credit,
            credit_ring,
            slot,
            cycle,
            cache_line,
            mine,
            peer: vec![Dest::default(); n as usize],
            peer_writes_done: AtomicU64::new(0),
            peer_octets_done: AtomicU64::new(0),
        })
    }

    /// Queue pairs.
    pub fn len(&self) -> usize {
        self.qps.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.qps.is_empty()
    }

    /// How many messages of `size` fit one cycle buffer before the addresses start over
    /// (perftest's `increase_loc_addr`), or `None` when every message uses the same
    /// address (sizes above half the cycle buffer).
    pub fn cycle_slots(&self, size: u64) -> Option<u64> {
        (size <= self.cycle / 2).then(|| (self.cycle / inc(size, self.cache_line)).max(1))
    }

    /// Offset of the `k`-th message of `size` within its slot.
    pub fn cycle_offset(&self, size: u64, k: u64) -> u64 {
        self.cycle_slots(size)
            .map_or(0, |m| (k % m) * inc(size, self.cache_line))
    }

    fn sge(&self, offset: u64, size: u64) -> Result<Sge> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = usize::try_from(offset + size).unwrap_or(usize::MAX);
        self.region
            .sge(start..end)
            .map_err(|e| PerfError::iwarp("describing the test buffer", e))
    }

    /// Queue pair `qp`'s own buffer for its `k`-th message of `size`: what it sends, or
    /// where a Read lands (`cycle`: bandwidth tests move through the cycle buffer).
    pub fn local(&self, qp: usize, size: u64, k: u64, cycle: bool) -> Result<Sge> {
        let off = if cycle { self.cycle_offset(size, k) } else { 0 };
        self.sge(qp as u64 * self.slot + off, size)
    }

    /// Where queue pair `qp`'s `k`-th received message of `size` lands: the slot it
    /// announced.
    pub fn receive_buffer(&self, qp: usize, size: u64, k: u64, cycle: bool) -> Result<Sge> {
        let off = if cycle { self.cycle_offset(size, k) } else { 0 };
        self.sge((self.len() + qp) as u64 * self.slot + off, size)
    }

    /// Offset in the buffer of the octet the peer's `size`-octet Writes to queue pair 0
    /// end on: what write latency polls.
    pub fn poll_offset(&self, size: u64) -> usize {
        usize::try_from(self.len() as u64 * self.slot + size - 1).unwrap_or(usize::MAX)
    }

    /// Offset of the last octet of queue pair 0's own message of `size`: where write
    /// latency puts its sequence number.
    pub fn post_offset(&self, size: u64) -> usize {
        usize::try_from(size - 1).unwrap_or(usize::MAX)
    }

    /// The peer's buffer for queue pair `qp`'s `k`-th message of `size`.
    pub fn remote(&self, qp: usize, size: u64, k: u64, cycle: bool) -> Result<RemoteKey> {
        let d = self
            .peer
            .get(qp)
            .ok_or_else(|| PerfError::Internal(format!("no destination for queue pair {qp}")))?;
        let off = if cycle { self.cycle_offset(size, k) } else { 0 };
        Ok(RemoteKey {
            stag: STag(d.rkey),
            addr: d.vaddr.wrapping_add(off),
            len: u32::try_from(size).unwrap_or(u32::MAX),
        })
    }

    /// `ib_send_bw`: the credit the peer last wrote for queue pair `qp`, read as the
    /// number of messages of this size it has received (`sent` so far helps tell its byte
    /// order, and a previous size's late credit from a current one: see `this_size`).
    pub fn credit(&self, qp: usize, sent: u64) -> u32 {
        let at = (self.len() + qp) * wire::CREDIT_LEN;
        self.credit.as_ref().map_or(0, |c| {
            c.read_with(|b| {
                let mut w = [0u8; wire::CREDIT_LEN];
                if let Some(s) = b.get(at..at + wire::CREDIT_LEN) {
                    w.copy_from_slice(s);
                }
                this_size(wire::decode_credit(w, sent), sent)
            })
        })
    }

    /// `ib_send_bw`: forgets the credits of the previous size (perftest zeroes them):
    /// the words the peer writes, not the ring ours go out from.
    pub fn reset_credits(&self) {
        if let Some(c) = &self.credit {
            let n = self.len() * wire::CREDIT_LEN;
            c.write_with(|b| b[n..2 * n].fill(0));
        }
    }

    /// `ib_send_bw` receiver: puts `count` in the outgoing credit word of queue pair
    /// `qp`'s credit number `seq` (counted from 0; with fewer than `credit_ring` of them
    /// outstanding, its word is free) and returns it and the peer's credit word to write
    /// it to.
    pub fn credit_to_send(&self, qp: usize, seq: u64, count: u32) -> Result<(Sge, RemoteKey)> {
        let c = self
            .credit
            .as_ref()
            .ok_or_else(|| PerfError::Internal("no credit words".into()))?;
        let ring = self.credit_ring as usize;
        let word = 2 * self.len() + qp * ring + (seq % self.credit_ring) as usize;
        let at = word * wire::CREDIT_LEN;
        c.copy_from(at, &wire::encode_credit(count))
            .map_err(|e| PerfError::iwarp("writing a credit", e))?;
        let sge = c
            .sge(at..at + wire::CREDIT_LEN)
            .map_err(|e| PerfError::iwarp("describing a credit", e))?;
        let d = self
            .peer
            .get(qp)
            .ok_or_else(|| PerfError::Internal(format!("no destination for queue pair {qp}")))?;
        Ok((
            sge,
            RemoteKey {
                stag: STag(d.rkey),
                addr: d.vaddr,
                len: wire::CREDIT_LEN as u32,
            },
        ))
    }

    /// The first data connection that failed (not merely closed by the peer), and why.
    pub fn failure(&self) -> Option<(usize, iwarp::ConnectionError)> {
        self.qps
            .iter()
            .enumerate()
            .find_map(|(i, q)| match q.error() {
                None
                | Some(iwarp::ConnectionError::PeerClosed)
                | Some(iwarp::ConnectionError::LocallyClosed) => None,
                Some(e) => Some((i, e)),
            })
    }

    /// Closes every data connection gracefully, as perftest's `rdma_disconnect`.
    pub async fn disconnect(&self) {
        for qp in &self.qps {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), qp.disconnect()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hang `ib_send_bw -a` met between sizes: the previous size's last credit (5)
    /// placed after the reset, before this size's first Send. Read as 5, the window
    /// `sent + 1 - credit` wraps past `-r 5` and nothing is sent; read as none, the sender
    /// may send `-r` - 1 and the receiver's first credit moves it on.
    #[test]
    fn a_previous_sizes_late_credit_is_no_credit() {
        let rx_depth = 5u32;
        let window = |sent: u64, credit: u32| (sent as u32).wrapping_add(1).wrapping_sub(credit);
        assert_eq!(this_size(5, 0), 0);
        assert!(window(0, this_size(5, 0)) < rx_depth);
        assert_eq!(this_size(5, 3), 0);
        // A count of this size's messages is kept, up to everything sent.
        for sent in 0..10u64 {
            for credit in 0..=sent as u32 {
                assert_eq!(this_size(credit, sent), credit);
            }
        }
    }
}
