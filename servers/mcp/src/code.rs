//! Code intelligence on the served libraries' symbol tables (built at pack time from
//! the chunker's tree-sitter parse, docs/bundle-format.md): where a name is defined,
//! where it is used, and what a file defines. What the rag server's `find_symbol`,
//! `find_references` and `get_file_outline` and `atlas search --symbol|--references`
//! answer.
//!
//! References are by name, not type-resolved: a use of `new` is a use of every `new`
//! the code defines. The replies say so.

use std::sync::Arc;

use atlas_runtime::Bundle;
use atlas_runtime::symbols::{Definition, segments, short_name};
use rmcp::schemars::JsonSchema;
use serde::Serialize;

/// What the replies say about references.
pub const BY_NAME: &str = "references are found by name, not resolved by type: a use of a name is listed for every \
                           definition of that name";

/// The most definitions a prefix lookup considers per library.
const PREFIX_LIMIT: usize = 1_000;

/// One definition, with where to read it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SymbolOut {
    /// `name@version` of the library that defines it.
    pub library: String,
    /// Qualified as the code qualifies it (`Type::method`, `Class.method`).
    pub name: String,
    /// function, method, class, struct, enum, trait, interface, type, mod, macro, const, static, variable.
    pub kind: String,
    pub path: String,
    pub language: String,
    pub start_line: u32,
    pub end_line: u32,
    /// The item's first line.
    pub signature: Option<String>,
    /// Its doc comment or docstring (first paragraph).
    pub doc: Option<String>,
    /// Whether the package exports it (its public API); absent where the code does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exported: Option<bool>,
    /// Where a reader checks it: the file (at its commit, for a repository) with the lines.
    pub citation: String,
    /// The file as a resource (`atlas://{library}/{path}`).
    pub uri: String,
    /// The chunk holding it (for get_chunk).
    pub chunk_id: String,
}

/// One use of a name.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RefLine {
    pub line: u32,
    /// The function, method or type the use sits in.
    pub enclosing: Option<String>,
    pub chunk_id: String,
}

/// The uses of a name in one file.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RefFile {
    pub library: String,
    pub path: String,
    pub uri: String,
    pub references: Vec<RefLine>,
}

/// One use while a reply is paged: its line, which is what it costs in the reply, and
/// the file it is in, which the reply groups by.
#[derive(Debug, Serialize)]
pub struct Use<'a> {
    #[serde(skip)]
    pub file: &'a RefFile,
    #[serde(flatten)]
    pub line: &'a RefLine,
}

/// One symbol of a file's outline.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OutlineSymbol {
    pub name: String,
    pub kind: String,
    pub start_line: u32,
    pub end_line: u32,
    pub signature: Option<String>,
}

/// How a definition ranks among several: the name as asked before a name that only
/// ends like it, then [`Definition::preference`] (code before tests, the public API
/// before private items, types and functions before variables).
fn rank(d: &Definition, asked: &[&str]) -> (bool, (bool, bool, u8), usize) {
    (segments(&d.name) != asked, d.preference(), d.name.len())
}

/// A definition's kind as a reply says it: `private function` for one the package
/// does not export.
pub fn kind_said(d: &SymbolOut) -> String {
    match d.exported {
        Some(false) => format!("private {}", d.kind),
        _ => d.kind.clone(),
    }
}

/// A definition as a reply gives it.
pub fn symbol_out(b: &Bundle, i: u32) -> SymbolOut {
    let d = &b.symbols().defs[i as usize];
    let mut hit = b.definition_hit(i);
    hit.start_line = d.start_line;
    hit.end_line = d.end_line;
    SymbolOut {
        library: b.library(),
        name: d.name.clone(),
        kind: d.kind.clone(),
        path: d.path.clone(),
        language: d.language.clone(),
        start_line: d.start_line,
        end_line: d.end_line,
        signature: d.signature.clone(),
        doc: d.doc.clone(),
        exported: d.exported,
        citation: hit.citation(),
        uri: crate::resources::uri(&b.library(), &d.path),
        chunk_id: d.chunk_id.clone(),
    }
}

/// What `find_symbol` asks.
#[derive(Debug, Clone, Default)]
pub struct SymbolQuery<'a> {
    pub name: &'a str,
    /// Every definition whose short name starts with `name` (ASCII case aside).
    pub prefix: bool,
    pub kind: Option<&'a str>,
    pub language: Option<&'a str>,
}

