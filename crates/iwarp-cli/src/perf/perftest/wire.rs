//! perftest's messages on its exchange channel, octet for octet.
//!
//! In rdma_cm mode (`-R`) perftest exchanges everything it needs outside the test traffic
//! (its version, its buffer geometry, the MTU, each queue pair's keys and address, the
//! bandwidth report) as Sends on a queue pair of its own, the first connection a client
//! makes. Each message is a bare C value copied into the Send, with no header: its size and
//! position in the sequence say what it is. Byte order is perftest's: integers in network
//! order (`htonl`, `htobe64`), doubles with their eight octets reversed on little-endian
//! hosts (so big-endian on the wire), strings NUL-padded; the one exception, the
//! `ib_send_bw` receive credit, is a host-order `uint32_t` written by RDMA Write.
//!
//! Everything here is checked against what perftest 6.06 (the Debian 12 package
//! `perftest 4.5+0.17`) sent over Linux `siw`, recorded in the rig; the decoders never panic
//! on any input.

use std::fmt;

/// Octets of the version string (`MAX_VERSION`).
pub const VERSION_LEN: usize = 16;
/// Octets of a `struct pingpong_dest` as perftest up to 6.28 sends it (x86-64 layout).
pub const DEST_LEN: usize = 56;
/// Octets of a `struct pingpong_dest` with the `tail_markers_vaddr` field later perftest
/// versions added after `vaddr`.
pub const DEST_LEN_WITH_TAIL_MARKERS: usize = 64;
/// Octets of an `int` exchanged in network order (cycle buffer, cache line size).
pub const INT_LEN: usize = 4;
/// Octets of the MTU exchange: the `ibv_mtu` enumeration as decimal text and its NUL
/// (perftest 5.31 and later).
pub const MTU_LEN: usize = 2;
/// Octets of each field of the bandwidth report exchange (`unsigned long`, `uint64_t`,
/// `double`).
pub const REPORT_FIELD_LEN: usize = 8;
/// Octets of an `ib_send_bw` receive credit.
pub const CREDIT_LEN: usize = 4;

/// A message that does not have the shape perftest gives it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message has the wrong number of octets for what the sequence expects here.
    #[error("the peer sent {got} octets where perftest sends its {what} ({expected} octets)")]
    Length {
        /// What was expected.
        what: &'static str,
        /// Octets perftest sends for it.
        expected: usize,
        /// Octets received.
        got: usize,
    },
    /// The version string is not a perftest version number.
    #[error("the peer's version `{0}` is not a perftest version number")]
    Version(String),
    /// The MTU text is not a number.
    #[error("the peer's MTU `{0}` is not a number")]
    Mtu(String),
}

fn exact<const N: usize>(b: &[u8], what: &'static str) -> Result<[u8; N], WireError> {
    b.try_into().map_err(|_| WireError::Length {
        what,
        expected: N,
        got: b.len(),
    })
}

/// A perftest version as exchanged: its text and the number `atof` makes of it, which is
/// what perftest compares against its thresholds.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    /// The text up to its first NUL.
    pub text: String,
    /// Its leading number.
    pub number: f64,
}

impl Version {
    /// Parses `text` the way `atof` would read a version: the leading digits and dot.
    pub fn parse(text: &str) -> Result<Self, WireError> {
        let end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let number: f64 = text[..end]
            .parse()
            .map_err(|_| WireError::Version(text.escape_default().to_string()))?;
        Ok(Self {
            text: text.to_string(),
            number,
        })
    }

    /// The 16 octets perftest sends: the text, NUL-padded (longer text is cut to 15).
    pub fn encode(&self) -> [u8; VERSION_LEN] {
        let mut b = [0u8; VERSION_LEN];
        let t = self.text.as_bytes();
        let n = t.len().min(VERSION_LEN - 1);
        b[..n].copy_from_slice(&t[..n]);
        b
    }

