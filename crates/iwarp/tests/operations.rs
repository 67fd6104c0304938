//! Every data-moving operation over loopback TCP, through the public API:
//! Send (plain, with Solicited Event, with Invalidate, with both), RDMA
//! Write, RDMA Read, their zero-length forms, the posting verbs with their
//! completion queues (stream, `next`, `poll`, `poll_many`, one queue
//! shared by two connections), and the errors a work request can meet:
//! refused at post time, a Send too long for its receive, a Read of a
//! region the peer may not read.

mod common;

use common::*;
use futures_util::StreamExt;
use iwarp::proto::rdmap::PostError;
use iwarp::{
    Access, CompletionOpcode, CompletionQueue, CompletionStatus, Config, ConnectionError, Error,
    QpOptions, QpState, SendFlags,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_write_read_both_ways() {
    let (c, s) = (Endpoint::new(10_000, 1), Endpoint::new(10_000, 2));
    let (client, server) = pair_with(
        &Config::default(),
        c.options(),
        Config::default(),
        s.options(),
    )
    .await;
    exercise(&client, &c, &server, &s).await;
    let stats = client.stats();
    assert!(
        stats.octets_sent > 30_000 && stats.octets_received > 30_000,
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_solicited_event_marks_the_receive() {
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&spd, 64);
    let opts = QpOptions::new(&spd)
        .post_recv(1, inbox.sge(0..32).unwrap())
        .post_recv(2, inbox.sge(32..64).unwrap());
    let (client, server) = pair_with(
        &Config::default(),
        QpOptions::new(&cpd),
        Config::default(),
        opts,
    )
    .await;
    let msg = region_with(&cpd, b"solicited!plain".to_vec());
    let se = SendFlags {
        solicited: true,
        invalidate: None,
    };
    within("Send SE", client.send_with(msg.sge(0..10).unwrap(), se))
        .await
        .unwrap();
    within("Send", client.send(msg.sge(10..15).unwrap()))
        .await
        .unwrap();
    let first = next_recv(&server).await;
    assert_recv(&first, 1, 10);
    assert!(first.solicited);
    let second = next_recv(&server).await;
    assert_recv(&second, 2, 5);
    assert!(!second.solicited);
    assert_eq!(&inbox.to_vec()[..10], b"solicited!");
    assert_eq!(&inbox.to_vec()[32..37], b"plain");
}

/// A Send with Invalidate invalidates the named region at the receiver
/// before its receive completes, and the completion names it; a Write
/// to that region afterwards is refused with the DDP Terminate for an
/// invalid STag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_invalidate_invalidates_the_peer_region() {
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&spd, 64);
    let target = region(&spd, 256);
    let target2 = region(&spd, 256);
    let opts = QpOptions::new(&spd)
        .post_recv(1, inbox.sge(0..32).unwrap())
        .post_recv(2, inbox.sge(32..64).unwrap());
    let (client, server) = pair_with(
        &Config::default(),
        QpOptions::new(&cpd),
        Config::default(),
        opts,
    )
    .await;
    let msg = region_with(&cpd, b"done with it".to_vec());

    // Send with Invalidate.
    let inv = SendFlags {
        solicited: false,
        invalidate: Some(target.stag()),
    };
    within(
        "Send with Invalidate",
        client.send_with(msg.sge(..).unwrap(), inv),
    )
    .await
    .unwrap();
    let c = next_recv(&server).await;
    assert_recv(&c, 1, 12);
    assert_eq!(c.invalidated, Some(target.stag()));
    assert!(!c.solicited);
    assert!(!target.is_valid());
    assert!(target2.is_valid());

    // Send with Solicited Event and Invalidate.
    let both = SendFlags {
        solicited: true,
        invalidate: Some(target2.stag()),
    };
    within(
        "Send with SE and Invalidate",
        client.send_with(msg.sge(0..4).unwrap(), both),
    )
    .await
    .unwrap();
    let c = next_recv(&server).await;
    assert_recv(&c, 2, 4);
    assert_eq!(c.invalidated, Some(target2.stag()));
    assert!(c.solicited);
    assert!(!target2.is_valid());

    // The invalidated region is out of the peer's reach now.
    let data = region_with(&cpd, pattern(100, 3));
    within(
        "Write",
        client.write(data.sge(..).unwrap(), target.remote_key()),
    )
    .await
    .unwrap();
    within("client closed", client.closed()).await;
    within("server closed", server.closed()).await;
    let Some(ConnectionError::TerminateReceived(t)) = client.error() else {
        panic!("client error {:?}", client.error());
    };
    // DDP (1), tagged buffer error (1), invalid STag (0).
    assert_eq!((t.layer, t.etype, t.code), (1, 1, 0x00), "{t:?}");
    let d = t.ddp.expect("header copy");
    assert_eq!(d.segment_length, Some(14 + 100));
    assert_eq!(d.header()[0], 0xc1, "tagged, last, DDP version 1");
    assert_eq!(&d.header()[2..6], &target.stag().0.to_be_bytes());
    assert!(matches!(
        server.error(),
        Some(ConnectionError::TerminateSent(_))
    ));
    assert!(target.to_vec().iter().all(|&b| b == 0), "nothing placed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_write_lands_exactly_where_addressed() {
    let (cpd, spd) = (new_pd(), new_pd());
    let note = region(&spd, 16);
    let landing = region(&spd, 100_000);
    let opts = QpOptions::new(&spd).post_recv(7, note.sge(..).unwrap());
    let (client, server) = pair_with(
        &Config::default(),
        QpOptions::new(&cpd),
        Config::default(),
        opts,
    )
    .await;
    let data = region_with(&cpd, pattern(50_000, 4));
    // The middle 30000 octets of the source, to offset 12345 of the target.
    let key = landing.remote_key().slice(12_345, 30_000).unwrap();
    let c = within(
        "Write",
        client.write(data.sge(10_000..40_000).unwrap(), key),
    )
    .await
    .unwrap();
    assert_eq!(c.opcode, CompletionOpcode::RdmaWrite);
    assert_eq!(c.byte_len, 30_000);
    within("notice", client.send(data.sge(0..0).unwrap()))
        .await
        .unwrap();
    assert_recv(&next_recv(&server).await, 7, 0);
    let got = landing.to_vec();
    assert!(got[..12_345].iter().all(|&b| b == 0), "before the range");
    assert_same(
        "written range",
        &got[12_345..42_345],
        &data.to_vec()[10_000..40_000],
    );
    assert!(got[42_345..].iter().all(|&b| b == 0), "after the range");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_read_from_either_side() {
    let (cpd, spd) = (new_pd(), new_pd());
    let server_data = spd
        .register(pattern(70_000, 5), Access::REMOTE_READ)
        .unwrap();
    let client_data = cpd
        .register(pattern(3_000, 6), Access::REMOTE_READ)
        .unwrap();
    let (client, server) = pair(&cpd, &spd).await;
    let sink = region(&cpd, 80_000);
    // A slice of the server's region, into the middle of the sink.
    let key = server_data.remote_key().slice(1_000, 60_000).unwrap();
    let c = within(
        "client Read",
        client.read(sink.sge(5_000..65_000).unwrap(), key),
    )
    .await
    .unwrap();
    assert_eq!(c.opcode, CompletionOpcode::RdmaRead);
    assert_eq!(c.byte_len, 60_000);
    let got = sink.to_vec();
    assert_same(
        "client sink",
        &got[5_000..65_000],
        &server_data.to_vec()[1_000..61_000],
    );
    assert!(got[..5_000].iter().chain(&got[65_000..]).all(|&b| b == 0));
    // The client has sent an FPDU, so the server may now send: it reads
    // the client's region.
    let server_sink = region(&spd, 3_000);
    let c = within(
        "server Read",
        server.read(server_sink.sge(..).unwrap(), client_data.remote_key()),
    )
    .await
    .unwrap();
    assert_eq!(c.byte_len, 3_000);
    assert_same("server sink", &server_sink.to_vec(), &client_data.to_vec());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_length_send_write_and_read() {
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&spd, 8);
    let landing = region(&spd, 8);
    let opts = QpOptions::new(&spd)
        .post_recv(1, inbox.sge(..).unwrap())
        .post_recv(2, inbox.sge(0..0).unwrap());
    let (client, server) = pair_with(
        &Config::default(),
        QpOptions::new(&cpd),
        Config::default(),
        opts,
    )
    .await;
    let buf = region(&cpd, 8);
    let empty = buf.sge(0..0).unwrap();
    // Into an 8-octet receive, then into a zero-length one.
    let c = within("0-length Send", client.send(empty)).await.unwrap();
    assert_eq!((c.opcode, c.byte_len), (CompletionOpcode::Send, 0));
    within("0-length Send", client.send(empty)).await.unwrap();
    assert_recv(&next_recv(&server).await, 1, 0);
    assert_recv(&next_recv(&server).await, 2, 0);
    let c = within(
        "0-length Write",
        client.write(empty, landing.remote_key().slice(0, 0).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!((c.opcode, c.byte_len), (CompletionOpcode::RdmaWrite, 0));
    let c = within(
        "0-length Read",
        client.read(empty, landing.remote_key().slice(0, 0).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!((c.opcode, c.byte_len), (CompletionOpcode::RdmaRead, 0));
    // And from the server, now released.
    let sbuf = region(&spd, 8);
    let sempty = sbuf.sge(0..0).unwrap();
    within(
        "server 0-length Write",
        server.write(sempty, buf.remote_key()),
    )
    .await
    .unwrap();
    within(
        "server 0-length Read",
        server.read(sempty, buf.remote_key()),
    )
    .await
    .unwrap();
    assert!(landing.to_vec().iter().all(|&b| b == 0));
    assert_eq!(client.state(), QpState::ReadyToSend);
    assert_eq!(server.state(), QpState::ReadyToSend);
}

/// The posting verbs report on the queues given in the options, in
/// posting order per queue; the queues serve as a stream, with `next`,
/// `poll` and `poll_many`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posted_work_completes_on_its_queues_in_order() {
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&spd, 10 * 1000);
    let mut sopts = QpOptions::new(&spd);
    sopts.send_cq = CompletionQueue::new(16);
    sopts.recv_cq = CompletionQueue::new(16);
    for i in 0..10u64 {
        let at = i as usize * 1000;
        sopts = sopts.post_recv(100 + i, inbox.sge(at..at + 1000).unwrap());
    }
    let mut copts = QpOptions::new(&cpd);
    let (csend, crecv) = (CompletionQueue::new(4), CompletionQueue::new(4));
    copts.send_cq = csend.clone();
    copts.recv_cq = crecv.clone();
    let (client, server) = pair_with(&Config::default(), copts, Config::default(), sopts).await;
    let data = region_with(&cpd, pattern(10_000, 7));
    let sink = region(&cpd, 10_000);
    let target = region(&spd, 10_000);
    // Sends, Writes and Reads interleaved, all posted before any completes.
    let mut expect = Vec::new();
    for i in 0..10u64 {
        let at = i as usize * 1000;
        let sge = data.sge(at..at + 1000).unwrap();
        client.post_send(i, sge).unwrap();
        expect.push((i, CompletionOpcode::Send));
        client
            .rdma_write(
                1000 + i,
                sge,
                target.remote_key().slice(at as u64, 1000).unwrap(),
            )
            .unwrap();
        expect.push((1000 + i, CompletionOpcode::RdmaWrite));
        client
            .rdma_read(
                2000 + i,
                sink.sge(at..at + 1000).unwrap(),
                target.remote_key().slice(at as u64, 1000).unwrap(),
            )
            .unwrap();
        expect.push((2000 + i, CompletionOpcode::RdmaRead));
    }
    // The client's send queue as a stream.
    let got: Vec<_> = within(
        "client completions",
        csend.stream().take(expect.len()).collect::<Vec<_>>(),
    )
    .await;
    for (c, (id, op)) in got.iter().zip(&expect) {
        assert_eq!(
            (c.wr_id, c.opcode, c.status, c.byte_len),
            (*id, *op, CompletionStatus::Success, 1000)
        );
    }
    assert!(csend.is_empty() && crecv.is_empty());
    // Each Read followed its own Write on the same connection: it saw it.
    assert_same("read back", &sink.to_vec(), &data.to_vec());
    // The server's receive queue, with next, then poll and poll_many.
    let first = within("first receive", server.recv_cq().next()).await;
    assert_recv(&first, 100, 1000);
    let mut rest = Vec::new();
    within("the other receives", async {
        while rest.len() < 9 {
            if let Some(c) = server.recv_cq().poll() {
                rest.push(c);
            } else if server.recv_cq().poll_many(&mut rest, 2) == 0 {
                tokio::task::yield_now().await;
            }
        }
    })
    .await;
    for (i, c) in rest.iter().enumerate() {
        assert_recv(c, 101 + i as u64, 1000);
    }
    assert_same("received", &inbox.to_vec(), &data.to_vec());
    assert!(server.send_cq().is_empty(), "the server posted nothing");
    assert_eq!(server.send_cq().len(), 0);
}

/// One completion queue may serve several connections, as in verbs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_queue_serves_two_connections() {
    let cq = CompletionQueue::new(8);
    let spd = new_pd();
    let inbox = region(&spd, 64);
    let mut qps = Vec::new();
    for i in 0..2u64 {
        let cpd = new_pd();
        let mut opts = QpOptions::new(&spd).post_recv(
            i,
            inbox.sge(i as usize * 32..(i as usize + 1) * 32).unwrap(),
        );
        opts.recv_cq = cq.clone();
        let (client, server) = pair_with(
            &Config::default(),
            QpOptions::new(&cpd),
            Config::default(),
            opts,
        )
        .await;
        let msg = region_with(&cpd, vec![b'a' + i as u8; 32]);
        within("Send", client.send(msg.sge(..).unwrap()))
            .await
            .unwrap();
        qps.push((client, server, msg));
    }
    let mut ids = vec![
        within("a", cq.next()).await.wr_id,
        within("b", cq.next()).await.wr_id,
    ];
    ids.sort();
    assert_eq!(ids, [0, 1]);
    assert_eq!(&inbox.to_vec()[..32], &[b'a'; 32]);
    assert_eq!(&inbox.to_vec()[32..], &[b'b'; 32]);
}

/// Buffers that cannot serve a request are refused when it is posted,
/// and the connection carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_local_buffers_are_refused_at_post() {
    let (cpd, spd) = (new_pd(), new_pd());
    let (client, _server) = pair(&cpd, &spd).await;
    let read_only = cpd.register(vec![0; 64], Access::empty()).unwrap();
    let no_remote_write = cpd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let other_domain = region(&spd, 64);
    let peer = region(&spd, 64);
    // A receive needs local write.
    assert!(matches!(
        client.post_recv(1, read_only.sge(..).unwrap()),
        Err(Error::Post(PostError::LocalProtection(_)))
    ));
    // A Read sink needs remote write too (the Read Response is tagged).
    assert!(matches!(
        client.rdma_read(2, no_remote_write.sge(..).unwrap(), peer.remote_key()),
        Err(Error::Post(PostError::LocalProtection(_)))
    ));
    // A region of another protection domain.
    assert!(matches!(
        client.post_send(3, other_domain.sge(..).unwrap()),
        Err(Error::Post(PostError::LocalProtection(_)))
    ));
    // An invalidated region.
    read_only.invalidate().unwrap();
    assert!(matches!(
        client.send(read_only.sge(..).unwrap()).await,
        Err(Error::Post(PostError::LocalProtection(_)))
    ));
    // A range outside the region.
    assert!(matches!(
        no_remote_write.sge(60..70),
        Err(Error::OutOfRange {
            start: 60,
            end: 70,
            len: 64
        })
    ));
    assert!(client.send_cq().is_empty());
    // Still usable.
    let ok = region(&cpd, 8);
    within(
        "Write",
        client.write(ok.sge(..).unwrap(), peer.remote_key().slice(0, 8).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(client.state(), QpState::ReadyToSend);
}

/// A Send longer than the receive it lands in: the receive completes with
/// a local length error, the sender gets the DDP Terminate "message too
/// long" (untagged buffer error 0x05), and the stream ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_longer_than_the_receive() {
    watch_panics();
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&spd, 64);
    let opts = QpOptions::new(&spd)
        .post_recv(1, inbox.sge(0..50).unwrap())
        .post_recv(2, inbox.sge(50..64).unwrap());
    let (client, server) = pair_with(
        &Config::default(),
        QpOptions::new(&cpd),
        Config::default(),
        opts,
    )
    .await;
    let msg = region_with(&cpd, pattern(100, 8));
    within("Send", client.send(msg.sge(..).unwrap()))
        .await
        .unwrap();
    let c = next_recv(&server).await;
    assert_eq!(
        (c.wr_id, c.status),
        (1, CompletionStatus::LocalLengthError),
        "{c:?}"
    );
    let c = next_recv(&server).await;
    assert_eq!(
        (c.wr_id, c.status),
        (2, CompletionStatus::FlushError),
        "{c:?}"
    );
    within("client closed", client.closed()).await;
    let Some(ConnectionError::TerminateReceived(t)) = client.error() else {
        panic!("client error {:?}", client.error());
    };
    assert_eq!((t.layer, t.etype, t.code), (1, 2, 0x05), "{t:?}");
    let d = t.ddp.expect("header copy");
    assert_eq!(d.segment_length, Some(18 + 100));
    // Untagged, last, version 1; RDMAP version 1, Send; QN 0, MSN 1, MO 0.
    assert_eq!(
        d.header(),
        &hex("4143 00000000 00000000 00000001 00000000")[..]
    );
    // A post after the end completes at once with a flush error.
    client.post_send(9, msg.sge(..).unwrap()).unwrap();
    let c = next_send(&client).await;
    assert_eq!((c.wr_id, c.status), (9, CompletionStatus::FlushError));
    assert_no_panics();
}

/// A Read of a region the peer did not open for remote reading: the
/// peer answers with the RDMAP Terminate "access rights" carrying the
/// Read Request, and the Read completes with a remote access error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_without_the_right_to() {
    let (cpd, spd) = (new_pd(), new_pd());
    let private = spd
        .register(pattern(100, 9), Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let (client, server) = pair(&cpd, &spd).await;
    let sink = region(&cpd, 100);
    let r = within(
        "Read",
        client.read(sink.sge(..).unwrap(), private.remote_key()),
    )
    .await;
    let Err(Error::Completion(c)) = r else {
        panic!("Read {r:?}");
    };
    assert_eq!(c.status, CompletionStatus::RemoteAccessError, "{c:?}");
    within("closed", client.closed()).await;
    let Some(ConnectionError::TerminateReceived(t)) = client.error() else {
        panic!("client error {:?}", client.error());
    };
    // RDMAP (0), remote protection (1), access rights (2), with the Read
    // Request header and its 28 octets.
    assert_eq!((t.layer, t.etype, t.code), (0, 1, 0x02), "{t:?}");
    let r = t.rdmap.expect("Read Request copy");
    assert_eq!(&r[..4], &sink.stag().0.to_be_bytes());
    assert_eq!(&r[12..16], &100u32.to_be_bytes());
    assert_eq!(&r[16..20], &private.stag().0.to_be_bytes());
    assert!(sink.to_vec().iter().all(|&b| b == 0));
    within("server closed", server.closed()).await;
}

/// `post_list`: a Write, a Send and a Read posted together complete in
/// order, the Read finding what the Write put there; a post the list
/// refuses (a region of another domain) fails alone, and the posts around
/// it stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_list_completes_in_order_and_refuses_alone() {
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&spd, 32);
    let opts = QpOptions::new(&spd).post_recv(7, inbox.sge(..).unwrap());
    let (client, server) = pair_with(
        &Config::default(),
        QpOptions::new(&cpd),
        Config::default(),
        opts,
    )
    .await;
    let target = region(&spd, 64);
    let data = pattern(64, 3);
    let src = region_with(&cpd, data.clone());
    let sink = region(&cpd, 64);
    let other_domain = region(&spd, 8);
    let refused = client.post_list(|list| {
        list.rdma_write(1, src.sge(..).unwrap(), target.remote_key())
            .unwrap();
        let refused = list.post_send(2, other_domain.sge(..).unwrap());
        list.post_send(3, src.sge(..32).unwrap()).unwrap();
        list.rdma_read(4, sink.sge(..).unwrap(), target.remote_key())
            .unwrap();
        refused
    });
    assert!(
        matches!(refused, Err(Error::Post(PostError::LocalProtection(_)))),
        "{refused:?}"
    );
    let mut done = Vec::new();
    for _ in 0..3 {
        let c = within("the list's completions", client.send_cq().next()).await;
        assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
        done.push((c.wr_id, c.opcode));
    }
    assert_eq!(
        done,
        [
            (1, CompletionOpcode::RdmaWrite),
            (3, CompletionOpcode::Send),
            (4, CompletionOpcode::RdmaRead)
        ]
    );
    assert_same("the Read's sink", &sink.to_vec(), &data);
    assert_same("the Write's target", &target.to_vec(), &data);
    assert_recv(&next_recv(&server).await, 7, 32);
    assert_same("the Send", &inbox.to_vec(), &data[..32]);
    assert!(client.send_cq().poll().is_none());
}
