//! The network side of the crawl stage: an llms.txt source fetched politely into a
//! mirror (`markdown/<path>.md` plus `crawl_meta.json`) that later runs update with
//! conditional GETs. The crawl stage then reads the mirror like a local folder.
//!
//! The mirror lives in the cache folder (`sources/<name>/`) and is guarded by the
//! cache lock. Each page's result is appended to `journal.jsonl` (fsynced) as it
//! lands, so a killed crawl resumes without refetching; the journal is folded into
//! `crawl_meta.json` when the crawl completes.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use atlas_cache::Digest;
use tokio::sync::Semaphore;
use url::Url;

use super::CrawlParams;
use super::fetch::{Fetcher, Outcome};
use super::llms;
use super::local::{Scan, ScannedFile};
use super::robots::{self, Robots};
use crate::artifacts::section_of;
use crate::runner::{Ctx, Progress};
use crate::text::page as html;

mod mirror;

pub use mirror::{CrawlMeta, MirroredPage, PageMeta, PageStatus, SectionCounts, state_dir};
use mirror::{JournalEntry, mirrored, now_rfc3339, reconcile};

/// An llms.txt source brought up to date in its mirror (see [`crawl_llms`]), read like
/// a local folder.
pub fn scan(ctx: &Ctx<'_>, p: &CrawlParams, src: &LlmsSource<'_>) -> anyhow::Result<Scan> {
    let state = state_dir(ctx.cache.root(), src.name);
    let (pages, notes) = crawl_llms(src, p, &state, ctx.offline, ctx.progress)?;
    for n in notes {
        ctx.progress.log(&format!("crawl: {n}"));
    }
    let fetched_at = pages.iter().filter_map(|p| p.fetched_at.clone()).max();
    let mut scan = Scan { fetched_at, ..Scan::default() };
    for page in pages {
        let bytes = std::fs::read(&page.path).with_context(|| format!("reading {}", page.path.display()))?;
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
    Ok(scan)
}

/// The largest llms.txt read from a local folder.
const MAX_LOCAL_INDEX_BYTES: u64 = 4 << 20;

/// Gives each file of a local copy of a site the public URL its llms.txt (`index`)
/// lists it under (a page's `.md` export → its page URL); the number of files given one.
pub fn public_urls(index: &Path, scan: &mut Scan) -> anyhow::Result<usize> {
    let bytes = atlas_runtime::safe_path::read_capped(index, MAX_LOCAL_INDEX_BYTES)
        .with_context(|| format!("reading {}", index.display()))?;
    let text = String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8 text", index.display()))?;
    // The site's own llms.txt URL: beside the pages it lists (the first absolute link's
    // folder at the site's root).
    let first = text
        .split("](")
        .skip(1)
        .find_map(|rest| {
            Url::parse(rest.split(')').next().unwrap_or("")).ok().filter(|u| u.scheme().starts_with("http"))
        })
        .with_context(|| format!("{} lists no absolute http(s) link", index.display()))?;
    let llms_url = first.join("/llms.txt")?;
    let parsed = llms::parse(&text, &llms_url)?;
    let by_rel: std::collections::HashMap<&str, String> =
        parsed.entries.iter().map(|e| (e.rel.as_str(), page_url(&e.url))).collect();
    let mut n = 0;
    for f in &mut scan.files {
        if let Some(u) = by_rel.get(f.rel.as_str()) {
            f.url = Some(u.clone());
            n += 1;
        }
    }
    Ok(n)
}

/// The human page URL of a `.md` export: GitBook serves `/a/b` as `/a/b.md`.
fn page_url(url: &Url) -> String {
    let s = url.to_string();
    s.strip_suffix(".md").map(str::to_owned).unwrap_or(s)
}

#[derive(Debug)]
pub struct LlmsSource<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub sections: &'a [String],
    pub max_pages: Option<usize>,
    /// Other hosts whose listed pages may be fetched.
    pub allow_hosts: &'a [String],
}

