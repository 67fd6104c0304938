//! Traceability from the iWARP specifications to the code.
//!
//! Every requirement (a sentence with MUST, MUST NOT, SHOULD, SHOULD NOT,
//! SHALL, SHALL NOT, REQUIRED or RECOMMENDED) of the specification texts
//! under `spec/` can be cited where it is implemented and where it is
//! tested, in the style of s2n-quic's duvet:
//!
//! ```text
//! //= rfc5044#7.1.2
//! //# The Responder MUST NOT send any FPDUs until it has received a valid FPDU
//! ```
//!
//! A citation is an implementation by default; `//= type=test` after the
//! target line marks a test, and `//= type=exception` with
//! `//= reason=...` documents a requirement that is deliberately not
//! implemented (these may also live in `spec/exceptions.txt`).
//! `//= type=duplicate` with `//= reason=rfc5044#7.1.2` marks a seed
//! draft's requirement that a later document restates, in a section that
//! is cited itself (these live in `spec/duplicates.txt`). The quoted
//! text must appear in that section of that document (whitespace and line
//! breaks aside), so a citation cannot drift from the text it claims.
//!
//! [`check`] finds every citation in the repository, matches it to the
//! requirements it quotes and reports what is implemented and tested,
//! implemented only, excepted or not cited; a requirement cited as
//! implemented without a test is an error, and so is a quote that is not
//! in its section.

#![forbid(unsafe_code)]

pub mod annotation;
pub mod coverage;
pub mod report;
pub mod spec;

pub use annotation::{scan_repository, Annotation, Kind};
pub use coverage::{check, Coverage, Problem, RequirementCoverage};
pub use spec::{load_documents, Document, Requirement, Section, DOCUMENTS};
