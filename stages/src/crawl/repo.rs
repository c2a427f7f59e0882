//! Repositories as sources: a `git` source (one repository at a commit) and the
//! `github` portfolio (an owner's repositories with a topic), each synced into a bare
//! clone in the source's state folder and read at one commit.

use std::path::Path;

use anyhow::Context as _;
use atlas_cache::Digest;

use super::local::{Globs, Scan, ScannedFile};
use super::{CrawlParams, git, github};
use crate::runner::{Ctx, Loaded};

/// A `git` source: one repository at `rev`, else `branch`, else HEAD.
pub fn scan_git(
    ctx: &Ctx<'_>,
    p: &CrawlParams,
    name: &str,
    url: &str,
    rev: Option<&str>,
    branch: Option<&str>,
    globs: &Globs,
) -> anyhow::Result<Scan> {
    let state = super::site::state_dir(ctx.cache.root(), name);
    let url = resolve_url(ctx.cfg, url);
    let web = url.starts_with("https://github.com/").then(|| url.trim_end_matches(".git").to_owned());
    let repo = RepoRef { url: &url, web: web.as_deref(), name: None, section: name, rev, branch };
    let mut scan = Scan::default();
    read(ctx, p, &repo, &state.join("repo.git"), globs, &mut scan)?;
    Ok(scan)
}

/// A `github` source: the owner's repositories that carry `topic` (listed through the
/// API, or read back from `repos.json` offline), each at its default branch under
/// `<repo>/`.
pub fn scan_github(
    ctx: &Ctx<'_>,
    p: &CrawlParams,
    name: &str,
    owner: &str,
    topic: &str,
    api_url: &str,
    globs: &Globs,
) -> anyhow::Result<Scan> {
    let state = super::site::state_dir(ctx.cache.root(), name);
    let repos = if ctx.offline {
        read_portfolio_list(&state)?
    } else {
        let token = std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty());
        let mut notes = Vec::new();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let repos = rt.block_on(github::list_repos(api_url, owner, topic, token.as_deref(), p, &mut notes))?;
        for n in notes {
            ctx.progress.log(&format!("crawl: {n}"));
        }
        write_portfolio_list(&state, &repos)?;
        repos
    };
    let mut scan = Scan::default();
    for r in &repos {
        // The name comes from the API and names a folder: the path guard decides.
        let bare = match atlas_runtime::safe_path::join_inside(&state.join("repos"), &format!("{}.git", r.name)) {
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
            rev: None,
            branch: r.default_branch.as_deref(),
        };
        read(ctx, p, &repo, &bare, globs, &mut scan)?;
    }
    scan.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(scan)
}

/// One repository to read: where it is fetched from, its web page (for citation
/// URLs), and where its files go in the source.
#[derive(Debug)]
struct RepoRef<'a> {
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
/// The tags of git source `name` (its clone synced first, unless `offline`).
pub fn tags(cache_root: &Path, cfg: &Loaded, name: &str, url: &str, offline: bool) -> anyhow::Result<Vec<String>> {
    let repo = super::site::state_dir(cache_root, name).join("repo.git");
    let url = resolve_url(cfg, url);
    git::sync(&url, &repo, offline)?;
    git::tags(&repo)
}

fn resolve_url(cfg: &Loaded, url: &str) -> String {
    if url.contains("://") || url.contains('@') {
        return url.to_owned();
    }
    cfg.resolve(Path::new(url)).display().to_string()
}

/// Syncs the repository and adds its files at the resolved commit to `scan`.
fn read(
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
        "crawl: {} at {}: {}",
        r.url,
        &commit[..12.min(commit.len())],
        atlas_runtime::words::count(checkout.files.len(), "file")
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
fn write_portfolio_list(state: &Path, repos: &[github::Repo]) -> anyhow::Result<()> {
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

fn read_portfolio_list(state: &Path) -> anyhow::Result<Vec<github::Repo>> {
    let p = state.join("repos.json");
    let bytes = std::fs::read(&p).with_context(|| format!("{} is missing; run once without --offline", p.display()))?;
    Ok(serde_json::from_slice(&bytes)?)
}
