//! `atlas bundles`: the installed bundles.

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[arg(long)]
    json: bool,
}

impl Args {
    pub(super) fn run(self) -> anyhow::Result<()> {
        crate::manage::bundles(self.json)
    }
}
