//! uv.lock, poetry.lock (with pyproject.toml for the direct dependencies) and
//! requirements.txt.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use atlas_runtime::package::{Ecosystem, pep503};

use super::{Kind, Locked, Malformed, Skipped, malformed, read_capped, spec, toml_error};

/// What a project declares, by PEP 503 name: each name's kinds.
type Declared = BTreeMap<String, BTreeSet<Kind>>;

/// The most extras of its own project one requirement line expands (an extra may name
/// the project's other extras, `app[io,plot]`).
const MAX_EXTRAS: usize = 256;

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
    /// The project's extras: each extra's dependencies.
    #[serde(default, rename = "optional-dependencies")]
    optional_dependencies: BTreeMap<String, Vec<toml::Table>>,
    /// The project's dependency groups (`dev` among them): each group's dependencies.
    #[serde(default, rename = "dev-dependencies")]
    dev_dependencies: BTreeMap<String, Vec<toml::Table>>,
    sdist: Option<toml::Table>,
}

pub(super) fn uv(file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let lock: UvLock = toml::from_str(text).map_err(|e| toml_error(file, &e))?;
    // The project itself (editable or virtual): its dependencies are the direct ones,
    // its extras optional, its groups `dev` or `group:NAME`.
    let is_root = |p: &UvLocked| p.source.contains_key("editable") || p.source.contains_key("virtual");
    let mut direct = Declared::new();
    for root in lock.package.iter().filter(|p| is_root(p)) {
        let groups = root.dev_dependencies.iter().map(|(g, deps)| (Kind::group(g), deps));
        let sections = std::iter::once((Kind::Runtime, &root.dependencies))
            .chain(root.optional_dependencies.values().map(|deps| (Kind::Optional, deps)))
            .chain(groups);
        for (kind, deps) in sections {
            for name in deps.iter().filter_map(|d| d.get("name")?.as_str()) {
                direct.entry(pep503(name)).or_default().insert(kind.clone());
            }
        }
    }
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for p in lock.package.iter().filter(|p| !is_root(p)) {
        let kinds = direct.get(&pep503(&p.name)).cloned().unwrap_or_default();
        if !all && kinds.is_empty() {
            continue;
        }
        let Some(version) = &p.version else { continue };
        // The index the lock names is the package's source, and its sdist hash what
        // the artifact must be: a package whose lock says neither cannot be checked.
        let Some(registry) = p.source.get("registry").and_then(|r| r.as_str()) else {
            let from = p.source.iter().next().map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("…")));
            skipped.push(Skipped::new(format!(
                "uv.lock: {}@{version} is not from a registry ({}); Atlas installs published packages",
                p.name,
                from.as_deref().unwrap_or("no source")
            )));
            continue;
        };
        if !(registry.starts_with("https://") || registry.starts_with("http://")) {
            skipped.push(Skipped::new(format!(
                "uv.lock: {}@{version} comes from the index {registry}, which is not an http(s) URL; Atlas reads an \
                 index through its simple API",
                p.name
            )));
            continue;
        }
        let checksums: Vec<String> = p
            .sdist
            .as_ref()
            .and_then(|s| s.get("hash")?.as_str())
            .filter(|h| h.starts_with("sha256:"))
            .map(str::to_owned)
            .into_iter()
            .collect();
        if checksums.is_empty() {
            skipped.push(Skipped::new(format!(
                "uv.lock: {}@{version} has no sdist sha256 in the lock (Atlas reads a package's sdist), so nothing \
                 could check what the index serves; it is not installed",
                p.name
            )));
            continue;
        }
        match spec(Ecosystem::Pypi, &p.name, version) {
            Ok(spec) => {
                let index = Some(registry.to_owned());
                locked.push(Locked { spec, kinds, checksums, index, lockfile: "uv.lock".into() });
            }
            Err(e) => skipped.push(Skipped::new(format!("uv.lock: {e}"))),
        }
    }
    Ok((locked, skipped))
}

// --- poetry.lock --------------------------------------------------------------

#[derive(serde::Deserialize)]
struct PoetryLock {
    #[serde(default)]
    package: Vec<PoetryLocked>,
    /// Lock format 1.x keeps each package's file hashes here, by name, rather than in
    /// its `files`.
    #[serde(default)]
    metadata: Option<PoetryMetadata>,
}

