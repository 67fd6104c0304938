//! The initiator's startup machine: send the Request, validate the Reply.
//!
//! RFC 5044 §7.1.2 rule 1: the Request (with the application's private
//! data) is queued as soon as the machine exists. Rule 3: the Reply is
//! received and validated; a malformed Reply fails the startup and the
//! connection must close; a Reply with R set ends MPA as a rejection,
//! leaving TCP open; a valid accepting Reply establishes the connection,
//! and the initiator may send FPDUs at once (its RTR first, in
//! peer-to-peer mode). A valid Reply whose IRD/ORD or RTR selection the
//! initiator cannot meet (RFC 6581) fails the startup too, but the
//! responder is already in full operation: the initiator's first and last
//! FPDU is then a Terminate saying why.
//!
//! "At once" may wait a little: with [`StartupConfig::hold_after_reply`]
//! the machine holds an accepted Reply for that long before it reports the
//! connection established, so that the first FPDU does not reach a Linux
//! `siw` responder before it reads its socket (see that field).

use std::time::Instant;

use super::enhanced::{EnhancedData, IrdOrd, RtrType, RtrTypes, ENHANCED_DATA_LEN};
use super::error::{Awaiting, StartupError};
use super::frame::{FrameKind, Revision, StartupFrameRepr};
use super::negotiate;
use super::outcome::{Established, Event, PeerRejection};
use super::reader::{FrameReader, ReceivedFrame};
use super::{deadline_after, Common, MpaStartup, Role, StartupConfig, StartupMachine, State};
use crate::framing::{Framer, LlpErrorCode, WireBatch};
use crate::mpa::{FpduTransmitter, FramingParams};
use crate::rdmap::{ProtocolError, TerminateMessage};

/// What this initiator put in its Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    revision: Revision,
    markers: bool,
    enhanced: Option<EnhancedData>,
}

/// The initiator of an MPA startup.
///
/// Create it at the stream position where MPA starts, send what
/// [`poll_transmit`](StartupMachine::poll_transmit) gives (the Request),
/// and feed the peer's octets to
/// [`handle_input`](StartupMachine::handle_input) until an
/// [`Event::Established`] or [`Event::Rejected`] comes out.
#[derive(Debug, Clone)]
pub struct Initiator {
    config: StartupConfig,
    sent: Sent,
    reader: FrameReader,
    common: Common,
    rejection: Option<PeerRejection>,
    /// The outcome of an accepted Reply, while it is held
    /// ([`State::Holding`]).
    held: Option<Established>,
}

impl Initiator {
    /// Starts an initiator: queues its MPA Request carrying `private_data`
    /// (RFC 5044 §7.1.2 rule 1) and arms the Reply timeout from `now`.
    ///
    /// Fails if the configuration is inconsistent or `private_data` does
    /// not fit the Request (512 octets at revisions 1 and 2, less the 4
    /// enhanced octets; 65535 at revision 0).
    //= rfc5044#7.1.2
    //# When MPA is started in the Initiator mode, the MPA implementation MUST send a valid MPA
    //# Request Frame.
    pub fn new(
        config: StartupConfig,
        private_data: &[u8],
        now: Instant,
    ) -> Result<Self, StartupError> {
        config.validate_initiator()?;
        let revision = config.max_revision;
        let enhanced = config.sends_enhanced().then_some(EnhancedData {
            ird: config.ird,
            ord: config.ord,
            peer_to_peer: config.peer_to_peer,
            rtr: if config.peer_to_peer {
                // Only what this end can send: no Read RTR with ORD 0.
                negotiate::usable_rtr(
                    config.rtr_types,
                    Role::Initiator,
                    Some(IrdOrd::new(config.ird, config.ord)),
                )
            } else {
                RtrTypes::NONE
            },
        });
        let max = revision.max_private_data()
            - if enhanced.is_some() {
                ENHANCED_DATA_LEN
            } else {
                0
            };
        if private_data.len() > max {
            return Err(StartupError::LocalPrivateDataTooLong {
                length: private_data.len(),
                max,
                revision,
            });
        }
        let request = StartupFrameRepr {
            kind: FrameKind::Request,
            markers: config.request_markers,
            crc: config.crc.sends_crc(),
            rejected: false,
            revision,
            enhanced,
            private_data,
        }
        .to_bytes()
        .map_err(|e| StartupError::from_frame(e, FrameKind::Request))?;
        let mut common = Common::new(
            State::AwaitingReply,
            deadline_after(now, config.reply_timeout),
        );
        common.transmit.push_back(request);
        Ok(Self {
            sent: Sent {
                revision,
                markers: config.request_markers,
                enhanced,
            },
            config,
            reader: FrameReader::new(),
            common,
            rejection: None,
            held: None,
        })
    }

