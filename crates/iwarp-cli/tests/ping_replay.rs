//! Wire compatibility with a real rping client, proven octet by octet.
//!
//! A raw TCP client replays what rdma-core's `rping -c` over Linux `siw` sent, as recorded in
//! `siw-observed.md`: its MPA Request (`1002 0004 0001 0001`: revision 2, enhanced, IRD 1,
//! ORD 1, no private data, no CRC asked) and its first FPDU, the 16-octet Send advertising
//! its start buffer. siw was recorded twice, once after a Reply without CRC and once after a
//! Reply with CRC (the same FPDU with another buffer address and a real CRC32c); each test
//! configures our server so that the recorded octets are exactly what siw would send it.
//!
//! Everything our server sends back is decoded here by hand, without the stack's own
//! decoders: the MPA Reply, the RDMA Read Request (MPA framing, DDP untagged queue 1,
//! RDMAP Read Request fields: it must read exactly the recorded STag, address and length),
//! the "go" Sends, and the RDMA Write of the ping text back into the advertised sink. The
//! Read Response and the client's second Send are built by hand, as siw would build them.
//! Only CRC32c arithmetic is borrowed (`iwarp_proto::framing::crc`), and it is checked first
//! against the CRC siw itself computed.
//!
//! The last test turns the roles around: a hand-built rping server (answering with siw's
//! Reply) drives our client through two pings, and our client's MPA Request must be
//! rping's own, octet for octet.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use iwarp_proto::framing::crc::crc32c;

mod common;

use common::Server;

const LIMIT: Duration = Duration::from_secs(30);

/// The MPA Request rping over siw sends (siw-observed.md, "siw as initiator").
const RPING_REQUEST: &str = "4d504120494420526571204672616d65 1002 0004 0001 0001";

/// rping's first FPDU after a Reply without CRC: its start buffer at 0x00005637f5a0d530,
/// STag 0x3fce2900, 0x20 octets; CRC field zero.
const RPING_SEND_NO_CRC: &str = "0022 4143 00000000 00000000 00000001 00000000 \
                                 00005637f5a0d530 3fce2900 00000020 00000000";

/// rping's first FPDU after a Reply with CRC: start buffer at 0x0000562e4da7b530, STag
/// 0xe54e5800, 0x20 octets, and siw's CRC32c (least significant octet first).
const RPING_SEND_CRC: &str = "0022 4143 00000000 00000000 00000001 00000000 \
                              0000562e4da7b530 e54e5800 00000020 ba0f3665";

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes(b[..2].try_into().expect("2 octets"))
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 octets"))
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 octets"))
}

/// A running `iwarp ping --server -v -d ARGS` on an ephemeral loopback port.
fn start_server(args: &[&str]) -> Server {
    let mut all = vec!["ping", "--server", "-a", "127.0.0.1", "-p", "0", "-v", "-d"];
    all.extend_from_slice(args);
    Server::start(&all, LIMIT)
}

/// The replaying client: a TCP stream and the CRC setting the startup settled.
struct Raw {
    stream: TcpStream,
    crc: bool,
}

impl Raw {
    fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(LIMIT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Self { stream, crc: false }
    }

    fn send_raw(&mut self, octets: &[u8]) {
        self.stream.write_all(octets).expect("write");
    }

    fn recv_exact(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        self.stream.read_exact(&mut b).expect("read");
        b
    }

    /// An FPDU around `ulpdu`: length, ULPDU, padding to 4 octets, CRC (or zeros).
    fn frame(&self, ulpdu: &[u8]) -> Vec<u8> {
        let mut f = Vec::with_capacity(ulpdu.len() + 9);
        f.extend_from_slice(&u16::try_from(ulpdu.len()).expect("short").to_be_bytes());
        f.extend_from_slice(ulpdu);
        while f.len() % 4 != 0 {
            f.push(0);
        }
        let crc = if self.crc { crc32c(&f) } else { 0 };
        f.extend_from_slice(&crc.to_le_bytes());
        f
    }

