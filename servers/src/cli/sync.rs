//! `atlas sync`: the exact versions a project's lockfiles pin, as libraries, and the
//! project's library set that `serve --project` serves.

use std::path::{Path, PathBuf};

use atlas_dist::config::Config;
use atlas_dist::home::Home;
use atlas_dist::project::{Pinned, Set};
use atlas_runtime::exit::UsageError;

use crate::deps::{Done, Pass, Wanted, lockfiles};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The project (default: this folder): its Cargo.lock (with Cargo.toml),
    /// package-lock.json, pnpm-lock.yaml, uv.lock, poetry.lock (with pyproject.toml) or
    /// requirements.txt.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Every locked package, not only the direct dependencies (each marked
    /// `transitive`).
    #[arg(long)]
    all: bool,
    /// Only the direct dependencies of these kinds, separated by commas: runtime, dev,
    /// optional (Cargo features, npm optionalDependencies, Python extras), build, group
    /// (every Python dependency group) or group:NAME. Default: every kind; each left
    /// out is listed with its reason.
    #[arg(long, value_name = "KINDS", value_parser = |s: &str| lockfiles::Select::parse_only(s).map(Kinds))]
    only: Option<Kinds>,
    #[command(flatten)]
    build: Build,
    /// Print the outcome as JSON instead of the editor config.
    #[arg(long)]
    json: bool,
}

/// The kinds `--only` names, checked.
#[derive(Debug, Clone)]
struct Kinds(Vec<String>);

/// How `add` and `sync` build packages.
#[derive(Debug, Clone, clap::Args)]
pub(super) struct Build {
    /// Use only what is cached (a package's artifact, cargo's own download cache); say
    /// what is missing.
    #[arg(long)]
    offline: bool,
    /// Stop once every package answers by keyword and symbols (each is built without
    /// vectors first); a later `sync` or `add` embeds them.
    #[arg(long)]
    keyword_only: bool,
    /// Packages built at once (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: Option<u16>,
    /// Versions to keep per library, beyond those a project names (default 5, or the
    /// config file's install.keep).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    keep: Option<u16>,
}

