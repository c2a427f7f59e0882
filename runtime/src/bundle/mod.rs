//! An opened bundle: the manifest checked, chunk metadata loaded, embeddings
//! memory-mapped, the tantivy index open; the query embedder and the reranker load
//! on first use (the embedder optionally warms up in the background).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

mod open;
mod view;

pub use view::{BundleInfo, ChunkContext, ChunkView};

use serde::{Deserialize, Serialize};
use tantivy::schema::Field;
use tantivy::{Index, IndexReader, ReloadPolicy};

use crate::chunk_table::{ChunkKind, ChunkRecord};
use crate::encoder::{Encoder, EncoderOptions};
use crate::hit::snippet::{matching, snippet};
use crate::hit::{Hit, Link};
use crate::hnsw::HnswIndex;
use crate::manifest::{Manifest, read_manifest};
use crate::model::{self, ModelSpec};
use crate::remote::{RemoteBundle, RemoteIndex};
use crate::rerank::CrossEncoder;
use crate::symbols::{Reference, SymbolTable};
use crate::vectors::{EmbeddingsMeta, MappedMatrix};
use crate::{Error, ModelError, Result, corrupt, corrupt_at, text_index};

/// Why a bundle built keyword-first searches by keyword only.
pub const NO_VECTORS_YET: &str = "it has no vectors yet: it was built keyword-first, and the `atlas sync` or \
     `atlas add` that built it embeds it next (run it again if it stopped); keyword and symbol search work now";

/// Up to this many embedding rows the vector search scans exactly; above, it walks
/// the HNSW graph. Measured at 50k × 384 f16 rows on 2 cores (`cargo xtask bench
/// search`): the scan takes 5.5 ms with recall 1.0; HNSW takes under 1 ms but loading
/// it adds 250 ms to the open and 165 MB of RSS (hnsw_rs holds every point and link as
/// objects). So the scan serves up to 64k rows of 384 dims (half as many of 768).
pub const EXACT_MAX_ROWS: usize = 64_000;

/// The largest mirror file read from a database in one piece, in bytes (as the fs
/// server's read limit).
pub const MAX_REMOTE_FILE_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct OpenOptions {
    pub exact_max_rows: usize,
    /// Load the query embedder in a background thread right away.
    pub warm: bool,
    /// Where the embedding model lives (default: ATLAS_HOME/models/<id>).
    pub model_dir: Option<PathBuf>,
    /// Where the reranker lives (default: ATLAS_HOME/models/ms-marco-minilm-l-6-v2).
    pub reranker_dir: Option<PathBuf>,
    /// ONNX Runtime (default: ORT_DYLIB_PATH, else ATLAS_HOME).
    pub ort_lib: Option<PathBuf>,
    /// The query session's settings.
    pub embed: EncoderOptions,
    /// Open even when the embedding model is not provisioned: keyword search only.
    pub keyword_only: bool,
    /// Why the bundle is open keyword-only, when it was meant to search by vector too
    /// (the model's error at open): what a vector search then says.
    pub why_keyword_only: Option<String>,
    /// The loaded query models, shared by every bundle opened with clones of these
    /// options: bundles embedded with the same model (by sha256) share one session.
    pub models: ModelPool,
}

/// Query models by the sha256 of their weights (and the cross-encoder), each loaded
/// once on first use and shared by the bundles that name it.
#[derive(Clone, Default)]
pub struct ModelPool(Arc<std::sync::Mutex<HashMap<String, Lazy<Encoder>>>>, Lazy<CrossEncoder>);

impl std::fmt::Debug for ModelPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.debug_struct("ModelPool").field("models", &m.len()).finish()
    }
}

