//! Connection configuration.

use std::time::Duration;

use iwarp_proto::ift::IftConfig;
use iwarp_proto::mpa::startup::{CrcPolicy, Revision, RtrTypes, StartupConfig};
use iwarp_proto::mpa::Placement;

use iwarp_proto::rdmap::Sge;

use crate::cq::CompletionQueue;
use crate::memory::ProtectionDomain;

/// How the two ends agree on framing before data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Framing {
    /// MPA with startup frames (Request/Reply): revisions 0, 1 and 2 as
    /// [`Config::startup`] allows. The default.
    #[default]
    Mpa,
    /// The legacy immediate-start profile of draft-culley-iwarp-mpa-02: no
    /// startup frames, markers and CRC on in both directions from the
    /// first octet. Both ends must be configured for it; there is no
    /// private data.
    ImmediateStart,
    /// IFT, the alternative framing of draft-williams-iwarp-ift-01: the two
    /// ends exchange 64-octet Adaption Indications ([`Config::ift`]), then
    /// frames with a separate header CRC, checked before any payload is
    /// placed. No deployed peer speaks it; both ends must be configured
    /// for it; there is no private data.
    Ift,
}

/// How connections are set up and run. The default connects, without
/// further configuration, to Linux `siw` and to hardware RNICs: MPA
/// revision 2 with enhanced data (revisions 0 to 2 accepted), CRC asked
/// for, no markers asked for, IRD/ORD 16/16, `TCP_NODELAY`; received
/// FPDUs are verified before their payload is placed; a connecting end
/// sends its first FPDU only [`DEFAULT_HOLD_AFTER_REPLY`] after the MPA
/// Reply, which a Linux `siw` responder needs
/// ([`StartupConfig::hold_after_reply`]; zero sends at once).
///
/// [`DEFAULT_HOLD_AFTER_REPLY`]: iwarp_proto::mpa::startup::DEFAULT_HOLD_AFTER_REPLY
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Startup frames or the immediate-start profile.
    pub framing: Framing,
    /// The MPA startup: revisions, CRC policy, markers wanted on receive,
    /// IRD/ORD, peer-to-peer RTR mode, private data limit, startup
    /// timeouts, and how long a connecting end holds its first FPDU after
    /// the Reply.
    pub startup: StartupConfig,
    /// The IFT negotiation, for [`Framing::Ift`]: CRCs sent and checked,
    /// markers, timeout. Its VTag is replaced by a random one for each
    /// connection.
    pub ift: IftConfig,
    /// How long a TCP connection attempt may take.
    pub connect_timeout: Duration,
    /// If set, a connection on which nothing arrives for this long is
    /// considered lost (iWARP itself has no keepalive). Only received
    /// octets count: a healthy peer with nothing to send looks the same as
    /// a dead one, so set it only where the application keeps traffic
    /// flowing. Off by default.
    pub idle_timeout: Option<Duration>,
    /// How long [`QueuePair::disconnect`](crate::QueuePair::disconnect)
    /// waits for the peer to close its side before closing abruptly.
    pub disconnect_timeout: Duration,
    /// Disable Nagle's algorithm, so that segments start with FPDUs
    /// (RFC 5044 §5.1); on by default, as in Linux `siw`.
    pub nodelay: bool,
    /// Let the accepting side send as soon as it has accepted, before the
    /// initiator's first FPDU has arrived. RFC 5044 §7.1.2 rule 4 forbids
    /// that (outside peer-to-peer mode), but Linux `siw` does it, and
    /// applications written against it rely on it: the server of
    /// perftest's `ib_write_lat` writes first and its client waits for
    /// that write. Off by default.
    pub responder_sends_first: bool,
    /// When received payload is placed, with MPA framing.
    /// [`Placement::Verified`], the default, stages each FPDU whole and
    /// places its payload only once its CRC and markers have been checked,
    /// as RFC 5044 §6 asks. [`Placement::Direct`] places payload as it
    /// arrives, straight from the socket into its region, and checks the
    /// FPDU at its end, before anything is delivered: a damaged FPDU may
    /// then have been placed (only where the peer may write), a deviation
    /// from §6. Measured on loopback, verification costs 2 to 3% more CPU
    /// per octet without markers and saves 4 to 8% with them (see the
    /// README). IFT checks its header CRC before any payload is placed,
    /// either way.
    pub placement: Placement,
    /// Posts closer together than this share system calls. A post
    /// normally writes what it sends to the socket itself, before it
    /// returns. One made less than this long after a post that wrote
    /// leaves its octets to the next post that writes, or to the
    /// connection's writer task, which runs as soon as the posting task
    /// awaits or another worker thread is free, so that a burst of small
    /// posts goes out in a few writes rather than one each (as a hardware
    /// queue pair rings one doorbell for a chain). 4 KiB RDMA Writes ran
    /// about 4 times faster on loopback with the default of 5 µs; posts
    /// further apart than that (a ping-pong) write at once, as before.
    /// Zero makes every post write itself.
    ///
    /// A request's source octets are read when they are written, which
    /// may be after the post returns: as with verbs, do not change them
    /// until the request completes. (`iwarp perf`'s perftest mode once
    /// rewrote a credit word before its Write had gone out, and sent one
    /// count twice.) Receives alone have nothing to write and never wait.
    pub post_burst: Duration,
    /// Send-queue work requests outstanding at most.
    pub send_queue_depth: usize,
    /// Posted receives at most.
    pub recv_queue_depth: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            framing: Framing::Mpa,
            startup: StartupConfig::default(),
            ift: IftConfig::new(0),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: None,
            disconnect_timeout: Duration::from_secs(5),
            nodelay: true,
            responder_sends_first: false,
            placement: Placement::Verified,
            post_burst: Duration::from_micros(5),
            send_queue_depth: 1024,
            recv_queue_depth: 1024,
        }
    }
}

