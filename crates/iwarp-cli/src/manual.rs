//! `iwarp completions SHELL` and `iwarp man`: shell completion scripts and manual pages,
//! generated from the clap definitions ([`crate::cli::command`]) so that they never
//! disagree with `--help`.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use clap_complete::Shell;

/// `iwarp completions`.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
#[command(after_help = "\
Examples:
  iwarp completions bash > /etc/bash_completion.d/iwarp
  iwarp completions zsh > \"${fpath[1]}/_iwarp\"
  iwarp completions fish > ~/.config/fish/completions/iwarp.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `iwarp man`.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
#[command(after_help = "\
Examples:
  iwarp man | man -l -                    read the page now
  iwarp man --dir /usr/local/share/man/man1   install iwarp.1 and iwarp-perf.1, ...")]
pub struct ManArgs {
    /// Write iwarp.1 and one page per subcommand (iwarp-perf.1, ...) into this
    /// directory instead of printing iwarp.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Writes the completion script for `shell` to `out`.
pub fn completions(shell: Shell, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = crate::cli::command();
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
    out.flush()
}

/// Renders the manual page of `iwarp` itself.
pub fn page(out: &mut dyn Write) -> io::Result<()> {
    clap_mangen::Man::new(crate::cli::command()).render(out)
}

/// Writes `iwarp.1` and `iwarp-SUBCOMMAND.1` for each subcommand into `dir`; returns the
/// files written.
pub fn pages(dir: &Path) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let mut cmd = crate::cli::command();
    // Propagates the version and the global settings into the subcommands.
    cmd.build();
    let mut written = Vec::new();
    let mut write = |name: String, page: clap::Command| -> io::Result<()> {
        let path = dir.join(format!("{name}.1"));
        let mut buf = Vec::new();
        clap_mangen::Man::new(page.name(name)).render(&mut buf)?;
        fs::write(&path, buf)?;
        written.push(path);
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write(format!("iwarp-{}", sub.get_name()), sub.clone())?;
    }
    write("iwarp".into(), cmd)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_completion_knows_every_subcommand_and_option() {
        let mut out = Vec::new();
        completions(Shell::Bash, &mut out).unwrap();
        let script = String::from_utf8(out).unwrap();
        for word in [
            "perf",
            "ping",
            "soak",
            "completions",
            "man",
            "--connect",
            "--json",
        ] {
            assert!(script.contains(word), "{word} missing");
        }
    }

    #[test]
    fn pages_cover_every_subcommand() {
        let dir = std::env::temp_dir().join(format!("iwarp-man-{}", std::process::id()));
        let written = pages(&dir).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for name in ["iwarp.1", "iwarp-perf.1", "iwarp-ping.1", "iwarp-soak.1"] {
            assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
        }
        let ping = fs::read_to_string(dir.join("iwarp-ping.1")).unwrap();
        assert!(ping.starts_with(".ie"), "not roff: {}", &ping[..40]);
        assert!(ping.contains("rping"), "the page lacks ping's help");
        assert!(
            ping.contains("Exit status"),
            "the page lacks the exit statuses"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
