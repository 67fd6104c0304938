//! Tests of FPDU transmit and receive together: the annotated FPDUs of
//! draft-ietf-rddp-mpa-01 §5.2, siw's observed FPDU, and properties over
//! random ULPDUs, chunkings and stream offsets.

use super::*;
use crate::framing::crc;
use crate::framing::COPY_PAYLOAD_UP_TO;
use crate::framing::{
    CollectUlpdus, Deframer, FeedError, Framer, FramingEvent, LlpError, LlpErrorCode, Next, Span,
    TxError, WireBatch,
};
use proptest::prelude::*;

use crate::test_util::hex;

const BOTH: FramingParams = FramingParams::IMMEDIATE_START;
const CRC_ONLY: FramingParams = FramingParams {
    crc: true,
    send_markers: false,
    receive_markers: false,
};

/// Frames each ULPDU in turn and returns the stream.
fn transmit(tx: &mut FpduTransmitter, ulpdus: &[Vec<u8>]) -> Vec<u8> {
    let mut batch = WireBatch::new();
    let mut wire = Vec::new();
    for u in ulpdus {
        batch.clear();
        tx.frame(&[], &[u], &mut batch).unwrap();
        let before = wire.len();
        batch.write_to(&[u], &mut wire);
        assert_eq!(wire.len() - before, batch.wire_len());
    }
    wire
}

/// Feeds `wire` in chunks of the given sizes (cycled).
fn receive_chunked(
    rx: &mut FpduReceiver,
    wire: &[u8],
    chunks: &[usize],
    sink: &mut CollectUlpdus,
) -> Result<(), MpaError> {
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

/// A sink that records ULPDU begins as well, to show that nothing of a
/// ULPDU reached it before its FPDU was verified.
#[derive(Debug, Default)]
struct Watched {
    ulpdus: CollectUlpdus,
    begins: usize,
}

impl crate::framing::UlpduSink for Watched {
    type Error = std::convert::Infallible;

    fn ulpdu_begin(&mut self, len: usize) -> Result<(), Self::Error> {
        self.begins += 1;
        self.ulpdus.ulpdu_begin(len)
    }

    fn ulpdu_data(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        self.ulpdus.ulpdu_data(bytes)
    }

    fn ulpdu_end(&mut self) -> Result<(), Self::Error> {
        self.ulpdus.ulpdu_end()
    }
}

/// Feeds `wire` in chunks of the given sizes (cycled) to a receiver in
/// [`Placement::Verified`] mode, presenting again what it leaves, as a
/// runtime keeps an incomplete FPDU staged. Checks after every call that
/// the sink holds no ULPDU in progress: each one was passed whole, after
/// its checks. Returns the octets left over at the end.
fn receive_verified_chunked(
    rx: &mut FpduReceiver,
    wire: &[u8],
    chunks: &[usize],
    sink: &mut Watched,
) -> Result<Vec<u8>, MpaError> {
    let mut staged = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < wire.len() {
        let n = chunks[i % chunks.len()].max(1).min(wire.len() - at);
        i += 1;
        staged.extend_from_slice(&wire[at..at + n]);
        at += n;
        match rx.receive(&staged, sink) {
            Ok(used) => {
                staged.drain(..used);
            }
            Err(FeedError::Framing(e)) => return Err(e),
            Err(FeedError::Sink(never)) => match never {},
        }
        assert!(sink.ulpdus.partial().is_none(), "a ULPDU passed in part");
        assert_eq!(sink.begins, sink.ulpdus.complete.len());
        if !staged.is_empty() {
            // What is left is one incomplete FPDU, never a whole one.
            assert!(rx.next_fpdu_len(&staged).is_none_or(|n| n > staged.len()));
        }
    }
    Ok(staged)
}

/// The ULPDU of figures 5 and 6: an old-style DDP Send header with the
/// given MSN and 24 octets of zeros.
fn figure_ulpdu(msn: u8) -> Vec<u8> {
    let mut u = hex("4003 00000000 00000000 000000");
    u.push(msn);
    u.extend_from_slice(&[0; 4]);
    u.extend_from_slice(&[0; 24]);
    assert_eq!(u.len(), 42);
    u
}

#[test]
//= draft-ietf-rddp-mpa-01#4
//= type=test
//# The format of an FPDU shown below MUST be used for all MPA FPDUs.
//= draft-ietf-rddp-mpa-01#5.3
//= type=test
//# The sender MUST still format the FPDU according to FPDU format as shown in Figure 2.
//= draft-ietf-rddp-mpa-01#5.2
//= type=test
//# The fields which MUST be included in the CRC calculation when sending an FPDU are as follows
//= draft-ietf-rddp-mpa-01#5.2
//= type=test
//# When CRCs are enabled, the CRC field in the MPA FPDU MUST be computed using the CRC32C
//# polynomial in the manner described in the iSCSI Protocol [iSCSI] document for Header and
//# Data Digests.
fn figure_5_first_fpdu_with_leading_marker() {
    let expected = hex("0000 0000 002a 4003 0000 0000 0000 0000 0000 0001 0000 0000
         0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
         4c86 b384");
    let mut tx = FpduTransmitter::new(BOTH);
    let wire = transmit(&mut tx, &[figure_ulpdu(1)]);
    assert_eq!(wire, expected);
    assert_eq!(tx.offset(), 0x34);

    let mut rx = FpduReceiver::new(BOTH);
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &expected, &[1], &mut sink).unwrap();
    assert_eq!(sink.complete, vec![figure_ulpdu(1)]);
    assert!(rx.at_boundary());
}

#[test]
//= draft-ietf-rddp-mpa-01#5.1
//= type=test
//# If a marker interval contains multiple FPDUs (the FPDUs are small), the marker MUST point to
//# the start of the FPDU containing the marker
fn figure_6_second_fpdu_with_marker_inside() {
    // The first FPDU, not shown in the draft, occupies octets 0..0x1ec
    // (with its leading marker): a 482-octet ULPDU.
    let first = vec![0x5a; 482];
    let fig6 = hex("002a 4003 0000 0000 0000 0000 0000 0002 0000 0000
         0000 0014
         0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
         a19c d103");
    let mut tx = FpduTransmitter::new(BOTH);
    let wire = transmit(&mut tx, &[first.clone(), figure_ulpdu(2)]);
    assert_eq!(wire.len(), 0x220);
    assert_eq!(&wire[0x1ec..], &fig6[..]);

    // The same octets from a transmitter that starts at 0x1ec.
    let mut tx = FpduTransmitter::at_offset(BOTH, 0x1ec);
    assert_eq!(transmit(&mut tx, &[figure_ulpdu(2)]), fig6);

    // Received whole, and alone from offset 0x1ec.
    let mut rx = FpduReceiver::new(BOTH);
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &wire, &[7, 1, 300], &mut sink).unwrap();
    assert_eq!(sink.complete, vec![first, figure_ulpdu(2)]);
    let mut rx = FpduReceiver::at_offset(BOTH, 0x1ec);
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &fig6, &[1], &mut sink).unwrap();
    assert_eq!(sink.complete, vec![figure_ulpdu(2)]);
}

