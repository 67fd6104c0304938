//! MPA startup frames in words: the one-line summary of a Request or Reply
//! ([`StartupFrameRepr`]'s `Display`) and of its RFC 6581 words
//! ([`EnhancedData`]'s), in the style of smoltcp's `wire::pretty_print`.
//! `iwarp decode` prints them, and the stack's tracing can log a startup
//! the same way.

use core::fmt;

use super::enhanced::EnhancedData;
use super::frame::{FrameKind, StartupFrameRepr};

/// Private data octets shown, at most.
const SHOWN: usize = 32;

impl fmt::Display for EnhancedData {
    /// `IRD 1 ORD 1`, then ` P2P` and the RTR types when peer-to-peer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IRD {} ORD {}", self.ird, self.ord)?;
        if self.peer_to_peer {
            f.write_str(" P2P")?;
            for (on, name) in [
                (self.rtr.write, "Write"),
                (self.rtr.read, "Read"),
                (self.rtr.send, "Send"),
            ] {
                if on {
                    write!(f, " RTR-{name}")?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for StartupFrameRepr<'_> {
    /// `Request rev 2 enhanced IRD 1 ORD 1, M 0 C 0`, with R for a Reply,
    /// the private data (printable ASCII, dots for the rest) and
    /// `REJECTED`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.kind {
            FrameKind::Request => "Request",
            FrameKind::Reply => "Reply",
        };
        write!(f, "{name} rev {}", self.revision.wire())?;
        if let Some(e) = &self.enhanced {
            write!(f, " enhanced {e}")?;
        }
        write!(f, ", M {} C {}", u8::from(self.markers), u8::from(self.crc))?;
        if self.kind == FrameKind::Reply {
            write!(f, " R {}", u8::from(self.rejected))?;
        }
        let pd = self.private_data;
        if !pd.is_empty() {
            write!(f, ", {} octets of private data \"", pd.len())?;
            for &b in pd.iter().take(SHOWN) {
                let c = if b.is_ascii_graphic() || b == b' ' {
                    char::from(b)
                } else {
                    '.'
                };
                write!(f, "{c}")?;
            }
            if pd.len() > SHOWN {
                f.write_str("…")?;
            }
            f.write_str("\"")?;
        }
        if self.rejected {
            f.write_str(" REJECTED")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::enhanced::{RtrType, RtrTypes};
    use super::super::frame::Revision;
    use super::*;

    #[test]
    fn request_and_reply() {
        let mut r = StartupFrameRepr {
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
        assert_eq!(r.to_string(), "Request rev 2 enhanced IRD 1 ORD 1, M 0 C 0");
        r.kind = FrameKind::Reply;
        r.crc = true;
        r.rejected = true;
        r.private_data = b"go\x01";
        r.enhanced = Some(EnhancedData {
            ird: 4,
            ord: 8,
            peer_to_peer: true,
            rtr: RtrTypes::only(RtrType::Read),
        });
        assert_eq!(
            r.to_string(),
            "Reply rev 2 enhanced IRD 4 ORD 8 P2P RTR-Read, M 0 C 1 R 1, 3 octets of private data \"go.\" REJECTED"
        );
    }
}
