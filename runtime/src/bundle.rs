//! An opened bundle: the manifest checked, chunk metadata loaded, embeddings
//! memory-mapped, the tantivy index open; the query embedder and the reranker load
//! on first use (the embedder optionally warms up in the background).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use tantivy::schema::Field;
use tantivy::{Index, IndexReader, ReloadPolicy};

use crate::chunk_table::ChunkRecord;
use crate::encoder::{Encoder, EncoderOptions};
use crate::hit::Hit;
use crate::hnsw::HnswIndex;
use crate::manifest::{Manifest, read_manifest};
use crate::model::{self, ModelSpec};
use crate::remote::{RemoteBundle, RemoteIndex};
use crate::rerank::CrossEncoder;
use crate::symbols::{Reference, SymbolTable};
use crate::vectors::{EmbeddingsMeta, MappedMatrix};
use crate::{Error, Result, corrupt, corrupt_at, text_index};

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

/// What [`Bundle::assemble`] makes a bundle of.
struct Parts {
    dir: PathBuf,
    manifest: Manifest,
    chunks: Vec<ChunkRecord>,
    texts: Option<crate::text_store::TextStore>,
    rows: usize,
    candidates: Candidates,
    text: TextIndex,
    symbols: Option<Vec<u8>>,
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

type Lazy<T> = Arc<OnceLock<std::result::Result<T, String>>>;

/// The files a local bundle searches, or the database a remote one asks.
pub(crate) enum Candidates {
    Local {
        vectors: MappedMatrix,
        hnsw: Option<HnswIndex>,
        window_chunk: Vec<u32>,
        /// Each chunk's first row.
        first_window: Vec<u32>,
    },
    Remote(Arc<dyn RemoteIndex>),
}

pub struct Bundle {
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
    references: OnceLock<std::result::Result<Vec<Reference>, String>>,
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
            .finish()
    }
}

/// The definitions of `symbols.parquet` (none when the manifest lists no such file),
/// each resolved to its chunk; a definition naming a chunk the bundle lacks is
/// corruption.
fn open_symbols(dir: &Path, bytes: Option<Vec<u8>>, by_id: &HashMap<String, u32>) -> Result<(SymbolTable, Vec<u32>)> {
    let Some(bytes) = bytes else {
        return Ok((SymbolTable::default(), Vec::new()));
    };
    let path = dir.join(crate::symbols::DEFINITIONS_FILE);
    let defs = crate::symbols::definitions_from_parquet(&bytes).map_err(|e| corrupt_at(path.clone(), e))?;
    let mut chunk = Vec::with_capacity(defs.len());
    for d in &defs {
        match by_id.get(&d.chunk_id) {
            Some(&i) => chunk.push(i),
            None => {
                return Err(corrupt(path, format!("definition {:?} names a chunk the bundle does not hold", d.name)));
            }
        }
    }
    Ok((SymbolTable::new(defs), chunk))
}

/// A chunk as `get_chunk` returns it: the hit's fields and the chunk's own text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChunkView {
    #[serde(flatten)]
    pub hit: Hit,
    pub text: String,
}

/// A chunk with its neighbours in the same file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChunkContext {
    pub before: Vec<ChunkView>,
    pub chunk: ChunkView,
    pub after: Vec<ChunkView>,
}

/// What a bundle holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BundleInfo {
    pub name: String,
    pub version: String,
    pub created: String,
    pub model: String,
    pub dims: usize,
    pub chunks: usize,
    pub embedding_rows: usize,
    pub by_kind: BTreeMap<String, usize>,
    pub by_section: BTreeMap<String, usize>,
    pub sources: Vec<crate::manifest::SourceInfo>,
    pub modes: Vec<String>,
    pub vector_index: String,
    pub bm25_boosts: BTreeMap<String, f32>,
}

