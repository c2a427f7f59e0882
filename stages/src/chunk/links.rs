//! What chunks learn from each other: docs ↔ code cross-links, and `cluster_tags`
//! (the sibling files of each document).

use atlas_runtime::ChunkKind;
use std::collections::{BTreeMap, BTreeSet};

use atlas_runtime::chunk_table::ChunkRecord;

use crate::text::code_spans;

/// At most this many links are kept per chunk, in each direction.
const MAX_LINKS: usize = 32;

/// Docs ↔ code cross-links: a docs chunk that mentions, in inline code or a code
/// block, an identifier defined in the corpus (exact match on the qualified name or
/// the bare last segment, 3+ characters) records the symbol; the code chunk records
/// the docs chunk.
pub fn cross_link(all: &mut [ChunkRecord]) {
    let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, c) in all.iter().enumerate().filter(|(_, c)| c.kind == ChunkKind::Code) {
        for sym in c.symbol.iter().chain(&c.symbols) {
            if sym.starts_with("impl ") {
                continue;
            }
            by_name.entry(sym.clone()).or_default().push(i);
            let bare = sym.rsplit(['.', ':']).next().unwrap_or(sym).trim_end_matches('!');
            if bare.len() >= 3 && bare != sym {
                by_name.entry(bare.to_owned()).or_default().push(i);
            }
        }
    }
    if by_name.is_empty() {
        return;
    }
    // The back links to make, each code chunk's at most MAX_LINKS: collected first (the
    // docs are borrowed meanwhile), and counted as they are, so a name defined in
    // thousands of chunks and mentioned in thousands of pages costs no more than the
    // links kept.
    let mut back: Vec<(usize, String)> = Vec::new();
    let mut kept = vec![0usize; all.len()];
    for doc in all.iter_mut().filter(|c| c.kind == ChunkKind::Docs) {
        let mut mentions: Vec<String> = Vec::new();
        let mut targets: BTreeSet<usize> = BTreeSet::new();
        // Its own text: the overlap belongs to the previous chunk.
        for (path, last) in code_identifiers(&doc.text[doc.overlap_chars as usize..]) {
            // The qualified path if it is defined, else its bare last segment.
            let Some((name, hits)) = [path, last].into_iter().find_map(|n| by_name.get(&n).map(|h| (n, h))) else {
                continue;
            };
            if mentions.len() < MAX_LINKS && !mentions.contains(&name) {
                mentions.push(name);
            }
            targets.extend(hits.iter().copied());
        }
        doc.mentions = mentions;
        for h in targets {
            if kept[h] < MAX_LINKS {
                kept[h] += 1;
                back.push((h, doc.chunk_id.clone()));
            }
        }
    }
    for (h, id) in back {
        let m = &mut all[h].mentioned_in;
        if !m.contains(&id) && m.len() < MAX_LINKS {
            m.push(id);
        }
    }
}

/// Identifiers written as code in markdown (inline code spans and fences), as
/// `(path, last segment)`: `Foo::bar()` gives (`Foo::bar`, `bar`).
fn code_identifiers(text: &str) -> BTreeSet<(String, String)> {
    let mut code = String::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim_start_matches([' ', '>']);
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            code.push_str(line);
            code.push('\n');
            continue;
        }
        for (a, b) in code_spans(line) {
            code.push_str(&line[a..b]);
            code.push('\n');
        }
    }
    let mut out = BTreeSet::new();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let b = code.as_str();
    let mut i = 0;
    while i < b.len() {
        let c = b[i..].chars().next().expect("in bounds");
        if c.is_alphabetic() || c == '_' {
            let mut j = i;
            // an identifier path: ident((::|.)ident)*
            loop {
                while j < b.len() && b[j..].starts_with(is_ident) {
                    j += b[j..].chars().next().map_or(1, char::len_utf8);
                }
                let rest = &b[j..];
                let sep = if rest.starts_with("::") {
                    2
                } else if rest.starts_with('.') {
                    1
                } else {
                    0
                };
                if sep > 0 && rest[sep..].starts_with(|c: char| c.is_alphabetic() || c == '_') {
                    j += sep;
                } else {
                    break;
                }
            }
            let path = &b[i..j];
            let last = path.rsplit(['.', ':']).next().unwrap_or(path);
            out.insert((path.to_owned(), last.to_owned()));
            i = j;
        } else {
            i += c.len_utf8();
        }
    }
    out
}

/// `cluster_tags` of each document: the stems of the other documents in its folder.
pub fn cluster_tags(paths: &[String]) -> BTreeMap<String, String> {
    let mut by_dir: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let split = |p: &'_ str| -> (String, String) {
        let (dir, file) = p.rsplit_once('/').unwrap_or(("", p));
        let stem = file.rsplit_once('.').map_or(file, |(s, _)| s).to_lowercase();
        (dir.to_owned(), stem)
    };
    for p in paths {
        let (_, stem) = split(p);
        let dir = p.rsplit_once('/').map_or("", |(d, _)| d);
        by_dir.entry(dir).or_default().insert(stem);
    }
    paths
        .iter()
        .map(|p| {
            let (dir, stem) = split(p);
            let tags: Vec<&str> = by_dir
                .get(dir.as_str())
                .map(|s| s.iter().filter(|t| **t != stem).map(String::as_str).collect())
                .unwrap_or_default();
            (p.clone(), tags.join(" "))
        })
        .collect()
}
