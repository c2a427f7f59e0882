//! `cargo xtask ci`: what a change must pass: formatting, clippy with warnings as
//! errors, then every test.

use crate::{cargo, status};

pub fn run() -> anyhow::Result<()> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    status(fmt)?;
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"]);
    status(clippy)?;
    crate::test::run(&crate::test::Args::default())
}
