//! Conformance rules a user or a peer can see, through the public API and
//! over real loopback TCP: the IRD/ORD an initiator settles on (RFC 6581),
//! the Terminate an initiator owes after a valid Reply, reads on a stream
//! whose ORD is 0, Terminates out of layout, the stream a rejected
//! initiator gets back (RFC 5044 §7.1.2 rule 3), and verify-before-place
//! (RFC 5044 §6), and the hold after the Reply (for Linux siw's accept
//! race) changing no octet. Peers that must say something unusual are
//! plain TCP sockets speaking hand-built octets.

mod common;

use std::time::Duration;

use common::*;
use iwarp::proto::mpa::startup::{
    EnhancedData, FrameKind, IrdOrdNegotiation, RtrTypes, StartupError, StartupFrameRepr,
};
use iwarp::proto::rdmap::{PostError, TerminateMessage};
use iwarp::{
    connect, CompletionStatus, Config, ConnectionError, CrcPolicy, Error, IrdOrd, Listener,
    Placement, QpOptions, QpState, Revision,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A revision 2 Reply with CRC, no markers, and enhanced data `ird`/`ord`.
fn enhanced_reply(ird: u16, ord: u16) -> Vec<u8> {
    reply_with(EnhancedData {
        ird,
        ord,
        ..EnhancedData::default()
    })
}

/// A revision 2 Reply with CRC, no markers, and `enhanced` data.
fn reply_with(enhanced: EnhancedData) -> Vec<u8> {
    StartupFrameRepr {
        kind: FrameKind::Reply,
        markers: false,
        crc: true,
        rejected: false,
        revision: Revision::Rev2,
        enhanced: Some(enhanced),
        private_data: b"",
    }
    .to_bytes()
    .expect("valid Reply")
}

/// An RDMA Read Request (untagged, last, QN 1) with `msn`, for `size`
/// octets of STag `source` at `source_to`, into sink STag 0x77 at
/// `msn << 16`.
fn read_request(msn: u32, size: u32, source: u32, source_to: u64) -> Vec<u8> {
    let mut u = hex("4141 00000000 00000001");
    u.extend(msn.to_be_bytes());
    u.extend(0u32.to_be_bytes());
    u.extend(0x77u32.to_be_bytes());
    u.extend((u64::from(msn) << 16).to_be_bytes());
    u.extend(size.to_be_bytes());
    u.extend(source.to_be_bytes());
    u.extend(source_to.to_be_bytes());
    u
}

/// RFC 6581 with relaxed negotiation (the default): a responder whose ORD
/// is above our initiator's IRD may have that many Reads outstanding, so
/// our IRD rises to it and every one of them is answered, none refused
/// with a Terminate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relaxed_ird_serves_every_read_the_responder_may_issue() {
    watch_panics();
    const READS: u32 = 8;
    let pd = new_pd();
    let source = region_with(&pd, pattern(4096, 11));
    let key = source.remote_key();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let (mut raw, _) = RawPeer::respond(&tcp, &enhanced_reply(16, READS as u16)).await;
        let mut burst = Vec::new();
        for msn in 1..=READS {
            let to = key.addr + u64::from(msn - 1) * 512;
            burst.extend(raw.frame(&read_request(msn, 512, key.stag.0, to)));
        }
        raw.stream.write_all(&burst).await.unwrap();
        let mut responses = Vec::new();
        for _ in 0..READS {
            responses.push(raw.next_ulpdu().await.expect("a Read Response"));
        }
        // Kept open until the checks are done.
        (responses, raw)
    });
    // Our IRD 2 is below the responder's ORD 8.
    let cfg = Config::default().ird_ord(2, 16);
    let qp = within("connect", connect(addr, &cfg, QpOptions::new(&pd), b""))
        .await
        .expect("connect");
    assert_eq!(
        qp.info().mpa().and_then(|m| m.ird_ord).map(|v| v.ird),
        Some(READS as u16)
    );
    let (responses, _raw) = within("peer", peer).await.unwrap();
    let data = source.to_vec();
    for (i, r) in responses.iter().enumerate() {
        let msn = i as u64 + 1;
        // Tagged, last, Read Response, to the sink of request `msn`.
        let mut head = hex("c142 00000077");
        head.extend((msn << 16).to_be_bytes());
        assert_eq!(r[..14], head[..], "response {msn}");
        let at = (msn as usize - 1) * 512;
        assert_same("read data", &r[14..], &data[at..at + 512]);
    }
    assert!(qp.error().is_none(), "{:?}", qp.error());
    assert_no_panics();
}

