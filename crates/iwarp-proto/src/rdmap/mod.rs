//! RDMAP: the RDMA protocol over DDP (RFC 5040).
//!
//! Wire formats (opcodes in DDP's RsvdULP, the Read Request header, the
//! Terminate message), error codes, and the [`QueuePair`] engine that runs
//! RDMAP and DDP for one stream: Sends (with Solicited Event and/or
//! Invalidate), RDMA Write, RDMA Read (requester and responder), Terminate,
//! completions and teardown.

mod counters;
mod early;
mod error;
mod opcode;
pub mod pretty;
mod queue_pair;
mod read_request;
mod rx;
mod terminate;
mod transmit;
mod tx;
mod work;

pub use counters::{MessageCounters, OneSidedCounters};
pub use error::{OperationError, ProtectionError, ProtocolError, RdmapError};
pub use opcode::{
    control_opcode, control_version, Opcode, QN_READ_REQUEST, QN_SEND, QN_TERMINATE, RDMAP_VERSION,
};
pub use queue_pair::QueuePair;
pub use read_request::{ReadRequest, ReadRequestView, READ_REQUEST_LEN};
pub use rx::PlacementTarget;
pub use terminate::{
    terminate_header, TerminateMessage, TerminateView, TerminatedDdp, TERMINATE_CONTROL_LEN,
    TERMINATE_MAX_LEN, TERMINATE_ULPDU_MAX_LEN,
};
pub use transmit::{InlinePayload, LockedTransmit, Transmit, TxPayload};
pub use work::{
    Completion, CompletionOpcode, CompletionStatus, Event, PostError, QpState, QueuePairConfig,
    SendFlags, Sge,
};
