//! A project's lockfiles, read for the exact versions they pin: `Cargo.lock` (with the
//! workspace's `Cargo.toml`s for its direct dependencies), `package-lock.json`,
//! `pnpm-lock.yaml`, `uv.lock`, `poetry.lock` (with `pyproject.toml` for its direct
//! dependencies) and a fully pinned `requirements.txt`.
//!
//! Every file is untrusted input: read up to a cap, parsed by a real parser (TOML,
//! JSON, YAML with its budgets), each name and version checked by [`atlas_runtime::package`] before it goes
//! anywhere. A file that does not parse is an error naming the file and its line; an
//! entry Atlas cannot install (a git or path dependency, an unpinned requirement, a
//! package whose lock gives nothing to check its artifact against) is a [`Skipped`]
//! line, its URLs' credentials redacted, and the rest go on.
//!
//! "Direct" means one thing in every ecosystem: whatever the project's manifests
//! declare, each marked by its [`Kind`] (runtime, dev, optional, build, or a named
//! dependency group); a [`Select`] narrows the set, and each package it leaves out is a
//! [`LeftOut`] with its reason
//! (`tests::each_ecosystem_marks_its_direct_dependencies_by_kind_and_only_narrows_them`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use atlas_runtime::package::{Ecosystem, PackageSpec};

mod cargo;
mod npm;
mod python;

pub use cargo::Graph;
use cargo::cargo;
use npm::{npm, pnpm};
use python::{poetry, requirements, uv};

/// The largest lockfile or manifest read, in bytes.
const MAX_LOCKFILE_BYTES: u64 = 64 << 20;
/// The most workspace members read.
const MAX_MEMBERS: usize = 2_000;

/// The lockfiles read, in this order.
pub const LOCKFILES: [&str; 6] =
    ["Cargo.lock", "package-lock.json", "pnpm-lock.yaml", "uv.lock", "poetry.lock", "requirements.txt"];

/// The longest dependency group name kept, in characters.
const MAX_GROUP_CHARS: usize = 64;

/// What a project declares a dependency for, the same words in every ecosystem.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Needed to run: Cargo's `[dependencies]`, npm's `dependencies` and
    /// `peerDependencies`, Python's `[project].dependencies`, a requirements file's lines;
    /// a Cargo optional dependency its default features turn on.
    Runtime,
    /// Needed to build: Cargo's `[build-dependencies]`.
    Build,
    /// Turned on by a feature or an extra: Cargo's `optional = true`, npm's
    /// `optionalDependencies`, Python's extras (`[project.optional-dependencies]`,
    /// Poetry's `optional = true`).
    Optional,
    /// For tests and tools: Cargo's `[dev-dependencies]`, npm's `devDependencies`, a
    /// Python dependency group named `dev` (uv's and Poetry's default group).
    Dev,
    /// Any other Python dependency group (PEP 735, uv, Poetry), by its normalised name.
    Group(String),
    /// Locked and re-exported by the direct dependency it names (a facade: clap's
    /// `pub use clap_builder::*`): served beside it, with its kinds too.
    Reexported(String),
    /// Locked but declared by no manifest: what `--all` adds.
    Transitive,
}

impl Kind {
    /// The Python dependency group `name`: `dev`, or a group by its PEP 503 name (cut
    /// short, and only the characters a name has).
    pub fn group(name: &str) -> Kind {
        let name: String = atlas_runtime::package::pep503(name)
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(MAX_GROUP_CHARS)
            .collect();
        match name.as_str() {
            "dev" => Kind::Dev,
            "" => Kind::Group("unnamed".into()),
            _ => Kind::Group(name),
        }
    }

    /// A crate re-exported by `facade`, by the facade's name as a kind is written
    /// (lower-case; any other character a `-`).
    pub fn reexported(facade: &str) -> Kind {
        let name: String = facade
            .chars()
            .take(MAX_GROUP_CHARS)
            .map(|c| match c.to_ascii_lowercase() {
                c if c.is_ascii_alphanumeric() || "-._".contains(c) => c,
                _ => '-',
            })
            .collect();
        Kind::Reexported(name)
    }

    /// How the kind is written: `runtime`, `build`, `optional`, `dev`, `group:NAME`,
    /// `reexported:FACADE`, `transitive`.
    pub fn name(&self) -> String {
        match self {
            Kind::Runtime => "runtime".into(),
            Kind::Build => "build".into(),
            Kind::Optional => "optional".into(),
            Kind::Dev => "dev".into(),
            Kind::Group(g) => format!("group:{g}"),
            Kind::Reexported(f) => format!("reexported:{f}"),
            Kind::Transitive => "transitive".into(),
        }
    }
}

