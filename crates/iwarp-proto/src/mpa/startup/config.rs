//! What an end offers and accepts during the MPA startup.
//!
//! One [`StartupConfig`] serves both roles; fields that only one role reads
//! say so. The defaults connect, unconfigured, to Linux `siw` (which sends
//! revision 2 with enhanced data, accepts revisions 0 to 2, refuses markers,
//! keeps private data to 256 octets, does not ask for CRC but honours a
//! request) and to Chelsio RNICs (which want CRC): revision 2 with enhanced
//! data, CRC asked for, no markers asked for, IRD/ORD 16/16, no
//! peer-to-peer mode, any revision 0 to 2 accepted.

use std::time::Duration;

use super::enhanced::RtrTypes;
use super::error::{check_ird_ord, ConfigError, StartupError};
use super::frame::{Revision, MAX_PRIVATE_DATA};

/// Whether this end asks for CRC, and what it insists on.
///
/// Whatever the policy, CRC is on when either frame sets C: RFC 5044 §7.1.1
/// says CRCs "MUST be generated and checked by both endpoints" in that
/// case, so a peer's request is always honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
//= draft-ietf-rddp-mpa-01#5.2
//# An MPA implementation MUST implement CRC support and MUST either: (1) always use CRCs or (2)
//# only negotiate the non-use of CRC on the explicit request of the system administrator, via
//# an interface not defined in this spec.
//= draft-ietf-rddp-mpa-01#5.2
//# The default configuration for a connection MUST be to use CRCs.
pub enum CrcPolicy {
    /// Send C=1 and insist that the peer's frame sets C too. Startup fails
    /// otherwise: the initiator reports [`StartupError::CrcRefused`] on a
    /// Reply with C=0; the responder answers a Request with C=0 with a
    /// rejecting Reply. The peer's C bit is the only evidence at startup
    /// that it will check CRCs; note that Linux `siw`, as initiator, never
    /// sets C, so a responder with this policy refuses it.
    Required,
    /// Send C=1: CRC is on for the connection. The default; Chelsio RNICs
    /// ask for CRC as well, `siw` honours the request.
    #[default]
    Preferred,
    /// Send C=0: CRC is on only if the peer's frame sets C.
    Off,
}

impl CrcPolicy {
    /// The C bit this end sends in its own frame.
    pub const fn sends_crc(self) -> bool {
        !matches!(self, Self::Off)
    }
}

/// How an initiator treats a responder's ORD above its own IRD (RFC 6581).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum IrdOrdNegotiation {
    /// Raise this end's IRD to the responder's ORD and carry on, so that
    /// every Read the responder may have outstanding is served. Linux
    /// `siw` defaults to this ("relaxed IRD negotiation").
    #[default]
    Relaxed,
    /// Fail with LLP code 0x06, insufficient IRD, as RFC 6581 describes
    /// (the Terminate carrying it is the initiator's first FPDU).
    Strict,
}

