//! Why an MPA startup failed.
//!
//! Each [`StartupError`] variant names the rule that was broken and knows
//! the MPA error code to report ([`StartupError::llp_error_code`], for a
//! Terminate message or a local report) and whether the TCP connection must
//! be closed ([`StartupError::closes_connection`]). A rejection by the peer
//! is not an error: it is an outcome ([`Event::Rejected`](super::Event)).

use super::enhanced::{RtrTypes, MAX_IRD_ORD};
use super::frame::{FrameError, FrameKind, Revision, KEY_LEN};
use super::Role;
use crate::mpa::LlpErrorCode;

/// What a startup machine was waiting for when time ran out or the stream
/// ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Awaiting {
    /// The responder, for the MPA Request frame.
    Request,
    /// The initiator, for the MPA Reply frame.
    Reply,
    /// The responder, for its application to accept or reject the request.
    Decision,
}

/// Why an MPA startup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartupError {
    /// RFC 5044 §7.1.2 rule 5: the received key is neither startup key.
    #[error("bad MPA key (expected {expected:?} key): {seen:02x?}")]
    BadKey {
        /// The frame this end was waiting for.
        expected: FrameKind,
        /// The 16 octets received where the key belongs.
        seen: [u8; KEY_LEN],
    },
    /// RFC 5044 §7.1.2 rule 8: an initiator received a Request frame, so
    /// both ends started as initiators.
    #[error("initiator/initiator startup: received an MPA Request while waiting for the Reply")]
    InitiatorInitiator,
    /// A responder received a Reply frame where the Request belongs.
    #[error("received an MPA Reply while waiting for the Request")]
    UnexpectedReply,
    /// RFC 5044 §7.1.1 Rev: a revision this end cannot interoperate with
    /// (unknown, or outside the configured range).
    #[error("MPA revision {revision} not supported")]
    UnsupportedRevision {
        /// The `Rev` field received.
        revision: u8,
    },
    /// The Reply's revision is higher than the Request's: a responder may
    /// only answer with the requested revision or a lower one.
    #[error("MPA Reply revision {replied} is above the requested revision {requested}")]
    ReplyRevisionTooHigh {
        /// Revision this initiator sent.
        requested: Revision,
        /// Revision the Reply carries.
        replied: u8,
    },
    /// RFC 5044 §7.1.1 PD_Length: more private data than the revision
    /// allows (512 octets for revisions 1 and 2).
    #[error("PD_Length {length} exceeds the revision {revision} limit of {max}")]
    PrivateDataTooLong {
        /// The frame's revision.
        revision: Revision,
        /// The PD_Length received.
        length: usize,
        /// The revision's limit.
        max: usize,
    },
    /// RFC 5044 §7.1.2 rule 9: PD_Length is larger than the buffer this end
    /// set aside for private data.
    #[error("PD_Length {length} exceeds the local limit of {limit}")]
    PrivateDataOverLocalLimit {
        /// The PD_Length received.
        length: usize,
        /// The configured limit ([`StartupConfig::max_private_data`](super::StartupConfig)).
        limit: usize,
    },
    /// RFC 5044 §7.1.2 rules 2, 3, 9: the stream ended inside a startup
    /// frame (the private data does not match PD_Length): the frame is
    /// improperly formatted.
    #[error("stream ended inside a startup frame: {received} octets of {expected:?}")]
    Truncated {
        /// Octets of the frame received.
        received: usize,
        /// Octets the frame needs, once its header was complete.
        expected: Option<usize>,
    },
    /// RFC 6581: the enhanced flag is set but PD_Length cannot hold the
    /// four IRD/ORD octets.
    #[error("enhanced flag set with PD_Length {pd_length}, less than 4")]
    EnhancedDataMissing {
        /// The PD_Length received.
        pd_length: u16,
    },
    /// RFC 6581: the Request carried enhanced data and the Reply, at
    /// revision 2, does not.
    #[error("revision 2 Reply to an enhanced Request lacks the enhanced data")]
    ReplyNotEnhanced,
    /// The Reply carries enhanced data although the Request did not.
    #[error("Reply carries enhanced data the Request did not offer")]
    UnexpectedEnhancedReply,
    /// RFC 5044 §7.1.1 M: the peer needs markers in what this end sends and
    /// this end is configured not to send them. A responder refuses the
    /// request ([`Event::Refused`](super::Event::Refused)).
    #[error(
        "peer requires markers, which this end does not send (detected by the {detected_by:?})"
    )]
    MarkersRefused {
        /// The end that refused.
        detected_by: Role,
    },
    /// [`CrcPolicy::Required`](super::CrcPolicy): the peer's frame did not
    /// set C. A responder refuses the request.
    #[error("CRC required but the peer's frame did not set C (detected by the {detected_by:?})")]
    CrcRefused {
        /// The end that refused.
        detected_by: Role,
    },
    /// RFC 6581: the responder's ORD exceeds the initiator's IRD and
    /// negotiation is strict (LLP code 0x06).
    #[error("insufficient IRD: ours is {ird}, the responder's ORD is {peer_ord}")]
    InsufficientIrd {
        /// This initiator's IRD.
        ird: u16,
        /// The ORD the responder replied with.
        peer_ord: u16,
    },
    /// RFC 6581: peer-to-peer mode without an RTR type both ends accept
    /// (LLP code 0x07). A responder refuses the request.
    #[error("no matching RTR type: offered {offered:?}, other side {other:?} (detected by the {detected_by:?})")]
    NoMatchingRtr {
        /// The types the initiator offered.
        offered: RtrTypes,
        /// Responder: the types it accepts. Initiator: the types the
        /// Reply selected.
        other: RtrTypes,
        /// The end that found no match.
        detected_by: Role,
    },
    /// RFC 5044 §8 code 1: the stream ended (FIN) before a startup frame
    /// began, or while the application was deciding.
    #[error("connection closed while waiting for the {waiting_for:?}")]
    ConnectionClosed {
        /// What this end was waiting for.
        waiting_for: Awaiting,
    },
    /// RFC 5044 §7.1.2 rule 8: no octet of a Request arrived before the
    /// timeout, the sign of a responder/responder startup.
    #[error("responder/responder startup: no MPA Request before the timeout")]
    ResponderResponder,
    /// RFC 5044 §7.1.2 rule 10: the startup did not complete in time.
    #[error("timed out waiting for the {waiting_for:?} ({received} octets received)")]
    Timeout {
        /// What this end was waiting for.
        waiting_for: Awaiting,
        /// Octets of the awaited frame received so far.
        received: usize,
    },
    /// Local: private data handed to this end for sending is longer than
    /// the frame can carry.
    #[error("private data of {length} octets is longer than the {max} a revision {revision} frame can carry")]
    LocalPrivateDataTooLong {
        /// Octets given.
        length: usize,
        /// Octets the frame can carry (enhanced octets already deducted).
        max: usize,
        /// The frame's revision.
        revision: Revision,
    },
    /// Local: the configuration is inconsistent.
    #[error("invalid startup configuration: {0}")]
    InvalidConfig(ConfigError),
    /// Local: an application call that the machine's state does not allow
    /// (for example `accept` before a Request arrived, or twice).
    #[error("call not allowed in state {0:?}")]
    WrongState(super::State),
}

