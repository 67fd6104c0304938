//! What was settled when a connection was set up.

use iwarp_proto::ift::IftParams;
use iwarp_proto::mpa::startup::{IrdOrd, Revision, Role, RtrType};
use iwarp_proto::mpa::FramingParams;

/// The parameters a connection runs with, as its startup settled them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// This end's MPA role: the initiator sent the MPA Request.
    pub role: Role,
    /// The MPA revision both ends settled on; `None` for the
    /// immediate-start profile, which exchanges no startup frames, and
    /// for IFT.
    pub revision: Option<Revision>,
    /// CRC and markers, from this end's point of view. Under IFT: CRC when
    /// both of IFT's CRCs are checked both ways, markers as negotiated.
    pub framing: FramingParams,
    /// What the IFT negotiation settled, under IFT.
    pub ift: Option<IftParams>,
    /// IRD and ORD when revision 2 enhanced data was exchanged.
    pub ird_ord: Option<IrdOrd>,
    /// The ready-to-receive message of peer-to-peer mode, if used.
    pub rtr: Option<RtrType>,
    /// The peer's private data (without revision 2's enhanced octets).
    pub peer_private_data: Vec<u8>,
    /// The effective maximum segment size TCP reported at setup (it may
    /// grow later: see [`crate::QpStats`]).
    pub emss: usize,
    /// The largest DDP segment this end sent at first (RFC 5044 MULPDU).
    pub mulpdu: usize,
}
