//! A search hit and how it is cited: the vocabulary the bundle, the search and every
//! server share, below all of them.

use serde::{Deserialize, Serialize};

pub(crate) mod snippet;

pub use crate::chunk_table::{ChunkKind, Origin};

/// A chunk another hit links to: the docs that mention a code chunk's symbol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub chunk_id: String,
    pub path: String,
    pub heading: String,
}

/// One ranked result: a chunk, where it is, and how to cite it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub score: f32,
    pub chunk_id: String,
    /// The bundle the hit comes from, as `name@version`: what a server of several
    /// bundles takes as `library`, and the first path segment of its fs tools.
    pub library: String,
    /// The file in the bundle's mirror (`<source>/<path>`).
    pub path: String,
    pub url: Option<String>,
    pub title: String,
    pub heading_path: Vec<String>,
    pub start_line: u32,
    pub end_line: u32,
    /// The passage that matched (an MCP reply's structured part leaves it out: its text
    /// block shows it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub snippet: String,
    /// The snippet's own lines in the file, `[first, last]`, when it is a window of a
    /// docs chunk below its first line (the passage that matched); cite them to point
    /// at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet_lines: Option<[u32; 2]>,
    pub kind: ChunkKind,
    pub language: Option<String>,
    pub section: String,
    pub repo: Option<String>,
    pub commit: Option<String>,
    pub symbol: Option<String>,
    pub symbol_kind: Option<String>,
    /// Docs: the corpus symbols this chunk mentions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<String>,
    /// Code: the docs chunks that mention this chunk's symbols.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentioned_in: Vec<Link>,
    /// The chunk's file is not the package's own code: vendored, minified, generated
    /// or a legacy tree (ranked below the package's own; [`Origin::label`] says it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

impl Hit {
    /// Where a reader goes to check the hit. A crawled page: its URL with the heading
    /// anchor the site gives the chunk's section ([`Hit::anchor`]), since no web page
    /// understands a line fragment. A file (or a repository file on a forge, which
    /// does): its path or URL with `#Lstart-Lend`. The line range is always in
    /// `start_line`/`end_line` too.
    pub fn citation(&self) -> String {
        match (&self.url, self.kind) {
            (Some(url), ChunkKind::Docs) => match self.anchor() {
                Some(a) => format!("{url}#{a}"),
                None => url.clone(),
            },
            (url, _) => {
                let base = url.as_deref().unwrap_or(&self.path);
                format!("{base}#L{}-L{}", self.start_line, self.end_line)
            }
        }
    }

    /// Where the chunk is, for people: its heading path (`Install › With Helm`), or
    /// the title when it has none.
    pub fn place(&self) -> String {
        if self.heading_path.is_empty() { self.title.clone() } else { self.heading_path.join(" › ") }
    }

    /// The heading anchor of the chunk's section on its page: the slug of its last
    /// heading below the page title (none for the page's opening).
    pub fn anchor(&self) -> Option<String> {
        match self.heading_path.as_slice() {
            [_, .., last] => Some(slug(last)).filter(|s| !s.is_empty()),
            _ => None,
        }
    }
}

/// A heading's anchor as GitBook and GitHub write it: lower case, letters, digits,
/// `-` and `_` kept, each space a `-`, everything else dropped.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_slug_as_the_sites_do() {
        let check = |h: &str, want: &str| assert_eq!(slug(h), want, "{h}");
        check("Getting started", "getting-started");
        check("GET /apps", "get-apps");
        check("With Helm (v3+)", "with-helm-v3");
        check("snake_case & kebab-case", "snake_case--kebab-case");
        check("Über Größe", "über-größe");
        check("  Trim  me ", "trim--me");
    }

    #[test]
    fn web_pages_are_cited_by_anchor_files_by_lines() {
        let hit = |kind: ChunkKind, url: Option<&str>, heading: &[&str]| Hit {
            path: "site/guides/install.md".into(),
            url: url.map(str::to_owned),
            title: "Install".into(),
            heading_path: heading.iter().map(|h| (*h).to_owned()).collect(),
            start_line: 3,
            end_line: 9,
            kind,
            ..Hit::default()
        };
        let page = Some("https://docs.x.test/guides/install");
        assert_eq!(
            hit(ChunkKind::Docs, page, &["Install", "With Helm"]).citation(),
            "https://docs.x.test/guides/install#with-helm"
        );
        assert_eq!(hit(ChunkKind::Docs, page, &["Install"]).citation(), "https://docs.x.test/guides/install");
        assert_eq!(hit(ChunkKind::Docs, None, &["Install", "With Helm"]).citation(), "site/guides/install.md#L3-L9");
        let blob = Some("https://github.com/o/r/blob/abc/net/retry.rs");
        assert_eq!(hit(ChunkKind::Code, blob, &[]).citation(), "https://github.com/o/r/blob/abc/net/retry.rs#L3-L9");
    }
}
