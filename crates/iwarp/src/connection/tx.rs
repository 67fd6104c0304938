//! The transmit path: ULPDUs from the engine, framed and written with one
//! vectored write per batch.
//!
//! Segments are taken from the engine in batches (up to
//! [`MAX_BATCH_OCTETS`] or [`MAX_BATCH_ULPDUS`]), framed by the MPA
//! framing layer into a reusable [`WireBatch`] whose pieces borrow the
//! payload straight from the registered regions, and written with
//! `try_write_vectored`. A batch the socket cannot take whole stays
//! pending; the rest is written when the socket is writable again, and
//! completions are released only once the whole batch is written, so a
//! completed buffer is never still being read. Nothing here allocates once
//! the batch and the pending list have grown to their working size.

use std::io::{self, IoSlice};

use arrayvec::ArrayVec;
use tokio::net::TcpStream;

use iwarp_proto::framing::{AnyFramer, Framer, WireBatch};
use iwarp_proto::rdmap::{LockedTransmit, QueuePair, Transmit};

/// Octets gathered into one batch at most (before framing).
pub(crate) const MAX_BATCH_OCTETS: usize = 256 * 1024;
/// ULPDUs gathered into one batch at most.
pub(crate) const MAX_BATCH_ULPDUS: usize = 32;
/// Octets written before the EMSS is first read again, and the longest
/// interval between two reads.
const EMSS_FIRST_CHECK: u64 = 64 * 1024;
const EMSS_CHECK_MAX: u64 = 16 << 20;
/// Slices handed to one vectored write at most (Linux's `IOV_MAX` is 1024).
const MAX_IOV: usize = 1024;

/// What a flush achieved.
#[derive(Debug)]
pub(crate) enum Flush {
    /// Everything the engine had is written.
    Idle,
    /// The socket is full: wait until it is writable.
    Blocked,
    /// The socket failed.
    Failed(io::Error),
}

/// The transmit half of a connection's framing state.
#[derive(Debug)]
pub(crate) struct TxPath {
    framer: AnyFramer,
    /// A responder sends nothing until it has received a PDU
    /// (RFC 5044 §7.1.2 rule 4).
    held: bool,
    batch: WireBatch,
    pending: Vec<Transmit>,
    /// Octets of `batch` already written.
    written: usize,
    /// Octets written over the connection's life.
    pub(crate) octets: u64,
    /// When `octets` reaches this, the EMSS is read again.
    emss_check_at: u64,
    /// The EMSS the current MULPDU was computed from.
    pub(crate) emss: usize,
}

impl TxPath {
    pub(crate) fn new(framer: AnyFramer, held: bool, emss: usize) -> Self {
        Self {
            framer,
            held,
            batch: WireBatch::new(),
            pending: Vec::with_capacity(MAX_BATCH_ULPDUS),
            written: 0,
            octets: 0,
            emss_check_at: EMSS_FIRST_CHECK,
            emss,
        }
    }

    /// Reads the EMSS again once enough has been written, and follows it
    /// with the MULPDU (draft-ietf-rddp-mpa-01 §5.3.2: "If the TCP
    /// implementation needs to adjust EMSS…, the MULPDU value is changed
    /// accordingly"). Linux starts a connection with the MSS bounded by
    /// half the peer's window and raises it as the window opens (loopback:
    /// 32741, then 65483 after about 1 MiB), so checks come at doubling
    /// intervals, then every 16 MiB.
    fn follow_emss(&mut self, qp: &mut QueuePair, stream: &TcpStream) {
        if self.octets < self.emss_check_at {
            return;
        }
        self.emss_check_at = (self.octets * 2).min(self.octets + EMSS_CHECK_MAX);
        let emss = crate::socket::emss(stream);
        if emss != self.emss {
            self.emss = emss;
            qp.set_mulpdu(self.framer.mulpdu(emss));
        }
    }

