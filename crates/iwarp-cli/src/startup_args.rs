//! The MPA startup options the interoperability tools share (`iwarp ping`, `iwarp cmatose`):
//! revision, CRC, peer-to-peer mode, markers, and the hold after the Reply. They are the
//! knobs that vary our side of a connection to a real peer, so the same letters mean the
//! same in every tool.

use std::time::Duration;

use clap::{Args, ValueEnum};
use iwarp::proto::mpa::startup::DEFAULT_HOLD_AFTER_REPLY;
use iwarp::{Config, CrcPolicy, Revision, RtrTypes};

/// MPA startup options, flattened into a tool's command line.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct StartupArgs {
    /// MPA CRC: on (ask for it; siw honours the request), off (use it only if the peer
    /// asks), required (refuse peers that do not ask, such as rping over siw).
    #[arg(long, value_enum, default_value_t = CrcMode::On)]
    pub crc: CrcMode,

    /// Highest MPA revision: a client's Request carries it, a server replies with the
    /// lower of it and the client's. rdma-core over siw speaks 2.
    #[arg(long = "mpa-rev", value_name = "REV", default_value_t = 2,
          value_parser = clap::value_parser!(u8).range(0..=2))]
    pub mpa_rev: u8,

    /// Peer-to-peer mode (RFC 6581) with these ready-to-receive messages, comma-separated
    /// (write, read, send). Client: request the mode, offering them. Server: the ones it
    /// accepts when a client requests the mode. [server default: write,read]
    #[arg(long, value_name = "RTR,...", value_enum, value_delimiter = ',')]
    pub p2p: Vec<RtrArg>,

    /// Ask the peer to send MPA markers (Linux siw refuses them).
    #[arg(long)]
    pub markers: bool,

    /// Client: milliseconds to send nothing after the server's MPA Reply, so that a Linux
    /// siw server, which reads its socket only a moment after sending the Reply, sees the
    /// first message; 0: at once.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_HOLD_AFTER_REPLY.as_secs_f64() * 1e3,
          value_parser = parse_hold)]
    pub hold_after_reply: f64,
}

/// The MPA CRC policy, as `--crc` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CrcMode {
    /// Ask for CRC; a peer's request is honoured anyway.
    On,
    /// Do not ask for CRC.
    Off,
    /// Insist on the peer asking for CRC too.
    Required,
}

impl From<CrcMode> for CrcPolicy {
    fn from(m: CrcMode) -> Self {
        match m {
            CrcMode::On => CrcPolicy::Preferred,
            CrcMode::Off => CrcPolicy::Off,
            CrcMode::Required => CrcPolicy::Required,
        }
    }
}

/// A ready-to-receive message type of peer-to-peer mode, as `--p2p` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RtrArg {
    /// A zero-length RDMA Write.
    Write,
    /// A zero-length RDMA Read.
    Read,
    /// A zero-length Send.
    Send,
}

fn parse_hold(text: &str) -> Result<f64, String> {
    parse_bounded(text, "milliseconds", 60_000.0)
}

/// A number from 0 to `max` of `unit`, for a command-line value.
pub(crate) fn parse_bounded(text: &str, unit: &str, max: f64) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of {unit}"))?;
    if v.is_finite() && (0.0..=max).contains(&v) {
        Ok(v)
    } else {
        Err(format!("`{text}` out of range (0 to {max} {unit})"))
    }
}

/// What [`StartupArgs`] ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Startup {
    /// MPA CRC policy.
    pub crc: CrcPolicy,
    /// Highest MPA revision.
    pub revision: Revision,
    /// Peer-to-peer RTR types: requested (client) or accepted (server); `None`: a client
    /// does not request the mode, a server accepts Write and Read.
    pub p2p: Option<RtrTypes>,
    /// Ask the peer for markers.
    pub markers: bool,
    /// How long a client sends nothing after the MPA Reply.
    pub hold_after_reply: Duration,
}

