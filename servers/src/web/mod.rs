//! `atlas serve web`: a page for people over the same bundle the rag server serves.
//!
//! Server-rendered HTML first (every page works with JavaScript off), one small
//! script on top (results as you type, `/` to focus, the Ask tab's stream), one
//! stylesheet; all three are served by the binary, no CDN. Routes:
//!
//! | route | what |
//! |---|---|
//! | `/?q=…&mode=…&kind=…&section=…&language=…&repo=…` | the search page (`&partial=1`: the results block alone) |
//! | `/source?id=CHUNK` | the chunk's file, rendered, the cited lines marked |
//! | `/ask?q=…` | the Ask tab, the question filled in (GET asks nothing) |
//! | POST `/ask` (`q=…`) | the Ask tab, answered server-side |
//! | `/api/search?q=…` | what `atlas search --json` prints |
//! | POST `/api/ask` (`q=…`) | what `atlas ask --json` prints |
//! | POST `/api/ask/stream` (`q=…`) | the answer as server-sent events: `sources`, `text`…, `notice`, `done` |
//! | `/mcp` | the rag server over streamable HTTP |
//!
//! Every response carries a strict Content-Security-Policy (scripts and styles from
//! this origin only, no inline script, no framing); a request whose Host is not
//! loopback (or `--allow-host`) gets 403. Asking spends the LLM's budget, so only a
//! same-origin POST asks ([`same_origin`]): a page on another origin (an `<img>`, a
//! form, a no-cors fetch) gets 403 and never reaches the LLM.

mod highlight;
pub mod render;

use atlas_runtime::ChunkKind;
use std::convert::Infallible;
use std::sync::Arc;

use atlas_runtime::search::{Filters, MAX_TOP_K, SearchRequest};
use atlas_runtime::{Bundle, Hit, Mode, SearchOptions};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ask::{self, AskOptions, Event};
use atlas_mcp::library::Libraries;
use render::{Facets, SearchQuery};

/// Hits on the search page.
const PAGE_HITS: usize = 10;
/// The pool facets are counted in.
const FACET_POOL: usize = 50;
/// Larger mirror files are not shown.
const MAX_SOURCE_BYTES: u64 = 8 << 20;
/// The longest query string read.
const MAX_QUERY_STRING: usize = 8 * 1024;

const APP_JS: &str = include_str!("app.js");
const APP_CSS: &str = include_str!("app.css");

#[derive(Clone, Debug)]
pub struct Web {
    pub libs: Libraries,
    pub ask: AskOptions,
    pub allow_hosts: Arc<Vec<String>>,
}

/// The web routes (the caller adds `/mcp`).
pub fn router(web: Web) -> axum::Router {
    use axum::routing::get;
    let hosts = web.allow_hosts.clone();
    axum::Router::new()
        .route("/", get(search_page))
        .route("/source", get(source_page))
        .route("/ask", get(ask_form).post(ask_page))
        .route("/api/search", get(api_search))
        .route("/api/ask", axum::routing::post(api_ask).get(use_post))
        .route("/api/ask/stream", axum::routing::post(api_ask_stream).get(use_post))
        .route("/assets/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/assets/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        .fallback(|| async { (StatusCode::NOT_FOUND, html_response(String::from("<p>Not found.</p>"))) })
        .with_state(web)
        .layer(axum::middleware::from_fn(move |req: Request, next: Next| {
            let hosts = hosts.clone();
            async move { guard(req, next, &hosts).await }
        }))
}

/// The Host check (the security headers are the server's, on every response).
async fn guard(req: Request, next: Next, hosts: &[String]) -> Response {
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !atlas_mcp::transport::host_allowed(host, hosts) {
        tracing::warn!("refused a request for Host {host:?}");
        return (
            StatusCode::FORBIDDEN,
            format!("Host {host:?} is not served here; only loopback hosts are, unless --allow-host names it\n"),
        )
            .into_response();
    }
    next.run(req).await
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

fn html_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// JSON as the CLI prints it (pretty, one trailing newline).
fn json_response(status: StatusCode, v: &impl serde::Serialize) -> Response {
    let body = serde_json::to_string_pretty(v).map_or_else(|e| format!("{{\"error\": \"{e}\"}}"), |s| s + "\n");
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The query string's parameters (the first of each name; bounded).
fn params(req: &Request) -> Result<Vec<(String, String)>, String> {
    let qs = req.uri().query().unwrap_or("");
    if qs.len() > MAX_QUERY_STRING {
        return Err(format!("the query string is over {MAX_QUERY_STRING} bytes; shorten it"));
    }
    Ok(url::form_urlencoded::parse(qs.as_bytes()).into_owned().collect())
}

fn get<'a>(p: &'a [(String, String)], key: &str) -> Option<&'a str> {
    p.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).filter(|v| !v.trim().is_empty())
}

