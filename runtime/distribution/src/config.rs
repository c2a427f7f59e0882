//! The user's config file, `$XDG_CONFIG_HOME/atlas/config.toml` (default
//! `~/.config/atlas/config.toml`). Precedence everywhere: flag > environment
//! (`ATLAS_HOME`, `ATLAS_BUNDLE`, `ATLAS_EMBED_BACKEND`) > this file > default. An
//! unknown key is an error naming the file, the line and the key.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::archive::Limits;
use crate::{Error, Result};

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where models, ONNX Runtime, downloads and installed bundles live.
    pub home: Option<PathBuf>,
    /// The bundle `--bundle` defaults to (an installed name or a folder).
    pub bundle: Option<String>,
    /// Query embedding: auto | cpu | cuda | coreml.
    pub embed_backend: Option<String>,
    /// Where models live (default `<home>/models`).
    pub model_dir: Option<PathBuf>,
    /// Public keys (`RW…` or `.pub` paths) trusted for every install.
    #[serde(default)]
    pub trusted_keys: Vec<String>,
    #[serde(default)]
    pub publish: Publish,
    #[serde(default)]
    pub install: Install,
    #[serde(default)]
    pub ask: Ask,
    #[serde(default)]
    pub cache: CacheRemote,
}

/// `[cache]`: the shared build cache `atlas-pipeline` uses when pipeline.yaml names none.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheRemote {
    /// `s3://bucket/prefix`, `gs://…`, `az://…` or `file:///…`.
    pub remote: Option<String>,
    /// Seconds each remote request may take (default 10).
    pub timeout_s: Option<u64>,
    /// The remote has one writer you trust: its refs need no signature.
    pub trusted: Option<bool>,
    /// Public keys (`RW…` or `.pub` paths) whose signed refs this machine uses.
    #[serde(default)]
    pub trusted_keys: Vec<String>,
    /// The minisign secret key this machine signs the refs it writes with.
    pub sign: Option<PathBuf>,
    /// This machine reads the remote and never writes it.
    pub read_only: Option<bool>,
}

/// `atlas ask` and the web page's Ask tab.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// An OpenAI-compatible endpoint (`http://127.0.0.1:11434/v1`, `https://api.openai.com/v1`);
    /// none gives the extractive answer.
    pub llm: Option<String>,
    /// The model name the endpoint expects.
    pub model: Option<String>,
    /// The environment variable holding the API key (default `ATLAS_LLM_API_KEY`).
    pub api_key_env: Option<String>,
    /// Seconds to wait for the endpoint's first byte and between streamed chunks.
    pub timeout_s: Option<u64>,
    /// Confidence below which a question is refused without calling the LLM
    /// (default: the bundle's calibrated threshold, else Atlas's).
    pub threshold: Option<f32>,
    /// Tokens of numbered sources given to the LLM.
    pub budget_tokens: Option<usize>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    /// `OWNER/REPO` for `--github`.
    pub github: Option<String>,
    /// An object store URL for `--to`.
    pub to: Option<String>,
    /// The GitHub API root (GitHub Enterprise).
    pub api_url: Option<String>,
    /// The secret key `--sign` defaults to.
    pub sign: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Install {
    /// Versions kept per bundle (default 5).
    pub keep: Option<usize>,
    #[serde(default)]
    pub limits: Option<Limits>,
}

/// The config file's path.
pub fn path() -> PathBuf {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from).join(".config"));
    base.join("atlas").join("config.toml")
}

/// Reads the config file; a missing file is the defaults.
pub fn load() -> Result<(Config, Option<PathBuf>)> {
    let p = path();
    match std::fs::read_to_string(&p) {
        Ok(text) => Ok((parse(&text, &p)?, Some(p))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((Config::default(), None)),
        Err(e) => Err(Error::Io { path: p, error: e }),
    }
}

pub fn parse(text: &str, path: &Path) -> Result<Config> {
    let c: Config = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let msg = e.message().replace('\n', " ");
        let msg = msg.replace("unknown field", "unknown key");
        Error::Usage(format!("{}:{line}: {msg}", path.display()))
    })?;
    if let Some(b) = &c.embed_backend
        && b.parse::<atlas_runtime::encoder::Backend>().is_err()
    {
        return Err(Error::Usage(format!("{}: embed_backend {b:?}: use auto, cpu, cuda or coreml", path.display())));
    }
    check_values(&c, text, path)?;
    Ok(c)
}

/// Where each checked value sits in the file, for the line of its error.
#[derive(Debug, Default, Deserialize)]
struct Positions {
    home: Option<toml::Spanned<toml::Value>>,
    model_dir: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    ask: SectionPositions,
    #[serde(default)]
    install: SectionPositions,
    #[serde(default)]
    cache: SectionPositions,
}

#[derive(Debug, Default, Deserialize)]
struct SectionPositions {
    threshold: Option<toml::Spanned<toml::Value>>,
    timeout_s: Option<toml::Spanned<toml::Value>>,
    budget_tokens: Option<toml::Spanned<toml::Value>>,
    keep: Option<toml::Spanned<toml::Value>>,
}

