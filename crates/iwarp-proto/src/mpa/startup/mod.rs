//! The MPA startup phase: Request/Reply frames and the machines that
//! exchange them.
//!
//! Before FPDUs flow, the initiator sends an MPA Request frame and the
//! responder answers with an MPA Reply frame (RFC 5044 §7.1). The exchange
//! settles the revision (0, 1 or 2), CRC and markers, optionally carries
//! private data for the applications, and at revision 2 (RFC 6581)
//! exchanges IRD/ORD and the ready-to-receive message of peer-to-peer mode.
//! The legacy immediate-start profile (draft-culley-iwarp-mpa-02) has no
//! frames at all: [`ImmediateStart`].
//!
//! The machines are sans-IO, like `quinn-proto`: they own no socket and
//! read no clock. A caller drives one through [`StartupMachine`], the
//! interface IFT's negotiation shares (`crate::framing`):
//!
//! - received octets go to [`handle_input`](StartupMachine::handle_input),
//!   which returns how many it took. It never takes an octet beyond the
//!   peer's startup frame: what follows is the first FPDU and belongs to
//!   the FPDU receiver, so the caller keeps the rest;
//! - the end of the stream goes to [`handle_eof`](StartupMachine::handle_eof);
//! - time goes to [`handle_timeout`](StartupMachine::handle_timeout) once
//!   [`poll_timeout`](StartupMachine::poll_timeout)'s instant has passed;
//! - octets to send come from [`poll_transmit`](StartupMachine::poll_transmit)
//!   and reports from [`poll_event`](StartupMachine::poll_event).
//!
//! A failure is returned by the `handle_*` call that met it (and by every
//! later one); every such failure means the TCP connection must be closed
//! ([`StartupError::closes_connection`]), once what
//! [`poll_transmit`](StartupMachine::poll_transmit) still gives is sent:
//! the Terminate an initiator owes a responder whose valid Reply it cannot
//! use ([`StartupError::terminate_queued`], RFC 6581). A rejection is not a failure: the
//! initiator reports the peer's with [`Event::Rejected`], the responder
//! queues its Reply with R set (after [`Responder::reject`], or on its own
//! with [`Event::Refused`] when the request asks for what it does not do);
//! MPA is then over and the TCP connection stays open for the upper layer,
//! starting right after the startup frame.
//!
//! The machines may be started at any point of a TCP connection (delayed
//! startup, RFC 5044 §7.1.3): the caller simply starts them at the agreed
//! stream position, after its own streaming-mode exchange.
//!
//! Both ends, wired back to back:
//!
//! ```
//! use std::time::Instant;
//! use iwarp_proto::mpa::startup::{
//!     Event, Initiator, MpaStartup, Responder, RtrType, StartupConfig, StartupMachine,
//! };
//!
//! let now = Instant::now();
//! let p2p = StartupConfig { peer_to_peer: true, ..StartupConfig::default() };
//! let mut initiator = Initiator::new(p2p, b"hello", now)?;
//! let mut responder = Responder::new(StartupConfig::default(), now)?;
//!
//! let request = initiator.poll_transmit().unwrap();
//! assert_eq!(responder.handle_input(&request, now)?, request.len());
//! let Some(Event::RequestReceived(req)) = responder.poll_event() else { unreachable!() };
//! assert_eq!(req.private_data, b"hello");
//! responder.accept(b"welcome")?;
//!
//! let reply = responder.poll_transmit().unwrap();
//! initiator.handle_input(&reply, now)?;
//! // The initiator holds its first FPDU a moment (`hold_after_reply`), for
//! // Linux siw's sake: established once that time has passed.
//! assert_eq!(initiator.poll_event(), None);
//! let until = initiator.poll_timeout().unwrap();
//! initiator.handle_timeout(until)?;
//! let Some(Event::Established(up)) = initiator.poll_event() else { unreachable!() };
//! assert_eq!(up.private_data, b"welcome");
//! assert!(up.framing.crc);
//! // Peer-to-peer mode: our first FPDU is a zero-length RDMA Write.
//! assert_eq!(up.rtr_to_send(), Some(RtrType::Write));
//! assert!(responder.established().unwrap().must_receive_before_sending());
//! # Ok::<(), iwarp_proto::mpa::startup::StartupError>(())
//! ```

