//! Several libraries behind one server: two versions of the fixture docs and a code
//! bundle, served together by `atlas serve rag` and `atlas serve fs` over stdio and
//! driven by a real MCP client.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use atlas_e2e::{bin, pipeline, run, write_fixture_code, write_fixture_site};
use atlas_runtime::{Bundle, OpenOptions, SearchOptions};
use serde_json::{Value, json};

use crate::mcp::{call, err, ok, rt, stdio_client};

/// A bundle built from `site` pages and/or the fixture code, as `name` `version`.
fn build(work: &Path, name: &str, version: &str, docs: Option<&[(&str, &str)]>, code: bool) -> PathBuf {
    let mut sources = String::new();
    if let Some(pages) = docs {
        write_fixture_site(&work.join("site"));
        for (rel, text) in pages {
            std::fs::write(work.join("site").join(rel), text).unwrap();
        }
        sources.push_str("  site:\n    kind: local\n    path: site\n");
    }
    if code {
        write_fixture_code(&work.join("code"));
        sources.push_str("  code:\n    kind: local\n    path: code\n    include: [\"**/*.py\", \"**/*.rs\"]\n");
    }
    let cfg = work.join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!(
            "name: {name}\nsources:\n{sources}stages:\n  pack:\n    version: {version}\n    description: {name} {version} for the libraries test\n"
        ),
    )
    .unwrap();
    run(pipeline().arg("-c").arg(&cfg).args(["run", "--archive"])).success();
    work.join(".atlas/build/bundle")
}

/// The archive `build` wrote beside `bundle`.
pub(crate) fn archive(bundle: &Path) -> PathBuf {
    let m: Value = serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    bundle.with_file_name(format!("{}-{}.tar.zst", m["name"].as_str().unwrap(), m["version"].as_str().unwrap()))
}

/// The version 2 install page: a flag version 1 does not have (and an American
/// spelling, for the database's respelling).
const V2_INSTALL: &str = "# Install\n\n## With Helm\n\n```bash\nhelm repo add x https://x.test\nhelm upgrade --install x x/x --atomic\n```\n\nVersion 2 installs atomically: a failed upgrade rolls back on its own and is never finalized half-way.\n";

/// fixture 1.0.0 (the fixture site), fixture 2.0.0 (its install page rewritten) and
/// portfolio 0.3.0 (the fixture code), built once.
pub(crate) fn libraries() -> Option<&'static [PathBuf; 3]> {
    static DIRS: OnceLock<(tempfile::TempDir, [PathBuf; 3])> = OnceLock::new();
    if !crate::embed::model_ready() {
        return None;
    }
    let (_, dirs) = DIRS.get_or_init(|| {
        let work = tempfile::tempdir().unwrap();
        let w = |n: &str| {
            let d = work.path().join(n);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let v1 = build(&w("v1"), "fixture", "1.0.0", Some(&[]), false);
        let v2 = build(&w("v2"), "fixture", "2.0.0", Some(&[("guides/install.md", V2_INSTALL)]), false);
        let code = build(&w("code"), "portfolio", "0.3.0", None, true);
        (work, [v1, v2, code])
    });
    Some(dirs)
}

