//! Cargo.lock, with the workspace's manifests for the direct dependencies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use atlas_runtime::package::Ecosystem;

use super::{Locked, MAX_MEMBERS, Malformed, Skipped, read_capped, spec, toml_error};

#[derive(serde::Deserialize)]
struct CargoLock {
    #[serde(default)]
    package: Vec<CargoLocked>,
}

#[derive(serde::Deserialize)]
struct CargoLocked {
    name: String,
    version: String,
    source: Option<String>,
    checksum: Option<String>,
}

pub(super) fn cargo(
    project: &Path,
    file: &Path,
    text: &str,
    all: bool,
) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let lock: CargoLock = toml::from_str(text).map_err(|e| toml_error(file, &e))?;
    let wanted = match all {
        true => None,
        false => Some(direct_crates(project)?),
    };
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    let mut by_name: BTreeMap<&str, Vec<&CargoLocked>> = BTreeMap::new();
    for p in &lock.package {
        by_name.entry(p.name.as_str()).or_default().push(p);
    }
    for (name, versions) in by_name {
        let reqs = match &wanted {
            None => None,
            Some(w) => match w.get(name) {
                Some(reqs) => Some(reqs),
                None => continue,
            },
        };
        for p in versions {
            if let Some(reqs) = reqs {
                let v = semver::Version::parse(&p.version).ok();
                if !reqs.iter().any(|r| v.as_ref().is_some_and(|v| r.matches(v))) {
                    continue;
                }
            }
            match p.source.as_deref() {
                // A workspace member or a path dependency: not a package.
                None => continue,
                Some(s) if s.starts_with("registry+") || s.starts_with("sparse+") => {}
                Some(s) => {
                    skipped.push(Skipped::new(format!(
                        "Cargo.lock: {}@{} comes from {}, not a registry; Atlas installs published crates (serve its \
                         repository with a git source)",
                        p.name,
                        p.version,
                        s.split('#').next().unwrap_or(s)
                    )));
                    continue;
                }
            }
            match spec(Ecosystem::Crate, &p.name, &p.version) {
                Ok(spec) => locked.push(Locked {
                    spec,
                    checksums: p.checksum.iter().map(|c| format!("sha256:{c}")).collect(),
                    index: None,
                    lockfile: "Cargo.lock".into(),
                }),
                Err(e) => skipped.push(Skipped::new(format!("Cargo.lock: {e}"))),
            }
        }
    }
    Ok((locked, skipped))
}

/// The crates the workspace's members depend on directly (normal and build
/// dependencies, every target), with the version requirements they state; renamed
/// dependencies by their package name.
fn direct_crates(project: &Path) -> Result<BTreeMap<String, Vec<semver::VersionReq>>, Malformed> {
    let root_file = project.join("Cargo.toml");
    let root: toml::Table = toml::from_str(&read_capped(&root_file)?).map_err(|e| toml_error(&root_file, &e))?;
    let ws = root.get("workspace").and_then(|w| w.as_table());
    let ws_deps = ws.and_then(|w| w.get("dependencies")).and_then(|d| d.as_table()).cloned().unwrap_or_default();
    let mut manifests = vec![root.clone()];
    let members = ws.and_then(|w| w.get("members")).and_then(|m| m.as_array()).cloned().unwrap_or_default();
    for pattern in members.iter().filter_map(|m| m.as_str()) {
        for dir in expand_member(project, pattern).into_iter().take(MAX_MEMBERS) {
            let file = dir.join("Cargo.toml");
            if dir == project || !file.is_file() {
                continue;
            }
            let t: toml::Table = toml::from_str(&read_capped(&file)?).map_err(|e| toml_error(&file, &e))?;
            manifests.push(t);
        }
    }
    let mut out: BTreeMap<String, Vec<semver::VersionReq>> = BTreeMap::new();
    for t in &manifests {
        let mut tables: Vec<&toml::Table> = ["dependencies", "build-dependencies"]
            .iter()
            .filter_map(|k| t.get(*k).and_then(|d| d.as_table()))
            .collect();
        if let Some(targets) = t.get("target").and_then(|x| x.as_table()) {
            for cfg in targets.values().filter_map(|c| c.as_table()) {
                tables.extend(["dependencies", "build-dependencies"].iter().filter_map(|k| cfg.get(*k)?.as_table()));
            }
        }
        for deps in tables {
            for (key, dep) in deps {
                let inherited = dep.get("workspace").and_then(|w| w.as_bool()) == Some(true);
                let dep = if inherited { ws_deps.get(key).unwrap_or(dep) } else { dep };
                if dep.get("path").is_some() || dep.get("git").is_some() {
                    continue;
                }
                let name = dep.get("package").and_then(|p| p.as_str()).unwrap_or(key);
                let req = dep.as_str().or_else(|| dep.get("version").and_then(|v| v.as_str())).unwrap_or("*");
                let req = semver::VersionReq::parse(req).unwrap_or(semver::VersionReq::STAR);
                out.entry(name.to_owned()).or_default().push(req);
            }
        }
    }
    Ok(out)
}

/// A `members` entry's folders: a plain path, or one with `*` in its last parts.
fn expand_member(project: &Path, pattern: &str) -> Vec<PathBuf> {
    if pattern.split('/').any(|c| c == "..") || Path::new(pattern).is_absolute() {
        return Vec::new();
    }
    let Ok(glob) = globset::Glob::new(pattern).map(|g| g.compile_matcher()) else { return Vec::new() };
    if !pattern.contains(['*', '?', '[']) {
        return vec![project.join(pattern)];
    }
    let depth = pattern.split('/').count();
    let mut out = Vec::new();
    let mut frontier = vec![(project.to_owned(), String::new())];
    for level in 0..depth {
        let mut next = Vec::new();
        for (dir, rel) in frontier {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten().take(MAX_MEMBERS) {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let rel = match rel.is_empty() {
                    true => e.file_name().to_string_lossy().into_owned(),
                    false => format!("{rel}/{}", e.file_name().to_string_lossy()),
                };
                if level + 1 == depth {
                    if glob.is_match(&rel) {
                        out.push(e.path());
                    }
                } else {
                    next.push((e.path(), rel));
                }
            }
        }
        frontier = next;
    }
    out.sort();
    out
}
