//! How connections begin and end, over loopback TCP through the public
//! API: what a connection request shows before the decision, rejection
//! with private data, refused connections, the decision timeout, a
//! delayed startup after a streaming-mode exchange, graceful disconnect
//! with work outstanding (from one end and from both), dropping a queue
//! pair without disconnecting, and the idle timeout.

mod common;

use std::time::Duration;

use common::*;
use futures_util::FutureExt;
use iwarp::proto::mpa::startup::{Awaiting, StartupError};
use iwarp::proto::rdmap::PostError;
use iwarp::{
    accept_stream, connect, connect_stream, CompletionOpcode, CompletionQueue, CompletionStatus,
    Config, ConnectionError, Error, Listener, QpOptions, QpState, Revision, Role,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_shows_the_peer_before_the_decision() {
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let client = tokio::spawn(async move {
        connect(
            addr,
            &Config::default(),
            QpOptions::new(&new_pd()),
            b"who goes there",
        )
        .await
    });
    let req = within("accept", listener.accept()).await.unwrap();
    assert_eq!(req.private_data(), b"who goes there");
    assert_eq!(req.revision(), Some(Revision::Rev2));
    let r = req.request().expect("an MPA Request");
    assert!(r.crc);
    assert!(!r.markers);
    assert_eq!(req.peer_addr().ip(), addr.ip());
    let server = req
        .accept(QpOptions::new(&new_pd()), b"friend")
        .await
        .unwrap();
    let client = within("connect", client).await.unwrap().unwrap();
    assert_eq!(client.info().role, Role::Initiator);
    assert_eq!(server.info().role, Role::Responder);
    assert_eq!(client.local_addr(), server.peer_addr());
    assert_eq!(client.peer_addr(), server.local_addr());
    assert_eq!(client.info().peer_private_data(), b"friend");
    for qp in [&client, &server] {
        let info = qp.info();
        assert!(info.emss >= 536, "{info:?}");
        assert!(info.mulpdu > 0 && info.mulpdu < info.emss, "{info:?}");
        assert_eq!(qp.state(), QpState::ReadyToSend);
        assert_eq!(qp.error(), None);
    }
}

/// A rejection reaches the initiator as `Error::Rejected` with the
/// responder's private data; the responder keeps the TCP connection,
/// which the initiator, dropping the error, then closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//= rfc5044#7.1.2
//= type=test
//# The Responder SHOULD return an MPA Reply Frame with the "Reject Connection" bit set to '1'
//# if the validation of the Private Data is not acceptable to the ULP.
async fn reject_with_private_data() {
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let client = tokio::spawn(async move {
        connect(
            addr,
            &Config::default(),
            QpOptions::new(&new_pd()),
            b"let me in",
        )
        .await
    });
    let req = within("accept", listener.accept()).await.unwrap();
    let peer = req.peer_addr();
    let mut stream = within("reject", req.reject(b"not today"))
        .await
        .expect("the stream back");
    assert_eq!(stream.peer_addr().unwrap(), peer);
    match within("connect", client).await.unwrap() {
        Err(Error::Rejected { private_data, .. }) => assert_eq!(private_data, b"not today"),
        other => panic!("connect: {other:?}"),
    }
    // MPA is over: nothing more arrives, and the initiator closes.
    assert_eq!(drain_to_end(&mut stream).await, b"");
}

/// A port nobody listens on refuses; so does a dropped `Listener`'s,
/// once its task has stopped (dropping aborts the task, which tokio
/// carries out at its next turn, so not necessarily at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_listening_is_refused() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let cfg = Config::default();
    let r = connect(addr, &cfg, QpOptions::new(&new_pd()), b"").await;
    assert!(matches!(r, Err(Error::Refused(a)) if a == addr), "{r:?}");

    let addr = {
        let l = Listener::bind("127.0.0.1:0", Config::default())
            .await
            .unwrap();
        l.local_addr()
    };
    within("the dropped listener's port to refuse", async {
        loop {
            let r = connect(addr, &cfg, QpOptions::new(&new_pd()), b"").await;
            match r {
                Err(Error::Refused(a)) if a == addr => break,
                // Accepted before the task stopped, then dropped with it.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                Ok(_) => panic!("a dropped listener accepted a connection"),
            }
        }
    })
    .await;
}

