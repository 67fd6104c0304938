//! MPA Request and Reply frames: the wire format of the startup phase.
//!
//! Every revision uses the same layout (RFC 5044 §7.1.1, figure 8;
//! draft-ietf-rddp-mpa-01 §6.1.1; RFC 6581 for revision 2):
//!
//! ```text
//!  0..16  Key: "MPA ID Req Frame" or "MPA ID Rep Frame"
//!  16     |M|C|R|E|G|res|   flags: markers, CRC, rejected, enhanced (rev 2),
//!                           G = Linux's GSO experiment (ignored)
//!  17     Rev
//!  18..20 PD_Length (big-endian)
//!  20..   Private Data (PD_Length octets)
//! ```
//!
//! [`StartupFrame`] is a checked, zero-copy view over octets that hold a
//! whole frame; [`StartupFrameRepr`] is the parsed, validated meaning of a
//! frame (with the private data still borrowed), which can also be emitted.
//! In a revision 2 frame with the enhanced flag, the first four octets of
//! the private data are the IRD/ORD words ([`EnhancedData`]); the repr keeps
//! them apart, so its `private_data` is only the application's part.

use super::enhanced::{EnhancedData, ENHANCED_DATA_LEN};

/// The key of an MPA Request frame (RFC 5044 §7.1.1).
pub const REQUEST_KEY: [u8; KEY_LEN] = *b"MPA ID Req Frame";
/// The key of an MPA Reply frame (RFC 5044 §7.1.1).
pub const REPLY_KEY: [u8; KEY_LEN] = *b"MPA ID Rep Frame";
/// Length of the key field.
pub const KEY_LEN: usize = 16;
/// Length of the fixed part of a frame: key, flags, Rev, PD_Length.
pub const HEADER_LEN: usize = 20;
/// Most private data octets a revision 1 or 2 frame may carry
/// (RFC 5044 §7.1.1, PD_Length); for revision 2 the enhanced octets count.
pub const MAX_PRIVATE_DATA: usize = 512;
/// Most private data octets a revision 0 frame may carry
/// (draft-ietf-rddp-mpa-01 §6.1.1).
pub const MAX_PRIVATE_DATA_REV0: usize = 65535;

/// Flags octet: the sender needs markers in what it receives (M).
pub const FLAG_MARKERS: u8 = 0x80;
/// Flags octet: the sender asks for CRC (C).
pub const FLAG_CRC: u8 = 0x40;
/// Flags octet: the connection is rejected (R, Reply only).
pub const FLAG_REJECT: u8 = 0x20;
/// Flags octet: enhanced connection establishment data follows (revision 2;
/// Linux `MPA_RR_FLAG_ENHANCED`).
pub const FLAG_ENHANCED: u8 = 0x10;
/// Flags octet: Linux's GSO experiment (`MPA_RR_FLAG_GSO_EXP`); ignored on
/// receive and never set.
pub const FLAG_GSO_EXPERIMENT: u8 = 0x08;

/// An MPA startup revision this crate can speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Revision {
    /// draft-ietf-rddp-mpa-01: private data up to 65535 octets.
    Rev0 = 0,
    /// RFC 5044: private data up to 512 octets.
    Rev1 = 1,
    /// RFC 6581: as revision 1, plus optional enhanced connection
    /// establishment (IRD/ORD, peer-to-peer RTR).
    Rev2 = 2,
}

impl Revision {
    /// Every revision, oldest first.
    pub const ALL: [Revision; 3] = [Revision::Rev0, Revision::Rev1, Revision::Rev2];
    /// The newest revision.
    pub const LATEST: Revision = Revision::Rev2;

    /// The revision for a `Rev` field value, if it is one this crate knows.
    pub const fn from_wire(rev: u8) -> Option<Self> {
        match rev {
            0 => Some(Self::Rev0),
            1 => Some(Self::Rev1),
            2 => Some(Self::Rev2),
            _ => None,
        }
    }

    /// The `Rev` field value.
    pub const fn wire(self) -> u8 {
        self as u8
    }

    /// Most octets the private data field (PD_Length) may hold.
    pub const fn max_private_data(self) -> usize {
        match self {
            Self::Rev0 => MAX_PRIVATE_DATA_REV0,
            Self::Rev1 | Self::Rev2 => MAX_PRIVATE_DATA,
        }
    }
}

