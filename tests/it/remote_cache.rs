//! The shared build cache on object storage (`cache.remote`): a second machine with an
//! empty local cache builds from the remote one; a remote that is down, answering
//! 5xx, slow or serving a corrupt object costs a warning, never the run.

use std::path::{Path, PathBuf};

use atlas_e2e::dist::Moto;
use atlas_e2e::{copy_tree, pipeline, run, write_fixture_code, write_fixture_site};

/// A machine: its own folder with the fixture sources and pipeline.yaml (naming
/// `remote` when given), and its own local cache.
fn machine(root: &Path, remote: Option<&str>) -> PathBuf {
    // One writer: the remote is marked trusted (the signed case has its own test).
    let cache = remote.map(|r| format!("cache:\n  remote: {r}\n  timeout_s: 2\n  trusted: true\n")).unwrap_or_default();
    machine_with(root, &cache)
}

/// A machine whose pipeline.yaml ends with `cache` (a `cache:` block).
fn machine_with(root: &Path, cache: &str) -> PathBuf {
    std::fs::create_dir_all(root).unwrap();
    write_fixture_site(&root.join("site"));
    write_fixture_code(&root.join("code"));
    std::fs::write(
        root.join("pipeline.yaml"),
        format!(
            "name: fixture\nsources:\n  site:\n    kind: local\n    path: site\n  code:\n    kind: local\n    path: code\n    include: [\"**/*.py\", \"**/*.rs\"]\n{cache}"
        ),
    )
    .unwrap();
    root.to_owned()
}

fn build(dir: &Path, env: &[(&str, String)]) -> atlas_e2e::Run {
    let mut c = pipeline();
    c.current_dir(dir).arg("run").env("XDG_CONFIG_HOME", dir.join("config"));
    for (k, v) in env {
        c.env(k, v);
    }
    run(&mut c)
}

/// The bundle's artifacts: the same bytes on both machines.
fn artifacts(dir: &Path) -> serde_json::Value {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(".atlas/build/bundle/manifest.json")).unwrap()).unwrap();
    m["artifacts"].clone()
}

#[test]
fn a_second_machine_builds_from_the_shared_cache_on_s3() {
    if !crate::embed::model_ready() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    moto.bucket("cache");
    let tmp = tempfile::tempdir().unwrap();
    let a = machine(&tmp.path().join("a"), Some("s3://cache/atlas"));
    let r = build(&a, &moto.env()).success();
    assert_eq!(r.stage("embed").0, "ran");
    assert!(r.stderr.contains("remote cache s3://cache/atlas"), "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    // Machine B: an empty local cache, the same sources in another folder.
    let b = machine(&tmp.path().join("b"), Some("s3://cache/atlas"));
    let r = build(&b, &moto.env()).success();
    for stage in ["clean-gitbook", "chunk", "embed", "bm25", "pack"] {
        assert_eq!(r.stage(stage).0, "cached", "{stage}: {}", r.stderr);
    }
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    assert_eq!(artifacts(&a), artifacts(&b), "the same bundle");
    // Without the remote, machine C embeds again.
    let c = machine(&tmp.path().join("c"), None);
    assert_eq!(build(&c, &moto.env()).success().stage("embed").0, "ran");
}

#[test]
fn a_remote_cache_that_is_down_slow_or_corrupt_costs_a_warning_not_the_run() {
    if !crate::embed::model_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Down: nothing listens on the endpoint.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let down = [
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "x".into()),
        ("AWS_SECRET_ACCESS_KEY", "x".into()),
        ("AWS_REGION", "us-east-1".into()),
    ];
    let d = machine(&tmp.path().join("down"), Some("s3://cache/atlas"));
    let r = build(&d, &down).success();
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.contains("warning: the remote cache failed")).collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    assert_eq!(r.stage("embed").0, "ran");
    // Slow: a server that takes the connection and never answers (timeout_s: 2).
    let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let slow_port = hang.local_addr().unwrap().port();
    let _held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for s in hang.incoming().flatten() {
            open.push(s);
        }
    });
    let mut slow = down.clone();
    slow[0].1 = format!("http://127.0.0.1:{slow_port}");
    let s = machine(&tmp.path().join("slow"), Some("s3://cache/atlas"));
    let r = build(&s, &slow).success();
    assert!(
        r.stderr.contains("warning: the remote cache failed") && r.stderr.contains("no answer within 2s"),
        "{}",
        r.stderr
    );
    // 5xx: an endpoint that answers every request with 503.
    let unavailable = atlas_e2e::http::Server::start(|_| atlas_e2e::http::Response::new(503, "slow down"));
    let mut failing = down.clone();
    failing[0].1 = format!("http://{}", unavailable.addr);
    let f = machine(&tmp.path().join("5xx"), Some("s3://cache/atlas"));
    let r = build(&f, &failing).success();
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.contains("warning: the remote cache failed")).collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    // Corrupt: a shared folder where one object's bytes were swapped.
    let shared = tmp.path().join("shared");
    let url = format!("file://{}", shared.display());
    let a = machine(&tmp.path().join("a"), Some(&url));
    build(&a, &[]).success();
    // Every object's bytes swapped: whichever the second machine reads is caught.
    for e in std::fs::read_dir(shared.join("objects")).unwrap() {
        std::fs::write(e.unwrap().path(), b"not what the name says").unwrap();
    }
    let b = machine(&tmp.path().join("b"), Some(&url));
    copy_tree(&tmp.path().join("a/site"), &b.join("site"));
    let r = build(&b, &[]).success();
    assert!(r.stderr.contains("corrupt remote cache object"), "{}", r.stderr);
    assert_eq!(artifacts(&a), artifacts(&b), "the corrupt object was recomputed, not served");
}

