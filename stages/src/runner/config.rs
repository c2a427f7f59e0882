//! `pipeline.yaml`: named sources and the params of each stage.
//!
//! Parsing is strict: an unknown key, source kind or stage is an error that names the
//! file, the line and the key. Params are filled with their defaults and then
//! canonicalised to JSON, so writing a default out explicitly changes no cache key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use atlas_runtime::package::PackageSpec;

use serde::Deserialize;
use serde::de::IgnoredAny;

/// A config problem: the user must fix the file. Reported on one line, exit code 2.
pub use atlas_runtime::exit::UsageError as ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Bundle name; servers are called `<name>-fs` and `<name>-rag`.
    pub name: String,
    /// Where final outputs are written, relative to the config file.
    #[serde(default)]
    pub out: Option<PathBuf>,
    pub sources: BTreeMap<String, SourceConfig>,
    /// `stages.<name>`: here only the names are read; [`configure_stages`] reads each
    /// section as its stage's typed params.
    #[serde(default)]
    pub stages: BTreeMap<String, IgnoredAny>,
    /// Where `atlas-pipeline publish` sends the archive, and the key users trust.
    #[serde(default)]
    pub publish: PublishConfig,
    /// The shared build cache.
    #[serde(default)]
    pub cache: CacheConfig,
}

/// `cache:` in pipeline.yaml: a remote build cache shared by machines (docs/pipeline.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// `s3://bucket/prefix`, `gs://…`, `az://…` or `file:///…`.
    #[serde(default)]
    pub remote: Option<String>,
    /// Seconds each remote request may take before the run goes on locally (default 10).
    #[serde(default)]
    pub timeout_s: Option<u64>,
    /// The remote has one writer you trust (your CI): its refs need no signature.
    #[serde(default)]
    pub trusted: Option<bool>,
    /// Public keys (`RW…` or `.pub` paths) whose signed refs are used.
    #[serde(default)]
    pub trusted_keys: Vec<String>,
    /// The minisign secret key this machine signs the refs it writes with, relative to
    /// this file.
    #[serde(default)]
    pub sign: Option<PathBuf>,
    /// Read the remote, never write it.
    #[serde(default)]
    pub read_only: Option<bool>,
}

/// `publish:` in pipeline.yaml; flags override each field.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishConfig {
    /// `OWNER/REPO` of a GitHub release target.
    #[serde(default)]
    pub github: Option<String>,
    /// The release tag (default `v<version>`).
    #[serde(default)]
    pub tag: Option<String>,
    /// An object store URL (`s3://bucket/prefix`, `gs://…`, `az://…`, `file:///…`).
    #[serde(default)]
    pub to: Option<String>,
    /// The GitHub API root (GitHub Enterprise).
    #[serde(default)]
    pub api_url: Option<String>,
    /// The minisign secret key to sign with, relative to this file.
    #[serde(default)]
    pub sign: Option<PathBuf>,
    /// The public key users pass to `atlas install --trust` (printed with the
    /// install instructions).
    #[serde(default)]
    pub public_key: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SourceConfig {
    /// Files on disk, walked with the `ignore` crate (hidden and git-ignored files are
    /// skipped). Markdown files are documents; other included text files are chunked
    /// as code.
    Local {
        path: PathBuf,
        #[serde(default = "default_include")]
        include: Vec<String>,
        #[serde(default)]
        exclude: Vec<String>,
        /// An llms.txt inside the folder (a local copy of a GitBook site keeps the
        /// site's): each page it lists is cited by its public URL, not its path.
        #[serde(default)]
        public_urls: Option<PathBuf>,
    },
    /// A GitBook (or any) site that publishes `llms.txt`; fetched by the crawl stage.
    LlmsTxt {
        url: String,
        #[serde(default)]
        sections: Vec<String>,
        #[serde(default)]
        max_pages: Option<usize>,
        /// Other hosts whose pages may be fetched when llms.txt links to them (`host`
        /// or `host:port`). Links to any other host are reported, never fetched.
        #[serde(default)]
        allow_hosts: Vec<String>,
    },
    /// One git repository at a commit: `rev` (any revision), else `branch`, else HEAD.
    Git {
        url: String,
        #[serde(default)]
        rev: Option<String>,
        #[serde(default)]
        branch: Option<String>,
        #[serde(default = "default_include_all")]
        include: Vec<String>,
        #[serde(default)]
        exclude: Vec<String>,
        /// A version train: each tag this names is built as its own version of the
        /// bundle (`atlas-pipeline run` builds them all, oldest first).
        #[serde(default)]
        versions: Option<Versions>,
    },
    /// A published package at an exact version (`crate:NAME@VERSION`), fetched from
    /// the registry the user's own tools are configured for, checked against its
    /// checksum, and read like a folder. None of its code runs.
    Package {
        spec: String,
        /// The checksums a lockfile gives for the artifact (`sha256:<hex>` or an SRI
        /// `sha512-…`): it must match one of them too, or nothing is used.
        #[serde(default)]
        checksums: Vec<String>,
        /// A Python package's index as its lockfile names it (uv.lock's `source = {
        /// registry = … }`): the package comes from there, whatever index the settings
        /// name.
        #[serde(default)]
        index: Option<String>,
        /// The folder whose cargo, npm, pip and uv settings name the registry
        /// (default: the config's own folder).
        #[serde(default)]
        settings_dir: Option<PathBuf>,
        #[serde(default = "default_package_include")]
        include: Vec<String>,
        #[serde(default = "default_package_exclude")]
        exclude: Vec<String>,
    },
    /// A project's working tree as git would show it, uncommitted edits and untracked
    /// files included (`atlas init`): ignore files followed, `.git/`, binaries, links
    /// and secret files left out. Its index never leaves the machine: no remote cache
    /// reads or writes it, and `publish` refuses it.
    Tree {
        path: PathBuf,
        /// More to leave out, past the ignore files.
        #[serde(default)]
        exclude: Vec<String>,
        /// Secret files (`.env*`, `*.pem`, …) to index after all.
        #[serde(default)]
        include_secrets: Vec<String>,
        /// Only these files and folders (paths relative to `path`), under the same
        /// rules: a server's build of the files just edited (`atlas init`).
        #[serde(default)]
        only: Vec<String>,
    },
    /// An owner's GitHub repositories that carry `topic`, each read as a git source
    /// at its default branch. The token comes from GITHUB_TOKEN.
    Github {
        owner: String,
        topic: String,
        #[serde(default = "default_github_api")]
        api_url: String,
        #[serde(default = "default_include_all")]
        include: Vec<String>,
        #[serde(default)]
        exclude: Vec<String>,
    },
}

