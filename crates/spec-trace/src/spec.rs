//! The specification texts: which documents there are, their sections,
//! and the requirements (normative sentences) in each section.
//!
//! The texts under `spec/` come in three layouts (plain Internet-Draft
//! text with page footers and running headers, an RFC rendered by a web
//! site with "Top Up ToC Page N" lines, and a draft converted to
//! Markdown). Loading strips the page furniture, finds the numbered
//! section headings and joins each section's lines into one normalised
//! string, in which quotes from the code are then looked up.

use std::ops::Range;
use std::path::Path;

/// How a document marks its section headings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadingStyle {
    /// A number at the start of a line, then the title: `7.1.2.  Title`.
    Plain,
    /// Markdown headings: `### **7.1 Title**`.
    Markdown,
}

/// A document the code may cite.
#[derive(Debug, Clone, Copy)]
pub struct DocumentInfo {
    /// The name used in citations: `//= rfc5044#7.1.2`.
    pub id: &'static str,
    /// The title, for reports.
    pub title: &'static str,
    /// The text under `spec/`, if the repository has one. Without it,
    /// quotes from this document cannot be checked and each distinct
    /// quote counts as one requirement.
    pub file: Option<&'static str>,
    /// How its sections are headed.
    pub style: HeadingStyle,
    /// What the text is, where that needs saying.
    pub note: &'static str,
}

/// Every document the code may cite.
pub const DOCUMENTS: &[DocumentInfo] = &[
    DocumentInfo {
        id: "rfc5044",
        title: "RFC 5044, Marker PDU Aligned Framing for TCP Specification",
        file: Some("rfc5044-part2.txt"),
        style: HeadingStyle::Plain,
        note: "sections 5 to 10 only (connection setup, teardown, errors); \
               the FPDU format of sections 4 is cited from draft-ietf-rddp-mpa-01, \
               which RFC 5044 did not change",
    },
    DocumentInfo {
        id: "draft-ietf-rddp-mpa-01",
        title: "draft-ietf-rddp-mpa-01, MPA Framing for TCP (2004)",
        file: Some("draft-ietf-rddp-mpa-01.txt"),
        style: HeadingStyle::Plain,
        note: "FPDU format, markers, CRC, MULPDU; startup revision 0",
    },
    DocumentInfo {
        id: "draft-culley-iwarp-mpa-02",
        title: "draft-culley-iwarp-mpa-02, MPA (2003)",
        file: Some("draft-culley-iwarp-mpa-02.txt"),
        style: HeadingStyle::Markdown,
        note: "the immediate-start profile: markers and CRC always on",
    },
    DocumentInfo {
        id: "draft-williams-iwarp-ift-01",
        title: "draft-williams-iwarp-ift-01, iWARP Framing for TCP (2003)",
        file: Some("draft-williams-iwarp-ift-01.txt"),
        style: HeadingStyle::Plain,
        note: "the alternative IFT framing",
    },
    DocumentInfo {
        id: "rfc5041",
        title: "RFC 5041, Direct Data Placement over Reliable Transports",
        file: Some("draft-ietf-rddp-ddp-06.txt"),
        style: HeadingStyle::Plain,
        note: "the text is draft-ietf-rddp-ddp-06, the draft that became RFC 5041; \
               its section numbers are the RFC's",
    },
    DocumentInfo {
        id: "rfc5040",
        title: "RFC 5040, A Remote Direct Memory Access Protocol Specification",
        file: None,
        style: HeadingStyle::Plain,
        note: "no text in the repository: each citation states a rule of the RFC in this \
               project's words, and each distinct statement counts as one requirement; \
               none is checked against the text",
    },
    DocumentInfo {
        id: "rfc6581",
        title: "RFC 6581, Enhanced RDMA Connection Establishment",
        file: None,
        style: HeadingStyle::Plain,
        note: "no text in the repository: as for RFC 5040, rules stated in this project's \
               words, not checked",
    },
];

/// Looks a document up by its citation name.
pub fn document_info(id: &str) -> Option<&'static DocumentInfo> {
    DOCUMENTS.iter().find(|d| d.id == id)
}

/// A loaded document.
#[derive(Debug, Clone)]
pub struct Document {
    /// What it is.
    pub info: &'static DocumentInfo,
    /// Its sections in the order they appear (empty without a text).
    pub sections: Vec<Section>,
}

