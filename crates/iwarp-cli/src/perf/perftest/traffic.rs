//! The test traffic, operation for operation as perftest runs it (`run_iter_bw`,
//! `run_iter_bw_server`, `run_iter_lat_write`, `run_iter_lat`, `run_iter_lat_send` in its
//! `perftest_resources.c`), timed the way its reports expect.
//!
//! * Bandwidth client: every queue pair keeps up to `-t` operations in flight, `-n` each
//!   (or until `-D` is over), addresses moving through the cycle buffer; `ib_send_bw` also
//!   stops while the receiver's credit (a count it RDMA-Writes back every third of its
//!   receive queue) leaves fewer than `-r` receives free.
//! * `ib_send_bw` server: keeps `-r` receives posted per queue pair up to `-n` in all,
//!   returns credits, and times from the first message to the last.
//! * Write latency: each end writes `size` octets whose last one is its sequence number,
//!   and polls the last octet of its own buffer for the peer's; the server writes first.
//! * Read latency: the client reads, one at a time. Send latency: a ping-pong of Sends, the
//!   client first.
//!
//! perftest polls its completion queues and buffers without sleeping; here the polling of
//! memory yields to the runtime between looks (the connection tasks share the cores) and
//! falls back to short sleeps once the peer has been quiet for a while.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use iwarp::{Completion, CompletionQueue, CompletionStatus, QueuePair};

use crate::perf::error::{PerfError, Result};
use crate::perf::spec::TestKind;

use super::comm::Why;
use super::data::Data;
use super::figures::{bw_figures, lat_duration_figures, lat_figures, BwFigures, BwSamples};
use super::params::{Length, Params};

/// A run fails when nothing moves for this long (perftest's own server gives up after 60 s
/// without a message; its clients wait for ever).
pub const STALL: Duration = Duration::from_secs(60);
/// Work request ids of credit Writes carry this bit (the queue pair index below).
const CREDIT_WR: u64 = 1 << 40;

/// What a traffic step produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// A bandwidth row.
    Bw(BwFigures),
    /// A latency row (`None`: too few iterations for perftest's statistics).
    Lat(Option<super::figures::LatFigures>),
    /// A `-D` latency row: size, iterations, average latency, transactions per second.
    LatDuration {
        /// Message size.
        size: u64,
        /// Operations counted.
        iters: u64,
        /// Average latency, microseconds.
        avg: f64,
        /// Transactions per second.
        tps: f64,
    },
}

/// The measurement window of a `-D` run: from `margin` after the start to `margin` before
/// the end (perftest's alarm states START, SAMPLE, STOP_SAMPLE, END).
#[derive(Clone, Copy, Debug)]
struct Window {
    start: Instant,
    sample: (Duration, Duration),
    end: Duration,
}

impl Window {
    fn new(length: Length, start: Instant) -> Option<Self> {
        match length {
            Length::Iterations(_) => None,
            Length::Duration { secs, margin } => {
                let (d, m) = (
                    Duration::from_secs(u64::from(secs)),
                    Duration::from_secs(u64::from(margin)),
                );
                Some(Self {
                    start,
                    sample: (m, d.saturating_sub(m)),
                    end: d,
                })
            }
        }
    }

    fn over(&self) -> bool {
        self.start.elapsed() >= self.end
    }

    fn sampling(&self, at: Instant) -> bool {
        let t = at.saturating_duration_since(self.start);
        t >= self.sample.0 && t < self.sample.1
    }

    fn sample_ns(&self) -> (u64, u64) {
        (
            self.sample.0.as_nanos() as u64,
            self.sample.1.as_nanos() as u64,
        )
    }
}

fn ns(origin: Instant, at: Instant) -> u64 {
    at.saturating_duration_since(origin).as_nanos() as u64
}

