//! A real HTTP/1.1 server on 127.0.0.1 for the crawler tests: one thread per
//! connection, `Connection: close`, and responses that can misbehave on purpose
//! (drip bytes slowly, stall, reset).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The body, as Content-Length said.
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone)]
pub enum Body {
    Bytes(Vec<u8>),
    /// Send the bytes one at a time, pausing between them.
    Drip(Vec<u8>, Duration),
    /// Send headers, then nothing for this long.
    Stall(Duration),
    /// Close the socket without answering.
    Reset,
    /// Announce all the bytes (Content-Length), send the first `usize`, then close.
    Cut(Vec<u8>, usize),
    /// Send each piece, pausing before each (a stream of server-sent events).
    Pieces(Vec<Vec<u8>>, Duration),
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl Response {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response { status, headers: Vec::new(), body: Body::Bytes(body.into()) }
    }
    pub fn header(mut self, k: &str, v: &str) -> Response {
        self.headers.push((k.to_owned(), v.to_owned()));
        self
    }
}

/// What the server saw: `(path, status, If-None-Match sent?)`.
pub type Log = Arc<Mutex<Vec<(String, u16, bool)>>>;

type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

#[derive(Debug)]
pub struct Server {
    pub addr: SocketAddr,
    pub log: Log,
    stop: Arc<AtomicBool>,
}

impl Server {
    pub fn start(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let stop = Arc::new(AtomicBool::new(false));
        let log: Log = Arc::default();
        let handler: Handler = Arc::new(handler);
        let (stop2, log2) = (stop.clone(), log.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (handler, log) = (handler.clone(), log2.clone());
                std::thread::spawn(move || serve(conn, &handler, &log));
            }
        });
        Server { addr, log, stop }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests for `path` and their statuses.
    pub fn hits(&self, path: &str) -> Vec<u16> {
        self.log.lock().unwrap().iter().filter(|(p, _, _)| p == path).map(|(_, s, _)| *s).collect()
    }

    pub fn all(&self) -> Vec<(String, u16, bool)> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wake the accept loop
    }
}

