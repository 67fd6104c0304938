//! Concurrency over loopback TCP: 64 connections set up through one
//! listener at once and all moving data both ways at the same time; many
//! requests in flight on one connection; several tasks driving the same
//! queue pairs from both ends at once; one completion queue serving many
//! busy connections. (A responder's send queue filling while rule 4 holds
//! it is a rule of the connection, tested without sockets in
//! `iwarp-proto/tests/connection.rs`.)
//!
//! Every wait is bounded by the shared timeout; nothing depends on which
//! connection or task gets going first.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use iwarp::{
    connect, CompletionOpcode, CompletionQueue, CompletionStatus, Config, Listener, QpOptions,
};
use tokio::sync::oneshot;

/// 64 initiators connect to one listener at once; each connection then
/// runs the both-ways exchange (Send, Write, Read each way, 64 KiB + 1
/// octets each) while the others run theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_connections_moving_data_at_once() {
    const N: usize = 64;
    const SIZE: usize = 64 * 1024 + 1;
    watch_panics();
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    // Requests are routed to their initiator's task by private data, so
    // that each task holds both ends of its own connection.
    let mut routes = HashMap::new();
    let mut tasks = Vec::new();
    for i in 0..N {
        let (tx, rx) = oneshot::channel::<iwarp::ConnectRequest>();
        routes.insert(i.to_be_bytes().to_vec(), tx);
        tasks.push(tokio::spawn(async move {
            let c = Endpoint::new(SIZE, 2 * i as u64);
            let s = Endpoint::new(SIZE, 2 * i as u64 + 1);
            let sopts = s.options();
            let accept = async move { rx.await.unwrap().accept(sopts, b"").await };
            let (cfg, id) = (Config::default(), i.to_be_bytes());
            let (client, server) = tokio::join!(connect(addr, &cfg, c.options(), &id), accept);
            let (client, server) = (client.unwrap(), server.unwrap());
            exercise(&client, &c, &server, &s).await;
            client.disconnect().await.unwrap();
            server.closed().await;
            i
        }));
    }
    let router = tokio::spawn(async move {
        for _ in 0..N {
            let req = listener.accept().await.unwrap();
            let tx = routes
                .remove(req.private_data())
                .expect("a known initiator");
            tx.send(req).unwrap();
        }
    });
    let mut done = within("64 connections", async {
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.expect("connection task"));
        }
        done
    })
    .await;
    within("router", router).await.unwrap();
    done.sort();
    assert_eq!(done, (0..N).collect::<Vec<_>>());
    assert_no_panics();
}

/// A thousand Sends in flight at once, into a thousand pre-posted
/// receives, with RDMA Writes going the other way at the same time:
/// every completion in posting order, every octet where it belongs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_requests_in_flight() {
    const N: usize = 1000;
    const LEN: usize = 1000;
    let (cpd, spd) = (new_pd(), new_pd());
    let inbox = region(&spd, N * LEN);
    let mut sopts = QpOptions::new(&spd);
    // Separate queues: the server's receives and its Writes complete at
    // the same time.
    sopts.send_cq = CompletionQueue::new(N);
    for i in 0..N {
        // Lengths vary: message i is i % 977 + 1 octets long.
        sopts = sopts.post_recv(i as u64, inbox.sge(i * LEN..(i + 1) * LEN).unwrap());
    }
    let (client, server) = pair_with(
        &Config::default(),
        QpOptions::new(&cpd),
        Config::default(),
        sopts,
    )
    .await;
    let data = region_with(&cpd, pattern(N * LEN, 51));
    let landing = region(&cpd, N * LEN);
    let server_data = region_with(&spd, pattern(N * LEN, 52));
    for i in 0..N {
        let len = i % 977 + 1;
        client
            .post_send(i as u64, data.sge(i * LEN..i * LEN + len).unwrap())
            .unwrap();
    }
    // The server writes back while the Sends arrive (it may send as soon
    // as the first of them has).
    for i in 0..N {
        let key = landing
            .remote_key()
            .slice((i * LEN) as u64, LEN as u32)
            .unwrap();
        server
            .rdma_write(
                i as u64,
                server_data.sge(i * LEN..(i + 1) * LEN).unwrap(),
                key,
            )
            .unwrap();
    }
    for i in 0..N {
        let c = next_send(&client).await;
        assert_eq!((c.wr_id, c.status), (i as u64, CompletionStatus::Success));
    }
    for i in 0..N {
        let len = i % 977 + 1;
        assert_recv(&next_recv(&server).await, i as u64, len);
        let at = i * LEN;
        inbox.read_with(|b| assert_same("Send", &b[at..at + len], &data.to_vec()[at..at + len]));
    }
    for i in 0..N {
        let c = next_send(&server).await;
        assert_eq!((c.wr_id, c.opcode), (i as u64, CompletionOpcode::RdmaWrite));
    }
    // A Read after the Writes (same connection, in order) sees them all.
    let check = region(&spd, N * LEN);
    within(
        "Read back",
        server.read(check.sge(..).unwrap(), landing.remote_key()),
    )
    .await
    .unwrap();
    assert_same("written", &check.to_vec(), &server_data.to_vec());
}

