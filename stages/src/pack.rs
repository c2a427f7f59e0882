//! pack: one bundle both servers serve: manifest.json, chunks.parquet, embeddings,
//! the tantivy index and the mirror. The stage stores the bundle's files in the cache;
//! `outputs` writes them to `<out>/bundle/` and, with `--archive`, a `.tar.zst`.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context as _;
use atlas_cache::{Digest, KeyBuilder};
use atlas_runtime::bundle::{Artifact, FORMAT_VERSION, Manifest, ModelInfo, SourceInfo};
use serde::{Deserialize, Serialize};

use crate::bm25::Bm25Manifest;
use crate::builtin::{ChunkManifest, CleanManifest, CrawlManifest};
use crate::config::{Loaded, SourceConfig, canonical};
use crate::dag::{Ctx, Stage, StageOutput};
use crate::embed::EmbedManifest;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PackParams {
    /// The bundle's version (it names the archive).
    pub version: String,
    /// Ship an HNSW index (the runtime uses it above its exact-scan threshold).
    pub hnsw: bool,
}

impl Default for PackParams {
    fn default() -> Self {
        PackParams { version: "0.1.0".to_owned(), hnsw: true }
    }
}

/// Builds the HNSW dump over the embeddings: `(file name, object)`.
fn build_hnsw(ctx: &Ctx<'_>, embeddings: Digest) -> anyhow::Result<Vec<(String, Digest)>> {
    let npy = ctx.cache.get_required(embeddings)?;
    let (rows, dims, data) = atlas_runtime::vectors::from_npy_f16(&npy)?;
    // Built in the cache's tmp/ (cleared when a run starts), then stored.
    let dir = ctx.cache.root().join("tmp").join(format!("hnsw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let bar = ctx.progress.stage("pack: hnsw", 1);
    atlas_runtime::hnsw::build(rows, dims, &data, &dir).context("building the HNSW index")?;
    bar.inc();
    bar.finish();
    let mut files = Vec::new();
    for name in [atlas_runtime::hnsw::GRAPH_FILE, atlas_runtime::hnsw::DATA_FILE] {
        let bytes = std::fs::read(dir.join(name)).with_context(|| format!("reading the {name} dump"))?;
        files.push((name.to_owned(), ctx.cache.put(&bytes)?));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(files)
}

/// The bundle's files (path → object), manifest.json among them.
#[derive(Debug, Serialize, Deserialize)]
pub struct PackManifest {
    pub name: String,
    pub version: String,
    pub files: BTreeMap<String, Digest>,
}

#[derive(Debug)]
pub struct Pack;

fn load<T: for<'de> Deserialize<'de>>(
    ctx: &Ctx<'_>,
    inputs: &BTreeMap<String, Digest>,
    name: &str,
) -> anyhow::Result<T> {
    let d = inputs.get(name).copied().with_context(|| format!("missing input {name}"))?;
    serde_json::from_slice(&ctx.cache.get_required(d)?).with_context(|| format!("decoding the {name} output"))
}

/// The sources and every stage's params, canonical: what the bundle was built from.
fn config_digest(cfg: &Loaded) -> String {
    let mut k = KeyBuilder::new("config");
    k.str("stages", &canonical(&cfg.config.stages).to_string());
    for (name, src) in &cfg.config.sources {
        k.str("source", name).str("kind", src.kind()).str("detail", &format!("{src:?}"));
    }
    k.finish().to_hex()
}

/// RFC 3339 UTC time of now (seconds).
pub fn rfc3339_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

impl Stage for Pack {
    fn name(&self) -> &'static str {
        "pack"
    }
    fn version(&self) -> u32 {
        2
    }
    fn params(&self, cfg: &Loaded) -> serde_json::Value {
        serde_json::json!({ "name": cfg.config.name, "pack": canonical(&cfg.config.stages.pack) })
    }
    fn run(&self, ctx: &Ctx<'_>, inputs: &BTreeMap<String, Digest>) -> anyhow::Result<StageOutput> {
        let crawl: CrawlManifest = load(ctx, inputs, "crawl")?;
        let clean: CleanManifest = load(ctx, inputs, "clean-gitbook")?;
        let chunk: ChunkManifest = load(ctx, inputs, "chunk")?;
        let embed: EmbedManifest = load(ctx, inputs, "embed")?;
        let bm25: Bm25Manifest = load(ctx, inputs, "bm25")?;
        let mut out = StageOutput::default();
        let mut files: BTreeMap<String, Digest> = BTreeMap::new();
        let mut artifacts = Vec::new();
        let mut add = |path: String, d: Digest, out: &mut StageOutput| -> anyhow::Result<()> {
            let bytes = ctx.cache.get_required(d)?;
            artifacts.push(Artifact::of(&path, &bytes));
            out.objects.insert(d);
            files.insert(path, d);
            Ok(())
        };
        add("chunks.parquet".into(), chunk.chunks, &mut out)?;
        add("embeddings.npy".into(), embed.embeddings, &mut out)?;
        let emb_json = ctx.cache.put(&serde_json::to_vec_pretty(&embed)?)?;
        add("embeddings.json".into(), emb_json, &mut out)?;
        // An empty bundle (no chunks) is valid; it just has no graph to build.
        if ctx.cfg.config.stages.pack.hnsw && embed.rows > 0 {
            for (name, d) in build_hnsw(ctx, embed.embeddings)? {
                add(format!("hnsw/{name}"), d, &mut out)?;
            }
        }
        for (name, d) in &bm25.files {
            add(format!("tantivy/{name}"), *d, &mut out)?;
        }
        let bm25_json = ctx
            .cache
            .put(&serde_json::to_vec_pretty(&serde_json::json!({"boosts": bm25.boosts, "docs": bm25.docs}))?)?;
        add("bm25.json".into(), bm25_json, &mut out)?;
        let bar = ctx.progress.stage("pack", clean.docs.len());
        for doc in &clean.docs {
            let c: crate::clean::Cleaned = serde_json::from_slice(&ctx.cache.get_required(doc.clean)?)?;
            let d = ctx.cache.put(c.text.as_bytes())?;
            add(format!("mirror/{}", doc.doc.path()), d, &mut out)?;
            bar.inc();
        }
        bar.finish();
        // Sources, as the crawl saw them.
        let mut sources = Vec::new();
        for (name, src) in &ctx.cfg.config.sources {
            let docs: Vec<_> = crawl.docs.iter().filter(|d| &d.source == name).collect();
            let commits: BTreeSet<String> = docs.iter().filter_map(|d| d.commit.clone()).collect();
            let url = match src {
                SourceConfig::Local { path, .. } => Some(path.display().to_string()),
                SourceConfig::LlmsTxt { url, .. } | SourceConfig::Git { url, .. } => Some(url.clone()),
                SourceConfig::Github { owner, api_url, .. } => Some(format!("{api_url} ({owner})")),
            };
            sources.push(SourceInfo {
                name: name.clone(),
                kind: src.kind().to_owned(),
                url,
                commits: commits.into_iter().collect(),
                fetched_at: crawl.fetched_at.get(name).cloned(),
                files: docs.len(),
            });
        }
        artifacts.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            name: ctx.cfg.config.name.clone(),
            version: ctx.cfg.config.stages.pack.version.clone(),
            created: rfc3339_now(),
            config_digest: config_digest(ctx.cfg),
            sources,
            model: ModelInfo {
                id: embed.model.clone(),
                sha256: embed.model_sha256.clone(),
                dims: embed.dims,
                pooling: embed.pooling,
            },
            chunk_count: chunk.chunk_count,
            embedding_rows: embed.rows,
            bm25_boosts: bm25.boosts,
            artifacts,
        };
        let m = ctx.cache.put(&serde_json::to_vec_pretty(&manifest)?)?;
        out.objects.insert(m);
        files.insert("manifest.json".into(), m);
        out.items = files.len();
        let pm = PackManifest { name: manifest.name, version: manifest.version, files };
        let d = ctx.cache.put_json(&pm)?;
        out.objects.insert(d);
        out.output = Some(d);
        Ok(out)
    }
}