    /// Whether a batch is partly written.
    pub(crate) fn is_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// RFC 5044 §7.1.2 rule 4: lifts the responder's hold once an FPDU
    /// has been received.
    pub(crate) fn release(&mut self) {
        self.held = false;
    }

    /// Whether the responder still holds its first PDU back.
    pub(crate) fn is_held(&self) -> bool {
        self.held
    }

    /// Writes what the engine has to send until it has nothing more or the
    /// socket is full.
    pub(crate) fn flush(&mut self, qp: &mut QueuePair, stream: &TcpStream) -> Flush {
        loop {
            if self.pending.is_empty() && !self.gather(qp, stream) {
                return Flush::Idle;
            }
            match self.write_pending(qp, stream) {
                Ok(true) => continue,
                Ok(false) => return Flush::Blocked,
                Err(e) => return Flush::Failed(e),
            }
        }
    }

    /// Takes a batch of segments from the engine and frames it. Returns
    /// false when there is nothing to send.
    fn gather(&mut self, qp: &mut QueuePair, stream: &TcpStream) -> bool {
        if self.held {
            return false;
        }
        self.follow_emss(qp, stream);
        let mut octets = 0;
        while self.pending.len() < MAX_BATCH_ULPDUS && octets < MAX_BATCH_OCTETS {
            let Some(t) = qp.poll_transmit() else { break };
            octets += t.len();
            self.pending.push(t);
        }
        if self.pending.is_empty() {
            return false;
        }
        self.batch.clear();
        self.written = 0;
        let mut framed = 0;
        for t in &self.pending {
            let Ok(locked) = t.lock() else { break };
            let [header, payload] = locked.slices();
            // A segment never exceeds the MULPDU, itself at most 64768
            // octets, so framing cannot refuse it.
            if self
                .framer
                .frame(header, &[payload], &mut self.batch)
                .is_err()
            {
                break;
            }
            framed += 1;
        }
        if framed < self.pending.len() {
            // A source region was invalidated after the engine handed the
            // segment out: what came before it still goes, the engine
            // turns the rest into a Terminate.
            self.pending.truncate(framed);
            qp.abort_transmit();
            if self.pending.is_empty() {
                return self.gather(qp, stream);
            }
        }
        true
    }

    /// Writes as much of the pending batch as the socket takes. Returns
    /// true when the batch is completely written.
    fn write_pending(&mut self, qp: &mut QueuePair, stream: &TcpStream) -> io::Result<bool> {
        loop {
            let mut guards: ArrayVec<LockedTransmit<'_>, MAX_BATCH_ULPDUS> = ArrayVec::new();
            for t in &self.pending {
                match t.lock() {
                    Ok(g) => guards.push(g),
                    Err(_) => {
                        // Invalidated in the middle of a partly written
                        // batch: the stream cannot be completed.
                        drop(guards);
                        qp.abort_transmit();
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "source region invalidated during transmission",
                        ));
                    }
                }
            }
            // The batch holds the headers; it refers to the payloads.
            let mut slices: ArrayVec<&[u8], MAX_BATCH_ULPDUS> = ArrayVec::new();
            for g in &guards {
                slices.push(g.slices()[1]);
            }
            let mut iov: ArrayVec<IoSlice<'_>, MAX_IOV> = ArrayVec::new();
            let mut skip = self.written;
            for piece in self.batch.pieces(&slices) {
                if skip >= piece.len() {
                    skip -= piece.len();
                    continue;
                }
                if iov.is_full() {
                    break;
                }
                iov.push(IoSlice::new(&piece[skip..]));
                skip = 0;
            }
            match stream.try_write_vectored(&iov) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    self.octets += n as u64;
                    if self.written == self.batch.wire_len() {
                        drop(iov);
                        drop(slices);
                        drop(guards);
                        self.pending.clear();
                        self.batch.clear();
                        self.written = 0;
                        return Ok(true);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}
