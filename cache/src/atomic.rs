//! The one atomic write: a temporary file in the target's folder (or a staging folder
//! on the same file system), written, fsynced, renamed into place with tempfile's
//! `persist`, and the folder fsynced. Readers see the old file or the new one, never
//! half; a failed write removes its temporary file.
//!
//! The cache, the pipeline's outputs, the crawl's mirror, the installed bundles'
//! records and downloads, and `atlas backup` all write through it.

use std::io::{self, Write};
use std::path::Path;

use tempfile::NamedTempFile;

/// Writes `bytes` to `path` atomically, staging beside it.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent(path)?;
    std::fs::create_dir_all(dir)?;
    write_staged(dir, path, bytes)
}

/// Writes `bytes` to `path` atomically, staging in `staging` (a folder on the same
/// file system that the owner clears of leftovers).
pub fn write_staged(staging: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = temp_in(staging)?;
    tmp.write_all(bytes)?;
    persist(tmp, path)
}

/// A temporary file in `dir` for a streamed write; hand it to [`persist`] when done.
/// Its name starts with `.tmp`, so listings that skip hidden files skip it.
pub fn temp_in(dir: &Path) -> io::Result<NamedTempFile> {
    tempfile::Builder::new().prefix(".tmp").tempfile_in(dir)
}

/// Fsyncs `tmp`, renames it to `path` and fsyncs the folder.
pub fn persist(tmp: NamedTempFile, path: &Path) -> io::Result<()> {
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

fn parent(path: &Path) -> io::Result<&Path> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => Ok(p),
        Some(_) => Ok(Path::new(".")),
        None => Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} has no parent folder", path.display()))),
    }
}