/// What is inconsistent in a startup configuration (or, for the last two,
/// in a frame this end was about to emit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `min_revision` is above `max_revision`.
    #[error("min_revision is above max_revision")]
    RevisionRange,
    /// IRD and ORD are 14-bit values (at most 16383).
    #[error("IRD and ORD are 14-bit values (at most 16383), not {0}")]
    IrdOrdTooLarge(u16),
    /// Peer-to-peer mode needs revision 2 with enhanced data.
    #[error("peer-to-peer mode needs revision 2 with enhanced data")]
    PeerToPeerNeedsEnhanced,
    /// Peer-to-peer mode needs at least one RTR type.
    #[error("peer-to-peer mode needs at least one RTR type")]
    NoRtrType,
    /// A Read RTR, the only one offered, needs an ORD of at least 1.
    #[error("a Read RTR needs an ORD of at least 1")]
    ReadRtrWithoutOrd,
    /// Enhanced data needs revision 2.
    #[error("enhanced data needs revision 2")]
    EnhancedNeedsRev2,
    /// The buffer to emit a frame into is too small.
    #[error("emit buffer too small")]
    EmitBufferTooSmall,
}

impl StartupError {
    /// The MPA error code for this failure (RFC 5044 §8, RFC 6581), as a
    /// Terminate message would carry it. Local errors (configuration,
    /// misuse of the API) report 0x05, local catastrophic; they never reach
    /// the wire.
    pub fn llp_error_code(&self) -> LlpErrorCode {
        match self {
            Self::ConnectionClosed { .. } | Self::ResponderResponder | Self::Timeout { .. } => {
                LlpErrorCode::ConnectionLost
            }
            Self::InsufficientIrd { .. } => LlpErrorCode::InsufficientIrd,
            Self::NoMatchingRtr { .. } => LlpErrorCode::NoMatchingRtr,
            Self::LocalPrivateDataTooLong { .. } | Self::InvalidConfig(_) | Self::WrongState(_) => {
                LlpErrorCode::LocalCatastrophic
            }
            Self::BadKey { .. }
            | Self::InitiatorInitiator
            | Self::UnexpectedReply
            | Self::UnsupportedRevision { .. }
            | Self::ReplyRevisionTooHigh { .. }
            | Self::PrivateDataTooLong { .. }
            | Self::PrivateDataOverLocalLimit { .. }
            | Self::Truncated { .. }
            | Self::EnhancedDataMissing { .. }
            | Self::ReplyNotEnhanced
            | Self::UnexpectedEnhancedReply
            | Self::MarkersRefused { .. }
            | Self::CrcRefused { .. } => LlpErrorCode::InvalidStartupFrame,
        }
    }

