//! `chunks.parquet`: one row per chunk. The schema is documented in docs/bundle-format.md;
//! [`schema`] is its single definition, used by the writer (the chunk stage) and the
//! reader (servers, tests).

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, BooleanArray, ListArray, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Bumped when a column changes meaning or type.
pub const SCHEMA_VERSION: u32 = 2;

/// What a chunk comes from: a docs page (markdown) or a source file (any other text).
/// Stored, filtered and printed as `docs` or `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkKind {
    #[default]
    Docs,
    Code,
}

impl ChunkKind {
    /// Every kind, in the order searches pool them.
    pub const ALL: [ChunkKind; 2] = [ChunkKind::Code, ChunkKind::Docs];

    /// `docs` or `code`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkKind::Docs => "docs",
            ChunkKind::Code => "code",
        }
    }
}

impl std::fmt::Display for ChunkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ChunkKind {
    type Err = String;
    fn from_str(s: &str) -> Result<ChunkKind, String> {
        match s {
            "docs" => Ok(ChunkKind::Docs),
            "code" => Ok(ChunkKind::Code),
            other => Err(format!("unknown kind {other:?}; use docs or code")),
        }
    }
}

/// Why a chunk's file is not the package's own hand-written code (issue 68 item 7).
/// The chunk stage decides it from the file's path and content (its rules:
/// `atlas_stages::chunk::origin`); a search ranks such chunks below the package's own
/// ([`crate::search`]), and a hit says which it is. Stored as the `origin` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Another project's code copied in (`vendor/`, `third_party/`, `node_modules/`).
    Vendored,
    /// Minified or bundled (`*.min.js`, a bundler's output, very long lines).
    Minified,
    /// Written by a tool (`@generated`, `DO NOT EDIT`, `*_pb2.py`).
    Generated,
    /// A legacy compatibility tree beside the package's main code (`pydantic/v1/`).
    Legacy,
}

impl Origin {
    /// Every origin, in the order the chunk stage checks a file's.
    pub const ALL: [Origin; 4] = [Origin::Vendored, Origin::Minified, Origin::Generated, Origin::Legacy];

    /// `vendored`, `minified`, `generated` or `legacy`: the stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Vendored => "vendored",
            Origin::Minified => "minified",
            Origin::Generated => "generated",
            Origin::Legacy => "legacy",
        }
    }

    /// What a hit from such a file says of it.
    pub fn label(self) -> &'static str {
        match self {
            Origin::Vendored => "vendored code",
            Origin::Minified => "minified or bundled code",
            Origin::Generated => "generated code",
            Origin::Legacy => "a legacy compatibility tree",
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Origin {
    type Err = String;
    fn from_str(s: &str) -> Result<Origin, String> {
        Origin::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("unknown origin {s:?}; use vendored, minified, generated or legacy"))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkRecord {
    /// blake3(source, path, heading path, part), 32 hex chars.
    pub chunk_id: String,
    pub kind: ChunkKind,
    /// Language of a code chunk, from the file extension.
    pub language: Option<String>,
    /// Name of the pipeline source.
    pub source: String,
    /// Publication: the first folder of the document's path in its source.
    pub section: String,
    /// `<source>/<path in source>`: the document in the bundle's mirror.
    pub path: String,
    pub url: Option<String>,
    /// The repository (web URL, else clone URL) and commit, for files from git.
    pub repo: Option<String>,
    pub commit: Option<String>,
    pub title: String,
    pub description: Option<String>,
    pub heading_path: Vec<String>,
    /// Position of the chunk in its document, from 0.
    pub ordinal: u32,
    /// What is embedded and indexed: overlap + section text.
    pub text: String,
    /// Bytes of `text` that are overlap from the previous chunk.
    pub overlap_chars: u32,
    pub is_code: bool,
    /// Space-joined stems of sibling documents.
    pub cluster_tags: String,
    /// 1-based inclusive line range of the section in the mirrored document.
    pub start_line: u32,
    pub end_line: u32,
    /// Code: the qualified symbol (`Class.method`, `Type::method`), its kind, and the
    /// item's signature line.
    pub symbol: Option<String>,
    pub symbol_kind: Option<String>,
    pub signature: Option<String>,
    /// Code: the members of a whole container, or the items of a merged run.
    pub symbols: Vec<String>,
    /// Docs: symbols defined in the corpus that the chunk mentions in code.
    pub mentions: Vec<String>,
    /// Code: ids of the docs chunks that mention this chunk's symbols.
    pub mentioned_in: Vec<String>,
    /// Not the package's own code: why ([`Origin`]); `None` for its own. A bundle
    /// written before the column reads as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

fn heading_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Utf8, true))
}

