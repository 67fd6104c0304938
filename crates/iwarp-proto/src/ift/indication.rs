//! The Adaption Indication: its 64-octet wire format, encoded and decoded.
//!
//! draft-williams-iwarp-ift-01 §4: before IFT framing starts, each end sends
//! one 64-octet, CRC-protected Adaption Indication that confirms the switch
//! to RDDP and states its choices (mode, CRCs, speculative placement,
//! markers) and its VTag. This module holds the format only, in the smoltcp
//! style: [`Indication::parse`] checks everything it reads and never panics,
//! [`Indication::emit`] writes a valid indication or refuses a short buffer. Settling the two
//! indications into framing parameters is [`super::negotiation`]'s job.
//! [`IndicationView`] reads the raw fields of 64 octets; [`Indication`] is
//! the value parsed from and emitted into them ([`crate::wire`]'s
//! convention).
//!
//! Layout (all multi-octet fields big-endian, network order, except the CRC):
//!
//! | octets | field |
//! | --- | --- |
//! | 0..4 | magic number `0x52444450` ("RDDP" in ASCII) |
//! | 4..6 | version (1) |
//! | 6..8 | BC version (1) |
//! | 8..12 | flags, PH at the most significant bit (see [`flag`]) |
//! | 12..14 | sender's VTag |
//! | 14..16 | marker interval |
//! | 16..60 | reserved (44 octets) |
//! | 60..64 | CRC32c of octets 0..60, least significant octet first |
//!
//! Interpretations of the draft made here:
//!
//! - §4.2 defines the flags "starting with the MSB of the flag field": PH is
//!   bit 31 of the big-endian 32-bit word (`0x8000_0000`), R bit 30, and so
//!   on down to RM at bit 22. The other 23 bits are reserved.
//! - §4.2 does not say what the CRC covers or how it is stored. It covers
//!   every octet before it (0..60, reserved octets included, so that a
//!   damaged reserved octet is still caught) and is stored least significant
//!   octet first: the CRC32c of iSCSI (RFC 3720) that §5.1 names, stored the way
//!   iSCSI digests and MPA's CRC (RFC 5044, draft-ietf-rddp-mpa-01 §5.2) are.
//! - §4.2 leaves the marker interval's meaning to §9, which is "TBD". Here
//!   it is the interval at which the sender of the indication wants to
//!   *receive* markers: meaningful only with RM set, at least
//!   [`crate::framing::MIN_MARKER_INTERVAL`]; with RM clear it is sent as zero and ignored.
//!   See [`super::marker`] for the marker format.
//! - Reserved flag bits and reserved octets are sent as zero and ignored on
//!   receipt (§4.2 "reserved"), but they are covered by the CRC.

use crate::framing::crc::{self, Crc32c};
use crate::framing::MarkerInterval;
use crate::wire::{be16, be32, field, Truncated};

/// Octets in an Adaption Indication (draft-williams-iwarp-ift-01 §4.1).
pub const INDICATION_LEN: usize = 64;

/// The magic number that opens every indication: "RDDP" in ASCII.
pub const MAGIC: u32 = 0x5244_4450;

/// The indication version this implementation speaks (§4.2: "This document
/// describes version 1").
pub const VERSION: u16 = 1;

/// The oldest version this implementation is backward compatible with
/// (§4.2: "For this version of the protocol, this field MUST be set to 1").
pub const BC_VERSION: u16 = 1;

/// Octet offset of the CRC field.
const CRC_AT: usize = INDICATION_LEN - 4;

/// The flag bits of the 32-bit flags word, "starting with the MSB of the
/// flag field and proceeding left to right" (draft-williams-iwarp-ift-01
/// §4.2).
pub mod flag {
    /// Phase: 0 for the indication node A sends, 1 for node B's answer.
    pub const PH: u32 = 1 << 31;
    /// The sender wants RDMA mode (both must agree).
    pub const R: u32 = 1 << 30;
    /// The sender's frames will carry a header CRC.
    pub const HC: u32 = 1 << 29;
    /// The sender's frames will carry a payload CRC.
    pub const PC: u32 = 1 << 28;
    /// The sender will ignore the header CRC of frames it receives.
    pub const IH: u32 = 1 << 27;
    /// The sender will ignore the payload CRC of frames it receives.
    pub const IP: u32 = 1 << 26;
    /// The sender permits the receiver to place speculatively.
    pub const SP: u32 = 1 << 25;
    /// The sender is willing to send markers.
    pub const SM: u32 = 1 << 24;
    /// The sender wishes to receive markers.
    pub const RM: u32 = 1 << 23;
    /// Every defined flag; the remaining bits are reserved.
    pub const DEFINED: u32 = PH | R | HC | PC | IH | IP | SP | SM | RM;
}

/// Which of the two indications of a negotiation this is (the PH flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Phase 0: sent by node A, the end that starts the adaption (PH = 0).
    Zero,
    /// Phase 1: node B's answer (PH = 1).
    One,
}

