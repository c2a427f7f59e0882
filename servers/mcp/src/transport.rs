//! How the servers talk: stdio (one JSON-RPC message per line) and streamable HTTP.
//!
//! rmcp's stdio transport silently ignores a line that is not JSON and silently drops
//! an over-long one; a client waiting on either hangs. So stdin goes through a guard
//! first: each line is bounded in memory (`MAX_LINE_BYTES`), a leading BOM is
//! stripped, and a line that is not JSON, a batch array, or a line over the cap gets a
//! JSON-RPC error back (id null) while the session goes on. Everything written to
//! stdout, rmcp's replies and the guard's errors alike, goes through one writer task,
//! a whole line at a time, so nothing but protocol reaches stdout.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::{ServerHandler, ServiceExt as _};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

/// The longest request line accepted on stdio.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

fn error_line(code: i64, message: &str) -> Vec<u8> {
    let mut v = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}
    }))
    .unwrap_or_default();
    v.push(b'\n');
    v
}

/// One stdin line, bounded: `Ok(Some(line))`, `Err(len)` for a line over the cap
/// (consumed and dropped), `Ok(None)` at end of input.
async fn read_bounded<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    max: usize,
) -> std::io::Result<Result<Option<Vec<u8>>, usize>> {
    let mut line = Vec::new();
    let mut dropped = 0usize;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if dropped > 0 {
                Err(dropped)
            } else if line.is_empty() {
                Ok(None)
            } else {
                Ok(Some(line))
            });
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if dropped > 0 || line.len() + take > max {
            dropped += line.len() + take;
            line.clear();
        } else {
            line.extend_from_slice(&buf[..take]);
        }
        r.consume(take);
        if done {
            return Ok(if dropped > 0 { Err(dropped) } else { Ok(Some(line)) });
        }
    }
}

/// A request whose params have the wrong shape gets -32602 (invalid params) with its
/// id, rather than whatever the dispatcher makes of it (rmcp answers -32601).
pub fn check_params(msg: &serde_json::Value) -> Option<Vec<u8>> {
    let method = msg.get("method")?.as_str()?;
    let id = msg.get("id").cloned().unwrap_or(serde_json::Value::Null);
    let params = msg.get("params");
    let why = match params {
        None | Some(serde_json::Value::Null | serde_json::Value::Object(_)) => None,
        Some(_) => Some("params must be an object"),
    }
    .or_else(|| {
        // The requests whose params must name a thing: without it rmcp answers -32601.
        let needs = match method {
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
            "prompts/get" => Some("name"),
            _ => None,
        };
        let named = |key: &str| {
            params
                .and_then(serde_json::Value::as_object)
                .and_then(|p| p.get(key))
                .is_some_and(serde_json::Value::is_string)
        };
        match needs {
            Some("uri") if !named("uri") => return Some("this request needs params.uri, a resource URI"),
            Some("name") if !named("name") => return Some("prompts/get needs params.name, the prompt's name"),
            _ => {}
        }
        if method != "tools/call" {
            return None;
        }
        let p = params.and_then(serde_json::Value::as_object);
        match (p.and_then(|p| p.get("name")), p.and_then(|p| p.get("arguments"))) {
            (
                Some(serde_json::Value::String(_)),
                None | Some(serde_json::Value::Null | serde_json::Value::Object(_)),
            ) => None,
            (Some(serde_json::Value::String(_)), Some(_)) => Some("tools/call arguments must be an object"),
            _ => Some("tools/call needs params.name, the tool's name"),
        }
    })?;
    let mut v = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("invalid params: {why}")}
    }))
    .unwrap_or_default();
    v.push(b'\n');
    Some(v)
}

/// What the guard does with one line.
pub fn guard_line(line: &[u8]) -> Result<Option<Vec<u8>>, Vec<u8>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice::<serde_json::Value>(line) {
        Err(e) => Err(error_line(-32700, &format!("parse error: {e}; send one JSON-RPC message per line"))),
        Ok(serde_json::Value::Array(_)) => {
            Err(error_line(-32600, "batch arrays are not supported; send one JSON-RPC message per line"))
        }
        Ok(msg) => {
            if let Some(reply) = check_params(&msg) {
                return Err(reply);
            }
            let mut v = line.to_vec();
            v.push(b'\n');
            Ok(Some(v))
        }
    }
}

