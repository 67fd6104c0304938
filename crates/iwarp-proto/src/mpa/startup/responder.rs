//! The responder's startup machine: wait for the Request, let the
//! application decide, send the Reply.
//!
//! RFC 5044 §7.1.2 rule 2: the responder waits for a Request and validates
//! it; a malformed one fails the startup and the connection must close. A
//! valid one is shown to the application ([`Event::RequestReceived`]),
//! which accepts with its own private data ([`Responder::accept`]) or
//! rejects ([`Responder::reject`], a Reply with R set; TCP is left open).
//! Requests this end cannot serve (markers it cannot send, CRC policy, no
//! common RTR type) are rejected without asking the application
//! ([`Event::Refused`]). Once
//! accepted, rule 4 holds: the responder sends no FPDU before it has
//! received one ([`Established::must_receive_before_sending`]).

use std::time::Instant;

use super::enhanced::{EnhancedData, IrdOrd, RtrType, RtrTypes, ENHANCED_DATA_LEN};
use super::error::{Awaiting, StartupError};
use super::frame::{FrameKind, Revision, StartupFrameRepr};
use super::negotiate;
use super::outcome::{Established, Event, PeerRequest};
use super::reader::{FrameReader, ReceivedFrame};
use super::{deadline_after, Common, MpaStartup, Role, StartupConfig, StartupMachine, State};

/// The responder of an MPA startup.
///
/// Create it at the stream position where MPA starts (optionally with a
/// last streaming-mode message to send first), feed the peer's octets to
/// [`handle_input`](StartupMachine::handle_input) until
/// [`Event::RequestReceived`] comes out, then call [`accept`](Self::accept)
/// or [`reject`](Self::reject) and send what
/// [`poll_transmit`](StartupMachine::poll_transmit) gives.
#[derive(Debug, Clone)]
pub struct Responder {
    config: StartupConfig,
    reader: FrameReader,
    common: Common,
    request: Option<PeerRequest>,
}

impl Responder {
    /// Starts a responder waiting for the MPA Request, with the Request
    /// timeout armed from `now` (RFC 5044 §7.1.2 rules 8 and 10).
    pub fn new(config: StartupConfig, now: Instant) -> Result<Self, StartupError> {
        config.validate()?;
        Ok(Self {
            reader: FrameReader::new(),
            common: Common::new(
                State::AwaitingRequest,
                deadline_after(now, config.request_timeout),
            ),
            config,
            request: None,
        })
    }

    /// Starts a responder that first sends `message`, the last
    /// streaming-mode message of the upper layer, then waits for the
    /// Request (RFC 5044 §7.1.5 item 2: this lets the upper layer switch to
    /// MPA before the initiator, woken by that message, can answer).
    //= rfc5044#7.1
    //# MPA requires that the Consumer MUST activate MPA, and any TCP enhancements for MPA, on a
    //# TCP half connection at the same location in the octet stream at both the sender and the
    //# receiver.
    //= rfc5044#7.1.5
    //# Enabling the DDP/MPA stack SHOULD be done only when no incoming stream data is expected.
    pub fn with_last_streaming_message(
        config: StartupConfig,
        message: &[u8],
        now: Instant,
    ) -> Result<Self, StartupError> {
        let mut responder = Self::new(config, now)?;
        if !message.is_empty() {
            responder.common.transmit.push_back(message.to_vec());
        }
        Ok(responder)
    }

    /// The request awaiting (or having had) the application's decision.
    pub fn request(&self) -> Option<&PeerRequest> {
        self.request.as_ref()
    }

    /// The configuration this responder runs with.
    pub fn config(&self) -> &StartupConfig {
        &self.config
    }

    /// Accepts the request, answering with `private_data` (RFC 5044
    /// §7.1.2 rule 2). The connection is established at once; the Reply is
    /// queued for transmission.
    pub fn accept(&mut self, private_data: &[u8]) -> Result<(), StartupError> {
        self.accept_with(private_data, None)
    }

    /// Accepts with the application's own IRD/ORD (revision 2 enhanced
    /// requests). Each is held to what [`PeerRequest::ird_ord`] proposed:
    /// the application may grant less, never more, and not an IRD of 0
    /// when a Read RTR was selected.
    pub fn accept_with(
        &mut self,
        private_data: &[u8],
        ird_ord: Option<IrdOrd>,
    ) -> Result<(), StartupError> {
        let request = self.decision_pending()?;
        check_reply_private_data(request, private_data)?;
        // A Read RTR, once selected, keeps the IRD slot it needs.
        let min_ird = u16::from(request.rtr == Some(RtrType::Read));
        let ird_ord = request.ird_ord.map(|proposed| match ird_ord {
            Some(wanted) => IrdOrd {
                ird: wanted.ird.min(proposed.ird).max(min_ird),
                ord: wanted.ord.min(proposed.ord),
            },
            None => proposed,
        });
        let enhanced = ird_ord.map(|v| EnhancedData {
            ird: v.ird,
            ord: v.ord,
            // RFC 6581: confirm peer-to-peer mode and name the one RTR type.
            peer_to_peer: request.rtr.is_some(),
            rtr: request.rtr.map(RtrTypes::only).unwrap_or(RtrTypes::NONE),
        });
        let reply = StartupFrameRepr {
            kind: FrameKind::Reply,
            markers: self.config.request_markers,
            crc: request.framing.crc,
            rejected: false,
            revision: request.reply_revision,
            enhanced,
            private_data,
        }
        .to_bytes()
        .map_err(|e| StartupError::from_frame(e, FrameKind::Reply))?;
        let established = Established {
            role: Role::Responder,
            revision: Some(request.reply_revision),
            framing: request.framing,
            ird_ord,
            rtr: request.rtr,
            private_data: request.private_data.clone(),
        };
        self.common.transmit.push_back(reply);
        self.common.establish(established);
        Ok(())
    }

