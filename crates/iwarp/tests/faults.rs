//! Faults a server must survive with nothing lost, over loopback: the
//! bounded, in-process versions of the scenarios `scripts/soak.sh` runs
//! across a lossy path.
//!
//! - A flood of half-open connections (TCP connected, no MPA Request)
//!   against a listener: real clients are still served, at once.
//! - A peer that stops reading: our posts back up to the send queue's
//!   depth and are refused there (memory stays bounded: payload is never
//!   copied), and once the peer reads again every octet arrives, in order.
//!
//! Two more live in `hostile_peers.rs`: a reset in the middle of an FPDU
//! (`reset_in_the_middle_of_a_transfer`) and startups that never finish
//! (`silent_and_stalling_initiators_time_out`, `..._responders_...`).

mod common;

use std::time::Duration;

use common::*;
use iwarp::proto::mpa::startup::FrameKind;
use iwarp::proto::rdmap::PostError;
use iwarp::{connect, CompletionStatus, Config, Error, Listener, QpOptions, Revision};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// More half-open connections than the listener runs startups for at once
/// (256).
const FLOOD: usize = 300;

/// A listener under a flood of half-open connections keeps serving real
/// clients: the oldest half-open connection gives its place to a new one
/// instead of every newcomer waiting for a startup timeout. The timeouts
/// are set longer than the test's bound, so a listener that waited would
/// fail it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_half_open_connections_does_not_stop_real_clients() {
    watch_panics();
    let mut cfg = Config::default();
    cfg.startup.request_timeout = Duration::from_secs(120);
    let mut listener = Listener::bind("127.0.0.1:0", cfg.clone()).await.unwrap();
    let addr = listener.local_addr();
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        flood.push(
            within("flood connect", TcpStream::connect(addr))
                .await
                .unwrap(),
        );
    }
    let mut client_cfg = Config::default();
    client_cfg.startup.reply_timeout = Duration::from_secs(120);
    for round in 0..3u8 {
        let pd = new_pd();
        let inbox = region(&pd, 16);
        let hello = region_with(&pd, b"hello".to_vec());
        let opts = QpOptions::new(&pd).post_recv(1, inbox.sge(..).unwrap());
        let private_data = [round];
        let accept = async {
            let req = listener.accept().await.unwrap();
            assert_eq!(req.private_data(), private_data);
            req.accept(opts, b"").await.unwrap()
        };
        let (client, server) = within("a real client among the flood", async {
            tokio::join!(
                connect(addr, &client_cfg, QpOptions::new(&pd), &private_data),
                accept
            )
        })
        .await;
        let client = client.expect("the real client is served");
        within("a Send", client.send(hello.sge(..).unwrap()))
            .await
            .unwrap();
        assert_recv(&next_recv(&server).await, 1, 5);
        assert_eq!(&inbox.to_vec()[..5], b"hello");
    }
    // The oldest half-open connections were closed to make room; the
    // newest are still waiting for their startup.
    let mut buf = [0u8; 1];
    let n = within("the oldest is closed", flood[0].read(&mut buf)).await;
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    let newest = flood.last_mut().unwrap();
    let still_open = tokio::time::timeout(Duration::from_millis(50), newest.read(&mut buf)).await;
    assert!(still_open.is_err(), "the newest was closed: {still_open:?}");
    assert_no_panics();
}

/// Octets in each Send of the stalled-reader test.
const SEND_LEN: usize = 64 * 1024;

/// A peer that stops reading: our end's Sends back up in the socket, then
/// in the send queue, until a post is refused as the queue is full; the
/// peer then reads everything, and every Send arrives whole and in order,
/// and every post completes successfully.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//= draft-ietf-rddp-mpa-01#5.3
//= type=test
//# Once an ULPDU is provided to MPA, the MPA on TCP sender MUST transmit it or fail the
//# connection; it cannot be repudiated.
async fn a_peer_that_stops_reading_loses_nothing() {
    watch_panics();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let reply = startup_frame(FrameKind::Reply, Revision::Rev1, true, b"");
    let pd = new_pd();
    let data = region_with(&pd, pattern(SEND_LEN * 4, 7));
    let cfg = Config {
        send_queue_depth: 64,
        ..Config::default()
    };
    let peer = async {
        let (raw, _) = RawPeer::respond(&tcp, &reply).await;
        raw
    };
    let (mut raw, qp) = within("startup", async {
        tokio::join!(peer, connect(addr, &cfg, QpOptions::new(&pd), b""))
    })
    .await;
    let qp = qp.unwrap();
    // Post until the queue refuses: the peer reads nothing meanwhile. The
    // two sockets' buffers take some Sends (they complete once written);
    // the next 64 wait in the queue, as descriptors of the region.
    let mut posted = 0u64;
    let refused = loop {
        let at = (posted as usize % 4) * SEND_LEN;
        match qp.post_send(posted, data.sge(at..at + SEND_LEN).unwrap()) {
            Ok(()) => posted += 1,
            Err(e) => break e,
        }
        assert!(posted < 4096, "posts never refused: {}", qp.debug_state());
    };
    assert!(
        matches!(refused, Error::Post(PostError::QueueFull)),
        "{refused:?}"
    );
    assert!(posted >= 64);
    // Now the peer reads: every Send, whole, in order.
    let want = data.to_vec();
    for n in 0..posted {
        let msn = n as u32 + 1;
        let mut message = Vec::new();
        loop {
            let segment = raw.next_ulpdu().await.expect("a Send segment");
            let word = |at: usize| u32::from_be_bytes(segment[at..at + 4].try_into().unwrap());
            // Untagged, DDP version 1, RDMAP version 1, Send; queue 0.
            assert_eq!((segment[0] & 0xbf, segment[1]), (0x01, 0x43), "Send {n}");
            assert_eq!(
                (word(6), word(10), word(14)),
                (0, msn, message.len() as u32)
            );
            message.extend_from_slice(&segment[18..]);
            if segment[0] & 0x40 != 0 {
                break;
            }
        }
        let at = (n as usize % 4) * SEND_LEN;
        assert_same("a Send's payload", &message, &want[at..at + SEND_LEN]);
    }
    for n in 0..posted {
        let c = next_send(&qp).await;
        assert_eq!((c.wr_id, c.status), (n, CompletionStatus::Success));
    }
    assert_eq!(qp.error(), None);
    assert_no_panics();
}
