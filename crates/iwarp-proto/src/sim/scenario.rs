//! A whole run: a sending queue pair framed by our own transmitter, a TCP
//! sender, a link, the out-of-order receiver, and beside it its twin, the
//! in-order receiver, fed the same stream in order as far as the
//! out-of-order one has received it. Everything the two do is compared.

use std::sync::Arc;

use crate::framing::{
    AnyDeframer, AnyFramer, Deframer, FeedError, Framer, FramingError, LlpError, MarkerInterval,
    UlpduSink, WireBatch,
};
use crate::ift::{IftTransmitter, TxParams};
use crate::memory::{Access, MemoryBuffer, MemoryTable, RegionSpec, STag, StreamId};
use crate::mpa::{FpduTransmitter, FramingParams, Placement, MAX_FPDU_WIRE_LEN};
use crate::ooo::{
    AnyFraming, IftFraming, MpaFraming, OooConfig, OooFraming, OooReceiver, OooStats,
};
use crate::rdmap::{
    Completion, CompletionOpcode, Event, ProtocolError, QueuePair, QueuePairConfig, SendFlags, Sge,
};

use super::link::{Link, LinkModel, Segment};
use super::rng::Rng;
use super::sender::TcpSender;

/// The framing of the simulated direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimFraming {
    /// MPA with markers and CRC: FPDUs found through markers.
    MpaMarkers,
    /// MPA with CRC and no markers: FPDUs found at segment starts, aligned
    /// by the sender, and proven by their CRC.
    MpaAligned,
    /// MPA with markers and no CRC.
    MpaMarkersNoCrc,
    /// IFT with header and payload CRC, speculative placement permitted;
    /// markers every 256 octets if `markers`.
    Ift {
        /// Markers in the stream.
        markers: bool,
    },
}

impl SimFraming {
    /// Every framing the simulator runs.
    pub const ALL: [Self; 5] = [
        Self::MpaMarkers,
        Self::MpaAligned,
        Self::MpaMarkersNoCrc,
        Self::Ift { markers: false },
        Self::Ift { markers: true },
    ];

    fn mpa(self) -> Option<FramingParams> {
        let (crc, markers) = match self {
            Self::MpaMarkers => (true, true),
            Self::MpaAligned => (true, false),
            Self::MpaMarkersNoCrc => (false, true),
            Self::Ift { .. } => return None,
        };
        Some(FramingParams {
            crc,
            send_markers: markers,
            receive_markers: markers,
        })
    }

    fn ift(self) -> TxParams {
        TxParams {
            header_crc: true,
            payload_crc: true,
            markers: match self {
                Self::Ift { markers: true } => MarkerInterval::new(256),
                _ => None,
            },
            vtag: 0x5a17,
        }
    }

    /// The sender's framer.
    pub fn framer(self) -> AnyFramer {
        match self.mpa() {
            Some(p) => AnyFramer::Mpa(FpduTransmitter::new(p)),
            None => AnyFramer::Ift(IftTransmitter::new(self.ift())),
        }
    }

    /// The receiver's framing, for the out-of-order receiver.
    pub fn ooo(self) -> AnyFraming {
        match self.mpa() {
            Some(params) => AnyFraming::Mpa(MpaFraming {
                params,
                placement: Placement::Verified,
            }),
            None => AnyFraming::Ift(IftFraming {
                params: self.ift().checked_by_peer(),
                may_speculate: true,
            }),
        }
    }
}

/// What the simulated applications do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// Sends and RDMA Writes the sender posts.
    pub ops: usize,
    /// RDMA Reads the receiver posts (their responses come back through
    /// the simulated direction).
    pub reads: usize,
    /// The longest message, in octets.
    pub max_len: usize,
    /// One of the sender's operations is one the receiver must refuse
    /// (a Write to a region it may not write, out of bounds, to an unknown
    /// STag, or a Send longer than its receive), which ends the stream.
    pub bad_op: bool,
    /// Receives the receiver keeps posted.
    pub recv_ahead: usize,
    /// Octets of the receiver's region that RDMA Writes and Read
    /// Responses land in, at random offsets: small, they overlap often.
    pub region: usize,
}

impl Workload {
    /// A small mixed workload.
    pub const SMALL: Self = Self {
        ops: 24,
        reads: 4,
        max_len: 6000,
        bad_op: false,
        recv_ahead: 8,
        region: WINDOW_REGION,
    };
}

