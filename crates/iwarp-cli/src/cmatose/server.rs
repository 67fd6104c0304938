//! The server side: ucmatose without `-s`. Accepts `-c` connections, each with its receives
//! posted; then Sends `-C` messages on each, takes as many back, and disconnects.

use iwarp::Listener;

use super::args::CmatoseConfig;
use super::node::{Buffers, Node};
use super::{on_each, say};
use crate::ping::error::{Peer, PingError, Result};

/// Why a server's Sends may never complete against a ucmatose client.
const RULE_4: &str = ": the client has sent nothing, and an MPA server may send nothing before \
    the client's first message (RFC 5044, 7.1.2 rule 4), while ucmatose's client waits for the \
    server's messages first; run the client in peer-to-peer mode";

/// Runs the server.
pub async fn run(cfg: &CmatoseConfig) -> Result<()> {
    say("cmatose: starting server");
    let bind = cfg.bind.unwrap_or([0, 0, 0, 0].into());
    let addr = std::net::SocketAddr::new(bind, cfg.port);
    let mut listener = Listener::bind(addr, cfg.iwarp_config())
        .await
        .map_err(|source| PingError::Listen { addr, source })?;
    // Always said, so that a script using -p 0 learns the port.
    eprintln!(
        "iwarp cmatose: server listening on {}",
        listener.local_addr()
    );
    let mut nodes = Vec::with_capacity(cfg.connections as usize);
    for index in 0..cfg.connections as usize {
        let request = listener
            .accept()
            .await
            .map_err(|source| PingError::Listen { addr, source })?;
        let peer = request.peer_addr();
        let pd = request.private_data();
        say(&format!(
            "connection request from {peer}: MPA revision {}, {} octets of private data{}",
            request.revision().map_or(0, |r| r as u8),
            pd.len(),
            printable(pd)
        ));
        let (buffers, options) = Buffers::new(cfg.size, cfg.count)?;
        // ucmatose accepts with no private data.
        let qp = request
            .accept(options, &[])
            .await
            .map_err(|e| PingError::startup(peer, e, false))?;
        let node = Node::new(qp, buffers, Peer::Client, index, cfg.timeout);
        node.make_room_for_a_send_rtr()?;
        nodes.push(node);
    }
    drop(listener);
    if cfg.verbose {
        Node::describe_all(&nodes);
    }
    let outcome = exchange(cfg, &nodes).await;
    say("cmatose: disconnecting");
    for n in &nodes {
        let _ = n.qp.disconnect().await;
    }
    say("disconnected");
    outcome
}

async fn exchange(cfg: &CmatoseConfig, nodes: &[Node]) -> Result<()> {
    if cfg.count == 0 {
        return Ok(());
    }
    say("initiating data transfers");
    for n in nodes {
        n.post_sends(cfg.count)?;
    }
    say("completing sends");
    on_each(nodes, |n| async move {
        let r = n.sends_completed(cfg.count, "").await;
        match r {
            Err(PingError::Timeout { peer, during, secs }) if !n.heard_from_peer() => {
                Err(PingError::Timeout {
                    peer,
                    during: format!("{during}{RULE_4}"),
                    secs,
                })
            }
            r => r,
        }
    })
    .await?;
    say("receiving data transfers");
    on_each(nodes, |n| {
        n.messages_received(cfg.count, cfg.size, cfg.validate)
    })
    .await?;
    say("data transfers complete");
    Ok(())
}

/// The private data as text, if it is text.
fn printable(pd: &[u8]) -> String {
    match std::str::from_utf8(pd) {
        Ok(t) if !t.is_empty() && !t.chars().any(char::is_control) => format!(": \"{t}\""),
        _ => String::new(),
    }
}
