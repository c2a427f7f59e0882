//! `package` sources: a published package at an exact version, read from the artifact
//! its registry serves, the way a folder is read.
//!
//! - **Where from**: the registry the user's own tools are configured for: cargo's
//!   configuration for crates ([`cargo`]), npm's `.npmrc` for npm packages ([`npm`]),
//!   pip's and uv's index settings for Python packages ([`pypi`]).
//! - **Checked**: the artifact against the registry's checksum (a crate's sha256 in the
//!   index, an npm tarball's sha512 integrity, a Python file's sha256); a yanked,
//!   unpublished or missing version is an error that names the versions published,
//!   never a neighbour.
//! - **Unpacked** by the safe extractor (`atlas_dist::archive`, gzip) under
//!   [`package_limits`]: one top folder, regular files and folders only, caps on
//!   entries, bytes and ratio; nothing outside the source's state folder.
//! - **Never run**: no build script, no install script, no package manager. The files
//!   are read, nothing else.
//!
//! The artifact and its unpacked tree are kept in the source's state folder under
//! their sha256, so a later run (or `--offline`) reuses them.

pub mod cargo;
pub mod npm;
pub mod pypi;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use url::Url;

use super::CrawlParams;
use super::fetch::{Fetcher, Outcome};
use super::local::{Scan, scan_local};
use atlas_dist::http::Credential;
pub use atlas_runtime::package::Checksum;

use crate::runner::{Ctx, Ecosystem, PackageSpec};

/// The largest file of a package that is read, in bytes: past it, a package's file is
/// generated tables (a parser's `parser.c`, a Unicode table, an amalgamation), which
/// no one reads as documentation or code and which would cost more to embed than the
/// rest of the package. The crawl's `max_file_bytes` may lower it.
pub const MAX_PACKAGE_FILE_BYTES: u64 = 1 << 20;
/// The largest package artifact downloaded, in bytes.
pub const MAX_ARTIFACT_BYTES: usize = 256 << 20;
/// The largest index file (a sparse index's lines, a packument, a project page) read,
/// in bytes.
pub const MAX_INDEX_BYTES: usize = 64 << 20;

/// What a package may unpack to: far more than any real package, far less than a bomb.
pub fn package_limits() -> atlas_dist::archive::Limits {
    atlas_dist::archive::Limits {
        max_unpacked_bytes: 1 << 30,
        max_file_bytes: 256 << 20,
        max_entries: 100_000,
        max_ratio: 100,
        ratio_floor_bytes: 32 << 20,
    }
}

/// A package source as the crawl reads it.
#[derive(Debug, Clone, Copy)]
pub struct Package<'a> {
    /// The source's name.
    pub name: &'a str,
    pub spec: &'a PackageSpec,
    /// A lockfile's checksums for the artifact (any one must match).
    pub locked: &'a [Checksum],
    /// A Python package's index as its lockfile names it: its source.
    pub index: Option<&'a str>,
    /// The folder whose cargo, npm, pip and uv settings name the registry.
    pub settings: &'a Path,
}

