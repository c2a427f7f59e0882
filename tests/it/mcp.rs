//! The MCP servers, driven by a real MCP client (rmcp's) against the built `atlas`
//! binary, over stdio and over streamable HTTP; the raw stdio stream for what a
//! client library would never send; and the official MCP Inspector CLI (npm) when
//! node is available.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use atlas_e2e::bin;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};

pub(crate) type Client = RunningService<RoleClient, ()>;

pub(crate) fn rt() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// `atlas <args>` with stderr to `log`.
pub(crate) fn atlas(args: &[&str], log: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(bin("atlas"));
    c.args(args).stderr(std::fs::File::create(log).unwrap()).kill_on_drop(true);
    c
}

/// A stdio transport to `cmd`, its stderr kept in `log` (rmcp would inherit it).
pub(crate) fn child_transport(cmd: tokio::process::Command, log: &Path) -> TokioChildProcess {
    TokioChildProcess::builder(cmd).stderr(std::fs::File::create(log).unwrap()).spawn().unwrap().0
}

pub(crate) async fn stdio_client(args: &[&str], log: &Path) -> Client {
    let transport = child_transport(atlas(args, log), log);
    ().serve(transport).await.unwrap_or_else(|e| panic!("initialize failed: {e}; log: {}", read(log)))
}

pub(crate) fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Starts `atlas <args> --http 127.0.0.1:PORT` and waits until it listens; its address.
pub(crate) async fn http_server(args: &[&str], log: &Path) -> (String, tokio::process::Child) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--http", &addr]);
    let child = atlas(&all, log).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(&addr).await.is_err() {
        assert!(Instant::now() < deadline, "server did not listen: {}", read(log));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (addr, child)
}

/// Starts `atlas <args> --http 127.0.0.1:PORT` and connects a client to it.
pub(crate) async fn http_client(args: &[&str], log: &Path) -> (Client, tokio::process::Child) {
    let (addr, child) = http_server(args, log).await;
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let client = ().serve(transport).await.unwrap_or_else(|e| panic!("initialize failed: {e}; log: {}", read(log)));
    (client, child)
}

pub(crate) async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    let args = args.as_object().cloned().unwrap_or_default();
    c.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

pub(crate) fn text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

pub(crate) fn ok(r: CallToolResult) -> (String, Value) {
    assert_ne!(r.is_error, Some(true), "tool error: {}", text(&r));
    (text(&r), r.structured_content.clone().unwrap_or(Value::Null))
}

pub(crate) fn err(r: CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "expected a tool error, got: {}", text(&r));
    text(&r)
}

async fn tool_names(c: &Client) -> Vec<String> {
    let tools = c.list_all_tools().await.unwrap();
    for t in &tools {
        // One sentence that says what it does; the details are in the instructions.
        assert!(
            t.description.as_ref().is_some_and(|d| d.len() > 15 && d.ends_with('.')),
            "{} needs a real description",
            t.name
        );
        assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{}", t.name);
    }
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    names
}

