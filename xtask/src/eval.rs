//! `cargo xtask eval`: retrieval quality per mode (MRR@10, Recall@5, nDCG@10) on the
//! devtron golden set (`tests/bench/devtron-golden.json`), over a bundle of the devtron
//! corpus built with the default config.

use crate::{cargo, status};

pub fn run() -> anyhow::Result<()> {
    let bundle = crate::bench::devtron_bundle()?;
    let mut ev = cargo();
    ev.args(["run", "--release", "--locked", "-q", "-p", "atlas-e2e", "--example", "eval", "--"]);
    ev.arg(&bundle).arg(crate::bench::golden());
    status(ev)
}
