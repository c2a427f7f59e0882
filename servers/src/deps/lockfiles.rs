//! A project's lockfiles, read for the exact versions they pin: `Cargo.lock` (with the
//! workspace's `Cargo.toml`s for its direct dependencies), `package-lock.json`,
//! `pnpm-lock.yaml`, `uv.lock`, `poetry.lock` (with `pyproject.toml` for its direct
//! dependencies) and a fully pinned `requirements.txt`.
//!
//! Every file is untrusted input: read up to a cap, parsed by a real parser (TOML,
//! JSON, YAML with its budgets), each name and version checked by [`atlas_runtime::package`] before it goes
//! anywhere. A file that does not parse is an error naming the file and its line; an
//! entry Atlas cannot install (a git or path dependency, an unpinned requirement) is
//! a [`Skipped`] line, and the rest go on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use atlas_runtime::package::{Ecosystem, PackageSpec};

/// The largest lockfile or manifest read, in bytes.
const MAX_LOCKFILE_BYTES: u64 = 64 << 20;
/// The most workspace members read.
const MAX_MEMBERS: usize = 2_000;

/// The lockfiles read, in this order.
pub const LOCKFILES: [&str; 6] =
    ["Cargo.lock", "package-lock.json", "pnpm-lock.yaml", "uv.lock", "poetry.lock", "requirements.txt"];

/// One package version a lockfile pins, with the checksums it gives for its artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locked {
    pub spec: PackageSpec,
    /// `sha256:<hex>` or `sha512-<base64>`, as the lockfile states them.
    pub checksums: Vec<String>,
    /// The lockfile, relative to the project.
    pub lockfile: String,
}

/// An entry left out, and why, in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped(pub String);

/// A lockfile that cannot be read: the file, and the line where it goes wrong when known.
#[derive(Debug, thiserror::Error)]
#[error("{}: {why}; fix the file (or regenerate it with its package manager) and sync again", file.display())]
pub struct Malformed {
    pub file: PathBuf,
    pub why: String,
}

fn malformed(file: &Path, why: impl std::fmt::Display) -> Malformed {
    Malformed { file: file.to_owned(), why: why.to_string() }
}

/// What a project's lockfiles pin.
#[derive(Debug, Default)]
pub struct Read {
    /// Each package version once, sorted.
    pub locked: Vec<Locked>,
    pub skipped: Vec<Skipped>,
    /// The lockfiles found.
    pub found: Vec<String>,
}

/// What the lockfiles of `project` pin: direct dependencies, or all of them with `all`.
pub fn read(project: &Path, all: bool) -> Result<Read, Malformed> {
    let (mut locked, mut skipped, mut found) = (Vec::new(), Vec::new(), Vec::new());
    for name in LOCKFILES {
        let file = project.join(name);
        if !file.is_file() {
            continue;
        }
        found.push(name.to_owned());
        let text = read_capped(&file)?;
        let (l, s) = match name {
            "Cargo.lock" => cargo(project, &file, &text, all)?,
            "package-lock.json" => npm(&file, &text, all)?,
            "pnpm-lock.yaml" => pnpm(&file, &text, all)?,
            "uv.lock" => uv(&file, &text, all)?,
            "poetry.lock" => poetry(project, &file, &text, all)?,
            _ => requirements(&file, &text)?,
        };
        locked.extend(l);
        skipped.extend(s);
    }
    locked.sort_by(|a, b| a.spec.cmp(&b.spec));
    locked.dedup_by(|a, b| a.spec == b.spec);
    Ok(Read { locked, skipped, found })
}

fn read_capped(file: &Path) -> Result<String, Malformed> {
    let bytes = atlas_runtime::safe_path::read_capped(file, MAX_LOCKFILE_BYTES).map_err(|e| malformed(file, e))?;
    String::from_utf8(bytes).map_err(|_| malformed(file, "it is not UTF-8 text"))
}

/// A TOML file's parse error in one line (toml's own message names the line and column).
fn toml_error(file: &Path, e: &toml::de::Error) -> Malformed {
    let first = e.to_string().lines().next().unwrap_or("not TOML").trim().to_owned();
    malformed(file, format!("{first}: {}", e.message().lines().next().unwrap_or("").trim()))
}

