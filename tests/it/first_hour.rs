//! The first hour of a user and an agent (issue 49, the parts landed so far): a
//! server that starts without the model, numbers sent as text, one name for a chunk's
//! id, schemas without integer formats, install records that name absolute paths.

use rmcp::ServiceExt as _;
use serde_json::json;

use crate::mcp::{Client, call, child_transport, ok, read, rt};

/// Without ONNX Runtime and the model (an empty ATLAS_HOME), `serve rag` starts and
/// answers a hybrid search with keyword hits and a line naming `atlas setup`;
/// `get_bundle_info` lists keyword as its only mode.
#[test]
fn a_server_without_a_model_answers_keyword_searches() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("rag.log");
    let b = bundle.display().to_string();
    rt().block_on(async {
        let mut cmd = crate::mcp::atlas(&["serve", "rag", "--bundle", &b], &log);
        cmd.env("ATLAS_HOME", t.path().join("empty-home")).env_remove("ORT_DYLIB_PATH");
        let c: Client = ().serve(child_transport(cmd, &log)).await.unwrap_or_else(|e| panic!("{e}: {}", read(&log)));
        let (text, v) = ok(call(&c, "search_docs", json!({"query": "install with helm"})).await);
        assert!(!v["hits"].as_array().unwrap().is_empty(), "{text}");
        assert!(text.contains("searched by keyword only") && text.contains("atlas setup"), "{text}");
        let (_, info) = ok(call(&c, "get_bundle_info", json!({})).await);
        assert_eq!(info["modes"], json!(["keyword"]), "{info}");
        c.cancel().await.unwrap();
    });
    assert!(read(&log).contains("by keyword only"), "the log says it once: {}", read(&log));
}

/// `top_k: "3"` (a number as text) is taken; a hit's `chunk_id` is what `get_chunk`
/// takes; no input or output schema holds an integer `format`.
#[test]
fn numbers_as_text_one_chunk_id_and_schemas_without_integer_formats() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let t = tempfile::tempdir().unwrap();
    let b = bundle.display().to_string();
    rt().block_on(async {
        for server in ["rag", "fs"] {
            let c = crate::mcp::stdio_client(&["serve", server, "--bundle", &b], &t.path().join("s.log")).await;
            for tool in c.list_all_tools().await.unwrap() {
                let schemas = format!("{:?}{:?}", tool.input_schema, tool.output_schema);
                assert!(!schemas.contains("\"format\": String(\"uint"), "{}: {schemas}", tool.name);
                let input = serde_json::to_string(&*tool.input_schema).unwrap();
                let output = serde_json::to_string(&tool.output_schema).unwrap();
                assert!(!input.contains("\"format\":\"uint") && !output.contains("\"format\":\"uint"), "{}", tool.name);
            }
            if server == "rag" {
                let (_, v) = ok(call(&c, "search_docs", json!({"query": "install with helm", "top_k": "3"})).await);
                assert_eq!(v["hits"].as_array().unwrap().len(), 3, "{v}");
                let id = v["hits"][0]["chunk_id"].as_str().unwrap();
                let (_, got) = ok(call(&c, "get_chunk", json!({"chunk_id": id, "max_tokens": "2000"})).await);
                assert_eq!(got["chunk"]["chunk_id"], id);
                let e = crate::mcp::err(call(&c, "search_docs", json!({"query": "x", "top_k": "three"})).await);
                assert!(e.contains("whole number"), "{e}");
            }
            c.cancel().await.unwrap();
        }
    });
}

