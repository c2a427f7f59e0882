//! `atlas bundles`: the installed bundles.

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[arg(long)]
    json: bool,
    /// Only the versions that no project's library set names (`atlas sync` writes the
    /// sets): what can go.
    #[arg(long)]
    unused: bool,
}

impl Args {
    pub(super) fn run(self) -> anyhow::Result<()> {
        crate::manage::bundles(self.json, self.unused)
    }
}
