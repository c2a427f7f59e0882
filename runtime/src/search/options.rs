//! What a search asks for: the mode, the filters, the fusion, the caps.

use serde::{Deserialize, Serialize};

pub use crate::filters::Filters;

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
    /// Reciprocal-rank fusion (k = [`Tuning::rrf_k`]): ranks only, scale-free.
    Rrf,
    /// Scores on a common scale ([`Tuning::norm`]: vector min-max, keyword over its
    /// best), keyword weighted by the query's shape. The default: on the tune halves
    /// of the round-3 development sets it beats RRF by 0.03 MRR@10, and the test
    /// halves agree (docs/decisions.md, "Fusion").
    #[default]
    Score,
}

/// The most hits one search returns.
pub const MAX_TOP_K: usize = 1000;
/// Hits a search gives when the caller names no `top_k`.
pub const DEFAULT_TOP_K: usize = 5;
/// The most hits one MCP tool call may ask for (a reply an agent reads whole).
pub const MAX_TOOL_TOP_K: usize = 50;
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
    /// Rerank a pooled candidate set with the cross-encoder (see [`super::Engine::search`]).
    pub rerank: bool,
    /// The ranking's knobs (the default: what the development sets' tune halves
    /// fitted); for the evaluation, not for users.
    #[serde(skip)]
    pub tuning: Tuning,
}

/// A search as a caller asks for it, `None` where the caller left it out. Every
/// caller (the rag tools, the CLI, the web page, `atlas ask`, eval) makes its
/// [`SearchOptions`] through [`SearchRequest::options`]: the one place the defaults and the
/// caps apply.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    pub mode: Option<Mode>,
    pub top_k: Option<usize>,
    pub min_score: Option<f32>,
    pub fusion: Option<Fusion>,
    pub rerank: Option<bool>,
    pub filters: Filters,
    /// The ranking's knobs, for the evaluation.
    pub tuning: Option<Tuning>,
}

impl SearchRequest {
    /// The options: what was left out from [`SearchOptions::default`] (hybrid,
    /// [`DEFAULT_TOP_K`] hits, score fusion, no rerank), and `top_k` within `1..=cap`,
    /// the cap itself at most [`MAX_TOP_K`] ([`MAX_TOOL_TOP_K`] for a tool's reply).
    pub fn options(self, cap: usize) -> SearchOptions {
        let d = SearchOptions::default();
        SearchOptions {
            mode: self.mode.unwrap_or(d.mode),
            top_k: self.top_k.unwrap_or(d.top_k).clamp(1, cap.clamp(1, MAX_TOP_K)),
            min_score: self.min_score,
            filters: self.filters,
            fusion: self.fusion.unwrap_or(d.fusion),
            rerank: self.rerank.unwrap_or(d.rerank),
            tuning: self.tuning.unwrap_or(d.tuning),
        }
    }
}

/// The ranking's knobs. The defaults are what the tune halves of the development
/// sets fitted (docs/decisions.md, "Quality, round 3"); `atlas eval --tuning` tries
/// others.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tuning {
    /// RRF's k: larger flattens the rank curve.
    pub rrf_k: f32,
    /// Keyword's weight in hybrid against vector's 1, by query shape (identifier,
    /// keywords, question) and by the candidate's kind (docs, code).
    pub keyword_weight: [[f32; 2]; 3],
    /// Score factor per earlier hit from the same file (diversity).
    pub same_file: f32,
    /// Share of a file's second-best chunk added to its best chunk (file evidence).
    pub file_second: f32,
    /// Score factor for a candidate that a top hit links to (docs ↔ code mentions).
    pub link_boost: f32,
    /// How many top hits lend their links.
    pub link_from: usize,
    /// Rocchio feedback: the weight of the top vector hits' mean added to the query
    /// vector (0: off).
    pub prf: f32,
    /// Score factor when a query word names one of the chunk's cluster tags.
    pub cluster_boost: f32,
    /// Score factor for a chunk from a file of tests ([`crate::symbols::is_test_path`])
    /// when the query does not ask about tests.
    pub test_files: f32,
    /// Score factor for a chunk from a file of tests when the query asks about tests
    /// (a word of it stems to `test`).
    pub test_questions: f32,
    /// Score factor for a chunk whose file is not the package's own code ([`NOT_OWN_CODE`]).
    pub not_own_code: f32,
    /// Rank the chunks that define a name the query gives first (keyword, hybrid).
    pub definitions_first: bool,
    /// Overrides the search's fusion (for comparing them in `atlas eval --tuning`).
    pub fusion: Option<Fusion>,
    /// How score fusion puts each list on a common scale: vector's, then keyword's.
    pub norm: [Norm; 2],
    /// Several libraries behind one server: how sharply a library whose nearest chunk
    /// is farther than the best library's loses weight (`exp(−sharpness · gap)`).
    pub library_sharpness: f32,
    /// Weight of a chunk's later windows against its first; 0 searches first windows
    /// only (what a plain, truncating embedder would give).
    pub later_window_weight: f32,
    /// Kinds in the first hits: when the first [`MIX_SLOT`] + 1 hits are all docs or
    /// all code and a hit of the other kind is among the first `kind_mix`, it takes
    /// the last of those places (0: off).
    pub kind_mix: usize,
}

