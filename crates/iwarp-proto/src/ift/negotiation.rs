//! The two-phase exchange of Adaption Indications, as a sans-IO state
//! machine for each role.
//!
//! draft-williams-iwarp-ift-01 §4.2 (PH): node A, the end that starts the
//! adaption, sends its indication as phase 0; node B, on receiving it,
//! answers with its own as phase 1. Each end then settles the pair of
//! indications ([`settle`]) into the [`IftParams`] of full operation.
//!
//! The machine reads no clock and owns no socket. The runtime:
//!
//! 1. creates it with [`Negotiation::new`] (role, [`IftConfig`], the
//!    current [`Instant`]);
//! 2. writes whatever [`Negotiation::poll_transmit`] gives (node A's phase 0
//!    at once; node B's phase 1 once phase 0 is in);
//! 3. feeds received octets to [`Negotiation::handle_input`], which consumes
//!    at most what completes the peer's 64-octet indication and never an
//!    octet beyond it: the rest of the read belongs to the
//!    [`super::IftReceiver`] (node B may send frames right behind phase 1);
//! 4. reports end of stream with [`Negotiation::handle_eof`] and, when
//!    [`Negotiation::poll_timeout`]'s instant has passed,
//!    [`Negotiation::handle_timeout`];
//! 5. once [`Negotiation::params`] is `Some` (and the phase 1 indication,
//!    for node B, is written), starts framing with
//!    [`super::IftTransmitter::new`] and [`super::IftReceiver::new`].
//!
//! Decisions where the draft is silent:
//!
//! - Node B's indication states its own configuration; it does not adapt it
//!   to node A's. Both ends then apply the same rules to the same pair.
//! - When node B finds phase 0 unacceptable it does not answer: it fails at
//!   once and the runtime closes the connection (§4.2: "MUST be closed in
//!   error"). The indication has no field to carry a reason.
//! - The magic number is checked as soon as four octets are in, so a peer
//!   that does not speak IFT (an MPA Request starts "MPA ID Req") is
//!   rejected at once rather than after the timeout.

use std::time::{Duration, Instant};

use super::indication::{
    check_magic, Indication, IndicationError, Phase, BC_VERSION, INDICATION_LEN, VERSION,
};
use super::params::{IftParams, Mode, RxCrc, RxParams, TxParams};
use crate::framing::LlpErrorCode;
use crate::framing::MarkerInterval;
use crate::framing::StartupMachine;

/// Which end of the negotiation this is (§4.2 PH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Node A: sends phase 0 first, then waits for phase 1.
    Initiator,
    /// Node B: waits for phase 0, then answers with phase 1.
    Responder,
}

impl Role {
    /// The phase of the indication this end sends.
    pub const fn sends(self) -> Phase {
        match self {
            Self::Initiator => Phase::Zero,
            Self::Responder => Phase::One,
        }
    }

    /// The phase of the indication this end expects.
    pub const fn expects(self) -> Phase {
        match self {
            Self::Initiator => Phase::One,
            Self::Responder => Phase::Zero,
        }
    }
}

/// What this end accepts of the peer's choice to send a CRC field
/// (§4.2 HC, PC: "If the senders choice to use or not use a header CRC is
/// unacceptable to the receiver, the receiver SHOULD abort").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrcDemand {
    /// Either choice is fine.
    Any,
    /// The peer must send the field.
    Required,
    /// The peer must not send the field.
    Forbidden,
}

impl CrcDemand {
    const fn accepts(self, peer_sends: bool) -> bool {
        match self {
            Self::Any => true,
            Self::Required => peer_sends,
            Self::Forbidden => !peer_sends,
        }
    }
}

/// This end's choices and what it accepts from the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IftConfig {
    /// R: RDMA mode (else DDP mode).
    pub rdma: bool,
    /// Our VTag: the peer must put it in every frame. §4.2: it SHOULD be
    /// chosen with a good random number generator; the runtime picks it.
    pub vtag: u16,
    /// HC: our frames carry a header CRC.
    pub header_crc: bool,
    /// PC: our frames carry a payload CRC.
    pub payload_crc: bool,
    /// Whether we check the peer's header CRC (clear: we send IH).
    pub check_header_crc: bool,
    /// Whether we check the peer's payload CRC (clear: we send IP).
    pub check_payload_crc: bool,
    /// What we accept of the peer's HC.
    pub peer_header_crc: CrcDemand,
    /// What we accept of the peer's PC.
    pub peer_payload_crc: CrcDemand,
    /// If we send a header CRC, refuse a peer that ignores it (IH).
    pub require_header_crc_checked: bool,
    /// If we send a payload CRC, refuse a peer that ignores it (IP).
    pub require_payload_crc_checked: bool,
    /// SP: we permit the peer to place our frames speculatively (§8). The
    /// application must then accept §8.3 (unwritten parts of a delivered
    /// buffer are unpredictable).
    pub permit_speculative_placement: bool,
    /// SM: we are willing to send markers.
    pub send_markers: bool,
    /// RM: we wish to receive markers, at this interval.
    pub receive_markers: Option<MarkerInterval>,
    /// How long to wait for the peer's indication.
    pub timeout: Duration,
}

