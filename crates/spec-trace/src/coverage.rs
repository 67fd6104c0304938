//! Matching citations to requirements, and what is wrong with them.

use std::collections::BTreeMap;
use std::path::Path;

use crate::annotation::{scan_repository, Annotation, Kind, SyntaxError};
use crate::spec::{load_documents, normalize, Document, Level};

/// One requirement and the citations of it.
#[derive(Debug, Clone)]
pub struct RequirementCoverage {
    /// The document's id.
    pub document: &'static str,
    /// The section's number.
    pub section: String,
    /// Its position among the section's requirements, from 1 (0 for a
    /// quote from a document without a text).
    pub index: usize,
    /// Its text (the quote, for a document without a text).
    pub text: String,
    /// Its keyword, if known.
    pub level: Option<Level>,
    /// The citations of it.
    pub citations: Vec<Annotation>,
}

/// Where a requirement stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// Cited as implemented and as tested.
    Tested,
    /// Cited by a test, but no implementation is cited.
    TestOnly,
    /// Cited as implemented, with no test: an error.
    Untested,
    /// Documented as deliberately not implemented.
    Exception,
    /// A seed draft's requirement that a later document's requirement,
    /// cited there, restates.
    Duplicate,
    /// Not cited at all.
    NotCited,
}

impl Status {
    /// How a report names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tested => "implemented and tested",
            Self::TestOnly => "tested (implementation not cited)",
            Self::Untested => "implemented, NOT TESTED",
            Self::Exception => "not implemented (exception)",
            Self::Duplicate => "same as a later document's",
            Self::NotCited => "not cited",
        }
    }
}

impl RequirementCoverage {
    /// Where it stands, from its citations.
    pub fn status(&self) -> Status {
        let has = |k| self.citations.iter().any(|a| a.kind == k);
        match (
            has(Kind::Implementation),
            has(Kind::Test),
            has(Kind::Exception),
            has(Kind::Duplicate),
        ) {
            (true, true, _, _) => Status::Tested,
            (true, false, _, _) => Status::Untested,
            (false, true, _, _) => Status::TestOnly,
            (false, false, true, _) => Status::Exception,
            (false, false, false, true) => Status::Duplicate,
            (false, false, false, false) => Status::NotCited,
        }
    }

    /// `rfc5044#7.1.2:3`, or `rfc5040#4.4` with the quote for a document
    /// without a text.
    pub fn id(&self) -> String {
        if self.index == 0 {
            format!("{}#{}", self.document, self.section)
        } else {
            format!("{}#{}:{}", self.document, self.section, self.index)
        }
    }
}

/// Something wrong with the citations; any of these fails the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A line that is not a valid citation.
    Syntax(SyntaxError),
    /// A citation of a document that is not in [`crate::DOCUMENTS`].
    UnknownDocument(Annotation),
    /// A citation of a section the document does not have.
    UnknownSection(Annotation),
    /// A quote that is not in the cited section.
    QuoteNotFound(Annotation),
    /// A requirement cited as implemented that no test cites.
    Untested(String),
    /// A duplicate whose reason does not name a section of a document
    /// with a text in which some requirement is cited.
    DuplicateOfNothing(Annotation),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |a: &Annotation| format!("{}:{}", a.file.display(), a.line);
        match self {
            Self::Syntax(e) => write!(f, "{}:{}: {}", e.file.display(), e.line, e.message),
            Self::UnknownDocument(a) => {
                write!(f, "{}: unknown document `{}`", at(a), a.document)
            }
            Self::UnknownSection(a) => write!(
                f,
                "{}: `{}` has no section {}",
                at(a),
                a.document,
                a.section
            ),
            Self::QuoteNotFound(a) => write!(
                f,
                "{}: not in {}#{}: \"{}\"",
                at(a),
                a.document,
                a.section,
                a.quote
            ),
            Self::Untested(id) => write!(f, "{id} is cited as implemented but no test cites it"),
            Self::DuplicateOfNothing(a) => write!(
                f,
                "{}: a duplicate of `{}`, which names no section with a cited requirement",
                at(a),
                a.reason.as_deref().unwrap_or("")
            ),
        }
    }
}

