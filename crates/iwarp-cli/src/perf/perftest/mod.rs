//! `iwarp perf --perftest` (`-R`): a wire peer of perftest in its rdma_cm mode, in both
//! roles. `iwarp perf write bw -R --connect HOST` runs against `ib_write_bw -R` on HOST;
//! `iwarp perf write bw -R --server` serves `ib_write_bw -R HOST`; without either, both
//! ends run in this process over loopback.
//!
//! perftest run with `-R` makes all its connections with rdma_cm, on one port (18515 by
//! default): first a connection of its own on which the two ends exchange, as Sends, their
//! versions, buffer geometry, MTU, each queue pair's keys and address, hand shakes and the
//! bandwidth report; then one data connection per queue pair for the test. Over iWARP,
//! rdma_cm puts nothing of its own in the MPA private data: each connection is a plain MPA
//! revision 2 startup with the IRD/ORD words (0/0, or the outstanding reads of a read test)
//! and no private data. The two ends must be started with the same test and options; each
//! derives the rest by perftest's rules.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`wire`] | perftest's messages, octet for octet |
//! | [`params`] | perftest's defaults and derived parameters |
//! | [`script`] | the order of exchanges, connections and traffic per test and end |
//! | [`figures`] | perftest's report arithmetic |
//! | [`output`] | perftest's banner and table |
//! | [`comm`] | the exchange channel over the stack |
//! | [`data`] | the data connections, the shared buffer, the destinations |
//! | [`traffic`] | the test traffic of each test |
//! | [`session`] | one run at one end, step by step |

pub mod comm;
pub mod data;
pub mod figures;
pub mod output;
pub mod params;
pub mod script;
pub mod session;
pub mod traffic;
pub mod wire;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use iwarp::{CrcPolicy, Listener};

use super::error::{PerfError, Result};
use super::spec::{self, Measure, TestKind};
use params::{Options, Params, Side};
use session::Net;

/// Where a perftest-mode run happens.
#[derive(Clone, Debug, PartialEq)]
pub enum Role {
    /// Against a perftest server (`ib_*_* -R` on `host`).
    Client {
        /// The server's name or address.
        host: String,
        /// Its port (perftest's `-p`).
        port: u16,
    },
    /// Serve one perftest client, as perftest's server does.
    Server {
        /// Address to listen on.
        bind: IpAddr,
        /// Port (perftest's `-p`).
        port: u16,
    },
    /// Both ends in this process over 127.0.0.1.
    Loopback,
}

/// A resolved `iwarp perf --perftest` invocation.
#[derive(Clone, Debug, PartialEq)]
pub struct PerftestConfig {
    /// The operation.
    pub test: TestKind,
    /// Bandwidth or latency.
    pub measure: Measure,
    /// perftest's options as given.
    pub opts: Options,
    /// Client, server or loopback.
    pub role: Role,
    /// The CRC policy of every connection.
    pub crc: CrcPolicy,
}

impl PerftestConfig {
    /// perftest's parameters for `side`, its rules applied.
    pub fn params(&self, side: Side) -> Result<Params> {
        Params::resolve(self.test, self.measure, side, &self.opts).map_err(PerfError::Usage)
    }
}

/// Runs `iwarp perf --perftest`.
pub async fn run(cfg: PerftestConfig) -> Result<()> {
    let net = Net {
        crc: cfg.crc,
        print: true,
    };
    match &cfg.role {
        Role::Client { host, port } => {
            let p = cfg.params(Side::Client)?;
            // One data connection per queue pair, and the exchange channel.
            super::raise_file_limit(p.qps.unwrap_or(1) + 1, 1)?;
            let addrs = spec::resolve(host, *port)
                .await
                .map_err(|e| PerfError::Resolve {
                    host: host.clone(),
                    reason: e.to_string(),
                })?;
            let addr = addrs
                .iter()
                .find(|a| a.is_ipv4())
                .or(addrs.first())
                .copied()
                .ok_or_else(|| PerfError::Resolve {
                    host: host.clone(),
                    reason: "no addresses".into(),
                })?;
            session::client(p, addr, net).await
        }
        Role::Server { bind, port } => {
            let p = cfg.params(Side::Server)?;
            // The client decides the queue pairs: as many files as this end may have.
            let _ = rlimit::increase_nofile_limit(u64::MAX);
            let listener = listen(&p, SocketAddr::new(*bind, *port), net).await?;
            // On stderr, so that the table on stdout is perftest's alone.
            eprintln!(
                "iwarp perf: perftest server ({}) listening on {}",
                p.binary(),
                listener.local_addr()
            );
            session::server(p, listener, net).await
        }
        Role::Loopback => {
            let server_params = cfg.params(Side::Server)?;
            let client_params = cfg.params(Side::Client)?;
            super::raise_file_limit(client_params.qps.unwrap_or(1) + 1, 2)?;
            let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
            let listener = listen(&server_params, addr, net).await?;
            let addr = listener.local_addr();
            let quiet = Net {
                print: false,
                ..net
            };
            let server = tokio::spawn(session::server(server_params, listener, quiet));
            let client = session::client(client_params, addr, net).await;
            let server = server
                .await
                .map_err(|e| PerfError::Internal(format!("server task: {e}")))?;
            client.and(server.map_err(|e| PerfError::Remote {
                peer: "server",
                message: e.to_string(),
            }))
        }
    }
}

async fn listen(p: &Params, addr: SocketAddr, net: Net) -> Result<Listener> {
    Listener::bind(addr, session::config(p, net, p.ird_ord()))
        .await
        .map_err(|e| match e {
            iwarp::Error::Io(source) => PerfError::Bind { addr, source },
            other => PerfError::iwarp(format!("listening on {addr}"), other),
        })
}
