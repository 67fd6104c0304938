//! Findings: what the stateful checks found, that no single PDU shows.
//!
//! The checks themselves run in the crate's tracker (`track`), per connection and
//! direction: MSN order per untagged queue, message offsets and tagged
//! offsets within a message, Read Responses against their Read Requests
//! (STag, TO, size, order), outstanding Reads against the negotiated ORD,
//! a Terminate's header copies against the PDU they name, traffic after a
//! Terminate, and messages left incomplete at the end. Each problem is
//! reported once, with the frames involved; after a hole in the capture a
//! direction's expectations are dropped rather than reported.

use iwarp_proto::memory::STag;

use crate::note::Level;

/// A failed check, with the capture frames involved (the earlier one
/// first, when there are two).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Finding {
    /// What was found.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub kind: FindingKind,
    /// The frames involved.
    pub frames: Vec<u64>,
}

impl Finding {
    /// How much it matters: what the capture's end cut short is a
    /// warning, the rest are protocol errors.
    pub fn level(&self) -> Level {
        match self.kind {
            FindingKind::IncompleteMessage { .. } | FindingKind::UnansweredRead { .. } => {
                Level::Warning
            }
            _ => Level::Error,
        }
    }
}

/// The untagged queues RDMAP uses (RFC 5040).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum Queue {
    /// QN 0: Sends.
    Send,
    /// QN 1: RDMA Read Requests.
    ReadRequest,
    /// QN 2: Terminates.
    Terminate,
}

/// What a stateful check found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "check", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum FindingKind {
    /// RFC 5041 §4.3: MSNs of a queue start at 1 and go up by one per message; some were
    /// skipped.
    #[error("QN {qn}: MSN {got} where {expected} was next ({} skipped)", got.wrapping_sub(*expected))]
    MsnGap {
        /// The queue number.
        qn: u32,
        /// The MSN that should have come.
        expected: u32,
        /// The one that came.
        got: u32,
    },
    /// An MSN that was already used.
    #[error("QN {qn}: MSN {got} again (MSN {expected} was next)")]
    MsnRepeat {
        /// The queue number.
        qn: u32,
        /// The MSN that should have come.
        expected: u32,
        /// The one that came.
        got: u32,
    },
    /// RFC 5041 §4.3: a message's segments follow each other; this MO is
    /// not where the previous segment ended.
    #[error("QN {qn} MSN {msn}: MO {got} where the message continues at {expected}")]
    MoDiscontinuity {
        /// The queue number.
        qn: u32,
        /// The message.
        msn: u32,
        /// Where the previous segment ended.
        expected: u32,
        /// The segment's MO.
        got: u32,
    },
    /// A tagged message's segments follow each other; this TO is not
    /// where the previous segment ended.
    #[error("STag {stag}: TO {got:#x} where the message continues at {expected:#x}")]
    ToDiscontinuity {
        /// The message's STag.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        stag: STag,
        /// Where the previous segment ended.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::to"))]
        expected: u64,
        /// The segment's TO.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::to"))]
        got: u64,
    },
    /// RFC 5040: a Read Response with no Read Request outstanding.
    #[error("RDMA Read Response to STag {stag} with no Read Request outstanding")]
    UnexpectedReadResponse {
        /// Its STag.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        stag: STag,
    },
    /// RFC 5040: Read Responses come in the order of their Requests;
    /// this one is for a later Request.
    #[error("RDMA Read Response to STag {got} answers a later Read Request; the one to STag {expected} was due first")]
    ReadResponseOutOfOrder {
        /// The sink STag of the oldest outstanding Request.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        expected: STag,
        /// The Response's STag.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        got: STag,
    },
    /// The Response's STag is not the Request's sink STag.
    #[error("RDMA Read Response to STag {got}, but the Read Request named sink STag {expected}")]
    ReadResponseStag {
        /// The Request's sink STag.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        expected: STag,
        /// The Response's.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        got: STag,
    },
    /// The Response's TO is not where the Request's sink, so far filled,
    /// continues.
    #[error(
        "RDMA Read Response at TO {got:#x}, but the Read Request's sink continues at {expected:#x}"
    )]
    ReadResponseTo {
        /// Where it should be.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::to"))]
        expected: u64,
        /// Where it is.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::to"))]
        got: u64,
    },
    /// The Responses carry more or fewer octets than the Request asked
    /// for.
    #[error("RDMA Read Responses carry {got} octets for a Read Request of {expected}")]
    ReadResponseSize {
        /// The Request's size.
        expected: u64,
        /// What the Responses carried.
        got: u64,
    },
    /// RFC 5040 and RFC 6581: a requester may not have more Reads
    /// outstanding than its ORD, as negotiated at startup.
    #[error("{outstanding} RDMA Read Requests outstanding, more than the ORD of {ord} negotiated")]
    TooManyReads {
        /// Requests outstanding with this one.
        outstanding: usize,
        /// The sender's ORD.
        ord: u16,
    },
    /// RFC 5040 §4.8: the Terminate's DDP header copy matches no PDU the
    /// other end sent.
    #[error("the Terminate's DDP header copy matches no recent PDU from the other end")]
    TerminateCopyUnmatched,
    /// The Terminate's DDP Segment Length is not the named PDU's.
    #[error("the Terminate gives DDP Segment Length {got}, but the PDU it names has {expected}")]
    TerminateLength {
        /// The named PDU's ULPDU length.
        expected: u64,
        /// The Terminate's.
        got: u16,
    },
    /// The Terminate's Read Request copy matches no Read Request the other
    /// end sent.
    #[error("the Terminate's Read Request copy matches no Read Request from the other end")]
    TerminateReadUnmatched,
    /// RFC 5040: a Terminate is the last message on its stream; its
    /// sender sends nothing more.
    #[error("{0} PDUs after this end sent a Terminate")]
    AfterTerminate(u64),
    /// A message whose last segment never came.
    #[error(
        "{what} left incomplete: {octets} octets in {segments} segments, the last one never seen"
    )]
    IncompleteMessage {
        /// Which message.
        what: MessageRef,
        /// Octets seen.
        octets: u64,
        /// Segments seen.
        segments: u64,
    },
    /// A Read Request never (fully) answered.
    #[error("RDMA Read Request of {size} octets into STag {stag} never fully answered ({got} octets came)")]
    UnansweredRead {
        /// Its sink STag.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        stag: STag,
        /// Its size.
        size: u32,
        /// Octets that came.
        got: u64,
    },
}

/// A message named in a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "model", rename_all = "snake_case")
)]
pub enum MessageRef {
    /// An untagged message.
    Untagged {
        /// Its queue.
        qn: u32,
        /// Its MSN.
        msn: u32,
    },
    /// A tagged message (RDMA Write).
    Tagged {
        /// Its STag.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::stag"))]
        stag: STag,
    },
}

impl std::fmt::Display for MessageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Untagged { qn, msn } => write!(f, "the message QN {qn} MSN {msn}"),
            Self::Tagged { stag } => write!(f, "the RDMA Write to STag {stag}"),
        }
    }
}

impl Queue {
    /// The queue of a QN.
    pub fn of(qn: u32) -> Option<Self> {
        match qn {
            0 => Some(Self::Send),
            1 => Some(Self::ReadRequest),
            2 => Some(Self::Terminate),
            _ => None,
        }
    }
}
