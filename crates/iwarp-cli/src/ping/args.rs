//! Command line of `iwarp ping`, rping's letters included, and its resolution into a
//! [`PingConfig`].
//!
//! rping's own options work as they do there (`-s`, `-c -a HOST`, `-p`, `-S`, `-C`, `-v`,
//! `-V`, `-d`, `-P`, `-I`), so that a command line written for rping runs unchanged; the long
//! forms and `--connect HOST[:PORT]` are the spelling the rest of `iwarp` uses. rping options
//! that mean nothing on one side are accepted and ignored there, as rping does (`-C` and `-V`
//! on the server).

use std::net::IpAddr;
use std::time::Duration;

use clap::{ArgGroup, Args};
use iwarp::Config;

use super::error::PingError;
use super::message::{DEFAULT_PORT, DEFAULT_SIZE, MAX_SIZE, MIN_SIZE};
use crate::startup_args::{parse_bounded, Startup, StartupArgs};

/// `iwarp ping`: the rping connectivity test, wire-compatible with rdma-core's `rping`.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(
    group(ArgGroup::new("role").required(true).args(["server", "client", "connect"])),
    args_override_self = true,
    // -V is rping's "validate"; `iwarp --version` still works.
    disable_version_flag = true,
    after_help = "\
Examples:
  iwarp ping --server                     serve one client on port 7174 (rping -s)
  iwarp ping -s -P -a 0.0.0.0             serve clients until killed (rping -s -P)
  iwarp ping --connect host -C 10 -V      10 validated pings (rping -c -a host -C 10 -V)
  iwarp ping -c -a host -v                ping until Ctrl-C, printing each ping's data

Each ping: the client Sends its start buffer's address/STag/length, the server RDMA-Reads it
and Sends \"go\", the client Sends its sink buffer's, the server RDMA-Writes the data back and
Sends \"go\". Works against rping and Linux siw in both roles."
)]
pub struct PingArgs {
    /// Serve pings (rping -s). Without -P the server exits after its first client.
    #[arg(short = 's', long)]
    pub server: bool,

    /// Ping the server given with -a (rping -c).
    #[arg(short = 'c', long, requires = "addr")]
    pub client: bool,

    /// Ping the server at `HOST[:PORT]` (IPv6 with a port: `[ADDR]:PORT`).
    #[arg(
        long,
        value_name = "HOST[:PORT]",
        conflicts_with = "addr",
        help = "Ping the server at HOST[:PORT] (IPv6 with a port: [ADDR]:PORT)"
    )]
    pub connect: Option<String>,

    /// The server's address with -c; the address to listen on with -s. [server default: 0.0.0.0]
    #[arg(short = 'a', long = "addr", value_name = "ADDR")]
    pub addr: Option<String>,

    /// Source address for the client to bind to (rping -I).
    #[arg(
        short = 'I',
        long = "source",
        value_name = "ADDR",
        conflicts_with = "server"
    )]
    pub source: Option<IpAddr>,

    /// Port to listen on or connect to (0 with --server: any free port, printed at start).
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Ping data size in octets, 26 to 65535 as in rping. The server's buffer starts at this
    /// size and grows to what a client advertises.
    #[arg(short = 'S', long, default_value_t = DEFAULT_SIZE,
          value_parser = clap::value_parser!(u32).range(i64::from(MIN_SIZE)..=i64::from(MAX_SIZE)))]
    pub size: u32,

    /// Number of pings; 0 or absent: until interrupted (Ctrl-C), as rping. Ignored by the
    /// server, which serves until the client disconnects.
    #[arg(short = 'C', long)]
    pub count: Option<u32>,

    /// Print each ping's data (client: "ping data: ...", server: "server ping data: ...").
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Client: check that the data written back equals the data sent; a mismatch is an error.
    #[arg(short = 'V', long)]
    pub validate: bool,

    /// Print each protocol step and the connection's parameters on stderr, with the
    /// stack's debug events (each startup frame, decoded); as `iwarp -vv ping`.
    #[arg(short = 'd', long)]
    pub debug: bool,

    /// Results as JSON on stdout, one object per line: the client's summary ("type":
    /// "summary"), or a server's line per client served ("type": "client").
    #[arg(long, conflicts_with = "verbose")]
    pub json: bool,

    /// Persistent server: serve clients until killed, each on its own connection, at once
    /// if they come at once (rping -P).
    #[arg(short = 'P', long, conflicts_with_all = ["client", "connect"])]
    pub persistent: bool,

    /// Seconds to wait for the connection and for each answer from the peer; 0: for ever.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, value_parser = parse_timeout)]
    pub timeout: f64,

    /// MPA startup settings.
    #[command(flatten)]
    pub startup: StartupArgs,
}