/// The values serde takes but Atlas cannot use (an empty path, a threshold that is
/// not a number from 0 to 1, a zero count): each an error naming the key and its line.
fn check_values(c: &Config, text: &str, path: &Path) -> Result<()> {
    let pos: Positions = toml::from_str(text).unwrap_or_default();
    let line = |s: &Option<toml::Spanned<toml::Value>>| {
        s.as_ref().map_or(1, |s| text[..s.span().start.min(text.len())].matches('\n').count() + 1)
    };
    let fail = |at: &Option<toml::Spanned<toml::Value>>, key: &str, why: String| {
        Err(Error::Usage(format!("{}:{}: {key}: {why}", path.display(), line(at))))
    };
    for (v, at, key) in [(&c.home, &pos.home, "home"), (&c.model_dir, &pos.model_dir, "model_dir")] {
        if v.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            return fail(at, key, "is empty; give a folder, or remove the key for the default".into());
        }
    }
    if let Some(t) = c.ask.threshold
        && !(t.is_finite() && (0.0..=1.0).contains(&t))
    {
        return fail(&pos.ask.threshold, "ask.threshold", format!("{t} is not a confidence; use a number from 0 to 1"));
    }
    let counts = [
        (c.ask.timeout_s.map(|n| n as u128), &pos.ask.timeout_s, "ask.timeout_s"),
        (c.ask.budget_tokens.map(|n| n as u128), &pos.ask.budget_tokens, "ask.budget_tokens"),
        (c.install.keep.map(|n| n as u128), &pos.install.keep, "install.keep"),
        (c.cache.timeout_s.map(|n| n as u128), &pos.cache.timeout_s, "cache.timeout_s"),
    ];
    for (v, at, key) in counts {
        if v == Some(0) {
            return fail(at, key, "is 0; use a whole number of at least 1".into());
        }
    }
    Ok(())
}

impl Config {
    /// `ATLAS_EMBED_BACKEND`, else the file's, else None (the default).
    pub fn embed_backend(&self) -> Option<String> {
        std::env::var("ATLAS_EMBED_BACKEND").ok().filter(|v| !v.is_empty()).or_else(|| self.embed_backend.clone())
    }

    pub fn keep(&self) -> usize {
        self.install.keep.unwrap_or(5)
    }

    pub fn limits(&self) -> Limits {
        self.install.limits.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_parse_or_name_the_line_and_key() {
        let check = |text: &str, expected: &str| {
            let got = match parse(text, Path::new("config.toml")) {
                Ok(c) => format!("{c:?}"),
                Err(e) => format!("error: {e}"),
            };
            assert!(got.contains(expected), "{text:?}: {got}");
        };
        check("", "Config { home: None");
        check("home = \"/h\"\nbundle = \"docs\"\n", "bundle: Some(\"docs\")");
        check("trusted_keys = [\"RWabc\"]\n[publish]\nto = \"s3://b/p\"\n", "to: Some(\"s3://b/p\")");
        check("home = \"/h\"\nhomme = 1\n", "error: config.toml:2: unknown key `homme`");
        check(
            "[ask]\nllm = \"http://127.0.0.1:11434/v1\"\nmodel = \"qwen\"\n",
            "llm: Some(\"http://127.0.0.1:11434/v1\")",
        );
        check("[ask]\nurl = \"x\"\n", "error: config.toml:2: unknown key `url`");
        check("[publish]\ngithub = \"a/b\"\ntoken = \"x\"\n", "error: config.toml:3: unknown key `token`");
        check("[install]\nkeep = 3\n[install.limits]\nmax_ratio = 10\n", "max_ratio: 10");
        check("embed_backend = \"gpu\"\n", "error: config.toml: embed_backend \"gpu\"");
        check("[cache]\nremote = \"s3://b/c\"\ntimeout_s = 3\n", "remote: Some(\"s3://b/c\")");
    }

    #[test]
    fn values_atlas_cannot_use_name_their_key_and_line() {
        let err = |text: &str| parse(text, Path::new("c.toml")).unwrap_err().to_string();
        for v in ["nan", "inf", "-inf", "-5", "1.5"] {
            let e = err(&format!("bundle = \"d\"\n[ask]\nthreshold = {v}\n"));
            assert!(e.starts_with("c.toml:3: ask.threshold: ") && e.contains("from 0 to 1"), "{v}: {e}");
        }
        assert_eq!(err("home = \"\"\n"), "c.toml:1: home: is empty; give a folder, or remove the key for the default");
        assert!(err("\n[install]\nkeep = 0\n").starts_with("c.toml:3: install.keep: is 0"));
        assert!(err("[ask]\ntimeout_s = 0\n").starts_with("c.toml:2: ask.timeout_s"));
        assert!(parse("[ask]\nthreshold = 0.4\n", Path::new("c.toml")).is_ok());
    }

    proptest::proptest! {
        /// Any text: a config or a one-line error naming the file, never a panic.
        #[test]
        fn config_text_parses_or_fails_in_one_line(text in "[a-z_\\[\\]=\" .0-9\n-]{0,80}") {
            if let Err(e) = parse(&text, Path::new("c.toml")) {
                let e = e.to_string();
                proptest::prop_assert!(e.starts_with("c.toml"), "{e}");
                proptest::prop_assert!(!e.contains('\n'), "{e}");
            }
        }
    }
}
