//! What was settled when a connection was set up, for each framing.

use iwarp_proto::ift::{IftParams, RxCrc};
use iwarp_proto::mpa::startup::{IrdOrd, Revision, Role, RtrType};
use iwarp_proto::mpa::FramingParams;

/// The parameters a connection runs with, as its startup settled them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// This end's role: the initiator made the connection (it sent the
    /// MPA Request, or IFT's first Adaption Indication).
    pub role: Role,
    /// What the startup settled, in the terms of the framing used.
    pub framing: FramingInfo,
    /// The effective maximum segment size TCP reported at setup (it may
    /// grow later: see [`crate::QpStats`]).
    pub emss: usize,
    /// The largest DDP segment this end sent at first (RFC 5044 MULPDU).
    pub mulpdu: usize,
}

/// What a connection's startup settled, by framing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FramingInfo {
    /// MPA, after an exchange of startup frames.
    Mpa(MpaInfo),
    /// MPA's legacy immediate-start profile (draft-culley-iwarp-mpa-02):
    /// no startup frames, markers and CRC on both ways
    /// ([`FramingParams::IMMEDIATE_START`]), no private data.
    ImmediateStart,
    /// IFT, as the Adaption Indications settled it.
    Ift(IftParams),
}

/// What an MPA exchange of startup frames settled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MpaInfo {
    /// The revision both ends settled on.
    pub revision: Revision,
    /// CRC and markers, from this end's point of view.
    pub params: FramingParams,
    /// IRD and ORD, when revision 2 enhanced data was exchanged.
    pub ird_ord: Option<IrdOrd>,
    /// The ready-to-receive message of peer-to-peer mode, if used.
    pub rtr: Option<RtrType>,
    /// The peer's private data (without revision 2's enhanced octets).
    pub peer_private_data: Vec<u8>,
}

impl ConnectionInfo {
    /// What the MPA startup frames settled, if there were any.
    pub fn mpa(&self) -> Option<&MpaInfo> {
        match &self.framing {
            FramingInfo::Mpa(m) => Some(m),
            _ => None,
        }
    }

    /// What the IFT negotiation settled, under IFT.
    pub fn ift(&self) -> Option<&IftParams> {
        match &self.framing {
            FramingInfo::Ift(p) => Some(p),
            _ => None,
        }
    }

    /// The peer's private data: empty unless MPA startup frames carried
    /// some.
    pub fn peer_private_data(&self) -> &[u8] {
        self.mpa().map_or(&[], |m| &m.peer_private_data)
    }

    /// CRC and markers from this end's point of view, in MPA's terms for
    /// every framing: under IFT, CRC when both of its CRCs are sent and
    /// checked both ways, markers as negotiated.
    pub fn framing_params(&self) -> FramingParams {
        match &self.framing {
            FramingInfo::Mpa(m) => m.params,
            FramingInfo::ImmediateStart => FramingParams::IMMEDIATE_START,
            FramingInfo::Ift(p) => {
                let checked = |c: RxCrc| c == RxCrc::Checked;
                FramingParams {
                    crc: p.tx.header_crc
                        && p.tx.payload_crc
                        && checked(p.rx.header_crc)
                        && checked(p.rx.payload_crc),
                    send_markers: p.tx.markers.is_some(),
                    receive_markers: p.rx.markers.is_some(),
                }
            }
        }
    }
}