/// One simulated run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scenario {
    /// Everything random follows from it.
    pub seed: u64,
    /// The framing.
    pub framing: SimFraming,
    /// The link.
    pub link: LinkModel,
    /// The applications.
    pub workload: Workload,
    /// The TCP window, which is also the receiver's.
    pub window: usize,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The first difference between the out-of-order receiver and the
    /// in-order one, or a broken invariant; `None` when there is none.
    pub mismatch: Option<String>,
    /// The error that stopped both receivers, if one did.
    pub error: Option<String>,
    /// The out-of-order receiver's counters.
    pub stats: OooStats,
    /// Stream octets the sender produced.
    pub stream_octets: u64,
    /// Payload octets of the messages (Send, Write, Read Response).
    pub payload_octets: u64,
    /// Slots simulated.
    pub slots: u64,
    /// Segments the link lost, duplicated; segments sent again.
    pub lost: u64,
    /// Segments duplicated by the link.
    pub duplicated: u64,
    /// Segments the sender sent again.
    pub retransmitted: u64,
    /// The segments as they arrived, if recorded.
    pub trace: Vec<Segment>,
    /// The sequence number of stream offset 0.
    pub isn: u32,
    /// The whole stream, if recorded.
    pub stream: Vec<u8>,
}

/// Octets around each region, checked untouched at the end.
const GUARD: usize = 64;
const CANARY: u8 = 0xee;
/// The size of the sender's source region, and of the receiver's region
/// in [`Workload::SMALL`].
pub const WINDOW_REGION: usize = 64 << 10;
/// Receive buffers.
const RECV_SLOTS: usize = 16;

/// A registered region in a buffer of its own, with canaries around it.
#[derive(Debug, Clone)]
pub(super) struct Region {
    pub(super) stag: STag,
    pub(super) buffer: MemoryBuffer,
    pub(super) base_to: u64,
    pub(super) len: usize,
}

impl Region {
    fn new(
        table: &MemoryTable,
        pd: crate::memory::ProtectionDomain,
        len: usize,
        access: Access,
        fill: u8,
    ) -> Self {
        let mut v = vec![CANARY; GUARD + len + GUARD];
        for (i, b) in v[GUARD..GUARD + len].iter_mut().enumerate() {
            *b = fill.wrapping_add((i as u8).wrapping_mul(31));
        }
        let buffer = MemoryBuffer::from(v);
        let base_to = 0x1000_0000 * u64::from(fill);
        let stag = table
            .register(RegionSpec {
                pd,
                buffer: buffer.clone(),
                offset: GUARD,
                len,
                base_to,
                access,
                stream: None,
                key: None,
            })
            .expect("registration");
        Self {
            stag,
            buffer,
            base_to,
            len,
        }
    }

    pub(super) fn sge(&self, at: usize, len: usize) -> Sge {
        Sge {
            stag: self.stag,
            to: self.base_to + at as u64,
            len: len as u32,
        }
    }

    pub(super) fn bytes(&self) -> Vec<u8> {
        self.buffer.read()[GUARD..GUARD + self.len].to_vec()
    }

    fn canaries_intact(&self) -> bool {
        let b = self.buffer.read();
        b[..GUARD]
            .iter()
            .chain(&b[GUARD + self.len..])
            .all(|&x| x == CANARY)
    }
}

/// The receiving end: its engine and regions, the same for the
/// out-of-order receiver and its in-order twin.
#[derive(Debug)]
pub(super) struct ReceiverSide {
    pub(super) qp: QueuePair,
    /// RDMA Writes and Read Responses land here.
    pub(super) window: Region,
    /// Receive buffers.
    pub(super) recv: Region,
    /// Remotely readable only: a Write to it must be refused.
    pub(super) read_only: Region,
    pub(super) slot_len: usize,
    pub(super) posted: usize,
    pub(super) completions: Vec<Completion>,
    pub(super) events: Vec<Event>,
    pub(super) sent: Vec<Vec<u8>>,
}

impl ReceiverSide {
    /// The receiving end for `workload` (both twins get the same STags).
    pub(super) fn new(workload: &Workload, recv_slots: usize) -> Self {
        let table = Arc::new(MemoryTable::with_seed(0x5eed));
        let pd = table.alloc_pd();
        let slot_len = workload.max_len.max(1);
        let window = Region::new(
            &table,
            pd,
            workload.region.max(1),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            1,
        );
        let recv = Region::new(&table, pd, slot_len * recv_slots, Access::LOCAL_WRITE, 2);
        let read_only = Region::new(&table, pd, 4096, Access::REMOTE_READ, 3);
        let mut cfg = QueuePairConfig::new(pd, StreamId(2));
        cfg.send_queue_depth = workload.reads + 8;
        cfg.recv_queue_depth = recv_slots.max(1);
        cfg.ord = 4;
        Self {
            qp: QueuePair::new(cfg, table),
            window,
            recv,
            read_only,
            slot_len,
            posted: 0,
            completions: Vec::new(),
            events: Vec::new(),
            sent: Vec::new(),
        }
    }

