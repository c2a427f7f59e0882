//! Packages and the names of their libraries: one place for both.
//!
//! A package at an exact version is a [`PackageSpec`] (`crate:tokio@1.40.0`,
//! `npm:@scope/x@1.2.3`, `pypi:requests@2.32.3`). Its library has two spellings:
//!
//! - **shown** (hits, `list_libraries`, pins, `atlas bundles`): `crate:tokio`,
//!   `npm:@scope/x`, `pypi:requests`;
//! - **stored** (the bundle's name in its manifest, its folder under `ATLAS_HOME`, its
//!   archive, resource URIs, fs paths): `crate+tokio`, `npm+scope+x`, `pypi+requests`:
//!   one plain file-name component on every platform ([`crate::safe_path::is_safe_name`]),
//!   with no `:`, `/` or `@`. `+` appears in no crate, npm or PyPI name, so the
//!   mapping goes both ways.
//!
//! A library that is not a package (a docs bundle) has one spelling. Wherever a name
//! is asked for, all three forms are taken: shown, stored, and the bare package name
//! (`tokio`) when only one served library has it ([`matches`]).

use std::fmt;

/// The registries a package comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ecosystem {
    /// crates.io, or the registry cargo's configuration replaces it with.
    Crate,
    /// The npm registry `.npmrc` names (scoped packages by their scope's registry).
    Npm,
    /// The Python package index pip or uv is configured for.
    Pypi,
}

impl Ecosystem {
    pub const ALL: [Ecosystem; 3] = [Ecosystem::Crate, Ecosystem::Npm, Ecosystem::Pypi];

    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Crate => "crate",
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pypi",
        }
    }

    fn parse(s: &str) -> Option<Ecosystem> {
        Ecosystem::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// A package at an exact version: `crate:NAME@VERSION`, `npm:NAME@VERSION` (scoped
/// names too: `npm:@scope/name@1.2.3`), `pypi:NAME@VERSION`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PackageSpec {
    pub ecosystem: Ecosystem,
    /// As the registry names it; a Python name normalized (PEP 503: lower case, runs
    /// of `-_.` as one `-`).
    pub name: String,
    pub version: String,
}

impl PackageSpec {
    /// The artifact's file name in a source's state folder: plain characters only.
    pub fn file_name(&self) -> String {
        let ext = match self.ecosystem {
            Ecosystem::Crate => "crate",
            Ecosystem::Npm => "tgz",
            Ecosystem::Pypi => "tar.gz",
        };
        format!("{}-{}.{ext}", stored_name(&self.shown_name()), self.version)
    }

    /// The library's shown name: `crate:tokio`, `npm:@scope/x`, `pypi:requests`.
    pub fn shown_name(&self) -> String {
        format!("{}:{}", self.ecosystem.as_str(), self.name)
    }

    /// The library's stored name (its bundle's name): `crate+tokio`, `npm+scope+x`.
    pub fn bundle_name(&self) -> String {
        stored_name(&self.shown_name())
    }

    /// A source name for the package inside its bundle (the mirror's first folder):
    /// the bare name, a scope's `@` and `/` made plain.
    pub fn source_name(&self) -> String {
        self.name.trim_start_matches('@').replace('/', "-")
    }
}

/// Why a package spec was refused; one line that says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("package {spec:?}: {why}")]
pub struct BadSpec {
    spec: String,
    why: String,
}

impl std::str::FromStr for PackageSpec {
    type Err = BadSpec;
    fn from_str(spec: &str) -> Result<PackageSpec, BadSpec> {
        let bad = |why: String| BadSpec { spec: crate::utf8::clip_chars(spec, 200), why };
        let (eco, rest) = spec
            .split_once(':')
            .ok_or_else(|| bad("names no ecosystem; write crate:, npm: or pypi:NAME@VERSION".into()))?;
        let ecosystem = Ecosystem::parse(eco)
            .ok_or_else(|| bad(format!("unknown ecosystem {eco:?}; write crate:, npm: or pypi:")))?;
        let Some((name, version)) = split_version(rest) else {
            return Err(bad(format!("has no version; write {eco}:NAME@VERSION (an exact version)")));
        };
        if !valid_name(ecosystem, name) {
            return Err(bad(format!("{name:?} is not a {eco} package name")));
        }
        if !exact_version(ecosystem, version) {
            return Err(bad(format!("{version:?} is not an exact version; a package source installs one version")));
        }
        let name = match ecosystem {
            Ecosystem::Pypi => pep503(name),
            _ => name.to_owned(),
        };
        Ok(PackageSpec { ecosystem, name, version: version.to_owned() })
    }
}

impl fmt::Display for PackageSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.shown_name(), self.version)
    }
}

/// The checksum a registry states for an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checksum {
    /// Hex sha256 (a crate's `cksum`, a Python file's `sha256`).
    Sha256(String),
    /// An npm `integrity`: `sha512-<base64>`.
    Sri512(String),
}

