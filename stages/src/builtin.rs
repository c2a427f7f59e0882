//! The built stages: crawl (local sources), clean-gitbook and chunk. Each is a pure
//! function of its params and input artifacts; only crawl reads the outside world.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use anyhow::{Context as _, bail};
use atlas_cache::{Cache, Digest, KeyBuilder};
use atlas_runtime::chunks::ChunkRecord;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chunk::{ChunkParams, DocChunk, chunk_lines, chunk_markdown, first_h1};
use crate::clean::{CleanParams, Cleaned, Residual, clean};
use crate::config::{Loaded, SourceConfig, canonical};
use crate::crawl;
use crate::dag::{Ctx, Stage, StageOutput};
use crate::failpoint;
use crate::source::{DocEntry, Globs, Scan, ScannedFile, is_markdown, language_of, scan_local, section_of};

pub fn registry() -> Vec<Box<dyn Stage>> {
    vec![
        Box::new(Crawl::default()),
        Box::new(CleanGitbook),
        Box::new(Chunk),
        Box::new(crate::embed::Embed),
        Box::new(crate::bm25::Bm25),
        Box::new(crate::pack::Pack),
    ]
}

// ---------------------------------------------------------------------------- crawl

#[derive(Debug, Serialize, Deserialize)]
pub struct CrawlManifest {
    pub docs: Vec<DocEntry>,
    pub skipped: Vec<(String, String)>,
    /// Per source, when its content was fetched (see [`Scan::fetched_at`]).
    #[serde(default)]
    pub fetched_at: BTreeMap<String, String>,
}

/// The source stage. Its external input is a snapshot digest of each source, so an
/// unchanged source tree makes the stage (and everything after it) a cache hit.
#[derive(Debug, Default)]
pub struct Crawl {
    scans: Mutex<Option<BTreeMap<String, Scan>>>,
}

impl Crawl {
    fn scan_all(&self, ctx: &Ctx<'_>) -> anyhow::Result<()> {
        let mut guard = self.scans.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_some() {
            return Ok(());
        }
        let cfg = ctx.cfg;
        let p = &cfg.config.stages.crawl;
        let mut scans = BTreeMap::new();
        for (name, src) in &cfg.config.sources {
            match src {
                SourceConfig::Local { path, include, exclude } => {
                    let root = cfg.resolve(path);
                    let scan = scan_local(&root, include, exclude, p.max_file_bytes)
                        .with_context(|| format!("source {name}"))?;
                    scans.insert(name.clone(), scan);
                }
                SourceConfig::LlmsTxt { url, sections, max_pages, allow_hosts } => {
                    let state = crawl::state_dir(ctx.cache.root(), name);
                    let sections = if ctx.sections.is_empty() { sections.as_slice() } else { ctx.sections };
                    let src =
                        crawl::LlmsSource { name, url, sections, max_pages: ctx.max_pages.or(*max_pages), allow_hosts };
                    let (pages, notes) = crawl::crawl_llms(&src, p, &state, ctx.offline, ctx.progress)?;
                    for n in notes {
                        ctx.progress.log(&format!("crawl: {n}"));
                    }
                    let fetched_at = pages.iter().filter_map(|p| p.fetched_at.clone()).max();
                    let mut scan = Scan { fetched_at, ..Scan::default() };
                    for page in pages {
                        let bytes =
                            std::fs::read(&page.path).with_context(|| format!("reading {}", page.path.display()))?;
                        let digest = Digest::of(&bytes);
                        scan.files.push(ScannedFile {
                            rel: page.rel,
                            bytes,
                            digest,
                            url: Some(page.url),
                            section: Some(page.section),
                            repo: None,
                            commit: None,
                        });
                    }
                    scan.files.sort_by(|a, b| a.rel.cmp(&b.rel));
                    scans.insert(name.clone(), scan);
                }
                SourceConfig::Git { url, rev, branch, include, exclude } => {
                    let state = crawl::state_dir(ctx.cache.root(), name);
                    let url = resolve_repo_url(cfg, url);
                    let globs = Globs::new(include, exclude)?;
                    let web = url.starts_with("https://github.com/").then(|| url.trim_end_matches(".git").to_owned());
                    let repo = RepoRef { url: &url, web: web.as_deref(), name: None, section: name };
                    let mut scan = Scan::default();
                    read_repo(
                        ctx,
                        &repo,
                        &state.join("repo.git"),
                        rev.as_deref(),
                        branch.as_deref(),
                        &globs,
                        &mut scan,
                    )?;
                    scans.insert(name.clone(), scan);
                }
                SourceConfig::Github { owner, topic, api_url, include, exclude } => {
                    let state = crawl::state_dir(ctx.cache.root(), name);
                    let globs = Globs::new(include, exclude)?;
                    let repos = if ctx.offline {
                        read_portfolio_list(&state)?
                    } else {
                        let token = std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty());
                        let mut notes = Vec::new();
                        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                        let repos = rt.block_on(crawl::github::list_repos(
                            api_url,
                            owner,
                            topic,
                            token.as_deref(),
                            p,
                            &mut notes,
                        ))?;
                        for n in notes {
                            ctx.progress.log(&format!("crawl: {n}"));
                        }
                        write_portfolio_list(&state, &repos)?;
                        repos
                    };
                    let mut scan = Scan::default();
                    for r in &repos {
                        // The name comes from the API and names a folder: the path guard decides.
                        let bare = match atlas_runtime::safe_path::join_inside(
                            &state.join("repos"),
                            &format!("{}.git", r.name),
                        ) {
                            Ok(p) => p,
                            Err(e) => {
                                scan.skipped.push((r.name.escape_debug().to_string(), e.why.to_owned()));
                                continue;
                            }
                        };
                        let repo = RepoRef {
                            url: &r.clone_url,
                            web: Some(&r.html_url),
                            name: Some(&r.name),
                            section: &r.name,
                        };
                        read_repo(ctx, &repo, &bare, None, r.default_branch.as_deref(), &globs, &mut scan)?;
                    }
                    scan.files.sort_by(|a, b| a.rel.cmp(&b.rel));
                    scans.insert(name.clone(), scan);
                }
            }
        }
        for (name, scan) in &scans {
            if scan.files.is_empty() {
                bail!("{}", empty_source(name, &cfg.config.sources[name], scan));
            }
        }
        *guard = Some(scans);
        Ok(())
    }
}