impl Document {
    /// The section numbered `number` (`7.1.2`).
    pub fn section(&self, number: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.number == number)
    }

    /// Whether quotes can be checked against a text.
    pub fn has_text(&self) -> bool {
        self.info.file.is_some()
    }
}

/// One numbered section.
#[derive(Debug, Clone)]
pub struct Section {
    /// `7.1.2`, or `A` for an appendix.
    pub number: String,
    /// The heading's title.
    pub title: String,
    /// The body, normalised (see [`normalize`]).
    pub text: String,
    /// The normative sentences of the body, in order.
    pub requirements: Vec<Requirement>,
}

/// A normative sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Where its text lies in [`Section::text`].
    pub span: Range<usize>,
    /// The sentence.
    pub text: String,
    /// The strongest keyword in it (`MUST NOT` before `MUST`, ...).
    pub level: Level,
}

/// The keyword that makes a sentence a requirement, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// MUST, MUST NOT, SHALL, SHALL NOT, REQUIRED.
    Must,
    /// SHOULD, SHOULD NOT, RECOMMENDED.
    Should,
}

impl Level {
    /// The keyword family's name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Must => "MUST",
            Self::Should => "SHOULD",
        }
    }
}

/// Why a document could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
}

/// Loads every document of [`DOCUMENTS`] from `spec_dir`.
pub fn load_documents(spec_dir: &Path) -> Result<Vec<Document>, LoadError> {
    DOCUMENTS
        .iter()
        .map(|info| {
            let sections = match info.file {
                Some(file) => {
                    let path = spec_dir.join(file);
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| LoadError::Io(path.display().to_string(), e))?;
                    parse_sections(&text, info.style)
                }
                None => Vec::new(),
            };
            Ok(Document { info, sections })
        })
        .collect()
}

/// Splits a document's text into its numbered sections. A number seen
/// twice (the table of contents, then the section itself) keeps the
/// later text.
pub fn parse_sections(text: &str, style: HeadingStyle) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut current: Option<(String, String, Vec<&str>)> = None;
    let finish = |current: Option<(String, String, Vec<&str>)>, sections: &mut Vec<Section>| {
        if let Some((number, title, lines)) = current {
            let text = normalize(lines.iter().copied());
            let requirements = requirements(&text);
            let section = Section {
                number,
                title,
                text,
                requirements,
            };
            match sections.iter_mut().find(|s| s.number == section.number) {
                Some(earlier) => *earlier = section,
                None => sections.push(section),
            }
        }
    };
    for line in text.lines() {
        if is_furniture(line) {
            continue;
        }
        if let Some((number, title)) = heading(line, style) {
            finish(current.take(), &mut sections);
            current = Some((number, title, Vec::new()));
        } else if let Some((_, _, lines)) = current.as_mut() {
            lines.push(line);
        }
    }
    finish(current, &mut sections);
    sections
}

/// Page footers, running headers and a web page's navigation lines.
fn is_furniture(line: &str) -> bool {
    let t = line.trim();
    if t.contains('\u{c}') {
        return true;
    }
    // "Culley et. al.   Expires: January 2005   [Page 1]", "[Page 9]".
    if t.ends_with(']') {
        if let Some(open) = t.rfind("[Page ") {
            if t[open + 6..t.len() - 1].chars().all(|c| c.is_ascii_digit()) {
                return true;
            }
        }
    }
    // "Top      Up      ToC       Page 23", with "prevText" on the first.
    let nav = t.strip_prefix("prevText").unwrap_or(t).trim_start();
    if nav.starts_with("Top") && nav.contains("ToC") && nav.contains("Page ") {
        return true;
    }
    // "INTERNET-DRAFT       MPA Framing for TCP            16 July 2004",
    // "Internet-Draft        DDP Protocol Specification           June 2006".
    let year_last = |t: &str| {
        let year = t.rsplit(' ').next().unwrap_or("");
        year.len() == 4 && year.chars().all(|c| c.is_ascii_digit())
    };
    if t.to_ascii_uppercase().starts_with("INTERNET-DRAFT") && t.len() > 40 && year_last(t) {
        return true;
    }
    // "Shah, et. al.            Expires January 2007                        1";
    // a Markdown conversion splits the footer into "P. Culley et. al." and
    // "Expires: August 2003".
    if t.contains("et. al.") && (t.contains("Expires") || t.ends_with("et. al.")) {
        return true;
    }
    if t.starts_with("Expires") && t.len() < 40 && year_last(t) {
        return true;
    }
    false
}