/// `atlas install ./x.tar.zst` records the archive's absolute path, so `atlas update`
/// from another folder finds it; `atlas doctor` calls the bundle built here.
#[test]
fn an_install_from_a_relative_path_records_it_absolute() {
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let archive = crate::package::fixture_archive();
    let dir = archive.parent().unwrap();
    let name = archive.file_name().unwrap().to_str().unwrap();
    let h = crate::distribution::home(&t.path().join("home"));
    let r = crate::distribution::atlas(&h).current_dir(dir).args(["install", &format!("./{name}")]).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    // The editor config it prints leads with this binary's absolute path: the form
    // that works here (no launcher holds a published version on a build machine).
    let printed = String::from_utf8_lossy(&r.stdout);
    let exe = serde_json::to_string(&atlas_e2e::bin("atlas").display().to_string()).unwrap();
    let lead = printed.split("\n# ").nth(1).unwrap_or_default();
    assert!(lead.starts_with("With this binary:") && lead.contains(&exe), "{printed}");
    let records = h.join("bundles/fixture/.installs");
    let rec = std::fs::read_dir(&records).unwrap().flatten().next().unwrap().path();
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(rec).unwrap()).unwrap();
    assert!(std::path::Path::new(rec["source"].as_str().unwrap()).is_absolute(), "{rec}");
    let r = crate::distribution::atlas(&h).current_dir(t.path()).args(["update", "fixture"]).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    // doctor: built here, not a missing signature.
    let d = crate::distribution::atlas(&h).arg("doctor").output().unwrap();
    let out = String::from_utf8_lossy(&d.stdout);
    let line = out.lines().find(|l| l.contains("bundle fixture")).unwrap_or_default();
    assert!(line.contains("built here") && !line.contains("signature not checked"), "{out}");
}

/// Every vector and hybrid search reply says how sure it is (the calibrated confidence
/// `atlas ask` refuses below) as a number and a word; an out-of-scope question says
/// first, in one line, that nothing answers it confidently and which of its words no
/// chunk holds; `atlas ask` refuses it too, and says the same.
#[test]
fn search_replies_say_how_sure_they_are() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let t = tempfile::tempdir().unwrap();
    let b = bundle.display().to_string();
    rt().block_on(async {
        let c = crate::mcp::stdio_client(&["serve", "rag", "--bundle", &b], &t.path().join("rag.log")).await;
        let (text, v) = ok(call(&c, "search_docs", json!({"query": "How do I bake sourdough bread?"})).await);
        assert_eq!(v["confidence"]["level"], "none", "{v}");
        assert!(text.starts_with("nothing served answers this confidently"), "{text}");
        // Which of its words no chunk holds, as written: what the agent can rephrase.
        let unseen = v["confidence"]["unseen_words"].as_array().unwrap_or_else(|| panic!("{v}"));
        assert!(unseen.iter().any(|w| w == "sourdough") && !unseen.iter().any(|w| w == "How"), "{v}");
        let first = text.lines().next().unwrap_or_default();
        assert!(first.contains("no chunk holds") && first.contains("\"sourdough\""), "{text}");
        // A run of letters too long to be a word a reader rephrases is left out.
        let long = "q".repeat(80);
        let (_, v) = ok(call(&c, "search_docs", json!({"query": format!("bake sourdough {long}")})).await);
        let unseen = v["confidence"]["unseen_words"].as_array().unwrap_or_else(|| panic!("{v}"));
        assert!(unseen.iter().any(|w| w == "sourdough") && !unseen.iter().any(|w| w == long.as_str()), "{v}");
        let (text, v) = ok(call(&c, "search_docs", json!({"query": "How do I install with Helm?"})).await);
        assert_ne!(v["confidence"]["level"], "none", "{v}");
        assert!(text.contains(&format!("confidence {}", v["confidence"]["level"].as_str().unwrap())), "{text}");
        let (_, v) = ok(call(&c, "search_docs", json!({"query": "helm", "mode": "keyword"})).await);
        assert!(v.get("confidence").is_none(), "keyword scores are not calibrated: {v}");
        c.cancel().await.unwrap();
    });
    let r = atlas_e2e::run(std::process::Command::new(atlas_e2e::bin("atlas")).args([
        "ask",
        "How do I bake sourdough bread?",
        "--json",
        "--bundle",
        &b,
    ]));
    let a: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert!(a["confidence"].as_f64().unwrap() < a["threshold"].as_f64().unwrap(), "{a}");
    assert!(a["unseen_words"].as_array().is_some_and(|u| u.iter().any(|w| w == "sourdough")), "{a}");
    assert!(a["answer"].as_str().is_some_and(|t| t.contains("No chunk holds") && t.contains("\"sourdough\"")), "{a}");
}