    /// Rejects the request: queues a Reply with R set carrying
    /// `private_data` (typically the reason), and ends MPA leaving the TCP
    /// connection open (RFC 5044 §7.1.2 rules 2 and 6).
    //= rfc5044#7.1.2
    //# If the MPA Request Frame is properly formatted but the Private Data is not acceptable,
    //# the implementation SHOULD return an MPA Reply Frame with the Rejected Connection bit set
    //# to '1'; the MPA Reply Frame MAY include ULP-supplied Private Data; the implementation
    //# MUST exit MPA, leaving the TCP connection open.
    //= rfc5044#7.1.2
    //# The Responder SHOULD return an MPA Reply Frame with the "Reject Connection" bit set to
    //# '1' if the validation of the Private Data is not acceptable to the ULP.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), StartupError> {
        let request = self.decision_pending()?;
        check_reply_private_data(request, private_data)?;
        let reply = reject_reply(
            request.reply_revision,
            request.enhanced.is_some() && request.reply_revision == Revision::Rev2,
            request.framing.crc,
            private_data,
        )?;
        self.common.transmit.push_back(reply);
        self.common.state = State::Rejected;
        self.common.deadline = None;
        Ok(())
    }

    fn decision_pending(&self) -> Result<&PeerRequest, StartupError> {
        match (&self.common.state, &self.request) {
            (State::AwaitingDecision, Some(request)) => Ok(request),
            (state, _) => Err(StartupError::WrongState(*state)),
        }
    }

    fn read_request(&mut self, input: &[u8], now: Instant) -> Result<usize, StartupError> {
        let config = &self.config;
        let (consumed, complete) = self.reader.read(
            input,
            FrameKind::Request,
            config.max_private_data,
            |header| negotiate::responder_revision(config, header.revision).map(|_| ()),
        )?;
        if complete {
            let frame = self
                .reader
                .received_frame()
                .ok_or(StartupError::Truncated {
                    received: self.reader.received(),
                    expected: self.reader.expected_len(),
                })?;
            self.process_request(frame, now)?;
        }
        Ok(consumed)
    }

    /// Judges a complete, well-formed Request: either refuse it by policy
    /// (queuing a rejecting Reply) or hand it to the application.
    //= rfc5044#7.1.2
    //# When MPA is started in the Responder mode, the MPA implementation MUST wait until an MPA
    //# Request Frame is received and validated before entering Full MPA/DDP Operation.
    //= rfc5044#7.1.2
    //# If the MPA Request Frame is properly formatted and the Private Data is acceptable, the
    //# implementation SHOULD return an MPA Reply Frame with the Rejected Connection bit set to
    //# '0'
    fn process_request(
        &mut self,
        request: ReceivedFrame,
        now: Instant,
    ) -> Result<(), StartupError> {
        let reply_revision = negotiate::responder_revision(&self.config, request.revision)?;
        // Enhanced data is answered in kind at revision 2; a lower reply
        // revision knows nothing of it.
        let offer = request
            .enhanced
            .filter(|_| reply_revision == Revision::Rev2);
        let crc = negotiate::crc_in_use(self.config.crc, request.crc);
        let ird_ord = offer.map(|o| {
            negotiate::responder_ird_ord(o.ird_ord(), IrdOrd::new(self.config.ird, self.config.ord))
        });
        let refusal = self.refusal(&request, offer.as_ref(), ird_ord);
        let rtr = match refusal {
            Ok(rtr) => rtr,
            Err(reason) => {
                // Rule 2: a properly formatted Request this end will not
                // serve gets a Reply with R set; MPA is over, TCP stays open.
                let reply = reject_reply(reply_revision, offer.is_some(), crc, &[])?;
                self.common.transmit.push_back(reply);
                self.common.state = State::Rejected;
                self.common.deadline = None;
                self.common.error = Some(reason.clone());
                self.common.events.push_back(Event::Refused(reason));
                return Ok(());
            }
        };
        let peer_request = PeerRequest {
            revision: request.revision,
            reply_revision,
            markers: request.markers,
            crc: request.crc,
            enhanced: request.enhanced,
            private_data: request.private_data,
            framing: negotiate::framing(self.config.request_markers, request.markers, crc),
            ird_ord,
            rtr,
        };
        self.common.state = State::AwaitingDecision;
        self.common.deadline = self
            .config
            .decision_timeout
            .and_then(|t| deadline_after(now, t));
        self.common
            .events
            .push_back(Event::RequestReceived(peer_request.clone()));
        self.request = Some(peer_request);
        Ok(())
    }

    /// The policy checks; on success, the RTR type of peer-to-peer mode.
    /// `ird_ord` is what this end would run with.
    fn refusal(
        &self,
        request: &ReceivedFrame,
        offer: Option<&EnhancedData>,
        ird_ord: Option<IrdOrd>,
    ) -> Result<Option<RtrType>, StartupError> {
        negotiate::check_markers(&self.config, request.markers, Role::Responder)?;
        negotiate::check_crc(self.config.crc, request.crc, Role::Responder)?;
        let acceptable = negotiate::usable_rtr(self.config.rtr_types, Role::Responder, ird_ord);
        match offer {
            Some(o) if o.peer_to_peer => negotiate::select_rtr(o.rtr, acceptable).map(Some).ok_or(
                StartupError::NoMatchingRtr {
                    offered: o.rtr,
                    other: acceptable,
                    detected_by: Role::Responder,
                },
            ),
            _ => Ok(None),
        }
    }
}