/// The section number and title of a heading line.
fn heading(line: &str, style: HeadingStyle) -> Option<(String, String)> {
    let rest = match style {
        HeadingStyle::Plain => {
            if line.starts_with(char::is_whitespace) {
                return None;
            }
            line
        }
        HeadingStyle::Markdown => {
            let t = line.strip_prefix('#')?.trim_start_matches('#');
            t.trim()
        }
    };
    let cleaned = clean_markup(rest);
    let rest = cleaned.trim();
    if let Some(appendix) = rest.strip_prefix("Appendix ") {
        let mut parts = appendix.splitn(2, |c: char| c == '.' || c.is_whitespace());
        let letter = parts.next()?;
        if letter.len() == 1 && letter.chars().all(|c| c.is_ascii_uppercase()) {
            let title = parts.next().unwrap_or("").trim().to_string();
            return Some((letter.to_string(), title));
        }
        return None;
    }
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let number = rest[..number_len].trim_end_matches('.');
    let title = rest[number_len..].trim();
    let valid_number = !number.is_empty()
        && number.split('.').all(|p| !p.is_empty() && p.len() <= 2)
        && number.starts_with(|c: char| c.is_ascii_digit());
    let titled = title.starts_with(|c: char| c.is_ascii_uppercase() || c == '"' || c == '\'')
        && rest[number_len..].starts_with(char::is_whitespace);
    (valid_number && titled).then(|| (number.to_string(), title.to_string()))
}

/// Removes Markdown markup: emphasis, `[text](#)` links, escapes.
fn clean_markup(line: &str) -> String {
    let mut out = line.replace("**", "");
    // Links, innermost first: `[\[RFC793\]](#)` is `\[RFC793\]`.
    while let Some(end) = out.find("](#)") {
        let bytes = out.as_bytes();
        let open = (0..end)
            .rev()
            .find(|&i| bytes[i] == b'[' && (i == 0 || bytes[i - 1] != b'\\'));
        match open {
            Some(open) => {
                let inner = out[open + 1..end].to_string();
                out.replace_range(open..end + 4, &inner);
            }
            None => out.replace_range(end..end + 4, "]"),
        }
    }
    for (from, to) in [("\\_", "_"), ("\\[", "["), ("\\]", "]"), ("\\*", "*")] {
        out = out.replace(from, to);
    }
    out
}