mod config;
mod enhanced;
mod error;
mod frame;
mod immediate;
mod initiator;
mod negotiate;
mod observe;
mod outcome;
pub mod pretty;
mod reader;
mod responder;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::Instant;

pub use config::{CrcPolicy, IrdOrdNegotiation, StartupConfig, DEFAULT_HOLD_AFTER_REPLY};
pub use enhanced::{
    EnhancedData, IrdOrd, RtrType, RtrTypes, ENHANCED_DATA_LEN, IRD_FLAG_PEER_TO_PEER,
    IRD_FLAG_SEND_RTR, MAX_IRD_ORD, ORD_FLAG_READ_RTR, ORD_FLAG_WRITE_RTR,
};
pub use error::{Awaiting, ConfigError, StartupError};
pub use frame::{
    FrameError, FrameKind, Revision, StartupFrame, StartupFrameRepr, FLAG_CRC, FLAG_ENHANCED,
    FLAG_GSO_EXPERIMENT, FLAG_MARKERS, FLAG_REJECT, HEADER_LEN, KEY_LEN, MAX_PRIVATE_DATA,
    MAX_PRIVATE_DATA_REV0, REPLY_KEY, REQUEST_KEY,
};
pub use immediate::ImmediateStart;
pub use initiator::Initiator;
pub use observe::{observe, Observed};
pub use outcome::{Established, Event, PeerRejection, PeerRequest};
pub use responder::Responder;

pub use crate::framing::StartupMachine;

/// Which end of the MPA startup this is. It is not the TCP role: the
/// initiator is the end that sends the Request (RFC 5044 §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sends the MPA Request, waits for the Reply.
    Initiator,
    /// Waits for the MPA Request, answers with the Reply.
    Responder,
}

/// Where a startup machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Responder: waiting for the MPA Request.
    AwaitingRequest,
    /// Responder: the Request is in; waiting for the application to accept
    /// or reject.
    AwaitingDecision,
    /// Initiator: the Request is queued; waiting for the MPA Reply.
    AwaitingReply,
    /// Initiator: the Reply is in and accepted; the first FPDU is held back
    /// until [`StartupConfig::hold_after_reply`] has passed, then the
    /// machine is established.
    Holding,
    /// Startup complete; full operation may begin.
    Established,
    /// The connection was rejected (by the peer's Reply, by this
    /// responder's application, or by its policy). MPA is over, the TCP
    /// connection is left open.
    Rejected,
    /// Startup failed; see the machine's error.
    Failed,
}

impl State {
    /// Whether the machine has finished, one way or another.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Established | Self::Rejected | Self::Failed)
    }
}

/// An MPA startup machine: the [`StartupMachine`] interface with MPA's
/// events and errors, and where the machine stands.
pub trait MpaStartup: StartupMachine<Event = Event, Error = StartupError> {
    /// The current state.
    fn state(&self) -> State;

    /// The outcome, once established.
    fn established(&self) -> Option<&Established>;
}

impl<M: MpaStartup + ?Sized> MpaStartup for Box<M> {
    fn state(&self) -> State {
        (**self).state()
    }

    fn established(&self) -> Option<&Established> {
        (**self).established()
    }
}

/// Plumbing both frame-exchanging machines share.
#[derive(Debug, Clone)]
struct Common {
    state: State,
    transmit: VecDeque<Vec<u8>>,
    events: VecDeque<Event>,
    deadline: Option<Instant>,
    established: Option<Established>,
    error: Option<StartupError>,
}

impl Common {
    fn new(state: State, deadline: Option<Instant>) -> Self {
        Self {
            state,
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            deadline,
            established: None,
            error: None,
        }
    }

    /// Records a failure; returns it for the caller.
    fn fail(&mut self, error: StartupError) -> StartupError {
        self.state = State::Failed;
        self.deadline = None;
        self.error = Some(error.clone());
        error
    }

    /// The stored failure, if the machine has failed.
    fn check_failed(&self) -> Result<(), StartupError> {
        match (&self.state, &self.error) {
            (State::Failed, Some(e)) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    fn establish(&mut self, established: Established) {
        self.state = State::Established;
        self.deadline = None;
        self.events
            .push_back(Event::Established(established.clone()));
        self.established = Some(established);
    }

    fn expired(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }
}

/// `now + timeout`, or no deadline if that overflows.
fn deadline_after(now: Instant, timeout: std::time::Duration) -> Option<Instant> {
    now.checked_add(timeout)
}
