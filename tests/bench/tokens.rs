#![allow(clippy::print_stdout)] // a report printer
//! Tokens an agent reads to reach the first relevant passage, on the development sets
//! (issue 49): Atlas (the default search reply, then `get_chunk` of the first relevant
//! hit) against grep-and-read (the question's content words grepped over the bundle's
//! mirror, the matching files read whole until the relevant one is read).
//!
//! `cargo run --release -p atlas-e2e --example tokens_bench -- <atlas> (<set> <bundle> <golden.jsonl>)…`
//! (`cargo xtask bench tokens` builds the development bundles and runs this.)
//!
//! Tokens are bytes / 3, the servers' own estimator (`budget::BYTES_PER_TOKEN`). The
//! search is the one an agent would pick for the question (`search_code` for a
//! question tagged `kind: code`, else `search_docs`), with every argument at its
//! default. The baseline reads the files holding most of the question's content
//! words first (more generous to it than grep's own order), whole.

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

const BYTES_PER_TOKEN: usize = 3;

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "how", "what", "when", "which", "that", "this", "from", "into", "does", "can", "are",
    "was", "its", "it's", "you", "your", "there", "their", "them", "then", "than", "way", "get", "use", "using",
    "should", "would", "could", "will", "have", "has", "not", "but", "all", "any", "one", "out", "about", "where",
    "who", "why", "is", "do", "to", "of", "in", "on", "a", "an", "or", "by", "be", "as", "at", "if", "so", "my", "me",
    "i", "we",
];

