//! npm packages: the registry `.npmrc` names (a scope's own registry first), the
//! version's packument entry, and its tarball, checked against its sha512 integrity.
//! A token (`//host[:port]/path/:_authToken`) belongs to the registry whose host, port
//! and leading whole path segments it names (npm's rule), and goes to that registry's
//! origin only.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use url::Url;

use super::{Checksum, Found, MAX_INDEX_BYTES, Net, nearest, split_user_info};
use crate::runner::PackageSpec;

/// The public npm registry.
pub const NPM_REGISTRY: &str = "https://registry.npmjs.org/";

/// What `.npmrc` files say: `key=value` lines, the first file that sets a key winning.
#[derive(Debug, Default)]
pub struct Npmrc(Vec<(String, String)>);

impl Npmrc {
    /// The `.npmrc` files npm reads for a project in `dir`: the project's (in `dir` and
    /// each folder above it), then the user's (`NPM_CONFIG_USERCONFIG` or `~/.npmrc`);
    /// `NPM_CONFIG_REGISTRY` before them all.
    pub fn load(dir: &Path) -> anyhow::Result<Npmrc> {
        let mut files: Vec<PathBuf> = dir.ancestors().map(|d| d.join(".npmrc")).collect();
        match std::env::var_os("NPM_CONFIG_USERCONFIG").or_else(|| std::env::var_os("npm_config_userconfig")) {
            Some(f) => files.push(PathBuf::from(f)),
            None => files.extend(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".npmrc"))),
        }
        let mut rc = Npmrc::default();
        if let Some(r) = std::env::var("NPM_CONFIG_REGISTRY").ok().or_else(|| std::env::var("npm_config_registry").ok())
        {
            rc.0.push(("registry".into(), r));
        }
        for f in files.iter().filter(|f| f.is_file()) {
            let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with(['#', ';'])) {
                if let Some((k, v)) = line.split_once('=') {
                    rc.0.push((k.trim().to_owned(), expand_env(v.trim().trim_matches('"'))));
                }
            }
        }
        Ok(rc)
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The registry for `name`: its scope's (`@scope:registry`), else `registry`, else
    /// the public one; with a trailing slash.
    pub fn registry(&self, name: &str) -> anyhow::Result<Url> {
        let scoped = name.split_once('/').filter(|_| name.starts_with('@')).map(|(s, _)| format!("{s}:registry"));
        let r = scoped.as_deref().and_then(|k| self.get(k)).or_else(|| self.get("registry")).unwrap_or(NPM_REGISTRY);
        let r = if r.ends_with('/') { r.to_owned() } else { format!("{r}/") };
        Url::parse(&r)
            .with_context(|| format!(".npmrc: the registry {:?} is not a URL", atlas_dist::http::redact_url(&r)))
    }

    /// The `_authToken` for `registry`: of the `//host[:port]/path/:_authToken` keys
    /// that name its host and port and whole leading segments of its path, the one
    /// with the most segments (npm's match; never a string prefix, which would give
    /// `//host:1846/`'s token to port 18461, or `//registry.npmjs.org/`'s to
    /// `registry.npmjs.org.attacker.example`).
    pub fn token(&self, registry: &Url) -> Option<String> {
        self.0
            .iter()
            .filter_map(|(k, v)| Some((k.strip_suffix(":_authToken")?, v)))
            .filter_map(|(key, v)| Some((covers(key, registry)?, v)))
            .max_by_key(|(segments, _)| *segments)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    }
}

/// How many path segments of `registry` the `.npmrc` key `//host[:port]/path/` covers
/// when it names the registry's host, its port (the scheme's default when it names
/// none) and whole leading segments of its path; None when it does not name it.
fn covers(key: &str, registry: &Url) -> Option<usize> {
    let rest = key.strip_prefix("//")?;
    let k = Url::parse(&format!("{}://{rest}", registry.scheme())).ok()?;
    if k.host_str()? != registry.host_str()? || k.port_or_known_default() != registry.port_or_known_default() {
        return None;
    }
    let segments = |u: &Url| -> Vec<String> {
        u.path_segments().into_iter().flatten().filter(|s| !s.is_empty()).map(str::to_owned).collect()
    };
    let (key_path, registry_path) = (segments(&k), segments(registry));
    registry_path.starts_with(&key_path).then_some(key_path.len())
}

