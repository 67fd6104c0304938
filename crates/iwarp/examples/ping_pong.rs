//! Send/Receive ping-pong over iWARP, with round-trip times.
//!
//! The client Sends a ping; the server, which always has a receive posted
//! (iWARP has no receiver-not-ready: a Send that finds no receive ends
//! the connection), posts its next receive and Sends the same octets back
//! as the pong. The client times each round trip and checks each pong.
//!
//! ```text
//! cargo run -p iwarp --example ping_pong                      # both ends in one process
//! cargo run -p iwarp --example ping_pong -- --server 0.0.0.0:4791
//! cargo run -p iwarp --example ping_pong -- --connect 192.0.2.1:4791 --count 10000 --size 4096
//! ```
//!
//! The client tells the server the message size in its private data, so
//! the server needs no options of its own. Run it in release mode
//! (`--release`) for meaningful times.

use std::error::Error;
use std::time::{Duration, Instant};

use iwarp::{
    connect, Access, CompletionStatus, Config, ConnectRequest, Device, Listener, QpOptions,
};

/// The receive the server keeps posted.
const PING: u64 = 1;
/// The receive the client posts for each pong.
const PONG: u64 = 2;

/// Round-trip times of one run.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Message size in octets.
    pub size: usize,
    /// Every round trip, in order.
    pub rtts: Vec<Duration>,
}

impl Summary {
    /// The given percentile (0 to 100) of the round-trip times.
    pub fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.rtts.clone();
        sorted.sort();
        let i = ((sorted.len() - 1) as f64 * p / 100.0).round() as usize;
        sorted[i]
    }

    /// A one-line report.
    pub fn report(&self) -> String {
        let mean = self.rtts.iter().sum::<Duration>() / self.rtts.len() as u32;
        format!(
            "{} round trips of {} octets: min {:?}, median {:?}, mean {:?}, p99 {:?}, max {:?}",
            self.rtts.len(),
            self.size,
            self.percentile(0.0),
            self.percentile(50.0),
            mean,
            self.percentile(99.0),
            self.percentile(100.0),
        )
    }
}

/// Serves one client with memory of `device`: echoes each ping until the
/// client disconnects.
pub async fn serve_one(
    device: &Device,
    request: ConnectRequest,
) -> Result<u64, Box<dyn Error + Send + Sync>> {
    let size = request
        .private_data()
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or("the client did not say the message size")?;
    let pd = device.alloc_pd();
    let inbox = pd.register(vec![0; size], Access::LOCAL_WRITE)?;
    let outbox = pd.register(vec![0; size], Access::empty())?;
    // The first ping may arrive before accept() returns: its receive is
    // posted with the queue pair.
    let opts = QpOptions::new(&pd).post_recv(PING, inbox.sge(..)?);
    let qp = request.accept(opts, b"").await?;
    let mut pongs = 0;
    loop {
        let done = qp.recv_cq().next().await;
        if done.status != CompletionStatus::Success {
            // Flushed: the client has gone.
            break;
        }
        outbox.copy_from(0, &inbox.to_vec()[..done.byte_len as usize])?;
        // The next ping comes only after this pong, so posting its
        // receive first means it always finds one.
        qp.post_recv(PING, inbox.sge(..)?)?;
        qp.send(outbox.sge(..done.byte_len as usize)?).await?;
        pongs += 1;
    }
    qp.closed().await;
    Ok(pongs)
}

/// Accepts clients for ever, each served in its own task, all with memory
/// of one device.
pub async fn serve(mut listener: Listener) -> Result<(), Box<dyn Error + Send + Sync>> {
    let device = Device::new();
    loop {
        let request = listener.accept().await?;
        let peer = request.peer_addr();
        let device = device.clone();
        tokio::spawn(async move {
            match serve_one(&device, request).await {
                Ok(n) => println!("{peer}: {n} pongs"),
                Err(e) => eprintln!("{peer}: {e}"),
            }
        });
    }
}

/// Runs `count` round trips of `size`-octet pings against the server at
/// `addr`, checking every pong, with memory of `device`.
pub async fn ping(
    device: &Device,
    addr: std::net::SocketAddr,
    count: usize,
    size: usize,
) -> Result<Summary, Box<dyn Error + Send + Sync>> {
    let pd = device.alloc_pd();
    let ping = pd.register(vec![0; size], Access::empty())?;
    let pong = pd.register(vec![0; size], Access::LOCAL_WRITE)?;
    let qp = connect(
        addr,
        &Config::default(),
        QpOptions::new(&pd),
        &(size as u32).to_be_bytes(),
    )
    .await?;
    let mut rtts = Vec::with_capacity(count);
    for i in 0..count {
        // A different ping each time, so a stale pong cannot pass.
        let mut message = vec![0u8; size];
        for (j, b) in message.iter_mut().enumerate() {
            *b = (i + j) as u8;
        }
        ping.copy_from(0, &message)?;
        let start = Instant::now();
        // Verbs style: post the receive for the pong before the ping goes
        // out, then wait for it on the completion queue.
        qp.post_recv(PONG, pong.sge(..)?)?;
        qp.send(ping.sge(..)?).await?;
        let done = qp.recv_cq().next().await;
        rtts.push(start.elapsed());
        if done.status != CompletionStatus::Success || done.byte_len as usize != size {
            return Err(format!("pong {i}: {done:?}").into());
        }
        if pong.to_vec() != message {
            return Err(format!("pong {i} differs from its ping").into());
        }
    }
    qp.disconnect().await?;
    Ok(Summary { size, rtts })
}

/// Both ends in this process, over loopback, each with its own device as
/// if on two machines.
pub async fn run_local(count: usize, size: usize) -> Result<Summary, Box<dyn Error + Send + Sync>> {
    let mut listener = Listener::bind("127.0.0.1:0", Config::default()).await?;
    let addr = listener.local_addr();
    let server = tokio::spawn(async move {
        let request = listener.accept().await?;
        serve_one(&Device::new(), request).await
    });
    let summary = ping(&Device::new(), addr, count, size).await?;
    let pongs = server.await??;
    if pongs != count as u64 {
        return Err(format!("the server sent {pongs} pongs for {count} pings").into());
    }
    Ok(summary)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let mut args = std::env::args().skip(1);
    let (mut server, mut target) = (None, None);
    let (mut count, mut size) = (1000, 64);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--server" => server = Some(value()?),
            "--connect" => target = Some(value()?),
            "--count" => count = value()?.parse()?,
            "--size" => size = value()?.parse()?,
            _ => {
                return Err(
                    "usage: ping_pong [--server ADDR | --connect ADDR] [--count N] [--size OCTETS]"
                        .into(),
                )
            }
        }
    }
    if count == 0 {
        return Err("--count must be at least 1".into());
    }
    match (server, target) {
        (Some(addr), None) => {
            let listener = Listener::bind(addr, Config::default()).await?;
            println!("listening on {}", listener.local_addr());
            serve(listener).await
        }
        (None, Some(addr)) => {
            let addr = tokio::net::lookup_host(addr)
                .await?
                .next()
                .ok_or("no such address")?;
            let device = Device::new();
            println!("{}", ping(&device, addr, count, size).await?.report());
            Ok(())
        }
        (None, None) => {
            println!("{}", run_local(count, size).await?.report());
            Ok(())
        }
        (Some(_), Some(_)) => Err("--server and --connect exclude each other".into()),
    }
}
