//! Posts made in a burst share system calls (`Config::post_burst`), and
//! none is left unwritten: the octets a post leaves behind go out with the
//! next post that writes, or with the writer task once the poster awaits.

mod common;

use std::time::Duration;

use common::*;
use iwarp::{
    CompletionOpcode, CompletionStatus, Config, MemoryRegion, ProtectionDomain, QpOptions,
    QueuePair,
};

/// RDMA Writes of 256 octets each, posted back to back: about 9 KiB on the
/// wire in all, less than a socket's smallest send buffer (16 KiB), so no
/// post finds the socket full even if the peer's acknowledgements wait.
const POSTS: u64 = 32;
const LEN: usize = 256;

/// A connection whose client posts with `post_burst`: (client, server,
/// client's domain, server's domain).
async fn pair_bursting(
    post_burst: Duration,
) -> (QueuePair, QueuePair, ProtectionDomain, ProtectionDomain) {
    let cfg = Config {
        post_burst,
        ..Config::default()
    };
    let (cpd, spd) = (new_pd(), new_pd());
    let (client, server) = pair_with(
        &cfg,
        QpOptions::new(&cpd),
        Config::default(),
        QpOptions::new(&spd),
    )
    .await;
    (client, server, cpd, spd)
}

/// Posts RDMA Write `i`: slot `i` (`LEN` octets) of `source` to the same
/// slot of `target`.
fn post_slot_write(client: &QueuePair, source: &MemoryRegion, target: &MemoryRegion, i: u64) {
    let at = i as usize * LEN;
    client
        .rdma_write(
            i,
            source.sge(at..at + LEN).unwrap(),
            target.remote_key().slice(at as u64, LEN as u32).unwrap(),
        )
        .unwrap();
}

/// Posts `POSTS` Writes without awaiting in between, then waits for their
/// completions and checks what landed; returns the client's socket writes.
async fn burst_of_writes(post_burst: Duration) -> u64 {
    let (client, _server, cpd, spd) = pair_bursting(post_burst).await;
    let total = POSTS as usize * LEN;
    let data = pattern(total, 9);
    let source = region_with(&cpd, data.clone());
    let target = region(&spd, total);
    let writes_before = client.stats().socket_writes;
    for i in 0..POSTS {
        post_slot_write(&client, &source, &target, i);
    }
    for i in 0..POSTS {
        let c = next_send(&client).await;
        assert_eq!(c.wr_id, i, "{c:?}");
        assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
        assert_eq!(c.opcode, CompletionOpcode::RdmaWrite, "{c:?}");
    }
    // A Read behind the Writes returns once they have been placed.
    let sink = region(&cpd, total);
    client
        .rdma_read(
            POSTS,
            sink.sge(..).unwrap(),
            target.remote_key().slice(0, total as u32).unwrap(),
        )
        .unwrap();
    let c = next_send(&client).await;
    assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
    assert_same("the Writes' target", &target.to_vec(), &data);
    assert_same("read back", &sink.to_vec(), &data);
    client.stats().socket_writes - writes_before
}

// A single-threaded runtime: the writer task can only run once the test
// awaits, so the posts after the first can only be written by it.
#[tokio::test]
async fn a_burst_of_posts_shares_writes_and_loses_none() {
    // Wide enough that no post of the burst comes after it, however slow
    // the build: the grouping is then certain.
    let writes = burst_of_writes(Duration::from_secs(60)).await;
    // The first post writes itself; the writer takes the others in as
    // few writes as the socket's room allows; the Read is one more.
    assert!(
        (2..=POSTS / 4).contains(&writes),
        "{writes} socket writes for {POSTS} posts"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_window_every_post_writes_itself() {
    let writes = burst_of_writes(Duration::ZERO).await;
    // No post finds the socket full (see `POSTS`) and hands over: one
    // write each, and the Read's.
    assert_eq!(writes, POSTS + 1);
}

// Within the window, but after the connection ended: the writer task is
// gone, so the post must deliver its own completion (a flush error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_after_the_end_completes_within_the_window() {
    let (client, server, cpd, spd) = pair_bursting(Duration::from_secs(60)).await;
    let source = region_with(&cpd, pattern(LEN, 3));
    let target = region(&spd, LEN);
    // A post that writes opens the window.
    client
        .rdma_write(1, source.sge(..).unwrap(), target.remote_key())
        .unwrap();
    assert_eq!(next_send(&client).await.status, CompletionStatus::Success);
    // The peer goes away; the client's connection ends.
    drop(server);
    within("the client's connection to end", client.closed()).await;
    client
        .rdma_write(2, source.sge(..).unwrap(), target.remote_key())
        .unwrap();
    let c = next_send(&client).await;
    assert_eq!(c.wr_id, 2, "{c:?}");
    assert_eq!(c.status, CompletionStatus::FlushError, "{c:?}");
}

// A receive has nothing to write: posted between two Writes of a burst, it
// neither writes what the burst left behind nor loses it.
#[tokio::test]
async fn receives_in_a_burst_leave_its_octets_to_the_writer() {
    let (client, _server, cpd, spd) = pair_bursting(Duration::from_secs(60)).await;
    let data = pattern(2 * LEN, 5);
    let source = region_with(&cpd, data.clone());
    let target = region(&spd, 2 * LEN);
    let inbox = region(&cpd, LEN);
    let writes_before = client.stats().socket_writes;
    for i in 0..2u64 {
        post_slot_write(&client, &source, &target, i);
        client.post_recv(10 + i, inbox.sge(..).unwrap()).unwrap();
    }
    // The first Write wrote itself; the second waits for the writer task,
    // which cannot run before this test awaits (one thread).
    assert_eq!(client.stats().socket_writes - writes_before, 1);
    for i in 0..2u64 {
        let c = next_send(&client).await;
        assert_eq!((c.wr_id, c.status), (i, CompletionStatus::Success), "{c:?}");
    }
    assert_eq!(client.stats().socket_writes - writes_before, 2);
    within("the Writes to land", async {
        while target.to_vec() != data {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

// A receive posted after the connection ended completes at once, with a
// flush error: it writes nothing, but what it raised is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receive_after_the_end_completes() {
    let (client, server, cpd, _spd) = pair_bursting(Duration::from_secs(60)).await;
    drop(server);
    within("the client's connection to end", client.closed()).await;
    let inbox = region(&cpd, LEN);
    client.post_recv(7, inbox.sge(..).unwrap()).unwrap();
    let c = next_recv(&client).await;
    assert_eq!(
        (c.wr_id, c.status),
        (7, CompletionStatus::FlushError),
        "{c:?}"
    );
}