impl ModelPool {
    /// The slot of the model with these weights (`id:sha256`, or `id:dir` when the
    /// bundle records no sha256).
    fn embedder(&self, key: String) -> Lazy<Encoder> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(key).or_default().clone()
    }

    /// How many query models are loaded.
    pub fn loaded(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter(|c| matches!(c.get(), Some(Ok(_))))
            .count()
    }
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            exact_max_rows: EXACT_MAX_ROWS,
            warm: false,
            model_dir: None,
            reranker_dir: None,
            ort_lib: None,
            embed: EncoderOptions::query(),
            keyword_only: false,
            why_keyword_only: None,
            models: ModelPool::default(),
        }
    }
}

pub(crate) struct TextIndex {
    pub index: Index,
    pub reader: IndexReader,
    /// (field, name, boost) of every scored field.
    pub fields: Vec<(Field, &'static str, f32)>,
    pub kind: Field,
    pub section: Field,
    pub language: Field,
}

type Lazy<T> = Arc<OnceLock<std::result::Result<T, ModelError>>>;

/// The files a local bundle searches, or the database a remote one asks.
pub(crate) enum Candidates {
    Local {
        vectors: MappedMatrix,
        hnsw: Option<HnswIndex>,
        /// The vectors are served by the bundle's HNSW graph: loaded, unless the
        /// bundle was opened keyword-only.
        graph: bool,
        window_chunk: Vec<u32>,
        /// Each chunk's first row.
        first_window: Vec<u32>,
    },
    Remote(Arc<dyn RemoteIndex>),
}

/// A bundle as served: what was opened, shared by every view of it, and the files
/// this view hides ([`Bundle::hiding`]).
#[derive(Clone)]
pub struct Bundle {
    opened: Arc<Opened>,
    /// Chunk paths (`<source>/<path>`) this view leaves out of every search, symbol
    /// and reference: a working tree's files whose newer copies another bundle holds.
    hidden: Option<Arc<std::collections::BTreeSet<String>>>,
}

impl std::ops::Deref for Bundle {
    type Target = Opened;
    fn deref(&self) -> &Opened {
        &self.opened
    }
}

/// An opened bundle's files, read once ([`Bundle`] is a view of them).
pub struct Opened {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub(crate) chunks: Vec<ChunkRecord>,
    /// The chunks' texts, memory-mapped (`chunks.text`); without the file, the
    /// records hold them.
    texts: Option<crate::text_store::TextStore>,
    pub(crate) by_id: HashMap<String, u32>,
    /// Chunks of each file, in document order.
    by_file: HashMap<String, Vec<u32>>,
    /// Where the vector and keyword candidates come from.
    pub(crate) candidates: Candidates,
    /// Embedding rows (windows).
    rows: usize,
    /// The tantivy index (for a remote bundle an empty one in memory: its analyzers
    /// turn a query into the terms the database is asked for).
    pub(crate) text: TextIndex,
    /// The code's definitions (empty for a bundle without `symbols.parquet`), and the
    /// chunk index of each.
    pub(crate) symbols: SymbolTable,
    pub(crate) def_chunk: Vec<u32>,
    /// The references, read on first use.
    references: OnceLock<Vec<Reference>>,
    /// The bundle's own query model (`query_map.bin`), applied to every query vector.
    pub(crate) query_map: Option<crate::query_map::QueryMap>,
    spec: &'static ModelSpec,
    opts: OpenOptions,
    embedder: Lazy<Encoder>,
    reranker: Lazy<CrossEncoder>,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle")
            .field("dir", &self.dir)
            .field("chunks", &self.chunks.len())
            .field("rows", &self.rows)
            .field("vector_index", &self.vector_index())
            .field("hidden", &self.hidden.as_ref().map_or(0, |h| h.len()))
            .finish()
    }
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened").field("dir", &self.dir).field("chunks", &self.chunks.len()).finish()
    }
}

impl Bundle {
    /// This bundle with the files at `paths` (chunk paths; one ending in `/` is a
    /// folder) hidden: nothing is read again, and `self` is unchanged.
    pub fn hiding(&self, paths: Arc<std::collections::BTreeSet<String>>) -> Bundle {
        Bundle { opened: self.opened.clone(), hidden: Some(paths) }
    }