fn libs(hits: &Value) -> Vec<String> {
    hits["hits"].as_array().unwrap().iter().map(|h| h["library"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn one_rag_server_serves_two_versions_and_a_code_bundle() {
    let Some([v1, v2, code]) = libraries() else { return };
    let logs = tempfile::tempdir().unwrap();
    let args: Vec<&str> = vec![
        "serve",
        "rag",
        "--bundle",
        v1.to_str().unwrap(),
        "--bundle",
        v2.to_str().unwrap(),
        "--bundle",
        code.to_str().unwrap(),
    ];
    rt().block_on(async {
        let c = stdio_client(&args, &logs.path().join("rag.log")).await;
        assert_eq!(c.peer_info().unwrap().server_info.clone().unwrap().name, "atlas-rag");

        // Library listing.
        let (t, v) = ok(call(&c, "list_libraries", json!({})).await);
        let listed: Vec<&str> =
            v["libraries"].as_array().unwrap().iter().map(|l| l["library"].as_str().unwrap()).collect();
        assert_eq!(listed, ["fixture@1.0.0", "fixture@2.0.0", "portfolio@0.3.0"], "{t}");
        let l = &v["libraries"][0];
        assert_eq!(l["versions"], json!(["1.0.0", "2.0.0"]));
        assert_eq!(l["description"], "fixture 1.0.0 for the libraries test");
        assert!(l["by_kind"]["docs"].as_u64().unwrap() > 0 && l["built_age_days"].as_i64().is_some(), "{l}");
        assert_eq!(l["sources"][0]["name"], "site");
        assert!(v["libraries"][2]["by_kind"]["code"].as_u64().unwrap() > 0);
        assert!(t.contains("portfolio@0.3.0"), "{t}");

        // A pinned search stays in its version; a range picks the highest match.
        let q = "install atomically, rolling back a failed upgrade";
        let (_, v) = ok(call(&c, "search_docs", json!({"query": q, "library": "fixture@1.0.0", "top_k": 5})).await);
        assert!(libs(&v).iter().all(|l| l == "fixture@1.0.0"), "{v}");
        assert!(!v.to_string().contains("--atomic"), "version 1 has no --atomic");
        for pin in ["fixture@2.0.0", "fixture@^2", "fixture@2", "fixture@>=1.5, <3", "fixture"] {
            let (_, v) = ok(call(&c, "search_docs", json!({"query": q, "library": pin, "top_k": 3})).await);
            assert!(libs(&v).iter().all(|l| l == "fixture@2.0.0"), "{pin}: {v}");
            assert_eq!(v["hits"][0]["path"], "site/guides/install.md", "{pin}");
        }
        let (_, v) = ok(call(&c, "search_docs", json!({"query": q, "library": "fixture@1", "top_k": 3})).await);
        assert!(libs(&v).iter().all(|l| l == "fixture@1.0.0"), "{v}");

        // Across libraries: both versions take turns; code comes from the code bundle.
        let (t, v) = ok(call(&c, "search_docs", json!({"query": "install with helm", "top_k": 6})).await);
        let found = libs(&v);
        assert!(found.contains(&"fixture@1.0.0".to_owned()) && found.contains(&"fixture@2.0.0".to_owned()), "{t}");
        assert!(t.contains("fixture@2.0.0"), "the text names each hit's library: {t}");
        let (_, v) = ok(call(&c, "search_code", json!({"query": "InvoiceBuilder add_line"})).await);
        assert_eq!(v["hits"][0]["library"], "portfolio@0.3.0");
        assert_eq!(v["hits"][0]["path"], "code/billing/invoice.py");

        // Errors: an unknown version names the served ones; nothing is substituted.
        let e = err(call(&c, "search_docs", json!({"query": q, "library": "fixture@3.0.0"})).await);
        assert!(e.contains("fixture@3.0.0 is not served") && e.contains("1.0.0, 2.0.0"), "{e}");
        let e = err(call(&c, "search_docs", json!({"query": q, "library": "fixture@1.0.1"})).await);
        assert!(e.contains("is not served"), "a full version is exact: {e}");
        let e = err(call(&c, "search_docs", json!({"query": q, "library": "fixture@^5"})).await);
        assert!(e.contains("versions served are 1.0.0, 2.0.0"), "{e}");
        let e = err(call(&c, "search_code", json!({"query": q, "library": "nope"})).await);
        assert!(e.contains("no library \"nope\"") && e.contains("portfolio@0.3.0"), "{e}");
        let e = err(call(&c, "search_docs", json!({"query": q, "library": "fixture@>=banana"})).await);
        assert!(e.contains("not a version range"), "{e}");

        // get_chunk: an id both versions hold needs its library.
        let (_, v) = ok(call(&c, "search_docs", json!({"query": "how many pods", "library": "fixture@1.0.0"})).await);
        let id = v["hits"][0]["chunk_id"].as_str().unwrap().to_owned();
        let e = err(call(&c, "get_chunk", json!({"id": id})).await);
        assert!(e.contains("several libraries"), "{e}");
        let (_, v) = ok(call(&c, "get_chunk", json!({"id": id, "library": "fixture@1.0.0"})).await);
        assert_eq!(v["chunk"]["library"], "fixture@1.0.0");
        let e = err(call(&c, "get_bundle_info", json!({})).await);
        assert!(e.contains("list_libraries"), "{e}");
        let (_, v) = ok(call(&c, "get_bundle_info", json!({"library": "portfolio"})).await);
        assert_eq!(v["name"], "portfolio");
        c.cancel().await.unwrap();
    });
}

#[test]
fn one_fs_server_takes_the_library_as_the_first_path_segment() {
    let Some([v1, v2, code]) = libraries() else { return };
    let logs = tempfile::tempdir().unwrap();
    let args = ["serve", "fs", "--bundle", v1.to_str().unwrap(), "--bundle", v2.to_str().unwrap()];
    let mut args = args.to_vec();
    args.extend(["--bundle", code.to_str().unwrap()]);
    rt().block_on(async {
        let c = stdio_client(&args, &logs.path().join("fs.log")).await;
        let (_, v) = ok(call(&c, "list_publications", json!({})).await);
        let pubs: Vec<&str> =
            v["publications"].as_array().unwrap().iter().map(|p| p["publication"].as_str().unwrap()).collect();
        assert!(pubs.contains(&"fixture@1.0.0/site/guides") && pubs.contains(&"portfolio@0.3.0/code/net"), "{pubs:?}");
        let (_, v) = ok(call(&c, "list_files", json!({"publication": "fixture@2.0.0/site/guides"})).await);
        assert_eq!(
            v["files"],
            json!(["fixture@2.0.0/site/guides/configure.md", "fixture@2.0.0/site/guides/install.md"])
        );
        let (_, v) = ok(call(&c, "read_file", json!({"path": "fixture@2.0.0/site/guides/install.md"})).await);
        assert!(v["text"].as_str().unwrap().contains("--atomic"));
        assert_eq!(v["path"], "fixture@2.0.0/site/guides/install.md");
        let (_, v) = ok(call(&c, "read_file", json!({"path": "fixture@1.0.0/site/guides/install.md"})).await);
        assert!(!v["text"].as_str().unwrap().contains("--atomic"));
        // A name alone works when one version of it is served.
        let (_, v) = ok(call(&c, "read_file", json!({"path": "portfolio/code/net/retry.rs"})).await);
        assert!(v["text"].as_str().unwrap().contains("parse_retry_after"));
        let e = err(call(&c, "read_file", json!({"path": "fixture/site/README.md"})).await);
        assert!(e.contains("several versions") && e.contains("fixture@1.0.0"), "{e}");
        let e = err(call(&c, "read_file", json!({"path": "nope@1/site/README.md"})).await);
        assert!(e.contains("does not start with a served library"), "{e}");
        let e = err(call(&c, "read_file", json!({"path": "fixture@1.0.0/../../etc/passwd"})).await);
        assert!(e.contains("`..` is not allowed"), "{e}");
        let (_, v) = ok(call(&c, "search", json!({"pattern": "--atomic"})).await);
        assert_eq!(v["matches"][0]["path"], "fixture@2.0.0/site/guides/install.md");
        assert_eq!(v["matches"].as_array().unwrap().len(), 1);
        let (_, v) = ok(call(&c, "search", json!({"pattern": "helm repo add", "glob": "fixture@1.0.0/**"})).await);
        assert!(
            v["matches"].as_array().unwrap().iter().all(|m| m["path"].as_str().unwrap().starts_with("fixture@1.0.0/"))
        );
        let (_, v) = ok(call(&c, "get_release_info", json!({})).await);
        assert_eq!(v["libraries"].as_array().unwrap().len(), 3);
        c.cancel().await.unwrap();
    });
}

#[test]
fn two_bundles_with_the_same_name_and_version_are_refused() {
    let Some([v1, ..]) = libraries() else { return };
    let b = v1.to_str().unwrap();
    for which in ["rag", "fs"] {
        let r = run(std::process::Command::new(bin("atlas")).args(["serve", which, "--bundle", b, "--bundle", b]));
        assert_eq!(r.code, Some(2), "{which}: {}", r.stderr);
        assert!(r.stderr.contains("two bundles are fixture@1.0.0"), "{which}: {}", r.stderr);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    }
}

/// Bundles of one model share one loaded query model; a bundle that names other
/// weights gets its own (here a model that is not provisioned: that library fails
/// alone, with a warning, and the others answer).
#[test]
fn bundles_share_a_query_model_by_its_sha256() {
    let Some([v1, v2, _]) = libraries() else { return };
    let opts = OpenOptions::default();
    let a = Bundle::open(v1, opts.clone()).unwrap();
    let b = Bundle::open(v2, opts.clone()).unwrap();
    let q = SearchOptions::default();
    a.search("install with helm", &q).unwrap();
    b.search("install with helm", &q).unwrap();
    assert_eq!(opts.models.loaded(), 1);

    // A copy of v1 whose manifest names other weights, as 9.0.0.
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    atlas_e2e::copy_tree(v1, &other);
    let mpath = other.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["model"]["sha256"] = json!("0".repeat(64));
    m["version"] = json!("9.0.0");
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let c = Bundle::open(&other, opts.clone()).unwrap();
    let e = c.search("install with helm", &q).unwrap_err().to_string();
    assert!(e.contains("model mismatch"), "{e}");
    assert_eq!(opts.models.loaded(), 1, "the shared model was not replaced");

    let logs = tempfile::tempdir().unwrap();
    let args = ["serve", "rag", "--bundle", v2.to_str().unwrap(), "--bundle", other.to_str().unwrap()];
    rt().block_on(async {
        let c = stdio_client(&args, &logs.path().join("rag.log")).await;
        let (t, v) = ok(call(&c, "search_docs", json!({"query": "install with helm"})).await);
        // A bundle of another model is served by keyword (issue 49), and says why; its
        // hits compete on their keyword evidence (issue 68).
        assert_eq!(v["hits"][0]["library"], "fixture@2.0.0", "{v}");
        assert!(libs(&v).iter().any(|l| l == "fixture@9.0.0"), "{v}");
        assert!(
            t.contains("warning: fixture@9.0.0 was searched by keyword only") && t.contains("model mismatch"),
            "{t}"
        );
        let (t, _) =
            ok(call(&c, "search_docs", json!({"query": "install with helm", "library": "fixture@9.0.0"})).await);
        assert!(t.contains("model mismatch"), "{t}");
        let (_, v) =
            ok(call(&c, "search_docs", json!({"query": "helm", "mode": "keyword", "library": "fixture@9.0.0"})).await);
        assert!(libs(&v).iter().all(|l| l == "fixture@9.0.0"), "keyword search needs no model: {v}");
        c.cancel().await.unwrap();
    });
}

#[test]
fn the_web_page_searches_and_asks_across_libraries() {
    let Some([v1, v2, code]) = libraries() else { return };
    let web = crate::web::Web::start_with(&[v1, v2, code], &[]);
    // The API, pinned and merged.
    let (status, _, body) = web.get("/api/search?q=install+atomically&library=fixture@1.0.0&k=5");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(libs(&v).iter().all(|l| l == "fixture@1.0.0"), "{v}");
    let (status, _, body) = web.get("/api/search?q=install+atomically&library=fixture@7");
    assert_eq!(status, 400);
    assert!(body.contains("versions served are 1.0.0, 2.0.0"), "{body}");
    // The page: a Library facet, each hit's library, source links that carry it.
    let (status, _, page) = web.get("/?q=install+with+helm");
    assert_eq!(status, 200);
    assert!(page.contains("<h3>Library</h3>") && page.contains("fixture@2.0.0"), "{page}");
    let (_, _, narrowed) = web.get("/?q=install+with+helm&library=fixture%402.0.0&partial=1");
    assert!(!narrowed.contains(r#"<span class="badge lib">fixture@1.0.0</span>"#), "{narrowed}");
    assert!(narrowed.contains(r#"<span class="badge lib">fixture@2.0.0</span>"#), "{narrowed}");
    // The source view needs the library when two hold the chunk.
    let v: Value = serde_json::from_str(&web.get("/api/search?q=atomically&library=fixture@2.0.0").2).unwrap();
    let id = v["hits"][0]["chunk_id"].as_str().unwrap().to_owned();
    let (status, _, html) = web.get(&format!("/source?id={id}&library=fixture%402.0.0"));
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("--atomic"), "{html}");
    // Ask answers from every library, each source with its own.
    let (status, _, body) = web.post("/api/ask", &[], "q=How+do+I+install+with+Helm%3F");
    assert_eq!(status, 200, "{body}");
    let a: Value = serde_json::from_str(&body).unwrap();
    let sources: Vec<&str> =
        a["sources"].as_array().unwrap().iter().map(|s| s["library"].as_str().unwrap_or("")).collect();
    assert!(sources.contains(&"fixture@1.0.0") && sources.contains(&"fixture@2.0.0"), "{a}");
}

/// `--all` serves every installed bundle at its current version; `NAME@VERSION` serves
/// a kept one beside it.
#[test]
fn all_installed_bundles_and_kept_versions_behind_one_server() {
    let Some([v1, v2, code]) = libraries() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let h = crate::distribution::home(&tmp.path().join("h"));
    for b in [v1, code, v2] {
        let a = archive(b);
        let sha = std::fs::read_to_string(a.with_extension("zst.sha256")).unwrap();
        let sha = sha.split_whitespace().next().unwrap().to_owned();
        run(crate::distribution::atlas(&h).arg("install").arg(&a).args(["--sha256", &sha])).success();
    }
    let logs = tempfile::tempdir().unwrap();
    let listed = |args: &[&str]| {
        let log = logs.path().join("rag.log");
        let mut cmd = crate::mcp::atlas(args, &log);
        cmd.env("ATLAS_HOME", &h).env("XDG_CONFIG_HOME", h.join("config")).env_remove("ATLAS_BUNDLE");
        rt().block_on(async {
            let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log))
                .await
                .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&log)));
            let (_, v) = ok(call(&c, "list_libraries", json!({})).await);
            // A kept version that is not served: the error names the installed ones.
            let e = err(call(&c, "search_docs", json!({"query": "helm", "library": "fixture@0.9.0"})).await);
            assert!(e.contains("installed: 1.0.0, 2.0.0") && e.contains("--bundle fixture@VERSION"), "{e}");
            c.cancel().await.unwrap();
            let mut l: Vec<String> =
                v["libraries"].as_array().unwrap().iter().map(|l| l["library"].as_str().unwrap().to_owned()).collect();
            l.sort();
            l
        })
    };
    assert_eq!(listed(&["serve", "rag", "--all"]), ["fixture@2.0.0", "portfolio@0.3.0"]);
    assert_eq!(
        listed(&["serve", "rag", "--bundle", "fixture", "--bundle", "fixture@1.0.0"]),
        ["fixture@1.0.0", "fixture@2.0.0"]
    );
    let r = run(crate::distribution::atlas(&h).args(["serve", "rag", "--bundle", "fixture@9.9.9"]));
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("neither a bundle folder nor an installed bundle"), "{}", r.stderr);
}

