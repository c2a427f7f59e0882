//! Candidates from a database: a bundle exported with `atlas export` is served by
//! replicas that hold its chunk table and symbol table in memory and ask the database
//! for what the local files would give, the vector and keyword candidate lists (and
//! the few lookups around them). Ranking stays here: fusion, exact strings,
//! definitions first, confidence and refusal run on those lists exactly as they do on
//! a local bundle. The one implementation is the PostgreSQL backend of the `atlas`
//! binary (the `atlas-pg` crate, `servers/pg/`); docs/scaling.md.

use std::collections::HashMap;

use crate::Result;
use crate::chunk_table::ChunkRecord;
use crate::filters::Filters;
use crate::manifest::Manifest;

/// One window's similarity to a query vector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Near {
    /// The chunk's index in the bundle's chunk table.
    pub chunk: u32,
    /// Whether this is the chunk's first window.
    pub first: bool,
    pub cosine: f32,
}

/// A term of a keyword query: the field (one of [`crate::text_index::FIELDS`]), the
/// term as the field's analyzer wrote it, and its weight (field boost × word weight).
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedTerm {
    pub field: &'static str,
    pub term: String,
    pub weight: f32,
}

/// The lookups a search makes that a local bundle answers from its files. Every
/// method pushes `filters` down; errors are the backend's (unreachable, timed out) and
/// are [`crate::Error::Remote`].
pub trait RemoteIndex: Send + Sync + std::fmt::Debug {
    /// The `k` windows nearest to `q` (cosine), within `filters`; with `first_only`,
    /// each chunk's first window only.
    fn nearest(&self, q: &[f32], filters: &Filters, first_only: bool, k: usize) -> Result<Vec<Near>>;
    /// The `want` best chunks by BM25 over `terms` (a sum over the terms a chunk holds,
    /// each the field's BM25 of the term times its weight, as tantivy scores a boolean
    /// query of boosted terms), best first.
    fn bm25(&self, terms: &[WeightedTerm], filters: &Filters, want: usize) -> Result<Vec<(usize, f32)>>;
    /// Up to `limit` chunks whose `text` field holds every one of `terms` (as the
    /// bundle's index holds them, anywhere and in any order), in index order; none
    /// when a term is in none. A superset of a phrase's or a string's chunks, which the
    /// caller checks verbatim.
    fn holding_all(&self, terms: &[String], limit: usize) -> Result<Vec<usize>>;
    /// How many chunks hold each of `stems` in their text, title or heading (the
    /// most of the three fields); a stem no chunk holds may be left out.
    fn doc_freqs(&self, stems: &[String]) -> Result<HashMap<String, u64>>;
    /// What serves the vectors, for `get_bundle_info` (`pgvector-hnsw`).
    fn vector_index(&self) -> String;
    /// The bundle file `name` (a manifest path, such as `mirror/<source>/<path>`) as
    /// it was exported, byte for byte; None when the export does not hold it. The
    /// caller checks it against the manifest.
    fn file(&self, name: &str) -> Result<Option<Vec<u8>>>;
}

/// What a replica loads to serve an exported bundle.
#[derive(Debug)]
pub struct RemoteBundle {
    /// Where it is, as messages name it (`postgres://host/db#schema`).
    pub label: String,
    pub manifest: Manifest,
    /// Every chunk, with its text.
    pub chunks: Vec<ChunkRecord>,
    /// `symbols.parquet` and `references.parquet`, when the bundle has them.
    pub symbols: Option<Vec<u8>>,
    pub references: Option<Vec<u8>>,
    pub index: std::sync::Arc<dyn RemoteIndex>,
}