impl Bundle {
    /// Opens the bundle in `dir`. Checks the format and the manifest (full hash
    /// verification is [`crate::manifest::verify`]) and that this build can provide
    /// the bundle's model.
    pub fn open(dir: &Path, opts: OpenOptions) -> Result<Bundle> {
        if !dir.join("manifest.json").is_file() {
            return Err(Error::Io {
                path: dir.join("manifest.json"),
                error: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no bundle here; pass the folder `atlas-pipeline run` wrote (…/.atlas/build/bundle)",
                ),
            });
        }
        let manifest = read_manifest(dir)?;
        // What opening reads (everything but the mirror, which the fs server reads
        // through its own guard, and the shipped eval, which `atlas eval` reads) must
        // be a regular file of its listed size before anything is opened.
        for a in manifest.artifacts.iter().filter(|a| !a.path.starts_with("mirror/") && !a.path.starts_with("eval/")) {
            crate::manifest::regular_artifact(dir, &manifest, &a.path)?;
        }
        // A keyword-first build (no vectors yet) serves by keyword and symbols, and a
        // vector search says why.
        let opts = match manifest.embedding_rows == 0 && manifest.chunk_count > 0 && !opts.keyword_only {
            true => OpenOptions { keyword_only: true, why_keyword_only: Some(NO_VECTORS_YET.to_owned()), ..opts },
            false => opts,
        };
        let (spec, model_dir) = check_model(&manifest, &opts)?;
        // Files read whole are checked against the manifest's blake3 as they are read
        // (cheap next to decoding them); `bundle::verify` checks everything.
        let chunks_path = dir.join("chunks.parquet");
        // With `chunks.text` the text column is not decoded: the texts stay mapped.
        let mapped = manifest.artifact(crate::text_store::FILE).is_some();
        let chunks = crate::chunk_table::from_parquet_with(
            &crate::manifest::read_checked(dir, &manifest, "chunks.parquet")?,
            !mapped,
        )
        .map_err(|e| corrupt_at(chunks_path.clone(), e))?;
        if chunks.len() != manifest.chunk_count {
            return Err(corrupt(
                chunks_path,
                format!("{} chunks, the manifest says {}", chunks.len(), manifest.chunk_count),
            ));
        }
        let meta_path = dir.join("embeddings.json");
        let meta: EmbeddingsMeta =
            serde_json::from_slice(&crate::manifest::read_checked(dir, &manifest, "embeddings.json")?)
                .map_err(|e| corrupt(meta_path.clone(), e.to_string()))?;
        let npy_path = dir.join("embeddings.npy");
        let vectors = MappedMatrix::open(&npy_path)?;
        if let Some(row) = vectors.first_non_finite_row() {
            return Err(corrupt(npy_path, format!("row {row} holds a NaN or infinite value; rebuild the bundle")));
        }
        if vectors.rows != meta.rows
            || vectors.dims != manifest.model.dims
            || meta.window_chunk.len() != meta.rows
            || meta.window_chunk.iter().any(|&c| c as usize >= chunks.len())
        {
            return Err(corrupt(meta_path, "embeddings, their row map and the chunks disagree"));
        }
        // Mapped, like the embeddings: its structure is checked here (header, offsets,
        // size against the manifest) and each text's UTF-8 when read; its hash by
        // `atlas verify` and at install, not at every open (that would read it all).
        let texts = match manifest.artifact(crate::text_store::FILE) {
            Some(a) => {
                let store = crate::text_store::TextStore::open(&dir.join(crate::text_store::FILE), chunks.len())?;
                if store.size() != a.size {
                    return Err(corrupt(
                        dir.join(crate::text_store::FILE),
                        format!("is {} bytes, the manifest says {}", store.size(), a.size),
                    ));
                }
                Some(store)
            }
            None => None,
        };
        let mut first_window = vec![u32::MAX; chunks.len()];
        for (row, &c) in meta.window_chunk.iter().enumerate() {
            let f = &mut first_window[c as usize];
            *f = (*f).min(row as u32);
        }
        let hnsw_dir = dir.join("hnsw");
        // The threshold is for 384 dims; wider rows cost proportionally more to scan.
        let scan_rows = vectors.rows * vectors.dims.max(384) / 384;
        let hnsw = if scan_rows > opts.exact_max_rows && hnsw_dir.is_dir() {
            // The dump's counts size hnsw_rs's allocations: check it before loading.
            for name in [crate::hnsw::GRAPH_FILE, crate::hnsw::DATA_FILE] {
                crate::manifest::check_artifact(dir, &manifest, &format!("hnsw/{name}"))?;
            }
            Some(HnswIndex::open(&hnsw_dir, vectors.rows)?)
        } else {
            None
        };
        let text = open_text(&dir.join("tantivy"), &manifest)?;
        let symbols = match manifest.artifact(crate::symbols::DEFINITIONS_FILE) {
            Some(_) => Some(crate::manifest::read_checked(dir, &manifest, crate::symbols::DEFINITIONS_FILE)?),
            None => None,
        };
        let rows = vectors.rows;
        let candidates = Candidates::Local { vectors, hnsw, window_chunk: meta.window_chunk, first_window };
        let parts = Parts { dir: dir.to_owned(), manifest, chunks, texts, rows, candidates, text, symbols };
        Bundle::assemble(parts, spec, model_dir, opts, OnceLock::new())
    }

    /// A bundle served from a database ([`RemoteBundle`]): its chunk and symbol
    /// tables in memory, its candidates from `index`. The query model is local, as
    /// for any bundle.
    pub fn open_remote(r: RemoteBundle, rows: usize, opts: OpenOptions) -> Result<Bundle> {
        let dir = PathBuf::from(&r.label);
        let (spec, model_dir) = check_model(&r.manifest, &opts)?;
        if r.chunks.len() != r.manifest.chunk_count {
            return Err(corrupt(
                dir,
                format!("{} chunks, the manifest says {}", r.chunks.len(), r.manifest.chunk_count),
            ));
        }
        let text = empty_text(&r.manifest)?;
        let refs = match &r.references {
            Some(bytes) => Some(
                crate::symbols::references_from_parquet(bytes)
                    .map_err(|e| corrupt_at(dir.join(crate::symbols::REFERENCES_FILE), e))?,
            ),
            None => None,
        };
        let parts = Parts {
            dir,
            manifest: r.manifest,
            chunks: r.chunks,
            texts: None,
            rows,
            candidates: Candidates::Remote(r.index),
            text,
            symbols: r.symbols,
        };
        let bundle = Bundle::assemble(parts, spec, model_dir, opts, OnceLock::new())?;
        if let Some(refs) = refs {
            let _ = bundle.references.set(Ok(bundle.checked_references(refs)?));
        }
        Ok(bundle)
    }

    /// The bundle from its parts: the lookups by id and file, the symbols resolved,
    /// the model slot; warms the embedder when asked.
    fn assemble(
        p: Parts,
        spec: &'static ModelSpec,
        model_dir: PathBuf,
        opts: OpenOptions,
        references: OnceLock<std::result::Result<Vec<Reference>, String>>,
    ) -> Result<Bundle> {
        let chunks = p.chunks;
        let mut by_id = HashMap::with_capacity(chunks.len());
        let mut by_file: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, c) in chunks.iter().enumerate() {
            by_id.insert(c.chunk_id.clone(), i as u32);
            by_file.entry(c.path.clone()).or_default().push(i as u32);
        }
        for v in by_file.values_mut() {
            v.sort_by_key(|&i| chunks[i as usize].ordinal);
        }
        let (symbols, def_chunk) = open_symbols(&p.dir, p.symbols, &by_id)?;
        let key = match p.manifest.model.sha256.as_str() {
            "" => format!("{}:{}", spec.id, model_dir.display()),
            sha => format!("{}:{sha}", spec.id),
        };
        let embedder = opts.models.embedder(key);
        let reranker = opts.models.1.clone();
        let bundle = Bundle {
            dir: p.dir,
            manifest: p.manifest,
            chunks,
            texts: p.texts,
            by_id,
            by_file,
            candidates: p.candidates,
            rows: p.rows,
            text: p.text,
            symbols,
            def_chunk,
            references,
            spec,
            opts: OpenOptions { model_dir: Some(model_dir), ..opts },
            embedder,
            reranker,
        };
        if bundle.opts.warm && !bundle.opts.keyword_only {
            let (cell, spec, o) = (bundle.embedder.clone(), bundle.spec, bundle.opts.clone());
            let want = bundle.manifest.model.sha256.clone();
            std::thread::spawn(move || {
                cell.get_or_init(|| load_embedder(spec, &o, &want));
                if let Some(Ok(e)) = cell.get() {
                    let _ = e.embed_texts(&["warm up"]);
                }
            });
        }
        Ok(bundle)
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
            Candidates::Local { hnsw: Some(_), .. } => "hnsw".into(),
            Candidates::Local { hnsw: None, .. } => "exact".into(),
            Candidates::Remote(r) => r.vector_index(),
        }
    }

    /// The code's definitions.
    pub fn symbols(&self) -> &SymbolTable {
        &self.symbols
    }

    /// The chunk index of definition `i` of [`Bundle::symbols`].
    pub fn definition_chunk(&self, i: u32) -> usize {
        self.def_chunk[i as usize] as usize
    }

    /// The hit of the chunk that holds definition `i` (score 0): its citation, URL,
    /// repository and commit.
    pub fn definition_hit(&self, i: u32) -> Hit {
        self.hit(self.definition_chunk(i), 0.0)
    }

    /// The references by name (`references.parquet`), read and checked on first use;
    /// empty for a bundle without them.
    pub fn references(&self) -> Result<&[Reference]> {
        let r = self.references.get_or_init(|| {
            if self.manifest.artifact(crate::symbols::REFERENCES_FILE).is_none() {
                return Ok(Vec::new());
            }
            let bytes = crate::manifest::read_checked(&self.dir, &self.manifest, crate::symbols::REFERENCES_FILE)
                .map_err(|e| e.to_string())?;
            let refs = crate::symbols::references_from_parquet(&bytes)
                .map_err(|e| corrupt_at(self.dir.join(crate::symbols::REFERENCES_FILE), e).to_string())?;
            self.checked_references(refs).map_err(|e| e.to_string())
        });
        r.as_deref().map_err(|e| Error::Query(e.clone()))
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
            return Err(Error::Model(match &self.opts.why_keyword_only {
                Some(why) => why.clone(),
                None => "this bundle was opened for keyword search only".into(),
            }));
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
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }

    /// `name@version`, as hits and servers of several bundles name it: a package's
    /// name shown as `crate:tokio` ([`crate::package`]).
    pub fn library(&self) -> String {
        format!("{}@{}", crate::package::shown_name(&self.manifest.name), self.manifest.version)
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

    /// Whether the bundle holds the chunk `id`.
    pub fn has_chunk(&self, id: &str) -> bool {
        self.by_id.contains_key(id.trim())
    }

    /// A chunk by id with up to `neighbors` chunks before and after it in its file.
    pub fn get_chunk(&self, id: &str, neighbors: usize) -> Result<ChunkContext> {
        let &i = self
            .by_id
            .get(id.trim())
            .ok_or_else(|| Error::Query(format!("no chunk {id:?} in this bundle; use a chunk_id from a search hit")))?;
        let file = &self.by_file[&self.chunks[i as usize].path];
        let at = file.iter().position(|&j| j == i).unwrap_or(0);
        let view = |j: u32| {
            let c = &self.chunks[j as usize];
            ChunkView {
                hit: self.hit(j as usize, 0.0),
                text: self.text(j as usize).get(c.overlap_chars as usize..).unwrap_or(self.text(j as usize)).to_owned(),
            }
        };
        Ok(ChunkContext {
            before: file[at.saturating_sub(neighbors)..at].iter().map(|&j| view(j)).collect(),
            chunk: view(i),
            after: file[(at + 1).min(file.len())..(at + 1 + neighbors).min(file.len())]
                .iter()
                .map(|&j| view(j))
                .collect(),
        })
    }

    /// What the bundle holds, for `get_bundle_info`.
    pub fn info(&self) -> BundleInfo {
        let mut by_kind = BTreeMap::new();
        let mut by_section = BTreeMap::new();
        for c in &self.chunks {
            *by_kind.entry(c.kind.as_str().to_owned()).or_insert(0) += 1;
            *by_section.entry(c.section.clone()).or_insert(0) += 1;
        }
        let mut modes = vec!["keyword".to_owned()];
        if !self.opts.keyword_only {
            modes.extend(["vector".to_owned(), "hybrid".to_owned()]);
        }
        let m = &self.manifest;
        BundleInfo {
            name: m.name.clone(),
            version: m.version.clone(),
            created: m.created.clone(),
            model: m.model.id.clone(),
            dims: m.model.dims,
            chunks: self.chunks.len(),
            embedding_rows: self.rows,
            by_kind,
            by_section,
            sources: m.sources.clone(),
            modes,
            vector_index: self.vector_index(),
            bm25_boosts: self.text.fields.iter().map(|(_, n, b)| ((*n).to_owned(), *b)).collect(),
        }
    }
}