/// Every fs tool, and every refusal, on the fixture bundle's mirror.
async fn exercise_fs(c: &Client) {
    assert_eq!(c.peer_info().unwrap().server_info.clone().unwrap().name, "fixture-fs");
    assert_eq!(tool_names(c).await, ["get_release_info", "list_files", "list_publications", "read_file", "search"]);

    let (t, v) = ok(call(c, "list_publications", json!({})).await);
    assert!(t.contains("site/guides (2 files)"), "{t}");
    let pubs: Vec<&str> =
        v["publications"].as_array().unwrap().iter().map(|p| p["publication"].as_str().unwrap()).collect();
    assert_eq!(pubs, ["code/billing", "code/net", "site", "site/guides", "site/reference"]);

    let (_, v) = ok(call(c, "list_files", json!({"publication": "site/guides"})).await);
    assert_eq!(v["files"], json!(["site/guides/configure.md", "site/guides/install.md"]));
    let (t, v) = ok(call(c, "list_files", json!({"glob": "**/*.md", "limit": 2})).await);
    assert_eq!((v["total"].as_u64(), v["next_offset"].as_u64()), (Some(4), Some(2)), "{t}");
    assert!(t.contains("call again with offset=2"));
    let (_, v) = ok(call(c, "list_files", json!({"glob": "**/*.md", "offset": 3})).await);
    assert_eq!((v["files"].as_array().unwrap().len(), &v["next_offset"]), (1, &Value::Null));

    let (t, v) =
        ok(call(c, "read_file", json!({"path": "site/guides/install.md", "start_line": 1, "end_line": 1})).await);
    assert_eq!(v["text"], "# Install\n");
    assert!(t.contains("<<<SOURCE ") && t.contains("site/guides/install.md lines 1-1 of"), "{t}");
    let (_, v) = ok(call(c, "read_file", json!({"path": "code/net/retry.rs"})).await);
    assert!(v["text"].as_str().unwrap().contains("fn parse_retry_after"));

    let (t, v) = ok(call(c, "search", json!({"pattern": "helm repo add"})).await);
    assert_eq!(v["matches"][0]["path"], "site/guides/install.md", "{t}");
    assert!(v["matches"][0]["line"].as_u64().unwrap() > 1);
    let (_, v) = ok(call(c, "search", json!({"pattern": "fn \\w+_ms", "regex": true, "glob": "**/*.rs"})).await);
    assert_eq!(v["matches"][0]["text"], "    pub fn delay_ms(&self, n: u32) -> u64 {");
    let (_, v) = ok(call(c, "search", json!({"pattern": "INVOICE", "case_sensitive": true})).await);
    assert_eq!(v["matches"].as_array().unwrap().len(), 0);
    let (_, v) = ok(call(c, "search", json!({"pattern": "def add_line", "context_lines": 1})).await);
    assert_eq!(v["matches"][0]["before"].as_array().unwrap().len(), 1);
    assert_eq!(v["matches"][0]["after"].as_array().unwrap().len(), 1);
    let (t, v) = ok(call(c, "search", json!({"pattern": "e", "max_results": 3})).await);
    assert_eq!((v["matches"].as_array().unwrap().len(), &v["truncated"]), (3, &json!(true)));
    assert!(t.contains("truncated"), "{t}");

    let (t, v) = ok(call(c, "get_release_info", json!({})).await);
    assert_eq!(v["name"], "fixture");
    assert!(t.contains("source site (local)"), "{t}");

    // Refusals: clear tool errors, and the session goes on.
    for (path, why) in [
        ("../pipeline.yaml", "`..` is not allowed"),
        ("site/../../pipeline.yaml", "`..` is not allowed"),
        ("/etc/passwd", "absolute paths"),
        ("site/README.md\u{0}x", "NUL byte"),
        ("%2e%2e/pipeline.yaml", "percent-encoded"),
        ("site%2fREADME.md", "percent-encoded"),
        ("site/nope.md", "no such file"),
    ] {
        let e = err(call(c, "read_file", json!({"path": path})).await);
        assert!(e.contains(why), "{path:?}: {e}");
    }
    let e = err(call(c, "read_file", json!({"path": "site/README.md", "start_line": 999})).await);
    assert!(e.contains("past the end"), "{e}");
    let e = err(call(c, "search", json!({"pattern": "(", "regex": true})).await);
    assert!(e.contains("bad regular expression"), "{e}");
    let e = err(call(c, "list_files", json!({"glob": "[", "publication": "site"})).await);
    assert!(e.contains("bad glob"), "{e}");
    let e = err(call(c, "list_files", json!({"publication": "nope"})).await);
    assert!(e.contains("no publication \"nope\""), "{e}");
    // A missing required argument is an error that names it, not a crash.
    let args = json!({}).as_object().cloned().unwrap();
    match c.call_tool(CallToolRequestParams::new("read_file").with_arguments(args)).await {
        Err(e) => assert!(e.to_string().contains("path"), "{e}"),
        Ok(r) => assert!(err(r).contains("path")),
    }
    ok(call(c, "list_publications", json!({})).await);
}

