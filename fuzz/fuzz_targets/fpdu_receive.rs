//! Arbitrary octets into the FPDU receiver, in arbitrary chunks, with
//! arbitrary framing parameters and stream offset, in both placement
//! modes: it must never panic, chunking must not change the outcome, a
//! ULPDU must never be passed on with more octets than its length
//! announced, and in verify-before-place mode never in part.
#![no_main]

use iwarp_proto::framing::{Deframer, FeedError, UlpduSink};
use iwarp_proto::mpa::{FpduReceiver, FramingParams, Placement};
use libfuzzer_sys::fuzz_target;

/// Checks the sink contract while recording what it saw.
#[derive(Default, PartialEq, Debug)]
struct Checked {
    events: Vec<(usize, usize, bool)>,
    current: Option<(usize, usize)>,
}

impl UlpduSink for Checked {
    type Error = ();
    fn ulpdu_begin(&mut self, len: usize) -> Result<(), ()> {
        assert!(self.current.is_none(), "begin inside a ULPDU");
        self.current = Some((len, 0));
        Ok(())
    }
    fn ulpdu_data(&mut self, bytes: &[u8]) -> Result<(), ()> {
        let (len, got) = self.current.as_mut().expect("data outside a ULPDU");
        assert!(!bytes.is_empty());
        *got += bytes.len();
        assert!(*got <= *len, "more octets than announced");
        Ok(())
    }
    fn ulpdu_end(&mut self) -> Result<(), ()> {
        let (len, got) = self.current.take().expect("end outside a ULPDU");
        assert_eq!(len, got, "ULPDU ended short");
        self.events.push((len, got, true));
        Ok(())
    }
}

fn run(params: FramingParams, offset: u64, data: &[u8], chunk: usize) -> (Checked, Option<String>) {
    let mut rx = FpduReceiver::at_offset(params, offset);
    let mut sink = Checked::default();
    let mut error = None;
    for piece in data.chunks(chunk.max(1)) {
        match rx.receive(piece, &mut sink) {
            Ok(n) => assert_eq!(n, piece.len()),
            Err(FeedError::Framing(e)) => {
                error = Some(e.to_string());
                break;
            }
            Err(FeedError::Sink(())) => unreachable!(),
        }
    }
    (sink, error)
}

/// The same in verify-before-place mode, presenting again what the
/// receiver leaves (an incomplete FPDU): no ULPDU may be in progress at
/// the sink between calls. Returns what the sink saw, the error, and the
/// octets left over (at the error, if there was one).
fn run_verified(
    params: FramingParams,
    offset: u64,
    data: &[u8],
    chunk: usize,
) -> (Checked, Option<String>, usize) {
    let mut rx = FpduReceiver::at_offset(params, offset).with_placement(Placement::Verified);
    let mut sink = Checked::default();
    let mut staged = Vec::new();
    for piece in data.chunks(chunk.max(1)) {
        staged.extend_from_slice(piece);
        match rx.receive(&staged, &mut sink) {
            Ok(n) => {
                staged.drain(..n);
            }
            Err(FeedError::Framing(e)) => return (sink, Some(e.to_string()), staged.len()),
            Err(FeedError::Sink(())) => unreachable!(),
        }
        assert!(sink.current.is_none(), "a ULPDU passed on before its FPDU was whole");
    }
    (sink, None, staged.len())
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 4 {
        return;
    }
    let flags = input[0];
    let params = FramingParams {
        crc: flags & 1 != 0,
        send_markers: false,
        receive_markers: flags & 2 != 0,
    };
    let offset = u64::from(u16::from_be_bytes([input[1], input[2]]));
    let chunk = usize::from(input[3]) + 1;
    let data = &input[4..];
    let whole = run(params, offset, data, data.len());
    let chunked = run(params, offset, data, chunk);
    assert_eq!(whole, chunked);
    let verified = run_verified(params, offset, data, data.len());
    let verified_chunked = run_verified(params, offset, data, chunk);
    assert_eq!(
        (&verified.0, &verified.1),
        (&verified_chunked.0, &verified_chunked.1)
    );
    // The octets left over count what was fed before the error showed,
    // which depends on the chunking; without an error they must agree.
    if verified.1.is_none() {
        assert_eq!(verified.2, verified_chunked.2);
    }
    // Verification changes when ULPDUs pass, never which ones.
    assert_eq!(verified.0.events, whole.0.events);
    if verified.1.is_some() {
        assert_eq!(verified.1, whole.1);
    }
});
