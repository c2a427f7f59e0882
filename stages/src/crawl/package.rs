//! `package` sources: a published package at an exact version, read from the artifact
//! its registry serves, the way a folder is read.
//!
//! - **Where from**: the registry the user's own tools are configured for. For crates,
//!   cargo's configuration (`.cargo/config.toml` beside the pipeline and up, then
//!   `$CARGO_HOME/config.toml`): `[source.crates-io] replace-with` followed to a sparse
//!   registry, else crates.io's sparse index ([`cargo_registry`]).
//! - **Checked**: the artifact's sha256 must be the index's `cksum`; a yanked or
//!   missing version is an error that names the versions published, never a neighbour.
//! - **Unpacked** by the safe extractor (`atlas_dist::archive`, gzip) under
//!   [`package_limits`]: one top folder, regular files and folders only, caps on
//!   entries, bytes and ratio; nothing outside the source's state folder.
//! - **Never run**: no build script, no install script, no package manager. The files
//!   are read, nothing else.
//!
//! The artifact and its unpacked tree are kept in the source's state folder under
//! their sha256, so a later run (or `--offline`) reuses them.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use url::Url;

use super::CrawlParams;
use super::fetch::{Fetcher, Outcome};
use super::local::{Scan, scan_local};
use crate::runner::{Ctx, Ecosystem, PackageSpec};

/// The largest package artifact downloaded, in bytes.
pub const MAX_ARTIFACT_BYTES: usize = 256 << 20;
/// The largest index file read, in bytes.
pub const MAX_INDEX_BYTES: usize = 64 << 20;
/// How many `replace-with` hops cargo's configuration may take.
const MAX_REPLACEMENTS: usize = 8;
/// crates.io's sparse index.
pub const CRATES_IO_INDEX: &str = "https://index.crates.io/";

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

/// Reads the package `spec` of source `name`: its artifact fetched (or found in the
/// state folder), checked, unpacked, and walked with `include` and `exclude`.
pub fn scan_package(
    ctx: &Ctx<'_>,
    p: &CrawlParams,
    name: &str,
    spec: &PackageSpec,
    include: &[String],
    exclude: &[String],
) -> anyhow::Result<Scan> {
    let state = super::site::state_dir(ctx.cache.root(), name);
    let artifact = match spec.ecosystem {
        Ecosystem::Crate => fetch_crate(ctx, p, spec, &state)?,
    };
    let root = unpack(&artifact, &state).with_context(|| format!("unpacking {spec}"))?;
    scan_local(&root, include, exclude, p.max_file_bytes)
}

/// A verified artifact: where it is and its sha256.
#[derive(Debug)]
struct Artifact {
    path: PathBuf,
    sha256: String,
}

/// The sparse index cargo's configuration names for crates.io, read from the files
/// cargo reads: `.cargo/config.toml` (or `.cargo/config`) in `dir` and each folder
/// above it, then `$CARGO_HOME/config.toml`; the first file that says a key wins.
pub fn cargo_registry(dir: &Path) -> anyhow::Result<Url> {
    let mut files: Vec<PathBuf> =
        dir.ancestors().flat_map(|d| [d.join(".cargo/config.toml"), d.join(".cargo/config")]).collect();
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(h) = home {
        files.extend([h.join("config.toml"), h.join("config")]);
    }
    let mut tables = Vec::new();
    for f in files.iter().filter(|f| f.is_file()) {
        let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let t: toml::Table = toml::from_str(&text).with_context(|| format!("{} is not TOML", f.display()))?;
        tables.push((f.clone(), t));
    }
    let source = |name: &str, key: &str| -> Option<(String, PathBuf)> {
        tables.iter().find_map(|(f, t)| {
            let v = t.get("source")?.get(name)?.get(key)?.as_str()?;
            Some((v.to_owned(), f.clone()))
        })
    };
    let mut name = "crates-io".to_owned();
    for _ in 0..MAX_REPLACEMENTS {
        match source(&name, "replace-with") {
            Some((next, _)) => name = next,
            None => break,
        }
    }
    if name == "crates-io" {
        return Ok(Url::parse(CRATES_IO_INDEX)?);
    }
    let Some((registry, file)) = source(&name, "registry") else {
        bail!(
            "cargo's configuration replaces crates.io with the source {name:?}, which is not a registry (a vendored \
             directory or a local registry); Atlas reads sparse registries: point it at one (sparse+https://…)"
        );
    };
    let sparse = match registry.strip_prefix("sparse+") {
        Some(u) => u.to_owned(),
        None if registry.trim_end_matches('/') == "https://github.com/rust-lang/crates.io-index" => {
            CRATES_IO_INDEX.to_owned()
        }
        None => bail!(
            "{}: the source {name:?} is a git registry ({registry}); Atlas reads sparse registries (sparse+https://…)",
            file.display()
        ),
    };
    let sparse = if sparse.ends_with('/') { sparse } else { format!("{sparse}/") };
    Url::parse(&sparse).with_context(|| format!("{}: the source {name:?} has no valid URL", file.display()))
}