/// A hit's snippet is the passage that matched: a page whose first 300 characters
/// are about something else shows the lines that hold the question's words.
#[test]
fn a_snippet_shows_the_passage_that_matched() {
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let mut page = String::from("# Client setup\n\n");
    for i in 0..12 {
        page.push_str(&format!("Step {i}: configure the C# client's connection pool, retries and logging options.\n"));
    }
    page.push_str(
        "\nTo rotate the signing key, call rotate_key with the new secret; the old key stays valid for a day.\n",
    );
    let bundle = atlas_e2e::build_fixture_bundle_with(t.path(), &[("guides/client.md", &page)]);
    let b = bundle.display().to_string();
    rt().block_on(async {
        let c = crate::mcp::stdio_client(&["serve", "rag", "--bundle", &b], &t.path().join("rag.log")).await;
        let (text, v) =
            ok(call(&c, "search_docs", json!({"query": "rotate the signing key", "mode": "keyword"})).await);
        let hit = &v["hits"][0];
        assert_eq!(hit["path"], "site/guides/client.md", "{v}");
        // The snippet is in the text block, once: the structured hit does not repeat it.
        assert!(hit.get("snippet").is_none(), "{hit}");
        let snippet = text.split("<<<").nth(1).unwrap_or_default();
        assert!(snippet.contains("rotate the signing key"), "{text}");
        assert!(!page[..300].contains("rotate"), "the page's first 300 characters do not hold it");
        // The snippet's own lines: the mirror's file at those lines holds what it shows.
        let [first, last] = [0, 1].map(|k| hit["snippet_lines"][k].as_u64().unwrap_or_else(|| panic!("{hit}")));
        assert!(first > hit["start_line"].as_u64().unwrap() && last <= hit["end_line"].as_u64().unwrap(), "{hit}");
        let file = std::fs::read_to_string(bundle.join("mirror/site/guides/client.md")).unwrap();
        let lines: Vec<&str> = file.lines().collect();
        let cited = lines[first as usize - 1..last as usize].join("\n");
        assert!(
            cited.contains("rotate the signing key") && snippet.contains(lines[first as usize - 1].trim()),
            "{cited}"
        );
        assert!(text.contains(&format!("snippet of site/guides/client.md lines {first}-{last}")), "{text}");
        c.cancel().await.unwrap();
    });
}

/// A docs-only bundle's rag server lists no code tools (they could not answer); a
/// bundle with code lists them.
#[test]
fn code_tools_are_listed_only_where_there_is_code() {
    let Some([docs, _, code]) = crate::libraries::libraries() else { return };
    let t = tempfile::tempdir().unwrap();
    rt().block_on(async {
        for (b, want) in [(docs, false), (code, true)] {
            let b: &std::path::Path = b;
            let args = ["serve", "rag", "--bundle", b.to_str().unwrap()];
            let c = crate::mcp::stdio_client(&args, &t.path().join("rag.log")).await;
            let names: Vec<String> = c.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
            for tool in ["search_code", "find_symbol", "find_references", "get_file_outline"] {
                assert_eq!(names.iter().any(|n| n == tool), want, "{}: {names:?}", b.display());
            }
            assert!(names.iter().any(|n| n == "search_docs"));
            c.cancel().await.unwrap();
        }
    });
}