/// Every rag tool on the fixture bundle.
async fn exercise_rag(c: &Client) {
    assert_eq!(c.peer_info().unwrap().server_info.clone().unwrap().name, "fixture-rag");
    assert_eq!(
        tool_names(c).await,
        [
            "find_references",
            "find_symbol",
            "get_bundle_info",
            "get_chunk",
            "get_file_outline",
            "list_libraries",
            "search_code",
            "search_docs"
        ]
    );

    let (t, v) = ok(call(c, "search_docs", json!({"query": "helm repo add", "top_k": 3})).await);
    let hit = &v["hits"][0];
    assert_eq!(hit["path"], "site/guides/install.md", "{t}");
    assert!(hit["citation"].as_str().unwrap().contains("site/guides/install.md#L"), "{hit}");
    assert!(v["hits"].as_array().unwrap().iter().all(|h| h["kind"] == "docs"));
    assert!(t.contains("citation: ") && t.contains("<<<SOURCE "), "{t}");
    for mode in ["vector", "keyword", "hybrid"] {
        let (_, v) =
            ok(call(c, "search_docs", json!({"query": "how many pods", "mode": mode, "section": "guides"})).await);
        assert!(v["hits"].as_array().unwrap().iter().all(|h| h["section"] == "guides"), "{mode}: {v}");
    }
    let (_, v) = ok(call(c, "search_code", json!({"query": "InvoiceBuilder", "language": "python"})).await);
    assert_eq!(v["hits"][0]["path"], "code/billing/invoice.py");
    assert!(v["hits"].as_array().unwrap().iter().all(|h| h["language"] == "python"));
    let (_, v) = ok(call(c, "search_code", json!({"query": "retry delay", "symbol_kind": "function"})).await);
    assert!(v["hits"].as_array().unwrap().iter().all(|h| h["symbol_kind"] == "function"), "{v}");

    let id = hit["chunk_id"].as_str().unwrap().to_owned();
    let (t, v) = ok(call(c, "get_chunk", json!({"id": id, "neighbors": 1})).await);
    assert_eq!(v["chunk"]["chunk_id"], id.as_str());
    assert!(v["chunk"]["text"].as_str().unwrap().contains("helm repo add"));
    assert!(t.contains("requested chunk"), "{t}");

    let (t, v) = ok(call(c, "get_bundle_info", json!({})).await);
    assert_eq!(v["name"], "fixture");
    assert_eq!(v["modes"], json!(["keyword", "vector", "hybrid"]));
    assert!(v["by_kind"]["code"].as_u64().unwrap() > 0 && v["by_kind"]["docs"].as_u64().unwrap() > 0);
    assert!(v["built_age_days"].as_i64().is_some());
    assert!(t.contains("model all-minilm-l6-v2-int8 (384 dims)"), "{t}");

    let e = err(call(c, "search_docs", json!({"query": "   "})).await);
    assert!(e.contains("the query is empty"), "{e}");
    let e = err(call(c, "get_chunk", json!({"id": "nope"})).await);
    assert!(e.contains("no chunk \"nope\""), "{e}");
}

#[test]
fn fs_server_over_stdio_and_http_with_a_real_client() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let b = bundle.to_str().unwrap();
    let logs = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--bundle", b], &logs.path().join("stdio.log")).await;
        exercise_fs(&c).await;
        c.cancel().await.unwrap();
        let (c, mut child) = http_client(&["serve", "fs", "--bundle", b], &logs.path().join("http.log")).await;
        exercise_fs(&c).await;
        c.cancel().await.unwrap();
        child.kill().await.unwrap();
    });
    // Servers log to stderr; stdout carried only protocol (the client parsed every line).
    assert!(read(&logs.path().join("stdio.log")).contains("fs server for fixture"));
}

#[test]
fn rag_server_over_stdio_and_http_with_a_real_client() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let b = bundle.to_str().unwrap();
    let logs = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let c = stdio_client(&["serve", "rag", "--bundle", b, "--warm"], &logs.path().join("stdio.log")).await;
        exercise_rag(&c).await;
        c.cancel().await.unwrap();
        let (c, mut child) = http_client(&["serve", "rag", "--bundle", b], &logs.path().join("http.log")).await;
        exercise_rag(&c).await;
        c.cancel().await.unwrap();
        child.kill().await.unwrap();
    });
}

