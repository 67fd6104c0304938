//! The placement view: on captures built here, segments that arrive
//! beyond a hole show the PDUs an out-of-order receiver could place
//! before the hole fills, and a hole lost from the capture is crossed at
//! the PDU found right after it.

use iwarp_decode::event::{Event, GapAction, ResyncMethod};
use iwarp_decode::synth::{read_request, tagged, untagged, Framer, Tcp, C2S, S2C};
use iwarp_decode::{Options, Record, Summary};

/// rping's Request (IRD 1, ORD 1), and Replies with CRC, the second also
/// asking for markers in what the server receives.
const REQUEST: &[u8] = b"MPA ID Req Frame\x10\x02\x00\x04\x00\x01\x00\x01";
const REPLY_CRC: &[u8] = b"MPA ID Rep Frame\x50\x02\x00\x04\x00\x01\x00\x01";
const REPLY_CRC_MARKERS: &[u8] = b"MPA ID Rep Frame\xd0\x02\x00\x04\x00\x01\x00\x01";

fn decode(t: &Tcp) -> (Vec<Record>, Summary) {
    t.decode(Options::default())
}

/// The offsets of the PDUs decoded in order.
fn pdu_offsets(r: &[Record]) -> Vec<u64> {
    r.iter()
        .filter_map(|r| match &r.event {
            Event::Pdu(p) => Some(p.offset),
            _ => None,
        })
        .collect()
}

fn send(msn: u32, payload: &[u8]) -> Vec<u8> {
    untagged(true, 3, 0, 0, msn, 0, payload)
}

/// The handshake and startup; the client's FPDUs carry markers if
/// `markers` (the server asked for them).
fn session(port: u16, markers: bool) -> (Tcp, Framer) {
    let mut t = Tcp::new(port, 4791);
    t.handshake();
    t.send(C2S, REQUEST);
    t.send(
        S2C,
        if markers {
            REPLY_CRC_MARKERS
        } else {
            REPLY_CRC
        },
    );
    (t, Framer::new(true, markers))
}

/// The FPDUs, and where each starts relative to the first.
fn fpdus(c: &mut Framer, ulpdus: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<u32>) {
    let f: Vec<Vec<u8>> = ulpdus.iter().map(|u| c.fpdu(u)).collect();
    let starts = f
        .iter()
        .scan(0u32, |at, x| {
            let s = *at;
            *at += x.len() as u32;
            Some(s)
        })
        .collect();
    (f, starts)
}

#[test]
fn segments_beyond_a_hole_show_what_could_be_placed() {
    for markers in [false, true] {
        let (mut t, mut c) = session(43000 + u16::from(markers), markers);
        let (f, at) = fpdus(
            &mut c,
            &[
                send(1, &[1; 100]),
                tagged(true, 0, 0x100, 0x1000, &[2; 600]),
                tagged(true, 0, 0x100, 0x2000, &[3; 300]),
                untagged(true, 1, 0, 1, 1, 0, &read_request(0x200, 0, 64, 0x300, 0)),
                send(2, &[4; 40]),
            ],
        );
        let base = t.sent(C2S);
        t.send(C2S, &f[0]);
        // The second FPDU is late: the third, fourth and fifth arrive first.
        for i in [2, 3, 4, 1] {
            t.send_at(C2S, base + at[i], &f[i]);
        }
        let total: u32 = f.iter().map(|x| x.len() as u32).sum();
        t.lose(C2S, total - f[0].len() as u32);
        t.ack(S2C);
        let (r, summary) = decode(&t);
        let ahead: Vec<(u64, u64, bool)> = r
            .iter()
            .filter_map(|r| match &r.event {
                Event::Placeable(p) => Some((p.pdu.offset, p.hole, p.placeable)),
                _ => None,
            })
            .collect();
        let hole = u64::from(at[1]);
        assert_eq!(
            ahead,
            [
                (u64::from(at[2]), hole, true),
                (u64::from(at[3]), hole, false),
                (u64::from(at[4]), hole, true),
            ],
            "markers {markers}"
        );
        // Then, in order, all five, with no error.
        let all: Vec<u64> = at.iter().map(|&a| u64::from(a)).collect();
        assert_eq!(pdu_offsets(&r), all);
        let d = &summary.connections[0].directions[0];
        assert_eq!((d.ahead, d.placeable, d.errors), (3, 2, 0));
        assert_eq!(d.placeable_octets, 300 + 40);
    }
}

#[test]
fn a_hole_lost_from_the_capture_is_crossed_at_the_pdu_found_after_it() {
    let (mut t, mut c) = session(43010, false);
    let (f, _) = fpdus(
        &mut c,
        &[
            send(1, &[1; 100]),
            send(2, &[2; 500]),
            tagged(true, 0, 0x100, 0x1000, &[3; 300]),
            send(3, &[4; 40]),
        ],
    );
    t.send(C2S, &f[0]);
    t.lose(C2S, f[1].len() as u32);
    t.send(C2S, &f[2]);
    t.send(C2S, &f[3]);
    t.ack(S2C);
    let (r, _) = decode(&t);
    let gap = r.iter().find_map(|r| match &r.event {
        Event::Gap(g) => Some(g.action),
        _ => None,
    });
    assert_eq!(gap, Some(GapAction::Ahead));
    let resync = r
        .iter()
        .find_map(|r| match &r.event {
            Event::Resync(x) => Some(*x),
            _ => None,
        })
        .expect("decoding goes on");
    assert_eq!(resync.method, ResyncMethod::Ahead);
    let third = (f[0].len() + f[1].len()) as u64;
    assert_eq!(resync.offset, third);
    assert_eq!(pdu_offsets(&r), [0, third, third + f[2].len() as u64]);
}

#[test]
fn in_order_traffic_shows_nothing_ahead() {
    let (mut t, mut c) = session(43020, true);
    for m in 1..=20u32 {
        t.send(C2S, &c.fpdu(&send(m, &vec![m as u8; 30 * m as usize])));
    }
    t.ack(S2C);
    let (r, summary) = decode(&t);
    assert!(!r.iter().any(|r| matches!(r.event, Event::Placeable(_))));
    assert_eq!(summary.connections[0].directions[0].pdus, 20);
}