/// The tool list follows what is served: when a library's new version brings code
/// where there was none, the server sends `notifications/tools/list_changed` and lists
/// the code tools, in the same session.
#[test]
fn the_tool_list_changes_with_what_is_served_and_the_client_is_told() {
    #[derive(Clone, Default)]
    struct Told(std::sync::Arc<std::sync::atomic::AtomicUsize>);
    impl rmcp::ClientHandler for Told {
        async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<rmcp::RoleClient>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let Some([docs, _, code]) = crate::libraries::libraries() else { return };
    let t = tempfile::tempdir().unwrap();
    let served = t.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    atlas_e2e::copy_tree(docs, &served);
    let log = t.path().join("rag.log");
    rt().block_on(async {
        let told = Told::default();
        let transport =
            child_transport(crate::mcp::atlas(&["serve", "rag", "--bundle", served.to_str().unwrap()], &log), &log);
        let c = rmcp::ServiceExt::serve(told.clone(), transport).await.unwrap();
        let has_code = async || c.list_all_tools().await.unwrap().iter().any(|t| t.name == "search_code");
        assert!(!has_code().await);
        assert!(c.peer_info().unwrap().capabilities.tools.as_ref().unwrap().list_changed == Some(true));
        // The folder now holds a bundle with code (swapped whole, as an install does).
        let next = t.path().join("next");
        std::fs::create_dir_all(&next).unwrap();
        atlas_e2e::copy_tree(code, &next);
        std::fs::rename(&served, t.path().join("old")).unwrap();
        std::fs::rename(&next, &served).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while told.0.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            assert!(std::time::Instant::now() < deadline, "no tools/list_changed: {}", read(&log));
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(has_code().await, "the code tools are listed now");
        c.cancel().await.unwrap();
    });
}

/// A tool list an agent can afford: rag's `tools/list` (every tool, a bundle with code)
/// in at most 8 KB and fs's in at most 4 KB, each tool still with its annotations and
/// output schema; what the schemas leave out is in the server's instructions.
#[test]
fn the_tool_lists_fit_their_budgets() {
    let Some([_, _, code]) = crate::libraries::libraries() else { return };
    let t = tempfile::tempdir().unwrap();
    let b = code.to_str().unwrap();
    rt().block_on(async {
        for (which, cap) in [("rag", 8 * 1024), ("fs", 4 * 1024)] {
            let c = crate::mcp::stdio_client(&["serve", which, "--bundle", b], &t.path().join("s.log")).await;
            let tools = c.list_all_tools().await.unwrap();
            let bytes = serde_json::to_string(&json!({ "tools": tools })).unwrap().len();
            assert!(bytes <= cap, "{which}: tools/list is {bytes} bytes, over {cap}");
            assert!(tools.len() >= 5, "{which}: {}", tools.len());
            for tool in &tools {
                assert!(tool.annotations.is_some() && tool.output_schema.is_some(), "{which}: {}", tool.name);
                assert!(!serde_json::to_string(&*tool.input_schema).unwrap().contains("$defs"), "{}", tool.name);
            }
            let info = c.peer_info().unwrap();
            let instructions = info.instructions.as_deref().unwrap_or_default();
            assert!(instructions.contains("`max_tokens` caps the reply"), "{which}: {instructions}");
            eprintln!("{which}: tools/list {bytes} bytes, instructions {} bytes", instructions.len());
            c.cancel().await.unwrap();
        }
    });
}

/// A code question put to `search_docs` says once, in one line, that `search_code`
/// answers it more surely; a docs question does not.
#[test]
fn the_right_tool_is_said_once() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let t = tempfile::tempdir().unwrap();
    let b = bundle.display().to_string();
    rt().block_on(async {
        let c = crate::mcp::stdio_client(&["serve", "rag", "--bundle", &b], &t.path().join("rag.log")).await;
        let (text, v) = ok(call(&c, "search_docs", json!({"query": "InvoiceBuilder add_line"})).await);
        assert_eq!(v["try_instead"], "search_code", "{text}");
        assert_eq!(text.matches("call search_code").count(), 1, "{text}");
        assert!(text.contains("the code answers this more surely"), "{text}");
        let (text, v) = ok(call(&c, "search_docs", json!({"query": "How do I install with Helm?"})).await);
        assert!(v.get("try_instead").is_none(), "{text}");
        c.cancel().await.unwrap();
    });
}

