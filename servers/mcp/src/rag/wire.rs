//! What the rag tools take and return: their arguments and the typed replies their
//! output schemas are generated from.

use atlas_runtime::Mode;
use rmcp::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::code::{OutlineSymbol, RefFile, SymbolOut};

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModeArg {
    Vector,
    Keyword,
    Hybrid,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Vector => Mode::Vector,
            ModeArg::Keyword => Mode::Keyword,
            ModeArg::Hybrid => Mode::Hybrid,
        }
    }
}

/// How much of each hit a search reply shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    /// Where each hit is and how to cite it: no snippet (many hits in few tokens).
    Brief,
    /// With a snippet of each hit (the default).
    #[default]
    Full,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchDocsArgs {
    /// A question or keywords, in the user's words.
    pub query: String,
    /// hybrid (default: meaning and exact words), vector (meaning) or keyword (exact words, names).
    #[serde(default)]
    pub mode: Option<ModeArg>,
    /// How many hits (default 5, at most 50).
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub top_k: Option<usize>,
    /// Only this section (publication), as get_bundle_info lists them.
    #[serde(default)]
    pub section: Option<String>,
    /// Drop hits scoring below this (on the mode's scale: cosine for vector, BM25 for keyword, the fused score for hybrid).
    #[serde(default, deserialize_with = "crate::lenient::opt_f32")]
    pub min_score: Option<f32>,
    /// Rerank the candidates with the cross-encoder (slower, often sharper).
    #[serde(default)]
    pub rerank: Option<bool>,
    /// Only this library, when the server serves several: `name`, `name@version` or
    /// `name@range` (`^1.2`, `~1`, `>=1, <2`). Without it, every library, merged.
    #[serde(default)]
    pub library: Option<String>,
    /// brief (no snippets) or full (default).
    #[serde(default)]
    pub detail: Option<Detail>,
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchCodeArgs {
    /// What the code does, or an identifier (function, class, type name).
    pub query: String,
    /// Only this language (python, rust, javascript, typescript, go, java, …).
    #[serde(default)]
    pub language: Option<String>,
    /// Only this repository (its name or URL).
    #[serde(default)]
    pub repo: Option<String>,
    /// Only this kind of symbol (function, method, class, struct, impl, trait, …).
    #[serde(default)]
    pub symbol_kind: Option<String>,
    /// hybrid (default), vector or keyword.
    #[serde(default)]
    pub mode: Option<ModeArg>,
    /// How many hits (default 5, at most 50).
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub top_k: Option<usize>,
    /// Only this library, when the server serves several: `name`, `name@version` or
    /// `name@range` (`^1.2`, `~1`, `>=1, <2`). Without it, every library, merged.
    #[serde(default)]
    pub library: Option<String>,
    /// brief (no snippets) or full (default).
    #[serde(default)]
    pub detail: Option<Detail>,
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetChunkArgs {
    /// The chunk_id of a search hit (`id` is taken too).
    #[serde(alias = "id")]
    pub chunk_id: String,
    /// Also return this many chunks before and after it in the same file (0–5, default 1).
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub neighbors: Option<usize>,
    /// The hit's library (needed only when several served libraries hold the chunk).
    #[serde(default)]
    pub library: Option<String>,
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct LibraryArg {
    /// Which library (`name` or `name@version`); needed only when the server serves several.
    #[serde(default)]
    pub library: Option<String>,
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindSymbolArgs {
    /// The name: bare (`compile_torch_model`), qualified (`ServerKey::new`,
    /// `Model.fit`, `module.function`), a call's `()` aside; with `prefix`, the start
    /// of a name.
    pub name: String,
    /// Every definition whose name starts with `name` (case aside), not just `name`.
    #[serde(default)]
    pub prefix: bool,
    /// Only this kind: function, method, class, struct, enum, trait, interface, type,
    /// mod, macro, const, static, variable.
    #[serde(default)]
    pub kind: Option<String>,
    /// Only this language (rust, python, javascript, typescript, go, java).
    #[serde(default)]
    pub language: Option<String>,
    /// Only this library (`name`, `name@version` or a range); every library without it.
    #[serde(default)]
    pub library: Option<String>,
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindReferencesArgs {
    /// The name whose uses to list (its last segment counts: `Type::method` → `method`).
    pub name: String,
    /// Only this library (`name`, `name@version` or a range); every library without it.
    #[serde(default)]
    pub library: Option<String>,
    #[serde(flatten)]
    pub budget: Budget,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct OutlineArgs {
    /// The file, as a search hit or find_symbol names it (`<source>/<path>`).
    pub path: String,
    /// Its library (needed only when several served libraries hold the path).
    #[serde(default)]
    pub library: Option<String>,
    #[serde(flatten)]
    pub budget: Budget,
}

/// A hit as the search tools return it in `structuredContent`: where it is, how to
/// cite it, its file as a resource. Not its snippet, which the text block shows (a
/// client that forwards both would pay for it twice), and no field that is empty.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HitOut {
    pub score: f32,
    /// For get_chunk.
    pub chunk_id: String,
    /// `name@version`.
    pub library: String,
    /// The file (`<source>/<path>`).
    pub path: String,
    pub title: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub heading_path: Vec<String>,
    pub start_line: u32,
    pub end_line: u32,
    /// The snippet's own lines, when it is a window of the chunk below its first line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet_lines: Option<[u32; 2]>,
    /// docs or code.
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    pub section: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol_kind: Option<String>,
    /// The file is not the package's own code: vendored, minified, generated or legacy
    /// (ranked below the package's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Docs: the corpus symbols this chunk mentions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<String>,
    /// Code: the docs chunks that mention this chunk's symbols.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<serde_json::Value>")]
    pub mentioned_in: Vec<atlas_runtime::hit::Link>,
    /// Where a reader checks it (the page URL with its anchor, or file + lines, at the
    /// commit for a repository).
    pub citation: String,
    /// The hit's file as a resource (`atlas://{library}/{path}`): resources/read gives it whole.
    pub uri: String,
}

/// `search_docs`' and `search_code`'s structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchOut {
    pub hits: Vec<HitOut>,
    /// How sure the search is that the libraries answer the query: the calibrated
    /// confidence `atlas ask` refuses below (vector and hybrid searches; none for
    /// keyword, whose scores are not calibrated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
    /// The other search tool, when its kind (code for search_docs, docs for
    /// search_code) answers the query more surely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub try_instead: Option<&'static str>,
    /// Libraries that were not searched (a model missing, …) while others answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Pass it back as `cursor` for the hits the budget left out.
    pub next_cursor: Option<String>,
}

/// A search's confidence, as a number and a word.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Confidence {
    /// The calibrated probability that a hit answers the query, 0 to 1.
    pub score: f32,
    /// `none` below the refusal threshold (nothing served answers confidently), `low`
    /// up to halfway from it to 1, `high` above.
    pub level: &'static str,
    /// The refusal threshold (the libraries' calibrated one, else Atlas's).
    pub threshold: f32,
    /// The query's words that no chunk of the surest library holds: what lowers the
    /// score most. The library may say the same thing in other words (`GPU` for
    /// `graphics card`): search again with them before concluding it does not cover it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseen_words: Vec<String>,
    /// The surest library has no vectors yet (built keyword-first) or no model here:
    /// the score is read from its keyword evidence alone (the question's words its
    /// chunks hold, the best keyword score, names found), not from meaning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keyword_only: bool,
}

impl Confidence {
    pub fn new(score: f32, threshold: f32) -> Confidence {
        let level = if score < threshold {
            "none"
        } else if score < (threshold + 1.0) / 2.0 {
            "low"
        } else {
            "high"
        };
        Confidence { score, level, threshold, unseen_words: Vec::new(), keyword_only: false }
    }

    /// With the query's words no chunk holds ([`atlas_runtime::search::Searched::unseen_words`]).
    pub fn with_unseen(self, unseen_words: Vec<String>) -> Confidence {
        Confidence { unseen_words, ..self }
    }

    /// Marked as read from keyword evidence alone ([`atlas_runtime::search::Signals::keyword_only`]).
    pub fn keyword_only(self, keyword_only: bool) -> Confidence {
        Confidence { keyword_only, ..self }
    }

    /// How the text reply says where the score comes from: empty for the calibrated
    /// model, else `, from keywords only`.
    pub fn source(&self) -> &'static str {
        if self.keyword_only { ", from keywords only" } else { "" }
    }
}

/// `get_chunk`'s structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ChunkOut {
    #[serde(flatten)]
    #[schemars(with = "ChunkContextSchema")]
    pub chunk: atlas_runtime::bundle::ChunkContext,
    /// The requested chunk's text was cut at the budget; pass this back as `cursor` for the rest.
    pub next_cursor: Option<String>,
}

/// `list_libraries`' structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LibrariesOut {
    pub libraries: Vec<LibraryOut>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken: Vec<crate::library::Broken>,
    pub next_cursor: Option<String>,
}