/// Why a source yielded no documents, and what to do, on one line.
fn empty_source(name: &str, src: &SourceConfig, scan: &Scan) -> String {
    let mut why = format!("source {name} ({}) yielded no documents", src.kind());
    if let Some((rel, reason)) = scan.skipped.first() {
        why.push_str(&format!("; {} files were skipped (e.g. {rel}: {reason})", scan.skipped.len()));
    }
    match src {
        SourceConfig::Local { path, include, .. } => {
            why.push_str(&format!("; check that {} holds files matching {include:?}", path.display()));
        }
        SourceConfig::Git { include, .. } | SourceConfig::Github { include, .. } => {
            why.push_str(&format!("; check the repositories and the include globs {include:?}"));
        }
        SourceConfig::LlmsTxt { url, .. } => why.push_str(&format!("; check {url}")),
    }
    why
}

/// One repository to read: where it is fetched from, its web page (for citation
/// URLs), and where its files go in the source.
struct RepoRef<'a> {
    url: &'a str,
    web: Option<&'a str>,
    /// Set for portfolio repositories: files live under `<name>/`.
    name: Option<&'a str>,
    section: &'a str,
}

/// A local repository path in the config is relative to the config file.
fn resolve_repo_url(cfg: &Loaded, url: &str) -> String {
    if url.contains("://") || url.contains('@') {
        return url.to_owned();
    }
    cfg.resolve(std::path::Path::new(url)).display().to_string()
}

fn read_repo(
    ctx: &Ctx<'_>,
    r: &RepoRef<'_>,
    bare: &std::path::Path,
    rev: Option<&str>,
    branch: Option<&str>,
    globs: &Globs,
    scan: &mut Scan,
) -> anyhow::Result<()> {
    let p = &ctx.cfg.config.stages.crawl;
    crawl::git::sync(r.url, bare, ctx.offline)?;
    let commit = crawl::git::resolve(bare, rev, branch)?;
    let checkout = crawl::git::files_at(bare, &commit, |path| globs.keep(path), p.max_file_bytes)?;
    ctx.progress.log(&format!(
        "crawl: {} at {}: {} files",
        r.url,
        &commit[..12.min(commit.len())],
        checkout.files.len()
    ));
    let prefix = r.name.map(|n| format!("{n}/")).unwrap_or_default();
    for (path, why) in checkout.skipped {
        scan.skipped.push((format!("{prefix}{path}"), why));
    }
    for f in checkout.files {
        let digest = Digest::of(&f.bytes);
        scan.files.push(ScannedFile {
            rel: format!("{prefix}{}", f.path),
            url: r.web.map(|w| format!("{w}/blob/{commit}/{}", f.path)),
            section: Some(r.section.to_owned()),
            repo: Some(r.web.unwrap_or(r.url).to_owned()),
            commit: Some(commit.clone()),
            bytes: f.bytes,
            digest,
        });
    }
    Ok(())
}

