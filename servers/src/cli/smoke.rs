//! `atlas smoke`: both servers over stdio, one call each, timed; over a bundle, or over
//! a project's library set (`--project DIR`).

use super::locate::locate;
use atlas_dist::config::Config;
use atlas_runtime::exit::UsageError;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// An installed bundle's name or a bundle folder (default: ATLAS_BUNDLE or the config's).
    #[arg(env = "ATLAS_BUNDLE")]
    name: Option<String>,
    /// A project's library set, the versions `atlas sync DIR` pinned: the servers are
    /// started with `--project DIR`, and every library of the set must be served.
    #[arg(long, value_name = "DIR", conflicts_with = "name")]
    project: Option<PathBuf>,
    /// What the rag call searches for (default: the bundle's name, or the set's first
    /// library's).
    #[arg(long)]
    query: Option<String>,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        if let Some(dir) = &self.project {
            let project = std::path::absolute(dir)?;
            let set = atlas_dist::project::Set::read(&project).map_err(atlas_dist::edge)?.ok_or_else(|| {
                UsageError(format!(
                    "{} has no library set; run `atlas sync {}` first",
                    project.display(),
                    dir.display()
                ))
            })?;
            let Some(first) = set.libraries.first() else {
                anyhow::bail!(UsageError(format!(
                    "the library set of {} is empty; run `atlas sync {}`",
                    project.display(),
                    dir.display()
                )));
            };
            let query = self.query.unwrap_or_else(|| {
                atlas_runtime::package::bare_name(&first.name).unwrap_or_else(|| first.name.clone())
            });
            let serve = ["--project".to_owned(), project.display().to_string()];
            let report = crate::smoke::run(&serve, &query, Some(set.libraries.len()))?;
            return super::print(&report);
        }
        let (dir, _) = locate(self.name, cfg)?;
        let m = atlas_runtime::manifest::read_manifest(&dir)?;
        let serve = ["--bundle".to_owned(), dir.display().to_string()];
        let report = crate::smoke::run(&serve, self.query.as_deref().unwrap_or(&m.name), None)?;
        super::print(&report)
    }
}