    /// Whether the TCP connection must be closed.
    ///
    /// True for every improperly formatted frame (RFC 5044 §7.1.2 rules 2,
    /// 3, 5, 9), timeouts, a lost connection, and every failure the
    /// initiator detects after a valid Reply (the responder is then in full
    /// operation and only a Terminate and a close tell it): that is, for
    /// every error a `handle_*` call returns. False for a responder's
    /// policy refusal ([`Event::Refused`](super::Event::Refused)): it has
    /// queued a Reply with R set and, as for any rejection, "MUST exit MPA,
    /// leaving the TCP connection open" (rule 2); the upper layer may close
    /// it. False for local API errors, which change nothing.
    //= rfc5044#7.1.2
    //# If the MPA Request Frame is improperly formatted, the implementation MUST close the TCP
    //# connection and exit MPA.
    //= rfc5044#7.1.2
    //# If the MPA Reply Frame is improperly formatted, the implementation MUST close the TCP
    //# connection and exit MPA.
    //= rfc5044#8
    //# Invalid MPA Request Frame or MPA Response Frame received. In this case, the TCP
    //# connection MUST be immediately closed.
    pub fn closes_connection(&self) -> bool {
        match self {
            Self::MarkersRefused { detected_by }
            | Self::CrcRefused { detected_by }
            | Self::NoMatchingRtr { detected_by, .. } => *detected_by == Role::Initiator,
            Self::LocalPrivateDataTooLong { .. } | Self::InvalidConfig(_) | Self::WrongState(_) => {
                false
            }
            _ => true,
        }
    }

