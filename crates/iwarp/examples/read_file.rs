//! A client RDMA-Reads a file that a server registered.
//!
//! The server reads the file into a region registered for remote reading
//! only, once, in one protection domain that all its connections share.
//! For each client it Sends the region's `RemoteKey` (16 octets: address,
//! STag, length, as rping lays it out), then the file's length (8 octets)
//! and its CRC32c (4 octets). The client RDMA-Reads the file in chunks,
//! several Reads in flight, straight into its own region, checks the
//! CRC32c, writes the file out, says it is done, and disconnects.
//!
//! MPA rule 4 (RFC 5044 §7.1.2) keeps the server, the responder, from
//! sending before it has received something: the client's zero-length
//! "ready" Send opens the exchange.
//!
//! ```text
//! cargo run -p iwarp --example read_file                          # both ends in one process
//! cargo run -p iwarp --example read_file -- --serve FILE --listen 0.0.0.0:4792
//! cargo run -p iwarp --example read_file -- --fetch 192.0.2.1:4792 --out COPY [--chunk OCTETS] [--depth N]
//! ```

use std::error::Error;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use iwarp::proto::framing::crc::crc32c;
use iwarp::{
    connect, Access, CompletionStatus, Config, ConnectRequest, Device, Listener, MemoryRegion,
    ProtectionDomain, QpOptions, RemoteKey,
};

type BoxError = Box<dyn Error + Send + Sync>;

/// Octets of the server's announcement: the key, the length, the CRC32c.
const ANNOUNCEMENT: usize = RemoteKey::WIRE_LEN + 8 + 4;
/// Receive ids.
const READY: u64 = 1;
const DONE: u64 = 2;
const KEY: u64 = 3;

/// What the server shares with all its connections.
pub struct Shared {
    /// The domain of the file's region and of every connection.
    pub pd: ProtectionDomain,
    /// The file's contents, remotely readable.
    pub file: MemoryRegion,
    /// The announcement every client receives.
    pub announcement: MemoryRegion,
}

impl Shared {
    /// Registers `contents` for remote reading, in a new protection
    /// domain of `device`.
    pub fn new(device: &Device, contents: Vec<u8>) -> Result<Self, BoxError> {
        let pd = device.alloc_pd();
        let crc = crc32c(&contents);
        let len = contents.len() as u64;
        let file = pd.register(contents, Access::REMOTE_READ)?;
        let mut a = file.remote_key().to_bytes().to_vec();
        a.extend(len.to_be_bytes());
        a.extend(crc.to_be_bytes());
        let announcement = pd.register(a, Access::empty())?;
        Ok(Self {
            pd,
            file,
            announcement,
        })
    }
}

/// Serves one client: announces the file and waits until the client is
/// done reading.
pub async fn serve_one(request: ConnectRequest, shared: Arc<Shared>) -> Result<(), BoxError> {
    let flags = shared.pd.register(vec![0; 0], Access::LOCAL_WRITE)?;
    // Both of the client's Sends may come at any time: their receives are
    // posted with the queue pair.
    let opts = QpOptions::new(&shared.pd)
        .post_recv(READY, flags.sge(..)?)
        .post_recv(DONE, flags.sge(..)?);
    let qp = request.accept(opts, b"").await?;
    let ready = qp.recv_cq().next().await;
    if ready.status != CompletionStatus::Success {
        return Err(format!("no ready message: {ready:?}").into());
    }
    qp.send(shared.announcement.sge(..)?).await?;
    let done = qp.recv_cq().next().await;
    if done.status != CompletionStatus::Success {
        return Err(format!("the client left without finishing: {done:?}").into());
    }
    qp.closed().await;
    Ok(())
}

/// Serves `contents` to every client that connects, each in its own task.
pub async fn serve(mut listener: Listener, contents: Vec<u8>) -> Result<(), BoxError> {
    let shared = Arc::new(Shared::new(&Device::new(), contents)?);
    loop {
        let request = listener.accept().await?;
        let peer = request.peer_addr();
        let shared = shared.clone();
        tokio::spawn(async move {
            match serve_one(request, shared).await {
                Ok(()) => println!("{peer}: served"),
                Err(e) => eprintln!("{peer}: {e}"),
            }
        });
    }
}

