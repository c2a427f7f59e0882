//! Where bundles are published to and installed from, parsed from the user's words.

use std::path::PathBuf;

use crate::{Error, Result};

/// An install source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `github:OWNER/REPO[@TAG]`: the release of TAG, else the latest release.
    GitHub { owner: String, repo: String, tag: Option<String> },
    /// `s3://…`, `gs://…`, `az://…`, `file://…`: a publish target, read through
    /// `<name>/latest.json`.
    Store(url::Url),
    /// `https://…/x.tar.zst` (its `.sha256` beside it).
    Url(url::Url),
    /// A local `.tar.zst` (its `.sha256` beside it, or `--sha256`).
    File(PathBuf),
}

/// A publish target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    GitHub { owner: String, repo: String, tag: String },
    Store(url::Url),
}

const STORE_SCHEMES: &[&str] = &["s3", "gs", "az", "abfs", "file"];

/// `OWNER/REPO` with GitHub's characters only.
pub fn parse_repo(s: &str) -> Result<(String, String)> {
    let ok = |p: &str| {
        !p.is_empty() && p != "." && p != ".." && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    match s.split_once('/') {
        Some((o, r)) if ok(o) && ok(r) => Ok((o.to_owned(), r.to_owned())),
        _ => Err(Error::Usage(format!("{s:?} is not OWNER/REPO"))),
    }
}

impl Source {
    pub fn parse(s: &str) -> Result<Source> {
        if let Some(rest) = s.strip_prefix("github:") {
            let (repo, tag) = match rest.split_once('@') {
                Some((r, t)) if !t.is_empty() => (r, Some(t.to_owned())),
                Some(_) => return Err(Error::Usage(format!("{s:?}: the tag after '@' is empty"))),
                None => (rest, None),
            };
            let (owner, repo) = parse_repo(repo)?;
            return Ok(Source::GitHub { owner, repo, tag });
        }
        if let Some((scheme, _)) = s.split_once("://") {
            let url = url::Url::parse(s).map_err(|e| Error::Usage(format!("{s:?} is not a URL ({e})")))?;
            return match scheme {
                "http" | "https" => Ok(Source::Url(url)),
                // file:///x.tar.zst is an archive, not a publish target.
                "file" if url.to_file_path().is_ok_and(|p| p.is_file()) => {
                    Ok(Source::File(url.to_file_path().expect("checked")))
                }
                sc if STORE_SCHEMES.contains(&sc) => Ok(Source::Store(url)),
                _ => Err(Error::Usage(format!(
                    "{s:?}: unknown scheme {scheme:?}; use github:OWNER/REPO, s3://, gs://, az://, file://, https:// or a .tar.zst path"
                ))),
            };
        }
        let path = PathBuf::from(s);
        if path.is_file() {
            // Absolute: an install record names it, and `atlas update` may run elsewhere.
            return Ok(Source::File(std::path::absolute(&path).unwrap_or(path)));
        }
        Err(Error::Usage(format!(
            "{s:?} is neither a file nor a source; use github:OWNER/REPO[@TAG], s3://…, gs://…, az://…, file://…, https://…/x.tar.zst or a .tar.zst path"
        )))
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::GitHub { owner, repo, tag: Some(t) } => write!(f, "github:{owner}/{repo}@{t}"),
            Source::GitHub { owner, repo, tag: None } => write!(f, "github:{owner}/{repo}"),
            Source::Store(u) | Source::Url(u) => f.write_str(u.as_str()),
            Source::File(p) => write!(f, "{}", p.display()),
        }
    }
}

impl Target {
    pub fn store(s: &str) -> Result<Target> {
        match Source::parse(s) {
            Ok(Source::Store(u)) => Ok(Target::Store(u)),
            _ => Err(Error::Usage(format!("--to {s:?}: use s3://bucket/prefix, gs://…, az://… or file:///path"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse() {
        let check = |s: &str, expected: &str| {
            let got = match Source::parse(s) {
                Ok(src) => format!("{src:?}"),
                Err(e) => format!("error: {e}"),
            };
            assert!(got.contains(expected), "{s}: {got}");
        };
        check("github:acme/docs", r#"GitHub { owner: "acme", repo: "docs", tag: None }"#);
        check("github:acme/docs@v1.2", r#"tag: Some("v1.2")"#);
        check("github:acme@v1", "error: \"acme\" is not OWNER/REPO");
        check("github:acme/../x", "error:");
        check("github:acme/docs@", "the tag after '@' is empty");
        check("s3://bucket/prefix", "Store(");
        check("file:///tmp/pub", "Store(");
        check("https://example.com/a.tar.zst", "Url(");
        check("ftp://x/y", "unknown scheme \"ftp\"");
        check("/no/such/file.tar.zst", "neither a file nor a source");
    }
}
