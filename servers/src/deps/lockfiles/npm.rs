//! package-lock.json and pnpm-lock.yaml.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use atlas_runtime::package::Ecosystem;

use super::{Kind, Locked, Malformed, Skipped, malformed, spec};

/// The sections of a `package.json` (or a lock's importer) that declare dependencies,
/// with their kind.
const SECTIONS: [(&str, Kind); 4] = [
    ("dependencies", Kind::Runtime),
    ("peerDependencies", Kind::Runtime),
    ("optionalDependencies", Kind::Optional),
    ("devDependencies", Kind::Dev),
];

/// The names `declarer` (a lock's root package or a pnpm importer) declares, with their
/// kinds; a peer dependency `peerDependenciesMeta` calls optional is optional.
fn declared(declarer: &serde_json::Value, into: &mut BTreeMap<String, BTreeSet<Kind>>) {
    for (section, kind) in &SECTIONS {
        for name in declarer.get(*section).and_then(|d| d.as_object()).into_iter().flat_map(|d| d.keys()) {
            let optional_peer = *section == "peerDependencies"
                && declarer.get("peerDependenciesMeta").and_then(|m| m.get(name)?.get("optional")?.as_bool())
                    == Some(true);
            let kind = if optional_peer { Kind::Optional } else { kind.clone() };
            into.entry(name.clone()).or_default().insert(kind);
        }
    }
}

pub(super) fn npm(file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| malformed(file, e))?;
    let Some(packages) = v.get("packages").and_then(|p| p.as_object()) else {
        return Err(malformed(
            file,
            "it has no `packages` (lockfileVersion 2 or 3); run `npm install --package-lock-only` with npm 7 or later",
        ));
    };
    let root = packages.get("").cloned().unwrap_or_default();
    let mut direct = BTreeMap::new();
    declared(&root, &mut direct);
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for (key, p) in packages {
        let Some(name) = key.rsplit_once("node_modules/").map(|(_, n)| n) else { continue };
        let top = key == &format!("node_modules/{name}");
        let kinds = direct.get(name).filter(|_| top).cloned().unwrap_or_default();
        if !all && kinds.is_empty() {
            continue;
        }
        if p.get("link").and_then(|l| l.as_bool()) == Some(true) {
            continue;
        }
        let name = p.get("name").and_then(|n| n.as_str()).unwrap_or(name);
        let Some(version) = p.get("version").and_then(|v| v.as_str()) else { continue };
        let checksums: Vec<String> = p
            .get("integrity")
            .and_then(|i| i.as_str())
            .into_iter()
            .flat_map(|i| i.split_whitespace())
            .filter(|i| i.starts_with("sha512-"))
            .map(str::to_owned)
            .collect();
        // A registry package is resolved from a registry URL, or (npm's
        // `omit-lockfile-registry-resolved`) not resolved at all and locked by its
        // integrity alone: npm fetches it from the registry it is configured for, and so
        // does Atlas, checked against that integrity.
        let resolved = p.get("resolved").and_then(|r| r.as_str());
        let from_registry = match resolved {
            Some(r) => r.starts_with("https://") || r.starts_with("http://"),
            None => !checksums.is_empty(),
        };
        if !from_registry {
            skipped.push(Skipped::new(format!(
                "package-lock.json: {name}@{version} is not from a registry ({}); Atlas installs published packages",
                resolved.unwrap_or("no `resolved`, and no sha512 `integrity` to check a registry's tarball against")
            )));
            continue;
        }
        match spec(Ecosystem::Npm, name, version) {
            Ok(spec) => {
                locked.push(Locked { spec, kinds, checksums, index: None, lockfile: "package-lock.json".into() });
            }
            Err(e) => skipped.push(Skipped::new(format!("package-lock.json: {e}"))),
        }
    }
    Ok((locked, skipped))
}

// --- pnpm-lock.yaml -----------------------------------------------------------

/// `pnpm-lock.yaml`, lockfile versions 6 and 9: the importers' (or, in a version 6
/// single project, the top level's) dependencies are the direct ones, at the versions
/// they resolved to (a peer suffix `(react@18.2.0)` aside); `packages` holds each
/// version's integrity, keyed `name@version` (`/name@version` in version 6).
pub(super) fn pnpm(file: &Path, text: &str, all: bool) -> Result<(Vec<Locked>, Vec<Skipped>), Malformed> {
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
    let mut wanted: BTreeMap<(String, String), BTreeSet<Kind>> = BTreeMap::new();
    if all {
        wanted.extend(known.keys().map(|k| (k.clone(), BTreeSet::new())));
    }
    let importers = match v.get("importers").and_then(|i| i.as_object()) {
        Some(i) => i.values().cloned().collect(),
        None => vec![v.clone()],
    };
    for imp in &importers {
        for (section, kind) in &SECTIONS {
            for (name, dep) in imp.get(*section).and_then(|d| d.as_object()).into_iter().flatten() {
                // Version 6 and 9: `{specifier, version}`; version 5: the version alone.
                let version = dep.get("version").and_then(|x| x.as_str()).or_else(|| dep.as_str()).unwrap_or("");
                wanted.entry((name.clone(), bare(version))).or_default().insert(kind.clone());
            }
        }
    }
    let (mut locked, mut skipped) = (Vec::new(), Vec::new());
    for ((name, version), kinds) in wanted {
        let entry = known.get(&(name.clone(), version.clone()));
        let resolution = entry.and_then(|e| e.get("resolution"));
        let integrity = resolution.and_then(|r| r.get("integrity")).and_then(|i| i.as_str());
        if version.starts_with("link:") || version.starts_with("file:") || integrity.is_none() {
            let from = resolution.and_then(|r| r.get("tarball").or_else(|| r.get("repo"))).and_then(|x| x.as_str());
            skipped.push(Skipped::new(format!(
                "pnpm-lock.yaml: {name}@{version} is not from a registry ({}); Atlas installs published packages",
                from.unwrap_or("no integrity")
            )));
            continue;
        }
        match spec(Ecosystem::Npm, &name, &version) {
            Ok(spec) => locked.push(Locked {
                spec,
                kinds,
                checksums: integrity
                    .into_iter()
                    .flat_map(str::split_whitespace)
                    .filter(|i| i.starts_with("sha512-"))
                    .map(str::to_owned)
                    .collect(),
                index: None,
                lockfile: "pnpm-lock.yaml".into(),
            }),
            Err(e) => skipped.push(Skipped::new(format!("pnpm-lock.yaml: {e}"))),
        }
    }
    Ok((locked, skipped))
}

/// A parser's error on one line.
fn one_line(e: &impl std::fmt::Display) -> String {
    e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}
