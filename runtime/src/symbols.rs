//! The symbol table of a bundle's code: every definition the chunker's tree-sitter
//! parse saw (`symbols.parquet`) and the places that use a defined name
//! (`references.parquet`). The chunk stage writes both; the search reads the
//! definitions to rank a defining chunk first; the servers' `find_symbol`,
//! `find_references` and `get_file_outline` read both. Format: docs/bundle-format.md.
//!
//! References are by name, not type-resolved: a use of `new` counts for every `new`
//! the corpus defines.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The definitions, in the bundle.
pub const DEFINITIONS_FILE: &str = "symbols.parquet";
/// The references, in the bundle.
pub const REFERENCES_FILE: &str = "references.parquet";
/// Bumped when a column changes meaning or type.
pub const SCHEMA_VERSION: u32 = 1;

/// One definition: a function, method, type, trait, module, constant…
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    /// Qualified as the chunker qualifies it: `Type::method`, `Class.method`, `mod::CONST`.
    pub name: String,
    /// function, method, class, struct, enum, union, trait, impl, interface, type, mod,
    /// macro, const, static, variable.
    pub kind: String,
    /// `<source>/<path>`: the file in the bundle's mirror.
    pub path: String,
    pub language: String,
    /// 1-based inclusive lines of the item (attributes and doc comments excluded).
    pub start_line: u32,
    pub end_line: u32,
    /// The chunk that holds the definition's first line.
    pub chunk_id: String,
    /// The item's first line, trimmed.
    pub signature: Option<String>,
    /// The doc comment or docstring, first paragraph, at most [`MAX_DOC_CHARS`].
    pub doc: Option<String>,
    /// Whether the package exports it (its public API, as the chunker reads it); None
    /// where the file does not say, and in bundles built before it was recorded.
    pub exported: Option<bool>,
}

/// The most characters of a doc comment kept.
pub const MAX_DOC_CHARS: usize = 400;

impl Definition {
    /// The last segment: `Type::method` → `method`, `foo!` → `foo`.
    pub fn short(&self) -> &str {
        short_name(&self.name)
    }

    /// How a definition ranks among others of the same name, smallest first: code
    /// before tests, the public API before private items, types before functions
    /// before variables.
    pub fn preference(&self) -> (bool, bool, u8) {
        let kind = match self.kind.as_str() {
            "struct" | "class" | "enum" | "trait" | "interface" | "union" | "type" => 0,
            "function" | "method" | "macro" | "const" | "static" => 1,
            _ => 2,
        };
        (is_test_path(&self.path), self.exported == Some(false), kind)
    }
}

/// A file of tests: its definitions rank after the code's.
pub fn is_test_path(path: &str) -> bool {
    // Every form below holds `test`: one scan rules out most paths.
    if !path.contains("test") {
        return false;
    }
    let file = path.rsplit('/').next().unwrap_or(path);
    path.contains("/tests/")
        || path.contains("/test/")
        || file.starts_with("test_")
        || file.ends_with("_test.rs")
        || file.ends_with("_test.py")
        || file.ends_with("_test.go")
        || file == "tests.rs"
}

/// The last segment of a qualified name, without a macro's `!`.
pub fn short_name(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name).rsplit('.').next().unwrap_or(name).trim_end_matches('!')
}

/// The segments of a qualified name, `::` and `.` alike, a call's `()` and a macro's
/// `!` dropped: `a::B.c()` → `[a, B, c]`.
pub fn segments(name: &str) -> Vec<&str> {
    let name = name.trim().trim_end_matches("()").trim_end_matches('!');
    name.split("::").flat_map(|s| s.split('.')).filter(|s| !s.is_empty()).collect()
}

/// One use of a defined name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    /// The name as written (the identifier), a defined short name.
    pub name: String,
    pub path: String,
    /// 1-based.
    pub line: u32,
    /// The chunk holding the line.
    pub chunk_id: String,
    /// The innermost definition around the line (function, method, type), if any.
    pub enclosing: Option<String>,
}