/// A local copy of a GitBook site, its llms.txt beside the pages (`public_urls`): each
/// page listed there is cited by its public page URL, not its local path; a page it
/// does not list keeps its path.
#[test]
fn a_local_site_copy_is_cited_by_its_public_urls() {
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let site = t.path().join("site");
    std::fs::create_dir_all(site.join("guide")).unwrap();
    std::fs::write(
        site.join("llms.txt"),
        "# Example\n\n- [Intro](https://docs.example.com/readme.md)\n- [Rotate keys](https://docs.example.com/guide/rotate-keys.md)\n",
    )
    .unwrap();
    std::fs::write(site.join("readme.md"), "# Intro\n\nWelcome to the example product.\n").unwrap();
    std::fs::write(
        site.join("guide/rotate-keys.md"),
        "# Rotate keys\n\n## With the CLI\n\nRun `example keys rotate` to replace the signing key.\n",
    )
    .unwrap();
    std::fs::write(site.join("guide/unlisted.md"), "# Unlisted\n\nA page the index does not list.\n").unwrap();
    let cfg = t.path().join("pipeline.yaml");
    std::fs::write(&cfg, "name: ex\nsources:\n  docs:\n    kind: local\n    path: site\n    public_urls: llms.txt\n")
        .unwrap();
    atlas_e2e::run(atlas_e2e::pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let bundle = t.path().join(".atlas/build/bundle");
    let search = |q: &str| -> serde_json::Value {
        let r = atlas_e2e::run(
            std::process::Command::new(atlas_e2e::bin("atlas"))
                .args(["search", q, "--json", "-k", "1", "--mode", "keyword", "--bundle"])
                .arg(&bundle),
        )
        .success();
        serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap()["hits"][0].clone()
    };
    let hit = search("rotate the signing key");
    assert_eq!(hit["url"], "https://docs.example.com/guide/rotate-keys", "{hit}");
    assert_eq!(hit["citation"], "https://docs.example.com/guide/rotate-keys#with-the-cli", "{hit}");
    let hit = search("a page the index does not list");
    assert!(hit["url"].is_null() && hit["citation"].as_str().unwrap().starts_with("docs/guide/unlisted.md#L"), "{hit}");
    // A public_urls that is not a file inside the folder: one line, exit 2.
    std::fs::write(&cfg, "name: ex\nsources:\n  docs:\n    kind: local\n    path: site\n    public_urls: ../x.txt\n")
        .unwrap();
    let r = atlas_e2e::run(atlas_e2e::pipeline().arg("-c").arg(&cfg).arg("run"));
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr.contains("public_urls") && r.stderr.contains("not a file inside the source folder"),
        "{}",
        r.stderr
    );
}

/// Hardening round 4, item 18: `atlas tool --list` with no library anywhere (no
/// `--bundle`, no ATLAS_BUNDLE, no config) lists every tool and marks the ones that
/// need a library with code.
#[test]
fn atlas_tool_list_needs_no_bundle_and_marks_the_tools_that_need_code() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let cmd = |args: &[&str]| {
        let mut c = crate::distribution::atlas(&home);
        c.args(args);
        atlas_e2e::run(&mut c)
    };
    let r = cmd(&["tool", "--list"]).success();
    for name in ["list_files", "read_file", "search_docs", "search_code", "find_symbol", "get_bundle_info"] {
        assert!(r.stdout.contains(name), "{name} is not listed: {}", r.stdout);
    }
    assert!(r.stdout.contains("needs a library with code"), "{}", r.stdout);
    let r = cmd(&["tool", "--list", "--json"]).success();
    let tools: Vec<serde_json::Value> = serde_json::from_str(&r.stdout).unwrap();
    let needs = |name: &str| tools.iter().find(|t| t["name"] == name).map(|t| t["needs_code"].clone());
    assert_eq!(needs("search_code"), Some(json!(true)));
    assert_eq!(needs("search_docs"), Some(json!(false)));
    assert_eq!(needs("read_file"), Some(json!(false)));
    // A call still needs a library, and says so in one line.
    let r = cmd(&["tool", "search_docs", "--arg", "query=install"]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("no bundle"), "{}", r.stderr);
}
