//! RDMAP opcodes and the RDMAP control octet (RFC 5040 §4.2, §4.3).

/// The RDMAP version this implementation speaks (RV = 1).
pub const RDMAP_VERSION: u8 = 1;

/// Untagged queue of Send messages.
pub const QN_SEND: u32 = 0;
/// Untagged queue of RDMA Read Requests.
pub const QN_READ_REQUEST: u32 = 1;
/// Untagged queue of Terminate messages.
pub const QN_TERMINATE: u32 = 2;

/// An RDMAP message type (RFC 5040 §4.3). Codes 8 to 15 are reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Opcode {
    /// RDMA Write, tagged.
    RdmaWrite = 0,
    /// RDMA Read Request, untagged on QN 1.
    ReadRequest = 1,
    /// RDMA Read Response, tagged.
    ReadResponse = 2,
    /// Send, untagged on QN 0.
    Send = 3,
    /// Send with Invalidate.
    SendInvalidate = 4,
    /// Send with Solicited Event.
    SendSolicited = 5,
    /// Send with Solicited Event and Invalidate.
    SendSolicitedInvalidate = 6,
    /// Terminate, untagged on QN 2.
    Terminate = 7,
}

impl Opcode {
    /// The opcode for 4 bits from the wire, if defined.
    pub const fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0 => Self::RdmaWrite,
            1 => Self::ReadRequest,
            2 => Self::ReadResponse,
            3 => Self::Send,
            4 => Self::SendInvalidate,
            5 => Self::SendSolicited,
            6 => Self::SendSolicitedInvalidate,
            7 => Self::Terminate,
            _ => return None,
        })
    }

    /// True for the messages that go in the tagged buffer model.
    pub const fn is_tagged(self) -> bool {
        matches!(self, Self::RdmaWrite | Self::ReadResponse)
    }

    /// True for the four kinds of Send.
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendInvalidate | Self::SendSolicited | Self::SendSolicitedInvalidate
        )
    }

    /// The untagged queue the message goes to, for untagged messages.
    //= rfc5040#4.3
    //# Each RDMAP message MUST use the DDP buffer model and the untagged queue number that its
    //# opcode is assigned.
    pub const fn queue(self) -> Option<u32> {
        match self {
            Self::RdmaWrite | Self::ReadResponse => None,
            Self::ReadRequest => Some(QN_READ_REQUEST),
            Self::Terminate => Some(QN_TERMINATE),
            _ => Some(QN_SEND),
        }
    }

    /// The RDMAP control octet: RV = 1, reserved zero, opcode.
    pub const fn control(self) -> u8 {
        (RDMAP_VERSION << 6) | self as u8
    }
}

/// The RV field of an RDMAP control octet.
pub const fn control_version(control: u8) -> u8 {
    control >> 6
}

/// The opcode bits of an RDMAP control octet.
pub const fn control_opcode(control: u8) -> u8 {
    control & 0x0f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_octets() {
        assert_eq!(Opcode::Send.control(), 0x43);
        assert_eq!(Opcode::RdmaWrite.control(), 0x40);
        assert_eq!(Opcode::Terminate.control(), 0x47);
        for b in 0..16 {
            assert_eq!(Opcode::from_bits(b).map(|o| o as u8), (b < 8).then_some(b));
        }
    }
}