#[derive(serde::Deserialize)]
struct PoetryMetadata {
    #[serde(default)]
    files: BTreeMap<String, Vec<toml::Table>>,
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
pub(super) fn poetry(
    project: &Path,
    file: &Path,
    text: &str,
    all: bool,
) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let lock: PoetryLock = toml::from_str(text).map_err(|e| toml_error(file, &e))?;
    // With `all` every package is taken: pyproject.toml only marks the kinds, and a
    // missing or broken one marks none.
    let direct = match all {
        true => pyproject_direct(project).unwrap_or_default(),
        false => pyproject_direct(project)?,
    };
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for p in &lock.package {
        let kinds = direct.get(&pep503(&p.name)).cloned().unwrap_or_default();
        if !all && kinds.is_empty() {
            continue;
        }
        // A `legacy` source is another index, the package's source (its `url`); git,
        // directory, file and url sources are not published packages.
        let kind = p.source.as_ref().and_then(|s| s.get("type")?.as_str()).unwrap_or("");
        let index = p.source.as_ref().and_then(|s| s.get("url")?.as_str()).map(str::to_owned);
        if !kind.is_empty() && kind != "legacy" {
            skipped.push(Skipped::new(format!(
                "poetry.lock: {}@{} comes from a {kind} source, not an index; Atlas installs published packages",
                p.name, p.version
            )));
            continue;
        }
        // Format 2 lists a package's files with it; format 1 under `[metadata.files]`.
        let old_files = lock.metadata.as_ref().and_then(|m| m.files.get(&p.name)).map_or(&[][..], Vec::as_slice);
        match spec(Ecosystem::Pypi, &p.name, &p.version) {
            Ok(spec) => locked.push(Locked {
                spec,
                kinds,
                checksums: p
                    .files
                    .iter()
                    .chain(old_files)
                    .filter_map(|f| f.get("hash")?.as_str())
                    .filter(|h| h.starts_with("sha256:"))
                    .map(str::to_owned)
                    .collect(),
                index,
                lockfile: "poetry.lock".into(),
            }),
            Err(e) => skipped.push(Skipped::new(format!("poetry.lock: {e}"))),
        }
    }
    Ok((locked, skipped))
}

/// The names `pyproject.toml` depends on directly, in PEP 503 form, with their kinds:
/// Poetry's `[tool.poetry.dependencies]` (optional ones optional), its groups and old
/// `dev-dependencies`; PEP 621's `[project]` dependencies and extras; PEP 735's
/// `[dependency-groups]`.
fn pyproject_direct(project: &Path) -> Result<Declared, Malformed> {
    let file = project.join("pyproject.toml");
    if !file.is_file() {
        return Err(malformed(&file, "poetry.lock needs it beside it to tell the direct dependencies; pass --all"));
    }
    let t: toml::Table = toml::from_str(&read_capped(&file)?).map_err(|e| toml_error(&file, &e))?;
    let mut out = Declared::new();
    let mut add = |name: &str, kind: &Kind| {
        out.entry(pep503(name)).or_default().insert(kind.clone());
    };
    let poetry = t.get("tool").and_then(|x| x.get("poetry"));
    let mut tables: Vec<(&toml::Table, Kind)> =
        poetry.and_then(|p| p.get("dependencies")?.as_table()).map(|d| (d, Kind::Runtime)).into_iter().collect();
    for (g, group) in poetry.and_then(|p| p.get("group")?.as_table()).into_iter().flatten() {
        tables.extend(group.get("dependencies").and_then(|d| d.as_table()).map(|d| (d, Kind::group(g))));
    }
    tables.extend(poetry.and_then(|p| p.get("dev-dependencies")?.as_table()).map(|d| (d, Kind::Dev)));
    for (deps, kind) in &tables {
        for (name, dep) in deps.iter().filter(|(k, _)| *k != "python") {
            let optional = dep.get("optional").and_then(|o| o.as_bool()) == Some(true);
            add(name, if optional && *kind == Kind::Runtime { &Kind::Optional } else { kind });
        }
    }
    let project_table = t.get("project");
    let mut reqs: Vec<(&toml::Value, Kind)> = project_table
        .and_then(|p| p.get("dependencies")?.as_array())
        .into_iter()
        .flatten()
        .map(|r| (r, Kind::Runtime))
        .collect();
    for extra in
        project_table.and_then(|p| p.get("optional-dependencies")?.as_table()).into_iter().flat_map(|o| o.values())
    {
        reqs.extend(extra.as_array().into_iter().flatten().map(|r| (r, Kind::Optional)));
    }
    // PEP 735: a group lists requirements and `{include-group = …}` tables.
    for (g, list) in t.get("dependency-groups").and_then(|d| d.as_table()).into_iter().flatten() {
        reqs.extend(list.as_array().into_iter().flatten().map(|r| (r, Kind::group(g))));
    }
    for (r, kind) in &reqs {
        if let Some(r) = r.as_str().map(Requirement::parse).filter(|r| !r.name.is_empty()) {
            add(&r.name, kind);
        }
    }
    Ok(out)
}