/// Joins lines into one string with single spaces, Markdown markup
/// removed. A line ending in a hyphenated word joins the next without a
/// space (`MPA-` / `aware` is `MPA-aware`), as RFCs break lines only after
/// hyphens that belong to the word.
pub fn normalize<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for line in lines {
        let line = clean_markup(line);
        for (i, word) in line.split_whitespace().enumerate() {
            let joins = i == 0
                && out.ends_with('-')
                && out[..out.len() - 1].ends_with(|c: char| c.is_ascii_alphanumeric())
                && word.starts_with(|c: char| c.is_ascii_lowercase());
            if !out.is_empty() && !joins && !out.ends_with(' ') {
                out.push(' ');
            }
            out.push_str(word);
        }
        if out.ends_with('-') {
            continue;
        }
        if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// The normative sentences of a normalised text.
pub fn requirements(text: &str) -> Vec<Requirement> {
    sentences(text)
        .into_iter()
        .filter_map(|span| {
            let sentence = &text[span.clone()];
            level(sentence).map(|level| Requirement {
                text: sentence.to_string(),
                span,
                level,
            })
        })
        .collect()
}

/// The strongest requirement keyword in a sentence, as a whole word.
fn level(sentence: &str) -> Option<Level> {
    let words: Vec<&str> = sentence
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .collect();
    if words
        .iter()
        .any(|w| matches!(*w, "MUST" | "SHALL" | "REQUIRED"))
    {
        Some(Level::Must)
    } else if words.iter().any(|w| matches!(*w, "SHOULD" | "RECOMMENDED")) {
        Some(Level::Should)
    } else {
        None
    }
}

/// Splits a normalised text into sentences: a `.`, `!`, `?` or `:`-less
/// end followed by a space and an upper-case letter, a digit or an
/// opening bracket, except after common abbreviations.
fn sentences(text: &str) -> Vec<Range<usize>> {
    const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "al", "etc", "vs", "cf", "Fig", "Sec", "No"];
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let ends = matches!(c, b'.' | b'!' | b'?')
            && bytes.get(i + 1) == Some(&b' ')
            && bytes
                .get(i + 2)
                .is_some_and(|n| n.is_ascii_uppercase() || n.is_ascii_digit() || *n == b'(');
        if ends {
            let word_start = text[..i].rfind(' ').map_or(0, |p| p + 1);
            let word = &text[word_start..i];
            if !ABBREVIATIONS.contains(&word) {
                spans.push(start..i + 1);
                start = i + 2;
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    if start < text.len() {
        spans.push(start..text.len());
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_headings_and_furniture() {
        let text = "\
1  Introduction\n\
   Text of the intro.  It MUST be read.\n\
\n\
   Culley et. al.          Expires: January 2005               [Page 1]\n\
\n\
   INTERNET-DRAFT           MPA Framing for TCP            16 July 2004\n\
   A sentence that runs over the page and SHOULD\n\
   join up. Another one.\n\
Shah, et. al.            Expires January 2007                        19\n\
Internet-Draft        DDP Protocol Specification           June 2006\n\
   So does this\n\
P. Culley et. al.\n\
Expires: August 2003\n\
   one.\n\
7.1.2.  Connection Startup Rules\n\
   The MPA-\n\
   aware receiver MUST NOT stop.\n";
        let sections = parse_sections(text, HeadingStyle::Plain);
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].number, "1");
        assert_eq!(
            sections[0].text,
            "Text of the intro. It MUST be read. A sentence that runs over the page and SHOULD join up. Another one. So does this one."
        );
        assert_eq!(sections[0].requirements.len(), 2);
        assert_eq!(sections[0].requirements[1].level, Level::Should);
        assert_eq!(sections[1].number, "7.1.2");
        assert_eq!(sections[1].title, "Connection Startup Rules");
        assert_eq!(sections[1].text, "The MPA-aware receiver MUST NOT stop.");
    }

    #[test]
    fn markdown_headings_and_markup() {
        let text = "\
### **7.1 MPA Markers**\n\
The sender **MUST** insert a marker every 512 octets (see [\\[RFC793\\]](#)), i.e. at ULPDU\\_Length. Done.\n\
1. A list item at the start of a line is not a heading.\n\
## 7.2 CRC Calculation\n\
It is computed.\n";
        let sections = parse_sections(text, HeadingStyle::Markdown);
        let numbers: Vec<&str> = sections.iter().map(|s| s.number.as_str()).collect();
        assert_eq!(numbers, ["7.1", "7.2"]);
        assert_eq!(
            sections[0].requirements[0].text,
            "The sender MUST insert a marker every 512 octets (see [RFC793]), i.e. at ULPDU_Length."
        );
    }

    #[test]
    fn a_later_heading_replaces_the_table_of_contents_entry() {
        let text = "5  Data Transfer\n6  Teardown\n5  Data Transfer\n   Data MUST move.\n";
        let sections = parse_sections(text, HeadingStyle::Plain);
        assert_eq!(sections[0].text, "Data MUST move.");
    }

    #[test]
    fn not_headings() {
        for line in [
            "0                   1                   2",
            "   1  Indented",
            "12345 Too long a component",
            "7.1x Not a number",
        ] {
            assert_eq!(heading(line, HeadingStyle::Plain), None, "{line}");
        }
        assert_eq!(
            heading("Appendix A.  Optimized MPA-aware TCP", HeadingStyle::Plain),
            Some(("A".into(), "Optimized MPA-aware TCP".into()))
        );
    }

    #[test]
    fn sentence_ends() {
        let text = "It MUST work, e.g. here. See Section 4.3. 2. Next it SHOULD stop.";
        let spans = sentences(text);
        let got: Vec<&str> = spans.iter().map(|s| &text[s.clone()]).collect();
        assert_eq!(
            got,
            [
                "It MUST work, e.g. here.",
                "See Section 4.3.",
                "2.",
                "Next it SHOULD stop."
            ]
        );
        // Lower-case keywords are not requirements.
        assert!(requirements("It must not.").is_empty());
    }
}