/// Serves `server` over stdin/stdout until the client closes stdin.
pub async fn serve_stdio<S: ServerHandler>(server: S) -> anyhow::Result<()> {
    let (mut to_rmcp, rmcp_in) = tokio::io::duplex(1 << 20);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(1 << 20);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(256);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = rx.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let pump_tx = tx.clone();
    let pump = tokio::spawn(async move {
        let mut lines = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if pump_tx.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let guard_tx = tx;
    let guard = tokio::spawn(async move {
        let mut stdin = BufReader::with_capacity(64 * 1024, tokio::io::stdin());
        loop {
            match read_bounded(&mut stdin, MAX_LINE_BYTES).await {
                Ok(Ok(None)) | Err(_) => break,
                Ok(Err(len)) => {
                    tracing::warn!("dropped a {len}-byte request line (over {MAX_LINE_BYTES})");
                    let msg = format!("request line of {len} bytes is over the {MAX_LINE_BYTES}-byte limit; dropped");
                    if guard_tx.send(error_line(-32600, &msg)).await.is_err() {
                        break;
                    }
                }
                Ok(Ok(Some(line))) => match guard_line(&line) {
                    Ok(None) => {}
                    Ok(Some(ok)) => {
                        if to_rmcp.write_all(&ok).await.is_err() {
                            break;
                        }
                    }
                    Err(reply) => {
                        tracing::warn!("answered a malformed request line with a JSON-RPC error");
                        if guard_tx.send(reply).await.is_err() {
                            break;
                        }
                    }
                },
            }
        }
        // End of input: rmcp sees EOF and the session ends.
        drop(to_rmcp);
    });
    let service = server.serve((rmcp_in, rmcp_out)).await.map_err(|e| anyhow::anyhow!("MCP handshake failed: {e}"))?;
    let _ = service.waiting().await;
    guard.abort();
    let _ = pump.await;
    let _ = writer.await;
    Ok(())
}

/// Limits of the HTTP transport.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Open sessions at most; an `initialize` past it gets 503.
    pub max_sessions: usize,
    /// A session idle this long is closed.
    pub idle: std::time::Duration,
    /// Browser origins allowed besides loopback ones (`https://app.example.com:443`).
    pub allow_origins: Vec<String>,
    /// Host headers allowed besides loopback ones (`atlas.internal`, `atlas.internal:8080`).
    pub allow_hosts: Vec<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_sessions: 64,
            idle: std::time::Duration::from_secs(120),
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
        }
    }
}

/// The Host headers always accepted: loopback names, any port.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Whether a request's `Host` header (`name`, `name:port`, `[v6]:port`) is loopback
/// or one of `allowed` (a name, any port; or `name:port`).
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let Ok(auth) = host.parse::<axum::http::uri::Authority>() else { return false };
    let name = auth.host().trim_matches(['[', ']']).to_ascii_lowercase();
    LOOPBACK_HOSTS.contains(&name.as_str())
        || allowed.iter().any(|a| match a.parse::<axum::http::uri::Authority>() {
            Ok(want) => {
                want.host().trim_matches(['[', ']']).eq_ignore_ascii_case(&name)
                    && want.port_u16().is_none_or(|p| Some(p) == auth.port_u16())
            }
            Err(_) => false,
        })
}

