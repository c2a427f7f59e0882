//! git sources through the git CLI: a bare clone in the cache folder, fetched on each
//! run (not offline), and the files of one commit read straight from the object
//! database (`ls-tree` + `cat-file --batch`), so no worktree is checked out.
//!
//! The git CLI rather than gix: it is on every machine that has repositories, it
//! honours the user's credential helpers, SSH config and proxies as they already
//! work, and it adds nothing to the build.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

/// One file at the commit.
#[derive(Debug)]
pub struct GitFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

#[derive(Debug)]
pub struct Checkout {
    pub commit: String,
    pub files: Vec<GitFile>,
    /// `(path, reason)` of files left out.
    pub skipped: Vec<(String, String)>,
}

fn git(dir: Option<&Path>) -> Command {
    let mut c = Command::new("git");
    if let Some(d) = dir {
        c.arg("-C").arg(d);
    }
    // Never prompt: a missing credential is an error, not a hang.
    c.env("GIT_TERMINAL_PROMPT", "0").stdin(Stdio::null());
    c
}

fn run(mut cmd: Command, what: &str) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("{what}: cannot run git (is it installed?)"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!("{what}: {}", err.trim().lines().last().unwrap_or("git failed"));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Clones (first time) or fetches `url` into the bare repository `repo`.
pub fn sync(url: &str, repo: &Path, offline: bool) -> anyhow::Result<()> {
    if repo.join("HEAD").is_file() {
        if offline {
            return Ok(());
        }
        let mut c = git(Some(repo));
        c.args(["fetch", "--quiet", "--prune", "--tags", "origin", "+refs/heads/*:refs/heads/*"]);
        run(c, &format!("fetching {url}"))?;
        return Ok(());
    }
    if offline {
        bail!("{url} has no clone yet ({} is missing); run once without --offline", repo.display());
    }
    let parent = repo.parent().context("repo path has a parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    // Clone beside, then rename: a killed clone leaves no half repository in place.
    let tmp = parent.join(format!(".clone-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let mut c = git(None);
    c.args(["clone", "--quiet", "--bare", "--", url]).arg(&tmp);
    run(c, &format!("cloning {url}"))?;
    std::fs::rename(&tmp, repo).with_context(|| format!("moving the clone to {}", repo.display()))?;
    Ok(())
}

/// The repository's tags.
pub fn tags(repo: &Path) -> anyhow::Result<Vec<String>> {
    let mut c = git(Some(repo));
    c.args(["tag", "--list"]);
    Ok(run(c, "listing tags")?.lines().map(str::to_owned).filter(|t| !t.is_empty()).collect())
}

/// Resolves `rev`, else `refs/heads/<branch>`, else HEAD, to a commit id.
pub fn resolve(repo: &Path, rev: Option<&str>, branch: Option<&str>) -> anyhow::Result<String> {
    let spec = match (rev, branch) {
        (Some(r), _) => format!("{r}^{{commit}}"),
        (None, Some(b)) => format!("refs/heads/{b}^{{commit}}"),
        (None, None) => "HEAD^{commit}".to_owned(),
    };
    let mut c = git(Some(repo));
    c.args(["rev-parse", "--verify", "--quiet", &spec]);
    run(c, &format!("resolving {spec}")).map_err(|_| {
        anyhow::anyhow!("no commit {} in {}; check rev/branch", rev.or(branch).unwrap_or("HEAD"), repo.display())
    })
}

/// The files of `commit` that `keep(path)` accepts, at most `max_bytes` each, UTF-8 only.
pub fn files_at(repo: &Path, commit: &str, keep: impl Fn(&str) -> bool, max_bytes: u64) -> anyhow::Result<Checkout> {
    let mut c = git(Some(repo));
    c.args(["ls-tree", "-r", "-z", "--long", "--full-tree", commit]);
    let out = c.output().context("running git ls-tree")?;
    if !out.status.success() {
        bail!("git ls-tree {commit}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let mut wanted: Vec<(String, String)> = Vec::new(); // (sha, path)
    let mut skipped = Vec::new();
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rec = String::from_utf8_lossy(rec);
        let Some((meta, path)) = rec.split_once('\t') else { continue };
        let f: Vec<&str> = meta.split_whitespace().collect();
        let (mode, kind, sha, size) = (f[0], f[1], f[2], f.get(3).copied().unwrap_or("-"));
        if kind != "blob" || mode == "120000" || !keep(path) {
            continue;
        }
        // The path becomes a mirror path: a crafted tree must not lead out of it.
        if let Err(e) = atlas_runtime::safe_path::check(path) {
            skipped.push((path.escape_debug().to_string(), e.why.to_owned()));
            continue;
        }
        if size.parse::<u64>().is_ok_and(|s| s > max_bytes) {
            skipped.push((path.to_owned(), format!("{size} bytes is over max_file_bytes ({max_bytes})")));
            continue;
        }
        wanted.push((sha.to_owned(), path.to_owned()));
    }
    // One cat-file process streams every blob.
    let mut child = git(Some(repo))
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("running git cat-file")?;
    let mut stdin = child.stdin.take().context("cat-file stdin")?;
    let shas: Vec<String> = wanted.iter().map(|(s, _)| s.clone()).collect();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        for s in shas {
            writeln!(stdin, "{s}")?;
        }
        Ok(())
    });
    let mut reader = BufReader::new(child.stdout.take().context("cat-file stdout")?);
    let mut files = Vec::new();
    for (_, path) in &wanted {
        let mut header = String::new();
        reader.read_line(&mut header).context("reading git cat-file")?;
        let size: usize =
            header.split_whitespace().nth(2).and_then(|s| s.parse().ok()).context("bad cat-file header")?;
        let mut bytes = vec![0; size + 1]; // content plus the trailing newline
        reader.read_exact(&mut bytes).context("reading a blob")?;
        bytes.pop();
        if let Some(why) = super::local::not_text(&bytes) {
            skipped.push((path.clone(), why.to_owned()));
            continue;
        }
        files.push(GitFile { path: path.clone(), bytes });
    }
    writer.join().map_err(|_| anyhow::anyhow!("cat-file writer panicked"))?.context("feeding git cat-file")?;
    child.wait().context("waiting for git cat-file")?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Checkout { commit: commit.to_owned(), files, skipped })
}