/// Reads the package `spec` of source `name`: its artifact fetched (or found in the
/// state folder, or in cargo's own cache when a lockfile's checksum names it), checked
/// against the registry's checksum and any of `locked` (a lockfile's), unpacked, and
/// walked with `include` and `exclude`.
pub fn scan_package(
    ctx: &Ctx<'_>,
    p: &CrawlParams,
    src: &Package<'_>,
    include: &[String],
    exclude: &[String],
) -> anyhow::Result<Scan> {
    let Package { name, spec, locked, index, settings } = *src;
    let state = super::site::state_dir(ctx.cache.root(), name);
    let file = state.join("artifacts").join(spec.file_name());
    let artifact = match (kept(&file), cargo_cached(spec, locked)) {
        (Some(a), _) if ctx.offline => a,
        (None, Some(copy)) => keep(spec, &std::fs::read(&copy)?, &file)?,
        (None, None) if ctx.offline => {
            bail!("{spec} is not in the cache and --offline fetches nothing; run once online to fetch it")
        }
        (kept, _) => {
            let net = Net::new(p)?;
            let found = match spec.ecosystem {
                Ecosystem::Crate => cargo::find(&net, settings, spec)?,
                Ecosystem::Npm => npm::find(&net, settings, spec)?,
                Ecosystem::Pypi => pypi::find(&net, settings, spec, index)?,
            };
            match kept.filter(|k| matches_file(&found.check, &k.path)) {
                Some(k) => k,
                None => download(&net, spec, &found, &file)?,
            }
        }
    };
    // A sha256 is compared with the one already known; only an SRI reads the file.
    let is_locked = |c: &Checksum| match c {
        Checksum::Sha256(h) => *h == artifact.sha256,
        Checksum::Sri512(_) => matches_file(c, &artifact.path),
    };
    if !locked.is_empty() && !locked.iter().any(is_locked) {
        bail!(
            "{spec}: the artifact is not the one the lockfile names ({}); nothing was used (the lockfile or the \
             registry changed: check which)",
            locked.iter().map(Checksum::to_string).collect::<Vec<_>>().join(" or ")
        );
    }
    let (root, links) = unpack(&artifact, &state).with_context(|| format!("unpacking {spec}"))?;
    let mut scan = scan_local(&root, include, exclude, p.max_file_bytes.min(MAX_PACKAGE_FILE_BYTES))?;
    scan.summary = summary(&root, spec.ecosystem);
    // Each link the artifact held, once, in the build's notes (a link is never followed).
    let top = root.file_name().map(|t| format!("{}/", t.to_string_lossy())).unwrap_or_default();
    for link in links {
        let rel = link.strip_prefix(&top).unwrap_or(&link);
        let shown = atlas_runtime::utf8::clip_chars(&atlas_runtime::utf8::printable(rel), 200);
        scan.skipped.push((shown, format!("a link in {spec}'s artifact, left out (links are never followed)")));
    }
    Ok(scan)
}

/// A `.crate` of `spec` in cargo's own download cache (`$CARGO_HOME/registry/cache/*/`)
/// whose bytes a lockfile's sha256 names: the same artifact, already on this machine.
fn cargo_cached(spec: &PackageSpec, locked: &[Checksum]) -> Option<PathBuf> {
    if spec.ecosystem != Ecosystem::Crate || !locked.iter().any(|c| matches!(c, Checksum::Sha256(_))) {
        return None;
    }
    let home = cargo::cargo_home()?;
    let name = format!("{}-{}.crate", spec.name, spec.version);
    std::fs::read_dir(home.join("registry/cache"))
        .ok()?
        .flatten()
        .map(|d| d.path().join(&name))
        .find(|f| locked.iter().any(|c| matches_file(c, f)))
}

/// A verified artifact: where it is and its sha256.
#[derive(Debug)]
struct Artifact {
    path: PathBuf,
    sha256: String,
}

/// The artifact kept at `file` by an earlier run, when it still has the sha256
/// recorded beside it.
fn kept(file: &Path) -> Option<Artifact> {
    let sha256 = std::fs::read_to_string(sidecar(file)).ok()?.trim().to_owned();
    let bytes = std::fs::read(file).ok()?;
    (atlas_runtime::hash::sha256_bytes(&bytes) == sha256).then(|| Artifact { path: file.to_owned(), sha256 })
}

fn sidecar(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(".sha256");
    PathBuf::from(s)
}

/// Whether the file at `path` has the bytes `check` states.
fn matches_file(check: &Checksum, path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| check.matches(&b))
}

/// What a registry says of the version asked: where its artifact is and its checksum.
#[derive(Debug)]
pub struct Found {
    pub url: Url,
    pub check: Checksum,
    /// The registry's credential, bound to the registry's own origin where it was
    /// configured: the HTTP layer sends it to that origin and to no other, whatever
    /// host the artifact's URL (or a redirect) names.
    pub credential: Option<Credential>,
}

/// A registry's URL as configured, without its user info, and the credential that user
/// info held (`https://user:token@host/…`, how pip and uv name a private index's
/// token), as `Authorization: Basic` bound to that URL's origin. The one place a URL's
/// user info becomes a credential: the URL that is kept, and printed, holds none.
pub fn split_user_info(mut url: Url) -> anyhow::Result<(Url, Option<Credential>)> {
    let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
    let (user, password) = (decode(url.username()), url.password().map(decode));
    if user.is_empty() && password.is_none() {
        return Ok((url, None));
    }
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let credential = Credential::basic(url.as_str(), &user, &password.unwrap_or_default())?;
    Ok((url, Some(credential)))
}

/// A registry that wants credentials, or refuses the ones sent: what the ecosystem's
/// reader turns into the line that says where its package manager takes them.
#[derive(Debug, thiserror::Error)]
#[error("{url}: HTTP {status}")]
pub struct Denied {
    pub url: String,
    pub status: u16,
}