/// A fresh server per session over streamable HTTP, to mount at `/mcp`. Only
/// loopback Host headers (and `allow_hosts`) are accepted (DNS-rebinding protection);
/// a request with an `Origin` header must come from a loopback origin or one of
/// `allow_origins`; sessions are capped and expire when idle.
pub fn mcp_router<S>(
    factory: impl Fn() -> S + Send + Sync + 'static,
    opts: &HttpOptions,
    ct: &tokio_util::sync::CancellationToken,
) -> axum::Router
where
    S: ServerHandler + Send + 'static,
{
    use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let mut manager = LocalSessionManager::default();
    let mut config = SessionConfig::default();
    config.keep_alive = Some(opts.idle);
    config.init_timeout = Some(std::time::Duration::from_secs(10));
    manager.session_config = config;
    let sessions = Arc::new(manager);
    let mut origins: Vec<String> =
        ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*", "https://localhost:*", "https://127.0.0.1:*"]
            .map(str::to_owned)
            .to_vec();
    origins.extend(opts.allow_origins.iter().cloned());
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.map(str::to_owned).to_vec();
    hosts.extend(opts.allow_hosts.iter().cloned());
    let service: StreamableHttpService<S, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(factory()),
        sessions.clone(),
        StreamableHttpServerConfig::default()
            .with_cancellation_token(ct.child_token())
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .with_max_request_body_bytes(MAX_LINE_BYTES),
    );
    let max = opts.max_sessions.max(1);
    let guard = axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
        let sessions = sessions.clone();
        async move { guard_http(req, next, &sessions, max).await }
    });
    axum::Router::new().nest_service("/mcp", service).layer(guard)
}

/// Serves `router` on `addr` until Ctrl-C (then cancels `ct`); `what` names it in
/// the line printed to stderr.
pub async fn serve_router(
    router: axum::Router,
    addr: SocketAddr,
    what: &str,
    path: &str,
    ct: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding {addr}: {e}; pick a free port, e.g. --http 127.0.0.1:8765"))?;
    let local = listener.local_addr()?;
    tracing::info!("listening on http://{local}{path}");
    eprintln!("atlas: serving {what} on http://{local}{path}");
    crate::http_serve::serve(listener, router, async move {
        let _ = tokio::signal::ctrl_c().await;
        ct.cancel();
    })
    .await
}

/// Serves a fresh server per session over streamable HTTP at `http://ADDR/mcp` until
/// Ctrl-C (see [`mcp_router`]).
pub async fn serve_http<S>(
    factory: impl Fn() -> S + Send + Sync + 'static,
    addr: SocketAddr,
    opts: HttpOptions,
) -> anyhow::Result<()>
where
    S: ServerHandler + Send + 'static,
{
    let ct = tokio_util::sync::CancellationToken::new();
    let router = mcp_router(factory, &opts, &ct);
    serve_router(router, addr, "MCP", "/mcp", ct).await
}

