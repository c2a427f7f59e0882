//! Dependencies as libraries: `atlas add` builds a package version's bundle and
//! installs it; `atlas sync` does it for every version a project's lockfiles pin and
//! writes the project's library set.
//!
//! The build is `atlas-pipeline`'s, run as a child process (the `atlas` binary stays
//! on the lean runtime): a generated config with one `package` source, a cache per
//! package (so a version bump reuses every unchanged file, and packages build at once
//! without waiting on one cache's lock), then `atlas install` of the archive it wrote.
//! Nothing of a package runs: the pipeline reads its published files.

pub mod gc;
pub mod lockfiles;
pub mod reexports;

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use atlas_dist::home::Home;
use atlas_runtime::package::PackageSpec;

/// One package version to make a library of, with the checksums a lockfile gives and
/// the index it names.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub spec: PackageSpec,
    pub checksums: Vec<String>,
    /// The package's index when a lockfile names one: its source, not the one the
    /// user's settings name.
    pub index: Option<String>,
}

/// How a package came out.
#[derive(Debug)]
pub enum Done {
    /// Installed now, in this long.
    Installed(Duration),
    /// That version was installed already.
    AlreadyInstalled,
    /// It failed: one line that says why and what to do. Nothing was installed.
    Failed(String),
}

/// The two passes over a set of packages: each is searchable by keyword and symbols
/// after the first, and embedded after the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Built without vectors and installed: keyword and symbol search at once.
    Keyword,
    /// The installed keyword-first copy completed in place with its vectors (every
    /// other stage's work reused from the package's cache); servers pick it up.
    Vectors,
}

/// Whether the installed copy of a library still waits for its vectors.
pub fn needs_vectors(home: &Home, spec: &PackageSpec) -> bool {
    waits_for_vectors(home, &spec.bundle_name(), &spec.version)
}

/// [`needs_vectors`] of the library stored as `name`, at `version`.
pub fn waits_for_vectors(home: &Home, name: &str, version: &str) -> bool {
    home.resolve_version(name, version)
        .and_then(|d| atlas_runtime::manifest::read_manifest(&d).ok())
        .is_some_and(|m| m.embedding_rows == 0 && m.chunk_count > 0)
}

/// The vectors pass over the packages the keyword pass left installed: each
/// package's outcome (None: nothing to do). Skipped with one line saying what to run
/// when the model is not provisioned here, or with `--keyword-only`.
pub fn vectors(wanted: &[Wanted], keyword: &[Done], opts: &Options) -> Vec<Option<Done>> {
    let home = Home::from_env();
    let todo: Vec<usize> = (0..wanted.len())
        .filter(|&i| !matches!(keyword[i], Done::Failed(_)) && needs_vectors(&home, &wanted[i].spec))
        .collect();
    let mut out: Vec<Option<Done>> = (0..wanted.len()).map(|_| None).collect();
    if todo.is_empty() {
        return out;
    }
    if opts.keyword_only {
        eprintln!(
            "atlas: {} {} by keyword and symbols; run the same command without --keyword-only to embed them",
            atlas_runtime::words::count(todo.len(), "library"),
            atlas_runtime::words::agree(todo.len(), "answers", "answer")
        );
        return out;
    }
    if !atlas_runtime::model::default_provisioned() {
        eprintln!(
            "atlas: {} {} by keyword and symbols; run `atlas setup` (ONNX Runtime and the model), then this command again, to embed them",
            atlas_runtime::words::count(todo.len(), "library"),
            atlas_runtime::words::agree(todo.len(), "answers", "answer")
        );
        return out;
    }
    eprintln!(
        "atlas: {} {} by keyword and symbols now; embedding {} (servers pick them up as each finishes)",
        atlas_runtime::words::count(todo.len(), "library"),
        atlas_runtime::words::agree(todo.len(), "answers", "answer"),
        atlas_runtime::words::agree(todo.len(), "it", "them")
    );
    let some: Vec<Wanted> = todo.iter().map(|&i| wanted[i].clone()).collect();
    for (i, d) in todo.into_iter().zip(add(&some, Pass::Vectors, opts)) {
        out[i] = Some(d);
    }
    out
}