/// A bandwidth run's figures: a `-D` run reports its sampling window, any other run every
/// operation it counted (and, without peak measurement, when it ended).
fn bw_result(
    window: Option<Window>,
    mut samples: BwSamples,
    done: u64,
    origin: Instant,
    p: &Params,
    size: u64,
) -> BwFigures {
    match window {
        Some(w) => {
            let (a, b) = w.sample_ns();
            samples.posted = vec![a];
            samples.completed = vec![b];
        }
        None => {
            samples.iters = done;
            if p.no_peak {
                samples.completed.push(ns(origin, Instant::now()));
            }
        }
    }
    bw_figures(size, &samples, p.cq_mod, p.no_peak, p.gbits)
}

/// Fails on a completion with an error status, saying why its connection ended.
fn check(c: &Completion, qps: &[QueuePair], what: &str) -> Result<()> {
    if c.status == CompletionStatus::Success {
        return Ok(());
    }
    let i = (c.wr_id & 0xffff_ffff) as usize;
    Err(match qps.get(i).and_then(QueuePair::error) {
        Some(iwarp::ConnectionError::PeerClosed) | None => PerfError::PeerGone {
            peer: "peer",
            what: format!("{what} on data connection {i}"),
        },
        Some(e) => PerfError::Protocol(format!("{what} on data connection {i}: {}", Why(&e))),
    })
}

/// The next completion of `cq`, failing after [`STALL`] without one.
async fn next(cq: &CompletionQueue, what: &str) -> Result<Completion> {
    tokio::time::timeout(STALL, cq.next())
        .await
        .map_err(|_| stalled(what))
}

/// The next completion of `cq` during a run: within a `-D` window, `None` once the
/// window is over; otherwise failing after [`STALL`] without one.
async fn next_in(
    cq: &CompletionQueue,
    window: Option<Window>,
    what: &str,
) -> Result<Option<Completion>> {
    match window {
        Some(w) => {
            let left = w.end.saturating_sub(w.start.elapsed());
            Ok(tokio::time::timeout(left, cq.next()).await.ok())
        }
        None => next(cq, what).await.map(Some),
    }
}

/// Fails on a receive that failed or that holds a message of another size than this
/// end's `-s`.
fn check_receive(c: &Completion, qps: &[QueuePair], size: u64) -> Result<()> {
    check(c, qps, "a receive failed")?;
    if u64::from(c.byte_len) != size {
        return Err(PerfError::Protocol(format!(
            "the peer sends {}-octet messages; this end was started with -s {size}: \
             run both ends with the same size",
            c.byte_len
        )));
    }
    Ok(())
}

fn stalled(what: &str) -> PerfError {
    PerfError::Timeout {
        what: what.into(),
        secs: STALL.as_secs(),
    }
}

