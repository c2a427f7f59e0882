//! `cargo xtask bench dist`: what a user downloads and how long installing takes.
//! Args: ATLAS PIPELINE CONFIG [RELEASE_ATLAS RELEASE_PIPELINE]. Prints the binaries'
//! sizes (release and dist profiles side by side), then publishes the archive the
//! config built to moto's S3 and times, over fresh ATLAS_HOMEs, `atlas install` from S3
//! and from the local file, and `atlas verify` (every hash of the installed bundle).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use atlas_e2e::dist::Moto;

const RUNS: usize = 3;

fn mib(p: &Path) -> Option<f64> {
    std::fs::metadata(p).ok().map(|m| m.len() as f64 / f64::from(1u32 << 20))
}

fn timed(mut c: Command) -> f64 {
    let t = Instant::now();
    let out = c.output().expect("running");
    assert!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr));
    t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let (atlas, pipeline, cfg) = (&args[0], &args[1], &args[2]);
    println!("binary            release profile    dist profile    ratio");
    for (i, name) in ["atlas", "atlas-pipeline"].iter().enumerate() {
        let dist = mib(&args[i]).expect("dist binary");
        match args.get(3 + i).and_then(|p| mib(p)) {
            Some(rel) => println!("{name:<17} {rel:>10.1} MiB {dist:>11.1} MiB    {:.2}x smaller", rel / dist),
            None => println!("{name:<17} {:>14} {dist:>11.1} MiB", "(not built)"),
        }
    }
    let build = cfg.parent().unwrap().join(".atlas/build");
    let archive = std::fs::read_dir(&build)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".tar.zst"))
        .expect("run --archive wrote an archive");
    let unpacked: u64 = walk(&build.join("bundle"));
    println!(
        "\ndevtron archive   {:.1} MiB ({:.1} MiB unpacked), {}",
        mib(&archive).unwrap(),
        unpacked as f64 / f64::from(1u32 << 20),
        archive.file_name().unwrap().to_string_lossy()
    );
    let moto = Moto::start().expect("moto's server (pip install 'moto[server]')");
    moto.bucket("bench");
    let mut publish = Command::new(pipeline);
    publish.arg("-c").arg(cfg).args(["publish", "--to", "s3://bench/atlas"]).envs(moto.env());
    let t_publish = timed(publish);
    let real_home = std::env::var_os("ATLAS_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/atlas"));
    let (mut s3, mut local, mut verify) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        for (from, times) in
            [("s3://bench/atlas/devtron".to_owned(), &mut s3), (archive.display().to_string(), &mut local)]
        {
            let home = tempfile::tempdir().unwrap();
            for sub in ["models", "onnxruntime"] {
                std::os::unix::fs::symlink(real_home.join(sub), home.path().join(sub)).unwrap();
            }
            let mut c = Command::new(atlas);
            c.args(["install", &from]).env("ATLAS_HOME", home.path()).env("ATLAS_NO_PROGRESS", "1").envs(moto.env());
            times.push(timed(c));
            let mut v = Command::new(atlas);
            v.args(["verify", "devtron"]).env("ATLAS_HOME", home.path());
            verify.push(timed(v));
        }
    }
    println!("publish to moto S3                {t_publish:>8.2} s");
    println!(
        "atlas install from moto S3        {:>8.2} s  (median of {RUNS}; download, sha256, unpack, verify, switch)",
        median(s3)
    );
    println!("atlas install from a local file   {:>8.2} s  (median of {RUNS})", median(local));
    println!("atlas verify (every hash)         {:>8.2} s  (median of {})", median(verify), 2 * RUNS);
    if let Some(site) = std::env::var_os("ATLAS_DELTA_SITE") {
        delta(atlas, pipeline, &cfg.parent().unwrap().join(".atlas/cache"), Path::new(&site), &moto, &real_home);
    }
}

/// A one-page change to the devtron site: `atlas update` from S3 with the per-file
/// layout against the full archive, in bytes and time.
fn delta(atlas: &Path, pipeline: &Path, cache: &Path, site: &Path, moto: &Moto, real_home: &Path) {
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("site");
    std::fs::create_dir_all(&copy).unwrap();
    atlas_e2e::copy_tree(site, &copy);
    let build = |version: &str| {
        std::fs::write(
            work.path().join("pipeline.yaml"),
            format!(
                "name: devtron\nsources:\n  devtron:\n    kind: local\n    path: site\nstages:\n  pack:\n    version: \"{version}\"\n"
            ),
        )
        .unwrap();
        let mut c = Command::new(pipeline);
        c.current_dir(work.path())
            .args(["run", "--archive"])
            .env("ATLAS_CACHE_DIR", cache)
            .env("ATLAS_NO_PROGRESS", "1");
        timed(c);
        let mut p = Command::new(pipeline);
        p.current_dir(work.path()).args(["publish", "--to", "s3://bench/delta"]).envs(moto.env());
        timed(p);
        work.path().join(format!(".atlas/build/devtron-{version}.tar.zst"))
    };
    build("1.0.0");
    let home = tempfile::tempdir().unwrap();
    for sub in ["models", "onnxruntime"] {
        std::os::unix::fs::symlink(real_home.join(sub), home.path().join(sub)).unwrap();
    }
    let atlas_cmd = |args: &[&str]| {
        let mut c = Command::new(atlas);
        c.args(args).env("ATLAS_HOME", home.path()).env("ATLAS_NO_PROGRESS", "1").envs(moto.env());
        c
    };
    timed(atlas_cmd(&["install", "s3://bench/delta/devtron"]));
    // One page gains a paragraph: the first page in path order with a second section.
    let mut pages: Vec<PathBuf> = Vec::new();
    collect_md(&copy, &mut pages);
    pages.sort();
    let page =
        pages.iter().find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.matches("\n## ").count() >= 2)).unwrap();
    let mut text = std::fs::read_to_string(page).unwrap();
    text.push_str("\n\nThis paragraph was added by the delta-update benchmark.\n");
    std::fs::write(page, text).unwrap();
    let v2 = build("1.0.1");
    let t = Instant::now();
    let out = atlas_cmd(&["update", "devtron"]).output().unwrap();
    let took = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err.lines().find(|l| l.contains("delta update")).unwrap_or_else(|| panic!("no delta: {err}"));
    let fetched: u64 = line.split("changed files, ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    let full = std::fs::metadata(&v2).unwrap().len();
    println!(
        "\none-page change ({}):\n  atlas update, delta          {fetched:>10} bytes  {took:>6.2} s\n  full archive download        {full:>10} bytes\n  ratio                        {:>10.1}x fewer bytes\n  {}",
        page.strip_prefix(&copy).unwrap().display(),
        full as f64 / fetched as f64,
        line.trim_start_matches("atlas: ")
    );
}

fn collect_md(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().filter_map(|e| e.ok()) {
        let p = e.path();
        if p.is_dir() {
            collect_md(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

fn walk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| {
            let t = e.file_type().unwrap();
            if t.is_dir() { walk(&e.path()) } else { e.metadata().map(|m| m.len()).unwrap_or(0) }
        })
        .sum()
}