/// What a bundle needs before it opens: a model this build knows, with the bundle's
/// dimensions, provisioned (unless keyword-only). Its spec and folder.
fn check_model(manifest: &Manifest, opts: &OpenOptions) -> Result<(&'static ModelSpec, PathBuf)> {
    let spec = model::spec(&manifest.model.id).ok_or_else(|| {
        Error::Model(format!(
            "the bundle was embedded with model {:?}, which this build of atlas does not know (it knows {}); \
                 upgrade atlas or rebuild the bundle with a known model",
            manifest.model.id,
            model::REGISTRY.iter().map(|m| m.id).collect::<Vec<_>>().join(", ")
        ))
    })?;
    if spec.dims != manifest.model.dims {
        return Err(Error::Model(format!(
            "model mismatch: the bundle has {}-d vectors, model {} gives {}; rebuild the bundle",
            manifest.model.dims, spec.id, spec.dims
        )));
    }
    let model_dir = opts.model_dir.clone().unwrap_or_else(|| model::model_dir(spec.id));
    if !opts.keyword_only && !model::model_file(spec, &model_dir, "model.onnx").is_file() {
        return Err(Error::Model(format!(
            "the bundle's model {} is not provisioned in {}; run `atlas setup` (or open keyword-only)",
            spec.id,
            model_dir.display()
        )));
    }
    Ok((spec, model_dir))
}