/// The definitions `q` names across `bundles`, best first.
pub fn find_symbol(bundles: &[Arc<Bundle>], q: &SymbolQuery<'_>) -> Vec<(Arc<Bundle>, u32)> {
    let asked = segments(q.name);
    let mut found: Vec<(Arc<Bundle>, u32)> = Vec::new();
    for b in bundles {
        let t = b.symbols();
        let ids = if q.prefix { t.prefixed(short_name(q.name), PREFIX_LIMIT) } else { t.lookup(q.name) };
        for i in ids {
            let d = &t.defs[i as usize];
            if q.kind.is_some_and(|k| !d.kind.eq_ignore_ascii_case(k))
                || q.language.is_some_and(|l| !d.language.eq_ignore_ascii_case(l))
                || b.hides(&d.path)
            {
                continue;
            }
            found.push((b.clone(), i));
        }
    }
    found.sort_by(|(ba, a), (bb, b)| {
        let (da, db) = (&ba.symbols().defs[*a as usize], &bb.symbols().defs[*b as usize]);
        rank(da, &asked).cmp(&rank(db, &asked)).then_with(|| (&da.path, da.start_line).cmp(&(&db.path, db.start_line)))
    });
    found
}

/// The uses of `name` (its last segment: `A::b` → `b`) across `bundles`, grouped by
/// file in path order, each file's lines in order.
pub fn find_references(bundles: &[Arc<Bundle>], name: &str) -> atlas_runtime::Result<(Vec<RefFile>, Vec<String>)> {
    let short = segments(name).last().map(|s| (*s).to_owned()).unwrap_or_default();
    let mut files: Vec<RefFile> = Vec::new();
    let mut failed = Vec::new();
    for b in bundles {
        let library = b.library();
        // A library whose references do not read is left out with its error; the others answer.
        let all = match b.references() {
            Ok(all) => all,
            Err(e) if bundles.len() > 1 => {
                failed.push(format!("{library} was not searched: {}", crate::output::bundle_error(b, &e)));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut mine: Vec<&atlas_runtime::symbols::Reference> =
            all.iter().filter(|r| r.name == short && !b.hides(&r.path)).collect();
        mine.sort_by(|a, z| (&a.path, a.line).cmp(&(&z.path, z.line)));
        for r in mine {
            let line = RefLine { line: r.line, enclosing: r.enclosing.clone(), chunk_id: r.chunk_id.clone() };
            match files.last_mut() {
                Some(f) if f.library == library && f.path == r.path => f.references.push(line),
                _ => files.push(RefFile {
                    library: library.clone(),
                    path: r.path.clone(),
                    uri: crate::resources::uri(&library, &r.path),
                    references: vec![line],
                }),
            }
        }
    }
    Ok((files, failed))
}

/// The symbols `path` defines in `b`, in line order.
pub fn outline(b: &Bundle, path: &str) -> Vec<OutlineSymbol> {
    let ids = if b.hides(path) { &[][..] } else { b.symbols().in_file(path) };
    ids.iter()
        .map(|&i| {
            let d = &b.symbols().defs[i as usize];
            OutlineSymbol {
                name: d.name.clone(),
                kind: d.kind.clone(),
                start_line: d.start_line,
                end_line: d.end_line,
                signature: d.signature.clone(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, kind: &str, path: &str) -> Definition {
        Definition {
            name: name.into(),
            kind: kind.into(),
            path: path.into(),
            language: "rust".into(),
            start_line: 1,
            end_line: 2,
            chunk_id: "c".into(),
            signature: None,
            doc: None,
            exported: None,
        }
    }

    #[test]
    fn the_name_as_asked_ranks_first_then_code_before_tests_then_public_then_types() {
        let asked = segments("Key::new");
        let exact = def("Key::new", "method", "r/src/key.rs");
        let other = def("Other::Key::new", "method", "r/src/other.rs");
        assert!(rank(&exact, &asked) < rank(&other, &asked));
        let asked = segments("Key");
        let ty = def("Key", "struct", "r/src/key.rs");
        let var = def("Key", "variable", "r/src/a.rs");
        let test = def("Key", "struct", "r/tests/key.rs");
        assert!(rank(&ty, &asked) < rank(&var, &asked));
        assert!(rank(&ty, &asked) < rank(&test, &asked));
        // The public API before a private item of the same name, whatever its kind.
        let private = Definition { exported: Some(false), ..def("Key", "struct", "r/src/b.rs") };
        let public_fn = Definition { exported: Some(true), ..def("Key", "function", "r/src/c.rs") };
        assert!(rank(&public_fn, &asked) < rank(&private, &asked));
        assert!(rank(&ty, &asked) < rank(&private, &asked), "unknown counts as public");
    }
}
