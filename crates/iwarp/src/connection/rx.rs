//! The receive path's I/O: reads from the socket into the staging buffer
//! or straight into registered memory, whichever pays.
//!
//! Two kinds of reads (see DESIGN.md, "Receive path"):
//!
//! - **staged**: into the connection's staging buffer, whose octets then
//!   go to [`Connection::handle_input`], which copies payload into place.
//!   Used for headers, small FPDUs and whatever follows a direct read.
//! - **direct**: when the current FPDU still has at least [`DIRECT_MIN`]
//!   payload octets to come and DDP has validated its header, one
//!   vectored read ([`Connection::read_direct`]) puts them straight into
//!   the target region, markers into a scratch array, and a short tail
//!   (the CRC and the next headers) into the staging buffer.
//!
//! With verify-before-place (`Placement::Verified`, RFC 5044 §6) every
//! read is staged: the connection takes whole FPDUs only, so an FPDU
//! still incomplete stays staged, and the next read appends after it,
//! taking as much as the socket holds and the buffer has room for.

use std::io;
use std::time::Instant;

use tokio::net::TcpStream;

use iwarp_proto::connection::{Connection, LossReason};
use iwarp_proto::framing::{AnyDeframer, Deframer};
use iwarp_proto::memory::copy::move_to_front;
use iwarp_proto::mpa::MAX_FPDU_WIRE_LEN;

use super::sock_io::{self, Received};

/// Octets of staging buffer a busy connection grows to.
pub(crate) const STAGING_LEN: usize = 64 * 1024;
/// Octets of staging buffer a connection starts with (enough for a direct
/// read's tail): an idle connection, or one of small messages, keeps only
/// this much; reads that fill the buffer, or an FPDU that needs more, grow
/// it up to [`STAGING_LEN`] (or the largest FPDU, verifying) and it stays
/// at that size, so a busy connection allocates no more.
const INITIAL_STAGING_LEN: usize = TAIL_LEN;
/// Payload octets left in an FPDU from which a direct read pays off.
pub(crate) const DIRECT_MIN: usize = 2048;
/// Staging octets read after a direct read, and at the start of an FPDU
/// while large ones arrive: enough for the CRC, markers and the next MPA
/// and DDP headers, so that the next payload can be read directly, plus
/// some of that payload. A system call costs more than copying a few KiB:
/// on a 2-core VM's loopback, 64 octets here gave 2.4 to 3.3 GiB/s of
/// 64 KiB RDMA Writes, 4 KiB gave 3.6 to 3.8 (16 KiB: 3.7 to 3.9, copying
/// more), while staged reads alone gave 3.7 to 3.8 with every octet copied.
const TAIL_LEN: usize = 4096;

/// What one read, or one turn of reads, achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadStep {
    /// Octets came in: there may be more at once.
    More,
    /// Octets came in and the socket had no more: take them in, then wait
    /// until it is readable.
    Drained,
    /// The socket is empty: wait until it is readable.
    Empty,
    /// The connection reads no more (the stream ended, failed or stopped).
    Done,
}

impl ReadStep {
    /// A read that brought octets: [`ReadStep::Drained`] if it took all
    /// the socket had, [`ReadStep::More`] otherwise.
    fn after_octets(drained: bool) -> Self {
        if drained {
            Self::Drained
        } else {
            Self::More
        }
    }
}

/// The staging buffer and the receive counters of a connection.
#[derive(Debug)]
pub(crate) struct RxPath {
    staging: Vec<u8>,
    /// The size the staging buffer may grow to.
    max_len: usize,
    /// Staged octets not yet taken: `staging[start..end]`.
    start: usize,
    end: usize,
    /// The connection verifies each FPDU before passing it on.
    verified: bool,
    /// Octets received over the connection's life.
    pub(crate) octets: u64,
    /// Payload octets placed by direct reads.
    pub(crate) direct_octets: u64,
    /// Something came in since the connection last saw the staged octets.
    /// When nothing did, feeding them again would change nothing: the
    /// deframer keeps no octets waiting on anything but more octets.
    unfed: bool,
}

impl RxPath {
    /// A receive path whose first octets (already read while the startup
    /// frames were) are `initial`.
    pub(crate) fn new(verified: bool, initial: &[u8]) -> Self {
        // A verifying receiver needs room for the largest FPDU and what
        // follows it.
        let max_len = if verified {
            STAGING_LEN.max(MAX_FPDU_WIRE_LEN + TAIL_LEN)
        } else {
            STAGING_LEN
        };
        let mut staging = vec![0u8; INITIAL_STAGING_LEN.max(initial.len())];
        staging[..initial.len()].copy_from_slice(initial);
        Self {
            staging,
            max_len: max_len.max(initial.len()),
            start: 0,
            end: initial.len(),
            verified,
            octets: 0,
            direct_octets: 0,
            unfed: true,
        }
    }