    /// Reads one FPDU (no markers); checks its padding and CRC field; returns it whole.
    fn recv_fpdu(&mut self) -> Vec<u8> {
        let head = self.recv_exact(2);
        let len = usize::from(be16(&head));
        let padded = (2 + len).next_multiple_of(4);
        let rest = self.recv_exact(padded - 2 + 4);
        let fpdu = [head, rest].concat();
        // Shown when a test fails (and with --nocapture): the octets under judgement.
        eprintln!("received FPDU: {}", to_hex(&fpdu));
        assert!(
            fpdu[2 + len..padded].iter().all(|&b| b == 0),
            "padding not zero"
        );
        let field = u32::from_le_bytes(fpdu[padded..].try_into().expect("4"));
        let want = if self.crc { crc32c(&fpdu[..padded]) } else { 0 };
        assert_eq!(field, want, "CRC field of {fpdu:02x?}");
        fpdu
    }
}

/// A Send (untagged, last, QN 0) carrying `payload`, the way siw builds one.
fn send_ulpdu(msn: u32, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0x41, 0x43]; // DDP T=0 L=1 DV=1; RDMAP RV=1 opcode 3 (Send)
    u.extend_from_slice(&0u32.to_be_bytes()); // no Invalidate STag
    u.extend_from_slice(&0u32.to_be_bytes()); // QN 0
    u.extend_from_slice(&msn.to_be_bytes());
    u.extend_from_slice(&0u32.to_be_bytes()); // MO 0
    u.extend_from_slice(payload);
    u
}

/// A tagged, last segment: RDMA Write (opcode 0) or Read Response (opcode 2).
fn tagged_ulpdu(opcode: u8, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0xc1, 0x40 | opcode]; // DDP T=1 L=1 DV=1; RDMAP RV=1
    u.extend_from_slice(&stag.to_be_bytes());
    u.extend_from_slice(&to.to_be_bytes());
    u.extend_from_slice(payload);
    u
}

/// rping's start buffer for ping 0 at `len` octets (26 or 32 here): the text and its NUL.
fn ping0_text(len: usize) -> Vec<u8> {
    let mut t = b"rdma-ping-0: ABCDEFGHIJKLMNOPQR"[..len - 1].to_vec();
    t.push(0);
    t
}

/// What the recorded first Send advertises.
struct Advert {
    addr: u64,
    stag: u32,
    len: u32,
}

/// A recorded startup: siw's Request, the Reply our server must send (both after the
/// key, in hex), and in peer-to-peer mode siw's RTR FPDU with what our server must answer
/// it with, if anything (a Read RTR gets a zero-length Read Response).
struct Startup<'a> {
    request: &'a str,
    reply: &'a str,
    rtr: Option<(&'a str, Option<&'a str>)>,
    /// How our server's `-d` line describes the Request.
    described: &'a str,
}

/// rping over siw at revision 2, enhanced, IRD/ORD 1/1, no CRC asked for; our Reply's
/// first two octets are `reply_flags`.
fn rping_startup(reply_flags: &str) -> (String, String) {
    (
        RPING_REQUEST[33..].to_string(),
        format!("{reply_flags} 0004 0001 0001"),
    )
}

