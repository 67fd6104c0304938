//! Tests of IFT frame transmit and receive together: frames built by hand
//! from the figures of draft-williams-iwarp-ift-01 §5.1, every check of the
//! receiver, and properties over random frames, CRC choices, markers and
//! chunkings.
//!
//! The CRC octets in the hand-built frames were computed with a bitwise
//! CRC32c written independently of the `crc32c` crate.

use super::*;
use crate::framing::{
    CollectUlpdus, Deframer, FeedError, Framer, FramingEvent, LlpError, LlpErrorCode, Next, Span,
    TxError, UlpduSink, WireBatch,
};
use proptest::prelude::*;

use crate::framing::COPY_PAYLOAD_UP_TO;
use crate::test_util::hex;

fn tx_params(header_crc: bool, payload_crc: bool, markers: Option<u16>, vtag: u16) -> TxParams {
    TxParams {
        header_crc,
        payload_crc,
        markers: markers.map(|m| MarkerInterval::new(m).unwrap()),
        vtag,
    }
}

const BOTH: TxParams = TxParams {
    header_crc: true,
    payload_crc: true,
    markers: None,
    vtag: 0x5a5a,
};

/// A frame to send: DDP header and payload.
type Frame = (Vec<u8>, Vec<u8>);

/// Frames each (header, payload) in turn and returns the stream.
fn transmit(tx: &mut IftTransmitter, frames: &[Frame]) -> Vec<u8> {
    let mut batch = WireBatch::new();
    let mut wire = Vec::new();
    for (h, p) in frames {
        batch.clear();
        let expect = tx.wire_len(h.len(), p.len());
        tx.frame(h, &[p], &mut batch).unwrap();
        let before = wire.len();
        batch.write_to(&[p], &mut wire);
        assert_eq!(wire.len() - before, batch.wire_len());
        assert_eq!(batch.wire_len(), expect);
    }
    wire
}

/// Feeds `wire` in chunks of the given sizes (cycled).
fn receive_chunked(
    rx: &mut IftReceiver,
    wire: &[u8],
    chunks: &[usize],
    sink: &mut CollectUlpdus,
) -> Result<(), IftRxError> {
    let mut at = 0;
    let mut i = 0;
    while at < wire.len() {
        let n = chunks[i % chunks.len()].max(1).min(wire.len() - at);
        i += 1;
        match rx.receive(&wire[at..at + n], sink) {
            Ok(used) => assert_eq!(used, n),
            Err(FeedError::Framing(e)) => return Err(e),
            Err(FeedError::Sink(never)) => match never {},
        }
        at += n;
    }
    Ok(())
}

fn ulpdu((h, p): &Frame) -> Vec<u8> {
    [&h[..], &p[..]].concat()
}

/// Transmits `frames`, checks the stream is `expected`, receives it one
/// octet at a time and whole, and checks the ULPDUs.
fn known_answer(params: TxParams, frames: &[Frame], expected: &[u8]) {
    let mut tx = IftTransmitter::new(params);
    assert_eq!(transmit(&mut tx, frames), expected);
    for chunk in [1, expected.len()] {
        let mut rx = IftReceiver::new(params.checked_by_peer());
        let mut sink = CollectUlpdus::new();
        receive_chunked(&mut rx, expected, &[chunk], &mut sink).unwrap();
        assert_eq!(sink.complete, frames.iter().map(ulpdu).collect::<Vec<_>>());
        assert!(rx.at_boundary());
        assert_eq!(rx.offset(), expected.len() as u64);
    }
}

