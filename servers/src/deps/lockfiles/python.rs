//! uv.lock, poetry.lock (with pyproject.toml for the direct dependencies) and
//! requirements.txt.

use std::collections::BTreeSet;
use std::path::Path;

use atlas_runtime::package::Ecosystem;

use super::{Locked, Malformed, Skipped, malformed, read_capped, spec, toml_error};

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

pub(super) fn uv(file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
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
                locked.push(Locked { spec, checksums, index: Some(registry.to_owned()), lockfile: "uv.lock".into() });
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
    files: std::collections::BTreeMap<String, Vec<toml::Table>>,
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
    let direct = match all {
        true => None,
        false => Some(pyproject_direct(project)?),
    };
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for p in &lock.package {
        if direct.as_ref().is_some_and(|d| !d.contains(&atlas_runtime::package::pep503(&p.name))) {
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

pub(super) fn requirements(file: &Path, text: &str) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
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
                locked.push(Locked { spec, checksums: hashes, index: None, lockfile: "requirements.txt".into() });
            }
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
