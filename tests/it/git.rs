//! git and GitHub-portfolio sources: local repositories made by the test, and a local
//! HTTP server answering the GitHub REST endpoints with the API's response shapes.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use atlas_e2e::http::{Response, Server};
use atlas_e2e::{pipeline, run};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with docs and code, one commit.
fn make_repo(dir: &Path, flavour: &str) -> String {
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README.md"), format!("# {flavour}\n\n## Usage\n\nRun it.\n")).unwrap();
    std::fs::write(dir.join("docs/guide.md"), "# Guide\n\n## Setup\n\nSteps.\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub fn one() -> u32 {\n    1\n}\n").unwrap();
    std::fs::write(dir.join("logo.png"), [0x89u8, b'P', b'N', b'G', 0xff, 0xfe, 0x00]).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    git(dir, &["rev-parse", "HEAD"])
}

fn chunks(dir: &Path) -> Vec<atlas_runtime::chunk_table::ChunkRecord> {
    atlas_runtime::chunk_table::read_file(&dir.join(".atlas/build/chunks.parquet")).unwrap()
}

#[test]
fn a_new_commit_flows_through_only_the_files_it_changed() {
    let repo = tempfile::tempdir().unwrap();
    let first = make_repo(repo.path(), "Tool");
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!("name: t\nsources:\n  tool:\n    kind: git\n    url: {}\n    branch: main\n", repo.path().display()),
    )
    .unwrap();
    let go = || run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();

    let cold = go();
    assert_eq!(
        cold.stage("crawl").1,
        3,
        "README.md, docs/guide.md, src/lib.rs (logo.png is not text):\n{}",
        cold.stderr
    );
    assert!(cold.stderr.contains("skipped tool/logo.png: binary (it holds NUL bytes)"), "{}", cold.stderr);
    let c = chunks(work.path());
    assert!(c.iter().all(|ch| ch.commit.as_deref() == Some(first.as_str())));
    assert!(c.iter().all(|ch| ch.section == "tool"));
    assert!(c.iter().any(|ch| ch.kind == atlas_runtime::ChunkKind::Code && ch.path == "tool/src/lib.rs"));

    // One file changes in a new commit.
    std::fs::write(
        repo.path().join("src/lib.rs"),
        "pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    2\n}\n",
    )
    .unwrap();
    git(repo.path(), &["commit", "-q", "-am", "second"]);
    let second = git(repo.path(), &["rev-parse", "HEAD"]);
    let r = go();
    assert_eq!(r.stage("clean-gitbook"), ("ran".into(), 1, 2), "{}", r.stderr);
    assert_eq!(r.stage("chunk"), ("ran".into(), 1, 2), "{}", r.stderr);
    let c = chunks(work.path());
    assert!(c.iter().all(|ch| ch.commit.as_deref() == Some(second.as_str())), "every chunk names the new commit");
    assert!(c.iter().any(|ch| ch.text.contains("fn two")));

    // Pinning the first commit reads the files as they were.
    std::fs::write(
        &cfg,
        format!("name: t\nsources:\n  tool:\n    kind: git\n    url: {}\n    rev: {first}\n", repo.path().display()),
    )
    .unwrap();
    go();
    let c = chunks(work.path());
    assert!(c.iter().all(|ch| !ch.text.contains("fn two")));
    assert!(c.iter().all(|ch| ch.commit.as_deref() == Some(first.as_str())));

    // A rev that does not exist is a clear error.
    std::fs::write(
        &cfg,
        format!("name: t\nsources:\n  tool:\n    kind: git\n    url: {}\n    rev: v9.9\n", repo.path().display()),
    )
    .unwrap();
    let r = run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"]));
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("no commit v9.9"), "{}", r.stderr);
}

