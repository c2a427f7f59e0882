#![allow(clippy::print_stdout)] // a report printer
//! MCP server figures with a real client (rmcp) over stdio: process start →
//! initialize response, first search_docs (cold: the query model loads) and the next
//! (warm), tools/call p50 per tool, and the server's RSS.
//!
//! `cargo run --release -p atlas-e2e --example mcp_bench -- <atlas binary> <bundle> <golden.jsonl>`
//! (`cargo xtask bench mcp` builds the devtron bundle and runs this.)
//!
//! `mcp_bench code <atlas binary> <bundle>…`: find_symbol and find_references p50 and
//! p95 over 200 names drawn (seeded) from each bundle's symbol table, and how many
//! names defined once find_symbol gives at rank 1.

use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rss_kb(pid: u32) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let f = |k: &str| s.lines().find(|l| l.starts_with(k)).map_or("?".into(), |l| l[k.len()..].trim().to_owned());
    format!("RSS {}, peak {}", f("VmRSS:"), f("VmHWM:"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args[0] == "code" {
        for bundle in &args[2..] {
            code(&args[1], bundle).await?;
        }
        return Ok(());
    }
    let (atlas, bundle, golden) = (&args[0], &args[1], &args[2]);
    let queries: Vec<String> = atlas_runtime::eval::parse_golden(&std::fs::read_to_string(golden)?)?
        .into_iter()
        .filter(|q| !q.is_negative())
        .map(|q| q.query)
        .collect();
    for which in ["rag", "fs"] {
        let mut cmd = tokio::process::Command::new(atlas);
        cmd.args(["serve", which, "--bundle", bundle]);
        let t = Instant::now();
        let transport = TokioChildProcess::builder(cmd).stderr(std::process::Stdio::null()).spawn()?.0;
        let pid = transport.id().ok_or("pid")?;
        let c = ().serve(transport).await?;
        println!("{which}: process start → initialize response {:.0} ms", ms(t.elapsed()));
        let call = async |tool: &str, a: Value| -> Res<f64> {
            let t = Instant::now();
            let r = c
                .call_tool(
                    CallToolRequestParams::new(tool.to_owned())
                        .with_arguments(a.as_object().cloned().unwrap_or_default()),
                )
                .await?;
            if r.is_error == Some(true) {
                return Err(format!("{tool}: {:?}", r.content).into());
            }
            Ok(ms(t.elapsed()))
        };
        let mut per_tool: Vec<(&str, Vec<f64>)> = Vec::new();
        if which == "rag" {
            let cold = call("search_docs", json!({"query": queries[0]})).await?;
            let warm = call("search_docs", json!({"query": queries[1]})).await?;
            println!("rag: first search_docs {cold:.1} ms (cold: loads the query model), second {warm:.1} ms (warm)");
            let mut t = Vec::new();
            for q in queries.iter().cycle().take(3 * queries.len()) {
                t.push(call("search_docs", json!({"query": q})).await?);
            }
            per_tool.push(("search_docs", t));
            let mut t = Vec::new();
            for q in queries.iter().take(30) {
                t.push(call("search_code", json!({"query": q})).await?);
            }
            per_tool.push(("search_code", t));
            let r =
                c.call_tool(CallToolRequestParams::new("search_docs").with_arguments(
                    json!({"query": queries[0], "top_k": 20}).as_object().cloned().unwrap_or_default(),
                ))
                .await?;
            let ids: Vec<String> = r
                .structured_content
                .as_ref()
                .and_then(|v| v["hits"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|h| h["chunk_id"].as_str().map(str::to_owned))
                .collect();
            let mut t = Vec::new();
            for id in ids.iter().cycle().take(50) {
                t.push(call("get_chunk", json!({"id": id, "neighbors": 1})).await?);
            }
            per_tool.push(("get_chunk", t));
            let mut t = Vec::new();
            for _ in 0..50 {
                t.push(call("get_bundle_info", json!({})).await?);
            }
            per_tool.push(("get_bundle_info", t));
        } else {
            for (label, tool, a) in [
                ("list_publications", "list_publications", json!({})),
                ("list_files", "list_files", json!({"glob": "**/*.md", "limit": 50})),
                ("read_file", "read_file", json!({"path": "devtron/setup/install.md"})),
                ("search (literal)", "search", json!({"pattern": "helm install", "max_results": 20})),
                (
                    "search (regex)",
                    "search",
                    json!({"pattern": "deploy(ment)? window", "regex": true, "max_results": 20}),
                ),
                ("get_release_info", "get_release_info", json!({})),
            ] {
                let mut t = Vec::new();
                for _ in 0..30 {
                    t.push(call(tool, a.clone()).await?);
                }
                per_tool.push((label, t));
            }
        }
        for (tool, mut t) in per_tool {
            t.sort_by(f64::total_cmp);
            println!(
                "{which}: {tool:<18} p50 {:>6.2} ms  p95 {:>6.2} ms  ({} calls)",
                t[t.len() / 2],
                t[t.len() * 95 / 100],
                t.len()
            );
        }
        println!("{which}: server {}", rss_kb(pid));
        c.cancel().await?;
    }
    Ok(())
}

/// find_symbol and find_references over one bundle's own names.
async fn code(atlas: &str, bundle: &str) -> Res {
    let b = atlas_runtime::Bundle::open(
        std::path::Path::new(bundle),
        atlas_runtime::OpenOptions { keyword_only: true, ..atlas_runtime::OpenOptions::default() },
    )?;
    let t = b.symbols();
    let mut rng = atlas_e2e::XorShift::new(0x5eed_c0de);
    let names: Vec<(String, u32)> = (0..200)
        .map(|_| {
            let i = (rng.next_u64() % t.defs.len() as u64) as u32;
            (t.defs[i as usize].name.clone(), i)
        })
        .collect();
    let mut cmd = tokio::process::Command::new(atlas);
    cmd.args(["serve", "rag", "--bundle", bundle]);
    let transport = TokioChildProcess::builder(cmd).stderr(std::process::Stdio::null()).spawn()?.0;
    let c = ().serve(transport).await?;
    let call = async |tool: &str, a: Value| -> Res<(f64, Value)> {
        let t = Instant::now();
        let r = c
            .call_tool(
                CallToolRequestParams::new(tool.to_owned()).with_arguments(a.as_object().cloned().unwrap_or_default()),
            )
            .await?;
        if r.is_error == Some(true) {
            return Err(format!("{tool}: {:?}", r.content).into());
        }
        Ok((ms(t.elapsed()), r.structured_content.unwrap_or_default()))
    };
    // The first find_references reads the references; timed apart.
    let (first_refs, _) = call("find_references", json!({"name": names[0].0})).await?;
    let (mut sym, mut refs, mut uses) = (Vec::new(), Vec::new(), Vec::new());
    let (mut once, mut first) = (0, 0);
    for (name, i) in &names {
        let (ms, v) = call("find_symbol", json!({"name": name})).await?;
        sym.push(ms);
        if t.lookup(name).len() == 1 {
            once += 1;
            let d = &t.defs[*i as usize];
            let top = &v["definitions"][0];
            if top["path"] == d.path.as_str() && top["start_line"] == d.start_line {
                first += 1;
            }
        }
        let (ms, v) = call("find_references", json!({"name": name})).await?;
        refs.push(ms);
        uses.push(v["total"].as_u64().unwrap_or(0) as f64);
    }
    let p = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[v.len() * 95 / 100])
    };
    let ((s50, s95), (r50, r95), (u50, u95)) = (p(sym), p(refs), p(uses));
    let ranked = if once == 0 {
        "no name is defined once (the synthetic copies repeat every file)".to_owned()
    } else {
        format!("names defined once at rank 1: {first} of {once}")
    };
    println!(
        "code {} ({} chunks, {} definitions): find_symbol p50 {s50:.2} ms p95 {s95:.2} ms; find_references p50 {r50:.2} ms p95 {r95:.2} ms (uses per name p50 {u50:.0}, p95 {u95:.0}; the first call, which reads the references, {first_refs:.1} ms); {ranked}",
        b.manifest.name,
        b.chunk_count(),
        t.defs.len()
    );
    c.cancel().await?;
    Ok(())
}