/// A plain mirror (`--mirror`), reached through a symlink, with links that lead out.
fn plain_mirror(tmp: &Path) -> PathBuf {
    let real = tmp.join("m/docs");
    std::fs::create_dir_all(real.join("guide")).unwrap();
    let long: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(real.join("guide/long.md"), long).unwrap();
    for i in 0..40 {
        std::fs::write(real.join(format!("guide/page{i:02}.md")), format!("# Page {i}\n\nneedle {i}\n")).unwrap();
    }
    std::fs::create_dir_all(tmp.join("m/docs_evil")).unwrap();
    std::fs::write(tmp.join("m/docs_evil/secret.md"), "secret").unwrap();
    std::fs::write(tmp.join("m/outside.md"), "outside").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink(tmp.join("m/outside.md"), real.join("guide/to-file.md")).unwrap();
        symlink(tmp.join("m/docs_evil"), real.join("to-dir")).unwrap();
        symlink(real.join("guide/to-file.md"), real.join("chain.md")).unwrap();
        symlink(&real, tmp.join("via-link")).unwrap();
    }
    tmp.join("via-link")
}

#[cfg(unix)]
#[test]
fn plain_mirror_refuses_every_escape_and_caps_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let mirror = plain_mirror(tmp.path());
    let m = mirror.to_str().unwrap();
    let log = tmp.path().join("fs.log");
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--mirror", m], &log).await;
        assert_eq!(c.peer_info().unwrap().server_info.clone().unwrap().name, "via-link-fs");
        for (path, why) in [
            ("guide/to-file.md", "outside the mirror"),
            ("to-dir/secret.md", "outside the mirror"),
            ("chain.md", "outside the mirror"),
            ("../docs_evil/secret.md", "`..` is not allowed"),
            ("../../m/docs_evil/secret.md", "`..` is not allowed"),
        ] {
            let e = err(call(&c, "read_file", json!({"path": path})).await);
            assert!(e.contains(why), "{path}: {e}");
        }
        // The sibling prefix: an absolute path into /m/docs_evil is refused as absolute,
        // and nothing of docs_evil is listed or searched.
        let sibling = tmp.path().join("m/docs_evil/secret.md");
        assert!(err(call(&c, "read_file", json!({"path": sibling.to_str().unwrap()})).await).contains("absolute"));
        let (_, v) = ok(call(&c, "list_files", json!({"limit": 1000})).await);
        let files: Vec<&str> = v["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        assert!(files.contains(&"guide/long.md") && !files.iter().any(|f| f.contains("to-") || f.contains("chain")));
        let (_, v) = ok(call(&c, "search", json!({"pattern": "secret"})).await);
        assert_eq!(v["matches"].as_array().unwrap().len(), 0);
        // The read cap is stated, with where to continue.
        let (t, v) = ok(call(&c, "read_file", json!({"path": "guide/long.md", "max_tokens": 200000})).await);
        assert_eq!((v["end_line"].as_u64(), v["truncated"].as_bool()), (Some(2000), Some(true)));
        assert!(
            t.contains("truncated: the 2000 lines cap was hit at line 2000; call read_file again with start_line=2001"),
            "{}",
            &t[t.len() - 200..]
        );
        let (_, v) = ok(call(&c, "read_file", json!({"path": "guide/long.md", "start_line": 2001})).await);
        assert_eq!((v["end_line"].as_u64(), v["truncated"].as_bool()), (Some(3000), Some(false)));
        c.cancel().await.unwrap();
    });
}