fn spec(eco: Ecosystem, name: &str, version: &str) -> Result<PackageSpec, String> {
    format!("{}:{name}@{version}", eco.as_str()).parse::<PackageSpec>().map_err(|e| e.to_string())
}

// --- Cargo.lock ---------------------------------------------------------------

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

fn cargo(project: &Path, file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
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
                    skipped.push(Skipped(format!(
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
                    lockfile: "Cargo.lock".into(),
                }),
                Err(e) => skipped.push(Skipped(format!("Cargo.lock: {e}"))),
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

// --- package-lock.json --------------------------------------------------------

fn npm(file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| malformed(file, e))?;
    let Some(packages) = v.get("packages").and_then(|p| p.as_object()) else {
        return Err(malformed(
            file,
            "it has no `packages` (lockfileVersion 2 or 3); run `npm install --package-lock-only` with npm 7 or later",
        ));
    };
    let root = packages.get("").cloned().unwrap_or_default();
    let direct: BTreeSet<String> = ["dependencies", "devDependencies", "optionalDependencies"]
        .iter()
        .filter_map(|k| root.get(*k).and_then(|d| d.as_object()))
        .flat_map(|d| d.keys().cloned())
        .collect();
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for (key, p) in packages {
        let Some(name) = key.rsplit_once("node_modules/").map(|(_, n)| n) else { continue };
        let top = key == &format!("node_modules/{name}");
        if !(all || (top && direct.contains(name))) {
            continue;
        }
        if p.get("link").and_then(|l| l.as_bool()) == Some(true) {
            continue;
        }
        let name = p.get("name").and_then(|n| n.as_str()).unwrap_or(name);
        let Some(version) = p.get("version").and_then(|v| v.as_str()) else { continue };
        let resolved = p.get("resolved").and_then(|r| r.as_str()).unwrap_or("");
        if !(resolved.starts_with("https://") || resolved.starts_with("http://")) {
            skipped.push(Skipped(format!(
                "package-lock.json: {name}@{version} is not from a registry ({}); Atlas installs published packages",
                if resolved.is_empty() { "no `resolved`" } else { resolved }
            )));
            continue;
        }
        match spec(Ecosystem::Npm, name, version) {
            Ok(spec) => locked.push(Locked {
                spec,
                checksums: p
                    .get("integrity")
                    .and_then(|i| i.as_str())
                    .into_iter()
                    .flat_map(|i| i.split_whitespace())
                    .filter(|i| i.starts_with("sha512-"))
                    .map(str::to_owned)
                    .collect(),
                lockfile: "package-lock.json".into(),
            }),
            Err(e) => skipped.push(Skipped(format!("package-lock.json: {e}"))),
        }
    }
    Ok((locked, skipped))
}

// --- pnpm-lock.yaml -----------------------------------------------------------

/// `pnpm-lock.yaml`, lockfile versions 6 and 9: the importers' (or, in a version 6
/// single project, the top level's) dependencies are the direct ones, at the versions
/// they resolved to (a peer suffix `(react@18.2.0)` aside); `packages` holds each
/// version's integrity, keyed `name@version` (`/name@version` in version 6).
fn pnpm(file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let v: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| malformed(file, one_line(&e)))?;
    let bare = |version: &str| version.split('(').next().unwrap_or(version).trim().to_owned();
    let packages = v.get("packages").and_then(|p| p.as_object()).cloned().unwrap_or_default();
    // Every locked package: (name, version) → its entry.
    let mut known: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    for (key, entry) in &packages {
        let key = key.trim_start_matches('/');
        let Some(at) = key.get(1..).and_then(|k| k.find('@')).map(|i| i + 1) else { continue };
        known.insert((key[..at].to_owned(), bare(&key[at + 1..])), entry.clone());
    }
    let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
    if all {
        wanted.extend(known.keys().cloned());
    } else {
        let importers = match v.get("importers").and_then(|i| i.as_object()) {
            Some(i) => i.values().cloned().collect(),
            None => vec![v.clone()],
        };
        for imp in &importers {
            for kind in ["dependencies", "devDependencies", "optionalDependencies"] {
                for (name, dep) in imp.get(kind).and_then(|d| d.as_object()).into_iter().flatten() {
                    // Version 6 and 9: `{specifier, version}`; version 5: the version alone.
                    let version = dep.get("version").and_then(|x| x.as_str()).or_else(|| dep.as_str()).unwrap_or("");
                    wanted.insert((name.clone(), bare(version)));
                }
            }
        }
    }
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for (name, version) in wanted {
        let entry = known.get(&(name.clone(), version.clone()));
        let resolution = entry.and_then(|e| e.get("resolution"));
        let integrity = resolution.and_then(|r| r.get("integrity")).and_then(|i| i.as_str());
        if version.starts_with("link:") || version.starts_with("file:") || integrity.is_none() {
            let from = resolution.and_then(|r| r.get("tarball").or_else(|| r.get("repo"))).and_then(|x| x.as_str());
            skipped.push(Skipped(format!(
                "pnpm-lock.yaml: {name}@{version} is not from a registry ({}); Atlas installs published packages",
                from.unwrap_or("no integrity")
            )));
            continue;
        }
        match spec(Ecosystem::Npm, &name, &version) {
            Ok(spec) => locked.push(Locked {
                spec,
                checksums: integrity
                    .into_iter()
                    .flat_map(str::split_whitespace)
                    .filter(|i| i.starts_with("sha512-"))
                    .map(str::to_owned)
                    .collect(),
                lockfile: "pnpm-lock.yaml".into(),
            }),
            Err(e) => skipped.push(Skipped(format!("pnpm-lock.yaml: {e}"))),
        }
    }
    Ok((locked, skipped))
}