/// The definitions of a bundle, indexed by short name.
#[derive(Debug, Default)]
pub struct SymbolTable {
    pub defs: Vec<Definition>,
    /// Short name → definitions.
    by_short: HashMap<String, Vec<u32>>,
    /// Lowercased short name → definitions, for prefix and case-insensitive lookup.
    by_lower: Vec<(String, u32)>,
    /// File → its definitions, in line order.
    by_file: HashMap<String, Vec<u32>>,
}

impl SymbolTable {
    pub fn new(defs: Vec<Definition>) -> SymbolTable {
        let mut by_short: HashMap<String, Vec<u32>> = HashMap::new();
        let mut by_file: HashMap<String, Vec<u32>> = HashMap::new();
        let mut by_lower = Vec::with_capacity(defs.len());
        for (i, d) in defs.iter().enumerate() {
            let i = i as u32;
            by_short.entry(d.short().to_owned()).or_default().push(i);
            by_file.entry(d.path.clone()).or_default().push(i);
            by_lower.push((d.short().to_lowercase(), i));
        }
        by_lower.sort();
        for v in by_file.values_mut() {
            v.sort_by_key(|&i| (defs[i as usize].start_line, defs[i as usize].end_line));
        }
        SymbolTable { defs, by_short, by_lower, by_file }
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// How many definitions hold this short name.
    pub fn count(&self, short: &str) -> usize {
        self.by_short.get(short).map_or(0, Vec::len)
    }

    /// The definitions a name names: a bare name by its short name; a qualified one
    /// (`A::b`, `A.b`, `pkg.mod.f`, a trailing `()` aside) where every segment matches,
    /// the last ones against the qualified name and any leading ones against the
    /// file's path (`compile.compile_torch_model` in `…/torch/compile.py`).
    pub fn lookup(&self, name: &str) -> Vec<u32> {
        let want = segments(name);
        let Some(last) = want.last() else { return Vec::new() };
        let Some(ids) = self.by_short.get(*last) else { return Vec::new() };
        if want.len() == 1 {
            return ids.clone();
        }
        ids.iter().copied().filter(|&i| qualified_match(&self.defs[i as usize], &want)).collect()
    }

    /// Definitions whose short name starts with `prefix`, ASCII case ignored, in name
    /// order; at most `limit`.
    pub fn prefixed(&self, prefix: &str, limit: usize) -> Vec<u32> {
        let p = prefix.to_lowercase();
        let from = self.by_lower.partition_point(|(n, _)| n.as_str() < p.as_str());
        self.by_lower[from..].iter().take_while(|(n, _)| n.starts_with(&p)).take(limit).map(|&(_, i)| i).collect()
    }

    /// The definitions of one file, in line order.
    pub fn in_file(&self, path: &str) -> &[u32] {
        self.by_file.get(path).map_or(&[], Vec::as_slice)
    }
}

/// Whether `d` is what the segments `want` (two or more) name.
fn qualified_match(d: &Definition, want: &[&str]) -> bool {
    let have = segments(&d.name);
    // Trailing segments against the qualified name…
    let mut k = 0;
    while k < want.len() && k < have.len() && want[want.len() - 1 - k] == have[have.len() - 1 - k] {
        k += 1;
    }
    if k == want.len() {
        return true;
    }
    if k < have.len() {
        // A segment of the qualified name disagrees: `A::b` is not `C::b`.
        return false;
    }
    // …then the rest against the file's path, in order (`mod.f` in `…/mod.py`).
    let mut dirs: Vec<&str> = d.path.split('/').collect();
    if let Some(file) = dirs.last_mut() {
        *file = file.rsplit_once('.').map_or(*file, |(stem, _)| stem);
    }
    let mut at = dirs.len();
    for seg in want[..want.len() - k].iter().rev() {
        match dirs[..at].iter().rposition(|d| d == seg) {
            Some(p) => at = p,
            None => return false,
        }
    }
    true
}

fn schema_defs() -> SchemaRef {
    let utf8 = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    let fields = vec![
        utf8("name", false),
        utf8("kind", false),
        utf8("path", false),
        utf8("language", false),
        Field::new("start_line", DataType::UInt32, false),
        Field::new("end_line", DataType::UInt32, false),
        utf8("chunk_id", false),
        utf8("signature", true),
        utf8("doc", true),
        Field::new("exported", DataType::Boolean, true),
    ];
    Arc::new(Schema::new_with_metadata(fields, metadata()))
}

fn schema_refs() -> SchemaRef {
    let utf8 = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    let fields = vec![
        utf8("name", false),
        utf8("path", false),
        Field::new("line", DataType::UInt32, false),
        utf8("chunk_id", false),
        utf8("enclosing", true),
    ];
    Arc::new(Schema::new_with_metadata(fields, metadata()))
}

fn metadata() -> HashMap<String, String> {
    HashMap::from([("atlas.symbols.schema_version".to_owned(), SCHEMA_VERSION.to_string())])
}

fn strings<T>(rows: &[T], f: impl Fn(&T) -> &str) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
}

