//! Every startup configuration over loopback TCP: MPA revision 1 with CRC
//! on, off and asked for by one side only, markers required by either
//! side or both, revision 2 with and without enhanced data, IRD/ORD
//! negotiation, peer-to-peer mode with each RTR type, revision 0 with
//! large private data, mixed revisions, `siw`-like ends, and the legacy
//! immediate-start profile.
//!
//! Each checks what `QueuePair::info` reports on both ends (revision,
//! framing, IRD/ORD, RTR) and then moves data both ways with
//! verification: Sends, Writes and Reads of 70001 octets, so that
//! messages span several FPDUs, markers fall everywhere in them, and the
//! pad is not zero.

mod common;

use common::*;
use iwarp::proto::mpa::startup::StartupConfig;
use iwarp::{
    connect, Config, CrcPolicy, FramingParams, IrdOrd, Listener, QpOptions, Revision, RtrType,
    RtrTypes,
};

/// Octets each direction moves per operation: odd, so that the pad is
/// not zero, and larger than one FPDU.
const SIZE: usize = 70_001;

/// Connects `client_cfg` to `server_cfg` and exercises the pair; returns
/// the two `info()`s for the caller to check.
async fn run(
    client_cfg: Config,
    server_cfg: Config,
) -> (iwarp::ConnectionInfo, iwarp::ConnectionInfo) {
    let (c, s) = (Endpoint::new(SIZE, 31), Endpoint::new(SIZE, 32));
    let (client, server) = pair_with(&client_cfg, c.options(), server_cfg, s.options()).await;
    exercise(&client, &c, &server, &s).await;
    within("disconnect", client.disconnect()).await.unwrap();
    within("server closed", server.closed()).await;
    (client.info().clone(), server.info().clone())
}

