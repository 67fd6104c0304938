//! What the decoder reports: one [`Record`] per line of output.
//!
//! The same values feed the text output and the JSON output (one JSON
//! object per line, `"type"` naming the event), so the two never disagree.
//! In JSON, counts, lengths, queue numbers, MSNs and offsets are numbers;
//! STags, tagged offsets and CRC values are hexadecimal strings (`"0x…"`),
//! as people write them and because a 64-bit tagged offset does not fit
//! every JSON reader's numbers.

use std::net::SocketAddr;

use serde::Serialize;

/// One reported event, with where and when it happened.
#[derive(Debug, Clone, Serialize)]
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
    #[serde(flatten)]
    pub event: Event,
}

/// The kinds of event.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// An MPA Request or Reply frame.
    MpaStartup(StartupFrameInfo),
    /// An IFT Adaption Indication.
    IftIndication(IndicationInfo),
    /// The framing this direction uses from here on, and why.
    Framing(FramingInfo),
    /// A framed PDU (MPA FPDU or IFT frame) and the DDP/RDMAP message in it.
    Pdu(Box<PduInfo>),
    /// Octets of this direction missing from the capture.
    Gap(GapInfo),
    /// Framing found again after a gap or an error.
    Resync(ResyncInfo),
    /// Anything else worth saying: a warning, an error, a decision taken.
    Note(NoteInfo),
}

/// An MPA Request or Reply frame (RFC 5044 §7.1.1, RFC 6581).
#[derive(Debug, Clone, Serialize)]
pub struct StartupFrameInfo {
    /// TCP stream offset of the frame (octets since the SYN).
    pub offset: u64,
    /// `"request"` or `"reply"`.
    pub kind: &'static str,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enhanced: Option<EnhancedInfo>,
    /// The application's private data (after the enhanced words), in hex.
    pub private_data: String,
    /// Why the frame is not valid, if it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Enhanced connection establishment data (RFC 6581).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EnhancedInfo {
    /// Inbound RDMA Read queue depth.
    pub ird: u16,
    /// Outbound RDMA Read queue depth.
    pub ord: u16,
    /// Peer-to-peer mode asked for or confirmed.
    pub peer_to_peer: bool,
    /// Zero-length Write may be the RTR message.
    pub rtr_write: bool,
    /// Zero-length Read may be the RTR message.
    pub rtr_read: bool,
    /// Zero-length Send may be the RTR message.
    pub rtr_send: bool,
}

/// An IFT Adaption Indication (draft-williams-iwarp-ift-01 §4).
#[derive(Debug, Clone, Serialize)]
pub struct IndicationInfo {
    /// TCP stream offset of the indication.
    pub offset: u64,
    /// Its fields, when it is valid.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub fields: Option<IndicationFields>,
    /// Why it is not valid, if it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The fields of a valid Adaption Indication.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct IndicationFields {
    /// PH: 0 or 1.
    pub phase: u8,
    /// Version.
    pub version: u16,
    /// R: RDMA mode.
    pub rdma: bool,
    /// HC: the sender's frames carry a header CRC.
    pub header_crc: bool,
    /// PC: the sender's frames carry a payload CRC.
    pub payload_crc: bool,
    /// IH: the sender ignores header CRCs it receives.
    pub ignore_header_crc: bool,
    /// IP: the sender ignores payload CRCs it receives.
    pub ignore_payload_crc: bool,
    /// SP: speculative placement permitted.
    pub speculative_placement: bool,
    /// SM: the sender is willing to send markers.
    pub send_markers: bool,
    /// RM with its interval: the sender wants markers at this interval.
    pub receive_markers: Option<u16>,
    /// The sender's VTag.
    pub vtag: u16,
}

/// The framing of one direction.
#[derive(Debug, Clone, Serialize)]
pub struct FramingInfo {
    /// `"mpa"` or `"ift"`.
    pub framing: &'static str,
    /// TCP stream offset where the framed stream begins.
    pub start: u64,
    /// CRC handling: `"on"`, `"off"`, `"unchecked"` (on the wire, not
    /// checked: `--no-crc-check` or IFT's IH/IP), or `"auto"` (not known:
    /// checked, and taken as off if the first CRC field is zero).
    pub crc: &'static str,
    /// IFT only: the header CRC, as `crc`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_crc: Option<&'static str>,
    /// Marker interval in octets; absent without markers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub markers: Option<u16>,
    /// IFT only: the VTag every frame must carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vtag: Option<u16>,
    /// Where these settings come from.
    pub basis: String,
}

/// How a CRC field fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
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
#[derive(Debug, Clone, Serialize)]
pub struct CrcInfo {
    /// The verdict.
    pub status: CrcStatus,
    /// The field as received (least significant octet first on the wire).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<String>,
    /// The CRC32c computed over the covered octets, when it differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub computed: Option<String>,
}

/// A marker inside a PDU.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MarkerInfo {
    /// Stream offset of the marker.
    pub offset: u64,
    /// Its pointer back to the start of the PDU (MPA FPDUPTR, IFT FramePtr).
    pub pointer: u32,
}

