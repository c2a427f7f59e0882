//! A project's own working tree, live (`atlas init`, issue 69): a real MCP session
//! through edits in a temporary git repository — an edit, a new file, a delete, a
//! rename, a checkout, an ignore file that reveals a folder, planted secrets, and a
//! restart — each followed by the server without a restart.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::distribution::atlas;

/// A planted AWS key and private key: neither may reach a reply, the index or a log.
const AWS_KEY: &str = "AKIAQZKXWPLMNB7EXAMPLE";
const PRIVATE_KEY: &str = "MIIEowIBAAKCAQEAtreeprivatekeyzq9";

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Every file under `dir` (the home: bundles, caches, logs) as bytes, for a search.
fn any_file_holds(dir: &Path, needle: &str) -> Option<String> {
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file()
                && std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                return Some(p.display().to_string());
            }
        }
    }
    None
}

#[test]
fn a_working_tree_is_served_beside_its_set_and_every_kind_of_edit_is_followed() {
    let t = tempfile::tempdir().unwrap();
    let (home, root) = (t.path().join("home"), t.path().join("shop"));
    std::fs::create_dir_all(&root).unwrap();
    write(&root, ".gitignore", "target/\nnotes/\n");
    write(
        &root,
        "src/lib.rs",
        "/// Adds the tax to a price.\npub fn with_tax(price: u64) -> u64 {\n    price * 6 / 5\n}\n",
    );
    write(&root, "README.md", "# shop\n\nA small shop that sells teapots.\n");
    write(&root, "target/debug/built.rs", "pub fn ignored_build_output() {}\n");
    write(&root, "notes/plan.md", "# Plan\n\nThe marmalade roadmap.\n");
    write(&root, ".env", &format!("AWS_ACCESS_KEY_ID={AWS_KEY}\n"));
    write(&root, "deploy/id_rsa", &format!("-----BEGIN RSA PRIVATE KEY-----\n{PRIVATE_KEY}\n"));
    write(&root, "data/dump.sql", &"insert into t values (1);\n".repeat(200_000));
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "one"]);
    let p = root.to_str().unwrap();

    // init: the tree indexed, the editor's config written; run again, nothing changes.
    let r = atlas_e2e::run(atlas(&home).args(["init", p, "--keyword-only", "--client", "claude-code"]));
    let r = r.success();
    assert!(r.stderr.contains("project:shop: the working tree is searchable"), "{}", r.stderr);
    assert!(r.stderr.contains("has no lockfile"), "{}", r.stderr);
    let mcp = std::fs::read(root.join(".mcp.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&mcp).unwrap();
    assert_eq!(v["mcpServers"]["shop-rag"]["args"], json!(["serve", "rag", "--project", p, "--warm"]), "{v}");
    let r = atlas_e2e::run(atlas(&home).args(["init", p, "--keyword-only"])).success();
    assert!(r.stderr.contains("already up to date"), "{}", r.stderr);
    assert_eq!(std::fs::read(root.join(".mcp.json")).unwrap(), mcp);

    // `search --project` answers from the tree.
    let r = atlas_e2e::run(atlas(&home).args(["search", "--project", p, "teapots", "--mode", "keyword"])).success();
    assert!(r.stdout.contains("shop/README.md"), "{}", r.stdout);

    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rag.log");
    let serve = || {
        let mut cmd = crate::mcp::atlas(&["serve", "rag", "--project", p], &log);
        cmd.env("ATLAS_HOME", &home).env("XDG_CONFIG_HOME", home.join("config")).env_remove("ATLAS_BUNDLE");
        cmd
    };
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(serve(), &log))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&log)));
        let search = |q: &str| {
            crate::mcp::call(&c, "search_code", json!({"query": q, "mode": "keyword", "top_k": 5}))
        };
        // Waits until `search(q)`'s reply text satisfies `want`; the reply, and how long.
        macro_rules! until {
            ($q:expr, $want:expr) => {{
                let t = Instant::now();
                loop {
                    let (text, _) = crate::mcp::ok(search($q).await);
                    if $want(&text) {
                        break (text, t.elapsed());
                    }
                    assert!(t.elapsed() < Duration::from_secs(30), "{:?} never came: {text}\n{}", $q, crate::mcp::read(&log));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }};
        }
        let (text, _) = until!("tax price", |t: &str| t.contains("with_tax"));
        assert!(text.contains("project:shop@live"), "{text}");
        // What was left out is said once, by reason, in the library's info.
        let (info, _) = crate::mcp::ok(crate::mcp::call(&c, "get_bundle_info", json!({})).await);
        assert!(info.contains("left out: 3 secret") && info.contains(".env") && info.contains(".mcp.json") && info.contains("deploy/id_rsa"), "{info}");
        assert!(info.contains("left out: 1 too large (1 .sql): data/dump.sql"), "{info}");
        // Nothing ignored and no secret is served.
        for q in ["ignored_build_output", "marmalade", AWS_KEY, PRIVATE_KEY] {
            let (text, _) = crate::mcp::ok(search(q).await);
            let (docs, _) =
                crate::mcp::ok(crate::mcp::call(&c, "search_docs", json!({"query": q, "mode": "keyword"})).await);
            // The reply names the query once; nothing it found holds it.
            assert!(docs.matches(q).count() <= 1, "{q}: {docs}");
            assert!(text.matches(q).count() <= 1, "{q}: {text}");
        }

        // An edit to a file.
        write(&root, "src/lib.rs", "/// Adds the tax to a price, rounded for the zanzibar till.\npub fn with_tax(price: u64) -> u64 {\n    price * 6 / 5\n}\n");
        let (_, took) = until!("zanzibar till", |t: &str| t.contains("with_tax"));
        eprintln!("an edit was searchable after {took:?}");
        // A new file: search and symbols.
        write(&root, "src/basket.rs", "/// Sums a basket of quinces.\npub fn quince_total(items: &[u64]) -> u64 {\n    items.iter().sum()\n}\n");
        until!("quinces basket", |t: &str| t.contains("quince_total"));
        let (_, v) = crate::mcp::ok(crate::mcp::call(&c, "find_symbol", json!({"name": "quince_total"})).await);
        assert!(v["definitions"][0]["path"].as_str().unwrap().ends_with("src/basket.rs"), "{v}");
        // A rename: the hit moves with the file.
        std::fs::rename(root.join("src/basket.rs"), root.join("src/cart.rs")).unwrap();
        until!("quinces basket", |t: &str| t.contains("src/cart.rs") && !t.contains("src/basket.rs"));
        // A delete.
        std::fs::remove_file(root.join("src/cart.rs")).unwrap();
        until!("quinces basket", |t: &str| !t.contains("quince_total"));
        // An ignore file that reveals a folder.
        write(&root, ".gitignore", "target/\n");
        let (text, _) = crate::mcp::ok(
            crate::mcp::call(&c, "search_docs", json!({"query": "marmalade roadmap", "mode": "keyword"})).await,
        );
        let t0 = Instant::now();
        let mut text = text;
        while !text.contains("notes/plan.md") {
            assert!(t0.elapsed() < Duration::from_secs(30), "the revealed folder never came: {text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
            text = crate::mcp::ok(
                crate::mcp::call(&c, "search_docs", json!({"query": "marmalade roadmap", "mode": "keyword"})).await,
            )
            .0;
        }
        // A checkout: a branch's files come and go in one batch.
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "two"]);
        git(&root, &["checkout", "-qb", "feature"]);
        for i in 0..40 {
            write(&root, &format!("src/feature/f{i}.rs"), &format!("/// Feature {i} of the kumquat launch.\npub fn kumquat_{i}() {{}}\n"));
        }
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "feature"]);
        until!("kumquat launch", |t: &str| t.contains("kumquat_"));
        git(&root, &["checkout", "-q", "main"]);
        until!("kumquat launch", |t: &str| !t.contains("kumquat_"));
        c.cancel().await.unwrap();

        // A restart with nothing changed serves at once, the same tree.
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(serve(), &log)).await.unwrap();
        let (text, _) = crate::mcp::ok(
            crate::mcp::call(&c, "search_code", json!({"query": "zanzibar till", "mode": "keyword"})).await,
        );
        assert!(text.contains("with_tax"), "{text}");
        c.cancel().await.unwrap();
    });
    // The secrets are nowhere: not in the home (bundles, caches), not in the logs.
    for secret in [AWS_KEY, PRIVATE_KEY] {
        assert_eq!(any_file_holds(&home, secret), None, "{secret} was written");
        assert!(!crate::mcp::read(&log).contains(secret));
    }
}

