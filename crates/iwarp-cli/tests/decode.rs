//! `iwarp decode` end to end: capture files built here from known octets
//! (siw's own, recorded in siw-observed.md, and messages framed by our
//! transmitter), decoded by the built binary, its JSON output checked field
//! by field and a few text lines checked verbatim.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::capture::{tagged, untagged, Framer, Tcp, C2S, S2C};
use common::{hex, output_bounded, BIN};
use iwarp_proto::framing::{Framer as _, WireBatch};
use serde_json::Value;

/// rping over siw's MPA Request (siw-observed.md, "siw as initiator"):
/// revision 2, enhanced, IRD 1 ORD 1, no CRC, no markers.
const RPING_REQUEST: &str = "4d504120494420526571204672616d65 1002 0004 0001 0001";
/// Our Reply to it, CRC off (what `iwarp ping --server` sends; see
/// ping_replay.rs).
const OUR_REPLY: &str = "4d504120494420526570204672616d65 1002 0004 0001 0001";
/// Our Reply with the CRC bit.
const OUR_REPLY_CRC: &str = "4d504120494420526570204672616d65 5002 0004 0001 0001";
/// rping's first FPDU after a Reply without CRC: a Send of 16 octets
/// advertising its buffer 0x00005637f5a0d530, STag 0x3fce2900, 0x20 octets.
const RPING_SEND_NO_CRC: &str = "0022 4143 00000000 00000000 00000001 00000000 \
                                 00005637f5a0d530 3fce2900 00000020 00000000";
/// The same after a Reply with CRC, with siw's CRC32c.
const RPING_SEND_CRC: &str = "0022 4143 00000000 00000000 00000001 00000000 \
                              0000562e4da7b530 e54e5800 00000020 ba0f3665";

const LIMIT: Duration = Duration::from_secs(30);

fn write_capture(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("iwarp-decode-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).expect("write capture");
    path
}

/// Runs `iwarp decode` with `args`, bounded in time.
fn run(args: &[&str]) -> common::Output {
    let child = Command::new(BIN)
        .arg("decode")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iwarp");
    output_bounded(child, LIMIT, "iwarp decode")
}

/// Decodes `capture` with `--json` and `extra`; returns the records (the
/// summary last).
fn decode_json(name: &str, capture: &[u8], extra: &[&str]) -> Vec<Value> {
    let path = write_capture(name, capture);
    let mut args = vec![path.to_str().expect("utf-8 path"), "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        out.stderr
    );
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Decodes `capture` as text with `extra`.
fn decode_text(name: &str, capture: &[u8], extra: &[&str]) -> String {
    let path = write_capture(name, capture);
    let mut args = vec![path.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    let out = run(&args);
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        out.stderr
    );
    out.stdout
}

fn of_type<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["type"] == kind).collect()
}

fn summary(records: &[Value]) -> &Value {
    records
        .last()
        .filter(|r| r["type"] == "summary")
        .expect("summary last")
}

/// The rping startup and first Send, as siw and our server exchange them.
fn rping(crc: bool) -> Tcp {
    let mut t = Tcp::new(40000, 4791);
    t.handshake();
    t.send(C2S, &hex(RPING_REQUEST));
    t.ack(S2C);
    t.send(S2C, &hex(if crc { OUR_REPLY_CRC } else { OUR_REPLY }));
    t.send(
        C2S,
        &hex(if crc {
            RPING_SEND_CRC
        } else {
            RPING_SEND_NO_CRC
        }),
    );
    t.fin(C2S);
    t.fin(S2C);
    t
}

#[test]
fn siw_rping_startup_and_first_send_without_crc() {
    let r = decode_json("rping.pcap", &rping(false).pcap(), &[]);
    let startups = of_type(&r, "mpa_startup");
    assert_eq!(startups.len(), 2);
    let req = startups[0];
    assert_eq!(req["kind"], "request");
    assert_eq!(req["src"], "10.0.0.1:40000");
    assert_eq!(req["revision"], 2);
    assert_eq!(req["flags"], 0x10);
    assert_eq!(
        (req["markers"].as_bool(), req["crc"].as_bool()),
        (Some(false), Some(false))
    );
    assert_eq!(req["enhanced"]["ird"], 1);
    assert_eq!(req["enhanced"]["ord"], 1);
    assert_eq!(req["enhanced"]["peer_to_peer"], false);
    assert_eq!(req["pd_length"], 4);
    assert_eq!(req["private_data"], "");
    assert_eq!(startups[1]["kind"], "reply");
    assert_eq!(startups[1]["rejected"], false);

    let framing = of_type(&r, "framing");
    assert_eq!(framing.len(), 2);
    for f in &framing {
        assert_eq!(f["crc"], "off");
        assert!(f.get("markers").is_none());
        assert_eq!(f["start"], 24);
    }

    let pdus = of_type(&r, "pdu");
    assert_eq!(pdus.len(), 1);
    let p = pdus[0];
    assert_eq!(p["src"], "10.0.0.1:40000");
    assert_eq!(p["offset"], 0);
    assert_eq!(p["wire_len"], 40);
    assert_eq!(p["ulpdu_len"], 34);
    assert_eq!(p["crc"]["status"], "off");
    assert_eq!(p["ddp"]["model"], "untagged");
    assert_eq!(p["ddp"]["last"], true);
    assert_eq!(p["ddp"]["qn"], 0);
    assert_eq!(p["ddp"]["msn"], 1);
    assert_eq!(p["ddp"]["mo"], 0);
    assert_eq!(p["rdmap"]["name"], "Send");
    assert_eq!(p["rdmap"]["opcode"], 3);
    assert_eq!(p["payload_len"], 16);
    assert_eq!(p["payload"], "00005637f5a0d5303fce290000000020");
    assert!(p.get("errors").is_none());

    let s = summary(&r);
    assert_eq!(s["connections"].as_array().map(Vec::len), Some(1));
    let framing = &s["connections"][0]["framing"];
    assert_eq!(framing["kind"], "mpa");
    assert_eq!(framing["revision"], 2);
    assert_eq!(framing["crc"], false);
    assert_eq!(framing["markers_to_initiator"], false);
    assert_eq!(framing["markers_to_responder"], false);
    assert_eq!(s["pdus"]["Send"], 1);
    assert_eq!(s["pdus"]["MPA Request"], 1);
    assert_eq!(s["errors"]["crc"], 0);
}

