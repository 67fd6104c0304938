//! LLP error codes, as a Terminate message carries them.
//!
//! RFC 5044 §8 lists codes 1 to 4; RFC 6581 §9 adds 5 to 7. In a
//! Terminate message they appear with layer 2 (LLP), error type 0. They
//! are MPA's codes; IFT defines none of its own and maps its errors onto
//! them (see `ift::error`), so both framings report through
//! [`LlpError`].

/// An MPA (LLP layer) error code for the Terminate message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
//= rfc5044#8
//# The following errors MUST be detected by MPA and the codes SHOULD be provided to DDP or
//# other Consumer
//= rfc6581#9
//# The MPA error codes are extended by 0x05 local catastrophic error, 0x06 insufficient IRD
//# resources and 0x07 no matching RTR model, which MUST be used for these errors.
#[non_exhaustive]
pub enum LlpErrorCode {
    /// TCP connection closed, terminated or lost (RFC 5044 §8 code 1).
    ConnectionLost = 0x01,
    /// Received MPA CRC does not match the calculated value (code 2).
    CrcError = 0x02,
    /// A marker and the ULPDU lengths disagree on where an FPDU starts (code 3).
    MarkerMismatch = 0x03,
    /// Invalid MPA Request or Reply frame (code 4).
    InvalidStartupFrame = 0x04,
    /// Local catastrophic error (RFC 6581, code 5).
    LocalCatastrophic = 0x05,
    /// The initiator's IRD is less than the responder's ORD (RFC 6581, code 6).
    InsufficientIrd = 0x06,
    /// No ready-to-receive (RTR) model both ends support (RFC 6581, code 7).
    NoMatchingRtr = 0x07,
}

impl LlpErrorCode {
    /// The code octet as it appears on the wire.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The code for an octet read from the wire, if it is a known one.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x01 => Self::ConnectionLost,
            0x02 => Self::CrcError,
            0x03 => Self::MarkerMismatch,
            0x04 => Self::InvalidStartupFrame,
            0x05 => Self::LocalCatastrophic,
            0x06 => Self::InsufficientIrd,
            0x07 => Self::NoMatchingRtr,
            _ => return None,
        })
    }
}

/// An error of a framing layer that stops the stream, and the code a
/// Terminate message reports it with.
pub trait LlpError {
    /// The code to report in a Terminate message (layer LLP).
    fn llp_code(&self) -> LlpErrorCode;
}

impl core::fmt::Display for LlpErrorCode {
    /// The code's meaning, worded as RFC 5044 §8 and RFC 6581 §9 word it.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::ConnectionLost => "TCP connection closed, terminated or lost",
            Self::CrcError => "CRC error",
            Self::MarkerMismatch => "marker and ULPDU length disagree",
            Self::InvalidStartupFrame => "invalid MPA Request or Reply frame",
            Self::LocalCatastrophic => "local catastrophic error",
            Self::InsufficientIrd => "insufficient IRD resources",
            Self::NoMatchingRtr => "no matching RTR model",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    //= rfc6581#9
    //= type=test
    //# The MPA error codes are extended by 0x05 local catastrophic error, 0x06 insufficient IRD
    //# resources and 0x07 no matching RTR model, which MUST be used for these errors.
    fn codes_round_trip() {
        for code in 0..=255u8 {
            match LlpErrorCode::from_code(code) {
                Some(c) => assert_eq!(c.code(), code),
                None => assert!(code == 0 || code > 7),
            }
        }
    }
}