/// A PEP 508 requirement as far as Atlas reads one: its name, its extras and the one
/// version it pins (`==1.2.3`), if it pins one.
#[derive(Debug, Clone)]
struct Requirement {
    name: String,
    extras: Vec<String>,
    pinned: Option<String>,
}

impl Requirement {
    /// The requirement in `text`: the name up to the first character that is not one,
    /// then `[extras]`, then the version specifiers up to a `;` marker.
    fn parse(text: &str) -> Requirement {
        let text = text.split(';').next().unwrap_or("").trim();
        let len = text.find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c))).unwrap_or(text.len());
        let (name, rest) = text.split_at(len);
        let (extras, rest) = match rest.trim_start().strip_prefix('[') {
            Some(r) => r.split_once(']').unwrap_or((r, "")),
            None => ("", rest),
        };
        let extras = extras.split(',').map(str::trim).filter(|e| !e.is_empty()).map(pep503).collect();
        let pinned = rest
            .trim()
            .strip_prefix("==")
            .map(str::trim)
            .filter(|v| !v.is_empty() && !v.contains(['*', ',', ' ']))
            .map(str::to_owned);
        Requirement { name: name.to_owned(), extras, pinned }
    }
}

/// What a local project (`-e .[full]`) installs: its dependencies and those of the
/// extras named, each with where it is declared (`pyproject.toml's extra full`).
/// PEP 621's `[project]`, or Poetry's `[tool.poetry.dependencies]` and `extras`.
fn local_project(pyproject: &toml::Table, file: &str, extras: &[String]) -> Vec<(Requirement, String)> {
    let mut out = Vec::new();
    if let Some(p) = pyproject.get("project").and_then(|p| p.as_table()) {
        let own = p.get("name").and_then(|n| n.as_str()).map(pep503).unwrap_or_default();
        let reqs = |v: Option<&toml::Value>| -> Vec<Requirement> {
            v.and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str())
                .map(Requirement::parse)
                .collect()
        };
        let optional = p.get("optional-dependencies").and_then(|o| o.as_table());
        let mut todo: Vec<(Option<String>, Vec<Requirement>)> = vec![(None, reqs(p.get("dependencies")))];
        let mut seen: BTreeSet<String> = BTreeSet::new();
        todo.extend(extras.iter().map(|e| (Some(e.clone()), Vec::new())));
        while let Some((extra, mut list)) = todo.pop() {
            if let Some(e) = &extra {
                if !seen.insert(e.clone()) || seen.len() > MAX_EXTRAS {
                    continue;
                }
                let named = optional.and_then(|o| o.iter().find(|(k, _)| pep503(k) == *e)).map(|(_, v)| v);
                list = reqs(named);
            }
            let from = match &extra {
                None => format!("the dependencies of {file}"),
                Some(e) => format!("the extra {e} of {file}"),
            };
            for r in list {
                // `app[plot]` inside app's own extras names its other extras.
                if !own.is_empty() && pep503(&r.name) == own {
                    todo.extend(r.extras.iter().map(|e| (Some(e.clone()), Vec::new())));
                } else if !r.name.is_empty() {
                    out.push((r, from.clone()));
                }
            }
        }
        return out;
    }
    let poetry = pyproject.get("tool").and_then(|t| t.get("poetry"));
    let deps = poetry.and_then(|p| p.get("dependencies")?.as_table());
    let chosen: BTreeSet<String> = poetry
        .and_then(|p| p.get("extras")?.as_table())
        .into_iter()
        .flatten()
        .filter(|(e, _)| extras.contains(&pep503(e)))
        .flat_map(|(_, names)| names.as_array().into_iter().flatten().filter_map(|n| n.as_str()).map(pep503))
        .collect();
    for (name, dep) in deps.into_iter().flatten().filter(|(k, _)| *k != "python") {
        let optional = dep.get("optional").and_then(|o| o.as_bool()) == Some(true);
        if optional && !chosen.contains(&pep503(name)) {
            continue;
        }
        let version = dep.as_str().or_else(|| dep.get("version")?.as_str()).unwrap_or("").trim();
        // Poetry's bare version is an exact one.
        let bare = version.strip_prefix("==").unwrap_or(version).trim();
        let exact = !bare.is_empty() && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
        let from = match optional {
            true => format!("an extra of {file}"),
            false => format!("the dependencies of {file}"),
        };
        out.push((
            Requirement { name: name.clone(), extras: Vec::new(), pinned: exact.then(|| bare.to_owned()) },
            from,
        ));
    }
    out
}

