//! `cargo xtask bench sync`: `atlas sync` on this repository's own Cargo.lock (the
//! workspace's direct dependencies), offline, the crates taken from the local cargo
//! cache, into an empty ATLAS_HOME (release binaries); then a git version train and a
//! one-dependency bump (`BENCH_SYNC_COLD=0`: only those two).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, bail};

use crate::{Profile, project_root, say};

pub fn run() -> anyhow::Result<()> {
    let release = Profile::Release;
    crate::setup::run(release)?;
    let work = project_root().join("target/bench-sync");
    let _ = std::fs::remove_dir_all(&work);
    let home = fresh_home(&work.join("home"))?;

    if std::env::var("BENCH_SYNC_COLD").is_ok_and(|v| v == "0") {
        say("bench sync: the cold sync skipped (BENCH_SYNC_COLD=0)");
        train(release, &work)?;
        return bump(release, &work, &home);
    }
    say("bench sync: cold `atlas sync --offline` of this workspace's Cargo.lock (direct dependencies)");
    let (wall, v) = sync(release, &home, &project_root())?;
    let libs = v["libraries"].as_array().map_or(0, Vec::len);
    let failed = v["failed"].as_array().cloned().unwrap_or_default();
    let (chunks, vectors, tokens) = counts(&home);
    let searchable = v["searchable_s"].as_f64().unwrap_or(f64::NAN);
    let embedded = v["embedded_s"].as_f64().map_or_else(|| "not all".to_owned(), |s| format!("{s:.1}s"));
    say(&format!(
        "  {libs} libraries searchable by keyword and symbols in {searchable:.1}s, embedded in {embedded} \
         ({wall:.1}s in all); {} failed; {chunks} chunks, {vectors} vectors (windows of ≤256 tokens), {tokens} \
         tokens embedded; disk: bundles {} MiB, package caches {} MiB",
        failed.len(),
        size(&home.join("bundles")) >> 20,
        size(&home.join("packages")) >> 20,
    ));
    for f in &failed {
        say(&format!("  failed: {}", f.as_str().unwrap_or_default()));
    }

    train(release, &work)?;
    bump(release, &work, &home)
}

/// A bump: a crate the local cargo cache holds at two versions, locked at the older
/// then the newer.
fn bump(release: Profile, work: &Path, home: &Path) -> anyhow::Result<()> {
    let Some((name, old, new)) = two_versions() else {
        say("  bump: skipped (no crate at two versions in the local cargo cache)");
        return Ok(());
    };
    let project = work.join("bump");
    std::fs::create_dir_all(&project)?;
    std::fs::write(
        project.join("Cargo.toml"),
        format!("[package]\nname = \"bump\"\nversion = \"0.1.0\"\n[dependencies]\n{name} = \"*\"\n"),
    )?;
    let lock = |(v, file): &(String, PathBuf)| -> anyhow::Result<()> {
        let sum = sha256_file(file)?;
        std::fs::write(
            project.join("Cargo.lock"),
            format!(
                "version = 4\n[[package]]\nname = \"bump\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"{name}\"\n\
                 version = \"{v}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"{sum}\"\n"
            ),
        )?;
        Ok(())
    };
    lock(&old)?;
    let (cold, _) = sync(release, home, &project)?;
    lock(&new)?;
    let (bump, v) = sync(release, home, &project)?;
    let (items, reused) = embed_reuse(home, &name)?;
    say(&format!(
        "  bump: crate {name} {} → {}: cold {cold:.1}s, the bump {:.1}s to searchable by keyword and symbols, \
         {bump:.1}s to embedded; the embed stage reused {reused} of {items} chunks",
        old.0,
        new.0,
        v["searchable_s"].as_f64().unwrap_or(f64::NAN)
    ));
    Ok(())
}

/// A git version train: a repository made from the tfhe-rs corpus, five tags, each
/// changing three files; the embed work per version against a cold build of each.
fn train(release: Profile, work: &Path) -> anyhow::Result<()> {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA").map(PathBuf::from) else {
        say("  train: skipped (ATLAS_CORPORA is not set)");
        return Ok(());
    };
    let repo = work.join("train-repo");
    copy_dir(&corpora.join("tfhe-rs"), &repo)?;
    let git = |args: &[&str]| -> anyhow::Result<()> {
        let ok = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.com")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.com")
            .output()?
            .status
            .success();
        anyhow::ensure!(ok, "git {args:?} failed");
        Ok(())
    };
    git(&["init", "-q", "-b", "main"])?;
    let mut rs: Vec<PathBuf> = crate::files_under(&repo)?
        .into_iter()
        .filter(|f| f.ends_with(".rs") && !f.split('/').any(|part| part == ".git"))
        .map(|f| repo.join(f))
        .collect();
    rs.sort();
    anyhow::ensure!(rs.len() >= 15, "the tfhe-rs corpus has too few .rs files");
    for (i, tag) in ["v1.0.0", "v1.1.0", "v1.2.0", "v1.3.0", "v1.4.0"].iter().enumerate() {
        for f in rs.iter().skip(i * 3).take(if i == 0 { 0 } else { 3 }) {
            let mut text = std::fs::read_to_string(f)?;
            text.push_str(&format!("\n/// Changed in {tag}.\npub fn changed_in_{i}() {{}}\n"));
            std::fs::write(f, text)?;
        }
        git(&["add", "-A"])?;
        git(&["commit", "-q", "-m", tag])?;
        git(&["tag", tag])?;
    }
    let cfg = work.join("train.yaml");
    std::fs::write(
        &cfg,
        format!(
            "name: train\nsources:\n  tfhe:\n    kind: git\n    url: {}\n    versions: {{ tags: \"v*\" }}\n",
            repo.display()
        ),
    )?;
    let t = Instant::now();
    let out = Command::new(release.bin("atlas-pipeline"))
        .arg("--config")
        .arg(&cfg)
        .arg("--cache-dir")
        .arg(work.join("train-cache"))
        .arg("run")
        .env("ATLAS_NO_PROGRESS", "1")
        .output()?;
    let log = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.success(), "the train failed: {log}");
    say(&format!(
        "  train: five tags of a tfhe-rs repository, each changing 3 files, in {:.1}s:",
        t.elapsed().as_secs_f64()
    ));
    for l in log.lines().filter(|l| l.starts_with("version ")) {
        say(&format!("    {}", l.split("; wrote").next().unwrap_or(l)));
    }
    say("    (a cold build of each version embeds all of its chunks: the first line's count plus its reuse)");
    Ok(())
}