#[test]
fn siw_observed_send_with_crc() {
    // siw-observed.md: rping's first Send once CRC is on.
    let wire = hex("0022 4143 00000000 00000000 00000001 00000000
         0000562e4da7b530 e54e5800 00000020 ba0f3665");
    let ulpdu = wire[2..36].to_vec();
    let mut tx = FpduTransmitter::new(CRC_ONLY);
    assert_eq!(transmit(&mut tx, std::slice::from_ref(&ulpdu)), wire);
    let mut rx = FpduReceiver::new(CRC_ONLY);
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &wire, &[5], &mut sink).unwrap();
    assert_eq!(sink.complete, vec![ulpdu]);
}

#[test]
//= rfc5044#7.1.1
//= type=test
//# When CRCs are not in use, the CRC field MUST be considered valid for FPDU checking
//# regardless of its contents.
//= draft-ietf-rddp-mpa-01#4
//= type=test
//# When CRCs are not enabled, this field is still present, may contain any value, and MUST NOT
//# be checked.
//= draft-ietf-rddp-mpa-01#5.2
//= type=test
//# When sending an FPDU, the sender MUST include a CRC field.
fn crc_field_is_zero_and_unchecked_without_crc() {
    // siw-observed.md: without CRC siw sends a zero CRC field.
    let off = FramingParams::default();
    let ulpdu = hex("4143 00000000 00000000 00000001 00000000 0000563 7f5a0d530 3fce2900 00000020");
    let mut tx = FpduTransmitter::new(off);
    let wire = transmit(&mut tx, std::slice::from_ref(&ulpdu));
    assert_eq!(&wire[wire.len() - 4..], &[0, 0, 0, 0]);
    let mut garbage_crc = wire.clone();
    let n = garbage_crc.len();
    garbage_crc[n - 4..].copy_from_slice(&[1, 2, 3, 4]);
    let mut rx = FpduReceiver::new(off);
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut rx, &garbage_crc, &[64], &mut sink).unwrap();
    assert_eq!(sink.complete, vec![ulpdu]);
}

/// A receiver ignores the values of the pad and of a marker's reserved
/// octets, except that the CRC covers them: nonzero ones with a CRC
/// computed over them pass, the same octets under the original CRC fail.
#[test]
//= draft-ietf-rddp-mpa-01#4
//= type=test
//# The pad data MUST be set to zero by the sender and ignored by the receiver (except for CRC
//# checking).
//= draft-ietf-rddp-mpa-01#4.1
//= type=test
//# The Reserved field MUST be set to zero on transmit and ignored on receive (except for CRC
//# calculation).
fn pad_and_marker_reserved_octets_are_ignored_but_covered_by_the_crc() {
    let mut tx = FpduTransmitter::new(BOTH);
    let wire = transmit(&mut tx, &[vec![1, 2, 3]]);
    // Marker (4), ULPDU_Length (2), ULPDU (3), pad (3), CRC (4).
    assert_eq!(&wire[..12], &[0, 0, 0, 0, 0, 3, 1, 2, 3, 0, 0, 0]);
    let mut odd = wire.clone();
    odd[..2].copy_from_slice(&[0xab, 0xcd]);
    odd[9..12].copy_from_slice(&[0xff, 0x01, 0x80]);
    let mut stale = odd.clone();
    let mut c = crc::Crc32c::new();
    c.update(&odd[..12]);
    odd[12..].copy_from_slice(&c.to_wire());
    let mut sink = CollectUlpdus::new();
    receive_chunked(&mut FpduReceiver::new(BOTH), &odd, &[1, 5], &mut sink).unwrap();
    assert_eq!(sink.complete, vec![vec![1, 2, 3]]);
    stale[12..].copy_from_slice(&wire[12..]);
    let mut sink = CollectUlpdus::new();
    let e = receive_chunked(&mut FpduReceiver::new(BOTH), &stale, &[16], &mut sink);
    assert!(matches!(e, Err(MpaError::Crc { .. })), "{e:?}");
    assert!(sink.complete.is_empty());
}