/// Keyword's weight in hybrid for a code chunk, against vector's 1: the code sets'
/// tune halves rise from 1.0 to 1.15 and are flat, within one question, to 1.25; the
/// smallest weight on that plateau (docs/decisions.md, "Code chunks weigh their
/// keyword score more").
pub const CODE_KEYWORD_WEIGHT: f32 = 1.15;

/// [`Tuning::not_own_code`]'s default: the score factor for a chunk whose file is not
/// the package's own code (vendored, minified or bundled, generated, a legacy tree:
/// [`crate::Origin`]), in every mode and after a rerank. Not fitted: the factor a file
/// of tests takes ([`Tuning::test_files`]), on the same ground. Such a file repeats or replaces the package's words, so at a
/// like score the package's own code answers, yet a much better match still shows
/// (docs/decisions.md, "Issue 68 item 7").
pub const NOT_OWN_CODE: f32 = 0.5;

/// The place (0-based) a hit of the missing kind takes: the fifth.
pub const MIX_SLOT: usize = 4;

/// How score fusion scales one list's scores before weighting them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Norm {
    /// (s − min) / (max − min) over the list.
    MinMax,
    /// s / max: the best is 1, the rest keep their ratio to it.
    Max,
    /// As scored (a cosine is already on a fixed scale).
    Raw,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            rrf_k: 60.0,
            // Keyword as much as vector for docs chunks, for every shape: with keyword
            // scoring the chunk's text first (`text_index::DEFAULT_BOOSTS`) the tune
            // halves are flat from 0.65 to 1.5 for prose questions, and 1.0 is where
            // hybrid trails its best single mode least (docs/decisions.md, "Field
            // boosts"). A little more for code chunks, whose cosines the model reads
            // less well than prose (round 14, docs/decisions.md, "Code chunks weigh
            // their keyword score more").
            keyword_weight: [[1.0, CODE_KEYWORD_WEIGHT]; 3],
            same_file: 0.85,
            file_second: 0.0,
            link_boost: 1.0,
            link_from: 5,
            prf: 0.0,
            cluster_boost: 1.05,
            test_files: 0.5,
            test_questions: 1.5,
            not_own_code: NOT_OWN_CODE,
            definitions_first: true,
            fusion: None,
            norm: [Norm::MinMax, Norm::Max],
            library_sharpness: 5.0,
            later_window_weight: LATER_WINDOW_WEIGHT,
            kind_mix: 10,
        }
    }
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            mode: Mode::Hybrid,
            top_k: DEFAULT_TOP_K,
            min_score: None,
            filters: Filters::default(),
            fusion: Fusion::default(),
            rerank: false,
            tuning: Tuning::default(),
        }
    }
}

/// A chunk's later windows count this much against its first: the first window holds
/// the title and the section's opening, and the devtron evaluation ranks better when
/// tails count a little less (docs/benchmarks.md, "Long chunks").
pub const LATER_WINDOW_WEIGHT: f32 = 0.9;