/// The HTTP side of a package source: the crawl's fetcher (its one policy: timeouts,
/// retries, Retry-After, a body cap) on a runtime of its own.
#[derive(Debug)]
pub struct Net {
    fetcher: Fetcher,
    rt: tokio::runtime::Runtime,
}

impl Net {
    fn new(p: &CrawlParams) -> anyhow::Result<Net> {
        Ok(Net { fetcher: Fetcher::new(p)?, rt: tokio::runtime::Builder::new_current_thread().enable_all().build()? })
    }

    /// GETs `url` (with `accept`, and the `credential` when `url`, or a redirect's
    /// hop, is on the credential's own origin); the body, or None for a 404/410.
    pub fn get(
        &self,
        url: &Url,
        limit: usize,
        accept: Option<&str>,
        credential: Option<&Credential>,
    ) -> anyhow::Result<Option<Vec<u8>>> {
        let x = super::fetch::Extra { accept, credential, any_host: true, ..Default::default() };
        let mut notes = Vec::new();
        match self.rt.block_on(self.fetcher.get_with(url, &x, limit, &mut notes)) {
            Outcome::Fetched { body, .. } => Ok(Some(body)),
            Outcome::Gone(_) => Ok(None),
            Outcome::Denied(status) => Err(Denied { url: atlas_dist::http::redact_url(url.as_str()), status }.into()),
            Outcome::Failed(why) => bail!("{}: {why}", atlas_dist::http::redact_url(url.as_str())),
            Outcome::NotModified => bail!("{}: a 304 to a plain GET", atlas_dist::http::redact_url(url.as_str())),
        }
    }
}

/// Downloads `found` into `file`, checks it and keeps it with its sha256.
fn download(net: &Net, spec: &PackageSpec, found: &Found, file: &Path) -> anyhow::Result<Artifact> {
    let bytes = net
        .get(&found.url, MAX_ARTIFACT_BYTES, None, found.credential.as_ref())?
        .with_context(|| format!("{spec}: the registry has no download at {}", found.url))?;
    if !found.check.matches(&bytes) {
        let (algo, got, want) = match &found.check {
            Checksum::Sha256(w) => ("sha256", atlas_runtime::hash::sha256_bytes(&bytes), w.clone()),
            Checksum::Sri512(w) => ("sha512", atlas_runtime::hash::sri_sha512(&bytes), w.clone()),
        };
        bail!(
            "{spec}: the download's {algo} is {got}, the registry says {want}; nothing was used (try again; report it if it persists)"
        );
    }
    keep(spec, &bytes, file)
}

/// Keeps checked `bytes` at `file`, with their sha256 beside them.
fn keep(spec: &PackageSpec, bytes: &[u8], file: &Path) -> anyhow::Result<Artifact> {
    let dir = file.parent().with_context(|| format!("{spec}: the artifacts folder"))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let sha256 = atlas_runtime::hash::sha256_bytes(bytes);
    atlas_cache::atomic::write_file_atomic(file, bytes).with_context(|| format!("writing {}", file.display()))?;
    atlas_cache::atomic::write_file_atomic(&sidecar(file), sha256.as_bytes())?;
    Ok(Artifact { path: file.to_owned(), sha256 })
}

/// How many published versions a "not published" error names.
const NEAREST_SHOWN: usize = 5;

/// Up to [`NEAREST_SHOWN`] published versions nearest to `want`, in release order
/// ([`release_order`]), or "none".
pub fn nearest(published: &[String], want: &str) -> String {
    let mut v: Vec<(ReleaseKey, &str)> = published.iter().map(|p| (release_order(p), p.as_str())).collect();
    v.sort_unstable();
    v.dedup_by(|a, b| a.1 == b.1);
    if v.is_empty() {
        return "none".to_owned();
    }
    let w = release_order(want);
    let at = v.partition_point(|(k, _)| *k < w);
    let from = at.saturating_sub(2).min(v.len().saturating_sub(NEAREST_SHOWN));
    v[from..(from + NEAREST_SHOWN).min(v.len())].iter().map(|(_, s)| *s).collect::<Vec<_>>().join(", ")
}

/// A version's place among its package's releases: its leading numeric segments
/// (`1.10` after `1.9`, semver and PEP 440 alike), then a pre-release suffix before the
/// release itself, then the suffix's text. A total order over any strings, so a
/// registry's odd version cannot upset the sort.
type ReleaseKey = (Vec<u64>, bool, String);