/// The kinds a sync takes: every declared kind unless `only` names some, and the
/// transitive packages too with `all`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Select {
    /// Every locked package, not only those the manifests declare.
    pub all: bool,
    /// The kinds taken, as `--only` names them (`runtime`, `dev`, `optional`, `build`,
    /// `group` for every group, `group:NAME`); None takes them all.
    pub only: Option<Vec<String>>,
}

impl Select {
    /// Every locked package, whatever its kind.
    pub fn every() -> Select {
        Select { all: true, only: None }
    }

    /// Whether a package of these kinds is taken: when one of them is.
    pub fn takes(&self, kinds: &BTreeSet<Kind>) -> bool {
        kinds.iter().any(|k| match (k, &self.only) {
            (Kind::Transitive, _) => self.all,
            (_, None) => true,
            (Kind::Group(_), Some(only)) => only.iter().any(|o| *o == k.name() || o == "group"),
            (_, Some(only)) => only.contains(&k.name()),
        })
    }

    /// One `--only` value: the kinds it names, checked, in order. The error names the
    /// kinds there are.
    pub fn parse_only(text: &str) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let kind = match word.strip_prefix("group:") {
                Some(g) => Kind::group(g).name(),
                None if ["runtime", "dev", "optional", "build", "group"].contains(&word) => word.to_owned(),
                None => {
                    return Err(format!(
                        "{:?} is not a kind of dependency: write runtime, dev, optional, build, group (every \
                         dependency group) or group:NAME, separated by commas",
                        atlas_runtime::utf8::clip_chars(word, 40)
                    ));
                }
            };
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
        if out.is_empty() {
            return Err("name at least one kind: runtime, dev, optional, build, group or group:NAME".into());
        }
        Ok(out)
    }
}

/// The kinds of a package, written out and joined: `runtime, dev`.
pub fn kinds_text(kinds: &BTreeSet<Kind>) -> String {
    kinds.iter().map(Kind::name).collect::<Vec<_>>().join(", ")
}

/// One package version a lockfile pins, with the checksums it gives for its artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locked {
    pub spec: PackageSpec,
    /// What the project declares it for; empty in a reader's answer for a package no
    /// manifest declares, [`Kind::Transitive`] once [`read`] has it.
    pub kinds: BTreeSet<Kind>,
    /// `sha256:<hex>` or `sha512-<base64>`, as the lockfile states them.
    pub checksums: Vec<String>,
    /// The index the lockfile says the package comes from (uv.lock's `source = {
    /// registry = … }`, a poetry.lock source's `url`): its source, whatever index the
    /// user's settings name.
    pub index: Option<String>,
    /// The lockfile, relative to the project.
    pub lockfile: String,
}

/// An entry left out, and why, in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped(String);

impl Skipped {
    /// The line, with the credentials of any URL in it (`https://user:token@…`, as
    /// lockfiles may hold them for git and tarball sources) redacted, as every message
    /// redacts them.
    pub fn new(line: impl Into<String>) -> Skipped {
        Skipped(atlas_dist::http::redact(&line.into(), None))
    }

    pub fn line(&self) -> &str {
        &self.0
    }
}

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

/// A locked package the selection leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub spec: PackageSpec,
    pub kinds: BTreeSet<Kind>,
    /// The lockfile, relative to the project.
    pub lockfile: String,
    /// Why, in words: `--only runtime leaves dev out`.
    pub reason: String,
}

/// What a project's lockfiles pin.
#[derive(Debug, Default)]
pub struct Read {
    /// Each package version the selection takes, once, sorted.
    pub locked: Vec<Locked>,
    pub skipped: Vec<Skipped>,
    /// Each package version the manifests declare that the selection leaves out.
    pub left_out: Vec<LeftOut>,
    /// The lockfiles found.
    pub found: Vec<String>,
}

/// What the lockfiles of `project` pin, marked by kind: the direct dependencies of the
/// kinds `select` takes, and the transitive ones too with `select.all`.
pub fn read(project: &Path, select: &Select) -> Result<Read, Malformed> {
    let all = select.all;
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
            _ => requirements(project, &file, &text)?,
        };
        locked.extend(l);
        skipped.extend(s);
    }
    locked.sort_by(|a, b| a.spec.cmp(&b.spec));
    // One entry per version, with every kind any lockfile gives it.
    locked.dedup_by(|a, b| {
        let same = a.spec == b.spec;
        if same {
            b.kinds.append(&mut a.kinds);
        }
        same
    });
    let mut left_out = Vec::new();
    locked.retain_mut(|l| {
        if l.kinds.is_empty() {
            l.kinds.insert(Kind::Transitive);
        }
        if select.takes(&l.kinds) {
            return true;
        }
        if !l.kinds.contains(&Kind::Transitive) {
            let only = select.only.as_deref().unwrap_or_default().join(",");
            left_out.push(LeftOut {
                spec: l.spec.clone(),
                kinds: l.kinds.clone(),
                lockfile: l.lockfile.clone(),
                reason: format!(
                    "--only {only} leaves {} out",
                    match l.kinds.len() {
                        1 => kinds_text(&l.kinds),
                        _ => format!("each of its kinds ({})", kinds_text(&l.kinds)),
                    }
                ),
            });
        }
        false
    });
    Ok(Read { locked, skipped, left_out, found })
}

