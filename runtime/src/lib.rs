//! The lean side of Atlas: the on-disk formats a bundle is made of, and the search
//! engine the servers call ([`Bundle`]).
//!
//! Architecture invariant: this crate never depends on `atlas-stages`, `atlas-cache`,
//! reqwest or rmcp. The pipeline depends on it for the formats it writes, never the
//! other way round.

pub mod bundle;
pub mod chunk_table;
pub mod encoder;
pub mod eval;
pub mod exit;
pub mod failpoint;
pub mod filters;
pub mod hash;
pub mod hit;
pub mod hnsw;
pub mod install;
pub mod int8;
pub mod manifest;
pub mod model;
pub mod package;
pub mod progress;
pub mod prompts;
pub mod query_map;
pub mod remote;
pub mod rerank;
pub mod safe_path;
pub mod search;
pub mod symbols;
pub mod table;
pub mod text_index;
pub mod text_store;
pub mod utf8;
pub mod vectors;
pub mod words;

/// Errors of the runtime crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The I/O error is part of the message, not a `source()`, so `{:#}` chains
    /// do not print it twice.
    #[error("I/O failed at {path}: {error}")]
    Io { path: std::path::PathBuf, error: std::io::Error },
    #[error("corrupt data in {path}: {reason}")]
    DataCorruption { path: std::path::PathBuf, reason: String },
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// The embedding or reranking model could not be used.
    #[error("{0}")]
    Model(ModelError),
    #[error("{0}")]
    Query(String),
    /// A database serving an exported bundle failed (unreachable, timed out): which,
    /// and the cause (its chain printed in the one line).
    #[error("{database}: {}", crate::exit::one_line(&**cause))]
    Remote { database: String, cause: Box<dyn std::error::Error + Send + Sync> },
    /// A search over several libraries where none could be searched: each one's
    /// reason, in the order given.
    #[error("no library could be searched: {}", .0.iter().map(|s| format!("{} {}", s.library, s.why)).collect::<Vec<_>>().join("; "))]
    NoneSearched(Vec<search::Skipped>),
    /// A golden file that does not parse (docs/eval.md has the format).
    #[error("golden set: {0}")]
    Golden(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a model could not be used: missing, not the one the bundle pins, or ONNX
/// Runtime or the tokenizer failed (the cause kept). Cheap to clone: a model that
/// failed to load is remembered, and each later search gets the same error.
///
/// The cause is part of the message, not a `source()`, so `{:#}` chains do not print
/// it twice.
#[derive(Debug, Clone)]
pub struct ModelError {
    what: String,
    cause: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

impl ModelError {
    /// A failure with no underlying error (a file missing, a shape unexpected).
    pub fn new(what: impl Into<String>) -> ModelError {
        ModelError { what: what.into(), cause: None }
    }

    /// `what` failed because of `cause`.
    pub fn caused(what: impl Into<String>, cause: impl std::error::Error + Send + Sync + 'static) -> ModelError {
        ModelError { what: what.into(), cause: Some(std::sync::Arc::new(cause)) }
    }

    /// [`ModelError::caused`] for a cause already boxed (the tokenizer's).
    pub fn boxed(what: impl Into<String>, cause: Box<dyn std::error::Error + Send + Sync>) -> ModelError {
        ModelError { what: what.into(), cause: Some(cause.into()) }
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.cause {
            None => f.write_str(&self.what),
            Some(c) if self.what.is_empty() => write!(f, "{c}"),
            Some(c) => write!(f, "{}: {c}", self.what),
        }
    }
}

impl std::error::Error for ModelError {}

/// Any failure while loading a model is the model's: a search falls back to keyword.
impl From<Error> for ModelError {
    fn from(e: Error) -> ModelError {
        match e {
            Error::Model(m) => m,
            other => ModelError::caused("", other),
        }
    }
}

/// A [`Error::DataCorruption`] naming `path`.
pub(crate) fn corrupt(path: std::path::PathBuf, reason: impl Into<String>) -> Error {
    Error::DataCorruption { path, reason: reason.into() }
}

/// `e`, a reader's error, as corruption of `path`: a [`Error::DataCorruption`] keeps
/// its reason (named once, at `path`).
pub(crate) fn corrupt_at(path: std::path::PathBuf, e: Error) -> Error {
    match e {
        Error::DataCorruption { reason, .. } => corrupt(path, reason),
        other => corrupt(path, other.to_string()),
    }
}

pub use bundle::{Bundle, OpenOptions};
pub use chunk_table::{ChunkKind, Origin};
pub use hit::Hit;
pub use search::{Mode, SearchOptions, Searched};
