//! Fuzzes every wire view and repr of `iwarp_proto::wire`'s convention:
//! the DDP segment header, the Read Request, the Terminate payload, the IFT
//! header and the Adaption Indication. Checks that nothing panics on any
//! octets, checked or not, and that whatever parses emits back to octets
//! that parse to the same value.

#![no_main]

use iwarp_proto::ddp::{Segment, SegmentHeader};
use iwarp_proto::ift::frame::{IftHeader, IftHeaderView};
use iwarp_proto::ift::indication::{Indication, IndicationView};
use iwarp_proto::rdmap::{ReadRequest, ReadRequestView, TerminateMessage, TerminateView};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let segment = Segment::new_unchecked(input);
    let _ = (
        segment.stag(),
        segment.tagged_offset(),
        segment.mo(),
        segment.payload(),
    );
    if let Ok(h) = SegmentHeader::parse(&segment) {
        let mut again = [0u8; 18];
        let n = h.emit(&mut again).expect("room for any header");
        assert_eq!(
            SegmentHeader::parse(&Segment::new_unchecked(&again[..n])),
            Ok(h)
        );
    }

    if let Ok(r) = ReadRequest::parse(&ReadRequestView::new_unchecked(input)) {
        assert_eq!(&r.to_bytes()[..], &input[..28]);
    }

    let terminate = TerminateView::new_unchecked(input);
    let _ = (terminate.ddp_header(), terminate.read_request());
    if let Ok(t) = TerminateMessage::parse(&terminate) {
        let (again, n) = t.to_bytes();
        assert_eq!(n, t.buffer_len());
        assert_eq!(TerminateMessage::parse_bytes(&again[..n]), Ok(t));
    }

    if let Ok(h) = IftHeader::parse(&IftHeaderView::new_unchecked(input)) {
        assert_eq!(&h.to_bytes()[..], &input[..6]);
    }

    let indication = IndicationView::new_unchecked(input);
    let _ = (
        indication.flags(),
        indication.crc(),
        indication.computed_crc(),
    );
    if let Ok(ind) = Indication::parse(&indication) {
        assert_eq!(Indication::parse_bytes(&ind.to_bytes()), Ok(ind));
    }
});