fn search_query(p: &[(String, String)]) -> Result<SearchQuery, String> {
    let mode = get(p, "mode").map_or(Ok(Mode::Hybrid), str::parse)?;
    let kind = get(p, "kind").map(str::parse::<ChunkKind>).transpose()?;
    Ok(SearchQuery {
        q: get(p, "q").unwrap_or("").trim().to_owned(),
        mode,
        kind,
        section: get(p, "section").map(str::to_owned),
        language: get(p, "language").map(str::to_owned),
        repo: get(p, "repo").map(str::to_owned),
        library: get(p, "library").map(str::to_owned),
    })
}

fn options(s: &SearchQuery, top_k: usize, facets: bool) -> SearchOptions {
    SearchRequest {
        mode: Some(s.mode),
        top_k: Some(top_k),
        filters: Filters {
            kind: s.kind,
            section: s.section.clone().filter(|_| facets),
            language: s.language.clone().filter(|_| facets),
            repo: s.repo.clone().filter(|_| facets),
            ..Filters::default()
        },
        ..SearchRequest::default()
    }
    .options(MAX_TOP_K)
}

/// The page's hits and the facet counts of the pool they come from. One search
/// when no facet is chosen (the page shows the pool's head); two when one is. The
/// library facet is counted over every library.
fn run_search(libs: &Libraries, s: &SearchQuery) -> Result<(Vec<Hit>, Facets), String> {
    let search = |top_k, facets, library: Option<&str>| {
        libs.search(&s.q, &options(s, top_k, facets), library).map(|(found, _)| found.hits).map_err(|e| e.to_string())
    };
    let pool = search(FACET_POOL, false, None)?;
    let facets = Facets::of(&pool);
    let hits = if s.section.is_none() && s.language.is_none() && s.repo.is_none() && s.library.is_none() {
        pool.into_iter().take(PAGE_HITS).collect()
    } else {
        search(PAGE_HITS, true, s.library.as_deref())?
    };
    Ok((hits, facets))
}

/// The name the page shows: the one library's, or how many are served.
fn served(libs: &Libraries) -> String {
    match libs.bundles().as_slice() {
        [one] => one.manifest.name.clone(),
        many => format!("{} libraries", many.len()),
    }
}

/// Runs a fallible job off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f).await.map_err(|e| format!("internal error: {e}"))?
}

async fn search_page(State(web): State<Web>, req: Request) -> Response {
    let p = match params(&req) {
        Ok(p) => p,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, html_response(render::page("Error", "", "Search", "", &esc_p(&e))))
                .into_response();
        }
    };
    let partial = get(&p, "partial").is_some();
    let (s, found) = match search_query(&p) {
        Ok(s) if s.q.is_empty() => (s, Ok((Vec::new(), Facets::default()))),
        Ok(s) => {
            let (libs, ss) = (web.libs.clone(), s.clone());
            let r = blocking(move || run_search(&libs, &ss)).await;
            (s, r)
        }
        Err(e) => (SearchQuery { q: get(&p, "q").unwrap_or("").to_owned(), ..SearchQuery::default() }, Err(e)),
    };
    let status = if found.is_ok() { StatusCode::OK } else { StatusCode::BAD_REQUEST };
    let results = match &found {
        Ok((hits, facets)) => render::results(&s, hits, facets, None),
        Err(e) => render::results(&s, &[], &Facets::default(), Some(e)),
    };
    if partial {
        return (status, html_response(results)).into_response();
    }
    let title = if s.q.is_empty() { "Search".to_owned() } else { s.q.clone() };
    let body = format!("{}{results}", render::search_form(&s));
    (status, html_response(render::page(&title, &served(&web.libs), "Search", &s.q, &body))).into_response()
}