/// §5.1 first figure: DDP header and payload a multiple of four, CRCs
/// aligned. An RFC 5041 tagged header (last RDMA Write segment, STag
/// 0x1234, TO 0x1000), 12 octets of payload.
#[test]
fn aligned_frame_of_figure_1() {
    let frame = (
        hex("c140 00001234 0000000000001000"),
        b"IFT aligned!".to_vec(),
    );
    let expected = hex("000e 000c 5a5a
         c140 00001234 0000000000001000
         5ba884b6
         49465420616c69676e656421
         657102ba");
    assert_eq!(expected.len(), 40);
    known_answer(BOTH, &[frame], &expected);
}

/// §5.1 second figure: no padding, so the header CRC starts two octets into
/// a word and the payload CRC one octet into one. A 12-octet DDP header
/// and 27 octets of payload.
#[test]
fn unaligned_frame_of_figure_2() {
    let frame: Frame = ((0x10..0x1c).collect(), (0x80..0x80 + 27).collect());
    let expected = hex("000c 001b a55a
         101112131415161718191a1b
         763ee24e
         808182838485868788898a8b8c8d8e8f909192939495969798999a
         3060ba7e");
    assert_eq!(expected.len(), 53);
    assert_eq!(6 + 12, 18, "header CRC at offset 18: 2 mod 4");
    assert_eq!(18 + 4 + 27, 49, "payload CRC at offset 49: 1 mod 4");
    known_answer(tx_params(true, true, None, 0xa55a), &[frame], &expected);
}

#[test]
fn frame_without_crcs_is_lengths_vtag_header_payload() {
    let frame = (
        hex("c140 00001234 0000000000001000"),
        b"IFT aligned!".to_vec(),
    );
    let expected = hex("000e 000c 5a5a c140 00001234 0000000000001000 49465420616c69676e656421");
    known_answer(
        tx_params(false, false, None, 0x5a5a),
        std::slice::from_ref(&frame),
        &expected,
    );
    // Header CRC only, payload CRC only.
    let h_only =
        hex("000e 000c 5a5a c140 00001234 0000000000001000 5ba884b6 49465420616c69676e656421");
    known_answer(
        tx_params(true, false, None, 0x5a5a),
        std::slice::from_ref(&frame),
        &h_only,
    );
    let p_only =
        hex("000e 000c 5a5a c140 00001234 0000000000001000 49465420616c69676e656421 657102ba");
    known_answer(tx_params(false, true, None, 0x5a5a), &[frame], &p_only);
}

/// Markers every 64 octets from offset 0: the leading marker is 0 (between
/// frames), the one at 64 points 60 octets back to the frame at 4. An
/// untagged Send header (18 octets) and 60 octets of payload; neither CRC
/// covers the markers.
#[test]
fn markers_every_64_octets() {
    let frame = (
        hex("4143 00000000 00000000 00000001 00000000"),
        vec![0xee; 60],
    );
    let expected = hex("00000000
         0012 003c 0102
         4143 00000000 00000000 00000001 00000000
         a47a15fe
         eeeeeeee eeeeeeee eeeeeeee eeeeeeee eeeeeeee eeeeeeee eeeeeeee eeeeeeee
         0000003c
         eeeeeeee eeeeeeee eeeeeeee eeeeeeee eeeeeeee eeeeeeee eeeeeeee
         3f732053");
    assert_eq!(expected.len(), 100);
    known_answer(tx_params(true, true, Some(64), 0x0102), &[frame], &expected);
}

#[test]
fn markers_every_interval_point_to_the_frame_start() {
    let params = tx_params(true, true, Some(100), 7);
    let mut tx = IftTransmitter::new(params);
    let wire = transmit(&mut tx, &[(vec![1; 18], vec![0xab; 3000])]);
    assert_eq!(&wire[..4], &[0, 0, 0, 0]);
    for m in (100..wire.len()).step_by(100) {
        let ptr = u32::from_be_bytes(wire[m..m + 4].try_into().unwrap()) as usize;
        assert_eq!(ptr, m - 4, "marker at {m}");
    }
    assert_eq!(wire.len(), tx.offset() as usize);
}

#[test]
fn marker_between_frames_is_zero_and_belongs_to_the_next_frame() {
    // 4 (marker) + 6 + 18 + 4 + 28 + 4 = 64: the first frame ends where the
    // marker at 64 is due.
    let params = tx_params(true, true, Some(64), 9);
    let mut tx = IftTransmitter::new(params);
    let first = transmit(&mut tx, &[(vec![1; 18], vec![2; 28])]);
    assert_eq!(first.len(), 64);
    let second = transmit(&mut tx, &[(vec![3; 18], vec![4; 5])]);
    assert_eq!(&second[..4], &[0, 0, 0, 0]);
    assert_eq!(&second[4..6], &[0, 18]);
    let wire = [first, second].concat();
    let mut rx = IftReceiver::new(params.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &wire[..64], &[64], &mut sink).unwrap();
    assert!(rx.at_boundary(), "the stream may end before the marker");
    receive_chunked(&mut rx, &wire[64..], &[3], &mut sink).unwrap();
    assert_eq!(sink.complete.len(), 2);
}

#[test]
fn wrong_frame_ptr_is_a_marker_error() {
    let params = tx_params(true, true, Some(64), 9);
    let mut tx = IftTransmitter::new(params);
    let mut wire = transmit(&mut tx, &[(vec![1; 14], vec![2; 200])]);
    wire[64 + 3] ^= 0x01;
    let mut rx = IftReceiver::new(params.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    let err = receive_chunked(&mut rx, &wire, &[17], &mut sink).unwrap_err();
    assert_eq!(
        err,
        IftRxError::Marker {
            marker_offset: 64,
            expected: 60,
            found: 61
        }
    );
    assert_eq!(err.llp_code(), LlpErrorCode::MarkerMismatch);
    assert!(sink.complete.is_empty());
}

#[test]
fn unchecked_crc_fields_are_read_but_not_checked() {
    let frame = (vec![0x41; 18], vec![0x99; 33]);
    let mut tx = IftTransmitter::new(BOTH);
    let mut wire = transmit(&mut tx, std::slice::from_ref(&frame));
    let n = wire.len();
    wire[6 + 18] ^= 0xff; // header CRC
    wire[n - 1] ^= 0xff; // payload CRC
    let mut rx_params = BOTH.checked_by_peer();
    rx_params.header_crc = RxCrc::Ignored;
    rx_params.payload_crc = RxCrc::Ignored;
    let mut rx = IftReceiver::new(rx_params);
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &wire, &[1], &mut sink).unwrap();
    assert_eq!(sink.complete, vec![ulpdu(&frame)]);
    // Checked, each is caught.
    for (field, which) in [(RxCrc::Checked, 0), (RxCrc::Checked, 1)] {
        let mut p = rx_params;
        if which == 0 {
            p.header_crc = field;
        } else {
            p.payload_crc = field;
        }
        let mut rx = IftReceiver::new(p);
        let err = receive_chunked(&mut rx, &wire, &[5], &mut CollectUlpdus::new()).unwrap_err();
        assert_eq!(err.llp_code(), LlpErrorCode::CrcError);
        if which == 0 {
            assert!(matches!(
                err,
                IftRxError::HeaderCrc {
                    frame_offset: 0,
                    ..
                }
            ));
        } else {
            assert!(matches!(
                err,
                IftRxError::PayloadCrc {
                    frame_offset: 0,
                    ..
                }
            ));
        }
    }
}

#[test]
fn vtag_mismatch_is_an_error_and_a_damaged_vtag_a_crc_error() {
    let frame = (vec![0x41; 18], vec![0x99; 10]);
    let mut tx = IftTransmitter::new(BOTH);
    let wire = transmit(&mut tx, &[frame.clone(), frame]);
    // A frame for another VTag, intact: the VTag check catches it.
    let mut rx_params = BOTH.checked_by_peer();
    rx_params.vtag = 0x5a5b;
    let mut rx = IftReceiver::new(rx_params);
    let mut sink = CollectUlpdus::new();
    let err = receive_chunked(&mut rx, &wire, &[2], &mut sink).unwrap_err();
    assert_eq!(
        err,
        IftRxError::VTag {
            frame_offset: 0,
            expected: 0x5a5b,
            found: 0x5a5a
        }
    );
    assert_eq!(err.llp_code(), LlpErrorCode::MarkerMismatch);
    assert_eq!(sink.partial(), None, "nothing of the frame was passed");
    // A VTag damaged in transit, with the header CRC checked: a CRC error.
    let mut damaged = wire.clone();
    damaged[5] ^= 1;
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    let err = receive_chunked(&mut rx, &damaged, &[64], &mut CollectUlpdus::new()).unwrap_err();
    assert!(matches!(err, IftRxError::HeaderCrc { .. }));
    // With the header CRC ignored, the VTag check still catches it.
    let mut p = BOTH.checked_by_peer();
    p.header_crc = RxCrc::Ignored;
    let mut rx = IftReceiver::new(p);
    let err = receive_chunked(&mut rx, &damaged, &[64], &mut CollectUlpdus::new()).unwrap_err();
    assert!(matches!(err, IftRxError::VTag { found: 0x5a5b, .. }));
}

#[test]
//= draft-williams-iwarp-ift-01#4.2
//= type=test
//# If not set, the receiver MUST NOT do speculative placement.
fn header_crc_is_checked_before_any_octet_is_passed() {
    let frame = (vec![0x41; 18], vec![0x99; 1000]);
    let mut tx = IftTransmitter::new(BOTH);
    let mut wire = transmit(&mut tx, &[frame]);
    wire[10] ^= 0x04; // inside the DDP header
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    let err = receive_chunked(&mut rx, &wire, &[wire.len()], &mut sink).unwrap_err();
    assert!(matches!(err, IftRxError::HeaderCrc { .. }));
    assert_eq!(sink.partial(), None);
    assert!(sink.complete.is_empty());
}

#[test]
fn payload_crc_error_leaves_the_ulpdu_unfinished() {
    let frame = (vec![0x41; 18], vec![0x99; 1000]);
    let mut tx = IftTransmitter::new(BOTH);
    let mut wire = transmit(&mut tx, std::slice::from_ref(&frame));
    wire[500] ^= 0x80;
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    let err = receive_chunked(&mut rx, &wire, &[333], &mut sink).unwrap_err();
    assert!(matches!(
        err,
        IftRxError::PayloadCrc {
            frame_offset: 0,
            ..
        }
    ));
    assert_eq!(err.llp_code(), LlpErrorCode::CrcError);
    // Placed (DDP may have copied it) but never ended, so never delivered.
    assert_eq!(sink.partial().map(<[u8]>::len), Some(18 + 1000));
    assert!(sink.complete.is_empty());
}

#[test]
fn oversized_header_size_is_refused_before_buffering() {
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    // The first octet alone says nothing yet.
    assert_eq!(rx.receive(&[0x00], &mut sink), Ok(1));
    let err = rx.receive(&[0x41], &mut sink).unwrap_err();
    assert_eq!(
        err,
        FeedError::Framing(IftRxError::HeaderTooLong {
            frame_offset: 0,
            header_size: 65,
            max: MAX_HEADER_SIZE
        })
    );
    // 64 is accepted.
    let mut tx = IftTransmitter::new(BOTH);
    let frame = (vec![7; 64], vec![8; 3]);
    let wire = transmit(&mut tx, std::slice::from_ref(&frame));
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &wire, &[1], &mut sink).unwrap();
    assert_eq!(sink.complete, vec![ulpdu(&frame)]);
    // 0xffff, as a hostile peer would send it.
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    let err = rx.receive(&[0xff, 0xff, 0, 0, 0x5a, 0x5a], &mut CollectUlpdus::new());
    assert!(matches!(
        err,
        Err(FeedError::Framing(IftRxError::HeaderTooLong {
            header_size: 0xffff,
            ..
        }))
    ));
    assert_eq!(
        rx.offset(),
        0,
        "the failing chunk is not counted as received"
    );
}

#[test]
fn nothing_passes_after_an_error() {
    let mut tx = IftTransmitter::new(BOTH);
    let mut wire = transmit(
        &mut tx,
        &[(vec![1; 14], vec![2; 10]), (vec![3; 14], vec![4; 10])],
    );
    let n = wire.len();
    wire[n - 1] ^= 1; // the second frame's payload CRC
    let more = transmit(&mut tx, &[(vec![5; 14], vec![6; 10])]);
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    let err = receive_chunked(&mut rx, &wire, &[wire.len()], &mut sink).unwrap_err();
    assert!(matches!(
        err,
        IftRxError::PayloadCrc {
            frame_offset: 38,
            ..
        }
    ));
    assert_eq!(sink.complete.len(), 1);
    assert_eq!(rx.next(), Next::Failed);
    assert_eq!(rx.error(), Some(err));
    assert_eq!(rx.receive(&more, &mut sink), Err(FeedError::Framing(err)));
    assert_eq!(rx.push_framing(&more), Err(err));
    assert_eq!(rx.push_payload(&[]), Err(err));
    assert_eq!(sink.complete.len(), 1);
    assert!(!rx.at_boundary());
}

#[test]
fn empty_frames_end_without_waiting_for_more_input() {
    for (hc, pc) in [(false, false), (true, false), (false, true), (true, true)] {
        let params = tx_params(hc, pc, None, 3);
        let mut tx = IftTransmitter::new(params);
        let wire = transmit(&mut tx, &[(vec![], vec![]), (vec![9; 14], vec![])]);
        let mut rx = IftReceiver::new(params.checked_by_peer());
        let mut sink = CollectUlpdus::new();
        receive_chunked(&mut rx, &wire, &[1], &mut sink).unwrap();
        assert_eq!(sink.complete, vec![vec![], vec![9; 14]], "hc {hc} pc {pc}");
        assert_eq!(rx.pdus_received(), 2);
    }
}

#[test]
fn sizes_are_checked_against_the_16_bit_fields() {
    let mut tx = IftTransmitter::new(BOTH);
    let mut batch = WireBatch::new();
    let big = vec![0u8; 65536];
    assert_eq!(
        tx.frame(&big, &[], &mut batch),
        Err(TxError::HeaderTooLong { len: 65536 })
    );
    let half = vec![0u8; 40000];
    assert_eq!(
        tx.frame(&[0; 14], &[&half, &half], &mut batch),
        Err(TxError::PayloadTooLong { len: 80000 })
    );
    assert!(batch.is_empty());
    assert_eq!(tx.offset(), 0);
    tx.frame(&[0; 14], &[&big[..65535]], &mut batch).unwrap();
    assert_eq!(batch.wire_len(), 6 + 14 + 4 + 65535 + 4);
}

/// Two frames' DDP headers and payloads, the first payload in two
/// slices: header 1, payload 1a and 1b, header 2, payload 2.
fn two_frames() -> [&'static [u8]; 5] {
    [&[1; 14], &[2; 700], &[3; 5], &[4; 18], &[5; 9]]
}

#[test]
fn long_payload_is_borrowed_and_short_payload_joins_the_framing() {
    let mut tx = IftTransmitter::new(BOTH);
    let [h1, p1a, p1b, h2, p2] = two_frames();
    assert!(p1a.len() > COPY_PAYLOAD_UP_TO && p1b.len() <= COPY_PAYLOAD_UP_TO);
    let mut batch = WireBatch::new();
    tx.frame(h1, &[p1a, p1b], &mut batch).unwrap();
    tx.frame(h2, &[p2], &mut batch).unwrap();
    assert_eq!(batch.pdu_count(), 2);
    assert_eq!(batch.slice_count(), 3);
    let slices = [p1a, p1b, p2];
    let pieces: Vec<&[u8]> = batch.pieces(&slices).collect();
    // IFT header + DDP header + header CRC; the long payload, borrowed;
    // then the short payload copied, the payload CRC, the next frame's
    // headers, its short payload and its CRC, all one piece.
    assert_eq!(pieces.len(), 3);
    assert_eq!(pieces[0].len(), 6 + 14 + 4);
    assert!(std::ptr::eq(pieces[1].as_ptr(), p1a.as_ptr()));
    assert_eq!(pieces[2].len(), 5 + 4 + 6 + 18 + 4 + 9 + 4);
    assert!(!pieces[2..]
        .iter()
        .any(|piece| std::ptr::eq(piece.as_ptr(), p1b.as_ptr())));
    let mut wire = Vec::new();
    batch.write_to(&slices, &mut wire);
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &wire, &[wire.len()], &mut sink).unwrap();
    assert_eq!(
        sink.complete,
        vec![[h1, p1a, p1b].concat(), [h2, p2].concat()]
    );
}

#[test]
fn with_markers_the_payload_is_copied_and_a_batch_is_one_piece() {
    let params = tx_params(true, true, Some(64), 9);
    let mut tx = IftTransmitter::new(params);
    let [h1, p1a, p1b, h2, p2] = two_frames();
    let mut batch = WireBatch::new();
    tx.frame(h1, &[p1a, p1b], &mut batch).unwrap();
    tx.frame(h2, &[p2], &mut batch).unwrap();
    let slices = [p1a, p1b, p2];
    let pieces: Vec<&[u8]> = batch.pieces(&slices).collect();
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0].len(), batch.wire_len());
    assert_eq!(batch.wire_len() as u64, tx.offset());
    let mut rx = IftReceiver::new(params.checked_by_peer());
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, pieces[0], &[pieces[0].len()], &mut sink).unwrap();
    assert_eq!(
        sink.complete,
        vec![[h1, p1a, p1b].concat(), [h2, p2].concat()]
    );
}

