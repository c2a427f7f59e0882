//! `cargo xtask test`: build every binary and run every test (what CI runs), then
//! check the dependency invariants. `--fast` skips the slow tests: by convention their
//! names start with `slow_` (the 50k-vector HNSW build, whole-corpus passes, real
//! sleeps, the npx Inspector).

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::{cargo, say};

#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Skip the tests whose names start with `slow_`.
    #[arg(long)]
    pub fast: bool,
    /// Install nothing: what the tests need and is missing is named, with the command
    /// that installs it, and its tests are skipped (by default, `cargo xtask provision`
    /// runs first).
    #[arg(long)]
    pub no_provision: bool,
    /// Passed on to `cargo test` (after `--`: to the test binaries).
    #[arg(last = true)]
    pub cargo_args: Vec<String>,
}

/// The prefix that marks a slow test.
pub const SLOW: &str = "slow_";

pub fn run(args: &Args) -> anyhow::Result<()> {
    // What the tests need beyond cargo: installed here unless --no-provision; what is
    // still missing is named with its command, and its tests skip.
    if args.no_provision {
        crate::provision::report();
    } else {
        crate::provision::run()?;
    }
    // What is here is required: its tests fail rather than skip.
    let requires = crate::provision::requires();
    // The shared corpora beside the checkout, as CI has them.
    let corpora = crate::project_root().join("../shared/corpora");
    let corpora = std::env::var_os("ATLAS_CORPORA").or_else(|| corpora.is_dir().then(|| corpora.into_os_string()));
    match &corpora {
        Some(p) => eprintln!("xtask: ATLAS_CORPORA={} (real-corpus tests run)", Path::new(&p).display()),
        None => eprintln!("xtask: ATLAS_CORPORA is unset: the real-corpus tests will be skipped"),
    }
    // The end-to-end tests run the real binaries; `cargo test` builds only those of
    // packages with integration tests, so build every binary first, with the tests in
    // the same invocation (one feature set: nothing is compiled twice).
    crate::Profile::Debug.build_with(true)?;
    // ONNX Runtime and the model (`atlas setup`, with the binary just built: nothing
    // when they are in place).
    let models = match crate::setup::provision_unless(crate::Profile::Debug, args.no_provision) {
        Ok(()) => true,
        Err(e) => {
            eprintln!(
                "xtask: could not provision ONNX Runtime and the model ({e:#}); install them with `cargo xtask setup`; \
                 the tests that need them will be skipped"
            );
            false
        }
    };
    let packaged = if args.fast || !models { None } else { package_for_tests()? };
    let mut cmd = cargo();
    if models {
        cmd.env("ATLAS_REQUIRE_MODELS", "1");
    }
    if let Some(dir) = &packaged {
        cmd.env("ATLAS_PACKAGE_DIR", dir).env("ATLAS_REQUIRE_PACKAGE", "1");
    }
    if let Some(c) = &corpora {
        cmd.env("ATLAS_CORPORA", c);
    }
    for r in requires {
        cmd.env(r, "1");
    }
    // The same features as the binaries' build, so nothing is compiled twice.
    cmd.args(["test", "--locked", "--features", crate::TEST_FEATURES]);
    if !args.cargo_args.iter().any(|a| a == "-p" || a.starts_with("--package")) {
        cmd.arg("--workspace");
    }
    cmd.args(&args.cargo_args);
    if args.fast {
        if !args.cargo_args.iter().any(|a| a == "--") {
            cmd.arg("--");
        }
        cmd.args(["--skip", SLOW]);
    }
    // Tests that cannot run here (no corpora, no browser…) say so through
    // `atlas_e2e::skip`, into this file; the summary counts them as skipped.
    let skip_log = crate::project_root().join("target").join("xtask-skipped.tsv");
    let _ = std::fs::remove_file(&skip_log);
    cmd.env("ATLAS_SKIP_LOG", &skip_log);
    let totals = run_tests(cmd);
    let skips = Skips::read(&skip_log);
    let Totals { passed, failed, ignored, filtered } = totals?;
    check_invariants()?;
    // The closing lines CI reads: what was skipped and why, then the totals over every
    // test binary (a skipped test is not counted as passed).
    eprintln!();
    for (test, reason) in &skips.tests {
        say(&format!("xtask: skipped {test}: {reason}"));
    }
    for (test, reason) in &skips.checks {
        say(&format!("xtask: a check of {test} skipped: {reason}"));
    }
    let skipped = skips.tests.len() as u64;
    let fast = if args.fast { format!(" ({filtered} slow tests left out by --fast)") } else { String::new() };
    let ignored = if ignored > 0 { format!(", {ignored} ignored") } else { String::new() };
    let checks = match skips.checks.len() {
        0 => String::new(),
        n => format!(" ({n} checks within passing tests skipped)"),
    };
    say(&format!(
        "xtask: {} passed, {failed} failed, {skipped} skipped{ignored}{checks}{fast}",
        passed.saturating_sub(skipped)
    ));
    Ok(())
}

