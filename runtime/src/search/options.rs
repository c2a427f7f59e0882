//! What a search asks for: the mode, the filters, the fusion, the caps.

use serde::{Deserialize, Serialize};

use crate::chunk_table::{ChunkKind, ChunkRecord};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Vector,
    Keyword,
    #[default]
    Hybrid,
}

impl Mode {
    /// The name `FromStr` reads back.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Vector => "vector",
            Mode::Keyword => "keyword",
            Mode::Hybrid => "hybrid",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "vector" => Ok(Mode::Vector),
            "keyword" => Ok(Mode::Keyword),
            "hybrid" => Ok(Mode::Hybrid),
            other => Err(format!("unknown mode {other:?}; use vector, keyword or hybrid")),
        }
    }
}

/// How hybrid fuses its two candidate lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// Reciprocal-rank fusion, k = 60: ranks only, scale-free. The default: it beats
    /// score fusion on every measure of the devtron evaluation (docs/benchmarks.md,
    /// "Retrieval quality").
    #[default]
    Rrf,
    /// Min-max-normalised scores, weighted equally.
    Score,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Filters {
    pub kind: Option<ChunkKind>,
    pub section: Option<String>,
    pub language: Option<String>,
    /// Matches the repository URL or its last path segment.
    pub repo: Option<String>,
    /// A prefix of the chunk's file path (`<source>/<path>`).
    pub path_prefix: Option<String>,
    pub symbol_kind: Option<String>,
}

impl Filters {
    pub fn keep(&self, c: &ChunkRecord) -> bool {
        let eq = |want: &Option<String>, got: Option<&str>| want.as_deref().is_none_or(|w| got == Some(w));
        self.kind.is_none_or(|k| k == c.kind)
            && eq(&self.section, Some(&c.section))
            && eq(&self.language, c.language.as_deref())
            && eq(&self.symbol_kind, c.symbol_kind.as_deref())
            && self.path_prefix.as_deref().is_none_or(|p| c.path.starts_with(p))
            && self.repo.as_deref().is_none_or(|r| {
                c.repo.as_deref().is_some_and(|got| got == r || got.trim_end_matches('/').rsplit('/').next() == Some(r))
            })
    }
    pub(super) fn is_empty(&self) -> bool {
        *self == Filters::default()
    }
}

/// The most hits one search returns.
pub const MAX_TOP_K: usize = 1000;
/// The longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchOptions {
    pub mode: Mode,
    pub top_k: usize,
    pub min_score: Option<f32>,
    pub filters: Filters,
    pub fusion: Fusion,
    /// Rerank a pooled candidate set with the cross-encoder (see [`Bundle::search`]).
    pub rerank: bool,
    /// Only each chunk's first window (what a plain, truncating embedder would give).
    /// For the evaluation of the window policy; not for users.
    #[serde(skip)]
    pub first_window_only: bool,
    /// Weight of a chunk's later windows against its first (the default
    /// [`LATER_WINDOW_WEIGHT`]); for the evaluation.
    #[serde(skip)]
    pub later_window_weight: f32,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            mode: Mode::Hybrid,
            top_k: 5,
            min_score: None,
            filters: Filters::default(),
            fusion: Fusion::default(),
            rerank: false,
            first_window_only: false,
            later_window_weight: LATER_WINDOW_WEIGHT,
        }
    }
}

/// A chunk's later windows count this much against its first: the first window holds
/// the title and the section's opening, and the devtron evaluation ranks better when
/// tails count a little less (docs/benchmarks.md, "Long chunks").
pub const LATER_WINDOW_WEIGHT: f32 = 0.9;