fn default_include_all() -> Vec<String> {
    vec!["**".into()]
}

/// A package source's default: what a package publishes about itself and its code
/// (its README and other markdown, its docs, its sources), not its own tests, benches,
/// examples or vendored code (`default_package_exclude`).
fn default_package_include() -> Vec<String> {
    let mut all = default_include();
    all.extend(["README*", "**/*.html", "**/*.htm"].map(String::from));
    all
}

fn default_package_exclude() -> Vec<String> {
    [
        "tests/**",
        "test/**",
        "**/__tests__/**",
        "benches/**",
        "bench/**",
        "examples/**",
        "vendor/**",
        "third_party/**",
        "node_modules/**",
        "fuzz/**",
        "**/testdata/**",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn default_github_api() -> String {
    "https://api.github.com".into()
}

impl SourceConfig {
    pub fn kind(&self) -> &'static str {
        match self {
            SourceConfig::Local { .. } => "local",
            SourceConfig::LlmsTxt { .. } => "llms-txt",
            SourceConfig::Git { .. } => "git",
            SourceConfig::Github { .. } => "github",
            SourceConfig::Package { .. } => "package",
            SourceConfig::Tree { .. } => "tree",
        }
    }
}

/// The tags a git source builds as versions: `{ tags: "v*", last: 5 }` (a glob, the
/// newest `last` of its matches), or a list of tags.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Versions {
    Tags {
        tags: String,
        #[serde(default)]
        last: Option<usize>,
    },
    List(Vec<String>),
}

/// The most versions one train builds.
pub const MAX_VERSIONS: usize = 100;

impl Versions {
    /// The tags of `all` this names, oldest first (semver order when the tags are
    /// versions, `v` aside; else their order as given), each with the bundle version
    /// it builds (the tag without a leading `v`).
    pub fn select(&self, all: &[String]) -> Vec<(String, String)> {
        let picked: Vec<String> = match self {
            Versions::List(l) => l.iter().filter(|t| all.contains(t)).cloned().collect(),
            Versions::Tags { tags, last } => {
                let Ok(glob) = globset::Glob::new(tags).map(|g| g.compile_matcher()) else { return Vec::new() };
                let mut m: Vec<String> = all.iter().filter(|t| glob.is_match(t.as_str())).cloned().collect();
                m.sort_by(|a, b| semver_of(a).cmp(&semver_of(b)).then_with(|| a.cmp(b)));
                let keep = last.unwrap_or(MAX_VERSIONS).min(MAX_VERSIONS);
                m.split_off(m.len().saturating_sub(keep))
            }
        };
        picked.into_iter().map(|t| (version_of_tag(&t), t)).map(|(v, t)| (t, v)).collect()
    }
}