impl Build {
    pub(super) fn options(&self, cfg: &Config) -> crate::deps::Options {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        crate::deps::Options {
            keyword_only: self.keyword_only,
            offline: self.offline,
            jobs: self.jobs.map_or(cores, usize::from),
            // Package versions live side by side: an older one is added, not refused
            // as a rollback of the newer.
            install: atlas_dist::install::Options {
                beside: true,
                ..crate::manage::options(cfg, &[], self.keep.map(usize::from), None)
            },
        }
    }
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        self.sync(cfg, true)
    }

    /// The sync; the editor config printed at the end when `print_config`.
    fn sync(self, cfg: &Config, print_config: bool) -> anyhow::Result<()> {
        let project = std::path::absolute(&self.dir)?;
        if !project.is_dir() {
            anyhow::bail!(UsageError(format!("{} is not a folder; pass the project's folder", project.display())));
        }
        let select = lockfiles::Select { all: self.all, only: self.only.clone().map(|k| k.0) };
        let lockfiles::Read { mut locked, skipped, left_out, found } = lockfiles::read(&project, &select)?;
        if found.is_empty() {
            anyhow::bail!(UsageError(format!(
                "{} has no lockfile ({}); run your package manager once to write one",
                project.display(),
                lockfiles::LOCKFILES.join(", ")
            )));
        }
        // Refused before anything is built: a `.atlas` that leads out of the project.
        atlas_dist::project::set_folder(&project).map_err(atlas_dist::edge)?;
        let home = Home::from_env();
        // The set sync wrote last (to keep what fails to build served); one that cannot
        // be read is replaced, which is what its error says to do.
        let before = Set::read(&project).unwrap_or_else(|e| {
            eprintln!("atlas: {e:#}; it is replaced");
            None
        });
        let before = before.unwrap_or_default();
        let wanted_of = |l: &lockfiles::Locked| Wanted {
            spec: l.spec.clone(),
            checksums: l.checksums.clone(),
            index: l.index.clone(),
        };
        let mut wanted: Vec<Wanted> = locked.iter().map(wanted_of).collect();
        let opts = self.build.options(cfg);
        let t = std::time::Instant::now();
        let mut done = crate::deps::add(&wanted, Pass::Keyword, &opts);
        // The crates a facade re-exports, read from the facade just built, served beside it.
        let graph = lockfiles::cargo_graph(&project)?;
        let reexported = crate::deps::reexports::follow(&home, &project, graph.as_ref(), &locked);
        if !reexported.is_empty() {
            for r in &reexported {
                eprintln!("atlas: serving {}, re-exported by {}", r.locked.spec, r.by);
            }
            let more: Vec<Wanted> = reexported.iter().map(|r| wanted_of(&r.locked)).collect();
            done.extend(crate::deps::add(&more, Pass::Keyword, &opts));
            wanted.extend(more);
            locked.extend(reexported.iter().map(|r| r.locked.clone()));
        }
        let mut set = Set { only: select.only.clone(), all: select.all, ..Set::default() };
        let (mut failed, mut built) = (Vec::new(), 0);
        for ((l, d), w) in locked.iter().zip(&done).zip(&wanted) {
            let name = w.spec.bundle_name();
            match d {
                Done::Failed(why) => {
                    failed.push(format!("{}: {why}", l.spec));
                    // The version served before stays in the set: nothing is lost.
                    set.libraries.extend(before.libraries.iter().filter(|p| p.name == name).cloned());
                }
                d => {
                    built += usize::from(matches!(d, Done::Installed(_)));
                    set.libraries.push(Pinned {
                        name,
                        version: l.spec.version.clone(),
                        lockfile: Some(l.lockfile.clone()),
                        kinds: l.kinds.iter().map(lockfiles::Kind::name).collect(),
                    });
                }
            }
        }
        // What `atlas add --project` added by hand stays: no lockfile needs to name it;
        // and so does the project's own tree (`atlas init`).
        let added = atlas_dist::project::ADDED;
        for p in before.libraries.iter().filter(|p| crate::tree::is_tree(&p.kinds)) {
            set.libraries.push(p.clone());
        }
        for p in before.libraries.iter().filter(|p| p.kinds.iter().any(|k| k == added)) {
            match set.libraries.iter_mut().find(|q| q.name == p.name && q.version == p.version) {
                Some(q) if q.kinds.iter().any(|k| k == added) => {}
                Some(q) => q.kinds.push(added.into()),
                None => set.libraries.push(p.clone()),
            }
        }
        set.libraries.sort();
        set.libraries.dedup();
        // Written before the vectors pass: `serve --project` answers by keyword now.
        let file = set.write(&project, home.atlas_home()).map_err(atlas_dist::edge)?;
        let keyword_s = t.elapsed().as_secs_f64();
        let embedded = crate::deps::vectors(&wanted, &done, &opts);
        let embedded_s = t.elapsed().as_secs_f64();
        let mut unembedded = Vec::new();
        for (l, e) in locked.iter().zip(&embedded) {
            if let Some(Done::Failed(why)) = e {
                unembedded.push(format!("{}: {why}", l.spec));
            }
        }
        let waiting = locked.iter().filter(|l| crate::deps::needs_vectors(&home, &l.spec)).count();
        for s in &skipped {
            // Lockfile text (names, URLs) on one printable line, cut short.
            eprintln!(
                "atlas: skipped {}",
                atlas_runtime::utf8::clip_chars(&atlas_runtime::utf8::printable(s.line()), 300)
            );
        }
        for l in &left_out {
            eprintln!("atlas: left out {} ({}, {}): {}", l.spec, lockfiles::kinds_text(&l.kinds), l.lockfile, l.reason);
        }
        if !locked.is_empty() {
            eprintln!("atlas: by kind: {}", by_kind(&locked));
        }
        eprintln!(
            "atlas: {} of {} packages from {} serve now ({built} built, {} already installed, {} failed); the set is {}",
            locked.len() - failed.len(),
            locked.len(),
            found.join(", "),
            locked.len() - failed.len() - built,
            failed.len(),
            file.display()
        );
        if waiting > 0 {
            eprintln!(
                "atlas: {waiting} of them {} by keyword and symbols only, without vectors yet",
                atlas_runtime::words::agree(waiting, "answers", "answer")
            );
        }
        if self.json {
            let v = serde_json::json!({
                "project": project,
                "libraries": set.libraries,
                "searchable_s": keyword_s,
                "embedded_s": (waiting == 0).then_some(embedded_s),
                "without_vectors": waiting,
                "failed": failed,
                "not_embedded": unembedded,
                "skipped": skipped.iter().map(lockfiles::Skipped::line).collect::<Vec<_>>(),
                "reexported": reexported.iter().map(|r| serde_json::json!({
                    "package": r.locked.spec.to_string(),
                    "by": r.by,
                    "kinds": r.locked.kinds.iter().map(lockfiles::Kind::name).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "only": select.only,
                "left_out": left_out.iter().map(|l| serde_json::json!({
                    "package": l.spec.to_string(),
                    "kinds": l.kinds.iter().map(lockfiles::Kind::name).collect::<Vec<_>>(),
                    "lockfile": l.lockfile,
                    "reason": l.reason,
                })).collect::<Vec<_>>(),
            });
            super::print(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
        } else if print_config {
            super::print(&crate::manage::editor_config(
                &project_key(&project),
                &["--project", &project.display().to_string()],
            ))?;
        }
        if !failed.is_empty() {
            anyhow::bail!(
                "{} of {} packages did not install (each said why above); the others serve",
                failed.len(),
                locked.len()
            );
        }
        if !unembedded.is_empty() {
            anyhow::bail!(
                "{} {} not embedded (each said why above); they answer by keyword and symbols",
                atlas_runtime::words::count(unembedded.len(), "package"),
                atlas_runtime::words::agree(unembedded.len(), "was", "were")
            );
        }
        Ok(())
    }
}

/// `atlas init`'s sync of `project`: every direct dependency, by keyword only when
/// `keyword_only`, without the editor config (init writes it).
pub(super) fn for_init(project: &Path, cfg: &Config, build: &Build, keyword_only: bool) -> anyhow::Result<()> {
    let build = Build { keyword_only, ..build.clone() };
    Args { dir: project.to_owned(), all: false, only: None, build, json: false }.sync(cfg, false)
}

/// How many packages of each kind, in the kinds' order (`3 runtime, 1 dev`); a package
/// of two kinds counts in each.
fn by_kind(locked: &[lockfiles::Locked]) -> String {
    let mut counts: std::collections::BTreeMap<&lockfiles::Kind, usize> = std::collections::BTreeMap::new();
    for k in locked.iter().flat_map(|l| &l.kinds) {
        *counts.entry(k).or_default() += 1;
    }
    counts.iter().map(|(k, n)| format!("{n} {}", k.name())).collect::<Vec<_>>().join(", ")
}

/// The servers' key in an editor config: the project folder's name.
pub(super) fn project_key(project: &Path) -> String {
    let name = project.file_name().map_or_else(|| "project".into(), |n| n.to_string_lossy().into_owned());
    let plain: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')).collect();
    if plain.is_empty() { "project".into() } else { format!("{plain}-deps") }
}