/// An application that takes longer to decide than the configured
/// decision timeout can no longer accept; the initiator sees the
/// connection close while it waits for the Reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_decision_times_out() {
    let mut cfg = Config::default();
    cfg.startup.decision_timeout = Some(Duration::from_millis(50));
    let mut listener = Listener::bind("127.0.0.1:0", cfg).await.unwrap();
    let addr = listener.local_addr();
    let client = tokio::spawn(async move {
        connect(addr, &Config::default(), QpOptions::new(&new_pd()), b"").await
    });
    let req = within("accept", listener.accept()).await.unwrap();
    // Well past the decision timeout.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = req.accept(QpOptions::new(&new_pd()), b"").await;
    assert!(
        matches!(
            r,
            Err(Error::Startup(StartupError::Timeout {
                waiting_for: Awaiting::Decision,
                ..
            }))
        ),
        "{r:?}"
    );
    let r = within("connect", client).await.unwrap();
    assert!(
        matches!(
            r,
            Err(Error::Startup(StartupError::ConnectionClosed {
                waiting_for: Awaiting::Reply
            }))
        ),
        "{r:?}"
    );
}

/// RFC 5044 §7.1.3: the applications talk in streaming mode first, then
/// start MPA; the responder's last streaming-mode message goes out just
/// before it waits for the Request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_startup_after_streaming_mode() {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let (c, s) = (Endpoint::new(5_000, 11), Endpoint::new(5_000, 12));
    let (copts, sopts) = (c.options(), s.options());
    let server = tokio::spawn(async move {
        let (mut stream, _) = tcp.accept().await.unwrap();
        let mut hello = [0u8; 8];
        stream.read_exact(&mut hello).await.unwrap();
        assert_eq!(&hello, b"upgrade?");
        let req = accept_stream(stream, &Config::default(), b"yes, MPA now")
            .await
            .unwrap();
        assert_eq!(req.private_data(), b"client");
        req.accept(sopts, b"server").await.unwrap()
    });
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"upgrade?").await.unwrap();
    let mut last = [0u8; 12];
    within("last streaming message", stream.read_exact(&mut last))
        .await
        .unwrap();
    assert_eq!(&last, b"yes, MPA now");
    let client = within(
        "delayed startup",
        connect_stream(stream, &Config::default(), copts, b"client"),
    )
    .await
    .unwrap();
    let server = within("accept", server).await.unwrap();
    assert_eq!(client.info().peer_private_data(), b"server");
    exercise(&client, &c, &server, &s).await;
}

