//! pack: one bundle both servers serve: manifest.json, chunks.parquet, embeddings,
//! the HNSW graph, the tantivy index and the mirror (the format:
//! docs/bundle-format.md). The stage stores the bundle's files in the cache; its
//! `materialize` writes them to `<out>/bundle/` and, with `--archive`, a `.tar.zst`
//! ([`archive`]).

pub mod archive;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context as _;
use atlas_cache::{Digest, KeyBuilder};
use atlas_runtime::manifest::{Artifact, FORMAT_VERSION, LEFT_OUT_NAMED, LeftOut, Manifest, ModelInfo, SourceInfo};
use serde::{Deserialize, Serialize};

use crate::artifacts::{
    Bm25Manifest, ChunkManifest, CleanManifest, Cleaned, CrawlManifest, EmbedManifest, PackManifest, TuneManifest,
};
use crate::runner::{
    Ctx, Loaded, Outputs, ParamError, SourceConfig, Stage, StageOutput, canonical, is_safe_name, load_json,
};
use crate::text::rfc3339_now;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PackParams {
    /// The bundle's version (it names the archive).
    pub version: String,
    /// One line on what the bundle holds, for `list_libraries` and `atlas bundles`.
    pub description: Option<String>,
    /// Describe the bundle by its package source's own summary (a crate's
    /// `package.description`, an npm package's `description`, an sdist's `Summary`)
    /// where the package states one; `description` is the fallback. `atlas add` and
    /// `atlas sync` set it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub description_from_package: bool,
    /// Ship an HNSW index (the runtime uses it above its exact-scan threshold).
    /// `true`/`false`; unset (auto): only when the runtime would load it, above its
    /// exact-scan threshold (`atlas_runtime::bundle::EXACT_MAX_ROWS` rows of 384 dims).
    pub hnsw: Option<bool>,
    /// A golden set (JSON Lines, docs/eval.md; relative to pipeline.yaml): evaluated on
    /// the packed bundle, shipped in it with its results (`eval/`, the manifest's
    /// `eval` block), and rerun by `atlas eval --bundle B`.
    pub eval: Option<std::path::PathBuf>,
    /// Task templates shipped in the bundle (`prompts.json`): the rag server offers
    /// them beside its own prompts and `atlas agent --task NAME` runs them; checked
    /// here (`atlas_runtime::prompts::check`).
    pub prompts: Vec<atlas_runtime::prompts::BundlePrompt>,
}

impl Default for PackParams {
    fn default() -> Self {
        PackParams {
            version: "0.1.0".to_owned(),
            description: None,
            description_from_package: false,
            hnsw: None,
            eval: None,
            prompts: Vec::new(),
        }
    }
}

/// The package's own summary, when the config asks for it and its one package
/// source states one (several package sources: none, the config's description says it).
fn package_summary(p: &PackParams, crawl: &CrawlManifest) -> Option<String> {
    let mut s = crawl.summaries.values();
    match (p.description_from_package, s.next(), s.next()) {
        (true, Some(one), None) => Some(one.clone()),
        _ => None,
    }
}

/// The golden set's path, as the config names it (relative to the config's folder).
fn golden_path(p: &PackParams, cfg: &Loaded) -> Option<std::path::PathBuf> {
    p.eval.as_ref().map(|e| cfg.dir.join(e))
}

