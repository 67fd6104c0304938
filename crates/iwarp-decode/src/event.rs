//! What the decoder reports: one [`Record`] per event, typed.
//!
//! Values are numbers, enums and the protocol crate's own reprs
//! ([`SegmentHeader`], [`ReadRequest`], [`TerminateMessage`], [`STag`](iwarp_proto::memory::STag)),
//! never preformatted text: a consumer filters and computes on them, and
//! the words come from `Display` impls (those of `iwarp_proto`'s pretty
//! printers, and the ones here). With the `serde` feature every type is
//! `Serialize`; STags, tagged offsets and CRC values are written as
//! hexadecimal strings (`"0x…"`), as people write them and because a 64-bit
//! tagged offset does not fit every JSON reader's numbers.

use std::net::SocketAddr;

use iwarp_proto::ddp::SegmentHeader;
use iwarp_proto::ift::Indication;
use iwarp_proto::mpa::startup::{EnhancedData, FrameError};
use iwarp_proto::rdmap::pretty::Pdu;
use iwarp_proto::rdmap::{Opcode, ReadRequest, TerminateMessage};

pub use crate::checks::{Finding, FindingKind};
pub use crate::note::{Level, Note};
pub use crate::ops::{Operation, OperationKind};

/// One reported event, with where and when it happened.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Record {
    /// The capture frame whose octets completed it (1-based, as Wireshark
    /// numbers frames); 0 for what is found at the end of the capture.
    pub frame: u64,
    /// Seconds since the first frame of the capture.
    pub time: f64,
    /// The connection, numbered from 1 in order of appearance.
    pub connection: usize,
    /// The sending end.
    pub src: SocketAddr,
    /// The receiving end.
    pub dst: SocketAddr,
    /// What happened.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub event: Event,
}

/// The kinds of event.
///
/// Records pass through a reused buffer, so the PDU and the operation are
/// held inline: boxing them would allocate once per PDU.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "type", rename_all = "snake_case")
)]
pub enum Event {
    /// An MPA Request or Reply frame.
    MpaStartup(StartupFrameInfo),
    /// An IFT Adaption Indication.
    IftIndication(IndicationInfo),
    /// The framing this direction uses from here on, and why.
    Framing(FramingInfo),
    /// A framed PDU (MPA FPDU or IFT frame) and the DDP/RDMAP message in it.
    Pdu(PduInfo),
    /// A PDU found whole and valid ahead of a hole in the stream: what an
    /// out-of-order receiver could place before the hole fills. It is
    /// reported again, as a [`Event::Pdu`], when decoding reaches it in
    /// order.
    Placeable(PlaceableInfo),
    /// Octets of this direction missing from the capture.
    Gap(GapInfo),
    /// Framing found again after a gap or an error.
    Resync(ResyncInfo),
    /// A decision, a warning, or an error the decoding itself met.
    Note(Note),
    /// A stateful check failed: something no single PDU shows.
    Finding(Finding),
    /// A whole RDMA operation, rebuilt from its PDUs.
    Operation(Operation),
}

/// Request or Reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum StartupKind {
    /// An MPA Request frame.
    Request,
    /// An MPA Reply frame.
    Reply,
    /// Neither key (an invalid frame).
    Unknown,
}

/// An MPA Request or Reply frame (RFC 5044 §7.1.1, RFC 6581).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StartupFrameInfo {
    /// TCP stream offset of the frame (octets since the SYN).
    pub offset: u64,
    /// Request or Reply.
    pub kind: StartupKind,
    /// The flags octet as sent.
    pub flags: u8,
    /// M: the sender wants markers in what it receives.
    pub markers: bool,
    /// C: the sender asks for CRC.
    pub crc: bool,
    /// R: rejected (Reply).
    pub rejected: bool,
    /// The enhanced-establishment flag (0x10).
    pub enhanced_flag: bool,
    /// The Rev field.
    pub revision: u8,
    /// The PD_Length field.
    pub pd_length: u16,
    /// IRD/ORD and peer-to-peer words (revision 2 with the enhanced flag).
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "crate::ser::enhanced_opt"
        )
    )]
    pub enhanced: Option<EnhancedData>,
    /// The application's private data (after the enhanced words).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::bytes"))]
    pub private_data: Vec<u8>,
    /// Why the frame is not valid, if it is not.
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "crate::ser::display_opt"
        )
    )]
    pub error: Option<FrameError>,
}

/// An IFT Adaption Indication (draft-williams-iwarp-ift-01 §4).
///
/// Serialized (feature `serde`) with the indication's fields flattened in.
#[derive(Debug, Clone)]
pub struct IndicationInfo {
    /// TCP stream offset of the indication.
    pub offset: u64,
    /// The indication, when it is valid.
    pub fields: Option<Indication>,
    /// Why it is not valid, if it is not.
    pub error: Option<iwarp_proto::ift::IndicationError>,
}