/// Drives the step API the way a runtime placing payload directly does:
/// the verified DDP header is read first, then payload octets go straight
/// to a destination buffer.
#[test]
fn step_api_places_payload_where_the_caller_wants() {
    let params = tx_params(true, true, Some(128), 0x77);
    let frames = [
        (vec![0xa1; 18], vec![0xabu8; 1500]),
        (vec![0xa2; 14], vec![]),
        (vec![0xa3; 14], vec![0x11; 3]),
    ];
    let mut tx = IftTransmitter::at_offset(params, 100);
    let wire = transmit(&mut tx, &frames);
    let mut rx = IftReceiver::at_offset(params.checked_by_peer(), 100);
    let mut dest = vec![0u8; 1503];
    let (mut placed, mut at, mut ends) = (0, 0, 0);
    let mut headers = Vec::new();
    loop {
        match rx.next() {
            Next::Framing => {
                let (n, ev) = rx.push_framing(&wire[at..]).unwrap();
                at += n;
                match ev {
                    Some(FramingEvent::Begin {
                        header_len,
                        payload_len,
                    }) => {
                        assert_eq!(rx.header().len(), header_len);
                        headers.push((rx.header().to_vec(), payload_len));
                    }
                    Some(FramingEvent::End) => ends += 1,
                    None if at == wire.len() => break,
                    None => assert!(n > 0),
                }
            }
            Next::Payload { run, remaining } => {
                assert!(run <= 128 && run <= remaining);
                dest[placed..placed + run].copy_from_slice(&wire[at..at + run]);
                rx.push_payload(&dest[placed..placed + run]).unwrap();
                placed += run;
                at += run;
            }
            Next::Failed => panic!("failed"),
        }
    }
    assert_eq!(
        headers,
        vec![
            (vec![0xa1; 18], 1500),
            (vec![0xa2; 14], 0),
            (vec![0xa3; 14], 3)
        ]
    );
    assert_eq!(ends, 3);
    assert_eq!(dest, [frames[0].1.clone(), frames[2].1.clone()].concat());
    assert!(rx.at_boundary());
}

