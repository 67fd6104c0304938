//! Nothing a capture holds makes `iwarp decode` panic: arbitrary octets as
//! a capture file, as TCP payload (after a valid MPA startup or none, in
//! segments cut and ordered at random), as frames of every link type, and
//! straight into the MPA and IFT deframers with gaps between the chunks.

use std::io::Cursor;
use std::time::Duration;

use etherparse::PacketBuilder;
use iwarp_decode::ift::IftDirection;
use iwarp_decode::mpa::{CrcMode, MpaDirection};
use iwarp_decode::{CaptureReader, Decoder, Frame, LinkType, MarkerMode, Options};
use iwarp_proto::ift::{MarkerInterval, RxCrc, RxParams};
use proptest::prelude::*;

/// A pcap global header: little-endian, microseconds, Ethernet.
const PCAP_HEADER: [u8; 24] = [
    0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
];

/// A pcapng Section Header Block (little-endian, no options) and an
/// Ethernet Interface Description Block.
fn pcapng_header() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0]);
    v.extend_from_slice(&[0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0]);
    v.extend_from_slice(&[0xff; 8]);
    v.extend_from_slice(&[28, 0, 0, 0]);
    v.extend_from_slice(&[
        1, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0, 0, 20, 0, 0, 0,
    ]);
    v
}

fn options(markers: u8, check_crc: bool, port: bool) -> Options {
    Options {
        ports: if port { vec![4791] } else { vec![] },
        check_crc,
        markers: match markers % 3 {
            0 => MarkerMode::Auto,
            1 => MarkerMode::On,
            _ => MarkerMode::Off,
        },
        stream_offset: u64::from(markers / 3 % 8),
    }
}

/// Decodes a whole capture, rendering every record with `Display` and
/// `Debug` as a consumer would.
fn decode_file(bytes: Vec<u8>, opts: Options) {
    if let Ok(mut reader) = CaptureReader::new(Box::new(Cursor::new(bytes))) {
        let mut d = Decoder::new(opts);
        while let Some(Ok(frame)) = reader.next_frame() {
            d.frame(&frame).for_each(render);
        }
        d.finish().0.into_iter().for_each(render);
    }
}

fn render(r: iwarp_decode::Record) {
    let _ = format!("{:?}", r.event);
    #[cfg(feature = "serde")]
    let _ = serde_json::to_string(&r);
}

/// An Ethernet/IPv4/TCP frame.
fn tcp_frame(
    number: u64,
    dir: usize,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &[u8],
) -> Frame<'static> {
    let ip = [[10, 0, 0, 1], [10, 0, 0, 2]];
    let ports = [40000, 4791];
    let other = 1 - dir;
    let mut b = PacketBuilder::ethernet2([2; 6], [3; 6])
        .ipv4(ip[dir], ip[other], 64)
        .tcp(ports[dir], ports[other], seq, 65535);
    if flags & 1 != 0 {
        b = b.syn();
    }
    if flags & 2 != 0 {
        b = b.ack(ack);
    }
    if flags & 4 != 0 {
        b = b.fin();
    }
    if flags & 8 != 0 {
        b = b.rst();
    }
    let mut data = Vec::new();
    b.write(&mut data, payload).expect("frame");
    Frame {
        number,
        timestamp: Duration::from_micros(number * 10),
        link: LinkType::Ethernet,
        data: data.into(),
    }
}

const REQUEST: &[u8] = b"MPA ID Req Frame\x50\x02\x00\x04\x00\x10\x00\x10";
const REPLY_MARKERS: &[u8] = b"MPA ID Rep Frame\xd0\x02\x00\x04\x00\x10\x00\x10";