/// An edit is served before the whole tree is built again: the edited files alone are
/// built at once and served beside the library, which hides their old copies, for
/// search, symbols, references and outlines; a deleted file's hits go as fast. Here the
/// whole build is held for a minute (`slow-tree-build`), so every answer below comes
/// from the fresh edits.
#[test]
fn an_edit_is_searchable_before_the_whole_tree_is_built_again() {
    let t = tempfile::tempdir().unwrap();
    let (home, root) = (t.path().join("home"), t.path().join("orchard"));
    write(&root, "src/lib.rs", "/// Counts the apricots.\npub fn apricot_count() -> u32 {\n    3\n}\n");
    write(
        &root,
        "src/pick.rs",
        "/// Picks the ripe greengages.\npub fn pick_greengages() -> u32 {\n    apricot_count()\n}\n",
    );
    let p = root.to_str().unwrap();
    atlas_e2e::run(atlas(&home).args(["init", p, "--keyword-only", "--no-deps", "--client", "cursor"])).success();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rag.log");
    let mut cmd = crate::mcp::atlas(&["serve", "rag", "--project", p], &log);
    cmd.env("ATLAS_HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("ATLAS_BUNDLE")
        .env("ATLAS_FAILPOINT", "slow-tree-build:60000");
    let fs_log = logs.path().join("fs.log");
    let mut fs_cmd = crate::mcp::atlas(&["serve", "fs", "--project", p], &fs_log);
    fs_cmd
        .env("ATLAS_HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("ATLAS_BUNDLE")
        .env("ATLAS_FAILPOINT", "slow-tree-build:60000");
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log)).await.unwrap();
        let search = |q: &str| crate::mcp::call(&c, "search_code", json!({"query": q, "mode": "hybrid", "top_k": 5}));
        assert!(crate::mcp::ok(search("apricots").await).0.contains("apricot_count"));
        let fs = rmcp::ServiceExt::serve((), crate::mcp::child_transport(fs_cmd, &fs_log)).await.unwrap();
        // The watcher starts with the server: give it a moment before the first edit.
        tokio::time::sleep(Duration::from_millis(500)).await;
        write(&root, "src/lib.rs", "/// Counts the damsons.\npub fn damson_count() -> u32 {\n    3\n}\n");
        let t0 = Instant::now();
        let text = loop {
            let (text, _) = crate::mcp::ok(search("damsons").await);
            if text.contains("damson_count") {
                break text;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the edit never came: {text}\n{}", crate::mcp::read(&log));
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        eprintln!("the edit was searchable after {:?}, the whole build held", t0.elapsed());
        assert!(
            text.contains("orchard/src/lib.rs")
                && text.contains("edited since it was built are searched by keyword and symbols"),
            "{text}"
        );
        // The old copy is hidden everywhere: search, symbols, references, outline.
        let (text, _) = crate::mcp::ok(search("apricots").await);
        assert!(!text.contains("orchard/src/lib.rs") && !text.contains("Counts the apricots"), "{text}");
        let (_, v) = crate::mcp::ok(crate::mcp::call(&c, "find_symbol", json!({"name": "apricot_count"})).await);
        assert!(v["definitions"].as_array().is_none_or(|d| d.is_empty()), "{v}");
        let (_, v) = crate::mcp::ok(crate::mcp::call(&c, "find_symbol", json!({"name": "damson_count"})).await);
        assert_eq!(v["definitions"][0]["path"], "orchard/src/lib.rs", "{v}");
        let (_, v) =
            crate::mcp::ok(crate::mcp::call(&c, "get_file_outline", json!({"path": "orchard/src/lib.rs"})).await);
        assert_eq!(v["symbols"][0]["name"], "damson_count", "{v}");
        let (_, v) = crate::mcp::ok(crate::mcp::call(&c, "find_references", json!({"name": "apricot_count"})).await);
        // The unedited file still calls it.
        assert!(v.to_string().contains("orchard/src/pick.rs"), "{v}");
        // The fs server reads and greps the file as it is now.
        let (text, _) = crate::mcp::ok(crate::mcp::call(&fs, "read_file", json!({"path": "orchard/src/lib.rs"})).await);
        assert!(text.contains("damson_count") && !text.contains("apricot"), "{text}");
        let (text, _) = crate::mcp::ok(crate::mcp::call(&fs, "search", json!({"pattern": "damsons"})).await);
        assert!(text.contains("orchard/src/lib.rs"), "{text}");
        // A delete: its hits go at once too.
        std::fs::remove_file(root.join("src/pick.rs")).unwrap();
        let t0 = Instant::now();
        while crate::mcp::ok(search("greengages").await).0.contains("pick_greengages") {
            assert!(t0.elapsed() < Duration::from_secs(20), "the delete never came: {}", crate::mcp::read(&log));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = crate::mcp::call(&fs, "read_file", json!({"path": "orchard/src/pick.rs"})).await;
        assert!(crate::mcp::text(&r).contains("deleted or moved in the working tree"), "{}", crate::mcp::text(&r));
        fs.cancel().await.unwrap();
        c.cancel().await.unwrap();
    });
}

/// A working tree's index never leaves the machine: `publish` refuses a tree source.
#[test]
fn publish_refuses_a_working_trees_bundle() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "p/src/lib.rs", "pub fn f() {}\n");
    write(t.path(), "pipeline.yaml", "name: p\nsources:\n  p:\n    kind: tree\n    path: p\n");
    let out = std::process::Command::new(atlas_e2e::bin("atlas-pipeline"))
        .args(["--config", t.path().join("pipeline.yaml").to_str().unwrap(), "publish", "--to", "file:///tmp/x"])
        .env("ATLAS_HOME", t.path().join("home"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("never leaves this machine"), "{err}");
}

