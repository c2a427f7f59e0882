//! `cargo xtask demo`: the product on this project's own docs and source
//! (examples/self.yaml), shown through its own command line: build the bundle and its
//! archive, say what it holds, verify it, rerun the eval it ships, search it, install
//! the archive as a user would (`atlas install`), smoke-test both servers, run `atlas
//! doctor`, and print the editor config that serves the installed bundle by name.

use std::process::Command;

use anyhow::Context as _;

use crate::{Profile, output, say, status};

const CONFIG: &str = "examples/self.yaml";
const BUNDLE: &str = "examples/.atlas/build/bundle";

pub fn run() -> anyhow::Result<()> {
    let release = Profile::Release;
    // One cargo invocation builds both binaries over one dependency build.
    release.build()?;
    crate::setup::run(release)?;
    let (pipeline, atlas) = (release.bin("atlas-pipeline"), release.bin("atlas"));
    let shown = |args: &[&str]| {
        say(&format!("\n$ {}", args.join(" ")));
    };
    let mut run = Command::new(&pipeline);
    run.args(["--config", CONFIG, "run", "--archive"]);
    status(run)?;
    shown(&["atlas-pipeline", "--config", CONFIG, "status"]);
    let mut st = Command::new(&pipeline);
    st.args(["--config", CONFIG, "status"]);
    status(st)?;
    // `eval` reruns the golden set the bundle ships (examples/self-golden.jsonl) and
    // checks it against the figures stored at pack time.
    for args in [&["info", BUNDLE][..], &["verify", BUNDLE][..], &["eval", "--bundle", BUNDLE][..]] {
        shown(&[&["atlas"][..], args].concat());
        let mut cmd = Command::new(&atlas);
        cmd.args(args);
        status(cmd)?;
    }
    for (query, args) in [
        ("how does the cache stay consistent after a crash", &["--kind", "docs", "-k", "3"][..]),
        ("KeyBuilder", &["--kind", "code", "-k", "3"][..]),
    ] {
        say(&format!("\n$ atlas search {query:?} --bundle {BUNDLE} {}", args.join(" ")));
        let mut search = Command::new(&atlas);
        search.arg("search").arg(query).args(["--bundle", BUNDLE]).args(args);
        status(search)?;
    }
    let mut info = Command::new(&atlas);
    info.args(["info", "--json", BUNDLE]);
    let info: serde_json::Value = serde_json::from_str(&output(info)?).context("reading `atlas info --json`")?;
    let name = info["name"].as_str().context("the bundle has a name")?;
    let version = info["version"].as_str().context("the bundle has a version")?;
    // As a user who downloaded the archive: install it, smoke-test it, check the setup.
    let archive = format!("examples/.atlas/build/{name}-{version}.tar.zst");
    let mut install = Command::new(&atlas);
    install.args(["install", &archive, "--json"]);
    output(install)?;
    for args in [&["smoke", name][..], &["doctor"][..], &["bundles"][..]] {
        shown(&[&["atlas"][..], args].concat());
        let mut cmd = Command::new(&atlas);
        cmd.args(args);
        status(cmd)?;
    }
    // Last, so the editor config ends the demo: `atlas install` prints it.
    say(&format!(
        "\n$ atlas install {archive}\n(claude_desktop_config.json, Cursor's mcp.json; README.md has the Zed and opencode forms)"
    ));
    let mut install = Command::new(&atlas);
    install.args(["install", &archive]);
    status(install)?;
    eprintln!("xtask: run it again to see every stage cached");
    Ok(())
}
