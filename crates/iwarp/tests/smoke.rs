//! A first end-to-end check: connect, accept, and every operation once.

use std::time::Duration;

use iwarp::{connect, Access, Config, Device, Listener, QpOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_once() {
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let server = tokio::spawn(async move {
        let req = listener.accept().await.unwrap();
        assert_eq!(req.private_data(), b"hello");
        let pd = Device::new().alloc_pd();
        let inbox = pd
            .register(
                vec![0u8; 4096],
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            )
            .unwrap();
        inbox.copy_from(1000, b"readable").unwrap();
        // iWARP has no receiver-not-ready: the receive for the client's
        // first Send must be posted before the connection moves data.
        let opts = QpOptions::new(&pd).post_recv(1, inbox.sge(0..64).unwrap());
        let qp = req.accept(opts, b"welcome").await.unwrap();
        // Receive the client's Send, which carries nothing but a ping.
        let c = qp.recv_cq().next().await;
        assert_eq!((c.wr_id, c.byte_len), (1, 5));
        assert_eq!(&inbox.to_vec()[..5], b"ping!");
        // Tell the client where our buffer is, with the receive for its
        // Write notice already posted.
        let key = pd
            .register(inbox.remote_key().to_bytes().to_vec(), Access::empty())
            .unwrap();
        qp.post_recv(2, inbox.sge(3000..3100).unwrap()).unwrap();
        qp.send(key.sge(..).unwrap()).await.unwrap();
        // Wait for the client's Write notice.
        let c = qp.recv_cq().next().await;
        assert_eq!((c.wr_id, c.byte_len), (2, 4));
        assert_eq!(&inbox.to_vec()[2000..2010], b"written!!!");
        qp.closed().await;
    });

    let pd = Device::new().alloc_pd();
    let qp = connect(addr, &Config::default(), QpOptions::new(&pd), b"hello")
        .await
        .unwrap();
    assert_eq!(qp.info().peer_private_data(), b"welcome");
    assert!(qp.info().framing_params().crc);
    let buf = pd
        .register(vec![0u8; 4096], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    buf.copy_from(0, b"ping!").unwrap();
    let recv = qp.recv(buf.sge(100..116).unwrap());
    let send = qp.send(buf.sge(0..5).unwrap());
    let (r, s) = tokio::join!(recv, send);
    s.unwrap();
    assert_eq!(r.unwrap().byte_len, 16);
    let key = iwarp::RemoteKey::from_bytes(&buf.to_vec()[100..116]).unwrap();
    buf.copy_from(200, b"written!!!").unwrap();
    qp.write(buf.sge(200..210).unwrap(), key.slice(2000, 10).unwrap())
        .await
        .unwrap();
    let c = qp
        .read(buf.sge(300..308).unwrap(), key.slice(1000, 8).unwrap())
        .await
        .unwrap();
    assert_eq!(c.byte_len, 8);
    assert_eq!(&buf.to_vec()[300..308], b"readable");
    qp.send(buf.sge(0..4).unwrap()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), qp.disconnect())
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
}
