//! Properties of every wire view and repr (`iwarp_proto::wire`): parsing
//! arbitrary octets never panics, an unchecked view of short input reads
//! without panicking and its parse fails, what parses emits back to
//! octets that parse to the same value, and emit refuses a short buffer.

use iwarp_proto::ddp::{Segment, SegmentHeader, TaggedHeader, UntaggedHeader};
use iwarp_proto::ift::frame::{IftHeader, IftHeaderView};
use iwarp_proto::ift::indication::{Indication, IndicationView};
use iwarp_proto::ift::{IftConfig, MarkerInterval, Phase};
use iwarp_proto::memory::STag;
use iwarp_proto::rdmap::{
    ReadRequest, ReadRequestView, TerminateMessage, TerminateView, TerminatedDdp,
};
use proptest::prelude::*;

fn segment_header() -> impl Strategy<Value = SegmentHeader> {
    prop_oneof![
        (any::<bool>(), any::<u8>(), any::<u32>(), any::<u64>()).prop_map(|(last, r, s, to)| {
            SegmentHeader::Tagged(TaggedHeader {
                last,
                rsvd_ulp: r,
                stag: STag(s),
                to,
            })
        }),
        (any::<bool>(), any::<u8>(), any::<[u32; 4]>()).prop_map(|(last, r, w)| {
            SegmentHeader::Untagged(UntaggedHeader {
                last,
                rsvd_ulp: r,
                rsvd_ulp_word: w[0],
                qn: w[1],
                msn: w[2],
                mo: w[3],
            })
        }),
    ]
}

