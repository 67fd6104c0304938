//! The tool's log: a `tracing` subscriber that writes the events of the stack (`iwarp`,
//! `iwarp_proto`) and of the tool (`iwarp_cli`) on standard error, one line each, stamped
//! with the seconds since the process started.
//!
//! The filter is `RUST_LOG` when it is set (tracing's syntax), otherwise warnings from
//! everything and, for the `iwarp` crates, the level `-v` asks for. Standard output stays
//! the subcommands' own (tables, JSON lines, rping's data lines).

use std::io::IsTerminal;

use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::time::uptime;

/// The level for the `iwarp` crates at `verbosity` (the number of `-v`s).
pub fn level(verbosity: u8) -> LevelFilter {
    match verbosity {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

/// The filter: `rust_log` when given and not empty, else warnings and the `iwarp` crates
/// (every target starting with `iwarp`) at `verbosity`'s level. A `RUST_LOG` that does not
/// parse is reported and the default used.
pub fn filter(verbosity: u8, rust_log: Option<&str>) -> EnvFilter {
    let default = || EnvFilter::new(format!("warn,iwarp={}", level(verbosity)));
    match rust_log.map(str::trim).filter(|s| !s.is_empty()) {
        Some(spec) => EnvFilter::try_new(spec).unwrap_or_else(|e| {
            eprintln!("iwarp: ignoring RUST_LOG ({e}); using -v's level");
            default()
        }),
        None => default(),
    }
}

/// Installs the subscriber for this process (once; a second call does nothing).
pub fn init(verbosity: u8) {
    let rust_log = std::env::var(EnvFilter::DEFAULT_ENV).ok();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(verbosity, rust_log.as_deref()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_timer(uptime())
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_and_rust_log_choose_the_filter() {
        assert_eq!(level(0), LevelFilter::WARN);
        assert_eq!(level(2), LevelFilter::DEBUG);
        assert_eq!(level(9), LevelFilter::TRACE);
        assert_eq!(filter(2, None).to_string(), "iwarp=debug,warn");
        assert_eq!(filter(0, Some("  ")).to_string(), "iwarp=warn,warn");
        assert_eq!(
            filter(0, Some("iwarp::cm=trace")).to_string(),
            "iwarp::cm=trace"
        );
        // Nonsense falls back to -v's level rather than silencing everything.
        assert_eq!(filter(1, Some("iwarp=loud")).to_string(), "iwarp=info,warn");
    }
}
