//! From a captured frame to a TCP segment: link layer, IPv4 or IPv6, TCP.
//!
//! The headers are read with the `etherparse` crate in its lax mode, which
//! accepts a frame cut short by the capture's snap length: the TCP payload
//! is then whatever was captured, and the octets that were not are simply
//! missing from the stream (the reassembler sees a hole). Ethernet padding
//! is excluded by the IP length. Checksums are not verified: with
//! checksum offload, captures taken on the sending host are full of
//! "wrong" ones. IP fragments are skipped (iWARP peers set DF and send
//! segments that fit the path MTU).

use std::net::{IpAddr, SocketAddr};

use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket, TransportSlice};

use crate::capture::LinkType;

/// The fields of a TCP segment the decoder needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    /// Sender's address and port.
    pub src: SocketAddr,
    /// Receiver's address and port.
    pub dst: SocketAddr,
    /// Sequence number of the first payload octet (of the SYN, if set).
    pub seq: u32,
    /// Acknowledgment number, if the ACK flag is set.
    pub ack: Option<u32>,
    /// SYN flag.
    pub syn: bool,
    /// FIN flag.
    pub fin: bool,
    /// RST flag.
    pub rst: bool,
    /// The captured payload.
    pub payload: &'a [u8],
    /// Whether the capture cut the payload short (snap length).
    pub truncated: bool,
}

/// Why a frame yields no TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
#[non_exhaustive]
pub enum Skip {
    /// A link type this decoder does not read.
    #[error("of an unsupported link type")]
    UnsupportedLink,
    /// Not IPv4 or IPv6, or an IP header that could not be read.
    #[error("not IP")]
    NotIp,
    /// IP, but not TCP (or a TCP header cut short).
    #[error("not TCP")]
    NotTcp,
    /// An IP fragment.
    #[error("IP fragments")]
    Fragment,
    /// TCP, on ports the options did not name.
    #[error("on other ports")]
    OtherPorts,
}

/// Reads the TCP segment in a frame of link type `link`.
pub fn parse(link: LinkType, data: &[u8]) -> Result<TcpSegment<'_>, Skip> {
    let sliced = match link {
        LinkType::Ethernet => LaxSlicedPacket::from_ethernet(data).map_err(|_| Skip::NotIp)?,
        // Linux cooked v1: 16 octets, the protocol (an EtherType) last.
        LinkType::LinuxSll => ether_type_at(data, 14, 16)?,
        // Linux cooked v2: 20 octets, the protocol first.
        LinkType::LinuxSll2 => ether_type_at(data, 0, 20)?,
        LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => {
            LaxSlicedPacket::from_ip(data).map_err(|_| Skip::NotIp)?
        }
        // BSD loopback: a 4-octet address family, then IP; the IP version
        // nibble tells which, whatever the family's byte order.
        LinkType::Null | LinkType::Loop => {
            LaxSlicedPacket::from_ip(data.get(4..).ok_or(Skip::NotIp)?).map_err(|_| Skip::NotIp)?
        }
        LinkType::Other(_) => return Err(Skip::UnsupportedLink),
    };
    let (src, dst, payload) = match &sliced.net {
        Some(LaxNetSlice::Ipv4(ip)) => (
            IpAddr::V4(ip.header().source_addr()),
            IpAddr::V4(ip.header().destination_addr()),
            ip.payload(),
        ),
        Some(LaxNetSlice::Ipv6(ip)) => (
            IpAddr::V6(ip.header().source_addr()),
            IpAddr::V6(ip.header().destination_addr()),
            ip.payload(),
        ),
        _ => return Err(Skip::NotIp),
    };
    if payload.fragmented {
        return Err(Skip::Fragment);
    }
    let truncated = payload.incomplete;
    let Some(TransportSlice::Tcp(tcp)) = &sliced.transport else {
        return Err(Skip::NotTcp);
    };
    Ok(TcpSegment {
        src: SocketAddr::new(src, tcp.source_port()),
        dst: SocketAddr::new(dst, tcp.destination_port()),
        seq: tcp.sequence_number(),
        ack: tcp.ack().then(|| tcp.acknowledgment_number()),
        syn: tcp.syn(),
        fin: tcp.fin(),
        rst: tcp.rst(),
        payload: tcp.payload(),
        truncated,
    })
}

/// Reads the EtherType at `at` and the IP packet from `header_len` on.
fn ether_type_at(data: &[u8], at: usize, header_len: usize) -> Result<LaxSlicedPacket<'_>, Skip> {
    let proto = data.get(at..at + 2).ok_or(Skip::NotIp)?;
    let rest = data.get(header_len..).ok_or(Skip::NotIp)?;
    Ok(LaxSlicedPacket::from_ether_type(
        EtherType(u16::from_be_bytes([proto[0], proto[1]])),
        rest,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn ipv4_tcp(payload: &[u8]) -> Vec<u8> {
        let builder = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40000, 4791, 1000, 65535)
            .ack(77)
            .psh();
        let mut out = Vec::new();
        builder.write(&mut out, payload).unwrap();
        out
    }

    #[test]
    fn ethernet_ipv4_tcp() {
        let frame = ipv4_tcp(b"hello");
        let s = parse(LinkType::Ethernet, &frame).unwrap();
        assert_eq!(s.src, "10.0.0.1:40000".parse().unwrap());
        assert_eq!(s.dst, "10.0.0.2:4791".parse().unwrap());
        assert_eq!((s.seq, s.ack), (1000, Some(77)));
        assert_eq!(s.payload, b"hello");
        assert!(!s.truncated && !s.syn && !s.fin);
    }

    #[test]
    fn snap_length_cuts_the_payload() {
        let frame = ipv4_tcp(b"hello world");
        let s = parse(LinkType::Ethernet, &frame[..frame.len() - 6]).unwrap();
        assert_eq!(s.payload, b"hello");
        assert!(s.truncated);
    }

    #[test]
    fn ipv6_raw_and_cooked() {
        let builder = PacketBuilder::ipv6([1; 16], [2; 16], 64).tcp(1, 2, 3, 4);
        let mut ip = Vec::new();
        builder.write(&mut ip, b"x").unwrap();
        let s = parse(LinkType::Raw, &ip).unwrap();
        assert_eq!(s.payload, b"x");
        assert!(s.src.is_ipv6());
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&[0x86, 0xdd]);
        sll.extend_from_slice(&ip);
        assert_eq!(parse(LinkType::LinuxSll, &sll).unwrap().payload, b"x");
        let mut sll2 = vec![0x86, 0xdd];
        sll2.extend_from_slice(&[0; 18]);
        sll2.extend_from_slice(&ip);
        assert_eq!(parse(LinkType::LinuxSll2, &sll2).unwrap().payload, b"x");
    }

    #[test]
    fn garbage_is_skipped() {
        for len in 0..80 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37) as u8).collect();
            for link in [
                LinkType::Ethernet,
                LinkType::LinuxSll,
                LinkType::LinuxSll2,
                LinkType::Raw,
                LinkType::Null,
                LinkType::Other(7),
            ] {
                let _ = parse(link, &junk);
            }
        }
        assert_eq!(parse(LinkType::Other(7), &[]), Err(Skip::UnsupportedLink));
    }
}