/// The dependency graph of `project`'s Cargo.lock, or None when it has none.
pub fn cargo_graph(project: &Path) -> Result<Option<Graph>, Malformed> {
    let file = project.join("Cargo.lock");
    if !file.is_file() {
        return Ok(None);
    }
    cargo::graph(&file, &read_capped(&file)?).map(Some)
}

/// The version of `dep` that `facade` (at `version`) loads, as `project`'s lockfile
/// resolves it, when it is a registry package: package-lock.json's copy nested under
/// the facade, else its top one; pnpm-lock.yaml's `dependencies` of the facade's
/// snapshot (version 9) or package entry (version 6). None without such an entry.
pub fn npm_dependency(project: &Path, facade: &str, version: &str, dep: &str) -> Option<Locked> {
    let file = project.join("package-lock.json");
    if let Ok(text) = read_capped(&file) {
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let packages = v.get("packages")?.as_object()?;
        let version = [format!("node_modules/{facade}/node_modules/{dep}"), format!("node_modules/{dep}")]
            .iter()
            .find_map(|k| packages.get(k)?.get("version")?.as_str().map(str::to_owned))?;
        let (all, _) = npm(&file, &text, true).ok()?;
        return all.into_iter().find(|l| l.spec.name == dep && l.spec.version == version);
    }
    let file = project.join("pnpm-lock.yaml");
    let text = read_capped(&file).ok()?;
    let v: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
    let bare = |v: &str| v.split('(').next().unwrap_or(v).trim().to_owned();
    let me = format!("{facade}@{version}");
    let resolved = ["snapshots", "packages"].iter().find_map(|section| {
        let (_, entry) = v.get(*section)?.as_object()?.iter().find(|(k, _)| bare(k.trim_start_matches('/')) == me)?;
        entry.get("dependencies")?.get(dep)?.as_str().map(bare)
    })?;
    let (all, _) = pnpm(&file, &text, true).ok()?;
    all.into_iter().find(|l| l.spec.name == dep && l.spec.version == resolved)
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

fn spec(eco: Ecosystem, name: &str, version: &str) -> Result<PackageSpec, atlas_runtime::package::BadSpec> {
    format!("{}:{name}@{version}", eco.as_str()).parse::<PackageSpec>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(l: &[Locked]) -> Vec<String> {
        l.iter().map(|l| l.spec.to_string()).collect()
    }

    /// Each package as `spec kinds`: `crate:itoa@1.0.11 runtime`.
    fn marked(l: &[Locked]) -> Vec<String> {
        l.iter().map(|l| format!("{} {}", l.spec, kinds_text(&l.kinds))).collect()
    }

    fn only(kinds: &str) -> Select {
        Select { all: false, only: Some(Select::parse_only(kinds).unwrap()) }
    }

    fn registry_crate(name: &str, version: &str) -> String {
        format!(
            "[[package]]\nname = \"{name}\"\nversion = \"{version}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
        )
    }

    #[test]
    fn a_cargo_lock_graph_names_each_crates_registry_dependencies_at_their_locked_versions() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        assert!(cargo_graph(p).unwrap().is_none());
        let lock = format!(
            "version = 4\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\ndependencies = [\"clap\"]\n\
             {}dependencies = [\"clap_builder\", \"itoa 1.0.11\", \"itoa 0.4.8 (registry+x)\", \"local\", \"missing\"]\n\
             {}checksum = \"{}\"\n{}{}[[package]]\nname = \"local\"\nversion = \"0.1.0\"\n",
            registry_crate("clap", "4.5.20"),
            registry_crate("clap_builder", "4.5.20"),
            "a".repeat(64),
            registry_crate("itoa", "1.0.11"),
            registry_crate("itoa", "0.4.8"),
        );
        std::fs::write(p.join("Cargo.lock"), lock).unwrap();
        let g = cargo_graph(p).unwrap().unwrap();
        let deps = g.dependencies("clap", "4.5.20");
        assert_eq!(specs(deps), ["crate:clap_builder@4.5.20", "crate:itoa@1.0.11", "crate:itoa@0.4.8"]);
        assert_eq!(deps[0].checksums, [format!("sha256:{}", "a".repeat(64))]);
        assert!(g.dependencies("app", "0.1.0").is_empty(), "a workspace member is no registry crate");
        assert!(g.dependencies("clap", "9.9.9").is_empty());
    }

    #[test]
    fn a_cargo_project_marks_its_crates_runtime_build_dev_or_optional_and_only_narrows_them_saying_why() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::write(
            p.join("Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[features]\ndefault = [\"fast\"]\nfast = [\"dep:ryu\", \"serde?/std\"]\n\
             [dependencies]\nitoa = \"1\"\nryu = { version = \"1\", optional = true }\nserde = { version = \"1\", optional = true }\n\
             [build-dependencies]\ncc = \"1\"\n[dev-dependencies]\ntempfile = \"3\"\nitoa = \"1\"\n\
             [target.'cfg(unix)'.dev-dependencies]\nlibc = \"0.2\"\n",
        )
        .unwrap();
        let lock: String = [
            ("itoa", "1.0.11"),
            ("ryu", "1.0.18"),
            ("serde", "1.0.200"),
            ("cc", "1.1.0"),
            ("tempfile", "3.10.1"),
            ("libc", "0.2.155"),
            ("fastrand", "2.1.0"),
        ]
        .iter()
        .map(|(n, v)| registry_crate(n, v))
        .collect();
        std::fs::write(p.join("Cargo.lock"), format!("version = 4\n{lock}")).unwrap();
        let r = read(p, &Select::default()).unwrap();
        assert_eq!(
            marked(&r.locked),
            [
                "crate:cc@1.1.0 build",
                "crate:itoa@1.0.11 runtime, dev",
                "crate:libc@0.2.155 dev",
                "crate:ryu@1.0.18 runtime",
                "crate:serde@1.0.200 optional",
                "crate:tempfile@3.10.1 dev",
            ],
            "a default feature's optional crate is runtime; `serde?/std` turns nothing on"
        );
        assert!(r.left_out.is_empty(), "{:?}", r.left_out);
        let r = read(p, &only("runtime")).unwrap();
        assert_eq!(specs(&r.locked), ["crate:itoa@1.0.11", "crate:ryu@1.0.18"]);
        let out: Vec<String> = r.left_out.iter().map(|l| format!("{} {}: {}", l.spec, l.lockfile, l.reason)).collect();
        assert_eq!(
            out,
            [
                "crate:cc@1.1.0 Cargo.lock: --only runtime leaves build out",
                "crate:libc@0.2.155 Cargo.lock: --only runtime leaves dev out",
                "crate:serde@1.0.200 Cargo.lock: --only runtime leaves optional out",
                "crate:tempfile@3.10.1 Cargo.lock: --only runtime leaves dev out",
            ]
        );
        let r = read(p, &Select { all: true, only: Some(vec!["dev".into()]) }).unwrap();
        assert_eq!(
            marked(&r.locked),
            [
                "crate:fastrand@2.1.0 transitive",
                "crate:itoa@1.0.11 runtime, dev",
                "crate:libc@0.2.155 dev",
                "crate:tempfile@3.10.1 dev"
            ],
            "--all adds the transitive crates to the kinds --only takes"
        );
        assert_eq!(r.left_out.len(), 3, "{:?}", r.left_out);
    }

    #[test]
    fn npm_and_pnpm_projects_mark_dependencies_dev_optional_and_peer_ones_by_kind() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        let sri = format!("sha512-{}", "A".repeat(86) + "==");
        let entry = serde_json::json!({"version": "1.0.0", "integrity": sri});
        std::fs::write(
            p.join("package-lock.json"),
            serde_json::json!({"lockfileVersion": 3, "packages": {
                "": {
                    "dependencies": {"express": "^4"},
                    "devDependencies": {"vitest": "^1", "express": "^4"},
                    "optionalDependencies": {"fsevents": "^2"},
                    "peerDependencies": {"react": "^18", "react-dom": "^18"},
                    "peerDependenciesMeta": {"react-dom": {"optional": true}}
                },
                "node_modules/express": entry, "node_modules/vitest": entry, "node_modules/fsevents": entry,
                "node_modules/react": entry, "node_modules/react-dom": entry, "node_modules/ms": entry
            }})
            .to_string(),
        )
        .unwrap();
        let r = read(p, &Select::default()).unwrap();
        assert_eq!(
            marked(&r.locked),
            [
                "npm:express@1.0.0 runtime, dev",
                "npm:fsevents@1.0.0 optional",
                "npm:react@1.0.0 runtime",
                "npm:react-dom@1.0.0 optional",
                "npm:vitest@1.0.0 dev",
            ]
        );
        let r = read(p, &only("dev")).unwrap();
        assert_eq!(specs(&r.locked), ["npm:express@1.0.0", "npm:vitest@1.0.0"]);
        assert_eq!(r.left_out.len(), 3);
        assert!(specs(&read(p, &Select::every()).unwrap().locked).contains(&"npm:ms@1.0.0".to_owned()));
        std::fs::remove_file(p.join("package-lock.json")).unwrap();

        let sri = |c: char| format!("sha512-{}==", c.to_string().repeat(86));
        std::fs::write(
            p.join("pnpm-lock.yaml"),
            format!(
                "lockfileVersion: '9.0'\nimporters:\n  .:\n    dependencies:\n      chalk:\n        specifier: ^5\n        \
                 version: 5.3.0\n    devDependencies:\n      typescript:\n        specifier: ^5\n        version: 5.4.5\n    \
                 optionalDependencies:\n      bufferutil:\n        specifier: ^4\n        version: 4.0.8\npackages:\n  \
                 chalk@5.3.0:\n    resolution: {{integrity: {}}}\n  typescript@5.4.5:\n    resolution: {{integrity: {}}}\n  \
                 bufferutil@4.0.8:\n    resolution: {{integrity: {}}}\n",
                sri('A'),
                sri('B'),
                sri('C')
            ),
        )
        .unwrap();
        let r = read(p, &Select::default()).unwrap();
        assert_eq!(
            marked(&r.locked),
            ["npm:bufferutil@4.0.8 optional", "npm:chalk@5.3.0 runtime", "npm:typescript@5.4.5 dev"]
        );
        let r = read(p, &only("runtime,optional")).unwrap();
        assert_eq!(specs(&r.locked), ["npm:bufferutil@4.0.8", "npm:chalk@5.3.0"]);
        assert_eq!(r.left_out[0].reason, "--only runtime,optional leaves dev out");
    }

    #[test]
    fn a_uv_project_marks_its_extras_optional_and_its_groups_dev_or_by_name() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        let pkg = |n: &str, v: &str| {
            format!(
                "[[package]]\nname = \"{n}\"\nversion = \"{v}\"\nsource = {{ registry = \"https://pypi.org/simple\" }}\n\
                 sdist = {{ url = \"https://f/{n}.tar.gz\", hash = \"sha256:{}\" }}\n",
                "a".repeat(64)
            )
        };
        std::fs::write(
            p.join("uv.lock"),
            format!(
                "version = 1\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\nsource = {{ editable = \".\" }}\n\
                 dependencies = [{{ name = \"httpx\" }}]\n\n[package.optional-dependencies]\nplot = [{{ name = \"matplotlib\" }}]\n\n\
                 [package.dev-dependencies]\ndev = [{{ name = \"pytest\" }}]\ndocs = [{{ name = \"mkdocs\" }}, {{ name = \"httpx\" }}]\n\n{}{}{}{}{}",
                pkg("httpx", "0.27.0"),
                pkg("matplotlib", "3.8.0"),
                pkg("pytest", "8.2.0"),
                pkg("mkdocs", "1.6.0"),
                pkg("idna", "3.7"),
            ),
        )
        .unwrap();
        let r = read(p, &Select::default()).unwrap();
        assert_eq!(
            marked(&r.locked),
            [
                "pypi:httpx@0.27.0 runtime, group:docs",
                "pypi:matplotlib@3.8.0 optional",
                "pypi:mkdocs@1.6.0 group:docs",
                "pypi:pytest@8.2.0 dev",
            ],
            "uv drops extras and groups; Atlas takes them, marked"
        );
        assert_eq!(specs(&read(p, &only("group:Docs")).unwrap().locked), ["pypi:httpx@0.27.0", "pypi:mkdocs@1.6.0"]);
        assert_eq!(specs(&read(p, &only("group")).unwrap().locked), ["pypi:httpx@0.27.0", "pypi:mkdocs@1.6.0"]);
        let r = read(p, &only("runtime")).unwrap();
        assert_eq!(specs(&r.locked), ["pypi:httpx@0.27.0"]);
        let out: Vec<&str> = r.left_out.iter().map(|l| l.reason.as_str()).collect();
        assert_eq!(
            out,
            [
                "--only runtime leaves optional out",
                "--only runtime leaves group:docs out",
                "--only runtime leaves dev out"
            ]
        );
        assert!(Select::parse_only("runtime,tests").unwrap_err().contains("\"tests\" is not a kind of dependency"));
        assert_eq!(Select::parse_only("dev, dev,group:Lint").unwrap(), ["dev", "group:lint"]);
    }

    #[test]
    fn a_poetry_project_marks_its_optional_dependencies_and_groups_and_pep_621_and_735_ones_alike() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        let lock: String = ["requests", "numpy", "pytest", "black", "sphinx"]
            .iter()
            .map(|n| format!("[[package]]\nname = \"{n}\"\nversion = \"1.0.0\"\nfiles = []\n\n"))
            .collect();
        std::fs::write(p.join("poetry.lock"), lock).unwrap();
        std::fs::write(
            p.join("pyproject.toml"),
            "[tool.poetry.dependencies]\npython = \"^3.10\"\nrequests = \"^2\"\nnumpy = { version = \"^1\", optional = true }\n\
             [tool.poetry.group.test.dependencies]\npytest = \"^8\"\n[tool.poetry.dev-dependencies]\nblack = \"*\"\n\
             [tool.poetry.group.docs.dependencies]\nSphinx = \"^7\"\n",
        )
        .unwrap();
        assert_eq!(
            marked(&read(p, &Select::default()).unwrap().locked),
            [
                "pypi:black@1.0.0 dev",
                "pypi:numpy@1.0.0 optional",
                "pypi:pytest@1.0.0 group:test",
                "pypi:requests@1.0.0 runtime",
                "pypi:sphinx@1.0.0 group:docs",
            ]
        );
        std::fs::write(
            p.join("pyproject.toml"),
            "[project]\nname = \"app\"\ndependencies = [\"requests>=2\"]\n[project.optional-dependencies]\nfast = [\"numpy\"]\n\
             [dependency-groups]\nDev = [\"black\", {include-group = \"test\"}]\ntest = [\"pytest>=8\"]\n",
        )
        .unwrap();
        assert_eq!(
            marked(&read(p, &Select::default()).unwrap().locked),
            [
                "pypi:black@1.0.0 dev",
                "pypi:numpy@1.0.0 optional",
                "pypi:pytest@1.0.0 group:test",
                "pypi:requests@1.0.0 runtime",
            ]
        );
    }

    #[test]
    fn a_requirements_line_that_installs_the_project_with_extras_serves_their_dependencies_at_the_versions_pinned() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::write(
            p.join("pyproject.toml"),
            "[project]\nname = \"My_App\"\ndependencies = [\"requests>=2\"]\n[project.optional-dependencies]\n\
             full = [\"numpy>=1.26\", \"my-app[plot]\", \"scipy; python_version >= '3.10'\"]\nplot = [\"matplotlib==3.8.0\"]\n\
             test = [\"pytest\"]\n",
        )
        .unwrap();
        std::fs::write(p.join("requirements.txt"), "-e .[full]\nrequests==2.31.0\nnumpy==1.26.4\n-e ../elsewhere\n")
            .unwrap();
        let r = read(p, &Select::default()).unwrap();
        assert_eq!(
            marked(&r.locked),
            ["pypi:matplotlib@3.8.0 runtime", "pypi:numpy@1.26.4 runtime", "pypi:requests@2.31.0 runtime",],
            "the extra full, the extra plot it names, the project's dependencies; never the extra test"
        );
        let matplotlib = &r.locked[0];
        assert_eq!(matplotlib.lockfile, "pyproject.toml");
        let lines: Vec<&str> = r.skipped.iter().map(Skipped::line).collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("requirements.txt:4: ../elsewhere is outside the project"), "{lines:?}");
        assert!(
            lines[1].starts_with("requirements.txt:1: scipy (from the extra full of pyproject.toml) stays unpinned"),
            "{lines:?}"
        );
        // A lockfile pins the rest: scipy comes at uv.lock's version, from its index.
        std::fs::write(
            p.join("uv.lock"),
            format!(
                "version = 1\n[[package]]\nname = \"scipy\"\nversion = \"1.13.0\"\n\
                 source = {{ registry = \"https://pypi.corp.test/simple\" }}\n\
                 sdist = {{ url = \"https://f/scipy.tar.gz\", hash = \"sha256:{}\" }}\n",
                "b".repeat(64)
            ),
        )
        .unwrap();
        std::fs::write(p.join("requirements.txt"), ".[full]\nrequests==2.31.0\nnumpy==1.26.4\n").unwrap();
        let r = read(p, &Select::default()).unwrap();
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let scipy = r.locked.iter().find(|l| l.spec.name == "scipy").unwrap();
        assert_eq!(
            (scipy.spec.version.as_str(), scipy.index.as_deref(), scipy.lockfile.as_str()),
            ("1.13.0", Some("https://pypi.corp.test/simple"), "uv.lock")
        );
        assert_eq!(scipy.kinds, BTreeSet::from([Kind::Runtime]));
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
        let Read { locked: l, skipped: s, found, .. } = read(p, &Select::default()).unwrap();
        assert_eq!(specs(&l), ["crate:itoa@1.0.11", "crate:ryu@1.0.18"]);
        assert_eq!(l[0].checksums, ["sha256:49f1f14873335454500d59611f1cf4a4b0f786f9ac11f4312a78e4cf2566695b"]);
        assert!(s.is_empty() && found == ["Cargo.lock"]);
        let all = read(p, &Select::every()).unwrap().locked;
        assert_eq!(specs(&all).len(), 4, "--all: every registry crate, never the members");
        std::fs::write(p.join("Cargo.lock"), "version = 4\n[[package]]\nname = \"x\"\nversion = 1.0\n[[[").unwrap();
        let e = read(p, &Select::default()).unwrap_err().to_string();
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
        let Read { locked: l, skipped: s, found, .. } = read(p, &Select::default()).unwrap();
        assert_eq!(specs(&l), ["npm:@corp/strings@2.1.0", "pypi:six@1.16.0", "pypi:typing-extensions@4.12.2"]);
        assert_eq!(found, ["package-lock.json", "uv.lock", "requirements.txt"]);
        assert_eq!(l[0].checksums, [sri]);
        assert!(l[1].checksums[0].starts_with("sha256:1e61"));
        assert!(l[2].checksums[0].starts_with("sha256:04e5"));
        let lines: Vec<&str> = s.iter().map(Skipped::line).collect();
        assert!(lines.iter().any(|l| l.contains("requirements.txt:4: requests>=2 is not pinned")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("requirements.txt:5")), "{lines:?}");
        let all = read(p, &Select::every()).unwrap().locked;
        assert!(specs(&all).contains(&"npm:dep-of-dep@1.0.0".to_owned()));
        std::fs::write(p.join("requirements.txt"), "ok==1.0\n\n!!!\n").unwrap();
        let e = read(p, &Select::default()).unwrap_err().to_string();
        assert!(e.contains("requirements.txt") && e.contains("line 3"), "{e}");
        std::fs::write(p.join("package-lock.json"), "{\"packages\": {\n  \"\": [}").unwrap();
        let e = read(p, &Select::default()).unwrap_err().to_string();
        assert!(e.contains("package-lock.json") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn a_uv_lock_names_each_packages_index_and_a_package_it_gives_no_sdist_hash_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        let h = |c: char| format!("sha256:{}", c.to_string().repeat(64));
        std::fs::write(
            p.join("uv.lock"),
            format!(
                "version = 1\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\nsource = {{ editable = \".\" }}\n\
                 [[package]]\nname = \"corp-units\"\nversion = \"0.3.1\"\nsource = {{ registry = \"https://pypi.corp.test/simple\" }}\n\
                 sdist = {{ url = \"https://pypi.corp.test/files/corp_units-0.3.1.tar.gz\", hash = \"{}\" }}\n\
                 wheels = [{{ url = \"https://pypi.corp.test/files/corp_units-0.3.1-py3-none-any.whl\", hash = \"{}\" }}]\n\
                 [[package]]\nname = \"wheels-only\"\nversion = \"1.0.0\"\nsource = {{ registry = \"https://pypi.org/simple\" }}\n\
                 wheels = [{{ url = \"https://f/wheels_only-1.0.0-py3-none-any.whl\", hash = \"{}\" }}]\n\
                 [[package]]\nname = \"local-index\"\nversion = \"1.0.0\"\nsource = {{ registry = \"../wheelhouse\" }}\n\
                 sdist = {{ path = \"x.tar.gz\", hash = \"{}\" }}\n",
                h('a'),
                h('b'),
                h('c'),
                h('d')
            ),
        )
        .unwrap();
        let Read { locked: l, skipped: s, .. } = read(p, &Select::every()).unwrap();
        assert_eq!(specs(&l), ["pypi:corp-units@0.3.1"]);
        assert_eq!(l[0].index.as_deref(), Some("https://pypi.corp.test/simple"));
        assert_eq!(l[0].checksums, [h('a')], "the sdist's hash: the sdist is what is read");
        let lines: Vec<&str> = s.iter().map(Skipped::line).collect();
        assert!(lines.iter().any(|l| l.contains("wheels-only@1.0.0 has no sdist sha256")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("local-index@1.0.0 comes from the index ../wheelhouse")), "{lines:?}");
    }

    #[test]
    fn credentials_in_a_lockfiles_urls_never_reach_a_skipped_line() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::write(
            p.join("Cargo.lock"),
            "version = 4\n[[package]]\nname = \"priv\"\nversion = \"0.1.0\"\n\
             source = \"git+https://ci:s3cret-git-token@git.corp.test/priv.git?rev=x#0123abcd\"\n",
        )
        .unwrap();
        std::fs::write(
            p.join("package-lock.json"),
            serde_json::json!({"lockfileVersion": 3, "packages": {
                "": {"dependencies": {"a": "*", "b": "*"}},
                "node_modules/a": {"version": "1.0.0", "resolved": "git+https://ci:s3cret-npm-token@git.corp.test/a.git#abc"},
                "node_modules/b": {"version": "1.0.0", "resolved": "file:../b"}
            }})
            .to_string(),
        )
        .unwrap();
        std::fs::write(
            p.join("uv.lock"),
            "version = 1\n[[package]]\nname = \"g\"\nversion = \"1.0.0\"\n\
             source = { git = \"https://ci:s3cret-uv-token@git.corp.test/g.git?rev=x#abc\" }\n",
        )
        .unwrap();
        std::fs::write(p.join("requirements.txt"), "g@git+https://ci:s3cret-req-token@git.corp.test/g.git\n").unwrap();
        let Read { skipped: s, .. } = read(p, &Select::every()).unwrap();
        let all = s.iter().map(Skipped::line).collect::<Vec<_>>().join("\n");
        assert_eq!(s.len(), 5, "{all}");
        assert!(!all.contains("s3cret") && !all.contains("ci:"), "{all}");
        assert!(all.contains("git.corp.test"), "the host is still said: {all}");
    }

    #[test]
    fn an_npm_entry_without_resolved_is_a_registry_package_locked_by_its_integrity() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        let sri = format!("sha512-{}", "B".repeat(86) + "==");
        // As npm writes it with `omit-lockfile-registry-resolved`.
        std::fs::write(
            p.join("package-lock.json"),
            serde_json::json!({"lockfileVersion": 3, "packages": {
                "": {"dependencies": {"is-number": "^7", "old": "*", "bundled": "*"}},
                "node_modules/is-number": {"version": "7.0.0", "integrity": sri},
                "node_modules/old": {"version": "1.0.0", "integrity": "sha1-AAAAAAAAAAAAAAAAAAAAAAAAAAA="},
                "node_modules/bundled": {"version": "1.0.0", "inBundle": true}
            }})
            .to_string(),
        )
        .unwrap();
        let Read { locked: l, skipped: s, .. } = read(p, &Select::default()).unwrap();
        assert_eq!(specs(&l), ["npm:is-number@7.0.0"]);
        assert_eq!(l[0].checksums, [sri]);
        let lines: Vec<&str> = s.iter().map(Skipped::line).collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.contains("no sha512 `integrity`")), "{lines:?}");
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
        let Read { locked: l, skipped: s, found, .. } = read(p, &Select::default()).unwrap();
        assert_eq!(found, ["pnpm-lock.yaml"]);
        assert_eq!(specs(&l), ["npm:@corp/strings@2.1.0", "npm:is-number@7.0.0", "npm:react-dom@18.2.0"]);
        assert_eq!((&l[0].checksums, &l[2].checksums), (&vec![sri('A')], &vec![sri('B')]));
        let lines: Vec<&str> = s.iter().map(Skipped::line).collect();
        assert!(lines.iter().any(|l| l.contains("local@link:../local")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("gitdep@") && l.contains("codeload")), "{lines:?}");
        assert!(
            specs(&read(p, &Select::every()).unwrap().locked).contains(&"npm:react@18.2.0".to_owned()),
            "--all: peers too"
        );
        // Version 6: a single project's dependencies at the top, keys with a leading `/`.
        let v6 = format!(
            "lockfileVersion: '6.0'\ndependencies:\n  is-number:\n    specifier: ^7\n    version: 7.0.0\n\npackages:\n  \
             /is-number@7.0.0:\n    resolution: {{integrity: {}}}\n    dev: false\n",
            sri('D')
        );
        std::fs::write(p.join("pnpm-lock.yaml"), v6).unwrap();
        assert_eq!(specs(&read(p, &Select::default()).unwrap().locked), ["npm:is-number@7.0.0"]);
        std::fs::write(p.join("pnpm-lock.yaml"), "lockfileVersion: '9.0'\nimporters:\n  .: [\n").unwrap();
        let e = read(p, &Select::default()).unwrap_err().to_string();
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
        let e = read(p, &Select::default()).unwrap_err().to_string();
        assert!(e.contains("pyproject.toml") && e.contains("--all"), "{e}");
        std::fs::write(
            p.join("pyproject.toml"),
            "[tool.poetry.dependencies]\npython = \"^3.10\"\nRequests = \"^2.31\"\nmylib = { git = \"https://github.com/x/mylib\" }\n\
             [tool.poetry.group.dev.dependencies]\npytest = \"^8\"\n",
        )
        .unwrap();
        let Read { locked: l, skipped: s, found, .. } = read(p, &Select::default()).unwrap();
        assert_eq!(found, ["poetry.lock"]);
        assert_eq!(specs(&l), ["pypi:pytest@8.0.0", "pypi:requests@2.31.0"]);
        assert_eq!(l[1].checksums, [h('a'), h('b')]);
        assert!(s.len() == 1 && s[0].line().contains("mylib@0.1.0 comes from a git source"), "{s:?}");
        assert_eq!(read(p, &Select::every()).unwrap().locked.len(), 3, "--all: urllib3 too, never the git one");
        // PEP 621 names the dependencies in [project].
        std::fs::write(
            p.join("pyproject.toml"),
            "[project]\nname = \"app\"\ndependencies = [\"urllib3>=2; python_version>'3'\"]\n",
        )
        .unwrap();
        assert_eq!(specs(&read(p, &Select::default()).unwrap().locked), ["pypi:urllib3@2.0.0"]);
    }
}