    /// The responder's rejection, once one arrived.
    pub fn rejection(&self) -> Option<&PeerRejection> {
        self.rejection.as_ref()
    }

    /// The configuration this initiator runs with.
    pub fn config(&self) -> &StartupConfig {
        &self.config
    }

    //= rfc5044#7.1.2
    //# MPA Initiator mode implementations MUST receive and validate an MPA Reply Frame.
    fn read_reply(&mut self, input: &[u8], now: Instant) -> Result<usize, StartupError> {
        let config = &self.config;
        let requested = self.sent.revision;
        let (consumed, complete) =
            self.reader
                .read(input, FrameKind::Reply, config.max_private_data, |header| {
                    negotiate::check_reply_revision(config, requested, header.revision)
                })?;
        if complete {
            let frame = self
                .reader
                .received_frame()
                .ok_or(StartupError::Truncated {
                    received: self.reader.received(),
                    expected: self.reader.expected_len(),
                })?;
            self.process_reply(frame, now)?;
        }
        Ok(consumed)
    }

    /// RFC 5044 §7.1.2 rule 3 and RFC 6581: judge a complete, well-formed
    /// Reply.
    //= rfc5044#7.1.2
    //# If the MPA Reply Frame is properly formatted but is the Private Data is not acceptable,
    //# or if the Rejected Connection bit is set to '1', the implementation MUST exit MPA,
    //# leaving the TCP connection open.
    //= rfc5044#7.1.2
    //# If the MPA Reply Frame is properly formatted and the Private Data is acceptable, and the
    //# Reject Connection bit is set to '0', the implementation SHOULD enter Full MPA/DDP
    //# Operation Phase; interpreting any received data as FPDUs and sending DDP ULPDUs as
    //# FPDUs.
    fn process_reply(&mut self, reply: ReceivedFrame, now: Instant) -> Result<(), StartupError> {
        if reply.rejected {
            let rejection = PeerRejection {
                revision: reply.revision,
                private_data: reply.private_data,
            };
            self.common.state = State::Rejected;
            self.common.deadline = None;
            self.common
                .events
                .push_back(Event::Rejected(rejection.clone()));
            self.rejection = Some(rejection);
            return Ok(());
        }
        // RFC 6581: an enhanced Request answered at revision 2 gets enhanced
        // data back; unrequested enhanced data is not a valid answer.
        match (self.sent.enhanced, reply.enhanced) {
            (Some(_), None) if reply.revision == Revision::Rev2 => {
                return Err(StartupError::ReplyNotEnhanced)
            }
            (None, Some(_)) => return Err(StartupError::UnexpectedEnhancedReply),
            _ => {}
        }
        negotiate::check_markers(&self.config, reply.markers, Role::Initiator)?;
        negotiate::check_crc(self.config.crc, reply.crc, Role::Initiator)?;
        let crc = negotiate::crc_in_use(self.config.crc, reply.crc);
        let framing = negotiate::framing(self.sent.markers, reply.markers, crc);
        // The Reply is valid: the responder is in full operation from here
        // on, and only a Terminate can tell it why we go no further.
        let (ird_ord, rtr) = self
            .negotiate_rdma(&reply)
            .inspect_err(|e| self.queue_terminate(framing, e.llp_error_code()))?;
        let established = Established {
            role: Role::Initiator,
            revision: Some(reply.revision),
            framing,
            ird_ord,
            rtr,
            private_data: reply.private_data,
        };
        // No hold when it is zero (or too long for an instant to hold).
        match deadline_after(now, self.config.hold_after_reply) {
            Some(until) if until > now => {
                self.common.state = State::Holding;
                self.common.deadline = Some(until);
                self.held = Some(established);
            }
            _ => self.common.establish(established),
        }
        Ok(())
    }