    /// Whether this view hides the file at the chunk path `path`.
    pub fn hides(&self, path: &str) -> bool {
        self.hidden.as_ref().is_some_and(|h| crate::filters::is_hidden(h, path))
    }

    /// The files this view hides.
    pub fn hidden(&self) -> Option<&Arc<std::collections::BTreeSet<String>>> {
        self.hidden.as_ref()
    }

    /// Whether the bundle is served from a database ([`Bundle::open_remote`]): its
    /// `dir` is then a label, not a folder.
    pub fn is_remote(&self) -> bool {
        matches!(self.candidates, Candidates::Remote(_))
    }

    /// A mirror file of a bundle served from a database (`rel`: `<source>/<path>`, as
    /// hits name it), read from the database and checked against the manifest: only
    /// files the manifest lists, of their listed size and blake3. A local bundle's
    /// files are read from its folder by the fs server's path guard instead.
    pub fn remote_mirror_file(&self, rel: &str) -> Result<Vec<u8>> {
        let Candidates::Remote(index) = &self.candidates else {
            return Err(Error::Query("the bundle is local: read its files from its folder".into()));
        };
        crate::safe_path::check(rel).map_err(|e| Error::Query(e.to_string()))?;
        let name = format!("mirror/{rel}");
        let listed = || Error::Query(format!("{rel:?} is not one of the bundle's files"));
        let a = self.manifest.artifact(&name).ok_or_else(listed)?;
        if a.size > MAX_REMOTE_FILE_BYTES {
            return Err(Error::Query(format!(
                "{rel:?} is {} bytes, over the {} MiB read limit",
                a.size,
                MAX_REMOTE_FILE_BYTES >> 20
            )));
        }
        let bytes = index.file(&name)?.ok_or_else(listed)?;
        if bytes.len() as u64 != a.size || crate::hash::blake3_bytes(&bytes) != a.blake3 {
            return Err(corrupt(
                PathBuf::from(rel),
                "the database's copy does not match the manifest; export the bundle again",
            ));
        }
        Ok(bytes)
    }

    /// What serves the vectors: `exact`, `hnsw`, or the database's index.
    pub fn vector_index(&self) -> String {
        match &self.candidates {
            Candidates::Local { graph: true, .. } => "hnsw".into(),
            Candidates::Local { graph: false, .. } => "exact".into(),
            Candidates::Remote(r) => r.vector_index(),
        }
    }

    /// The task templates the bundle ships ([`crate::prompts`]), read and checked on
    /// each call (a small file); none for a bundle without them, or served from a
    /// database (whose export does not carry them).
    pub fn prompts(&self) -> Result<Vec<crate::prompts::BundlePrompt>> {
        if self.manifest.artifact(crate::prompts::FILE).is_none() || self.is_remote() {
            return Ok(Vec::new());
        }
        let bytes = crate::manifest::read_checked(&self.dir, &self.manifest, crate::prompts::FILE)?;
        crate::prompts::from_bytes(&bytes)
            .map_err(|why| corrupt(self.dir.join(crate::prompts::FILE), format!("{why}; rebuild the bundle")))
    }

    /// The bundle's own query model, when it ships one ([`crate::query_map`]).
    pub fn query_map(&self) -> Option<&crate::query_map::QueryMap> {
        self.query_map.as_ref()
    }

    /// The code's definitions.
    pub fn symbols(&self) -> &SymbolTable {
        &self.symbols
    }

    /// The chunk index of definition `i` of [`Bundle::symbols`].
    pub fn definition_chunk(&self, i: u32) -> usize {
        self.def_chunk[i as usize] as usize
    }