/// Fetches the file the server at `addr` offers into memory of `device`,
/// in Reads of `chunk` octets with up to `depth` in flight; checks its
/// CRC32c.
pub async fn fetch(
    device: &Device,
    addr: SocketAddr,
    chunk: usize,
    depth: usize,
) -> Result<Vec<u8>, BoxError> {
    let pd = device.alloc_pd();
    let inbox = pd.register(vec![0; ANNOUNCEMENT], Access::LOCAL_WRITE)?;
    let nothing = pd.register(Vec::new(), Access::empty())?;
    let opts = QpOptions::new(&pd).post_recv(KEY, inbox.sge(..)?);
    let qp = connect(addr, &Config::default(), opts, b"").await?;
    qp.send(nothing.sge(..)?).await?;
    let got = qp.recv_cq().next().await;
    if got.status != CompletionStatus::Success || got.byte_len as usize != ANNOUNCEMENT {
        return Err(format!("no announcement: {got:?}").into());
    }
    let a = inbox.to_vec();
    let key = RemoteKey::from_bytes(&a).ok_or("bad key")?;
    let len = u64::from_be_bytes(a[16..24].try_into()?) as usize;
    let crc = u32::from_be_bytes(a[24..28].try_into()?);
    if len != key.len as usize {
        return Err("the key and the length disagree".into());
    }
    // The Read Responses land here: local and remote write.
    let sink = pd.register(vec![0; len], Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    let chunk = chunk.max(1);
    let chunks = len.div_ceil(chunk);
    let (mut posted, mut completed) = (0, 0);
    while completed < chunks {
        while posted < chunks && posted - completed < depth.max(1) {
            let at = posted * chunk;
            let n = chunk.min(len - at);
            let from = key
                .slice(at as u64, n as u32)
                .ok_or("chunk outside the key")?;
            qp.rdma_read(posted as u64, sink.sge(at..at + n)?, from)?;
            posted += 1;
        }
        let done = qp.send_cq().next().await;
        if done.status != CompletionStatus::Success {
            return Err(format!("Read {} failed: {done:?}", done.wr_id).into());
        }
        // Completions come in posting order.
        completed += 1;
    }
    let contents = sink.to_vec();
    if crc32c(&contents) != crc {
        return Err("CRC32c mismatch".into());
    }
    qp.send(nothing.sge(..)?).await?;
    qp.disconnect().await?;
    Ok(contents)
}

/// Both ends in this process, each with its own device as if on two
/// machines: serves a file of `len` generated octets, fetches it into
/// `out` and compares the two files.
pub async fn run_local(len: usize, chunk: usize, depth: usize, dir: &Path) -> Result<(), BoxError> {
    // Unique names: runs may share a process (tests) or a directory.
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stem = format!("iwarp-read-file-{}-{run}", std::process::id());
    let source = dir.join(format!("{stem}.src"));
    let copy = dir.join(format!("{stem}.copy"));
    let contents: Vec<u8> = (0..len).map(|i| (i * 31 + i / 4096) as u8).collect();
    std::fs::write(&source, &contents)?;
    let result = async {
        let mut listener = Listener::bind("127.0.0.1:0", Config::default()).await?;
        let addr = listener.local_addr();
        let shared = Arc::new(Shared::new(&Device::new(), std::fs::read(&source)?)?);
        let server = tokio::spawn(async move {
            let request = listener.accept().await?;
            serve_one(request, shared).await
        });
        let fetched = fetch(&Device::new(), addr, chunk, depth).await?;
        server.await??;
        std::fs::write(&copy, &fetched)?;
        if std::fs::read(&copy)? != std::fs::read(&source)? {
            return Err::<(), BoxError>("the copy differs".into());
        }
        Ok(())
    }
    .await;
    let _ = std::fs::remove_file(&source);
    let _ = std::fs::remove_file(&copy);
    result
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let (mut serve_path, mut listen, mut target, mut out) = (None, None, None, None);
    let (mut chunk, mut depth) = (1 << 20, 4);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--serve" => serve_path = Some(value()?),
            "--listen" => listen = Some(value()?),
            "--fetch" => target = Some(value()?),
            "--out" => out = Some(value()?),
            "--chunk" => chunk = value()?.parse()?,
            "--depth" => depth = value()?.parse()?,
            _ => {
                return Err("usage: read_file [--serve FILE [--listen ADDR] | \
                            --fetch ADDR --out FILE [--chunk OCTETS] [--depth N]]"
                    .into())
            }
        }
    }
    match (serve_path, target) {
        (Some(path), None) => {
            let contents = std::fs::read(&path)?;
            let listener = Listener::bind(
                listen.as_deref().unwrap_or("0.0.0.0:4792"),
                Config::default(),
            )
            .await?;
            println!(
                "serving {path} ({} octets) on {}",
                contents.len(),
                listener.local_addr()
            );
            serve(listener, contents).await
        }
        (None, Some(addr)) => {
            let addr = tokio::net::lookup_host(addr)
                .await?
                .next()
                .ok_or("no such address")?;
            let out = out.ok_or("--fetch needs --out FILE")?;
            let start = std::time::Instant::now();
            let contents = fetch(&Device::new(), addr, chunk, depth).await?;
            let elapsed = start.elapsed();
            std::fs::write(&out, &contents)?;
            println!(
                "read {} octets in {elapsed:?} ({:.1} MB/s), CRC32c verified, written to {out}",
                contents.len(),
                contents.len() as f64 / elapsed.as_secs_f64() / 1e6
            );
            Ok(())
        }
        (None, None) => {
            let len = 8 * (1 << 20) + 123;
            run_local(len, chunk, depth, &std::env::temp_dir()).await?;
            println!("read a file of {len} octets over loopback and verified the copy");
            Ok(())
        }
        (Some(_), Some(_)) => Err("--serve and --fetch exclude each other".into()),
    }
}
