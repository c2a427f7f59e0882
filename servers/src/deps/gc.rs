//! `atlas gc`: the disk package builds hold that nothing needs any more. A package's
//! folder (`ATLAS_HOME/packages/<name>/`, [`super::package_dir`]) keeps its build
//! cache so that a version bump reuses every unchanged file; past that it grows with
//! every version ever built.
//!
//! A version's build is needed while a project's library set names it, while it is
//! installed and still waits for its vectors, and while it is its package's current
//! installed version (the base the next bump reuses). An older installed version
//! that is embedded needs nothing of it: it is served from its own folder.
//!
//! What goes: the whole folder of a package none of whose versions needs its build;
//! else the builds and artifacts of the versions that need none, every unpacked tree (made again from the kept artifact when a
//! build needs it), and the cache's objects that only the forgotten runs and the
//! keyword pass of a finished build referenced (`atlas-pipeline gc --keep 1
//! --forget-missing`). What stays: for each installed or named version, its artifact,
//! its build config and the objects of its last run, so the next bump still reuses
//! them. A package whose cache a build holds is left as it is, and said so.
//! *`tests/it/package_upkeep.rs`: `atlas_gc_frees_what_no_installed_or_named_version_needs`.*

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use atlas_dist::home::{Home, dir_size};

/// How recently a version's build folder may have been written and still count as a
/// build in progress (`atlas sync` writes its config before the build takes the
/// cache's lock, and installs after it lets go): such a folder is kept.
pub const IN_PROGRESS: Duration = Duration::from_secs(3600);

/// What `atlas gc` did to one package's folder.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Package {
    /// The package's library name (`crate:tokio`).
    pub library: String,
    /// Bytes on disk before and after.
    pub before: u64,
    pub after: u64,
    /// The whole folder went: no version of it needs its build.
    pub removed: bool,
    /// The versions whose builds and artifacts went.
    pub versions_removed: Vec<String>,
    /// Why it was left as it was (a build holds its cache), or what failed.
    pub skipped: Option<String>,
}

