//! Cache faults through the real binary: corruption, crashes, kills, concurrent runs, gc.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use atlas_e2e::{pipeline, run, write_config, write_fixture_site};

struct Setup {
    _site: tempfile::TempDir,
    work: tempfile::TempDir,
    cfg: PathBuf,
}

fn setup() -> Setup {
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    // A few more pages, so a crash can land mid-stage.
    for i in 0..12 {
        std::fs::write(site.path().join(format!("guides/page{i}.md")), format!("# Page {i}\n\n## Part\n\nText {i}.\n"))
            .unwrap();
    }
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site.path(), "");
    Setup { _site: site, work, cfg }
}

impl Setup {
    fn run(&self, env: &[(&str, &str)]) -> atlas_e2e::Run {
        let mut c = pipeline();
        c.arg("-c").arg(&self.cfg).args(["run", "--until", "chunk"]);
        for (k, v) in env {
            c.env(k, v);
        }
        run(&mut c)
    }
    fn cache(&self) -> PathBuf {
        self.work.path().join(".atlas/cache")
    }
    fn chunks_bytes(&self) -> Vec<u8> {
        std::fs::read(self.work.path().join(".atlas/build/chunks.parquet")).unwrap()
    }
}

fn objects(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for shard in std::fs::read_dir(cache.join("objects")).unwrap() {
        for obj in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            out.push(obj.unwrap().path());
        }
    }
    out.sort();
    out
}

#[test]
fn corrupt_objects_are_recomputed_and_never_served() {
    let s = setup();
    s.run(&[]).success();
    let good = s.chunks_bytes();
    // Damage every object in the cache, three ways.
    for (i, obj) in objects(&s.cache()).iter().enumerate() {
        let bytes = std::fs::read(obj).unwrap();
        match i % 3 {
            0 => std::fs::write(obj, &bytes[..bytes.len() / 2]).unwrap(),
            1 => std::fs::write(obj, b"").unwrap(),
            _ => {
                let mut b = bytes;
                b[0] ^= 0x01;
                std::fs::write(obj, b).unwrap();
            }
        }
    }
    std::fs::remove_file(s.work.path().join(".atlas/build/chunks.parquet")).unwrap();
    let r = s.run(&[]).success();
    assert!(r.stderr.contains("corrupt cache object"), "corruption is reported:\n{}", r.stderr);
    for stage in ["crawl", "clean-gitbook", "chunk"] {
        assert_eq!(r.stage(stage).0, "ran", "{stage} recomputed:\n{}", r.stderr);
    }
    assert_eq!(s.chunks_bytes(), good, "the recomputed output is identical");
    // And now all is healthy again.
    let again = s.run(&[]).success();
    assert_eq!(again.stage("chunk").0, "cached");
    assert!(!again.stderr.contains("corrupt"));
}

#[test]
fn crash_mid_run_then_rerun_leaves_a_consistent_cache() {
    let s = setup();
    let crashed = s.run(&[("ATLAS_FAILPOINT", "crash-after:chunk:5")]);
    assert_ne!(crashed.code, Some(0), "the failpoint aborts the run");
    assert!(crashed.stderr.contains("failpoint: aborting in chunk"));
    assert!(!s.work.path().join(".atlas/build/chunks.parquet").exists());

    let rerun = s.run(&[]).success();
    assert_eq!(rerun.stage("crawl").0, "cached", "crawl finished before the crash");
    assert_eq!(rerun.stage("clean-gitbook").0, "cached");
    let (outcome, processed, reused) = rerun.stage("chunk");
    assert_eq!(outcome, "ran");
    assert!(reused >= 5, "items finished before the crash are reused: {processed} processed, {reused} reused");
    assert!(std::fs::read_dir(s.cache().join("tmp")).unwrap().next().is_none(), "no temp files left");

    // The same result as a run that never crashed.
    let clean_run = setup();
    clean_run.run(&[]).success();
    assert_eq!(
        atlas_runtime::chunk_table::from_parquet(&s.chunks_bytes()).unwrap().len(),
        atlas_runtime::chunk_table::from_parquet(&clean_run.chunks_bytes()).unwrap().len()
    );
    assert_eq!(s.run(&[]).success().stage("chunk").0, "cached");
}

#[test]
fn slow_second_concurrent_run_fails_with_a_clear_message() {
    let s = setup();
    s.run(&[]).success();
    let mut holder = pipeline();
    holder.arg("-c").arg(&s.cfg).args(["run", "--until", "chunk"]).env("ATLAS_FAILPOINT", "hold-lock:4000");
    let child = holder.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    wait_for_holder(&s.cache(), child.id());

    let second = run(pipeline().arg("-c").arg(&s.cfg).args(["--lock-wait", "0", "run", "--until", "chunk"]));
    assert_eq!(second.code, Some(1), "{}", second.stderr);
    assert!(second.stderr.contains("is locked by another atlas-pipeline run"), "{}", second.stderr);
    assert!(second.stderr.contains(&format!("pid {}", child.id())), "names the holder: {}", second.stderr);

    // A run that waits gets its turn once the first finishes.
    let waiter = run(pipeline().arg("-c").arg(&s.cfg).args(["--lock-wait", "60", "run", "--until", "chunk"])).success();
    assert!(waiter.stderr.contains("waiting up to 60s for the cache lock"), "{}", waiter.stderr);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
}

#[test]
fn stale_lock_of_a_killed_run_is_recovered() {
    let s = setup();
    let mut holder = pipeline();
    holder.arg("-c").arg(&s.cfg).args(["run", "--until", "chunk"]).env("ATLAS_FAILPOINT", "hold-lock:600000");
    let mut child = holder.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    wait_for_holder(&s.cache(), child.id());
    child.kill().unwrap(); // SIGKILL: no cleanup at all
    child.wait().unwrap();
    assert!(s.cache().join("lock").exists(), "the lock file stays behind");
    let t = Instant::now();
    let r = run(pipeline().arg("-c").arg(&s.cfg).args(["--lock-wait", "0", "run", "--until", "chunk"])).success();
    assert!(t.elapsed() < Duration::from_secs(30));
    assert_eq!(r.stage("chunk").0, "ran");
}

fn wait_for_holder(cache: &Path, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::fs::read_to_string(cache.join("lock")).is_ok_and(|s| s.contains(&format!("pid {pid}"))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the first run never took the lock");
}

#[test]
fn gc_keeps_everything_the_latest_run_references() {
    let s = setup();
    s.run(&[]).success();
    // A second, different run: the old chunk outputs become garbage.
    let cfg_text = std::fs::read_to_string(&s.cfg).unwrap() + "stages:\n  chunk:\n    overlap_chars: 40\n";
    std::fs::write(&s.cfg, cfg_text).unwrap();
    s.run(&[]).success();
    let before = objects(&s.cache()).len();
    let gc = run(pipeline().arg("-c").arg(&s.cfg).args(["gc", "--keep", "1"])).success();
    assert!(gc.stdout.starts_with("kept 1 run "), "{}", gc.stdout);
    let after = objects(&s.cache()).len();
    assert!(after < before, "gc removed the old run's objects ({before} → {after})");
    let status = run(pipeline().arg("-c").arg(&s.cfg).arg("status")).success();
    assert_eq!(status.stdout.matches(" fresh").count(), 3, "{}", status.stdout);
    let r = s.run(&[]).success();
    for stage in ["crawl", "clean-gitbook", "chunk"] {
        assert_eq!(r.stage(stage).0, "cached", "{stage} still cached after gc:\n{}", r.stderr);
    }
    assert!(!r.stderr.contains("corrupt"));
}
