//! The soak server: accepts soak clients, checks every octet they Send and
//! Write, and acknowledges each operation with a Send of its own pattern.

use std::sync::Arc;

use iwarp::{
    Access, Completion, CompletionStatus, Config, ConnectRequest, ConnectionError, Listener,
    MemoryRegion, QpOptions, QueuePair,
};
use serde::Serialize;

use super::pattern::{self, Stream};
use super::summary::{add, bump, Counters};
use super::wire::{
    Header, Hello, Kind, Welcome, HEADER_LEN, STATUS_BAD_HEADER, STATUS_MISMATCH, STATUS_OK,
};
use super::{ack_len, ack_payload_len, SoakError};

/// One line per connection that ended.
#[derive(Debug, Serialize)]
struct ConnectionEnd {
    #[serde(rename = "type")]
    kind: &'static str,
    peer: String,
    connection: u32,
    operations: u64,
    bytes_verified: u64,
    mismatches: u64,
    /// Why it ended: "peer closed" for a clean end.
    end: String,
    clean: bool,
}

/// How the server reports each connection's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// A line of text.
    Text,
    /// A JSON object.
    Json,
    /// Nothing (the loopback run's own server).
    Quiet,
}

/// Serves on `listener` until the future `stop` completes, counting into
/// `counters`.
pub async fn serve(
    mut listener: Listener,
    counters: Arc<Counters>,
    lines: Lines,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        let request = tokio::select! {
            r = listener.accept() => r,
            () = &mut stop => return,
        };
        match request {
            Ok(request) => {
                let counters = counters.clone();
                tokio::spawn(async move {
                    if let Err(e) = connection(request, &counters, lines).await {
                        bump(&counters.connection_errors);
                        eprintln!("iwarp soak: server: {e}");
                    }
                });
            }
            Err(e) => {
                eprintln!("iwarp soak: server: {e}");
                return;
            }
        }
    }
}

/// The server's buffers for one client.
struct Buffers {
    /// `depth + 1` receive slots of a header and `max_size` octets.
    inbox: MemoryRegion,
    /// `depth` slots the client Writes into.
    landing: MemoryRegion,
    /// The pattern the client Reads.
    source: MemoryRegion,
    /// The ack being sent.
    ack: MemoryRegion,
}

async fn connection(
    request: ConnectRequest,
    counters: &Counters,
    lines: Lines,
) -> Result<(), SoakError> {
    let peer = request.peer_addr();
    let Some(hello) = Hello::parse(request.private_data()) else {
        request.reject(b"not a soak client").await?;
        return Err(SoakError::Protocol(format!("{peer}: not a soak client")));
    };
    let max = hello.max_size as usize;
    let depth = usize::from(hello.depth.max(1));
    let pd = crate::device().alloc_pd();
    let local = Access::LOCAL_WRITE;
    let mut source = vec![0u8; max];
    pattern::fill(
        &mut source,
        pattern::seed(hello.seed, hello.connection, Stream::Source, 0),
    );
    let b = Buffers {
        inbox: pd.register(vec![0; (depth + 1) * (HEADER_LEN + max)], local)?,
        landing: pd.register(vec![0; depth * max], local | Access::REMOTE_WRITE)?,
        source: pd.register(source, Access::REMOTE_READ)?,
        ack: pd.register(vec![0; HEADER_LEN + ack_len(max)], Access::empty())?,
    };
    let slot = HEADER_LEN + max;
    let mut opts = QpOptions::new(&pd);
    for i in 0..=depth {
        opts = opts.post_recv(i as u64, b.inbox.sge(i * slot..(i + 1) * slot)?);
    }
    let welcome = Welcome {
        landing: b.landing.remote_key(),
        source: b.source.remote_key(),
    };
    let qp = request.accept(opts, &welcome.to_bytes()).await?;
    let (mut operations, mut verified, mut mismatches) = (0u64, 0u64, 0u64);
    // Whatever ends the loop, the connection's end is reported below.
    loop {
        let c = tokio::select! {
            c = qp.recv_cq().next() => c,
            () = qp.closed() => break,
        };
        if c.status != CompletionStatus::Success {
            break;
        }
        let (header, status, checked) = check(&b, &hello, slot, &c);
        operations += 1;
        verified += checked;
        add(&counters.bytes_verified, checked);
        if status != STATUS_OK {
            mismatches += 1;
            bump(&counters.mismatches);
        }
        let at = c.wr_id as usize * slot;
        let reposted = b
            .inbox
            .sge(at..at + slot)
            .and_then(|sge| qp.post_recv(c.wr_id, sge));
        if reposted.is_err()
            || acknowledge(&qp, &b, &hello, header, status, checked)
                .await
                .is_err()
        {
            break;
        }
    }
    if qp.error().is_none() {
        // The loop ended on a local failure: close, so the error is known.
        let _ = qp.disconnect().await;
    }
    let end = qp.error().unwrap_or(ConnectionError::PeerClosed);
    let clean = end == ConnectionError::PeerClosed;
    if clean {
        bump(&counters.connections_completed);
    } else {
        bump(&counters.connection_errors);
    }
    let line = ConnectionEnd {
        kind: "connection_end",
        peer: peer.to_string(),
        connection: hello.connection,
        operations,
        bytes_verified: verified,
        mismatches,
        end: end.to_string(),
        clean,
    };
    match lines {
        Lines::Json => println!("{}", serde_json::to_string(&line).unwrap_or_default()),
        Lines::Quiet => {}
        Lines::Text => println!(
            "connection {} from {}: {} operations, {} octets verified, {} mismatches; ended: {}",
            line.connection, line.peer, operations, verified, mismatches, line.end
        ),
    }
    Ok(())
}

