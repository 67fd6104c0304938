//! The soak test's own messages: the client's private data (`Hello`), the
//! server's (`Welcome`), and the 16-octet header that starts every Send.
//!
//! All big-endian. A message that does not parse is counted as an error by
//! whoever received it, never trusted.

use iwarp::RemoteKey;

/// Octets of a [`Header`].
pub const HEADER_LEN: usize = 16;
/// Octets of a [`Hello`].
pub const HELLO_LEN: usize = 24;
/// Octets of a [`Welcome`].
pub const WELCOME_LEN: usize = 2 * RemoteKey::WIRE_LEN;
const MAGIC: &[u8; 4] = b"SOAK";

/// What a client tells the server when it connects: what the server needs
/// to regenerate the client's data and size its buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The run's seed.
    pub seed: u64,
    /// The connection's number in the run.
    pub connection: u32,
    /// The largest payload of one operation.
    pub max_size: u32,
    /// Operations in flight at once on the connection.
    pub depth: u16,
}

impl Hello {
    /// The private data octets.
    pub fn to_bytes(self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(MAGIC);
        b[4..12].copy_from_slice(&self.seed.to_be_bytes());
        b[12..16].copy_from_slice(&self.connection.to_be_bytes());
        b[16..20].copy_from_slice(&self.max_size.to_be_bytes());
        b[20..22].copy_from_slice(&self.depth.to_be_bytes());
        b
    }

    /// Parses private data; `None` if it is not a soak client's.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; HELLO_LEN] = b.try_into().ok()?;
        (&b[..4] == MAGIC).then(|| Self {
            seed: u64::from_be_bytes(b[4..12].try_into().expect("8")),
            connection: u32::from_be_bytes(b[12..16].try_into().expect("4")),
            max_size: u32::from_be_bytes(b[16..20].try_into().expect("4")),
            depth: u16::from_be_bytes(b[20..22].try_into().expect("2")),
        })
    }
}

/// What the server answers: where the client may Write and Read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Welcome {
    /// `depth` slots of `max_size` octets each, for the client's Writes.
    pub landing: RemoteKey,
    /// `max_size` octets of the server's pattern, for the client's Reads.
    pub source: RemoteKey,
}

impl Welcome {
    /// The private data octets.
    pub fn to_bytes(self) -> [u8; WELCOME_LEN] {
        let mut b = [0u8; WELCOME_LEN];
        b[..16].copy_from_slice(&self.landing.to_bytes());
        b[16..].copy_from_slice(&self.source.to_bytes());
        b
    }

    /// Parses private data.
    pub fn parse(b: &[u8]) -> Option<Self> {
        (b.len() == WELCOME_LEN).then_some(())?;
        Some(Self {
            landing: RemoteKey::from_bytes(&b[..16])?,
            source: RemoteKey::from_bytes(&b[16..])?,
        })
    }
}

/// What a Send carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Client to server: `len` octets of payload follow the header.
    Send = 1,
    /// Client to server: the client has RDMA-Written `len` octets into its
    /// lane's landing slot.
    Written = 2,
    /// Server to client: the operation was checked (`status`, `verified`);
    /// `len` octets of the server's payload follow.
    Ack = 3,
}

/// The result of the server's check, in an [`Kind::Ack`].
pub const STATUS_OK: u8 = 0;
/// The octets did not match.
pub const STATUS_MISMATCH: u8 = 1;
/// The header made no sense.
pub const STATUS_BAD_HEADER: u8 = 2;

/// The header at the start of every Send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// What it is.
    pub kind: Kind,
    /// For an ack: [`STATUS_OK`] or why not.
    pub status: u8,
    /// The client lane the operation belongs to (its slot).
    pub lane: u16,
    /// The operation's number on the connection.
    pub op: u32,
    /// Payload octets: following the header, or written.
    pub len: u32,
    /// For an ack: octets the server verified for the operation.
    pub verified: u32,
}

impl Header {
    /// The header octets.
    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.kind as u8;
        b[1] = self.status;
        b[2..4].copy_from_slice(&self.lane.to_be_bytes());
        b[4..8].copy_from_slice(&self.op.to_be_bytes());
        b[8..12].copy_from_slice(&self.len.to_be_bytes());
        b[12..16].copy_from_slice(&self.verified.to_be_bytes());
        b
    }

    /// Parses the start of a received message.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        let kind = match b[0] {
            1 => Kind::Send,
            2 => Kind::Written,
            3 => Kind::Ack,
            _ => return None,
        };
        Some(Self {
            kind,
            status: b[1],
            lane: u16::from_be_bytes([b[2], b[3]]),
            op: u32::from_be_bytes(b[4..8].try_into().expect("4")),
            len: u32::from_be_bytes(b[8..12].try_into().expect("4")),
            verified: u32::from_be_bytes(b[12..16].try_into().expect("4")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let h = Hello {
            seed: 0x0102_0304_0506_0708,
            connection: 9,
            max_size: 1 << 20,
            depth: 4,
        };
        assert_eq!(Hello::parse(&h.to_bytes()), Some(h));
        assert_eq!(Hello::parse(&h.to_bytes()[..23]), None);
        let key = |stag| RemoteKey {
            stag: iwarp::STag(stag),
            addr: 0x1000,
            len: 64,
        };
        let w = Welcome {
            landing: key(1),
            source: key(2),
        };
        assert_eq!(Welcome::parse(&w.to_bytes()), Some(w));
        let a = Header {
            kind: Kind::Ack,
            status: STATUS_MISMATCH,
            lane: 3,
            op: 77,
            len: 5,
            verified: 1000,
        };
        assert_eq!(Header::parse(&a.to_bytes()), Some(a));
        let mut bad = a.to_bytes();
        bad[0] = 9;
        assert_eq!(Header::parse(&bad), None);
        assert_eq!(Header::parse(&bad[..15]), None);
    }
}
