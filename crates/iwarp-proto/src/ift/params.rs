//! What the Adaption Indications settle for full operation.
//!
//! Unlike MPA, where CRC use is one choice for both directions, IFT
//! settles each direction separately (draft-williams-iwarp-ift-01 §4.2):
//! the sender of a frame decides whether it carries a header CRC (HC) and
//! a payload CRC (PC), the receiver may declare it will not check them (IH,
//! IP), markers flow only where one end sends them (SM) and the other asked
//! for them (RM), and each end's VTag appears in the frames the *other* end
//! sends. [`TxParams`] configures an [`super::IftTransmitter`],
//! [`RxParams`] an [`super::IftReceiver`].

use crate::framing::MarkerInterval;

/// RDMA or DDP mode (§4.2 R flag: both ends set it, or both clear it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// RDMAP runs over DDP (both ends set R).
    Rdma,
    /// DDP alone, for a ULP that uses DDP directly (both ends clear R).
    Ddp,
}

/// How a receiver treats one of the CRC fields of the frames it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxCrc {
    /// The peer does not send the field (it cleared HC or PC).
    Absent,
    /// The peer sends the field and this end reads it without checking it
    /// (it set IH or IP).
    Ignored,
    /// The peer sends the field and this end checks it.
    Checked,
}

impl RxCrc {
    /// Whether the field is on the wire.
    pub const fn present(self) -> bool {
        !matches!(self, Self::Absent)
    }
}

/// How this end frames what it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxParams {
    /// Frames carry a header CRC (our HC).
    pub header_crc: bool,
    /// Frames carry a payload CRC (our PC).
    pub payload_crc: bool,
    /// Markers are inserted, at this interval (our SM and the peer's RM).
    pub markers: Option<MarkerInterval>,
    /// The VTag put in every frame: the peer's VTag, from its indication.
    pub vtag: u16,
}

/// How this end deframes what it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RxParams {
    /// The header CRC field (the peer's HC, our IH).
    pub header_crc: RxCrc,
    /// The payload CRC field (the peer's PC, our IP).
    pub payload_crc: RxCrc,
    /// Markers expected, at this interval (our RM and the peer's SM).
    pub markers: Option<MarkerInterval>,
    /// The VTag every received frame must carry: our own VTag.
    pub vtag: u16,
}

impl TxParams {
    /// The [`RxParams`] of a peer that receives these frames and checks
    /// every CRC present: for tests and tools.
    pub fn checked_by_peer(self) -> RxParams {
        let crc = |on: bool| if on { RxCrc::Checked } else { RxCrc::Absent };
        RxParams {
            header_crc: crc(self.header_crc),
            payload_crc: crc(self.payload_crc),
            markers: self.markers,
            vtag: self.vtag,
        }
    }
}

/// Everything the Adaption Indications settled, from one end's point of
/// view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IftParams {
    /// RDMA or DDP mode.
    pub mode: Mode,
    /// Framing of what this end sends.
    pub tx: TxParams,
    /// Deframing of what this end receives.
    pub rx: RxParams,
    /// The peer permits this end to place its frames speculatively (the
    /// peer's SP, §8). Only the out-of-order receive path uses it
    /// ([`crate::ooo::IftFraming::may_speculate`]); the in-order
    /// [`super::IftReceiver`] never speculates.
    pub may_speculate: bool,
    /// This end permitted the peer to place speculatively (our SP). If so,
    /// the application must treat the unwritten parts of a delivered
    /// buffer as unpredictable (§8.3).
    pub peer_may_speculate: bool,
}
