//! `spec-trace`: prints the specification coverage report of the
//! repository and fails when a citation is wrong or a requirement cited
//! as implemented has no test.
//!
//! ```text
//! cargo run -p spec-trace                       # the summary and any problems
//! cargo run -p spec-trace -- --report           # the whole report on stdout
//! cargo run -p spec-trace -- --write FILE       # the whole report into FILE
//! ```

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut write = None;
    let mut full = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--report" => full = true,
            "--write" => write = args.next().map(PathBuf::from),
            _ => {
                eprintln!("usage: spec-trace [--report] [--write FILE]");
                return ExitCode::from(2);
            }
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let coverage = match spec_trace::check(&root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("spec-trace: {e}");
            return ExitCode::from(2);
        }
    };
    let report = spec_trace::report::markdown(&coverage);
    if let Some(path) = write {
        if let Err(e) = std::fs::write(&path, &report) {
            eprintln!("spec-trace: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if full {
        print!("{report}");
    } else {
        print!("{}", spec_trace::report::summary(&coverage));
    }
    for p in &coverage.problems {
        eprintln!("error: {p}");
    }
    if coverage.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