/// Polls `look` until it gives a value: yielding at first, then sleeping a millisecond
/// between looks once 10 ms have gone by; fails after [`STALL`] or when `qp` fails.
async fn poll_until<T>(
    qp: &QueuePair,
    what: &str,
    mut look: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = look()? {
            return Ok(v);
        }
        if let Some(e) = qp.error() {
            // What the peer sent before it closed is all placed by now: one last look.
            if let Some(v) = look()? {
                return Ok(v);
            }
            return Err(PerfError::Protocol(format!("{what}: {}", Why(&e))));
        }
        let waited = t0.elapsed();
        if waited > STALL {
            return Err(stalled(what));
        }
        if waited < Duration::from_millis(10) {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Bandwidth client: `ib_write_bw`, `ib_read_bw` and `ib_send_bw` as the sender.
pub async fn bw_client(d: &Data, p: &Params, size: u64) -> Result<BwFigures> {
    let q = d.len();
    let n = p.iters();
    let total = n * q as u64;
    let depth = u64::from(p.tx_depth);
    let credits = d.credit.is_some();
    if credits {
        d.reset_credits();
    }
    let mut scnt = vec![0u64; q];
    let mut ccnt = vec![0u64; q];
    let (mut sent, mut done) = (0u64, 0u64);
    let mut samples = BwSamples {
        posted: Vec::with_capacity(if p.no_peak { 1 } else { total as usize }),
        completed: Vec::with_capacity(if p.no_peak { 1 } else { total as usize }),
        iters: 0,
    };
    let origin = Instant::now();
    let window = Window::new(p.length, origin);
    let mut batch = Vec::with_capacity(256);
    if window.is_none() && p.no_peak {
        samples.posted.push(0);
    }
    loop {
        let running = match window {
            Some(w) => !w.over(),
            None => sent < total || done < total,
        };
        if !running {
            break;
        }
        // perftest: swindow = scnt + post_list - credit, as a uint32_t.
        let credit_open = |i: usize, sent: u64| {
            (sent as u32)
                .wrapping_add(1)
                .wrapping_sub(d.credit(i, sent))
                < p.rx_depth
        };
        for i in 0..q {
            while (window.is_some() || scnt[i] < n) && scnt[i] - ccnt[i] < depth {
                if window.is_some_and(|w| w.over()) {
                    break;
                }
                if credits && !credit_open(i, scnt[i]) {
                    break;
                }
                if window.is_none() && !p.no_peak {
                    samples.posted.push(ns(origin, Instant::now()));
                }
                let qp = &d.qps[i];
                let k = scnt[i];
                let wr = i as u64;
                let posted = match p.test {
                    TestKind::Write => {
                        qp.rdma_write(wr, d.local(i, size, k, true)?, d.remote(i, size, k, true)?)
                    }
                    TestKind::Read => {
                        qp.rdma_read(wr, d.local(i, size, k, true)?, d.remote(i, size, k, true)?)
                    }
                    TestKind::Send => qp.post_send(wr, d.local(i, size, k, true)?),
                };
                posted
                    .map_err(|e| PerfError::iwarp(format!("posting on data connection {i}"), e))?;
                scnt[i] += 1;
                sent += 1;
            }
        }
        if sent > done {
            let c = next(&d.send_cq, "waiting for completions").await?;
            batch.clear();
            batch.push(c);
            d.send_cq.poll_many(&mut batch, 4096);
            let at = Instant::now();
            for c in &batch {
                check(c, &d.qps, "a work request failed")?;
                let i = (c.wr_id as usize).min(q - 1);
                ccnt[i] += 1;
                done += 1;
                match window {
                    Some(w) if w.sampling(at) => samples.iters += 1,
                    Some(_) => {}
                    None => {
                        if !p.no_peak {
                            samples.completed.push(ns(origin, at));
                        }
                    }
                }
            }
        } else if credits && (window.is_some() || done < total) {
            // Everything sent has completed; only a credit can let more go. Wait until one
            // has: credits that came while the completions were awaited count, so this
            // looks at the window itself, not for a credit newer than one read here (the
            // receiver, holding every Send, then writes no more and both ends waited).
            poll_until(
                &d.qps[0],
                "waiting for the receiver's credit on data connection 0",
                || {
                    let open = (0..q)
                        .any(|i| (window.is_some() || scnt[i] < n) && credit_open(i, scnt[i]));
                    Ok((open || window.is_some_and(|w| w.over())).then_some(()))
                },
            )
            .await?;
        }
    }
    Ok(bw_result(window, samples, done, origin, p, size))
}

/// `ib_send_bw` server: posts `-r` receives per queue pair before the exchange that lets
/// the client send (perftest's `ctx_set_recv_wqes`).
pub fn post_receives(d: &Data, p: &Params, size: u64) -> Result<u64> {
    let per_qp = u64::from(p.rx_depth);
    let cycle = p.measure == crate::perf::spec::Measure::Bw;
    for (i, qp) in d.qps.iter().enumerate() {
        for k in 0..per_qp {
            qp.post_recv(i as u64, d.receive_buffer(i, size, k, cycle)?)
                .map_err(|e| {
                    PerfError::iwarp(format!("posting a receive on data connection {i}"), e)
                })?;
        }
    }
    Ok(per_qp)
}

/// Posts queue pair `i`'s credit Write number `seq`, carrying `count`, from its own word
/// of the credit ring (`Data::credit_ring`).
fn post_credit(d: &Data, i: usize, seq: u64, count: u32) -> Result<()> {
    let (sge, remote) = d.credit_to_send(i, seq, count)?;
    d.qps[i]
        .rdma_write(CREDIT_WR | i as u64, sge, remote)
        .map_err(|e| PerfError::iwarp("posting a credit Write", e))
}

/// `ib_send_bw` server: receives what the client sends, returning credits, and measures.
pub async fn bw_server_send(d: &Data, p: &Params, size: u64) -> Result<BwFigures> {
    let q = d.len();
    let n = p.iters();
    let total = n * q as u64;
    let rx_depth = u64::from(p.rx_depth);
    let credit_every = u64::from((p.rx_depth / 3).max(1));
    let mut received = vec![0u64; q];
    let mut posted = vec![rx_depth; q];
    let mut credits_out = vec![0u64; q];
    let mut credits_sent = vec![0u64; q];
    let mut count = 0u64;
    let mut first: Option<Instant> = None;
    let mut window: Option<Window> = None;
    let mut sampled = 0u64;
    let mut batch = Vec::with_capacity(256);
    loop {
        if let Some(w) = window {
            if w.over() {
                break;
            }
        } else if !matches!(p.length, Length::Duration { .. }) && count >= total {
            break;
        }
        let Some(c) = next_in(&d.recv_cq, window, "waiting for the client's Sends").await? else {
            break;
        };
        batch.clear();
        batch.push(c);
        d.recv_cq.poll_many(&mut batch, 4096);
        let at = Instant::now();
        if first.is_none() {
            first = Some(at);
            window = Window::new(p.length, at);
        }
        for c in &batch {
            check_receive(c, &d.qps, size)?;
            let i = (c.wr_id as usize).min(q - 1);
            received[i] += 1;
            count += 1;
            if window.is_some_and(|w| w.sampling(at)) {
                sampled += 1;
            }
            if window.is_some() || posted[i] < n {
                let k = posted[i];
                d.qps[i]
                    .post_recv(i as u64, d.receive_buffer(i, size, k, true)?)
                    .map_err(|e| PerfError::iwarp("posting a receive", e))?;
                posted[i] += 1;
            }
            if (received[i] % rx_depth).is_multiple_of(credit_every) {
                // Also keeps a free word in the credit ring (`Data::credit_ring`).
                while credits_out[i] >= d.credit_ring {
                    let c = next(&d.send_cq, "waiting for credit Writes to complete").await?;
                    check(&c, &d.qps, "a credit Write failed")?;
                    let j = (c.wr_id & 0xffff_ffff) as usize;
                    credits_out[j.min(q - 1)] -= 1;
                }
                post_credit(d, i, credits_sent[i], received[i] as u32)?;
                credits_out[i] += 1;
                credits_sent[i] += 1;
            }
        }
        while let Some(c) = d.send_cq.poll() {
            check(&c, &d.qps, "a credit Write failed")?;
            let j = (c.wr_id & 0xffff_ffff) as usize;
            let slot = &mut credits_out[j.min(q - 1)];
            *slot = slot.saturating_sub(1);
        }
    }
    let end = Instant::now();
    let origin = first.unwrap_or(end);
    let samples = match window {
        Some(w) => {
            let (a, b) = w.sample_ns();
            BwSamples {
                posted: vec![a],
                completed: vec![b],
                iters: sampled,
            }
        }
        None => BwSamples {
            posted: vec![0],
            completed: vec![ns(origin, end)],
            iters: count,
        },
    };
    Ok(bw_figures(size, &samples, p.cq_mod, true, p.gbits))
}

/// `ib_send_bw -b` (perftest's `run_iter_bi`): both ends send `-n` messages per queue
/// pair, each within the credit the other returns, and receive the other's, returning
/// credits; a server starts sending at its first reception. The figures are this end's
/// sending.
pub async fn bw_both_ways_send(d: &Data, p: &Params, size: u64) -> Result<BwFigures> {
    let q = d.len();
    let n = p.iters();
    let total = n * q as u64;
    let depth = u64::from(p.tx_depth);
    let rx_depth = u64::from(p.rx_depth);
    let credit_every = u64::from((p.rx_depth / 3).max(1));
    let (mut scnt, mut ccnt, mut scredit) = (vec![0u64; q], vec![0u64; q], vec![0u64; q]);
    // Credits counted while the ring had no free word (`Data::credit_ring`): sent, with
    // the count they were due with, as soon as one is free.
    let mut credits_due: Vec<VecDeque<u32>> = vec![VecDeque::new(); q];
    let mut credits_sent = vec![0u64; q];
    let (mut received, mut posted) = (vec![0u64; q], vec![rx_depth; q]);
    let (mut done, mut got) = (0u64, 0u64);
    // perftest forgets the credits of the previous size (its `credit_buf[j] = 0`).
    d.reset_credits();
    let mut waiting_first = p.side == super::params::Side::Server;
    let mut samples = BwSamples::default();
    let origin = Instant::now();
    let mut window = if waiting_first {
        None
    } else {
        Window::new(p.length, origin)
    };
    if p.no_peak {
        samples.posted.push(0);
    }
    let over = |w: &Option<Window>| w.is_some_and(|w| w.over());
    loop {
        for i in 0..q {
            while scredit[i] < d.credit_ring {
                let Some(count) = credits_due[i].pop_front() else {
                    break;
                };
                post_credit(d, i, credits_sent[i], count)?;
                scredit[i] += 1;
                credits_sent[i] += 1;
            }
        }
        let finished = if p.duration() {
            over(&window)
        } else {
            done >= total && got >= total
        };
        if finished {
            break;
        }
        let mut blocked_on_credit = false;
        if !waiting_first {
            for i in 0..q {
                while (p.duration() || scnt[i] < n) && scnt[i] + scredit[i] - ccnt[i] < depth {
                    if over(&window) {
                        break;
                    }
                    let credit = d.credit(i, scnt[i]);
                    if (scnt[i] as u32).wrapping_add(1).wrapping_sub(credit) >= p.rx_depth {
                        blocked_on_credit = true;
                        break;
                    }
                    if !p.no_peak && !p.duration() {
                        samples.posted.push(ns(origin, Instant::now()));
                    }
                    d.qps[i]
                        .post_send(i as u64, d.local(i, size, scnt[i], true)?)
                        .map_err(|e| {
                            PerfError::iwarp(format!("posting on data connection {i}"), e)
                        })?;
                    scnt[i] += 1;
                }
            }
        }
        let event = tokio::time::timeout(STALL, async {
            tokio::select! {
                c = d.recv_cq.next() => Event::Received(c),
                c = d.send_cq.next() => Event::Sent(c),
                // Only time passed: look at the credits again.
                () = tokio::time::sleep(Duration::from_millis(1)), if blocked_on_credit => Event::Tick,
            }
        })
        .await
        .map_err(|_| stalled("waiting for Sends both ways"))?;
        let at = Instant::now();
        match event {
            Event::Tick => {}
            Event::Received(c) => {
                check_receive(&c, &d.qps, size)?;
                if waiting_first {
                    waiting_first = false;
                    window = Window::new(p.length, at);
                }
                let i = (c.wr_id as usize).min(q - 1);
                received[i] += 1;
                got += 1;
                if p.duration() || posted[i] < n {
                    d.qps[i]
                        .post_recv(i as u64, d.receive_buffer(i, size, posted[i], true)?)
                        .map_err(|e| PerfError::iwarp("posting a receive", e))?;
                    posted[i] += 1;
                }
                if (received[i] % rx_depth) % credit_every == 0 {
                    // Posted at the loop's top, in order, once the ring has room.
                    credits_due[i].push_back(received[i] as u32);
                }
            }
            Event::Sent(c) => {
                check(&c, &d.qps, "a work request failed")?;
                let i = ((c.wr_id & 0xffff_ffff) as usize).min(q - 1);
                if c.wr_id & CREDIT_WR != 0 {
                    scredit[i] = scredit[i].saturating_sub(1);
                } else {
                    ccnt[i] += 1;
                    done += 1;
                    if p.duration() {
                        if window.is_some_and(|w| w.sampling(at)) {
                            samples.iters += 1;
                        }
                    } else if !p.no_peak {
                        samples.completed.push(ns(origin, at));
                    }
                }
            }
        }
    }
    Ok(bw_result(
        window.filter(|_| p.duration()),
        samples,
        done,
        origin,
        p,
        size,
    ))
}

/// What a bidirectional Send test waits for.
enum Event {
    /// A receive completed.
    Received(Completion),
    /// A Send or a credit Write completed.
    Sent(Completion),
    /// Time passed (while the send window waits for credit).
    Tick,
}

/// Latency traffic of this end (`ib_write_lat` both ends, `ib_read_lat` client, `ib_send_lat`
/// both ends), on queue pair 0.
pub async fn lat(d: &Data, p: &Params, size: u64, client: bool) -> Result<Outcome> {
    let origin = Instant::now();
    let window = Window::new(p.length, origin);
    let n = p.iters();
    let mut posted: Vec<u64> = Vec::with_capacity(n as usize);
    let mut counted = 0u64;
    let more = |scnt: u64| match window {
        Some(w) => !w.over(),
        None => scnt < n,
    };
    let mut count = |at: Instant, posted: &mut Vec<u64>| match window {
        Some(w) => {
            if w.sampling(at) {
                counted += 1;
            }
        }
        None => posted.push(ns(origin, at)),
    };
    match p.test {
        TestKind::Write => {
            write_lat(d, size, client, n, window, &mut |at| count(at, &mut posted)).await?
        }
        TestKind::Read => {
            let qp = &d.qps[0];
            let mut scnt = 0u64;
            while more(scnt) {
                count(Instant::now(), &mut posted);
                qp.rdma_read(0, d.local(0, size, 0, false)?, d.remote(0, size, 0, false)?)
                    .map_err(|e| PerfError::iwarp("posting a Read", e))?;
                scnt += 1;
                let c = next(&d.send_cq, "waiting for a Read").await?;
                check(&c, &d.qps, "a Read failed")?;
            }
        }
        TestKind::Send => {
            send_lat(d, p, size, client, window, &mut |at| count(at, &mut posted)).await?
        }
    }
    let round_trips = if p.test == TestKind::Read { 1 } else { 2 };
    Ok(match window {
        Some(w) => {
            let (a, b) = w.sample_ns();
            let (avg, tps) = lat_duration_figures(counted, b - a, round_trips);
            Outcome::LatDuration {
                size,
                iters: counted,
                avg,
                tps,
            }
        }
        None => Outcome::Lat(lat_figures(size, &posted, round_trips)),
    })
}

/// `run_iter_lat_write`: the server writes first; each end then waits for the peer's
/// number before writing its next.
async fn write_lat(
    d: &Data,
    size: u64,
    client: bool,
    n: u64,
    window: Option<Window>,
    count: &mut (dyn FnMut(Instant) + Send),
) -> Result<()> {
    let qp = &d.qps[0];
    let poll_at = d.poll_offset(size);
    let post_at = d.post_offset(size);
    // The peer's Writes of earlier sizes; its first of this size may be in already.
    let writes_before = d.peer_writes_done.load(Ordering::Relaxed);
    let octets_before = d.peer_octets_done.load(Ordering::Relaxed);
    let more = |k: u64| match window {
        Some(w) => !w.over(),
        None => k < n,
    };
    let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
    while more(scnt) || (window.is_none() && (ccnt < n || rcnt < n)) {
        // The server writes first: its first turn skips the wait.
        if (window.is_some() || rcnt < n) && (client || scnt >= 1) {
            rcnt += 1;
            let want = rcnt as u8;
            poll_until(
                qp,
                "waiting for the peer's RDMA Write on data connection 0",
                || {
                    if d.region.read_with(|b| b.get(poll_at).copied()) == Some(want) {
                        return Ok(Some(()));
                    }
                    if window.is_some_and(|w| w.over()) {
                        return Ok(Some(()));
                    }
                    // The peer's Writes have all landed but not on our last octet: its
                    // messages have another size. (In a ping-pong the peer cannot be ahead.)
                    let now = qp.stats().one_sided;
                    let writes = now.writes_received.saturating_sub(writes_before);
                    if window.is_none() && writes >= rcnt {
                        let octets = now.write_octets_received.saturating_sub(octets_before);
                        if octets != writes * size {
                            return Err(PerfError::Protocol(format!(
                                "the peer writes {}-octet messages; this end was started with \
                             -s {size}: run both ends with the same size",
                                octets / writes.max(1)
                            )));
                        }
                    }
                    Ok(None)
                },
            )
            .await?;
            if window.is_some_and(|w| w.over()) {
                break;
            }
        }
        if more(scnt) {
            count(Instant::now());
            scnt += 1;
            d.region
                .write_with(|b| b.get_mut(post_at).map(|o| *o = scnt as u8));
            qp.rdma_write(0, d.local(0, size, 0, false)?, d.remote(0, size, 0, false)?)
                .map_err(|e| PerfError::iwarp("posting an RDMA Write", e))?;
        }
        if window.is_some() || ccnt < n {
            if window.is_some() && scnt == ccnt {
                continue;
            }
            let c = next(&d.send_cq, "waiting for an RDMA Write to complete").await?;
            check(&c, &d.qps, "an RDMA Write failed")?;
            ccnt += 1;
        }
    }
    d.peer_writes_done.fetch_add(rcnt, Ordering::Relaxed);
    d.peer_octets_done.fetch_add(rcnt * size, Ordering::Relaxed);
    Ok(())
}

/// `run_iter_lat_send`: the client sends first; each end answers every message received.
async fn send_lat(
    d: &Data,
    p: &Params,
    size: u64,
    client: bool,
    window: Option<Window>,
    count: &mut (dyn FnMut(Instant) + Send),
) -> Result<()> {
    let qp = &d.qps[0];
    let n = p.iters();
    let rx_depth = u64::from(p.rx_depth);
    let more = |k: u64| match window {
        Some(w) => !w.over(),
        None => k < n,
    };
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    while more(scnt) || (window.is_none() && rcnt < n) {
        // The client sends first: its first turn skips the wait.
        if (window.is_some() || rcnt < n) && (!client || scnt >= 1) {
            let Some(c) = next_in(&d.recv_cq, window, "waiting for the peer's Send").await? else {
                break;
            };
            check_receive(&c, &d.qps, size)?;
            rcnt += 1;
            if window.is_some() || rcnt + rx_depth <= n {
                qp.post_recv(0, d.receive_buffer(0, size, 0, false)?)
                    .map_err(|e| PerfError::iwarp("posting a receive", e))?;
            }
        }
        if more(scnt) {
            count(Instant::now());
            scnt += 1;
            qp.post_send(0, d.local(0, size, 0, false)?)
                .map_err(|e| PerfError::iwarp("posting a Send", e))?;
            let c = next(&d.send_cq, "waiting for a Send to complete").await?;
            check(&c, &d.qps, "a Send failed")?;
        }
    }
    Ok(())
}