/// Cancelling a running search stops it: the server notices, answers nothing more for
/// it, and keeps serving.
#[test]
fn cancellation_stops_a_running_search() {
    let tmp = tempfile::tempdir().unwrap();
    let mirror = plain_mirror(tmp.path());
    let log = tmp.path().join("fs.log");
    rt().block_on(async {
        let mut cmd = atlas(&["serve", "fs", "--mirror", mirror.to_str().unwrap()], &log);
        cmd.env("ATLAS_FAILPOINT", "slow-search:100"); // 41 files: about 4 s in full
        let c = ().serve(child_transport(cmd, &log)).await.unwrap();
        let started = Instant::now();
        let args = json!({"pattern": "needle"}).as_object().cloned().unwrap();
        let search = c.call_tool(CallToolRequestParams::new("search").with_arguments(args));
        // Dropping the pending call sends notifications/cancelled.
        assert!(tokio::time::timeout(Duration::from_millis(500), search).await.is_err());
        let deadline = Instant::now() + Duration::from_secs(3);
        while !read(&log).contains("search cancelled by the client") {
            assert!(Instant::now() < deadline, "no cancellation in the log: {}", read(&log));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(started.elapsed() < Duration::from_secs(3), "the search ran on: {:?}", started.elapsed());
        ok(call(&c, "list_publications", json!({})).await);
        c.cancel().await.unwrap();
    });
}

/// A raw stdio session with `atlas serve fs --mirror DIR`, initialized: for what no
/// client library would send.
pub(crate) struct RawSession {
    pub(crate) child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    out: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawSession {
    pub(crate) async fn start(mirror: &Path, log: &Path) -> RawSession {
        use tokio::io::{AsyncBufReadExt as _, BufReader};
        let mut child = atlas(&["serve", "fs", "--mirror", mirror.to_str().unwrap()], log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut s = RawSession { child, stdin, out };
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
        s.send(format!("{init}\n").as_bytes()).await;
        assert_eq!(s.next().await["id"], 1);
        s.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await;
        s
    }

    pub(crate) async fn send(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt as _;
        self.stdin.write_all(bytes).await.unwrap();
    }

    /// The next line the server wrote, which must be JSON.
    pub(crate) async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.out.next_line()).await.unwrap().unwrap().unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carried a non-protocol line {line:?}: {e}"))
    }

    /// Closes stdin and waits for the server to exit.
    pub(crate) async fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.unwrap().unwrap()
    }
}

/// What no client library sends: malformed JSON, a BOM, a batch, an over-long line.
/// Each gets a JSON-RPC error (or, for the BOM, a normal answer); the session goes on.
#[test]
fn malformed_lines_get_json_rpc_errors_and_the_session_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.md"), "# A\n").unwrap();
    let log = tmp.path().join("fs.log");
    rt().block_on(async {
        let mut s = RawSession::start(tmp.path(), &log).await;
        let cases: Vec<(Vec<u8>, i64)> = vec![
            (b"{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \n".to_vec(), -32700),
            (b"[{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}]\n".to_vec(), -32600),
            ([vec![b'x'; 5 * 1024 * 1024], b"\n".to_vec()].concat(), -32600),
        ];
        for (line, code) in cases {
            s.send(&line).await;
            let r = s.next().await;
            assert_eq!(r["error"]["code"], code, "{r}");
            assert_eq!(r["id"], Value::Null);
        }
        s.send(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n").await;
        let r = s.next().await;
        assert_eq!((r["id"].as_i64(), r.get("error")), (Some(9), None), "{r}");
        s.send(b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/list\"}\n").await;
        assert_eq!(s.next().await["id"], 10);
        let status = s.close().await;
        assert!(status.success(), "the server exits cleanly when stdin closes: {status}");
    });
    assert!(read(&log).contains("dropped a 5242881-byte request line"), "{}", read(&log));
}

/// The official MCP Inspector CLI (npm) against both servers. Needs node and the npm
/// registry; skipped with a reason without them.
#[test]
fn slow_the_mcp_inspector_cli_lists_and_calls_tools_on_both_servers() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    // The Inspector 2.x needs node 20 or newer.
    let node_major = std::process::Command::new("node").arg("--version").output().ok().and_then(|o| {
        String::from_utf8_lossy(&o.stdout).trim().trim_start_matches('v').split('.').next()?.parse::<u32>().ok()
    });
    if node_major.is_none_or(|m| m < 20) || std::process::Command::new("npx").arg("--version").output().is_err() {
        assert!(std::env::var_os("ATLAS_REQUIRE_NODE").is_none(), "node >= 20 and npx are needed");
        atlas_e2e::skip(&format!("the MCP Inspector test needs node >= 20 and npx (found node {node_major:?})"));
        return;
    }
    let inspector = |args: &[&str]| -> Value {
        let out = std::process::Command::new("npx")
            .args(["-y", "@modelcontextprotocol/inspector@2.12.0", "--cli"])
            .arg(bin("atlas"))
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "inspector failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let b = bundle.to_str().unwrap();
    let tools = inspector(&["serve", "fs", "--bundle", b, "--method", "tools/list"]);
    assert_eq!(tools["tools"].as_array().unwrap().len(), 5);
    let r = inspector(&[
        "serve",
        "fs",
        "--bundle",
        b,
        "--method",
        "tools/call",
        "--tool-name",
        "search",
        "--tool-arg",
        "pattern=helm repo",
    ]);
    assert_eq!(r["structuredContent"]["matches"][0]["path"], "site/guides/install.md", "{r}");
    let tools = inspector(&["serve", "rag", "--bundle", b, "--method", "tools/list"]);
    assert_eq!(tools["tools"].as_array().unwrap().len(), 8);
    let r = inspector(&[
        "serve",
        "rag",
        "--bundle",
        b,
        "--method",
        "tools/call",
        "--tool-name",
        "search_docs",
        "--tool-arg",
        "query=helm repo add",
    ]);
    assert_eq!(r["structuredContent"]["hits"][0]["path"], "site/guides/install.md", "{r}");
}

