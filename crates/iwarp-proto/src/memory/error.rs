//! Why an access or a registration was refused.

/// Why an access through an STag was refused, in the order of the checks
/// of RFC 5041 §7.1 (tagged) and RFC 5040 §7 (access rights).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum AccessViolation {
    /// No region has this STag, its key does not match, or it was
    /// invalidated or deregistered (RFC 5041 §7.1 tagged check 1).
    #[error("invalid STag")]
    InvalidStag,
    /// The region belongs to another protection domain, or is bound to
    /// another stream (RFC 5041 §8.2).
    #[error("STag not associated with this stream")]
    NotAssociated,
    /// The region does not allow this kind of access: RFC 5041 §7.1
    /// tagged check 2 when placing (reported as DDP's invalid STag, its
    /// table having no access-rights code), RFC 5040's remote protection
    /// error, access rights, for the source of a Read Request.
    #[error("access rights violation")]
    AccessRights,
    /// The access starts or ends outside the region (RFC 5041 §7.1
    /// tagged checks 3 and 4).
    #[error("base or bounds violation")]
    BaseBounds,
    /// TO plus length wraps a 64-bit unsigned sum (RFC 5041 §7.1 tagged
    /// check 5).
    #[error("tagged offset wrap")]
    ToWrap,
}

/// Why a region could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The range given does not lie inside the buffer.
    #[error("region range lies outside its buffer")]
    OutsideBuffer,
    /// Base TO plus length does not fit in 64 bits.
    #[error("region tagged offsets wrap")]
    ToRangeWraps,
    /// All 2^24 - 1 table indices are in use.
    #[error("memory table full")]
    TableFull,
}

/// The operating system's random number generator gave nothing to key a
/// table's STags with (see [`MemoryTable::try_new`](super::MemoryTable::try_new)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no random numbers from the operating system: {0}")]
pub struct NoRandomness(getrandom::Error);

impl From<getrandom::Error> for NoRandomness {
    fn from(e: getrandom::Error) -> Self {
        Self(e)
    }
}