impl core::fmt::Display for Revision {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.wire())
    }
}

/// Which of the two startup frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// MPA Request frame, sent by the initiator.
    Request,
    /// MPA Reply frame, sent by the responder.
    Reply,
}

impl FrameKind {
    /// The key this kind of frame starts with.
    //= rfc5044#7.1.1
    //# Initiator mode senders MUST set this field to the fixed value "MPA ID Req Frame"
    //= rfc5044#7.1.1
    //# Responder mode senders MUST set this field to the fixed value "MPA ID Rep Frame"
    pub const fn key(self) -> &'static [u8; KEY_LEN] {
        match self {
            Self::Request => &REQUEST_KEY,
            Self::Reply => &REPLY_KEY,
        }
    }

    /// The kind whose key `octets` hold exactly, if any.
    pub fn from_key(octets: &[u8]) -> Option<Self> {
        if octets == REQUEST_KEY {
            Some(Self::Request)
        } else if octets == REPLY_KEY {
            Some(Self::Reply)
        } else {
            None
        }
    }
}

/// Why octets are not a valid startup frame, or a repr cannot be emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Fewer octets than the header, or than the header plus PD_Length.
    #[error("startup frame truncated: {available} octets, {needed} needed")]
    Truncated {
        /// Octets the frame needs (at least).
        needed: usize,
        /// Octets present.
        available: usize,
    },
    /// The key is neither the Request key nor the Reply key.
    #[error("not an MPA key: {seen:02x?}")]
    BadKey {
        /// The 16 octets found where the key belongs.
        seen: [u8; KEY_LEN],
    },
    /// A `Rev` this crate does not know.
    #[error("unknown MPA revision {0}")]
    UnknownRevision(u8),
    /// PD_Length beyond what the revision allows.
    #[error("private data of {length} octets exceeds the revision {revision} limit of {max}")]
    PrivateDataTooLong {
        /// The frame's revision.
        revision: Revision,
        /// Private data octets (PD_Length).
        length: usize,
        /// The revision's limit.
        max: usize,
    },
    /// The enhanced flag is set but PD_Length cannot hold the IRD/ORD words.
    #[error("enhanced flag set but PD_Length {pd_length} is shorter than the 4 IRD/ORD octets")]
    EnhancedDataMissing {
        /// The frame's PD_Length.
        pd_length: u16,
    },
    /// Emit only: enhanced data in a frame whose revision is not 2.
    #[error("enhanced connection data needs revision 2, not {0}")]
    EnhancedNeedsRev2(Revision),
    /// Emit only: the output buffer is too short.
    #[error("output buffer of {available} octets, frame needs {needed}")]
    BufferTooSmall {
        /// Octets the frame needs.
        needed: usize,
        /// Octets available.
        available: usize,
    },
}

/// The fields of a header, format-checked (key known, revision known,
/// PD_Length within the revision's limit, enhanced data present).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: FrameKind,
    pub flags: u8,
    pub revision: Revision,
    pub pd_length: u16,
}

impl Header {
    /// Whether the private data starts with the IRD/ORD words. The 0x10 bit
    /// is reserved (set to zero, not checked) before revision 2.
    pub fn enhanced(&self) -> bool {
        self.revision == Revision::Rev2 && self.flags & FLAG_ENHANCED != 0
    }