/// How packages are built.
#[derive(Debug, Clone)]
pub struct Options {
    /// Stop after the keyword pass.
    pub keyword_only: bool,
    pub offline: bool,
    /// Packages built at once.
    pub jobs: usize,
    pub install: atlas_dist::install::Options,
}

/// One pass over `wanted`, `jobs` at once, with a progress line per package on a
/// terminal; the outcome of each, in order. [`Pass::Keyword`] builds and installs
/// those not installed yet; [`Pass::Vectors`] embeds those installed without vectors.
pub fn add(wanted: &[Wanted], pass: Pass, opts: &Options) -> Vec<Done> {
    let home = Home::from_env();
    let shown = atlas_runtime::progress::shown();
    let bars = indicatif::MultiProgress::with_draw_target(match shown {
        true => indicatif::ProgressDrawTarget::stderr(),
        false => indicatif::ProgressDrawTarget::hidden(),
    });
    let next = Mutex::new(0usize);
    let done: Mutex<Vec<Option<Done>>> = Mutex::new((0..wanted.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.clamp(1, wanted.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(w) = wanted.get(i) else { break };
                    let bar = bars.add(indicatif::ProgressBar::new_spinner().with_prefix(w.spec.to_string()));
                    bar.set_style(
                        indicatif::ProgressStyle::with_template("{spinner} {prefix}: {wide_msg}")
                            .expect("a fixed template"),
                    );
                    bar.enable_steady_tick(Duration::from_millis(200));
                    let outcome = one(&home, w, pass, opts, &bar);
                    let line = match (&outcome, pass) {
                        (Done::Installed(t), Pass::Keyword) => format!(
                            "searchable by keyword and symbols in {:.1}s{}",
                            t.as_secs_f64(),
                            docs_left_out(&home, &w.spec)
                        ),
                        (Done::Installed(t), Pass::Vectors) => format!("embedded in {:.1}s", t.as_secs_f64()),
                        (Done::AlreadyInstalled, Pass::Keyword) => "already installed".to_owned(),
                        (Done::AlreadyInstalled, Pass::Vectors) => "already embedded".to_owned(),
                        (Done::Failed(why), _) => format!("failed: {why}"),
                    };
                    bar.finish_and_clear();
                    let line = format!("atlas: {}: {line}", w.spec);
                    match shown {
                        true => drop(bars.println(line)),
                        false => eprintln!("{line}"),
                    }
                    done.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(outcome);
                }
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .map(|d| d.unwrap_or_else(|| Done::Failed("not built".into())))
        .collect()
}

/// `; most of its docs were left out: …` when the installed copy's sources say so
/// (`atlas info` names each file), else nothing.
fn docs_left_out(home: &Home, spec: &PackageSpec) -> String {
    let Some(m) = home
        .resolve_version(&spec.bundle_name(), &spec.version)
        .and_then(|d| atlas_runtime::manifest::read_manifest(&d).ok())
    else {
        return String::new();
    };
    let lines: Vec<String> =
        m.sources.iter().filter_map(atlas_runtime::manifest::SourceInfo::docs_mostly_left_out).collect();
    match lines.is_empty() {
        true => String::new(),
        false => format!("; most of its docs were left out: {} (`atlas info {spec}`)", lines.join("; ")),
    }
}

fn one(home: &Home, w: &Wanted, pass: Pass, opts: &Options, bar: &indicatif::ProgressBar) -> Done {
    let (name, version) = (w.spec.bundle_name(), w.spec.version.clone());
    let installed = home.record(&name, &version).is_some() && home.resolve_version(&name, &version).is_some();
    let done = match pass {
        Pass::Keyword => installed,
        Pass::Vectors => !installed || !needs_vectors(home, &w.spec),
    };
    if done {
        return Done::AlreadyInstalled;
    }
    let t = Instant::now();
    match build(home, w, pass, opts, bar).and_then(|archive| install(home, &archive, opts)) {
        Ok(()) => Done::Installed(t.elapsed()),
        Err(e) => Done::Failed(atlas_runtime::utf8::printable(&format!("{e:#}"))),
    }
}

/// Where a package's builds live: `ATLAS_HOME/packages/<bundle name>/`, its cache
/// shared by every version of it.
pub fn package_dir(home: &Home, spec: &PackageSpec) -> PathBuf {
    home.atlas_home().join("packages").join(spec.bundle_name())
}

/// The pipeline config of one package version, for one pass.
/// The registry settings (cargo's, npm's, pip's and uv's) are those of `settings`, the
/// folder the user ran `atlas` in.
pub fn pipeline_yaml(w: &Wanted, pass: Pass, settings: &Path) -> String {
    let s = &w.spec;
    let q = |v: &str| serde_json::to_string(v).expect("a string");
    let mut y = format!(
        "# Written by `atlas add`/`atlas sync`: the package {s}, as published.\nname: {}\nsources:\n  {}:\n    kind: package\n    spec: {}\n    settings_dir: {}\n",
        q(&s.bundle_name()),
        q(&s.source_name()),
        q(&s.to_string()),
        q(&settings.display().to_string()),
    );
    if let Some(index) = &w.index {
        y.push_str(&format!("    index: {}\n", q(index)));
    }
    if !w.checksums.is_empty() {
        y.push_str("    checksums:\n");
        for c in &w.checksums {
            y.push_str(&format!("      - {}\n", q(c)));
        }
    }
    y.push_str("stages:\n");
    if pass == Pass::Keyword {
        y.push_str("  embed:\n    enabled: false\n");
    }
    y.push_str(&format!(
        "  pack:\n    version: {}\n    description: {}\n    description_from_package: true\n",
        q(&s.version),
        q(&format!("{} {} {}, from its published package", s.ecosystem.as_str(), s.name, s.version))
    ));
    y
}

/// The `atlas-pipeline` binary: `ATLAS_PIPELINE`, else beside this one, else on PATH.
pub(crate) fn pipeline_bin() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("ATLAS_PIPELINE").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let name = format!("atlas-pipeline{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe().ok().and_then(|e| Some(e.parent()?.join(&name))).filter(|p| p.is_file());
    let on_path = || {
        std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(&name)).find(|p| p.is_file()))
    };
    beside.or_else(on_path).with_context(|| {
        "atlas builds packages with atlas-pipeline, which ships beside atlas and is not here; install the atlas \
         package again (it has both), or set ATLAS_PIPELINE"
            .to_owned()
    })
}