    /// Reads the 16 octets of a version exchange.
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        let b: [u8; VERSION_LEN] = exact(b, "version string")?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(VERSION_LEN);
        Self::parse(&String::from_utf8_lossy(&b[..end]))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// One queue pair's `struct pingpong_dest`: what perftest tells its peer about a queue pair
/// (over rdma_cm only `rkey`, `vaddr` and `out_reads` matter; the rest is printed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dest {
    /// InfiniBand LID (0 on iWARP).
    pub lid: u32,
    /// Outstanding RDMA Reads this end allows (`-o`, or the device's maximum).
    pub out_reads: u32,
    /// Queue pair number.
    pub qpn: u32,
    /// Packet sequence number (random, 24 bits; unused over iWARP).
    pub psn: u32,
    /// The STag of the buffer the peer is to use.
    pub rkey: u32,
    /// The tagged offset (virtual address) the peer is to use.
    pub vaddr: u64,
    /// The GID (on iWARP devices, the MAC address in the first six octets).
    pub gid: [u8; 16],
    /// Shared receive queue number (XRC and DC only).
    pub srqn: u32,
    /// GID table index.
    pub gid_index: i32,
}

impl Dest {
    /// The 56 octets perftest sends: network-order integers, four octets of alignment
    /// padding (perftest leaves them uninitialised; zeros here) before `vaddr`.
    pub fn encode(&self) -> [u8; DEST_LEN] {
        let mut b = [0u8; DEST_LEN];
        b[0..4].copy_from_slice(&self.lid.to_be_bytes());
        b[4..8].copy_from_slice(&self.out_reads.to_be_bytes());
        b[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        b[12..16].copy_from_slice(&self.psn.to_be_bytes());
        b[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        b[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        b[32..48].copy_from_slice(&self.gid);
        b[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        b[52..56].copy_from_slice(&self.gid_index.to_be_bytes());
        b
    }

    /// Reads a destination of either layout: 56 octets, or 64 with `tail_markers_vaddr`
    /// after `vaddr` (ignored). The padding is ignored too: perftest sends stack garbage
    /// there.
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        let gid_at = match b.len() {
            DEST_LEN => 32,
            DEST_LEN_WITH_TAIL_MARKERS => 40,
            got => {
                return Err(WireError::Length {
                    what: "queue pair destination",
                    expected: DEST_LEN,
                    got,
                })
            }
        };
        let u32_at = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&b[at..at + 4]);
            u32::from_be_bytes(w)
        };
        let mut vaddr = [0u8; 8];
        vaddr.copy_from_slice(&b[24..32]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[gid_at..gid_at + 16]);
        Ok(Self {
            lid: u32_at(0),
            out_reads: u32_at(4),
            qpn: u32_at(8),
            psn: u32_at(12),
            rkey: u32_at(16),
            vaddr: u64::from_be_bytes(vaddr),
            gid,
            srqn: u32_at(gid_at + 16),
            gid_index: u32_at(gid_at + 20) as i32,
        })
    }
}

/// Encodes an `int` as `htonl` does (cycle buffer, cache line size).
pub fn encode_int(v: u32) -> [u8; INT_LEN] {
    v.to_be_bytes()
}

/// Decodes an `int` exchanged in network order.
pub fn decode_int(b: &[u8], what: &'static str) -> Result<u32, WireError> {
    exact::<INT_LEN>(b, what).map(u32::from_be_bytes)
}

/// Encodes an `ibv_mtu` value (1 = 256 .. 5 = 4096) as perftest does: `"%d"` into two
/// octets, so one digit and its NUL.
pub fn encode_mtu(mtu: u8) -> [u8; MTU_LEN] {
    [b'0' + mtu.min(9), 0]
}

/// Decodes the MTU exchange as `strtol` reads it: leading decimal digits, else 0.
pub fn decode_mtu(b: &[u8]) -> Result<u8, WireError> {
    let b: [u8; MTU_LEN] = exact(b, "MTU")?;
    let digits: String = b
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .map(|&c| char::from(c))
        .collect();
    if digits.is_empty() {
        return Err(WireError::Mtu(
            String::from_utf8_lossy(&b).escape_default().to_string(),
        ));
    }
    digits
        .parse()
        .map_err(|_| WireError::Mtu(digits.escape_default().to_string()))
}

/// The octets of an `ibv_mtu` value (perftest's `MTU_SIZE`), 0 for values outside 1..=5.
pub fn mtu_octets(mtu: u8) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

/// Encodes a 64-bit report field (`size`, `iters`) in network order.
pub fn encode_u64(v: u64) -> [u8; REPORT_FIELD_LEN] {
    v.to_be_bytes()
}

/// Decodes a 64-bit report field.
pub fn decode_u64(b: &[u8], what: &'static str) -> Result<u64, WireError> {
    exact::<REPORT_FIELD_LEN>(b, what).map(u64::from_be_bytes)
}

/// Encodes a `double` report field as perftest's `hton_double` leaves it: big-endian.
pub fn encode_f64(v: f64) -> [u8; REPORT_FIELD_LEN] {
    v.to_be_bytes()
}

/// Decodes a `double` report field.
pub fn decode_f64(b: &[u8], what: &'static str) -> Result<f64, WireError> {
    exact::<REPORT_FIELD_LEN>(b, what).map(f64::from_be_bytes)
}

/// Encodes an `ib_send_bw` receive credit: the receiver's message count, a `uint32_t` in
/// the host order of an x86 machine (little-endian), as perftest writes it.
pub fn encode_credit(count: u32) -> [u8; CREDIT_LEN] {
    count.to_le_bytes()
}

/// Decodes a credit the peer wrote, given how many messages were sent: perftest writes its
/// host order, so of the two readings the little-endian one is taken unless only the
/// big-endian one is possible (no more than were sent).
pub fn decode_credit(b: [u8; CREDIT_LEN], sent: u64) -> u32 {
    let le = u32::from_le_bytes(b);
    let be = u32::from_be_bytes(b);
    if u64::from(le) > sent && u64::from(be) <= sent {
        be
    } else {
        le
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let d: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        d.chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    /// perftest 6.06's version Send, as recorded over siw.
    #[test]
    fn version_as_recorded() {
        let b = hex("362e3036000000000000000000000000");
        let v = Version::decode(&b).unwrap();
        assert_eq!(v.text, "6.06");
        assert!((v.number - 6.06).abs() < 1e-9);
        assert_eq!(v.encode().to_vec(), b);
        assert!(Version::decode(&b[..15]).is_err());
        assert!(Version::decode(&[0u8; 16]).is_err(), "an empty version");
        assert!(Version::decode(b"abc\0\0\0\0\0\0\0\0\0\0\0\0\0").is_err());
        // atof reads the leading number only.
        assert_eq!(Version::parse("5.70-rc1").unwrap().number, 5.70);
    }

    /// The keys `ib_write_bw -R` sent over siw: LID 0, OUT 1, QPN 2, PSN 0x14c896, RKey
    /// 0x7e801200, VAddr 0x556608950000, GID from the MAC 52:54:00:12:34:56, padding zero.
    #[test]
    fn dest_as_recorded() {
        let b = hex(
            "00000000 00000001 00000002 0014c896 7e801200 00000000 0000556608950000
             52540012345600000000000000000000 00000000 00000000",
        );
        let d = Dest::decode(&b).unwrap();
        assert_eq!(
            (d.lid, d.out_reads, d.qpn, d.psn, d.rkey),
            (0, 1, 2, 0x14c896, 0x7e80_1200)
        );
        assert_eq!(d.vaddr, 0x5566_0895_0000);
        assert_eq!(&d.gid[..6], &[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!((d.srqn, d.gid_index), (0, 0));
        assert_eq!(d.encode().to_vec(), b);
    }

    /// The padding after `rkey` is whatever was on perftest's stack: ignored.
    #[test]
    fn dest_padding_is_ignored() {
        let mut b = Dest {
            rkey: 7,
            vaddr: 9,
            ..Dest::default()
        }
        .encode();
        b[20..24].copy_from_slice(&hex("b87f0000"));
        let d = Dest::decode(&b).unwrap();
        assert_eq!((d.rkey, d.vaddr), (7, 9));
    }

    #[test]
    fn dest_with_tail_markers() {
        let d = Dest {
            lid: 1,
            out_reads: 128,
            qpn: 3,
            psn: 4,
            rkey: 5,
            vaddr: 6,
            gid: [7; 16],
            srqn: 8,
            gid_index: -1,
        };
        let short = d.encode();
        let mut long = Vec::new();
        long.extend_from_slice(&short[..32]);
        long.extend_from_slice(&0xdead_beef_u64.to_be_bytes());
        long.extend_from_slice(&short[32..]);
        assert_eq!(Dest::decode(&long).unwrap(), d);
        assert!(Dest::decode(&long[..60]).is_err());
    }

    #[test]
    fn scalars_as_recorded() {
        assert_eq!(decode_int(&hex("00001000"), "cycle buffer"), Ok(4096));
        assert_eq!(decode_int(&hex("00000040"), "cache line"), Ok(64));
        assert_eq!(encode_int(4096).to_vec(), hex("00001000"));
        assert_eq!(decode_mtu(&hex("3300")), Ok(3));
        assert_eq!(encode_mtu(3).to_vec(), hex("3300"));
        assert_eq!(mtu_octets(3), 1024);
        assert_eq!(mtu_octets(5), 4096);
        assert_eq!(mtu_octets(9), 0);
        assert!(decode_mtu(&hex("0000")).is_err());
        assert!(decode_mtu(&hex("33")).is_err());
        assert_eq!(decode_u64(&hex("0000000000000014"), "iters"), Ok(20));
        // The report the recorded ib_write_bw client sent, printed as 0.63, 0.05 and
        // 0.000781 at both ends.
        let rounded = |h: &str, places: i32| {
            let v = decode_f64(&hex(h), "report").unwrap();
            assert_eq!(encode_f64(v).to_vec(), hex(h));
            (v * 10f64.powi(places)).round() / 10f64.powi(places)
        };
        assert_eq!(rounded("3fe4066267b42f37", 2), 0.63);
        assert_eq!(rounded("3fa8648ef26b62a5", 2), 0.05);
        assert_eq!(rounded("3f4993e4e0c50316", 6), 0.000781);
        assert_eq!(encode_credit(6).to_vec(), hex("06000000"));
        assert_eq!(decode_credit([6, 0, 0, 0], 20), 6);
        // A big-endian writer: only that reading is possible.
        assert_eq!(decode_credit([0, 0, 0, 6], 20), 6);
    }

    proptest! {
        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Version::decode(&b);
            let _ = Dest::decode(&b);
            let _ = decode_int(&b, "x");
            let _ = decode_mtu(&b);
            let _ = decode_u64(&b, "x");
            let _ = decode_f64(&b, "x");
        }

        #[test]
        fn dest_round_trips(lid: u32, out: u32, qpn: u32, psn: u32, rkey: u32, vaddr: u64,
                            gid: [u8; 16], srqn: u32, gi: i32) {
            let d = Dest { lid, out_reads: out, qpn, psn, rkey, vaddr, gid, srqn, gid_index: gi };
            prop_assert_eq!(Dest::decode(&d.encode()), Ok(d));
        }

        #[test]
        fn version_round_trips(major in 0u32..100, minor in 0u32..100) {
            let v = Version::parse(&format!("{major}.{minor:02}")).unwrap();
            prop_assert_eq!(Version::decode(&v.encode()), Ok(v));
        }

        #[test]
        fn credits_round_trip(count: u32) {
            prop_assert_eq!(decode_credit(encode_credit(count), u64::from(count)), count);
        }
    }
}