#[test]
fn github_portfolio_lists_by_topic_follows_pages_and_waits_out_rate_limits() {
    let repos_dir = tempfile::tempdir().unwrap();
    for name in ["alpha", "beta", "gamma"] {
        make_repo(&repos_dir.path().join(name), name);
    }
    let repo_json = |name: &str, topics: &[&str]| {
        let path = repos_dir.path().join(name);
        serde_json::json!({
            "id": 1, "name": name, "full_name": format!("acme/{name}"), "private": false,
            "html_url": format!("https://github.com/acme/{name}"),
            "clone_url": path.display().to_string(),
            "default_branch": "main", "topics": topics, "archived": false, "fork": false,
        })
    };
    let page1 =
        serde_json::to_string(&[repo_json("alpha", &["knowledge-base", "rust"]), repo_json("beta", &["other"])])
            .unwrap();
    let page2 = serde_json::to_string(&[repo_json("gamma", &["Knowledge-Base"])]).unwrap();
    let auth: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let auth2 = auth.clone();
    let limited = Arc::new(AtomicUsize::new(0));
    let port = Arc::new(AtomicUsize::new(0));
    let port2 = port.clone();
    let server = Server::start(move |req| {
        auth2.lock().unwrap().push(req.header("authorization").map(str::to_owned));
        let base = format!("http://127.0.0.1:{}", port2.load(Ordering::SeqCst));
        match req.path.as_str() {
            // Not an organisation: the crawler falls back to the user endpoint.
            p if p.starts_with("/api/v3/orgs/acme/repos") => Response::new(404, r#"{"message":"Not Found"}"#),
            "/api/v3/users/acme/repos?per_page=100&type=owner" => {
                if limited.fetch_add(1, Ordering::SeqCst) == 0 {
                    let reset =
                        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 1;
                    return Response::new(403, r#"{"message":"API rate limit exceeded"}"#)
                        .header("X-RateLimit-Remaining", "0")
                        .header("X-RateLimit-Reset", &reset.to_string());
                }
                Response::new(200, page1.clone())
                    .header("Content-Type", "application/json")
                    .header("Link", &format!("<{base}/api/v3/user/repos?page=2>; rel=\"next\", <{base}/api/v3/user/repos?page=2>; rel=\"last\""))
            }
            "/api/v3/user/repos?page=2" => Response::new(200, page2.clone()).header("Content-Type", "application/json"),
            _ => Response::new(404, "{}"),
        }
    });
    port.store(server.addr.port() as usize, Ordering::SeqCst);

    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!(
            "name: t\nsources:\n  portfolio:\n    kind: github\n    owner: acme\n    topic: knowledge-base\n    api_url: {}\n    include: [\"**/*.md\", \"**/*.rs\"]\nstages:\n  crawl:\n    retry_after_cap_s: 2\n",
            server.url("/api/v3")
        ),
    )
    .unwrap();
    let r =
        run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"]).env("GITHUB_TOKEN", "t0ken")).success();
    assert!(r.stderr.contains("GitHub API rate limit: waiting"), "{}", r.stderr);
    assert!(r.stderr.contains("GitHub acme: 2 of 3 repositories carry topic `knowledge-base`"), "{}", r.stderr);
    let c = chunks(work.path());
    let mut sections: Vec<&str> = c.iter().map(|ch| ch.section.as_str()).collect();
    sections.dedup();
    assert_eq!(sections, ["alpha", "gamma"]);
    let lib = c.iter().find(|ch| ch.path == "portfolio/alpha/src/lib.rs").expect("alpha's code");
    assert_eq!(lib.repo.as_deref(), Some("https://github.com/acme/alpha"));
    let commit = lib.commit.clone().unwrap();
    assert_eq!(lib.url.as_deref(), Some(format!("https://github.com/acme/alpha/blob/{commit}/src/lib.rs").as_str()));
    assert!(auth.lock().unwrap().iter().all(|a| a.as_deref() == Some("Bearer t0ken")), "the token is sent");

    // Offline reuses the listed repositories and their clones.
    let before = server.all().len();
    run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk", "--offline"])).success();
    assert_eq!(server.all().len(), before);
}

/// A version train: `versions: { tags: "v*", last: 2 }` builds the two newest `v` tags,
/// each as its own version of the bundle (its archive, its manifest version), the
/// second reusing every chunk the first embedded that did not change; a tag the glob
/// does not name is not built, and each version installs beside the other.
#[test]
fn a_version_train_builds_each_tag_as_its_own_version_and_reuses_what_did_not_change() {
    if !crate::embed::model_ready() {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    make_repo(repo.path(), "Tool");
    for (i, tag) in ["v0.1.0", "v0.2.0", "v0.3.0"].iter().enumerate() {
        std::fs::write(repo.path().join("src/lib.rs"), format!("pub fn one() -> u32 {{\n    {}\n}}\n", i + 1)).unwrap();
        for n in 0..6 {
            std::fs::write(
                repo.path().join(format!("docs/page{n}.md")),
                format!("# Page {n}\n\n## Topic {n}\n\nSteady text about subject number {n} that does not change.\n"),
            )
            .unwrap();
        }
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-q", "-m", tag]);
        git(repo.path(), &["tag", tag]);
    }
    git(repo.path(), &["tag", "nightly"]);
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!(
            "name: tool\nsources:\n  tool:\n    kind: git\n    url: {}\n    versions: {{ tags: \"v*\", last: 2 }}\n",
            repo.path().display()
        ),
    )
    .unwrap();
    let r = run(pipeline().arg("-c").arg(&cfg).args(["run", "--archive"])).success();
    let out = work.path().join(".atlas/build/versions");
    let mut built: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    built.sort();
    assert_eq!(built, ["0.2.0", "0.3.0"], "{}", r.stderr);
    for v in &built {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join(v).join("bundle/manifest.json")).unwrap()).unwrap();
        assert_eq!(m["version"], v.as_str());
        assert!(out.join(v).join(format!("tool-{v}.tar.zst")).is_file());
    }
    let line = r
        .stderr
        .lines()
        .find(|l| l.starts_with("version 0.3.0 (tag v0.3.0)"))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    let reused: usize = line.split(" embedded, ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let embedded: usize = line.split(": ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(reused >= 6 && embedded <= 2, "only the changed file is embedded again: {line}");
    // Each version installs beside the other.
    let t = tempfile::tempdir().unwrap();
    let h = crate::distribution::home(&t.path().join("h"));
    for v in &built {
        run(crate::distribution::atlas(&h).arg("install").arg(out.join(v).join(format!("tool-{v}.tar.zst")))).success();
    }
    let listed = run(crate::distribution::atlas(&h).args(["bundles", "--json"])).success();
    assert!(listed.stdout.contains("\"0.2.0\"") && listed.stdout.contains("\"0.3.0\""), "{}", listed.stdout);
    // A glob that names no tag: one line.
    std::fs::write(
        &cfg,
        format!(
            "name: tool\nsources:\n  tool:\n    kind: git\n    url: {}\n    versions: [\"v9\"]\n",
            repo.path().display()
        ),
    )
    .unwrap();
    let r = run(pipeline().arg("-c").arg(&cfg).arg("run"));
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("names none of the repository's 4 tags"), "{}", r.stderr);
}