pub fn schema() -> SchemaRef {
    let utf8 = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    let u32f = |name: &str| Field::new(name, DataType::UInt32, false);
    let fields = vec![
        utf8("chunk_id", false),
        utf8("kind", false),
        utf8("language", true),
        utf8("source", false),
        utf8("section", false),
        utf8("path", false),
        utf8("url", true),
        utf8("repo", true),
        utf8("commit", true),
        utf8("title", false),
        utf8("description", true),
        Field::new("heading_path", DataType::List(heading_item()), false),
        u32f("ordinal"),
        utf8("text", false),
        u32f("overlap_chars"),
        Field::new("is_code", DataType::Boolean, false),
        utf8("cluster_tags", false),
        u32f("start_line"),
        u32f("end_line"),
        utf8("symbol", true),
        utf8("symbol_kind", true),
        utf8("signature", true),
        Field::new("symbols", DataType::List(heading_item()), false),
        Field::new("mentions", DataType::List(heading_item()), false),
        Field::new("mentioned_in", DataType::List(heading_item()), false),
        utf8("origin", true),
    ];
    let metadata =
        std::collections::HashMap::from([("atlas.chunks.schema_version".to_owned(), SCHEMA_VERSION.to_string())]);
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// Serialises chunks to parquet bytes (zstd). Deterministic for the same input.
pub fn to_parquet(chunks: &[ChunkRecord]) -> Result<Vec<u8>> {
    let schema = schema();
    let s = |f: fn(&ChunkRecord) -> &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(chunks.iter().map(f))) };
    let opt =
        |f: fn(&ChunkRecord) -> Option<&str>| -> ArrayRef { Arc::new(chunks.iter().map(f).collect::<StringArray>()) };
    let u = |f: fn(&ChunkRecord) -> u32| -> ArrayRef { Arc::new(UInt32Array::from_iter_values(chunks.iter().map(f))) };
    let list = |f: fn(&ChunkRecord) -> &Vec<String>| -> ArrayRef {
        let mut b = ListBuilder::new(StringBuilder::new()).with_field(heading_item());
        for c in chunks {
            for v in f(c) {
                b.values().append_value(v);
            }
            b.append(true);
        }
        Arc::new(b.finish())
    };
    let columns: Vec<ArrayRef> = vec![
        s(|c| &c.chunk_id),
        s(|c| c.kind.as_str()),
        opt(|c| c.language.as_deref()),
        s(|c| &c.source),
        s(|c| &c.section),
        s(|c| &c.path),
        opt(|c| c.url.as_deref()),
        opt(|c| c.repo.as_deref()),
        opt(|c| c.commit.as_deref()),
        s(|c| &c.title),
        opt(|c| c.description.as_deref()),
        list(|c| &c.heading_path),
        u(|c| c.ordinal),
        s(|c| &c.text),
        u(|c| c.overlap_chars),
        Arc::new(chunks.iter().map(|c| Some(c.is_code)).collect::<BooleanArray>()),
        s(|c| &c.cluster_tags),
        u(|c| c.start_line),
        u(|c| c.end_line),
        opt(|c| c.symbol.as_deref()),
        opt(|c| c.symbol_kind.as_deref()),
        opt(|c| c.signature.as_deref()),
        list(|c| &c.symbols),
        list(|c| &c.mentions),
        list(|c| &c.mentioned_in),
        Arc::new(chunks.iter().map(|c| c.origin.map(Origin::as_str)).collect::<StringArray>()),
    ];
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