/// Replays a stream through `payload_layout` the way a runtime's vectored
/// reads do, in reads of at most `read_max` payload octets.
fn receive_with_layout(rx: &mut IftReceiver, wire: &[u8], read_max: usize) -> Vec<u8> {
    let mut placed = Vec::new();
    let mut at = 0;
    while at < wire.len() || rx.next() == Next::Framing && !rx.at_boundary() {
        let layout: Vec<Span> = rx.layout(read_max).collect();
        if layout.is_empty() {
            let end = (at + 1).min(wire.len());
            let (n, _) = rx.push_framing(&wire[at..end]).unwrap();
            at += n;
            continue;
        }
        for span in layout {
            match span {
                Span::Payload(n) => {
                    rx.push_payload(&wire[at..at + n]).unwrap();
                    placed.extend_from_slice(&wire[at..at + n]);
                    at += n;
                }
                Span::Marker => {
                    let (n, ev) = rx.push_framing(&wire[at..at + 4]).unwrap();
                    assert_eq!((n, ev), (4, None));
                    at += 4;
                }
            }
        }
    }
    placed
}

#[test]
fn layout_spans_cover_the_payload_around_markers() {
    let params = tx_params(true, true, Some(64), 0x99);
    for offset in [0u64, 30, 60, 62, 63] {
        let frames = [
            (vec![1; 18], vec![0x42u8; 3000]),
            (vec![2; 14], vec![0x17u8; 20]),
            (vec![3; 14], vec![]),
            (vec![4; 18], vec![0x99u8; 1200]),
        ];
        let mut tx = IftTransmitter::at_offset(params, offset);
        let wire = transmit(&mut tx, &frames);
        for read_max in [1usize, 7, 64, 100_000] {
            let mut rx = IftReceiver::at_offset(params.checked_by_peer(), offset);
            let placed = receive_with_layout(&mut rx, &wire, read_max);
            let payloads: Vec<u8> = frames.iter().flat_map(|f| f.1.clone()).collect();
            assert_eq!(placed, payloads, "offset {offset} read_max {read_max}");
            assert!(rx.at_boundary());
            assert_eq!(rx.pdus_received(), 4);
        }
    }
    // Nothing to lay out between frames.
    let rx = IftReceiver::new(BOTH.checked_by_peer());
    assert_eq!(rx.layout(100).count(), 0);
}