/// Crawls (or, offline, reuses) the mirror of one llms.txt source.
pub fn crawl_llms(
    src: &LlmsSource<'_>,
    params: &CrawlParams,
    state: &Path,
    offline: bool,
    progress: &Progress,
) -> anyhow::Result<(Vec<MirroredPage>, Vec<String>)> {
    let meta_path = state.join("crawl_meta.json");
    let previous: Option<CrawlMeta> = match std::fs::read(&meta_path) {
        Ok(b) => Some(serde_json::from_slice(&b).with_context(|| format!("reading {}", meta_path.display()))?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", meta_path.display())),
    };
    if offline {
        let Some(meta) = previous else {
            bail!(
                "source `{}` has no mirror yet ({} is missing); run once without --offline",
                src.name,
                meta_path.display()
            );
        };
        return Ok((mirrored(&meta, state), vec!["offline: using the last mirror".to_owned()]));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let meta = rt.block_on(crawl_async(src, params, state, previous, progress))?;
    let mut notes = Vec::new();
    for (section, c) in &meta.sections {
        notes.push(format!(
            "{}/{section}: {} found, {} fetched, {} not modified, {} skipped, {} removed, {} errors, {} bytes",
            src.name, c.found, c.fetched, c.not_modified, c.skipped, c.removed, c.errors, c.bytes
        ));
    }
    for (url, why) in &meta.failures {
        notes.push(format!("failed {url}: {why}"));
    }
    // Links to other hosts are out of the source's scope (allow_hosts is the maintainer's
    // word on it), so they are not failures and do not count towards max_error_ratio;
    // the run says how many there were and how to take them (docs/pipeline.md).
    if !meta.offsite.is_empty() {
        let listed = meta.pages.len() + meta.offsite.len();
        let hosts: std::collections::BTreeSet<String> =
            meta.offsite.iter().filter_map(|(_, u)| Url::parse(u).ok()?.host_str().map(str::to_owned)).collect();
        notes.push(format!(
            "{} of {listed} listed pages are on other hosts and were not crawled ({}); add them to the source's \
             allow_hosts to crawl them",
            meta.offsite.len(),
            hosts.into_iter().take(5).collect::<Vec<_>>().join(", ")
        ));
    }
    for (title, url) in &meta.offsite {
        notes.push(format!("not fetched (other host): {title} <{url}>"));
    }
    for (title, url) in &meta.duplicates {
        notes.push(format!("listed twice: {title} <{url}>"));
    }
    for (title, url, why) in &meta.refused {
        notes.push(format!("not fetched ({why}): {title} <{url}>"));
    }
    Ok((mirrored(&meta, state), notes))
}

struct Shared {
    meta: CrawlMeta,
    journal: std::fs::File,
}

/// The crawl in three phases: [`plan`] (the index, its filters, robots.txt, what an
/// interrupted crawl's journal already holds), [`fetch_pages`] (every other page,
/// politely in parallel, each journaled as it lands) and [`reconcile`] (pages that
/// left llms.txt, the counts, `crawl_meta.json`).
async fn crawl_async(
    src: &LlmsSource<'_>,
    params: &CrawlParams,
    state: &Path,
    previous: Option<CrawlMeta>,
    progress: &Progress,
) -> anyhow::Result<CrawlMeta> {
    let fetcher = Fetcher::new(params)?;
    let plan = plan(src, params, &fetcher, state).await?;
    let previous = previous.unwrap_or_default();
    let fetched = fetch_pages(src, params, fetcher, &plan, &previous, progress).await?;
    let meta = reconcile(fetched, &plan, &previous);
    write_atomic(&state.join("crawl_meta.json"), &serde_json::to_vec_pretty(&meta)?)?;
    let _ = std::fs::remove_file(&plan.journal_path);
    check_yield(src, &meta, params.max_error_ratio)?;
    Ok(meta)
}

/// What a crawl is to do, before any page is fetched.
struct Plan {
    started_at: String,
    index: llms::Index,
    /// The entries to crawl (the index within the source's sections and page cap).
    entries: Vec<llms::Entry>,
    /// robots.txt per origin.
    robots: BTreeMap<String, Robots>,
    /// The mirror folder.
    markdown: PathBuf,
    journal_path: PathBuf,
    /// Pages an interrupted crawl already landed (from its journal).
    resumed: BTreeMap<String, PageMeta>,
}

/// Plan: the index fetched and parsed, the filters applied, robots.txt once per host,
/// the journal of an interrupted crawl read back.
async fn plan(src: &LlmsSource<'_>, params: &CrawlParams, fetcher: &Fetcher, state: &Path) -> anyhow::Result<Plan> {
    let llms_url = Url::parse(src.url).with_context(|| format!("source {}: bad url {}", src.name, src.url))?;
    let started_at = now_rfc3339();
    let mut notes = Vec::new();
    let index_text = match fetcher.get(&llms_url, None, None, params.max_body_bytes, &mut notes).await {
        Outcome::Fetched { body, .. } => String::from_utf8_lossy(&body).into_owned(),
        Outcome::Gone(code) => bail!("source {}: {} answered HTTP {code}; check the url", src.name, src.url),
        Outcome::NotModified => bail!("source {}: {} answered 304 to an unconditional GET", src.name, src.url),
        Outcome::Denied(code) => bail!(
            "source {}: {} answered HTTP {code}: it wants credentials, which an llms-txt source does not send; \
             use a public URL or a local copy",
            src.name,
            src.url
        ),
        Outcome::Failed(why) => bail!("source {}: cannot fetch {}: {why}", src.name, src.url),
    };
    let index = llms::parse_with(&index_text, &llms_url, src.allow_hosts)
        .map_err(|e| anyhow::anyhow!("source {}: {}: {e}", src.name, src.url))?;
    let entries = filtered(src, &index)?;

    // robots.txt, once per run and host.
    let mut robots = BTreeMap::new();
    for url in std::iter::once(&llms_url).chain(entries.iter().map(|e| &e.url)) {
        if let std::collections::btree_map::Entry::Vacant(slot) = robots.entry(url.origin().ascii_serialization()) {
            slot.insert(fetch_robots(fetcher, url, params).await);
        }
    }

    let markdown = state.join("markdown");
    std::fs::create_dir_all(&markdown).with_context(|| format!("creating {}", markdown.display()))?;
    let journal_path = state.join("journal.jsonl");
    let mut resumed: BTreeMap<String, PageMeta> = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(&journal_path) {
        for line in text.lines() {
            // A torn last line from a kill is just skipped.
            if let Ok(e) = serde_json::from_str::<JournalEntry>(line) {
                resumed.insert(e.rel, e.page);
            }
        }
    }
    Ok(Plan { started_at, index, entries, robots, markdown, journal_path, resumed })
}

/// The index's entries within the source's `sections` (an unknown one is an error
/// that lists those there are) and `max_pages`.
fn filtered(src: &LlmsSource<'_>, index: &llms::Index) -> anyhow::Result<Vec<llms::Entry>> {
    let mut entries = index.entries.clone();
    if !src.sections.is_empty() {
        let available: std::collections::BTreeSet<String> =
            entries.iter().map(llms::section_of).chain(entries.iter().map(|e| section_of(&e.rel))).collect();
        for want in src.sections {
            if !available.contains(&llms::section_slug(want)) && !available.contains(want) {
                bail!(
                    "source {}: unknown section {want:?}; available: {}",
                    src.name,
                    available.iter().cloned().collect::<Vec<_>>().join(", ")
                );
            }
        }
        entries.retain(|e| {
            src.sections.iter().any(|w| {
                let w_slug = llms::section_slug(w);
                llms::section_of(e) == w_slug || section_of(&e.rel) == *w || section_of(&e.rel) == w_slug
            })
        });
    }
    if let Some(max) = src.max_pages {
        entries.truncate(max);
    }
    Ok(entries)
}

/// Fetch: every planned page the journal does not hold, at most `max_concurrent` at
/// once, each appended to the journal (fsynced) as it lands; failures are not
/// journaled, so a resume retries them.
async fn fetch_pages(
    src: &LlmsSource<'_>,
    params: &CrawlParams,
    fetcher: Fetcher,
    plan: &Plan,
    previous: &CrawlMeta,
    progress: &Progress,
) -> anyhow::Result<CrawlMeta> {
    let journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&plan.journal_path)
        .with_context(|| format!("opening {}", plan.journal_path.display()))?;
    let shared = Arc::new(Mutex::new(Shared {
        meta: CrawlMeta {
            source_url: src.url.to_owned(),
            started_at: plan.started_at.clone(),
            offsite: plan.index.offsite.clone(),
            duplicates: plan.index.duplicates.clone(),
            refused: plan.index.refused.clone(),
            ..CrawlMeta::default()
        },
        journal,
    }));
    let bar = Arc::new(progress.stage(&format!("crawl {}", src.name), plan.entries.len()));
    let sem = Arc::new(Semaphore::new(params.max_concurrent.max(1)));
    let fetcher = Arc::new(fetcher);
    let robots = Arc::new(plan.robots.clone());
    let mut tasks = tokio::task::JoinSet::new();
    for entry in plan.entries.clone() {
        let section = llms::section_of(&entry);
        if let Some(page) = plan.resumed.get(&entry.mirror) {
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            s.meta.pages.insert(entry.mirror.clone(), page.clone());
            bar.inc();
            continue;
        }
        let prev = previous.pages.get(&entry.mirror).cloned();
        let (sem, fetcher, robots, shared, bar) =
            (sem.clone(), fetcher.clone(), robots.clone(), shared.clone(), bar.clone());
        let (markdown, params) = (plan.markdown.clone(), params.clone());
        tasks.spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore is never closed");
            let host_robots = robots.get(&entry.url.origin().ascii_serialization()).unwrap_or(&Robots::AllowAll);
            let page = fetch_page(&entry, &section, prev, &fetcher, host_robots, &markdown, &params).await;
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            let line = serde_json::to_string(&JournalEntry { rel: entry.mirror.clone(), page: page.clone() })
                .expect("journal entries serialise");
            if page.status == PageStatus::Error {
                bar.error();
            } else {
                let _ = writeln!(s.journal, "{line}").and_then(|()| s.journal.sync_data());
            }
            s.meta.pages.insert(entry.mirror.clone(), page);
            bar.inc();
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("a crawl task panicked")?;
    }
    bar.finish();
    let shared = Arc::try_unwrap(shared).map_err(|_| anyhow::anyhow!("crawl tasks still hold the state"))?;
    Ok(shared.into_inner().unwrap_or_else(|e| e.into_inner()).meta)
}

/// Fails the run when the crawl mirrored nothing, or when more than `max_ratio` of
/// the listed pages failed or were skipped: one line that says why and what to do.
fn check_yield(src: &LlmsSource<'_>, meta: &CrawlMeta, max_ratio: f64) -> anyhow::Result<()> {
    let count = |status: PageStatus| meta.pages.values().filter(|p| p.status == status).count();
    let (errors, skipped) = (count(PageStatus::Error), count(PageStatus::Skipped));
    let held = meta.pages.values().filter(|p| p.digest.is_some() && p.status != PageStatus::Removed).count();
    let found = meta.pages.values().filter(|p| p.status != PageStatus::Removed).count();
    let first = |status: PageStatus| {
        meta.pages
            .values()
            .find(|p| p.status == status)
            .map(|p| format!(" (e.g. {}: {})", p.url, p.error.as_deref().unwrap_or("?")))
            .unwrap_or_default()
    };
    if held == 0 {
        let listed = found + meta.offsite.len() + meta.refused.len();
        let mut why = Vec::new();
        if !meta.offsite.is_empty() {
            let host = meta.offsite.iter().find_map(|(_, u)| Url::parse(u).ok()?.host_str().map(str::to_owned));
            why.push(format!(
                "{} on another host (add `allow_hosts: [{}]` to the source to crawl them)",
                meta.offsite.len(),
                host.unwrap_or_default()
            ));
        }
        if skipped > 0 {
            why.push(format!("{skipped} skipped{}", first(PageStatus::Skipped)));
        }
        if errors > 0 {
            why.push(format!("{errors} failed{}", first(PageStatus::Error)));
        }
        if !meta.refused.is_empty() {
            why.push(format!("{} refused for an unsafe path", meta.refused.len()));
        }
        if why.is_empty() {
            why.push("every listed page is gone upstream".to_owned());
        }
        bail!(
            "source {}: 0 of {listed} listed pages could be mirrored: {}; nothing to build from {}",
            src.name,
            why.join(", "),
            src.url
        );
    }
    let over = |n: usize| n as f64 / found.max(1) as f64 > max_ratio;
    if over(errors) {
        let list: Vec<String> = meta
            .pages
            .values()
            .filter(|p| p.status == PageStatus::Error)
            .map(|p| format!("{} ({})", p.url, p.error.as_deref().unwrap_or("?")))
            .collect();
        bail!(
            "source {}: {errors} of {found} pages failed, over max_error_ratio {max_ratio}: {}",
            src.name,
            list.join("; ")
        );
    }
    if over(skipped) {
        bail!(
            "source {}: {skipped} of {found} pages were skipped{}, over max_error_ratio {max_ratio}; \
             check robots.txt and the listed URLs, or raise stages.crawl.max_error_ratio",
            src.name,
            first(PageStatus::Skipped),
        );
    }
    Ok(())
}

async fn fetch_robots(fetcher: &Fetcher, llms_url: &Url, params: &CrawlParams) -> Robots {
    let Ok(robots_url) = llms_url.join("/robots.txt") else { return Robots::AllowAll };
    let mut notes = Vec::new();
    match fetcher.get(&robots_url, None, None, params.max_body_bytes.max(robots::MAX_ROBOTS_BYTES), &mut notes).await {
        Outcome::Fetched { body, .. } => Robots::parse(&String::from_utf8_lossy(&body), "atlas"),
        Outcome::Gone(_) => Robots::AllowAll,
        Outcome::NotModified => Robots::AllowAll,
        Outcome::Denied(_) => Robots::AllowAll,
        Outcome::Failed(why) if why.starts_with("HTTP 4") => Robots::AllowAll,
        Outcome::Failed(why) => Robots::DisallowAll(format!("robots.txt unavailable: {why}")),
    }
}

async fn fetch_page(
    entry: &llms::Entry,
    section: &str,
    prev: Option<PageMeta>,
    fetcher: &Fetcher,
    robots: &Robots,
    markdown: &Path,
    params: &CrawlParams,
) -> PageMeta {
    let mut page = PageMeta {
        url: page_url(&entry.url),
        title: entry.title.clone(),
        section: section.to_owned(),
        status: PageStatus::Error,
        etag: None,
        last_modified: None,
        fetched_at: None,
        digest: None,
        error: None,
        retries: Vec::new(),
        from_html: false,
    };
    // llms::parse checked the mirror path; check again where it is joined.
    let path = match atlas_runtime::safe_path::join_inside(markdown, &entry.mirror) {
        Ok(p) => p,
        Err(e) => {
            page.status = PageStatus::Skipped;
            page.error = Some(e.to_string());
            return page;
        }
    };
    let target = entry.url.path().to_owned() + entry.url.query().map(|q| format!("?{q}")).as_deref().unwrap_or("");
    if !robots.allows(&target) {
        page.status = PageStatus::Skipped;
        page.error = Some(match robots {
            Robots::DisallowAll(why) => why.clone(),
            _ => "disallowed by robots.txt".to_owned(),
        });
        return page;
    }
    let [lo, hi] = params.delay_ms;
    if hi > 0 {
        tokio::time::sleep(Duration::from_millis(fastrand::u64(lo.min(hi)..=hi))).await;
    }
    // Validators only when we still hold the page.
    let have = prev.as_ref().filter(|p| p.digest.is_some() && path.is_file());
    let (etag, lm) = (have.and_then(|p| p.etag.clone()), have.and_then(|p| p.last_modified.clone()));
    let outcome =
        fetcher.get(&entry.url, etag.as_deref(), lm.as_deref(), params.max_body_bytes, &mut page.retries).await;
    match outcome {
        Outcome::NotModified if have.is_none() => {
            // The fetcher sends validators only for a page we hold; fail the page, never the run.
            page.status = PageStatus::Error;
            page.error = Some("HTTP 304 Not Modified to an unconditional GET".to_owned());
        }
        Outcome::NotModified => {
            let Some(prev) = have.cloned() else { return page };
            page.status = PageStatus::NotModified;
            page.etag = prev.etag;
            page.last_modified = prev.last_modified;
            page.fetched_at = prev.fetched_at;
            page.digest = prev.digest;
            page.from_html = prev.from_html;
        }
        Outcome::Fetched { body, .. } if body.contains(&0) => {
            page.status = PageStatus::Skipped;
            page.error = Some("binary (the body holds NUL bytes)".to_owned());
        }
        Outcome::Fetched { body, etag, last_modified, content_type } => {
            let text = String::from_utf8_lossy(&body).into_owned();
            let (text, from_html) = if html::looks_like_html(&text, content_type.as_deref()) {
                (html::to_markdown(&text), true)
            } else {
                (text, false)
            };
            match write_atomic(&path, text.as_bytes()) {
                Ok(()) => {
                    let digest = Digest::of(text.as_bytes());
                    page.status = PageStatus::Fetched;
                    // Same bytes as before: keep the first fetch time, so an unchanged
                    // source leaves the crawl output (and the bundle) byte-identical.
                    page.fetched_at = match have {
                        Some(p) if p.digest == Some(digest) => p.fetched_at.clone(),
                        _ => Some(now_rfc3339()),
                    };
                    page.digest = Some(digest);
                    page.etag = etag;
                    page.last_modified = last_modified;
                    page.from_html = from_html;
                }
                Err(e) => {
                    page.status = PageStatus::Error;
                    page.error = Some(format!("{e:#}"));
                }
            }
        }
        Outcome::Gone(code) => {
            let _ = std::fs::remove_file(&path);
            page.status = PageStatus::Removed;
            page.error = Some(format!("HTTP {code} upstream"));
        }
        failed @ (Outcome::Failed(_) | Outcome::Denied(_)) => {
            page.status = PageStatus::Error;
            page.error = Some(match failed {
                Outcome::Denied(code) => format!("HTTP {code}"),
                Outcome::Failed(why) => why,
                _ => unreachable!("matched above"),
            });
            // A transient failure keeps the copy we had, so the bundle does not lose it.
            if let Some(p) = have {
                page.digest = p.digest;
                page.etag = p.etag.clone();
                page.last_modified = p.last_modified.clone();
                page.fetched_at = p.fetched_at.clone();
            }
        }
    }
    page
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    atlas_cache::write_file_atomic(path, bytes).with_context(|| format!("writing {}", path.display()))
}