/// The packages of the build under test (`cargo xtask package --bins target/debug
/// --fast`), for the tests that install them; None, said, when they cannot be made
/// here (the model not provisioned), unless ATLAS_REQUIRE_PACKAGE.
fn package_for_tests() -> anyhow::Result<Option<std::path::PathBuf>> {
    let root = crate::project_root();
    let out = root.join("target").join("package-test");
    let _ = std::fs::remove_dir_all(&out);
    let args = crate::package::Args {
        bins: Some(root.join("target").join("debug")),
        out: Some(out.clone()),
        fast: true,
        ..crate::package::Args::default()
    };
    match crate::package::run(&args) {
        Ok(()) => Ok(Some(out)),
        Err(e) if std::env::var_os("ATLAS_REQUIRE_PACKAGE").is_none() => {
            eprintln!("xtask: could not package the build ({e:#}); the package tests will be skipped");
            Ok(None)
        }
        Err(e) => Err(e.context("packaging the build for the tests")),
    }
}

/// What the tests reported skipped (`atlas_e2e::skip`): whole tests and single checks,
/// each once, with the reason.
#[derive(Debug, Default)]
struct Skips {
    tests: std::collections::BTreeMap<String, String>,
    checks: std::collections::BTreeMap<String, String>,
}

impl Skips {
    fn read(path: &Path) -> Skips {
        let mut s = Skips::default();
        for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
            let mut f = line.splitn(3, '\t');
            let (Some(kind), Some(test), Some(reason)) = (f.next(), f.next(), f.next()) else { continue };
            let into = if kind == "check" { &mut s.checks } else { &mut s.tests };
            into.entry(test.to_owned()).or_insert_with(|| reason.to_owned());
        }
        s
    }
}

/// The sums of the `test result:` lines of every test binary.
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
    filtered: u64,
}

/// Runs `cargo test`, echoing its output, and sums the `test result:` lines.
fn run_tests(mut cmd: Command) -> anyhow::Result<Totals> {
    use std::io::{BufRead as _, BufReader};
    eprintln!("xtask: running {cmd:?}");
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().with_context(|| format!("starting {cmd:?}"))?;
    let mut t = Totals { passed: 0, failed: 0, ignored: 0, filtered: 0 };
    let stdout = child.stdout.take().context("piped stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo test output")?;
        say(&line);
        if let Some(rest) = line.strip_prefix("test result: ") {
            let count = |word: &str| -> u64 {
                rest.split(';')
                    .find_map(|part| {
                        part.trim().strip_suffix(word).and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())
                    })
                    .unwrap_or(0)
            };
            t.passed += count(" passed");
            t.failed += count(" failed");
            t.ignored += count(" ignored");
            t.filtered += count(" filtered out");
        }
    }
    let st = child.wait().context("waiting for cargo test")?;
    if !st.success() {
        bail!("{cmd:?} failed with {st} ({} passed, {} failed)", t.passed, t.failed);
    }
    Ok(t)
}

/// Architecture invariants on the dependency graph, checked with `cargo tree`.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("atlas-runtime", &["atlas-stages", "atlas-cache", "atlas-dist", "reqwest", "rmcp", "scraper", "clap"]),
    ("atlas-dist", &["atlas-stages", "rmcp", "clap"]),
    ("atlas-cache", &["atlas-stages", "atlas-runtime", "reqwest", "rmcp"]),
    ("atlas-grammar", &["atlas-stages", "atlas-runtime", "atlas-dist", "atlas-cache"]),
    ("atlas-stages", &["rmcp"]),
    ("xtask", &["atlas-runtime", "atlas-dist", "atlas-stages", "atlas-cache", "tantivy", "ort", "parquet"]),
];

fn check_invariants() -> anyhow::Result<()> {
    for (krate, banned) in FORBIDDEN {
        let mut tree = cargo();
        tree.args(["tree", "--locked", "-p", krate, "-e", "normal,build", "--prefix", "none", "--format", "{p}"]);
        let tree = crate::output(tree)?;
        for dep in tree.lines().filter_map(|l| l.split_whitespace().next()) {
            if banned.contains(&dep) {
                bail!("architecture invariant broken: {krate} depends on {dep} (see ARCHITECTURE.md)");
            }
        }
    }
    eprintln!("xtask: dependency invariants hold");
    Ok(())
}