/// The portfolio's repository list is kept beside the clones, for offline runs.
fn write_portfolio_list(state: &std::path::Path, repos: &[crawl::github::Repo]) -> anyhow::Result<()> {
    std::fs::create_dir_all(state)?;
    let list: Vec<serde_json::Value> = repos
        .iter()
        .map(|r| {
            serde_json::json!({"name": r.name, "full_name": r.full_name, "clone_url": r.clone_url,
                "html_url": r.html_url, "default_branch": r.default_branch, "topics": r.topics, "archived": r.archived})
        })
        .collect();
    std::fs::write(state.join("repos.json"), serde_json::to_vec_pretty(&list)?)?;
    Ok(())
}

fn read_portfolio_list(state: &std::path::Path) -> anyhow::Result<Vec<crawl::github::Repo>> {
    let p = state.join("repos.json");
    let bytes = std::fs::read(&p).with_context(|| format!("{} is missing; run once without --offline", p.display()))?;
    Ok(serde_json::from_slice(&bytes)?)
}

impl Stage for Crawl {
    fn name(&self) -> &'static str {
        "crawl"
    }
    fn version(&self) -> u32 {
        3 // 3: symlinks, special and NUL files reported as skipped
    }
    fn params(&self, cfg: &Loaded) -> serde_json::Value {
        canonical(&cfg.config.stages.crawl)
    }
    fn external_inputs(&self, ctx: &Ctx<'_>) -> anyhow::Result<BTreeMap<String, Digest>> {
        self.scan_all(ctx)?;
        let guard = self.scans.lock().unwrap_or_else(|e| e.into_inner());
        let scans = guard.as_ref().expect("scanned above");
        Ok(scans.iter().map(|(name, s)| (format!("source:{name}"), s.snapshot(name))).collect())
    }
    fn run(&self, ctx: &Ctx<'_>, _inputs: &BTreeMap<String, Digest>) -> anyhow::Result<StageOutput> {
        self.scan_all(ctx)?;
        let guard = self.scans.lock().unwrap_or_else(|e| e.into_inner());
        let scans = guard.as_ref().expect("scanned above");
        let total = scans.values().map(|s| s.files.len()).sum();
        let bar = ctx.progress.stage("crawl", total);
        let mut out = StageOutput::default();
        let mut manifest = CrawlManifest { docs: Vec::new(), skipped: Vec::new(), fetched_at: BTreeMap::new() };
        for (name, scan) in scans {
            if let Some(t) = &scan.fetched_at {
                manifest.fetched_at.insert(name.clone(), t.clone());
            }
            for f in &scan.files {
                if ctx.cache.verify(f.digest)? && !ctx.force {
                    out.reused += 1;
                } else {
                    ctx.cache.put(&f.bytes)?;
                    failpoint::item_done("crawl");
                }
                out.objects.insert(f.digest);
                manifest.docs.push(DocEntry {
                    source: name.clone(),
                    rel: f.rel.clone(),
                    section: f.section.clone().unwrap_or_else(|| section_of(&f.rel)),
                    url: f.url.clone(),
                    digest: f.digest,
                    repo: f.repo.clone(),
                    commit: f.commit.clone(),
                });
                bar.inc();
            }
            for (rel, why) in &scan.skipped {
                out.notes.push(format!("skipped {name}/{rel}: {why}"));
                manifest.skipped.push((format!("{name}/{rel}"), why.clone()));
            }
        }
        bar.finish();
        out.items = manifest.docs.len();
        let d = ctx.cache.put_json(&manifest)?;
        out.objects.insert(d);
        out.output = Some(d);
        Ok(out)
    }
}

// -------------------------------------------------------------------- item memoisation

