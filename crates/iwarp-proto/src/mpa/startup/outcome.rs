//! What a startup machine reports: the request a responder must decide on,
//! an established connection, a rejection.

use super::enhanced::{EnhancedData, IrdOrd, RtrType};
use super::error::StartupError;
use super::frame::Revision;
use super::Role;
use crate::mpa::FramingParams;

/// Something a startup machine reports through `poll_event`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Responder: a valid MPA Request arrived; the application must now
    /// accept or reject it (RFC 5044 §7.1.2 rules 2 and 6).
    RequestReceived(PeerRequest),
    /// Responder: the request asked for something this end does not do
    /// (markers it cannot send, CRC under [`CrcPolicy::Required`], no
    /// common RTR type), so it was refused without asking the application.
    /// A Reply with R set is queued; MPA is over and, as for any rejection,
    /// the TCP connection is left open (RFC 5044 §7.1.2 rule 2). The error
    /// names the reason and its LLP code.
    ///
    /// [`CrcPolicy::Required`]: super::CrcPolicy::Required
    Refused(StartupError),
    /// Startup is over: full operation may begin with these parameters.
    Established(Established),
    /// Initiator: the responder rejected the connection (R=1). MPA is over;
    /// the TCP connection is left open (RFC 5044 §7.1.2 rule 3).
    Rejected(PeerRejection),
}

/// A responder's view of a valid MPA Request, and what accepting it would
/// settle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRequest {
    /// The revision the initiator sent.
    pub revision: Revision,
    /// The revision the Reply will carry: the lower of the request's and
    /// this end's highest.
    pub reply_revision: Revision,
    /// The initiator's M bit: it needs markers in what this end sends.
    pub markers: bool,
    /// The initiator's C bit.
    pub crc: bool,
    /// The initiator's enhanced words (IRD, ORD, P2P, offered RTR types),
    /// for a revision 2 request with the enhanced flag.
    pub enhanced: Option<EnhancedData>,
    /// The application's private data (enhanced octets removed).
    pub private_data: Vec<u8>,
    /// The framing accepting would give this end.
    pub framing: FramingParams,
    /// The IRD/ORD accepting would give this end, at most (the application
    /// may lower them when it accepts).
    pub ird_ord: Option<IrdOrd>,
    /// The RTR type selected for peer-to-peer mode, which the initiator
    /// will send as its first FPDU.
    pub rtr: Option<RtrType>,
}

/// A connection ready for full operation.
#[derive(Debug, Clone, PartialEq, Eq)]
//= rfc5044#7.1
//# A DDP endpoint MUST be "bound" to the MPA connection at entry to this phase.
pub struct Established {
    /// This end's role.
    pub role: Role,
    /// The revision both ends settled on; `None` for the immediate-start
    /// profile, which exchanges no startup frames.
    pub revision: Option<Revision>,
    /// CRC and markers, from this end's point of view. The two ends'
    /// values mirror each other ([`FramingParams::mirrored`]).
    pub framing: FramingParams,
    /// This end's IRD and ORD, when revision 2 enhanced data was exchanged.
    pub ird_ord: Option<IrdOrd>,
    /// The RTR message of peer-to-peer mode: the initiator sends it as its
    /// first FPDU, the responder waits for it.
    pub rtr: Option<RtrType>,
    /// The peer's application private data (enhanced octets removed).
    pub private_data: Vec<u8>,
}

impl Established {
    /// The RTR message this end must send as its first FPDU, if any.
    //= rfc6581#4
    //# The Initiator MUST send the selected zero-length RTR message as its first FPDU, which
    //# lets the Responder send.
    pub fn rtr_to_send(&self) -> Option<RtrType> {
        match self.role {
            Role::Initiator => self.rtr,
            Role::Responder => None,
        }
    }

    /// The RTR message this end expects as the peer's first FPDU, if any.
    pub fn rtr_to_expect(&self) -> Option<RtrType> {
        match self.role {
            Role::Initiator => None,
            Role::Responder => self.rtr,
        }
    }

    /// RFC 5044 §7.1.2 rule 4: a responder "MUST receive and validate at
    /// least one FPDU before sending any FPDUs or Markers". True for a
    /// responder that went through startup frames; the immediate-start
    /// profile has no such rule.
    //= rfc5044#7.1.2
    //# MPA Responder mode implementations MUST receive and validate at least one FPDU before
    //# sending any FPDUs or Markers.
    pub fn must_receive_before_sending(&self) -> bool {
        self.role == Role::Responder && self.revision.is_some()
    }
}

/// A Reply with R=1, as the initiator received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRejection {
    /// The Reply's revision.
    pub revision: Revision,
    /// The responder's application private data (enhanced octets removed),
    /// typically the reason.
    pub private_data: Vec<u8>,
}