/// MPA or IFT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum FramingKind {
    /// MPA FPDUs.
    Mpa,
    /// IFT frames.
    Ift,
}

/// How a direction treats a CRC field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum CrcUse {
    /// Negotiated on: checked.
    On,
    /// Negotiated off: the field is there and means nothing (MPA), or is
    /// absent (IFT).
    Off,
    /// On the wire but not checked ([`crate::Options::check_crc`] off, or
    /// IFT's IH/IP).
    Unchecked,
    /// Not known (no startup seen): checked; if the first FPDU fails with
    /// a zero CRC field, CRC is taken as off from then on.
    Auto,
}

/// Where a direction's framing settings come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum Basis {
    /// The MPA Request and Reply.
    StartupFrames,
    /// The two IFT Adaption Indications.
    AdaptionIndications,
    /// Only this direction's startup frame was captured: the other end's
    /// choices are assumed.
    OneSidedStartup,
    /// No startup was captured: MPA FPDUs assumed.
    NoStartup,
}

/// The framing of one direction.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FramingInfo {
    /// MPA or IFT.
    pub framing: FramingKind,
    /// TCP stream offset where the framed stream begins.
    pub start: u64,
    /// CRC handling (IFT: the payload CRC).
    pub crc: CrcUse,
    /// IFT only: the header CRC.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub header_crc: Option<CrcUse>,
    /// Marker interval in octets; absent without markers.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub markers: Option<u16>,
    /// IFT only: the VTag every frame must carry.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub vtag: Option<u16>,
    /// The most RDMA Read Requests this direction's sender may have
    /// outstanding (its ORD as negotiated, RFC 6581), when the startup said.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub max_reads: Option<u16>,
    /// Where these settings come from.
    pub basis: Basis,
    /// CRC checking was turned off by the options.
    pub crc_overridden: bool,
    /// Markers were forced on or off by the options.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub markers_overridden: Option<bool>,
}

/// How a CRC field fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum CrcStatus {
    /// Checked and correct.
    Ok,
    /// Checked and wrong.
    Bad,
    /// CRC is not in use on this connection (the field is there, unused).
    Off,
    /// In use but not checked.
    Unchecked,
}

/// A CRC field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CrcInfo {
    /// The verdict.
    pub status: CrcStatus,
    /// The field as received (least significant octet first on the wire).
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "crate::ser::crc_opt"
        )
    )]
    pub received: Option<u32>,
    /// The CRC32c computed over the covered octets, when it differs.
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "crate::ser::crc_opt"
        )
    )]
    pub computed: Option<u32>,
}

impl CrcInfo {
    /// A verdict without values.
    pub const fn status(status: CrcStatus) -> Self {
        Self {
            status,
            received: None,
            computed: None,
        }
    }
}

/// A marker inside a PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MarkerInfo {
    /// Stream offset of the marker.
    pub offset: u64,
    /// Its pointer back to the start of the PDU (MPA FPDUPTR, IFT FramePtr).
    pub pointer: u32,
}

impl MarkerInfo {
    /// The 4-octet markers in `raw`, the PDU's octets from stream offset
    /// `start`: the first at `first`, then every `interval` octets, read
    /// with `decode`.
    pub fn list(
        raw: &[u8],
        start: u64,
        first: u64,
        interval: u64,
        decode: impl Fn([u8; 4]) -> u32,
    ) -> Vec<Self> {
        let end = start + raw.len() as u64;
        let mut markers = Vec::new();
        let mut at = first;
        while at + 4 <= end && interval > 0 {
            let i = usize::try_from(at - start).unwrap_or(usize::MAX);
            if let Some(&[a, b, c, d]) = raw.get(i..i.saturating_add(4)) {
                markers.push(Self {
                    offset: at,
                    pointer: decode([a, b, c, d]),
                });
            }
            at += interval;
        }
        markers
    }
}

/// Payload octets kept with each PDU.
pub const PREVIEW: usize = 32;

/// The first payload octets of a PDU (at most [`PREVIEW`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Preview {
    octets: [u8; PREVIEW],
    len: u8,
}

impl Preview {
    /// The first [`PREVIEW`] octets of `payload`.
    pub fn of(payload: &[u8]) -> Self {
        let n = payload.len().min(PREVIEW);
        let mut octets = [0; PREVIEW];
        octets[..n].copy_from_slice(&payload[..n]);
        Self {
            octets,
            len: n as u8,
        }
    }