/// The outcome of a check.
#[derive(Debug, Clone)]
pub struct Coverage {
    /// The documents, with their sections.
    pub documents: Vec<Document>,
    /// Every requirement of the documents with a text, in document
    /// order, then every distinct quote of the documents without one.
    pub requirements: Vec<RequirementCoverage>,
    /// Citations of text in a section that holds no requirement keyword
    /// (definitions, formulas): valid, but they count towards nothing.
    pub informative: Vec<Annotation>,
    /// What is wrong.
    pub problems: Vec<Problem>,
}

impl Coverage {
    /// Requirements of one document by status.
    pub fn counts(&self, document: &str) -> BTreeMap<Status, usize> {
        let mut counts = BTreeMap::new();
        for r in self.requirements.iter().filter(|r| r.document == document) {
            *counts.entry(r.status()).or_insert(0) += 1;
        }
        counts
    }
}

/// Why the repository could not be checked at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A specification text could not be read.
    #[error("specification: {0}")]
    Spec(#[from] crate::spec::LoadError),
    /// The sources could not be read.
    #[error("sources: {0}")]
    Io(#[from] std::io::Error),
}

/// Checks the repository at `root`: its `spec/` texts against the
/// citations in its sources.
pub fn check(root: &Path) -> Result<Coverage, CheckError> {
    let documents = load_documents(&root.join("spec"))?;
    let (annotations, syntax) = scan_repository(root)?;
    Ok(match_citations(documents, annotations, syntax))
}

/// Matches citations to the documents' requirements.
pub fn match_citations(
    documents: Vec<Document>,
    annotations: Vec<Annotation>,
    syntax: Vec<SyntaxError>,
) -> Coverage {
    let mut problems: Vec<Problem> = syntax.into_iter().map(Problem::Syntax).collect();
    let mut requirements: Vec<RequirementCoverage> = Vec::new();
    // Where each (document, section) starts in `requirements`.
    let mut first: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for doc in &documents {
        for section in &doc.sections {
            first.insert((doc.info.id, section.number.as_str()), requirements.len());
            for (i, r) in section.requirements.iter().enumerate() {
                requirements.push(RequirementCoverage {
                    document: doc.info.id,
                    section: section.number.clone(),
                    index: i + 1,
                    text: r.text.clone(),
                    level: Some(r.level),
                    citations: Vec::new(),
                });
            }
        }
    }
    let mut unverified: BTreeMap<(&'static str, String, String), RequirementCoverage> =
        BTreeMap::new();
    let mut informative = Vec::new();
    for a in annotations {
        let Some(doc) = documents.iter().find(|d| d.info.id == a.document) else {
            problems.push(Problem::UnknownDocument(a));
            continue;
        };
        let info = doc.info;
        if !doc.has_text() {
            let key = (info.id, a.section.clone(), a.quote.clone());
            unverified
                .entry(key)
                .or_insert_with(|| RequirementCoverage {
                    document: info.id,
                    section: a.section.clone(),
                    index: 0,
                    text: a.quote.clone(),
                    level: None,
                    citations: Vec::new(),
                })
                .citations
                .push(a);
            continue;
        }
        let Some(section) = doc.section(&a.section) else {
            problems.push(Problem::UnknownSection(a));
            continue;
        };
        let quote = normalize(std::iter::once(a.quote.as_str()));
        let Some(at) = section.text.find(&quote) else {
            problems.push(Problem::QuoteNotFound(a));
            continue;
        };
        let span = at..at + quote.len();
        let base = first[&(info.id, section.number.as_str())];
        let hits: Vec<usize> = section
            .requirements
            .iter()
            .enumerate()
            .filter(|(_, r)| r.span.start < span.end && span.start < r.span.end)
            .map(|(i, _)| base + i)
            .collect();
        if hits.is_empty() {
            informative.push(a);
        } else {
            for i in hits {
                requirements[i].citations.push(a.clone());
            }
        }
    }
    requirements.extend(unverified.into_values());
    for r in &requirements {
        if r.status() == Status::Untested {
            problems.push(Problem::Untested(format!("{} \"{}\"", r.id(), r.text)));
        }
    }
    // A duplicate must point at a section whose requirements are cited:
    // the citations it leans on must exist.
    let cited = |target: &str| {
        let (document, section) = target.split_once('#').unwrap_or((target, ""));
        requirements.iter().any(|r| {
            r.document == document
                && r.section == section
                && r.index > 0
                && matches!(r.status(), Status::Tested | Status::Exception)
        })
    };
    let duplicates: Vec<Annotation> = requirements
        .iter()
        .flat_map(|r| &r.citations)
        .chain(&informative)
        .filter(|a| a.kind == Kind::Duplicate)
        .filter(|a| {
            !cited(
                a.reason
                    .as_deref()
                    .unwrap_or("")
                    .split_whitespace()
                    .next()
                    .unwrap_or(""),
            )
        })
        .cloned()
        .collect();
    for a in duplicates {
        if !problems.contains(&Problem::DuplicateOfNothing(a.clone())) {
            problems.push(Problem::DuplicateOfNothing(a));
        }
    }
    Coverage {
        documents,
        requirements,
        informative,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotation::parse_file;
    use crate::spec::{parse_sections, HeadingStyle, DOCUMENTS};

    fn documents() -> Vec<Document> {
        let text = "7.1  Setup\n   The sender MUST send. The receiver SHOULD wait. A definition.\n";
        DOCUMENTS
            .iter()
            .map(|info| Document {
                info,
                sections: if info.id == "rfc5044" {
                    parse_sections(text, HeadingStyle::Plain)
                } else {
                    Vec::new()
                },
            })
            .collect()
    }

    fn run(source: &str) -> Coverage {
        let (a, e) = parse_file(Path::new("src/x.rs"), source);
        match_citations(documents(), a, e)
    }

    #[test]
    fn implemented_and_tested() {
        let c = run("//= rfc5044#7.1\n//# The sender MUST send.\nx\n//= rfc5044#7.1\n//= type=test\n//# sender MUST\n");
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.requirements[0].status(), Status::Tested);
        assert_eq!(c.requirements[1].status(), Status::NotCited);
        assert_eq!(c.counts("rfc5044")[&Status::Tested], 1);
    }

    #[test]
    fn a_requirement_that_loses_its_test_fails() {
        let c = run("//= rfc5044#7.1\n//# The sender MUST send.\n");
        assert_eq!(c.requirements[0].status(), Status::Untested);
        assert!(matches!(c.problems.as_slice(), [Problem::Untested(_)]));
    }

    #[test]
    fn a_quote_spanning_two_sentences_cites_both() {
        let c = run(
            "//= rfc5044#7.1\n//= type=exception\n//= reason=not built\n//# send. The receiver\n",
        );
        assert_eq!(c.requirements[0].status(), Status::Exception);
        assert_eq!(c.requirements[1].status(), Status::Exception);
    }

    #[test]
    fn duplicates_lean_on_a_cited_section() {
        let duplicate = "//= rfc5044#7.1\n//= type=duplicate\n//= reason=rfc5044#7.1 rule 1\n//# The receiver SHOULD wait.\n";
        let c = run(&format!(
            "{duplicate}\n//= rfc5044#7.1\n//# The sender MUST send.\n\n//= rfc5044#7.1\n//= type=test\n//# The sender MUST send.\n"
        ));
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.requirements[1].status(), Status::Duplicate);
        // Nothing cited where it points: the duplicate leans on nothing.
        let c = run(duplicate);
        assert!(matches!(
            c.problems.as_slice(),
            [Problem::DuplicateOfNothing(_)]
        ));
    }

    #[test]
    fn wrong_citations() {
        let c = run(concat!(
            "//= rfc9999#1\n//# x\n\n",
            "//= rfc5044#9.9\n//# x\n\n",
            "//= rfc5044#7.1\n//# The sender MUST NOT send.\n\n",
        ));
        assert!(matches!(
            c.problems.as_slice(),
            [
                Problem::UnknownDocument(_),
                Problem::UnknownSection(_),
                Problem::QuoteNotFound(_)
            ]
        ));
    }

    #[test]
    fn informative_and_unverified() {
        let c = run(concat!(
            "//= rfc5044#7.1\n//# A definition.\n\n",
            "//= rfc5040#4.4\n//# The Read MUST be sent.\n\n",
            "//= rfc5040#4.4\n//= type=test\n//# The Read MUST be sent.\n",
        ));
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.informative.len(), 1);
        let last = c.requirements.last().unwrap();
        assert_eq!((last.document, last.status()), ("rfc5040", Status::Tested));
    }
}
