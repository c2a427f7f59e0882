//! What an install or an update is asked ([`Options`]) and what it did ([`Outcome`],
//! with a delta update's [`Transfer`]): the vocabulary `install` and `delta` share.

use std::path::PathBuf;

use serde::Serialize;

use crate::archive::Limits;

#[derive(Debug, Clone)]
pub struct Options {
    pub trust: Vec<String>,
    pub keep: usize,
    pub limits: Limits,
    /// The sha256 of a local archive or URL without a `.sha256` beside it.
    pub sha256: Option<String>,
    /// GitHub's API root.
    pub github_api: String,
    /// Install a version older than the current one (a rollback is refused otherwise).
    pub allow_downgrade: bool,
    /// The bundle the source must hold (`atlas update NAME`): another is refused.
    pub expect_name: Option<String>,
    /// A package version (`atlas add`, `atlas sync`): one more version beside the
    /// others, not an update of the bundle. An older one than the current is installed
    /// without moving `current` instead of being refused as a rollback.
    pub beside: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            trust: Vec::new(),
            keep: 5,
            limits: Limits::default(),
            sha256: None,
            github_api: crate::github::api_from_env(),
            allow_downgrade: false,
            expect_name: None,
            beside: false,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub name: String,
    pub version: String,
    pub path: PathBuf,
    /// False when the source had nothing new.
    pub changed: bool,
    pub signed_by: Option<String>,
    pub previous: Option<String>,
    /// What a delta update moved (None for a full download or a local archive).
    pub transfer: Option<Transfer>,
}

/// What a delta update moved.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Transfer {
    /// Bytes read from the remote (the manifest and the compressed files).
    pub fetched_bytes: u64,
    pub fetched_files: usize,
    /// Files hard-linked (or copied) from the installed version.
    pub reused_files: usize,
    /// The full archive's size, for comparison.
    pub archive_bytes: u64,
}
