//! Citations in the source: `//=` target and key lines, `//#` quote lines.
//!
//! ```text
//! //= rfc5041#7.1
//! //= type=test
//! //# If the STag is not valid, the Data Sink MUST ...
//! ```
//!
//! A block starts at a `//= document#section` line and takes the `//=`
//! and `//#` lines right after it; anything else ends it.

use std::path::{Path, PathBuf};

/// What a citation says about its requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// The code below implements it.
    Implementation,
    /// The test below checks it.
    Test,
    /// It is deliberately not implemented, for the given reason.
    Exception,
    /// A seed draft's requirement that says what a later document's
    /// requirement says; the reason names that one (`rfc5044#7.1.2`),
    /// which carries the citations.
    Duplicate,
}

/// One citation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    /// The file it is in, relative to the repository root.
    pub file: PathBuf,
    /// The line of its `//= document#section` line, from 1.
    pub line: usize,
    /// The cited document's id.
    pub document: String,
    /// The cited section's number.
    pub section: String,
    /// What it says about the requirement.
    pub kind: Kind,
    /// Why it is an exception, or which requirement it duplicates (only
    /// for [`Kind::Exception`] and [`Kind::Duplicate`]).
    pub reason: Option<String>,
    /// The quoted text, lines joined by single spaces.
    pub quote: String,
}

/// A line that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where it is.
    pub file: PathBuf,
    /// The line, from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Finds the citations in one file's text.
pub fn parse_file(file: &Path, text: &str) -> (Vec<Annotation>, Vec<SyntaxError>) {
    let mut annotations = Vec::new();
    let mut errors = Vec::new();
    let mut current: Option<(Annotation, Vec<String>)> = None;
    let error = |line: usize, message: String| SyntaxError {
        file: file.to_path_buf(),
        line,
        message,
    };
    let mut close = |current: Option<(Annotation, Vec<String>)>, errors: &mut Vec<SyntaxError>| {
        if let Some((mut a, quote)) = current {
            a.quote = crate::spec::normalize(quote.iter().map(String::as_str));
            if a.quote.is_empty() {
                errors.push(error(a.line, "a citation without a `//#` quote".into()));
            } else if matches!(a.kind, Kind::Exception | Kind::Duplicate) && a.reason.is_none() {
                errors.push(error(
                    a.line,
                    "an exception or duplicate without `//= reason=`".into(),
                ));
            } else {
                annotations.push(a);
            }
        }
    };
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.trim_start();
        if let Some(rest) = line.strip_prefix("//=") {
            let rest = rest.trim();
            match (rest.split_once('='), rest.split_once('#')) {
                (Some((key, value)), hash) if hash.is_none_or(|(h, _)| h.len() > key.len()) => {
                    let Some((a, _)) = current.as_mut() else {
                        errors.push(error(number, format!("`{rest}` outside a citation")));
                        continue;
                    };
                    match (key.trim(), value.trim()) {
                        ("type", "implementation") => a.kind = Kind::Implementation,
                        ("type", "test") => a.kind = Kind::Test,
                        ("type", "exception") => a.kind = Kind::Exception,
                        ("type", "duplicate") => a.kind = Kind::Duplicate,
                        ("reason", reason) if !reason.is_empty() => {
                            a.reason = Some(reason.to_string())
                        }
                        (key, value) => {
                            errors.push(error(number, format!("unknown `{key}={value}`")))
                        }
                    }
                }
                (_, Some((document, section))) => {
                    close(current.take(), &mut errors);
                    let section = section.trim().trim_start_matches("section-");
                    current = Some((
                        Annotation {
                            file: file.to_path_buf(),
                            line: number,
                            document: document.trim().to_string(),
                            section: section.to_string(),
                            kind: Kind::Implementation,
                            reason: None,
                            quote: String::new(),
                        },
                        Vec::new(),
                    ));
                }
                _ => errors.push(error(number, format!("`//= {rest}` names no section"))),
            }
        } else if let Some(rest) = line.strip_prefix("//#") {
            match current.as_mut() {
                Some((_, quote)) => quote.push(rest.trim().to_string()),
                None => errors.push(error(number, "a `//#` quote outside a citation".into())),
            }
        } else {
            close(current.take(), &mut errors);
        }
    }
    close(current, &mut errors);
    (annotations, errors)
}

/// Directories never scanned: build output, and this tool's own sources,
/// whose tests hold example citations.
const SKIPPED: &[&str] = &["target", ".git", "spec-trace"];

/// Finds the citations in every `.rs` file under `crates/` and `fuzz/`,
/// and in `spec/exceptions.txt` and `spec/duplicates.txt`, of the
/// repository at `root`. Paths in the result are relative to `root`.
pub fn scan_repository(root: &Path) -> std::io::Result<(Vec<Annotation>, Vec<SyntaxError>)> {
    let mut files = Vec::new();
    for dir in ["crates", "fuzz"] {
        collect_rust_files(&root.join(dir), &mut files)?;
    }
    for name in ["exceptions.txt", "duplicates.txt"] {
        let listed = root.join("spec").join(name);
        if listed.exists() {
            files.push(listed);
        }
    }
    files.sort();
    let mut annotations = Vec::new();
    let mut errors = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let (a, e) = parse_file(relative, &text);
        annotations.extend(a);
        errors.extend(e);
    }
    Ok((annotations, errors))
}

fn collect_rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !SKIPPED.contains(&name) {
                collect_rust_files(&path, out)?;
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Vec<Annotation>, Vec<SyntaxError>) {
        parse_file(Path::new("x.rs"), text)
    }

    #[test]
    fn blocks() {
        let (a, e) = parse(
            "fn f() {\n    //= rfc5044#7.1.2\n    //# The Responder MUST NOT\n    //# send.\n    x();\n    //= rfc5041#section-7.1\n    //= type=test\n    //# If it MUST.\n}\n",
        );
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].line, a[0].kind), (2, Kind::Implementation));
        assert_eq!(a[0].document, "rfc5044");
        assert_eq!(a[0].section, "7.1.2");
        assert_eq!(a[0].quote, "The Responder MUST NOT send.");
        assert_eq!((a[1].section.as_str(), a[1].kind), ("7.1", Kind::Test));
    }

    #[test]
    fn two_blocks_back_to_back() {
        let (a, e) = parse("//= rfc5044#7.1\n//# One.\n//= rfc5044#7.2\n//# Two.\n");
        assert!(e.is_empty());
        assert_eq!(a.len(), 2);
        assert_eq!(a[1].quote, "Two.");
    }

    #[test]
    fn exceptions_need_a_reason() {
        let (a, e) = parse("//= rfc5041#5.2\n//= type=exception\n//# A rule.\n");
        assert!(a.is_empty());
        assert_eq!(e.len(), 1);
        let (a, e) = parse(
            "//= rfc5041#5.2\n//= type=exception\n//= reason=out-of-order placement is not built\n//# A rule.\n",
        );
        assert!(e.is_empty());
        assert_eq!(
            a[0].reason.as_deref(),
            Some("out-of-order placement is not built")
        );
    }

    #[test]
    fn malformed() {
        for text in [
            "//# a stray quote\n",
            "//= type=test\n",
            "//= rfc5044#7.1\n",
            "//= rfc5044#7.1\n//= colour=blue\n//# Q.\n",
            "//= nothing here\n",
        ] {
            let (_, e) = parse(text);
            assert_eq!(e.len(), 1, "{text:?}: {e:?}");
        }
    }
}