    /// Ends the hold of an accepted Reply: the connection is established.
    fn release(&mut self) {
        if let Some(established) = self.held.take() {
            self.common.establish(established);
        }
    }

    /// RFC 6581: the IRD/ORD and the RTR type that a valid Reply settles.
    fn negotiate_rdma(
        &self,
        reply: &ReceivedFrame,
    ) -> Result<(Option<IrdOrd>, Option<RtrType>), StartupError> {
        let ird_ord = match (self.sent.enhanced, reply.enhanced) {
            (Some(ours), Some(theirs)) => Some(negotiate::initiator_ird_ord(
                ours.ird_ord(),
                theirs.ird_ord(),
                self.config.ird_ord_negotiation,
            )?),
            _ => None,
        };
        let rtr = match self.sent.enhanced {
            Some(ours) if ours.peer_to_peer => Some(negotiate::check_reply_rtr(
                // A responder granting IRD 0 leaves this end ORD 0: its
                // selection of a Read RTR cannot be met.
                negotiate::usable_rtr(ours.rtr, Role::Initiator, ird_ord),
                reply.enhanced.as_ref(),
            )?),
            _ => None,
        };
        Ok((ird_ord, rtr))
    }

    /// RFC 6581: an initiator that fails after a valid Reply (insufficient
    /// IRD, code 0x06; no matching RTR type, code 0x07) sends a Terminate
    /// with the code as its first FPDU, framed as the Reply settled, and
    /// then closes. It is queued for [`StartupMachine::poll_transmit`].
    //= rfc6581#9
    //# An Initiator that cannot use a valid Reply MUST send a Terminate Message carrying the
    //# LLP error code as its first FPDU before it closes.
    fn queue_terminate(&mut self, framing: FramingParams, code: LlpErrorCode) {
        let (ulpdu, len) = TerminateMessage::new(ProtocolError::Llp(code)).to_ulpdu(1);
        let ulpdu = &ulpdu[..len];
        let mut batch = WireBatch::new();
        // A Terminate is far below the largest ULPDU: framing cannot fail.
        // Passed as the header, its octets are copied into the batch.
        if FpduTransmitter::new(framing)
            .frame(ulpdu, &[], &mut batch)
            .is_ok()
        {
            let mut fpdu = Vec::with_capacity(batch.wire_len());
            batch.write_to(&[], &mut fpdu);
            self.common.transmit.push_back(fpdu);
        }
    }
}

impl MpaStartup for Initiator {
    fn state(&self) -> State {
        self.common.state
    }

    fn established(&self) -> Option<&Established> {
        self.common.established.as_ref()
    }
}

impl StartupMachine for Initiator {
    type Event = Event;
    type Error = StartupError;

    fn handle_input(&mut self, input: &[u8], now: Instant) -> Result<usize, StartupError> {
        self.common.check_failed()?;
        if self.common.state != State::AwaitingReply {
            return Ok(0);
        }
        self.read_reply(input, now).map_err(|e| self.common.fail(e))
    }

    fn handle_eof(&mut self) -> Result<(), StartupError> {
        self.common.check_failed()?;
        if self.common.state == State::Holding {
            // Nothing left to wait for: the connection itself sees the end.
            self.release();
            return Ok(());
        }
        if self.common.state != State::AwaitingReply {
            return Ok(());
        }
        let error = match self.reader.received() {
            0 => StartupError::ConnectionClosed {
                waiting_for: Awaiting::Reply,
            },
            received => StartupError::Truncated {
                received,
                expected: self.reader.expected_len(),
            },
        };
        Err(self.common.fail(error))
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), StartupError> {
        self.common.check_failed()?;
        if self.common.state == State::Holding && self.common.expired(now) {
            self.release();
            return Ok(());
        }
        if self.common.state != State::AwaitingReply || !self.common.expired(now) {
            return Ok(());
        }
        //= rfc5044#7.1.2
        //# MPA implementations SHOULD implement a reasonable timeout while waiting for the
        //# entire set of startup frames; this prevents certain denial-of-service attacks.
        // RFC 5044 §7.1.2 rule 10.
        let error = StartupError::Timeout {
            waiting_for: Awaiting::Reply,
            received: self.reader.received(),
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
