//! What the stages hand each other: the output manifest of each stage, and the item
//! types those manifests name. These are the only types a stage shares with another;
//! a stage reads its inputs as these (`ctx.input::<ChunkManifest>("chunk")`), never
//! through another stage's module.

use std::collections::BTreeMap;

use atlas_cache::Digest;
use atlas_runtime::model::Pooling;
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------- crawl

/// One document as the crawl stage publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocEntry {
    pub source: String,
    /// Path inside the source, with `/` separators.
    pub rel: String,
    /// Publication: the first folder of `rel`, or `root`.
    pub section: String,
    pub url: Option<String>,
    pub digest: Digest,
    /// For files from a repository: the repository and the commit they were read at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl DocEntry {
    /// A document of `source` at `rel`, with its section derived from the path.
    pub fn new(source: &str, rel: &str, digest: Digest) -> DocEntry {
        DocEntry {
            source: source.to_owned(),
            rel: rel.to_owned(),
            section: section_of(rel),
            url: None,
            digest,
            repo: None,
            commit: None,
        }
    }

    /// `<source>/<rel>`: where the document lives in the mirror.
    pub fn path(&self) -> String {
        format!("{}/{}", self.source, self.rel)
    }
}

/// A document's default section: the first folder of its path, or `root`.
pub fn section_of(rel: &str) -> String {
    match rel.split_once('/') {
        Some((first, _)) => first.to_owned(),
        None => "root".to_owned(),
    }
}

/// The crawl stage's output: every document of every source.
#[derive(Debug, Serialize, Deserialize)]
pub struct CrawlManifest {
    pub docs: Vec<DocEntry>,
    pub skipped: Vec<(String, String)>,
    /// Per source, when its content was fetched (see [`Scan::fetched_at`]).
    #[serde(default)]
    pub fetched_at: BTreeMap<String, String>,
    /// Per package source, the package's own one-line summary (see [`Scan::summary`]);
    /// left out when empty, so other sources' manifests keep their bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub summaries: BTreeMap<String, String>,
}

// ---------------------------------------------------------------------- clean-gitbook

/// One cleaned document (the clean stage's per-item output; its text is the mirror file).
/// One thing left that the cleaner could not convert.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Residual {
    /// 1-based line in the cleaned text.
    pub line: usize,
    /// `gitbook` or `html`.
    pub kind: String,
    pub text: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cleaned {
    pub text: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Other front matter keys, as JSON.
    #[serde(default)]
    pub front_matter: BTreeMap<String, serde_json::Value>,
    /// What was converted, by kind (`hint`, `tab`, `html-table`, …).
    pub counts: BTreeMap<String, u32>,
    pub residual: Vec<Residual>,
}

/// The clean stage's output: each document with its [`Cleaned`] item.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CleanDoc {
    #[serde(flatten)]
    pub doc: DocEntry,
    /// The [`Cleaned`] item.
    pub clean: Digest,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CleanManifest {
    pub docs: Vec<CleanDoc>,
    /// The [`CleanReport`].
    pub report: Digest,
}

// ---------------------------------------------------------------------- chunk

/// The chunk stage's output.
#[derive(Debug, Serialize, Deserialize)]
pub struct ChunkManifest {
    /// chunks.parquet
    pub chunks: Digest,
    pub chunk_count: usize,
    pub doc_count: usize,
    #[serde(default)]
    pub license_lines_dropped: u64,
    /// symbols.parquet: the definitions of the code (`atlas_runtime::symbols`).
    pub symbols: Digest,
    /// references.parquet: the uses of defined names.
    pub references: Digest,
    pub definition_count: usize,
    pub reference_count: usize,
}

// ---------------------------------------------------------------------- embed

/// What the stage produces: the matrix and the map from its rows to chunks.
#[derive(Debug, Serialize, Deserialize)]
pub struct EmbedManifest {
    pub model: String,
    pub model_sha256: String,
    pub dims: usize,
    pub pooling: Pooling,
    /// embeddings.npy (f16, rows × dims).
    pub embeddings: Digest,
    pub rows: usize,
    /// For each row, the chunk's position in chunks.parquet.
    pub window_chunk: Vec<u32>,
    pub chunks: usize,
    /// Chunks longer than one window, and the windows they became.
    pub over_window_chunks: usize,
    pub over_window_windows: usize,
    pub tokens: u64,
}

// ---------------------------------------------------------------------- tune

/// The tune stage's output: the bundle's own query map, when one was fitted and beat
/// the model on its held-out pairs.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct TuneManifest {
    /// `query_map.bin` (`atlas_runtime::query_map`).
    pub map: Option<Digest>,
    /// What the manifest records of it.
    pub info: Option<atlas_runtime::manifest::TuneInfo>,
}

// ---------------------------------------------------------------------- bm25

/// The bm25 stage's output.
#[derive(Debug, Serialize, Deserialize)]
pub struct Bm25Manifest {
    /// The index folder: file name → object.
    pub files: BTreeMap<String, Digest>,
    pub boosts: BTreeMap<String, f32>,
    pub docs: usize,
}

impl Bm25Manifest {
    /// `bm25.json` of the build folder and the bundle: the boosts the runtime queries
    /// with, and the document count.
    pub fn bm25_json(&self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec_pretty(&serde_json::json!({ "boosts": self.boosts, "docs": self.docs }))
    }
}

// ---------------------------------------------------------------------- pack

/// The bundle's files (path → object), manifest.json among them.
#[derive(Debug, Serialize, Deserialize)]
pub struct PackManifest {
    pub name: String,
    pub version: String,
    pub files: BTreeMap<String, Digest>,
}

/// The reason group of a skipped file's why, as a bundle's `left_out` counts them:
/// `too large`, `binary`, `secret`, `link`, `not a regular file`, `unreadable` or
/// `other`. The whys are this crate's own: each
/// source's scan writes them into [`CrawlManifest::skipped`].
pub fn left_out_reason(why: &str) -> &'static str {
    if why.contains("over max_file_bytes") || why.contains("grew past") {
        "too large"
    } else if why.starts_with("binary") || why.starts_with("not UTF-8 text") {
        "binary"
    } else if why.starts_with("a secret file") {
        "secret"
    } else if why.contains("symlink") || why.starts_with("a link") {
        "link"
    } else if why.starts_with("not a regular file") {
        "not a regular file"
    } else if why.starts_with("not read") {
        "unreadable"
    } else {
        "other"
    }
}
