//! `pipeline.yaml`: named sources and the params of each stage.
//!
//! Parsing is strict: an unknown key, source kind or stage is an error that names the
//! file, the line and the key. Params are filled with their defaults and then
//! canonicalised to JSON, so writing a default out explicitly changes no cache key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::chunk::ChunkParams;
use crate::clean::CleanParams;

/// A config problem: the user must fix the file. Reported on one line, exit code 2.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Bundle name; servers are called `<name>-fs` and `<name>-rag`.
    pub name: String,
    /// Where final outputs are written, relative to the config file.
    #[serde(default)]
    pub out: Option<PathBuf>,
    pub sources: BTreeMap<String, SourceConfig>,
    #[serde(default)]
    pub stages: StageParams,
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
        }
    }
}

fn default_include() -> Vec<String> {
    vec!["**/*.md".into(), "**/*.markdown".into()]
}

/// Params of each stage. A name that is not a stage is an unknown-key error.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StageParams {
    #[serde(default)]
    pub crawl: CrawlParams,
    #[serde(default)]
    pub clean_gitbook: CleanParams,
    #[serde(default)]
    pub chunk: ChunkParams,
    #[serde(default)]
    pub embed: crate::embed::EmbedParams,
    #[serde(default)]
    pub bm25: crate::bm25::Bm25Params,
    #[serde(default)]
    pub pack: crate::pack::PackParams,
}

pub use crate::crawl::CrawlParams;

/// A loaded config: the parsed file plus where it lives.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub dir: PathBuf,
    pub config: PipelineConfig,
}

impl Loaded {
    /// Resolves a path written in the config against the config's folder.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() { p.to_owned() } else { self.dir.join(p) }
    }
}

/// Reads and validates a config. Nothing is written anywhere.
pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    let shown = path.display();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError(format!(
                "{shown}: config file not found; pass --config FILE or run from the folder that holds pipeline.yaml"
            )));
        }
        Err(e) => return Err(ConfigError(format!("{shown}: cannot read config: {e}"))),
    };
    let config = parse(&text).map_err(|e| ConfigError(format!("{shown}:{e}")))?;
    let abs = std::path::absolute(path).map_err(|e| ConfigError(format!("{shown}: {e}")))?;
    let dir = abs.parent().map(Path::to_owned).unwrap_or_else(|| PathBuf::from("."));
    let loaded = Loaded { path: abs, dir, config };
    validate(&loaded, &text).map_err(|e| ConfigError(format!("{shown}:{e}")))?;
    Ok(loaded)
}

