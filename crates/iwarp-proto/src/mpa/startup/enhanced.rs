//! Enhanced connection establishment data (MPA revision 2, RFC 6581).
//!
//! A revision 2 frame with the enhanced flag starts its private data with
//! two big-endian 16-bit words. The low 14 bits of each are a value, the
//! IRD (inbound RDMA Read queue depth) and the ORD (outbound); the top two
//! bits of each are control flags:
//!
//! ```text
//!  IRD word: |P2P|SEND_RTR|  IRD (14 bits)  |
//!  ORD word: |WRITE_RTR|READ_RTR| ORD (14 bits) |
//! ```
//!
//! P2P asks for (Request) or confirms (Reply) peer-to-peer mode, in which
//! the initiator sends a ready-to-receive (RTR) message as its first FPDU so
//! that the responder, which must not send before it has received an FPDU
//! (RFC 5044 §7.1.2 rule 4), can start at once. The RTR bits offer
//! (Request) or select (Reply) the RTR message: a zero-length RDMA Write,
//! RDMA Read or Send.

/// Octets of the enhanced data at the start of the private data.
pub const ENHANCED_DATA_LEN: usize = 4;
/// The largest IRD or ORD value the 14-bit fields hold.
pub const MAX_IRD_ORD: u16 = 0x3FFF;
/// IRD word: peer-to-peer mode.
pub const IRD_FLAG_PEER_TO_PEER: u16 = 0x8000;
/// IRD word: a zero-length Send may be the RTR message.
pub const IRD_FLAG_SEND_RTR: u16 = 0x4000;
/// ORD word: a zero-length RDMA Write may be the RTR message.
pub const ORD_FLAG_WRITE_RTR: u16 = 0x8000;
/// ORD word: a zero-length RDMA Read may be the RTR message.
pub const ORD_FLAG_READ_RTR: u16 = 0x4000;

/// A ready-to-receive message type of peer-to-peer mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RtrType {
    /// A zero-length RDMA Write.
    Write,
    /// A zero-length RDMA Read (the responder answers it with a zero-length
    /// Read Response).
    Read,
    /// A zero-length Send (consumes a posted receive at the responder).
    Send,
}

impl RtrType {
    /// All types, in the order a responder prefers them: Write needs no
    /// resources at the responder, Read needs an IRD slot, Send needs a
    /// posted receive buffer.
    pub const PREFERENCE: [RtrType; 3] = [RtrType::Write, RtrType::Read, RtrType::Send];
}

/// A set of RTR message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RtrTypes {
    /// Zero-length RDMA Write.
    pub write: bool,
    /// Zero-length RDMA Read.
    pub read: bool,
    /// Zero-length Send.
    pub send: bool,
}

impl RtrTypes {
    /// No type.
    pub const NONE: Self = Self {
        write: false,
        read: false,
        send: false,
    };
    /// Every type.
    pub const ALL: Self = Self {
        write: true,
        read: true,
        send: true,
    };
    /// Write and Read: what Linux siw offers and accepts (it does not take a
    /// zero-length Send as RTR).
    pub const WRITE_READ: Self = Self {
        write: true,
        read: true,
        send: false,
    };

    /// The set holding just `rtr`.
    pub const fn only(rtr: RtrType) -> Self {
        let mut set = Self::NONE;
        match rtr {
            RtrType::Write => set.write = true,
            RtrType::Read => set.read = true,
            RtrType::Send => set.send = true,
        }
        set
    }

    /// Whether `rtr` is in the set.
    pub const fn contains(self, rtr: RtrType) -> bool {
        match rtr {
            RtrType::Write => self.write,
            RtrType::Read => self.read,
            RtrType::Send => self.send,
        }
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        !self.write && !self.read && !self.send
    }

    /// Number of types in the set.
    pub const fn len(self) -> usize {
        self.write as usize + self.read as usize + self.send as usize
    }

    /// The types in both sets.
    pub const fn intersection(self, other: Self) -> Self {
        Self {
            write: self.write && other.write,
            read: self.read && other.read,
            send: self.send && other.send,
        }
    }