impl StartupArgs {
    /// The options as settings.
    pub fn resolve(&self) -> Startup {
        let has = |r| self.p2p.contains(&r);
        Startup {
            crc: self.crc.into(),
            revision: match self.mpa_rev {
                0 => Revision::Rev0,
                1 => Revision::Rev1,
                _ => Revision::Rev2,
            },
            p2p: (!self.p2p.is_empty()).then(|| RtrTypes {
                write: has(RtrArg::Write),
                read: has(RtrArg::Read),
                send: has(RtrArg::Send),
            }),
            markers: self.markers,
            hold_after_reply: Duration::from_secs_f64(self.hold_after_reply / 1e3),
        }
    }
}

impl Startup {
    /// The runtime configuration with these settings, for a client (`initiator`) or a
    /// server.
    pub fn config(&self, initiator: bool) -> Config {
        let mut config = Config::with_revision(self.revision)
            .crc(self.crc)
            .markers_on_receive(self.markers);
        config.startup.hold_after_reply = self.hold_after_reply;
        match self.p2p {
            Some(rtr) if initiator => config = config.peer_to_peer(rtr),
            Some(rtr) => config.startup.rtr_types = rtr,
            None => {}
        }
        config
    }

    /// The configuration of rdma-core's test tools (rping, ucmatose): these settings with
    /// IRD/ORD 1/1 (their `responder_resources` and `initiator_depth`), and `timeout`, if
    /// any, on the TCP connect and on each startup frame.
    pub fn tool_config(&self, initiator: bool, timeout: Option<Duration>) -> Config {
        let mut config = self.config(initiator).ird_ord(1, 1);
        if let Some(t) = timeout {
            config.connect_timeout = t;
            config.startup.request_timeout = t;
            config.startup.reply_timeout = t;
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        startup: StartupArgs,
    }

    fn resolve(args: &[&str]) -> Startup {
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .startup
            .resolve()
    }

    #[test]
    fn defaults_are_the_runtimes() {
        let s = resolve(&[]);
        assert_eq!(s.crc, CrcPolicy::Preferred);
        assert_eq!(s.revision, Revision::Rev2);
        assert_eq!(s.p2p, None);
        assert!(!s.markers);
        assert_eq!(s.hold_after_reply, DEFAULT_HOLD_AFTER_REPLY);
        assert_eq!(s.config(true), Config::default());
    }

    #[test]
    fn each_option_reaches_the_config() {
        let s = resolve(&[
            "--mpa-rev",
            "1",
            "--crc",
            "off",
            "--markers",
            "--hold-after-reply",
            "0",
            "--p2p",
            "read,send",
        ]);
        let client = s.config(true);
        assert_eq!(client.startup.max_revision, Revision::Rev1);
        assert_eq!(client.startup.crc, CrcPolicy::Off);
        assert!(client.startup.request_markers);
        assert_eq!(client.startup.hold_after_reply, Duration::ZERO);
        assert!(client.startup.peer_to_peer);
        let offered = RtrTypes {
            write: false,
            read: true,
            send: true,
        };
        assert_eq!(client.startup.rtr_types, offered);
        // A server accepts those types; it never asks for the mode itself.
        let server = s.config(false);
        assert!(!server.startup.peer_to_peer);
        assert_eq!(server.startup.rtr_types, offered);
        let s = resolve(&["--hold-after-reply", "2.5"]);
        assert_eq!(s.hold_after_reply, Duration::from_micros(2500));
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied())).is_ok()
        };
        assert!(!parse(&["--mpa-rev", "3"]));
        assert!(!parse(&["--hold-after-reply", "-1"]));
        assert!(!parse(&["--hold-after-reply", "nan"]));
        assert!(!parse(&["--p2p", "carrier-pigeon"]));
        assert!(parse(&["--mpa-rev", "0"]));
    }
}