#[test]
//= draft-ietf-rddp-mpa-01#5.1
//= type=test
//# the MPA markers MUST be inserted immediately following MPA connection establishment, and at
//# every 512th octet of the TCP octet stream thereafter.
//= draft-culley-iwarp-mpa-02#8.1
//= type=test
//# In this case the marker MUST be the first four octets sent (this marker has the special
//# value 0x0000, meaning it belongs to the FPDU that follows).
fn first_octets_of_full_operation_are_a_zero_marker() {
    // RFC 5044 §7.1.2 rule 7.
    let mut tx = FpduTransmitter::new(BOTH);
    let wire = transmit(&mut tx, &[vec![1, 2, 3]]);
    assert_eq!(&wire[..6], &[0, 0, 0, 0, 0, 3]);
    let mut tx = FpduTransmitter::new(CRC_ONLY);
    let wire = transmit(&mut tx, &[vec![1, 2, 3]]);
    assert_eq!(&wire[..2], &[0, 3]);
}

#[test]
//= draft-ietf-rddp-mpa-01#5.1
//= type=test
//# In this case, the marker MUST be placed in the following FPDU and viewed as being part of
//# that FPDU (e.g. for CRC calculation).
//= draft-ietf-rddp-mpa-01#5.1
//= type=test
//# in which case the marker MUST be zero.
fn marker_between_fpdus_is_zero_and_covered_by_the_next_crc() {
    // 506 + 2 + 4 = 512: the first FPDU ends exactly at the marker at 512.
    let mut tx = FpduTransmitter::new(BOTH);
    let first = vec![7u8; 502]; // 4 (marker) + 2 + 502 + 0 pad + 4 = 512
    let wire = transmit(&mut tx, &[first, vec![9u8; 10]]);
    assert_eq!(&wire[512..516], &[0, 0, 0, 0]);
    assert_eq!(&wire[516..518], &[0, 10]);
    let covered = &wire[512..516 + 2 + 10];
    assert_eq!(&wire[wire.len() - 4..], &crc::crc32c(covered).to_le_bytes());
}

#[test]
//= draft-ietf-rddp-mpa-01#5.1
//= type=test
//# All MPA senders MUST be able to generate markers when their use is declared by the opposing
//# receiver
//= draft-ietf-rddp-mpa-01#5.1
//= type=test
//# FPDUPTR MUST contain the number of octets in the TCP stream from the beginning of the
//# current FPDU to the first octet of the marker, unless the marker falls between FPDUs.
//= draft-ietf-rddp-mpa-01#5.1
//= type=test
//# If an FPDU is large enough to contain multiple markers, they MUST all point to the same
//# point in the TCP stream: the first octet of the FPDU.
fn markers_every_512_octets_point_to_the_header() {
    let mut tx = FpduTransmitter::new(BOTH);
    let wire = transmit(&mut tx, &[vec![0xee; 3000]]);
    // Header at 4; markers at 512, 1024, ... point back to it.
    for m in (512..wire.len()).step_by(512) {
        assert_eq!(&wire[m..m + 2], &[0, 0]);
        let ptr = u16::from_be_bytes([wire[m + 2], wire[m + 3]]) as usize;
        assert_eq!(ptr, m - 4, "marker at {m}");
    }
    assert_eq!(wire.len(), tx.offset() as usize);
    assert_eq!(wire.len(), FpduTransmitter::new(BOTH).wire_len(0, 3000));
}

#[test]
fn wrong_fpduptr_is_a_marker_error() {
    for params in [BOTH, FramingParams { crc: false, ..BOTH }] {
        let mut tx = FpduTransmitter::new(params);
        let mut wire = transmit(&mut tx, &[vec![1u8; 1000], vec![2u8; 100]]);
        wire[512 + 3] ^= 0x10; // marker at 512 inside the first FPDU
        let mut rx = FpduReceiver::new(params);
        let mut sink = CollectUlpdus::new();
        let err = receive_chunked(&mut rx, &wire, &[13], &mut sink).unwrap_err();
        assert_eq!(
            err,
            MpaError::Marker {
                marker_offset: 512,
                expected: 508,
                found: 508 ^ 0x10
            }
        );
        assert_eq!(err.llp_code(), LlpErrorCode::MarkerMismatch);
        assert!(sink.complete.is_empty());
    }
}

#[test]
fn nonzero_leading_marker_is_a_marker_error() {
    let mut tx = FpduTransmitter::new(BOTH);
    let mut wire = transmit(&mut tx, &[vec![1u8; 10]]);
    wire[3] = 8;
    let mut rx = FpduReceiver::new(BOTH);
    let mut sink = CollectUlpdus::new();
    let err = receive_chunked(&mut rx, &wire, &[100], &mut sink).unwrap_err();
    assert!(matches!(
        err,
        MpaError::Marker {
            marker_offset: 0,
            expected: 0,
            found: 8
        }
    ));
}

#[test]
//= rfc5044#8
//= type=test
//# Once MPA delivers an error of any type, it MUST NOT pass or deliver any additional FPDUs on
//# that half connection.
fn nothing_passes_after_an_error() {
    let mut tx = FpduTransmitter::new(CRC_ONLY);
    let mut wire = transmit(&mut tx, &[vec![1u8; 10], vec![2u8; 10]]);
    wire[5] ^= 1;
    let more = transmit(&mut tx, &[vec![3u8; 10]]);
    let mut rx = FpduReceiver::new(CRC_ONLY);
    let mut sink = CollectUlpdus::new();
    let err = receive_chunked(&mut rx, &wire, &[wire.len()], &mut sink).unwrap_err();
    assert!(matches!(err, MpaError::Crc { fpdu_offset: 0, .. }));
    assert_eq!(err.llp_code(), LlpErrorCode::CrcError);
    assert!(sink.complete.is_empty());
    assert_eq!(rx.next(), Next::Failed);
    assert_eq!(rx.receive(&more, &mut sink), Err(FeedError::Framing(err)));
    assert_eq!(rx.push_framing(&more), Err(err));
    assert!(sink.complete.is_empty());
    assert_eq!(rx.error(), Some(err));
}