    /// Checks the 20 octets of a header. Only `header[..HEADER_LEN]` is read.
    pub fn parse(header: &[u8]) -> Result<Self, FrameError> {
        let (Some(key), Some(&flags), Some(&rev), Some(pd)) = (
            header.get(..KEY_LEN),
            header.get(16),
            header.get(17),
            header.get(18..20),
        ) else {
            return Err(FrameError::Truncated {
                needed: HEADER_LEN,
                available: header.len(),
            });
        };
        // RFC 5044 §7.1.2 rule 5: the key is checked first.
        let kind = FrameKind::from_key(key).ok_or_else(|| FrameError::BadKey {
            seen: key_array(key),
        })?;
        // RFC 5044 §7.1.1 Rev: a receiver that cannot interoperate with the
        // revision closes; this crate knows 0, 1 and 2.
        //= rfc5044#7.1.1
        //# MPA receivers compliant with this version of the specification MUST check this
        //# field.
        //= rfc5044#7.1.1
        //# If the MPA receiver cannot interoperate with the received version, then it MUST
        //# close the connection and report an error locally.
        let revision = Revision::from_wire(rev).ok_or(FrameError::UnknownRevision(rev))?;
        let pd_length = u16::from_be_bytes([
            pd.first().copied().unwrap_or(0),
            pd.get(1).copied().unwrap_or(0),
        ]);
        // RFC 5044 §7.1.1 PD_Length: more than 512 octets is an error
        // (65535 is the field's own limit for revision 0).
        //= rfc5044#7.1.1
        //# If the receiver detects that the PD_Length field does not match the length of the
        //# Private Data field, or if the length of the Private Data field exceeds 512 octets,
        //# the receiver MUST close the connection and report an error locally.
        if usize::from(pd_length) > revision.max_private_data() {
            return Err(FrameError::PrivateDataTooLong {
                revision,
                length: usize::from(pd_length),
                max: revision.max_private_data(),
            });
        }
        let header = Self {
            kind,
            flags,
            revision,
            pd_length,
        };
        // RFC 6581: the enhanced flag promises the IRD/ORD words.
        if header.enhanced() && usize::from(pd_length) < ENHANCED_DATA_LEN {
            return Err(FrameError::EnhancedDataMissing { pd_length });
        }
        Ok(header)
    }

    /// Octets of the whole frame.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + usize::from(self.pd_length)
    }
}

/// The first 16 octets of `octets` as an array, zero-padded.
pub(crate) fn key_array(octets: &[u8]) -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    for (dst, src) in key.iter_mut().zip(octets) {
        *dst = *src;
    }
    key
}

/// A checked, zero-copy view of a startup frame at the start of a buffer.
///
/// The buffer holds at least the header and the PD_Length octets of private
/// data it announces (it may hold more: what follows a frame on the stream).
/// The fields are read raw, as on the wire; [`StartupFrameRepr::parse`]
/// validates their meaning. Accessors never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> StartupFrame<T> {
    /// Wraps `buffer` after checking that it holds a whole frame
    /// (header plus PD_Length octets).
    pub fn new_checked(buffer: T) -> Result<Self, FrameError> {
        let frame = Self { buffer };
        let available = frame.buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(FrameError::Truncated {
                needed: HEADER_LEN,
                available,
            });
        }
        if available < frame.frame_len() {
            return Err(FrameError::Truncated {
                needed: frame.frame_len(),
                available,
            });
        }
        Ok(frame)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn octet(&self, index: usize) -> u8 {
        self.buffer.as_ref().get(index).copied().unwrap_or(0)
    }

    /// The 16 key octets.
    pub fn key(&self) -> [u8; KEY_LEN] {
        key_array(self.buffer.as_ref())
    }

    /// Request or Reply, if the key is one of the two.
    pub fn kind(&self) -> Option<FrameKind> {
        self.buffer
            .as_ref()
            .get(..KEY_LEN)
            .and_then(FrameKind::from_key)
    }

    /// The raw flags octet (M, C, R, reserved bits).
    pub fn flags(&self) -> u8 {
        self.octet(16)
    }

    /// The M bit: the sender needs markers in what it receives.
    pub fn markers(&self) -> bool {
        self.flags() & FLAG_MARKERS != 0
    }

    /// The C bit: the sender asks for CRC.
    pub fn crc(&self) -> bool {
        self.flags() & FLAG_CRC != 0
    }

    /// The R bit (meaningful in a Reply only).
    pub fn rejected(&self) -> bool {
        self.flags() & FLAG_REJECT != 0
    }

    /// The enhanced bit (meaningful in revision 2 only).
    pub fn enhanced_flag(&self) -> bool {
        self.flags() & FLAG_ENHANCED != 0
    }

    /// The raw `Rev` field.
    pub fn revision(&self) -> u8 {
        self.octet(17)
    }

    /// The PD_Length field.
    pub fn pd_length(&self) -> u16 {
        u16::from_be_bytes([self.octet(18), self.octet(19)])
    }

    /// Octets of the whole frame: header plus PD_Length.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + usize::from(self.pd_length())
    }

    /// The whole private data field (for an enhanced revision 2 frame this
    /// includes the four IRD/ORD octets).
    pub fn private_data(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(HEADER_LEN..self.frame_len())
            .unwrap_or(&[])
    }
}