fn semver_of(tag: &str) -> Option<semver::Version> {
    semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()
}

/// A tag's bundle version: `v1.2.0` → `1.2.0`; any other tag as it is.
pub fn version_of_tag(tag: &str) -> String {
    match tag.strip_prefix('v') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest.to_owned(),
        _ => tag.to_owned(),
    }
}

/// A local folder's default: its docs and its source code, in the languages the code
/// chunker knows (config files, data and build output stay out unless included).
fn default_include() -> Vec<String> {
    const EXTENSIONS: &[&str] = &[
        "md", "markdown", "mdx", "rst", "adoc", "asciidoc", "ipynb", "rs", "py", "pyi", "js", "mjs", "cjs", "jsx",
        "ts", "mts", "cts", "tsx", "go", "java", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "rb", "php", "kt",
        "kts", "swift", "scala", "sc", "sh", "bash", "lua",
    ];
    EXTENSIONS.iter().map(|e| format!("**/*.{e}")).collect()
}

/// Parses YAML text; the error text starts with `LINE:COL: ` when a position is known.
/// A name under `stages:` that is not in `stages` is an unknown-key error.
pub fn parse(text: &str, stages: &[&str]) -> Result<PipelineConfig, ConfigError> {
    let config = serde_saphyr::from_str_with_options::<PipelineConfig>(text, yaml_options())
        .map_err(|e| ConfigError(yaml_error(text, &e)))?;
    if let Some(name) = config.stages.keys().find(|k| !stages.contains(&k.as_str())) {
        // The message serde gives an unknown key, at the key's line and column.
        let at = line_of(text, Some("stages"), name).map_or_else(String::new, |n| {
            let line = text.lines().nth(n - 1).unwrap_or_default();
            format!("{n}:{}:", line.len() - line.trim_start().len() + 1)
        });
        let expected: Vec<String> = stages.iter().map(|s| format!("`{s}`")).collect();
        return Err(ConfigError(format!(
            "{at} unknown field `{name}`, expected one of {} (the stages)",
            expected.join(", ")
        )));
    }
    Ok(config)
}

/// How the config is read. Keys a parse skips (`IgnoredAny`: other stages' sections)
/// take non-finite floats (`.nan`, `.inf`) as text rather than failing; a typed `f64`
/// still reads them as floats, so the stage's own range check names the key.
pub(super) fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! { non_finite_float_policy: serde_saphyr::NonFiniteFloatPolicy::AsString }
}

/// A YAML error on one line, `LINE:COL: message` when a position is known.
pub(super) fn yaml_error(text: &str, e: &serde_saphyr::Error) -> String {
    let msg = one_line(&yaml_message(e));
    let mut pos = e.location().filter(|l| l.line() > 0).map(|l| (l.line() as usize, l.column() as usize));
    // Inside a tagged map (a source), serde reports the map's position; point at the key.
    let key_line = |line: usize, key: &str| {
        text.lines().enumerate().skip(line - 1).find_map(|(i, l)| {
            let t = l.trim_start();
            let is_key = t.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with(':'));
            is_key.then_some((i + 1, l.len() - t.len() + 1))
        })
    };
    if let (Some((line, _)), Some(key)) = (pos, quoted_after(&msg, "unknown field `"))
        && let Some(n) = key_line(line, key)
    {
        pos = Some(n);
    }
    match pos {
        Some((line, col)) => format!("{line}:{col}: {msg}"),
        None => format!(" {msg}"),
    }
}

/// The text between `prefix` and the next backtick.
fn quoted_after<'m>(msg: &'m str, prefix: &str) -> Option<&'m str> {
    let start = msg.find(prefix)? + prefix.len();
    let len = msg[start..].find('`')?;
    Some(&msg[start..start + len])
}

