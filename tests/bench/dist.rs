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