    /// Posts receive number `n` (slots are used in turn).
    pub(super) fn post_recv(&mut self, slots: usize) {
        let slot = self.posted % slots;
        let sge = self.recv.sge(slot * self.slot_len, self.slot_len);
        if self.qp.post_recv(self.posted as u64, sge).is_ok() {
            self.posted += 1;
        }
    }

    /// Collects completions and events; returns the receives completed.
    fn drain(&mut self) -> usize {
        let mut recvs = 0;
        while let Some(c) = self.qp.poll_completion() {
            recvs += usize::from(c.opcode == CompletionOpcode::Recv);
            self.completions.push(c);
        }
        while let Some(e) = self.qp.poll_event() {
            self.events.push(e);
        }
        recvs
    }

    /// Everything the engine sends now, whole.
    fn transmit(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(t) = self.qp.poll_transmit() {
            if let Ok(v) = t.to_vec() {
                out.push(v);
            }
        }
        self.sent.extend(out.iter().cloned());
        out
    }

    fn regions(&self) -> [&Region; 3] {
        [&self.window, &self.recv, &self.read_only]
    }
}

/// An operation of the sender.
#[derive(Debug, Clone, Copy)]
enum Op {
    Send {
        len: usize,
        from: usize,
    },
    Write {
        len: usize,
        from: usize,
        at: usize,
    },
    /// A Write the receiver must refuse: to a region it may not write
    /// (0), out of bounds (1), to an unknown STag (2); or (3) a Send too
    /// long for its receive.
    Bad(u8),
}

/// The reference: the in-order receiver, fed the stream in order, with an
/// incomplete FPDU staged as a runtime stages it.
#[derive(Debug)]
struct InOrder {
    deframer: AnyDeframer,
    staging: Vec<u8>,
    error: Option<FeedError<FramingError, ProtocolError>>,
}

impl InOrder {
    fn feed(&mut self, bytes: &[u8], qp: &mut QueuePair) {
        if self.error.is_some() {
            return;
        }
        self.staging.extend_from_slice(bytes);
        match self.deframer.receive(&self.staging, qp) {
            Ok(used) => drop(self.staging.drain(..used)),
            Err(e) => {
                if let FeedError::Framing(f) = &e {
                    qp.handle_llp_error(f.llp_code());
                }
                self.error = Some(e);
            }
        }
    }
}

/// Hands a whole ULPDU to an engine (the reverse direction, not under
/// test, is a perfect in-order channel).
fn deliver_whole(qp: &mut QueuePair, ulpdu: &[u8]) {
    let _ = qp
        .ulpdu_begin(ulpdu.len())
        .and_then(|()| qp.ulpdu_data(ulpdu))
        .and_then(|()| qp.ulpdu_end());
}