/// Runs one rping client's whole session by hand against a server started with
/// `server_args`, replaying the recorded startup and first FPDU.
fn replay(server_args: &[&str], startup: &Startup<'_>, first_fpdu: &str, crc: bool, start: Advert) {
    const REQUEST_KEY: &str = "4d504120494420526571204672616d65";
    const REPLY_KEY: &str = "4d504120494420526570204672616d65";
    let server = start_server(server_args);
    let mut raw = Raw::connect(server.addr);

    // 1. The MPA Request, as siw sent it.
    raw.send_raw(&hex(&format!("{REQUEST_KEY} {}", startup.request)));
    // 2. Our Reply, octet for octet: the Reply key, the revision and flags (C as our
    //    policy says), PD_Length, at revision 2 the IRD/ORD words (rping's 1/1, and no
    //    more than our own), no private data.
    let want = hex(&format!("{REPLY_KEY} {}", startup.reply));
    let reply = raw.recv_exact(want.len());
    eprintln!("server sent MPA Reply: {}", to_hex(&reply));
    assert_eq!(reply, want, "MPA Reply");
    raw.crc = crc;

    // 2a. Peer-to-peer mode: siw's RTR, and our answer to it.
    if let Some((rtr, answer)) = startup.rtr {
        raw.send_raw(&hex(rtr));
        if let Some(answer) = answer {
            assert_eq!(raw.recv_fpdu(), hex(answer), "answer to the RTR");
        }
    }

    // 3. rping's first FPDU, exactly as recorded.
    let first = hex(first_fpdu);
    if crc {
        // The recorded CRC is siw's own; our CRC arithmetic must agree with it.
        let field = u32::from_le_bytes(first[36..40].try_into().expect("4"));
        assert_eq!(crc32c(&first[..36]), field, "siw's recorded CRC");
    }
    assert_eq!(first, raw.frame(&send_ulpdu(1, &first[20..36])));
    raw.send_raw(&first);

    // 4. Our server must RDMA-Read exactly what was advertised.
    let rr = raw.recv_fpdu();
    assert_eq!(be16(&rr), 46, "Read Request ULPDU_Length: {rr:02x?}");
    assert_eq!(rr[2], 0x41, "DDP control: untagged, last, DV 1");
    assert_eq!(rr[3], 0x41, "RDMAP control: RV 1, opcode 1 (Read Request)");
    assert_eq!(be32(&rr[4..]), 0, "reserved");
    assert_eq!(be32(&rr[8..]), 1, "QN 1 (Read Requests)");
    assert_eq!(be32(&rr[12..]), 1, "MSN 1 (the first Read Request)");
    assert_eq!(be32(&rr[16..]), 0, "MO 0");
    let sink_stag = be32(&rr[20..]);
    let sink_to = be64(&rr[24..]);
    assert_eq!(be32(&rr[32..]), start.len, "RDMA Read Message Size");
    assert_eq!(be32(&rr[36..]), start.stag, "Data Source STag");
    assert_eq!(be64(&rr[40..]), start.addr, "Data Source Tagged Offset");

    // 5. The Read Response, as siw's RNIC role would send it: rping's ping 0 text.
    let text = ping0_text(start.len as usize);
    let response = raw.frame(&tagged_ulpdu(2, sink_stag, sink_to, &text));
    raw.send_raw(&response);

    // 6. "go": our server's first Send, 16 octets (zeros, as rping's server sends).
    let go = raw.recv_fpdu();
    assert_eq!(go, raw.frame(&send_ulpdu(1, &[0; 16])), "first \"go\"");

    // 7. The client's sink advertisement (a second Send, MSN 2), in rping's layout.
    let (sink_addr, sink_key) = (start.addr + 0x1000, start.stag.wrapping_add(0x100));
    let mut info = Vec::new();
    info.extend_from_slice(&sink_addr.to_be_bytes());
    info.extend_from_slice(&sink_key.to_be_bytes());
    info.extend_from_slice(&start.len.to_be_bytes());
    let second = raw.frame(&send_ulpdu(2, &info));
    raw.send_raw(&second);

    // 8. The RDMA Write back: tagged to the advertised sink, strlen + 1 octets of the text.
    let write = raw.recv_fpdu();
    assert_eq!(
        write,
        raw.frame(&tagged_ulpdu(0, sink_key, sink_addr, &text)),
        "RDMA Write of the ping data"
    );

    // 9. The second "go" (MSN 2).
    let go = raw.recv_fpdu();
    assert_eq!(go, raw.frame(&send_ulpdu(2, &[0; 16])), "second \"go\"");

    // 10. rping disconnects; our server closes its side and exits successfully.
    raw.stream.shutdown(Shutdown::Write).expect("shutdown");
    let mut rest = Vec::new();
    raw.stream.read_to_end(&mut rest).expect("read to the end");
    assert!(rest.is_empty(), "octets after the last \"go\": {rest:02x?}");
    let common::Output {
        status,
        stdout,
        stderr,
    } = server.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "server ping data: {}\n",
            String::from_utf8_lossy(&text[..text.len() - 1])
        ),
        "{stderr}"
    );
    assert!(stderr.contains("disconnected after 1 ping"), "{stderr}");
    assert!(
        stderr.contains(&format!("MPA Request: {}", startup.described)),
        "{stderr}"
    );
}