    /// The references by name (`references.parquet`), read and checked on first use;
    /// empty for a bundle without them.
    pub fn references(&self) -> Result<&[Reference]> {
        if let Some(r) = self.references.get() {
            return Ok(r);
        }
        // Not cached when it fails: a damaged file says so on every call.
        let refs = if self.manifest.artifact(crate::symbols::REFERENCES_FILE).is_none() {
            Vec::new()
        } else {
            let bytes = crate::manifest::map_checked(&self.dir, &self.manifest, crate::symbols::REFERENCES_FILE)?;
            let refs = crate::symbols::references_from_shared(bytes)
                .map_err(|e| corrupt_at(self.dir.join(crate::symbols::REFERENCES_FILE), e))?;
            self.checked_references(refs)?
        };
        Ok(self.references.get_or_init(|| refs))
    }

    /// `refs` when every one names a chunk this bundle holds.
    fn checked_references(&self, refs: Vec<Reference>) -> Result<Vec<Reference>> {
        match refs.iter().find(|r| !self.by_id.contains_key(&r.chunk_id)) {
            Some(r) => Err(corrupt(
                self.dir.join(crate::symbols::REFERENCES_FILE),
                format!("a reference names chunk {}, which the bundle does not hold", r.chunk_id),
            )),
            None => Ok(refs),
        }
    }

    /// The query embedder, loaded on first use.
    pub fn embedder(&self) -> Result<&Encoder> {
        if self.opts.keyword_only {
            return Err(Error::Model(ModelError::new(match &self.opts.why_keyword_only {
                Some(why) => why.clone(),
                None => "this bundle was opened for keyword search only".into(),
            })));
        }
        let want = &self.manifest.model.sha256;
        self.embedder
            .get_or_init(|| load_embedder(self.spec, &self.opts, want))
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }

    /// The cross-encoder, loaded on first use.
    pub fn reranker(&self) -> Result<&CrossEncoder> {
        self.reranker
            .get_or_init(|| {
                let dir = self.opts.reranker_dir.clone().unwrap_or_else(|| model::model_dir(model::RERANKER.id));
                CrossEncoder::load(&model::RERANKER, &dir, &ort_lib(&self.opts), &self.opts.embed)
                    .map_err(ModelError::from)
            })
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }

    /// `name@version`, as hits and servers of several bundles name it: a package's
    /// name shown as `crate:tokio` ([`crate::package`]).
    pub fn library(&self) -> String {
        self.manifest.library()
    }

    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// All chunks, in bundle order, without their text when it is mapped (see
    /// [`Bundle::text`]).
    pub fn chunks(&self) -> &[ChunkRecord] {
        &self.chunks
    }

    /// Chunk `i`'s text (overlap included), wherever it is held.
    pub fn text(&self, i: usize) -> &str {
        match &self.texts {
            Some(t) => t.get(i),
            None => self.chunks.get(i).map_or("", |c| c.text.as_str()),
        }
    }

    /// Whether the bundle holds the chunk `id` (and does not hide its file).
    pub fn has_chunk(&self, id: &str) -> bool {
        self.by_id.get(id.trim()).is_some_and(|&i| !self.hides(&self.chunks[i as usize].path))
    }
}

fn ort_lib(o: &OpenOptions) -> PathBuf {
    o.ort_lib.clone().unwrap_or_else(model::ort_dylib)
}

fn load_embedder(
    spec: &'static ModelSpec,
    o: &OpenOptions,
    want_sha: &str,
) -> std::result::Result<Encoder, ModelError> {
    let dir = o.model_dir.clone().unwrap_or_else(|| model::model_dir(spec.id));
    let e = Encoder::load(spec, &dir, &ort_lib(o), &o.embed)?;
    if !want_sha.is_empty() && e.model_sha256 != want_sha {
        return Err(ModelError::new(format!(
            "model mismatch: the bundle was embedded with {} sha256 {want_sha}, the model in {} is {}; \
             provision the bundle's model (`atlas setup`) or rebuild the bundle",
            spec.id,
            dir.display(),
            e.model_sha256
        )));
    }
    Ok(e)
}