/// Reads `chunks.parquet` from a file.
pub fn read_file(path: &Path) -> Result<Vec<ChunkRecord>> {
    let bytes = std::fs::read(path).map_err(|error| Error::Io { path: path.to_owned(), error })?;
    from_parquet(&bytes).map_err(|e| crate::corrupt_at(path.to_owned(), e))
}

/// A column of a batch, of the type the schema says.
fn column<'b, T: 'static>(b: &'b RecordBatch, name: &str) -> Result<&'b T> {
    let bad = |what: &str| Error::Arrow(arrow_schema::ArrowError::SchemaError(format!("column {name} {what}")));
    b.column_by_name(name)
        .ok_or_else(|| bad("is missing"))?
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| bad("has the wrong type"))
}

/// Reads chunks from parquet bytes, bounded ([`crate::table`]). A decoder panic on
/// malformed bytes is an error, not an abort.
pub fn from_parquet(bytes: &[u8]) -> Result<Vec<ChunkRecord>> {
    from_parquet_with(bytes, true)
}

/// [`from_parquet`], with the `text` column or without it (then every `text` is empty:
/// the runtime maps the texts from `chunks.text`).
pub fn from_parquet_with(bytes: &[u8], with_text: bool) -> Result<Vec<ChunkRecord>> {
    from_parquet_shared(bytes::Bytes::copy_from_slice(bytes), with_text)
}

/// [`from_parquet_with`] of bytes held elsewhere (a bundle's mapped file), decoded in
/// place ([`crate::table::read_shared`]).
pub fn from_parquet_shared(bytes: bytes::Bytes, with_text: bool) -> Result<Vec<ChunkRecord>> {
    let skip: &[&str] = if with_text { &[] } else { &["text"] };
    let batches = crate::table::read_shared(bytes, "chunks.parquet", skip)?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode(batches, with_text))).unwrap_or_else(|_| {
        Err(Error::Parquet(parquet::errors::ParquetError::General(
            "the parquet decoder failed on malformed data".into(),
        )))
    })
}