/// A framed PDU and what it carries.
#[derive(Debug, Clone, Serialize)]
pub struct PduInfo {
    /// `"mpa"` (an FPDU) or `"ift"` (an IFT frame).
    pub framing: &'static str,
    /// Stream offset of its first octet, counted from the start of framing.
    pub offset: u64,
    /// Octets it takes on the wire, markers included.
    pub wire_len: u64,
    /// The ULPDU (DDP segment) length.
    pub ulpdu_len: usize,
    /// The CRC (MPA), or the payload CRC (IFT).
    pub crc: CrcInfo,
    /// IFT only: the header CRC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_crc: Option<CrcInfo>,
    /// IFT only: the VTag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vtag: Option<u16>,
    /// Markers inside it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub markers: Vec<MarkerInfo>,
    /// The DDP header, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ddp: Option<DdpInfo>,
    /// The RDMAP message, when DDP carries RDMAP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdmap: Option<RdmapInfo>,
    /// DDP payload octets (after the DDP header).
    pub payload_len: usize,
    /// The first payload octets, in hex (at most [`super::ulpdu::PREVIEW`]).
    pub payload: String,
    /// What is wrong with it, if anything.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// A DDP segment header (RFC 5041 §4).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum DdpInfo {
    /// Tagged buffer model.
    Tagged {
        /// L: last segment of the message.
        last: bool,
        /// DV: DDP version.
        dv: u8,
        /// The data sink STag.
        stag: String,
        /// The tagged offset.
        to: String,
    },
    /// Untagged buffer model.
    Untagged {
        /// L: last segment of the message.
        last: bool,
        /// DV: DDP version.
        dv: u8,
        /// Queue number.
        qn: u32,
        /// Message sequence number.
        msn: u32,
        /// Message offset.
        mo: u32,
    },
}

/// An RDMAP message (RFC 5040 §4).
#[derive(Debug, Clone, Serialize)]
pub struct RdmapInfo {
    /// RV: RDMAP version.
    pub rv: u8,
    /// The opcode number.
    pub opcode: u8,
    /// Its name.
    pub name: &'static str,
    /// Solicited event (Send with SE, Send with SE and Invalidate).
    pub solicited: bool,
    /// The STag to invalidate (Send with Invalidate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalidate_stag: Option<String>,
    /// A Read Request's fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_request: Option<ReadRequestInfo>,
    /// A Terminate's fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminate: Option<TerminateInfo>,
}

/// The RDMA Read Request header (RFC 5040 §4.4).
#[derive(Debug, Clone, Serialize)]
pub struct ReadRequestInfo {
    /// Data sink STag (the requester's buffer).
    pub sink_stag: String,
    /// Data sink tagged offset.
    pub sink_to: String,
    /// RDMA Read message size.
    pub size: u32,
    /// Data source STag (the responder's buffer).
    pub source_stag: String,
    /// Data source tagged offset.
    pub source_to: String,
}

/// A Terminate message (RFC 5040 §4.8).
#[derive(Debug, Clone, Serialize)]
pub struct TerminateInfo {
    /// Layer number: 0 RDMAP, 1 DDP, 2 LLP.
    pub layer: u8,
    /// Layer name.
    pub layer_name: &'static str,
    /// Error type.
    pub etype: u8,
    /// Error code.
    pub code: u8,
    /// The error in words.
    pub error: String,
    /// The copy of the offending DDP segment's header (D), with its length
    /// if M was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ddp_copy: Option<TerminatedDdpInfo>,
    /// The copy of the offending RDMAP header (R): a Read Request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdmap_copy: Option<ReadRequestInfo>,
}

/// The DDP header copied into a Terminate.
#[derive(Debug, Clone, Serialize)]
pub struct TerminatedDdpInfo {
    /// The DDP segment length (M set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_length: Option<u16>,
    /// The copied octets, in hex.
    pub header: String,
    /// Those octets decoded.
    pub ddp: DdpInfo,
    /// The RDMAP opcode name in them.
    pub rdmap: &'static str,
}

/// Octets missing from the capture.
#[derive(Debug, Clone, Serialize)]
pub struct GapInfo {
    /// TCP stream offset of the first missing octet.
    pub offset: u64,
    /// How many are missing.
    pub octets: u64,
    /// What the decoder does about it: `"resync"` (with markers),
    /// `"stop"`, or `"none"` (nothing was being decoded).
    pub action: &'static str,
}

/// Framing found again.
#[derive(Debug, Clone, Serialize)]
pub struct ResyncInfo {
    /// Stream offset (from the start of framing) of the PDU decoding
    /// resumes at.
    pub offset: u64,
    /// Octets skipped to get there.
    pub skipped: u64,
    /// How it was found.
    pub method: String,
}

/// How much a note matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// A decision or a fact.
    Info,
    /// Something odd that decoding survived.
    Warning,
    /// A protocol error in the traffic, or decoding had to stop.
    Error,
}

/// A free-form note.
#[derive(Debug, Clone, Serialize)]
pub struct NoteInfo {
    /// How much it matters.
    pub level: Level,
    /// What it says.
    pub message: String,
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// An STag as people write it: `0x` and eight digits.
pub fn stag(v: u32) -> String {
    format!("{v:#010x}")
}

/// A tagged offset: `0x` and the digits it needs.
pub fn hex_value(v: u64) -> String {
    format!("{v:#x}")
}

/// A CRC32c value: `0x` and eight digits.
pub fn crc_value(v: u32) -> String {
    format!("{v:#010x}")
}
