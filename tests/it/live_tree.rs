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
        // Nothing ignored and no secret is served.
        for q in ["ignored_build_output", "marmalade", AWS_KEY, PRIVATE_KEY] {
            let (text, _) = crate::mcp::ok(search(q).await);
            let (docs, _) =
                crate::mcp::ok(crate::mcp::call(&c, "search_docs", json!({"query": q, "mode": "keyword"})).await);
            assert!(!docs.contains(q) || docs.starts_with("no hits"), "{q}: {docs}");
            assert!(!text.contains(q) || text.starts_with("no hits"), "{q}: {text}");
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