fn optional<T>(rows: &[T], f: impl Fn(&T) -> Option<&str>) -> ArrayRef {
    Arc::new(rows.iter().map(f).collect::<StringArray>())
}

fn numbers<T>(rows: &[T], f: impl Fn(&T) -> u32) -> ArrayRef {
    Arc::new(UInt32Array::from_iter_values(rows.iter().map(f)))
}

fn write(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<Vec<u8>> {
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_created_by(format!("atlas {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, schema, Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

/// `symbols.parquet` bytes (zstd), deterministic for the same input.
pub fn definitions_to_parquet(defs: &[Definition]) -> Result<Vec<u8>> {
    let columns = vec![
        strings(defs, |d| &d.name),
        strings(defs, |d| &d.kind),
        strings(defs, |d| &d.path),
        strings(defs, |d| &d.language),
        numbers(defs, |d| d.start_line),
        numbers(defs, |d| d.end_line),
        strings(defs, |d| &d.chunk_id),
        optional(defs, |d| d.signature.as_deref()),
        optional(defs, |d| d.doc.as_deref()),
        Arc::new(defs.iter().map(|d| d.exported).collect::<BooleanArray>()),
    ];
    write(schema_defs(), columns)
}

/// `references.parquet` bytes (zstd), deterministic for the same input.
pub fn references_to_parquet(refs: &[Reference]) -> Result<Vec<u8>> {
    let columns = vec![
        strings(refs, |r| &r.name),
        strings(refs, |r| &r.path),
        numbers(refs, |r| r.line),
        strings(refs, |r| &r.chunk_id),
        optional(refs, |r| r.enclosing.as_deref()),
    ];
    write(schema_refs(), columns)
}

/// Reads every batch of a table, bounded ([`crate::table`]), in place.
fn batches(bytes: bytes::Bytes, what: &str) -> Result<Vec<RecordBatch>> {
    crate::table::read_shared(bytes, what, &[])
}

fn column<'b, T: 'static>(b: &'b RecordBatch, name: &str) -> Result<&'b T> {
    let bad = |what: &str| Error::Arrow(arrow_schema::ArrowError::SchemaError(format!("column {name} {what}")));
    b.column_by_name(name)
        .ok_or_else(|| bad("is missing"))?
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| bad("has the wrong type"))
}

fn opt(a: &StringArray, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.value(i).to_owned())
}

/// Reads `symbols.parquet` bytes.
pub fn definitions_from_parquet(bytes: &[u8]) -> Result<Vec<Definition>> {
    definitions_from_shared(bytes::Bytes::copy_from_slice(bytes))
}

/// [`definitions_from_parquet`] of bytes held elsewhere (a bundle's mapped file),
/// decoded in place.
pub fn definitions_from_shared(bytes: bytes::Bytes) -> Result<Vec<Definition>> {
    let mut out = Vec::new();
    for b in batches(bytes, DEFINITIONS_FILE)? {
        let s = |name| column::<StringArray>(&b, name);
        let u = |name| column::<UInt32Array>(&b, name);
        let (name, kind, path, language, chunk) = (s("name")?, s("kind")?, s("path")?, s("language")?, s("chunk_id")?);
        let (start, end, sig, doc) = (u("start_line")?, u("end_line")?, s("signature")?, s("doc")?);
        // Added later: a bundle built before has none.
        let exported = match b.column_by_name("exported") {
            Some(_) => Some(column::<BooleanArray>(&b, "exported")?),
            None => None,
        };
        for i in 0..b.num_rows() {
            out.push(Definition {
                name: name.value(i).to_owned(),
                kind: kind.value(i).to_owned(),
                path: path.value(i).to_owned(),
                language: language.value(i).to_owned(),
                start_line: start.value(i),
                end_line: end.value(i),
                chunk_id: chunk.value(i).to_owned(),
                signature: opt(sig, i),
                doc: opt(doc, i),
                exported: exported.and_then(|e| (!e.is_null(i)).then(|| e.value(i))),
            });
        }
    }
    Ok(out)
}

/// Reads `references.parquet` bytes.
pub fn references_from_parquet(bytes: &[u8]) -> Result<Vec<Reference>> {
    references_from_shared(bytes::Bytes::copy_from_slice(bytes))
}

/// [`references_from_parquet`] of bytes held elsewhere (a bundle's mapped file),
/// decoded in place.
pub fn references_from_shared(bytes: bytes::Bytes) -> Result<Vec<Reference>> {
    let mut out = Vec::new();
    for b in batches(bytes, REFERENCES_FILE)? {
        let s = |name| column::<StringArray>(&b, name);
        let (name, path, chunk, enclosing) = (s("name")?, s("path")?, s("chunk_id")?, s("enclosing")?);
        let line = column::<UInt32Array>(&b, "line")?;
        for i in 0..b.num_rows() {
            out.push(Reference {
                name: name.value(i).to_owned(),
                path: path.value(i).to_owned(),
                line: line.value(i),
                chunk_id: chunk.value(i).to_owned(),
                enclosing: opt(enclosing, i),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, path: &str) -> Definition {
        Definition {
            name: name.into(),
            kind: "function".into(),
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
    fn names_resolve_bare_qualified_and_through_the_path() {
        let t = SymbolTable::new(vec![
            def("ServerKey::new", "r/src/keys/server.rs"),
            def("ClientKey::new", "r/src/keys/client.rs"),
            def("compile_torch_model", "p/src/concrete/ml/torch/compile.py"),
            def("Foo.bar", "p/src/x.py"),
            def("my_macro!", "r/src/m.rs"),
        ]);
        assert_eq!(t.lookup("new").len(), 2);
        assert_eq!(t.lookup("ServerKey::new"), [0]);
        assert_eq!(t.lookup("ServerKey::new()"), [0]);
        assert_eq!(t.lookup("ServerKey.new"), [0]);
        assert_eq!(t.lookup("Other::new"), Vec::<u32>::new());
        assert_eq!(t.lookup("compile.compile_torch_model"), [2]);
        assert_eq!(t.lookup("torch.compile.compile_torch_model"), [2]);
        assert_eq!(t.lookup("concrete.ml.torch.compile.compile_torch_model()"), [2]);
        assert_eq!(t.lookup("sklearn.compile_torch_model"), Vec::<u32>::new());
        assert_eq!(t.lookup("Foo::bar"), [3]);
        assert_eq!(t.lookup("my_macro!"), [4]);
        assert_eq!(t.prefixed("COMP", 10), [2]);
        assert_eq!(t.count("new"), 2);
    }

    #[test]
    fn tables_round_trip_through_parquet() {
        let mut d = def("A::b", "r/a.rs");
        d.doc = Some("Does b.".into());
        let mut e = def("A::c", "r/a.rs");
        e.exported = Some(false);
        let bytes = definitions_to_parquet(&[d.clone(), e.clone()]).unwrap();
        assert_eq!(definitions_from_parquet(&bytes).unwrap(), [d, e]);
        let r = Reference { name: "b".into(), path: "r/c.rs".into(), line: 7, chunk_id: "x".into(), enclosing: None };
        let bytes = references_to_parquet(std::slice::from_ref(&r)).unwrap();
        assert_eq!(references_from_parquet(&bytes).unwrap(), [r]);
        assert!(definitions_from_parquet(b"not parquet").is_err());
    }
}
