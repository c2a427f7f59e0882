//! Python packages: the index pip or uv is configured for, its JSON simple API (PEP
//! 691), and the version's sdist, checked against its sha256. A wheel-only release
//! is refused for now (wheels are zip files; the safe extractor reads tar).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use url::Url;

use super::{Checksum, Found, MAX_INDEX_BYTES, Net, nearest, split_user_info};
use crate::runner::PackageSpec;

/// PyPI's simple index.
pub const PYPI_INDEX: &str = "https://pypi.org/simple/";
/// The JSON form of the simple API.
const SIMPLE_JSON: &str = "application/vnd.pypi.simple.v1+json";

/// The index pip or uv would use for a project in `dir`: `UV_DEFAULT_INDEX`,
/// `UV_INDEX_URL` or `PIP_INDEX_URL`; else `uv.toml` (or `pyproject.toml`'s
/// `[tool.uv]`) in `dir` and above (`index-url`, or the `[[index]]` marked `default`);
/// else pip's configuration (`PIP_CONFIG_FILE`, `~/.config/pip/pip.conf`,
/// `~/.pip/pip.conf`: `[global] index-url`); else PyPI.
pub fn index(dir: &Path) -> anyhow::Result<Url> {
    let from_env = ["UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
    let found = match from_env {
        Some(u) => Some(u),
        None => uv_index(dir)?.or(pip_index()?),
    };
    let u = found.unwrap_or_else(|| PYPI_INDEX.to_owned());
    let u = if u.ends_with('/') { u } else { format!("{u}/") };
    Url::parse(&u).with_context(|| format!("the Python index {:?} is not a URL", atlas_dist::http::redact_url(&u)))
}

fn uv_index(dir: &Path) -> anyhow::Result<Option<String>> {
    for d in dir.ancestors() {
        for (file, under_tool) in [(d.join("uv.toml"), false), (d.join("pyproject.toml"), true)] {
            if !file.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let t: toml::Table = toml::from_str(&text).with_context(|| format!("{} is not TOML", file.display()))?;
            let t = if under_tool { t.get("tool").and_then(|t| t.get("uv")).cloned() } else { Some(t.into()) };
            let Some(t) = t else { continue };
            if let Some(u) = t.get("index-url").and_then(|v| v.as_str()) {
                return Ok(Some(u.to_owned()));
            }
            let default = t
                .get("index")
                .and_then(|v| v.as_array())
                .and_then(|a| a.iter().find(|i| i.get("default").and_then(toml::Value::as_bool) == Some(true)));
            if let Some(u) = default.and_then(|i| i.get("url")).and_then(|v| v.as_str()) {
                return Ok(Some(u.to_owned()));
            }
        }
    }
    Ok(None)
}

fn pip_index() -> anyhow::Result<Option<String>> {
    let mut files: Vec<PathBuf> = std::env::var_os("PIP_CONFIG_FILE").map(PathBuf::from).into_iter().collect();
    if let Some(h) = std::env::var_os("HOME").map(PathBuf::from) {
        files.extend([h.join(".config/pip/pip.conf"), h.join(".pip/pip.conf")]);
    }
    for f in files.iter().filter(|f| f.is_file()) {
        let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let mut global = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                global = line == "[global]";
            } else if global
                && let Some((k, v)) = line.split_once('=')
                && k.trim() == "index-url"
            {
                return Ok(Some(v.trim().to_owned()));
            }
        }
    }
    Ok(None)
}

/// A name as the simple API spells it (PEP 503): lower case, runs of `-_.` as `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = if matches!(c, '-' | '_' | '.') { '-' } else { c.to_ascii_lowercase() };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

