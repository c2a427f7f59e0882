//! `atlas restore`: switch an installed bundle back to a kept version.

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    name: String,
    version: Option<String>,
}

impl Args {
    pub(super) fn run(self) -> anyhow::Result<()> {
        crate::manage::restore(&self.name, self.version.as_deref())
    }
}
