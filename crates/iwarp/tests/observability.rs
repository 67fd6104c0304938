//! What a connection tells about itself: its counters
//! ([`QueuePair::stats`]) after real traffic over loopback TCP, and its
//! `tracing` log (the connection's span, a Terminate sent and received
//! with its decoded code, the end with its counters).

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use iwarp::{connect, Access, Config, Device, Listener, QpOptions, RemoteKey, STag};

const WAIT: Duration = Duration::from_secs(30);

/// The log of this test binary, from every thread.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Installs the subscriber once for the binary: debug for the `iwarp`
/// crates, no colours.
fn log() -> Log {
    static LOG: OnceLock<Log> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Log::default();
        let writer = log.clone();
        tracing_subscriber::fmt()
            .with_env_filter("iwarp=debug")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        log
    })
    .clone()
}

/// N Sends of S octets: the sender counts N FPDUs of exactly the octets
/// the FPDU layout gives (2 for the MPA length, 18 of headers, the
/// payload, no pad here, 4 of CRC), the receiver the same; N Sends each
/// way with their octets; no error, no Terminate; nothing sent back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_over_loopback_are_counted_exactly() {
    const N: usize = 50;
    const S: usize = 1000;
    const FPDU: u64 = 2 + 18 + S as u64 + 4;
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(async move {
        let req = listener.accept().await.unwrap();
        let pd = Device::new().alloc_pd();
        let inbox = pd.register(vec![0u8; N * S], Access::LOCAL_WRITE).unwrap();
        let mut opts = QpOptions::new(&pd);
        for i in 0..N {
            opts = opts.post_recv(i as u64, inbox.sge(i * S..(i + 1) * S).unwrap());
        }
        let qp = req.accept(opts, b"").await.unwrap();
        for _ in 0..N {
            let c = qp.recv_cq().next().await;
            assert_eq!(c.byte_len as usize, S);
        }
        let stats = qp.stats();
        done_tx.send(()).unwrap();
        qp.closed().await;
        stats
    });
    let pd = Device::new().alloc_pd();
    let qp = connect(addr, &Config::default(), QpOptions::new(&pd), b"")
        .await
        .unwrap();
    let buf = pd.register(vec![7u8; S], Access::empty()).unwrap();
    for _ in 0..N {
        qp.send(buf.sge(..).unwrap()).await.unwrap();
    }
    tokio::time::timeout(WAIT, done_rx).await.unwrap().unwrap();
    let client = qp.stats().connection;
    tokio::time::timeout(WAIT, qp.disconnect())
        .await
        .unwrap()
        .unwrap();
    let server = tokio::time::timeout(WAIT, server)
        .await
        .unwrap()
        .unwrap()
        .connection;
    let n = N as u64;
    assert_eq!((client.pdus_sent, client.octets_sent), (n, n * FPDU));
    assert_eq!(
        (server.pdus_received, server.octets_received),
        (n, n * FPDU)
    );
    assert_eq!((server.pdus_sent, client.pdus_received), (0, 0));
    assert_eq!(
        (client.messages.sends_sent, client.messages.send_octets_sent),
        (n, n * S as u64)
    );
    assert_eq!(
        (
            server.messages.sends_received,
            server.messages.send_octets_received
        ),
        (n, n * S as u64)
    );
    for s in [client, server] {
        assert_eq!(
            (s.crc_errors, s.marker_errors, s.other_framing_errors),
            (0, 0, 0)
        );
        assert_eq!((s.terminates_sent, s.terminates_received), (0, 0));
    }
}

/// An RDMA Write to an STag the server does not have: the server's log
/// says it sent a Terminate and names the error, the client's that it
/// received it, each in its connection's span (peer, role, framing), and
/// both counted it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminate_is_logged_decoded_in_the_connection_span_and_counted() {
    let log = log();
    let mut listener = Listener::bind("127.0.0.1:0", Config::default())
        .await
        .unwrap();
    let addr = listener.local_addr();
    let server = tokio::spawn(async move {
        let req = listener.accept().await.unwrap();
        let pd = Device::new().alloc_pd();
        let qp = req.accept(QpOptions::new(&pd), b"").await.unwrap();
        qp.closed().await;
        qp.stats().connection
    });
    let pd = Device::new().alloc_pd();
    let qp = connect(addr, &Config::default(), QpOptions::new(&pd), b"")
        .await
        .unwrap();
    let buf = pd.register(vec![7u8; 64], Access::empty()).unwrap();
    let nowhere = RemoteKey {
        stag: STag(0x00ab_cd00),
        addr: 0,
        len: 64,
    };
    // An RDMA Write completes once written, whatever the peer makes of
    // it: the Terminate comes after.
    let _ = tokio::time::timeout(WAIT, qp.write(buf.sge(..).unwrap(), nowhere))
        .await
        .unwrap();
    tokio::time::timeout(WAIT, qp.closed()).await.unwrap();
    let server = tokio::time::timeout(WAIT, server).await.unwrap().unwrap();
    let client = qp.stats().connection;
    assert_eq!((server.terminates_sent, client.terminates_received), (1, 1));
    assert_eq!(
        (client.messages.writes_sent, server.messages.writes_received),
        (1, 0)
    );
    let text = log.text();
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
            .to_owned()
    };
    let sent = line("sent Terminate");
    let received = line("received Terminate");
    assert!(sent.contains("role=Responder"), "{sent}");
    assert!(received.contains("role=Initiator"), "{received}");
    assert!(received.contains(&format!("peer={addr}")), "{received}");
    // The error in words, the same on both sides.
    assert!(sent.contains("STag"), "{sent}");
    let words = |l: &str| l.split("Terminate: ").nth(1).map(str::to_owned);
    assert_eq!(words(&sent), words(&received));
    let finished = line("finished (peer terminated");
    assert!(finished.contains("Terminates 0/1"), "{finished}");
}
