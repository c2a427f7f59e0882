#![allow(clippy::print_stdout)] // a report printer
//! Web page and `ask` figures on a bundle: server time p50/p95 of the search page
//! (`/?q=…`) and of `/api/search`, the page weight (HTML + JS + CSS), and `ask`'s
//! time to first token through a local OpenAI-compatible test server (which answers
//! at once, so the figure is Atlas's own) and for the extractive answer.
//!
//! `cargo run --release -p atlas-e2e --example web_bench -- <atlas binary> <bundle> <golden.jsonl>`
//! (`cargo xtask bench web` builds the devtron bundle and runs this.)

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use atlas_e2e::http::{Server, chat_stream, get};
use serde_json::Value;

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

struct Web(Child, SocketAddr);

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(atlas: &str, bundle: &str, extra: &[&str]) -> Res<Web> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let child = Command::new(atlas)
        .args(["serve", "web", "--bundle", bundle, "--http", &addr.to_string()])
        .args(extra)
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            return Err("atlas serve web did not listen".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Web(child, addr))
}

/// A query-string value.
fn q(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b' ' => "+".to_owned(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// p50 / p95 of GET `path(query)` over every query, `rounds` times, after one warm-up.
fn timed(web: &Web, queries: &[String], rounds: usize, path: impl Fn(&str) -> String) -> (f64, f64) {
    let host = web.1.to_string();
    for query in queries {
        get(web.1, &path(query), &host);
    }
    let mut ms = Vec::new();
    for _ in 0..rounds {
        for query in queries {
            let t = Instant::now();
            let (status, _, _) = get(web.1, &path(query), &host);
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(status, 200, "{}", path(query));
        }
    }
    (pct(&mut ms, 0.5), pct(&mut ms, 0.95))
}

/// First-token times of `/api/ask` answers of `kind`, p50 / p95, and how many.
fn ask_ttft(web: &Web, queries: &[String], kind: &str) -> (f64, f64, usize) {
    let host = web.1.to_string();
    let mut ms = Vec::new();
    for query in queries {
        let (_, _, body) = atlas_e2e::http::post(web.1, "/api/ask", &host, &[], &format!("q={}", q(query)));
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if v["kind"] == kind
            && let Some(t) = v["timings"]["first_token_ms"].as_f64()
        {
            ms.push(t);
        }
    }
    let n = ms.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, 0);
    }
    (pct(&mut ms, 0.5), pct(&mut ms, 0.95), n)
}

fn main() -> Res {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (atlas, bundle, golden) = (&args[0], &args[1], &args[2]);
    let queries: Vec<String> = atlas_runtime::eval::parse_golden(&std::fs::read_to_string(golden)?)?
        .into_iter()
        .filter(|q| !q.is_negative())
        .map(|q| q.query)
        .collect();
    let llm = Server::start(|_| chat_stream(&["The answer is in the sources [1]."], Duration::ZERO));
    let web = start(atlas, bundle, &["--llm", &llm.url("/v1"), "--model", "bench"])?;
    println!("{} queries from {golden}, sequential, over loopback", queries.len());
    let (p50, p95) = timed(&web, &queries, 3, |s| format!("/?q={}", q(s)));
    println!("GET /?q=…           p50 {p50:6.2} ms  p95 {p95:6.2} ms  (page with facets: one hybrid search of 50)");
    let (p50, p95) = timed(&web, &queries, 3, |s| format!("/api/search?q={}", q(s)));
    println!("GET /api/search?q=… p50 {p50:6.2} ms  p95 {p95:6.2} ms  (hybrid, k 5)");
    let host = web.1.to_string();
    let sizes: Vec<usize> = [format!("/?q={}", q(&queries[0])), "/assets/app.js".into(), "/assets/app.css".into()]
        .iter()
        .map(|p| get(web.1, p, &host).2.len())
        .collect();
    println!(
        "page weight: HTML {} + JS {} + CSS {} = {} bytes ({:.1} KB; limit 100 KB)",
        sizes[0],
        sizes[1],
        sizes[2],
        sizes.iter().sum::<usize>(),
        sizes.iter().sum::<usize>() as f64 / 1024.0
    );
    let (p50, p95, n) = ask_ttft(&web, &queries, "generated");
    println!("ask, LLM test server: first token p50 {p50:.1} ms  p95 {p95:.1} ms  ({n} answered, the rest refused)");
    drop(web);
    let web = start(atlas, bundle, &[])?;
    let (p50, p95, n) = ask_ttft(&web, &queries, "extractive");
    println!("ask, extractive:      first token p50 {p50:.1} ms  p95 {p95:.1} ms  ({n} answered)");
    Ok(())
}