/// Parses YAML text; the error text starts with `LINE:COL: ` when a position is known.
pub fn parse(text: &str) -> Result<PipelineConfig, String> {
    serde_saphyr::from_str::<PipelineConfig>(text).map_err(|e| {
        let msg = one_line(&yaml_message(&e));
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
    })
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
fn line_of(text: &str, after: Option<&str>, key: &str) -> Option<usize> {
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

fn validate(l: &Loaded, text: &str) -> Result<(), String> {
    let at = |after: Option<&str>, key: &str| match line_of(text, after, key) {
        Some(n) => format!("{n}:"),
        None => String::new(),
    };
    if !is_safe_name(&l.config.name) {
        return Err(format!(
            "{} name {:?} must be letters, digits, '.', '-' or '_', not starting with '.' (it names the bundle's files)",
            at(None, "name"),
            l.config.name
        ));
    }
    if l.config.sources.is_empty() {
        return Err(format!("{} `sources` is empty; declare at least one source", at(None, "sources")));
    }
    for (name, src) in &l.config.sources {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(format!(
                "{} source name {name:?} must be letters, digits, '-' or '_' (it names a folder in the mirror)",
                at(Some("sources"), name)
            ));
        }
        match src {
            SourceConfig::Local { path, include, exclude } => {
                let full = l.resolve(path);
                if !full.is_dir() {
                    return Err(format!(
                        "{} sources.{name}.path: {} is not a folder; fix the path (it is relative to the config file)",
                        at(Some(name), "path"),
                        full.display()
                    ));
                }
                check_globs(name, include, exclude, &at)?;
            }
            SourceConfig::LlmsTxt { url, allow_hosts, max_pages, .. } => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("{} sources.{name}.url: {url:?} is not an http(s) URL", at(Some(name), "url")));
                }
                for h in allow_hosts {
                    let ok = !h.is_empty()
                        && h.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
                    if !ok {
                        return Err(format!(
                            "{} sources.{name}.allow_hosts: {h:?} is not a host name; write `docs.example.com` or `host:port`, without scheme or path",
                            at(Some(name), "allow_hosts")
                        ));
                    }
                }
                if max_pages.is_some_and(|m| m == 0 || m > MAX_PAGES) {
                    return Err(format!(
                        "{} sources.{name}.max_pages must be 1 to {MAX_PAGES}",
                        at(Some(name), "max_pages")
                    ));
                }
            }
            SourceConfig::Git { rev, branch, include, exclude, .. } => {
                if rev.is_some() && branch.is_some() {
                    return Err(format!("{} sources.{name}: give rev or branch, not both", at(Some(name), "rev")));
                }
                check_globs(name, include, exclude, &at)?;
            }
            SourceConfig::Github { api_url, include, exclude, .. } => {
                if !(api_url.starts_with("http://") || api_url.starts_with("https://")) {
                    return Err(format!(
                        "{} sources.{name}.api_url: {api_url:?} is not an http(s) URL",
                        at(Some(name), "api_url")
                    ));
                }
                check_globs(name, include, exclude, &at)?;
            }
        }
    }
    let e = &l.config.stages.embed;
    if atlas_runtime::model::spec(&e.model).is_none() {
        let ids: Vec<&str> = atlas_runtime::model::REGISTRY.iter().map(|m| m.id).collect();
        return Err(format!(
            "{} stages.embed.model: unknown model {:?}; registered: {}",
            at(Some("embed"), "model"),
            e.model,
            ids.join(", ")
        ));
    }
    for field in l.config.stages.bm25.boosts.keys() {
        if !atlas_runtime::text_index::FIELDS.contains(&field.as_str()) {
            return Err(format!(
                "{} stages.bm25.boosts: unknown field {field:?}; fields: {}",
                at(Some("boosts"), field),
                atlas_runtime::text_index::FIELDS.join(", ")
            ));
        }
    }
    for (field, b) in &l.config.stages.bm25.boosts {
        check_range(&at, "bm25", field, f64::from(*b), 0.0, 100.0)?;
    }
    let c = &l.config.stages.chunk;
    if !(1..=6).contains(&c.split_level) {
        return Err(format!("{} stages.chunk.split_level must be 1 to 6", at(Some("chunk"), "split_level")));
    }
    if c.max_chars < 200 {
        return Err(format!("{} stages.chunk.max_chars must be at least 200", at(Some("chunk"), "max_chars")));
    }
    let n = |v: usize| v as f64;
    check_range(&at, "chunk", "max_chars", n(c.max_chars), 200.0, 1_000_000.0)?;
    check_range(&at, "chunk", "overlap_chars", n(c.overlap_chars), 0.0, n(c.max_chars))?;
    check_range(&at, "chunk", "code_max_lines", n(c.code_max_lines), 4.0, 10_000.0)?;
    check_range(&at, "chunk", "code_tiny_lines", n(c.code_tiny_lines), 0.0, 10_000.0)?;
    check_range(&at, "chunk", "code_merge_max_lines", n(c.code_merge_max_lines), 1.0, 10_000.0)?;
    let e = &l.config.stages.embed;
    check_range(&at, "embed", "batch_size", n(e.batch_size), 1.0, 1024.0)?;
    check_range(&at, "embed", "window_overlap", n(e.window_overlap), 0.0, 128.0)?;
    check_range(&at, "embed", "threads", n(e.threads), 0.0, 256.0)?;
    let p = &l.config.stages.crawl;
    let u = |v: u64| v as f64;
    check_range(&at, "crawl", "max_file_bytes", u(p.max_file_bytes), 1.0, 1024.0 * 1024.0 * 1024.0)?;
    check_range(&at, "crawl", "max_concurrent", n(p.max_concurrent), 1.0, 64.0)?;
    check_range(&at, "crawl", "delay_ms", u(p.delay_ms[0]), 0.0, 600_000.0)?;
    check_range(&at, "crawl", "delay_ms", u(p.delay_ms[1]), u(p.delay_ms[0]), 600_000.0)?;
    check_range(&at, "crawl", "connect_timeout_s", p.connect_timeout_s, 0.001, 3600.0)?;
    check_range(&at, "crawl", "read_timeout_s", p.read_timeout_s, 0.001, 3600.0)?;
    check_range(&at, "crawl", "total_timeout_s", p.total_timeout_s, 0.001, 86_400.0)?;
    check_range(&at, "crawl", "max_body_bytes", n(p.max_body_bytes), 1.0, 1024.0 * 1024.0 * 1024.0)?;
    check_range(&at, "crawl", "max_redirects", n(p.max_redirects), 0.0, 20.0)?;
    check_range(&at, "crawl", "max_retries", f64::from(p.max_retries), 0.0, 20.0)?;
    check_range(&at, "crawl", "backoff_base_ms", u(p.backoff_base_ms), 0.0, 600_000.0)?;
    check_range(&at, "crawl", "backoff_max_ms", u(p.backoff_max_ms), 0.0, 3_600_000.0)?;
    check_range(&at, "crawl", "retry_after_cap_s", p.retry_after_cap_s, 0.0, 3600.0)?;
    check_range(&at, "crawl", "max_error_ratio", p.max_error_ratio, 0.0, 1.0)?;
    let version = &l.config.stages.pack.version;
    if !is_safe_name(version) {
        return Err(format!(
            "{} stages.pack.version {version:?} must be letters, digits, '.', '-', '+' or '_' (it names the archive)",
            at(Some("pack"), "version")
        ));
    }
    Ok(())
}