/// Runs `compute` for each item in parallel, memoised in the cache under
/// `item-<stage>/<key>`. Returns each item's output digest, in input order.
fn memoised<T: Sync>(
    ctx: &Ctx<'_>,
    stage: &str,
    items: &[T],
    key: impl Fn(&T) -> Digest + Sync,
    compute: impl Fn(&T) -> anyhow::Result<Vec<u8>> + Sync,
    out: &mut StageOutput,
) -> anyhow::Result<Vec<Digest>> {
    let ns = format!("item-{stage}");
    let bar = ctx.progress.stage(stage, items.len());
    let results: Vec<anyhow::Result<(Digest, Digest, bool)>> = items
        .par_iter()
        .map(|item| {
            let k = key(item);
            if !ctx.force
                && let Some(d) = ctx.cache.get_ref(&ns, k)?
            {
                bar.inc();
                return Ok((k, d, true));
            }
            let bytes = compute(item)?;
            let d = ctx.cache.put(&bytes)?;
            ctx.cache.set_ref(&ns, k, d)?;
            failpoint::item_done(stage);
            bar.inc();
            Ok((k, d, false))
        })
        .collect();
    bar.finish();
    let mut digests = Vec::with_capacity(items.len());
    for r in results {
        let (k, d, reused) = r?;
        out.refs.insert(Cache::ref_name(&ns, k));
        out.objects.insert(d);
        out.items += 1;
        out.reused += usize::from(reused);
        digests.push(d);
    }
    Ok(digests)
}

fn item_key(stage: &dyn Stage, params: &serde_json::Value, parts: &[(&str, &str)], content: Digest) -> Digest {
    let mut k = KeyBuilder::new("item");
    k.str("stage", stage.name()).part("version", &stage.version().to_le_bytes()).str("params", &params.to_string());
    for (label, v) in parts {
        k.str(label, v);
    }
    k.digest("content", content).finish()
}

fn load_json<T: for<'de> Deserialize<'de>>(cache: &Cache, d: Digest, what: &str) -> anyhow::Result<T> {
    let bytes = cache.get_required(d).with_context(|| format!("loading {what}"))?;
    serde_json::from_slice(&bytes).with_context(|| format!("decoding {what} {}", d.short()))
}

fn input(inputs: &BTreeMap<String, Digest>, name: &str) -> anyhow::Result<Digest> {
    inputs.get(name).copied().with_context(|| format!("missing input {name}"))
}

// -------------------------------------------------------------------- clean-gitbook

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

/// The validation report: what was converted per file, and what remains.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CleanReport {
    pub files: usize,
    pub totals: BTreeMap<String, u64>,
    pub residual_gitbook: usize,
    pub residual_html: usize,
    pub per_file: BTreeMap<String, FileReport>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct FileReport {
    pub counts: BTreeMap<String, u32>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub residual: Vec<Residual>,
}

#[derive(Debug)]
pub struct CleanGitbook;

