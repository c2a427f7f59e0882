//! crawl: the source stage. It reads every source of the config into the cache and
//! publishes one [`CrawlManifest`] of documents:
//!
//! - `local`: a folder walked with the `ignore` crate ([`local`]);
//! - `llms-txt`: a site fetched politely through its llms.txt into a mirror that
//!   later runs update with conditional GETs ([`site`], with [`llms`], [`fetch`],
//!   [`robots`], [`html`]);
//! - `git` and `github`: repositories read at a commit ([`repo`], [`git`], [`github`]);
//! - `package`: a published package at an exact version, from its registry ([`package`]);
//! - `tree`: a project's working tree as git would show it ([`tree`]).
//!
//! Its external input is a snapshot digest of each source, so an unchanged source makes
//! the stage (and everything after it) a cache hit.

pub mod fetch;
pub mod git;
pub mod github;
pub mod llms;
pub mod local;
pub mod package;
pub mod repo;
pub mod robots;
pub mod site;
pub mod tree;

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use atlas_cache::Digest;
use serde::{Deserialize, Serialize};

use crate::artifacts::{CrawlManifest, DocEntry, section_of};
use crate::runner::{Ctx, ParamError, SourceConfig, Stage, StageOutput, check_range};
use local::{Globs, Scan, scan_local};

/// Params of the crawl stage (network sources use all of them; local sources only
/// `max_file_bytes`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CrawlParams {
    /// Local files larger than this are skipped and reported.
    pub max_file_bytes: u64,
    pub max_concurrent: usize,
    /// A random pause in this range (milliseconds) before each request.
    pub delay_ms: [u64; 2],
    /// Overrides the default `atlas/<version> (+<contact_url>)`.
    pub user_agent: Option<String>,
    pub contact_url: String,
    pub connect_timeout_s: f64,
    /// Longest silence while reading a response.
    pub read_timeout_s: f64,
    /// Longest a whole request may take.
    pub total_timeout_s: f64,
    pub max_body_bytes: usize,
    pub max_redirects: usize,
    pub max_retries: u32,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// Retry-After values above this are capped.
    pub retry_after_cap_s: f64,
    /// The crawl fails the run when more than this share of pages failed.
    pub max_error_ratio: f64,
}

impl Default for CrawlParams {
    fn default() -> Self {
        CrawlParams {
            max_file_bytes: 4 * 1024 * 1024,
            max_concurrent: 5,
            delay_ms: [300, 1500],
            user_agent: None,
            contact_url: "https://github.com/atlas-mcp/atlas".to_owned(),
            connect_timeout_s: 10.0,
            read_timeout_s: 30.0,
            total_timeout_s: 120.0,
            max_body_bytes: 10 * 1024 * 1024,
            max_redirects: 5,
            max_retries: 3,
            backoff_base_ms: 500,
            backoff_max_ms: 30_000,
            retry_after_cap_s: 60.0,
            max_error_ratio: 0.05,
        }
    }
}

/// The source stage. Its external input is a snapshot digest of each source, so an
/// unchanged source tree makes the stage (and everything after it) a cache hit.
#[derive(Debug, Default)]
pub struct Crawl;

impl Crawl {
    /// Every source brought up to date and read: what the snapshot digests are of,
    /// and what `run` stores.
    fn scan_all(p: &CrawlParams, ctx: &Ctx<'_>) -> anyhow::Result<BTreeMap<String, Scan>> {
        let cfg = ctx.cfg;
        let mut scans = BTreeMap::new();
        for (name, src) in &cfg.config.sources {
            match src {
                SourceConfig::Local { path, include, exclude, public_urls } => {
                    let root = cfg.resolve(path);
                    let mut scan = scan_local(&root, include, exclude, p.max_file_bytes)
                        .with_context(|| format!("source {name}"))?;
                    if let Some(index) = public_urls {
                        let n = site::public_urls(&root.join(index), &mut scan)
                            .with_context(|| format!("source {name}: public_urls"))?;
                        ctx.progress.log(&format!(
                            "crawl: {name}: {} cited by their public URL",
                            atlas_runtime::words::count(n, "page")
                        ));
                    }
                    scans.insert(name.clone(), scan);
                }
                SourceConfig::Tree { path, exclude, include_secrets, only } => {
                    let root = cfg.resolve(path);
                    let scan = tree::scan_tree(&root, exclude, include_secrets, only, p.max_file_bytes)
                        .with_context(|| format!("source {name}"))?;
                    scans.insert(name.clone(), scan);
                }
                SourceConfig::LlmsTxt { url, sections, max_pages, allow_hosts } => {
                    let src = site::LlmsSource { name, url, sections, max_pages: *max_pages, allow_hosts };
                    scans.insert(name.clone(), site::scan(ctx, p, &src)?);
                }
                SourceConfig::Git { url, rev, branch, include, exclude, .. } => {
                    let globs = Globs::new(include, exclude)?;
                    let scan = repo::scan_git(ctx, p, name, url, rev.as_deref(), branch.as_deref(), &globs)?;
                    scans.insert(name.clone(), scan);
                }
                SourceConfig::Github { owner, topic, api_url, include, exclude } => {
                    let globs = Globs::new(include, exclude)?;
                    scans.insert(name.clone(), repo::scan_github(ctx, p, name, owner, topic, api_url, &globs)?);
                }
                SourceConfig::Package { spec, checksums, index, settings_dir, include, exclude } => {
                    let spec: crate::runner::PackageSpec = spec.parse()?;
                    let locked = checksums
                        .iter()
                        .map(|c| c.parse())
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(anyhow::Error::msg)?;
                    let settings = settings_dir.as_deref().map_or_else(|| cfg.dir.clone(), |d| cfg.resolve(d));
                    let src = package::Package {
                        name,
                        spec: &spec,
                        locked: &locked,
                        index: index.as_deref(),
                        settings: &settings,
                    };
                    let scan = package::scan_package(ctx, p, &src, include, exclude)
                        .with_context(|| format!("source {name}"))?;
                    scans.insert(name.clone(), scan);
                }
            }
        }
        for (name, scan) in &scans {
            if scan.files.is_empty() {
                bail!("{}", empty_source(name, &cfg.config.sources[name], scan));
            }
        }
        Ok(scans)
    }
}