#[test]
//= draft-ietf-rddp-mpa-01#3.2
//= type=test
//# DDP MAY post a ULPDU of any size between one and 64768 octets, however MPA is NOT REQUIRED
//# to support a ULPDU length that is greater than the current MULPDU.
fn oversized_ulpdu_is_refused() {
    let mut tx = FpduTransmitter::new(CRC_ONLY);
    let big = vec![0u8; 65536];
    let mut batch = WireBatch::new();
    assert_eq!(
        tx.frame(&[], &[&big], &mut batch),
        Err(TxError::UlpduTooLong { len: 65536 })
    );
    assert_eq!(tx.offset(), 0);
}

#[test]
fn batch_of_several_fpdus_uses_slice_indices_across_calls() {
    let (h1, p1, h2, p2) = (
        &[1u8; 14][..],
        &[2u8; 700][..],
        &[3u8; 18][..],
        &[4u8; 5][..],
    );
    for params in [CRC_ONLY, BOTH] {
        let mut tx = FpduTransmitter::new(params);
        let mut batch = WireBatch::new();
        tx.frame(h1, &[p1], &mut batch).unwrap();
        tx.frame(h2, &[p2], &mut batch).unwrap();
        assert_eq!(batch.slice_count(), 2);
        let mut wire = Vec::new();
        batch.write_to(&[p1, p2], &mut wire);
        let mut rx = FpduReceiver::new(params);
        let mut sink = CollectUlpdus::new();
        receive_chunked(&mut rx, &wire, &[wire.len()], &mut sink).unwrap();
        assert_eq!(sink.complete, vec![[h1, p1].concat(), [h2, p2].concat()]);
        let slices = [p1, p2];
        let referenced = batch
            .pieces(&slices)
            .any(|piece| std::ptr::eq(piece.as_ptr(), p1.as_ptr()));
        if params.send_markers {
            // With markers the payload is copied in with them: the whole
            // batch is one piece of the batch's own octets.
            assert!(!referenced);
            assert_eq!(batch.piece_count(), 1);
        } else {
            // Without, the headers are copied into the batch and the long
            // payload referenced: the caller's memory, not a copy. The
            // short one is copied, joining the framing around it: header,
            // payload, then pad, CRC, header, payload, pad and CRC.
            assert!(referenced);
            assert!(p1.len() > COPY_PAYLOAD_UP_TO && p2.len() <= COPY_PAYLOAD_UP_TO);
            assert_eq!(batch.piece_count(), 3);
        }
    }
}

/// Drives the step API the way a runtime placing payload directly does:
/// ULPDU octets are "read" straight into a destination buffer.
#[test]
fn step_api_places_ulpdu_octets_where_the_caller_wants() {
    let ulpdus = [vec![0xabu8; 1500], vec![], vec![0x11u8; 3]];
    let mut tx = FpduTransmitter::at_offset(BOTH, 100);
    let wire = transmit(&mut tx, &ulpdus);
    let mut rx = FpduReceiver::at_offset(BOTH, 100);
    let mut dest = vec![0u8; 1503];
    let mut placed = 0;
    let mut at = 0;
    let mut lens = Vec::new();
    let mut ends = 0;
    while at < wire.len() {
        match rx.next() {
            Next::Framing => {
                let (n, ev) = rx.push_framing(&wire[at..]).unwrap();
                at += n;
                match ev {
                    Some(FramingEvent::Begin {
                        payload_len: len, ..
                    }) => lens.push(len),
                    Some(FramingEvent::End) => ends += 1,
                    None => assert!(n > 0),
                }
            }
            Next::Payload { run, .. } => {
                dest[placed..placed + run].copy_from_slice(&wire[at..at + run]);
                rx.push_payload(&dest[placed..placed + run]).unwrap();
                placed += run;
                at += run;
            }
            Next::Failed => panic!("failed"),
        }
    }
    assert_eq!(lens, vec![1500, 0, 3]);
    assert_eq!(ends, 3);
    assert_eq!(dest, [ulpdus[0].clone(), ulpdus[2].clone()].concat());
}

