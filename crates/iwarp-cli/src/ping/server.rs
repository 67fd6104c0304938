//! The server side: rping's `-s`, and `-P` for a persistent server.
//!
//! Per ping the server waits for the client's start-buffer advertisement, RDMA-Reads that
//! many octets from it, Sends "go", waits for the sink advertisement, RDMA-Writes the text
//! back (up to and including its NUL, as rping's `strlen + 1`), and Sends "go" again. The
//! "go" Sends carry 16 zero octets: rping's server never fills its send buffer, and clients
//! only check the length.
//!
//! A client ends the session by disconnecting while the server waits for its next ping;
//! anything else (a malformed message, a refused access, a disconnect in the middle of a
//! ping) is an error. Without `-P` the server serves one client and exits with that
//! session's outcome; with `-P` each client is served in its own task, as rping's
//! persistent server gives each its own thread, and errors are reported and survived.

use std::io::Write as _;

use iwarp::{Access, ConnectRequest, ConnectionError, Listener, RemoteKey};

use super::args::PingConfig;
use super::endpoint::{register, Buffers, Endpoint};
use super::error::{Peer, PingError, Result};
use super::message::{c_str, INFO_LEN, MAX_SIZE};
use super::report::served_json;
use super::Log;

/// What a "go" Send carries: nothing anyone reads, as in rping.
const GO: [u8; INFO_LEN] = [0; INFO_LEN];

/// Listens on `bind:port` and serves one client, or clients until killed if `persistent`.
pub async fn run(cfg: &PingConfig, bind: &str, port: u16, persistent: bool) -> Result<()> {
    let addr = tokio::net::lookup_host((bind, port))
        .await
        .map_err(|e| PingError::Resolve {
            host: bind.to_string(),
            reason: e.to_string(),
        })?
        .next()
        .ok_or_else(|| PingError::Resolve {
            host: bind.to_string(),
            reason: "no address".into(),
        })?;
    let mut listener = Listener::bind(addr, cfg.iwarp_config())
        .await
        .map_err(|source| PingError::Listen { addr, source })?;
    // Always said, so that a script using -p 0 learns the port.
    eprintln!("iwarp ping: server listening on {}", listener.local_addr());
    let listen_error = |source| PingError::Listen { addr, source };
    if !persistent {
        let request = listener.accept().await.map_err(listen_error)?;
        // One client only, as rping without -P: later ones are refused rather than left
        // waiting for an MPA Reply that would never come.
        drop(listener);
        return serve(cfg, request).await;
    }
    loop {
        let request = listener.accept().await.map_err(listen_error)?;
        let cfg = cfg.clone();
        tokio::spawn(async move {
            let peer = request.peer_addr();
            if let Err(e) = serve(&cfg, request).await {
                eprintln!("iwarp ping: client {peer}: error: {e}");
            }
        });
    }
}

/// Accepts one connection request and serves pings until the client disconnects.
async fn serve(cfg: &PingConfig, request: ConnectRequest) -> Result<()> {
    let peer = request.peer_addr();
    let log = Log::from(cfg).for_peer(peer);
    if let Some(r) = request.request() {
        let enhanced = r.enhanced.map_or("no enhanced data".to_string(), |e| {
            format!(
                "IRD/ORD {}/{}{}",
                e.ird,
                e.ord,
                if e.peer_to_peer { ", peer-to-peer" } else { "" }
            )
        });
        log.debug(format_args!(
            "MPA Request: revision {}, C={}, M={}, {enhanced}, {} octets of private data",
            r.revision as u8,
            u8::from(r.crc),
            u8::from(r.markers),
            r.private_data.len()
        ));
    }
    let buffers = Buffers::new()?;
    // The RDMA Read sink, which is also the source of the Write back. On iWARP the Read
    // Response is a tagged write into it, hence remote write as well as local.
    let sink = register(
        &buffers.pd,
        cfg.size as usize,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
    )?;
    let options = buffers.qp_options()?;
    // rping accepts with no private data.
    let qp = request
        .accept(options, &[])
        .await
        .map_err(|e| PingError::startup(peer, e, false))?;
    let ep = Endpoint::new(qp, buffers, Peer::Client, cfg.timeout);
    eprintln!("iwarp ping: client {peer} connected");
    log.debug(format_args!("connected: {}", ep.describe()));

    let mut session = Session {
        ep: &ep,
        sink,
        log,
        served: 0,
    };
    let outcome = session.run().await;
    ep.disconnect().await;
    eprintln!(
        "iwarp ping: client {peer} disconnected after {} {}",
        session.served,
        if session.served == 1 { "ping" } else { "pings" }
    );
    if cfg.json {
        let error = outcome.as_ref().err().map(ToString::to_string);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "{}",
            served_json(peer, session.served, error.as_deref())
        );
        let _ = out.flush();
    }
    outcome
}