/// Why an octet string is not an acceptable Adaption Indication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndicationError {
    /// Fewer than 64 octets.
    #[error("an adaption indication is 64 octets, got {len}")]
    Truncated {
        /// Octets available.
        len: usize,
    },
    /// The first four octets are not `0x52444450`: the peer does not speak
    /// IFT (an MPA peer, say).
    #[error("magic number {found:#010x} is not 0x52444450")]
    BadMagic {
        /// The value found.
        found: u32,
    },
    /// The CRC field does not match octets 0..60.
    #[error(
        "adaption indication CRC mismatch: computed {computed:#010x}, received {received:#010x}"
    )]
    BadCrc {
        /// The CRC32c of octets 0..60.
        computed: u32,
        /// The CRC field.
        received: u32,
    },
    /// The peer's BC version is newer than ours, or its version older than
    /// our BC version (§4.2).
    #[error("incompatible adaption indication: version {version}, BC version {bc_version} (ours: version 1)")]
    Incompatible {
        /// The peer's version.
        version: u16,
        /// The peer's BC version.
        bc_version: u16,
    },
    /// RM is set with a marker interval below [`crate::framing::MIN_MARKER_INTERVAL`].
    #[error("marker interval {interval} is below the minimum of 64")]
    BadMarkerInterval {
        /// The interval received.
        interval: u16,
    },
}

/// A read-only view of an Adaption Indication's 64 octets, fields raw.
#[derive(Debug, Clone, Copy)]
pub struct IndicationView<T: AsRef<[u8]>> {
    octets: T,
}

impl<T: AsRef<[u8]>> IndicationView<T> {
    /// Wraps `octets` without checking them: fields past the end read as
    /// zero.
    pub const fn new_unchecked(octets: T) -> Self {
        Self { octets }
    }

    /// Wraps `octets` after checking they hold 64 octets.
    pub fn new_checked(octets: T) -> Result<Self, IndicationError> {
        let len = octets.as_ref().len();
        if len < INDICATION_LEN {
            return Err(IndicationError::Truncated { len });
        }
        Ok(Self { octets })
    }

    /// The underlying octets.
    pub fn into_inner(self) -> T {
        self.octets
    }

    fn b(&self) -> &[u8] {
        self.octets.as_ref()
    }

    /// The magic number field.
    pub fn magic(&self) -> u32 {
        be32(self.b(), 0)
    }

    /// The version field.
    pub fn version(&self) -> u16 {
        be16(self.b(), 4)
    }

    /// The BC version field.
    pub fn bc_version(&self) -> u16 {
        be16(self.b(), 6)
    }

    /// The flags word, reserved bits included.
    pub fn flags(&self) -> u32 {
        be32(self.b(), 8)
    }

    /// The sender's VTag.
    pub fn vtag(&self) -> u16 {
        be16(self.b(), 12)
    }

    /// The marker interval field.
    pub fn marker_interval(&self) -> u16 {
        be16(self.b(), 14)
    }

    /// The CRC field, as a value.
    pub fn crc(&self) -> u32 {
        crc::from_wire(field(self.b(), CRC_AT))
    }

    /// The CRC32c of octets 0..60: what the CRC field must hold.
    pub fn computed_crc(&self) -> u32 {
        let b = self.b();
        crc::crc32c(&b[..CRC_AT.min(b.len())])
    }
}

/// An Adaption Indication (draft-williams-iwarp-ift-01 §4.1), decoded.
///
/// RM and the marker interval travel together as
/// [`Indication::receive_markers`]: the interval means nothing without RM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Indication {
    /// Protocol version of the indication (1).
    pub version: u16,
    /// The oldest version the sender is backward compatible with (1).
    pub bc_version: u16,
    /// PH: which phase of the negotiation this is.
    pub phase: Phase,
    /// R: the sender wants RDMA mode (else DDP mode).
    pub rdma: bool,
    /// HC: the sender's frames carry a header CRC.
    pub header_crc: bool,
    /// PC: the sender's frames carry a payload CRC.
    pub payload_crc: bool,
    /// IH: the sender ignores the header CRC of the frames it receives.
    pub ignore_header_crc: bool,
    /// IP: the sender ignores the payload CRC of the frames it receives.
    pub ignore_payload_crc: bool,
    /// SP: the sender permits speculative placement of what it sends.
    pub speculative_placement: bool,
    /// SM: the sender is willing to send markers.
    pub send_markers: bool,
    /// RM with the marker interval: the sender wishes to receive markers,
    /// at this interval.
    pub receive_markers: Option<MarkerInterval>,
    /// The sender's VTag: the peer puts it in every frame it sends.
    pub vtag: u16,
}