/// RFC 6581: our initiator, failing after a valid Reply (strict IRD
/// negotiation against a larger responder ORD; a Reply selecting only an
/// RTR type it did not offer), sends the responder a Terminate with LLP
/// code 0x06 or 0x07 as its only FPDU, then closes; `connect` reports the
/// startup error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initiator_terminates_after_a_valid_reply_it_cannot_use() {
    watch_panics();
    let strict = {
        let mut c = Config::default().ird_ord(2, 16);
        c.startup.ird_ord_negotiation = IrdOrdNegotiation::Strict;
        c
    };
    let p2p = Config::default().peer_to_peer(RtrTypes::WRITE_READ);
    let send_only = EnhancedData {
        ird: 16,
        ord: 16,
        peer_to_peer: true,
        rtr: RtrTypes {
            send: true,
            ..RtrTypes::NONE
        },
    };
    for (cfg, reply, code) in [
        (strict, enhanced_reply(16, 16), 0x06),
        (p2p, reply_with(send_only), 0x07),
    ] {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let peer = tokio::spawn(async move {
            let (mut raw, _) = RawPeer::respond(&tcp, &reply).await;
            let (wire, clean) = raw.read_to_end().await;
            (wire, clean, raw.framing)
        });
        let r = within(
            "connect",
            connect(addr, &cfg, QpOptions::new(&new_pd()), b""),
        )
        .await;
        match r {
            Err(Error::Startup(e)) => {
                assert_eq!(e.llp_error_code().code(), code, "{e:?}");
                assert!(e.terminate_queued());
                assert!(
                    matches!(
                        e,
                        StartupError::InsufficientIrd { .. } | StartupError::NoMatchingRtr { .. }
                    ),
                    "{e:?}"
                );
            }
            other => panic!("connect: {other:?}"),
        }
        let (wire, clean, framing) = within("peer", peer).await.unwrap();
        let mut ulpdu = hex("4147 00000000 00000002 00000001 00000000");
        ulpdu.extend([0x20, code, 0, 0]);
        assert_eq!(wire, first_fpdu(framing.mirrored(), &ulpdu));
        assert!(clean, "closed, not reset");
    }
    assert_no_panics();
}

/// An ORD of 0 is 0, not 1: on a connection where the peer serves no
/// Reads (our initiator offered IRD 0; the responder's application
/// accepted with IRD 0, as `ib_write_bw` does), a Read fails where it is
/// posted, with `PostError::ZeroOrd`, and nothing goes out for the peer
/// to refuse: the connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_fail_at_the_post_when_the_ord_is_zero() {
    watch_panics();
    let (c, s) = (Endpoint::new(256, 1), Endpoint::new(256, 2));
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let server_opts = s.options();
    let accept = async move {
        let req = listener.accept().await.unwrap();
        req.accept_with(server_opts, b"", Some(IrdOrd::new(0, 16)))
            .await
            .unwrap()
    };
    let client_cfg = Config::default().ird_ord(0, 16);
    let (client, server) = within("setup", async {
        tokio::join!(connect(addr, &client_cfg, c.options(), b""), accept)
    })
    .await;
    let client = client.unwrap();
    assert_eq!(
        client.info().mpa().and_then(|m| m.ird_ord),
        Some(IrdOrd::new(0, 0))
    );
    assert_eq!(
        server.info().mpa().and_then(|m| m.ird_ord),
        Some(IrdOrd::new(0, 0))
    );
    for (qp, own, peer) in [(&client, &c, &s), (&server, &s, &c)] {
        let r = qp.rdma_read(9, own.sink.sge(..).unwrap(), peer.out.remote_key());
        assert!(matches!(r, Err(Error::Post(PostError::ZeroOrd))), "{r:?}");
        let r = qp
            .read(own.sink.sge(..).unwrap(), peer.out.remote_key())
            .await;
        assert!(matches!(r, Err(Error::Post(PostError::ZeroOrd))), "{r:?}");
    }
    // Nothing went out: the connection still moves data.
    within("Send", client.send(c.out.sge(..).unwrap()))
        .await
        .unwrap();
    assert_recv(&next_recv(&server).await, WR_INBOX, 256);
    assert!(client.send_cq().is_empty());
    assert!(client.error().is_none() && server.error().is_none());
    assert_no_panics();
}

