//! `atlas update`: the newest published version of installed bundles.

use atlas_dist::config::Config;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    name: Option<String>,
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    keep: Option<u16>,
    /// Install what the source holds even when it is older than the current version
    /// (a rollback is refused otherwise; `atlas restore` goes back to a kept version).
    #[arg(long)]
    allow_downgrade: bool,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        crate::manage::update(self.name.as_deref(), cfg, self.keep.map(usize::from), self.allow_downgrade)
    }
}
