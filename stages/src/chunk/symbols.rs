//! The bundle's symbol table, assembled across documents: each definition placed in
//! the chunk that holds its first line, and the identifier uses that name a
//! definition of the corpus, each with its enclosing chunk's symbol
//! (`atlas_runtime::symbols` has the format).

use std::collections::HashSet;

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
            });
        }
    }
    let defined: HashSet<&str> = defs.iter().map(|d| short_name(&d.name)).collect();
    let mut per_name: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut refs = Vec::new();
    for d in docs {
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
                enclosing: c.symbol.clone(),
            });
        }
    }
    (defs, refs)
}
