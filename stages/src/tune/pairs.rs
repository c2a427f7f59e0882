//! The pairs a bundle's text gives for free: a question side that says what a chunk is
//! about, in words, and the chunk that answers it.
//!
//! - `heading`: a docs section's heading (a page's title for its first chunk);
//! - `description`: a page's description (front matter or llms.txt) and its first chunk;
//! - `doc_comment`: a code item's doc comment or docstring, its first paragraph, and
//!   the item's chunk.
//!
//! The question side never names the answer: the chunk's identifiers (its symbol, the
//! symbol's parts, the items it holds) and every code-like word (`snake_case`,
//! `CamelCase`, `a::b`, `a.b`, `f()`, anything in backticks) are stripped, and a
//! question left with fewer than [`MIN_WORDS`] words is dropped. So the fit learns
//! what the words mean, not to match a name.

use std::collections::{BTreeMap, HashMap};

use atlas_runtime::ChunkKind;
use atlas_runtime::chunk_table::ChunkRecord;

/// Words (of two letters or more) a question keeps after stripping, at least.
pub const MIN_WORDS: usize = 3;
/// A question side is cut to this many bytes (at a word).
const MAX_QUESTION_BYTES: usize = 240;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PairKind {
    Heading,
    Description,
    DocComment,
}

impl PairKind {
    pub fn name(self) -> &'static str {
        match self {
            PairKind::Heading => "heading",
            PairKind::Description => "description",
            PairKind::DocComment => "doc_comment",
        }
    }
}

/// One mined pair: the question side's text and the chunk that answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub kind: PairKind,
    pub question: String,
    pub chunk: usize,
}

/// Every pair the chunks give, in chunk order. A question that several chunks would
/// answer (a heading every page has) is dropped: it says nothing about one of them.
pub fn mine(records: &[ChunkRecord]) -> Vec<Pair> {
    let mut pairs = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let ids = identifiers(r);
        let mut push = |kind: PairKind, text: &str| {
            if let Some(question) = strip(text, &ids) {
                pairs.push(Pair { kind, question, chunk: i });
            }
        };
        match r.kind {
            ChunkKind::Docs => {
                if let Some(h) = r.heading_path.last() {
                    push(PairKind::Heading, h);
                } else if r.ordinal == 0 {
                    push(PairKind::Heading, &r.title);
                }
                if r.ordinal == 0
                    && let Some(d) = &r.description
                {
                    push(PairKind::Description, first_paragraph(d));
                }
            }
            ChunkKind::Code => {
                if r.symbol.is_some()
                    && let Some(doc) = doc_comment(&r.text)
                {
                    push(PairKind::DocComment, &doc);
                }
            }
        }
    }
    // A question several chunks share is ambiguous: drop every copy.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for p in &pairs {
        *seen.entry(p.question.to_lowercase()).or_default() += 1;
    }
    pairs.retain(|p| seen[&p.question.to_lowercase()] == 1);
    pairs
}

/// Pairs by kind.
pub fn counts(pairs: &[Pair]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in pairs {
        *out.entry(p.kind.name().to_owned()).or_default() += 1;
    }
    out
}

/// The names a chunk answers to, lowercased: its symbol, each part of it, and the
/// items it holds.
pub fn identifiers(r: &ChunkRecord) -> Vec<String> {
    let mut ids = Vec::new();
    for s in r.symbol.iter().chain(&r.symbols) {
        ids.push(s.to_lowercase());
        ids.extend(s.split([':', '.', '<', '>', '(', ')', ' ']).filter(|p| !p.is_empty()).map(str::to_lowercase));
    }
    ids.sort();
    ids.dedup();
    ids
}

/// A word that reads as code rather than prose.
fn code_like(w: &str) -> bool {
    let inner_capital = w.chars().skip(1).any(|c| c.is_ascii_uppercase()) && w.chars().any(|c| c.is_ascii_lowercase());
    w.contains(['_', ':', '(', ')', '<', '>', '[', ']', '{', '}', '=', '#', '/', '\\', '`', '$'])
        || w.trim_end_matches('.').contains('.')
        || inner_capital
}

/// `text` without code and without the answer's names, in at most
/// [`MAX_QUESTION_BYTES`]; `None` when fewer than [`MIN_WORDS`] words are left.
pub fn strip(text: &str, ids: &[String]) -> Option<String> {
    // Backticked spans go whole.
    let mut prose = String::with_capacity(text.len());
    for (n, part) in text.split('`').enumerate() {
        if n % 2 == 0 {
            prose.push_str(part);
        }
        prose.push(' ');
    }
    let mut kept: Vec<&str> = Vec::new();
    for w in prose.split_whitespace() {
        let bare = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        let names_it = bare
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .chain([bare])
            .any(|part| ids.iter().any(|id| id.eq_ignore_ascii_case(part)));
        if bare.is_empty() || code_like(bare) || names_it {
            continue;
        }
        kept.push(w);
    }
    let words = kept.iter().filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2).count();
    if words < MIN_WORDS {
        return None;
    }
    let mut out = String::new();
    for w in kept {
        if out.len() + w.len() + 1 > MAX_QUESTION_BYTES {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    Some(out)
}

/// The first paragraph of `text`.
fn first_paragraph(text: &str) -> &str {
    text.trim().split("\n\n").next().unwrap_or("")
}

/// The first doc comment of a code chunk, its first paragraph: Rust `///` or `//!`
/// lines, or a Python docstring.
pub fn doc_comment(code: &str) -> Option<String> {
    let mut lines = Vec::new();
    for line in code.lines().map(str::trim_start) {
        if let Some(rest) = line.strip_prefix("///").or_else(|| line.strip_prefix("//!")) {
            if rest.trim().is_empty() && !lines.is_empty() {
                break;
            }
            lines.push(rest.trim());
        } else if !lines.is_empty() {
            break;
        }
    }
    if !lines.is_empty() {
        return Some(lines.join(" ").trim().to_owned());
    }
    let at = code.find("\"\"\"").or_else(|| code.find("'''"))?;
    let quote = &code[at..at + 3];
    let body = &code[at + 3..];
    let end = body.find(quote)?;
    let doc = first_paragraph(&body[..end]);
    let doc: Vec<&str> = doc.split_whitespace().collect();
    (!doc.is_empty()).then(|| doc.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_and_the_answers_names_are_stripped() {
        let ids = vec!["encrypt_radix".to_owned(), "radixclientkey".to_owned()];
        assert_eq!(
            strip("Encrypts a value with `encrypt_radix` into RadixClientKey blocks", &ids).as_deref(),
            Some("Encrypts a value with into blocks")
        );
        assert_eq!(strip("Use `FheUint8::new()` here", &ids), None, "two words left");
        assert_eq!(strip("see foo.bar and my_fn() for it all", &ids).as_deref(), Some("see and for it all"));
    }

    #[test]
    fn doc_comments_of_rust_and_python() {
        assert_eq!(
            doc_comment("/// Adds two numbers\n/// together.\n///\n/// More.\nfn add() {}").as_deref(),
            Some("Adds two numbers together.")
        );
        assert_eq!(
            doc_comment("def f():\n    \"\"\"Fit the model on\n    the data.\n\n    Args: x\"\"\"\n").as_deref(),
            Some("Fit the model on the data.")
        );
        assert_eq!(doc_comment("fn f() {}"), None);
    }
}
