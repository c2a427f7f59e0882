//! Real parts for the distribution tests: moto's S3 server, a local GitHub releases
//! API that records and checks what it receives, and Range-honouring file serving.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::http::{Request, Response, Server};

/// A 200 or, with `Range: bytes=N-`, a 206 of `bytes` from N.
pub fn ranged(req: &Request, bytes: &[u8]) -> Response {
    let from = req
        .header("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    match from {
        Some(n) if n >= bytes.len() => Response::new(416, ""),
        Some(n) => Response::new(206, bytes[n..].to_vec())
            .header("Content-Range", &format!("bytes {n}-{}/{}", bytes.len() - 1, bytes.len())),
        None => Response::new(200, bytes.to_vec()),
    }
}

/// moto's S3-compatible server on 127.0.0.1, stopped on drop.
#[derive(Debug)]
pub struct Moto {
    child: Child,
    pub endpoint: String,
}

impl Moto {
    /// Starts `moto_server`; None (with the reason printed) when it is not installed,
    /// unless `ATLAS_REQUIRE_S3` is set, when that is a failure.
    pub fn start() -> Option<Moto> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let port_s = port.to_string();
        // The script pip puts on PATH, else the module (pip's bin folder may not be on PATH).
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port_s])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .or_else(|_| {
                Command::new("python3")
                    .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port_s])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
            });
        let missing = || {
            assert!(
                std::env::var_os("ATLAS_REQUIRE_S3").is_none(),
                "moto's server is not installed (pip install 'moto[server]') and ATLAS_REQUIRE_S3 is set"
            );
            crate::skip("moto's server is not installed (pip install 'moto[server]')");
            None
        };
        let Ok(child) = child else { return missing() };
        let mut m = Moto { child, endpoint: format!("http://127.0.0.1:{port}") };
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if m.child.try_wait().ok().flatten().is_some() {
                return missing();
            }
            assert!(t.elapsed() < Duration::from_secs(60), "moto's server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(m)
    }

    /// Creates a bucket (path style; moto takes unsigned requests).
    pub fn bucket(&self, name: &str) {
        let addr = self.endpoint.trim_start_matches("http://");
        let status = raw_request(addr, "PUT", &format!("/{name}"));
        assert!(status == 200, "creating bucket {name}: HTTP {status}");
    }

    /// The bytes of `bucket/key`, read with boto3 (which moto's server depends on).
    pub fn get(&self, path: &str) -> Vec<u8> {
        self.boto("sys.stdout.buffer.write(s3.get_object(Bucket=b, Key=k)['Body'].read())", path, b"")
    }

    /// Writes `bucket/key`.
    pub fn put(&self, path: &str, bytes: &str) {
        self.boto("s3.put_object(Bucket=b, Key=k, Body=sys.stdin.buffer.read())", path, bytes.as_bytes());
    }

    fn boto(&self, op: &str, path: &str, input: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let script = format!(
            "import sys, boto3\ns3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\nb, k = sys.argv[1].split('/', 1)\n{op}\n",
            self.endpoint
        );
        let mut child = Command::new("python3")
            .args(["-c", &script, path])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3");
        child.stdin.take().expect("stdin").write_all(input).expect("write");
        let out = child.wait_with_output().expect("boto3");
        assert!(out.status.success(), "boto3 {path}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    /// The environment an S3 client needs to reach it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_DEFAULT_REGION", "us-east-1".into()),
        ]
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bodiless request; returns the status.
pub fn raw_request(addr: &str, method: &str, path: &str) -> u16 {
    use std::io::{Read as _, Write as _};
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[derive(Debug, Clone)]
pub struct FakeAsset {
    pub id: usize,
    pub name: String,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct FakeRelease {
    pub id: usize,
    pub tag: String,
    pub assets: Vec<FakeAsset>,
}

#[derive(Debug, Default)]
pub struct GhState {
    pub releases: Vec<FakeRelease>,
    /// `METHOD path` of every request, in order.
    pub requests: Vec<String>,
    next_id: usize,
}

/// GitHub's releases API for `owner/repo`, on 127.0.0.1. It requires
/// `Authorization: Bearer <token>` on writes, `Content-Type: application/octet-stream`
/// on uploads, and the API's Accept header on API calls; it panics the test (a 400
/// answer and a recorded violation) otherwise.
#[derive(Debug)]
pub struct FakeGitHub {
    pub server: Server,
    pub storage: Server,
    pub state: Arc<Mutex<GhState>>,
    pub violations: Arc<Mutex<Vec<String>>>,
}

impl FakeGitHub {
    pub fn start(owner: &str, repo: &str, token: &str) -> FakeGitHub {
        let state: Arc<Mutex<GhState>> = Arc::default();
        let violations: Arc<Mutex<Vec<String>>> = Arc::default();
        // Assets are served from another origin, as GitHub redirects to its storage host.
        let (st, vio) = (state.clone(), violations.clone());
        let storage = Server::start(move |req| {
            let mut s = st.lock().unwrap();
            s.requests.push(format!("{} {}", req.method, req.path));
            let bad = |why: String| {
                vio.lock().unwrap().push(why.clone());
                Response::new(400, why)
            };
            let path = req.path.split('?').next().unwrap_or("").to_owned();
            if req.header("authorization").is_some() {
                return bad(format!("the token was sent on to the storage host ({path})"));
            }
            // The storage host redirects once more, on itself: a client that restores the
            // token on a same-host hop (reqwest's own policy) is caught here.
            if let Some(id) = path.strip_prefix("/download/") {
                return Response::new(307, "").header("Location", &format!("/blob/{id}"));
            }
            if let Some(id) = path.strip_prefix("/blob/") {
                let id: usize = id.parse().unwrap_or(0);
                let Some(a) = s.releases.iter().flat_map(|r| &r.assets).find(|a| a.id == id).cloned() else {
                    return Response::new(404, "");
                };
                return ranged(req, &a.bytes);
            }
            bad(format!("unexpected {} {} on the storage host", req.method, req.path))
        });
        let storage_url = storage.url("");
        let port = Arc::new(AtomicUsize::new(0));
        let (st, vio, p) = (state.clone(), violations.clone(), port.clone());
        let base = format!("/repos/{owner}/{repo}");
        let token = format!("Bearer {token}");
        let server = Server::start(move |req| {
            let host = format!("http://127.0.0.1:{}", p.load(Ordering::SeqCst));
            let mut s = st.lock().unwrap();
            s.requests.push(format!("{} {}", req.method, req.path));
            let bad = |why: String| {
                vio.lock().unwrap().push(why.clone());
                Response::new(400, why)
            };
            let path = req.path.split('?').next().unwrap_or("").to_owned();
            let write = req.method != "GET";
            if write && req.header("authorization") != Some(token.as_str()) {
                vio.lock().unwrap().push(format!("{} {} without the token", req.method, req.path));
                return Response::new(401, r#"{"message":"Bad credentials"}"#);
            }
            let api_call = !path.contains("/releases/assets/");
            if api_call && req.header("accept") != Some("application/vnd.github+json") {
                return bad(format!("{} {} without Accept: application/vnd.github+json", req.method, req.path));
            }
            let json = |r: &FakeRelease| release_json(&host, &base, r);
            if req.method == "GET" && path == format!("{base}/releases/latest") {
                return match s.releases.last() {
                    Some(r) => Response::new(200, json(r).to_string()),
                    None => Response::new(404, r#"{"message":"Not Found"}"#),
                };
            }
            if let Some(tag) = path.strip_prefix(&format!("{base}/releases/tags/")) {
                return match s.releases.iter().find(|r| r.tag == tag) {
                    Some(r) => Response::new(200, json(r).to_string()),
                    None => Response::new(404, r#"{"message":"Not Found"}"#),
                };
            }
            if req.method == "POST" && path == format!("{base}/releases") {
                let body: serde_json::Value = match serde_json::from_slice(&req.body) {
                    Ok(v) => v,
                    Err(e) => return bad(format!("create release: body is not JSON ({e})")),
                };
                let Some(tag) = body["tag_name"].as_str() else { return bad("create release without tag_name".into()) };
                s.next_id += 1;
                let r = FakeRelease { id: s.next_id, tag: tag.to_owned(), assets: Vec::new() };
                let out = json(&r);
                s.releases.push(r);
                return Response::new(201, out.to_string());
            }
            if let Some(rest) = path.strip_prefix(&format!("/uploads{base}/releases/")) {
                let id: usize = rest.split('/').next().and_then(|i| i.parse().ok()).unwrap_or(0);
                if req.header("content-type") != Some("application/octet-stream") {
                    return bad("upload without Content-Type: application/octet-stream".into());
                }
                let Some(name) = req.path.split("?name=").nth(1).map(str::to_owned) else {
                    return bad("upload without ?name=".into());
                };
                s.next_id += 1;
                let aid = s.next_id;
                let Some(r) = s.releases.iter_mut().find(|r| r.id == id) else {
                    return Response::new(404, r#"{"message":"Not Found"}"#);
                };
                if r.assets.iter().any(|a| a.name == name) {
                    return Response::new(422, r#"{"message":"Validation Failed: already_exists"}"#);
                }
                let a = FakeAsset { id: aid, name, bytes: req.body.clone() };
                let out = asset_json(&host, &base, &a);
                r.assets.push(a);
                return Response::new(201, out.to_string());
            }
            if let Some(id) = path.strip_prefix(&format!("{base}/releases/assets/")) {
                let id: usize = id.parse().unwrap_or(0);
                if req.method == "DELETE" {
                    for r in &mut s.releases {
                        r.assets.retain(|a| a.id != id);
                    }
                    return Response::new(204, "");
                }
                if req.header("accept") != Some("application/octet-stream") {
                    return bad("asset download without Accept: application/octet-stream".into());
                }
                // As GitHub does: a redirect to the storage host.
                return Response::new(302, "").header("Location", &format!("{storage_url}/download/{id}"));
            }
            bad(format!("unexpected {} {}", req.method, req.path))
        });
        port.store(usize::from(server.addr.port()), Ordering::SeqCst);
        FakeGitHub { server, storage, state, violations }
    }

    pub fn api(&self) -> String {
        self.server.url("")
    }

    /// Asset names of the release `tag`.
    pub fn assets(&self, tag: &str) -> Vec<String> {
        let s = self.state.lock().unwrap();
        let mut v: Vec<String> =
            s.releases.iter().filter(|r| r.tag == tag).flat_map(|r| r.assets.iter().map(|a| a.name.clone())).collect();
        v.sort();
        v
    }

    pub fn asset(&self, tag: &str, name: &str) -> Option<Vec<u8>> {
        let s = self.state.lock().unwrap();
        s.releases
            .iter()
            .filter(|r| r.tag == tag)
            .flat_map(|r| &r.assets)
            .find(|a| a.name == name)
            .map(|a| a.bytes.clone())
    }

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    #[track_caller]
    pub fn assert_no_violations(&self) {
        let v = self.violations.lock().unwrap();
        assert!(v.is_empty(), "the GitHub API saw: {v:?}");
    }
}

fn asset_json(host: &str, base: &str, a: &FakeAsset) -> serde_json::Value {
    serde_json::json!({
        "id": a.id, "name": a.name, "size": a.bytes.len(),
        "url": format!("{host}{base}/releases/assets/{}", a.id),
    })
}

fn release_json(host: &str, base: &str, r: &FakeRelease) -> serde_json::Value {
    serde_json::json!({
        "id": r.id,
        "tag_name": r.tag,
        "html_url": format!("{host}/releases/{}", r.tag),
        "upload_url": format!("{host}/uploads{base}/releases/{}/assets{{?name,label}}", r.id),
        "assets": r.assets.iter().map(|a| asset_json(host, base, a)).collect::<Vec<_>>(),
    })
}