impl Stage for CleanGitbook {
    fn name(&self) -> &'static str {
        "clean-gitbook"
    }
    fn version(&self) -> u32 {
        2 // 2: depth-limited HTML; nested tables are text in their cell
    }
    fn params(&self, cfg: &Loaded) -> serde_json::Value {
        canonical(&cfg.config.stages.clean_gitbook)
    }
    fn run(&self, ctx: &Ctx<'_>, inputs: &BTreeMap<String, Digest>) -> anyhow::Result<StageOutput> {
        let crawl: CrawlManifest = load_json(ctx.cache, input(inputs, "crawl")?, "crawl manifest")?;
        let params_json = self.params(ctx.cfg);
        let params: &CleanParams = &ctx.cfg.config.stages.clean_gitbook;
        let mut out = StageOutput::default();
        let digests = memoised(
            ctx,
            self.name(),
            &crawl.docs,
            |doc| {
                let markdown = if is_markdown(&doc.rel) { "yes" } else { "no" };
                item_key(self, &params_json, &[("markdown", markdown)], doc.digest)
            },
            |doc| {
                let bytes = ctx.cache.get_required(doc.digest)?;
                let text = String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", doc.path()))?;
                let cleaned = if is_markdown(&doc.rel) {
                    clean(&text, params)
                } else {
                    Cleaned { text, ..Cleaned::default() } // code is mirrored verbatim
                };
                Ok(serde_json::to_vec(&cleaned)?)
            },
            &mut out,
        )?;
        let mut report = CleanReport { files: crawl.docs.len(), ..CleanReport::default() };
        let mut docs = Vec::with_capacity(crawl.docs.len());
        for (doc, d) in crawl.docs.into_iter().zip(digests) {
            let c: Cleaned = load_json(ctx.cache, d, "cleaned document")?;
            for (k, v) in &c.counts {
                *report.totals.entry(k.clone()).or_default() += u64::from(*v);
            }
            report.residual_gitbook += c.residual.iter().filter(|r| r.kind == "gitbook").count();
            report.residual_html += c.residual.iter().filter(|r| r.kind == "html").count();
            report.per_file.insert(doc.path(), FileReport { counts: c.counts, residual: c.residual });
            docs.push(CleanDoc { doc, clean: d });
        }
        let deep: Vec<&String> = report
            .per_file
            .iter()
            .filter(|(_, f)| f.counts.contains_key(crate::clean::TOO_DEEP))
            .map(|(p, _)| p)
            .collect();
        if !deep.is_empty() {
            out.notes.push(format!(
                "{} pages hold HTML nested too deep to convert, kept as plain text: {}",
                deep.len(),
                deep.iter().take(5).map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        if report.residual_gitbook > 0 {
            out.notes
                .push(format!("{} GitBook tags left unconverted (see clean-report.json)", report.residual_gitbook));
        }
        let report_digest = ctx.cache.put_json(&report)?;
        out.objects.insert(report_digest);
        let manifest = ctx.cache.put_json(&CleanManifest { docs, report: report_digest })?;
        out.objects.insert(manifest);
        out.output = Some(manifest);
        Ok(out)
    }
}

// ---------------------------------------------------------------------------- chunk

#[derive(Debug, Serialize, Deserialize)]
pub struct ChunkManifest {
    /// chunks.parquet
    pub chunks: Digest,
    pub chunk_count: usize,
    pub doc_count: usize,
    #[serde(default)]
    pub license_lines_dropped: u64,
}

#[derive(Debug)]
pub struct Chunk;

/// A stable id: blake3(source, path, heading path, part), 128 bits in hex.
pub fn chunk_id(source: &str, path: &str, heading_path: &[String], part: u32) -> String {
    let mut k = KeyBuilder::new("chunk-id");
    k.str("source", source).str("path", path);
    for h in heading_path {
        k.str("heading", h);
    }
    k.part("part", &part.to_le_bytes());
    k.finish().to_hex()[..32].to_owned()
}

/// The chunks of one document, and the lines it dropped (a licence header).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct DocChunks {
    pub chunks: Vec<ChunkRecord>,
    pub license_lines: u32,
}

/// Chunks of one cleaned document, without the cross-document fields (cluster_tags,
/// cross-links, repo, commit).
pub fn chunk_document(doc: &DocEntry, cleaned: &Cleaned, params: &ChunkParams) -> Vec<ChunkRecord> {
    chunk_document_full(doc, cleaned, params).chunks
}

pub fn chunk_document_full(doc: &DocEntry, cleaned: &Cleaned, params: &ChunkParams) -> DocChunks {
    let file = doc.rel.rsplit('/').next().unwrap_or(&doc.rel);
    let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
    let markdown = is_markdown(&doc.rel);
    let language = language_of(&doc.rel);
    let path = doc.path();
    let record = |c: DocChunk, i: usize, title: &str| ChunkRecord {
        chunk_id: chunk_id(&doc.source, &path, &c.heading_path, c.part),
        kind: if markdown { "docs" } else { "code" }.to_owned(),
        language: language.map(str::to_owned),
        source: doc.source.clone(),
        section: doc.section.clone(),
        path: path.clone(),
        url: doc.url.clone(),
        repo: None, // set with cluster_tags, after the memo
        commit: None,
        title: title.to_owned(),
        description: cleaned.description.clone(),
        heading_path: c.heading_path,
        ordinal: i as u32,
        text: c.text,
        overlap_chars: c.overlap_chars,
        is_code: c.is_code,
        cluster_tags: String::new(),
        start_line: c.start_line,
        end_line: c.end_line,
        symbol: None,
        symbol_kind: None,
        signature: None,
        symbols: Vec::new(),
        mentions: Vec::new(),
        mentioned_in: Vec::new(),
    };
    if markdown {
        let title = cleaned.title.clone().or_else(|| first_h1(&cleaned.text)).unwrap_or_else(|| stem.to_owned());
        let chunks =
            chunk_markdown(&cleaned.text, params).into_iter().enumerate().map(|(i, c)| record(c, i, &title)).collect();
        return DocChunks { chunks, license_lines: 0 };
    }
    let code = language.and_then(|l| crate::code::chunk_code(&cleaned.text, l, &doc.rel, params));
    let Some(code) = code else {
        let chunks =
            chunk_lines(&cleaned.text, params).into_iter().enumerate().map(|(i, c)| record(c, i, file)).collect();
        return DocChunks { chunks, license_lines: 0 };
    };
    let license_lines = code.dropped_lines("license");
    let mut seen: BTreeMap<Vec<String>, u32> = BTreeMap::new();
    let chunks = code
        .chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let heading_path: Vec<String> = c.symbol.iter().cloned().collect();
            let part = seen.entry(heading_path.clone()).or_default();
            let dc = DocChunk {
                heading_path,
                part: *part,
                text: c.text,
                overlap_chars: c.overlap,
                is_code: true,
                start_line: c.start_line,
                end_line: c.end_line,
            };
            *part += 1;
            let mut r = record(dc, i, file);
            r.symbol = c.symbol;
            r.symbol_kind = Some(c.symbol_kind);
            r.signature = c.signature;
            r.symbols = c.symbols;
            r
        })
        .collect();
    DocChunks { chunks, license_lines }
}

