//! DDP error types and codes (RFC 5041 §7.2).

/// A DDP error as RFC 5041 §7.2 numbers them: error type and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DdpError {
    /// Type 0: local catastrophic error.
    #[error("local catastrophic error")]
    LocalCatastrophic,
    /// Type 1: tagged buffer error.
    #[error("tagged buffer error: {0}")]
    Tagged(TaggedError),
    /// Type 2: untagged buffer error.
    #[error("untagged buffer error: {0}")]
    Untagged(UntaggedError),
}

impl DdpError {
    /// The 4-bit error type.
    pub const fn etype(self) -> u8 {
        match self {
            Self::LocalCatastrophic => 0,
            Self::Tagged(_) => 1,
            Self::Untagged(_) => 2,
        }
    }

    /// The 8-bit error code.
    pub const fn code(self) -> u8 {
        match self {
            Self::LocalCatastrophic => 0,
            Self::Tagged(e) => e as u8,
            Self::Untagged(e) => e as u8,
        }
    }

    /// The error for a type and code read from the wire, if known.
    pub const fn from_parts(etype: u8, code: u8) -> Option<Self> {
        Some(match (etype, code) {
            (0, 0) => Self::LocalCatastrophic,
            (1, 0) => Self::Tagged(TaggedError::InvalidStag),
            (1, 1) => Self::Tagged(TaggedError::BaseBounds),
            (1, 2) => Self::Tagged(TaggedError::NotAssociated),
            (1, 3) => Self::Tagged(TaggedError::ToWrap),
            (1, 4) => Self::Tagged(TaggedError::InvalidVersion),
            (2, 1) => Self::Untagged(UntaggedError::InvalidQn),
            (2, 2) => Self::Untagged(UntaggedError::NoBuffer),
            (2, 3) => Self::Untagged(UntaggedError::MsnRange),
            (2, 4) => Self::Untagged(UntaggedError::InvalidMo),
            (2, 5) => Self::Untagged(UntaggedError::TooLong),
            (2, 6) => Self::Untagged(UntaggedError::InvalidVersion),
            _ => return None,
        })
    }
}

/// Tagged buffer errors (type 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u8)]
pub enum TaggedError {
    /// 0x00: invalid STag.
    #[error("invalid STag")]
    InvalidStag = 0x00,
    /// 0x01: base or bounds violation.
    #[error("base or bounds violation")]
    BaseBounds = 0x01,
    /// 0x02: STag not associated with DDP stream.
    #[error("STag not associated with DDP stream")]
    NotAssociated = 0x02,
    /// 0x03: TO wrap.
    #[error("TO wrap")]
    ToWrap = 0x03,
    /// 0x04: invalid DDP version.
    #[error("invalid DDP version")]
    InvalidVersion = 0x04,
}

/// Untagged buffer errors (type 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u8)]
pub enum UntaggedError {
    /// 0x01: invalid QN.
    #[error("invalid QN")]
    InvalidQn = 0x01,
    /// 0x02: invalid MSN, no buffer available.
    #[error("invalid MSN: no buffer available")]
    NoBuffer = 0x02,
    /// 0x03: invalid MSN, MSN range is not valid.
    #[error("invalid MSN: range not valid")]
    MsnRange = 0x03,
    /// 0x04: invalid MO.
    #[error("invalid MO")]
    InvalidMo = 0x04,
    /// 0x05: DDP message too long for available buffer.
    #[error("message too long for available buffer")]
    TooLong = 0x05,
    /// 0x06: invalid DDP version.
    #[error("invalid DDP version")]
    InvalidVersion = 0x06,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip() {
        for etype in 0..4 {
            for code in 0..=255 {
                if let Some(e) = DdpError::from_parts(etype, code) {
                    assert_eq!((e.etype(), e.code()), (etype, code));
                }
            }
        }
    }
}