impl std::str::FromStr for Checksum {
    type Err = String;
    /// A lockfile's checksum: `sha256:<hex>` (or 64 bare hex digits, as Cargo.lock
    /// writes them), or an SRI `sha512-<base64>`.
    fn from_str(s: &str) -> Result<Checksum, String> {
        let hex = s.strip_prefix("sha256:").unwrap_or(s).to_ascii_lowercase();
        if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Checksum::Sha256(hex))
        } else if s.strip_prefix("sha512-").is_some_and(|b| b.len() == 88) {
            Ok(Checksum::Sri512(s.to_owned()))
        } else {
            Err(format!(
                "{:?} is not a checksum; write sha256:<64 hex digits> or sha512-<base64>",
                crate::utf8::clip_chars(s, 100)
            ))
        }
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Checksum::Sha256(h) => write!(f, "sha256:{h}"),
            Checksum::Sri512(s) => f.write_str(s),
        }
    }
}

impl Checksum {
    /// Whether `bytes` are what the registry states.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        match self {
            Checksum::Sha256(want) => crate::hash::sha256_bytes(bytes) == *want,
            Checksum::Sri512(want) => crate::hash::sri_sha512(bytes) == *want,
        }
    }
}

/// `name@version` split at the last `@` that is not a scope's (`@scope/x@1` →
/// (`@scope/x`, `1`)); None without a version.
pub fn split_version(s: &str) -> Option<(&str, &str)> {
    let i = s.rfind('@').filter(|&i| i > 0 && !s[..i].ends_with(':'))?;
    Some((&s[..i], &s[i + 1..]))
}

/// Whether `name` is a package name of `eco` by its registry's rules.
pub fn valid_name(eco: Ecosystem, name: &str) -> bool {
    let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    match eco {
        // crates.io's rules: ASCII letters, digits, '-' and '_', at most 64, a letter first.
        Ecosystem::Crate => {
            name.len() <= 64
                && name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }
        // npm's: at most 214, URL-safe; a scope is `@scope/`.
        Ecosystem::Npm => {
            let bare = match name.strip_prefix('@') {
                Some(scoped) => {
                    scoped.split_once('/').filter(|(s, n)| plain(s) && plain(n) && !s.starts_with('.')).map(|(_, n)| n)
                }
                None => Some(name),
            };
            name.len() <= 214 && bare.is_some_and(|n| plain(n) && !n.starts_with('.'))
        }
        // PEP 508 names: letters, digits, '-', '_', '.', a letter or digit first.
        Ecosystem::Pypi => name.len() <= 200 && plain(name) && name.starts_with(|c: char| c.is_ascii_alphanumeric()),
    }
}

/// Whether `version` names one release (not a range).
pub fn exact_version(eco: Ecosystem, version: &str) -> bool {
    match eco {
        Ecosystem::Crate | Ecosystem::Npm => semver::Version::parse(version).is_ok(),
        // PEP 440: an exact version holds no range operator.
        Ecosystem::Pypi => {
            version.starts_with(|c: char| c.is_ascii_digit())
                && version.len() <= 100
                && version.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+!-".contains(&b))
        }
    }
}

