//! How a connection runs: its framing as the startup settled it, its queue
//! pair's limits, the rules of its first moments and its timeouts.

use std::time::Duration;

use crate::framing::mulpdu::DEFAULT_EMSS;
use crate::ift::IftParams;
use crate::mpa::startup::{Established, RtrType};
use crate::mpa::{FramingParams, Placement};
use crate::rdmap::QueuePairConfig;

/// The framing a connection runs, as its startup settled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FramingSetup {
    /// MPA FPDUs with these CRC and marker settings; received FPDUs are
    /// placed as `placement` says.
    Mpa {
        /// CRC and markers, from this end's point of view.
        params: FramingParams,
        /// When received payload is placed.
        placement: Placement,
    },
    /// IFT frames with what the Adaption Indications settled.
    Ift(IftParams),
}

/// How a [`Connection`](super::Connection) runs. Build it with
/// [`ConnectionConfig::mpa`] or [`ConnectionConfig::ift`] from what the
/// startup settled, then adjust the fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// The framing both ways.
    pub framing: FramingSetup,
    /// The queue pair's identity and limits. Its MULPDU is replaced by the
    /// one the framing gives for [`ConnectionConfig::emss`].
    pub queue_pair: QueuePairConfig,
    /// This end may send nothing before it has received and validated a
    /// PDU (RFC 5044 §7.1.2 rule 4: an MPA responder).
    pub hold_until_received: bool,
    /// The zero-length ready-to-receive message this end sends first
    /// (RFC 6581 peer-to-peer mode, the initiator).
    pub rtr: Option<RtrType>,
    /// The TCP connection's effective maximum segment size, which the
    /// MULPDU follows (see [`Connection::handle_emss`](super::Connection::handle_emss)).
    pub emss: usize,
    /// If set, a connection on which nothing arrives for this long is lost.
    pub idle_timeout: Option<Duration>,
    /// How long a graceful close waits for the peer before closing
    /// abruptly.
    pub disconnect_timeout: Duration,
}

impl ConnectionConfig {
    /// What an MPA startup (or the immediate-start profile) settled: the
    /// framing both ways, rule 4's hold for a responder that exchanged
    /// startup frames, the RTR an initiator of peer-to-peer mode sends
    /// first, and the negotiated IRD and ORD when revision 2 enhanced
    /// data carried them (otherwise `queue_pair`'s).
    pub fn mpa(
        established: &Established,
        placement: Placement,
        mut queue_pair: QueuePairConfig,
    ) -> Self {
        if let Some(v) = established.ird_ord {
            queue_pair.ird = usize::from(v.ird);
            queue_pair.ord = usize::from(v.ord);
        }
        Self {
            framing: FramingSetup::Mpa {
                params: established.framing,
                placement,
            },
            queue_pair,
            hold_until_received: established.must_receive_before_sending(),
            rtr: established.rtr_to_send(),
            ..Self::base(queue_pair)
        }
    }

    /// What an IFT negotiation settled. IFT has no rule 4 and no RTR: both
    /// ends may send once the indications are exchanged.
    pub fn ift(params: IftParams, queue_pair: QueuePairConfig) -> Self {
        Self {
            framing: FramingSetup::Ift(params),
            ..Self::base(queue_pair)
        }
    }

    fn base(queue_pair: QueuePairConfig) -> Self {
        Self {
            framing: FramingSetup::Mpa {
                params: FramingParams::IMMEDIATE_START,
                placement: Placement::Verified,
            },
            queue_pair,
            hold_until_received: false,
            rtr: None,
            emss: DEFAULT_EMSS,
            idle_timeout: None,
            disconnect_timeout: Duration::from_secs(5),
        }
    }
}
