//! `atlas serve web` on the fixture bundle: over plain HTTP (headers, Host check,
//! escaping, the JSON APIs against the CLI's, `/mcp` beside the page), and in
//! Debian's headless Chromium driven over the DevTools protocol: typing, modes and
//! kinds, the source view's marked range, a streamed answer, JavaScript off, and
//! script payloads that must not run. Screenshots go to target/screenshots/.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use atlas_e2e::http::{Server, chat_stream, get};
use atlas_e2e::{bin, run};
use serde_json::Value;

use crate::ask::fixture;
use crate::embed::model_ready;

/// A running `atlas serve web`, killed on drop.
pub(crate) struct Web {
    pub(crate) addr: SocketAddr,
    child: std::process::Child,
    log: tempfile::NamedTempFile,
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Web {
    pub(crate) fn start(extra: &[&str]) -> Web {
        Web::start_with(&[fixture()], extra)
    }

    /// `atlas serve web` over each of `bundles`.
    pub(crate) fn start_with(bundles: &[&Path], extra: &[&str]) -> Web {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut cmd = std::process::Command::new(bin("atlas"));
        cmd.args(["serve", "web"]);
        for b in bundles {
            cmd.arg("--bundle").arg(b);
        }
        let child = cmd.args(["--http", &addr.to_string()]).args(extra).stderr(log.reopen().unwrap()).spawn().unwrap();
        let web = Web { addr, child, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "atlas serve web did not listen: {}", web.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        web
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    pub(crate) fn get(&self, path: &str) -> (u16, Vec<(String, String)>, String) {
        get(self.addr, path, &self.addr.to_string())
    }

    /// A POST of `form` with `headers`, as this page's own script sends it: with this
    /// page's `Origin` unless `headers` name one (or a `Sec-Fetch-Site`).
    pub(crate) fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        form: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        let origin = format!("http://{}", self.addr);
        let mut all = headers.to_vec();
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("origin") || k.eq_ignore_ascii_case("sec-fetch-site")) {
            all.push(("Origin", &origin));
        }
        atlas_e2e::http::post(self.addr, path, &self.addr.to_string(), &all, form)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

pub(crate) fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn enc(s: &str) -> String {
    s.replace(' ', "+").replace('?', "%3F")
}

#[test]
fn pages_are_escaped_locked_down_and_match_the_cli() {
    if !model_ready() {
        return;
    }
    let web = Web::start(&[]);
    // Every page: a strict CSP, no sniffing, no framing.
    for path in ["/", "/?q=helm", "/ask", "/assets/app.js", "/api/search?q=helm", "/nowhere"] {
        let (_, h, _) = web.get(path);
        let csp = header(&h, "content-security-policy").unwrap_or_else(|| panic!("{path}: no CSP"));
        assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{path}: {csp}");
        assert_eq!(header(&h, "x-content-type-options"), Some("nosniff"), "{path}");
    }
    // Only loopback Host headers.
    for host in ["evil.test", "127.0.0.1.evil.test:80", "attacker.example:8080"] {
        let (status, _, body) = get(web.addr, "/?q=helm", host);
        assert_eq!(status, 403, "{host}: {body}");
    }
    assert_eq!(get(web.addr, "/", &format!("localhost:{}", web.addr.port())).0, 200);

    // The search page: server-rendered hits with marked terms, citations and source links.
    let (status, h, page) = web.get("/?q=helm+repo&mode=keyword");
    assert_eq!(status, 200);
    assert!(header(&h, "content-type").unwrap().starts_with("text/html"));
    assert!(page.contains(r#"<li class="hit">"#) && page.contains("<mark>"), "{page}");
    assert!(page.contains("/source?id=") && page.contains("site/guides/install.md#L"), "{page}");
    assert!(page.contains(r#"<option value="keyword" selected>"#), "{page}");
    // The hostile page's payloads show as text.
    let (_, _, page) = web.get("/?q=payload+escaping+rules&mode=keyword");
    assert!(page.contains("&lt;script&gt;document.body.dataset.pwned=1&lt;/script&gt;"), "{page}");
    assert!(page.contains("&lt;svg onload=") && !page.contains("<svg") && !page.contains("<script>document"), "{page}");

    // The APIs return what the CLI prints.
    let (_, _, api) = web.get("/api/search?q=helm+repo&mode=keyword");
    let cli = run(std::process::Command::new(bin("atlas"))
        .args(["search", "helm repo", "--mode", "keyword", "--json", "--bundle"])
        .arg(fixture()));
    let (api, cli): (Value, Value) = (serde_json::from_str(&api).unwrap(), serde_json::from_str(&cli.stdout).unwrap());
    assert_eq!(api, cli);
    assert!(api["hits"][0]["citation"].is_string(), "{api:#}");
    let q = "How do I install with Helm?";
    let (_, _, api) = web.post("/api/ask", &[], &format!("q={}", enc(q)));
    let cli = run(std::process::Command::new(bin("atlas")).args(["ask", q, "--json", "--bundle"]).arg(fixture()));
    let (mut api, mut cli): (Value, Value) =
        (serde_json::from_str(&api).unwrap(), serde_json::from_str(&cli.stdout).unwrap());
    api["timings"] = Value::Null;
    cli["timings"] = Value::Null;
    assert_eq!(api, cli);
    assert_eq!(api["kind"], "extractive");

    // The source view: the file, rendered, its payloads inert, the cited block marked.
    let id = {
        let (_, _, api) = web.get("/api/search?q=payload+escaping+rules&mode=keyword&k=1");
        let v: Value = serde_json::from_str(&api).unwrap();
        v["hits"][0]["chunk_id"].as_str().unwrap().to_owned()
    };
    let (status, _, src) = web.get(&format!("/source?id={}", id.replace('#', "%23")));
    assert_eq!(status, 200, "{src}");
    assert!(src.contains("&lt;script&gt;document.body.dataset.pwned=1&lt;/script&gt;"), "{src}");
    assert!(!src.contains("<script>document") && !src.contains("javascript:"), "{src}");
    assert!(src.contains(r#"class="blk cited""#), "{src}");
    assert_eq!(web.get("/source?id=no-such-chunk").0, 404);
    let (status, _, body) = web.get(&format!("/?q={}", "x".repeat(9000)));
    assert_eq!(status, 400, "{body}");

    // Page weight: the HTML of a search with its script and stylesheet.
    let weight: usize = ["/?q=helm+repo", "/assets/app.js", "/assets/app.css"].iter().map(|p| web.get(p).2.len()).sum();
    eprintln!("page weight (HTML + JS + CSS): {weight} bytes");
    assert!(weight < 100 * 1024, "{weight} bytes");
}

#[test]
fn allow_host_admits_a_named_host_and_mcp_shares_the_port() {
    if !model_ready() {
        return;
    }
    let web = Web::start(&["--allow-host", "atlas.internal"]);
    assert_eq!(get(web.addr, "/", "atlas.internal:8080").0, 200);
    assert_eq!(get(web.addr, "/", "other.internal").0, 403);
    // The rag server answers at /mcp on the same port.
    let rt = crate::mcp::rt();
    rt.block_on(async {
        use rmcp::ServiceExt as _;
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(web.url("/mcp"));
        let client = ().serve(transport).await.unwrap_or_else(|e| panic!("initialize: {e}; {}", web.log()));
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "search_docs"), "{tools:?}");
        let r = crate::mcp::call(&client, "search_docs", serde_json::json!({"query": "helm"})).await;
        let (_, v) = crate::mcp::ok(r);
        assert!(!v["hits"].as_array().unwrap().is_empty());
        client.cancel().await.unwrap();
    });
}

/// Debian's Chromium, or None (with the reason printed) unless ATLAS_REQUIRE_CHROMIUM.
pub(crate) fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("ATLAS_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if path.is_file() {
        return Some(path);
    }
    assert!(std::env::var_os("ATLAS_REQUIRE_CHROMIUM").is_none(), "no Chromium at {}", path.display());
    atlas_e2e::skip(&format!("no Chromium at {} (apt-get install chromium, or set ATLAS_CHROMIUM)", path.display()));
    None
}

fn screenshots() -> PathBuf {
    // target/<profile>/atlas → target/screenshots
    let dir = bin("atlas").parent().and_then(Path::parent).unwrap().join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Headless Chromium with a fresh profile in `profile`, as the probe starts it.
pub(crate) fn launch(chrome: PathBuf, profile: &Path) -> headless_chrome::Browser {
    use headless_chrome::{Browser, LaunchOptions};
    let args: Vec<&std::ffi::OsStr> =
        ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-component-update"]
            .iter()
            .map(std::ffi::OsStr::new)
            .collect();
    Browser::new(
        LaunchOptions::default_builder()
            .path(Some(chrome))
            .headless(true)
            .sandbox(false)
            .window_size(Some((1280, 900)))
            .user_data_dir(Some(profile.to_owned()))
            .idle_browser_timeout(Duration::from_secs(120))
            .args(args)
            .build()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn slow_the_page_works_in_a_real_browser() {
    use headless_chrome::protocol::cdp::{Emulation, Page};
    if !model_ready() {
        return;
    }
    let Some(chrome) = chromium() else { return };
    // The LLM the Ask tab streams from: three chunks, one citing a source not given.
    let llm = Server::start(|_| {
        chat_stream(
            &["Add the chart repository with `helm repo add` [1]", ", then install it [", "9]."],
            Duration::from_millis(150),
        )
    });
    let web = Web::start(&["--llm", &llm.url("/v1"), "--model", "tiny"]);
    let profile = tempfile::tempdir().unwrap();
    let browser = launch(chrome, profile.path());
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(30));
    let eval = |js: &str| -> Value { tab.evaluate(js, false).unwrap().value.unwrap_or(Value::Null) };
    let wait_for = |js: &str, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while eval(js) != Value::Bool(true) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; page: {}",
                tab.get_content().unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let shot = |name: &str| {
        let png = tab.capture_screenshot(Page::CaptureScreenshotFormatOption::Png, None, None, true).unwrap();
        std::fs::write(screenshots().join(name), png).unwrap();
    };

    // 1. Type a query (after `/` focuses the box) and see the hits.
    tab.navigate_to(&web.url("/")).unwrap().wait_until_navigated().unwrap();
    tab.wait_for_element("#q").unwrap();
    eval("document.activeElement.blur(); true");
    tab.press_key("/").unwrap();
    assert_eq!(eval("document.activeElement.id"), "q", "`/` focuses the query box");
    tab.type_str("helm repo").unwrap();
    wait_for("document.body.dataset.renderedQuery === 'helm repo'", "results as you type");
    eprintln!(
        "keystroke to results in the browser: {} ms (of which the 150 ms debounce; request to rendered results {} ms)",
        eval("document.body.dataset.renderMs"),
        eval("document.body.dataset.fetchMs")
    );
    assert!(eval("location.search").as_str().unwrap().contains("q=helm+repo"), "the URL carries the query");
    assert!(eval("document.querySelector('#results .hit h2').textContent").as_str().unwrap().contains("Install"));
    shot("search.png");

    // 2. Switch the mode and the kind.
    eval("const m = document.querySelector('#mode'); m.value = 'keyword'; m.dispatchEvent(new Event('change')); true");
    wait_for("location.search.includes('mode=keyword')", "the mode in the URL");
    eval(
        "document.querySelector('#q').value = 'retry after header'; document.body.dataset.searches = ''; const k = document.querySelector('#kind'); k.value = 'code'; k.dispatchEvent(new Event('change')); true",
    );
    wait_for("location.search.includes('kind=code') && document.body.dataset.searches !== ''", "kind=code results");
    let kinds =
        eval("[...document.querySelectorAll('#results .hit .badge:first-child')].map(b => b.textContent).join(',')");
    assert!(!kinds.as_str().unwrap().is_empty() && kinds.as_str().unwrap().split(',').all(|k| k == "code"), "{kinds}");

    // 3. Open a citation's source view: the cited range is marked and in view.
    tab.navigate_to(&web.url("/?q=helm+repo&mode=hybrid&kind=docs")).unwrap().wait_until_navigated().unwrap();
    tab.wait_for_element("#results .hit a[href^='/source']").unwrap().click().unwrap();
    tab.wait_until_navigated().unwrap();
    wait_for("document.querySelector('.cited') !== null", "the marked range");
    let in_view = eval(
        "(() => { const r = document.querySelector('.cited').getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; })()",
    );
    assert_eq!(in_view, Value::Bool(true), "the cited range is scrolled into view");
    assert!(eval("location.pathname") == "/source");
    shot("source.png");

    // 4. Ask: the answer streams, then its sources link to the source view.
    tab.navigate_to(&web.url("/ask")).unwrap().wait_until_navigated().unwrap();
    tab.wait_for_element("#q").unwrap().click().unwrap();
    tab.type_str("How do I install with Helm?").unwrap();
    tab.press_key("Enter").unwrap();
    wait_for("document.body.dataset.firstTokenMs !== undefined", "the first streamed text");
    wait_for("document.body.dataset.answered === '1'", "the whole answer");
    let pieces = eval("Number(document.body.dataset.textEvents)");
    assert!(pieces.as_f64().unwrap() >= 2.0, "the answer came in one piece: {pieces}");
    let answer = eval("document.querySelector('#answer .text').textContent");
    assert!(
        answer.as_str().unwrap().starts_with("Add the chart repository with helm repo add [1], then install it."),
        "{answer}"
    );
    assert!(answer.as_str().unwrap().contains("Removed citations to sources that were not given: [9]"), "{answer}");
    eprintln!("ask in the browser: first text after {} ms", eval("document.body.dataset.firstTokenMs"));
    assert_eq!(eval("document.querySelector('a.ref').getAttribute('href')"), "#src-1");
    shot("answer.png");
    let href = eval("document.querySelector('#src-1 a').getAttribute('href')");
    assert!(href.as_str().unwrap().starts_with("/source?id="), "{href}");
    tab.wait_for_element("#src-1 a").unwrap().click().unwrap();
    tab.wait_until_navigated().unwrap();
    wait_for("document.querySelector('.cited') !== null", "the cited source from the answer");

    // 6. Payloads in a corpus page do not run, on the results page or in the source view.
    tab.navigate_to(&web.url("/?q=payload+escaping+rules&mode=keyword")).unwrap().wait_until_navigated().unwrap();
    tab.wait_for_element("#results .hit").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        eval("document.body.dataset.pwned === undefined"),
        Value::Bool(true),
        "a payload ran on the results page"
    );
    tab.wait_for_element("#results .hit a[href^='/source']").unwrap().click().unwrap();
    tab.wait_until_navigated().unwrap();
    wait_for("document.querySelector('.md') !== null", "the payload page's source view");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        eval("document.body.dataset.pwned === undefined"),
        Value::Bool(true),
        "a payload ran in the source view"
    );
    let text = eval("document.body.innerText");
    assert!(text.as_str().unwrap().contains("<script>document.body.dataset.pwned=1</script>"), "{text}");

    // 5. With JavaScript off, the form still searches (server-rendered).
    let plain = browser.new_tab().unwrap();
    plain.call_method(Emulation::SetScriptExecutionDisabled { value: true }).unwrap();
    plain.navigate_to(&web.url("/")).unwrap().wait_until_navigated().unwrap();
    // No script can run here, so no element helper that calls into the page: the box
    // has `autofocus`, the keys go to it, and the DOM is read over the protocol.
    plain.wait_for_element("#q").unwrap();
    plain.type_str("kubectl").unwrap();
    plain.press_key("Enter").unwrap();
    plain.wait_for_element("#results .hit mark").unwrap();
    assert!(plain.get_url().contains("q=kubectl"), "{}", plain.get_url());
    eprintln!("screenshots in {}", screenshots().display());
}

#[test]
fn a_page_that_leaves_stops_its_answer() {
    use std::io::{Read as _, Write as _};
    if !model_ready() {
        return;
    }
    let pieces: Vec<String> = (0..30).map(|i| format!("word{i} ")).collect();
    let llm = Server::start(move |_| {
        chat_stream(&pieces.iter().map(String::as_str).collect::<Vec<_>>(), Duration::from_millis(300))
    });
    let web = Web::start(&["--llm", &llm.url("/v1")]);
    let mut conn = std::net::TcpStream::connect(web.addr).unwrap();
    let form = "q=How+do+I+install+with+Helm%3F";
    write!(
        conn,
        "POST /api/ask/stream HTTP/1.1\r\nHost: {}\r\nOrigin: http://{}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        web.addr,
        web.addr,
        form.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("event: text") {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    drop(conn);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !web.log().contains("went away; stopped") {
        assert!(Instant::now() < deadline, "the answer went on after the page left: {}", web.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}
