//! Distribution: how a bundle travels from the maintainer who built it to the user
//! who serves it.
//!
//! - [`archive`]: the `<name>-<version>.tar.zst` format, written deterministically and
//!   read back with a safe extractor (regular files and folders only, no path out of
//!   the target, limits on bytes, entries and compression ratio);
//! - [`sign`]: minisign key pairs and signatures (compatible with the `minisign` CLI);
//! - [`target`]: where bundles are published and installed from (GitHub releases,
//!   object storage, an HTTPS URL, a local file), [`github`] and [`store`] speak to them;
//! - [`fetch`]: resumable downloads with a progress bar;
//! - [`home`]: the installed bundles under `ATLAS_HOME/bundles` and the atomic switch of
//!   `current`; [`install`] and [`publish`] tie it together;
//! - [`config`]: the user's `config.toml`.
//!
//! Architecture invariant: nothing is unpacked before its sha256 (and, with a trusted
//! key, its signature) is checked, and nothing is served before every manifest hash
//! of the unpacked folder is: a version folder appears under `ATLAS_HOME/bundles` only
//! by the rename of a verified staging folder.

/// The one atomic write (it lives in the cache crate, below every user).
pub use atlas_cache::atomic;

pub mod archive;
pub mod config;
pub mod delta;
pub mod fetch;
pub mod github;
pub mod home;
pub mod http;
pub mod install;
pub mod latest;
pub mod outcome;
pub mod project;
pub mod publish;
pub mod setup;
pub mod sign;
pub mod store;
pub mod target;

use std::path::PathBuf;

/// Everything that can go wrong while publishing or installing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    /// The archive holds something the extractor refuses (a link, a device, a path
    /// out of the target, a duplicate) or goes past a limit.
    #[error("unsafe archive: {0}")]
    UnsafeArchive(String),
    /// Bytes that do not match their hash, a truncated archive, a manifest that lies.
    #[error("{0}")]
    DataCorruption(String),
    #[error("signature: {0}")]
    Signature(String),
    /// A remote (GitHub, object storage, an HTTP server) said no.
    #[error("{0}")]
    Remote(String),
    /// A remote could not be reached or read: what was asked, and the transport's,
    /// the store's or the client's error.
    #[error("{what}: {cause}")]
    RemoteFailed { what: String, cause: Box<dyn std::error::Error + Send + Sync> },
    /// A remote answered that what was asked for is not there (404, no such object):
    /// final, never retried.
    #[error("{0}")]
    NotFound(String),
    /// The user's input is wrong (a source, a name, a version); nothing changed.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Bundle(#[from] atlas_runtime::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error at a binary's edge: a usage error becomes the runtime's `UsageError`, so
/// `exit::finish` exits 2 for it.
pub fn edge(e: Error) -> anyhow::Error {
    match e {
        Error::Usage(m) => atlas_runtime::exit::UsageError(m).into(),
        e => e.into(),
    }
}

/// [`Error::RemoteFailed`]: `what` failed because of `cause`.
pub(crate) fn remote(what: impl Into<String>, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
    Error::RemoteFailed { what: what.into(), cause: cause.into() }
}

pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |error| Error::Io { path, error }
}

/// The most characters of an untrusted name echoed in a one-line message.
pub const MAX_SHOWN_CHARS: usize = 80;

/// `s` cut to [`MAX_SHOWN_CHARS`] for a message (a hostile 10 KB name is not echoed whole).
pub fn short(s: &str) -> String {
    match s.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// A name or version that becomes one folder name: the pipeline's own rule
/// ([`atlas_runtime::safe_path::is_safe_name`]), not starting with `-` (a flag), and not
/// `current` (the link beside the versions).
pub fn check_component(what: &str, s: &str) -> Result<()> {
    let ok = atlas_runtime::safe_path::is_safe_name(s) && !s.starts_with('-') && s != "current";
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "{what} {:?} cannot be a folder name: use letters, digits, '.', '_', '-', '+' (not first)",
            short(s)
        )))
    }
}

/// One tokio runtime for a command's network work.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    http::install_crypto();
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(io("tokio runtime"))
}
