//! The installed bundles: `ATLAS_HOME/bundles/<name>/<version>/` (each a verified
//! bundle folder), `<name>/current` (a symlink to one version, switched by an atomic
//! rename), and `<name>/.installs/<version>.json` (where each came from).
//!
//! Staging folders (`bundles/.tmp-<pid>-<n>`) sit beside the target on the same file
//! system, so a verified bundle moves in with one rename; a later run removes those
//! whose process is gone.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result, check_component, io};

/// Where one installed version came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub name: String,
    pub version: String,
    /// The source as the user gave it (`atlas update` reads it again).
    pub source: String,
    /// The archive's sha256.
    pub sha256: String,
    /// The remote's id for those bytes (a release asset id, an ETag), when it has one.
    #[serde(default)]
    pub remote_id: Option<String>,
    /// The archive's size in bytes.
    pub size: u64,
    /// Seconds since the epoch.
    pub installed: u64,
    /// The id of the key whose signature was checked, if one was.
    #[serde(default)]
    pub signed_by: Option<String>,
    /// The public key that was trusted (`atlas update` trusts it again).
    #[serde(default)]
    pub trust: Option<String>,
    /// The bundle's build time (manifest `created`).
    #[serde(default)]
    pub created: String,
}

/// The lock of one installed name ([`Home::lock`]), released when dropped.
#[derive(Debug)]
pub struct NameLock {
    name: String,
    _file: std::fs::File,
}

/// What [`Home::commit`] did.
#[derive(Debug)]
pub struct Committed {
    /// The version folder.
    pub path: PathBuf,
    /// False when that version was already installed and current.
    pub changed: bool,
    /// The version `current` pointed at before.
    pub previous: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Home {
    /// `ATLAS_HOME/bundles`.
    pub root: PathBuf,
}

/// One installed bundle, for `atlas bundles`.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    pub name: String,
    pub current: Option<String>,
    /// Kept versions, oldest install first.
    pub versions: Vec<Record>,
    /// Bytes on disk of all kept versions.
    pub bytes: u64,
}

pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl Home {
    pub fn new(atlas_home: &Path) -> Home {
        Home { root: atlas_home.join("bundles") }
    }

    pub fn from_env() -> Home {
        Home::new(&atlas_runtime::model::atlas_home())
    }

    /// ATLAS_HOME itself (the bundles are in its `bundles/`).
    pub fn atlas_home(&self) -> &Path {
        self.root.parent().unwrap_or(&self.root)
    }

    pub fn downloads(&self) -> PathBuf {
        self.root.parent().unwrap_or(&self.root).join("downloads")
    }

    pub fn dir(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    pub fn current_link(&self, name: &str) -> PathBuf {
        self.dir(name).join("current")
    }

    /// The version `current` points at.
    pub fn current(&self, name: &str) -> Option<String> {
        let t = std::fs::read_link(self.current_link(name)).ok()?;
        Some(t.file_name()?.to_str()?.to_owned())
    }

    /// The folder an installed NAME serves: `bundles/NAME/<current version>`.
    pub fn resolve(&self, name: &str) -> Option<PathBuf> {
        check_component("bundle", name).ok()?;
        let v = self.current(name)?;
        let dir = self.dir(name).join(v);
        dir.join("manifest.json").is_file().then_some(dir)
    }

    /// The folder of a kept version of an installed NAME: `bundles/NAME/VERSION`.
    pub fn resolve_version(&self, name: &str, version: &str) -> Option<PathBuf> {
        check_component("bundle", name).ok()?;
        check_component("version", version).ok()?;
        let dir = self.dir(name).join(version);
        dir.join("manifest.json").is_file().then_some(dir)
    }

    /// `<name>/<version>`, for a version read from a record.
    fn version_dir(&self, name: &str, version: &str) -> Option<PathBuf> {
        check_component("version", version).ok()?;
        atlas_runtime::safe_path::join_inside(&self.dir(name), version).ok()
    }

    fn record_path(&self, name: &str, version: &str) -> PathBuf {
        self.dir(name).join(".installs").join(format!("{version}.json"))
    }

    pub fn record(&self, name: &str, version: &str) -> Option<Record> {
        check_component("version", version).ok()?;
        let text = std::fs::read_to_string(self.record_path(name, version)).ok()?;
        parse_record(&text, name, version)
    }

    /// Kept versions of `name` that have a folder, oldest install first. A record is
    /// untrusted bytes on disk: one whose name or version is not the file's, or is no
    /// folder name, is skipped, and its version is a path only through `join_inside`.
    pub fn records(&self, name: &str) -> Vec<Record> {
        let dir = self.dir(name);
        let mut out: Vec<Record> = std::fs::read_dir(dir.join(".installs"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let file = e.file_name().into_string().ok()?;
                let version = file.strip_suffix(".json")?;
                parse_record(&std::fs::read_to_string(e.path()).ok()?, name, version)
            })
            .filter(|r| self.version_dir(name, &r.version).is_some_and(|d| d.is_dir()))
            .collect();
        out.sort_by(|a, b| (a.installed, &a.version).cmp(&(b.installed, &b.version)));
        out
    }

    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| check_component("bundle", n).is_ok())
            .collect();
        names.sort();
        names
    }

    /// The record of the current version installed from `source`, if one is (and its
    /// folder is still there).
    pub fn current_from_source(&self, source: &str) -> Option<Record> {
        self.names()
            .into_iter()
            .filter_map(|n| self.current(&n).and_then(|v| self.record(&n, &v)))
            .find(|r| r.source == source && self.resolve(&r.name).is_some())
    }

    pub fn list(&self) -> Vec<Installed> {
        self.names()
            .into_iter()
            .map(|name| {
                let versions = self.records(&name);
                let bytes =
                    versions.iter().filter_map(|r| self.version_dir(&name, &r.version)).map(|d| dir_size(&d)).sum();
                Installed { current: self.current(&name), versions, bytes, name }
            })
            .collect()
    }

    /// A new staging folder beside the bundles, after removing those left by dead runs.
    pub fn staging(&self) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.root).map_err(io(&self.root))?;
        self.sweep();
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.root.join(format!(".tmp-{}-{}-{n}", std::process::id(), now()));
        std::fs::create_dir(&dir).map_err(io(&dir))?;
        Ok(dir)
    }

    /// Removes staging and trash folders whose process is gone, and half-made links.
    pub fn sweep(&self) {
        let entries = std::fs::read_dir(&self.root).into_iter().flatten().filter_map(|e| e.ok());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let dead = match name.strip_prefix(".tmp-").or_else(|| name.strip_prefix(".trash-")) {
                Some(rest) => rest.split('-').next().and_then(|p| p.parse::<u32>().ok()).is_none_or(|pid| !alive(pid)),
                None => false,
            };
            if dead {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        for name in self.names() {
            for e in std::fs::read_dir(self.dir(&name)).into_iter().flatten().filter_map(|e| e.ok()) {
                let n = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = n.strip_prefix(".current-").and_then(|r| r.parse::<u32>().ok())
                    && !alive(pid)
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    /// Holds `bundles/<name>.lock` until dropped: one install, switch or rotation of a
    /// name at a time (a second waits).
    pub fn lock(&self, name: &str) -> Result<NameLock> {
        check_component("bundle", name)?;
        std::fs::create_dir_all(&self.root).map_err(io(&self.root))?;
        let path = self.root.join(format!(".{name}.lock"));
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io(&path))?;
        f.lock().map_err(io(&path))?;
        Ok(NameLock { name: name.to_owned(), _file: f })
    }

    /// Refuses to move `name` from its current version to `version` (built `created`)
    /// when that is a step back, unless `allow_downgrade`: versions only move forward
    /// unless the user asks (`--allow-downgrade`, or `atlas restore`). Versions compare
    /// as semver when both parse, else by their build times.
    ///
    /// Architecture invariant: installed versions only move forward unless asked.
    /// *`tests/it/hardening.rs` (`a_signed_rollback_is_refused_*`).*
    pub fn check_forward(&self, name: &str, version: &str, created: &str, allow_downgrade: bool) -> Result<()> {
        let Some(cur) = self.current(name) else { return Ok(()) };
        if allow_downgrade || cur == version {
            return Ok(());
        }
        let older = match (semver::Version::parse(&cur), semver::Version::parse(version)) {
            (Ok(c), Ok(v)) => v < c,
            _ => self.record(name, &cur).is_some_and(|r| !r.created.is_empty() && created < r.created.as_str()),
        };
        if older {
            return Err(Error::Usage(format!(
                "{name}: the source offers {version}, older than the installed {cur}; nothing was installed \
                 (a rollback is refused: pass --allow-downgrade to install it anyway, or `atlas restore {name}` to go back \
                 to a kept version)"
            )));
        }
        Ok(())
    }

    /// Moves the verified bundle folder `staged` in as `<name>/<version>` (unless that
    /// version is already there and intact), records it, switches `current` to it and
    /// keeps the `keep` newest versions; `lock` is the name's lock, held by the caller
    /// since it decided to install.
    pub fn commit(&self, lock: &NameLock, staged: &Path, record: &Record, keep: usize) -> Result<Committed> {
        self.commit_as(lock, staged, record, keep, true)
    }

    /// [`Home::commit`] of a version kept beside the current one, which stays current
    /// (a package's older version, which a project pins beside a newer one).
    pub fn commit_beside(&self, lock: &NameLock, staged: &Path, record: &Record, keep: usize) -> Result<Committed> {
        self.commit_as(lock, staged, record, keep, false)
    }

    fn commit_as(
        &self,
        lock: &NameLock,
        staged: &Path,
        record: &Record,
        keep: usize,
        switch: bool,
    ) -> Result<Committed> {
        check_component("bundle", &record.name)?;
        check_component("version", &record.version)?;
        if lock.name != record.name {
            return Err(Error::DataCorruption(format!(
                "the source was to hold {}, but it holds {}; nothing was installed",
                lock.name, record.name
            )));
        }
        let previous = self.current(&record.name);
        let dir = self.dir(&record.name);
        std::fs::create_dir_all(dir.join(".installs")).map_err(io(&dir))?;
        let target = dir.join(&record.version);
        let (mut already, mut set_aside) = (false, None);
        if target.exists() {
            if let Ok(have) = atlas_runtime::manifest::verify(&target)
                && !completes(&have, staged)
            {
                already = true;
            } else {
                // A damaged copy (doctor says so), or a keyword-first one that `staged`
                // completes: set it aside, then replace it.
                let trash = self.root.join(format!(".trash-{}-{}", std::process::id(), now()));
                std::fs::rename(&target, &trash).map_err(io(&target))?;
                set_aside = Some(trash);
            }
        }
        if !already && let Err(e) = std::fs::rename(staged, &target) {
            // The copy that served stays.
            if let Some(trash) = &set_aside {
                let _ = std::fs::rename(trash, &target);
            }
            return Err(io(&target)(e));
        }
        // Removed once the new copy is in place: the version is missing for two renames.
        if let Some(trash) = set_aside {
            let _ = std::fs::remove_dir_all(&trash);
        }
        let rec_path = self.record_path(&record.name, &record.version);
        let mut rec = record.clone();
        if already && let Some(old) = self.record(&record.name, &record.version) {
            rec.installed = old.installed.max(rec.installed);
        }
        write_atomic(&rec_path, &serde_json::to_vec_pretty(&rec).expect("plain data"))?;
        // A name with no readable current gets this version as its current either way.
        if switch || self.resolve(&record.name).is_none() {
            self.switch_locked(&record.name, &record.version)?;
        }
        self.rotate_locked(&record.name, keep);
        Ok(Committed {
            path: target,
            changed: !already || previous.as_deref() != Some(record.version.as_str()),
            previous,
        })
    }

    /// Points `current` at `version` (which must be installed), atomically.
    pub fn switch(&self, name: &str, version: &str) -> Result<()> {
        let _lock = self.lock(name)?;
        self.switch_locked(name, version)
    }

    fn switch_locked(&self, name: &str, version: &str) -> Result<()> {
        let dir = self.dir(name);
        if !dir.join(version).join("manifest.json").is_file() {
            return Err(Error::Usage(format!("{name} {version} is not installed")));
        }
        let tmp = dir.join(format!(".current-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        symlink(Path::new(version), &tmp).map_err(io(&tmp))?;
        std::fs::rename(&tmp, dir.join("current")).map_err(io(dir.join("current")))
    }

    /// Removes the oldest versions past `keep`: never the current one, nor one a
    /// project's library set names ([`crate::project`]).
    fn rotate_locked(&self, name: &str, keep: usize) {
        let current = self.current(name);
        let records = self.records(name);
        let excess = records.len().saturating_sub(keep.max(1));
        if excess == 0 {
            return;
        }
        let named = crate::project::named(self.atlas_home());
        let removable = |r: &&Record| {
            Some(&r.version) != current.as_ref() && !named.contains(&(name.to_owned(), r.version.clone()))
        };
        for r in records.iter().filter(removable).take(excess) {
            let Some(version_dir) = self.version_dir(name, &r.version) else { continue };
            let trash = self.root.join(format!(".trash-{}-{}-{}", std::process::id(), now(), r.version));
            if std::fs::rename(version_dir, &trash).is_ok() {
                let _ = std::fs::remove_dir_all(&trash);
            }
            let _ = std::fs::remove_file(self.record_path(name, &r.version));
        }
    }

    /// The version to go back to: `version`, or the one installed before the current.
    pub fn restore_target(&self, name: &str, version: Option<&str>) -> Result<String> {
        let records = self.records(name);
        let kept: Vec<&str> = records.iter().map(|r| r.version.as_str()).collect();
        if records.is_empty() {
            return Err(Error::Usage(format!("{name} is not installed; `atlas bundles` lists what is")));
        }
        let current = self.current(name);
        match version {
            Some(v) if kept.contains(&v) => Ok(v.to_owned()),
            Some(v) => Err(Error::Usage(format!("{name} {v} is not kept; kept versions: {}", kept.join(", ")))),
            None => {
                let at = records.iter().position(|r| Some(&r.version) == current.as_ref()).unwrap_or(records.len());
                match at.checked_sub(1) {
                    Some(i) => Ok(records[i].version.clone()),
                    None => Err(Error::Usage(format!(
                        "no version of {name} older than {} is kept; kept versions: {}",
                        current.as_deref().unwrap_or("-"),
                        kept.join(", ")
                    ))),
                }
            }
        }
    }
}

/// Whether the bundle in `staged` completes the installed `have` of the same version:
/// `have` is a keyword-first build (chunks, no vectors yet) and `staged` the same
/// chunks with their vectors. Anything else of an installed version stays as it is.
fn completes(have: &atlas_runtime::manifest::Manifest, staged: &Path) -> bool {
    let Ok(new) = atlas_runtime::manifest::read_manifest(staged) else { return false };
    let chunks = |m: &atlas_runtime::manifest::Manifest| m.artifact("chunks.parquet").map(|a| a.sha256.clone());
    have.embedding_rows == 0
        && have.chunk_count > 0
        && new.embedding_rows > 0
        && (&new.name, &new.version) == (&have.name, &have.version)
        && chunks(&new).is_some()
        && chunks(&new) == chunks(have)
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_dir(target, link)
}

/// The largest install record read.
const MAX_RECORD_BYTES: usize = 64 << 10;

/// An install record read from disk, when it is the record of `name` `version`.
pub fn parse_record(text: &str, name: &str, version: &str) -> Option<Record> {
    if text.len() > MAX_RECORD_BYTES {
        return None;
    }
    let r: Record = serde_json::from_str(text).ok()?;
    (r.name == name && r.version == version && check_component("version", &r.version).is_ok()).then_some(r)
}

/// Writes `bytes` to `path` atomically ([`atlas_cache::atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    atlas_cache::write_file_atomic(path, bytes).map_err(io(path))
}

fn alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if cfg!(target_os = "linux") { Path::new(&format!("/proc/{pid}")).exists() } else { true }
}

pub fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().filter_map(|e| e.ok()) {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, version: &str) -> String {
        serde_json::json!({
            "name": name, "version": version, "source": "s", "sha256": "x", "size": 1, "installed": 1
        })
        .to_string()
    }

    #[test]
    fn a_record_whose_version_is_a_path_is_never_read() {
        assert!(parse_record(&record("docs", "1.0.0"), "docs", "1.0.0").is_some());
        for bad in ["../../x", "/etc", "..", "current", "a/b"] {
            assert!(parse_record(&record("docs", bad), "docs", bad).is_none(), "{bad}");
        }
        assert!(parse_record(&record("docs", "2.0.0"), "docs", "1.0.0").is_none(), "not the file's version");
        assert!(parse_record(&record("other", "1.0.0"), "docs", "1.0.0").is_none(), "not the folder's name");
    }

    #[test]
    fn rotation_removes_nothing_outside_the_bundles() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home { root: tmp.path().join("bundles") };
        let outside = tmp.path().join("victim");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep.txt"), "x").unwrap();
        let installs = home.dir("docs").join(".installs");
        std::fs::create_dir_all(&installs).unwrap();
        // A record planted with a version that walks out of the bundle's folder.
        std::fs::write(installs.join("..%2F..%2Fvictim.json"), record("docs", "../../victim")).unwrap();
        assert!(home.records("docs").is_empty());
        home.rotate_locked("docs", 1);
        assert!(outside.join("keep.txt").is_file());
    }

    proptest::proptest! {
        /// Any text as an install record: refused, or a record of that name and version.
        #[test]
        fn install_records_are_theirs_or_refused(
            text in "\\PC{0,120}",
            version in "\\PC{0,16}",
        ) {
            for t in [text, record("docs", &version)] {
                if let Some(r) = parse_record(&t, "docs", &version) {
                    proptest::prop_assert_eq!(&r.name, "docs");
                    proptest::prop_assert!(check_component("version", &r.version).is_ok());
                }
            }
        }
    }
}
