//! What is embedded for each chunk: its text, behind a header that names where it
//! sits (the file's opening words, the page and its section), when `header` is on.

use std::collections::HashMap;

use atlas_runtime::ChunkKind;
use atlas_runtime::chunk_table::ChunkRecord;
use rayon::prelude::*;

/// What the embedder reads for a chunk: one line that places it, then its text. Docs:
/// the page title and heading path (an H2 chunk's text does not hold its page's
/// title), and the page's opening words ([`file_context`]). Code: the file's path in
/// its source and the symbol with its kind (a function's body rarely says which
/// module or type it belongs to).
pub fn with_header(r: &ChunkRecord, context: &HashMap<String, String>) -> String {
    format!("{}\n{}", header(r, context), r.text)
}

/// What the embedder reads for each chunk: [`with_header`] with `context`
/// ([`file_context`]), or the text alone without `header`.
pub fn passages(records: &[ChunkRecord], context: &HashMap<String, String>, header: bool) -> Vec<String> {
    records.par_iter().map(|r| if header { with_header(r, context) } else { r.text.clone() }).collect()
}

/// Each docs page's opening, at most `words` words, by path ([`opening`] of the
/// page's first chunk). Empty when `words` is 0. Code files get none: a module's
/// docs, tried the same way, did not help (docs/decisions.md, "The page's opening").
pub fn file_context(records: &[ChunkRecord], words: usize) -> HashMap<String, String> {
    if words == 0 {
        return HashMap::new();
    }
    records
        .iter()
        .filter(|r| r.ordinal == 0 && r.kind == ChunkKind::Docs)
        .filter_map(|r| Some((r.path.clone(), opening(&r.text, words)?)))
        .collect()
}

/// The first `words` words of a page after its headings: its lines as written, blank
/// lines and headings skipped, up to its first code block. None when it opens with
/// none. At most 16 bytes a word (cut at a character), so a page of one endless
/// "word" cannot fill its other chunks' windows. (Taking only its paragraphs' prose,
/// without front matter, tables, lists and GitBook tags, scored lower on the tune
/// halves: docs/decisions.md.)
pub fn opening(markdown: &str, words: usize) -> Option<String> {
    let mut out: String = markdown
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .take_while(|l| !l.starts_with("```"))
        .flat_map(str::split_whitespace)
        .take(words)
        .collect::<Vec<&str>>()
        .join(" ");
    out.truncate(atlas_runtime::utf8::floor_char_boundary(&out, words.saturating_mul(16)));
    (!out.is_empty()).then_some(out)
}

/// The line that places a chunk: its file and symbol (code), or its title and heading
/// path (docs), then its page's opening in brackets (`context`, [`file_context`])
/// unless it is the page's first chunk, which holds the opening itself.
pub fn header(r: &ChunkRecord, context: &HashMap<String, String>) -> String {
    let line = if r.kind == ChunkKind::Code {
        let path = r.path.split_once('/').map_or(r.path.as_str(), |(_, p)| p);
        match (&r.symbol, &r.symbol_kind) {
            (Some(s), Some(k)) => format!("{path}: {k} {s}"),
            _ => path.to_owned(),
        }
    } else {
        let mut parts = vec![r.title.as_str()];
        parts.extend(r.heading_path.iter().map(String::as_str).filter(|h| *h != r.title));
        parts.join(" > ")
    };
    match context.get(&r.path).filter(|_| r.ordinal > 0) {
        Some(c) => format!("{line} ({c})"),
        None => line,
    }
}