impl IftConfig {
    /// The defaults, with our VTag: RDMA mode, both CRCs sent and checked,
    /// any peer CRC choice accepted, no speculative placement, no markers,
    /// 10 s timeout.
    pub const fn new(vtag: u16) -> Self {
        Self {
            rdma: true,
            vtag,
            header_crc: true,
            payload_crc: true,
            check_header_crc: true,
            check_payload_crc: true,
            peer_header_crc: CrcDemand::Any,
            peer_payload_crc: CrcDemand::Any,
            require_header_crc_checked: false,
            require_payload_crc_checked: false,
            permit_speculative_placement: false,
            send_markers: false,
            receive_markers: None,
            timeout: Duration::from_secs(10),
        }
    }

    /// The indication this configuration sends in `phase`.
    //= draft-williams-iwarp-ift-01#4.2
    //# The field MUST have value of one.
    //= draft-williams-iwarp-ift-01#4.2
    //# For this version of the protocol, this field MUST be set to 1.
    pub const fn indication(&self, phase: Phase) -> Indication {
        Indication {
            version: VERSION,
            bc_version: BC_VERSION,
            phase,
            rdma: self.rdma,
            header_crc: self.header_crc,
            payload_crc: self.payload_crc,
            ignore_header_crc: !self.check_header_crc,
            ignore_payload_crc: !self.check_payload_crc,
            speculative_placement: self.permit_speculative_placement,
            send_markers: self.send_markers,
            receive_markers: self.receive_markers,
            vtag: self.vtag,
        }
    }
}

/// Why the negotiation failed. The connection is to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NegotiationError {
    /// The peer's indication is malformed or incompatible.
    #[error("peer's adaption indication: {0}")]
    Indication(#[from] IndicationError),
    /// The peer's indication has the wrong PH (both ends think they are
    /// node A, or both node B).
    #[error("peer's adaption indication is phase {found:?}, expected phase {expected:?}")]
    WrongPhase {
        /// The phase this end expects.
        expected: Phase,
        /// The phase received.
        found: Phase,
    },
    /// One end wants RDMA mode and the other DDP mode (§4.2 R: the
    /// connection "MUST be closed in error").
    #[error("mode mismatch: we want {ours:?} mode, the peer {peer:?}")]
    ModeMismatch {
        /// Our mode.
        ours: Mode,
        /// The peer's mode.
        peer: Mode,
    },
    /// The peer's HC is not what [`IftConfig::peer_header_crc`] demands.
    #[error("peer's choice to {} a header CRC is unacceptable", if *.peer_sends { "send" } else { "not send" })]
    HeaderCrcUnacceptable {
        /// Whether the peer set HC.
        peer_sends: bool,
    },
    /// The peer's PC is not what [`IftConfig::peer_payload_crc`] demands.
    #[error("peer's choice to {} a payload CRC is unacceptable", if *.peer_sends { "send" } else { "not send" })]
    PayloadCrcUnacceptable {
        /// Whether the peer set PC.
        peer_sends: bool,
    },
    /// The peer set IH and [`IftConfig::require_header_crc_checked`] refuses
    /// that.
    #[error("peer would ignore our header CRC")]
    HeaderCrcIgnored,
    /// The peer set IP and [`IftConfig::require_payload_crc_checked`]
    /// refuses that.
    #[error("peer would ignore our payload CRC")]
    PayloadCrcIgnored,
    /// The peer's indication did not arrive in time.
    #[error("timed out waiting for the peer's adaption indication")]
    Timeout,
    /// The stream ended before the peer's indication was complete.
    #[error("connection closed after {received} octets of the peer's adaption indication")]
    Closed {
        /// Octets of the indication received.
        received: usize,
    },
}

impl NegotiationError {
    /// The closest MPA (layer LLP) error code, should a Terminate message be
    /// wanted: a lost connection or timeout is "TCP connection closed,
    /// terminated or lost" (1); anything wrong with or unacceptable in the
    /// indication is "invalid MPA Request or Reply frame" (4), the MPA
    /// startup frame's role being the indication's.
    pub const fn llp_code(&self) -> LlpErrorCode {
        match self {
            Self::Timeout | Self::Closed { .. } => LlpErrorCode::ConnectionLost,
            _ => LlpErrorCode::InvalidStartupFrame,
        }
    }
}