    /// Passes the staged octets to the connection. What a verifying
    /// receiver leaves (an incomplete FPDU) stays staged.
    pub(crate) fn feed(&mut self, conn: &mut Connection, now: Instant) {
        if !self.unfed {
            return;
        }
        self.unfed = false;
        // Called even with nothing staged: an IFT frame without a payload
        // CRC is complete with its last payload octet, which a direct read
        // may have placed; only the framing layer's next call reports it.
        let used = conn.handle_input(now, &self.staging[self.start..self.end]);
        if self.start + used < self.end {
            self.start += used;
        } else {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Whether large FPDUs are arriving: the current or the previous one
    /// carries at least [`DIRECT_MIN`] octets. Two FPDUs of memory cover
    /// the short tail segment a large message ends with.
    fn large_recently(deframer: &AnyDeframer) -> bool {
        deframer.payload_len().max(deframer.previous_payload_len()) >= DIRECT_MIN
    }

    /// One non-blocking read from the socket, direct or staged.
    pub(crate) fn read(
        &mut self,
        conn: &mut Connection,
        stream: &TcpStream,
        now: Instant,
    ) -> ReadStep {
        if self.verified {
            return self.read_verified(conn, stream);
        }
        debug_assert_eq!(self.start, self.end);
        let direct = conn.direct_payload();
        if direct >= DIRECT_MIN {
            return self.read_direct(conn, stream, now, direct);
        }
        // While large FPDUs arrive, read only up to just past the next
        // FPDU's headers, so that its payload can be read directly; a
        // stream of small FPDUs is read in large batches instead.
        let deframer = conn.deframer();
        let want = if Self::large_recently(deframer) {
            let remaining = deframer.layout(usize::MAX).payload_len();
            remaining + 8 + TAIL_LEN
        } else {
            self.staging.len()
        };
        self.start = 0;
        self.end = 0;
        self.staged_read(conn, stream, want)
    }

    /// Reads at most `want` octets into the staging buffer after what is
    /// staged there.
    /// A read that fills the whole buffer doubles it for the next one
    /// (the socket had more); a read that asks for more room than there is
    /// gets it, up to the largest size.
    fn staged_read(&mut self, conn: &mut Connection, stream: &TcpStream, want: usize) -> ReadStep {
        let needed = (self.end + want).min(self.max_len);
        if needed > self.staging.len() {
            self.staging
                .resize(needed.next_power_of_two().min(self.max_len), 0);
        }
        let room = &mut self.staging[self.end..];
        let want = want.min(room.len());
        match sock_io::try_recv(stream, &mut room[..want]) {
            Ok(Received { len: 0, .. }) => {
                conn.handle_eof();
                ReadStep::Done
            }
            Ok(Received { len: n, drained }) => {
                self.octets += n as u64;
                self.end += n;
                self.unfed = true;
                if self.end == self.staging.len() && self.staging.len() < self.max_len {
                    let len = (2 * self.staging.len()).min(self.max_len);
                    self.staging.resize(len, 0);
                }
                ReadStep::after_octets(drained)
            }
            Err(e) => read_error(conn, &e),
        }
    }

    /// A staged read for a receiver that verifies each FPDU before passing
    /// it on. It appends after the incomplete FPDU left staged and asks for
    /// all the room there is, so that one read takes as many FPDUs as the
    /// socket holds and the buffer (the largest FPDU and a tail) takes;
    /// the incomplete FPDU moves to the front only when the room left
    /// cannot take the rest of it and the next FPDU's headers. Stopping at
    /// the next FPDU's headers instead made five reads per 64 KiB Write
    /// with 1,000 busy connections (TCP: one); a 256 KiB buffer made one
    /// connection slower (1.27 to 1.56 GiB/s against 1.50 to 1.68).
    fn read_verified(&mut self, conn: &mut Connection, stream: &TcpStream) -> ReadStep {
        let staged = &self.staging[self.start..self.end];
        let next = match conn.deframer() {
            AnyDeframer::Mpa(r) => r.next_fpdu_len(staged),
            _ => None,
        };
        let need = next.map_or(TAIL_LEN, |len| len.saturating_sub(staged.len()) + TAIL_LEN);
        if self.start > 0 && self.max_len - self.end < need {
            move_to_front(&mut self.staging, self.start..self.end);
            self.end -= self.start;
            self.start = 0;
        }
        let want = need.max(self.staging.len() - self.end);
        self.staged_read(conn, stream, want)
    }

    /// Reads payload of the current FPDU straight into its region, and a
    /// short tail into the staging buffer.
    fn read_direct(
        &mut self,
        conn: &mut Connection,
        stream: &TcpStream,
        now: Instant,
        max: usize,
    ) -> ReadStep {
        let tail = &mut self.staging[..TAIL_LEN];
        let mut drained = false;
        let read = |iov: &mut [io::IoSliceMut<'_>]| {
            sock_io::try_recv_vectored(stream, iov).map(|r| {
                drained = r.drained;
                r.len
            })
        };
        match conn.read_direct(now, max, tail, read) {
            // Nothing read: the queue pair refused the placement (its
            // target was invalidated under it) and stopped receiving.
            Ok(None) => {
                self.unfed = true;
                ReadStep::More
            }
            Ok(Some(r)) if r.octets == 0 => {
                conn.handle_eof();
                ReadStep::Done
            }
            Ok(Some(r)) => {
                self.start = 0;
                self.end = r.tail;
                self.octets += r.octets as u64;
                self.direct_octets += r.placed as u64;
                self.unfed = true;
                ReadStep::after_octets(drained)
            }
            Err(e) => read_error(conn, &e),
        }
    }
}

/// A failed read: the socket is empty, or the connection is lost.
fn read_error(conn: &mut Connection, e: &io::Error) -> ReadStep {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => ReadStep::Empty,
        _ => {
            conn.handle_read_error(LossReason::from_io(e));
            ReadStep::Done
        }
    }
}