    /// The single type of a one-element set.
    pub const fn single(self) -> Option<RtrType> {
        match (self.write, self.read, self.send) {
            (true, false, false) => Some(RtrType::Write),
            (false, true, false) => Some(RtrType::Read),
            (false, false, true) => Some(RtrType::Send),
            _ => None,
        }
    }
}

/// Inbound and outbound RDMA Read queue depths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IrdOrd {
    /// Inbound RDMA Read queue depth: Read Requests this end will serve at
    /// once.
    pub ird: u16,
    /// Outbound RDMA Read queue depth: Read Requests this end may have
    /// outstanding.
    pub ord: u16,
}

impl IrdOrd {
    /// A pair of depths.
    pub const fn new(ird: u16, ord: u16) -> Self {
        Self { ird, ord }
    }
}

/// The enhanced connection establishment words of a revision 2 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
//= rfc6581#7.1
//# When the enhanced connection establishment flag is set, the first four octets of the Private
//# Data MUST carry the IRD and ORD, each in the low 14 bits of a 16-bit word, with the
//# peer-to-peer and RTR type bits above them.
pub struct EnhancedData {
    /// The IRD value (14 bits; larger values are sent as [`MAX_IRD_ORD`]).
    pub ird: u16,
    /// The ORD value (14 bits; larger values are sent as [`MAX_IRD_ORD`]).
    pub ord: u16,
    /// Peer-to-peer mode requested (Request) or confirmed (Reply).
    pub peer_to_peer: bool,
    /// RTR types offered (Request) or the one selected (Reply).
    pub rtr: RtrTypes,
}

impl EnhancedData {
    /// The words of a rejecting Reply: everything zero.
    pub const REJECT: Self = Self {
        ird: 0,
        ord: 0,
        peer_to_peer: false,
        rtr: RtrTypes::NONE,
    };

    /// Decodes the two words.
    pub const fn from_words(ird_word: u16, ord_word: u16) -> Self {
        Self {
            ird: ird_word & MAX_IRD_ORD,
            ord: ord_word & MAX_IRD_ORD,
            peer_to_peer: ird_word & IRD_FLAG_PEER_TO_PEER != 0,
            rtr: RtrTypes {
                write: ord_word & ORD_FLAG_WRITE_RTR != 0,
                read: ord_word & ORD_FLAG_READ_RTR != 0,
                send: ird_word & IRD_FLAG_SEND_RTR != 0,
            },
        }
    }

    /// Encodes the two words (IRD word, ORD word). Values above
    /// [`MAX_IRD_ORD`] saturate rather than spill into the flag bits.
    pub const fn to_words(&self) -> (u16, u16) {
        let ird = if self.ird > MAX_IRD_ORD {
            MAX_IRD_ORD
        } else {
            self.ird
        };
        let ord = if self.ord > MAX_IRD_ORD {
            MAX_IRD_ORD
        } else {
            self.ord
        };
        let mut ird_word = ird;
        let mut ord_word = ord;
        if self.peer_to_peer {
            ird_word |= IRD_FLAG_PEER_TO_PEER;
        }
        if self.rtr.send {
            ird_word |= IRD_FLAG_SEND_RTR;
        }
        if self.rtr.write {
            ord_word |= ORD_FLAG_WRITE_RTR;
        }
        if self.rtr.read {
            ord_word |= ORD_FLAG_READ_RTR;
        }
        (ird_word, ord_word)
    }

    /// Decodes the first four octets of `octets`, if there are four.
    pub fn parse(octets: &[u8]) -> Option<Self> {
        match octets {
            [a, b, c, d, ..] => Some(Self::from_words(
                u16::from_be_bytes([*a, *b]),
                u16::from_be_bytes([*c, *d]),
            )),
            _ => None,
        }
    }

    /// The four octets on the wire.
    pub const fn to_bytes(&self) -> [u8; ENHANCED_DATA_LEN] {
        let (ird, ord) = self.to_words();
        let ird = ird.to_be_bytes();
        let ord = ord.to_be_bytes();
        [ird[0], ird[1], ord[0], ord[1]]
    }