proptest! {
    #[test]
    fn arbitrary_files(bytes in proptest::collection::vec(any::<u8>(), 0..2048), m in any::<u8>()) {
        decode_file(bytes.clone(), options(m, true, false));
        let mut pcap = PCAP_HEADER.to_vec();
        pcap.extend_from_slice(&bytes);
        decode_file(pcap, options(m, m & 1 == 0, true));
        let mut ng = pcapng_header();
        ng.extend_from_slice(&bytes);
        decode_file(ng, options(m, true, true));
    }

    #[test]
    fn arbitrary_frames_of_every_link_type(
        frames in proptest::collection::vec((0u8..9, proptest::collection::vec(any::<u8>(), 0..200)), 0..20),
    ) {
        let links = [
            LinkType::Ethernet, LinkType::LinuxSll, LinkType::LinuxSll2, LinkType::Raw,
            LinkType::Ipv4, LinkType::Ipv6, LinkType::Null, LinkType::Loop, LinkType::Other(147),
        ];
        let mut d = Decoder::new(options(0, true, false));
        for (i, (link, data)) in frames.into_iter().enumerate() {
            let frame = Frame {
                number: i as u64 + 1,
                timestamp: Duration::from_secs(i as u64),
                link: links[usize::from(link)],
                data: data.into(),
            };
            d.frame(&frame).for_each(render);
        }
        d.finish().0.into_iter().for_each(render);
    }

    /// Arbitrary payload in both directions, after a valid startup (with
    /// CRC and markers) or after none, cut into segments sent in a random
    /// order with random sequence numbers, flags and acknowledgments.
    #[test]
    fn arbitrary_tcp_payloads(
        startup in any::<bool>(),
        stream in proptest::collection::vec(any::<u8>(), 0..3000),
        segments in proptest::collection::vec((any::<bool>(), 0usize..3000, 0usize..700, any::<u8>(), any::<u16>()), 0..40),
        m in any::<u8>(),
    ) {
        let mut d = Decoder::new(options(m, m & 1 == 0, true));
        let isn = [7u32, u32::MAX - 30];
        let mut n = 0;
        let mut frame = |d: &mut Decoder, dir: usize, rel: u32, ack: u32, flags: u8, payload: &[u8]| {
            n += 1;
            let seq = isn[dir].wrapping_add(1).wrapping_add(rel);
            let ack = isn[1 - dir].wrapping_add(1).wrapping_add(ack);
            d.frame(&tcp_frame(n, dir, seq, ack, flags, payload)).for_each(render);
        };
        frame(&mut d, 0, u32::MAX, 0, 1, &[]);
        let mut base = [0u32; 2];
        if startup {
            frame(&mut d, 0, 0, 0, 2, REQUEST);
            frame(&mut d, 1, 0, REQUEST.len() as u32, 2, REPLY_MARKERS);
            base = [REQUEST.len() as u32, REPLY_MARKERS.len() as u32];
        }
        for (to_client, at, len, flags, ack) in segments {
            let dir = usize::from(to_client);
            let at = at.min(stream.len());
            let end = (at + len).min(stream.len());
            frame(&mut d, dir, base[dir] + at as u32, u32::from(ack), flags & 0x0e | 2, &stream[at..end]);
        }
        d.finish().0.into_iter().for_each(render);
    }

    /// Arbitrary octets and gaps straight into the deframers.
    #[test]
    fn arbitrary_chunks_into_the_deframers(
        chunks in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..600), 0u64..2000), 0..12),
        markers in any::<bool>(),
        crc in 0u8..4,
        interval in 64u16..1024,
    ) {
        let mode = [CrcMode::On, CrcMode::Off, CrcMode::Unchecked, CrcMode::Auto][usize::from(crc)];
        let mut mpa = MpaDirection::new(markers, mode);
        let present = |on: bool| if on { RxCrc::Checked } else { RxCrc::Absent };
        let mut ift = IftDirection::new(
            RxParams {
                header_crc: present(markers),
                payload_crc: present(crc % 2 == 0),
                markers: MarkerInterval::new(interval).filter(|_| markers),
                vtag: 0,
            },
            true,
        );
        let mut events = Vec::new();
        for (i, (data, gap)) in chunks.iter().enumerate() {
            mpa.push(data, &mut events);
            ift.push(data, &mut events);
            if i % 3 == 2 {
                // Now and then as if the placement view had found a PDU
                // right after the hole.
                let found = i % 2 == 0;
                mpa.gap(0, *gap + 1, found, &mut events);
                ift.gap(0, *gap + 1, found, &mut events);
            }
        }
        mpa.finish(&mut events);
        ift.finish(&mut events);
    }
}

/// ULPDUs that look like DDP segments: a plausible control octet pair, then
/// anything.
fn ulpdu() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            Just(0x41u8),
            Just(0xc1),
            Just(0x01),
            Just(0x81),
            any::<u8>()
        ],
        0x40u8..0x50,
        proptest::collection::vec(any::<u8>(), 0..700),
    )
        .prop_map(|(ddp, rdmap, rest)| {
            let mut u = vec![ddp, rdmap];
            u.extend(rest);
            u
        })
}