/// Runs `s`; records the arrivals and the stream if `record`.
pub fn run(s: &Scenario, record: bool) -> Report {
    let mut rng = Rng::new(s.seed);
    let w = s.workload;
    let mss = s.link.mss.max(64);
    let mut report = Report {
        isn: rng.next_u64() as u32,
        ..Report::default()
    };
    // The sending end: a queue pair whose segments fit the MSS.
    let a_table = Arc::new(MemoryTable::with_seed(s.seed ^ 0xa));
    let a_pd = a_table.alloc_pd();
    let src = Region::new(
        &a_table,
        a_pd,
        WINDOW_REGION,
        Access::LOCAL_WRITE | Access::REMOTE_READ,
        9,
    );
    let mut a_cfg = QueuePairConfig::new(a_pd, StreamId(1));
    a_cfg.send_queue_depth = w.ops + 1;
    a_cfg.ird = 4;
    let mut a = QueuePair::new(a_cfg, a_table);
    let mut framer = s.framing.framer();
    a.set_mulpdu(framer.mulpdu(mss));

    let recv_slots = RECV_SLOTS.max(w.recv_ahead);
    let mut b = ReceiverSide::new(&w, recv_slots);
    let mut twin = ReceiverSide::new(&w, recv_slots);
    for _ in 0..w.recv_ahead {
        b.post_recv(recv_slots);
        twin.post_recv(recv_slots);
    }

    // The operations.
    let bad_at = w.bad_op.then(|| rng.below(w.ops.max(1)));
    let mut sends = 0;
    for i in 0..w.ops {
        let len = rng.below(w.max_len + 1);
        let from = rng.below(WINDOW_REGION - len + 1);
        let op = if bad_at == Some(i) {
            Op::Bad(rng.below(4) as u8)
        } else if rng.chance(0.5) {
            Op::Send {
                len: len.min(b.slot_len),
                from,
            }
        } else {
            Op::Write {
                len,
                from,
                at: rng.below(b.window.len.saturating_sub(len) + 1),
            }
        };
        let posted = match op {
            Op::Send { len, from } => {
                sends += 1;
                report.payload_octets += len as u64;
                a.post_send(i as u64, src.sge(from, len), SendFlags::default())
            }
            Op::Write { len, from, at } => {
                report.payload_octets += len as u64;
                a.rdma_write(
                    i as u64,
                    src.sge(from, len),
                    b.window.stag,
                    b.window.base_to + at as u64,
                )
            }
            Op::Bad(kind) => {
                let len = w.max_len.max(16);
                let (stag, to) = match kind {
                    0 => (b.read_only.stag, b.read_only.base_to),
                    1 => (
                        b.window.stag,
                        b.window.base_to + (b.window.len - len.min(b.window.len) / 2) as u64,
                    ),
                    2 => (STag(0xdead_be00), 0),
                    _ => {
                        sends += 1;
                        let _ =
                            a.post_send(i as u64, src.sge(0, b.slot_len + 1), SendFlags::default());
                        continue;
                    }
                };
                a.rdma_write(i as u64, src.sge(0, len.min(WINDOW_REGION)), stag, to)
            }
        };
        posted.expect("the sender accepts its operations");
    }
    for i in 0..w.reads {
        let len = rng.below(w.max_len + 1);
        let at = rng.below(b.window.len.saturating_sub(len) + 1);
        let from = rng.below(WINDOW_REGION - len + 1);
        for side in [&mut b, &mut twin] {
            side.qp
                .rdma_read(
                    1000 + i as u64,
                    side.window.sge(at, len),
                    src.stag,
                    src.base_to + from as u64,
                )
                .expect("the receiver accepts its reads");
        }
        report.payload_octets += len as u64;
    }

    let mut sender = TcpSender::new(
        report.isn,
        mss,
        s.window,
        2 * s.link.reorder as u64 + 4,
        s.link.resend_all,
        s.seed ^ 0x5e,
    );
    let mut link = Link::new(s.link, s.seed ^ 0x11);
    let config = OooConfig {
        window: s.window,
        budget: s.window + (s.window >> 2) + (64 << 10),
    };
    let mut ooo = OooReceiver::new(s.framing.ooo(), report.isn, config);
    let mut reference = InOrder {
        deframer: s.framing.ooo().deframer_at(0),
        staging: Vec::new(),
        error: None,
    };
    let mut ooo_error: Option<FeedError<FramingError, ProtocolError>> = None;
    let mut fed = 0u64;
    let mut batch = WireBatch::new();
    let held_limit = s.window + MAX_FPDU_WIRE_LEN;
    // Liveness: the stream must move on within this many slots, however
    // many timeouts in a row the link costs.
    let stall_limit = 2000 + 64 * (2 * s.link.reorder as u64 + 4);
    let mut progress = (0u64, 0usize, 0u64);
    let mut last_progress = 0u64;
    let mismatch = |m: &mut Option<String>, what: String| {
        if m.is_none() {
            *m = Some(what);
        }
    };
    let mut now = 0u64;
    loop {
        // The sender frames what its engine has to send, a little ahead.
        let mut a_idle = true;
        while sender.unsent() < 4 * mss {
            let Some(t) = a.poll_transmit() else { break };
            a_idle = false;
            let Ok(locked) = t.lock() else { break };
            let [header, payload] = locked.slices();
            batch.clear();
            if framer.frame(header, &[payload], &mut batch).is_err() {
                mismatch(
                    &mut report.mismatch,
                    "the sender could not frame a ULPDU".into(),
                );
                break;
            }
            let mut pdu = Vec::with_capacity(batch.wire_len());
            batch.write_to(&[payload], &mut pdu);
            sender.push_pdu(&pdu);
        }
        while a.poll_completion().is_some() {}
        while a.poll_event().is_some() {}

        for seg in sender.timeout(now) {
            link.send(seg, now);
        }
        if let Some(seg) = sender.next_segment(now) {
            link.send(seg, now);
        }
        while let Some(seg) = link.arrive(now) {
            if ooo_error.is_none() {
                if let Err(e) = ooo.segment(seg.seq, &seg.octets, &mut b.qp) {
                    ooo_error = Some(e);
                }
            }
            // The twin gets the same stream, in order, as far as the
            // out-of-order receiver has it in order.
            let upto = ooo.in_order_offset();
            if upto > fed {
                reference.feed(&sender.stream()[fed as usize..upto as usize], &mut twin.qp);
                fed = upto;
            }
            if ooo.held_octets() > held_limit {
                mismatch(
                    &mut report.mismatch,
                    format!("held {} octets, above {held_limit}", ooo.held_octets()),
                );
            }
            if record {
                report.trace.push(seg);
            }
        }
        // Both ends' applications see the same and do the same.
        let recvs = b.drain();
        twin.drain();
        if b.completions != twin.completions {
            mismatch(
                &mut report.mismatch,
                format!(
                    "slot {now}: completions differ:\n  out of order {:?}\n  in order     {:?}",
                    b.completions, twin.completions
                ),
            );
        }
        for _ in 0..recvs {
            if b.posted < sends {
                b.post_recv(recv_slots);
                twin.post_recv(recv_slots);
            }
        }
        for ulpdu in b.transmit() {
            deliver_whole(&mut a, &ulpdu);
        }
        twin.transmit();
        sender.on_ack(ooo.in_order_offset(), ooo.held_ranges(), now);

        if ooo_error.is_some() || report.mismatch.is_some() {
            break;
        }
        let reads_done = b
            .completions
            .iter()
            .filter(|c| c.opcode == CompletionOpcode::RdmaRead)
            .count()
            >= w.reads;
        if a_idle && sender.unsent() == 0 && sender.all_acked() && link.is_empty() && reads_done {
            break;
        }
        now += 1;
        let state = (
            ooo.in_order_offset(),
            b.completions.len(),
            sender.stream().len() as u64,
        );
        if state != progress {
            progress = state;
            last_progress = now;
        } else if now - last_progress > stall_limit {
            mismatch(
                &mut report.mismatch,
                format!("stalled for {stall_limit} slots at slot {now}"),
            );
            break;
        }
    }
    b.drain();
    twin.drain();

    // The comparison.
    let m = &mut report.mismatch;
    if b.completions != twin.completions {
        mismatch(
            m,
            format!(
                "completions differ:\n  out of order {:?}\n  in order     {:?}",
                b.completions, twin.completions
            ),
        );
    }
    if b.events != twin.events {
        mismatch(
            m,
            format!(
                "events differ:\n  out of order {:?}\n  in order     {:?}",
                b.events, twin.events
            ),
        );
    }
    if b.sent != twin.sent {
        mismatch(m, "what the two receivers sent differs".into());
    }
    if ooo_error != reference.error {
        mismatch(
            m,
            format!(
                "errors differ: out of order {ooo_error:?}, in order {:?}",
                reference.error
            ),
        );
    }
    let stats = ooo.stats();
    for (x, y) in b.regions().into_iter().zip(twin.regions()) {
        if !x.canaries_intact() {
            mismatch(m, "a write outside a region".into());
        }
        let exact = ooo_error.is_none() && stats.withdrawn == 0;
        if (exact || std::ptr::eq(x, &b.read_only)) && x.bytes() != y.bytes() {
            mismatch(
                m,
                format!("memory differs in the region of STag {:?}", x.stag),
            );
        }
    }
    if ooo_error.is_none() && m.is_none() && ooo.in_order_offset() != sender.stream().len() as u64 {
        mismatch(m, "the stream was not received whole".into());
    }
    if stats.peak_held_octets > held_limit {
        mismatch(
            m,
            format!(
                "held {} octets at most, above {held_limit}",
                stats.peak_held_octets
            ),
        );
    }
    report.error = ooo_error.map(|e| e.to_string());
    report.stats = stats;
    report.stream_octets = sender.stream().len() as u64;
    report.slots = now;
    report.lost = link.lost;
    report.duplicated = link.duplicated;
    report.retransmitted = sender.retransmitted;
    if record {
        report.stream = sender.stream().to_vec();
    }
    report
}
