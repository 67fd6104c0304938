//! Arbitrary octets into IFT: either through the Adaption Indication
//! negotiation (either role) and then, with the settled parameters, the
//! frame receiver; or straight into a frame receiver with arbitrary
//! parameters. Nothing may panic, the negotiation may never consume more
//! than the 64 octets of the indication, chunking must not change the
//! outcome, and a ULPDU must never be passed on with more octets than its
//! length announced.
#![no_main]

use std::time::Instant;

use iwarp_proto::framing::crc::crc32c;
use iwarp_proto::framing::{Deframer, FeedError, UlpduSink};
use iwarp_proto::ift::{
    IftConfig, IftReceiver, MarkerInterval, Negotiation, Role, RxCrc, RxParams, Status,
};
use libfuzzer_sys::fuzz_target;

/// Checks the sink contract while recording what it saw.
#[derive(Default, PartialEq, Debug)]
struct Checked {
    complete: Vec<Vec<u8>>,
    current: Option<(usize, Vec<u8>)>,
}

impl UlpduSink for Checked {
    type Error = ();
    fn ulpdu_begin(&mut self, len: usize) -> Result<(), ()> {
        assert!(self.current.is_none(), "begin inside a ULPDU");
        self.current = Some((len, Vec::new()));
        Ok(())
    }
    fn ulpdu_data(&mut self, bytes: &[u8]) -> Result<(), ()> {
        let (len, got) = self.current.as_mut().expect("data outside a ULPDU");
        assert!(!bytes.is_empty());
        got.extend_from_slice(bytes);
        assert!(got.len() <= *len, "more octets than announced");
        Ok(())
    }
    fn ulpdu_end(&mut self) -> Result<(), ()> {
        let (len, got) = self.current.take().expect("end outside a ULPDU");
        assert_eq!(len, got.len(), "ULPDU ended short");
        self.complete.push(got);
        Ok(())
    }
}

fn rx_crc(bits: u8) -> RxCrc {
    match bits & 3 {
        0 => RxCrc::Absent,
        1 => RxCrc::Ignored,
        _ => RxCrc::Checked,
    }
}

/// What one run observed.
#[derive(PartialEq, Debug)]
struct Outcome {
    negotiation: Option<Status>,
    sink: Checked,
    error: Option<String>,
}

fn feed_frames(rx: &mut IftReceiver, piece: &[u8], sink: &mut Checked) -> Option<String> {
    match rx.receive(piece, sink) {
        Ok(n) => {
            assert_eq!(n, piece.len());
            None
        }
        Err(FeedError::Framing(e)) => Some(e.to_string()),
        Err(FeedError::Sink(())) => unreachable!(),
    }
}

fn negotiate_then_frame(role: Role, config: IftConfig, data: &[u8], chunk: usize) -> Outcome {
    let mut n = Negotiation::new(role, config, Instant::now());
    let _ = n.poll_transmit();
    let mut rx: Option<IftReceiver> = None;
    let mut sink = Checked::default();
    let mut consumed = 0;
    for piece in data.chunks(chunk.max(1)) {
        let used = match n.handle_input(piece) {
            Ok(used) => used,
            Err(_) => break,
        };
        consumed += used;
        assert!(consumed <= 64, "negotiation swallowed frame octets");
        let rest = &piece[used..];
        if let Some(params) = n.params() {
            let rx = rx.get_or_insert_with(|| IftReceiver::new(params.rx));
            if let Some(e) = feed_frames(rx, rest, &mut sink) {
                return Outcome {
                    negotiation: Some(n.status()),
                    sink,
                    error: Some(e),
                };
            }
        } else {
            assert!(rest.is_empty());
        }
    }
    let _ = n.handle_eof();
    Outcome {
        negotiation: Some(n.status()),
        sink,
        error: None,
    }
}

fn frame_only(params: RxParams, offset: u64, data: &[u8], chunk: usize) -> Outcome {
    let mut rx = IftReceiver::at_offset(params, offset);
    let mut sink = Checked::default();
    let mut error = None;
    for piece in data.chunks(chunk.max(1)) {
        error = feed_frames(&mut rx, piece, &mut sink);
        if error.is_some() {
            break;
        }
    }
    Outcome {
        negotiation: None,
        sink,
        error,
    }
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 8 {
        return;
    }
    let flags = input[0];
    let vtag = u16::from_be_bytes([input[1], input[2]]);
    let chunk = usize::from(input[3]) + 1;
    let interval = MarkerInterval::new(u16::from_be_bytes([input[4], input[5]]).max(64));
    let offset = u64::from(input[6]) * 37;
    let more = input[7];
    let mut data = input[8..].to_vec();
    if flags & 0x80 != 0 {
        let role = if flags & 1 != 0 {
            Role::Responder
        } else {
            Role::Initiator
        };
        // Seal a would-be indication with the right magic and CRC, so that
        // the fuzzer gets past them and into settlement and framing.
        if more & 0x80 != 0 && data.len() >= 64 {
            data[..4].copy_from_slice(&0x5244_4450u32.to_be_bytes());
            let crc = crc32c(&data[..60]);
            data[60..64].copy_from_slice(&crc.to_le_bytes());
        }
        let config = IftConfig {
            rdma: flags & 2 != 0,
            header_crc: more & 1 != 0,
            payload_crc: more & 2 != 0,
            check_header_crc: more & 4 != 0,
            check_payload_crc: more & 8 != 0,
            send_markers: more & 16 != 0,
            receive_markers: if more & 32 != 0 { interval } else { None },
            ..IftConfig::new(vtag)
        };
        let whole = negotiate_then_frame(role, config, &data, data.len());
        let chunked = negotiate_then_frame(role, config, &data, chunk);
        assert_eq!(whole, chunked);
    } else {
        let params = RxParams {
            header_crc: rx_crc(flags),
            payload_crc: rx_crc(flags >> 2),
            markers: if flags & 0x10 != 0 { interval } else { None },
            vtag,
        };
        let whole = frame_only(params, offset, &data, data.len());
        let chunked = frame_only(params, offset, &data, chunk);
        assert_eq!(whole, chunked);
    }
});
