//! `atlas smoke`: both servers over stdio, one call each, timed.

use super::locate::locate;
use atlas_dist::config::Config;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// An installed bundle's name or a bundle folder (default: ATLAS_BUNDLE or the config's).
    #[arg(env = "ATLAS_BUNDLE")]
    name: Option<String>,
    /// What the rag call searches for (default: the bundle's name).
    #[arg(long)]
    query: Option<String>,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let (dir, _) = locate(self.name, cfg)?;
        let m = atlas_runtime::manifest::read_manifest(&dir)?;
        let bundle = dir.display().to_string();
        let report = crate::smoke::run(&bundle, self.query.as_deref().unwrap_or(&m.name))?;
        super::print(&report)
    }
}
