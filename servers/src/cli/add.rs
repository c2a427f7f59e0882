//! `atlas add`: package versions as libraries, built from their published artifacts
//! and installed.

use anyhow::Context as _;
use atlas_dist::config::Config;
use atlas_runtime::exit::UsageError;
use atlas_runtime::package::PackageSpec;

use crate::deps::{Done, Pass, Wanted};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// crate:NAME@VERSION, npm:NAME@VERSION (npm:@scope/name@…) or pypi:NAME@VERSION.
    #[arg(required = true, value_name = "SPEC")]
    specs: Vec<String>,
    /// Add them to this project's library set too, beside what its lockfiles pin
    /// (marked `added`; `atlas sync` keeps them): a running `serve --project DIR`
    /// follows.
    #[arg(long, value_name = "DIR")]
    project: Option<std::path::PathBuf>,
    #[command(flatten)]
    build: super::sync::Build,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let wanted = self
            .specs
            .iter()
            .map(|s| s.parse::<PackageSpec>().map(|spec| Wanted { spec, checksums: Vec::new(), index: None }))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| UsageError(e.to_string()))?;
        let project = match &self.project {
            Some(dir) => {
                let project = std::path::absolute(dir)?;
                if !project.is_dir() {
                    anyhow::bail!(UsageError(format!(
                        "{} is not a folder; pass the project's folder",
                        project.display()
                    )));
                }
                // Refused before anything is built: a `.atlas` that leads out of the project.
                atlas_dist::project::set_folder(&project).map_err(atlas_dist::edge)?;
                Some(project)
            }
            None => None,
        };
        let opts = self.build.options(cfg);
        let done = crate::deps::add(&wanted, Pass::Keyword, &opts);
        let home = atlas_dist::home::Home::from_env();
        if let Some(project) = &project {
            add_to_set(&home, project, wanted.iter().zip(&done).filter(|(_, d)| !matches!(d, Done::Failed(_))))?;
        }
        let embedded = crate::deps::vectors(&wanted, &done, &opts);
        let failed = done.iter().filter(|d| matches!(d, Done::Failed(_))).count();
        let unembedded = embedded.iter().filter(|d| matches!(d, Some(Done::Failed(_)))).count();
        let ok: Vec<&Wanted> =
            wanted.iter().zip(&done).filter(|(_, d)| !matches!(d, Done::Failed(_))).map(|(w, _)| w).collect();
        if let Some(project) = &project {
            super::print(&crate::manage::editor_config(
                &super::sync::project_key(project),
                &["--project", &project.display().to_string()],
            ))?;
        }
        for w in ok.iter().filter(|_| project.is_none()) {
            let name = w.spec.bundle_name();
            // The name serves its current version, the newest; an older one added
            // beside it is served by its version.
            let bundle = match home.current(&name).as_deref() == Some(w.spec.version.as_str()) {
                true => w.spec.shown_name(),
                false => w.spec.to_string(),
            };
            super::print(&crate::manage::editor_config(&name, &["--bundle", &bundle]))?;
        }
        if failed > 0 {
            anyhow::bail!(
                "{failed} of {} packages failed (each said why above); nothing of those was installed",
                done.len()
            );
        }
        if unembedded > 0 {
            anyhow::bail!(
                "{} {} not embedded (each said why above); they answer by keyword and symbols",
                atlas_runtime::words::count(unembedded, "package"),
                atlas_runtime::words::agree(unembedded, "was", "were")
            );
        }
        Ok(())
    }
}

/// Puts the packages built into `project`'s library set, marked
/// [`atlas_dist::project::ADDED`], written before the vectors pass so that a running
/// `serve --project` answers by keyword at once.
fn add_to_set<'a>(
    home: &atlas_dist::home::Home,
    project: &std::path::Path,
    built: impl Iterator<Item = (&'a Wanted, &'a Done)>,
) -> anyhow::Result<()> {
    use atlas_dist::project::{ADDED, Pinned, Set};
    let mut set = Set::read(project)
        .map_err(atlas_dist::edge)
        .with_context(|| format!("run `atlas sync {}` to write it again, then add", project.display()))?
        .unwrap_or_default();
    let mut added = Vec::new();
    for (w, _) in built {
        let (name, version) = (w.spec.bundle_name(), w.spec.version.clone());
        match set.libraries.iter_mut().find(|p| p.name == name && p.version == version) {
            Some(p) if p.kinds.iter().any(|k| k == ADDED) => {}
            Some(p) => p.kinds.push(ADDED.into()),
            None => set.libraries.push(Pinned { name, version, lockfile: None, kinds: vec![ADDED.into()] }),
        }
        added.push(w.spec.to_string());
    }
    set.libraries.sort();
    let file = set.write(project, home.atlas_home()).map_err(atlas_dist::edge)?;
    for a in added {
        eprintln!("atlas: {a} is in the set of {} ({})", project.display(), file.display());
    }
    Ok(())
}
