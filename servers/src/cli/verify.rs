//! `atlas verify`: every file of a bundle against its manifest.

use super::locate::locate;
use anyhow::Context as _;
use atlas_dist::config::Config;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// An installed bundle's name or a bundle folder.
    #[arg(env = "ATLAS_BUNDLE")]
    bundle: Option<String>,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let (dir, _) = locate(self.bundle, cfg)?;
        let m =
            atlas_runtime::manifest::verify(&dir).with_context(|| format!("verifying the bundle {}", dir.display()))?;
        let n = m.artifacts.len();
        super::print(&format!(
            "ok: {} {}: {} {} the manifest\n",
            m.name,
            m.version,
            atlas_runtime::words::count(n, "file"),
            atlas_runtime::words::agree(n, "matches", "match")
        ))
    }
}