fn esc_p(e: &str) -> String {
    format!(r#"<p class="error" role="alert">{}</p>"#, render::esc(e))
}

async fn source_page(State(web): State<Web>, req: Request) -> Response {
    let name = served(&web.libs);
    let fail = |status: StatusCode, e: String| {
        (status, html_response(render::page("Source", &name, "", "", &esc_p(&e)))).into_response()
    };
    let p = match params(&req) {
        Ok(p) => p,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let Some(id) = get(&p, "id").map(str::to_owned) else {
        return fail(StatusCode::BAD_REQUEST, "which chunk? /source?id=CHUNK_ID (a search hit links here)".into());
    };
    let (libs, library) = (web.libs.clone(), get(&p, "library").map(str::to_owned));
    let r = blocking(move || source_body(&*libs.chunk_bundle(&id, library.as_deref())?, &id)).await;
    match r {
        Ok((title, html)) => html_response(render::page(&title, &name, "", "", &html)),
        Err(e) => fail(StatusCode::NOT_FOUND, e),
    }
}

/// The source view of chunk `id`: its file from the mirror (checked against the
/// manifest), rendered, and its neighbours.
fn source_body(b: &Bundle, id: &str) -> Result<(String, String), String> {
    let ctx = b.get_chunk(id, 1).map_err(|e| e.to_string())?;
    let hit = &ctx.chunk.hit;
    let rel = format!("mirror/{}", hit.path);
    let size = b.manifest.artifact(&rel).map(|a| a.size).ok_or_else(|| format!("{} is not in the mirror", hit.path))?;
    if size > MAX_SOURCE_BYTES {
        return Err(format!("{} is {size} bytes, over the {MAX_SOURCE_BYTES}-byte view limit", hit.path));
    }
    let bytes = atlas_runtime::manifest::read_checked(&b.dir, &b.manifest, &rel).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes);
    let lines = (hit.start_line, hit.end_line);
    let body = if hit.kind == ChunkKind::Code {
        highlight::code(&text, &hit.path, hit.language.as_deref(), lines)
    } else {
        format!("<div class=\"md\">{}</div>", render::markdown(&text, lines))
    };
    let view = render::SourceView {
        hit,
        body,
        prev: ctx.before.last().map(|v| &v.hit),
        next: ctx.after.first().map(|v| &v.hit),
    };
    Ok((hit.title.clone(), render::source_page(&view)))
}

/// Whether a request that spends the LLM's budget comes from this page: it carries
/// an `Origin` or a `Sec-Fetch-Site` (browsers send `Origin` with every POST), its
/// `Origin` (when sent) is this server's, and its `Sec-Fetch-Site` (when sent) is
/// `same-origin`. A script that asks sends its own `Origin: http://HOST:PORT`.
pub fn same_origin(req: &Request) -> Result<(), String> {
    let h = req.headers();
    let host = h.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !h.contains_key(header::ORIGIN) && !h.contains_key("sec-fetch-site") {
        return Err(
            "a request without an Origin cannot ask; use this page's Ask form (a script sends Origin: http://HOST:PORT)"
                .into(),
        );
    }
    if let Some(site) = h.get("sec-fetch-site")
        && site.as_bytes() != b"same-origin"
    {
        return Err(format!(
            "a {} request cannot ask (Sec-Fetch-Site); use this page's Ask form",
            String::from_utf8_lossy(site.as_bytes()).chars().take(20).collect::<String>()
        ));
    }
    if let Some(origin) = h.get(header::ORIGIN) {
        let o = origin.to_str().ok().and_then(|o| url::Url::parse(o).ok());
        let same = o.is_some_and(|o| {
            matches!(o.scheme(), "http" | "https")
                && o.host_str().map(|h| match o.port() {
                    Some(p) => format!("{h}:{p}"),
                    None => h.to_owned(),
                }) == Some(host.to_owned())
        });
        if !same {
            return Err("a request from another origin cannot ask; use this page's Ask form".into());
        }
    }
    Ok(())
}

fn forbidden(e: String) -> Response {
    tracing::warn!("refused a cross-site ask: {e}");
    json_response(StatusCode::FORBIDDEN, &serde_json::json!({ "error": e }))
}

async fn use_post() -> Response {
    let e = "ask with a POST from this page (q=…); a GET asks nothing";
    json_response(StatusCode::METHOD_NOT_ALLOWED, &serde_json::json!({ "error": e }))
}

/// The question of a POST: `q` of its form body, else of its query string.
async fn posted_question(req: Request) -> Result<String, String> {
    let qs = params(&req)?;
    let body = axum::body::to_bytes(req.into_body(), MAX_QUERY_STRING)
        .await
        .map_err(|_| format!("the form is over {MAX_QUERY_STRING} bytes; shorten the question"))?;
    let form: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    Ok(get(&form, "q").or_else(|| get(&qs, "q")).unwrap_or("").trim().to_owned())
}

/// The Ask tab without asking: a GET (a link, a reload) fills the question in.
async fn ask_form(State(web): State<Web>, req: Request) -> Response {
    let q = match params(&req) {
        Ok(p) => get(&p, "q").unwrap_or("").trim().to_owned(),
        Err(e) => return (StatusCode::BAD_REQUEST, html_response(esc_p(&e))).into_response(),
    };
    let body = render::ask_page(&q, None, None);
    let title = if q.is_empty() { "Ask".to_owned() } else { q.clone() };
    html_response(render::page(&title, &served(&web.libs), "Ask", &q, &body))
}

async fn ask_page(State(web): State<Web>, req: Request) -> Response {
    if let Err(e) = same_origin(&req) {
        tracing::warn!("refused a cross-site ask: {e}");
        return (StatusCode::FORBIDDEN, html_response(esc_p(&e))).into_response();
    }
    let q = match posted_question(req).await {
        Ok(q) => q,
        Err(e) => return (StatusCode::BAD_REQUEST, html_response(esc_p(&e))).into_response(),
    };
    let (answer, error) = if q.is_empty() {
        (None, None)
    } else {
        match ask::ask(&web.libs, None, &q, &web.ask, &mut |_| {}).await {
            Ok(a) => (Some(a), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        }
    };
    let body = render::ask_page(&q, answer.as_ref(), error.as_deref());
    let title = if q.is_empty() { "Ask".to_owned() } else { q.clone() };
    html_response(render::page(&title, &served(&web.libs), "Ask", &q, &body))
}

async fn api_search(State(web): State<Web>, req: Request) -> Response {
    let bad = |e: String| json_response(StatusCode::BAD_REQUEST, &serde_json::json!({ "error": e }));
    let p = match params(&req) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let s = match search_query(&p) {
        Ok(s) => s,
        Err(e) => return bad(e),
    };
    let k = match get(&p, "k").map(str::parse::<usize>) {
        None => 5,
        Some(Ok(k)) if (1..=MAX_TOP_K).contains(&k) => k,
        Some(_) => return bad(format!("k must be a whole number from 1 to {MAX_TOP_K}")),
    };
    let (libs, q, opts) = (web.libs.clone(), s.q.clone(), options(&s, k, true));
    let library = s.library.clone();
    match blocking(move || {
        libs.search(&q, &opts, library.as_deref()).map(|(found, _)| found.hits).map_err(|e| e.to_string())
    })
    .await
    {
        Ok(hits) => json_response(StatusCode::OK, &atlas_mcp::output::search_json(&s.q, s.mode, &hits)),
        Err(e) => bad(e),
    }
}

async fn api_ask(State(web): State<Web>, req: Request) -> Response {
    let bad = |e: String| json_response(StatusCode::BAD_REQUEST, &serde_json::json!({ "error": e }));
    if let Err(e) = same_origin(&req) {
        return forbidden(e);
    }
    let q = match posted_question(req).await {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    match ask::ask(&web.libs, None, &q, &web.ask, &mut |_| {}).await {
        Ok(a) => json_response(StatusCode::OK, &a),
        Err(e) => bad(format!("{e:#}")),
    }
}

/// The answer as server-sent events while it forms.
async fn api_ask_stream(State(web): State<Web>, req: Request) -> Response {
    use axum::response::sse::{Event as Sse, KeepAlive};
    if let Err(e) = same_origin(&req) {
        return forbidden(e);
    }
    let q = match posted_question(req).await {
        Ok(q) => q,
        Err(e) => return json_response(StatusCode::BAD_REQUEST, &serde_json::json!({ "error": e })),
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Sse>();
    tokio::spawn(async move {
        let send = tx.clone();
        let mut on = move |ev: Event<'_>| {
            let e = match ev {
                Event::Sources(s) => Sse::default().event("sources").data(render::sources_html(s)),
                Event::Text(t) => Sse::default().event("text").data(serde_json::Value::from(t).to_string()),
                Event::Notice(n) => Sse::default().event("notice").data(n.replace('\n', " ")),
            };
            let _ = send.send(e);
        };
        // A browser that goes away stops the answer (and the LLM's work on it).
        let answered = tokio::select! {
            r = ask::ask(&web.libs, None, &q, &web.ask, &mut on) => r,
            () = tx.closed() => {
                tracing::info!("the page asking {q:?} went away; stopped");
                return;
            }
        };
        let last = match answered {
            Ok(a) => Sse::default().event("done").data(render::answer_html(&a)),
            Err(e) => Sse::default().event("failed").data(format!("{e:#}").replace('\n', " ")),
        };
        let _ = tx.send(last);
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx)) });
    axum::response::sse::Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// Serves the web page (and the rag server at `/mcp`) on `addr` until Ctrl-C.
pub async fn serve(
    web: Web,
    rerank: bool,
    addr: std::net::SocketAddr,
    opts: atlas_mcp::transport::HttpOptions,
) -> anyhow::Result<()> {
    let ct = tokio_util::sync::CancellationToken::new();
    let libs = web.libs.clone();
    let mcp = atlas_mcp::transport::mcp_router(
        move || atlas_mcp::rag::RagServer::libraries(libs.clone(), rerank),
        &opts,
        &ct,
    );
    let app = router(web).merge(mcp);
    atlas_mcp::transport::serve_router(app, addr, "the web page", "/", ct).await
}
