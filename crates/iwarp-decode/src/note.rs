//! Notes: what the decoding itself decided or met (a CRC use detected, a
//! startup that cannot be paired, framing lost), as typed values with
//! their words in `Display`.

/// How much a note matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum Level {
    /// A decision or a fact.
    Info,
    /// Something odd that decoding survived.
    Warning,
    /// A protocol error in the traffic, or decoding had to stop.
    Error,
}

/// A note. Serialized as `{"level", "kind", "message"}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Note {
    /// Only one end's startup frame was seen; the other's is assumed.
    #[error("no startup frame seen from the other end: its choices assumed")]
    OneSidedStartup,
    /// IFT frames carry the receiver's VTag, which only its indication gives.
    #[error(
        "no Adaption Indication seen from the other end: IFT frames cannot be decoded without its VTag"
    )]
    NoPeerIndication,
    /// One end sent a startup, this one opens with something else.
    #[error("the other end sent a startup, this one opens with {} instead: not decoded", crate::hex(.0))]
    UnexpectedOpening(Vec<u8>),
    /// The Reply has R set.
    #[error(
        "the responder rejected the connection (R set): MPA is over, nothing further is decoded"
    )]
    Rejected,
    /// The two indications cannot be settled.
    #[error("the Adaption Indications do not agree ({0}): the connection would be closed")]
    IndicationsDisagree(iwarp_proto::ift::NegotiationError),
    /// A startup frame or indication is invalid.
    #[error(
        "invalid startup: the receiving end closes the connection; nothing further is decoded"
    )]
    InvalidStartup,
    /// Two Requests, two Replies, or MPA against IFT.
    #[error(
        "the two ends' startups do not pair (two Requests, two Replies, or MPA against IFT): nothing further is decoded"
    )]
    StartupsDoNotPair,
    /// Too much held while waiting for the other direction's startup.
    #[error(
        "{0} octets follow the startup but the framing is still not settled (the other direction's startup was not seen): giving up"
    )]
    NeverSettled(usize),
    /// A gap before the framing was known.
    #[error("{0} octets missing from the capture before framing was settled: decoding of this direction stops")]
    GapBeforeFraming(u64),
    /// The capture ends too early to tell the opening.
    #[error("the capture ends after {0} octets, too few to tell a startup frame")]
    ShortOpening(usize),
    /// A gap in MPA without markers or CRC.
    #[error(
        "{missing} octets missing from the capture at stream offset {at}: without markers or CRC nothing says where the next FPDU starts, so decoding of this direction stops"
    )]
    GapStops {
        /// Octets missing.
        missing: u64,
        /// Where.
        at: u64,
    },
    /// A PDU cut by a gap.
    #[error("the {framing} at stream offset {start} is incomplete: octets from {at} on were not captured")]
    CutByGap {
        /// "FPDU" or "frame".
        framing: &'static str,
        /// Where it starts.
        start: u64,
        /// Where the gap starts.
        at: u64,
    },
    /// The capture ends inside a PDU.
    #[error("the capture ends inside the {framing} at stream offset {start} ({captured} octets of it captured)")]
    EndsInside {
        /// "FPDU" or "frame".
        framing: &'static str,
        /// Where it starts.
        start: u64,
        /// Octets of it captured.
        captured: usize,
    },
    /// The capture ends while looking for framing.
    #[error("the capture ends before framing was found again after stream offset {0}")]
    EndsUnsynchronised(u64),
    /// CRC use detected: in use.
    #[error("the first FPDU's CRC is correct: CRC is in use")]
    CrcDetectedOn,
    /// CRC use detected: not in use.
    #[error("the first FPDU's CRC field is zero: CRC taken as not in use")]
    CrcDetectedOff,
    /// No startup seen and the first FPDU's CRC fails: hunt for a boundary.
    #[error("the first octets captured are not an FPDU with a valid CRC: looking for one")]
    NotAtBoundary,
    /// A marker disagrees with the lengths.
    #[error(
        "marker at stream offset {marker} has FPDUPTR {found:#06x}, but the FPDU at stream offset {fpdu} puts it at {expected:#06x}: framing lost, looking for the next marker"
    )]
    MarkerMismatch {
        /// Where the marker is.
        marker: u64,
        /// What it says.
        found: u16,
        /// What the lengths say.
        expected: u16,
        /// The FPDU it sits in.
        fpdu: u64,
    },
    /// IFT framing can no longer be followed.
    #[error("{0}: framing lost, decoding of this direction stops")]
    IftFramingLost(iwarp_proto::ift::IftRxError),
    /// A gap in IFT.
    #[error("{0} octets missing from the capture: IFT framing cannot be followed past them, decoding of this direction stops")]
    IftGap(u64),
}

impl Note {
    /// How much it matters.
    pub fn level(&self) -> Level {
        match self {
            Self::OneSidedStartup
            | Self::Rejected
            | Self::CrcDetectedOn
            | Self::CrcDetectedOff
            | Self::NotAtBoundary => Level::Info,
            Self::ShortOpening(_)
            | Self::CutByGap { .. }
            | Self::EndsInside { .. }
            | Self::EndsUnsynchronised(_) => Level::Warning,
            _ => Level::Error,
        }
    }

    /// Its kind, in snake case (the JSON `"kind"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::OneSidedStartup => "one_sided_startup",
            Self::NoPeerIndication => "no_peer_indication",
            Self::UnexpectedOpening(_) => "unexpected_opening",
            Self::Rejected => "rejected",
            Self::IndicationsDisagree(_) => "indications_disagree",
            Self::InvalidStartup => "invalid_startup",
            Self::StartupsDoNotPair => "startups_do_not_pair",
            Self::NeverSettled(_) => "never_settled",
            Self::GapBeforeFraming(_) => "gap_before_framing",
            Self::ShortOpening(_) => "short_opening",
            Self::GapStops { .. } => "gap_stops",
            Self::CutByGap { .. } => "cut_by_gap",
            Self::EndsInside { .. } => "ends_inside",
            Self::EndsUnsynchronised(_) => "ends_unsynchronised",
            Self::CrcDetectedOn => "crc_detected_on",
            Self::CrcDetectedOff => "crc_detected_off",
            Self::NotAtBoundary => "not_at_boundary",
            Self::MarkerMismatch { .. } => "marker_mismatch",
            Self::IftFramingLost(_) => "ift_framing_lost",
            Self::IftGap(_) => "ift_gap",
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Note {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("level", &self.level())?;
        m.serialize_entry("kind", self.kind())?;
        m.serialize_entry("message", &self.to_string())?;
        m.end()
    }
}
