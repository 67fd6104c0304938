//! The MPA startup phase: Request/Reply frames and the machines that
//! exchange them.
//!
//! Before FPDUs flow, the initiator sends an MPA Request frame and the
//! responder answers with an MPA Reply frame (RFC 5044 §7.1). The exchange
//! settles the revision (0, 1 or 2), CRC and markers, optionally carries
//! private data for the applications, and at revision 2 (RFC 6581)
//! exchanges IRD/ORD and the ready-to-receive message of peer-to-peer mode.
//! The legacy immediate-start profile (draft-culley-iwarp-mpa-02) has no
//! frames at all.

mod enhanced;
mod frame;

pub use enhanced::{
    EnhancedData, IrdOrd, RtrType, RtrTypes, ENHANCED_DATA_LEN, IRD_FLAG_PEER_TO_PEER,
    IRD_FLAG_SEND_RTR, MAX_IRD_ORD, ORD_FLAG_READ_RTR, ORD_FLAG_WRITE_RTR,
};
pub use frame::{
    FrameError, FrameKind, Revision, StartupFrame, StartupFrameRepr, FLAG_CRC, FLAG_ENHANCED,
    FLAG_GSO_EXPERIMENT, FLAG_MARKERS, FLAG_REJECT, HEADER_LEN, KEY_LEN, MAX_PRIVATE_DATA,
    MAX_PRIVATE_DATA_REV0, REPLY_KEY, REQUEST_KEY,
};
