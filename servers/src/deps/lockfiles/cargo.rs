//! Cargo.lock, with the workspace's manifests for the direct dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use atlas_runtime::package::Ecosystem;

use super::{Kind, Locked, MAX_MEMBERS, Malformed, Skipped, read_capped, spec, toml_error};

/// The crates a workspace declares, by package name: each requirement with its kind.
type Direct = BTreeMap<String, Vec<(semver::VersionReq, Kind)>>;

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
    /// The crates it depends on: `name`, `name version` or `name version (source)`.
    #[serde(default)]
    dependencies: Vec<String>,
}

/// The registry crates each locked crate depends on, as Cargo.lock's `dependencies`
/// lists name them: what a facade's re-exports are looked up in.
#[derive(Debug, Default)]
pub struct Graph {
    deps: BTreeMap<(String, String), Vec<Locked>>,
}

impl Graph {
    /// The registry crates `name@version` depends on, each once.
    pub fn dependencies(&self, name: &str, version: &str) -> &[Locked] {
        self.deps.get(&(name.to_owned(), version.to_owned())).map_or(&[], Vec::as_slice)
    }
}

/// The dependency graph of a Cargo.lock's registry crates.
pub fn graph(file: &Path, text: &str) -> Result<Graph, Malformed> {
    let lock: CargoLock = toml::from_str(text).map_err(|e| toml_error(file, &e))?;
    let registry =
        |p: &CargoLocked| p.source.as_deref().is_some_and(|s| s.starts_with("registry+") || s.starts_with("sparse+"));
    let mut by_name: BTreeMap<&str, Vec<&CargoLocked>> = BTreeMap::new();
    for p in lock.package.iter().filter(|p| registry(p)) {
        by_name.entry(p.name.as_str()).or_default().push(p);
    }
    let mut deps = BTreeMap::new();
    for p in lock.package.iter().filter(|p| registry(p)) {
        let mut out: Vec<Locked> = Vec::new();
        for d in &p.dependencies {
            let mut words = d.split_whitespace();
            let (Some(name), version) = (words.next(), words.next()) else { continue };
            let found = by_name.get(name).and_then(|vs| match version {
                Some(v) => vs.iter().find(|c| c.version == v),
                None if vs.len() == 1 => vs.first(),
                None => None,
            });
            let Some(c) = found else { continue };
            let Ok(spec) = spec(Ecosystem::Crate, &c.name, &c.version) else { continue };
            if out.iter().all(|l| l.spec != spec) {
                out.push(Locked {
                    spec,
                    kinds: BTreeSet::new(),
                    checksums: c.checksum.iter().map(|c| format!("sha256:{c}")).collect(),
                    index: None,
                    lockfile: "Cargo.lock".into(),
                });
            }
        }
        deps.insert((p.name.clone(), p.version.clone()), out);
    }
    Ok(Graph { deps })
}

pub(super) fn cargo(
    project: &Path,
    file: &Path,
    text: &str,
    all: bool,
) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let lock: CargoLock = toml::from_str(text).map_err(|e| toml_error(file, &e))?;
    // With `all` every crate is taken: the manifests only mark the kinds, and a missing
    // or broken one marks none.
    let direct = match all {
        true => direct_crates(project).unwrap_or_default(),
        false => direct_crates(project)?,
    };
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    let mut by_name: BTreeMap<&str, Vec<&CargoLocked>> = BTreeMap::new();
    for p in &lock.package {
        by_name.entry(p.name.as_str()).or_default().push(p);
    }
    for (name, versions) in by_name {
        let reqs = direct.get(name).map_or(&[][..], Vec::as_slice);
        for p in versions {
            let v = semver::Version::parse(&p.version).ok();
            let kinds: BTreeSet<Kind> =
                reqs.iter().filter(|(r, _)| v.as_ref().is_some_and(|v| r.matches(v))).map(|(_, k)| k.clone()).collect();
            if kinds.is_empty() && !all {
                continue;
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
                    kinds,
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

/// The crates the workspace's members depend on directly (every target), with the
/// version requirements they state and their kind: `[dependencies]` runtime (optional
/// unless the member's default features turn it on), `[build-dependencies]` build,
/// `[dev-dependencies]` dev; renamed dependencies by their package name.
fn direct_crates(project: &Path) -> Result<Direct, Malformed> {
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
    let sections =
        [("dependencies", Kind::Runtime), ("build-dependencies", Kind::Build), ("dev-dependencies", Kind::Dev)];
    let mut out = Direct::new();
    for t in &manifests {
        let on = default_deps(t);
        let mut tables: Vec<(&toml::Table, &Kind)> =
            sections.iter().filter_map(|(k, kind)| Some((t.get(*k)?.as_table()?, kind))).collect();
        if let Some(targets) = t.get("target").and_then(|x| x.as_table()) {
            for cfg in targets.values().filter_map(|c| c.as_table()) {
                tables.extend(sections.iter().filter_map(|(k, kind)| Some((cfg.get(*k)?.as_table()?, kind))));
            }
        }
        for (deps, kind) in tables {
            for (key, entry) in deps {
                let inherited = entry.get("workspace").and_then(|w| w.as_bool()) == Some(true);
                let dep = if inherited { ws_deps.get(key).unwrap_or(entry) } else { entry };
                if dep.get("path").is_some() || dep.get("git").is_some() {
                    continue;
                }
                let name = dep.get("package").and_then(|p| p.as_str()).unwrap_or(key);
                let req = dep.as_str().or_else(|| dep.get("version").and_then(|v| v.as_str())).unwrap_or("*");
                let req = semver::VersionReq::parse(req).unwrap_or(semver::VersionReq::STAR);
                // `optional` is the member's word, never the workspace's.
                let optional = entry.get("optional").and_then(|o| o.as_bool()) == Some(true);
                let kind = match (kind, optional && !on.contains(key.as_str())) {
                    (Kind::Runtime, true) => Kind::Optional,
                    (k, _) => k.clone(),
                };
                out.entry(name.to_owned()).or_default().push((req, kind));
            }
        }
    }
    Ok(out)
}

/// The dependency keys a manifest's default features turn on: each `dep:x`, `x/feat`
/// and feature `x` named by no `[features]` entry (an optional dependency's implicit
/// feature) reached from `default`; `x?/feat` turns nothing on.
fn default_deps(manifest: &toml::Table) -> BTreeSet<String> {
    let features = manifest.get("features").and_then(|f| f.as_table());
    let list = |f: &str| -> Vec<String> {
        features
            .and_then(|t| t.get(f)?.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let (mut on, mut seen, mut todo) = (BTreeSet::new(), BTreeSet::new(), vec!["default".to_owned()]);
    while let Some(f) = todo.pop() {
        if !seen.insert(f.clone()) || seen.len() > MAX_MEMBERS {
            continue;
        }
        for item in list(&f) {
            if let Some(dep) = item.strip_prefix("dep:") {
                on.insert(dep.to_owned());
            } else if let Some((dep, _)) = item.split_once('/') {
                if !dep.ends_with('?') {
                    on.insert(dep.to_owned());
                }
            } else if features.is_some_and(|t| t.contains_key(&item)) {
                todo.push(item);
            } else {
                on.insert(item);
            }
        }
    }
    on
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
