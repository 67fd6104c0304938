//! What the user hands a queue pair and what it hands back: work
//! requests, completions, events, states, configuration.

use crate::framing::mulpdu::DEFAULT_MULPDU;
use crate::memory::{AccessViolation, ProtectionDomain, STag, StreamId};

use super::error::ProtocolError;
use super::terminate::TerminateMessage;

/// A local buffer of a work request: an STag registered in the queue
/// pair's protection domain (the lkey), a tagged offset in it and a length.
/// One per work request: iWARP allows a single one for a Read sink anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sge {
    /// The local STag.
    pub stag: STag,
    /// Tagged offset of the first octet.
    pub to: u64,
    /// Length in octets.
    pub len: u32,
}

/// The kind of Send (RFC 5040 §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SendFlags {
    /// Send with Solicited Event.
    pub solicited: bool,
    /// Send with Invalidate: the peer's STag to invalidate on delivery.
    pub invalidate: Option<STag>,
}

/// Limits and identity of a queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePairConfig {
    /// The protection domain its streams' STags must belong to.
    pub pd: ProtectionDomain,
    /// This stream's local identity, for STags bound to one stream.
    pub stream: StreamId,
    /// Outstanding send-queue work requests at most.
    pub send_queue_depth: usize,
    /// Posted receives at most.
    pub recv_queue_depth: usize,
    /// ORD: RDMA Reads this end may have outstanding (siw allows 128).
    /// With 0, [`QueuePair::rdma_read`](super::QueuePair::rdma_read)
    /// fails with [`PostError::ZeroOrd`].
    pub ord: usize,
    /// IRD: RDMA Read Requests this end accepts outstanding. With 0, the
    /// peer's first Read Request is refused (DDP untagged error 0x02).
    pub ird: usize,
    /// Initial MULPDU: the largest ULPDU (DDP segment) to emit.
    pub mulpdu: usize,
}

impl QueuePairConfig {
    /// Defaults: 128-deep queues, ORD and IRD 16, MULPDU of a 1460-octet
    /// EMSS without markers.
    pub fn new(pd: ProtectionDomain, stream: StreamId) -> Self {
        Self {
            pd,
            stream,
            send_queue_depth: 128,
            recv_queue_depth: 128,
            ord: 16,
            ird: 16,
            mulpdu: DEFAULT_MULPDU,
        }
    }
}

/// Why a work request was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PostError {
    /// The queue is full.
    #[error("queue full")]
    QueueFull,
    /// A graceful close is in progress: no new transfers (RFC 5041 §6.2.1).
    #[error("stream is closing")]
    Closing,
    /// The local buffer is not usable for this request.
    #[error("local buffer: {0}")]
    LocalProtection(AccessViolation),
    /// An RDMA Read on a stream whose ORD is 0: the peer accepted no
    /// outstanding Reads (RFC 6581 IRD/ORD), so a Read Request would only
    /// be refused by it.
    #[error("RDMA Read not allowed: the stream's ORD is 0 (the peer serves no Reads)")]
    ZeroOrd,
}

/// What a completed work request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompletionOpcode {
    /// A Send of any kind.
    Send,
    /// An RDMA Write.
    RdmaWrite,
    /// An RDMA Read.
    RdmaRead,
    /// A receive, filled by an incoming Send.
    Recv,
}

/// How a work request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompletionStatus {
    /// Done.
    Success,
    /// An incoming Send was longer than the posted receive.
    LocalLengthError,
    /// The local buffer was invalid or invalidated, or lacked a right.
    LocalProtectionError,
    /// The peer refused the access (a Terminate with a protection error).
    RemoteAccessError,
    /// The peer reported an operation error for it.
    RemoteOperationError,
    /// The data arrived but the STag a Send with Invalidate named could
    /// not be invalidated.
    RemoteInvalidateError,
    /// The stream failed while this request was in progress.
    FatalError,
    /// Flushed: the stream failed or closed before this request ran.
    FlushError,
}

/// A finished work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The id the user gave the work request.
    pub wr_id: u64,
    /// How it ended.
    pub status: CompletionStatus,
    /// What it was.
    pub opcode: CompletionOpcode,
    /// Octets transferred (receives and reads: octets placed).
    pub byte_len: u32,
    /// A receive filled by a Send with Solicited Event.
    pub solicited: bool,
    /// The local STag a Send with Invalidate invalidated.
    pub invalidated: Option<STag>,
}

/// The states of a queue pair (RFC 5040 §6, after verbs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QpState {
    /// Ready to send and receive.
    ReadyToSend,
    /// Graceful close asked for: queued work finishes, nothing new.
    Closing,
    /// An error was found: the Terminate message is waiting to be sent.
    Terminate,
    /// The stream failed or the peer terminated it: nothing more moves.
    Error,
    /// Closed gracefully.
    Closed,
}

/// Something the runtime or the user should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The queue pair changed state.
    StateChanged(QpState),
    /// An error was found locally; a Terminate is on its way (except for
    /// a lost connection).
    LocalError(ProtocolError),
    /// The Terminate message was handed out for transmission; the runtime
    /// should close the LLP stream after sending it.
    TerminateSent(TerminateMessage),
    /// The peer terminated the stream with this message.
    TerminateReceived(TerminateMessage),
    /// Graceful close: all queued work is done, the LLP may be closed.
    ReadyToClose,
}