/// The text index of a remote bundle: empty, in memory, with the bundle's analyzers
/// and boosts (what turns a query into terms).
fn empty_text(manifest: &Manifest) -> Result<TextIndex> {
    let index = Index::create_in_ram(text_index::schema());
    text_fields(index, manifest, Path::new("<memory>"))
}

fn ort_lib(o: &OpenOptions) -> PathBuf {
    o.ort_lib.clone().unwrap_or_else(model::ort_dylib)
}

fn load_embedder(spec: &'static ModelSpec, o: &OpenOptions, want_sha: &str) -> std::result::Result<Encoder, String> {
    let dir = o.model_dir.clone().unwrap_or_else(|| model::model_dir(spec.id));
    let e = Encoder::load(spec, &dir, &ort_lib(o), &o.embed).map_err(|e| e.to_string())?;
    if !want_sha.is_empty() && e.model_sha256 != want_sha {
        return Err(format!(
            "model mismatch: the bundle was embedded with {} sha256 {want_sha}, the model in {} is {}; \
             provision the bundle's model (`atlas setup`) or rebuild the bundle",
            spec.id,
            dir.display(),
            e.model_sha256
        ));
    }
    Ok(e)
}

fn open_text(dir: &Path, manifest: &Manifest) -> Result<TextIndex> {
    let terr = |e: tantivy::TantivyError| corrupt(dir.to_owned(), format!("tantivy index: {e}"));
    // Read-only: serving never writes into a bundle (no lock files either).
    let index = Index::open(text_index::ReadOnlyDir::open(dir).map_err(terr)?).map_err(terr)?;
    // tantivy's own per-file checksums (crc32 footers).
    let damaged = index.validate_checksum().map_err(terr)?;
    if let Some(file) = damaged.iter().next() {
        return Err(corrupt(
            dir.join(file),
            "fails tantivy's checksum; the bundle is damaged: reinstall or rebuild it",
        ));
    }
    text_fields(index, manifest, dir)
}

/// The open index with its analyzers, reader and scored fields.
fn text_fields(index: Index, manifest: &Manifest, dir: &Path) -> Result<TextIndex> {
    let terr = |e: tantivy::TantivyError| corrupt(dir.to_owned(), format!("tantivy index: {e}"));
    text_index::register(&index);
    let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(terr)?;
    let schema = index.schema();
    let field = |name: &str| schema.get_field(name).map_err(terr);
    let mut fields = Vec::new();
    for name in text_index::FIELDS {
        let boost = manifest
            .bm25_boosts
            .get(name)
            .copied()
            .unwrap_or_else(|| text_index::DEFAULT_BOOSTS.iter().find(|d| d.0 == name).map_or(1.0, |d| d.1));
        fields.push((field(name)?, name, boost));
    }
    Ok(TextIndex {
        fields,
        kind: field("kind")?,
        section: field("section")?,
        language: field("language")?,
        reader,
        index,
    })
}