/// A crate's path in a sparse index (`1/a`, `2/ab`, `3/a/abc`, `ab/cd/abcd…`), lower case.
pub fn index_path(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    match n.len() {
        1 => format!("1/{n}"),
        2 => format!("2/{n}"),
        3 => format!("3/{}/{n}", &n[..1]),
        _ => format!("{}/{}/{n}", &n[..2], &n[2..4]),
    }
}

/// One version of a crate, as an index line gives it.
#[derive(Debug, serde::Deserialize)]
struct IndexEntry {
    vers: String,
    cksum: String,
    #[serde(default)]
    yanked: bool,
}

/// The crate `spec` from cargo's registry, downloaded unless the state folder holds it
/// already (always when offline), and checked against the index's checksum.
fn fetch_crate(ctx: &Ctx<'_>, p: &CrawlParams, spec: &PackageSpec, state: &Path) -> anyhow::Result<Artifact> {
    let file = state.join("artifacts").join(format!("{}-{}.crate", spec.name, spec.version));
    let kept = || -> Option<Artifact> {
        let sha256 = std::fs::read_to_string(file.with_extension("crate.sha256")).ok()?.trim().to_owned();
        let bytes = std::fs::read(&file).ok()?;
        (atlas_runtime::hash::sha256_bytes(&bytes) == sha256).then(|| Artifact { path: file.clone(), sha256 })
    };
    if ctx.offline {
        return kept().with_context(|| {
            format!("{spec} is not in the cache and --offline fetches nothing; run once online to fetch it")
        });
    }
    let index = cargo_registry(&ctx.cfg.dir)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let fetcher = Fetcher::new(p)?;
    let mut notes = Vec::new();
    let get =
        |url: Url, limit: usize, notes: &mut Vec<String>| rt.block_on(fetcher.get(&url, None, None, limit, notes));
    let lines = match get(index.join(&index_path(&spec.name))?, MAX_INDEX_BYTES, &mut notes) {
        Outcome::Fetched { body, .. } => {
            String::from_utf8(body).context("the index answered with bytes that are not text")?
        }
        Outcome::Gone(_) => bail!("{spec}: no crate {:?} in the registry at {index}; check the name", spec.name),
        Outcome::Failed(why) => bail!("{spec}: the registry's index at {index} failed: {why}"),
        Outcome::NotModified => bail!("{spec}: the registry's index answered 304 to a plain GET"),
    };
    let mut published = Vec::new();
    let mut want = None;
    for line in lines.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(e) = serde_json::from_str::<IndexEntry>(line) else { continue };
        if e.vers == spec.version {
            want = Some(e);
        } else if !e.yanked {
            published.push(e.vers);
        }
    }
    let Some(entry) = want else {
        bail!(
            "{spec}: version {} is not published; the nearest are {}",
            spec.version,
            nearest(&published, &spec.version)
        );
    };
    if entry.yanked {
        bail!(
            "{spec} was yanked from the registry; Atlas never substitutes another version (published: {})",
            nearest(&published, &spec.version)
        );
    }
    let cksum = entry.cksum.to_ascii_lowercase();
    if cksum.len() != 64 || !cksum.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("{spec}: the index's checksum {:?} is not a sha256", entry.cksum);
    }
    if let Some(a) = kept().filter(|a| a.sha256 == cksum) {
        return Ok(a);
    }
    let dl = match get(index.join("config.json")?, 1 << 20, &mut notes) {
        Outcome::Fetched { body, .. } => {
            let v: serde_json::Value = serde_json::from_slice(&body).context("the index's config.json")?;
            v["dl"].as_str().context("the index's config.json names no `dl`")?.to_owned()
        }
        Outcome::Gone(_) | Outcome::NotModified => bail!("{spec}: the registry at {index} has no config.json"),
        Outcome::Failed(why) => bail!("{spec}: the registry's config.json failed: {why}"),
    };
    let url = Url::parse(&download_url(&dl, &spec.name, &spec.version, &cksum))
        .with_context(|| format!("{spec}: the registry's download URL {dl:?}"))?;
    let bytes = match get(url.clone(), MAX_ARTIFACT_BYTES, &mut notes) {
        Outcome::Fetched { body, .. } => body,
        Outcome::Gone(s) => bail!("{spec}: the registry has no download at {url} (HTTP {s})"),
        Outcome::Failed(why) => bail!("{spec}: downloading {url} failed: {why}"),
        Outcome::NotModified => bail!("{spec}: the download answered 304 to a plain GET"),
    };
    let got = atlas_runtime::hash::sha256_bytes(&bytes);
    if got != cksum {
        bail!(
            "{spec}: the download's sha256 is {got}, the registry's index says {cksum}; nothing was used (try again; report it if it persists)"
        );
    }
    let dir = file.parent().context("the artifacts folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    atlas_cache::atomic::write_file_atomic(&file, &bytes).with_context(|| format!("writing {}", file.display()))?;
    atlas_cache::atomic::write_file_atomic(&file.with_extension("crate.sha256"), got.as_bytes())?;
    Ok(Artifact { path: file, sha256: got })
}

