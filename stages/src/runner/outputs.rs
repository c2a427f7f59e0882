//! The build folder (default `.atlas/build` beside the config): after a run, each stage
//! that ran writes its output there through its `materialize` (the clean stage the
//! mirror, chunk `chunks.parquet`, pack the bundle…). Each file is written atomically
//! and only when its content changed; what a folder held that is no longer part of
//! the output is removed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use atlas_cache::{Cache, Digest};

/// What a stage's `materialize` writes through.
#[derive(Debug)]
pub struct Outputs<'a> {
    pub cache: &'a Cache,
    /// The build folder.
    pub dir: &'a Path,
    /// `--archive`: also write the bundle as an archive.
    pub archive: bool,
    /// The outputs to name in the log.
    pub written: Vec<PathBuf>,
}

impl Outputs<'_> {
    /// `<dir>/<rel>`, refusing a path that would leave the build folder.
    pub fn path(&self, rel: &str) -> anyhow::Result<PathBuf> {
        safe_join(self.dir, rel)
    }

    /// Writes `bytes` to `<dir>/<rel>` when they changed; `named` puts it in the log.
    pub fn write(&mut self, rel: &str, bytes: &[u8], named: bool) -> anyhow::Result<()> {
        let path = self.path(rel)?;
        write_if_changed(&path, bytes)?;
        if named {
            self.written.push(path);
        }
        Ok(())
    }

    /// Writes the folder `<dir>/<rel>` from `files` (path inside it, bytes), removing
    /// whatever else it held; `named` puts it in the log.
    pub fn write_folder(
        &mut self,
        rel: &str,
        files: impl IntoIterator<Item = anyhow::Result<(String, Vec<u8>)>>,
        named: bool,
    ) -> anyhow::Result<()> {
        let dir = self.path(rel)?;
        let mut keep = BTreeSet::new();
        for file in files {
            let (name, bytes) = file?;
            let path = safe_join(&dir, &name)?;
            write_if_changed(&path, &bytes)?;
            keep.insert(path);
        }
        remove_stale(&dir, &keep)?;
        if named {
            self.written.push(dir);
        }
        Ok(())
    }

    /// [`Outputs::write_folder`] from cache objects (path inside it → object), named.
    pub fn write_objects(&mut self, rel: &str, files: &BTreeMap<String, Digest>) -> anyhow::Result<()> {
        let cache = self.cache;
        let bytes = files.iter().map(|(name, d)| Ok((name.clone(), cache.get_required(*d)?)));
        self.write_folder(rel, bytes, true)
    }
}

/// `root/rel`, refusing a path that would leave `root`.
fn safe_join(root: &Path, rel: &str) -> anyhow::Result<PathBuf> {
    atlas_runtime::safe_path::join_inside(root, rel).with_context(|| format!("writing into {}", root.display()))
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Ok(old) = std::fs::read(path)
        && Digest::of(&old) == Digest::of(bytes)
    {
        return Ok(());
    }
    atlas_cache::write_file_atomic(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn remove_stale(root: &Path, keep: &BTreeSet<PathBuf>) -> anyhow::Result<()> {
    if !root.exists() {
        return Ok(());
    }
    let mut dirs = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p.clone());
                dirs.push(p);
            } else if !keep.contains(&p) {
                std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
            }
        }
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        let _ = std::fs::remove_dir(&d); // only empty ones go
    }
    Ok(())
}
