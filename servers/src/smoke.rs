//! `atlas smoke [NAME | --project DIR]`: starts `atlas serve fs` and `atlas serve rag`
//! over stdio the way an editor does, initializes each, lists its tools, makes one
//! real call each, and prints the timings; over a project, the rag server must also
//! list every library of its set, none broken. Any failure (a server that does not
//! start, an error reply, no hit, a library of the set not served) exits non-zero.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    next_id: u64,
}

/// How long one reply may take (a cold query model load included).
const REPLY: Duration = Duration::from_secs(60);

impl Peer {
    fn start(which: &str, serve: &[String]) -> anyhow::Result<Peer> {
        let exe = std::env::current_exe().context("locating the atlas binary")?;
        let mut child = Command::new(exe)
            .args(["serve", which])
            .args(serve)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting `atlas serve {which}`"))?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout: ChildStdout = child.stdout.take().context("stdout")?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Peer { child, stdin, lines, next_id: 1 })
    }

    fn notify(&mut self, method: &str) -> anyhow::Result<()> {
        writeln!(self.stdin, "{}", json!({ "jsonrpc": "2.0", "method": method }))?;
        Ok(self.stdin.flush()?)
    }

    fn call(&mut self, method: &str, params: Value) -> anyhow::Result<(Value, Duration)> {
        let id = self.next_id;
        self.next_id += 1;
        let t = Instant::now();
        writeln!(self.stdin, "{}", json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        self.stdin.flush()?;
        loop {
            let left = REPLY.checked_sub(t.elapsed()).unwrap_or_default();
            let line = self.lines.recv_timeout(left).map_err(|_| {
                anyhow::anyhow!("no reply to {method} within {}s (the server exited or hangs)", REPLY.as_secs())
            })?;
            let v: Value = serde_json::from_str(&line).with_context(|| format!("a reply that is not JSON: {line}"))?;
            if v["id"] != json!(id) {
                continue; // a notification or log message
            }
            if let Some(e) = v.get("error") {
                bail!("{method}: {e}");
            }
            return Ok((v["result"].clone(), t.elapsed()));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Runs the smoke test against what `serve` names (`--bundle NAME|DIR` or `--project
/// DIR`); with `libraries`, the rag server must list that many, none broken. Returns
/// the report.
pub fn run(serve: &[String], query: &str, libraries: Option<usize>) -> anyhow::Result<String> {
    let mut report = String::new();
    for (which, tool, args) in
        [("fs", "list_publications", json!({})), ("rag", "search_docs", json!({ "query": query, "top_k": 3 }))]
    {
        let t = Instant::now();
        let mut p = Peer::start(which, serve)?;
        let init = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "atlas-smoke", "version": env!("CARGO_PKG_VERSION") },
        });
        let (info, init_t) = p.call("initialize", init).with_context(|| format!("{which}: initialize"))?;
        p.notify("notifications/initialized")?;
        let ready = t.elapsed();
        let (tools, list_t) = p.call("tools/list", json!({})).with_context(|| format!("{which}: tools/list"))?;
        let names: Vec<&str> =
            tools["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
        if !names.contains(&tool) {
            bail!("{which}: tools/list lacks {tool} (has {})", names.join(", "));
        }
        let (res, call_t) = p
            .call("tools/call", json!({ "name": tool, "arguments": args }))
            .with_context(|| format!("{which}: {tool}"))?;
        let text: String = res["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if res["isError"] == json!(true) {
            bail!("{which}: {tool} answered with an error: {}", text.lines().next().unwrap_or_default());
        }
        if text.trim().is_empty() {
            bail!("{which}: {tool} answered with nothing");
        }
        if let (Some(want), "rag") = (libraries, which) {
            let (res, _) = p
                .call("tools/call", json!({ "name": "list_libraries", "arguments": { "max_tokens": atlas_mcp::budget::MAX_MAX_TOKENS } }))
                .with_context(|| format!("{which}: list_libraries"))?;
            let listed = res["structuredContent"]["libraries"].as_array().map_or(0, Vec::len);
            let broken: Vec<String> = res["structuredContent"]["broken"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["library"].as_str())
                .map(|b| atlas_runtime::utf8::clip_chars(&atlas_runtime::utf8::printable(b), 80))
                .collect();
            if !broken.is_empty() || listed != want {
                bail!(
                    "{which}: the set names {}, {} served{}; run `atlas sync` on the project",
                    atlas_runtime::words::count(want, "library"),
                    listed,
                    match broken.is_empty() {
                        true => String::new(),
                        false => format!(", broken: {}", broken.join(", ")),
                    }
                );
            }
            report.push_str(&format!("ok  {which:<4} list_libraries: every library of the set ({listed}) served\n"));
        }
        report.push_str(&format!(
            "ok  {which:<4} {:<24} ready {:>9}  initialize {:>9}  tools/list {:>9} ({})  {tool} {:>9}\n",
            info["serverInfo"]["name"].as_str().unwrap_or("?"),
            ms(ready),
            ms(init_t),
            ms(list_t),
            atlas_runtime::words::count(names.len(), "tool"),
            ms(call_t),
        ));
    }
    Ok(report)
}