/// The Python package `spec`: its sdist on `locked` (the index its lockfile names, its
/// source) or else on the index pip or uv is configured for.
pub fn find(net: &Net, dir: &Path, spec: &PackageSpec, locked: Option<&str>) -> anyhow::Result<Found> {
    // The index's user info is its credential, for the index's origin alone: a file
    // the page lists on another host is fetched without it.
    let (index, credential) = split_user_info(index(dir)?)?;
    // The lockfile's index, with the configured credential only where it is that
    // credential's own origin.
    let (index, credential) = match locked {
        Some(l) => {
            let l = if l.ends_with('/') { l.to_owned() } else { format!("{l}/") };
            let l = Url::parse(&l).with_context(|| {
                format!("{spec}: the lockfile's index {:?} is not a URL", atlas_dist::http::redact_url(&l))
            })?;
            let (l, own) = split_user_info(l)?;
            let credential = own.or(credential.filter(|c| c.applies_to(&l)));
            (l, credential)
        }
        None => (index, credential),
    };
    let page = index.join(&format!("{}/", normalize(&spec.name)))?;
    let body = net
        .get(&page, MAX_INDEX_BYTES, Some(SIMPLE_JSON), credential.as_ref())
        .map_err(|e| match e.downcast_ref::<super::Denied>() {
            Some(d) => anyhow::anyhow!(
                "{spec}: the index at {index} answered HTTP {} to {}; give its credentials as pip and uv take \
                 them, in the index URL (https://USER:TOKEN@host/simple/ in PIP_INDEX_URL, UV_INDEX_URL or their \
                 config files)",
                d.status,
                if credential.is_some() { "the credentials in its URL" } else { "a request without credentials" }
            ),
            None => e.context(format!("{spec}: the index at {index}")),
        })?
        .with_context(|| format!("{spec}: no project {:?} on the index at {index}; check the name", spec.name))?;
    let doc: serde_json::Value = serde_json::from_slice(&body)
        .with_context(|| format!("{spec}: the index at {index} did not answer with the JSON simple API (PEP 691)"))?;
    let files = doc["files"].as_array().context("the index's answer lists no files")?;
    let want = normalize(&spec.name);
    let mut versions = std::collections::BTreeSet::new();
    let (mut sdist, mut yanked, mut wheels) = (None, false, 0);
    for f in files {
        let name = f["filename"].as_str().unwrap_or_default();
        let (stem, is_sdist) = match name.strip_suffix(".tar.gz") {
            Some(s) => (s, true),
            None => (name.strip_suffix(".whl").unwrap_or(name), false),
        };
        // `<name>-<version>` (an sdist, whose older names keep their hyphens) or
        // `<name>-<version>-<tags>` (a wheel, whose name never holds one).
        let split = if is_sdist { stem.rsplit_once('-') } else { stem.split_once('-') };
        let Some((n, rest)) = split else { continue };
        let v = if is_sdist { rest } else { rest.split('-').next().unwrap_or(rest) };
        if normalize(n) != want {
            continue;
        }
        versions.insert(v.to_owned());
        if v != spec.version {
            continue;
        }
        let is_yanked = f["yanked"].as_bool().unwrap_or(false) || f["yanked"].is_string();
        match (is_sdist, is_yanked) {
            (_, true) => yanked = true,
            (true, false) => sdist = Some(f),
            (false, false) => wheels += 1,
        }
    }
    let Some(f) = sdist else {
        if yanked {
            bail!("{spec} was yanked from the index; Atlas never substitutes another version");
        }
        if wheels > 0 {
            bail!("{spec} is published as wheels only; Atlas reads sdists for now (wheels are zip files)");
        }
        let published: Vec<String> = versions.into_iter().collect();
        bail!(
            "{spec}: version {} is not published; the nearest are {}",
            spec.version,
            nearest(&published, &spec.version)
        );
    };
    let sha256 = f["hashes"]["sha256"].as_str().unwrap_or_default().to_ascii_lowercase();
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("{spec}: the index states no sha256 for its sdist; nothing is used unchecked");
    }
    let url = page.join(f["url"].as_str().context("the sdist has no URL")?)?;
    Ok(Found { url, check: Checksum::Sha256(sha256), credential })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_index_urls_user_info_becomes_a_credential_for_its_origin_alone() {
        let (u, c) =
            super::split_user_info(url::Url::parse("https://ci%40corp:s3cr%2Ft@pypi.corp.test/simple/").unwrap())
                .unwrap();
        assert_eq!(u.as_str(), "https://pypi.corp.test/simple/");
        let c = c.expect("a credential");
        assert_eq!(c.secret(), Some("Y2lAY29ycDpzM2NyL3Q="), "Basic base64(ci@corp:s3cr/t)");
        let at = |s: &str| c.applies_to(&url::Url::parse(s).unwrap());
        assert!(at("https://pypi.corp.test/simple/x/") && at("https://pypi.corp.test/files/x.tar.gz"));
        assert!(!at("https://files.pythonhosted.org/x.tar.gz") && !at("http://pypi.corp.test/simple/"));
        assert!(super::split_user_info(url::Url::parse("https://pypi.org/simple/").unwrap()).unwrap().1.is_none());
    }

    #[test]
    fn names_normalize_as_the_simple_api_spells_them() {
        assert_eq!(super::normalize("Foo.Bar__baz"), "foo-bar-baz");
        assert_eq!(super::normalize("requests"), "requests");
    }
}