const fn mode(rdma: bool) -> Mode {
    if rdma {
        Mode::Rdma
    } else {
        Mode::Ddp
    }
}

/// Settles our configuration and the peer's indication into the parameters
/// of full operation, or says why they cannot work together. Both ends
/// apply this to the same pair of indications; the phase is not checked
/// here.
pub fn settle(ours: &IftConfig, peer: &Indication) -> Result<IftParams, NegotiationError> {
    // §4.2 R: both set or both clear, else the connection MUST be closed.
    //= draft-williams-iwarp-ift-01#4.2
    //# If ends disagree, then the connection MUST be closed in error.
    if ours.rdma != peer.rdma {
        return Err(NegotiationError::ModeMismatch {
            ours: mode(ours.rdma),
            peer: mode(peer.rdma),
        });
    }
    // §4.2 HC, PC: the receiver SHOULD abort on a choice it cannot accept.
    //= draft-williams-iwarp-ift-01#4.2
    //# If the senders choice to use or not use a header CRC is unacceptable to the receiver,
    //# the receiver SHOULD abort the connection.
    //= draft-williams-iwarp-ift-01#4.2
    //# If the senders choice to use or not use a payload CRC is unacceptable to the receiver,
    //# the receiver SHOULD abort the connection.
    if !ours.peer_header_crc.accepts(peer.header_crc) {
        return Err(NegotiationError::HeaderCrcUnacceptable {
            peer_sends: peer.header_crc,
        });
    }
    if !ours.peer_payload_crc.accepts(peer.payload_crc) {
        return Err(NegotiationError::PayloadCrcUnacceptable {
            peer_sends: peer.payload_crc,
        });
    }
    // §4.2 IH, IP: the peer ignoring our CRC matters only if we send one.
    if ours.header_crc && peer.ignore_header_crc && ours.require_header_crc_checked {
        return Err(NegotiationError::HeaderCrcIgnored);
    }
    if ours.payload_crc && peer.ignore_payload_crc && ours.require_payload_crc_checked {
        return Err(NegotiationError::PayloadCrcIgnored);
    }
    // The field's presence is the sender's HC/PC; whether it is checked is
    // the receiver's IH/IP.
    let rx_crc = |sent: bool, check: bool| match (sent, check) {
        (false, _) => RxCrc::Absent,
        (true, false) => RxCrc::Ignored,
        (true, true) => RxCrc::Checked,
    };
    Ok(IftParams {
        mode: mode(ours.rdma),
        tx: TxParams {
            header_crc: ours.header_crc,
            payload_crc: ours.payload_crc,
            // §4.2 SM, RM: markers flow if the sender sets SM and the
            // receiver RM.
            markers: if ours.send_markers {
                peer.receive_markers
            } else {
                None
            },
            // §4.2 Sender's VTag: included in all PDUs sent by the receiver
            // of the indication.
            vtag: peer.vtag,
        },
        rx: RxParams {
            header_crc: rx_crc(peer.header_crc, ours.check_header_crc),
            payload_crc: rx_crc(peer.payload_crc, ours.check_payload_crc),
            markers: if peer.send_markers {
                ours.receive_markers
            } else {
                None
            },
            vtag: ours.vtag,
        },
        may_speculate: peer.speculative_placement,
        peer_may_speculate: ours.permit_speculative_placement,
    })
}

/// Where a negotiation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Waiting for the peer's indication.
    Negotiating,
    /// Settled: full operation may start.
    Done(IftParams),
    /// Failed: close the connection.
    Failed(NegotiationError),
}

/// One end's exchange of Adaption Indications.
#[derive(Debug, Clone)]
pub struct Negotiation {
    role: Role,
    config: IftConfig,
    /// Our indication, until the runtime takes it.
    transmit: Option<[u8; INDICATION_LEN]>,
    received: [u8; INDICATION_LEN],
    got: usize,
    peer: Option<Indication>,
    /// None when the timeout is too long to represent: no deadline.
    deadline: Option<Instant>,
    status: Status,
    /// The settled parameters were reported through
    /// [`StartupMachine::poll_event`].
    reported: bool,
}