pub(crate) fn parse_timeout(text: &str) -> Result<f64, String> {
    parse_bounded(text, "seconds", 1e6)
}

/// Which side to run, with what it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Serve pings.
    Server {
        /// Address to listen on (a host name or an IP address).
        bind: String,
        /// Port to listen on.
        port: u16,
        /// Keep serving after the first client.
        persistent: bool,
    },
    /// Ping a server.
    Client {
        /// The server (a host name or an IP address).
        host: String,
        /// The server's port.
        port: u16,
        /// Source address to bind to.
        source: Option<IpAddr>,
        /// Pings to run; `None`: until interrupted.
        count: Option<u64>,
        /// Compare what comes back with what was sent.
        validate: bool,
    },
}

/// A resolved `iwarp ping` run.
#[derive(Clone, Debug, PartialEq)]
pub struct PingConfig {
    /// Server or client.
    pub role: Role,
    /// Ping data size (the client's buffers; the server's initial sink).
    pub size: u32,
    /// Print each ping's data.
    pub verbose: bool,
    /// Print protocol steps.
    pub debug: bool,
    /// Results as JSON lines.
    pub json: bool,
    /// How long to wait for the connection and each answer; `None`: for ever.
    pub timeout: Option<Duration>,
    /// MPA startup settings: revision, CRC, peer-to-peer mode, markers, hold.
    pub startup: Startup,
}

impl PingArgs {
    /// Checks the combination and resolves defaults.
    pub fn resolve(&self) -> Result<PingConfig, PingError> {
        let role = if self.server {
            Role::Server {
                bind: self.addr.clone().unwrap_or_else(|| "0.0.0.0".into()),
                port: self.port,
                persistent: self.persistent,
            }
        } else {
            let (host, port) = match (&self.connect, &self.addr) {
                (Some(target), _) => split_host_port(target, self.port)?,
                (None, Some(addr)) => (addr.clone(), self.port),
                (None, None) => {
                    return Err(PingError::Usage(
                        "the client needs the server's address: --connect HOST or -c -a HOST"
                            .into(),
                    ))
                }
            };
            if port == 0 {
                return Err(PingError::Usage("cannot connect to port 0".into()));
            }
            Role::Client {
                host,
                port,
                source: self.source,
                count: self.count.filter(|&c| c > 0).map(u64::from),
                validate: self.validate,
            }
        };
        Ok(PingConfig {
            role,
            size: self.size,
            verbose: self.verbose,
            debug: self.debug,
            json: self.json,
            timeout: (self.timeout > 0.0).then(|| Duration::from_secs_f64(self.timeout)),
            startup: self.startup.resolve(),
        })
    }
}

impl PingConfig {
    /// The runtime configuration: this run's MPA startup settings (by default revision 2
    /// with enhanced data, CRC asked for) with IRD/ORD 1/1, as rping asks for
    /// (`responder_resources = 1, initiator_depth = 1`), and the timeout for the TCP
    /// connect and the startup frames.
    pub fn iwarp_config(&self) -> Config {
        let client = matches!(self.role, Role::Client { .. });
        self.startup.tool_config(client, self.timeout)
    }
}