/// Replays a stream through `ulpdu_layout` the way a runtime's vectored
/// reads do, in reads of at most `read_max` octets.
fn receive_with_layout(rx: &mut FpduReceiver, wire: &[u8], read_max: usize) -> Vec<u8> {
    let mut placed = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        let layout: Vec<Span> = rx.layout(read_max).collect();
        if layout.is_empty() {
            let (n, _) = rx.push_framing(&wire[at..at + 1]).unwrap();
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

/// With markers and CRC the payload is copied and summed in one pass
/// over whole marker periods, the rest copied and summed apart: however a
/// ULPDU is cut into header and slices, and wherever it starts, the wire
/// octets are those of the ULPDU framed whole, which the receiver takes.
#[test]
fn marked_fpdus_are_the_same_whatever_the_slices() {
    let ulpdu: Vec<u8> = (0..9000u32).map(|i| (i * 31 + i / 251) as u8).collect();
    let cuts: [&[usize]; 4] = [&[], &[14], &[14, 700, 701, 3000], &[18, 1034, 1542, 8999]];
    for offset in [0u64, 4, 100, 504, 508, 512, 1000] {
        let mut whole = FpduTransmitter::at_offset(BOTH, offset);
        let expected = transmit(&mut whole, std::slice::from_ref(&ulpdu));
        for cut in cuts {
            let (header, payload) = ulpdu.split_at(cut.first().copied().unwrap_or(0));
            let mut at = 0;
            let mut slices: Vec<&[u8]> = Vec::new();
            for &end in cut.iter().skip(1) {
                slices.push(&payload[at..end - header.len()]);
                at = end - header.len();
            }
            slices.push(&payload[at..]);
            let mut tx = FpduTransmitter::at_offset(BOTH, offset);
            let mut batch = WireBatch::new();
            tx.frame(header, &slices, &mut batch).unwrap();
            let mut wire = Vec::new();
            batch.write_to(&slices, &mut wire);
            assert_eq!(wire, expected, "offset {offset}, cut {cut:?}");
        }
        let mut rx = FpduReceiver::at_offset(BOTH, offset);
        let mut sink = CollectUlpdus::new();
        receive_chunked(&mut rx, &expected, &[usize::MAX], &mut sink).unwrap();
        assert_eq!(
            sink.complete,
            std::slice::from_ref(&ulpdu),
            "offset {offset}"
        );
    }
}

#[test]
fn layout_spans_cover_the_ulpdu_around_markers() {
    for offset in [0u64, 100, 508, 510, 511] {
        let ulpdus = [vec![0x42u8; 3000], vec![0x17u8; 20], vec![0x99u8; 1200]];
        let mut tx = FpduTransmitter::at_offset(BOTH, offset);
        let wire = transmit(&mut tx, &ulpdus);
        for read_max in [1usize, 7, 512, 100_000] {
            let mut rx = FpduReceiver::at_offset(BOTH, offset);
            let placed = receive_with_layout(&mut rx, &wire, read_max);
            assert_eq!(
                placed,
                ulpdus.concat(),
                "offset {offset} read_max {read_max}"
            );
            assert!(rx.at_boundary());
            assert_eq!(rx.pdus_received(), 3);
        }
    }
    // Nothing to lay out between FPDUs or after an error.
    let rx = FpduReceiver::new(BOTH);
    assert_eq!(rx.layout(100).count(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::test_util::proptest_cases(128)))]

    /// The spans of a direct read taken in one step end exactly as taken
    /// one by one, whatever the FPDUs, the reads and a damaged octet:
    /// the same payload, the same error, the same stream position.
    #[test]
    fn spans_in_one_step_end_as_one_by_one(
        params in params_strategy(),
        ulpdus in ulpdus_strategy(),
        offset in (0u64..1024).prop_map(|o| o * 4),
        read_max in prop_oneof![1usize..600, Just(usize::MAX)],
        chunk in prop_oneof![1usize..3000, Just(usize::MAX)],
        damage in proptest::option::of((any::<prop::sample::Index>(), 0u8..8, any::<bool>())),
    ) {
        let mut tx = FpduTransmitter::at_offset(params, offset);
        let mut wire = transmit(&mut tx, &ulpdus);
        if let Some(damage) = damage {
            // Half the time an octet of a marker.
            crate::test_util::damage(&mut wire, offset, params.receive_markers.then_some(crate::framing::MarkerInterval::DEFAULT), damage);
        }
        let run = |one_by_one| {
            let mut rx = FpduReceiver::at_offset(params, offset);
            crate::test_util::receive_direct(&mut rx, &wire, read_max, chunk, one_by_one)
        };
        let fast = run(false);
        prop_assert_eq!(&fast, &run(true));
        if damage.is_none() {
            prop_assert_eq!(fast.0, ulpdus.concat());
            prop_assert_eq!(fast.1, None);
        }
    }
}

fn params_strategy() -> impl Strategy<Value = FramingParams> {
    (any::<bool>(), any::<bool>()).prop_map(|(crc, markers)| FramingParams {
        crc,
        send_markers: markers,
        receive_markers: markers,
    })
}

/// ULPDU lengths biased to the edges: tiny, around 512, up to 65535.
fn ulpdu_len_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..64,
        3 => 480usize..560,
        2 => 0usize..4096,
        1 => 0usize..=65535,
        1 => 65000usize..=65535,
    ]
}

