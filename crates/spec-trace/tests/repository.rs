//! The repository's own citations: every quote is in its section, and
//! every requirement cited as implemented is cited by a test too.

use std::path::Path;

#[test]
fn citations_are_valid_and_tested() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let coverage = spec_trace::check(&root).expect("the repository can be read");
    let problems: Vec<String> = coverage.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        problems.is_empty(),
        "{} citation problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_document_with_a_text_has_requirements() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let coverage = spec_trace::check(&root).expect("the repository can be read");
    for doc in coverage.documents.iter().filter(|d| d.has_text()) {
        let n: usize = coverage.counts(doc.info.id).values().sum();
        assert!(n > 10, "{} yields only {n} requirements", doc.info.id);
    }
}

/// The committed report, `docs/spec-coverage.md`, is the one the
/// citations give today. Regenerate it with
/// `cargo run -p spec-trace -- --write docs/spec-coverage.md`.
#[test]
fn the_committed_report_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let coverage = spec_trace::check(&root).expect("the repository can be read");
    let fresh = spec_trace::report::markdown(&coverage);
    let committed = std::fs::read_to_string(root.join("docs/spec-coverage.md"))
        .expect("docs/spec-coverage.md exists");
    assert!(
        committed == fresh,
        "docs/spec-coverage.md is stale: run `cargo run -p spec-trace -- --write docs/spec-coverage.md`"
    );
}