    /// The IRD and ORD values.
    pub const fn ird_ord(&self) -> IrdOrd {
        IrdOrd {
            ird: self.ird,
            ord: self.ord,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    //= rfc6581#7.1
    //= type=test
    //# When the enhanced connection establishment flag is set, the first four octets of the
    //# Private Data MUST carry the IRD and ORD, each in the low 14 bits of a 16-bit word, with
    //# the peer-to-peer and RTR type bits above them.
    fn siw_words_decode() {
        // siw-observed.md: rping's IRD 1 / ORD 1, no P2P.
        let d = EnhancedData::parse(&[0x00, 0x01, 0x00, 0x01]).unwrap();
        assert_eq!(d.ird_ord(), IrdOrd::new(1, 1));
        assert!(!d.peer_to_peer);
        assert!(d.rtr.is_empty());
        // P2P with Write RTR, 16/16.
        let d = EnhancedData::parse(&[0x80, 0x10, 0x80, 0x10]).unwrap();
        assert_eq!(d.ird_ord(), IrdOrd::new(16, 16));
        assert!(d.peer_to_peer);
        assert_eq!(d.rtr, RtrTypes::only(RtrType::Write));
    }

    #[test]
    fn every_flag_lands_on_its_bit() {
        let cases = [
            (
                RtrTypes::only(RtrType::Send),
                false,
                [0x40, 0x00, 0x00, 0x00],
            ),
            (
                RtrTypes::only(RtrType::Write),
                false,
                [0x00, 0x00, 0x80, 0x00],
            ),
            (
                RtrTypes::only(RtrType::Read),
                false,
                [0x00, 0x00, 0x40, 0x00],
            ),
            (RtrTypes::NONE, true, [0x80, 0x00, 0x00, 0x00]),
            (RtrTypes::ALL, true, [0xC0, 0x00, 0xC0, 0x00]),
        ];
        for (rtr, p2p, bytes) in cases {
            let d = EnhancedData {
                ird: 0,
                ord: 0,
                peer_to_peer: p2p,
                rtr,
            };
            assert_eq!(d.to_bytes(), bytes);
            assert_eq!(EnhancedData::parse(&bytes), Some(d));
        }
    }

    #[test]
    fn values_are_14_bits_and_saturate() {
        let d = EnhancedData {
            ird: 0xFFFF,
            ord: 0x4000,
            ..EnhancedData::default()
        };
        assert_eq!(d.to_bytes(), [0x3F, 0xFF, 0x3F, 0xFF]);
        let d = EnhancedData::parse(&[0xFF, 0xFF, 0xFF, 0xFF]).unwrap();
        assert_eq!(d.ird_ord(), IrdOrd::new(MAX_IRD_ORD, MAX_IRD_ORD));
        assert_eq!(d.rtr, RtrTypes::ALL);
        assert!(d.peer_to_peer);
    }

    #[test]
    fn short_input_is_none() {
        for len in 0..ENHANCED_DATA_LEN {
            assert_eq!(EnhancedData::parse(&[0u8; 4][..len]), None);
        }
    }

    #[test]
    fn set_operations() {
        assert_eq!(RtrTypes::ALL.len(), 3);
        assert_eq!(RtrTypes::NONE.single(), None);
        assert_eq!(RtrTypes::WRITE_READ.single(), None);
        for t in RtrType::PREFERENCE {
            assert_eq!(RtrTypes::only(t).single(), Some(t));
            assert!(RtrTypes::only(t).contains(t));
            assert_eq!(
                RtrTypes::ALL.intersection(RtrTypes::only(t)),
                RtrTypes::only(t)
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn words_round_trip(ird in 0..=MAX_IRD_ORD, ord in 0..=MAX_IRD_ORD,
                            p2p: bool, w: bool, r: bool, s: bool) {
            let d = EnhancedData { ird, ord, peer_to_peer: p2p,
                                   rtr: RtrTypes { write: w, read: r, send: s } };
            let (iw, ow) = d.to_words();
            proptest::prop_assert_eq!(EnhancedData::from_words(iw, ow), d);
            proptest::prop_assert_eq!(EnhancedData::parse(&d.to_bytes()), Some(d));
        }
    }
}
