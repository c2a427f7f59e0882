//! What the fs tools take and return: their arguments and the typed replies their
//! output schemas are generated from.

use rmcp::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::grep;
use crate::budget::Budget;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListPublicationsArgs {
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListFilesArgs {
    /// Only files of this publication.
    #[serde(default)]
    pub publication: Option<String>,
    /// Only paths matching this glob. For example `**/*.md` or `setup/**`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Skip this many files (paging).
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub offset: Option<usize>,
    /// At most this many files (default 200, at most 1000).
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub limit: Option<usize>,
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// The file, as list_files or a hit gives it.
    pub path: String,
    /// First line to return (1-based). Default 1.
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub start_line: Option<usize>,
    /// Last line to return (inclusive). Default: the end, within the size cap.
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub end_line: Option<usize>,
    /// Byte offset within start_line. Default 0: how a reply that cut
    /// a very long line says to continue.
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub byte_offset: Option<usize>,
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// A literal string, or a regex when `regex` is true.
    pub pattern: String,
    /// `pattern` is a regular expression. Rust regex syntax; default false.
    #[serde(default)]
    pub regex: bool,
    /// Match case exactly. Default false.
    #[serde(default)]
    pub case_sensitive: bool,
    /// Only paths matching this glob. For example `**/*.py`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Only files of this publication.
    #[serde(default)]
    pub publication: Option<String>,
    /// Lines of context around each match (0–5). Default 0.
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub context_lines: Option<usize>,
    /// At most this many matches (default 50, at most 500).
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub max_results: Option<usize>,
    #[serde(flatten)]
    pub budget: Budget,
}

/// A publication and how many files it holds.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Publication {
    pub publication: String,
    pub files: usize,
}

/// `list_publications`' structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PublicationsOut {
    pub publications: Vec<Publication>,
    pub next_cursor: Option<String>,
}

/// `list_files`' structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FilesOut {
    /// Files that match, in all.
    pub total: usize,
    pub offset: usize,
    pub files: Vec<String>,
    /// The offset of the next page (limit reached).
    pub next_offset: Option<usize>,
    /// Pass it back as `cursor` to continue (limit or budget reached).
    pub next_cursor: Option<String>,
}

/// `search`'s structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrepOut {
    pub matches: Vec<grep::Match>,
    /// More matches exist past `max_results`.
    pub truncated: bool,
    pub files_searched: usize,
    /// Files not searched (a line over the cap, unreadable).
    pub files_skipped: Vec<String>,
    /// Pass it back as `cursor` for the matches the budget left out.
    pub next_cursor: Option<String>,
}

/// One library's release, as `get_release_info` gives it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReleaseInfo {
    pub name: String,
    pub version: Option<String>,
    pub built: Option<String>,
    pub files: usize,
    #[schemars(with = "Vec<serde_json::Value>")]
    pub sources: Vec<atlas_runtime::manifest::SourceInfo>,
    pub chunks: Option<usize>,
    pub model: Option<String>,
    /// What paths of this library start with, when the server serves several.
    pub path_prefix: String,
    /// A plain mirror's folder.
    pub mirror: Option<String>,
}

/// `get_release_info`'s structured reply: the one library's fields, or `libraries`
/// when the server serves several.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReleaseOut {
    #[serde(flatten)]
    pub one: Option<ReleaseInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<ReleaseInfo>,
}
