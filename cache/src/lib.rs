//! Content-addressed artifact store for the Atlas pipeline.
//!
//! Layout of a cache directory:
//!
//! ```text
//! <cache>/
//!   lock                      exclusive lock (OS file lock; released by the kernel when a process dies)
//!   objects/ab/cdef…          immutable blobs, named by the blake3 of their bytes
//!   refs/<namespace>/<key>    small files holding one object digest (stage and item memo entries)
//!   runs/<run-id>.json        one record per finished run: what it produced and referenced
//!   tmp/                      staging area for atomic writes
//! ```
//!
//! Every write goes to `tmp/`, is fsynced and atomically renamed into place, so a
//! crash leaves either the old state or the new one. Every read re-hashes the bytes:
//! a truncated, zero-byte or bit-flipped object is reported, evicted and treated as a
//! miss, never served.
//!
//! A [`Remote`] may sit behind the local store (a team's shared cache on object
//! storage): a local miss reads through it (objects and memo entries, each object
//! checked against its blake3 before it is stored or used), and every write is queued
//! to it behind the local one. The remote is an accelerator, never a dependency: the
//! first failure or timeout turns it off for the run with one warning, and a corrupt
//! remote object is reported and recomputed.
//!
//! Modules: `digest` (names of bytes and keys), `store` (the locked folder and its
//! objects), `refs` (memo entries), `remote` (the shared cache behind it), `trust`
//! (whose remote refs count), `runs` (run records and gc), `atomic` (the one atomic
//! write every crate uses).

use std::io;
use std::path::{Path, PathBuf};

pub mod atomic;
mod digest;
mod refs;
mod remote;
mod runs;
mod store;
pub mod trust;

pub use atomic::write_file_atomic;
pub use digest::{Digest, KeyBuilder};
pub use remote::{Remote, RemoteError};
pub use runs::{GcReport, RunRecord};
pub use store::{Cache, LockWait, Stats};
pub use trust::{RefRecord, RemotePolicy};

/// Errors of the artifact store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The I/O error is part of the message, not a `source()`, so `{:#}` chains
    /// do not print it twice.
    #[error("cache I/O failed at {path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error(
        "corrupt cache object at {path}: expected blake3 {expected}, found {actual}; it was evicted and will be recomputed"
    )]
    DataCorruption { path: PathBuf, expected: String, actual: String },
    #[error(
        "the cache at {path} is locked by another atlas-pipeline run ({holder}); wait for it to finish, or point --cache-dir elsewhere"
    )]
    Locked { path: PathBuf, holder: String },
    #[error("invalid digest {0:?}: expected 64 lowercase hex characters")]
    InvalidDigest(String),
    #[error("malformed cache record at {path}: {reason}")]
    BadRecord { path: PathBuf, reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |error| Error::Io { path: path.to_owned(), error }
}

/// Milliseconds since the Unix epoch (0 before it).
pub fn now_unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