    /// The octets.
    pub fn as_bytes(&self) -> &[u8] {
        &self.octets[..usize::from(self.len)]
    }
}

/// A framed PDU and what it carries.
///
/// Serialized (feature `serde`) with the DDP header under `"ddp"` and the
/// RDMAP message under `"rdmap"`.
#[derive(Debug, Clone)]
pub struct PduInfo {
    /// An MPA FPDU or an IFT frame.
    pub framing: FramingKind,
    /// Stream offset of its first octet, counted from the start of framing.
    pub offset: u64,
    /// Octets it takes on the wire, markers included.
    pub wire_len: u64,
    /// The ULPDU (DDP segment) length.
    pub ulpdu_len: usize,
    /// The CRC (MPA), or the payload CRC (IFT).
    pub crc: CrcInfo,
    /// IFT only: the header CRC.
    pub header_crc: Option<CrcInfo>,
    /// IFT only: the VTag.
    pub vtag: Option<u16>,
    /// Markers inside it.
    pub markers: Vec<MarkerInfo>,
    /// The DDP segment, when the ULPDU holds a DDP header: its header, DV,
    /// payload length, and the RDMAP header in its payload.
    pub segment: Option<Pdu>,
    /// Whether RDMAP runs over DDP (always for MPA; IFT's R flag).
    pub rdma: bool,
    /// DDP payload octets (after the DDP header).
    pub payload_len: usize,
    /// The first payload octets.
    pub payload: Preview,
    /// What is wrong with it, if anything.
    pub errors: Vec<PduError>,
}

impl PduInfo {
    /// The RDMAP opcode, for an RDMA-mode PDU with a defined one.
    pub fn opcode(&self) -> Option<Opcode> {
        self.segment.filter(|_| self.rdma).and_then(|s| s.opcode())
    }

    /// The DDP header.
    pub fn header(&self) -> Option<&SegmentHeader> {
        self.segment.as_ref().map(|s| &s.header)
    }

    /// The Read Request it carries.
    pub fn read_request(&self) -> Option<&ReadRequest> {
        self.segment.as_ref().and_then(|s| s.read_request.as_ref())
    }

    /// The Terminate it carries.
    pub fn terminate(&self) -> Option<&TerminateMessage> {
        self.segment.as_ref().and_then(|s| s.terminate.as_ref())
    }

    /// Whether the CRC (or IFT header CRC) was checked and wrong.
    pub fn crc_bad(&self) -> bool {
        self.crc.status == CrcStatus::Bad
            || self.header_crc.is_some_and(|c| c.status == CrcStatus::Bad)
    }

    /// What to count it as in the summary.
    pub fn message_kind(&self) -> MessageKind {
        match (&self.segment, self.rdma) {
            (None, _) => MessageKind::Malformed,
            (Some(s), true) => match s.opcode() {
                Some(op) => MessageKind::Rdmap(op),
                None => MessageKind::ReservedOpcode,
            },
            (Some(s), false) => match s.header {
                SegmentHeader::Tagged(_) => MessageKind::DdpTagged,
                SegmentHeader::Untagged(_) => MessageKind::DdpUntagged,
            },
        }
    }
}

/// A PDU found ahead of a hole (the placement view, [`crate::ahead`]).
///
/// Serialized (feature `serde`) with the PDU's fields flattened in.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PlaceableInfo {
    /// Stream offset (from the start of framing) of the first octet still
    /// missing before it.
    pub hole: u64,
    /// Its DDP header names the buffer its payload goes to (an RDMA Write,
    /// a Read Response, a Send): a receiver could place it now. Otherwise
    /// (a Read Request, a Terminate, no payload) it waits for delivery.
    pub placeable: bool,
    /// The PDU (its CRC checked, its markers not listed).
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub pdu: PduInfo,
}