/// A parser's error on one line.
fn one_line(e: &impl std::fmt::Display) -> String {
    e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

// --- uv.lock ------------------------------------------------------------------

#[derive(serde::Deserialize)]
struct UvLock {
    #[serde(default)]
    package: Vec<UvLocked>,
}

#[derive(serde::Deserialize)]
struct UvLocked {
    name: String,
    version: Option<String>,
    #[serde(default)]
    source: toml::Table,
    #[serde(default)]
    dependencies: Vec<toml::Table>,
    sdist: Option<toml::Table>,
}

fn uv(file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let lock: UvLock = toml::from_str(text).map_err(|e| toml_error(file, &e))?;
    // The project itself (editable or virtual): its dependencies are the direct ones.
    let is_root = |p: &UvLocked| p.source.contains_key("editable") || p.source.contains_key("virtual");
    let direct: BTreeSet<String> = lock
        .package
        .iter()
        .filter(|p| is_root(p))
        .flat_map(|p| p.dependencies.iter().filter_map(|d| d.get("name")?.as_str()))
        .map(atlas_runtime::package::pep503)
        .collect();
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for p in lock.package.iter().filter(|p| !is_root(p)) {
        if !(all || direct.contains(&atlas_runtime::package::pep503(&p.name))) {
            continue;
        }
        let Some(version) = &p.version else { continue };
        if !p.source.contains_key("registry") {
            skipped.push(Skipped(format!(
                "uv.lock: {}@{version} is not from a registry; Atlas installs published packages",
                p.name
            )));
            continue;
        }
        match spec(Ecosystem::Pypi, &p.name, version) {
            Ok(spec) => locked.push(Locked {
                spec,
                checksums: p
                    .sdist
                    .as_ref()
                    .and_then(|s| s.get("hash")?.as_str())
                    .filter(|h| h.starts_with("sha256:"))
                    .map(str::to_owned)
                    .into_iter()
                    .collect(),
                lockfile: "uv.lock".into(),
            }),
            Err(e) => skipped.push(Skipped(format!("uv.lock: {e}"))),
        }
    }
    Ok((locked, skipped))
}

// --- poetry.lock --------------------------------------------------------------

#[derive(serde::Deserialize)]
struct PoetryLock {
    #[serde(default)]
    package: Vec<PoetryLocked>,
}

#[derive(serde::Deserialize)]
struct PoetryLocked {
    name: String,
    version: String,
    #[serde(default)]
    source: Option<toml::Table>,
    #[serde(default)]
    files: Vec<toml::Table>,
}

/// `poetry.lock`; the direct dependencies are those `pyproject.toml` names (Poetry's
/// `[tool.poetry.dependencies]` and groups, or PEP 621's `[project]` ones).
fn poetry(project: &Path, file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let lock: PoetryLock = toml::from_str(text).map_err(|e| toml_error(file, &e))?;
    let direct = match all {
        true => None,
        false => Some(pyproject_direct(project)?),
    };
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for p in &lock.package {
        if direct.as_ref().is_some_and(|d| !d.contains(&atlas_runtime::package::pep503(&p.name))) {
            continue;
        }
        // A `legacy` source is another index (the user's pip/uv settings name it); git,
        // directory, file and url sources are not published packages.
        let kind = p.source.as_ref().and_then(|s| s.get("type")?.as_str()).unwrap_or("");
        if !kind.is_empty() && kind != "legacy" {
            skipped.push(Skipped(format!(
                "poetry.lock: {}@{} comes from a {kind} source, not an index; Atlas installs published packages",
                p.name, p.version
            )));
            continue;
        }
        match spec(Ecosystem::Pypi, &p.name, &p.version) {
            Ok(spec) => locked.push(Locked {
                spec,
                checksums: p
                    .files
                    .iter()
                    .filter_map(|f| f.get("hash")?.as_str())
                    .filter(|h| h.starts_with("sha256:"))
                    .map(str::to_owned)
                    .collect(),
                lockfile: "poetry.lock".into(),
            }),
            Err(e) => skipped.push(Skipped(format!("poetry.lock: {e}"))),
        }
    }
    Ok((locked, skipped))
}

/// The names `pyproject.toml` depends on directly, in PEP 503 form.
fn pyproject_direct(project: &Path) -> Result<BTreeSet<String>, Malformed> {
    let file = project.join("pyproject.toml");
    if !file.is_file() {
        return Err(malformed(&file, "poetry.lock needs it beside it to tell the direct dependencies; pass --all"));
    }
    let t: toml::Table = toml::from_str(&read_capped(&file)?).map_err(|e| toml_error(&file, &e))?;
    let mut out = BTreeSet::new();
    let poetry = t.get("tool").and_then(|x| x.get("poetry"));
    let mut tables: Vec<&toml::Table> = poetry.and_then(|p| p.get("dependencies")?.as_table()).into_iter().collect();
    for g in poetry.and_then(|p| p.get("group")?.as_table()).into_iter().flat_map(|g| g.values()) {
        tables.extend(g.get("dependencies").and_then(|d| d.as_table()));
    }
    tables.extend(poetry.and_then(|p| p.get("dev-dependencies")?.as_table()));
    out.extend(
        tables.iter().flat_map(|d| d.keys()).filter(|k| *k != "python").map(|k| atlas_runtime::package::pep503(k)),
    );
    // PEP 621: requirement strings, the name up to the first character that is not one.
    let project_table = t.get("project");
    let mut reqs: Vec<&toml::Value> =
        project_table.and_then(|p| p.get("dependencies")?.as_array()).into_iter().flatten().collect();
    for extra in
        project_table.and_then(|p| p.get("optional-dependencies")?.as_table()).into_iter().flat_map(|o| o.values())
    {
        reqs.extend(extra.as_array().into_iter().flatten());
    }
    for r in reqs.iter().filter_map(|r| r.as_str()) {
        let name: String = r.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c)).collect();
        if !name.is_empty() {
            out.insert(atlas_runtime::package::pep503(&name));
        }
    }
    Ok(out)
}

