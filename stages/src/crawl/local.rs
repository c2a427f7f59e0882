//! Local sources: a folder walked with the `ignore` crate, filtered by include and
//! exclude globs.

use std::path::Path;

use anyhow::Context as _;
use atlas_cache::{Digest, KeyBuilder};

/// Why bytes are not a text document (None when they are): not UTF-8, or holding NUL
/// bytes (binary data that happens to decode).
pub fn not_text(bytes: &[u8]) -> Option<&'static str> {
    if bytes.contains(&0) {
        Some("binary (it holds NUL bytes)")
    } else if std::str::from_utf8(bytes).is_err() {
        Some("not UTF-8 text")
    } else {
        None
    }
}

#[derive(Debug)]
pub struct ScannedFile {
    pub rel: String,
    pub bytes: Vec<u8>,
    pub digest: Digest,
    /// Where the file came from, for crawled pages.
    pub url: Option<String>,
    /// The publication, when the source knows it (an llms.txt group, a repository);
    /// else derived from the path.
    pub section: Option<String>,
    pub repo: Option<String>,
    pub commit: Option<String>,
}

#[derive(Debug, Default)]
pub struct Scan {
    pub files: Vec<ScannedFile>,
    /// `(path, reason)` of files left out.
    pub skipped: Vec<(String, String)>,
    /// When the content was fetched (llms-txt: the newest page download; a page
    /// whose bytes did not change keeps its first fetch time). None for local and
    /// git sources, whose commits date them.
    pub fetched_at: Option<String>,
    /// A package's own one-line summary (its manifest's description), made inert:
    /// what the bundle's description becomes when the config asks for it
    /// (`stages.pack.description_from_package`).
    pub summary: Option<String>,
}

impl Scan {
    /// A digest over (path, content digest) of every file: the source's identity.
    pub fn snapshot(&self, name: &str) -> Digest {
        let mut k = KeyBuilder::new("source-snapshot");
        k.str("name", name);
        for f in &self.files {
            k.str("rel", &f.rel).digest("content", f.digest);
            k.str("url", f.url.as_deref().unwrap_or_default()).str("section", f.section.as_deref().unwrap_or_default());
            k.str("repo", f.repo.as_deref().unwrap_or_default()).str("commit", f.commit.as_deref().unwrap_or_default());
        }
        // What was left out, and why, is part of what the bundle says.
        for (rel, why) in &self.skipped {
            k.str("skipped", rel).str("why", why);
        }
        k.str("fetched_at", self.fetched_at.as_deref().unwrap_or_default());
        // Only a source that has one says so: every other snapshot keeps its digest.
        if let Some(s) = &self.summary {
            k.str("summary", s);
        }
        k.finish()
    }
}

/// Include/exclude globs over `/`-separated relative paths.
#[derive(Debug)]
pub struct Globs {
    include: globset::GlobSet,
    exclude: globset::GlobSet,
}

impl Globs {
    pub fn new(include: &[String], exclude: &[String]) -> anyhow::Result<Globs> {
        let build = |globs: &[String]| -> anyhow::Result<globset::GlobSet> {
            let mut b = globset::GlobSetBuilder::new();
            for g in globs {
                b.add(
                    globset::GlobBuilder::new(g)
                        .literal_separator(true)
                        .build()
                        .with_context(|| format!("bad glob {g:?}"))?,
                );
            }
            Ok(b.build()?)
        };
        Ok(Globs { include: build(include)?, exclude: build(exclude)? })
    }

    pub fn keep(&self, rel: &str) -> bool {
        self.include.is_match(rel) && !self.exclude.is_match(rel)
    }
}

/// Walks `root`, keeping the files that match an include glob and no exclude glob.
pub fn scan_local(root: &Path, include: &[String], exclude: &[String], max_bytes: u64) -> anyhow::Result<Scan> {
    let globs = Globs::new(include, exclude)?;
    let mut scan = Scan::default();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .require_git(false)
        .sort_by_file_name(Ord::cmp)
        .build();
    for entry in walker {
        let entry = entry.with_context(|| format!("walking {}", root.display()))?;
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap_or(path);
        let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        let Some(kind) = entry.file_type() else { continue };
        if kind.is_symlink() {
            if globs.keep(&rel) {
                scan.skipped.push((rel, "a symlink (links are not followed)".to_owned()));
            }
            continue;
        }
        if !kind.is_file() {
            if !kind.is_dir() && globs.keep(&rel) {
                scan.skipped.push((rel, "not a regular file".to_owned()));
            }
            continue;
        }
        if !globs.keep(&rel) {
            continue;
        }
        if let Err(e) = atlas_runtime::safe_path::check(&rel) {
            scan.skipped.push((rel.escape_debug().to_string(), e.why.to_owned()));
            continue;
        }
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        if len > max_bytes {
            scan.skipped.push((rel, format!("{len} bytes is over max_file_bytes ({max_bytes})")));
            continue;
        }
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        if let Some(why) = not_text(&bytes) {
            scan.skipped.push((rel, why.to_owned()));
            continue;
        }
        let digest = Digest::of(&bytes);
        scan.files.push(ScannedFile { rel, bytes, digest, url: None, section: None, repo: None, commit: None });
    }
    scan.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(scan)
}