/// A Terminate that breaks RFC 5040 §4.8's layout (the wrong MSN or
/// queue, MO not 0, L clear, a payload longer than the layout) still ends
/// the stream: our end reports the peer's message, flushes its work and
/// closes without a Terminate of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminate_out_of_layout_is_not_answered() {
    watch_panics();
    // RDMAP, remote operation error, unspecified; no header copies.
    let payload = hex("02ff 0000");
    let long: Vec<u8> = payload.iter().copied().chain([0xab; 100]).collect();
    let cases = [
        (
            "MSN 5",
            "4147 00000000 00000002 00000005 00000000",
            &payload,
        ),
        (
            "queue 0",
            "4147 00000000 00000000 00000001 00000000",
            &payload,
        ),
        ("MO 8", "4147 00000000 00000002 00000001 00000008", &payload),
        (
            "L clear",
            "0147 00000000 00000002 00000001 00000000",
            &payload,
        ),
        ("long", "4147 00000000 00000002 00000001 00000000", &long),
    ];
    for (what, header, payload) in cases {
        let pd = new_pd();
        let inbox = region(&pd, 64);
        let opts = QpOptions::new(&pd).post_recv(1, inbox.sge(..).unwrap());
        let (mut raw, qp) = raw_initiator(Config::default(), true, opts).await;
        let mut t = hex(header);
        t.extend(payload.iter());
        raw.send_ulpdu(&t).await;
        let (got, _) = raw.read_to_end().await;
        assert_eq!(got, b"", "{what}: no Terminate answers a Terminate");
        within("our end closed", qp.closed()).await;
        let c = next_recv(&qp).await;
        assert_eq!(c.status, CompletionStatus::FlushError, "{what}");
        assert_eq!(qp.state(), QpState::Error, "{what}");
        assert_eq!(
            qp.error(),
            Some(ConnectionError::TerminateReceived(
                TerminateMessage::parse_bytes(&payload[..]).unwrap()
            )),
            "{what}"
        );
    }
    assert_no_panics();
}

/// RFC 5044 §7.1.2 rule 3: a Reply with R set ends MPA and leaves the TCP
/// connection open. Our initiator hands it back with the rejection, with
/// the octets that already followed the Reply, so that the application
/// can go on in streaming mode (or drop it to close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//= rfc5044#7.1.2
//= type=test
//# If the MPA Reply Frame is properly formatted but is the Private Data is not acceptable, or
//# if the Rejected Connection bit is set to '1', the implementation MUST exit MPA, leaving the
//# TCP connection open.
async fn a_rejected_initiator_gets_its_stream_back() {
    watch_panics();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let reply = StartupFrameRepr {
        kind: FrameKind::Reply,
        markers: false,
        crc: true,
        rejected: true,
        revision: Revision::Rev2,
        enhanced: Some(EnhancedData::REJECT),
        private_data: b"not today",
    }
    .to_bytes()
    .unwrap();
    const AFTER: &[u8] = b"streaming mode goes on";
    let peer = tokio::spawn(async move {
        let (mut s, _) = tcp.accept().await.unwrap();
        read_startup_frame(&mut s).await;
        // The Reply and what follows it in one write.
        let mut out = reply;
        out.extend_from_slice(AFTER);
        s.write_all(&out).await.unwrap();
        let mut answer = [0u8; 2];
        within("the answer", s.read_exact(&mut answer))
            .await
            .unwrap();
        s.shutdown().await.unwrap();
        answer
    });
    let r = within(
        "connect",
        connect(addr, &Config::default(), QpOptions::new(&new_pd()), b""),
    )
    .await;
    let Err(Error::Rejected {
        private_data,
        mut stream,
        after_reply,
    }) = r
    else {
        panic!("connect: {r:?}");
    };
    assert_eq!(private_data, b"not today");
    let mut got = after_reply;
    while got.len() < AFTER.len() {
        let mut buf = [0u8; 64];
        let n = within("streaming data", stream.read(&mut buf))
            .await
            .unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, AFTER);
    stream.write_all(b"ok").await.unwrap();
    assert_eq!(within("peer", peer).await.unwrap(), *b"ok");
    assert_eq!(drain_to_end(&mut stream).await, b"");
    assert_no_panics();
}

/// RFC 5044 §6: "An MPA receiver MUST first verify the FPDU before passing
/// the ULPDU to DDP." With `Placement::Verified`, the default, an RDMA
/// Write whose FPDU fails its CRC places nothing; the LLP Terminate goes
/// out and the connection ends. With `Placement::Direct` (the documented
/// deviation) the same FPDU's payload lands in the region before the CRC
/// is checked, and is never delivered: the Write leaves no trace but the
/// octets.
//= rfc5044#6
//= type=test
//# An MPA receiver MUST first verify the FPDU before passing the ULPDU
//# to DDP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_fpdu_is_placed_only_without_verification() {
    watch_panics();
    assert_eq!(Config::default().placement, Placement::Verified);
    for placement in [Placement::Verified, Placement::Direct] {
        let pd = new_pd();
        let inbox = region(&pd, 64);
        let target = region(&pd, 4096);
        let opts = QpOptions::new(&pd).post_recv(1, inbox.sge(..).unwrap());
        let cfg = Config::default().placement(placement);
        let (mut raw, qp) = raw_initiator(cfg, true, opts).await;
        // A valid first FPDU (a zero-length Send), so that our end answers
        // a CRC error with a Terminate (RFC 5044 §7.1.2 rule 4).
        raw.send_ulpdu(&hex("4143 00000000 00000000 00000001 00000000"))
            .await;
        assert_recv(&next_recv(&qp).await, 1, 0);
        let key = target.remote_key();
        let mut write = hex("c140");
        write.extend(key.stag.0.to_be_bytes());
        write.extend(key.addr.to_be_bytes());
        write.extend([0xd5; 3000]);
        raw.send_ulpdu_bad_crc(&write).await;
        let (wire, _) = raw.read_to_end().await;
        let mut ulpdu = hex("4147 00000000 00000002 00000001 00000000");
        ulpdu.extend(hex("2002 0000"));
        assert_eq!(
            wire,
            first_fpdu(raw.framing.mirrored(), &ulpdu),
            "{placement:?}"
        );
        within("our end closed", qp.closed()).await;
        assert!(
            matches!(qp.error(), Some(ConnectionError::Framing(_))),
            "{:?}",
            qp.error()
        );
        let placed = target.to_vec().iter().filter(|&&b| b == 0xd5).count();
        if placement == Placement::Verified {
            assert_eq!(placed, 0, "placed before the CRC check");
        } else {
            assert_eq!(placed, 3000, "the deviation is gone?");
        }
        assert_eq!(qp.stats().one_sided.writes_received, 0, "{placement:?}");
    }
    assert_no_panics();
}