/// The meaning of a valid startup frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupFrameRepr<'a> {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M: the sender needs markers in the FPDUs it receives
    /// (RFC 5044 §7.1.1).
    pub markers: bool,
    /// C: the sender asks for CRC; CRC is used both ways if either frame
    /// sets it (RFC 5044 §7.1.1).
    pub crc: bool,
    /// R: the responder rejects the connection. Always false for a Request,
    /// whose R bit is "set to zero, and not checked on reception".
    pub rejected: bool,
    /// The frame's revision.
    pub revision: Revision,
    /// The IRD/ORD words of a revision 2 frame with the enhanced flag.
    pub enhanced: Option<EnhancedData>,
    /// The application's private data (after the enhanced octets, if any).
    pub private_data: &'a [u8],
}

impl<'a> StartupFrameRepr<'a> {
    /// Parses and validates a frame: known key and revision, PD_Length
    /// within the revision's limit, enhanced octets present when flagged.
    /// Reserved bits (including the GSO experiment bit) are ignored.
    pub fn parse(frame: &StartupFrame<&'a [u8]>) -> Result<Self, FrameError> {
        Self::parse_bytes(frame.buffer).map(|(repr, _)| repr)
    }

    /// Parses the frame at the start of `bytes`; returns it with its length
    /// in octets. Octets after the frame are not looked at.
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<(Self, usize), FrameError> {
        let header = Header::parse(bytes)?;
        let len = header.frame_len();
        let field = bytes.get(HEADER_LEN..len).ok_or(FrameError::Truncated {
            needed: len,
            available: bytes.len(),
        })?;
        Ok((Self::from_parts(&header, field), len))
    }

    /// Builds the repr from a checked header and its private data field.
    pub(crate) fn from_parts(header: &Header, field: &'a [u8]) -> Self {
        let (enhanced, private_data) = if header.enhanced() {
            (
                EnhancedData::parse(field),
                field.get(ENHANCED_DATA_LEN..).unwrap_or(&[]),
            )
        } else {
            (None, field)
        };
        Self {
            kind: header.kind,
            markers: header.flags & FLAG_MARKERS != 0,
            crc: header.flags & FLAG_CRC != 0,
            rejected: header.kind == FrameKind::Reply && header.flags & FLAG_REJECT != 0,
            revision: header.revision,
            enhanced,
            private_data,
        }
    }

    /// The PD_Length this frame has on the wire (enhanced octets included).
    pub fn pd_length(&self) -> usize {
        self.private_data.len()
            + if self.enhanced.is_some() {
                ENHANCED_DATA_LEN
            } else {
                0
            }
    }