/// Writes the bundle's files (and `manifest`) to a scratch folder, opens it and runs
/// the golden set on it: the report the bundle ships.
fn evaluate(
    ctx: &Ctx<'_>,
    files: &BTreeMap<String, Digest>,
    manifest: &Manifest,
    golden: &[u8],
) -> anyhow::Result<atlas_runtime::eval::Report> {
    use atlas_runtime::eval;
    let dir = ctx.cache.root().join("tmp").join(format!("eval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, d) in files {
        let to = atlas_runtime::safe_path::join_inside(&dir, path)
            .with_context(|| format!("writing {path} into {}", dir.display()))?;
        std::fs::create_dir_all(to.parent().expect("a file in the bundle"))?;
        std::fs::write(&to, ctx.cache.get_required(*d)?).with_context(|| format!("writing {}", to.display()))?;
    }
    std::fs::write(dir.join("manifest.json"), serde_json::to_vec_pretty(manifest)?)?;
    let text = std::str::from_utf8(golden).context("the golden set is not UTF-8")?;
    let queries = eval::parse_golden(text)?;
    let bar = ctx.progress.stage("pack: eval", 1);
    let report = atlas_runtime::Bundle::open(&dir, atlas_runtime::OpenOptions::default())
        .map_err(anyhow::Error::from)
        .and_then(|b| Ok(eval::evaluate(&b, &queries, &eval::EvalOptions::default())?))
        .context("evaluating the golden set on the packed bundle");
    bar.inc();
    bar.finish();
    let _ = std::fs::remove_dir_all(&dir);
    report
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

/// One line per mode: what the shipped eval measured.
fn eval_note(r: &atlas_runtime::eval::Report) -> String {
    let modes: Vec<String> = r
        .modes
        .iter()
        .map(|m| format!("{} MRR@10 {:.3} R@5 {:.3}", m.mode, m.metrics.mrr10, m.metrics.recall5))
        .collect();
    format!(
        "eval ({}, {}): {}",
        atlas_runtime::words::count(r.answerable, "query"),
        atlas_runtime::words::count(r.negatives, "negative"),
        modes.join(", ")
    )
}

#[derive(Debug, Default)]
pub struct Pack;

/// The sources and every stage's params, canonical: what the bundle was built from.
fn config_digest(cfg: &Loaded) -> String {
    let mut k = KeyBuilder::new("config");
    k.str("stages", &serde_json::to_string(cfg.canonical_params()).expect("JSON values serialise"));
    for (name, src) in &cfg.config.sources {
        k.str("source", name).str("kind", src.kind()).str("detail", &format!("{src:?}"));
    }
    k.finish().to_hex()
}

impl Stage for Pack {
    const NAME: &'static str = "pack";
    /// 3: the shipped eval (`stages.pack.eval`); 4: `chunks.text`; 5: the symbol table;
    /// 6: the prompts (`stages.pack.prompts`); 7: each source's `left_out`; 8: and
    /// its count of docs.
    const VERSION: u32 = 8;
    /// It also reads the sources (crawl) and the mirror (clean-gitbook).
    const DEPS: &'static [&'static str] = &["crawl", "clean-gitbook", "chunk", "embed", "tune", "bm25"];
    type Params = PackParams;
    type Prepared = ();

    fn check(p: &PackParams) -> Result<(), ParamError> {
        atlas_runtime::prompts::check(&p.prompts)
            .map_err(|why| ParamError::new("prompts", format!("stages.pack.prompts: {why}")))?;
        if let Some(d) = &p.description
            && (d.len() > 300 || d.contains(['\n', '\r']))
        {
            return Err(ParamError::new(
                "description",
                "stages.pack.description must be one line of at most 300 bytes",
            ));
        }
        if is_safe_name(&p.version) {
            return Ok(());
        }
        Err(ParamError::new(
            "version",
            format!(
                "stages.pack.version {:?} must be letters, digits, '.', '-', '+' or '_' (it names the archive)",
                p.version
            ),
        ))
    }
    fn key_params(p: &PackParams, cfg: &Loaded) -> serde_json::Value {
        serde_json::json!({ "name": cfg.config.name, "pack": canonical(p) })
    }
    /// The golden set, by content: a new set re-packs.
    fn external_inputs(&self, p: &PackParams, ctx: &Ctx<'_>) -> anyhow::Result<(BTreeMap<String, Digest>, ())> {
        let Some(path) = golden_path(p, ctx.cfg) else { return Ok((BTreeMap::new(), ())) };
        let bytes = std::fs::read(&path).map_err(|e| {
            atlas_runtime::exit::UsageError(format!(
                "stages.pack.eval: cannot read {}: {e}; fix the path (relative to pipeline.yaml)",
                path.display()
            ))
        })?;
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            atlas_runtime::exit::UsageError(format!("stages.pack.eval: {} is not UTF-8", path.display()))
        })?;
        atlas_runtime::eval::parse_golden(text)
            .map_err(|e| atlas_runtime::exit::UsageError(format!("stages.pack.eval: {}: {e}", path.display())))?;
        Ok((BTreeMap::from([("eval".to_owned(), ctx.cache.put(&bytes)?)]), ()))
    }
    fn run(&self, p: &PackParams, ctx: &Ctx<'_>, (): ()) -> anyhow::Result<StageOutput> {
        let crawl: CrawlManifest = ctx.input("crawl")?;
        let clean: CleanManifest = ctx.input("clean-gitbook")?;
        let chunk: ChunkManifest = ctx.input("chunk")?;
        let embed: EmbedManifest = ctx.input("embed")?;
        let bm25: Bm25Manifest = ctx.input("bm25")?;
        let tune: TuneManifest = ctx.input("tune")?;
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
        add(atlas_runtime::symbols::DEFINITIONS_FILE.into(), chunk.symbols, &mut out)?;
        add(atlas_runtime::symbols::REFERENCES_FILE.into(), chunk.references, &mut out)?;
        // The texts again, mappable: servers keep them out of the heap.
        let records = atlas_runtime::chunk_table::from_parquet(&ctx.cache.get_required(chunk.chunks)?)?;
        let texts = ctx.cache.put(&atlas_runtime::text_store::write(records.iter().map(|c| c.text.as_str())))?;
        add(atlas_runtime::text_store::FILE.into(), texts, &mut out)?;
        add("embeddings.npy".into(), embed.embeddings, &mut out)?;
        let emb_json = ctx.cache.put(&serde_json::to_vec_pretty(&embed)?)?;
        add("embeddings.json".into(), emb_json, &mut out)?;
        // An empty bundle (no chunks) is valid; it just has no graph to build.
        let scan_rows = embed.rows * embed.dims.max(384) / 384;
        let hnsw = p.hnsw.unwrap_or(scan_rows > atlas_runtime::bundle::EXACT_MAX_ROWS);
        if hnsw && embed.rows > 0 {
            for (name, d) in build_hnsw(ctx, embed.embeddings)? {
                add(format!("hnsw/{name}"), d, &mut out)?;
            }
        }
        if let Some(map) = tune.map {
            add(atlas_runtime::query_map::FILE.into(), map, &mut out)?;
        }
        for (name, d) in &bm25.files {
            add(format!("tantivy/{name}"), *d, &mut out)?;
        }
        let bm25_json = ctx.cache.put(&bm25.bm25_json()?)?;
        add("bm25.json".into(), bm25_json, &mut out)?;
        if !p.prompts.is_empty() {
            let prompts = ctx.cache.put(&serde_json::to_vec_pretty(&p.prompts)?)?;
            add(atlas_runtime::prompts::FILE.into(), prompts, &mut out)?;
        }
        let bar = ctx.progress.stage("pack", clean.docs.len());
        for doc in &clean.docs {
            let c: Cleaned = ctx.load(doc.clean, "cleaned document")?;
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
                SourceConfig::Local { path, .. } | SourceConfig::Tree { path, .. } => Some(path.display().to_string()),
                SourceConfig::LlmsTxt { url, .. } | SourceConfig::Git { url, .. } => Some(url.clone()),
                SourceConfig::Github { owner, api_url, .. } => Some(format!("{api_url} ({owner})")),
                SourceConfig::Package { spec, .. } => Some(spec.clone()),
            };
            sources.push(SourceInfo {
                name: name.clone(),
                kind: src.kind().to_owned(),
                url,
                commits: commits.into_iter().collect(),
                fetched_at: crawl.fetched_at.get(name).cloned(),
                files: docs.len(),
                left_out: left_out(name, &crawl.skipped),
                docs: docs.iter().filter(|d| crate::text::doc_format(&d.rel).is_some()).count(),
            });
        }
        artifacts.sort_by(|a, b| a.path.cmp(&b.path));
        let mut manifest = Manifest {
            format_version: FORMAT_VERSION,
            name: ctx.cfg.config.name.clone(),
            version: p.version.clone(),
            description: package_summary(p, &crawl).or_else(|| p.description.clone()),
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
            eval: None,
            tune: tune.info,
            artifacts,
        };
        if let Some(&golden) = ctx.inputs.get("eval") {
            let golden_bytes = ctx.cache.get_required(golden)?;
            let mut report = evaluate(ctx, &files, &manifest, &golden_bytes)?;
            // Timings differ run to run; the bundle stays byte-identical for equal inputs.
            for m in &mut report.modes {
                m.p50_ms = None;
            }
            out.notes.push(eval_note(&report));
            let results = ctx.cache.put(&serde_json::to_vec_pretty(&report)?)?;
            for (path, d) in [(atlas_runtime::eval::GOLDEN_FILE, golden), (atlas_runtime::eval::RESULTS_FILE, results)]
            {
                manifest.artifacts.push(Artifact::of(path, &ctx.cache.get_required(d)?));
                out.objects.insert(d);
                files.insert(path.to_owned(), d);
            }
            manifest.artifacts.sort_by(|a, b| a.path.cmp(&b.path));
            manifest.eval = Some(report.info());
        }
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

    /// `bundle/` and, with `--archive`, `<name>-<version>.tar.zst` and its `.sha256`.
    fn materialize(output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()> {
        let m: PackManifest = load_json(out.cache, output, "the pack manifest")?;
        out.write_objects("bundle", &m.files)?;
        if out.archive {
            let name = format!("{}-{}.tar.zst", m.name, m.version);
            let bytes = archive::tar_zst(out.cache, &m)?;
            let sha = atlas_runtime::hash::sha256_bytes(&bytes);
            out.write(&name, &bytes, true)?;
            out.write(&format!("{name}.sha256"), format!("{sha}  {name}\n").as_bytes(), false)?;
        }
        Ok(())
    }
}