/// One source of a library, with its age.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SourceOut {
    pub name: String,
    pub kind: String,
    pub url: Option<String>,
    pub commits: Vec<String>,
    pub files: usize,
    pub fetched_at: Option<String>,
    pub age_days: Option<i64>,
}

/// One served library.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LibraryOut {
    /// `name@version`.
    pub library: String,
    pub name: String,
    pub version: String,
    /// The versions of this name served.
    pub versions: Vec<String>,
    pub description: String,
    pub model: String,
    pub chunks: usize,
    pub by_kind: std::collections::BTreeMap<String, usize>,
    pub built: String,
    pub built_age_days: Option<i64>,
    pub sources: Vec<SourceOut>,
}

/// `get_bundle_info`'s structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BundleInfoOut {
    #[serde(flatten)]
    #[schemars(with = "BundleInfoSchema")]
    pub info: atlas_runtime::bundle::BundleInfo,
    pub source_age_days: Vec<i64>,
    pub built_age_days: Option<i64>,
}

/// The wire shape of [`atlas_runtime::bundle::ChunkContext`] (runtime types carry no
/// protocol schema): a chunk and its neighbours, each a hit with its text.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ChunkContextSchema {
    before: Vec<serde_json::Value>,
    chunk: serde_json::Value,
    after: Vec<serde_json::Value>,
}

