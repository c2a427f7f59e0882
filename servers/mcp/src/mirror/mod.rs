//! The one mirror reader of both servers: a bundle's mirror (or a plain folder)
//! opened with its manifest's hashes, the path guard (`root.rs`), and the checked read
//! that `read_file`, `resources/read` on either server, and the rag server's links
//! all go through.

mod root;

use std::path::Path;

use atlas_runtime::Bundle;

pub(crate) use root::{MirrorRoot, PathError, shown};

/// Files larger than this are not read whole (search still covers them).
pub const READ_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// What the fs server serves, and what `get_release_info` says about it.
#[derive(Debug)]
pub struct Fs {
    pub root: MirrorRoot,
    pub name: String,
    pub manifest: Option<atlas_runtime::manifest::Manifest>,
    /// A bundle mirror's files (mirror-relative) → blake3, from the manifest:
    /// `read_file` refuses a file that does not match.
    pub hashes: std::collections::HashMap<String, String>,
}

impl Fs {
    /// The fs view of a bundle: its mirror, checked against its manifest.
    pub fn bundle(dir: &Path) -> anyhow::Result<Fs> {
        Fs::with_manifest(dir, atlas_runtime::manifest::read_manifest(dir)?)
    }

    /// [`Fs::bundle`] with the manifest already read (and verified) by an open bundle.
    pub fn with_manifest(dir: &Path, manifest: atlas_runtime::manifest::Manifest) -> anyhow::Result<Fs> {
        let hashes = manifest
            .artifacts
            .iter()
            .filter_map(|a| Some((a.path.strip_prefix("mirror/")?.to_owned(), a.blake3.clone())))
            .collect();
        Ok(Fs {
            root: MirrorRoot::new(&dir.join("mirror"), true)?,
            name: manifest.name.clone(),
            manifest: Some(manifest),
            hashes,
        })
    }

    /// How a server of several names it: `name@version` (a plain folder: its name).
    pub fn label(&self) -> String {
        match &self.manifest {
            Some(m) => format!("{}@{}", m.name, m.version),
            None => self.name.clone(),
        }
    }

    /// The files served, sorted: a bundle's mirror files that its manifest lists (a
    /// file planted beside them is not served), or every file of a plain folder.
    pub fn files(&self) -> Vec<String> {
        let mut all = self.root.files();
        if self.manifest.is_some() {
            all.retain(|f| self.hashes.contains_key(f));
        }
        all
    }

    /// Where a working tree's file `raw_rel` (mirror-relative: `<source>/<path>`) is
    /// now: none when this is no working tree's library; `Some(None)` when the file
    /// is no longer a regular file reached without a link.
    pub(crate) fn live_path(&self, raw_rel: &str) -> Option<Option<std::path::PathBuf>> {
        let m = self.manifest.as_ref().filter(|m| m.version == atlas_dist::project::LIVE)?;
        let root = crate::live::tree_root(&m.name)?;
        let (_, rel) = raw_rel.split_once('/')?;
        atlas_runtime::safe_path::check(rel).ok()?;
        let mut at = root;
        for part in rel.split('/') {
            at.push(part);
            // No link is followed, at any level: what the tree's index holds is the
            // same walk's files.
            match std::fs::symlink_metadata(&at) {
                Ok(m) if !m.file_type().is_symlink() => {}
                _ => return Some(None),
            }
        }
        Some(at.is_file().then_some(at))
    }

    /// A plain folder, served as it is.
    pub fn plain(dir: &Path) -> anyhow::Result<Fs> {
        Ok(Fs {
            root: MirrorRoot::new(dir, false)?,
            name: dir.file_name().map_or_else(|| "mirror".to_owned(), |n| n.to_string_lossy().into_owned()),
            manifest: None,
            hashes: Default::default(),
        })
    }
}

/// A file of the mirror, read through the path guard (`rel` as the mirror names it),
/// checked to be a regular file under the size cap and, in a bundle, to match the
/// manifest's hash: what `read_file` and a resource read both serve. The bytes, and
/// the path as the mirror names it.
pub(crate) fn read_checked(fs: &Fs, rel: &str, shown_path: &str) -> Result<(Vec<u8>, String), String> {
    let path = fs.root.resolve_listed(rel).map_err(|PathError(e)| e)?;
    let meta = std::fs::metadata(&path).map_err(|e| format!("reading {shown_path:?}: {e}"))?;
    if meta.is_dir() {
        return Err(format!("{shown_path:?} is a folder; use list_files with a glob to see its files"));
    }
    if !meta.is_file() {
        return Err(format!("{shown_path:?} is not a regular file (a FIFO, socket or device); only files are served"));
    }
    if meta.len() > READ_MAX_FILE_BYTES {
        return Err(format!(
            "{shown_path:?} is {} bytes, over the {} MiB read limit; use search to find the lines you need",
            meta.len(),
            READ_MAX_FILE_BYTES >> 20
        ));
    }
    let raw_rel = fs.root.rel(&path);
    let want = fs.hashes.get(&raw_rel);
    if fs.manifest.is_some() && want.is_none() {
        return Err(format!(
            "{shown_path:?} is not one of the bundle's files (its manifest does not list it); use list_files to see them"
        ));
    }
    // A working tree's file is read as it is now.
    if let Some(live) = fs.live_path(&raw_rel) {
        let live = live.ok_or_else(|| {
            format!("{shown_path:?} was deleted or moved in the working tree since it was indexed; search again")
        })?;
        let bytes = atlas_runtime::safe_path::read_capped(&live, READ_MAX_FILE_BYTES)
            .map_err(|e| format!("reading {shown_path:?}: {e}"))?;
        return Ok((bytes, raw_rel));
    }
    // Capped as it is read too: a file that grew since its size was checked is cut.
    let bytes = atlas_runtime::safe_path::read_capped(&path, READ_MAX_FILE_BYTES)
        .map_err(|e| format!("reading {shown_path:?}: {e}"))?;
    if let Some(want) = want
        && atlas_runtime::hash::blake3_bytes(&bytes) != *want
    {
        return Err(format!(
            "{shown_path:?} does not match the bundle's manifest: the bundle is damaged or was tampered with; \
             run `atlas verify` and reinstall it"
        ));
    }
    Ok((bytes, raw_rel))
}

/// A served bundle's mirror file `path` as text: from its database for a bundle
/// served remotely (its own copy, checked against the manifest; never a path made of
/// the database's URL), else through [`read_checked`] with the open bundle's verified
/// manifest (not a second read of the file). The error is the line a reply shows.
pub(crate) fn read_bundle_file(b: &Bundle, library: &str, path: &str) -> Result<String, String> {
    if b.is_remote() {
        return match b.remote_mirror_file(path) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e @ atlas_runtime::Error::Remote { .. }) => {
                tracing::warn!("reading {library}/{path} from its database: {e}");
                Err(format!("could not read {path:?} from the database serving {library}; try again later"))
            }
            Err(e) => Err(e.to_string()),
        };
    }
    let fs = Fs::with_manifest(&b.dir, b.manifest.clone()).map_err(|e| format!("{e:#}"))?;
    let shown_path = format!("{library}/{}", shown(path));
    let (bytes, _) = read_checked(&fs, path, &shown_path)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
