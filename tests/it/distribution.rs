//! The distribution loop on the real binaries: keygen, publish to moto's S3 and to a
//! local GitHub releases API, `atlas install` from each with `--trust`, `atlas smoke`,
//! a new version, `atlas update` while a `serve rag` session follows `current`, and
//! `atlas restore`. Then every fault the issue lists: each leaves the current version
//! serving and no staging folder behind.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use atlas_e2e::dist::{FakeGitHub, Moto};
use atlas_e2e::{Run, bin, pipeline, run, write_fixture_code, write_fixture_site};
use serde_json::json;

/// A fresh ATLAS_HOME whose models and ONNX Runtime are the provisioned ones.
fn home(dir: &Path) -> PathBuf {
    let h = dir.to_owned();
    std::fs::create_dir_all(&h).unwrap();
    let real = atlas_runtime::model::atlas_home();
    for sub in ["models", "onnxruntime"] {
        if real.join(sub).exists() && !h.join(sub).exists() {
            std::os::unix::fs::symlink(real.join(sub), h.join(sub)).unwrap();
        }
    }
    h
}

/// `atlas` with ATLAS_HOME `h` and an empty config folder.
fn atlas(h: &Path) -> Command {
    let mut c = Command::new(bin("atlas"));
    c.env("ATLAS_HOME", h)
        .env("XDG_CONFIG_HOME", h.join("config"))
        .env("ATLAS_NO_PROGRESS", "1")
        .env_remove("ATLAS_BUNDLE")
        .env_remove("ATLAS_FAILPOINT")
        .env_remove("GITHUB_TOKEN");
    c
}

/// The fixture bundle at `version` (with `extra` text in one page) and its archive.
fn build(work: &Path, version: &str, extra: &str) -> PathBuf {
    write_fixture_site(&work.join("site"));
    write_fixture_code(&work.join("code"));
    if !extra.is_empty() {
        std::fs::write(work.join("site/news.md"), format!("# News\n\n{extra}\n")).unwrap();
    }
    std::fs::write(
        work.join("pipeline.yaml"),
        format!(
            "name: fixture\nsources:\n  site:\n    kind: local\n    path: site\n  code:\n    kind: local\n    path: code\n    include: [\"**/*.py\", \"**/*.rs\"]\nstages:\n  pack:\n    version: \"{version}\"\n"
        ),
    )
    .unwrap();
    run(pipeline().current_dir(work).args(["run", "--archive"])).success();
    work.join(format!(".atlas/build/fixture-{version}.tar.zst"))
}

fn keygen(work: &Path) -> (PathBuf, String) {
    let out = run(pipeline().current_dir(work).args(["keygen", "--out", "keys", "--name", "release"])).success();
    let pk = out.stdout.lines().find_map(|l| l.trim().strip_prefix("public_key: ")).expect("public key").to_owned();
    (work.join("keys/release.key"), pk)
}

fn current(h: &Path) -> Option<String> {
    std::fs::read_link(h.join("bundles/fixture/current")).ok().map(|p| p.display().to_string())
}