fn tokens(bytes: usize) -> usize {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// One question's outcome for each method: tokens read until the relevant passage, or
/// None when it is never reached.
struct Outcome {
    atlas: Option<usize>,
    /// The search reply's text, and with its structuredContent.
    reply: usize,
    reply_structured: usize,
    grep: Option<usize>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let atlas = &args[0];
    println!(
        "| set | questions | Atlas: found | Atlas: mean tokens (reply + get_chunk) | grep-and-read: found | within 10× Atlas's tokens | grep-and-read: mean tokens | ratio (both found) | search reply: text / with structuredContent |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut all: Vec<Outcome> = Vec::new();
    for set in args[1..].chunks(3) {
        let (name, bundle, golden) = (&set[0], std::path::Path::new(&set[1]), &set[2]);
        let out = one_set(atlas, bundle, golden).await?;
        row(name, &out);
        all.extend(out);
    }
    row("all", &all);
    Ok(())
}

fn row(name: &str, out: &[Outcome]) {
    let n = out.len().max(1);
    let mean = |v: Vec<usize>| if v.is_empty() { 0.0 } else { v.iter().sum::<usize>() as f64 / v.len() as f64 };
    let atlas_found: Vec<usize> = out.iter().filter_map(|o| o.atlas).collect();
    let grep_found: Vec<usize> = out.iter().filter_map(|o| o.grep).collect();
    let both: Vec<(usize, usize)> = out.iter().filter_map(|o| Some((o.atlas?, o.grep?))).collect();
    let ratio = mean(both.iter().map(|b| b.0).collect()) / mean(both.iter().map(|b| b.1).collect()).max(1.0);
    let reply = mean(out.iter().map(|o| o.reply).collect());
    let structured = mean(out.iter().map(|o| o.reply_structured).collect());
    // The baseline's reach at a budget near Atlas's: ten times Atlas's mean tokens.
    let budget = 10.0 * mean(atlas_found.clone());
    let grep_within = out.iter().filter(|o| o.grep.is_some_and(|g| g as f64 <= budget)).count();
    println!(
        "| {name} | {} | {:.0}% | {:.0} | {:.0}% | {:.0}% | {:.0} | {:.3} (1/{:.0}, {} questions) | {:.0} / {:.0} |",
        out.len(),
        100.0 * atlas_found.len() as f64 / n as f64,
        mean(atlas_found),
        100.0 * grep_found.len() as f64 / n as f64,
        100.0 * grep_within as f64 / n as f64,
        mean(grep_found),
        ratio,
        1.0 / ratio.max(1e-9),
        both.len(),
        reply,
        structured
    );
}

async fn one_set(atlas: &str, bundle: &std::path::Path, golden: &str) -> Res<Vec<Outcome>> {
    let queries: Vec<atlas_runtime::eval::GoldenQuery> =
        atlas_runtime::eval::parse_golden(&std::fs::read_to_string(golden)?)?
            .into_iter()
            .filter(|q| !q.is_negative())
            .collect();
    let mut cmd = tokio::process::Command::new(atlas);
    cmd.args(["serve", "rag", "--bundle"]).arg(bundle);
    let transport = TokioChildProcess::builder(cmd).stderr(std::process::Stdio::null()).spawn()?.0;
    let c = ().serve(transport).await?;
    let call = async |tool: &str, a: Value| -> Res<(String, Value)> {
        let r = c
            .call_tool(
                CallToolRequestParams::new(tool.to_owned()).with_arguments(a.as_object().cloned().unwrap_or_default()),
            )
            .await?;
        let text: String = r.content.iter().filter_map(|b| b.as_text().map(|t| t.text.clone())).collect();
        Ok((text, r.structured_content.unwrap_or_default()))
    };
    let mirror = bundle.join("mirror");
    let files = mirror_files(&mirror);
    let mut out = Vec::new();
    for q in &queries {
        let relevant = |path: &str, lines: (u64, u64)| {
            q.expected.iter().any(|e| {
                e.file_matches(path) && e.lines.is_none_or(|[a, b]| lines.0 <= u64::from(b) && lines.1 >= u64::from(a))
            })
        };
        let tool = if q.tags.get("kind").is_some_and(|k| k == "code") { "search_code" } else { "search_docs" };
        let (text, structured) = call(tool, json!({"query": q.query})).await?;
        let reply = tokens(text.len());
        let reply_structured = tokens(text.len() + serde_json::to_string(&structured)?.len());
        let first = structured["hits"].as_array().into_iter().flatten().find(|h| {
            let lines = (h["start_line"].as_u64().unwrap_or(0), h["end_line"].as_u64().unwrap_or(0));
            relevant(h["path"].as_str().unwrap_or(""), lines)
        });
        let atlas = match first {
            Some(h) => {
                let (chunk, _) = call("get_chunk", json!({"id": h["chunk_id"]})).await?;
                Some(reply + tokens(chunk.len()))
            }
            None => None,
        };
        out.push(Outcome { atlas, reply, reply_structured, grep: grep_and_read(&q.query, &files, &relevant) });
    }
    c.cancel().await?;
    Ok(out)
}

/// Every file of the mirror: its path as hits name it (`<source>/<path>`) and its text.
fn mirror_files(mirror: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![mirror.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(text) = std::fs::read_to_string(&p) {
                let rel = p.strip_prefix(mirror).unwrap_or(&p).to_string_lossy().into_owned();
                out.push((rel, text));
            }
        }
    }
    out.sort();
    out
}

/// The baseline: files holding any of the question's content words, those holding
/// the most first (then by path), read whole until a relevant one is read.
fn grep_and_read(
    query: &str,
    files: &[(String, String)],
    relevant: &dyn Fn(&str, (u64, u64)) -> bool,
) -> Option<usize> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .map(str::to_lowercase)
        .filter(|w| w.len() >= 3 && !STOPWORDS.contains(&w.as_str()))
        .collect();
    let mut matched: Vec<(usize, &str, &str)> = files
        .iter()
        .filter_map(|(path, text)| {
            let lower = text.to_lowercase();
            let n = words.iter().filter(|w| lower.contains(w.as_str())).count();
            (n > 0).then_some((n, path.as_str(), text.as_str()))
        })
        .collect();
    matched.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let mut read = 0;
    for (_, path, text) in matched {
        read += tokens(text.len());
        if relevant(path, (1, text.lines().count() as u64)) {
            return Some(read);
        }
    }
    None
}