/// The download URL of a crate: the index's `dl` with its markers filled in, or, with
/// none, `dl/NAME/VERSION/download` (cargo's rule).
pub fn download_url(dl: &str, name: &str, version: &str, sha256: &str) -> String {
    const MARKERS: [&str; 5] = ["{crate}", "{version}", "{prefix}", "{lowerprefix}", "{sha256-checksum}"];
    if !MARKERS.iter().any(|m| dl.contains(m)) {
        return format!("{}/{name}/{version}/download", dl.trim_end_matches('/'));
    }
    let prefix = index_path(name);
    let prefix = prefix.rsplit_once('/').map_or("", |(p, _)| p);
    dl.replace("{crate}", name)
        .replace("{version}", version)
        .replace("{lowerprefix}", &prefix.to_ascii_lowercase())
        .replace("{prefix}", prefix)
        .replace("{sha256-checksum}", sha256)
}

/// Up to five published versions nearest to `want` (semver order), or "none".
fn nearest(published: &[String], want: &str) -> String {
    let Ok(w) = semver::Version::parse(want) else { return published.join(", ") };
    let mut v: Vec<semver::Version> = published.iter().filter_map(|p| semver::Version::parse(p).ok()).collect();
    v.sort();
    if v.is_empty() {
        return "none".to_owned();
    }
    let at = v.partition_point(|x| *x < w);
    let from = at.saturating_sub(2);
    v[from..(from + 5).min(v.len())].iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// The artifact unpacked under the state folder (once per sha256), through the safe
/// extractor: its one top folder.
fn unpack(a: &Artifact, state: &Path) -> anyhow::Result<PathBuf> {
    let done = state.join("unpacked").join(&a.sha256);
    if let Some(top) = std::fs::read_dir(&done).ok().and_then(|mut d| d.next()).and_then(Result::ok) {
        return Ok(top.path());
    }
    let parent = state.join("unpacked");
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let staging = tempfile::tempdir_in(&parent)?;
    let x = atlas_dist::archive::extract_as(
        &a.path,
        staging.path(),
        &package_limits(),
        atlas_dist::archive::Compression::Gzip,
    )?;
    let _ = std::fs::remove_dir_all(&done);
    std::fs::rename(staging.keep(), &done).with_context(|| format!("keeping {}", done.display()))?;
    Ok(done.join(&x.top))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_paths_and_download_urls_follow_cargos_rules() {
        assert_eq!(index_path("a"), "1/a");
        assert_eq!(index_path("ab"), "2/ab");
        assert_eq!(index_path("abc"), "3/a/abc");
        assert_eq!(index_path("Serde_JSON"), "se/rd/serde_json");
        assert_eq!(
            download_url("https://static.crates.io/crates", "itoa", "1.0.15", "x"),
            "https://static.crates.io/crates/itoa/1.0.15/download"
        );
        assert_eq!(
            download_url(
                "https://r.test/{lowerprefix}/{crate}/{crate}-{version}.crate?s={sha256-checksum}",
                "Itoa",
                "1.0.0",
                "ff"
            ),
            "https://r.test/it/oa/Itoa/Itoa-1.0.0.crate?s=ff"
        );
        assert_eq!(
            nearest(&["1.0.0".into(), "1.0.2".into(), "1.1.0".into(), "2.0.0".into()], "1.0.1"),
            "1.0.0, 1.0.2, 1.1.0, 2.0.0"
        );
        assert_eq!(nearest(&[], "1.0.0"), "none");
    }

    #[test]
    fn cargo_source_replacement_is_followed_to_a_sparse_registry() {
        let t = tempfile::tempdir().unwrap();
        let project = t.path().join("project");
        std::fs::create_dir_all(project.join(".cargo")).unwrap();
        std::fs::write(
            project.join(".cargo/config.toml"),
            "[source.crates-io]\nreplace-with = \"corp\"\n[source.corp]\nregistry = \"sparse+http://127.0.0.1:9/index\"\n",
        )
        .unwrap();
        assert_eq!(cargo_registry(&project).unwrap().as_str(), "http://127.0.0.1:9/index/");
        std::fs::write(
            project.join(".cargo/config.toml"),
            "[source.crates-io]\nreplace-with = \"vendored\"\n[source.vendored]\ndirectory = \"vendor\"\n",
        )
        .unwrap();
        assert!(cargo_registry(&project).unwrap_err().to_string().contains("not a registry"));
        std::fs::write(
            project.join(".cargo/config.toml"),
            "[source.crates-io]\nreplace-with = \"g\"\n[source.g]\nregistry = \"https://git.example/index\"\n",
        )
        .unwrap();
        assert!(cargo_registry(&project).unwrap_err().to_string().contains("git registry"));
    }
}