impl Negotiation {
    /// Starts a negotiation at `now`. Node A's phase 0 indication is ready
    /// to send at once; node B's waits for phase 0.
    pub fn new(role: Role, config: IftConfig, now: Instant) -> Self {
        let transmit = match role {
            Role::Initiator => Some(config.indication(Phase::Zero).to_bytes()),
            Role::Responder => None,
        };
        Self {
            role,
            config,
            transmit,
            received: [0; INDICATION_LEN],
            got: 0,
            peer: None,
            deadline: now.checked_add(config.timeout),
            status: Status::Negotiating,
            reported: false,
        }
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// This end's configuration.
    pub fn config(&self) -> &IftConfig {
        &self.config
    }

    /// Where the negotiation stands.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The settled parameters, once the negotiation is done.
    pub fn params(&self) -> Option<IftParams> {
        match self.status {
            Status::Done(p) => Some(p),
            _ => None,
        }
    }

    /// The error that ended the negotiation, if one did.
    pub fn error(&self) -> Option<NegotiationError> {
        match self.status {
            Status::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// The peer's indication, once received and valid.
    pub fn peer_indication(&self) -> Option<&Indication> {
        self.peer.as_ref()
    }

    /// Our indication's 64 octets, once, when they are due: at once for
    /// node A, after a valid phase 0 for node B. Write them before any
    /// frame.
    pub fn poll_transmit(&mut self) -> Option<[u8; INDICATION_LEN]> {
        self.transmit.take()
    }

    /// When [`Negotiation::handle_timeout`] should be called, while waiting.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.status {
            Status::Negotiating => self.deadline,
            _ => None,
        }
    }

    /// Reports the time; fails the negotiation if the peer's indication is
    /// overdue.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), NegotiationError> {
        if self.status == Status::Negotiating && self.deadline.is_some_and(|d| now >= d) {
            self.status = Status::Failed(NegotiationError::Timeout);
        }
        self.result()
    }

    /// Reports that the peer closed its sending direction. Before the
    /// peer's indication is complete that fails the negotiation; after, it
    /// is for the frame receiver to judge.
    pub fn handle_eof(&mut self) -> Result<(), NegotiationError> {
        if self.status == Status::Negotiating {
            self.status = Status::Failed(NegotiationError::Closed { received: self.got });
        }
        self.result()
    }

    /// Feeds received octets. Returns how many were consumed: at most those
    /// that complete the peer's indication, none once it is complete. The
    /// rest of `input` is frame octets for the [`super::IftReceiver`].
    pub fn handle_input(&mut self, input: &[u8]) -> Result<usize, NegotiationError> {
        match self.status {
            Status::Negotiating => {}
            Status::Done(_) => return Ok(0),
            Status::Failed(e) => return Err(e),
        }
        let n = (INDICATION_LEN - self.got).min(input.len());
        self.received[self.got..self.got + n].copy_from_slice(&input[..n]);
        self.got += n;
        if let Err(e) = check_magic(&self.received[..self.got]) {
            return Err(self.fail(e.into()));
        }
        if self.got == INDICATION_LEN {
            self.complete()?;
        }
        Ok(n)
    }

    fn result(&self) -> Result<(), NegotiationError> {
        match self.status {
            Status::Failed(e) => Err(e),
            _ => Ok(()),
        }
    }

    fn fail(&mut self, e: NegotiationError) -> NegotiationError {
        self.status = Status::Failed(e);
        e
    }

    /// The peer's indication is in: check it, answer it, settle.
    fn complete(&mut self) -> Result<(), NegotiationError> {
        let peer = Indication::parse_bytes(&self.received).map_err(|e| self.fail(e.into()))?;
        let expected = self.role.expects();
        if peer.phase != expected {
            return Err(self.fail(NegotiationError::WrongPhase {
                expected,
                found: peer.phase,
            }));
        }
        let params = settle(&self.config, &peer).map_err(|e| self.fail(e))?;
        self.peer = Some(peer);
        if self.role == Role::Responder {
            // §4.2 PH: on receipt of phase 0, node B sends phase 1.
            self.transmit = Some(self.config.indication(Phase::One).to_bytes());
        }
        self.status = Status::Done(params);
        Ok(())
    }
}

/// The interface MPA's startup machines share, so that one loop drives
/// either exchange. The inherent methods it forwards to are IFT's own,
/// with its fixed 64-octet indication and no clock on input.
impl StartupMachine for Negotiation {
    /// The settled parameters, once.
    type Event = IftParams;
    type Error = NegotiationError;

    fn handle_input(&mut self, input: &[u8], _now: Instant) -> Result<usize, NegotiationError> {
        Negotiation::handle_input(self, input)
    }

    fn handle_eof(&mut self) -> Result<(), NegotiationError> {
        Negotiation::handle_eof(self)
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), NegotiationError> {
        Negotiation::handle_timeout(self, now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        Negotiation::poll_timeout(self)
    }

    fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        Negotiation::poll_transmit(self).map(|i| i.to_vec())
    }

    fn poll_event(&mut self) -> Option<IftParams> {
        match self.status {
            Status::Done(params) if !self.reported => {
                self.reported = true;
                Some(params)
            }
            _ => None,
        }
    }

    fn error(&self) -> Option<&NegotiationError> {
        match &self.status {
            Status::Failed(e) => Some(e),
            _ => None,
        }
    }
}