/// The README's editor snippets: valid JSON in each client's documented shape, and
/// their commands, run for real (paths filled in), answer initialize and list tools.
#[test]
fn readme_editor_snippets_start_working_servers() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let section =
        readme.split("## Serving a bundle to your editor's agent").nth(1).unwrap().split("\n## ").next().unwrap();
    let blocks: Vec<Value> = section
        .split("```json\n")
        .skip(1)
        .map(|b| serde_json::from_str(b.split("```").next().unwrap()).unwrap_or_else(|e| panic!("{e}: {b}")))
        .collect();
    assert_eq!(blocks.len(), 6, "Claude Desktop, Cursor, Zed, opencode, then uvx and npx");
    // The binary's forms come first, as they work on any machine; the uvx and npx
    // forms after them: the same servers, run from the packages once installed
    // (tests/it/package.rs runs those packages).
    for (b, command, lead) in [
        (&blocks[4], "uvx", vec!["--offline", "atlas-mcp-server"]),
        (&blocks[5], "npx", vec!["--offline", "-y", "atlas-mcp-server"]),
    ] {
        let servers = b["mcpServers"].as_object().unwrap();
        assert_eq!(servers.len(), 2);
        for s in servers.values() {
            assert_eq!(s["command"], command);
            let args: Vec<&str> = s["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
            assert_eq!(args[..lead.len()], lead[..], "{s}");
            assert_eq!(args[lead.len()], "serve");
        }
    }
    let blocks = &blocks[..4];
    // (command, args) of every server entry, by each client's format.
    let mut commands: Vec<(String, Vec<String>)> = Vec::new();
    let strs =
        |v: &Value| -> Vec<String> { v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_owned()).collect() };
    for (i, b) in blocks.iter().enumerate() {
        let servers = match i {
            0 | 1 => b["mcpServers"].as_object().unwrap(),
            2 => b["context_servers"].as_object().unwrap(),
            _ => b["mcp"]["servers"].as_object().unwrap(),
        };
        assert_eq!(servers.len(), 2);
        for s in servers.values() {
            if i == 3 {
                assert_eq!(s["type"], "local");
                let all = strs(&s["command"]);
                commands.push((all[0].clone(), all[1..].to_vec()));
            } else {
                commands.push((s["command"].as_str().unwrap().to_owned(), strs(&s["args"])));
            }
        }
    }
    let atlas = bin("atlas");
    let logs = tempfile::tempdir().unwrap();
    rt().block_on(async {
        for (n, (cmd, args)) in commands.iter().enumerate() {
            assert_eq!(cmd, "/path/to/atlas");
            let args: Vec<String> =
                args.iter().map(|a| a.replace("/path/to/bundle", bundle.to_str().unwrap())).collect();
            let mut c = tokio::process::Command::new(&atlas);
            c.args(&args).kill_on_drop(true);
            let log = logs.path().join(format!("{n}.log"));
            let client =
                ().serve(child_transport(c, &log)).await.unwrap_or_else(|e| panic!("{args:?}: {e}: {}", read(&log)));
            assert!(client.list_all_tools().await.unwrap().len() >= 4, "{args:?}");
            client.cancel().await.unwrap();
        }
    });
}