fn ulpdus_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(
        (ulpdu_len_strategy(), any::<u8>()).prop_map(|(len, seed)| {
            (0..len)
                .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                .collect()
        }),
        1..5,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::test_util::proptest_cases(256)))]

    /// Whatever the ULPDUs, the chunking and the stream offset, what is
    /// received is what was sent, and both ends agree on the offset.
    #[test]
    //= draft-ietf-rddp-mpa-01#3.2
    //= type=test
    //# On receive, MPA MUST pass each ULPDU with its length to DDP when it has been validated.
    //= draft-ietf-rddp-mpa-01#5.1
    //= type=test
    //# MPA Receivers MUST preserve ULPDU boundaries when passing data to DDP.
    //= draft-ietf-rddp-mpa-01#5.1
    //= type=test
    //# MPA Receivers MUST pass the ULPDU data and the ULPDU Length to DDP and not the markers,
    //# headers, and CRC.
    //= draft-ietf-rddp-mpa-01#5.3
    //= type=test
    //# MPA MUST encapsulate the ULPDU such that there is exactly one ULPDU contained in one
    //# FPDU.
    //= rfc5041#3
    //= type=test
    //# In the event of a MULPDU change, DDP MUST NOT be required by the LLP to re-segment DDP
    //# Segments that have been previously posted to the LLP.
    //= rfc5041#3
    //= type=test
    //# The LLP MUST preserve DDP Segment and Message boundaries at the Data Sink.
    //= rfc5041#3
    //= type=test
    //# On receive, the LLP MUST provide the length of the DDP Segment received.
    //= rfc5041#3
    //= type=test
    //# The LLP MUST NOT pass a duplicate DDP Segment to the DDP Layer
    fn round_trip(
        params in params_strategy(),
        ulpdus in ulpdus_strategy(),
        offset in prop_oneof![0u64..2048, (0u64..512).prop_map(|o| o * 4)],
        chunks in prop::collection::vec(1usize..2000, 1..8),
    ) {
        let mut tx = FpduTransmitter::at_offset(params, offset);
        let expect_len: usize = {
            let mut probe = tx.clone();
            ulpdus.iter().map(|u| {
                let n = probe.wire_len(0, u.len());
                let mut b = WireBatch::new();
                probe.frame(&[], &[u], &mut b).unwrap();
                n
            }).sum()
        };
        let wire = transmit(&mut tx, &ulpdus);
        prop_assert_eq!(wire.len(), expect_len);
        prop_assert_eq!(tx.offset(), offset + wire.len() as u64);
        let mut rx = FpduReceiver::at_offset(params, offset);
        let mut sink = CollectUlpdus::new();
        receive_chunked(&mut rx, &wire, &chunks, &mut sink).unwrap();
        prop_assert_eq!(&sink.complete, &ulpdus);
        prop_assert!(rx.at_boundary());
        prop_assert_eq!(rx.offset(), tx.offset());
        prop_assert_eq!(rx.pdus_received(), ulpdus.len() as u64);
    }

    /// In verify-before-place mode, whatever the ULPDUs, the chunking and
    /// the stream offset, the same ULPDUs come out as in direct mode, each
    /// passed whole once its FPDU has arrived, and `next_fpdu_len` gives
    /// each FPDU's length on the wire.
    #[test]
    //= draft-ietf-rddp-mpa-01#11.2.2
    //= type=test
    //# If the MTU is smaller than 140 octets, the buffer MUST be at least 140 octets long to
    //# support the minimum FPDU size.
    fn round_trip_verified(
        params in params_strategy(),
        ulpdus in ulpdus_strategy(),
        offset in prop_oneof![0u64..2048, (0u64..512).prop_map(|o| o * 4)],
        chunks in prop::collection::vec(1usize..2000, 1..8),
    ) {
        let mut tx = FpduTransmitter::at_offset(params, offset);
        let mut lens = Vec::new();
        let mut wire = Vec::new();
        for u in &ulpdus {
            let before = wire.len();
            wire.extend(transmit(&mut tx, std::slice::from_ref(u)));
            lens.push((before, wire.len() - before));
        }
        let mut rx = FpduReceiver::at_offset(params, offset).with_placement(Placement::Verified);
        for &(at, len) in &lens {
            let mut probe = rx.clone();
            let mut sink = Watched::default();
            prop_assert_eq!(probe.next_fpdu_len(&wire[at..at + 1]), None);
            prop_assert_eq!(probe.next_fpdu_len(&wire[at..]), Some(len));
            prop_assert_eq!(probe.receive(&wire[at..at + len - 1], &mut sink), Ok(0));
            prop_assert_eq!(sink.begins, 0);
            rx.receive(&wire[at..at + len], &mut sink).unwrap();
            prop_assert_eq!(sink.ulpdus.complete.len(), 1);
        }
        prop_assert_eq!(rx.offset(), tx.offset());
        let mut rx = FpduReceiver::at_offset(params, offset).with_placement(Placement::Verified);
        let mut sink = Watched::default();
        let left = receive_verified_chunked(&mut rx, &wire, &chunks, &mut sink).unwrap();
        prop_assert!(left.is_empty());
        prop_assert_eq!(&sink.ulpdus.complete, &ulpdus);
        prop_assert!(rx.at_boundary());
        prop_assert_eq!(rx.offset(), tx.offset());
        prop_assert_eq!(rx.pdus_received(), ulpdus.len() as u64);
    }

    /// In verify-before-place mode, a single flipped bit anywhere in a
    /// stream with CRC on never lets an octet of the damaged FPDU reach
    /// the sink: every ULPDU the sink began is an intact original.
    #[test]
    //= rfc5044#6
    //= type=test
    //# An MPA receiver MUST first verify the FPDU before passing the ULPDU to DDP.
    //= rfc5044#6
    //= type=test
    //# The ULPDU Length field (see Section 4) MUST be used to determine if the entire FPDU is
    //# present before forwarding the ULPDU to DDP.
    fn a_damaged_fpdu_is_never_passed_on_when_verified(
        markers in any::<bool>(),
        ulpdus in prop::collection::vec(
            (0usize..1200).prop_map(|n| (0..n).map(|i| i as u8).collect::<Vec<u8>>()), 1..4),
        offset_words in 0u64..300,
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
        chunks in prop::collection::vec(1usize..700, 1..4),
    ) {
        let params = FramingParams { crc: true, send_markers: markers, receive_markers: markers };
        let offset = offset_words * 4;
        let mut tx = FpduTransmitter::at_offset(params, offset);
        let mut wire = transmit(&mut tx, &ulpdus);
        let at = flip.index(wire.len());
        wire[at] ^= 1 << bit;
        let mut rx = FpduReceiver::at_offset(params, offset).with_placement(Placement::Verified);
        let mut sink = Watched::default();
        let result = receive_verified_chunked(&mut rx, &wire, &chunks, &mut sink);
        prop_assert!(sink.ulpdus.complete.len() < ulpdus.len());
        prop_assert_eq!(&sink.ulpdus.complete[..], &ulpdus[..sink.ulpdus.complete.len()]);
        prop_assert_eq!(sink.begins, sink.ulpdus.complete.len());
        prop_assert!(result.is_err() || !result.unwrap().is_empty());
    }

    /// The direct checks of a whole FPDU (`check_sound`) agree with the
    /// field-by-field walk on every FPDU, sound or damaged (one octet
    /// changed, or arbitrary octets), at every offset: the same result,
    /// the same first error, the same receiver state afterwards; and
    /// where they refuse one, they leave the receiver untouched.
    #[test]
    fn whole_fpdu_checks_agree_with_the_walk(
        params in params_strategy(),
        ulpdus in ulpdus_strategy(),
        offset in prop_oneof![0u64..2048, (0u64..512).prop_map(|o| o * 4)],
        damage in prop::option::of((any::<prop::sample::Index>(), 1u8..=255)),
        noise in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut tx = FpduTransmitter::at_offset(params, offset);
        let mut wire = transmit(&mut tx, &ulpdus);
        if let Some((at, xor)) = damage {
            let at = at.index(wire.len());
            wire[at] ^= xor;
        }
        let sent = wire.len();
        wire.extend(&noise);
        let mut fast = FpduReceiver::at_offset(params, offset).with_placement(Placement::Verified);
        let mut walked = fast.clone();
        let mut used = 0;
        while let Some(len) = fast.next_fpdu_len(&wire[used..]).filter(|n| used + n <= wire.len()) {
            let fpdu = &wire[used..used + len];
            let before = format!("{fast:?}");
            let mut probe = fast.clone();
            let sound = probe.check_sound(fpdu).is_some();
            if !sound {
                prop_assert_eq!(format!("{probe:?}"), before);
            }
            // What the transmitter sent intact always takes the direct
            // path at MPA's 4-aligned offsets.
            if damage.is_none() && offset % 4 == 0 && used < sent {
                prop_assert!(sound);
            }
            let a = fast.check_whole(fpdu);
            let b = walked.check_walking(fpdu);
            prop_assert_eq!(a, b);
            prop_assert_eq!(format!("{fast:?}"), format!("{walked:?}"));
            if a.is_err() {
                break;
            }
            used += len;
        }
    }

    /// Arbitrary octets in verify-before-place mode: no panic, chunking
    /// does not matter, no ULPDU is ever passed in part, and whatever
    /// direct mode delivered whole, verified mode delivers too.
    #[test]
    fn arbitrary_input_verified(
        params in params_strategy(),
        data in prop::collection::vec(any::<u8>(), 0..3000),
        offset in 0u64..1024,
        chunks in prop::collection::vec(1usize..300, 1..4),
    ) {
        let mut a = FpduReceiver::at_offset(params, offset).with_placement(Placement::Verified);
        let mut sa = Watched::default();
        let ra = receive_verified_chunked(&mut a, &data, &[data.len().max(1)], &mut sa);
        let mut b = FpduReceiver::at_offset(params, offset).with_placement(Placement::Verified);
        let mut sb = Watched::default();
        let rb = receive_verified_chunked(&mut b, &data, &chunks, &mut sb);
        prop_assert_eq!(&ra, &rb);
        prop_assert_eq!(&sa.ulpdus.complete, &sb.ulpdus.complete);
        let mut direct = FpduReceiver::at_offset(params, offset);
        let mut sd = CollectUlpdus::new();
        let rd = receive_chunked(&mut direct, &data, &[data.len().max(1)], &mut sd);
        prop_assert_eq!(&sd.complete, &sa.ulpdus.complete);
        // An error verified mode finds, direct mode finds too; direct mode
        // may also find one inside an FPDU that never became whole.
        match (ra, rd) {
            (Err(v), d) => prop_assert_eq!(d, Err(v)),
            (Ok(left), Err(_)) => prop_assert!(!left.is_empty()),
            (Ok(_), Ok(())) => {}
        }
    }

    /// With CRC on, a single flipped bit anywhere in a conforming stream
    /// never yields a damaged ULPDU: the receiver reports an error, or is
    /// left inside an FPDU (its length field was hit) when the stream ends.
    #[test]
    //= rfc5044#6
    //= type=test
    //# To do this, the receiver MUST: * locate the start of the FPDU unambiguously, * verify
    //# its CRC (if CRC checking is enabled).
    //= draft-ietf-rddp-mpa-01#5.2
    //= type=test
    //# When an FPDU is received, and CRC checking is enabled, the receiver MUST first perform
    //# the following: 1) Calculate the CRC of the incoming FPDU in the same fashion as defined
    //# above.
    //= draft-ietf-rddp-mpa-01#5.2
    //= type=test
    //# If not, the receiver MUST treat the FPDU as an invalid FPDU.
    //= rfc5041#3
    //= type=test
    //# LLP MUST provide a strong digest (at least equivalent to CRC32- C) to cover at least the
    //# DDP Segment.
    fn any_flipped_bit_is_detected_with_crc(
        markers in any::<bool>(),
        ulpdus in prop::collection::vec(
            (0usize..1200).prop_map(|n| (0..n).map(|i| i as u8).collect::<Vec<u8>>()), 1..4),
        offset_words in 0u64..300,
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let params = FramingParams { crc: true, send_markers: markers, receive_markers: markers };
        let offset = offset_words * 4;
        let mut tx = FpduTransmitter::at_offset(params, offset);
        let mut wire = transmit(&mut tx, &ulpdus);
        let at = flip.index(wire.len());
        wire[at] ^= 1 << bit;
        let mut rx = FpduReceiver::at_offset(params, offset);
        let mut sink = CollectUlpdus::new();
        let result = receive_chunked(&mut rx, &wire, &[wire.len()], &mut sink);
        // Every ULPDU delivered is an intact original, in order.
        prop_assert!(sink.complete.len() < ulpdus.len());
        prop_assert_eq!(&sink.complete[..], &ulpdus[..sink.complete.len()]);
        prop_assert!(result.is_err() || !rx.at_boundary());
    }

    /// Feeding one octet at a time gives the same result as feeding all,
    /// for arbitrary (mostly invalid) streams.
    #[test]
    //= rfc5044#5.1
    //= type=test
    //# MPA receivers are REQUIRED to be able to operate correctly even if alignment is lost
    //= rfc5044#5.2
    //= type=test
    //# The receivers MUST identify FPDU boundaries by using the ULPDU_LENGTH field
    //= rfc5044#6
    //= type=test
    //# In an ordered TCP stream, the ULPDU Length field in the current FPDU when FPDU has a
    //# valid CRC, can be used to identify the beginning of the next FPDU.
    //= draft-ietf-rddp-mpa-01#5.4.1
    //= type=test
    //# However, MPA receivers MUST NOT depend on FPDU Alignment on TCP segment boundaries.
    fn arbitrary_input_never_panics_and_chunking_does_not_matter(
        params in params_strategy(),
        data in prop::collection::vec(any::<u8>(), 0..3000),
        offset in 0u64..1024,
    ) {
        let mut a = FpduReceiver::at_offset(params, offset);
        let mut sa = CollectUlpdus::new();
        let ra = receive_chunked(&mut a, &data, &[data.len().max(1)], &mut sa);
        let mut b = FpduReceiver::at_offset(params, offset);
        let mut sb = CollectUlpdus::new();
        let rb = receive_chunked(&mut b, &data, &[1], &mut sb);
        prop_assert_eq!(ra, rb);
        prop_assert_eq!(&sa.complete, &sb.complete);
        prop_assert_eq!(sa.partial(), sb.partial());
    }

    /// With markers on, corrupting the FPDUPTR of any one marker (beyond
    /// its two reserved low bits) is reported as a marker error at exactly
    /// that marker, CRC on or off, and nothing from its FPDU is delivered.
    #[test]
    //= rfc5044#8
    //= type=test
    //# If the FPDU start determined from previous ULPDU Length fields does not match with the
    //# MPA Marker position, MPA SHOULD deliver an error to DDP.
    //= rfc5044#8
    //= type=test
    //# the check SHOULD be made when a gap creating an out-of-order sequence is closed and any
    //# time a Marker points to an already identified FPDU.
    //= draft-ietf-rddp-mpa-01#5.1
    //= type=test
    //# MPA reserves these bits so they MUST be treated as zero for computation at the receiver.
    fn any_wrong_fpduptr_is_detected(
        crc in any::<bool>(),
        ulpdus in prop::collection::vec(
            (0usize..3000).prop_map(|n| vec![0x3cu8; n]), 1..5),
        pick in any::<prop::sample::Index>(),
        delta in 1u16..0x4000,
    ) {
        let params = FramingParams { crc, ..BOTH };
        let mut tx = FpduTransmitter::new(params);
        let mut wire = transmit(&mut tx, &ulpdus);
        let markers: Vec<usize> = (0..wire.len()).step_by(512).collect();
        let at = markers[pick.index(markers.len())];
        let old = u16::from_be_bytes([wire[at + 2], wire[at + 3]]);
        let new = old.wrapping_add(delta << 2);
        wire[at + 2..at + 4].copy_from_slice(&new.to_be_bytes());
        let mut rx = FpduReceiver::new(params);
        let mut sink = CollectUlpdus::new();
        let err = receive_chunked(&mut rx, &wire, &[97], &mut sink).unwrap_err();
        prop_assert_eq!(err, MpaError::Marker { marker_offset: at as u64, expected: old, found: new });
        // FPDUs that ended before the marker were delivered intact.
        prop_assert_eq!(&sink.complete[..], &ulpdus[..sink.complete.len()]);
        let mut probe = FpduTransmitter::new(params);
        let ended_before = ulpdus.iter().take_while(|u| {
            let n = probe.wire_len(0, u.len()) as u64;
            let mut b = WireBatch::new();
            probe.frame(&[], &[u], &mut b).unwrap();
            probe.offset() <= at as u64 && n > 0
        }).count();
        prop_assert_eq!(sink.complete.len(), ended_before);
    }
}