/// `disconnect` lets everything already posted finish: Sends are
/// delivered, Writes placed, Reads answered, before both ends close. New
/// work is refused while it runs. The peer's receives left over are
/// flushed when the stream ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_disconnect_finishes_queued_work_first() {
    const N: usize = 40;
    const LEN: usize = 20_000;
    watch_panics();
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&spd, N * LEN);
    let landing = region(&spd, N * LEN);
    let server_data = region_with(&spd, pattern(N * LEN, 21));
    let mut sopts = QpOptions::new(&spd);
    for i in 0..N + 3 {
        let at = (i % N) * LEN;
        sopts = sopts.post_recv(i as u64, inbox.sge(at..at + LEN).unwrap());
    }
    let (client, server) = pair_with(
        &Config::default(),
        QpOptions::new(&cpd),
        Config::default(),
        sopts,
    )
    .await;
    let data = region_with(&cpd, pattern(N * LEN, 22));
    let sink = region(&cpd, N * LEN);
    for i in 0..N {
        let at = i * LEN;
        let sge = data.sge(at..at + LEN).unwrap();
        let key = landing.remote_key().slice(at as u64, LEN as u32).unwrap();
        client.post_send(3 * i as u64, sge).unwrap();
        client.rdma_write(3 * i as u64 + 1, sge, key).unwrap();
        let key = server_data
            .remote_key()
            .slice(at as u64, LEN as u32)
            .unwrap();
        client
            .rdma_read(3 * i as u64 + 2, sink.sge(at..at + LEN).unwrap(), key)
            .unwrap();
    }
    let mut disconnect = std::pin::pin!(client.disconnect());
    // The first poll starts the close; work is still outstanding.
    assert!((&mut disconnect).now_or_never().is_none());
    assert!(matches!(
        client.post_send(999, data.sge(0..1).unwrap()),
        Err(Error::Post(PostError::Closing))
    ));
    within("disconnect", disconnect).await.unwrap();
    // A graceful close, not the abortive fallback after the peer failed
    // to close its side.
    assert_eq!(client.state(), QpState::Closed);
    // The side that asked for the close says so; the other saw its peer close.
    assert_eq!(client.error(), Some(ConnectionError::LocallyClosed));
    for i in 0..3 * N as u64 {
        let c = client.send_cq().poll().expect("a completion per request");
        assert_eq!((c.wr_id, c.status), (i, CompletionStatus::Success), "{c:?}");
        assert_eq!(c.byte_len as usize, LEN);
    }
    assert!(client.send_cq().is_empty());
    assert_same("read back", &sink.to_vec(), &server_data.to_vec());
    within("server closed", server.closed()).await;
    assert_eq!(server.error(), Some(ConnectionError::PeerClosed));
    for i in 0..N as u64 {
        assert_recv(&next_recv(&server).await, i, LEN);
    }
    for i in N as u64..N as u64 + 3 {
        let c = next_recv(&server).await;
        assert_eq!(
            (c.wr_id, c.status),
            (i, CompletionStatus::FlushError),
            "{c:?}"
        );
    }
    assert_same("received", &inbox.to_vec(), &data.to_vec());
    assert_same("written", &landing.to_vec(), &data.to_vec());
    assert_no_panics();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_ends_disconnect_at_once() {
    let (cpd, spd) = (new_pd(), new_pd());
    let (client, server) = pair(&cpd, &spd).await;
    // Let the server send too, so that both have something to finish.
    let msg = region(&cpd, 10);
    let key = region(&spd, 10);
    within(
        "Write",
        client.write(msg.sge(..).unwrap(), key.remote_key()),
    )
    .await
    .unwrap();
    // The client's close starts first (`join` polls in order), so its
    // end is graceful whatever happens next; the server's FIN may be
    // handled before or after its own close starts, and it ends closed or
    // in error accordingly (as `siw` does for a peer's close).
    let (a, b) = within("disconnects", async {
        tokio::join!(client.disconnect(), server.disconnect())
    })
    .await;
    a.unwrap();
    b.unwrap();
    assert_eq!(client.state(), QpState::Closed);
    assert!(
        matches!(server.state(), QpState::Closed | QpState::Error),
        "{:?}",
        server.state()
    );
    // Disconnecting again is harmless.
    within("again", client.disconnect()).await.unwrap();
}