fn serve(mut conn: TcpStream, handler: &Handler, log: &Log) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(conn.try_clone().expect("clone socket"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("/").to_owned());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let req = Request { method, path: path.clone(), headers, body };
    let resp = handler(&req);
    log.lock().unwrap().push((path, resp.status, req.header("if-none-match").is_some()));
    let body_len = match &resp.body {
        Body::Bytes(b) | Body::Drip(b, _) | Body::Cut(b, _) => b.len(),
        Body::Pieces(p, _) => p.iter().map(Vec::len).sum(),
        Body::Stall(_) => 1,
        Body::Reset => {
            let _ = conn.shutdown(std::net::Shutdown::Both);
            return;
        }
    };
    let mut head = format!("HTTP/1.1 {} {}\r\nConnection: close\r\n", resp.status, reason(resp.status));
    if !(resp.status == 304 || (100..200).contains(&resp.status)) {
        head.push_str(&format!("Content-Length: {body_len}\r\n"));
    }
    for (k, v) in &resp.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if conn.write_all(head.as_bytes()).is_err() {
        return;
    }
    match resp.body {
        Body::Bytes(b) if resp.status != 304 => {
            let _ = conn.write_all(&b);
        }
        Body::Drip(b, every) => {
            for byte in b {
                if conn.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        }
        Body::Pieces(pieces, pause) => {
            for p in pieces {
                std::thread::sleep(pause);
                if conn.write_all(&p).and_then(|()| conn.flush()).is_err() {
                    return;
                }
            }
        }
        Body::Stall(d) => std::thread::sleep(d),
        Body::Cut(b, at) => {
            let _ = conn.write_all(&b[..at.min(b.len())]);
            let _ = conn.flush();
            let _ = conn.shutdown(std::net::Shutdown::Both);
            return;
        }
        _ => {}
    }
    let _ = conn.flush();
    // Drain what the client may still send, then close.
    let _ = conn.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 256];
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = conn.read(&mut sink);
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        401 => "Unauthorized",
        416 => "Range Not Satisfiable",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Serves a folder as a static site under `prefix` (e.g. `/docs`), with ETags and
/// conditional GETs; `llms.txt` has `rewrite.0` replaced by `rewrite.1`.
pub fn static_site(root: PathBuf, prefix: &'static str, rewrite: (String, String)) -> impl Fn(&Request) -> Response {
    move |req| {
        let path = req.path.split('?').next().unwrap_or("/");
        let Some(rel) = path.strip_prefix(prefix) else { return Response::new(404, "not found") };
        let rel = rel.trim_start_matches('/');
        if rel.split('/').any(|s| s == "..") {
            return Response::new(404, "not found");
        }
        let file = root.join(if rel.is_empty() { "index.html" } else { rel });
        let Ok(mut bytes) = std::fs::read(&file) else { return Response::new(404, "not found") };
        if rel == "llms.txt" {
            bytes = String::from_utf8_lossy(&bytes).replace(&rewrite.0, &rewrite.1).into_bytes();
        }
        let etag = format!("\"{}\"", &blake3::hash(&bytes).to_hex()[..16]);
        if req.header("if-none-match") == Some(etag.as_str()) {
            return Response::new(304, "").header("ETag", &etag);
        }
        Response::new(200, bytes).header("ETag", &etag).header("Content-Type", "text/markdown; charset=utf-8")
    }
}

/// Serves a real GitBook site folder (a copy of it) as published, under `prefix`,
/// with its llms.txt base `base` rewritten to this server.
pub fn serve_site(corpora: &std::path::Path, site: &str, base: &str, prefix: &'static str) -> Server {
    let root = tempfile::tempdir().expect("temp dir").keep();
    crate::copy_tree(&corpora.join(site), &root);
    let port = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let port2 = port.clone();
    let base = base.to_owned();
    let handler = move |req: &Request| {
        let to = format!("http://127.0.0.1:{}{prefix}", port2.load(Ordering::SeqCst));
        static_site(root.clone(), prefix, (base.clone(), to))(req)
    };
    let server = Server::start(handler);
    port.store(usize::from(server.addr.port()), Ordering::SeqCst);
    server
}

/// An OpenAI-compatible streamed chat completion: one SSE event per piece, then
/// `[DONE]`.
pub fn chat_stream(pieces: &[&str], pause: Duration) -> Response {
    let mut events: Vec<Vec<u8>> = pieces
        .iter()
        .map(|p| {
            let chunk = serde_json::json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": p}}]});
            format!("data: {chunk}\n\n").into_bytes()
        })
        .collect();
    events.push(b"data: [DONE]\n\n".to_vec());
    Response {
        status: 200,
        headers: vec![("Content-Type".into(), "text/event-stream".into())],
        body: Body::Pieces(events, pause),
    }
}

/// A plain HTTP/1.1 GET (Connection: close) with the Host header given:
/// `(status, headers, body)`.
pub fn get(addr: SocketAddr, path: &str, host: &str) -> (u16, Vec<(String, String)>, String) {
    request(addr, "GET", path, host, &[], "")
}

/// A POST of a form body (`q=…`) with `headers` (`Origin`, `Sec-Fetch-Site`…), as a
/// browser's form or fetch sends it.
pub fn post(
    addr: SocketAddr,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    form: &str,
) -> (u16, Vec<(String, String)>, String) {
    let mut h = vec![("Content-Type", "application/x-www-form-urlencoded")];
    h.extend_from_slice(headers);
    request(addr, "POST", path, host, &h, form)
}

/// One request on its own connection; the status, the headers (lower-cased names) and
/// the body (de-chunked).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAccept: */*\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    // A server may answer (and close) before it has read everything: read its answer.
    let _ = write!(conn, "{head}\r\n{body}");
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    (status, headers, if chunked { dechunk(body) } else { body.to_owned() })
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}
