//! Command line of `iwarp cmatose`, ucmatose's letters included.
//!
//! As in ucmatose, `-s ADDR` names the server and makes this end the client; without it,
//! this end is the server. `-b` binds, `-p` picks the port (7471), `-c` the number of
//! connections, `-C` the messages each way per connection, `-S` their size.

use std::net::IpAddr;
use std::time::Duration;

use clap::Args;
use iwarp::Config;

use crate::ping::args::{parse_timeout, split_host_port};
use crate::ping::error::PingError;
use crate::startup_args::{Startup, StartupArgs};

/// ucmatose's default port.
pub const DEFAULT_PORT: u16 = 7471;

/// `iwarp cmatose`: rdma_cm's Send/Receive test, wire-compatible with rdma-core's
/// `ucmatose`.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(
    // -V is "validate"; `iwarp --version` still works.
    disable_version_flag = true,
    after_help = "\
Examples:
  iwarp cmatose                           serve one client on port 7471 (ucmatose)
  iwarp cmatose -s host -C 100 -S 4000    100 messages of 4000 octets each way
  iwarp cmatose -s host --private-data hi a Request carrying private data

After all connections are up, the server Sends -C messages of -S octets on each, the client
receives them and Sends as many back, and the server disconnects. An MPA server may send
nothing before the client's first message (RFC 5044, 7.1.2 rule 4): against a ucmatose
client, which waits for the server, that holds only in peer-to-peer mode (--p2p on the
client's side)."
)]
pub struct CmatoseArgs {
    /// The server's address, `HOST[:PORT]`: be the client (ucmatose -s).
    #[arg(short = 's', long = "server", value_name = "HOST[:PORT]")]
    pub server: Option<String>,

    /// Address to bind to: the listening address of a server [default: 0.0.0.0], the
    /// source address of a client.
    #[arg(short = 'b', long = "bind", value_name = "ADDR")]
    pub bind: Option<IpAddr>,

    /// Port to listen on or connect to (0 for a server: any free port, printed at start).
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Connections.
    #[arg(short = 'c', long, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub connections: u32,

    /// Messages each way on each connection.
    #[arg(short = 'C', long = "count", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub count: u32,

    /// Message size in octets.
    #[arg(short = 'S', long = "size", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub size: u32,

    /// Client: private data for the MPA Request (ucmatose sends none over iWARP).
    #[arg(long, value_name = "TEXT", requires = "server")]
    pub private_data: Option<String>,

    /// Check each received message's octets against the pattern `iwarp cmatose` sends
    /// (ucmatose sends whatever its buffer held: use only between two `iwarp cmatose`).
    #[arg(short = 'V', long)]
    pub validate: bool,

    /// Print each connection's negotiated parameters.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Seconds to wait for the connections and for each step; 0: for ever.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, value_parser = parse_timeout)]
    pub timeout: f64,

    /// MPA startup settings.
    #[command(flatten)]
    pub startup: StartupArgs,
}

/// A resolved `iwarp cmatose` run.
#[derive(Clone, Debug, PartialEq)]
pub struct CmatoseConfig {
    /// The server to connect to (`host`, `port`), or `None` to serve.
    pub server: Option<(String, u16)>,
    /// Where to listen (server) or the source address (client).
    pub bind: Option<IpAddr>,
    /// The port to listen on.
    pub port: u16,
    /// Connections.
    pub connections: u32,
    /// Messages each way per connection.
    pub count: u32,
    /// Message size.
    pub size: u32,
    /// The client's private data.
    pub private_data: Vec<u8>,
    /// Check received octets.
    pub validate: bool,
    /// Print connection parameters.
    pub verbose: bool,
    /// Bound on each wait; `None`: for ever.
    pub timeout: Option<Duration>,
    /// MPA startup settings.
    pub startup: Startup,
}

impl CmatoseArgs {
    /// Checks the combination and resolves defaults.
    pub fn resolve(&self) -> Result<CmatoseConfig, PingError> {
        let server = match &self.server {
            Some(s) => {
                let (host, port) = split_host_port(s, self.port)?;
                if port == 0 {
                    return Err(PingError::Usage("cannot connect to port 0".into()));
                }
                Some((host, port))
            }
            None => None,
        };
        Ok(CmatoseConfig {
            server,
            bind: self.bind,
            port: self.port,
            connections: self.connections,
            count: self.count,
            size: self.size,
            private_data: self
                .private_data
                .as_ref()
                .map_or_else(Vec::new, |t| t.as_bytes().to_vec()),
            validate: self.validate,
            verbose: self.verbose,
            timeout: (self.timeout > 0.0).then(|| Duration::from_secs_f64(self.timeout)),
            startup: self.startup.resolve(),
        })
    }
}

impl CmatoseConfig {
    /// The runtime configuration: this run's startup settings with IRD/ORD 1/1, as
    /// ucmatose's `responder_resources = 1, initiator_depth = 1`, and the timeout on the
    /// TCP connect and the startup frames.
    pub fn iwarp_config(&self) -> Config {
        self.startup
            .tool_config(self.server.is_some(), self.timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CmatoseArgs,
    }

    fn parse(args: &[&str]) -> Result<CmatoseArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("cmatose").chain(args.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn ucmatose_command_lines() {
        let c = parse(&[]).unwrap().resolve().unwrap();
        assert_eq!(c.server, None);
        assert_eq!((c.port, c.connections, c.count, c.size), (7471, 1, 10, 100));
        let c = parse(&[
            "-s", "10.0.0.1", "-c", "4", "-C", "100", "-S", "4000", "-p", "9",
        ])
        .unwrap()
        .resolve()
        .unwrap();
        assert_eq!(c.server, Some(("10.0.0.1".into(), 9)));
        assert_eq!((c.connections, c.count, c.size), (4, 100, 4000));
        let c = parse(&["-s", "[::1]:7000", "--private-data", "hello"])
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(c.server, Some(("::1".into(), 7000)));
        assert_eq!(c.private_data, b"hello");
        let config = c.iwarp_config();
        assert_eq!((config.startup.ird, config.startup.ord), (1, 1));
    }

    #[test]
    fn rejected_command_lines() {
        assert!(parse(&["--private-data", "x"]).is_err());
        assert!(parse(&["-c", "0"]).is_err());
        assert!(parse(&["-S", "0"]).is_err());
        assert!(parse(&["-s", "h:0"]).unwrap().resolve().is_err());
        assert!(parse(&["--timeout", "-1"]).is_err());
        assert!(parse(&["--timeout", "1e9"]).is_err());
    }
}