proptest! {
    #[test]
    fn ddp_headers_round_trip(h in segment_header(), spare in 0usize..4) {
        let mut buf = vec![0u8; h.buffer_len() + spare];
        prop_assert_eq!(h.emit(&mut buf), Ok(h.buffer_len()));
        let view = Segment::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(view.header_len(), h.buffer_len());
        prop_assert_eq!(SegmentHeader::parse(&view), Ok(h));
        prop_assert!(h.emit(&mut buf[..h.buffer_len() - 1]).is_err());
    }

    #[test]
    fn ddp_views_of_any_octets(octets in proptest::collection::vec(any::<u8>(), 0..40)) {
        let view = Segment::new_unchecked(&octets[..]);
        let _ = (view.stag(), view.tagged_offset(), view.qn(), view.msn(), view.mo(), view.payload());
        let checked = Segment::new_checked(&octets[..]);
        prop_assert_eq!(checked.is_ok(), !octets.is_empty() && octets.len() >= view.header_len());
        match SegmentHeader::parse(&view) {
            Ok(h) => {
                let mut again = vec![0u8; h.buffer_len()];
                h.emit(&mut again).unwrap();
                let reparsed = SegmentHeader::parse(&Segment::new_unchecked(&again[..]));
                prop_assert_eq!(reparsed, Ok(h));
            }
            Err(_) => prop_assert!(checked.is_err() || octets[0] & 3 != 1),
        }
    }

    #[test]
    fn read_requests_round_trip(w in any::<[u32; 3]>(), to in any::<[u64; 2]>()) {
        let r = ReadRequest {
            sink_stag: STag(w[0]),
            sink_to: to[0],
            size: w[1],
            source_stag: STag(w[2]),
            source_to: to[1],
        };
        let mut buf = [0u8; 30];
        prop_assert_eq!(r.emit(&mut buf), Ok(r.buffer_len()));
        prop_assert_eq!(ReadRequest::parse(&ReadRequestView::new_checked(&buf[..]).unwrap()), Ok(r));
        prop_assert!(r.emit(&mut buf[..27]).is_err());
    }

    #[test]
    fn read_request_views_of_any_octets(octets in proptest::collection::vec(any::<u8>(), 0..40)) {
        let parsed = ReadRequest::parse(&ReadRequestView::new_unchecked(&octets[..]));
        prop_assert_eq!(parsed.is_ok(), octets.len() >= 28);
        if let Ok(r) = parsed {
            prop_assert_eq!(&r.to_bytes()[..], &octets[..28]);
        }
    }

    #[test]
    fn terminates_of_any_octets(octets in proptest::collection::vec(any::<u8>(), 0..60)) {
        let view = TerminateView::new_unchecked(&octets[..]);
        let _ = (view.segment_length(), view.ddp_header(), view.read_request());
        match TerminateMessage::parse(&view) {
            Ok(t) => {
                prop_assert!(octets.len() >= 4);
                // What parsed emits to octets that parse to the same value.
                let mut again = vec![0u8; t.buffer_len()];
                prop_assert_eq!(t.emit(&mut again), Ok(t.buffer_len()));
                prop_assert_eq!(TerminateMessage::parse_bytes(&again), Ok(t));
                if t.buffer_len() > 4 {
                    prop_assert!(t.emit(&mut again[..t.buffer_len() - 1]).is_err());
                }
            }
            Err(_) => prop_assert!(octets.len() < 4),
        }
    }

    #[test]
    fn terminates_round_trip(
        control in any::<[u8; 3]>(),
        ddp in proptest::option::of((proptest::option::of(any::<u16>()), segment_header())),
        rdmap in proptest::option::of(any::<[u8; 28]>()),
    ) {
        let t = TerminateMessage {
            layer: control[0] & 0x0f,
            etype: control[1] & 0x0f,
            code: control[2],
            ddp: ddp.and_then(|(len, h)| TerminatedDdp::new(len, &h.to_bytes().0[..h.buffer_len()])),
            rdmap,
        };
        let (octets, n) = t.to_bytes();
        prop_assert_eq!(n, t.buffer_len());
        prop_assert_eq!(TerminateMessage::parse_bytes(&octets[..n]), Ok(t));
    }

    #[test]
    fn ift_headers_round_trip(fields in any::<[u16; 3]>(), octets in any::<[u8; 6]>()) {
        let h = IftHeader { header_size: fields[0], payload_size: fields[1], vtag: fields[2] };
        let mut buf = [0u8; 6];
        prop_assert_eq!(h.emit(&mut buf), Ok(6));
        prop_assert_eq!(IftHeader::parse(&IftHeaderView::new_checked(&buf[..]).unwrap()), Ok(h));
        let parsed = IftHeader::parse(&IftHeaderView::new_checked(&octets[..]).unwrap()).unwrap();
        prop_assert_eq!(parsed.to_bytes(), octets);
        for cut in 0..6 {
            prop_assert!(IftHeader::parse(&IftHeaderView::new_unchecked(&octets[..cut])).is_err());
            prop_assert!(h.emit(&mut buf[..cut]).is_err());
        }
    }

    #[test]
    fn indications_of_any_octets(octets in proptest::collection::vec(any::<u8>(), 0..80)) {
        let view = IndicationView::new_unchecked(&octets[..]);
        let _ = (view.magic(), view.flags(), view.crc(), view.computed_crc());
        if let Ok(ind) = Indication::parse(&view) {
            let again = ind.to_bytes();
            prop_assert_eq!(Indication::parse_bytes(&again), Ok(ind));
        }
    }

    #[test]
    fn indications_round_trip(vtag in any::<u16>(), interval in 64u16.., phase_one in any::<bool>()) {
        let mut cfg = IftConfig::new(vtag);
        cfg.receive_markers = MarkerInterval::new(interval);
        let phase = if phase_one { Phase::One } else { Phase::Zero };
        let ind = cfg.indication(phase);
        let mut buf = [0xffu8; 70];
        prop_assert_eq!(ind.emit(&mut buf), Ok(ind.buffer_len()));
        prop_assert_eq!(Indication::parse(&IndicationView::new_checked(&buf[..]).unwrap()), Ok(ind));
        prop_assert!(ind.emit(&mut buf[..63]).is_err());
    }
}