/// A bundle of `pages` alone (no fixture site), as `name` 1.0.0; without vectors
/// (built keyword-first, as `atlas sync`'s first pass builds) when `keyword_only`.
fn build_pages(work: &Path, name: &str, pages: &[(String, String)], keyword_only: bool) -> PathBuf {
    let site = work.join("site");
    std::fs::create_dir_all(&site).unwrap();
    for (rel, text) in pages {
        std::fs::write(site.join(rel), text).unwrap();
    }
    let embed = if keyword_only { "  embed:\n    enabled: false\n" } else { "" };
    let cfg = work.join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!(
            "name: {name}\nsources:\n  site:\n    kind: local\n    path: site\nstages:\n{embed}  pack:\n    version: 1.0.0\n"
        ),
    )
    .unwrap();
    run(pipeline().arg("-c").arg(&cfg).arg("run")).success();
    work.join(".atlas/build/bundle")
}

/// A settings library with many pages near the question, each a little off it: it
/// leads a merged search by volume.
fn settings_pages() -> Vec<(String, String)> {
    let topics = [
        ("env-files", "Settings read variables from a .env file as well as the environment"),
        ("env-prefix", "Settings read environment variables with a prefix from a .env file"),
        ("env-nested", "Nested settings read environment variables and .env file values with a delimiter"),
        ("env-priority", "Settings values from the environment and from a .env file, and which one is used"),
        ("env-secrets", "Settings read secrets from files and variables from a .env file"),
        ("env-case", "Settings match environment variable names in a .env file case-insensitively"),
        ("env-parsing", "Settings parse complex values from environment variables and a .env file as JSON"),
        ("env-multiple", "Settings load several .env files, the last one loaded winning"),
    ];
    topics
        .iter()
        .map(|(file, line)| {
            (
                format!("{file}.md"),
                format!("# {line}\n\n{line}. Declare the settings class, point `env_file` at the .env file, and each field is loaded from the environment variables or the file.\n"),
            )
        })
        .collect()
}

