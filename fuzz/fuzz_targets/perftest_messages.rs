//! Fuzzes `iwarp perf --perftest`'s decoders of perftest's exchange messages: every
//! decoder on every input, the message kinds' length checks, and a destination that
//! decodes re-encodes (in the 56-octet layout) to what decodes to itself.

#![no_main]

use iwarp_cli::perf::perftest::script::{Message, ReportField};
use iwarp_cli::perf::perftest::wire::{self, Dest, Version};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Version::decode(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Version::parse(text);
    }
    if let Ok(d) = Dest::decode(data) {
        assert_eq!(Dest::decode(&d.encode()), Ok(d));
    }
    let _ = wire::decode_int(data, "int");
    let _ = wire::decode_mtu(data);
    let _ = wire::decode_u64(data, "u64");
    let _ = wire::decode_f64(data, "f64");
    if let Ok(b) = <[u8; wire::CREDIT_LEN]>::try_from(data) {
        let sent = u64::from(data[0]) << 24;
        let _ = wire::decode_credit(b, sent);
    }
    for m in [
        Message::Version,
        Message::CycleBuffer,
        Message::CacheLine,
        Message::Mtu,
        Message::Sync { zeroed: true },
        Message::Keys { qp: 0 },
        Message::Report(ReportField::Peak),
    ] {
        let _ = m.accepts_len(data.len());
    }
});