/// How our server describes rping's Request.
const RPING_DESCRIBED: &str = "revision 2, C=0, M=0, IRD/ORD 1/1, 0 octets";

#[test]
fn real_rping_client_without_crc() {
    // A server that does not ask for CRC answers rping exactly as siw would:
    // `1002 0004 0001 0001`, and the recorded CRC-less FPDU follows.
    let (request, reply) = rping_startup("1002");
    replay(
        &["--crc", "off"],
        &Startup {
            request: &request,
            reply: &reply,
            rtr: None,
            described: RPING_DESCRIBED,
        },
        RPING_SEND_NO_CRC,
        false,
        Advert {
            addr: 0x0000_5637_f5a0_d530,
            stag: 0x3fce_2900,
            len: 0x20,
        },
    );
}

#[test]
fn real_rping_client_with_crc_by_default() {
    // Our default asks for CRC (C=1 in the Reply: `5002`), which siw honours; the recorded
    // FPDU siw sent after such a Reply carries its CRC32c.
    let (request, reply) = rping_startup("5002");
    replay(
        &[],
        &Startup {
            request: &request,
            reply: &reply,
            rtr: None,
            described: RPING_DESCRIBED,
        },
        RPING_SEND_CRC,
        true,
        Advert {
            addr: 0x0000_562e_4da7_b530,
            stag: 0xe54e_5800,
            len: 0x20,
        },
    );
}

/// siw built with `peer_to_peer = true` asks for peer-to-peer mode offering both RTR types
/// (`1002 0004 8001 c001`: IRD 1 with the P2P bit, ORD 1 with the Write and Read RTR bits;
/// recorded in the rig, docs/interop.md). Our server picks the Write RTR (`8001 8001`);
/// siw's RTR is a zero-length RDMA Write to STag 1 at offset 0, which our server takes
/// without a word, and rping's session follows.
#[test]
fn siw_peer_to_peer_client_with_a_write_rtr() {
    replay(
        &["--crc", "off"],
        &Startup {
            request: "1002 0004 8001 c001",
            reply: "1002 0004 8001 8001",
            rtr: Some(("000e c140 00000001 0000000000000000 00000000", None)),
            described: "revision 2, C=0, M=0, IRD/ORD 1/1, peer-to-peer, 0 octets",
        },
        "0022 4143 00000000 00000000 00000001 00000000 \
         00005564bb5ee530 4d2a9700 0000001a 00000000",
        false,
        Advert {
            addr: 0x0000_5564_bb5e_e530,
            stag: 0x4d2a_9700,
            len: 26,
        },
    );
}

/// The same with a server that takes only the Read RTR (`--p2p read`, Reply `8001 4001`):
/// siw's RTR is a zero-length RDMA Read Request (QN 1, MSN 1, sink STag 0 at 0, source
/// STag 1 at 0), and our server answers with a zero-length Read Response to STag 0 at 0,
/// as recorded.
#[test]
fn siw_peer_to_peer_client_with_a_read_rtr() {
    replay(
        &["--crc", "off", "--p2p", "read"],
        &Startup {
            request: "1002 0004 8001 c001",
            reply: "1002 0004 8001 4001",
            rtr: Some((
                "002e 4141 00000000 00000001 00000001 00000000 \
                 00000000 0000000000000000 00000000 00000001 0000000000000000 00000000",
                Some("000e c142 00000000 0000000000000000 00000000"),
            )),
            described: "revision 2, C=0, M=0, IRD/ORD 1/1, peer-to-peer, 0 octets",
        },
        "0022 4143 00000000 00000000 00000001 00000000 \
         00005580528ec530 22ca9900 0000001a 00000000",
        false,
        Advert {
            addr: 0x0000_5580_528e_c530,
            stag: 0x22ca_9900,
            len: 26,
        },
    );
}