#[track_caller]
fn no_staging_left(h: &Path) {
    let left: Vec<String> = std::fs::read_dir(h.join("bundles"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp-") || n.starts_with(".trash-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A one-line error and exit 1.
#[track_caller]
fn fails_with(r: &Run, needle: &str) {
    assert_eq!(r.code, Some(1), "expected a failure: {r:?}");
    let err: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(err.len(), 1, "one error line: {}", r.stderr);
    assert!(err[0].contains(needle), "{needle:?} not in {}", err[0]);
}

async fn bundle_version(c: &crate::mcp::Client) -> String {
    let r = crate::mcp::call(c, "get_bundle_info", json!({})).await;
    r.structured_content.as_ref().and_then(|v| v["version"].as_str()).unwrap_or_default().to_owned()
}

async fn wait_version(c: &crate::mcp::Client, want: &str) {
    let t = Instant::now();
    loop {
        let v = bundle_version(c).await;
        if v == want {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "the running server still serves {v}, not {want}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn slow_publish_install_smoke_update_and_restore_the_full_loop() {
    if !crate::embed::model_ready() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bundles");
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    // 1. build, 2. keygen
    let v1 = build(&work, "1.0.0", "");
    let (key, pk) = keygen(&work);
    assert!(pk.starts_with("RW"), "{pk}");
    // 3. publish to S3 and to GitHub
    let s3 = |args: &[&str]| {
        let mut c = pipeline();
        c.current_dir(&work).arg("publish").args(args);
        for (k, v) in moto.env() {
            c.env(k, v);
        }
        run(&mut c)
    };
    let out = s3(&["--to", "s3://bundles/atlas", "--sign", key.to_str().unwrap()]).success();
    assert!(out.stdout.contains(&format!("atlas install s3://bundles/atlas/fixture --trust {pk}")), "{}", out.stdout);
    let gh = FakeGitHub::start("acme", "docs", "tok");
    let publish_gh = |tag: &str, extra: &[&str]| {
        let mut c = pipeline();
        c.current_dir(&work)
            .args(["publish", "--github", "acme/docs", "--tag", tag, "--sign", key.to_str().unwrap()])
            .args(extra)
            .env("GITHUB_TOKEN", "tok")
            .env("GITHUB_API_URL", gh.api());
        run(&mut c)
    };
    publish_gh("v1", &[]).success();
    assert_eq!(
        gh.assets("v1"),
        ["fixture-1.0.0.tar.zst", "fixture-1.0.0.tar.zst.minisig", "fixture-1.0.0.tar.zst.sha256", "manifest.json"]
    );
    assert_eq!(gh.asset("v1", "fixture-1.0.0.tar.zst").unwrap(), std::fs::read(&v1).unwrap(), "the archive's bytes");
    gh.assert_no_violations();
    // The signature is the minisign CLI's format.
    if Command::new("minisign").arg("-v").output().is_ok() {
        let sig = work.join("v1.minisig");
        std::fs::write(&sig, gh.asset("v1", "fixture-1.0.0.tar.zst.minisig").unwrap()).unwrap();
        let out = Command::new("minisign").arg("-Vm").arg(&v1).arg("-x").arg(&sig).args(["-P", &pk]).output().unwrap();
        assert!(out.status.success(), "minisign -V: {}", String::from_utf8_lossy(&out.stderr));
    } else {
        eprintln!("skipped the minisign CLI check: minisign is not installed (apt-get install minisign)");
    }
    // 4. install from each, trusting the key
    let (h1, h2) = (home(&tmp.path().join("h1")), home(&tmp.path().join("h2")));
    let install = |h: &Path, src: &str| {
        let mut c = atlas(h);
        c.args(["install", src, "--trust", &pk]);
        for (k, v) in moto.env() {
            c.env(k, v);
        }
        c.env("GITHUB_API_URL", gh.api());
        run(&mut c)
    };
    let out = install(&h1, "s3://bundles/atlas").success();
    assert!(out.stdout.contains("\"mcpServers\"") && out.stdout.contains("\"fixture-rag\""), "{}", out.stdout);
    assert!(out.stderr.contains("installed fixture 1.0.0") && out.stderr.contains("signed by"), "{}", out.stderr);
    install(&h2, "github:acme/docs@v1").success();
    assert_eq!(current(&h1).as_deref(), Some("1.0.0"));
    assert_eq!(current(&h2).as_deref(), Some("1.0.0"));
    // 5. smoke
    let out = run(atlas(&h1).args(["smoke", "fixture"])).success();
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("ok ")).count(), 2, "{}", out.stdout);
    // 6. a new version; update while a rag session serves
    let rt = crate::mcp::rt();
    let log = tmp.path().join("rag.log");
    let mut cmd = crate::mcp::atlas(&["serve", "rag", "--bundle", "fixture"], &log);
    cmd.env("ATLAS_HOME", &h1).env("XDG_CONFIG_HOME", h1.join("config"));
    let client = rt.block_on(async {
        let transport = crate::mcp::child_transport(cmd, &log);
        rmcp::ServiceExt::serve((), transport).await.unwrap()
    });
    assert_eq!(rt.block_on(bundle_version(&client)), "1.0.0");
    build(&work, "2.0.0", "Version two adds streaming retries.");
    s3(&["--to", "s3://bundles/atlas", "--sign", key.to_str().unwrap()]).success();
    publish_gh("v2", &[]).success();
    let update = |h: &Path| {
        let mut c = atlas(h);
        c.arg("update");
        for (k, v) in moto.env() {
            c.env(k, v);
        }
        c.env("GITHUB_API_URL", gh.api());
        run(&mut c)
    };
    let out = update(&h1).success();
    assert!(out.stderr.contains("installed fixture 2.0.0 (was 1.0.0)"), "{}", out.stderr);
    rt.block_on(wait_version(&client, "2.0.0"));
    let out = update(&h2).success();
    assert!(out.stderr.contains("installed fixture 2.0.0"), "{}", out.stderr);
    // Unchanged remote: no download.
    let downloads = |gh: &FakeGitHub| gh.requests().iter().filter(|r| r.contains("/download/")).count();
    let before = downloads(&gh);
    let out = update(&h2).success();
    assert!(out.stderr.contains("is up to date"), "{}", out.stderr);
    assert_eq!(downloads(&gh), before, "an unchanged release is not downloaded again");
    // 7. restore goes back, and the session follows
    let out = run(atlas(&h1).args(["restore", "fixture"])).success();
    assert!(out.stderr.contains("current → 1.0.0"), "{}", out.stderr);
    rt.block_on(wait_version(&client, "1.0.0"));
    let listed: serde_json::Value =
        serde_json::from_str(&run(atlas(&h1).args(["bundles", "--json"])).success().stdout).unwrap();
    assert_eq!(listed[0]["current"], "1.0.0");
    assert_eq!(listed[0]["versions"].as_array().unwrap().len(), 2);
    assert!(listed[0]["versions"][0]["signed_by"].is_string());
    rt.block_on(client.cancel()).unwrap();
    no_staging_left(&h1);
    no_staging_left(&h2);
    gh.assert_no_violations();
}

#[test]
fn slow_republishing_the_same_bytes_is_a_no_op_and_other_bytes_need_replace() {
    if !crate::embed::model_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    build(&work, "1.0.0", "");
    let gh = FakeGitHub::start("acme", "docs", "tok");
    let store = format!("file://{}", tmp.path().join("pub").display());
    let publish = |args: &[&str]| {
        let mut c = pipeline();
        c.current_dir(&work).arg("publish").args(args).env("GITHUB_TOKEN", "tok").env("GITHUB_API_URL", gh.api());
        run(&mut c)
    };
    let both = ["--to", store.as_str(), "--github", "acme/docs", "--tag", "v1"];
    publish(&both).success();
    let uploads = || gh.requests().iter().filter(|r| r.starts_with("POST /uploads")).count();
    let n = uploads();
    assert_eq!(n, 3, "archive, manifest, sha256 (unsigned)");
    let again = publish(&both).success();
    assert_eq!(again.stderr.matches("already published (same bytes)").count(), 2, "{}", again.stderr);
    assert_eq!(uploads(), n, "nothing uploaded again");
    // Other bytes under the same version: refused, then replaced with --replace.
    build(&work, "1.0.0", "A change without a version bump.");
    let r = publish(&["--to", store.as_str()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("pass --replace"), "{}", r.stderr);
    let r = publish(&["--github", "acme/docs", "--tag", "v1"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    publish(&["--to", store.as_str(), "--github", "acme/docs", "--tag", "v1", "--replace"]).success();
    let new = std::fs::read(work.join(".atlas/build/fixture-1.0.0.tar.zst")).unwrap();
    assert_eq!(gh.asset("v1", "fixture-1.0.0.tar.zst").unwrap(), new);
    assert_eq!(std::fs::read(tmp.path().join("pub/fixture/1.0.0/fixture-1.0.0.tar.zst")).unwrap(), new);
    // Without a token: one clear line.
    let mut c = pipeline();
    c.current_dir(&work).args(["publish", "--github", "acme/docs"]).env_remove("GITHUB_TOKEN");
    let r = run(&mut c);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("GITHUB_TOKEN"), "{}", r.stderr);
    gh.assert_no_violations();
}
