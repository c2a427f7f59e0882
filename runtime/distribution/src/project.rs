//! A project's library set: the exact package versions `atlas sync` installed for a
//! project's lockfiles, written to one small file in the project
//! (`.atlas/libraries.json`), and the projects this home knows (`ATLAS_HOME/projects/`),
//! so that no version a project names is ever rotated away, and `atlas bundles
//! --unused` can say which versions none names.
//!
//! Both files are read as untrusted input: bounded in size and count, names and
//! versions checked as bundle names before they touch a path.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result, io};

/// The set's file inside a project.
pub const SET_FILE: &str = ".atlas/libraries.json";
/// The largest set file read, in bytes.
const MAX_SET_BYTES: u64 = 4 << 20;
/// The most libraries one set names.
pub const MAX_LIBRARIES: usize = 10_000;
/// The most projects one home remembers.
const MAX_PROJECTS: usize = 10_000;
/// The kind of a library `atlas add --project` put in a set by hand: no lockfile pins
/// it, and `atlas sync` keeps it.
pub const ADDED: &str = "added";
/// The kind of a project's own working tree in its set (`atlas init`): it follows the
/// library's `current`, which every batch of edits moves, and `atlas sync` keeps it.
pub const TREE: &str = "tree";
/// The version a working tree's entry names: whichever copy `current` points at.
pub const LIVE: &str = "live";
/// A working tree's own ignore file, with `.gitignore`'s syntax: what to leave out of
/// the tree's index beyond what git ignores.
pub const IGNORE_FILE: &str = ".atlasignore";
/// The walk of a project's working tree as git shows it: hidden files kept,
/// `.gitignore` files (nested), `.git/info/exclude`, the global excludes and
/// [`IGNORE_FILE`] followed, with or without git; `.git/` and `.atlas/` never entered;
/// links never followed; by name. The one walker the `tree` source's scan and a
/// watcher's fingerprint share, so both see the same files.
pub fn tree_walker(root: &Path) -> ignore::WalkBuilder {
    let mut b = ignore::WalkBuilder::new(root);
    b.hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .parents(true)
        .follow_links(false)
        .add_custom_ignore_filename(IGNORE_FILE)
        .filter_entry(enters)
        .sort_by_file_name(Ord::cmp);
    b
}

/// Whether [`tree_walker`] takes `e`: anything but `.git/` and `.atlas/`. A caller
/// that filters the walk further (`filter_entry` replaces the filter) keeps this one.
pub fn enters(e: &ignore::DirEntry) -> bool {
    e.depth() == 0 || (e.file_name() != ".git" && e.file_name() != ".atlas")
}

/// The most kinds one library or one selection names.
const MAX_KINDS: usize = 64;
/// The longest kind, in bytes (`group:` and a group's name).
const MAX_KIND_BYTES: usize = 80;

/// One library of a set: the bundle's stored name and its exact version.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pinned {
    /// The bundle's name (`crate+tokio`).
    pub name: String,
    pub version: String,
    /// Where it came from: the lockfile, relative to the project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockfile: Option<String>,
    /// What the project declares it for (`runtime`, `dev`, `optional`, `build`,
    /// `group:NAME`, `transitive`); empty in a set written before kinds were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
}

/// What `atlas sync` wrote for a project.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Set {
    pub libraries: Vec<Pinned>,
    /// The kinds `--only` took; None for every kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<String>>,
    /// Whether `--all` took the transitive packages too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

/// Whether `kind` is written as a kind is: short, lower-case ASCII letters, digits and
/// `:-._`, so that it can be printed anywhere.
fn is_kind(kind: &str) -> bool {
    !kind.is_empty()
        && kind.len() <= MAX_KIND_BYTES
        && kind.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b":-._".contains(&b))
}

impl Set {
    /// The set of `project`, or None when it has none.
    pub fn read(project: &Path) -> Result<Option<Set>> {
        let path = project.join(SET_FILE);
        let Some(bytes) = read_capped(&path)? else { return Ok(None) };
        let set: Set = serde_json::from_slice(&bytes).map_err(|e| {
            Error::DataCorruption(format!("{} is not a library set ({e}); run `atlas sync` again", path.display()))
        })?;
        if set.libraries.len() > MAX_LIBRARIES {
            return Err(Error::DataCorruption(format!("{} names more than {MAX_LIBRARIES} libraries", path.display())));
        }
        let kinds = set.libraries.iter().map(|p| &p.kinds).chain(&set.only);
        if kinds.clone().any(|k| k.len() > MAX_KINDS || !k.iter().all(|k| is_kind(k))) {
            return Err(Error::DataCorruption(format!(
                "{} names a dependency kind that is not one; run `atlas sync` again",
                path.display()
            )));
        }
        if let Some(bad) = set.libraries.iter().find(|p| {
            !atlas_runtime::safe_path::is_safe_name(&p.name) || !atlas_runtime::safe_path::is_safe_name(&p.version)
        }) {
            return Err(Error::DataCorruption(format!(
                "{} names {:?}, which is not a bundle name; run `atlas sync` again",
                path.display(),
                atlas_runtime::utf8::clip_chars(&format!("{}@{}", bad.name, bad.version), 80)
            )));
        }
        Ok(Some(set))
    }