/// One client's pings.
struct Session<'a> {
    ep: &'a Endpoint,
    sink: iwarp::MemoryRegion,
    log: Log,
    served: u64,
}

impl Session<'_> {
    /// Serves pings until the client disconnects between two of them.
    async fn run(&mut self) -> Result<()> {
        loop {
            let during = format!("while waiting for ping {}", self.served);
            let info = match self.ep.recv_info(&during).await {
                Ok(info) => info,
                // The end of the session: the client went away between pings.
                Err(PingError::PeerClosed { .. }) => return Ok(()),
                Err(PingError::ConnectionFailed { .. })
                    if matches!(self.ep.qp.error(), Some(ConnectionError::Lost(_))) =>
                {
                    self.log
                        .debug(format_args!("connection lost between pings"));
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            self.ping(info).await?;
            self.served += 1;
        }
    }

    /// The rest of one ping, once the start advertisement is in.
    async fn ping(&mut self, start_info: [u8; INFO_LEN]) -> Result<()> {
        let n = self.served;
        let during = |step: &str| format!("during ping {n} ({step})");
        let source = key(&start_info);
        self.log.debug(format_args!(
            "ping {n}: client's start buffer at {:#x}, STag {:#x}, {} octets",
            source.addr, source.stag.0, source.len
        ));
        let len = self.fit(source.len, &during("the start buffer"))?;

        let sge = self.sge(len)?;
        self.ep
            .read(sge, source, &during("RDMA Read of the start buffer"))
            .await?;
        let data = self.sink.read_with(|b| b[..len].to_vec());
        if self.log.verbose {
            let line = [b"server ping data: ", c_str(&data), b"\n"].concat();
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&line).and_then(|()| out.flush());
        }
        self.ep
            .send_info(&GO, &during("sending \"go\" after the RDMA Read"))
            .await?;

        let sink_info = self
            .ep
            .recv_info(&during("waiting for the sink buffer"))
            .await?;
        let dest = key(&sink_info);
        self.log.debug(format_args!(
            "ping {n}: client's sink buffer at {:#x}, STag {:#x}, {} octets",
            dest.addr, dest.stag.0, dest.len
        ));
        // rping writes strlen + 1 octets: the text and its NUL. Never more than was read,
        // nor more than the client offered.
        let text = (c_str(&data).len() + 1).min(len);
        let write_len = text.min(dest.len as usize);
        let sge = self.sge(write_len)?;
        self.ep
            .write(sge, dest, &during("RDMA Write to the sink buffer"))
            .await?;
        self.ep
            .send_info(&GO, &during("sending \"go\" after the RDMA Write"))
            .await?;
        self.log
            .debug(format_args!("ping {n}: wrote {write_len} octets back"));
        Ok(())
    }

    /// Checks an advertised length and grows the sink to hold it. rping's server reads into
    /// a buffer of its own `-S` size and fails if a client advertises more; growing up to
    /// rping's limit serves any rping client whatever the sizes given on the two sides.
    fn fit(&mut self, len: u32, during: &str) -> Result<usize> {
        if len > MAX_SIZE {
            return Err(PingError::AdvertisementTooLarge {
                peer: Peer::Client,
                len,
                max: MAX_SIZE,
                during: during.to_string(),
            });
        }
        let len = len as usize;
        if len > self.sink.len() {
            self.log
                .debug(format_args!("growing the buffer to {len} octets"));
            self.sink = register(
                self.sink.pd(),
                len,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )?;
        }
        Ok(len)
    }

    fn sge(&self, len: usize) -> Result<iwarp::Sge> {
        self.sink.sge(..len).map_err(|source| PingError::Local {
            what: "describing the data buffer".into(),
            source,
        })
    }
}

/// The advertisement's fields. Always 16 octets here: `recv_info` checked the length.
fn key(info: &[u8; INFO_LEN]) -> RemoteKey {
    RemoteKey::from_bytes(info).unwrap_or(RemoteKey {
        stag: iwarp::STag(0),
        addr: 0,
        len: 0,
    })
}
