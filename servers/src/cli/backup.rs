//! `atlas backup`: an installed bundle's current version as an installable archive.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    name: String,
    /// The folder to write `<name>-<version>.tar.zst` and its `.sha256` to.
    #[arg(long, default_value = ".")]
    out: PathBuf,
}

impl Args {
    pub(super) fn run(self) -> anyhow::Result<()> {
        crate::manage::backup(&self.name, &self.out)
    }
}