/// Every ref record on a file:// remote, by namespace folder.
fn ref_files(shared: &Path) -> Vec<Vec<PathBuf>> {
    let mut out = Vec::new();
    for ns in std::fs::read_dir(shared.join("refs")).unwrap() {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(ns.unwrap().path()).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        out.push(files);
    }
    out
}

#[test]
fn a_poisoned_remote_ref_is_reported_and_recomputed() {
    if !crate::embed::model_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    let url = format!("file://{}", shared.display());
    let a = machine(&tmp.path().join("a"), Some(&url));
    build(&a, &[]).success();
    // A hostile writer points every entry at another entry's intact output: each page's
    // clean and chunk entry at another page's, the stage entries at other stages'.
    let mut rotated = 0;
    for files in ref_files(&shared) {
        let bodies: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        for (i, f) in files.iter().enumerate().filter(|_| files.len() > 1) {
            std::fs::write(f, &bodies[(i + 1) % files.len()]).unwrap();
            rotated += 1;
        }
    }
    assert!(rotated > 5, "{rotated}");
    let b = machine(&tmp.path().join("b"), Some(&url));
    let r = build(&b, &[]).success();
    assert!(r.stderr.contains("refused: its record is for"), "{}", r.stderr);
    for stage in ["clean-gitbook", "chunk", "pack"] {
        assert_eq!(r.stage(stage).0, "ran", "{stage} was recomputed: {}", r.stderr);
    }
    assert_eq!(artifacts(&a), artifacts(&b), "no poisoned output was shipped");
    run(std::process::Command::new(atlas_e2e::bin("atlas")).arg("verify").arg(b.join(".atlas/build/bundle"))).success();
}

#[test]
fn refs_on_a_shared_remote_are_used_only_when_signed_by_a_trusted_key() {
    if !crate::embed::model_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("keys");
    run(pipeline().args(["keygen", "--out"]).arg(&keys).args(["--name", "ci"])).success();
    let public = keys.join("ci.pub");
    let shared = tmp.path().join("shared");
    let url = format!("file://{}", shared.display());
    let env: [(&str, String); 0] = [];
    // The CI machine signs what it writes.
    let ci = machine_with(
        &tmp.path().join("ci"),
        &format!(
            "cache:\n  remote: {url}\n  sign: {}\n  trusted_keys: [{}]\n",
            keys.join("ci.key").display(),
            public.display()
        ),
    );
    let r = build(&ci, &env).success();
    assert!(r.stderr.contains("refs signed"), "{}", r.stderr);
    // A developer trusting that key builds from it.
    let dev_cache = format!("cache:\n  remote: {url}\n  trusted_keys: [{}]\n  read_only: true\n", public.display());
    let dev = machine_with(&tmp.path().join("dev"), &dev_cache);
    let r = build(&dev, &env).success();
    for stage in ["clean-gitbook", "chunk", "bm25", "pack"] {
        assert_eq!(r.stage(stage).0, "cached", "{stage}: {}", r.stderr);
    }
    assert_eq!(artifacts(&ci), artifacts(&dev));
    // A machine that trusts no key uses none of it, with one warning (it only reads:
    // a writer without the key would replace the signed records with unsigned ones).
    let other = machine_with(&tmp.path().join("other"), &format!("cache:\n  remote: {url}\n  read_only: true\n"));
    let r = build(&other, &env).success();
    assert_eq!(r.stage("pack").0, "ran");
    let w: Vec<&str> = r.stderr.lines().filter(|l| l.contains("keys this machine does not trust")).collect();
    assert_eq!(w.len(), 1, "{}", r.stderr);
    // A signed record whose target was rewritten fails its signature: reported, recomputed.
    for files in ref_files(&shared) {
        let bodies: Vec<serde_json::Value> =
            files.iter().map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap()).collect();
        for (i, f) in files.iter().enumerate().filter(|_| files.len() > 1) {
            let mut v = bodies[i].clone();
            v["target"] = bodies[(i + 1) % files.len()]["target"].clone();
            std::fs::write(f, serde_json::to_vec(&v).unwrap()).unwrap();
        }
    }
    let dev2 = machine_with(&tmp.path().join("dev2"), &dev_cache);
    let r = build(&dev2, &env).success();
    assert!(r.stderr.contains("its signature does not verify"), "{}", r.stderr);
    assert_eq!(artifacts(&ci), artifacts(&dev2));
}
