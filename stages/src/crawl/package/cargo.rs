//! Crates: the sparse index cargo's configuration names for crates.io (its source
//! replacement followed), the version's index line, and its `.crate`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use url::Url;

use super::{Checksum, Found, MAX_INDEX_BYTES, Net, nearest};
use crate::runner::PackageSpec;

/// How many `replace-with` hops cargo's configuration may take.
const MAX_REPLACEMENTS: usize = 8;
/// crates.io's sparse index.
pub const CRATES_IO_INDEX: &str = "https://index.crates.io/";

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

/// The crate `spec` in the registry cargo's configuration (from `dir` up) names.
pub fn find(net: &Net, dir: &Path, spec: &PackageSpec) -> anyhow::Result<Found> {
    let index = cargo_registry(dir)?;
    let lines = net
        .get(&index.join(&index_path(&spec.name))?, MAX_INDEX_BYTES, None, None)
        .with_context(|| format!("{spec}: the registry's index at {index}"))?
        .with_context(|| format!("{spec}: no crate {:?} in the registry at {index}; check the name", spec.name))?;
    let lines = String::from_utf8(lines).context("the index answered with bytes that are not text")?;
    let (mut published, mut want) = (Vec::new(), None);
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
    let config = net
        .get(&index.join("config.json")?, 1 << 20, None, None)?
        .with_context(|| format!("{spec}: the registry at {index} has no config.json"))?;
    let config: serde_json::Value = serde_json::from_slice(&config).context("the index's config.json")?;
    let dl = config["dl"].as_str().context("the index's config.json names no `dl`")?;
    let url = Url::parse(&download_url(dl, &spec.name, &spec.version, &cksum))
        .with_context(|| format!("{spec}: the registry's download URL {dl:?}"))?;
    Ok(Found { url, check: Checksum::Sha256(cksum), token: None })
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