/// Dropping the last handle closes the connection abruptly: this end's
/// outstanding work is flushed to its (still held) completion queue, the
/// peer sees the stream end and flushes its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_without_disconnect() {
    watch_panics();
    let (cpd, spd) = (new_pd(), new_pd());
    let server_inbox = region(&spd, 100);
    let sopts = QpOptions::new(&spd)
        .post_recv(1, server_inbox.sge(..50).unwrap())
        .post_recv(2, server_inbox.sge(50..).unwrap());
    let client_inbox = region(&cpd, 100);
    let ccq = CompletionQueue::new(8);
    let mut copts = QpOptions::new(&cpd)
        .post_recv(10, client_inbox.sge(..50).unwrap())
        .post_recv(11, client_inbox.sge(50..).unwrap());
    copts.send_cq = ccq.clone();
    copts.recv_cq = ccq.clone();
    let (client, server) = pair_with(&Config::default(), copts, Config::default(), sopts).await;
    let msg = region_with(&cpd, b"first and last".to_vec());
    within("Send", client.send(msg.sge(..).unwrap()))
        .await
        .unwrap();
    assert_recv(&next_recv(&server).await, 1, 14);
    let clone = client.clone();
    drop(client);
    // Another handle keeps it alive.
    assert_eq!(clone.state(), QpState::ReadyToSend);
    drop(clone);
    for id in [10, 11] {
        let c = within("client flush", ccq.next()).await;
        assert_eq!(
            (c.wr_id, c.status, c.opcode),
            (id, CompletionStatus::FlushError, CompletionOpcode::Recv)
        );
    }
    within("server closed", server.closed()).await;
    assert!(
        matches!(
            server.error(),
            Some(ConnectionError::PeerClosed | ConnectionError::Lost(_))
        ),
        "{:?}",
        server.error()
    );
    let c = next_recv(&server).await;
    assert_eq!((c.wr_id, c.status), (2, CompletionStatus::FlushError));
    assert_eq!(server.state(), QpState::Error);
    // Work posted now completes at once, flushed.
    server.post_recv(3, server_inbox.sge(..).unwrap()).unwrap();
    let c = next_recv(&server).await;
    assert_eq!((c.wr_id, c.status), (3, CompletionStatus::FlushError));
    assert_no_panics();
}

/// With an idle timeout, a connection on which nothing arrives is
/// declared lost; its receives are flushed and the peer sees it close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//= rfc5044#7.1.2
//= type=test
//# ULPs SHOULD implement a reasonable timeout while waiting for FPDUs, ULPDUs, and application
//# level messages to guard against application failures and certain denial-of-service attacks.
async fn the_idle_timeout_ends_a_silent_connection() {
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&cpd, 10);
    let cfg = Config {
        idle_timeout: Some(Duration::from_millis(100)),
        ..Config::default()
    };
    let (client, server) = pair_with(
        &cfg,
        QpOptions::new(&cpd).post_recv(5, inbox.sge(..).unwrap()),
        Config::default(),
        QpOptions::new(&spd),
    )
    .await;
    within("client closed", client.closed()).await;
    assert!(
        matches!(client.error(), Some(ConnectionError::Lost(_))),
        "{:?}",
        client.error()
    );
    let c = next_recv(&client).await;
    assert_eq!((c.wr_id, c.status), (5, CompletionStatus::FlushError));
    within("server closed", server.closed()).await;
    assert!(server.error().is_some());
}

/// A receive in `QpOptions::post_recv` that cannot be posted (its buffer
/// belongs to another protection domain) fails the connection set-up with
/// a typed error naming it; the connection is closed, and the peer sees
/// it end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initial_receive_that_cannot_be_posted_fails_the_setup() {
    let (cpd, spd, other) = (new_pd(), new_pd(), new_pd());
    let foreign = region(&other, 16);
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let accept = async move {
        let req = listener.accept().await?;
        req.accept(QpOptions::new(&spd), b"").await
    };
    let copts = QpOptions::new(&cpd).post_recv(7, foreign.sge(..).unwrap());
    let cfg = Config::default();
    let (c, s) = within("set-up", async {
        tokio::join!(connect(addr, &cfg, copts, b""), accept)
    })
    .await;
    assert!(
        matches!(
            c,
            Err(Error::InitialReceive {
                wr_id: 7,
                error: PostError::LocalProtection(_)
            })
        ),
        "{c:?}"
    );
    let server = s.unwrap();
    within("the server sees it end", server.closed()).await;
    assert!(server.error().is_some());
}
