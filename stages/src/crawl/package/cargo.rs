//! Crates: the sparse index cargo's configuration names for crates.io (its source
//! replacement followed), the version's index line, and its `.crate`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use url::Url;

use super::{Checksum, Found, MAX_INDEX_BYTES, Net, nearest, split_user_info};
use crate::runner::PackageSpec;

/// How many `replace-with` hops cargo's configuration may take.
const MAX_REPLACEMENTS: usize = 8;
/// crates.io's sparse index.
pub const CRATES_IO_INDEX: &str = "https://index.crates.io/";

/// Cargo's home: `CARGO_HOME`, else `~/.cargo`.
pub fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

/// The sparse index cargo's configuration names for crates.io, read from the files
/// cargo reads: `.cargo/config.toml` (or `.cargo/config`) in `dir` and each folder
/// above it, then `$CARGO_HOME/config.toml`; the first file that says a key wins.
pub fn cargo_registry(dir: &Path) -> anyhow::Result<Url> {
    Ok(cargo_registry_named(dir)?.0)
}

/// [`cargo_registry`] with the registry's name in cargo's configuration (`crates-io`,
/// or the source that replaces it), and the files read (for its token).
fn cargo_registry_named(dir: &Path) -> anyhow::Result<(Url, String, Vec<toml::Table>)> {
    let mut files: Vec<PathBuf> =
        dir.ancestors().flat_map(|d| [d.join(".cargo/config.toml"), d.join(".cargo/config")]).collect();
    let home = cargo_home();
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
    let configs = || tables.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>();
    if name == "crates-io" {
        return Ok((Url::parse(CRATES_IO_INDEX)?, name, configs()));
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
            "{}: the source {name:?} is a git registry ({}); Atlas reads sparse registries (sparse+https://…)",
            file.display(),
            atlas_dist::http::redact_url(&registry)
        ),
    };
    let sparse = if sparse.ends_with('/') { sparse } else { format!("{sparse}/") };
    let url =
        Url::parse(&sparse).with_context(|| format!("{}: the source {name:?} has no valid URL", file.display()))?;
    Ok((url, name, configs()))
}

/// The token cargo would send to the registry `name` at `index`: from
/// `CARGO_REGISTRIES_<NAME>_TOKEN` (`CARGO_REGISTRY_TOKEN` for crates.io), else
/// `$CARGO_HOME/credentials.toml`. A `[registries.<x>]` of cargo's configuration whose
/// `index` is this registry's names it too. The user's crates.io token goes to
/// crates.io's own index alone, whatever a configuration names `crates-io`.
fn registry_token(name: &str, index: &Url, configs: &[toml::Table]) -> Option<String> {
    let names = token_names(name, index, configs);
    let env = |n: &str| match n {
        "crates-io" => std::env::var("CARGO_REGISTRY_TOKEN").ok(),
        n => std::env::var(format!("CARGO_REGISTRIES_{}_TOKEN", n.to_ascii_uppercase().replace('-', "_"))).ok(),
    };
    if let Some(t) = names.iter().find_map(|n| env(n)).filter(|t| !t.is_empty()) {
        return Some(t);
    }
    let home = cargo_home()?;
    let creds = ["credentials.toml", "credentials"]
        .iter()
        .find_map(|f| std::fs::read_to_string(home.join(f)).ok())
        .and_then(|t| toml::from_str::<toml::Table>(&t).ok())?;
    names.iter().find_map(|n| {
        let entry = match n.as_str() {
            "crates-io" => creds.get("registry"),
            n => creds.get("registries").and_then(|r| r.get(n)),
        };
        entry?.get("token")?.as_str().map(str::to_owned)
    })
}

/// The names cargo's configuration gives the registry `name` at `index`, whose tokens
/// may go to it: its own, and each `[registries.<x>]` whose `index` is this one; never
/// `crates-io` unless the index is crates.io's own.
fn token_names(name: &str, index: &Url, configs: &[toml::Table]) -> Vec<String> {
    let mut names = vec![name.to_owned()];
    for t in configs {
        for (x, r) in t.get("registries").and_then(|r| r.as_table()).into_iter().flatten() {
            let i = r.get("index").and_then(|i| i.as_str()).unwrap_or("");
            if i.trim_start_matches("sparse+").trim_end_matches('/') == index.as_str().trim_end_matches('/') {
                names.push(x.clone());
            }
        }
    }
    names.retain(|n| n != "crates-io" || index.as_str() == CRATES_IO_INDEX);
    names
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
    let (index, name, configs) = cargo_registry_named(dir)?;
    // The registry's config first: it says where downloads are and whether every
    // request needs the token (`auth-required`), which then goes to its origin only.
    // User info in the index's URL is a credential too, and never printed.
    let (index, in_url) = split_user_info(index)?;
    let token = match registry_token(&name, &index, &configs) {
        Some(t) => Some(atlas_dist::http::Credential::raw(index.as_str(), &t)?),
        None => in_url,
    };
    let config_url = index.join("config.json")?;
    let config = match net.get(&config_url, 1 << 20, None, None) {
        Ok(c) => c,
        // A private registry may answer its config only with the token (cargo retries so).
        Err(_) if token.is_some() => net.get(&config_url, 1 << 20, None, token.as_ref())?,
        Err(e) => return Err(e),
    }
    .with_context(|| format!("{spec}: the registry at {index} has no config.json"))?;
    let config: serde_json::Value = serde_json::from_slice(&config).context("the index's config.json")?;
    let token = match config["auth-required"].as_bool() == Some(true) {
        true => Some(token.with_context(|| {
            format!(
                "{spec}: the registry {name:?} at {index} requires a token; set CARGO_REGISTRIES_{}_TOKEN or run \
                 `cargo login --registry {name}`",
                name.to_ascii_uppercase().replace('-', "_")
            )
        })?),
        false => None,
    };
    let lines = net
        .get(&index.join(&index_path(&spec.name))?, MAX_INDEX_BYTES, None, token.as_ref())
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
    let dl = config["dl"].as_str().context("the index's config.json names no `dl`")?;
    let url = Url::parse(&download_url(dl, &spec.name, &spec.version, &cksum))
        .with_context(|| format!("{spec}: the registry's download URL {dl:?}"))?;
    // The token is bound to the registry's origin: a download elsewhere goes without it.
    Ok(Found { url, check: Checksum::Sha256(cksum), credential: token })
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
    fn the_crates_io_token_never_goes_to_a_registry_a_config_names_crates_io() {
        let config: toml::Table = toml::from_str(
            "[registries.crates-io]\nindex = \"sparse+http://127.0.0.1:9/index/\"\n\
             [registries.corp]\nindex = \"sparse+http://127.0.0.1:9/index\"\n",
        )
        .unwrap();
        let mirror = Url::parse("http://127.0.0.1:9/index/").unwrap();
        assert_eq!(token_names("mirror", &mirror, std::slice::from_ref(&config)), ["mirror", "corp"]);
        let crates_io = Url::parse(CRATES_IO_INDEX).unwrap();
        assert_eq!(token_names("crates-io", &crates_io, &[]), ["crates-io"]);
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