/// The error's own message, without the source snippet that `Display` renders.
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let full = e.to_string();
    // serde-saphyr renders "message\n --> snippet…"; keep the first line, minus any position prefix.
    let first = full.lines().next().unwrap_or_default().trim().to_owned();
    let mut msg = first.strip_prefix("error: ").unwrap_or(&first).to_owned();
    // Drop a leading "line X column Y: "; we print our own position.
    if let Some(rest) = msg.strip_prefix("line ")
        && let Some(i) = rest.find(": ")
        && rest[..i].split(' ').count() == 3
    {
        msg = rest[i + 2..].to_owned();
    }
    // Drop a trailing " at line X column Y" that some messages carry; we print our own.
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg,
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").trim_end_matches('.').to_owned()
}

/// The 1-based line on which `key:` first appears after the line that opens `after`.
pub(super) fn line_of(text: &str, after: Option<&str>, key: &str) -> Option<usize> {
    let mut armed = after.is_none();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if !armed {
            if t.starts_with(&format!("{}:", after.unwrap_or_default())) {
                armed = true;
            }
            continue;
        }
        if t.starts_with(&format!("{key}:")) {
            return Some(i + 1);
        }
    }
    None
}

pub(super) fn validate(config: &PipelineConfig, dir: &Path, text: &str) -> Result<(), ConfigError> {
    let resolve = |p: &Path| if p.is_absolute() { p.to_owned() } else { dir.join(p) };
    let at = |after: Option<&str>, key: &str| match line_of(text, after, key) {
        Some(n) => format!("{n}:"),
        None => String::new(),
    };
    if !atlas_runtime::safe_path::is_safe_name(&config.name) {
        return Err(ConfigError(format!(
            "{} name {:?} must be letters, digits, '.', '-' or '_', not starting with '.' (it names the bundle's files)",
            at(None, "name"),
            config.name
        )));
    }
    if config.sources.is_empty() {
        return Err(ConfigError(format!("{} `sources` is empty; declare at least one source", at(None, "sources"))));
    }
    for (name, src) in &config.sources {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(ConfigError(format!(
                "{} source name {name:?} must be letters, digits, '-' or '_' (it names a folder in the mirror)",
                at(Some("sources"), name)
            )));
        }
        match src {
            SourceConfig::Local { path, include, exclude, public_urls } => {
                let full = resolve(path);
                if !full.is_dir() {
                    return Err(ConfigError(format!(
                        "{} sources.{name}.path: {} is not a folder; fix the path (it is relative to the config file)",
                        at(Some(name), "path"),
                        full.display()
                    )));
                }
                if let Some(u) = public_urls
                    && (atlas_runtime::safe_path::check(&u.to_string_lossy()).is_err() || !full.join(u).is_file())
                {
                    return Err(ConfigError(format!(
                        "{} sources.{name}.public_urls: {} is not a file inside the source folder; name its llms.txt \
                         (relative to the folder)",
                        at(Some(name), "public_urls"),
                        u.display()
                    )));
                }
                check_globs(name, include, exclude, &at)?;
            }
            SourceConfig::LlmsTxt { url, allow_hosts, max_pages, .. } => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError(format!(
                        "{} sources.{name}.url: {url:?} is not an http(s) URL",
                        at(Some(name), "url")
                    )));
                }
                for h in allow_hosts {
                    let ok = !h.is_empty()
                        && h.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
                    if !ok {
                        return Err(ConfigError(format!(
                            "{} sources.{name}.allow_hosts: {h:?} is not a host name; write `docs.example.com` or `host:port`, without scheme or path",
                            at(Some(name), "allow_hosts")
                        )));
                    }
                }
                if max_pages.is_some_and(|m| m == 0 || m > MAX_PAGES) {
                    return Err(ConfigError(format!(
                        "{} sources.{name}.max_pages must be 1 to {MAX_PAGES}",
                        at(Some(name), "max_pages")
                    )));
                }
            }
            SourceConfig::Git { rev, branch, include, exclude, versions, .. } => {
                if rev.is_some() && branch.is_some() {
                    return Err(ConfigError(format!(
                        "{} sources.{name}: give rev or branch, not both",
                        at(Some(name), "rev")
                    )));
                }
                match versions {
                    Some(_) if rev.is_some() || branch.is_some() => {
                        return Err(ConfigError(format!(
                            "{} sources.{name}: versions builds each tag; drop rev and branch",
                            at(Some(name), "versions")
                        )));
                    }
                    Some(Versions::Tags { tags, last }) if globset::Glob::new(tags).is_err() || *last == Some(0) => {
                        return Err(ConfigError(format!(
                            "{} sources.{name}.versions: write {{ tags: \"v*\", last: N }} (a glob, N ≥ 1) or a list of tags",
                            at(Some(name), "versions")
                        )));
                    }
                    Some(Versions::List(l)) if l.is_empty() || l.len() > MAX_VERSIONS => {
                        return Err(ConfigError(format!(
                            "{} sources.{name}.versions: list 1 to {MAX_VERSIONS} tags",
                            at(Some(name), "versions")
                        )));
                    }
                    _ => {}
                }
                check_globs(name, include, exclude, &at)?;
            }
            SourceConfig::Tree { path, exclude, include_secrets, only } => {
                if let Some(bad) = only.iter().find(|o| atlas_runtime::safe_path::check(o).is_err()) {
                    return Err(ConfigError(format!(
                        "{} sources.{name}.only: {bad:?} is not a relative path inside the tree; name files under it",
                        at(Some(name), "only")
                    )));
                }
                let full = resolve(path);
                if !full.is_dir() {
                    return Err(ConfigError(format!(
                        "{} sources.{name}.path: {} is not a folder; name the project's folder (relative to the config file)",
                        at(Some(name), "path"),
                        full.display()
                    )));
                }
                check_globs(name, include_secrets, exclude, &at)?;
            }
            SourceConfig::Github { api_url, include, exclude, .. } => {
                if !(api_url.starts_with("http://") || api_url.starts_with("https://")) {
                    return Err(ConfigError(format!(
                        "{} sources.{name}.api_url: {api_url:?} is not an http(s) URL",
                        at(Some(name), "api_url")
                    )));
                }
                check_globs(name, include, exclude, &at)?;
            }
            SourceConfig::Package { spec, checksums, index, include, exclude, .. } => {
                let parsed = spec
                    .parse::<PackageSpec>()
                    .map_err(|e| ConfigError(format!("{} sources.{name}.spec: {e}", at(Some(name), "spec"))))?;
                if let Some(e) = checksums.iter().find_map(|c| c.parse::<atlas_runtime::package::Checksum>().err()) {
                    return Err(ConfigError(format!("{} sources.{name}.checksums: {e}", at(Some(name), "checksums"))));
                }
                let http = |u: &str| url::Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
                match index {
                    Some(_) if parsed.ecosystem != atlas_runtime::package::Ecosystem::Pypi => {
                        return Err(ConfigError(format!(
                            "{} sources.{name}.index: only a Python package takes an index; drop it",
                            at(Some(name), "index")
                        )));
                    }
                    Some(i) if !http(i) => {
                        return Err(ConfigError(format!(
                            "{} sources.{name}.index: {:?} is not an http(s) URL",
                            at(Some(name), "index"),
                            atlas_runtime::utf8::clip_chars(&atlas_dist::http::redact_url(i), 200)
                        )));
                    }
                    _ => {}
                }
                check_globs(name, include, exclude, &at)?;
            }
        }
    }
    Ok(())
}