/// Before rmcp sees a POST: a new session past the cap gets 503, and a request whose
/// params have the wrong shape gets -32602 (see [`check_params`]).
async fn guard_http(
    req: axum::extract::Request,
    next: axum::middleware::Next,
    sessions: &rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    max_sessions: usize,
) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse as _;
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_LINE_BYTES).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, format!("request body over {MAX_LINE_BYTES} bytes")).into_response();
    };
    if let Ok(msg) = serde_json::from_slice::<serde_json::Value>(&bytes) {
        if msg.is_array() {
            // As on stdio: a JSON-RPC error, not an HTTP one a client cannot read.
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                error_line(-32600, "batch arrays are not supported; send one JSON-RPC message per request"),
            )
                .into_response();
        }
        if let Some(reply) = check_params(&msg) {
            return ([(header::CONTENT_TYPE, "application/json")], reply).into_response();
        }
        let opens_session = msg.get("method").and_then(|m| m.as_str()) == Some("initialize")
            && !parts.headers.contains_key("mcp-session-id");
        if opens_session && sessions.sessions.read().await.len() >= max_sessions {
            tracing::warn!("refused a session: {max_sessions} are open");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, "10")],
                format!("{max_sessions} sessions are open, the most this server allows; retry later"),
            )
                .into_response();
        }
    }
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_answers_what_rmcp_would_ignore() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(guard_line(ok).unwrap().unwrap(), [&ok[..], b"\n"].concat());
        let bom = [&b"\xEF\xBB\xBF"[..], ok, b"\r\n"].concat();
        assert_eq!(guard_line(&bom).unwrap().unwrap(), [&ok[..], b"\n"].concat());
        let err = String::from_utf8(guard_line(b"{not json\n").unwrap_err()).unwrap();
        assert!(err.contains("-32700") && err.contains("\"id\":null"), "{err}");
        let err = String::from_utf8(guard_line(b"[{\"jsonrpc\":\"2.0\"}]").unwrap_err()).unwrap();
        assert!(err.contains("-32600") && err.contains("batch"), "{err}");
        assert_eq!(guard_line(b"  \n").unwrap(), None);
    }

    fn cases() -> u32 {
        std::env::var("ATLAS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: cases(), failure_persistence: None, ..Default::default() })]

        /// Any line: no panic; what passes is one JSON object ending in a newline; what
        /// is refused gets one JSON-RPC error line.
        #[test]
        fn the_line_guard_never_panics(line in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
                                      json in "\\PC{0,80}") {
            for l in [line.as_slice(), json.as_bytes()] {
                match guard_line(l) {
                    Ok(Some(ok)) => {
                        proptest::prop_assert!(ok.ends_with(b"\n"));
                        let v: serde_json::Value = serde_json::from_slice(&ok).unwrap();
                        proptest::prop_assert!(!v.is_array());
                    }
                    Ok(None) => {}
                    Err(reply) => {
                        let v: serde_json::Value = serde_json::from_slice(&reply).unwrap();
                        proptest::prop_assert!(v["error"]["code"].is_i64());
                    }
                }
            }
        }

        /// Any stream, any cap: a line comes back whole or is reported by length, and
        /// never more than the cap is held.
        #[test]
        fn read_bounded_never_holds_more_than_the_cap(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000),
                                                     cap in 1usize..200, chunk in 1usize..64) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(async {
                let mut r = BufReader::with_capacity(chunk, &data[..]);
                let mut seen = 0usize;
                loop {
                    match read_bounded(&mut r, cap).await.unwrap() {
                        Ok(None) => break,
                        Ok(Some(line)) => {
                            assert!(line.len() <= cap);
                            seen += line.len();
                        }
                        Err(n) => {
                            assert!(n > cap);
                            seen += n;
                        }
                    }
                }
                assert_eq!(seen, data.len());
            });
        }
    }

    #[test]
    fn hosts_are_loopback_or_allowed() {
        let allowed = ["atlas.internal".to_owned(), "wiki.test:8080".to_owned()];
        let check = |host: &str, want: bool| assert_eq!(host_allowed(host, &allowed), want, "{host}");
        check("127.0.0.1:8080", true);
        check("localhost", true);
        check("[::1]:9", true);
        check("LOCALHOST:1", true);
        check("evil.test", false);
        check("127.0.0.1.evil.test", false);
        check("atlas.internal:1234", true);
        check("wiki.test:8080", true);
        check("wiki.test:8081", false);
        check("", false);
        check("a b", false);
    }

    #[test]
    fn wrong_shaped_params_get_invalid_params_with_their_id() {
        let v = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        let reply = check_params(&v(
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","arguments":"str"}}"#,
        ))
        .unwrap();
        let r: serde_json::Value = serde_json::from_slice(&reply).unwrap();
        assert_eq!((r["id"].as_i64(), r["error"]["code"].as_i64()), (Some(4), Some(-32602)));
        assert!(check_params(&v(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#)).is_none());
        assert!(check_params(&v(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)).is_none());
        assert!(check_params(&v(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":3}"#)).is_some());
        // Round 3, item 16: a resource read with no URI is invalid params, not an unknown method.
        let reply = check_params(&v(r#"{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{}}"#)).unwrap();
        let r: serde_json::Value = serde_json::from_slice(&reply).unwrap();
        assert_eq!((r["id"].as_i64(), r["error"]["code"].as_i64()), (Some(9), Some(-32602)));
        assert!(check_params(&v(r#"{"jsonrpc":"2.0","id":1,"method":"resources/read"}"#)).is_some());
        assert!(check_params(&v(r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":3}}"#)).is_some());
        assert!(
            check_params(&v(r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"atlas://x/y"}}"#))
                .is_none()
        );
    }

    #[tokio::test]
    async fn over_long_lines_are_bounded_and_reported() {
        let input = [vec![b'x'; 100], b"\n".to_vec(), b"ok\n".to_vec()].concat();
        let mut r = BufReader::with_capacity(16, &input[..]);
        assert_eq!(read_bounded(&mut r, 50).await.unwrap(), Err(101));
        assert_eq!(read_bounded(&mut r, 50).await.unwrap(), Ok(Some(b"ok\n".to_vec())));
        assert_eq!(read_bounded(&mut r, 50).await.unwrap(), Ok(None));
    }
}
