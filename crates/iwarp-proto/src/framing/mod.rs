//! What MPA and IFT share: the contract with DDP, one trait for each
//! direction of a framing layer, and the pieces both framings are built of.
//!
//! A framing layer recovers ULPDUs from the TCP stream and hands them to
//! DDP. To let DDP place payload directly where it belongs, a ULPDU is not
//! handed over whole: the framing layer announces its length, then passes
//! its octets in stream order, in pieces of any size (markers already
//! removed), then says it is complete and valid. DDP reads its header from
//! the first octets, decides where the rest goes, and copies each piece
//! there as it arrives ([`UlpduSink`]).
//!
//! Placement therefore happens before the framing layer has checked the
//! CRC, which it can only do once the last octet is in. That is why
//! [`UlpduSink::ulpdu_end`] is separate: DDP must not *deliver* a message
//! (complete a work request) before it, and when the framing layer reports
//! an error instead, the ULPDU is discarded and the stream stops. An error
//! that DDP finds in a header must likewise wait for `ulpdu_end` before it
//! is reported, so that a header damaged in transit is reported as the CRC
//! error it is and not as, say, an invalid STag. MPA's receiver can also
//! verify each FPDU whole before passing anything on, as RFC 5044 §6 asks
//! (`mpa::Placement::Verified`): its `receive` then takes whole FPDUs
//! only.
//!
//! DDP does not know which framing is below it: each framing implements
//! [`Framer`] (DDP segments in, a [`WireBatch`] out) and [`Deframer`]
//! (stream octets in, one step at a time, or through the one [`receive`]
//! loop into a sink), and each startup exchange implements
//! [`StartupMachine`]. [`AnyFramer`] and [`AnyDeframer`] hold whichever
//! framing a connection settled on. What the two framings share lives
//! here too: CRC32c ([`crc`]), marker positions ([`MarkerInterval`]) and
//! the stream [`Layout`] of payload between markers, the MULPDU bounds
//! ([`mulpdu`]) and the LLP error codes a Terminate carries
//! ([`LlpErrorCode`]).

mod any;
mod batch;
pub mod crc;
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod crc_hybrid;
mod crc_marked;
mod deframer;
mod framer;
mod layout;
mod llp;
pub mod marker;
pub mod mulpdu;
mod sink;
mod startup;

pub use any::{AnyDeframer, AnyFramer, FramingError};
pub use batch::WireBatch;
#[cfg(test)]
pub(crate) use batch::COPY_PAYLOAD_UP_TO;
pub(crate) use batch::{ControlCrc, Summed};
pub(crate) use deframer::{payload_due, push_spans_one_by_one, replay_read};
pub use deframer::{receive, Deframer, FramingEvent, Next};
pub use framer::{Framer, TxError};
pub(crate) use layout::walk_spans;
pub use layout::{Layout, Span};
pub use llp::{LlpError, LlpErrorCode};
pub use marker::{MarkerInterval, MARKER_LEN, MIN_MARKER_INTERVAL};
pub use sink::{CollectUlpdus, FeedError, UlpduSink};
pub use startup::StartupMachine;