/// The configuration of one end of an MPA startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupConfig {
    /// Highest revision this end speaks; the initiator sends it, the
    /// responder replies with the lower of it and the request's.
    pub max_revision: Revision,
    /// Lowest revision this end accepts.
    pub min_revision: Revision,
    /// Initiator: at revision 2, send the enhanced flag and the IRD/ORD
    /// words. (A responder always answers enhanced data with enhanced data
    /// when it replies at revision 2.)
    pub enhanced: bool,
    /// CRC policy.
    pub crc: CrcPolicy,
    /// Ask the peer for markers in what it sends to this end (the M bit).
    pub request_markers: bool,
    /// Whether this end can insert markers when the peer asks for them.
    /// If false, a peer's M=1 fails the startup (the responder rejects).
    pub send_markers_on_request: bool,
    /// Inbound RDMA Read queue depth this end offers (revision 2; at most
    /// 16383). A responder never grants more than this; an initiator
    /// takes the responder's ORD as its IRD, raising it under
    /// [`IrdOrdNegotiation::Relaxed`].
    pub ird: u16,
    /// Outbound RDMA Read queue depth this end asks for (revision 2; at
    /// most 16383). A responder never grants more than this.
    pub ord: u16,
    /// Initiator: how to treat a responder's ORD above our IRD.
    pub ird_ord_negotiation: IrdOrdNegotiation,
    /// Initiator: request peer-to-peer mode (revision 2 with enhanced data),
    /// offering the RTR types of `rtr_types`.
    pub peer_to_peer: bool,
    /// Initiator: RTR types offered in peer-to-peer mode. Responder: RTR
    /// types accepted; it picks one the initiator offered, preferring
    /// Write, then Read, then Send. A zero-length Read RTR takes a Read
    /// slot at both ends: it is neither offered with an ORD of 0 nor
    /// accepted with an IRD of 0.
    pub rtr_types: RtrTypes,
    /// The most private data octets (PD_Length, enhanced octets included)
    /// this end takes from a peer's frame (RFC 5044 §7.1.2 rule 9). Raise it
    /// up to 65535 for revision 0 peers with large private data.
    pub max_private_data: usize,
    /// Responder: how long to wait for the whole Request (Linux `siw`: 5 s).
    pub request_timeout: Duration,
    /// Initiator: how long to wait for the whole Reply (Linux `siw`: 10 s).
    pub reply_timeout: Duration,
    /// Responder: how long the application may take to accept or reject,
    /// counted from the Request's arrival; `None` waits for ever.
    pub decision_timeout: Option<Duration>,
    /// Initiator: how long to send nothing after an accepting Reply
    /// arrived; the machine reports [`Event::Established`] only then, so
    /// the first FPDU (the RTR, in peer-to-peer mode) waits that long.
    /// No octet changes, only when they leave.
    ///
    /// Linux `siw`'s responder sends its Reply before it hooks the socket
    /// to its queue pair (`siw_accept`, `siw_cm.c`: the endpoint is already
    /// in RDMA mode, so the connection manager's data-ready callback
    /// ignores what arrives, and the queue pair's callback is installed
    /// only after the Reply is out). An FPDU arriving in between is not
    /// read until another segment arrives; an initiator that sends one
    /// message and waits for the answer then waits for ever. The window is
    /// microseconds on a quiet host and grows with the host's load and
    /// slowness (in an emulated guest, most first connections after boot
    /// and one in four later ones hit it); holding the first FPDU past it
    /// avoids the hang. It costs this much latency once per connection,
    /// before its first message. Zero sends at once.
    ///
    /// [`Event::Established`]: super::Event::Established
    pub hold_after_reply: Duration,
}

/// The default of [`StartupConfig::hold_after_reply`]: in the siw rig (an
/// emulated guest), 10 of 10 first connections after a fresh boot and 50
/// of 50 to one server got through with it; 10 ms let 1 in 15 first
/// connections hang (`docs/interop.md`).
pub const DEFAULT_HOLD_AFTER_REPLY: Duration = Duration::from_millis(25);

impl Default for StartupConfig {
    fn default() -> Self {
        Self {
            max_revision: Revision::Rev2,
            min_revision: Revision::Rev0,
            enhanced: true,
            crc: CrcPolicy::Preferred,
            request_markers: false,
            send_markers_on_request: true,
            ird: 16,
            ord: 16,
            ird_ord_negotiation: IrdOrdNegotiation::Relaxed,
            peer_to_peer: false,
            rtr_types: RtrTypes::WRITE_READ,
            max_private_data: MAX_PRIVATE_DATA,
            request_timeout: Duration::from_secs(5),
            reply_timeout: Duration::from_secs(10),
            decision_timeout: Some(Duration::from_secs(10)),
            hold_after_reply: DEFAULT_HOLD_AFTER_REPLY,
        }
    }
}