    /// Writes the set into `project` (atomically) and remembers the project in
    /// `atlas_home`. The file is replaced, never written through: a link in its place
    /// is replaced too, and a `.atlas` that leads out of the project is refused
    /// ([`set_folder`]).
    pub fn write(&self, project: &Path, atlas_home: &Path) -> Result<PathBuf> {
        set_folder(project)?;
        let path = project.join(SET_FILE);
        let mut text = serde_json::to_string_pretty(self).expect("plain data");
        text.push('\n');
        atlas_cache::write_file_atomic(&path, text.as_bytes()).map_err(io(&path))?;
        remember(atlas_home, project)?;
        Ok(path)
    }

    /// The version this set names for the bundle `name`.
    pub fn version_of(&self, name: &str) -> Option<&str> {
        self.libraries.iter().find(|p| p.name == name).map(|p| p.version.as_str())
    }
}

/// The folder of a project's set (`.atlas`), made when missing: inside the project's
/// real folder, or a usage error when `.atlas` is a link (or under one) that leads out
/// of it, since a cloned repository can carry such a link.
pub fn set_folder(project: &Path) -> Result<PathBuf> {
    let dir = project.join(SET_FILE);
    let dir = dir.parent().expect("SET_FILE has a folder");
    // A dangling link makes this fail (it exists, and is no folder): nothing is made
    // through it.
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let real_project = project.canonicalize().map_err(io(project))?;
    let real = dir.canonicalize().map_err(io(dir))?;
    if !real.starts_with(&real_project) {
        return Err(Error::Usage(format!(
            "{} leads to {}, outside the project; Atlas writes a project's library set only inside the project: \
             remove the link (or make it a folder) and sync again",
            dir.display(),
            real.display()
        )));
    }
    Ok(dir.to_owned())
}

fn read_capped(path: &Path) -> Result<Option<Vec<u8>>> {
    match atlas_runtime::safe_path::read_capped(path, MAX_SET_BYTES) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(Error::DataCorruption(format!("{}: {e}; run `atlas sync` to write it again", path.display())))
        }
        Err(error) => Err(Error::Io { path: path.to_owned(), error }),
    }
}

/// The folder of the home's project records.
fn projects_dir(atlas_home: &Path) -> PathBuf {
    atlas_home.join("projects")
}

/// A project's record: one file per project folder, named by its path's hash.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    dir: PathBuf,
}

fn remember(atlas_home: &Path, project: &Path) -> Result<()> {
    let project = std::path::absolute(project).map_err(io(project))?;
    let dir = projects_dir(atlas_home);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let key = atlas_runtime::hash::blake3_bytes(project.to_string_lossy().as_bytes());
    let record = serde_json::to_vec(&Record { dir: project }).expect("plain data");
    let file = dir.join(format!("{}.json", &key[..32]));
    atlas_cache::write_file_atomic(&file, &record).map_err(io(&file))
}

/// Every `(name, version)` a known project's set names; projects whose folder or set
/// is gone are forgotten.
pub fn named(atlas_home: &Path) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(projects_dir(atlas_home)) else { return out };
    for entry in entries.flatten().take(MAX_PROJECTS) {
        let record = read_capped(&entry.path()).ok().flatten().and_then(|b| serde_json::from_slice::<Record>(&b).ok());
        match record.map(|r| Set::read(&r.dir)) {
            Some(Ok(Some(set))) => out.extend(set.libraries.into_iter().map(|p| (p.name, p.version))),
            // A broken set keeps its record: its versions stay safe until it is fixed.
            Some(Err(_)) => {}
            _ => {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_written_remembered_and_read_back_with_its_kinds_and_a_hostile_one_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let project = t.path().join("p");
        std::fs::create_dir_all(&project).unwrap();
        let set = Set {
            libraries: vec![Pinned {
                name: "crate+itoa".into(),
                version: "1.0.11".into(),
                lockfile: Some("Cargo.lock".into()),
                kinds: vec!["dev".into(), "group:docs".into()],
            }],
            only: Some(vec!["dev".into(), "group:docs".into()]),
            all: false,
        };
        set.write(&project, &home).unwrap();
        assert_eq!(Set::read(&project).unwrap(), Some(set.clone()));
        // A set written before kinds were kept reads as one without them.
        std::fs::write(project.join(SET_FILE), r#"{"libraries":[{"name":"crate+itoa","version":"1.0.11"}]}"#).unwrap();
        let old = Set::read(&project).unwrap().unwrap();
        assert!(old.libraries[0].kinds.is_empty() && old.only.is_none() && !old.all, "{old:?}");
        std::fs::write(
            project.join(SET_FILE),
            r#"{"libraries":[{"name":"crate+itoa","version":"1.0.11","kinds":["dev\u001b[31m"]}]}"#,
        )
        .unwrap();
        assert!(Set::read(&project).unwrap_err().to_string().contains("kind that is not one"));
        set.write(&project, &home).unwrap();
        assert!(named(&home).contains(&("crate+itoa".to_owned(), "1.0.11".to_owned())));
        std::fs::write(project.join(SET_FILE), r#"{"libraries":[{"name":"../x","version":"1"}]}"#).unwrap();
        assert!(Set::read(&project).unwrap_err().to_string().contains("not a bundle name"));
        std::fs::remove_dir_all(&project).unwrap();
        assert!(named(&home).is_empty(), "a project that is gone is forgotten");
        assert_eq!(std::fs::read_dir(projects_dir(&home)).unwrap().count(), 0);
    }
}