/// A sink that refuses the second ULPDU: the feed stops with its error.
#[test]
fn a_sink_error_stops_the_feed() {
    struct RefuseSecond(usize);
    impl UlpduSink for RefuseSecond {
        type Error = &'static str;
        fn ulpdu_begin(&mut self, _: usize) -> Result<(), &'static str> {
            self.0 += 1;
            if self.0 == 2 {
                Err("no")
            } else {
                Ok(())
            }
        }
        fn ulpdu_data(&mut self, _: &[u8]) -> Result<(), &'static str> {
            Ok(())
        }
        fn ulpdu_end(&mut self) -> Result<(), &'static str> {
            Ok(())
        }
    }
    let mut tx = IftTransmitter::new(BOTH);
    let wire = transmit(
        &mut tx,
        &[(vec![1; 14], vec![2; 4]), (vec![3; 14], vec![4; 4])],
    );
    let mut rx = IftReceiver::new(BOTH.checked_by_peer());
    assert_eq!(
        rx.receive(&wire, &mut RefuseSecond(0)),
        Err(FeedError::Sink("no"))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::test_util::proptest_cases(128)))]

    /// The spans of a direct read taken in one step end exactly as taken
    /// one by one, whatever the frames, the reads and a damaged octet:
    /// the same payload, the same error, the same stream position.
    #[test]
    fn spans_in_one_step_end_as_one_by_one(
        params in tx_params_strategy(),
        frames in frames_strategy(),
        offset in 0u64..5000,
        read_max in prop_oneof![1usize..600, Just(usize::MAX)],
        chunk in prop_oneof![1usize..3000, Just(usize::MAX)],
        damage in proptest::option::of((any::<prop::sample::Index>(), 0u8..8, any::<bool>())),
    ) {
        let mut tx = IftTransmitter::at_offset(params, offset);
        let mut wire = transmit(&mut tx, &frames);
        if let Some(damage) = damage {
            // Half the time an octet of a marker.
            crate::test_util::damage(&mut wire, offset, params.markers, damage);
        }
        let run = |one_by_one| {
            let mut rx = IftReceiver::at_offset(params.checked_by_peer(), offset);
            crate::test_util::receive_direct(&mut rx, &wire, read_max, chunk, one_by_one)
        };
        let fast = run(false);
        prop_assert_eq!(&fast, &run(true));
        if damage.is_none() {
            let payloads: Vec<u8> = frames.iter().flat_map(|f| f.1.clone()).collect();
            prop_assert_eq!(fast.0, payloads);
            prop_assert_eq!(fast.1, None);
        }
    }
}