    /// Whether this end queued a Terminate to transmit before closing:
    /// the initiator's failures after a valid Reply (RFC 6581, codes 0x06
    /// and 0x07), when the responder is already in full operation.
    pub fn terminate_queued(&self) -> bool {
        matches!(
            self,
            Self::InsufficientIrd { .. }
                | Self::NoMatchingRtr {
                    detected_by: Role::Initiator,
                    ..
                }
        )
    }

    /// Whether this end queued a rejecting Reply (R set) to transmit before
    /// stopping.
    pub fn reply_queued(&self) -> bool {
        matches!(
            self,
            Self::MarkersRefused {
                detected_by: Role::Responder
            } | Self::CrcRefused {
                detected_by: Role::Responder
            } | Self::NoMatchingRtr {
                detected_by: Role::Responder,
                ..
            }
        )
    }

    /// The error for a format problem found by the frame codec.
    pub(crate) fn from_frame(error: FrameError, expected: FrameKind) -> Self {
        match error {
            FrameError::Truncated { needed, available } => Self::Truncated {
                received: available,
                expected: Some(needed),
            },
            FrameError::BadKey { seen } => Self::BadKey { expected, seen },
            FrameError::UnknownRevision(revision) => Self::UnsupportedRevision { revision },
            FrameError::PrivateDataTooLong {
                revision,
                length,
                max,
            } => Self::PrivateDataTooLong {
                revision,
                length,
                max,
            },
            FrameError::EnhancedDataMissing { pd_length } => {
                Self::EnhancedDataMissing { pd_length }
            }
            // Emit-side errors: the machines check lengths before emitting.
            FrameError::EnhancedNeedsRev2(_) => Self::InvalidConfig(ConfigError::EnhancedNeedsRev2),
            FrameError::BufferTooSmall { .. } => {
                Self::InvalidConfig(ConfigError::EmitBufferTooSmall)
            }
        }
    }
}

/// Checks an IRD or ORD configuration value.
pub(crate) fn check_ird_ord(value: u16) -> Result<(), StartupError> {
    if value > MAX_IRD_ORD {
        Err(StartupError::InvalidConfig(ConfigError::IrdOrdTooLarge(
            value,
        )))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_close() {
        let bad_key = StartupError::BadKey {
            expected: FrameKind::Reply,
            seen: [0; 16],
        };
        assert_eq!(bad_key.llp_error_code(), LlpErrorCode::InvalidStartupFrame);
        assert!(bad_key.closes_connection());
        assert!(!bad_key.reply_queued());

        let ird = StartupError::InsufficientIrd {
            ird: 1,
            peer_ord: 2,
        };
        assert_eq!(ird.llp_error_code().code(), 0x06);
        assert!(ird.closes_connection());
        assert!(ird.terminate_queued());
        assert!(!bad_key.terminate_queued());

        for (role, closes) in [(Role::Initiator, true), (Role::Responder, false)] {
            let rtr = StartupError::NoMatchingRtr {
                offered: RtrTypes::NONE,
                other: RtrTypes::NONE,
                detected_by: role,
            };
            assert_eq!(rtr.llp_error_code().code(), 0x07);
            assert_eq!(rtr.closes_connection(), closes);
            assert_eq!(rtr.reply_queued(), !closes);
            assert_eq!(rtr.terminate_queued(), closes);
            let markers = StartupError::MarkersRefused { detected_by: role };
            assert_eq!(markers.llp_error_code().code(), 0x04);
            assert_eq!(markers.closes_connection(), closes);
        }

        let timeout = StartupError::Timeout {
            waiting_for: Awaiting::Reply,
            received: 3,
        };
        assert_eq!(timeout.llp_error_code().code(), 0x01);
        assert!(timeout.closes_connection());
        assert_eq!(
            StartupError::ResponderResponder.llp_error_code().code(),
            0x01
        );
        let eof = StartupError::Truncated {
            received: 5,
            expected: None,
        };
        assert_eq!(eof.llp_error_code().code(), 0x04);
        assert!(!StartupError::InvalidConfig(ConfigError::RevisionRange).closes_connection());
    }
}