/// At most this many links are kept per chunk, in each direction.
const MAX_LINKS: usize = 32;

/// Docs ↔ code cross-links: a docs chunk that mentions, in inline code or a code
/// block, an identifier defined in the corpus (exact match on the qualified name or
/// the bare last segment, 3+ characters) records the symbol; the code chunk records
/// the docs chunk.
pub fn cross_link(all: &mut [ChunkRecord]) {
    let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, c) in all.iter().enumerate().filter(|(_, c)| c.kind == "code") {
        for sym in c.symbol.iter().chain(&c.symbols) {
            if sym.starts_with("impl ") {
                continue;
            }
            by_name.entry(sym.clone()).or_default().push(i);
            let bare = sym.rsplit(['.', ':']).next().unwrap_or(sym).trim_end_matches('!');
            if bare.len() >= 3 && bare != sym {
                by_name.entry(bare.to_owned()).or_default().push(i);
            }
        }
    }
    if by_name.is_empty() {
        return;
    }
    let mut back: Vec<(usize, String)> = Vec::new();
    for doc in all.iter_mut().filter(|c| c.kind == "docs") {
        let mut mentions: Vec<String> = Vec::new();
        // Its own text: the overlap belongs to the previous chunk.
        for (path, last) in code_identifiers(&doc.text[doc.overlap_chars as usize..]) {
            // The qualified path if it is defined, else its bare last segment.
            let Some((name, hits)) = [path, last].into_iter().find_map(|n| by_name.get(&n).map(|h| (n, h))) else {
                continue;
            };
            if mentions.len() < MAX_LINKS && !mentions.contains(&name) {
                mentions.push(name);
            }
            back.extend(hits.iter().map(|&h| (h, doc.chunk_id.clone())));
        }
        doc.mentions = mentions;
    }
    for (h, id) in back {
        let m = &mut all[h].mentioned_in;
        if !m.contains(&id) && m.len() < MAX_LINKS {
            m.push(id);
        }
    }
}

/// Identifiers written as code in markdown (inline code spans and fences), as
/// `(path, last segment)`: `Foo::bar()` gives (`Foo::bar`, `bar`).
fn code_identifiers(text: &str) -> BTreeSet<(String, String)> {
    let mut code = String::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim_start_matches([' ', '>']);
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            code.push_str(line);
            code.push('\n');
            continue;
        }
        for (a, b) in crate::clean::code_spans(line) {
            code.push_str(&line[a..b]);
            code.push('\n');
        }
    }
    let mut out = BTreeSet::new();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let b = code.as_str();
    let mut i = 0;
    while i < b.len() {
        let c = b[i..].chars().next().expect("in bounds");
        if c.is_alphabetic() || c == '_' {
            let mut j = i;
            // an identifier path: ident((::|.)ident)*
            loop {
                while j < b.len() && b[j..].starts_with(is_ident) {
                    j += b[j..].chars().next().map_or(1, char::len_utf8);
                }
                let rest = &b[j..];
                let sep = if rest.starts_with("::") {
                    2
                } else if rest.starts_with('.') {
                    1
                } else {
                    0
                };
                if sep > 0 && rest[sep..].starts_with(|c: char| c.is_alphabetic() || c == '_') {
                    j += sep;
                } else {
                    break;
                }
            }
            let path = &b[i..j];
            let last = path.rsplit(['.', ':']).next().unwrap_or(path);
            out.insert((path.to_owned(), last.to_owned()));
            i = j;
        } else {
            i += c.len_utf8();
        }
    }
    out
}