pub(crate) fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type()?.is_dir() {
            copy_dir(&src, &dst)?;
        } else if e.file_type()?.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// An empty ATLAS_HOME that shares the provisioned model and ONNX Runtime.
pub(crate) fn fresh_home(home: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(home)?;
    let real = std::env::var_os("ATLAS_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/atlas"),
        PathBuf::from,
    );
    for sub in ["models", "onnxruntime"] {
        std::os::unix::fs::symlink(real.join(sub), home.join(sub)).with_context(|| format!("linking {sub}"))?;
    }
    Ok(home.to_owned())
}

fn sync(release: Profile, home: &Path, project: &Path) -> anyhow::Result<(f64, serde_json::Value)> {
    let t = Instant::now();
    let out = Command::new(release.bin("atlas"))
        .env("ATLAS_HOME", home)
        .env("ATLAS_NO_PROGRESS", "1")
        .arg("sync")
        .arg(project)
        .args(["--offline", "--json"])
        .output()
        .context("running atlas sync")?;
    let wall = t.elapsed().as_secs_f64();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    if v.is_null() {
        bail!("atlas sync printed no outcome: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((wall, v))
}

/// Chunks, vectors and tokens embedded of every installed bundle.
fn counts(home: &Path) -> (u64, u64, u64) {
    let (mut chunks, mut vectors, mut tokens) = (0, 0, 0);
    let read = |p: PathBuf| -> serde_json::Value {
        std::fs::read(p).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    };
    for e in std::fs::read_dir(home.join("bundles")).into_iter().flatten().flatten() {
        let m = read(e.path().join("current/manifest.json"));
        chunks += m["chunk_count"].as_u64().unwrap_or(0);
        vectors += m["embedding_rows"].as_u64().unwrap_or(0);
        tokens += read(e.path().join("current/embeddings.json"))["tokens"].as_u64().unwrap_or(0);
    }
    (chunks, vectors, tokens)
}

/// The newest run's embed stage of crate `name`: chunks, and chunks reused.
fn embed_reuse(home: &Path, name: &str) -> anyhow::Result<(u64, u64)> {
    let runs = home.join("packages").join(format!("crate+{name}")).join("cache/runs");
    let newest = std::fs::read_dir(&runs)?
        .flatten()
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .context("no run record")?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(newest.path())?)?;
    let embed =
        v["detail"].as_array().and_then(|d| d.iter().find(|s| s["name"] == "embed")).context("no embed stage")?;
    Ok((embed["items"].as_u64().unwrap_or(0), embed["reused"].as_u64().unwrap_or(0)))
}

/// A crate the local cargo cache holds at two versions: its name, then (version, file)
/// older and newer.
type TwoVersions = (String, (String, PathBuf), (String, PathBuf));

fn two_versions() -> Option<TwoVersions> {
    let cache = PathBuf::from(std::env::var_os("CARGO_HOME").unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo").into_os_string()
    }))
    .join("registry/cache");
    let mut all: Vec<(String, Vec<u64>, String, PathBuf)> = Vec::new();
    for dir in std::fs::read_dir(cache).ok()?.flatten() {
        for f in std::fs::read_dir(dir.path()).into_iter().flatten().flatten() {
            let file = f.file_name().to_string_lossy().into_owned();
            let Some(stem) = file.strip_suffix(".crate") else { continue };
            let Some((name, version)) = stem.rsplit_once('-') else { continue };
            let parts: Option<Vec<u64>> = version.split('.').map(|p| p.parse().ok()).collect();
            if let Some(parts) = parts.filter(|p| p.len() == 3) {
                all.push((name.to_owned(), parts, version.to_owned(), f.path()));
            }
        }
    }
    all.sort();
    // Prefer a crate of some size: the pair whose newer file is largest, under 2 MB.
    all.windows(2)
        .filter(|w| w[0].0 == w[1].0 && w[0].1 != w[1].1)
        .filter(|w| std::fs::metadata(&w[1].3).is_ok_and(|m| m.len() < 2 << 20))
        .max_by_key(|w| std::fs::metadata(&w[1].3).map_or(0, |m| m.len()))
        .map(|w| (w[0].0.clone(), (w[0].2.clone(), w[0].3.clone()), (w[1].2.clone(), w[1].3.clone())))
}

fn sha256_file(p: &Path) -> anyhow::Result<String> {
    use sha2::Digest as _;
    let bytes = std::fs::read(p)?;
    Ok(sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

fn size(dir: &Path) -> u64 {
    let mut n = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => n += e.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    n
}