/// Several tasks per end share the same queue pairs (handles are
/// clones), each running its own Writes and Reads in both directions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_share_both_ends() {
    const TASKS: usize = 4;
    const ROUNDS: usize = 10;
    const LEN: usize = 200_000;
    let (cpd, spd) = (new_pd(), new_pd());
    let (client, server) = pair(&cpd, &spd).await;
    // Release the responder (RFC 5044 §7.1.2 rule 4) before it posts.
    let nothing = region(&cpd, 1);
    let target = region(&spd, 1);
    within(
        "first FPDU",
        client.write(nothing.sge(0..0).unwrap(), target.remote_key()),
    )
    .await
    .unwrap();
    let mut jobs = Vec::new();
    for (side, (me, peer_pd, my_pd)) in [(&client, &spd, &cpd), (&server, &cpd, &spd)]
        .into_iter()
        .enumerate()
    {
        for t in 0..TASKS {
            let qp = me.clone();
            let (peer_pd, my_pd) = (peer_pd.clone(), my_pd.clone());
            jobs.push(tokio::spawn(async move {
                let seed = (side * TASKS + t) as u64 * 1000;
                let remote = Arc::new(region(&peer_pd, LEN));
                let out = region(&my_pd, LEN);
                let back = region(&my_pd, LEN);
                for round in 0..ROUNDS {
                    let data = pattern(LEN, seed + round as u64);
                    out.copy_from(0, &data).unwrap();
                    qp.write(out.sge(..).unwrap(), remote.remote_key())
                        .await
                        .unwrap();
                    qp.read(back.sge(..).unwrap(), remote.remote_key())
                        .await
                        .unwrap();
                    back.read_with(|b| assert_same("round trip", b, &data));
                }
            }));
        }
    }
    within("all tasks", async {
        for j in jobs {
            j.await.expect("task");
        }
    })
    .await;
}

/// One completion queue collects the receives of sixteen busy
/// connections; each completion is told apart by its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_queue_for_sixteen_busy_connections() {
    const CONNS: usize = 16;
    const MSGS: usize = 20;
    const LEN: usize = 3000;
    let cq = CompletionQueue::new(CONNS * MSGS);
    let spd = new_pd();
    let inbox = Arc::new(region(&spd, CONNS * MSGS * LEN));
    let mut senders = Vec::new();
    let mut servers = Vec::new();
    for c in 0..CONNS {
        let mut sopts = QpOptions::new(&spd);
        sopts.recv_cq = cq.clone();
        for m in 0..MSGS {
            let at = (c * MSGS + m) * LEN;
            sopts = sopts.post_recv((c * MSGS + m) as u64, inbox.sge(at..at + LEN).unwrap());
        }
        let cpd = new_pd();
        let (client, server) = pair_with(
            &Config::default(),
            QpOptions::new(&cpd),
            Config::default(),
            sopts,
        )
        .await;
        servers.push(server);
        senders.push(tokio::spawn(async move {
            let data = region_with(&cpd, pattern(MSGS * LEN, c as u64));
            for m in 0..MSGS {
                client
                    .send(data.sge(m * LEN..(m + 1) * LEN).unwrap())
                    .await
                    .unwrap();
            }
            (client, data)
        }));
    }
    let mut seen = vec![false; CONNS * MSGS];
    within("every receive", async {
        for _ in 0..CONNS * MSGS {
            let done = cq.next().await;
            assert_eq!(done.status, CompletionStatus::Success);
            assert_eq!(done.byte_len as usize, LEN);
            assert!(!std::mem::replace(&mut seen[done.wr_id as usize], true));
        }
    })
    .await;
    for (c, s) in senders.into_iter().enumerate() {
        let (_client, data) = within("sender", s).await.unwrap();
        let at = c * MSGS * LEN;
        inbox.read_with(|b| assert_same("received", &b[at..at + MSGS * LEN], &data.to_vec()));
    }
    assert!(cq.is_empty());
}
