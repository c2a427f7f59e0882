//! The bundle's symbol table, assembled across documents: each definition placed in
//! the chunk that holds its first line, and the identifier uses that name a
//! definition of the corpus, each with the innermost definition around it
//! (`atlas_runtime::symbols` has the format).

use std::collections::{HashMap, HashSet};

use atlas_runtime::chunk_table::ChunkRecord;
use atlas_runtime::symbols::{Definition, Reference, short_name};

use super::code::CodeDef;

/// The most references kept per defined name: a name used everywhere (`new`, `len`)
/// says little per use, and a hostile corpus could multiply them.
pub const MAX_REFS_PER_NAME: usize = 5_000;

/// One document's part of the table.
#[derive(Debug)]
pub struct DocSymbols<'a> {
    pub path: &'a str,
    pub language: &'a str,
    /// The document's chunks, in line order.
    pub chunks: Vec<&'a ChunkRecord>,
    pub defs: &'a [CodeDef],
    pub refs: &'a [(String, u32)],
}

/// The chunk of `chunks` (in line order) that holds `line`, else the last one that
/// starts before it (a line the chunker dropped: a closing brace, a licence).
fn chunk_at<'a>(chunks: &[&'a ChunkRecord], line: u32) -> Option<&'a ChunkRecord> {
    let after = chunks.partition_point(|c| c.start_line <= line);
    let at = after.checked_sub(1).map(|i| chunks[i]);
    at.or_else(|| chunks.first().copied())
}

/// For each line a reference of `refs` is on, the innermost definition of `defs` whose
/// lines hold it (a chunk can merge several small items, so the chunk's own symbol is
/// not the enclosing one). One sweep over both, sorted: definitions nest, so the
/// innermost open one is on top of the stack.
fn enclosing<'d>(defs: &'d [CodeDef], refs: &[(String, u32)]) -> HashMap<u32, &'d CodeDef> {
    let mut order: Vec<&CodeDef> = defs.iter().collect();
    order.sort_by_key(|d| (d.start_line, std::cmp::Reverse(d.end_line)));
    let mut lines: Vec<u32> = refs.iter().map(|(_, l)| *l).collect();
    lines.sort_unstable();
    lines.dedup();
    let mut out = HashMap::new();
    let (mut stack, mut next): (Vec<&CodeDef>, usize) = (Vec::new(), 0);
    for line in lines {
        while let Some(d) = order.get(next).filter(|d| d.start_line <= line) {
            while stack.last().is_some_and(|top| top.end_line < d.start_line) {
                stack.pop();
            }
            stack.push(d);
            next += 1;
        }
        while stack.last().is_some_and(|top| top.end_line < line) {
            stack.pop();
        }
        if let Some(top) = stack.last() {
            out.insert(line, *top);
        }
    }
    out
}

/// Definitions and references of every document, in document order.
pub fn table(docs: &[DocSymbols<'_>]) -> (Vec<Definition>, Vec<Reference>) {
    let mut defs = Vec::new();
    for d in docs {
        for def in d.defs {
            let Some(c) = chunk_at(&d.chunks, def.start_line) else { continue };
            defs.push(Definition {
                name: def.name.clone(),
                kind: def.kind.clone(),
                path: d.path.to_owned(),
                language: d.language.to_owned(),
                start_line: def.start_line,
                end_line: def.end_line,
                chunk_id: c.chunk_id.clone(),
                signature: def.signature.clone(),
                doc: def.doc.clone(),
                exported: def.exported,
            });
        }
    }
    let defined: HashSet<&str> = defs.iter().map(|d| short_name(&d.name)).collect();
    let mut per_name: HashMap<&str, usize> = HashMap::new();
    let mut refs = Vec::new();
    for d in docs {
        let around = enclosing(d.defs, d.refs);
        for (name, line) in d.refs {
            let Some(&name) = defined.get(name.as_str()) else { continue };
            let n = per_name.entry(name).or_default();
            if *n >= MAX_REFS_PER_NAME {
                continue;
            }
            let Some(c) = chunk_at(&d.chunks, *line) else { continue };
            *n += 1;
            refs.push(Reference {
                name: name.to_owned(),
                path: d.path.to_owned(),
                line: *line,
                chunk_id: c.chunk_id.clone(),
                enclosing: around.get(line).map(|e| e.name.clone()),
            });
        }
    }
    (defs, refs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, start_line: u32, end_line: u32) -> CodeDef {
        CodeDef {
            name: name.into(),
            kind: "function".into(),
            start_line,
            end_line,
            signature: None,
            doc: None,
            exported: None,
        }
    }

    #[test]
    fn a_use_is_enclosed_by_the_innermost_definition_around_it() {
        let defs = [def("Key", 1, 20), def("Key::new", 3, 8), def("Key::len", 10, 12), def("free", 30, 31)];
        let refs: Vec<(String, u32)> = [2, 5, 11, 15, 25, 31].iter().map(|&l| ("x".to_owned(), l)).collect();
        let around = enclosing(&defs, &refs);
        let name = |l: u32| around.get(&l).map(|d| d.name.as_str());
        assert_eq!(
            [2, 5, 11, 15, 25, 31].map(name),
            [Some("Key"), Some("Key::new"), Some("Key::len"), Some("Key"), None, Some("free")]
        );
    }
}