/// The most pages one llms.txt source may list for the crawl.
pub const MAX_PAGES: usize = 1_000_000;

fn check_globs(
    name: &str,
    include: &[String],
    exclude: &[String],
    at: &dyn Fn(Option<&str>, &str) -> String,
) -> Result<(), ConfigError> {
    for g in include.iter().chain(exclude) {
        if let Err(e) = globset::Glob::new(g) {
            return Err(ConfigError(format!("{} sources.{name}: bad glob {g:?}: {e}", at(Some(name), "include"))));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(yaml: &str) -> String {
        parse(yaml, &["chunk", "pack"]).unwrap_err().0
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let e = err("name: x\nsources:\n  a:\n    kind: local\n    path: .\n    colour: red\n");
        assert!(e.starts_with("6:"), "{e}");
        assert!(e.contains("colour"), "{e}");
    }

    #[test]
    fn unknown_kind_names_line_and_kind() {
        let e = err("name: x\nsources:\n  a:\n    kind: ftp\n    path: .\n");
        assert!(e.contains("ftp"), "{e}");
        assert!(e.starts_with("4:") || e.starts_with("3:"), "{e}");
    }

    #[test]
    fn unknown_stage_names_line_and_stage() {
        let e = err("name: x\nsources: {}\nstages:\n  packer:\n    k1: 1\n");
        assert!(e.starts_with("4:"), "{e}");
        assert!(e.contains("packer"), "{e}");
    }

    #[test]
    fn syntax_error_has_a_position() {
        let e = err("name: x\nsources:\n  a: [unclosed\n");
        assert!(e.chars().next().unwrap().is_ascii_digit(), "{e}");
        assert!(!e.contains('\n'));
    }
}