/// The files of source `name` the crawl skipped, grouped by reason, in the order of
/// the reasons' names; each group counted by extension and naming its first paths.
fn left_out(name: &str, skipped: &[(String, String)]) -> Vec<LeftOut> {
    let prefix = format!("{name}/");
    let mut groups: BTreeMap<&'static str, LeftOut> = BTreeMap::new();
    for (path, why) in skipped {
        let Some(rel) = path.strip_prefix(&prefix) else { continue };
        let reason = crate::artifacts::left_out_reason(why);
        let g = groups.entry(reason).or_insert_with(|| LeftOut {
            reason: reason.to_owned(),
            files: 0,
            by_extension: BTreeMap::new(),
            paths: Vec::new(),
            docs: 0,
        });
        g.files += 1;
        g.docs += usize::from(crate::text::doc_format(rel).is_some());
        let file = rel.rsplit('/').next().unwrap_or(rel);
        let ext = match file.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() && ext.len() <= 16 => ext.to_ascii_lowercase(),
            _ => "(none)".to_owned(),
        };
        *g.by_extension.entry(ext).or_default() += 1;
        if g.paths.len() < LEFT_OUT_NAMED {
            g.paths.push(rel.to_owned());
        }
    }
    groups.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_left_out_are_grouped_by_reason_and_counted_by_extension() {
        let skipped = [
            ("t/big.bin".to_owned(), "5000 bytes is over max_file_bytes (10)".to_owned()),
            ("t/logo.png".to_owned(), "binary (it holds NUL bytes)".to_owned()),
            ("t/a/b.png".to_owned(), "not UTF-8 text".to_owned()),
            ("t/.env".to_owned(), "a secret file (name it in include_secrets to index it)".to_owned()),
            ("other/x.png".to_owned(), "binary (it holds NUL bytes)".to_owned()),
        ];
        let out = left_out("t", &skipped);
        let by: BTreeMap<&str, &LeftOut> = out.iter().map(|g| (g.reason.as_str(), g)).collect();
        assert_eq!(by.keys().copied().collect::<Vec<_>>(), ["binary", "secret", "too large"]);
        assert_eq!(by["binary"].files, 2);
        assert_eq!(by["binary"].by_extension, BTreeMap::from([("png".to_owned(), 2)]));
        assert_eq!(by["binary"].paths, ["logo.png", "a/b.png"]);
        assert_eq!(by["secret"].by_extension, BTreeMap::from([("(none)".to_owned(), 1)]));
        assert_eq!(by["too large"].paths, ["big.bin"]);
        assert_eq!((by["binary"].docs, by["secret"].docs), (0, 0));
    }

    #[test]
    fn a_bundle_takes_its_one_packages_summary_only_when_the_config_asks() {
        let crawl = |summaries: &[(&str, &str)]| CrawlManifest {
            docs: Vec::new(),
            skipped: Vec::new(),
            fetched_at: BTreeMap::new(),
            summaries: summaries.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        };
        let asked = PackParams { description_from_package: true, ..PackParams::default() };
        assert_eq!(package_summary(&asked, &crawl(&[("x", "Pads strings")])).as_deref(), Some("Pads strings"));
        assert_eq!(package_summary(&PackParams::default(), &crawl(&[("x", "Pads strings")])), None);
        assert_eq!(package_summary(&asked, &crawl(&[])), None);
        assert_eq!(package_summary(&asked, &crawl(&[("x", "a"), ("y", "b")])), None, "two packages: the config says");
        // Unset, the flag leaves every other config's key as it was.
        assert!(!canonical(&PackParams::default()).to_string().contains("description_from_package"));
    }
}