/// PEP 503's normal form of a Python name: lower case, each run of `-`, `_`, `.` one `-`.
pub fn pep503(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// How a project's own working tree is named as a library (`project:NAME`, stored
/// `project+NAME`).
pub const PROJECT_PREFIX: &str = "project:";

/// The stored spelling of a library name: `crate:tokio` → `crate+tokio`,
/// `npm:@scope/x` → `npm+scope+x`; a Python name in either spelling normalized
/// (`pypi:Python_Dotenv`, `pypi+Python_Dotenv` → `pypi+python-dotenv`); a name that
/// is not a package's (or already stored) as it is.
pub fn stored_name(name: &str) -> String {
    match name.split_once(':').and_then(|(e, n)| Some((Ecosystem::parse(e)?, n))) {
        Some((eco, n)) => {
            let n = if eco == Ecosystem::Pypi { pep503(n) } else { n.to_owned() };
            format!("{}+{}", eco.as_str(), n.trim_start_matches('@').replace('/', "+"))
        }
        None => match (name.strip_prefix("pypi+"), name.strip_prefix(PROJECT_PREFIX)) {
            (Some(n), _) => format!("pypi+{}", pep503(n)),
            (_, Some(n)) => format!("project+{n}"),
            _ => name.to_owned(),
        },
    }
}

/// The stored spelling of a library label, `name@version` or a name alone: what the
/// fs server's paths start with (`crate:clap@4.5.20` → `crate+clap@4.5.20`,
/// `npm:@scope/x@1.2.3` → `npm+scope+x@1.2.3`). The one map from a hit's `library`
/// to an fs path.
pub fn stored_label(label: &str) -> String {
    match split_version(label) {
        Some((name, version)) => format!("{}@{version}", stored_name(name)),
        None => stored_name(label),
    }
}

/// The shown spelling of a stored name: `crate+tokio` → `crate:tokio`, `npm+scope+x`
/// → `npm:@scope/x`; any other name as it is.
pub fn shown_name(stored: &str) -> String {
    let Some((eco, rest)) = stored.split_once('+').and_then(|(e, r)| Some((Ecosystem::parse(e)?, r))) else {
        return match stored.strip_prefix("project+") {
            Some(n) => format!("{PROJECT_PREFIX}{n}"),
            None => stored.to_owned(),
        };
    };
    match (eco, rest.split_once('+')) {
        (Ecosystem::Npm, Some((scope, n))) => format!("npm:@{scope}/{n}"),
        (_, None) => format!("{}:{rest}", eco.as_str()),
        _ => stored.to_owned(),
    }
}

/// The bare package name of a stored or shown name (`crate+tokio` → `tokio`,
/// `npm:@scope/x` → `@scope/x`); None for a library that is not a package.
pub fn bare_name(name: &str) -> Option<String> {
    let shown = shown_name(&stored_name(name));
    shown.split_once(':').map(|(_, n)| n.to_owned())
}

/// Whether the library stored as `stored` is the one `asked` names: its stored or
/// shown spelling, or its bare package name (the caller checks that the bare name is
/// not ambiguous). A Python name matches in any spelling PEP 503 makes one
/// (`Pydantic`, `python_dotenv`, `pypi:Python.Dotenv`).
pub fn matches(stored: &str, asked: &str) -> bool {
    let python = stored.starts_with("pypi+");
    stored == asked
        || stored == stored_name(asked)
        || bare_name(stored).is_some_and(|b| b == asked || (python && b == pep503(asked)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_their_registrys_rules() {
        let s: PackageSpec = "npm:@corp/strings@2.1.0".parse().unwrap();
        assert_eq!((s.name.as_str(), s.version.as_str()), ("@corp/strings", "2.1.0"));
        assert_eq!(s.bundle_name(), "npm+corp+strings");
        assert_eq!(s.source_name(), "corp-strings");
        assert_eq!(s.file_name(), "npm+corp+strings-2.1.0.tgz");
        let p: PackageSpec = "pypi:Typing_Extensions@4.12.2".parse().unwrap();
        assert_eq!(p.to_string(), "pypi:typing-extensions@4.12.2");
        for (bad, why) in [
            ("itoa@1.0.0", "names no ecosystem"),
            ("gem:rails@7.1.0", "unknown ecosystem"),
            ("crate:itoa", "has no version"),
            ("npm:@corp/strings", "has no version"),
            ("crate:itoa@^1", "not an exact version"),
            ("crate:../x@1.0.0", "not a crate package name"),
            ("npm:@a/../b@1.0.0", "not a npm package name"),
            ("npm:@../b@1.0.0", "not a npm package name"),
        ] {
            let e = bad.parse::<PackageSpec>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn names_go_both_ways_and_stored_ones_are_file_names() {
        for (shown, stored) in [
            ("crate:tokio", "crate+tokio"),
            ("npm:@scope/x", "npm+scope+x"),
            ("npm:zod", "npm+zod"),
            ("pypi:requests", "pypi+requests"),
            ("docs", "docs"),
        ] {
            assert_eq!(stored_name(shown), stored);
            assert_eq!(stored_name(stored), stored, "stored is a fixed point");
            assert_eq!(shown_name(stored), shown);
            assert!(crate::safe_path::is_safe_name(stored), "{stored}");
        }
        assert_eq!(stored_name("pypi:Typing.Extensions"), "pypi+typing-extensions");
        assert_eq!(bare_name("npm+scope+x").as_deref(), Some("@scope/x"));
        assert_eq!(bare_name("docs"), None);
        assert!(matches("crate+tokio", "crate:tokio") && matches("crate+tokio", "tokio"));
        assert!(matches("crate+tokio", "crate+tokio") && !matches("crate+tokio", "npm:tokio"));
        assert!(matches("docs", "docs") && !matches("docs", "doc"));
        assert_eq!(stored_label("crate:clap@4.5.20"), "crate+clap@4.5.20");
        assert_eq!(stored_label("npm:@scope/x@1.2.3"), "npm+scope+x@1.2.3");
        assert_eq!(stored_label("crate+clap@4.5.20"), "crate+clap@4.5.20");
        assert_eq!(stored_label("npm:@scope/x"), "npm+scope+x");
        assert_eq!(stored_label("docs@1.0.0"), "docs@1.0.0");
    }

    #[test]
    fn a_python_library_is_named_in_any_spelling_pep_503_makes_one() {
        for asked in ["Pydantic", "pydantic", "PYDANTIC", "pypi:Pydantic", "pypi+Pydantic", "pypi+pydantic"] {
            assert!(matches("pypi+pydantic", asked), "{asked}");
        }
        for asked in ["python_dotenv", "Python.Dotenv", "python--dotenv", "pypi:python_dotenv", "pypi+Python_Dotenv"] {
            assert!(matches("pypi+python-dotenv", asked), "{asked}");
        }
        assert!(!matches("pypi+python-dotenv", "pythondotenv"));
        // Other ecosystems' names stay exact: a crate's `_` and `-` are two names.
        assert!(!matches("crate+serde_json", "serde-json") && !matches("crate+tokio", "Tokio"));
        assert_eq!(stored_name("pypi+Python_Dotenv"), "pypi+python-dotenv");
    }
}