impl Config {
    /// The default configuration, offering at most MPA `revision`.
    pub fn with_revision(revision: Revision) -> Self {
        let mut c = Self::default();
        c.startup.max_revision = revision;
        c
    }

    /// The legacy immediate-start profile.
    pub fn immediate_start() -> Self {
        Self {
            framing: Framing::ImmediateStart,
            ..Self::default()
        }
    }

    /// IFT framing with its default negotiation (both CRCs, no markers).
    pub fn ift() -> Self {
        Self {
            framing: Framing::Ift,
            ..Self::default()
        }
    }

    /// Sets the CRC policy.
    pub fn crc(mut self, policy: CrcPolicy) -> Self {
        self.startup.crc = policy;
        self
    }

    /// Asks the peer for markers in what it sends to this end.
    pub fn markers_on_receive(mut self, wanted: bool) -> Self {
        self.startup.request_markers = wanted;
        self
    }

    /// Sets the IRD and ORD offered (revision 2).
    pub fn ird_ord(mut self, ird: u16, ord: u16) -> Self {
        self.startup.ird = ird;
        self.startup.ord = ord;
        self
    }

    /// Sets when received payload is placed ([`Config::placement`]).
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Requests peer-to-peer mode with these RTR types (revision 2).
    pub fn peer_to_peer(mut self, rtr: RtrTypes) -> Self {
        self.startup.peer_to_peer = true;
        self.startup.rtr_types = rtr;
        self
    }
}

/// The protection domain, completion queues and first receives of a new
/// queue pair.
#[derive(Debug, Clone)]
pub struct QpOptions {
    /// The domain whose regions the queue pair may use; its device's
    /// table resolves every STag the queue pair meets.
    pub pd: ProtectionDomain,
    /// Where Sends, Writes and Reads complete.
    pub send_cq: CompletionQueue,
    /// Where receives complete.
    pub recv_cq: CompletionQueue,
    /// Receives posted before the connection moves any data.
    ///
    /// iWARP has no receiver-not-ready: a Send that finds no posted
    /// receive ends the connection. The peer may Send as soon as the
    /// connection is up, which can be before `connect` or `accept` has
    /// returned the queue pair, so a queue pair that expects a Send at
    /// once must have its receives posted here (as a verbs application
    /// posts them before `rdma_connect` or `rdma_accept`).
    pub initial_recvs: Vec<(u64, Sge)>,
}

impl QpOptions {
    /// A queue pair in `pd` (and `pd`'s device) with one new completion
    /// queue for both sides, which grows as completions wait in it (an
    /// idle queue pair holds none).
    pub fn new(pd: &ProtectionDomain) -> Self {
        let cq = CompletionQueue::default();
        Self {
            pd: pd.clone(),
            send_cq: cq.clone(),
            recv_cq: cq,
            initial_recvs: Vec::new(),
        }
    }

    /// Adds a receive to post before the connection moves any data.
    pub fn post_recv(mut self, wr_id: u64, sge: Sge) -> Self {
        self.initial_recvs.push((wr_id, sge));
        self
    }
}