fn tx_params_strategy() -> impl Strategy<Value = TxParams> {
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            Just(None),
            (64u16..=2048).prop_map(Some),
            // MPA's interval, whose whole periods are copied and summed
            // in one pass.
            Just(Some(512)),
            Just(Some(u16::MAX))
        ],
        any::<u16>(),
    )
        .prop_map(|(h, p, m, v)| tx_params(h, p, m, v))
}

/// Payload lengths biased to the edges: tiny, around a marker interval,
/// up to 65535.
fn payload_len_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..64,
        2 => 0usize..4096,
        1 => 0usize..=65535,
        1 => 65000usize..=65535,
    ]
}

fn frames_strategy() -> impl Strategy<Value = Vec<Frame>> {
    prop::collection::vec(
        (
            0usize..=MAX_HEADER_SIZE,
            payload_len_strategy(),
            any::<u8>(),
        )
            .prop_map(|(h, p, seed)| {
                let header = (0..h).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
                let payload = (0..p).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
                (header, payload)
            }),
        1..5,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::test_util::proptest_cases(256)))]

    /// Whatever the frames, CRC choices, markers, chunking and stream
    /// offset, what is received is what was sent, and both ends agree on
    /// the offset.
    #[test]
    fn round_trip(
        params in tx_params_strategy(),
        frames in frames_strategy(),
        offset in 0u64..5000,
        chunks in prop::collection::vec(1usize..3000, 1..8),
    ) {
        let mut tx = IftTransmitter::at_offset(params, offset);
        let wire = transmit(&mut tx, &frames);
        prop_assert_eq!(tx.offset(), offset + wire.len() as u64);
        let mut rx = IftReceiver::at_offset(params.checked_by_peer(), offset);
        let mut sink = CollectUlpdus::new();
        receive_chunked(&mut rx, &wire, &chunks, &mut sink).unwrap();
        prop_assert_eq!(sink.complete, frames.iter().map(ulpdu).collect::<Vec<_>>());
        prop_assert!(rx.at_boundary());
        prop_assert_eq!(rx.offset(), tx.offset());
        prop_assert_eq!(rx.pdus_received(), frames.len() as u64);
    }

    /// With both CRCs on, a single flipped bit anywhere never yields a
    /// damaged ULPDU: every ULPDU delivered is an intact original, and the
    /// receiver reports an error or is left inside a frame.
    #[test]
    fn any_flipped_bit_is_detected_with_both_crcs(
        markers in prop_oneof![Just(None), (64u16..600).prop_map(Some)],
        frames in prop::collection::vec(
            (0usize..=32, 0usize..1200).prop_map(|(h, p)| ((0..h).map(|i| i as u8).collect(), (0..p).map(|i| (i * 3) as u8).collect())),
            1..4),
        offset in 0u64..1000,
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let params = tx_params(true, true, markers, 0xbeef);
        let mut tx = IftTransmitter::at_offset(params, offset);
        let mut wire = transmit(&mut tx, &frames);
        let at = flip.index(wire.len());
        wire[at] ^= 1 << bit;
        let mut rx = IftReceiver::at_offset(params.checked_by_peer(), offset);
        let mut sink = CollectUlpdus::new();
        let result = receive_chunked(&mut rx, &wire, &[wire.len()], &mut sink);
        let sent: Vec<Vec<u8>> = frames.iter().map(ulpdu).collect();
        prop_assert!(sink.complete.len() < sent.len());
        prop_assert_eq!(&sink.complete[..], &sent[..sink.complete.len()]);
        prop_assert!(result.is_err() || !rx.at_boundary());
    }

    /// Arbitrary (mostly invalid) streams never panic, and feeding one
    /// octet at a time gives the same result as feeding them all at once.
    #[test]
    fn arbitrary_input_never_panics_and_chunking_does_not_matter(
        params in tx_params_strategy(),
        ignore in any::<(bool, bool)>(),
        data in prop::collection::vec(any::<u8>(), 0..3000),
        offset in 0u64..1024,
    ) {
        let mut p = params.checked_by_peer();
        if ignore.0 && p.header_crc.present() { p.header_crc = RxCrc::Ignored; }
        if ignore.1 && p.payload_crc.present() { p.payload_crc = RxCrc::Ignored; }
        let mut a = IftReceiver::at_offset(p, offset);
        let mut sa = CollectUlpdus::new();
        let ra = receive_chunked(&mut a, &data, &[data.len().max(1)], &mut sa);
        let mut b = IftReceiver::at_offset(p, offset);
        let mut sb = CollectUlpdus::new();
        let rb = receive_chunked(&mut b, &data, &[1], &mut sb);
        prop_assert_eq!(ra, rb);
        prop_assert_eq!(&sa.complete, &sb.complete);
        prop_assert_eq!(sa.partial(), sb.partial());
        prop_assert_eq!(a.error(), b.error());
    }
}