/// `cluster_tags` of each document: the stems of the other documents in its folder.
pub fn cluster_tags(paths: &[String]) -> BTreeMap<String, String> {
    let mut by_dir: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let split = |p: &'_ str| -> (String, String) {
        let (dir, file) = p.rsplit_once('/').unwrap_or(("", p));
        let stem = file.rsplit_once('.').map_or(file, |(s, _)| s).to_lowercase();
        (dir.to_owned(), stem)
    };
    for p in paths {
        let (_, stem) = split(p);
        let dir = p.rsplit_once('/').map_or("", |(d, _)| d);
        by_dir.entry(dir).or_default().insert(stem);
    }
    paths
        .iter()
        .map(|p| {
            let (dir, stem) = split(p);
            let tags: Vec<&str> = by_dir
                .get(dir.as_str())
                .map(|s| s.iter().filter(|t| **t != stem).map(String::as_str).collect())
                .unwrap_or_default();
            (p.clone(), tags.join(" "))
        })
        .collect()
}

impl Stage for Chunk {
    fn name(&self) -> &'static str {
        "chunk"
    }
    fn version(&self) -> u32 {
        3 // 3: containers nested past MAX_SCOPE_DEPTH are chunked as lines
        // 2: per-document items carry licence counts; code chunks
    }
    fn params(&self, cfg: &Loaded) -> serde_json::Value {
        canonical(&cfg.config.stages.chunk)
    }
    fn run(&self, ctx: &Ctx<'_>, inputs: &BTreeMap<String, Digest>) -> anyhow::Result<StageOutput> {
        let cleaned: CleanManifest = load_json(ctx.cache, input(inputs, "clean-gitbook")?, "clean manifest")?;
        let params_json = self.params(ctx.cfg);
        let params = &ctx.cfg.config.stages.chunk;
        let mut out = StageOutput::default();
        let digests = memoised(
            ctx,
            self.name(),
            &cleaned.docs,
            |d| item_key(self, &params_json, &[("source", &d.doc.source), ("rel", &d.doc.rel)], d.clean),
            |d| {
                let c: Cleaned = load_json(ctx.cache, d.clean, "cleaned document")?;
                Ok(serde_json::to_vec(&chunk_document_full(&d.doc, &c, params))?)
            },
            &mut out,
        )?;
        let paths: Vec<String> = cleaned.docs.iter().map(|d| d.doc.path()).collect();
        let tags = cluster_tags(&paths);
        let mut all = Vec::new();
        let (mut license_lines, mut license_files) = (0u64, 0usize);
        for (doc, d) in cleaned.docs.iter().zip(digests) {
            let DocChunks { chunks: mut records, license_lines: dropped } = load_json(ctx.cache, d, "document chunks")?;
            if dropped > 0 {
                license_lines += u64::from(dropped);
                license_files += 1;
            }
            let t = tags.get(&doc.doc.path()).cloned().unwrap_or_default();
            for r in &mut records {
                r.cluster_tags.clone_from(&t);
                // Not part of the per-document memo: a new commit re-chunks only changed files.
                r.repo.clone_from(&doc.doc.repo);
                r.commit.clone_from(&doc.doc.commit);
                r.url.clone_from(&doc.doc.url);
            }
            all.extend(records);
        }
        if license_lines > 0 {
            out.notes.push(format!("dropped {license_lines} licence-header lines in {license_files} files"));
        }
        cross_link(&mut all);
        let mut seen = BTreeSet::new();
        for c in &all {
            if !seen.insert(c.chunk_id.as_str()) {
                bail!("duplicate chunk id {} in {}", c.chunk_id, c.path);
            }
        }
        let parquet = atlas_runtime::chunks::to_parquet(&all).context("writing chunks.parquet")?;
        let pq = ctx.cache.put(&parquet)?;
        out.objects.insert(pq);
        let manifest = ctx.cache.put_json(&ChunkManifest {
            chunks: pq,
            chunk_count: all.len(),
            doc_count: cleaned.docs.len(),
            license_lines_dropped: license_lines,
        })?;
        out.objects.insert(manifest);
        out.output = Some(manifest);
        Ok(out)
    }
}
