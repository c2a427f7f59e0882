//! Repositories as sources: a `git` source (one repository at a commit) and the
//! `github` portfolio (an owner's repositories with a topic), each synced into a bare
//! clone in the source's state folder and read at one commit.

use std::path::Path;

use anyhow::Context as _;
use atlas_cache::Digest;

use super::local::{Globs, Scan, ScannedFile};
use super::{CrawlParams, git, github};
use crate::runner::{Ctx, Loaded};

/// One repository to read: where it is fetched from, its web page (for citation
/// URLs), and where its files go in the source.
#[derive(Debug)]
pub struct RepoRef<'a> {
    pub url: &'a str,
    pub web: Option<&'a str>,
    /// Set for portfolio repositories: files live under `<name>/`.
    pub name: Option<&'a str>,
    pub section: &'a str,
    /// The commit to read: `rev` (any revision), else `branch`, else HEAD.
    pub rev: Option<&'a str>,
    pub branch: Option<&'a str>,
}

/// A local repository path in the config is relative to the config file.
pub fn resolve_url(cfg: &Loaded, url: &str) -> String {
    if url.contains("://") || url.contains('@') {
        return url.to_owned();
    }
    cfg.resolve(Path::new(url)).display().to_string()
}

/// Syncs the repository and adds its files at the resolved commit to `scan`.
pub fn read(
    ctx: &Ctx<'_>,
    p: &CrawlParams,
    r: &RepoRef<'_>,
    bare: &Path,
    globs: &Globs,
    scan: &mut Scan,
) -> anyhow::Result<()> {
    git::sync(r.url, bare, ctx.offline)?;
    let commit = git::resolve(bare, r.rev, r.branch)?;
    let checkout = git::files_at(bare, &commit, |path| globs.keep(path), p.max_file_bytes)?;
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
pub fn write_portfolio_list(state: &Path, repos: &[github::Repo]) -> anyhow::Result<()> {
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

pub fn read_portfolio_list(state: &Path) -> anyhow::Result<Vec<github::Repo>> {
    let p = state.join("repos.json");
    let bytes = std::fs::read(&p).with_context(|| format!("{} is missing; run once without --offline", p.display()))?;
    Ok(serde_json::from_slice(&bytes)?)
}