/// Checks one received Send (and, for a Written notice, the landing slot);
/// returns its header, the status to report and the octets checked.
fn check(b: &Buffers, hello: &Hello, slot: usize, c: &Completion) -> (Header, u8, u64) {
    let at = c.wr_id as usize * slot;
    let received = c.byte_len as usize;
    let bad = |h| (h, STATUS_BAD_HEADER, 0);
    let fallback = Header {
        kind: Kind::Ack,
        status: 0,
        lane: 0,
        op: 0,
        len: 0,
        verified: 0,
    };
    let Some(header) = b.inbox.read_with(|m| Header::parse(&m[at..at + received])) else {
        return bad(fallback);
    };
    let len = header.len as usize;
    let max = hello.max_size as usize;
    let seed = |s| pattern::seed(hello.seed, hello.connection, s, header.op);
    let mismatch = match header.kind {
        Kind::Send if received == HEADER_LEN + len => b.inbox.read_with(|m| {
            pattern::first_mismatch(&m[at + HEADER_LEN..at + received], seed(Stream::Send))
        }),
        Kind::Written
            if received == HEADER_LEN
                && len <= max
                && usize::from(header.lane) < usize::from(hello.depth) =>
        {
            let from = usize::from(header.lane) * max;
            b.landing
                .read_with(|m| pattern::first_mismatch(&m[from..from + len], seed(Stream::Write)))
        }
        _ => return bad(header),
    };
    match mismatch {
        None => (header, STATUS_OK, len as u64),
        Some(_) => (header, STATUS_MISMATCH, 0),
    }
}

/// Sends the ack for `header`: the status and a payload of the ack pattern
/// whose length follows from the operation's number.
async fn acknowledge(
    qp: &QueuePair,
    b: &Buffers,
    hello: &Hello,
    header: Header,
    status: u8,
    verified: u64,
) -> Result<(), SoakError> {
    let len = ack_payload_len(header.op, hello.max_size as usize);
    let ack = Header {
        kind: Kind::Ack,
        status,
        lane: header.lane,
        op: header.op,
        len: len as u32,
        verified: verified as u32,
    };
    b.ack.write_with(|m| {
        m[..HEADER_LEN].copy_from_slice(&ack.to_bytes());
        pattern::fill(
            &mut m[HEADER_LEN..HEADER_LEN + len],
            pattern::seed(hello.seed, hello.connection, Stream::Ack, header.op),
        );
    });
    qp.send(b.ack.sge(..HEADER_LEN + len)?).await?;
    Ok(())
}

/// Listens with the soak's configuration.
pub async fn listen(addr: &str, port: u16) -> Result<Listener, SoakError> {
    Ok(Listener::bind((addr, port), config()).await?)
}

/// The configuration both ends use: the defaults (MPA revision 2, CRC).
pub fn config() -> Config {
    Config::default()
}