/// What is wrong with a PDU on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PduError {
    /// The CRC field does not match (RFC 5044 §8 code 2).
    #[error("CRC error: computed {computed:#010x}, received {received:#010x}")]
    Crc {
        /// What the octets give.
        computed: u32,
        /// What the field says.
        received: u32,
    },
    /// IFT: the payload CRC does not match.
    #[error("payload CRC error: computed {computed:#010x}, received {received:#010x}")]
    PayloadCrc {
        /// What the octets give.
        computed: u32,
        /// What the field says.
        received: u32,
    },
    /// The ULPDU is shorter than the DDP header its T flag announces.
    #[error("malformed DDP header: {len} octets, {needed} needed")]
    ShortDdpHeader {
        /// Octets present.
        len: usize,
        /// Octets needed.
        needed: usize,
    },
    /// RFC 5041 §4.1: DV is 1.
    #[error("DDP version {0} (DV must be 1)")]
    DdpVersion(u8),
    /// RFC 5040 §4.2: RV is 1.
    #[error("RDMAP version {0} (RV must be 1)")]
    RdmapVersion(u8),
    /// RFC 5040 §4.3: opcodes 8 to 15 are reserved.
    #[error("RDMAP opcode {0} is reserved (RFC 5040 §4.3)")]
    ReservedOpcode(u8),
    /// An untagged message in a tagged header.
    #[error("{0} must use the untagged buffer model")]
    MustBeUntagged(Opcode),
    /// A tagged message in an untagged header.
    #[error("{0} must use the tagged buffer model")]
    MustBeTagged(Opcode),
    /// An untagged message on another queue than its own.
    #[error("{opcode} belongs on QN {expected}, not QN {qn}")]
    WrongQueue {
        /// The message.
        opcode: Opcode,
        /// Its queue.
        expected: u32,
        /// The header's.
        qn: u32,
    },
    /// RFC 5040 §4.4: the Read Request header is the whole payload.
    #[error("Read Request carries {0} octets, not 28")]
    ReadRequestLength(usize),
    /// A Terminate without its control word.
    #[error("Terminate carries {0} octets, fewer than its 4-octet control field")]
    ShortTerminate(usize),
    /// IFT: the frame's header_size disagrees with the DDP header's T flag.
    #[error("header_size {header_size} but the DDP header is {ddp} octets")]
    HeaderSize {
        /// The frame's.
        header_size: usize,
        /// The DDP header's.
        ddp: usize,
    },
}

impl PduError {
    /// A CRC error rather than a header error.
    pub fn is_crc(&self) -> bool {
        matches!(self, Self::Crc { .. } | Self::PayloadCrc { .. })
    }
}

/// What a PDU counts as in the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageKind {
    /// An MPA Request frame.
    MpaRequest,
    /// An MPA Reply frame.
    MpaReply,
    /// An invalid startup frame.
    MpaInvalid,
    /// An IFT Adaption Indication.
    IftIndication,
    /// An RDMAP message.
    Rdmap(Opcode),
    /// An RDMAP opcode that is reserved.
    ReservedOpcode,
    /// DDP alone (IFT's DDP mode), tagged.
    DdpTagged,
    /// DDP alone, untagged.
    DdpUntagged,
    /// A ULPDU too short for a DDP header.
    Malformed,
}

impl std::fmt::Display for MessageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MpaRequest => f.write_str("MPA Request"),
            Self::MpaReply => f.write_str("MPA Reply"),
            Self::MpaInvalid => f.write_str("MPA startup (invalid)"),
            Self::IftIndication => f.write_str("IFT Adaption Indication"),
            Self::Rdmap(op) => write!(f, "{op}"),
            Self::ReservedOpcode => f.write_str("reserved opcode"),
            Self::DdpTagged => f.write_str("DDP tagged"),
            Self::DdpUntagged => f.write_str("DDP untagged"),
            Self::Malformed => f.write_str("malformed"),
        }
    }
}

/// What the decoder does about missing octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum GapAction {
    /// Look for the next marker.
    Resync,
    /// Hunt for the next FPDU by its CRC.
    Hunt,
    /// Go on at the PDU right after it, found ahead of it (the placement
    /// view).
    Ahead,
    /// This direction's decoding stops.
    Stop,
    /// Nothing was being decoded.
    None,
}

/// Octets missing from the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GapInfo {
    /// TCP stream offset of the first missing octet.
    pub offset: u64,
    /// How many are missing.
    pub octets: u64,
    /// What the decoder does about it.
    pub action: GapAction,
}

/// How framing was found again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "method", rename_all = "snake_case")
)]
pub enum ResyncMethod {
    /// A marker's FPDUPTR pointed at an FPDU.
    Marker {
        /// Stream offset of the marker.
        marker: u64,
        /// Its FPDUPTR.
        pointer: u16,
    },
    /// Two FPDUs in a row whose CRCs match (RFC 5044 §4.3's CRC as a
    /// boundary test).
    Crc {
        /// Candidate offsets tried.
        candidates: u64,
    },
    /// The PDU right after the hole had been found whole and valid ahead
    /// of it, through a marker, the lengths or the start of its segment
    /// (the placement view).
    Ahead,
}

/// Framing found again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ResyncInfo {
    /// MPA or IFT.
    pub framing: FramingKind,
    /// Stream offset (from the start of framing) of the PDU decoding
    /// resumes at.
    pub offset: u64,
    /// Octets skipped to get there (captured and not).
    pub skipped: u64,
    /// How it was found.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub method: ResyncMethod,
}
