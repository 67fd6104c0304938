//! Every framing the runtime offers, end to end over loopback: MPA
//! (revision 2 by default), the legacy immediate-start profile and IFT,
//! with and without markers, moving Sends, RDMA Writes and RDMA Reads of
//! sizes that span many segments, verified octet for octet.

use std::time::Duration;

use iwarp::{connect, Access, Config, Device, Framing, Listener, QpOptions, RemoteKey};

const LEN: usize = 300_000;

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

/// The server registers a buffer and announces its key in a Send; the
/// client Writes into its first half, Reads its second half back, and
/// both check the octets.
async fn exchange(config: Config) -> (iwarp::ConnectionInfo, iwarp::ConnectionInfo) {
    let mut listener = Listener::bind("127.0.0.1:0", config.clone()).await.unwrap();
    let addr = listener.local_addr();
    let server_config = config.clone();
    let server = tokio::spawn(async move {
        let req = listener.accept().await.unwrap();
        assert!(req.request().is_none() || server_config.framing == Framing::Mpa);
        let pd = Device::new().alloc_pd();
        let area = pd
            .register(
                vec![0u8; 2 * LEN],
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            )
            .unwrap();
        area.copy_from(LEN, &pattern(2)).unwrap();
        let note = pd.register(vec![0u8; 16], Access::LOCAL_WRITE).unwrap();
        // The client speaks first (MPA rule 4): its Send says "go".
        let qp = req
            .accept(QpOptions::new(&pd).post_recv(1, note.sge(..).unwrap()), b"")
            .await
            .unwrap();
        assert_eq!(qp.recv_cq().next().await.wr_id, 1);
        let key = pd
            .register(area.remote_key().to_bytes().to_vec(), Access::empty())
            .unwrap();
        qp.post_recv(2, note.sge(..).unwrap()).unwrap();
        qp.send(key.sge(..).unwrap()).await.unwrap();
        // "done" after the Write and the Read.
        assert_eq!(qp.recv_cq().next().await.wr_id, 2);
        assert_eq!(area.to_vec()[..LEN], pattern(1)[..]);
        let info = qp.info().clone();
        qp.closed().await;
        info
    });
    let pd = Device::new().alloc_pd();
    let keybuf = pd.register(vec![0u8; 16], Access::LOCAL_WRITE).unwrap();
    let qp = connect(
        addr,
        &config,
        QpOptions::new(&pd).post_recv(9, keybuf.sge(..).unwrap()),
        b"",
    )
    .await
    .unwrap();
    let local = pd
        .register(pattern(1), Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    qp.send(local.sge(..0).unwrap()).await.unwrap();
    assert_eq!(qp.recv_cq().next().await.wr_id, 9);
    let key = RemoteKey::from_bytes(&keybuf.to_vec()).unwrap();
    qp.write(local.sge(..).unwrap(), key.slice(0, LEN as u32).unwrap())
        .await
        .unwrap();
    let back = pd
        .register(vec![0u8; LEN], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    qp.read(
        back.sge(..).unwrap(),
        key.slice(LEN as u64, LEN as u32).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(back.to_vec(), pattern(2));
    qp.send(local.sge(..0).unwrap()).await.unwrap();
    let client_info = qp.info().clone();
    qp.disconnect().await.unwrap();
    let server_info = tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        client_info.framing_params().mirrored(),
        server_info.framing_params()
    );
    (client_info, server_info)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mpa_revision_2_default() {
    let (c, s) = exchange(Config::default()).await;
    let f = c.framing_params();
    assert!(f.crc && !f.send_markers && !f.receive_markers);
    assert_eq!(c.mpa().map(|m| m.revision), Some(iwarp::Revision::Rev2));
    assert!(c.ift().is_none() && s.ift().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//= draft-culley-iwarp-mpa-02#7.1
//= type=test
//# MPA senders MUST insert a marker into the data stream at a 512 octet periodic interval in
//# the TCP Sequence Number Space.
//= draft-culley-iwarp-mpa-02#7.2
//= type=test
//# When sending an FPDU, the sender MUST include a valid CRC field.
async fn immediate_start_has_markers_and_crc_both_ways() {
    let (c, _) = exchange(Config::immediate_start()).await;
    assert_eq!(c.framing, iwarp::FramingInfo::ImmediateStart);
    assert_eq!(c.framing_params(), iwarp::FramingParams::IMMEDIATE_START);
    assert!(c.mpa().is_none() && c.peer_private_data().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ift_with_both_crcs() {
    let (c, s) = exchange(Config::ift()).await;
    let (ci, si) = (c.ift().unwrap(), s.ift().unwrap());
    assert!(c.framing_params().crc);
    assert!(c.mpa().is_none());
    // Each end puts the other's VTag in what it sends.
    assert_eq!(ci.tx.vtag, si.rx.vtag);
    assert_eq!(si.tx.vtag, ci.rx.vtag);
    assert_eq!(c.role, iwarp::Role::Initiator);
    assert_eq!(s.role, iwarp::Role::Responder);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ift_with_markers_both_ways() {
    let mut config = Config::ift();
    config.ift.send_markers = true;
    config.ift.receive_markers = iwarp::proto::ift::MarkerInterval::new(512);
    let (c, _) = exchange(config).await;
    let f = c.framing_params();
    assert!(f.send_markers && f.receive_markers);
    assert!(c.ift().unwrap().tx.markers.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ift_without_crcs() {
    let mut config = Config::ift();
    config.ift.header_crc = false;
    config.ift.payload_crc = false;
    let (c, _) = exchange(config).await;
    assert!(!c.framing_params().crc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mpa_markers_both_ways() {
    let config = Config::default().markers_on_receive(true);
    let (c, _) = exchange(config).await;
    let f = c.mpa().unwrap().params;
    assert!(f.send_markers && f.receive_markers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mpa_and_ift_do_not_mix() {
    let mut listener = Listener::bind("127.0.0.1:0", Config::ift()).await.unwrap();
    let addr = listener.local_addr();
    let pd = Device::new().alloc_pd();
    let mut config = Config::default();
    config.startup.reply_timeout = Duration::from_secs(2);
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        connect(addr, &config, QpOptions::new(&pd), b""),
    )
    .await
    .unwrap();
    assert!(
        r.is_err(),
        "an MPA initiator cannot connect to an IFT listener"
    );
    // Nothing valid reached the listener's accept queue.
    let waited = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(waited.is_err());
}