/// Bad input while serving: 1,000 files written at once are one or a few batches; a
/// build that dies mid-way (as a kill -9 leaves it) leaves the previous index serving;
/// two servers on one tree share its builds; the folder deleted under a running server
/// leaves its last index serving.
#[test]
fn a_burst_a_killed_build_two_servers_and_a_deleted_folder_leave_the_tree_served() {
    let t = tempfile::tempdir().unwrap();
    let (home, root) = (t.path().join("home"), t.path().join("lab"));
    write(&root, "src/lib.rs", "/// Measures the pomelo yield.\npub fn pomelo_yield() -> u32 {\n    7\n}\n");
    let p = root.to_str().unwrap();
    atlas_e2e::run(atlas(&home).args(["init", p, "--keyword-only", "--no-deps", "--client", "cursor"])).success();
    assert!(root.join(".cursor/mcp.json").is_file());

    // A build that aborts mid-way (the pipeline dies as a kill -9 leaves it): a one-line
    // error, and the previous index still answers.
    write(&root, "src/lib.rs", "/// Measures the tamarind yield.\npub fn tamarind_yield() -> u32 {\n    7\n}\n");
    let r =
        atlas_e2e::run(atlas(&home).args(["init", p, "--keyword-only"]).env("ATLAS_FAILPOINT", "crash-after:chunk:1"));
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("atlas-pipeline aborted (signal 6)"), "{}", r.stderr);
    let search = |q: &str| atlas_e2e::run(atlas(&home).args(["search", "--project", p, q, "--mode", "keyword"]));
    assert!(search("pomelo").success().stdout.contains("pomelo_yield"));

    let logs = tempfile::tempdir().unwrap();
    let (rag_log, fs_log) = (logs.path().join("rag.log"), logs.path().join("fs.log"));
    let serve = |which: &str, log: &Path| {
        let mut cmd = crate::mcp::atlas(&["serve", which, "--project", p], log);
        cmd.env("ATLAS_HOME", &home).env("XDG_CONFIG_HOME", home.join("config")).env_remove("ATLAS_BUNDLE");
        cmd
    };
    crate::mcp::rt().block_on(async {
        // Two servers started at once, as an editor starts them: one builds, both serve.
        let (rag, fs) = tokio::join!(
            rmcp::ServiceExt::serve((), crate::mcp::child_transport(serve("rag", &rag_log), &rag_log)),
            rmcp::ServiceExt::serve((), crate::mcp::child_transport(serve("fs", &fs_log), &fs_log)),
        );
        let (rag, fs) = (rag.unwrap(), fs.unwrap());
        let code = |q: &str| crate::mcp::call(&rag, "search_code", json!({"query": q, "mode": "keyword", "top_k": 3}));
        // The edit the killed build missed is caught up at start.
        let t0 = Instant::now();
        while !crate::mcp::ok(code("tamarind").await).0.contains("tamarind_yield") {
            assert!(t0.elapsed() < Duration::from_secs(30), "no catch-up: {}", crate::mcp::read(&rag_log));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // 1,000 files in one burst.
        let versions = || std::fs::read_dir(home.join("bundles/project+lab")).unwrap().count();
        let before = std::fs::read_to_string(home.join("bundles/project+lab/current")).ok();
        for i in 0..1000 {
            write(
                &root,
                &format!("src/burst/b{i}.rs"),
                &format!("/// Burst file {i}.\npub fn burst_{i}() -> u32 {{\n    {i}\n}}\n"),
            );
        }
        let t0 = Instant::now();
        loop {
            let (text, _) = crate::mcp::ok(crate::mcp::call(&rag, "find_symbol", json!({"name": "burst_999"})).await);
            if text.contains("burst_999")
                && crate::mcp::ok(crate::mcp::call(&rag, "find_symbol", json!({"name": "burst_0"})).await)
                    .0
                    .contains("b0.rs")
            {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "the burst never came: {}", crate::mcp::read(&rag_log));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!(
            "1,000 files searchable after {:?}; {} entries in the library's folder (current was {before:?})",
            t0.elapsed(),
            versions()
        );
        // The fs server follows the same builds: it lists the new files.
        let t0 = Instant::now();
        loop {
            let r = crate::mcp::call(&fs, "read_file", json!({"path": "lab/src/burst/b999.rs"})).await;
            if r.is_error != Some(true) && crate::mcp::text(&r).contains("burst_999") {
                break;
            }
            // It follows the whole build (a new file is listed once that holds it).
            assert!(t0.elapsed() < Duration::from_secs(120), "fs never followed: {}", crate::mcp::text(&r));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // One writer: the two logs do not both build.
        let built = |log: &Path| crate::mcp::read(log).matches("indexed as").count();
        assert!(
            built(&rag_log) == 0 || built(&fs_log) == 0,
            "both servers built:\n{}\n{}",
            crate::mcp::read(&rag_log),
            crate::mcp::read(&fs_log)
        );
        // The folder deleted under the running servers: the last index still answers.
        std::fs::remove_dir_all(&root).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(crate::mcp::ok(code("tamarind").await).0.contains("tamarind_yield"));
        rag.cancel().await.unwrap();
        fs.cancel().await.unwrap();
    });
}

/// The same stages and the same ranking (issue 69, item 3): a real repository indexed
/// live by `atlas init`, edited while served, and, once settled, searched beside a bundle
/// `atlas-pipeline` builds from the same tree: the first ten hits are the same in every
/// mode. Needs the corpora (ATLAS_CORPORA) and the model.
#[test]
fn the_live_index_once_settled_ranks_as_the_pipelines_bundle_of_the_same_tree() {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA") else {
        atlas_e2e::skip("ATLAS_CORPORA is unset (set it to ../shared/corpora)");
        return;
    };
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = crate::distribution::home(&t.path().join("home"));
    let root = t.path().join("cml");
    // concrete-ml's deployment and serialization code, and its guides: a tree the
    // development set asks about.
    let repo = Path::new(&corpora).join("concrete-ml/repo");
    for sub in ["src/concrete/ml/deployment", "src/concrete/ml/common/serialization", "docs/guides"] {
        let (from, to) = (repo.join(sub), root.join(sub));
        for e in std::fs::read_dir(&from).unwrap().flatten().filter(|e| e.path().is_file()) {
            std::fs::create_dir_all(&to).unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    let p = root.to_str().unwrap();
    atlas_e2e::run(atlas(&home).args(["init", p, "--no-deps", "--client", "claude-code"])).success();
    // An edit while served, then settled: the server's watcher rebuilds it.
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rag.log");
    let mut cmd = crate::mcp::atlas(&["serve", "rag", "--project", p], &log);
    cmd.env("ATLAS_HOME", &home).env("XDG_CONFIG_HOME", home.join("config")).env_remove("ATLAS_BUNDLE");
    let edited = root.join("src/concrete/ml/deployment/fhe_client_server.py");
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log)).await.unwrap();
        let mut text = std::fs::read_to_string(&edited).unwrap();
        text.push_str("\n\ndef quokka_reconcile(keys):\n    \"\"\"Reconciles the quokka evaluation keys.\"\"\"\n    return keys\n");
        std::fs::write(&edited, text).unwrap();
        let t0 = Instant::now();
        loop {
            let r = crate::mcp::call(&c, "find_symbol", json!({"name": "quokka_reconcile"})).await;
            if crate::mcp::ok(r).0.contains("fhe_client_server.py") {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "the edit never came: {}", crate::mcp::read(&log));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Settled: the vectors pass of the same batch has run too.
        let t0 = Instant::now();
        while !crate::mcp::read(&log).contains("with vectors") {
            assert!(t0.elapsed() < Duration::from_secs(120), "never embedded: {}", crate::mcp::read(&log));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        c.cancel().await.unwrap();
    });
    // The pipeline's own bundle of the same tree, named as `atlas init` names it.
    let cfg = t.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!("name: project+cml\nsources:\n  cml:\n    kind: tree\n    path: {p:?}\nstages:\n  pack:\n    version: live\n"),
    )
    .unwrap();
    let out = t.path().join("built");
    let r = atlas_e2e::run(
        std::process::Command::new(atlas_e2e::bin("atlas-pipeline"))
            .args(["--config", cfg.to_str().unwrap(), "run", "--out", out.to_str().unwrap()])
            .env("ATLAS_HOME", &home),
    );
    r.success();
    let bundle = out.join("bundle");
    let questions: Vec<String> =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../xtask/eval/code-concrete-ml.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["query"].as_str().map(str::to_owned))
            .take(12)
            .collect();
    assert!(questions.len() >= 10);
    let top = |args: &[&str], q: &str, mode: &str| -> Vec<String> {
        let r = atlas_e2e::run(atlas(&home).arg("search").args(args).args([q, "--mode", mode, "-k", "10", "--json"]))
            .success();
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v["hits"].as_array().unwrap().iter().map(|h| format!("{} {}", h["chunk_id"], h["citation"])).collect()
    };
    for q in &questions {
        for mode in ["keyword", "vector", "hybrid"] {
            let live = top(&["--project", p], q, mode);
            let built = top(&["--bundle", bundle.to_str().unwrap()], q, mode);
            assert!(!live.is_empty(), "{mode}: {q}");
            assert_eq!(live, built, "{mode}: {q}");
        }
    }
}