/// sirv's README, the only chunk anywhere that names it.
const SIRV_README: &str = "# sirv\n\nThe optimized and lightweight middleware for serving requests to static assets.\n\n## Single-page applications\n\nWith `single: true`, sirv serves the `index.html` file for any request that matches no file, so that a single-page application routes on the client. Unknown paths fall back to the app's entry page instead of a 404.\n";

#[test]
fn a_library_without_vectors_competes_on_its_keyword_evidence_and_its_words_are_never_called_unseen() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = |n: &str| {
        let d = work.path().join(n);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let settings = build_pages(&dir("settings"), "settings", &settings_pages(), false);
    let sirv = build_pages(&dir("sirv"), "sirv", &[("README.md".into(), SIRV_README.into())], true);
    let q = "serve index.html for unknown routes of a single-page app with sirv";

    // The runtime: sirv is searched by keyword, with a keyword-only confidence.
    let open = |d: &Path| std::sync::Arc::new(Bundle::open(d, OpenOptions::default()).unwrap());
    let opts = SearchOptions { top_k: 5, ..SearchOptions::default() };
    let merged = atlas_runtime::search::search_all(&[open(&settings), open(&sirv)], q, &opts).unwrap();
    assert!(matches!(merged.skipped[..], [atlas_runtime::search::Skipped { index: 1, .. }]), "{:?}", merged.skipped);
    let s = &merged.searched;
    assert_eq!(s.hits[0].library, "sirv@1.0.0", "{:?}", s.hits);
    assert!(s.signals.keyword_only && s.confidence > 0.0, "{:?} {}", s.signals, s.confidence);
    assert!(!s.unseen_words.iter().any(|w| w == "sirv"), "{:?}", s.unseen_words);

    // The rag server says where the confidence comes from, and never that no chunk
    // holds a word only sirv's chunk holds.
    let logs = tempfile::tempdir().unwrap();
    let args = ["serve", "rag", "--bundle", settings.to_str().unwrap(), "--bundle", sirv.to_str().unwrap()];
    rt().block_on(async {
        let c = stdio_client(&args, &logs.path().join("rag.log")).await;
        let (t, v) = ok(call(&c, "search_docs", json!({"query": q, "top_k": 5})).await);
        assert_eq!(v["hits"][0]["library"], "sirv@1.0.0", "{t}");
        assert_eq!(v["confidence"]["keyword_only"], true, "{t}");
        assert!(v["confidence"]["score"].as_f64().unwrap() > 0.0, "{t}");
        assert!(t.contains("from keywords only") && t.contains("sirv@1.0.0 was searched by keyword only"), "{t}");
        // A question the settings library leads, and no library answers: the refusal
        // names no word that sirv's chunk holds.
        let q = "which settings does sirv read from a .env file";
        let (t, v) = ok(call(&c, "search_docs", json!({"query": q, "top_k": 5})).await);
        assert_eq!(v["hits"][0]["library"], "settings@1.0.0", "{t}");
        assert!(t.starts_with("nothing served answers this confidently"), "{t}");
        assert!(!t.contains("no chunk holds \"sirv\"") && !t.contains("\"sirv\" or"), "{t}");
        let unseen = v["confidence"]["unseen_words"].as_array().cloned().unwrap_or_default();
        assert!(!unseen.iter().any(|w| w == "sirv"), "{t}");
        c.cancel().await.unwrap();
    });
}
