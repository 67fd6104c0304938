//! A peer guessing STags: the one client of a server that turns hostile.
//!
//! The server holds 1,000 live regions of other clients in one protection
//! domain, the common case of a server with many clients, and gives the
//! hostile client one region of its own. The client, a raw MPA peer,
//! RDMA-Writes to STags it guesses from what it knows: its own STag's
//! neighbours (as with a counter), its own index with other keys, one-bit
//! changes, and the first STags a counter would have given. Each wrong
//! guess must end that connection with DDP's Terminate for an invalid STag
//! (RFC 5041 §7.1 tagged check 1: layer DDP, tagged buffer error, code
//! 0x00, with the segment's length and DDP header), flush the server's
//! receives, and place nothing; after all guesses, no region has changed.
//!
//! The right STag, tried first over the same path, is accepted and its
//! octets placed: the guesses fail because they are wrong, not because
//! the path refuses everything. The chance that one of these guesses hits
//! a live region by luck is about 1,000 × 96 / 2^32 ≈ 2·10^-5 per run (the
//! guess odds in `iwarp_proto::memory`).

mod common;

use common::*;
use iwarp::{Config, ConnectionError, QpOptions, RemoteKey, STag};

const REGIONS: usize = 1000;
const REGION_LEN: usize = 64;

/// What the hostile client tries, from its own region's STag: 96 guesses.
fn guesses(own: STag) -> Vec<STag> {
    let mut g = Vec::new();
    // The neighbours a counter would have given.
    for d in 1..=16u32 {
        g.push(STag(own.0.wrapping_add(d << 8)));
        g.push(STag(own.0.wrapping_sub(d << 8)));
    }
    // Its own index with other keys (a region registered there before or
    // after it).
    g.extend((1..=16u8).map(|k| STag::new(own.index(), own.key().wrapping_add(k))));
    // One-bit changes.
    g.extend((0..32).map(|bit| STag(own.0 ^ (1 << bit))));
    // The first STags of a counter, key 0.
    g.extend((1..=16).map(|i| STag::new(i, 0)));
    g.retain(|&s| s != own);
    g
}

/// The Terminate our end must send for a Write of `payload_len` octets to
/// `stag` at TO 0: DDP tagged buffer error 0x00 (invalid STag), the
/// segment length, and a copy of the DDP header.
fn invalid_stag_terminate(stag: STag, payload_len: usize) -> Vec<u8> {
    let mut t = hex("1100 c000");
    t.extend((14 + payload_len as u16).to_be_bytes());
    t.extend(hex("c140"));
    t.extend(stag.0.to_be_bytes());
    t.extend(0u64.to_be_bytes());
    terminate(&t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessed_stags_find_no_region_and_each_ends_its_connection() {
    watch_panics();
    let pd = new_pd();
    let others: Vec<_> = (0..REGIONS)
        .map(|i| region_with(&pd, pattern(REGION_LEN, i as u64)))
        .collect();
    let own = region(&pd, REGION_LEN);
    let own_key: RemoteKey = own.remote_key();
    let inbox = region(&pd, 32);
    let options = || QpOptions::new(&pd).post_recv(1, inbox.sge(..).unwrap());

    // The right STag goes through this path: placed, nothing ended.
    let (mut raw, qp) = raw_initiator(Config::default(), true, options()).await;
    raw.send_ulpdu(&write(own_key.stag.0, own_key.addr, b"mine"))
        .await;
    raw.send_ulpdu(&hex("4143 00000000 00000000 00000001 00000000 6f6b"))
        .await;
    assert_recv(&next_recv(&qp).await, 1, 2);
    assert_eq!(&own.to_vec()[..4], b"mine");
    assert_eq!(qp.error(), None);
    drop((raw, qp));

    let guesses = guesses(own_key.stag);
    assert_eq!(guesses.len(), 96);
    for stag in guesses {
        let (mut raw, qp) = raw_initiator(Config::default(), true, options()).await;
        let payload = [0xaa; 16];
        raw.send_ulpdu(&write(stag.0, 0, &payload)).await;
        expect_terminate(&mut raw, &invalid_stag_terminate(stag, payload.len())).await;
        within("our end closed", qp.closed()).await;
        let e = qp.error();
        let Some(ConnectionError::TerminateSent(t)) = &e else {
            panic!("guess {stag}: {e:?}");
        };
        assert_eq!((t.layer(), t.etype(), t.code()), (1, 1, 0x00), "{stag}");
        let c = next_recv(&qp).await;
        assert_eq!(
            (c.wr_id, c.status),
            (1, iwarp::CompletionStatus::FlushError)
        );
    }

    for (i, r) in others.iter().enumerate() {
        assert_same(
            "another client's region",
            &r.to_vec(),
            &pattern(REGION_LEN, i as u64),
        );
        assert!(r.is_valid());
    }
    assert_eq!(&own.to_vec()[..4], b"mine");
    assert_no_panics();
}