/// siw built with `mpa_version = 1` sends a revision 1 Request without enhanced data
/// (`0001 0000`); our server answers at revision 1 (`0001 0000`) and settles IRD/ORD from
/// its own configuration, so its RDMA Read goes out.
#[test]
fn siw_revision_1_client() {
    replay(
        &["--crc", "off"],
        &Startup {
            request: "0001 0000",
            reply: "0001 0000",
            rtr: None,
            described: "revision 1, C=0, M=0, no enhanced data, 0 octets",
        },
        "0022 4143 00000000 00000000 00000001 00000000 \
         000055ddd954e530 fa731900 0000001a 00000000",
        false,
        Advert {
            addr: 0x0000_55dd_d954_e530,
            stag: 0xfa73_1900,
            len: 26,
        },
    );
}

#[test]
fn bogus_sends_are_refused_like_rping() {
    // rping's server checks that every receive is exactly 16 octets.
    for (payload_len, said) in [(15usize, "size 15"), (17, "size over 16")] {
        let server = start_server(&["--crc", "off"]);
        let mut raw = Raw::connect(server.addr);
        raw.send_raw(&hex(RPING_REQUEST));
        assert_eq!(raw.recv_exact(24)[16..], hex("1002 0004 0001 0001")[..]);
        let f = raw.frame(&send_ulpdu(1, &vec![0x5a; payload_len]));
        raw.send_raw(&f);
        // The server gives up: whatever it sends (a Terminate for the overlong Send), it
        // closes the connection and exits with the error.
        let mut rest = Vec::new();
        let _ = raw.stream.read_to_end(&mut rest);
        drop(raw);
        let common::Output { status, stderr, .. } = server.finish();
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("Received bogus data, {said}")),
            "{payload_len}: {stderr}"
        );
    }
}

/// An RDMA Read Request (untagged, last, QN 1), the way an rping server's RNIC sends one.
fn read_request_ulpdu(msn: u32, sink: (u32, u64), len: u32, source: (u32, u64)) -> Vec<u8> {
    let mut u = vec![0x41, 0x41]; // DDP T=0 L=1 DV=1; RDMAP RV=1 opcode 1 (Read Request)
    u.extend_from_slice(&0u32.to_be_bytes());
    u.extend_from_slice(&1u32.to_be_bytes()); // QN 1
    u.extend_from_slice(&msn.to_be_bytes());
    u.extend_from_slice(&0u32.to_be_bytes()); // MO 0
    u.extend_from_slice(&sink.0.to_be_bytes());
    u.extend_from_slice(&sink.1.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&source.0.to_be_bytes());
    u.extend_from_slice(&source.1.to_be_bytes());
    u
}

/// Checks that `fpdu` is a Send (QN 0, MSN `msn`) of a 16-octet advertisement of `len`
/// octets, and returns the advertised STag and address.
fn advertisement(fpdu: &[u8], msn: u32, len: u32) -> (u32, u64) {
    assert_eq!(be16(fpdu), 34, "a 16-octet Send: {fpdu:02x?}");
    assert_eq!(&fpdu[2..4], &[0x41, 0x43], "untagged last Send");
    assert_eq!(be32(&fpdu[4..]), 0, "no Invalidate STag");
    assert_eq!(be32(&fpdu[8..]), 0, "QN 0");
    assert_eq!(be32(&fpdu[12..]), msn, "MSN");
    assert_eq!(be32(&fpdu[16..]), 0, "MO 0");
    assert_eq!(be32(&fpdu[32..]), len, "advertised length");
    (be32(&fpdu[28..]), be64(&fpdu[20..]))
}

/// Starts our client (`iwarp ping --connect` with `args`) against a hand-built server and
/// returns it with the server's end of the accepted connection.
fn client_of_a_raw_server(args: &[&str]) -> (std::process::Child, Raw) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let mut all = vec!["ping", "--connect", &addr];
    all.extend_from_slice(args);
    let client = common::spawn(&all);
    let (stream, _) = listener.accept().expect("accept");
    stream.set_read_timeout(Some(LIMIT)).expect("timeout");
    (client, Raw { stream, crc: false })
}

