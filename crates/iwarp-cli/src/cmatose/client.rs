//! The client side: ucmatose's `-s`. Connects every connection at once, each with its
//! receives posted; takes the server's messages on each, Sends as many back, and waits for
//! the server to disconnect.

use iwarp::connect_stream;

use super::args::CmatoseConfig;
use super::node::{Buffers, Node};
use super::{on_each, say};
use crate::ping::client::{resolve, tcp_connect};
use crate::ping::error::{Peer, PingError, Result};

/// Runs the client.
pub async fn run(cfg: &CmatoseConfig) -> Result<()> {
    let (host, port) = cfg
        .server
        .clone()
        .ok_or_else(|| PingError::Usage("the client needs the server's address".into()))?;
    say("cmatose: starting client");
    let addrs = resolve(&host, port, cfg.bind).await?;
    say("cmatose: connecting");
    let indices: Vec<usize> = (0..cfg.connections as usize).collect();
    let nodes: Vec<Result<Node>> =
        futures_util::future::join_all(indices.iter().map(|&i| connect(cfg, &addrs, i))).await;
    let nodes = nodes.into_iter().collect::<Result<Vec<Node>>>()?;
    if cfg.verbose {
        Node::describe_all(&nodes);
    }
    if cfg.count > 0 {
        say("receiving data transfers");
        on_each(&nodes, |n| {
            n.messages_received(cfg.count, cfg.size, cfg.validate)
        })
        .await?;
        say("sending replies");
        for n in &nodes {
            n.post_sends(cfg.count)?;
        }
        on_each(&nodes, |n| n.sends_completed(cfg.count, "")).await?;
        say("data transfers complete");
    }
    // ucmatose's client waits for the server's disconnect, then disconnects itself.
    let waited = on_each(&nodes, Node::peer_closed).await;
    for n in &nodes {
        let _ = n.qp.disconnect().await;
    }
    waited
}

async fn connect(
    cfg: &CmatoseConfig,
    addrs: &[std::net::SocketAddr],
    index: usize,
) -> Result<Node> {
    let (stream, addr) = tcp_connect(addrs, cfg.bind, cfg.timeout).await?;
    let (buffers, options) = Buffers::new(cfg.size, cfg.count)?;
    let qp = connect_stream(stream, &cfg.iwarp_config(), options, &cfg.private_data)
        .await
        .map_err(|e| PingError::startup(addr, e, cfg.startup.markers))?;
    Ok(Node::new(qp, buffers, Peer::Server, index, cfg.timeout))
}