/// The most pages one llms.txt source may list for the crawl.
pub const MAX_PAGES: usize = 1_000_000;

/// A bundle name or version: it becomes a file name (`<name>-<version>.tar.zst`), so
/// one plain component of safe characters.
pub fn is_safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && !s.starts_with('.')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
}

/// `stages.<stage>.<key>` must be a finite number in `lo..=hi`.
fn check_range(
    at: &dyn Fn(Option<&str>, &str) -> String,
    stage: &str,
    key: &str,
    v: f64,
    lo: f64,
    hi: f64,
) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        return Ok(());
    }
    Err(format!("{} stages.{stage}.{key} is {v}; it must be a number from {lo} to {hi}", at(Some(stage), key)))
}

fn check_globs(
    name: &str,
    include: &[String],
    exclude: &[String],
    at: &dyn Fn(Option<&str>, &str) -> String,
) -> Result<(), String> {
    for g in include.iter().chain(exclude) {
        if let Err(e) = globset::Glob::new(g) {
            return Err(format!("{} sources.{name}: bad glob {g:?}: {e}", at(Some(name), "include")));
        }
    }
    Ok(())
}

/// Canonical JSON of a params value: object keys sorted (serde_json's default map),
/// defaults filled in by the typed structs.
pub fn canonical<T: Serialize>(params: &T) -> serde_json::Value {
    serde_json::to_value(params).expect("params serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(yaml: &str) -> String {
        parse(yaml).unwrap_err()
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

    #[test]
    fn defaults_are_filled_so_explicit_defaults_do_not_change_keys() {
        let a = parse("name: x\nsources: {}\n").unwrap();
        let b = parse("name: x\nsources: {}\nstages:\n  chunk:\n    overlap_chars: 150\n").unwrap();
        assert_eq!(canonical(&a.stages), canonical(&b.stages));
    }
}
