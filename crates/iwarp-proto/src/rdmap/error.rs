//! RDMAP error types and codes, and the cause of a Terminate message
//! (RFC 5040 §4.8 and §7.2, the IANA "RDMAP Errors" registry).

use crate::ddp::DdpError;
use crate::framing::LlpErrorCode;

/// An RDMAP-layer error: error type and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum RdmapError {
    /// Type 0: local catastrophic error.
    #[error("local catastrophic error")]
    LocalCatastrophic,
    /// Type 1: remote protection error.
    #[error("remote protection error: {0}")]
    RemoteProtection(ProtectionError),
    /// Type 2: remote operation error.
    #[error("remote operation error: {0}")]
    RemoteOperation(OperationError),
}

impl RdmapError {
    /// The 4-bit error type.
    pub const fn etype(self) -> u8 {
        match self {
            Self::LocalCatastrophic => 0,
            Self::RemoteProtection(_) => 1,
            Self::RemoteOperation(_) => 2,
        }
    }

    /// The 8-bit error code.
    pub const fn code(self) -> u8 {
        match self {
            Self::LocalCatastrophic => 0,
            Self::RemoteProtection(e) => e as u8,
            Self::RemoteOperation(e) => e as u8,
        }
    }

    /// The error for a type and code read from the wire, if known. Any
    /// code of type 0 is a local catastrophic error.
    pub const fn from_parts(etype: u8, code: u8) -> Option<Self> {
        use OperationError as O;
        use ProtectionError as P;
        Some(match (etype, code) {
            (0, _) => Self::LocalCatastrophic,
            (1, 0x00) => Self::RemoteProtection(P::InvalidStag),
            (1, 0x01) => Self::RemoteProtection(P::BaseBounds),
            (1, 0x02) => Self::RemoteProtection(P::AccessRights),
            (1, 0x03) => Self::RemoteProtection(P::NotAssociated),
            (1, 0x04) => Self::RemoteProtection(P::ToWrap),
            (1, 0x09) => Self::RemoteProtection(P::CannotInvalidate),
            (1, 0xff) => Self::RemoteProtection(P::Unspecified),
            (2, 0x05) => Self::RemoteOperation(O::InvalidVersion),
            (2, 0x06) => Self::RemoteOperation(O::UnexpectedOpcode),
            (2, 0x07) => Self::RemoteOperation(O::CatastrophicStream),
            (2, 0x08) => Self::RemoteOperation(O::CatastrophicGlobal),
            (2, 0x09) => Self::RemoteOperation(O::CannotInvalidate),
            (2, 0xff) => Self::RemoteOperation(O::Unspecified),
            _ => return None,
        })
    }
}

/// Remote protection error codes (type 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u8)]
#[non_exhaustive]
pub enum ProtectionError {
    /// 0x00: invalid STag.
    #[error("invalid STag")]
    InvalidStag = 0x00,
    /// 0x01: base or bounds violation.
    #[error("base or bounds violation")]
    BaseBounds = 0x01,
    /// 0x02: access rights violation.
    #[error("access rights violation")]
    AccessRights = 0x02,
    /// 0x03: STag not associated with RDMAP stream.
    #[error("STag not associated with RDMAP stream")]
    NotAssociated = 0x03,
    /// 0x04: TO wrap.
    #[error("TO wrap")]
    ToWrap = 0x04,
    /// 0x09: STag cannot be invalidated.
    #[error("STag cannot be invalidated")]
    CannotInvalidate = 0x09,
    /// 0xff: unspecified.
    #[error("unspecified")]
    Unspecified = 0xff,
}

/// Remote operation error codes (type 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u8)]
#[non_exhaustive]
pub enum OperationError {
    /// 0x05: invalid RDMAP version.
    #[error("invalid RDMAP version")]
    InvalidVersion = 0x05,
    /// 0x06: unexpected opcode.
    #[error("unexpected opcode")]
    UnexpectedOpcode = 0x06,
    /// 0x07: catastrophic error, localized to the RDMAP stream.
    #[error("catastrophic error, localized to stream")]
    CatastrophicStream = 0x07,
    /// 0x08: catastrophic error, global.
    #[error("catastrophic error, global")]
    CatastrophicGlobal = 0x08,
    /// 0x09: STag cannot be invalidated.
    #[error("STag cannot be invalidated")]
    CannotInvalidate = 0x09,
    /// 0xff: unspecified.
    #[error("unspecified")]
    Unspecified = 0xff,
}

/// What stopped a stream, as a Terminate message names it: layer, error
/// type and code (RFC 5040 §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ProtocolError {
    /// Layer 0.
    #[error("RDMAP: {0}")]
    Rdmap(RdmapError),
    /// Layer 1.
    #[error("DDP: {0}")]
    Ddp(DdpError),
    /// Layer 2, error type 0 (MPA).
    #[error("LLP: {0}")]
    Llp(LlpErrorCode),
}

impl ProtocolError {
    /// The 4-bit layer: 0 RDMAP, 1 DDP, 2 LLP.
    pub const fn layer(self) -> u8 {
        match self {
            Self::Rdmap(_) => 0,
            Self::Ddp(_) => 1,
            Self::Llp(_) => 2,
        }
    }

    /// The 4-bit error type.
    pub const fn etype(self) -> u8 {
        match self {
            Self::Rdmap(e) => e.etype(),
            Self::Ddp(e) => e.etype(),
            Self::Llp(_) => 0,
        }
    }

    /// The 8-bit error code.
    pub const fn code(self) -> u8 {
        match self {
            Self::Rdmap(e) => e.code(),
            Self::Ddp(e) => e.code(),
            Self::Llp(c) => c.code(),
        }
    }

    /// The error for a layer, type and code read from the wire, if known.
    pub const fn from_parts(layer: u8, etype: u8, code: u8) -> Option<Self> {
        match layer {
            0 => match RdmapError::from_parts(etype, code) {
                Some(e) => Some(Self::Rdmap(e)),
                None => None,
            },
            1 => match DdpError::from_parts(etype, code) {
                Some(e) => Some(Self::Ddp(e)),
                None => None,
            },
            2 if etype == 0 => match LlpErrorCode::from_code(code) {
                Some(c) => Some(Self::Llp(c)),
                None => None,
            },
            _ => None,
        }
    }
}

impl From<DdpError> for ProtocolError {
    fn from(e: DdpError) -> Self {
        Self::Ddp(e)
    }
}

impl From<RdmapError> for ProtocolError {
    fn from(e: RdmapError) -> Self {
        Self::Rdmap(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip() {
        for layer in 0..3 {
            for etype in 0..16 {
                for code in 0..=255 {
                    if let Some(e) = ProtocolError::from_parts(layer, etype, code) {
                        assert_eq!(e.layer(), layer);
                        assert_eq!(e.etype(), etype);
                        if !(layer == 0 && etype == 0) {
                            assert_eq!(e.code(), code);
                        }
                    }
                }
            }
        }
    }
}
