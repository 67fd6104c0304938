//! DDP: Direct Data Placement over reliable transports (RFC 5041).
//!
//! The wire format of DDP segments, segmentation at the data source and
//! the error numbers of the data sink. The receive checks of RFC 5041 §7.1
//! run in the queue-pair engine ([`crate::rdmap::QueuePair`]), because the
//! buffers they check against (posted receives, outstanding reads, the
//! memory table) are RDMAP state; they are cited there check by check.

mod error;
//= rfc5041#8.3.1
//# The RNIC MUST implement the DDP wire Protocol and perform the security semantics described
//# below.
pub mod header;
pub mod pretty;
mod segmenter;

pub use error::{DdpError, TaggedError, UntaggedError};
pub use header::{
    HeaderError, Segment, SegmentHeader, TaggedHeader, UntaggedHeader, DDP_VERSION,
    TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN,
};
pub use segmenter::{SegmentSpan, Segmenter};