/// Runs the pipeline for `w`; the archive it wrote.
fn build(home: &Home, w: &Wanted, pass: Pass, opts: &Options, bar: &indicatif::ProgressBar) -> anyhow::Result<PathBuf> {
    let dir = package_dir(home, &w.spec);
    let work = dir.join("builds").join(&w.spec.version);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let config = work.join("pipeline.yaml");
    let here = std::env::current_dir().context("the current folder")?;
    std::fs::write(&config, pipeline_yaml(w, pass, &here)).with_context(|| format!("writing {}", config.display()))?;
    let out = work.join("out");
    let mut cmd = Command::new(pipeline_bin()?);
    cmd.arg("--config")
        .arg(&config)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("--lock-wait")
        .arg("600")
        .args(["run", "--archive", "--out"])
        .arg(&out)
        .env("ATLAS_HOME", atlas_runtime::model::atlas_home())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if opts.offline {
        cmd.arg("--offline");
    }
    let mut child = cmd.spawn().context("starting atlas-pipeline")?;
    let mut last = String::new();
    if let Some(err) = child.stderr.take() {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let line = atlas_runtime::utf8::printable(line.trim());
            if !line.is_empty() {
                bar.set_message(atlas_runtime::utf8::clip_chars(&line, 120));
                if tells_why(&line) {
                    last = line;
                }
            }
        }
    }
    let status = child.wait().context("waiting for atlas-pipeline")?;
    if !status.success() {
        bail!("{}", failure(&last, signal(&status)));
    }
    let archive = out.join(format!("{}-{}.tar.zst", w.spec.bundle_name(), w.spec.version));
    if !archive.is_file() {
        bail!("the build wrote no {}", archive.display());
    }
    Ok(archive)
}