impl Indication {
    /// The flags word as sent, reserved bits zero.
    pub fn flags(&self) -> u32 {
        let bit = |on: bool, f: u32| if on { f } else { 0 };
        bit(self.phase == Phase::One, flag::PH)
            | bit(self.rdma, flag::R)
            | bit(self.header_crc, flag::HC)
            | bit(self.payload_crc, flag::PC)
            | bit(self.ignore_header_crc, flag::IH)
            | bit(self.ignore_payload_crc, flag::IP)
            | bit(self.speculative_placement, flag::SP)
            | bit(self.send_markers, flag::SM)
            | bit(self.receive_markers.is_some(), flag::RM)
    }

    /// Octets [`Indication::emit`] writes: 64.
    pub const fn buffer_len(&self) -> usize {
        INDICATION_LEN
    }

    /// Writes the 64 octets of this indication, CRC included, at the start
    /// of `buf`; returns their length.
    //= draft-williams-iwarp-ift-01#4.2
    //# CRC computed on adaption indication is REQUIRED regardless of whether header or payload
    //# CRCs are negotiated in either direction.
    //= draft-williams-iwarp-ift-01#4.2
    //# All reserved bits MUST be set to zero by the sender and ignored by the receiver.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let out = Truncated::room(buf, INDICATION_LEN)?;
        out[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&self.version.to_be_bytes());
        out[6..8].copy_from_slice(&self.bc_version.to_be_bytes());
        out[8..12].copy_from_slice(&self.flags().to_be_bytes());
        out[12..14].copy_from_slice(&self.vtag.to_be_bytes());
        let interval = self.receive_markers.map_or(0, MarkerInterval::get);
        out[14..16].copy_from_slice(&interval.to_be_bytes());
        // Octets 16..60 are reserved (§4.2): zero.
        out[16..CRC_AT].fill(0);
        let mut crc = Crc32c::new();
        crc.update(&out[..CRC_AT]);
        out[CRC_AT..].copy_from_slice(&crc.to_wire());
        Ok(INDICATION_LEN)
    }

    /// The 64 octets, in a buffer that always fits them.
    pub fn to_bytes(&self) -> [u8; INDICATION_LEN] {
        let mut out = [0u8; INDICATION_LEN];
        // Exactly INDICATION_LEN: cannot fail.
        let _ = self.emit(&mut out);
        out
    }

    /// Parses and checks a view: magic, CRC (REQUIRED, §4.2), version
    /// rules, marker interval. Reserved bits and octets are ignored. Never
    /// panics.
    pub fn parse<T: AsRef<[u8]>>(view: &IndicationView<T>) -> Result<Self, IndicationError> {
        let len = view.b().len();
        if len < INDICATION_LEN {
            return Err(IndicationError::Truncated { len });
        }
        check_magic(view.b())?;
        let (computed, received) = (view.computed_crc(), view.crc());
        if computed != received {
            return Err(IndicationError::BadCrc { computed, received });
        }
        let (version, bc_version) = (view.version(), view.bc_version());
        // §4.2: a BC version greater than ours MUST be rejected; a greater
        // version need not be. A version older than the oldest we are
        // compatible with cannot be spoken either.
        //= draft-williams-iwarp-ift-01#4.2
        //# On receipt, any value greater than the current version MUST be rejected as
        //# incompatible.
        if bc_version > VERSION || version < BC_VERSION {
            return Err(IndicationError::Incompatible {
                version,
                bc_version,
            });
        }
        let flags = view.flags();
        let on = |f: u32| flags & f != 0;
        let receive_markers = if on(flag::RM) {
            let interval = view.marker_interval();
            Some(
                MarkerInterval::new(interval)
                    .ok_or(IndicationError::BadMarkerInterval { interval })?,
            )
        } else {
            None
        };
        Ok(Self {
            version,
            bc_version,
            phase: if on(flag::PH) {
                Phase::One
            } else {
                Phase::Zero
            },
            rdma: on(flag::R),
            header_crc: on(flag::HC),
            payload_crc: on(flag::PC),
            ignore_header_crc: on(flag::IH),
            ignore_payload_crc: on(flag::IP),
            speculative_placement: on(flag::SP),
            send_markers: on(flag::SM),
            receive_markers,
            vtag: view.vtag(),
        })
    }

    /// Parses the first 64 octets of `octets`.
    pub fn parse_bytes(octets: &[u8]) -> Result<Self, IndicationError> {
        Self::parse(&IndicationView::new_unchecked(octets))
    }
}

/// Checks the magic number in the first four octets of `prefix`, which may
/// be a partial indication: lets a receiver reject a non-IFT peer as soon
/// as four octets are in, instead of waiting for 64 that may never come.
/// Fewer than four octets pass.
pub fn check_magic(prefix: &[u8]) -> Result<(), IndicationError> {
    match prefix.get(..4) {
        Some(m) => {
            let found = u32::from_be_bytes([m[0], m[1], m[2], m[3]]);
            if found == MAGIC {
                Ok(())
            } else {
                Err(IndicationError::BadMagic { found })
            }
        }
        None => Ok(()),
    }
}