fn release_order(v: &str) -> ReleaseKey {
    let v = v.trim().trim_start_matches(['v', 'V']);
    let mut numbers = Vec::new();
    let mut rest = v;
    loop {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Ok(n) = rest[..digits].parse::<u64>() else { break };
        numbers.push(n);
        rest = &rest[digits..];
        match rest.strip_prefix('.') {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => rest = r,
            _ => break,
        }
    }
    (numbers, rest.is_empty(), rest.to_owned())
}

/// The artifact unpacked under the state folder (once per sha256), through the safe
/// extractor: its one top folder, and the link entries left out (a package's links
/// are skipped, not fatal: [`atlas_dist::archive::Links::Skip`]), kept beside the tree
/// in `<sha256>.links.json` so a later run names them too.
fn unpack(a: &Artifact, state: &Path) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let done = state.join("unpacked").join(&a.sha256);
    let links_file = state.join("unpacked").join(format!("{}.links.json", a.sha256));
    if let Some(top) = std::fs::read_dir(&done).ok().and_then(|mut d| d.next()).and_then(Result::ok) {
        let links = atlas_runtime::safe_path::read_capped(&links_file, MAX_LINKS_FILE_BYTES)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        return Ok((top.path(), links));
    }
    let parent = state.join("unpacked");
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let staging = tempfile::tempdir_in(&parent)?;
    let x = atlas_dist::archive::extract_with(
        &a.path,
        staging.path(),
        &package_limits(),
        atlas_dist::archive::Compression::Gzip,
        atlas_dist::archive::Links::Skip,
    )?;
    let links: Vec<String> = x.skipped_links.iter().take(MAX_LINKS_NAMED).cloned().collect();
    let text = serde_json::to_vec(&links).expect("plain strings");
    atlas_cache::write_file_atomic(&links_file, &text).with_context(|| format!("writing {}", links_file.display()))?;
    let _ = std::fs::remove_dir_all(&done);
    std::fs::rename(staging.keep(), &done).with_context(|| format!("keeping {}", done.display()))?;
    Ok((done.join(&x.top), links))
}

/// The largest package manifest (`Cargo.toml`, `package.json`, `PKG-INFO`) read for
/// the package's summary, in bytes: past it, the package has none.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 10;

/// The package's own one-line summary, from the unpacked tree at `root`: a crate's
/// `Cargo.toml` `package.description`, an npm package's `package.json` `description`,
/// an sdist's `PKG-INFO` `Summary`. Untrusted: read capped ([`MAX_MANIFEST_BYTES`]),
/// made one inert line (control and invisible formatting characters and runs of
/// whitespace become one space) and cut, with `…`, to fit a manifest's description
/// (`atlas_runtime::manifest::MAX_DESCRIPTION_BYTES`). None when the
/// package states none, or its manifest cannot be read.
pub fn summary(root: &Path, ecosystem: Ecosystem) -> Option<String> {
    let read = |name: &str| {
        let bytes = atlas_runtime::safe_path::read_capped(&root.join(name), MAX_MANIFEST_BYTES).ok()?;
        String::from_utf8(bytes).ok()
    };
    let raw = match ecosystem {
        Ecosystem::Crate => {
            let t: toml::Table = toml::from_str(&read("Cargo.toml")?).ok()?;
            t.get("package")?.get("description")?.as_str()?.to_owned()
        }
        Ecosystem::Npm => {
            let v: serde_json::Value = serde_json::from_str(&read("package.json")?).ok()?;
            v.get("description")?.as_str()?.to_owned()
        }
        Ecosystem::Pypi => pkg_info_summary(&read("PKG-INFO")?)?,
    };
    let line = atlas_runtime::utf8::printable(&raw).split_whitespace().collect::<Vec<_>>().join(" ");
    const MAX: usize = atlas_runtime::manifest::MAX_DESCRIPTION_BYTES;
    match line.len() {
        0 => None,
        n if n <= MAX => Some(line),
        _ => Some(format!("{}…", &line[..atlas_runtime::utf8::floor_char_boundary(&line, MAX - '…'.len_utf8())])),
    }
}