/// Every package version the project's uv.lock and poetry.lock pin, installable ones
/// only: what a requirements file's local project resolves its dependencies to.
fn lock_pins(project: &Path) -> Vec<Locked> {
    let mut out = Vec::new();
    for name in ["uv.lock", "poetry.lock"] {
        let file = project.join(name);
        let Ok(text) = read_capped(&file) else { continue };
        let read = match name {
            "uv.lock" => uv(&file, &text, true),
            _ => poetry(project, &file, &text, true),
        };
        out.extend(read.map(|(l, _)| l).unwrap_or_default());
    }
    out
}

// --- requirements.txt ---------------------------------------------------------

/// `requirements.txt`: each `NAME==VERSION` line a runtime dependency, and a line that
/// installs the project itself (`-e .[full]`, `.[full]`, `./sub`) the dependencies its
/// `pyproject.toml` declares and those of the extras named, each at the version the
/// rest of the file or the project's uv.lock or poetry.lock pins (or its own `==`),
/// and a [`Skipped`] line for each that stays unpinned.
pub(super) fn requirements(project: &Path, file: &Path, text: &str) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    // (line, requirement, where it is declared, the pyproject.toml that declares it)
    let mut from_project: Vec<(usize, Requirement, String, String)> = Vec::new();
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
        if let Some((path, extras)) = local_target(line) {
            match local_pyproject(project, path, n)? {
                Ok((t, shown)) => {
                    let extras: Vec<String> =
                        extras.split(',').map(str::trim).filter(|e| !e.is_empty()).map(pep503).collect();
                    let declared = local_project(&t, &shown, &extras);
                    from_project.extend(declared.into_iter().map(|(r, from)| (n, r, from, shown.clone())));
                }
                Err(why) => skipped.push(why),
            }
            continue;
        }
        if line.starts_with('-') {
            skipped
                .push(Skipped::new(format!("requirements.txt:{n}: the option {:?} is not followed", first_word(line))));
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
            skipped.push(Skipped::new(format!(
                "requirements.txt:{n}: {requirement} is not pinned to one version (write NAME==VERSION, or use \
                 `uv pip compile` to pin it)"
            )));
            continue;
        };
        match spec(Ecosystem::Pypi, name, version.trim()) {
            Ok(spec) => {
                let kinds = BTreeSet::from([Kind::Runtime]);
                locked.push(Locked {
                    spec,
                    kinds,
                    checksums: hashes,
                    index: None,
                    lockfile: "requirements.txt".into(),
                });
            }
            Err(e) => return Err(malformed(file, format!("line {n}: {e}"))),
        }
    }
    // The project's own dependencies, at the versions something pins.
    let mut named: BTreeSet<String> = locked.iter().map(|l: &Locked| pep503(&l.spec.name)).collect();
    let mut pins: Option<Vec<Locked>> = None;
    for (n, r, from, pyproject) in from_project {
        let name = pep503(&r.name);
        if !named.insert(name.clone()) {
            continue;
        }
        let pinned: Vec<Locked> = pins
            .get_or_insert_with(|| lock_pins(project))
            .iter()
            .filter(|l| pep503(&l.spec.name) == name)
            .cloned()
            .collect();
        if !pinned.is_empty() {
            locked.extend(pinned.into_iter().map(|l| Locked { kinds: BTreeSet::from([Kind::Runtime]), ..l }));
            continue;
        }
        let Some(version) = &r.pinned else {
            skipped.push(Skipped::new(format!(
                "requirements.txt:{n}: {} (from {from}) stays unpinned: neither requirements.txt nor a lockfile pins \
                 it; add {}==VERSION to requirements.txt to serve it",
                r.name, r.name
            )));
            continue;
        };
        match spec(Ecosystem::Pypi, &r.name, version) {
            Ok(spec) => locked.push(Locked {
                spec,
                kinds: BTreeSet::from([Kind::Runtime]),
                checksums: Vec::new(),
                index: None,
                lockfile: pyproject,
            }),
            Err(e) => skipped.push(Skipped::new(format!("requirements.txt:{n}: {e} (from {from})"))),
        }
    }
    Ok((locked, skipped))
}