/// Splits `HOST[:PORT]`: `host`, `host:7174`, `192.0.2.1:7174`, `[2001:db8::1]:7174`, and a
/// bare IPv6 address (`2001:db8::1`, which has more than one colon and so no port).
pub fn split_host_port(text: &str, default_port: u16) -> Result<(String, u16), PingError> {
    let bad = || PingError::Usage(format!("`{text}` is not HOST[:PORT]"));
    let port = |p: &str| p.parse::<u16>().map_err(|_| bad());
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        if host.is_empty() {
            return Err(bad());
        }
        return match after {
            "" => Ok((host.to_string(), default_port)),
            p => Ok((
                host.to_string(),
                port(p.strip_prefix(':').ok_or_else(bad)?)?,
            )),
        };
    }
    match text.matches(':').count() {
        0 if !text.is_empty() => Ok((text.to_string(), default_port)),
        1 => {
            let (host, p) = text.split_once(':').ok_or_else(bad)?;
            if host.is_empty() {
                return Err(bad());
            }
            Ok((host.to_string(), port(p)?))
        }
        n if n > 1 => Ok((text.to_string(), default_port)),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ping: PingArgs,
    }

    fn parse(args: &[&str]) -> Result<PingArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("ping").chain(args.iter().copied())).map(|c| c.ping)
    }

    /// The shape `main` gives the subcommand: a propagated version flag must not take -V.
    #[derive(Parser)]
    #[command(version, propagate_version = true)]
    struct Top {
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(clap::Subcommand)]
    enum Sub {
        Ping(PingArgs),
    }

    #[test]
    fn fits_the_iwarp_command() {
        use clap::CommandFactory;
        Top::command().debug_assert();
        let Sub::Ping(p) = Top::try_parse_from(["iwarp", "ping", "-c", "-a", "h", "-V"])
            .unwrap()
            .command;
        assert!(p.validate);
    }

    fn resolve(args: &[&str]) -> PingConfig {
        parse(args).unwrap().resolve().unwrap()
    }

    #[test]
    fn rping_server_command_lines() {
        let c = resolve(&["-s"]);
        assert_eq!(
            c.role,
            Role::Server {
                bind: "0.0.0.0".into(),
                port: 7174,
                persistent: false
            }
        );
        assert_eq!(c.size, 64);
        assert_eq!(c.startup.crc, iwarp::CrcPolicy::Preferred);
        assert_eq!(c.timeout, Some(Duration::from_secs(10)));
        // Grouped flags, attached values, -C and -V accepted on the server.
        let c = resolve(&["-sPvd", "-a", "::0", "-p7175", "-S100", "-C", "5", "-V"]);
        assert_eq!(
            c.role,
            Role::Server {
                bind: "::0".into(),
                port: 7175,
                persistent: true
            }
        );
        assert!(c.verbose && c.debug);
        assert_eq!(c.size, 100);
    }

    #[test]
    fn rping_client_command_lines() {
        let c = resolve(&[
            "-c",
            "-a",
            "192.0.2.1",
            "-C",
            "10",
            "-vV",
            "-I",
            "192.0.2.2",
        ]);
        assert_eq!(
            c.role,
            Role::Client {
                host: "192.0.2.1".into(),
                port: 7174,
                source: Some("192.0.2.2".parse().unwrap()),
                count: Some(10),
                validate: true
            }
        );
        // -C 0 means "until interrupted", as in rping.
        let c = resolve(&["-c", "-a", "h", "-C", "0"]);
        assert!(matches!(c.role, Role::Client { count: None, .. }));
        // Repeating a flag is fine, as with getopt.
        assert!(parse(&["-c", "-a", "h", "-v", "-v"]).is_ok());
    }

    #[test]
    fn connect_forms() {
        let c = resolve(&["--connect", "[::1]:9000"]);
        assert!(matches!(c.role, Role::Client { ref host, port: 9000, .. } if host == "::1"));
        let c = resolve(&["--connect", "example.net", "-p", "1234"]);
        assert!(matches!(c.role, Role::Client { port: 1234, .. }));
        assert_eq!(
            split_host_port("fe80::1", 7174).unwrap(),
            ("fe80::1".into(), 7174)
        );
        assert_eq!(split_host_port("h:80", 7174).unwrap(), ("h".into(), 80));
        for bad in ["", ":80", "h:", "h:x", "[::1", "[]:1", "[::1]x"] {
            assert!(split_host_port(bad, 7174).is_err(), "{bad}");
        }
    }

    #[test]
    fn rejected_combinations() {
        // No role, two roles, a client without a server, -P without -s.
        assert!(parse(&[]).is_err());
        assert!(parse(&["-s", "-c", "-a", "h"]).is_err());
        assert!(parse(&["-s", "--connect", "h"]).is_err());
        assert!(parse(&["-c"]).is_err());
        assert!(parse(&["--connect", "h", "-a", "h"]).is_err());
        assert!(parse(&["-c", "-a", "h", "-P"]).is_err());
        assert!(parse(&["-s", "-I", "127.0.0.1"]).is_err());
        // Sizes outside rping's range.
        assert!(parse(&["-s", "-S", "25"]).is_err());
        assert!(parse(&["-s", "-S", "65536"]).is_err());
        assert!(parse(&["-s", "-S", "26"]).is_ok());
        assert!(parse(&["-s", "-S", "65535"]).is_ok());
        assert!(parse(&["-s", "--timeout", "-1"]).is_err());
        assert!(parse(&["--connect", "h:0"]).unwrap().resolve().is_err());
    }

    #[test]
    fn runtime_config_is_rpings() {
        let c = resolve(&["--connect", "h", "--crc", "off", "--timeout", "0"]);
        assert_eq!(c.timeout, None);
        let config = c.iwarp_config();
        assert_eq!((config.startup.ird, config.startup.ord), (1, 1));
        assert_eq!(config.startup.crc, iwarp::CrcPolicy::Off);
        assert!(config.startup.enhanced);
        assert_eq!(config.startup.max_revision, iwarp::Revision::Rev2);
    }
}