// --- requirements.txt ---------------------------------------------------------

fn requirements(file: &Path, text: &str) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    // Continuation lines (`\` at the end) join their next line, as pip reads them.
    let mut logical: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let (body, cont) = match line.trim_end().strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        match (open, logical.last_mut()) {
            (true, Some((_, l))) => {
                l.push(' ');
                l.push_str(body);
            }
            _ => logical.push((i + 1, body.to_owned())),
        }
        open = cont;
    }
    for (n, line) in logical {
        let line = line.split(" #").next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('-') {
            skipped.push(Skipped(format!("requirements.txt:{n}: the option {:?} is not followed", first_word(line))));
            continue;
        }
        let mut words = line.split_whitespace();
        let requirement = words.next().unwrap_or("");
        let hashes: Vec<String> = words
            .filter_map(|w| w.strip_prefix("--hash="))
            .filter(|h| h.starts_with("sha256:"))
            .map(str::to_owned)
            .collect();
        let requirement = requirement.split(';').next().unwrap_or("").trim();
        let name_len =
            requirement.find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c))).unwrap_or(requirement.len());
        let (name, rest) = requirement.split_at(name_len);
        // Extras (`name[extra]`) do not change the package.
        let rest = match rest.strip_prefix('[') {
            Some(r) => r.split_once(']').map_or("", |(_, r)| r),
            None => rest,
        };
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return Err(malformed(file, format!("line {n}: {:?} is not a requirement", first_word(line))));
        }
        let Some(version) = rest.trim().strip_prefix("==").filter(|v| !v.contains(['*', ','])) else {
            skipped.push(Skipped(format!(
                "requirements.txt:{n}: {requirement} is not pinned to one version (write NAME==VERSION, or use \
                 `uv pip compile` to pin it)"
            )));
            continue;
        };
        match spec(Ecosystem::Pypi, name, version.trim()) {
            Ok(spec) => locked.push(Locked { spec, checksums: hashes, lockfile: "requirements.txt".into() }),
            Err(e) => return Err(malformed(file, format!("line {n}: {e}"))),
        }
    }
    Ok((locked, skipped))
}

