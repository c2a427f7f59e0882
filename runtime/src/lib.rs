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
    #[error("{0}")]
    Model(String),
    #[error("{0}")]
    Query(String),
    /// A database serving an exported bundle failed (unreachable, timed out).
    #[error("{0}")]
    Remote(String),
    /// A search over several libraries where none could be searched: each one's
    /// reason, in the order given.
    #[error("no library could be searched: {}", .0.iter().map(|s| format!("{} {}", s.library, s.why)).collect::<Vec<_>>().join("; "))]
    NoneSearched(Vec<search::Skipped>),
    /// A golden file that does not parse (docs/eval.md has the format).
    #[error("golden set: {0}")]
    Golden(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

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
pub use chunk_table::ChunkKind;
pub use hit::Hit;
pub use search::{Mode, SearchOptions, Searched};
