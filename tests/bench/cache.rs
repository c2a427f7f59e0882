//! `cargo xtask bench cache`: the shared build cache. Args: PIPELINE SITE. The devtron
//! site is built three times, each with an empty local cache, against moto's S3 on
//! 127.0.0.1: cold (an empty remote: every stage runs, and the remote fills), then
//! twice as a second machine would (a fresh folder and local cache, the warm remote).
//! Prints the wall times side by side and the ratio.

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use atlas_e2e::dist::Moto;

fn build(pipeline: &Path, site: &Path, dir: &Path, moto: &Moto) -> (f64, String) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("pipeline.yaml"),
        format!(
            "name: devtron\nsources:\n  devtron:\n    kind: local\n    path: {}\ncache:\n  remote: s3://cache/devtron\n",
            site.display()
        ),
    )
    .unwrap();
    let t = Instant::now();
    let out = Command::new(pipeline)
        .current_dir(dir)
        .arg("run")
        .env("ATLAS_NO_PROGRESS", "1")
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("ATLAS_CACHE_DIR")
        .env_remove("ATLAS_CACHE_REMOTE")
        .envs(moto.env())
        .output()
        .unwrap();
    let took = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("warning"), "{err}");
    (took, err)
}

fn stage_line<'a>(err: &'a str, stage: &str) -> &'a str {
    err.lines().find(|l| l.split_whitespace().next() == Some(stage) && l.split_whitespace().count() == 5).unwrap_or("")
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let (pipeline, site) = (&args[0], &args[1]);
    let moto = Moto::start().expect("moto's server (pip install 'moto[server]')");
    moto.bucket("cache");
    let work = tempfile::tempdir().unwrap();
    let (cold, err) = build(pipeline, site, &work.path().join("first"), &moto);
    println!("cold build, empty remote          {cold:>7.2} s   ({})", stage_line(&err, "embed").trim());
    let mut warm = Vec::new();
    for i in 0..2 {
        let (t, err) = build(pipeline, site, &work.path().join(format!("second-{i}")), &moto);
        assert!(stage_line(&err, "embed").contains("cached"), "{err}");
        warm.push((t, err));
    }
    warm.sort_by(|a, b| a.0.total_cmp(&b.0));
    let w = warm[0].0;
    println!("second machine, warm remote       {w:>7.2} s   (best of 2: {:.2} s, {:.2} s)", warm[0].0, warm[1].0);
    let table: Vec<&str> =
        warm[0].1.lines().filter(|l| l.split_whitespace().count() == 5 || l.starts_with("total")).collect();
    println!("  the second machine's stages:\n  {}", table.join("\n  "));
    println!("ratio                             {:>7.1}x faster", cold / w);
}