fn first_word(line: &str) -> String {
    atlas_runtime::utf8::clip_chars(line.split_whitespace().next().unwrap_or(""), 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(l: &[Locked]) -> Vec<String> {
        l.iter().map(|l| l.spec.to_string()).collect()
    }

    #[test]
    fn a_cargo_workspace_gives_its_direct_registry_dependencies_at_their_locked_versions() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::write(
            p.join("Cargo.toml"),
            "[workspace]\nmembers = [\"crates/*\"]\n[workspace.dependencies]\nitoa = \"1\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(p.join("crates/a")).unwrap();
        std::fs::write(
            p.join("crates/a/Cargo.toml"),
            "[package]\nname = \"a\"\n[dependencies]\nitoa.workspace = true\nj = { package = \"ryu\", version = \"1.0\" }\nb = { path = \"../b\" }\n",
        )
        .unwrap();
        let lock = "version = 4\n[[package]]\nname = \"a\"\nversion = \"0.1.0\"\n\
            [[package]]\nname = \"itoa\"\nversion = \"1.0.11\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"49f1f14873335454500d59611f1cf4a4b0f786f9ac11f4312a78e4cf2566695b\"\n\
            [[package]]\nname = \"itoa\"\nversion = \"0.4.8\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\
            [[package]]\nname = \"ryu\"\nversion = \"1.0.18\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\
            [[package]]\nname = \"serde\"\nversion = \"1.0.200\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n";
        std::fs::write(p.join("Cargo.lock"), lock).unwrap();
        let Read { locked: l, skipped: s, found } = read(p, false).unwrap();
        assert_eq!(specs(&l), ["crate:itoa@1.0.11", "crate:ryu@1.0.18"]);
        assert_eq!(l[0].checksums, ["sha256:49f1f14873335454500d59611f1cf4a4b0f786f9ac11f4312a78e4cf2566695b"]);
        assert!(s.is_empty() && found == ["Cargo.lock"]);
        let all = read(p, true).unwrap().locked;
        assert_eq!(specs(&all).len(), 4, "--all: every registry crate, never the members");
        std::fs::write(p.join("Cargo.lock"), "version = 4\n[[package]]\nname = \"x\"\nversion = 1.0\n[[[").unwrap();
        let e = read(p, false).unwrap_err().to_string();
        assert!(e.contains("Cargo.lock") && e.contains("line"), "{e}");
    }

    #[test]
    fn npm_uv_and_requirements_lockfiles_pin_exact_versions_and_say_what_they_skip() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        let sri = format!("sha512-{}", "A".repeat(86) + "==");
        std::fs::write(
            p.join("package-lock.json"),
            serde_json::json!({"lockfileVersion": 3, "packages": {
                "": {"dependencies": {"@corp/strings": "^2", "local": "file:../local"}},
                "node_modules/@corp/strings": {"version": "2.1.0", "resolved": "https://r.test/@corp/strings/-/strings-2.1.0.tgz", "integrity": sri},
                "node_modules/local": {"resolved": "../local", "link": true},
                "node_modules/dep-of-dep": {"version": "1.0.0", "resolved": "https://r.test/d.tgz"}
            }})
            .to_string(),
        )
        .unwrap();
        std::fs::write(
            p.join("uv.lock"),
            "version = 1\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\nsource = { editable = \".\" }\ndependencies = [{ name = \"six\" }]\n\
             [[package]]\nname = \"six\"\nversion = \"1.16.0\"\nsource = { registry = \"https://pypi.org/simple\" }\nsdist = { url = \"https://f/six.tar.gz\", hash = \"sha256:1e61c37477a1626458e36f7b1d82aa5c9b094fa4802892072e49de9c60c4c926\" }\n",
        )
        .unwrap();
        std::fs::write(
            p.join("requirements.txt"),
            "# pinned\nTyping_Extensions==4.12.2 \\\n    --hash=sha256:04e5ca0351e0f3f85c6853954072df659d0d13fac324d0072316b67d7794700d\nrequests>=2\n-r other.txt\n",
        )
        .unwrap();
        let Read { locked: l, skipped: s, found } = read(p, false).unwrap();
        assert_eq!(specs(&l), ["npm:@corp/strings@2.1.0", "pypi:six@1.16.0", "pypi:typing-extensions@4.12.2"]);
        assert_eq!(found, ["package-lock.json", "uv.lock", "requirements.txt"]);
        assert_eq!(l[0].checksums, [sri]);
        assert!(l[1].checksums[0].starts_with("sha256:1e61"));
        assert!(l[2].checksums[0].starts_with("sha256:04e5"));
        let lines: Vec<&str> = s.iter().map(|s| s.0.as_str()).collect();
        assert!(lines.iter().any(|l| l.contains("requirements.txt:4: requests>=2 is not pinned")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("requirements.txt:5")), "{lines:?}");
        let all = read(p, true).unwrap().locked;
        assert!(specs(&all).contains(&"npm:dep-of-dep@1.0.0".to_owned()));
        std::fs::write(p.join("requirements.txt"), "ok==1.0\n\n!!!\n").unwrap();
        let e = read(p, false).unwrap_err().to_string();
        assert!(e.contains("requirements.txt") && e.contains("line 3"), "{e}");
        std::fs::write(p.join("package-lock.json"), "{\"packages\": {\n  \"\": [}").unwrap();
        let e = read(p, false).unwrap_err().to_string();
        assert!(e.contains("package-lock.json") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn pnpm_and_poetry_lockfiles_pin_their_direct_dependencies() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        let sri = |c: char| format!("sha512-{}==", c.to_string().repeat(86));
        let v9 = format!(
            "lockfileVersion: '9.0'\n\nsettings:\n  autoInstallPeers: true\n\nimporters:\n\n  .:\n    dependencies:\n      \
             '@corp/strings':\n        specifier: ^2\n        version: 2.1.0\n      react-dom:\n        specifier: ^18\n        \
             version: 18.2.0(react@18.2.0)\n      local:\n        specifier: link:../local\n        version: link:../local\n      \
             gitdep:\n        specifier: github:x/gitdep\n        version: https://codeload.github.com/x/gitdep/tar.gz/abc\n    \
             devDependencies:\n      is-number:\n        specifier: 7.0.0\n        version: 7.0.0\n\npackages:\n\n  \
             '@corp/strings@2.1.0':\n    resolution: {{integrity: {}}}\n\n  react-dom@18.2.0:\n    resolution: {{integrity: {}}}\n    \
             peerDependencies:\n      react: ^18.2.0\n\n  react@18.2.0:\n    resolution: {{integrity: {}}}\n\n  \
             is-number@7.0.0:\n    resolution: {{integrity: {}}}\n\n  \
             gitdep@https://codeload.github.com/x/gitdep/tar.gz/abc:\n    resolution: {{tarball: https://codeload.github.com/x/gitdep/tar.gz/abc}}\n",
            sri('A'),
            sri('B'),
            sri('C'),
            sri('D')
        );
        std::fs::write(p.join("pnpm-lock.yaml"), &v9).unwrap();
        let Read { locked: l, skipped: s, found } = read(p, false).unwrap();
        assert_eq!(found, ["pnpm-lock.yaml"]);
        assert_eq!(specs(&l), ["npm:@corp/strings@2.1.0", "npm:is-number@7.0.0", "npm:react-dom@18.2.0"]);
        assert_eq!((&l[0].checksums, &l[2].checksums), (&vec![sri('A')], &vec![sri('B')]));
        let lines: Vec<&str> = s.iter().map(|s| s.0.as_str()).collect();
        assert!(lines.iter().any(|l| l.contains("local@link:../local")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("gitdep@") && l.contains("codeload")), "{lines:?}");
        assert!(specs(&read(p, true).unwrap().locked).contains(&"npm:react@18.2.0".to_owned()), "--all: peers too");
        // Version 6: a single project's dependencies at the top, keys with a leading `/`.
        let v6 = format!(
            "lockfileVersion: '6.0'\ndependencies:\n  is-number:\n    specifier: ^7\n    version: 7.0.0\n\npackages:\n  \
             /is-number@7.0.0:\n    resolution: {{integrity: {}}}\n    dev: false\n",
            sri('D')
        );
        std::fs::write(p.join("pnpm-lock.yaml"), v6).unwrap();
        assert_eq!(specs(&read(p, false).unwrap().locked), ["npm:is-number@7.0.0"]);
        std::fs::write(p.join("pnpm-lock.yaml"), "lockfileVersion: '9.0'\nimporters:\n  .: [\n").unwrap();
        let e = read(p, false).unwrap_err().to_string();
        assert!(e.contains("pnpm-lock.yaml") && e.lines().count() == 1, "{e}");
        std::fs::remove_file(p.join("pnpm-lock.yaml")).unwrap();

        let h = |c: char| format!("sha256:{}", c.to_string().repeat(64));
        std::fs::write(
            p.join("poetry.lock"),
            format!(
                "[[package]]\nname = \"requests\"\nversion = \"2.31.0\"\noptional = false\nfiles = [\n    \
                 {{file = \"requests-2.31.0-py3-none-any.whl\", hash = \"{}\"}},\n    {{file = \"requests-2.31.0.tar.gz\", hash = \"{}\"}},\n]\n\n\
                 [[package]]\nname = \"pytest\"\nversion = \"8.0.0\"\nfiles = []\n\n\
                 [[package]]\nname = \"mylib\"\nversion = \"0.1.0\"\nfiles = []\n\n[package.source]\ntype = \"git\"\nurl = \"https://github.com/x/mylib\"\n\n\
                 [[package]]\nname = \"urllib3\"\nversion = \"2.0.0\"\nfiles = []\n\n[metadata]\nlock-version = \"2.0\"\n",
                h('a'),
                h('b')
            ),
        )
        .unwrap();
        let e = read(p, false).unwrap_err().to_string();
        assert!(e.contains("pyproject.toml") && e.contains("--all"), "{e}");
        std::fs::write(
            p.join("pyproject.toml"),
            "[tool.poetry.dependencies]\npython = \"^3.10\"\nRequests = \"^2.31\"\nmylib = { git = \"https://github.com/x/mylib\" }\n\
             [tool.poetry.group.dev.dependencies]\npytest = \"^8\"\n",
        )
        .unwrap();
        let Read { locked: l, skipped: s, found } = read(p, false).unwrap();
        assert_eq!(found, ["poetry.lock"]);
        assert_eq!(specs(&l), ["pypi:pytest@8.0.0", "pypi:requests@2.31.0"]);
        assert_eq!(l[1].checksums, [h('a'), h('b')]);
        assert!(s.len() == 1 && s[0].0.contains("mylib@0.1.0 comes from a git source"), "{s:?}");
        assert_eq!(read(p, true).unwrap().locked.len(), 3, "--all: urllib3 too, never the git one");
        // PEP 621 names the dependencies in [project].
        std::fs::write(
            p.join("pyproject.toml"),
            "[project]\nname = \"app\"\ndependencies = [\"urllib3>=2; python_version>'3'\"]\n",
        )
        .unwrap();
        assert_eq!(specs(&read(p, false).unwrap().locked), ["pypi:urllib3@2.0.0"]);
    }
}