proptest! {
    /// Every FPDU our transmitter frames, in chunks of any size, is
    /// decoded, in order, with its CRC correct and its length right;
    /// flipping octets changes what is reported but never panics.
    #[test]
    fn framed_ulpdus_all_come_out(
        ulpdus in proptest::collection::vec(ulpdu(), 1..12),
        markers in any::<bool>(),
        cuts in proptest::collection::vec(1usize..900, 0..30),
        flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..4),
    ) {
        use iwarp_decode::event::{CrcStatus, Event};
        use iwarp_proto::framing::{Framer, WireBatch};
        use iwarp_proto::mpa::{FpduTransmitter, FramingParams};

        let mut tx = FpduTransmitter::new(FramingParams { crc: true, send_markers: markers, receive_markers: false });
        let mut wire = Vec::new();
        for u in &ulpdus {
            let mut batch = WireBatch::new();
            tx.frame(&[], &[u], &mut batch).expect("frame");
            batch.write_to(&[u], &mut wire);
        }
        let feed = |wire: &[u8]| {
            let mut d = MpaDirection::new(markers, CrcMode::On);
            let mut events = Vec::new();
            let mut at = 0usize;
            for cut in cuts.iter().chain(std::iter::once(&usize::MAX)) {
                let end = at.saturating_add(*cut).min(wire.len());
                d.push(&wire[at..end], &mut events);
                at = end;
            }
            d.finish(&mut events);
            events
        };
        let events = feed(&wire);
        let pdus: Vec<_> = events.iter().filter_map(|e| match e { Event::Pdu(p) => Some(p), _ => None }).collect();
        prop_assert_eq!(pdus.len(), ulpdus.len());
        for (p, u) in pdus.iter().zip(&ulpdus) {
            prop_assert_eq!(p.crc.status, CrcStatus::Ok);
            prop_assert_eq!(p.ulpdu_len, u.len());
        }
        prop_assert!(!events.iter().any(|e| matches!(e, Event::Note(_) | Event::Gap(_) | Event::Resync(_))));

        let mut damaged = wire.clone();
        for (at, x) in flips {
            let i = at % damaged.len();
            damaged[i] ^= x;
        }
        feed(&damaged);
    }
}

/// ULPDUs with a valid DDP control octet (DV 1) and room for their header.
fn valid_ulpdu() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(0x41u8), Just(0xc1), Just(0x01), Just(0x81)],
        0x40u8..0x48,
        proptest::collection::vec(any::<u8>(), 16..400),
    )
        .prop_map(|(ddp, rdmap, rest)| {
            let mut u = vec![ddp, rdmap];
            u.extend(rest);
            u
        })
}

proptest! {
    /// A hole anywhere in a stream without markers but with CRC: decoding
    /// resumes at the first FPDU that starts after the hole, and every
    /// FPDU from there comes out with its CRC correct.
    #[test]
    fn the_crc_hunt_finds_the_first_fpdu_after_a_hole(
        ulpdus in proptest::collection::vec(valid_ulpdu(), 2..10),
        hole_at in any::<prop::sample::Index>(),
        hole_len in 1usize..1500,
        cuts in proptest::collection::vec(1usize..700, 0..20),
    ) {
        use iwarp_decode::event::{CrcStatus, Event};
        use iwarp_proto::framing::{Framer, WireBatch};
        use iwarp_proto::mpa::{FpduTransmitter, FramingParams};

        let mut tx = FpduTransmitter::new(FramingParams { crc: true, send_markers: false, receive_markers: false });
        let mut wire = Vec::new();
        let mut starts = Vec::new();
        for u in &ulpdus {
            starts.push(wire.len() as u64);
            let mut batch = WireBatch::new();
            tx.frame(&[], &[u], &mut batch).expect("frame");
            batch.write_to(&[u], &mut wire);
        }
        let hole = hole_at.index(wire.len());
        let resume = (hole + hole_len).min(wire.len());
        let mut d = MpaDirection::new(false, CrcMode::On);
        let mut events = Vec::new();
        let feed = |d: &mut MpaDirection, part: &[u8], events: &mut Vec<Event>| {
            let mut at = 0usize;
            for cut in cuts.iter().chain(std::iter::once(&usize::MAX)) {
                let end = at.saturating_add(*cut).min(part.len());
                d.push(&part[at..end], events);
                at = end;
            }
        };
        feed(&mut d, &wire[..hole], &mut events);
        d.gap(hole as u64, (resume - hole) as u64, false, &mut events);
        let before = events.len();
        feed(&mut d, &wire[resume..], &mut events);
        d.finish(&mut events);
        let after = &events[before..];
        let expected = starts.iter().copied().find(|&s| s >= resume as u64);
        let resync = after.iter().find_map(|e| match e { Event::Resync(r) => Some(r.offset), _ => None });
        prop_assert_eq!(resync, expected, "hole {}..{} starts {:?} events {:?}", hole, resume, starts, after.iter().map(|e| format!("{e:?}").chars().take(160).collect::<String>()).collect::<Vec<_>>());
        let pdus: Vec<_> = after.iter().filter_map(|e| match e { Event::Pdu(p) => Some(p), _ => None }).collect();
        let want = starts.iter().filter(|&&s| s >= resume as u64).count();
        prop_assert_eq!(pdus.len(), want);
        prop_assert!(pdus.iter().all(|p| p.crc.status == CrcStatus::Ok));
    }
}