#[test]
fn our_client_speaks_rping_to_an_rping_server() {
    // The other role: a hand-built rping server (siw's answers) against our client. With
    // --crc off our client's MPA Request must be rping's own, octet for octet.
    let (client, mut raw) =
        client_of_a_raw_server(&["-C", "2", "-S", "32", "-V", "-v", "--crc", "off"]);

    let request = raw.recv_exact(24);
    eprintln!("client sent MPA Request: {}", to_hex(&request));
    assert_eq!(request, hex(RPING_REQUEST), "our MPA Request is rping's");
    // siw's Reply when rping accepts: revision 2, enhanced, no CRC, IRD/ORD 16/16 (above
    // the 1/1 asked for, which an rping initiator tolerates, and so must we).
    raw.send_raw(&hex("4d504120494420526570204672616d65 1002 0004 0010 0010"));

    let (sink_stag, sink_to) = (0x1234_5600u32, 0x0000_55aa_0000_1000u64);
    for ping in 0..2u32 {
        let text = {
            let start = b'A' + ping as u8;
            let mut t = format!("rdma-ping-{ping}: ").into_bytes();
            while t.len() < 31 {
                t.push(start + (t.len() - 13) as u8);
            }
            t.push(0);
            t
        };
        // The start advertisement; RDMA-Read it; the client must answer with its text.
        let start = advertisement(&raw.recv_fpdu(), 2 * ping + 1, 32);
        raw.send_raw(&raw.frame(&read_request_ulpdu(
            ping + 1,
            (sink_stag, sink_to),
            32,
            start,
        )));
        let response = raw.recv_fpdu();
        assert_eq!(
            response,
            raw.frame(&tagged_ulpdu(2, sink_stag, sink_to, &text)),
            "Read Response for ping {ping}"
        );
        raw.send_raw(&raw.frame(&send_ulpdu(2 * ping + 1, &[0; 16])));
        // The sink advertisement; RDMA-Write the text into it; "go".
        let sink = advertisement(&raw.recv_fpdu(), 2 * ping + 2, 32);
        raw.send_raw(&raw.frame(&tagged_ulpdu(0, sink.0, sink.1, &text)));
        raw.send_raw(&raw.frame(&send_ulpdu(2 * ping + 2, &[0; 16])));
    }
    // After -C 2 the client disconnects: its FIN, nothing else.
    let mut rest = Vec::new();
    raw.stream.read_to_end(&mut rest).expect("read to the end");
    assert!(rest.is_empty(), "octets after the last ping: {rest:02x?}");
    drop(raw);

    let common::Output {
        status,
        stdout,
        stderr,
    } = common::output_bounded(client, LIMIT, "iwarp ping --connect");
    assert!(status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQR");
    assert_eq!(lines[1], "ping data: rdma-ping-1: BCDEFGHIJKLMNOPQRS");
    assert!(stdout.contains("2 pings of 32 bytes"), "{stdout}");
}

/// siw refuses markers: to a Request asking for them it answers with a Reply whose R bit is
/// set and M cleared, C echoed, IRD/ORD 0 (siw-observed.md, `probe_mpa.py --all`: `d002 0004
/// 00100010` got `7002 0004 00000000`), then closes. Our client says so in one line and
/// exits with an error.
#[test]
fn siws_refusal_of_markers_is_one_clear_line() {
    let (client, mut raw) = client_of_a_raw_server(&["-C", "1", "--markers"]);
    let addr = raw.stream.local_addr().expect("addr").to_string();
    let request = raw.recv_exact(24);
    // Revision 2, M, C and the enhanced flag, IRD/ORD 1/1.
    assert_eq!(
        request,
        hex("4d504120494420526571204672616d65 d002 0004 0001 0001"),
        "{}",
        to_hex(&request)
    );
    raw.send_raw(&hex("4d504120494420526570204672616d65 7002 0004 0000 0000"));
    raw.stream.shutdown(Shutdown::Both).expect("close");
    drop(raw);
    let out = common::output_bounded(client, LIMIT, "iwarp ping --markers");
    assert!(!out.status.success());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert_eq!(
        lines[0],
        format!(
            "iwarp ping: error: {addr} rejected the connection (we asked for MPA markers, which \
             it does not send; Linux siw supports none: leave out --markers)"
        )
    );
}