/// Runs the collection over every package folder of `home`'s ATLAS_HOME.
pub fn collect(home: &Home) -> Vec<Package> {
    let root = home.atlas_home().join("packages");
    // An installed version needs its build while it waits for its vectors (the
    // vectors pass reuses the keyword pass's work); the current one keeps it as the
    // base the next bump reuses. An older one, embedded, is served from its own folder.
    let installed: BTreeSet<(String, String)> = home
        .list()
        .into_iter()
        .flat_map(|b| {
            b.versions
                .iter()
                .filter(|r| {
                    b.current.as_deref() == Some(r.version.as_str())
                        || super::waits_for_vectors(home, &b.name, &r.version)
                })
                .map(|r| (b.name.clone(), r.version.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let named = atlas_dist::project::named(home.atlas_home());
    let Ok(entries) = std::fs::read_dir(&root) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs.into_iter()
        .filter_map(|dir| {
            let name = dir.file_name()?.to_str()?.to_owned();
            let needed: BTreeSet<String> =
                installed.iter().chain(&named).filter(|(n, _)| *n == name).map(|(_, v)| v.clone()).collect();
            let before = dir_size(&dir);
            let mut p = Package {
                library: atlas_runtime::package::shown_name(&name),
                before,
                after: before,
                removed: false,
                versions_removed: Vec::new(),
                skipped: None,
            };
            if let Err(e) = one(&dir, &name, &needed, &mut p) {
                p.skipped = Some(format!("{e:#}"));
            }
            p.after = dir_size(&dir);
            Some(p)
        })
        .collect()
}

fn one(dir: &Path, name: &str, needed: &BTreeSet<String>, p: &mut Package) -> anyhow::Result<()> {
    let cache = dir.join("cache");
    let builds = dir.join("builds");
    // The build cache's own lock, held while anything in the folder is removed: a
    // build running now keeps its package whole.
    let lock = match std::fs::OpenOptions::new().read(true).write(true).open(cache.join("lock")) {
        Ok(f) => match f.try_lock() {
            Ok(()) => Some(f),
            Err(std::fs::TryLockError::WouldBlock) => {
                p.skipped = Some("a build is running on it; run `atlas gc` again when it is done".into());
                return Ok(());
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e).context("locking its build cache"),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).context("opening its build cache's lock"),
    };
    let versions: Vec<String> = std::fs::read_dir(&builds)
        .map(|d| d.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    let in_progress = |v: &str| {
        let d = builds.join(v);
        [d.clone(), d.join("pipeline.yaml")].iter().any(|f| {
            std::fs::metadata(f)
                .and_then(|m| m.modified())
                .is_ok_and(|t| SystemTime::now().duration_since(t).is_ok_and(|age| age < IN_PROGRESS))
        })
    };
    if needed.is_empty() && !versions.iter().any(|v| in_progress(v)) {
        drop(lock);
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        p.removed = true;
        return Ok(());
    }
    for v in versions.iter().filter(|v| !needed.contains(*v) && !in_progress(v)) {
        let d = builds.join(v);
        std::fs::remove_dir_all(&d).with_context(|| format!("removing {}", d.display()))?;
        p.versions_removed.push(v.clone());
    }
    // Each source's artifacts of versions gone, and every unpacked tree.
    let keep = |v: &str| needed.contains(v) || builds.join(v).is_dir();
    for source in std::fs::read_dir(cache.join("sources")).into_iter().flatten().flatten() {
        for a in std::fs::read_dir(source.path().join("artifacts")).into_iter().flatten().flatten() {
            let file = a.file_name().to_string_lossy().into_owned();
            let version = artifact_version(name, &file);
            if version.is_some_and(|v| !keep(v)) {
                std::fs::remove_file(a.path()).with_context(|| format!("removing {}", a.path().display()))?;
            }
        }
        let unpacked = source.path().join("unpacked");
        if unpacked.is_dir() {
            std::fs::remove_dir_all(&unpacked).with_context(|| format!("removing {}", unpacked.display()))?;
        }
    }
    drop(lock);
    // The cache's objects: the last run of each version kept, the rest forgotten.
    let Some(config) = needed.iter().map(|v| builds.join(v).join("pipeline.yaml")).find(|c| c.is_file()) else {
        return Ok(());
    };
    let out = std::process::Command::new(super::pipeline_bin()?)
        .arg("--config")
        .arg(&config)
        .arg("--cache-dir")
        .arg(&cache)
        .args(["--lock-wait", "0", "gc", "--keep", "1", "--forget-missing"])
        .env("ATLAS_HOME", atlas_runtime::model::atlas_home())
        .stdin(std::process::Stdio::null())
        .output()
        .context("starting atlas-pipeline")?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        let line = why.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("it failed");
        anyhow::bail!("atlas-pipeline gc: {}", atlas_runtime::utf8::printable(line.trim()));
    }
    Ok(())
}

/// The version an artifact file of package `name` is of (`crate+itoa-1.0.11.crate`,
/// and its `.sha256` beside it), as [`atlas_runtime::package::PackageSpec::file_name`]
/// names it.
fn artifact_version<'a>(name: &str, file: &'a str) -> Option<&'a str> {
    let rest = file.strip_suffix(".sha256").unwrap_or(file).strip_prefix(name)?.strip_prefix('-')?;
    [".crate", ".tgz", ".tar.gz"].iter().find_map(|ext| rest.strip_suffix(ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_artifacts_version_is_read_from_its_file_name() {
        assert_eq!(artifact_version("crate+itoa", "crate+itoa-1.0.11.crate"), Some("1.0.11"));
        assert_eq!(artifact_version("crate+itoa", "crate+itoa-1.0.11.crate.sha256"), Some("1.0.11"));
        assert_eq!(artifact_version("pypi+units", "pypi+units-0.3.1.tar.gz"), Some("0.3.1"));
        assert_eq!(artifact_version("npm+corp+x", "npm+corp+x-2.1.0-rc.1.tgz"), Some("2.1.0-rc.1"));
        assert_eq!(artifact_version("crate+itoa", "crate+other-1.0.0.crate"), None);
        assert_eq!(artifact_version("crate+itoa", "crate+itoa-1.0.0.zip"), None);
    }
}