/// CRC both ways or neither, no markers.
fn plain(crc: bool) -> FramingParams {
    FramingParams {
        crc,
        send_markers: false,
        receive_markers: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_1_with_crc() {
    let (c, s) = run(Config::with_revision(Revision::Rev1), Config::default()).await;
    for info in [&c, &s] {
        assert_eq!(info.mpa().map(|m| m.revision), Some(Revision::Rev1));
        assert_eq!(info.framing_params(), plain(true));
        assert_eq!(info.mpa().and_then(|m| m.ird_ord), None);
        assert_eq!(info.mpa().and_then(|m| m.rtr), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_1_without_crc() {
    let (c, s) = run(
        Config::with_revision(Revision::Rev1).crc(CrcPolicy::Off),
        Config::default().crc(CrcPolicy::Off),
    )
    .await;
    for info in [&c, &s] {
        assert_eq!(info.mpa().map(|m| m.revision), Some(Revision::Rev1));
        assert_eq!(info.framing_params(), plain(false));
    }
}

/// RFC 5044 §7.1.1: CRC is on for both directions when either end asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//= rfc5044#7.1.1
//= type=test
//# When this bit is '1' in either the MPA Request Frame or MPA Reply Frame, CRCs MUST be
//# generated and checked by both endpoints.
async fn crc_asked_for_by_one_side_is_used_both_ways() {
    let (c, s) = run(
        Config::with_revision(Revision::Rev1).crc(CrcPolicy::Off),
        Config::default(),
    )
    .await;
    assert_eq!(c.framing_params(), plain(true));
    assert_eq!(s.framing_params(), plain(true));
    let (c, s) = run(
        Config::with_revision(Revision::Rev1),
        Config::default().crc(CrcPolicy::Off),
    )
    .await;
    assert_eq!(c.framing_params(), plain(true));
    assert_eq!(s.framing_params(), plain(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//= rfc5044#7.1.1
//= type=test
//# When '1' Markers MUST be added as described in Section 4.3, MPA Markers.
async fn markers_required_by_the_initiator() {
    let (c, s) = run(
        Config::with_revision(Revision::Rev1).markers_on_receive(true),
        Config::default(),
    )
    .await;
    let want = FramingParams {
        crc: true,
        send_markers: false,
        receive_markers: true,
    };
    assert_eq!(c.framing_params(), want);
    assert_eq!(s.framing_params(), want.mirrored());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_required_by_the_responder() {
    let (c, s) = run(
        Config::default().crc(CrcPolicy::Off),
        Config::default()
            .crc(CrcPolicy::Off)
            .markers_on_receive(true),
    )
    .await;
    let want = FramingParams {
        crc: false,
        send_markers: true,
        receive_markers: false,
    };
    assert_eq!(c.framing_params(), want);
    assert_eq!(s.framing_params(), want.mirrored());
    assert_eq!(c.mpa().map(|m| m.revision), Some(Revision::Rev2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_required_by_both() {
    let (c, s) = run(
        Config::default().markers_on_receive(true),
        Config::default().markers_on_receive(true),
    )
    .await;
    let both = FramingParams {
        crc: true,
        send_markers: true,
        receive_markers: true,
    };
    assert_eq!(c.framing_params(), both);
    assert_eq!(s.framing_params(), both);
}

/// The default: revision 2 with enhanced data, IRD/ORD 16/16 each way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_2_enhanced_by_default() {
    let (c, s) = run(Config::default(), Config::default()).await;
    for info in [&c, &s] {
        assert_eq!(info.mpa().map(|m| m.revision), Some(Revision::Rev2));
        assert_eq!(info.framing_params(), plain(true));
        assert_eq!(
            info.mpa().and_then(|m| m.ird_ord),
            Some(IrdOrd::new(16, 16))
        );
        assert_eq!(info.mpa().and_then(|m| m.rtr), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_2_without_enhanced_data() {
    let mut cfg = Config::default();
    cfg.startup.enhanced = false;
    let (c, s) = run(cfg, Config::default()).await;
    for info in [&c, &s] {
        assert_eq!(info.mpa().map(|m| m.revision), Some(Revision::Rev2));
        assert_eq!(info.mpa().and_then(|m| m.ird_ord), None);
    }
}

/// RFC 6581: the responder takes the initiator's ORD as its IRD and the
/// initiator's IRD as its ORD, and may grant less; the initiator's ORD
/// then limits its Reads outstanding, which still all complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ird_and_ord_are_negotiated_and_obeyed() {
    let (c, s) = (Endpoint::new(SIZE, 33), Endpoint::new(SIZE, 34));
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let sopts = s.options();
    let accept = async move {
        let req = listener.accept().await.unwrap();
        assert_eq!(
            req.request().unwrap().ird_ord,
            Some(IrdOrd::new(4, 8)),
            "the initiator's 8/4 as the responder sees it"
        );
        req.accept_with(sopts, b"server", Some(IrdOrd::new(2, 8)))
            .await
            .unwrap()
    };
    let client_cfg = Config::default().ird_ord(8, 4);
    let (client, server) = within("setup", async {
        tokio::join!(connect(addr, &client_cfg, c.options(), b"client"), accept)
    })
    .await;
    let client = client.unwrap();
    assert_eq!(
        client.info().mpa().and_then(|m| m.ird_ord),
        Some(IrdOrd::new(8, 2))
    );
    assert_eq!(
        server.info().mpa().and_then(|m| m.ird_ord),
        Some(IrdOrd::new(2, 8))
    );
    // Ten Reads at once against an ORD of 2: queued, never refused.
    let chunk = SIZE / 10;
    for i in 0..10 {
        let at = i * chunk;
        let key = s.out.remote_key().slice(at as u64, chunk as u32).unwrap();
        client
            .rdma_read(i as u64, c.sink.sge(at..at + chunk).unwrap(), key)
            .unwrap();
    }
    for i in 0..10 {
        let done = next_send(&client).await;
        assert_eq!(done.wr_id, i);
        assert_eq!(done.status, iwarp::CompletionStatus::Success);
    }
    assert_same(
        "read",
        &c.sink.to_vec()[..10 * chunk],
        &s.out.to_vec()[..10 * chunk],
    );
    exercise(&client, &c, &server, &s).await;
}

/// Peer-to-peer mode: the initiator's RTR message releases the responder
/// at once, so here the responder moves data first.
async fn peer_to_peer(rtr: RtrType) {
    let client_cfg = Config::default().peer_to_peer(RtrTypes::only(rtr));
    let mut server_cfg = Config::default();
    server_cfg.startup.rtr_types = RtrTypes::ALL;
    let (c, s) = (Endpoint::new(SIZE, 35), Endpoint::new(SIZE, 36));
    let mut sopts = s.options();
    let rtr_buf = region(&s.pd, 8);
    if rtr == RtrType::Send {
        // A zero-length Send consumes a receive like any Send.
        sopts
            .initial_recvs
            .insert(0, (99, rtr_buf.sge(..).unwrap()));
    }
    let (client, server) = pair_with(&client_cfg, c.options(), server_cfg, sopts).await;
    for qp in [&client, &server] {
        assert_eq!(qp.info().mpa().and_then(|m| m.rtr), Some(rtr));
        assert_eq!(qp.info().mpa().map(|m| m.revision), Some(Revision::Rev2));
        assert_eq!(
            qp.info().mpa().and_then(|m| m.ird_ord),
            Some(IrdOrd::new(16, 16))
        );
    }
    if rtr == RtrType::Send {
        assert_recv(&next_recv(&server).await, 99, 0);
    }
    // The server first: a Read of the client's region, before the client
    // application has sent anything.
    let done = within(
        "server Read first",
        server.read(s.sink.sge(..).unwrap(), c.out.remote_key()),
    )
    .await
    .unwrap();
    assert_eq!(done.byte_len as usize, SIZE);
    assert_same("server-first Read", &s.sink.to_vec(), &c.out.to_vec());
    // The RTR is the runtime's own: nothing shows on the client's queues.
    assert!(client.send_cq().is_empty());
    exercise(&client, &c, &server, &s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//= rfc6581#4
//= type=test
//# The Initiator MUST send the selected zero-length RTR message as its first FPDU, which lets
//# the Responder send.
async fn revision_2_peer_to_peer_write_rtr() {
    peer_to_peer(RtrType::Write).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_2_peer_to_peer_read_rtr() {
    peer_to_peer(RtrType::Read).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_2_peer_to_peer_send_rtr() {
    peer_to_peer(RtrType::Send).await;
}

/// Revision 0 (draft-ietf-rddp-mpa-01) allows private data up to 65535
/// octets, beyond revision 1's 512, when the receiver makes room for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_0_with_large_private_data() {
    let (c, s) = (Endpoint::new(SIZE, 37), Endpoint::new(SIZE, 38));
    let mut client_cfg = Config::with_revision(Revision::Rev0);
    client_cfg.startup.max_private_data = 65535;
    let mut server_cfg = Config::default();
    server_cfg.startup.max_private_data = 65535;
    let (ask, answer) = (pattern(3000, 39), pattern(1000, 40));
    let mut listener = Listener::bind("127.0.0.1:0", server_cfg).await.unwrap();
    let addr = listener.local_addr();
    let sopts = s.options();
    let (answer2, ask2) = (answer.clone(), ask.clone());
    let accept = async move {
        let req = listener.accept().await.unwrap();
        assert_eq!(req.revision(), Some(Revision::Rev0));
        assert_eq!(req.private_data(), &ask2[..]);
        req.accept(sopts, &answer2).await.unwrap()
    };
    let (client, server) = within("setup", async {
        tokio::join!(connect(addr, &client_cfg, c.options(), &ask), accept)
    })
    .await;
    let client = client.unwrap();
    assert_eq!(client.info().peer_private_data(), answer);
    assert_eq!(server.info().peer_private_data(), ask);
    for qp in [&client, &server] {
        assert_eq!(qp.info().mpa().map(|m| m.revision), Some(Revision::Rev0));
        assert_eq!(qp.info().framing_params(), plain(true));
        assert_eq!(qp.info().mpa().and_then(|m| m.ird_ord), None);
    }
    exercise(&client, &c, &server, &s).await;
}

/// A responder answers with the lower of the two revisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_revisions_settle_on_the_lower() {
    let (c, s) = run(Config::default(), Config::with_revision(Revision::Rev1)).await;
    assert_eq!(c.mpa().map(|m| m.revision), Some(Revision::Rev1));
    assert_eq!(s.mpa().map(|m| m.revision), Some(Revision::Rev1));
    assert_eq!(c.mpa().and_then(|m| m.ird_ord), None);
    let (c, s) = run(Config::with_revision(Revision::Rev0), Config::default()).await;
    assert_eq!(c.mpa().map(|m| m.revision), Some(Revision::Rev0));
    assert_eq!(s.mpa().map(|m| m.revision), Some(Revision::Rev0));
}

/// Two ends configured as Linux `siw` is by default: no CRC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn siw_like_ends() {
    let siw = Config {
        startup: StartupConfig::siw_like(),
        ..Config::default()
    };
    let (c, s) = run(siw.clone(), siw).await;
    for info in [&c, &s] {
        assert_eq!(info.mpa().map(|m| m.revision), Some(Revision::Rev2));
        assert_eq!(info.framing_params(), plain(false));
    }
}

/// The legacy immediate-start profile: no startup frames, markers and CRC
/// both ways from the first octet, and no rule-4 hold, so the responder
/// may send first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_start_profile() {
    let (c, s) = (Endpoint::new(SIZE, 41), Endpoint::new(SIZE, 42));
    let mut listener = Listener::bind("127.0.0.1:0", Config::immediate_start())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let sopts = s.options();
    let accept = async move {
        let req = listener.accept().await.unwrap();
        assert!(req.request().is_none());
        assert_eq!(req.revision(), None);
        assert_eq!(req.private_data(), b"");
        req.accept(sopts, b"").await.unwrap()
    };
    let client_cfg = Config::immediate_start();
    let (client, server) = within("setup", async {
        tokio::join!(connect(addr, &client_cfg, c.options(), b""), accept)
    })
    .await;
    let client = client.unwrap();
    for qp in [&client, &server] {
        assert_eq!(qp.info().mpa().map(|m| m.revision), None);
        assert_eq!(qp.info().framing_params(), FramingParams::IMMEDIATE_START);
        assert_eq!(qp.info().mpa().and_then(|m| m.ird_ord), None);
        assert_eq!(qp.info().mpa().and_then(|m| m.rtr), None);
        assert!(qp.info().peer_private_data().is_empty());
    }
    let done = within(
        "server Read first",
        server.read(s.sink.sge(..).unwrap(), c.out.remote_key()),
    )
    .await
    .unwrap();
    assert_eq!(done.byte_len as usize, SIZE);
    assert_same("server-first Read", &s.sink.to_vec(), &c.out.to_vec());
    exercise(&client, &c, &server, &s).await;
    // It carries no private data.
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let r = connect(
        tcp.local_addr().unwrap(),
        &Config::immediate_start(),
        QpOptions::new(&c.pd),
        b"nope",
    )
    .await;
    assert!(
        matches!(
            r,
            Err(iwarp::Error::Config(
                iwarp::ConfigError::PrivateDataWithoutStartupFrames(iwarp::Framing::ImmediateStart)
            ))
        ),
        "{r:?}"
    );
}

/// A responder that requires CRC refuses an initiator that does not ask
/// for it (and the initiator learns it from a rejecting Reply).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crc_required_refuses_a_peer_without_crc() {
    let mut listener = Listener::bind("127.0.0.1:0", Config::default().crc(CrcPolicy::Required))
        .await
        .unwrap();
    let addr = listener.local_addr();
    let pd = new_pd();
    let r = within(
        "connect",
        connect(
            addr,
            &Config::default().crc(CrcPolicy::Off),
            QpOptions::new(&pd),
            b"",
        ),
    )
    .await;
    assert!(matches!(r, Err(iwarp::Error::Rejected { .. })), "{r:?}");
    // The listener never offers it; a compliant initiator gets through.
    let (c, s) = (Endpoint::new(100, 43), Endpoint::new(100, 44));
    let sopts = s.options();
    let accept = async move {
        let req = listener.accept().await.unwrap();
        req.accept(sopts, b"").await.unwrap()
    };
    let client_cfg = Config::default();
    let (client, server) = within("setup", async {
        tokio::join!(connect(addr, &client_cfg, c.options(), b""), accept)
    })
    .await;
    let client = client.unwrap();
    assert!(client.info().framing_params().crc && server.info().framing_params().crc);
    exercise(&client, &c, &server, &s).await;
}

/// With `responder_sends_first`, the accepting end's first FPDU leaves at
/// once, before the initiator has sent anything: what Linux `siw` does
/// and what `ib_write_lat`'s server relies on. The raw initiator sends
/// nothing and must still receive the responder's Send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responder_may_send_first_when_asked() {
    let mut cfg = Config::default().crc(CrcPolicy::Off);
    cfg.responder_sends_first = true;
    let mut listener = Listener::bind("127.0.0.1:0", cfg).await.unwrap();
    let addr = listener.local_addr();
    let request = startup_frame(iwarp::FrameKind::Request, Revision::Rev2, false, b"");
    let raw = tokio::spawn(async move { RawPeer::initiate(addr, &request).await });
    let req = within("request", listener.accept()).await.unwrap();
    let pd = new_pd();
    let server = within("accept", req.accept(QpOptions::new(&pd), b""))
        .await
        .unwrap();
    let (mut raw, _reply) = raw.await.unwrap();
    let note = region_with(&pd, b"first!".to_vec());
    server.post_send(7, note.sge(..).unwrap()).unwrap();
    let ulpdu = within("the responder's Send", raw.next_ulpdu())
        .await
        .expect("a Send before the initiator's first FPDU");
    // DDP untagged, last; RDMAP Send; queue 0, MSN 1, MO 0; the payload.
    let mut want = hex("4143 00000000 00000000 00000001 00000000");
    want.extend_from_slice(b"first!");
    assert_eq!(ulpdu, want);
    assert_eq!(next_send(&server).await.wr_id, 7);
}