    /// Octets [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.pd_length()
    }

    /// Checks that the repr can be emitted: enhanced data only in revision
    /// 2, private data within the revision's limit.
    pub fn check(&self) -> Result<(), FrameError> {
        if self.enhanced.is_some() && self.revision != Revision::Rev2 {
            return Err(FrameError::EnhancedNeedsRev2(self.revision));
        }
        //= rfc5044#7.1.1
        //# The Private Data field MUST be between 0 and 512 octets in length.
        if self.pd_length() > self.revision.max_private_data() {
            return Err(FrameError::PrivateDataTooLong {
                revision: self.revision,
                length: self.pd_length(),
                max: self.revision.max_private_data(),
            });
        }
        Ok(())
    }

    /// Writes the frame at the start of `buf`; returns the octets written.
    /// Reserved bits are sent as zero; R is sent as zero in a Request.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, FrameError> {
        self.check()?;
        let len = self.buffer_len();
        let available = buf.len();
        let out = buf.get_mut(..len).ok_or(FrameError::BufferTooSmall {
            needed: len,
            available,
        })?;
        let mut flags = 0;
        if self.markers {
            flags |= FLAG_MARKERS;
        }
        if self.crc {
            flags |= FLAG_CRC;
        }
        //= rfc5044#7.1.1
        //# It MUST be set to zero when sending, and not checked on reception.
        if self.rejected && self.kind == FrameKind::Reply {
            flags |= FLAG_REJECT;
        }
        if self.enhanced.is_some() {
            flags |= FLAG_ENHANCED;
        }
        // `check` bounds the length by 65535.
        let pd_length = u16::try_from(self.pd_length()).unwrap_or(u16::MAX);
        let mut header = [0u8; HEADER_LEN];
        header[..KEY_LEN].copy_from_slice(self.kind.key());
        header[16] = flags;
        //= rfc5044#7.1.1
        //# For this version of the specification, senders MUST set this field to one.
        //= rfc5044#7.1.1
        //# PD_Length: This field MUST contain the length in octets of the Private Data field.
        //= draft-ietf-rddp-mpa-01#6.1.1
        //# For this version of the specification senders MUST set this field to zero.
        header[17] = self.revision.wire();
        header[18..20].copy_from_slice(&pd_length.to_be_bytes());
        let (head, rest) = out.split_at_mut(HEADER_LEN);
        head.copy_from_slice(&header);
        let rest = match self.enhanced {
            Some(enhanced) => {
                let (words, rest) = rest.split_at_mut(ENHANCED_DATA_LEN);
                words.copy_from_slice(&enhanced.to_bytes());
                rest
            }
            None => rest,
        };
        rest.copy_from_slice(self.private_data);
        Ok(len)
    }

    /// The frame as a new vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>, FrameError> {
        let mut out = vec![0u8; self.buffer_len()];
        self.emit(&mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpa::startup::enhanced::{IrdOrd, RtrType, RtrTypes};
    use proptest::prelude::*;

    /// Key of `kind` followed by `rest` (hex, spaces ignored).
    fn frame(kind: FrameKind, rest: &str) -> Vec<u8> {
        let mut v = kind.key().to_vec();
        v.extend(hex(rest));
        v
    }

    use crate::test_util::hex;

    #[test]
    //= rfc5044#7.1.1
    //= type=test
    //# Initiator mode senders MUST set this field to the fixed value "MPA ID Req Frame"
    //= rfc5044#7.1.1
    //= type=test
    //# Responder mode senders MUST set this field to the fixed value "MPA ID Rep Frame"
    fn keys_are_the_rfc_octets() {
        assert_eq!(
            REQUEST_KEY.to_vec(),
            hex("4d504120494420526571204672616d65")
        );
        assert_eq!(REPLY_KEY.to_vec(), hex("4d504120494420526570204672616d65"));
    }

    #[test]
    //= rfc5044#7.1.1
    //= type=test
    //# PD_Length: This field MUST contain the length in octets of the Private Data field.
    fn encodes_siw_rping_request() {
        // siw-observed.md: rping's Request, revision 2, enhanced, IRD/ORD 1/1.
        let repr = StartupFrameRepr {
            kind: FrameKind::Request,
            markers: false,
            crc: false,
            rejected: false,
            revision: Revision::Rev2,
            enhanced: Some(EnhancedData {
                ird: 1,
                ord: 1,
                peer_to_peer: false,
                rtr: RtrTypes::NONE,
            }),
            private_data: &[],
        };
        assert_eq!(
            repr.to_bytes().unwrap(),
            frame(FrameKind::Request, "1002 0004 0001 0001")
        );
    }

    #[test]
    fn decodes_siw_replies() {
        // siw-observed.md, "siw as responder": every reply siw sent.
        let words = |ird, ord, peer_to_peer, rtr| {
            Some(EnhancedData {
                ird,
                ord,
                peer_to_peer,
                rtr,
            })
        };
        let write = RtrTypes::only(RtrType::Write);
        let cases = [
            ("0001 0000", false, false, Revision::Rev1, None),
            ("4001 0000", true, false, Revision::Rev1, None),
            (
                "1002 0004 0010 0010",
                false,
                false,
                Revision::Rev2,
                words(16, 16, false, RtrTypes::NONE),
            ),
            (
                "5002 0004 0010 0010",
                true,
                false,
                Revision::Rev2,
                words(16, 16, false, RtrTypes::NONE),
            ),
            ("0002 0000", false, false, Revision::Rev2, None),
            (
                "1002 0004 8010 8010",
                false,
                false,
                Revision::Rev2,
                words(16, 16, true, write),
            ),
            ("2001 0000", false, true, Revision::Rev1, None),
            (
                "3002 0004 0000 0000",
                false,
                true,
                Revision::Rev2,
                words(0, 0, false, RtrTypes::NONE),
            ),
            (
                "7002 0004 0000 0000",
                true,
                true,
                Revision::Rev2,
                words(0, 0, false, RtrTypes::NONE),
            ),
        ];
        for (rest, crc, rejected, revision, enhanced) in cases {
            let bytes = frame(FrameKind::Reply, rest);
            let view = StartupFrame::new_checked(&bytes[..]).unwrap();
            assert_eq!(view.kind(), Some(FrameKind::Reply));
            let repr = StartupFrameRepr::parse(&view).unwrap();
            assert_eq!(repr.crc, crc, "{rest}");
            assert!(!repr.markers);
            assert_eq!(repr.rejected, rejected, "{rest}");
            assert_eq!(repr.revision, revision);
            assert_eq!(repr.enhanced, enhanced, "{rest}");
            assert!(repr.private_data.is_empty());
            // Emitting gives back the same octets.
            assert_eq!(repr.to_bytes().unwrap(), bytes, "{rest}");
        }
    }

    #[test]
    fn enhanced_octets_are_kept_apart_from_application_data() {
        // siw-observed.md: a request with 9 octets of application data.
        let bytes = frame(FrameKind::Request, "1002 000d 0010 0010 68656c6c6f2d736977");
        let (repr, len) = StartupFrameRepr::parse_bytes(&bytes).unwrap();
        assert_eq!(len, bytes.len());
        assert_eq!(repr.private_data, b"hello-siw");
        assert_eq!(repr.enhanced.unwrap().ird_ord(), IrdOrd::new(16, 16));
        assert_eq!(repr.pd_length(), 13);
        let view = StartupFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(view.pd_length(), 13);
        assert_eq!(view.private_data().len(), 13);
    }

    #[test]
    fn revision_2_without_enhanced_flag_is_legal() {
        let bytes = frame(FrameKind::Request, "0002 0003 616263");
        let (repr, _) = StartupFrameRepr::parse_bytes(&bytes).unwrap();
        assert_eq!(repr.enhanced, None);
        assert_eq!(repr.private_data, b"abc");
    }

    #[test]
    fn enhanced_bit_is_reserved_before_revision_2() {
        // Rev 1: 0x10 is a reserved bit, "not checked on reception".
        let bytes = frame(FrameKind::Request, "1001 0002 0102");
        let (repr, _) = StartupFrameRepr::parse_bytes(&bytes).unwrap();
        assert_eq!(repr.enhanced, None);
        assert_eq!(repr.private_data, &[1, 2]);
    }

    #[test]
    fn reserved_and_gso_bits_are_ignored() {
        for flags in [0x08u8, 0x04, 0x02, 0x01, 0x0f] {
            let mut bytes = frame(FrameKind::Reply, "0002 0000");
            bytes[16] = flags;
            let (repr, _) = StartupFrameRepr::parse_bytes(&bytes).unwrap();
            assert!(!repr.markers && !repr.crc && !repr.rejected);
            assert_eq!(repr.enhanced, None);
            // Never sent.
            assert_eq!(repr.to_bytes().unwrap()[16], 0);
        }
    }

    #[test]
    //= rfc5044#7.1.1
    //= type=test
    //# It MUST be set to zero when sending, and not checked on reception.
    fn r_bit_is_not_checked_in_a_request() {
        let bytes = frame(FrameKind::Request, "2001 0000");
        let (repr, _) = StartupFrameRepr::parse_bytes(&bytes).unwrap();
        assert!(!repr.rejected);
        let sent = StartupFrameRepr {
            rejected: true,
            ..repr
        };
        assert_eq!(sent.to_bytes().unwrap()[16], 0);
    }

    #[test]
    fn enhanced_flag_needs_four_octets() {
        for pd_len in 0u16..4 {
            let mut bytes = frame(FrameKind::Request, "1002");
            bytes.extend_from_slice(&pd_len.to_be_bytes());
            bytes.extend(std::iter::repeat_n(0u8, usize::from(pd_len)));
            assert_eq!(
                StartupFrameRepr::parse_bytes(&bytes),
                Err(FrameError::EnhancedDataMissing { pd_length: pd_len })
            );
        }
    }

    #[test]
    fn private_data_limits_per_revision() {
        for rev in [Revision::Rev1, Revision::Rev2] {
            for len in [511usize, 512, 513, 65535] {
                let mut bytes = REQUEST_KEY.to_vec();
                bytes.extend_from_slice(&[0, rev.wire()]);
                bytes.extend_from_slice(&(len as u16).to_be_bytes());
                bytes.resize(HEADER_LEN + len, 0xAB);
                let got = StartupFrameRepr::parse_bytes(&bytes);
                if len <= MAX_PRIVATE_DATA {
                    assert_eq!(got.unwrap().0.private_data.len(), len);
                } else {
                    assert_eq!(
                        got,
                        Err(FrameError::PrivateDataTooLong {
                            revision: rev,
                            length: len,
                            max: 512
                        })
                    );
                }
            }
        }
    }

    #[test]
    //= draft-ietf-rddp-mpa-01#6.1.1
    //= type=test
    //# For this version of the specification senders MUST set this field to zero.
    fn revision_0_carries_65535_octets() {
        let pd: Vec<u8> = (0..65535u32).map(|i| (i % 251) as u8).collect();
        let repr = StartupFrameRepr {
            kind: FrameKind::Request,
            markers: true,
            crc: true,
            rejected: false,
            revision: Revision::Rev0,
            enhanced: None,
            private_data: &pd,
        };
        let bytes = repr.to_bytes().unwrap();
        assert_eq!(bytes.len(), HEADER_LEN + 65535);
        assert_eq!(&bytes[16..20], &[0xC0, 0x00, 0xFF, 0xFF]);
        let (back, len) = StartupFrameRepr::parse_bytes(&bytes).unwrap();
        assert_eq!(len, bytes.len());
        assert_eq!(back, repr);
    }

    #[test]
    fn unknown_revisions_and_keys() {
        for rev in 3..=255u8 {
            let mut bytes = frame(FrameKind::Request, "0000 0000");
            bytes[17] = rev;
            assert_eq!(
                StartupFrameRepr::parse_bytes(&bytes),
                Err(FrameError::UnknownRevision(rev))
            );
        }
        let mut bytes = frame(FrameKind::Request, "0001 0000");
        bytes[10] = b'x';
        let view = StartupFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(view.kind(), None);
        assert!(matches!(
            StartupFrameRepr::parse(&view),
            Err(FrameError::BadKey { seen }) if seen[10] == b'x'
        ));
    }

    #[test]
    fn every_truncation_is_reported() {
        let bytes = frame(FrameKind::Reply, "1002 000d 0010 0010 68656c6c6f2d736977");
        for cut in 0..bytes.len() {
            let needed = if cut < HEADER_LEN {
                HEADER_LEN
            } else {
                bytes.len()
            };
            assert_eq!(
                StartupFrame::new_checked(&bytes[..cut]).err(),
                Some(FrameError::Truncated {
                    needed,
                    available: cut
                }),
                "cut {cut}"
            );
            assert!(StartupFrameRepr::parse_bytes(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn octets_after_the_frame_are_not_looked_at() {
        let mut bytes = frame(FrameKind::Reply, "0001 0002 6869");
        let len = bytes.len();
        bytes.extend_from_slice(&[0x00, 0x22, 0x41, 0x43]);
        let (repr, n) = StartupFrameRepr::parse_bytes(&bytes).unwrap();
        assert_eq!(n, len);
        assert_eq!(repr.private_data, b"hi");
        let view = StartupFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(view.frame_len(), len);
        assert_eq!(view.private_data(), b"hi");
    }

    #[test]
    //= rfc5044#7.1.1
    //= type=test
    //# The Private Data field MUST be between 0 and 512 octets in length.
    fn emit_refuses_what_cannot_be_sent() {
        let pd = [0u8; 509];
        let repr = StartupFrameRepr {
            kind: FrameKind::Request,
            markers: false,
            crc: false,
            rejected: false,
            revision: Revision::Rev2,
            enhanced: Some(EnhancedData::default()),
            private_data: &pd,
        };
        // 509 + 4 enhanced octets = 513 > 512.
        assert_eq!(
            repr.to_bytes(),
            Err(FrameError::PrivateDataTooLong {
                revision: Revision::Rev2,
                length: 513,
                max: 512
            })
        );
        let ok = StartupFrameRepr {
            private_data: &pd[..508],
            ..repr
        };
        assert_eq!(ok.to_bytes().unwrap().len(), 20 + 512);
        let rev1 = StartupFrameRepr {
            revision: Revision::Rev1,
            private_data: &[],
            ..repr
        };
        assert_eq!(
            rev1.to_bytes(),
            Err(FrameError::EnhancedNeedsRev2(Revision::Rev1))
        );
        let mut small = [0u8; 23];
        assert_eq!(
            ok.emit(&mut small),
            Err(FrameError::BufferTooSmall {
                needed: 532,
                available: 23
            })
        );
    }

    fn arb_repr_parts() -> impl Strategy<
        Value = (
            bool,
            bool,
            bool,
            bool,
            Revision,
            Option<EnhancedData>,
            Vec<u8>,
        ),
    > {
        let rev = prop_oneof![
            Just(Revision::Rev0),
            Just(Revision::Rev1),
            Just(Revision::Rev2)
        ];
        let enhanced = proptest::option::of(
            (
                0..=0x3FFFu16,
                0..=0x3FFFu16,
                any::<bool>(),
                any::<[bool; 3]>(),
            )
                .prop_map(|(ird, ord, p2p, [w, r, s])| EnhancedData {
                    ird,
                    ord,
                    peer_to_peer: p2p,
                    rtr: RtrTypes {
                        write: w,
                        read: r,
                        send: s,
                    },
                }),
        );
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            rev,
            enhanced,
            proptest::collection::vec(any::<u8>(), 0..=600),
        )
    }

    proptest! {
        #[test]
        fn round_trip((reply, m, c, r, revision, enhanced, mut pd) in arb_repr_parts()) {
            let enhanced = enhanced.filter(|_| revision == Revision::Rev2);
            let room = revision.max_private_data()
                - if enhanced.is_some() { 4 } else { 0 };
            pd.truncate(room);
            let kind = if reply { FrameKind::Reply } else { FrameKind::Request };
            let repr = StartupFrameRepr {
                kind, markers: m, crc: c, rejected: r && reply, revision, enhanced,
                private_data: &pd,
            };
            let bytes = repr.to_bytes().unwrap();
            prop_assert_eq!(bytes.len(), repr.buffer_len());
            let (back, len) = StartupFrameRepr::parse_bytes(&bytes).unwrap();
            prop_assert_eq!(len, bytes.len());
            prop_assert_eq!(back, repr);
        }

        #[test]
        fn arbitrary_octets_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..700)) {
            let _ = StartupFrameRepr::parse_bytes(&bytes);
            if let Ok(view) = StartupFrame::new_checked(&bytes[..]) {
                let _ = (view.key(), view.kind(), view.flags(), view.revision(),
                         view.private_data(), view.markers(), view.crc(),
                         view.rejected(), view.enhanced_flag());
                let _ = StartupFrameRepr::parse(&view);
            }
        }

        #[test]
        fn arbitrary_headers_with_valid_keys_never_panic(
            reply: bool, flags: u8, rev: u8, pd_len: u16,
            body in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let kind = if reply { FrameKind::Reply } else { FrameKind::Request };
            let mut bytes = kind.key().to_vec();
            bytes.extend_from_slice(&[flags, rev]);
            bytes.extend_from_slice(&pd_len.to_be_bytes());
            bytes.extend_from_slice(&body);
            if let Ok((repr, len)) = StartupFrameRepr::parse_bytes(&bytes) {
                prop_assert_eq!(len, 20 + usize::from(pd_len));
                prop_assert_eq!(repr.pd_length(), usize::from(pd_len));
                // Re-emitting gives the same octets except reserved bits
                // (and R in a Request), which are sent as zero.
                let mut out = repr.to_bytes().unwrap();
                let mask = 0xE0 | if repr.enhanced.is_some() { 0x10 } else { 0 };
                let expect_flags = flags & mask & if reply { 0xFF } else { 0xDF };
                prop_assert_eq!(out[16], expect_flags);
                out[16] = flags;
                prop_assert_eq!(&out[..], &bytes[..len]);
            }
        }
    }
}