/// Whether a line of the pipeline's stderr may say why it failed: not Rust's hint
/// about backtraces, which follows a panic and would hide it.
pub(crate) fn tells_why(line: &str) -> bool {
    !(line.starts_with("note: run with `RUST_BACKTRACE") || line.starts_with("note: Some details are omitted"))
}

/// The signal that ended a child, if one did.
pub(crate) fn signal(status: &std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        std::os::unix::process::ExitStatusExt::signal(status)
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// The one line a failed build is reported with: the pipeline's own error, or its
/// panic or allocation failure, and the signal that ended it.
pub(crate) fn failure(last: &str, signal: Option<i32>) -> String {
    let why = last.trim_start_matches("atlas-pipeline: ").trim_start_matches("error: ");
    let ended = match signal {
        Some(9) => Some("atlas-pipeline was killed (signal 9: out of memory, or stopped by hand)".to_owned()),
        Some(6) => Some("atlas-pipeline aborted (signal 6)".to_owned()),
        Some(n) => Some(format!("atlas-pipeline was ended by signal {n}")),
        None => None,
    };
    match (ended, why.is_empty()) {
        (Some(e), true) => e,
        (Some(e), false) => format!("{e}: {why}"),
        (None, true) => "the build failed".to_owned(),
        (None, false) => why.to_owned(),
    }
}

fn install(home: &Home, archive: &Path, opts: &Options) -> anyhow::Result<()> {
    let source = atlas_dist::target::Source::parse(&archive.display().to_string()).map_err(atlas_dist::edge)?;
    let rt = atlas_dist::runtime().map_err(atlas_dist::edge)?;
    rt.block_on(atlas_dist::install::install(home, &source, &opts.install)).map_err(atlas_dist::edge)?;
    // The archive was a means: the installed bundle and the package's cache stay.
    if let Some(out) = archive.parent() {
        let _ = std::fs::remove_dir_all(out);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_that_crashes_is_reported_by_its_panic_and_signal_not_the_backtrace_hint() {
        let lines = [
            "thread 'main' panicked at stages/src/clean/gitbook/mod.rs:1:1:",
            "memory allocation of 2600000000 bytes failed",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        ];
        let last = lines.iter().rev().find(|l| tells_why(l)).unwrap();
        let line = failure(last, Some(6));
        assert_eq!(line, "atlas-pipeline aborted (signal 6): memory allocation of 2600000000 bytes failed");
        assert!(failure("", Some(9)).contains("out of memory"));
        assert_eq!(failure("atlas-pipeline: error: no crate", None), "no crate");
        assert_eq!(failure("", None), "the build failed");
    }

    #[test]
    fn a_packages_pipeline_config_names_it_pins_it_and_quotes_everything() {
        let w = Wanted {
            spec: "npm:@corp/strings@2.1.0".parse().unwrap(),
            checksums: vec!["sha512-x\"y".into()],
            index: None,
        };
        let y = pipeline_yaml(&w, Pass::Keyword, Path::new("/p"));
        assert!(y.contains("  embed:\n    enabled: false\n"), "{y}");
        assert!(!pipeline_yaml(&w, Pass::Vectors, Path::new("/p")).contains("embed:"));
        assert!(y.contains("name: \"npm+corp+strings\"") && y.contains("\"corp-strings\":"), "{y}");
        assert!(y.contains("spec: \"npm:@corp/strings@2.1.0\"") && y.contains("version: \"2.1.0\""), "{y}");
        // The package's own summary describes it; the generic line is the fallback.
        assert!(y.contains("    description_from_package: true\n"), "{y}");
        assert!(y.contains("- \"sha512-x\\\"y\"") && y.contains("settings_dir: \"/p\""), "{y}");
        assert!(!y.contains("index:"), "{y}");
        let w = Wanted {
            spec: "pypi:corp-units@0.3.1".parse().unwrap(),
            checksums: Vec::new(),
            index: Some("https://pypi.corp.test/simple".into()),
        };
        let y = pipeline_yaml(&w, Pass::Keyword, Path::new("/p"));
        assert!(y.contains("    index: \"https://pypi.corp.test/simple\"\n"), "{y}");
    }
}