/// Checks that the application's private data fits the Reply.
fn check_reply_private_data(
    request: &PeerRequest,
    private_data: &[u8],
) -> Result<(), StartupError> {
    let revision = request.reply_revision;
    let enhanced = request.enhanced.is_some() && revision == Revision::Rev2;
    let max = revision.max_private_data() - if enhanced { ENHANCED_DATA_LEN } else { 0 };
    if private_data.len() > max {
        Err(StartupError::LocalPrivateDataTooLong {
            length: private_data.len(),
            max,
            revision,
        })
    } else {
        Ok(())
    }
}

/// A Reply with R set: no markers asked for (there will be no FPDUs), the
/// C bit as the connection would have had it, IRD/ORD words all zero when
/// the request was enhanced. This is what Linux `siw` sends.
fn reject_reply(
    revision: Revision,
    enhanced: bool,
    crc: bool,
    private_data: &[u8],
) -> Result<Vec<u8>, StartupError> {
    StartupFrameRepr {
        kind: FrameKind::Reply,
        markers: false,
        crc,
        rejected: true,
        revision,
        enhanced: enhanced.then_some(EnhancedData::REJECT),
        private_data,
    }
    .to_bytes()
    .map_err(|e| StartupError::from_frame(e, FrameKind::Reply))
}

impl MpaStartup for Responder {
    fn state(&self) -> State {
        self.common.state
    }

    fn established(&self) -> Option<&Established> {
        self.common.established.as_ref()
    }
}

impl StartupMachine for Responder {
    type Event = Event;
    type Error = StartupError;

    fn handle_input(&mut self, input: &[u8], now: Instant) -> Result<usize, StartupError> {
        self.common.check_failed()?;
        if self.common.state != State::AwaitingRequest {
            return Ok(0);
        }
        self.read_request(input, now)
            .map_err(|e| self.common.fail(e))
    }

    fn handle_eof(&mut self) -> Result<(), StartupError> {
        self.common.check_failed()?;
        let error = match self.common.state {
            State::AwaitingRequest => match self.reader.received() {
                0 => StartupError::ConnectionClosed {
                    waiting_for: Awaiting::Request,
                },
                received => StartupError::Truncated {
                    received,
                    expected: self.reader.expected_len(),
                },
            },
            State::AwaitingDecision => StartupError::ConnectionClosed {
                waiting_for: Awaiting::Decision,
            },
            _ => return Ok(()),
        };
        Err(self.common.fail(error))
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), StartupError> {
        self.common.check_failed()?;
        if !self.common.expired(now) {
            return Ok(());
        }
        let error = match self.common.state {
            // RFC 5044 §7.1.2 rule 8: silence is how a responder/responder
            // startup shows.
            //= rfc5044#7.1.2
            //# Implementations SHOULD put a timeout on waiting for the MPA Request Frame when
            //# started in Responder mode, to detect incorrect "Responder/Responder" startups.
            State::AwaitingRequest if self.reader.received() == 0 => {
                StartupError::ResponderResponder
            }
            State::AwaitingRequest => StartupError::Timeout {
                waiting_for: Awaiting::Request,
                received: self.reader.received(),
            },
            State::AwaitingDecision => StartupError::Timeout {
                waiting_for: Awaiting::Decision,
                received: 0,
            },
            _ => return Ok(()),
        };
        Err(self.common.fail(error))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.common.deadline
    }

    fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.common.transmit.pop_front()
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.common.events.pop_front()
    }

    fn error(&self) -> Option<&StartupError> {
        self.common.error.as_ref()
    }
}