/// A small ULPDU goes out as one piece, so that the runtime writes it with
/// one `send`: the payload is copied between its header and its CRC, at
/// every length up to the bound; one octet more and it is borrowed.
#[test]
fn a_small_fpdu_is_one_piece() {
    let header = [7u8; 18];
    for len in [0, 1, 63, 64, COPY_PAYLOAD_UP_TO, COPY_PAYLOAD_UP_TO + 1] {
        let payload = vec![0x5au8; len];
        let mut tx = FpduTransmitter::new(CRC_ONLY);
        let mut batch = WireBatch::new();
        tx.frame(&header, &[&payload], &mut batch).unwrap();
        let slices = [&payload[..]];
        let pieces = batch.pieces(&slices).count();
        let expected = if len <= COPY_PAYLOAD_UP_TO { 1 } else { 3 };
        assert_eq!(pieces, expected, "payload of {len} octets");
        let mut wire = Vec::new();
        batch.write_to(&slices, &mut wire);
        let mut rx = FpduReceiver::new(CRC_ONLY);
        let mut sink = CollectUlpdus::new();
        receive_chunked(&mut rx, &wire, &[wire.len()], &mut sink).unwrap();
        assert_eq!(sink.complete, vec![[&header[..], &payload].concat()]);
    }
}