fn decode(batches: Vec<RecordBatch>, with_text: bool) -> Result<Vec<ChunkRecord>> {
    let mut out = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for b in batches {
        let s = |name| column::<StringArray>(&b, name);
        let u = |name| column::<UInt32Array>(&b, name);
        let (id, kind, language, source, section, path) =
            (s("chunk_id")?, s("kind")?, s("language")?, s("source")?, s("section")?, s("path")?);
        let (url, title, desc, tags) = (s("url")?, s("title")?, s("description")?, s("cluster_tags")?);
        let text = if with_text { Some(s("text")?) } else { None };
        let (repo, commit) = (s("repo")?, s("commit")?);
        let (ordinal, overlap, start, end) = (u("ordinal")?, u("overlap_chars")?, u("start_line")?, u("end_line")?);
        let heading_path = column::<ListArray>(&b, "heading_path")?;
        let (symbol, symbol_kind, signature) = (s("symbol")?, s("symbol_kind")?, s("signature")?);
        let (symbols, mentions, mentioned_in) = (
            column::<ListArray>(&b, "symbols")?,
            column::<ListArray>(&b, "mentions")?,
            column::<ListArray>(&b, "mentioned_in")?,
        );
        let strings = |l: &ListArray, i: usize| -> Vec<String> {
            let v = l.value(i);
            v.as_any()
                .downcast_ref::<StringArray>()
                .map_or_else(Vec::new, |h| (0..h.len()).map(|j| h.value(j).to_owned()).collect())
        };
        let is_code = column::<BooleanArray>(&b, "is_code")?;
        // Optional: bundles written before it have no `origin` column.
        let origin = if b.column_by_name("origin").is_some() { Some(s("origin")?) } else { None };
        let origin_of = |i: usize| -> Result<Option<Origin>> {
            let Some(a) = origin.filter(|a| !a.is_null(i)) else { return Ok(None) };
            a.value(i).parse().map(Some).map_err(|e: String| {
                Error::Parquet(parquet::errors::ParquetError::General(format!("chunks.parquet: {e}")))
            })
        };
        let opt = |a: &StringArray, i: usize| (!a.is_null(i)).then(|| a.value(i).to_owned());
        for i in 0..b.num_rows() {
            let heads = strings(heading_path, i);
            out.push(ChunkRecord {
                chunk_id: id.value(i).to_owned(),
                kind: kind.value(i).parse().map_err(|e: String| {
                    Error::Parquet(parquet::errors::ParquetError::General(format!("chunks.parquet: {e}")))
                })?,
                language: opt(language, i),
                source: source.value(i).to_owned(),
                section: section.value(i).to_owned(),
                path: path.value(i).to_owned(),
                url: opt(url, i),
                repo: opt(repo, i),
                commit: opt(commit, i),
                title: title.value(i).to_owned(),
                description: opt(desc, i),
                heading_path: heads,
                ordinal: ordinal.value(i),
                text: text.map_or_else(String::new, |t| t.value(i).to_owned()),
                overlap_chars: overlap.value(i),
                is_code: is_code.value(i),
                cluster_tags: tags.value(i).to_owned(),
                start_line: start.value(i),
                end_line: end.value(i),
                symbol: opt(symbol, i),
                symbol_kind: opt(symbol_kind, i),
                signature: opt(signature, i),
                symbols: strings(symbols, i),
                mentions: strings(mentions, i),
                mentioned_in: strings(mentioned_in, i),
                origin: origin_of(i)?,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_is_exact_and_deterministic() {
        let c = ChunkRecord {
            chunk_id: "ab".into(),
            kind: ChunkKind::Docs,
            language: None,
            source: "s".into(),
            section: "setup".into(),
            path: "s/setup/a.md".into(),
            url: None,
            repo: Some("https://github.com/o/r".into()),
            commit: Some("abc".into()),
            title: "T".into(),
            description: Some("d".into()),
            heading_path: vec!["A".into(), "B".into()],
            ordinal: 3,
            text: "hello".into(),
            overlap_chars: 0,
            is_code: true,
            cluster_tags: "a b".into(),
            start_line: 4,
            end_line: 9,
            symbol: Some("A::b".into()),
            symbol_kind: Some("method".into()),
            signature: Some("fn b()".into()),
            symbols: vec!["x".into()],
            mentions: vec![],
            mentioned_in: vec!["id".into()],
            origin: None,
        };
        let mut d = c.clone();
        d.heading_path = vec![];
        d.origin = Some(Origin::Legacy);
        d.url = Some("https://x".into());
        let bytes = to_parquet(&[c.clone(), d.clone()]).unwrap();
        assert_eq!(from_parquet(&bytes).unwrap(), vec![c.clone(), d.clone()]);
        assert_eq!(bytes, to_parquet(&[c, d]).unwrap());
    }

    #[test]
    fn a_bundle_without_the_origin_column_reads_as_the_packages_own_code() {
        let c = ChunkRecord { chunk_id: "a".into(), origin: Some(Origin::Vendored), ..ChunkRecord::default() };
        let bytes = to_parquet(std::slice::from_ref(&c)).unwrap();
        // The same rows without the column (projected away): a bundle from before it.
        let old = crate::table::read_shared(bytes::Bytes::from(bytes), "chunks.parquet", &["origin"]).unwrap();
        assert!(old[0].column_by_name("origin").is_none());
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, old[0].schema(), None).unwrap();
        for b in &old {
            w.write(b).unwrap();
        }
        w.close().unwrap();
        let read = from_parquet(&buf).unwrap();
        assert_eq!(read, vec![ChunkRecord { origin: None, ..c }]);
        assert_eq!("legacy".parse::<Origin>(), Ok(Origin::Legacy));
        assert!("own".parse::<Origin>().is_err());
    }
}