/// `${VAR}` in an `.npmrc` value, from the environment (npm's rule); unset is empty.
fn expand_env(v: &str) -> String {
    let mut out = String::new();
    let mut rest = v;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        match rest[i + 2..].find('}') {
            Some(j) => {
                out.push_str(&std::env::var(&rest[i + 2..i + 2 + j]).unwrap_or_default());
                rest = &rest[i + 3 + j..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The npm package `spec` in the registry `.npmrc` (from `dir` up) names.
pub fn find(net: &Net, dir: &Path, spec: &PackageSpec) -> anyhow::Result<Found> {
    let rc = Npmrc::load(dir)?;
    // User info in the registry's URL is its credential (for its origin), unless a
    // token names the registry; either way the URL printed holds none.
    let (registry, in_url) = split_user_info(rc.registry(&spec.name)?)?;
    let token = match rc.token(&registry) {
        Some(t) => Some(atlas_dist::http::Credential::bearer(registry.as_str(), &t)?),
        None => in_url,
    };
    // A scoped name is one path segment: `@scope%2fname`.
    let url = registry.join(&spec.name.replace('/', "%2f"))?;
    let body = net
        .get(&url, MAX_INDEX_BYTES, Some("application/json"), token.as_ref())
        .map_err(|e| match e.downcast_ref::<super::Denied>() {
            Some(d) => anyhow::anyhow!(
                "{spec}: the registry at {registry} answered HTTP {} to {}; set its token as npm takes it \
                 (`//host/path/:_authToken=…` in .npmrc)",
                d.status,
                if token.is_some() { "the token .npmrc gives it" } else { "a request without a token" }
            ),
            None => e.context(format!("{spec}: the registry at {registry}")),
        })?
        .with_context(|| format!("{spec}: no package {:?} in the registry at {registry}; check the name", spec.name))?;
    let doc: serde_json::Value = serde_json::from_slice(&body).context("the registry's answer is not JSON")?;
    if doc["time"]["unpublished"].is_object() {
        bail!("{spec}: the package was unpublished from the registry; Atlas never substitutes another");
    }
    let versions = doc["versions"].as_object().context("the registry's answer lists no versions")?;
    let Some(v) = versions.get(&spec.version) else {
        let published: Vec<String> = versions.keys().cloned().collect();
        bail!(
            "{spec}: version {} is not published; the nearest are {}",
            spec.version,
            nearest(&published, &spec.version)
        );
    };
    let tarball = v["dist"]["tarball"].as_str().context("the version names no tarball")?;
    let integrity = v["dist"]["integrity"].as_str().unwrap_or_default();
    let Some(sri) = integrity.split_whitespace().find(|i| i.starts_with("sha512-")) else {
        bail!("{spec}: the registry states no sha512 integrity for it (only a sha1); Atlas does not trust sha1 alone");
    };
    let url = Url::parse(tarball).or_else(|_| registry.join(tarball)).context("the tarball's URL")?;
    // The token is bound to the registry's origin: a tarball elsewhere goes without it.
    Ok(Found { url, check: Checksum::Sri512(sri.to_owned()), credential: token })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npmrc_names_the_scopes_registry_and_its_token() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join(".npmrc"),
            "registry=http://127.0.0.1:9/npm\n@corp:registry=http://127.0.0.1:8/corp/\n//127.0.0.1:8/corp/:_authToken=${ATLAS_TEST_NPM_TOKEN_UNSET}tok\n",
        )
        .unwrap();
        let rc = Npmrc::load(t.path()).unwrap();
        assert_eq!(rc.registry("left-pad").unwrap().as_str(), "http://127.0.0.1:9/npm/");
        let corp = rc.registry("@corp/x").unwrap();
        assert_eq!(corp.as_str(), "http://127.0.0.1:8/corp/");
        assert_eq!(rc.token(&corp).as_deref(), Some("tok"));
        assert_eq!(rc.token(&rc.registry("left-pad").unwrap()), None);
    }

    #[test]
    fn an_npm_token_goes_only_to_the_host_port_and_whole_path_segments_it_names() {
        let rc = Npmrc(vec![
            ("//127.0.0.1:1846/:_authToken".into(), "port-1846".into()),
            ("//registry.npmjs.org/:_authToken".into(), "public".into()),
            ("//npm.corp.test/team/:_authToken".into(), "team".into()),
            ("//npm.corp.test/team/private/:_authToken".into(), "private".into()),
        ]);
        let token = |u: &str| rc.token(&Url::parse(u).unwrap());
        assert_eq!(token("http://127.0.0.1:1846/").as_deref(), Some("port-1846"));
        assert_eq!(token("http://127.0.0.1:18461/"), None, "another port");
        assert_eq!(token("https://registry.npmjs.org/").as_deref(), Some("public"));
        assert_eq!(token("https://registry.npmjs.org.attacker.example/"), None, "another host");
        assert_eq!(token("https://registry.npmjs.org:8443/"), None, "a port the key does not name");
        assert_eq!(token("https://npm.corp.test/team/").as_deref(), Some("team"));
        assert_eq!(token("https://npm.corp.test/team/private/x/").as_deref(), Some("private"), "the longest");
        assert_eq!(token("https://npm.corp.test/teamwork/"), None, "a segment is whole");
        assert_eq!(token("https://npm.corp.test/"), None, "a key for a path names only what is under it");
    }
}
