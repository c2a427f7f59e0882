//! The mirror's record: `crawl_meta.json` (what became of each page, the per-section
//! counts and the failures), the journal's entries, where a source's mirror lives and
//! which of its files a crawl leaves to read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use atlas_cache::Digest;
use serde::{Deserialize, Serialize};

use super::Plan;

/// What became of a page in the last crawl (`crawl_meta.json` spells it kebab-case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageStatus {
    /// Downloaded (new or changed) into the mirror.
    Fetched,
    /// The server answered 304: the mirror's copy stands.
    NotModified,
    /// No longer listed in llms.txt (or gone at the site): out of the mirror.
    Removed,
    /// Not fetched on purpose: robots.txt, an unsafe path, a binary body.
    Skipped,
    /// The fetch failed; the next run retries it.
    Error,
}

impl PageStatus {
    /// The name `crawl_meta.json` and the run's notes use.
    pub fn as_str(self) -> &'static str {
        match self {
            PageStatus::Fetched => "fetched",
            PageStatus::NotModified => "not-modified",
            PageStatus::Removed => "removed",
            PageStatus::Skipped => "skipped",
            PageStatus::Error => "error",
        }
    }
}

/// A page as recorded in `crawl_meta.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PageMeta {
    pub url: String,
    pub title: String,
    pub section: String,
    pub status: PageStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<String>,
    /// The page came as HTML and was converted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_html: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SectionCounts {
    pub found: usize,
    pub fetched: usize,
    pub not_modified: usize,
    pub skipped: usize,
    pub removed: usize,
    pub errors: usize,
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CrawlMeta {
    pub source_url: String,
    pub started_at: String,
    pub finished_at: String,
    pub sections: BTreeMap<String, SectionCounts>,
    /// By mirror path (`rel`).
    pub pages: BTreeMap<String, PageMeta>,
    /// `(url, reason)` of every failure.
    pub failures: Vec<(String, String)>,
    pub offsite: Vec<(String, String)>,
    pub duplicates: Vec<(String, String)>,
    /// `(title, url, why)` of links whose mirror path was unsafe: never fetched.
    #[serde(default)]
    pub refused: Vec<(String, String, String)>,
}

/// One page the mirror holds after a crawl.
#[derive(Debug, Clone)]
pub struct MirroredPage {
    pub rel: String,
    pub section: String,
    pub url: String,
    pub path: PathBuf,
    pub fetched_at: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct JournalEntry {
    pub(super) rel: String,
    pub(super) page: PageMeta,
}

/// Where a source's mirror lives.
pub fn state_dir(cache_root: &Path, source: &str) -> PathBuf {
    cache_root.join("sources").join(source)
}

/// The mirror file of page `rel`; None when `rel` (read back from `crawl_meta.json`,
/// which an older version or a hand edit may have written) is not a safe relative path.
fn page_path(markdown: &Path, rel: &str) -> Option<PathBuf> {
    atlas_runtime::safe_path::join_inside(markdown, rel).ok()
}

pub(super) fn mirrored(meta: &CrawlMeta, state: &Path) -> Vec<MirroredPage> {
    let markdown = state.join("markdown");
    meta.pages
        .iter()
        .filter(|(_, p)| p.digest.is_some() && p.status != PageStatus::Removed)
        .filter_map(|(rel, p)| {
            Some(MirroredPage {
                rel: rel.clone(),
                section: p.section.clone(),
                url: p.url.clone(),
                path: page_path(&markdown, rel)?,
                fetched_at: p.fetched_at.clone(),
            })
        })
        .filter(|p| p.path.is_file())
        .collect()
}

pub(super) fn now_rfc3339() -> String {
    crate::text::rfc3339_now()
}

/// Reconcile: pages that left llms.txt (and were not filtered out on purpose) leave
/// the mirror; the per-section counts and the failures are summed up.
pub(super) fn reconcile(mut meta: CrawlMeta, plan: &Plan, previous: &CrawlMeta) -> CrawlMeta {
    let markdown = &plan.markdown;
    let listed: std::collections::HashSet<&str> = plan.index.entries.iter().map(|e| e.mirror.as_str()).collect();
    for (rel, old) in &previous.pages {
        if meta.pages.contains_key(rel) || old.status == PageStatus::Removed {
            continue;
        }
        let Some(path) = page_path(markdown, rel) else {
            // An unsafe key from an older crawl_meta.json: forget it, touch nothing.
            continue;
        };
        if listed.contains(rel.as_str()) {
            meta.pages.insert(rel.clone(), old.clone()); // filtered out this run: keep as is
            continue;
        }
        let _ = std::fs::remove_file(&path);
        let mut gone = old.clone();
        gone.status = PageStatus::Removed;
        gone.error = Some("no longer listed in llms.txt".to_owned());
        gone.digest = None;
        meta.pages.insert(rel.clone(), gone);
    }
    // Counts and failures.
    for (rel, p) in &meta.pages {
        let c = meta.sections.entry(p.section.clone()).or_default();
        match p.status {
            PageStatus::Fetched => c.fetched += 1,
            PageStatus::NotModified => c.not_modified += 1,
            PageStatus::Skipped => c.skipped += 1,
            PageStatus::Removed => c.removed += 1,
            PageStatus::Error => c.errors += 1,
        }
        if p.status != PageStatus::Removed {
            c.found += 1;
        }
        if p.status == PageStatus::Fetched
            && let Some(path) = page_path(markdown, rel)
        {
            c.bytes += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        }
        if p.status == PageStatus::Removed || p.status == PageStatus::Error || p.status == PageStatus::Skipped {
            meta.failures.push((p.url.clone(), p.error.clone().unwrap_or_else(|| p.status.as_str().to_owned())));
        }
    }
    meta.finished_at = now_rfc3339();
    meta
}