impl Stage for Crawl {
    const NAME: &'static str = "crawl";
    /// 3: symlinks, special and NUL files reported as skipped.
    const VERSION: u32 = 3;
    const DEPS: &'static [&'static str] = &[];
    type Params = CrawlParams;
    /// The scans `external_inputs` made (their snapshot digests are the inputs).
    type Prepared = BTreeMap<String, Scan>;

    fn check(p: &CrawlParams) -> Result<(), ParamError> {
        let range = |key: &str, v: f64, lo: f64, hi: f64| check_range(Self::NAME, key, v, lo, hi);
        let (n, u) = (|v: usize| v as f64, |v: u64| v as f64);
        range("max_file_bytes", u(p.max_file_bytes), 1.0, 1024.0 * 1024.0 * 1024.0)?;
        range("max_concurrent", n(p.max_concurrent), 1.0, 64.0)?;
        range("delay_ms", u(p.delay_ms[0]), 0.0, 600_000.0)?;
        range("delay_ms", u(p.delay_ms[1]), u(p.delay_ms[0]), 600_000.0)?;
        range("connect_timeout_s", p.connect_timeout_s, 0.001, 3600.0)?;
        range("read_timeout_s", p.read_timeout_s, 0.001, 3600.0)?;
        range("total_timeout_s", p.total_timeout_s, 0.001, 86_400.0)?;
        range("max_body_bytes", n(p.max_body_bytes), 1.0, 1024.0 * 1024.0 * 1024.0)?;
        range("max_redirects", n(p.max_redirects), 0.0, 20.0)?;
        range("max_retries", f64::from(p.max_retries), 0.0, 20.0)?;
        range("backoff_base_ms", u(p.backoff_base_ms), 0.0, 600_000.0)?;
        range("backoff_max_ms", u(p.backoff_max_ms), 0.0, 3_600_000.0)?;
        range("retry_after_cap_s", p.retry_after_cap_s, 0.0, 3600.0)?;
        range("max_error_ratio", p.max_error_ratio, 0.0, 1.0)
    }
    fn external_inputs(
        &self,
        p: &CrawlParams,
        ctx: &Ctx<'_>,
    ) -> anyhow::Result<(BTreeMap<String, Digest>, Self::Prepared)> {
        let scans = Self::scan_all(p, ctx)?;
        let inputs = scans.iter().map(|(name, s)| (format!("source:{name}"), s.snapshot(name))).collect();
        Ok((inputs, scans))
    }
    fn run(&self, _p: &CrawlParams, ctx: &Ctx<'_>, scans: Self::Prepared) -> anyhow::Result<StageOutput> {
        let total = scans.values().map(|s| s.files.len()).sum();
        let bar = ctx.progress.stage("crawl", total);
        let mut out = StageOutput::default();
        let mut manifest = CrawlManifest {
            docs: Vec::new(),
            skipped: Vec::new(),
            fetched_at: BTreeMap::new(),
            summaries: BTreeMap::new(),
        };
        for (name, scan) in &scans {
            if let Some(t) = &scan.fetched_at {
                manifest.fetched_at.insert(name.clone(), t.clone());
            }
            if let Some(s) = &scan.summary {
                manifest.summaries.insert(name.clone(), s.clone());
            }
            for f in &scan.files {
                if ctx.cache.verify(f.digest)? && !ctx.force {
                    out.reused += 1;
                } else {
                    ctx.cache.put(&f.bytes)?;
                    ctx.item_done();
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

/// Why a source yielded no documents, and what to do, on one line.
fn empty_source(name: &str, src: &SourceConfig, scan: &Scan) -> String {
    let mut why = format!("source {name} ({}) yielded no documents", src.kind());
    if let Some((rel, reason)) = scan.skipped.first() {
        why.push_str(&format!(
            "; {} {} skipped (e.g. {rel}: {reason})",
            atlas_runtime::words::count(scan.skipped.len(), "file"),
            atlas_runtime::words::agree(scan.skipped.len(), "was", "were")
        ));
    }
    match src {
        SourceConfig::Local { path, include, .. } => {
            why.push_str(&format!("; check that {} holds files matching {include:?}", path.display()));
        }
        SourceConfig::Git { include, .. } | SourceConfig::Github { include, .. } => {
            why.push_str(&format!("; check the repositories and the include globs {include:?}"));
        }
        SourceConfig::LlmsTxt { url, .. } => why.push_str(&format!("; check {url}")),
        SourceConfig::Tree { path, .. } => {
            why.push_str(&format!("; check that {} holds text files git does not ignore", path.display()));
        }
        SourceConfig::Package { spec, include, .. } => {
            why.push_str(&format!("; check that {spec} holds files matching {include:?}"));
        }
    }
    why
}