impl StartupConfig {
    /// A configuration that behaves as Linux `siw` does by default: no CRC
    /// asked for (a peer's request honoured), no markers in either
    /// direction, RTR by zero-length Write or Read, private data up to 256
    /// octets. Useful to stand in for `siw` in tests.
    pub fn siw_like() -> Self {
        Self {
            crc: CrcPolicy::Off,
            send_markers_on_request: false,
            max_private_data: 256,
            ..Self::default()
        }
    }

    /// Checks that the configuration is consistent.
    pub fn validate(&self) -> Result<(), StartupError> {
        if self.min_revision > self.max_revision {
            return Err(StartupError::InvalidConfig(ConfigError::RevisionRange));
        }
        check_ird_ord(self.ird)?;
        check_ird_ord(self.ord)?;
        Ok(())
    }

    /// Checks what the initiator additionally needs.
    pub(crate) fn validate_initiator(&self) -> Result<(), StartupError> {
        self.validate()?;
        if self.peer_to_peer {
            if !self.sends_enhanced() {
                return Err(StartupError::InvalidConfig(
                    ConfigError::PeerToPeerNeedsEnhanced,
                ));
            }
            if self.rtr_types.is_empty() {
                return Err(StartupError::InvalidConfig(ConfigError::NoRtrType));
            }
            if self.ord == 0 && !self.rtr_types.write && !self.rtr_types.send {
                return Err(StartupError::InvalidConfig(ConfigError::ReadRtrWithoutOrd));
            }
        }
        Ok(())
    }

    /// Whether an initiator with this configuration sends enhanced data.
    pub fn sends_enhanced(&self) -> bool {
        self.enhanced && self.max_revision == Revision::Rev2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    //= draft-ietf-rddp-mpa-01#5.2
    //= type=test
    //# An MPA implementation MUST implement CRC support and MUST either: (1) always use CRCs or
    //# (2) only negotiate the non-use of CRC on the explicit request of the system
    //# administrator, via an interface not defined in this spec.
    //= draft-ietf-rddp-mpa-01#5.2
    //= type=test
    //# The default configuration for a connection MUST be to use CRCs.
    fn defaults_match_the_brief() {
        let c = StartupConfig::default();
        assert_eq!(c.max_revision, Revision::Rev2);
        assert_eq!(c.min_revision, Revision::Rev0);
        assert!(c.sends_enhanced());
        assert_eq!(c.crc, CrcPolicy::Preferred);
        assert!(c.crc.sends_crc());
        assert!(!c.request_markers);
        assert_eq!((c.ird, c.ord), (16, 16));
        assert!(!c.peer_to_peer);
        assert_eq!(c.request_timeout, Duration::from_secs(5));
        assert_eq!(c.reply_timeout, Duration::from_secs(10));
        assert!(c.validate_initiator().is_ok());
    }

    #[test]
    fn inconsistent_configs_are_refused() {
        let c = StartupConfig {
            min_revision: Revision::Rev2,
            max_revision: Revision::Rev1,
            ..StartupConfig::default()
        };
        assert_eq!(
            c.validate(),
            Err(StartupError::InvalidConfig(ConfigError::RevisionRange))
        );
        let c = StartupConfig {
            ird: 0x4000,
            ..StartupConfig::default()
        };
        assert_eq!(
            c.validate(),
            Err(StartupError::InvalidConfig(ConfigError::IrdOrdTooLarge(
                0x4000
            )))
        );
        let c = StartupConfig {
            peer_to_peer: true,
            enhanced: false,
            ..StartupConfig::default()
        };
        assert!(c.validate_initiator().is_err());
        let c = StartupConfig {
            peer_to_peer: true,
            rtr_types: RtrTypes::NONE,
            ..StartupConfig::default()
        };
        assert!(c.validate_initiator().is_err());
        let c = StartupConfig {
            peer_to_peer: true,
            max_revision: Revision::Rev1,
            ..StartupConfig::default()
        };
        assert!(c.validate_initiator().is_err());
    }
}