/// Verify-before-place through the whole API: Sends, RDMA Writes and
/// Reads both ways, of messages spanning many FPDUs, with and without
/// markers and CRC, with one end or both verifying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verified_placement_moves_data_like_direct_placement() {
    watch_panics();
    let verified = Config::default().placement(Placement::Verified);
    let cases = [
        (verified.clone(), verified.clone()),
        (
            verified.clone().markers_on_receive(true),
            verified.clone().markers_on_receive(true),
        ),
        (
            verified.clone().crc(CrcPolicy::Off),
            verified.clone().crc(CrcPolicy::Off),
        ),
        (verified.clone(), Config::default().markers_on_receive(true)),
    ];
    for (i, (client_cfg, server_cfg)) in cases.into_iter().enumerate() {
        let (c, s) = (
            Endpoint::new(200_000, 2 * i as u64),
            Endpoint::new(200_000, 2 * i as u64 + 1),
        );
        let (client, server) = pair_with(&client_cfg, c.options(), server_cfg, s.options()).await;
        exercise(&client, &c, &server, &s).await;
        assert!(
            client.error().is_none() && server.error().is_none(),
            "case {i}"
        );
        // Every payload octet went through the staged, verified path.
        assert_eq!(client.stats().octets_placed_directly, 0, "case {i}");
    }
    assert_no_panics();
}

/// The hold after an accepted Reply (`StartupConfig::hold_after_reply`,
/// for Linux siw's accept race) moves when the initiator's first FPDU
/// leaves, never what it sends: with and without it, a responder sees the
/// same octets, in plain and in peer-to-peer mode (whose RTR is held too).
/// When the octets leave is not asserted (no timing in tests); the
/// machine's own tests pin the hold down with explicit instants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hold_after_the_reply_changes_no_octet() {
    watch_panics();
    let p2p_reply = reply_with(EnhancedData {
        ird: 16,
        ord: 16,
        peer_to_peer: true,
        rtr: RtrTypes::only(iwarp::RtrType::Write),
    });
    for (p2p, reply) in [(false, enhanced_reply(16, 16)), (true, p2p_reply)] {
        let mut seen = Vec::new();
        for hold in [Duration::ZERO, Duration::from_millis(40)] {
            let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = tcp.local_addr().unwrap();
            let reply = reply.clone();
            let peer = tokio::spawn(async move {
                let (mut raw, request) = RawPeer::respond(&tcp, &reply).await;
                let (wire, clean) = raw.read_to_end().await;
                (request, wire, clean)
            });
            let mut config = Config::default();
            config.startup.hold_after_reply = hold;
            if p2p {
                config = config.peer_to_peer(RtrTypes::only(iwarp::RtrType::Write));
            }
            let pd = new_pd();
            let message = region_with(&pd, b"the first message".to_vec());
            let qp = within("connect", connect(addr, &config, QpOptions::new(&pd), b""))
                .await
                .expect("connected");
            assert_eq!(qp.info().mpa().and_then(|m| m.rtr).is_some(), p2p);
            let done = within("the Send", qp.send(message.sge(..).unwrap()))
                .await
                .expect("sent");
            assert_eq!(done.status, CompletionStatus::Success);
            within("disconnect", qp.disconnect()).await.expect("closed");
            let (request, wire, clean) = within("the peer", peer).await.unwrap();
            assert!(clean, "hold {hold:?}");
            assert!(!wire.is_empty());
            seen.push((request, wire));
        }
        assert_eq!(seen[0], seen[1], "p2p {p2p}: the hold changed the octets");
    }
    assert_no_panics();
}