/// The `Summary` header of core metadata (RFC 822 style: a folded line continues on
/// lines that start with whitespace; the headers end at the first blank line).
fn pkg_info_summary(text: &str) -> Option<String> {
    let mut lines = text.lines().take_while(|l| !l.trim().is_empty());
    let first = lines.find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case("summary").then(|| v.trim().to_owned())
    })?;
    let folded: Vec<&str> = lines.take_while(|l| l.starts_with([' ', '\t'])).map(str::trim).collect();
    Some([first.as_str()].into_iter().chain(folded).collect::<Vec<_>>().join(" "))
}

/// The most skipped links of one package named in the notes.
const MAX_LINKS_NAMED: usize = 1000;
/// The largest list of skipped links read back, in bytes.
const MAX_LINKS_FILE_BYTES: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_published_versions_are_named() {
        assert_eq!(
            nearest(&["1.0.0".into(), "1.0.2".into(), "1.1.0".into(), "2.0.0".into()], "1.0.1"),
            "1.0.0, 1.0.2, 1.1.0, 2.0.0"
        );
        assert_eq!(nearest(&[], "1.0.0"), "none");
    }

    #[test]
    fn a_version_not_published_names_five_nearest_even_when_it_is_not_semver() {
        // PEP 440 versions that semver cannot read: one line, five names, whatever
        // the registry publishes.
        let published: Vec<String> = (0..100_000).map(|i| format!("2024.{i}.post1")).collect();
        let line = nearest(&published, "2024.500");
        assert_eq!(line, "2024.499.post1, 2024.500.post1, 2024.501.post1, 2024.502.post1, 2024.503.post1");
        let pep: Vec<String> = ["1.9", "1.10", "1.10rc1", "2.0b1", "0.9"].map(String::from).to_vec();
        assert_eq!(nearest(&pep, "1.11"), "0.9, 1.9, 1.10rc1, 1.10, 2.0b1");
        assert_eq!(nearest(&pep[..1], "3"), "1.9");
    }

    #[test]
    fn a_packages_summary_is_its_manifests_own_line_made_inert_and_cut_short() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        assert_eq!(summary(root, Ecosystem::Crate), None);
        let toml = "[package]\nname = \"x\"\ndescription = \"\"\"\nA fast\n\\u001b[31mthing\\u202e\"\"\"\n";
        std::fs::write(root.join("Cargo.toml"), toml).unwrap();
        assert_eq!(summary(root, Ecosystem::Crate).as_deref(), Some("A fast [31mthing"));
        std::fs::write(root.join("package.json"), format!(r#"{{"description": "{}"}}"#, "word ".repeat(100))).unwrap();
        let long = summary(root, Ecosystem::Npm).unwrap();
        assert!(long.ends_with('…') && long.len() <= atlas_runtime::manifest::MAX_DESCRIPTION_BYTES, "{long}");
        std::fs::write(root.join("package.json"), format!(r#"{{"description": "{}"}}"#, "é".repeat(400))).unwrap();
        let long = summary(root, Ecosystem::Npm).unwrap();
        assert!(long.len() <= atlas_runtime::manifest::MAX_DESCRIPTION_BYTES && long.ends_with("é…"), "{long}");
        std::fs::write(root.join("package.json"), r#"{"description": 7}"#).unwrap();
        assert_eq!(summary(root, Ecosystem::Npm), None);
        std::fs::write(
            root.join("PKG-INFO"),
            "Metadata-Version: 2.1\nName: units\nSummary: Units of\n  measure\nAuthor: a\n\nSummary: not a header\n",
        )
        .unwrap();
        assert_eq!(summary(root, Ecosystem::Pypi).as_deref(), Some("Units of measure"));
        std::fs::write(root.join("PKG-INFO"), "Name: units\n\nSummary: in the body\n").unwrap();
        assert_eq!(summary(root, Ecosystem::Pypi), None);
        // Past the cap, no summary: nothing large is read.
        std::fs::write(root.join("PKG-INFO"), format!("Summary: big\n{}", "x".repeat(300 << 10))).unwrap();
        assert_eq!(summary(root, Ecosystem::Pypi), None);
    }

    #[test]
    fn checksums_are_the_registrys_forms() {
        assert!(Checksum::Sha256(atlas_runtime::hash::sha256_bytes(b"x")).matches(b"x"));
        assert!(!Checksum::Sha256(atlas_runtime::hash::sha256_bytes(b"x")).matches(b"y"));
        assert!(Checksum::Sri512(atlas_runtime::hash::sri_sha512(b"x")).matches(b"x"));
        assert!(atlas_runtime::hash::sri_sha512(b"").starts_with("sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg"));
    }
}
