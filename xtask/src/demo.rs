//! `cargo xtask demo`: the product on this project's own docs and source
//! (examples/self.yaml), shown through its own command line: build the bundle, say
//! what it holds, verify it, search it, and print the editor config that serves it.

use std::path::Path;
use std::process::Command;

use anyhow::Context as _;

use crate::{Profile, output, project_root, say, status};

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
    run.args(["--config", CONFIG, "run"]);
    status(run)?;
    shown(&["atlas-pipeline", "--config", CONFIG, "status"]);
    let mut st = Command::new(&pipeline);
    st.args(["--config", CONFIG, "status"]);
    status(st)?;
    for args in [&["info", BUNDLE][..], &["verify", BUNDLE][..]] {
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
    say(&format!(
        "\nServe it to your editor's agent: add this to claude_desktop_config.json (or Cursor's mcp.json;\n\
         README.md has the Zed and opencode forms):\n\n{}",
        serde_json::to_string_pretty(&editor_config(name, &atlas, &project_root().join(BUNDLE)))?
    ));
    eprintln!("xtask: run it again to see every stage cached");
    Ok(())
}

/// The `mcpServers` entry of both servers for `bundle`.
fn editor_config(name: &str, atlas: &Path, bundle: &Path) -> serde_json::Value {
    let entry = |which: &str, extra: &[&str]| {
        let mut args = vec!["serve".to_owned(), which.to_owned(), "--bundle".to_owned(), bundle.display().to_string()];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        serde_json::json!({ "command": atlas.display().to_string(), "args": args })
    };
    serde_json::json!({
        "mcpServers": {
            format!("{name}-fs"): entry("fs", &[]),
            format!("{name}-rag"): entry("rag", &["--warm"]),
        }
    })
}
