//! What a queue pair counts of the messages it sends and receives, by
//! type, as a kernel RDMA device's counters (`rdma statistic`) show them:
//! plain integers, bumped where a message already ends (its last segment
//! handed out or validated), never per octet.

/// Messages of each RDMAP type this end sent and received completely, and
/// their payload octets. A message counts once its last segment is handed
/// to the framing layer (sent) or has passed every check (received); the
/// zero-length RTR of peer-to-peer mode counts as the message it is, and
/// a Terminate counts in the connection's counters, not here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MessageCounters {
    /// Sends (of every kind: Solicited Event, Invalidate) sent.
    pub sends_sent: u64,
    /// Payload octets of those Sends.
    pub send_octets_sent: u64,
    /// Sends received and delivered into a posted receive.
    pub sends_received: u64,
    /// Payload octets of those Sends.
    pub send_octets_received: u64,
    /// RDMA Writes sent.
    pub writes_sent: u64,
    /// Payload octets of those Writes.
    pub write_octets_sent: u64,
    /// RDMA Writes received (last segment placed and validated).
    pub writes_received: u64,
    /// Payload octets placed by received RDMA Write segments, the segments
    /// of a Write still under way included.
    pub write_octets_received: u64,
    /// RDMA Read Requests sent: Reads this end issued.
    pub read_requests_sent: u64,
    /// RDMA Read Requests received and accepted: Reads this end serves.
    pub read_requests_received: u64,
    /// RDMA Read Responses sent completely, answering the peer's Reads.
    pub read_responses_sent: u64,
    /// Payload octets of those Read Responses.
    pub read_response_octets_sent: u64,
    /// RDMA Read Responses received completely: this end's Reads done.
    pub read_responses_received: u64,
    /// Payload octets placed by received Read Response segments.
    pub read_response_octets_received: u64,
}

impl MessageCounters {
    /// The peer's one-sided operations on this end's memory.
    pub fn one_sided(&self) -> OneSidedCounters {
        OneSidedCounters {
            writes_received: self.writes_received,
            write_octets_received: self.write_octets_received,
            read_responses_sent: self.read_responses_sent,
            read_response_octets_sent: self.read_response_octets_sent,
        }
    }
}

/// What the remote side did to this end's memory: one-sided operations
/// leave no completion at their target, so these counts are the only
/// record the target has of them. A view of [`MessageCounters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OneSidedCounters {
    /// RDMA Write messages received completely (last segment placed and
    /// validated).
    pub writes_received: u64,
    /// Payload octets placed by received RDMA Write segments.
    pub write_octets_received: u64,
    /// RDMA Read Responses sent completely, answering the peer's Reads.
    pub read_responses_sent: u64,
    /// Payload octets of those Read Responses.
    pub read_response_octets_sent: u64,
}