/// A line that installs a local project (`-e .[full]`, `--editable ./sub`, `.[full]`):
/// its path and the text between its brackets. Other `-e` lines (a VCS URL) are not.
fn local_target(line: &str) -> Option<(&str, &str)> {
    let target = match line.strip_prefix("--editable").or_else(|| line.strip_prefix("-e")) {
        Some(rest) => rest.trim_start_matches([' ', '\t', '=']),
        None => line,
    };
    let target = target.split_whitespace().next().unwrap_or("");
    let (path, extras) = match target.split_once('[') {
        Some((p, e)) => (p, e.split(']').next().unwrap_or("")),
        None => (target, ""),
    };
    let local = path == "." || path == ".." || ["./", "../", "/", "file:"].iter().any(|p| path.starts_with(p));
    local.then_some((path, extras))
}

/// The `pyproject.toml` of the local project at `path` (relative to the project, and
/// inside it), parsed, with its path as shown; or the line that says why its
/// dependencies are not read.
fn local_pyproject(project: &Path, path: &str, n: usize) -> Result<Result<(toml::Table, String), Skipped>, Malformed> {
    // Printed and kept in the set: one printable line, cut short.
    let shown = atlas_runtime::utf8::printable(&atlas_runtime::utf8::clip_chars(path, 80));
    let rel = path.strip_prefix("file:").unwrap_or(path).trim_end_matches('/');
    let inside = !Path::new(rel).is_absolute()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
    if !inside {
        return Ok(Err(Skipped::new(format!(
            "requirements.txt:{n}: {shown} is outside the project, so its dependencies are not read; pin them in \
             requirements.txt to serve them"
        ))));
    }
    let rel = rel.trim_start_matches("./");
    let file = project.join(rel).join("pyproject.toml");
    let name = match rel {
        "" | "." => "pyproject.toml".to_owned(),
        r => format!("{}/pyproject.toml", atlas_runtime::utf8::printable(&atlas_runtime::utf8::clip_chars(r, 80))),
    };
    if !file.is_file() {
        return Ok(Err(Skipped::new(format!(
            "requirements.txt:{n}: {shown} has no pyproject.toml, so its dependencies are not read; pin them in \
             requirements.txt to serve them"
        ))));
    }
    let t: toml::Table = toml::from_str(&read_capped(&file)?).map_err(|e| toml_error(&file, &e))?;
    Ok(Ok((t, name)))
}

fn first_word(line: &str) -> String {
    atlas_runtime::utf8::clip_chars(line.split_whitespace().next().unwrap_or(""), 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_poetry_lock_of_format_1_checks_each_package_by_its_metadata_files() {
        let t = tempfile::tempdir().unwrap();
        let h = |c: char| format!("sha256:{}", c.to_string().repeat(64));
        let text = format!(
            "[[package]]\nname = \"requests\"\nversion = \"2.31.0\"\noptional = false\n\n\
             [metadata]\nlock-version = \"1.1\"\ncontent-hash = \"x\"\n\n[metadata.files]\nrequests = [\n    \
             {{file = \"requests-2.31.0.tar.gz\", hash = \"{}\"}},\n]\n",
            h('c')
        );
        let file = t.path().join("poetry.lock");
        let (locked, skipped) = super::poetry(t.path(), &file, &text, true).unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(locked.len(), 1);
        assert_eq!(locked[0].checksums, [h('c')], "the 1.x lock's hash checks the download");
    }
}