#[test]
fn siw_rping_with_crc_checks_siws_own_crc() {
    let r = decode_json("rping-crc.pcap", &rping(true).pcap(), &[]);
    let framing = of_type(&r, "framing");
    assert!(framing.iter().all(|f| f["crc"] == "on"));
    let p = of_type(&r, "pdu")[0];
    assert_eq!(p["crc"]["status"], "ok");
    assert_eq!(p["crc"]["received"], "0x65360fba");
    assert_eq!(p["payload"], "0000562e4da7b530e54e580000000020");
    let framing = &summary(&r)["connections"][0]["framing"];
    assert_eq!(
        (framing["kind"].as_str(), framing["crc"].as_bool()),
        (Some("mpa"), Some(true))
    );
}

#[test]
fn text_output_golden_lines() {
    let text = decode_text("rping-text.pcap", &rping(true).pcap(), &[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "     4    0.000300 10.0.0.1:40000 > 10.0.0.2:4791  MPA    Request rev 2 enhanced IRD 1 ORD 1, M 0 C 0"
    );
    assert_eq!(
        lines[1],
        "     6    0.000500 10.0.0.2:4791 > 10.0.0.1:40000  MPA    Reply rev 2 enhanced IRD 1 ORD 1, M 0 C 1 R 0"
    );
    assert!(lines.contains(
        &"     7    0.000600 10.0.0.1:40000 > 10.0.0.2:4791  RDMAP  Send QN 0 MSN 1 MO 0 last len 16, crc ok"
    ));
    assert!(text.contains("  errors: none"), "{text}");
    let verbose = decode_text("rping-text-v.pcap", &rping(true).pcap(), &["-v"]);
    assert!(verbose.contains(
        "MPA: FPDU at stream offset 0, 40 octets on the wire, ULPDU_Length 34, pad 0, CRC ok, field 0x65360fba"
    ), "{verbose}");
    assert!(verbose.contains("DDP: untagged, L 1, DV 1, QN 0, MSN 1, MO 0, 16 payload octets"));
    assert!(verbose.contains("RDMAP: RV 1, opcode 3 (Send)"));
}

#[test]
fn pcapng_decodes_the_same() {
    let r = decode_json("rping.pcapng", &rping(false).pcapng(), &[]);
    let p = of_type(&r, "pdu")[0];
    assert_eq!(p["rdmap"]["name"], "Send");
    assert_eq!(p["frame"], 7);
    // Nanosecond timestamps, 100 µs apart: frame 7 is 600 µs after frame 1.
    assert!((p["time"].as_f64().unwrap() - 0.0006).abs() < 1e-9, "{p}");
}

/// A session with every RDMAP message, CRC on, cut into awkward segments,
/// with a retransmission and a segment ahead of its predecessor.
#[test]
fn every_message_split_retransmitted_and_reordered() {
    let mut t = Tcp::new(40001, 4791);
    t.handshake();
    t.send(
        C2S,
        &hex("4d504120494420526571204672616d65 5002 0009 0010 0010 68656c6c6f"),
    );
    t.send(
        S2C,
        &hex("4d504120494420526570204672616d65 5002 0004 0010 0010"),
    );
    let mut client = Framer::new(true, false);
    let mut server = Framer::new(true, false);

    // Client: an RDMA Write in two segments, a Read Request.
    let write1 = client.fpdu(&tagged(
        false,
        0,
        0x0000_1234,
        0x7f00_0000_1000,
        &[0xaa; 100],
    ));
    let write2 = client.fpdu(&tagged(true, 0, 0x0000_1234, 0x7f00_0000_1064, &[0xbb; 60]));
    let mut rr = Vec::new();
    rr.extend_from_slice(&0x0000_5678u32.to_be_bytes()); // sink STag
    rr.extend_from_slice(&0x2000u64.to_be_bytes()); // sink TO
    rr.extend_from_slice(&64u32.to_be_bytes()); // size
    rr.extend_from_slice(&0x0000_9abcu32.to_be_bytes()); // source STag
    rr.extend_from_slice(&0x3000u64.to_be_bytes()); // source TO
    let read_req = client.fpdu(&untagged(true, 1, 0, 1, 1, 0, &rr));
    let mut stream = write1.clone();
    stream.extend_from_slice(&write2);
    stream.extend_from_slice(&read_req);
    // Cuts inside a ULPDU_Length, a DDP header, a payload and a CRC field.
    let cuts = [
        1,
        7,
        50,
        write1.len() - 2,
        write1.len() + 3,
        stream.len() - 5,
    ];
    let base = t.sent(C2S);
    t.send_split(C2S, &stream, &cuts);
    // The second segment again: a retransmission of octets already delivered.
    t.send_at(C2S, base + 1, &stream[1..7]);

    // Server: the Read Response, a Send with Invalidate, a Terminate;
    // the Send with Invalidate's segment is captured before the Response's.
    let resp = server.fpdu(&tagged(true, 2, 0x0000_5678, 0x2000, &[0xcc; 64]));
    let send_inv = server.fpdu(&untagged(true, 4, 0x0000_9abc, 0, 1, 0, b"done"));
    let rel = t.sent(S2C);
    t.send_at(S2C, rel + resp.len() as u32, &send_inv);
    t.send_at(S2C, rel, &resp);
    t.lose(S2C, (resp.len() + send_inv.len()) as u32);
    // Terminate: DDP untagged buffer error "invalid MSN, no buffer" (layer
    // 1, type 2, code 2), M and D set, the offending Send's header copied.
    let mut term = hex("12 02 c0 00 0022");
    term.extend_from_slice(&untagged(true, 3, 0, 0, 7, 0, &[]));
    let terminate = server.fpdu(&untagged(true, 7, 0, 2, 1, 0, &term));
    t.send(S2C, &terminate);

    let r = decode_json("every.pcap", &t.pcap(), &[]);
    let pdus = of_type(&r, "pdu");
    let names: Vec<&str> = pdus
        .iter()
        .map(|p| p["rdmap"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "RDMA Write",
            "RDMA Write",
            "RDMA Read Request",
            "RDMA Read Response",
            "Send with Invalidate",
            "Terminate"
        ]
    );
    assert!(pdus.iter().all(|p| p["crc"]["status"] == "ok"), "{pdus:?}");
    assert!(pdus.iter().all(|p| p.get("errors").is_none()), "{pdus:?}");

    let w = pdus[0];
    assert_eq!(w["ddp"]["model"], "tagged");
    assert_eq!(w["ddp"]["last"], false);
    assert_eq!(w["ddp"]["stag"], "0x00001234");
    assert_eq!(w["ddp"]["to"], "0x7f0000001000");
    assert_eq!(w["payload_len"], 100);
    assert_eq!(pdus[1]["ddp"]["last"], true);
    assert_eq!(pdus[1]["ddp"]["to"], "0x7f0000001064");

    let q = &pdus[2]["rdmap"]["read_request"];
    assert_eq!(pdus[2]["ddp"]["qn"], 1);
    assert_eq!(q["sink_stag"], "0x00005678");
    assert_eq!(q["sink_to"], "0x2000");
    assert_eq!(q["size"], 64);
    assert_eq!(q["source_stag"], "0x00009abc");
    assert_eq!(q["source_to"], "0x3000");

    assert_eq!(pdus[3]["ddp"]["stag"], "0x00005678");
    assert_eq!(pdus[3]["payload_len"], 64);
    assert_eq!(pdus[4]["rdmap"]["invalidate_stag"], "0x00009abc");
    assert_eq!(pdus[4]["payload"], hex_str(b"done"));

    let term = &pdus[5]["rdmap"]["terminate"];
    assert_eq!(pdus[5]["ddp"]["qn"], 2);
    assert_eq!(
        (
            term["layer"].as_u64(),
            term["etype"].as_u64(),
            term["code"].as_u64()
        ),
        (Some(1), Some(2), Some(2))
    );
    assert_eq!(term["layer_name"], "DDP");
    assert_eq!(
        term["error"],
        "DDP: untagged buffer error: invalid MSN: no buffer available"
    );
    assert_eq!(term["ddp_copy"]["segment_length"], 34);
    assert_eq!(term["ddp_copy"]["rdmap"], "Send");
    assert_eq!(term["ddp_copy"]["ddp"]["msn"], 7);

    // The startup: enhanced IRD/ORD 16 and five octets of application data.
    let req = of_type(&r, "mpa_startup")[0];
    assert_eq!(req["private_data"], hex_str(b"hello"));
    assert_eq!(req["enhanced"]["ird"], 16);

    let tcp = &summary(&r)["connections"][0]["directions"];
    assert_eq!(tcp[0]["tcp"]["retransmitted"], 1);
    assert_eq!(tcp[1]["tcp"]["out_of_order"], 1);
    assert_eq!(tcp[1]["tcp"]["gaps"], 0);
    assert_eq!(summary(&r)["pdus"]["Terminate"], 1);

    let text = decode_text("every.pcap", &t.pcap(), &[]);
    assert!(text.contains(
        "RDMAP  Terminate DDP: untagged buffer error: invalid MSN: no buffer available [layer 1 type 2 code 0x02]; offending Send (QN 0 MSN 7 MO 0 last, ULPDU length 34), crc ok"
    ), "{text}");
    assert!(text.contains(
        "RDMAP  RDMA Read Request MSN 1: 64 octets from STag 0x00009abc TO 0x3000 into STag 0x00005678 TO 0x2000, crc ok"
    ), "{text}");
}

fn hex_str(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn corrupted_crc_is_reported_and_decoding_goes_on() {
    let mut t = Tcp::new(40002, 4791);
    t.handshake();
    t.send(C2S, &hex(RPING_REQUEST));
    t.send(S2C, &hex(OUR_REPLY_CRC));
    let mut f = Framer::new(true, false);
    let mut bad = f.fpdu(&untagged(true, 3, 0, 0, 1, 0, b"payload one"));
    bad[25] ^= 0x01; // a payload octet
    let good = f.fpdu(&untagged(true, 3, 0, 0, 2, 0, b"payload two"));
    t.send(C2S, &bad);
    t.send(C2S, &good);
    let r = decode_json("badcrc.pcap", &t.pcap(), &[]);
    let pdus = of_type(&r, "pdu");
    assert_eq!(pdus.len(), 2);
    assert_eq!(pdus[0]["crc"]["status"], "bad");
    assert!(pdus[0]["crc"]["computed"].is_string());
    assert_ne!(pdus[0]["crc"]["computed"], pdus[0]["crc"]["received"]);
    assert!(pdus[0]["errors"][0]
        .as_str()
        .unwrap()
        .starts_with("CRC error"));
    assert_eq!(pdus[0]["ddp"]["msn"], 1);
    assert_eq!(pdus[1]["crc"]["status"], "ok");
    assert_eq!(pdus[1]["ddp"]["msn"], 2);
    assert_eq!(summary(&r)["errors"]["crc"], 1);

    // Told not to check, it reports nothing wrong.
    let r = decode_json("badcrc.pcap", &t.pcap(), &["--no-crc-check"]);
    let pdus = of_type(&r, "pdu");
    assert!(pdus.iter().all(|p| p["crc"]["status"] == "unchecked"));
    assert_eq!(summary(&r)["errors"]["crc"], 0);
}

/// A Reply that asks for markers: the client's FPDUs carry them. A long
/// Write spans several markers; the capture then loses octets in the
/// middle of an FPDU, and decoding resynchronises on the next marker.
#[test]
fn markers_are_checked_and_resynchronise_after_a_gap() {
    let mut t = Tcp::new(40003, 4791);
    t.handshake();
    t.send(C2S, &hex("4d504120494420526571204672616d65 4001 0000"));
    t.send(S2C, &hex("4d504120494420526570204672616d65 c001 0000"));
    let mut f = Framer::new(true, true);
    let mut stream = Vec::new();
    for i in 0..6u32 {
        let payload = vec![i as u8; 300 + 97 * i as usize];
        stream.extend_from_slice(&f.fpdu(&tagged(
            true,
            0,
            0x100 + i,
            u64::from(i) << 16,
            &payload,
        )));
    }
    // Lose 700 octets from 900 on (inside the third FPDU).
    t.send_split(C2S, &stream[..900], &[333]);
    t.lose(C2S, 700);
    for chunk in stream[1600..].chunks(500) {
        t.send(C2S, chunk);
    }
    t.ack(S2C);

    let r = decode_json("markers.pcap", &t.pcap(), &[]);
    let framing = of_type(&r, "framing");
    assert_eq!(framing[0]["src"], "10.0.0.1:40003");
    assert_eq!(framing[0]["markers"], 512);
    assert!(framing[1].get("markers").is_none());
    let pdus = of_type(&r, "pdu");
    assert!(pdus.iter().all(|p| p["crc"]["status"] == "ok"), "{pdus:?}");
    // The first marker opens the stream; every FPDU lists the markers in it.
    assert_eq!(pdus[0]["markers"][0]["offset"], 0);
    assert_eq!(pdus[0]["markers"][0]["pointer"], 0);
    let stags: Vec<&str> = pdus
        .iter()
        .map(|p| p["ddp"]["stag"].as_str().unwrap())
        .collect();
    let gap = of_type(&r, "gap");
    assert_eq!(gap.len(), 1);
    assert_eq!(gap[0]["octets"], 700);
    assert_eq!(gap[0]["action"], "resync");
    let resync = of_type(&r, "resync");
    assert_eq!(resync.len(), 1, "{r:?}");
    // FPDUs 0 and 1 before the gap; 2 is lost; decoding resumes at one of
    // the later FPDUs and runs to the end.
    assert_eq!(&stags[..2], ["0x00000100", "0x00000101"]);
    assert_eq!(stags.last(), Some(&"0x00000105"));
    assert!(!stags.contains(&"0x00000102"));
    assert_eq!(resync[0]["offset"], pdus[2]["offset"]);
}

/// A marker whose FPDUPTR was damaged: the lengths and the marker
/// disagree, the FPDU is lost, and the next marker finds the framing again.
#[test]
fn a_damaged_marker_is_reported_and_the_next_one_resynchronises() {
    let mut t = Tcp::new(40011, 4791);
    t.handshake();
    t.send(C2S, &hex("4d504120494420526571204672616d65 4001 0000"));
    t.send(S2C, &hex("4d504120494420526570204672616d65 c001 0000"));
    let mut f = Framer::new(true, true);
    let mut stream = Vec::new();
    for i in 0..5u32 {
        stream.extend_from_slice(&f.fpdu(&untagged(true, 3, 0, 0, i + 1, 0, &[i as u8; 400])));
    }
    // The marker at stream offset 512 sits inside the second FPDU.
    stream[515] ^= 0x10;
    t.send_split(C2S, &stream, &[700, 1400]);
    let r = decode_json("badmarker.pcap", &t.pcap(), &[]);
    let notes = of_type(&r, "note");
    assert!(
        notes.iter().any(|n| n["level"] == "error"
            && n["message"]
                .as_str()
                .unwrap()
                .contains("marker at stream offset 512")),
        "{notes:?}"
    );
    let msns: Vec<u64> = of_type(&r, "pdu")
        .iter()
        .map(|p| p["ddp"]["msn"].as_u64().unwrap())
        .collect();
    assert_eq!(msns.first(), Some(&1));
    assert!(!msns.contains(&2), "{msns:?}");
    assert_eq!(msns.last(), Some(&5));
    assert_eq!(of_type(&r, "resync").len(), 1);
    assert!(of_type(&r, "pdu")
        .iter()
        .all(|p| p["crc"]["status"] == "ok"));
    assert_eq!(summary(&r)["errors"]["framing"], 1);
}

#[test]
fn a_gap_without_markers_stops_the_direction() {
    let mut t = Tcp::new(40004, 4791);
    t.handshake();
    t.send(C2S, &hex(RPING_REQUEST));
    t.send(S2C, &hex(OUR_REPLY));
    let mut f = Framer::new(false, false);
    let a = f.fpdu(&untagged(true, 3, 0, 0, 1, 0, b"one"));
    let b = f.fpdu(&untagged(true, 3, 0, 0, 2, 0, b"two"));
    let c = f.fpdu(&untagged(true, 3, 0, 0, 3, 0, b"three"));
    t.send(C2S, &a);
    t.lose(C2S, b.len() as u32);
    t.send(C2S, &c);
    t.ack(S2C);
    let r = decode_json("gap.pcap", &t.pcap(), &[]);
    assert_eq!(of_type(&r, "pdu").len(), 1);
    let gap = of_type(&r, "gap");
    assert_eq!(gap[0]["action"], "stop");
    assert_eq!(gap[0]["octets"], b.len());
    assert_eq!(summary(&r)["errors"]["gaps"], 1);
}

#[test]
fn ends_reused_by_a_new_connection() {
    let mut t = rping(false);
    t.reconnect();
    t.send(C2S, &hex(RPING_REQUEST));
    t.send(S2C, &hex(OUR_REPLY_CRC));
    t.send(C2S, &hex(RPING_SEND_CRC));
    let r = decode_json("reuse.pcap", &t.pcap(), &[]);
    let pdus = of_type(&r, "pdu");
    assert_eq!(pdus.len(), 2);
    assert_eq!(
        (
            pdus[0]["connection"].as_u64(),
            pdus[1]["connection"].as_u64()
        ),
        (Some(1), Some(2))
    );
    assert_eq!(pdus[0]["crc"]["status"], "off");
    assert_eq!(pdus[1]["crc"]["status"], "ok");
    assert_eq!(summary(&r)["connections"].as_array().map(Vec::len), Some(2));
}

#[test]
fn siw_rejects_markers() {
    // siw-observed.md: a rev 1 Request with M; siw replies R set, M clear.
    let mut t = Tcp::new(40005, 4791);
    t.handshake();
    t.send(C2S, &hex("4d504120494420526571204672616d65 8001 0000"));
    t.send(S2C, &hex("4d504120494420526570204672616d65 2001 0000"));
    let r = decode_json("reject.pcap", &t.pcap(), &[]);
    let rep = of_type(&r, "mpa_startup")[1];
    assert_eq!(rep["rejected"], true);
    assert_eq!(rep["markers"], false);
    assert!(of_type(&r, "framing").is_empty());
    let notes = of_type(&r, "note");
    assert!(notes
        .iter()
        .any(|n| n["message"].as_str().unwrap().contains("rejected")));
    let framing = &summary(&r)["connections"][0]["framing"];
    assert_eq!(framing["kind"], "mpa_rejected");
    assert_eq!(framing["revision"], 1);
}

#[test]
fn an_unknown_revision_is_reported() {
    let mut t = Tcp::new(40006, 4791);
    t.handshake();
    t.send(C2S, &hex("4d504120494420526571204672616d65 0003 0000"));
    t.fin(S2C);
    let r = decode_json("rev3.pcap", &t.pcap(), &[]);
    let req = of_type(&r, "mpa_startup")[0];
    assert_eq!(req["revision"], 3);
    assert!(req["error"].as_str().unwrap().contains("revision 3"));
    assert_eq!(summary(&r)["errors"]["framing"], 1);
}

#[test]
fn without_a_startup_only_named_ports_are_decoded() {
    // The capture starts after the startup: only FPDUs (with CRC).
    let mut t = Tcp::new(40007, 4791);
    let mut f = Framer::new(true, false);
    t.send(C2S, &f.fpdu(&untagged(true, 3, 0, 0, 5, 0, b"mid-stream")));
    t.send(C2S, &f.fpdu(&tagged(true, 0, 7, 0, b"write")));
    let r = decode_json("nostartup.pcap", &t.pcap(), &[]);
    assert!(of_type(&r, "pdu").is_empty());
    assert_eq!(summary(&r)["not_decoded"], 1);

    let r = decode_json("nostartup.pcap", &t.pcap(), &["--port", "4791"]);
    let framing = of_type(&r, "framing")[0];
    assert_eq!(framing["crc"], "auto");
    let pdus = of_type(&r, "pdu");
    assert_eq!(pdus.len(), 2);
    assert_eq!(pdus[0]["ddp"]["msn"], 5);
    assert!(pdus.iter().all(|p| p["crc"]["status"] == "ok"));

    // Without CRC (a zero field), detected from the first FPDU; and an
    // offset to skip to the first FPDU.
    let mut t = Tcp::new(40008, 4791);
    let mut f = Framer::new(false, false);
    let mut data = b"junk".to_vec();
    data.extend_from_slice(&f.fpdu(&untagged(true, 3, 0, 0, 9, 0, b"x")));
    data.extend_from_slice(&f.fpdu(&untagged(true, 3, 0, 0, 10, 0, b"y")));
    t.send(C2S, &data);
    let r = decode_json(
        "nocrc.pcap",
        &t.pcap(),
        &["--port", "4791", "--stream-offset", "4"],
    );
    let pdus = of_type(&r, "pdu");
    assert_eq!(pdus.len(), 2, "{r:?}");
    assert!(pdus.iter().all(|p| p["crc"]["status"] == "off"));
    assert_eq!(pdus[1]["ddp"]["msn"], 10);
    assert_eq!(summary(&r)["errors"]["crc"], 0);
}

/// Two IFT indications (VTags 0x1111 and 0x2222) on port `port`, and the
/// client's transmitter: its frames carry the server's VTag, both CRCs.
fn ift_session(port: u16) -> (Tcp, iwarp_proto::ift::IftTransmitter) {
    use iwarp_proto::ift::{IftConfig, IftTransmitter, Phase, TxParams};
    let a = IftConfig::new(0x1111);
    let b = IftConfig::new(0x2222);
    let mut t = Tcp::new(port, 4791);
    t.handshake();
    t.send(C2S, &a.indication(Phase::Zero).to_bytes());
    t.send(S2C, &b.indication(Phase::One).to_bytes());
    let tx = IftTransmitter::new(TxParams {
        header_crc: true,
        payload_crc: true,
        markers: None,
        vtag: 0x2222,
    });
    (t, tx)
}

/// The IFT frame carrying `send` (an untagged ULPDU).
fn ift_frame(tx: &mut iwarp_proto::ift::IftTransmitter, send: &[u8]) -> Vec<u8> {
    let mut batch = WireBatch::new();
    tx.frame(&send[..18], &[&send[18..]], &mut batch)
        .expect("ift frame");
    let mut wire = Vec::new();
    batch.write_to(&[&send[18..]], &mut wire);
    wire
}

#[test]
fn ift_indications_and_a_frame() {
    let (mut t, mut tx) = ift_session(40009);
    let wire = ift_frame(&mut tx, &untagged(true, 3, 0, 0, 1, 0, b"over IFT"));
    t.send_split(C2S, &wire, &[3, 10]);
    let r = decode_json("ift.pcap", &t.pcap(), &[]);
    let ind = of_type(&r, "ift_indication");
    assert_eq!(ind.len(), 2);
    assert_eq!(ind[0]["phase"], 0);
    assert_eq!(ind[0]["vtag"], 0x1111);
    let framing = of_type(&r, "framing");
    assert_eq!(framing[0]["framing"], "ift");
    assert_eq!(framing[0]["vtag"], 0x2222);
    let p = of_type(&r, "pdu")[0];
    assert_eq!(p["framing"], "ift");
    assert_eq!(p["rdmap"]["name"], "Send");
    assert_eq!(p["payload"], hex_str(b"over IFT"));
    assert_eq!(p["crc"]["status"], "ok");
    assert_eq!(p["header_crc"]["status"], "ok");
}

#[test]
fn unreadable_files() {
    let path = write_capture("garbage.pcap", b"this is not a capture at all");
    let out = run(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.contains("not a pcap or pcapng"),
        "{}",
        out.stderr
    );

    // A capture cut in the middle of a record: what came before is decoded.
    let mut pcap = rping(false).pcap();
    pcap.truncate(pcap.len() - 30);
    let path = write_capture("cut.pcap", &pcap);
    let out = run(&[path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stderr.contains("cut short"), "{}", out.stderr);
    assert!(out.stdout.contains("Reply rev 2"), "{}", out.stdout);

    let out = run(&["/nonexistent/capture.pcap"]);
    assert_eq!(out.status.code(), Some(1));
}

/// The README's sample: an rping exchange over siw's recorded octets with
/// CRC, a damaged Send and the Terminate it earns; the whole text output.
#[test]
fn readme_sample_session() {
    let mut t = Tcp::new(47122, 7174);
    t.handshake();
    t.send(C2S, &hex(RPING_REQUEST));
    t.send(S2C, &hex(OUR_REPLY_CRC));
    t.send(C2S, &hex(RPING_SEND_CRC));
    let mut c = Framer::new(true, false);
    c.fpdu(&hex(&RPING_SEND_CRC[5..]));
    let mut s = Framer::new(true, false);
    let mut rr = Vec::new();
    rr.extend_from_slice(&0x0000_0301u32.to_be_bytes());
    rr.extend_from_slice(&0x7f3a_1c00_0000u64.to_be_bytes());
    rr.extend_from_slice(&32u32.to_be_bytes());
    rr.extend_from_slice(&0xe54e_5800u32.to_be_bytes());
    rr.extend_from_slice(&0x562e_4da7_b530u64.to_be_bytes());
    t.send(S2C, &s.fpdu(&untagged(true, 1, 0, 1, 1, 0, &rr)));
    let resp = c.fpdu(&tagged(
        true,
        2,
        0x0000_0301,
        0x7f3a_1c00_0000,
        b"rdma-ping-0: ABCDEFGHIJKLMNOPQRS",
    ));
    t.send_split(C2S, &resp, &[20]);
    t.send(
        S2C,
        &s.fpdu(&untagged(
            true,
            3,
            0,
            0,
            1,
            0,
            &hex("00007f3a1c000000 00000301 00000020"),
        )),
    );
    let mut bad = c.fpdu(&untagged(
        true,
        3,
        0,
        0,
        2,
        0,
        &hex("0000562e4da7b600 e54e5900 00000020"),
    ));
    bad[30] ^= 4;
    t.send(C2S, &bad);
    let mut term = hex("20 02 c0 00 0022");
    term.extend_from_slice(&bad[2..20]);
    t.send(S2C, &s.fpdu(&untagged(true, 7, 0, 2, 1, 0, &term)));
    t.fin(S2C);
    t.fin(C2S);
    let text = decode_text("sample.pcap", &t.pcap(), &[]);
    assert_eq!(text, README_SAMPLE, "{text}");
}

const README_SAMPLE: &str = "     4    0.000300 10.0.0.1:47122 > 10.0.0.2:7174  MPA    Request rev 2 enhanced IRD 1 ORD 1, M 0 C 0
     5    0.000400 10.0.0.2:7174 > 10.0.0.1:47122  MPA    Reply rev 2 enhanced IRD 1 ORD 1, M 0 C 1 R 0
     5    0.000400 10.0.0.1:47122 > 10.0.0.2:7174  MPA    framing: CRC on, no markers, ORD 1, from TCP offset 24 (startup frames)
     5    0.000400 10.0.0.2:7174 > 10.0.0.1:47122  MPA    framing: CRC on, no markers, ORD 1, from TCP offset 24 (startup frames)
     6    0.000500 10.0.0.1:47122 > 10.0.0.2:7174  RDMAP  Send QN 0 MSN 1 MO 0 last len 16, crc ok
     7    0.000600 10.0.0.2:7174 > 10.0.0.1:47122  RDMAP  RDMA Read Request MSN 1: 32 octets from STag 0xe54e5800 TO 0x562e4da7b530 into STag 0x00000301 TO 0x7f3a1c000000, crc ok
     9    0.000800 10.0.0.1:47122 > 10.0.0.2:7174  RDMAP  RDMA Read Response STag 0x00000301 TO 0x7f3a1c000000 last len 32, crc ok
    10    0.000900 10.0.0.2:7174 > 10.0.0.1:47122  RDMAP  Send QN 0 MSN 1 MO 0 last len 16, crc ok
    11    0.001000 10.0.0.1:47122 > 10.0.0.2:7174  RDMAP  Send QN 0 MSN 2 MO 0 last len 16, CRC BAD !! CRC error: computed 0xe8e79b9c, received 0x5a12aceb
    12    0.001100 10.0.0.2:7174 > 10.0.0.1:47122  RDMAP  Terminate LLP: CRC error [layer 2 type 0 code 0x02]; offending Send (QN 0 MSN 2 MO 0 last, ULPDU length 34), crc ok

Summary: 14 frames, 14 TCP segments; 1 iWARP connection
  #1 10.0.0.1:47122 <-> 10.0.0.2:7174: MPA rev 2, CRC on, no markers
      10.0.0.1:47122 > 10.0.0.2:7174: 156 octets in 5 segments; 1 startup frame, 3 PDUs, 1 error
      10.0.0.2:7174 > 10.0.0.1:47122: 164 octets in 4 segments; 1 startup frame, 3 PDUs, 0 errors
      operations: Send 2 (32 octets), RDMA Read 1 (32 octets); 160.0 kB/s over 400.0 µs
      Read latency (1 Read): min 200.2 µs, p50 200.2 µs, p90 200.2 µs, p99 200.2 µs, max 200.2 µs
  PDUs: MPA Reply 1, MPA Request 1, RDMA Read Request 1, RDMA Read Response 1, Send 3, Terminate 1
  errors: 1 (CRC 1, header 0, framing 0, gaps 0, checks 0)
";

/// A clean exchange with CRC: the rping startup, then `n` Sends each way,
/// each acknowledged; the TCP ending is the caller's.
fn clean_session(port: u16, n: u32) -> (Tcp, Framer, Framer) {
    let mut t = Tcp::new(port, 4791);
    t.handshake();
    t.send(C2S, &hex(RPING_REQUEST));
    t.ack(S2C);
    t.send(S2C, &hex(OUR_REPLY_CRC));
    t.ack(C2S);
    let mut client = Framer::new(true, false);
    let mut server = Framer::new(true, false);
    for msn in 1..=n {
        t.send(C2S, &client.fpdu(&untagged(true, 3, 0, 0, msn, 0, b"ping")));
        t.ack(S2C);
        t.send(S2C, &server.fpdu(&untagged(true, 3, 0, 0, msn, 0, b"pong")));
        t.ack(C2S);
    }
    (t, client, server)
}

/// No error of any kind in a decoded capture, and `pdus` PDUs.
fn assert_clean(r: &[Value], pdus: usize) {
    let errors: Vec<&Value> = of_type(r, "note")
        .into_iter()
        .filter(|n| n["level"] == "error")
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(of_type(r, "gap").is_empty(), "{:?}", of_type(r, "gap"));
    let s = summary(r);
    for kind in ["crc", "header", "framing", "gaps"] {
        assert_eq!(s["errors"][kind], 0, "{kind}: {s}");
    }
    assert_eq!(of_type(r, "pdu").len(), pdus);
}

#[test]
fn ending_fin_both_ways_acknowledged() {
    let (mut t, _, _) = clean_session(41000, 2);
    t.fin(C2S);
    t.ack(S2C);
    t.fin(S2C);
    t.ack(C2S);
    let r = decode_json("end-fin.pcap", &t.pcap(), &[]);
    assert_clean(&r, 4);
    let text = decode_text("end-fin.pcap", &t.pcap(), &[]);
    assert!(text.contains("  errors: none"), "{text}");
}

#[test]
fn ending_rst() {
    let (mut t, _, _) = clean_session(41001, 2);
    t.rst(S2C);
    let r = decode_json("end-rst.pcap", &t.pcap(), &[]);
    assert_clean(&r, 4);
    // A FIN, then the peer resets instead of closing.
    let (mut t, _, _) = clean_session(41002, 1);
    t.fin(C2S);
    t.rst(S2C);
    t.ack(C2S);
    let r = decode_json("end-fin-rst.pcap", &t.pcap(), &[]);
    assert_clean(&r, 2);
}

#[test]
fn ending_half_close_the_other_end_goes_on() {
    let (mut t, _, mut server) = clean_session(41003, 1);
    t.fin(C2S);
    t.ack(S2C);
    for msn in 2..=4 {
        t.send(S2C, &server.fpdu(&untagged(true, 3, 0, 0, msn, 0, b"more")));
        t.ack(C2S);
    }
    t.fin(S2C);
    t.ack(C2S);
    let r = decode_json("end-half.pcap", &t.pcap(), &[]);
    assert_clean(&r, 5);
}

#[test]
fn ending_fin_with_data_and_retransmitted_fin() {
    let (mut t, mut client, _) = clean_session(41004, 1);
    t.fin_with(C2S, &client.fpdu(&untagged(true, 3, 0, 0, 2, 0, b"bye")));
    t.fin_again(C2S);
    t.ack(S2C);
    t.fin(S2C);
    t.fin_again(S2C);
    t.ack(C2S);
    t.ack(C2S);
    let r = decode_json("end-fin-data.pcap", &t.pcap(), &[]);
    assert_clean(&r, 3);
    let last = of_type(&r, "pdu").last().copied().cloned().expect("a PDU");
    assert_eq!(last["ddp"]["msn"], 2);
}

#[test]
fn ending_capture_started_mid_connection() {
    // No handshake and no startup: the capture begins at an FPDU; --port
    // names the connection. It ends with FINs both ways, acknowledged.
    let mut t = Tcp::new(41005, 4791);
    let mut client = Framer::new(true, false);
    let mut server = Framer::new(true, false);
    for msn in 7..=9 {
        t.send(C2S, &client.fpdu(&untagged(true, 3, 0, 0, msn, 0, b"mid")));
        t.ack(S2C);
        t.send(S2C, &server.fpdu(&untagged(true, 3, 0, 0, msn, 0, b"way")));
        t.ack(C2S);
    }
    t.fin(C2S);
    t.ack(S2C);
    t.fin(S2C);
    t.ack(C2S);
    let r = decode_json("end-mid.pcap", &t.pcap(), &["--port", "4791"]);
    assert_clean(&r, 6);
}

/// Findings and operations in JSON, and `--ops` in text.
#[test]
fn findings_and_operations_in_json_and_ops_lines() {
    let mut t = Tcp::new(41100, 4791);
    t.handshake();
    t.send(C2S, &hex(RPING_REQUEST));
    t.send(S2C, &hex(OUR_REPLY_CRC));
    let mut c = Framer::new(true, false);
    let mut s = Framer::new(true, false);
    t.send(C2S, &c.fpdu(&untagged(true, 3, 0, 0, 1, 0, b"one")));
    t.send(C2S, &c.fpdu(&untagged(true, 3, 0, 0, 3, 0, b"three")));
    let rr = iwarp_decode::synth::read_request(0x10, 0x1000, 4, 0x20, 0x2000);
    t.send(C2S, &c.fpdu(&untagged(true, 1, 0, 1, 1, 0, &rr)));
    t.send(S2C, &s.fpdu(&tagged(true, 2, 0x10, 0x1000, b"data")));
    t.fin(C2S);
    t.fin(S2C);
    let r = decode_json("ops.pcap", &t.pcap(), &[]);
    let f = of_type(&r, "finding");
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["check"], "msn_gap");
    assert_eq!(f[0]["expected"], 2);
    assert_eq!(f[0]["got"], 3);
    assert_eq!(f[0]["frames"], serde_json::json!([6, 7]));
    let ops = of_type(&r, "operation");
    assert_eq!(ops.len(), 3, "{ops:?}");
    let read = ops[2];
    assert_eq!(read["operation"], "read");
    assert_eq!(read["src"], "10.0.0.1:41100");
    assert_eq!(read["sink_stag"], "0x00000010");
    assert_eq!(read["octets"], 4);
    assert_eq!(read["complete"], true);
    let sum = &summary(&r)["connections"][0]["operations"];
    assert_eq!(sum["classes"][0]["count"], 2);
    assert_eq!(sum["classes"][2]["octets"], 4);
    assert_eq!(sum["read_latency"]["count"], 1);
    assert_eq!(summary(&r)["errors"]["findings"], 1);

    let text = decode_text("ops.pcap", &t.pcap(), &["--ops"]);
    assert!(
        text.contains("OP     Send MSN 3: 5 octets in 1 segment"),
        "{text}"
    );
    assert!(text.contains(
        "OP     RDMA Read MSN 1: 4 of 4 octets from STag 0x00000020 into STag 0x00000010 in 1 segment, 100.0 µs"
    ), "{text}");
    assert!(
        text.contains("CHECK  QN 0: MSN 3 where 2 was next (1 skipped) [frames 6, 7]"),
        "{text}"
    );
    assert!(!text.contains("RDMAP  Send"), "{text}");
    assert!(
        text.contains("operations: Send 2 (8 octets), RDMA Read 1 (4 octets)"),
        "{text}"
    );
}

/// The placement view in both outputs: MPA segments that overtake a late
/// one show as PLACE lines at the frame that brought them, and an IFT
/// direction, which has no other way past a hole, goes on at the frame
/// found whole right after it.
#[test]
fn placement_view_and_an_ift_hole_crossed() {
    let (mut t, mut c, _) = clean_session(40030, 0);
    let f: Vec<Vec<u8>> = (1..=4u32)
        .map(|m| c.fpdu(&untagged(true, 3, 0, 0, m, 0, &[m as u8; 200])))
        .collect();
    let base = t.sent(C2S);
    t.send(C2S, &f[0]);
    let at = |i: usize| base + f[..i].iter().map(|x| x.len() as u32).sum::<u32>();
    t.send_at(C2S, at(2), &f[2]);
    t.send_at(C2S, at(3), &f[3]);
    t.send_at(C2S, at(1), &f[1]);
    t.lose(C2S, at(4) - base - f[0].len() as u32);
    t.ack(S2C);
    let text = decode_text("place.pcap", &t.pcap(), &[]);
    let place: Vec<&str> = text.lines().filter(|l| l.contains("PLACE")).collect();
    assert_eq!(place.len(), 2, "{text}");
    assert!(place[0].contains("Send QN 0 MSN 3") && place[0].ends_with("placeable now"));
    assert!(text.contains(
        "placement view: 2 PDUs found ahead of a hole, 2 placeable (400 octets of payload)"
    ));

    let (mut t, mut tx) = ift_session(40031);
    let frames: Vec<Vec<u8>> = (1..=4u32)
        .map(|m| ift_frame(&mut tx, &untagged(true, 3, 0, 0, m, 0, &[m as u8; 100])))
        .collect();
    t.send(C2S, &frames[0]);
    t.lose(C2S, frames[1].len() as u32);
    t.send(C2S, &frames[2]);
    t.send(C2S, &frames[3]);
    t.ack(S2C);
    let r = decode_json("ift-hole.pcap", &t.pcap(), &[]);
    let gap = of_type(&r, "gap");
    assert_eq!(gap.len(), 1);
    assert_eq!(gap[0]["action"], "ahead");
    let resync = of_type(&r, "resync");
    assert_eq!(resync[0]["method"], "ahead");
    assert_eq!(resync[0]["framing"], "ift");
    let msns: Vec<u64> = of_type(&r, "pdu")
        .iter()
        .map(|p| p["ddp"]["msn"].as_u64().unwrap())
        .collect();
    assert_eq!(msns, [1, 3, 4]);
    assert_eq!(of_type(&r, "placeable").len(), 2);
}

/// A real capture of Linux siw sending an FPDU whose CRC does not cover
/// its octets (tests/data/siw/README.md): the decoder reports it, with
/// both values, and shows our client's Terminate for it.
#[test]
fn siw_capture_with_a_bad_crc() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/siw/rping-65535-crc-mismatch.pcap");
    let capture = std::fs::read(&path).expect("the siw capture");
    let r = decode_json("siw-bad-crc.pcap", &capture, &[]);
    let pdus = of_type(&r, "pdu");
    let bad: Vec<_> = pdus
        .iter()
        .filter(|p| p["crc"]["status"] == "bad")
        .collect();
    assert_eq!(bad.len(), 1, "{bad:?}");
    let p = bad[0];
    assert_eq!(p["frame"], 65);
    assert_eq!(p["src"], "127.0.0.1:27960");
    assert_eq!(p["offset"], 49596);
    assert_eq!(p["crc"]["received"], "0x2d2c75e5");
    assert_eq!(p["crc"]["computed"], "0x2054c478");
    assert_eq!(p["rdmap"]["name"], "RDMA Write");
    assert_eq!(p["payload_len"], 1436);
    // Our client's answer: a Terminate for an LLP CRC error.
    let term: Vec<_> = pdus
        .iter()
        .filter(|p| p["rdmap"]["name"] == "Terminate")
        .collect();
    assert_eq!(term.len(), 1);
    assert_eq!(term[0]["src"], "127.0.0.1:38818");
    assert_eq!(term[0]["frame"], 66);
    assert_eq!(term[0]["rdmap"]["terminate"]["layer_name"], "LLP");
    assert_eq!(term[0]["rdmap"]["terminate"]["code"], 2);
    assert_eq!(summary(&r)["errors"]["crc"], 1);
}
