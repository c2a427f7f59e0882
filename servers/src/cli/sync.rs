//! `atlas sync`: the exact versions a project's lockfiles pin, as libraries, and the
//! project's library set that `serve --project` serves.

use std::path::{Path, PathBuf};

use atlas_dist::config::Config;
use atlas_dist::home::Home;
use atlas_dist::project::{Pinned, Set};
use atlas_runtime::exit::UsageError;

use crate::deps::{Done, Wanted, lockfiles};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The project (default: this folder): its Cargo.lock (with Cargo.toml),
    /// package-lock.json, uv.lock or requirements.txt.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Every locked package, not only the direct dependencies.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    build: Build,
    /// Print the outcome as JSON instead of the editor config.
    #[arg(long)]
    json: bool,
}

/// How `add` and `sync` build packages.
#[derive(Debug, clap::Args)]
pub(super) struct Build {
    /// Use only what is cached (a package's artifact, cargo's own download cache); say
    /// what is missing.
    #[arg(long)]
    offline: bool,
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
            offline: self.offline,
            jobs: self.jobs.map_or(cores, usize::from),
            install: crate::manage::options(cfg, &[], self.keep.map(usize::from), None),
        }
    }
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let project = std::path::absolute(&self.dir)?;
        if !project.is_dir() {
            anyhow::bail!(UsageError(format!("{} is not a folder; pass the project's folder", project.display())));
        }
        let lockfiles::Read { locked, skipped, found } = lockfiles::read(&project, self.all)?;
        if found.is_empty() {
            anyhow::bail!(UsageError(format!(
                "{} has no lockfile ({}); run your package manager once to write one",
                project.display(),
                lockfiles::LOCKFILES.join(", ")
            )));
        }
        let home = Home::from_env();
        let before = Set::read(&project)?.unwrap_or_default();
        let wanted: Vec<Wanted> =
            locked.iter().map(|l| Wanted { spec: l.spec.clone(), checksums: l.checksums.clone() }).collect();
        let done = crate::deps::add(&wanted, &self.build.options(cfg));
        let mut set = Set::default();
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
                    });
                }
            }
        }
        set.libraries.sort();
        set.libraries.dedup();
        let file = set.write(&project, home.atlas_home())?;
        for s in &skipped {
            // Lockfile text (names, URLs) on one printable line, cut short.
            eprintln!("atlas: skipped {}", atlas_runtime::utf8::clip_chars(&atlas_runtime::utf8::printable(&s.0), 300));
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
        if self.json {
            let v = serde_json::json!({
                "project": project,
                "libraries": set.libraries,
                "failed": failed,
                "skipped": skipped.iter().map(|s| &s.0).collect::<Vec<_>>(),
            });
            super::print(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
        } else {
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
        Ok(())
    }
}

/// The servers' key in an editor config: the project folder's name.
fn project_key(project: &Path) -> String {
    let name = project.file_name().map_or_else(|| "project".into(), |n| n.to_string_lossy().into_owned());
    let plain: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')).collect();
    if plain.is_empty() { "project".into() } else { format!("{plain}-deps") }
}