/// The wire shape of [`atlas_runtime::bundle::BundleInfo`].
#[derive(JsonSchema)]
#[allow(dead_code)]
struct BundleInfoSchema {
    name: String,
    version: String,
    created: String,
    model: String,
    dims: usize,
    chunks: usize,
    embedding_rows: usize,
    by_kind: std::collections::BTreeMap<String, usize>,
    by_section: std::collections::BTreeMap<String, usize>,
    /// Chunks whose file is not the package's own code, by origin (absent: none).
    by_origin: Option<std::collections::BTreeMap<String, usize>>,
    sources: Vec<serde_json::Value>,
    modes: Vec<String>,
    vector_index: String,
    bm25_boosts: std::collections::BTreeMap<String, f32>,
}

/// `find_symbol`'s structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FindSymbolOut {
    pub name: String,
    /// Definitions found, in all.
    pub total: usize,
    pub definitions: Vec<SymbolOut>,
    pub next_cursor: Option<String>,
}

/// `find_references`' structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FindReferencesOut {
    /// The name looked up (the last segment of the one asked).
    pub name: String,
    /// Uses found, in all.
    pub total: usize,
    pub files: Vec<RefFile>,
    /// How the uses were found: by name, not by type.
    pub note: String,
    pub next_cursor: Option<String>,
}

/// `get_file_outline`'s structured reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OutlineOut {
    pub library: String,
    pub path: String,
    pub uri: String,
    pub symbols: Vec<OutlineSymbol>,
    pub next_cursor: Option<String>,
}
