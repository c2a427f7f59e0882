//! Opening a bundle: the manifest and model checked, the chunks, texts, symbols,
//! vectors and keyword index read or mapped, or a database's answers behind the same
//! face for a remote bundle.

use super::*;

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
        let chunks = crate::chunk_table::from_parquet_shared(
            crate::manifest::map_checked(dir, &manifest, "chunks.parquet")?,
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
            serde_json::from_slice(&crate::manifest::read_checked(dir, &manifest, crate::vectors::META_FILE)?)
                .map_err(|e| corrupt(meta_path.clone(), e.to_string()))?;
        let npy_path = dir.join(crate::vectors::FILE);
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
        // A keyword-only bundle never walks the graph: not loaded (at 200k rows that is
        // a second to load and another to free).
        let graph = scan_rows > opts.exact_max_rows && hnsw_dir.is_dir();
        let hnsw = if graph && !opts.keyword_only {
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
            Some(_) => Some(crate::manifest::map_checked(dir, &manifest, crate::symbols::DEFINITIONS_FILE)?),
            None => None,
        };
        let query_map = match manifest.tune.as_ref() {
            Some(t) => Some(crate::manifest::read_checked(dir, &manifest, &t.file)?),
            None => None,
        };
        let rows = vectors.rows;
        let candidates = Candidates::Local { vectors, hnsw, graph, window_chunk: meta.window_chunk, first_window };
        let parts = Parts { dir: dir.to_owned(), manifest, chunks, texts, rows, candidates, text, symbols, query_map };
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
        let query_map = match r.manifest.tune.as_ref() {
            Some(t) => Some(remote_file(&*r.index, &r.manifest, &dir, &t.file)?),
            None => None,
        };
        let parts = Parts {
            query_map,
            dir,
            manifest: r.manifest,
            chunks: r.chunks,
            texts: None,
            rows,
            candidates: Candidates::Remote(r.index),
            text,
            symbols: r.symbols.map(bytes::Bytes::from),
        };
        let bundle = Bundle::assemble(parts, spec, model_dir, opts, OnceLock::new())?;
        if let Some(refs) = refs {
            let _ = bundle.references.set(bundle.checked_references(refs)?);
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
        references: OnceLock<Vec<Reference>>,
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
        let query_map = match (&p.query_map, &p.manifest.tune) {
            (Some(bytes), Some(t)) => Some(
                crate::query_map::QueryMap::from_bytes(bytes, p.manifest.model.dims)
                    .map_err(|why| corrupt(p.dir.join(&t.file), format!("{why}; rebuild the bundle")))?,
            ),
            _ => None,
        };
        let key = match p.manifest.model.sha256.as_str() {
            "" => format!("{}:{}", spec.id, model_dir.display()),
            sha => format!("{}:{sha}", spec.id),
        };
        let embedder = opts.models.embedder(key);
        let reranker = opts.models.1.clone();
        let bundle = Opened {
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
            query_map,
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
        Ok(Bundle { opened: Arc::new(bundle), hidden: None })
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
    /// `symbols.parquet`: mapped, or a database's copy.
    symbols: Option<bytes::Bytes>,
    /// `query_map.bin`, when the manifest lists one.
    query_map: Option<Vec<u8>>,
}

/// A file of a bundle served from a database, checked against the manifest (listed,
/// of its size and blake3).
fn remote_file(index: &dyn RemoteIndex, manifest: &Manifest, dir: &Path, name: &str) -> Result<Vec<u8>> {
    let listed = manifest.artifact(name).ok_or_else(|| {
        corrupt(dir.join(name), "the manifest names it but does not list it; export the bundle again")
    })?;
    if listed.size > MAX_REMOTE_FILE_BYTES {
        return Err(corrupt(dir.join(name), format!("{} bytes is more than this file holds", listed.size)));
    }
    let bytes =
        index.file(name)?.ok_or_else(|| corrupt(dir.join(name), "the export does not hold it; export again"))?;
    if bytes.len() as u64 != listed.size || crate::hash::blake3_bytes(&bytes) != listed.blake3 {
        return Err(corrupt(
            dir.join(name),
            "the database's copy does not match the manifest; export the bundle again",
        ));
    }
    Ok(bytes)
}

/// The definitions of `symbols.parquet` (none when the manifest lists no such file),
/// each resolved to its chunk; a definition naming a chunk the bundle lacks is
/// corruption.
fn open_symbols(
    dir: &Path,
    bytes: Option<bytes::Bytes>,
    by_id: &HashMap<String, u32>,
) -> Result<(SymbolTable, Vec<u32>)> {
    let Some(bytes) = bytes else {
        return Ok((SymbolTable::default(), Vec::new()));
    };
    let path = dir.join(crate::symbols::DEFINITIONS_FILE);
    let defs = crate::symbols::definitions_from_shared(bytes).map_err(|e| corrupt_at(path.clone(), e))?;
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

/// What a bundle needs before it opens: a model this build knows, with the bundle's
/// dimensions, provisioned (unless keyword-only). Its spec and folder.
fn check_model(manifest: &Manifest, opts: &OpenOptions) -> Result<(&'static ModelSpec, PathBuf)> {
    let spec = model::spec(&manifest.model.id).ok_or_else(|| {
        Error::Model(ModelError::new(format!(
            "the bundle was embedded with model {:?}, which this build of atlas does not know (it knows {}); \
                 upgrade atlas or rebuild the bundle with a known model",
            manifest.model.id,
            model::REGISTRY.iter().map(|m| m.id).collect::<Vec<_>>().join(", ")
        )))
    })?;
    if spec.dims != manifest.model.dims {
        return Err(Error::Model(ModelError::new(format!(
            "model mismatch: the bundle has {}-d vectors, model {} gives {}; rebuild the bundle",
            manifest.model.dims, spec.id, spec.dims
        ))));
    }
    let model_dir = opts.model_dir.clone().unwrap_or_else(|| model::model_dir(spec.id));
    if !opts.keyword_only && !model::model_file(spec, &model_dir, "model.onnx").is_file() {
        return Err(Error::Model(ModelError::new(format!(
            "the bundle's model {} is not provisioned in {}; run `atlas setup` (or open keyword-only)",
            spec.id,
            model_dir.display()
        ))));
    }
    Ok((spec, model_dir))
}

/// The text index of a remote bundle: empty, in memory, with the bundle's analyzers
/// and boosts (what turns a query into terms).
fn empty_text(manifest: &Manifest) -> Result<TextIndex> {
    let index = Index::create_in_ram(text_index::schema());
    text_fields(index, manifest, Path::new("<memory>"))
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
