//! `cargo xtask bench live`: a project's own working tree as a library (`atlas init`,
//! `atlas serve rag --project`), with the release binaries, in one run:
//!
//! - edit-to-searchable on a copy of this repository's tracked files (a git repository
//!   under the temp folder): each scripted edit appends a documented function to one
//!   `.rs` file, and one MCP session (`serve rag --project`, JSON-RPC over its stdio)
//!   polls `search_code` (keyword, vector, hybrid) and `find_symbol` until each finds
//!   it, timed from the write;
//! - restart-to-ready with nothing changed; a 500-file branch switch (`git checkout`);
//!   the watching server's idle CPU and RSS;
//! - the first index (`atlas init --no-deps --keyword-only`) of a large tree, the
//!   unpacked crates under `~/.cargo/registry/src` copied several times, with the peak
//!   RSS of `atlas` and of the `atlas-pipeline` it runs (from `/proc`);
//! - the same edits through a peer from PyPI (`jcodemunch-mcp`, in a venv under
//!   target/), through its own MCP tools ([`peer`]);
//! - search quality on a live tree ([`quality`]): concrete-ml's repository (from
//!   `ATLAS_CORPORA`) as a working tree, the code development set asked of Atlas's
//!   `search_code` and of the peer's `search_symbols`: MRR@10 by file, and each
//!   reply's size in tokens.
//!
//! `BENCH_LIVE_EDITS` (100), `BENCH_LIVE_COPIES` (3), `BENCH_LIVE_IDLE_S` (60),
//! `BENCH_LIVE_SMALL_FILES` (every tracked file) and `BENCH_LIVE_SKIP` (`small`, `big`,
//! `peer`, `quality`, comma-separated) size it.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use crate::{Profile, say};

/// How long one edit may take to show before it counts as missed.
const EDIT_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause between two rounds of queries while waiting for an edit.
const POLL: Duration = Duration::from_millis(20);
/// Files the branch switch changes.
const SWITCHED: usize = 500;

pub fn run() -> anyhow::Result<()> {
    // `BENCH_LIVE_PROFILE=debug`: the test build as it is, to try the bench itself (its
    // figures are not the product's); `built`: the release binaries as they are, on a
    // machine where other work keeps changing the sources.
    let profile = match std::env::var("BENCH_LIVE_PROFILE").as_deref() {
        Ok("debug") => Profile::Debug,
        Ok("built") => Profile::Release,
        _ => {
            crate::setup::run(Profile::Release)?;
            Profile::Release
        }
    };
    let work = std::env::temp_dir().join("atlas-bench-live");
    let skip = std::env::var("BENCH_LIVE_SKIP").unwrap_or_default();
    let skips = |part: &str| skip.split(',').any(|s| s.trim() == part);
    let _ = std::fs::remove_dir_all(work.join("home"));
    // The peer runs on the small tree as the last run left it when that is skipped.
    if !skips("small") {
        let _ = std::fs::remove_dir_all(work.join("small"));
    }
    let home = crate::sync_bench::fresh_home(&work.join("home"))?;
    let atlas = profile.bin("atlas");
    say(&format!(
        "bench live: {} binaries ({}); {}",
        format!("{profile:?}").to_lowercase(),
        atlas.display(),
        machine()
    ));
    if !skips("small") {
        small(&atlas, &home, &work.join("small"))?;
    }
    if !skips("big") {
        big(&atlas, &home, &work.join("big"))?;
    }
    if !skips("peer") {
        peer::run(&work, &work.join("small"))?;
    }
    if !skips("quality") {
        quality(&atlas, &home, &work.join("quality"))?;
    }
    Ok(())
}

/// The code development set whose answers are in concrete-ml's repository.
const QUALITY_SET: &str = "code-concrete-ml";

/// Search quality on a live tree, Atlas beside the peer: concrete-ml's repository
/// copied as a working tree, `atlas init --no-deps` (embedded when the model is here),
/// then each question of [`QUALITY_SET`] that has answers asked of `search_code`
/// (hybrid, top 10) through `serve rag --project`, and of the peer's `search_symbols`
/// on its own index of the same copy. A question scores 1/rank of
/// the first result in one of its expected files (0 past 10). Tokens: a reply's text
/// bytes / 4, the size an agent reads.
fn quality(atlas: &Path, home: &Path, dir: &Path) -> anyhow::Result<()> {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA") else {
        say("quality: skipped: ATLAS_CORPORA is unset (set it to ../shared/corpora)");
        return Ok(());
    };
    let repo = Path::new(&corpora).join("concrete-ml/repo");
    let _ = std::fs::remove_dir_all(dir);
    crate::sync_bench::copy_dir(&repo, dir)?;
    let _ = std::fs::remove_dir_all(dir.join(".git"));
    git(dir, &["init", "-q", "-b", "main"])?;
    git(dir, &["add", "-A"])?;
    git(dir, &["commit", "-q", "-m", "start"])?;
    let questions = questions(QUALITY_SET)?;
    let t = Instant::now();
    init(atlas, home, dir, modes().len() < MODES.len())?;
    let indexed = t.elapsed();
    let (mut server, _) = Server::start(atlas, home, dir, &dir.with_extension("serve.log"))?;
    settle(&mut server)?;
    let mut atlas_scores = Scores::default();
    let mut brief = Scores::default();
    for q in &questions {
        for (detail, scores) in [("full", &mut atlas_scores), ("brief", &mut brief)] {
            let r = server
                .call("search_code", json!({"query": q.query, "mode": "hybrid", "top_k": 10, "detail": detail}))?;
            let paths: Vec<String> = r["structuredContent"]["hits"]
                .as_array()
                .map(|h| h.iter().filter_map(|h| h["path"].as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            scores.add(q, &paths, &r["content"][0]["text"]);
        }
    }
    server.stop();
    say(&format!(
        "quality: concrete-ml's repository as a live tree ({} files; `atlas init --no-deps` {:.0}s), the {} questions of {QUALITY_SET} that have answers, MRR@10 by file and reply tokens (text bytes / 4):",
        crate::files_under(dir)?.iter().filter(|f| !f.starts_with(".git/")).count(),
        indexed.as_secs_f64(),
        questions.len()
    ));
    let mode = if modes().len() < MODES.len() { "keyword" } else { "hybrid" };
    atlas_scores.say(&format!("atlas search_code ({mode}, top 10)"));
    brief.say(&format!("atlas search_code ({mode}, top 10, detail brief)"));
    peer::quality(&dir.with_extension("peer-home"), dir, &questions)
}

/// A development question: its text and the files that answer it.
struct Question {
    query: String,
    expected: Vec<String>,
}

/// The questions of `xtask/eval/<set>.jsonl` that have answers.
fn questions(set: &str) -> anyhow::Result<Vec<Question>> {
    let path = crate::project_root().join(format!("xtask/eval/{set}.jsonl"));
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let expected: Vec<String> =
                v["expected"].as_array()?.iter().filter_map(|e| e["path"].as_str().map(str::to_owned)).collect();
            (!expected.is_empty())
                .then(|| Question { query: v["query"].as_str().unwrap_or_default().to_owned(), expected })
        })
        .collect())
}

/// MRR@10 and reply sizes over a set of questions.
#[derive(Default)]
struct Scores {
    reciprocal: Vec<f64>,
    tokens: Vec<f64>,
}

impl Scores {
    /// One question's ranked files (as the tool names them: any prefix before the
    /// repository-relative path) and its reply.
    fn add(&mut self, q: &Question, files: &[String], reply: &Value) {
        let hit = |f: &str| q.expected.iter().any(|e| f == e || f.ends_with(&format!("/{e}")));
        let rank = files.iter().take(10).position(|f| hit(f));
        self.reciprocal.push(rank.map_or(0.0, |r| 1.0 / (r + 1) as f64));
        self.tokens.push(reply.as_str().map_or(0, str::len) as f64 / 4.0);
    }

    fn say(&self, name: &str) {
        let n = self.reciprocal.len().max(1) as f64;
        let top = |k: f64| self.reciprocal.iter().filter(|&&r| r >= 1.0 / k).count() as f64 / n;
        say(&format!(
            "    {name:<48} MRR@10 {:.3}  top-1 {:.0}%  top-10 {:.0}%  reply tokens p50 {:.0}, mean {:.0}",
            self.reciprocal.iter().sum::<f64>() / n,
            top(1.0) * 100.0,
            top(10.0) * 100.0,
            pct(&self.tokens, 50.0),
            self.tokens.iter().sum::<f64>() / n
        ));
    }
}

/// `nproc` and the CPU model.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
        .map_or(0, |kb| kb >> 20);
    format!("{cpus} cores ({model}), {mem} GiB memory")
}

// ---- the ~500-file tree: edits, restart, branch switch, idle ----

fn small(atlas: &Path, home: &Path, dir: &Path) -> anyhow::Result<()> {
    let tracked = crate::output({
        let mut c = Command::new("git");
        c.arg("-C").arg(crate::project_root()).args(["ls-files", "-z"]);
        c
    })?;
    let most = env_num("BENCH_LIVE_SMALL_FILES", usize::MAX);
    for rel in tracked.split('\0').filter(|r| !r.is_empty()).take(most) {
        let (from, to) = (crate::project_root().join(rel), dir.join(rel));
        if from.is_file() {
            std::fs::create_dir_all(to.parent().context("a parent")?)?;
            std::fs::copy(&from, &to)?;
        }
    }
    git(dir, &["init", "-q", "-b", "main"])?;
    git(dir, &["add", "-A"])?;
    git(dir, &["commit", "-q", "-m", "start"])?;
    let files = crate::files_under(dir)?.into_iter().filter(|f| !f.starts_with(".git/")).count();
    let t = Instant::now();
    let init = init(atlas, home, dir, modes().len() < MODES.len())?;
    say(&format!(
        "small tree: a copy of this repository's {files} tracked files; `atlas init --no-deps{}` in {:.1}s:",
        if modes().len() < MODES.len() { " --keyword-only" } else { "" },
        t.elapsed().as_secs_f64()
    ));
    for l in init.lines().filter(|l| l.contains("searchable") || l.contains("embedded")) {
        say(&format!("  {l}"));
    }

    let mut rs: Vec<String> =
        crate::files_under(dir)?.into_iter().filter(|f| f.ends_with(".rs") && !f.starts_with(".git/")).collect();
    rs.sort();
    let n: usize = env_num("BENCH_LIVE_EDITS", 100);
    let log = dir.with_extension("serve1.log");
    let (mut server, ready) = Server::start(atlas, home, dir, &log)?;
    say(&format!("  serve rag --project: initialize answered in {:.0} ms", ms(ready)));
    // The first build at start (catch-up) and one edit untimed: the page cache warm.
    let mut rng = Rng::new();
    settle(&mut server)?;
    let edits = Fresh::of(home, dir)?;
    edit_and_wait(&mut server, &edits, dir, &rs[0], &mut rng)?;
    let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut missed: BTreeMap<&str, usize> = BTreeMap::new();
    let mut last = None;
    for i in 0..n {
        let file = &rs[(1 + i * 7) % rs.len()];
        let (found, word) = edit_and_wait(&mut server, &edits, dir, file, &mut rng)?;
        for (mode, t) in found {
            match t {
                Some(t) => times.entry(mode).or_default().push(ms(t)),
                None => *missed.entry(mode).or_default() += 1,
            }
        }
        last = Some((file.clone(), word));
        std::thread::sleep(Duration::from_millis(100));
    }
    say(&format!(
        "  edit-to-searchable over {n} edits (one `.rs` file each, a documented function appended), through one \
         MCP session polling every {} ms, from the write to the first reply holding it (vector: by its vectors, \
         once the file left the fresh edits):",
        POLL.as_millis()
    ));
    for &mode in modes() {
        let v = times.remove(mode).unwrap_or_default();
        say(&format!(
            "    {mode:<8} p50 {:>6.0} ms  p95 {:>6.0} ms  max {:>6.0} ms  ({} found, {} not within {}s)",
            pct(&v, 50.0),
            pct(&v, 95.0),
            pct(&v, 100.0),
            v.len(),
            missed.get(mode).copied().unwrap_or(0),
            EDIT_TIMEOUT.as_secs()
        ));
    }
    server.stop();

    // The branch, made while no server runs: 500 files changed on `switch`.
    let word = rng.word();
    let (block_file, block) = branch(dir, &rs, &word, &mut rng)?;

    // Restart with nothing changed.
    let log = dir.with_extension("serve2.log");
    let t = Instant::now();
    let (mut server, init_t) = Server::start(atlas, home, dir, &log)?;
    let (file, last_word) = last.context("no edit ran")?;
    let mut first = None;
    while t.elapsed() < EDIT_TIMEOUT {
        let r = server
            .call("search_code", json!({"query": last_word, "mode": "keyword", "top_k": 10, "detail": "brief"}))?;
        if hits_in(&r, &file, 0) {
            first = Some(t.elapsed());
            break;
        }
        std::thread::sleep(POLL);
    }
    say(&format!(
        "  restart with nothing changed: initialize answered {:.0} ms after the start, the first search holding the \
         last edit {}",
        ms(init_t),
        first.map_or_else(|| "never came".to_owned(), |d| format!("answered {:.0} ms after the start", ms(d)))
    ));
    settle(&mut server)?;

    // The switch: a batch of more than 32 files is built by keyword first, its
    // vectors after; the other modes answer by keyword meanwhile.
    let name = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let library = home.join("bundles").join(format!("project+{name}"));
    let before = std::fs::read_link(library.join("current")).ok();
    let t = Instant::now();
    git(dir, &["checkout", "-q", "switch"])?;
    let checkout = t.elapsed();
    let found = wait_for(&mut server, &edits, &block_file, &block, t)?;
    let vectors = match modes().len() < MODES.len() {
        true => "the tree is keyword-only".to_owned(),
        false => vectors_follow(&library, before.as_deref(), t),
    };
    let found: Vec<String> = found
        .iter()
        .map(|(m, d)| format!("{m} {}", d.map_or_else(|| "never".to_owned(), |d| format!("{:.2}s", d.as_secs_f64()))))
        .collect();
    say(&format!(
        "  branch switch: `git checkout` of a branch changing {SWITCHED} files ({:.0} ms); a word of the branch \
         searchable by {}; {vectors}",
        ms(checkout),
        found.join(", ")
    ));

    // Idle.
    std::thread::sleep(Duration::from_secs(5));
    let idle = env_num("BENCH_LIVE_IDLE_S", 60);
    let before = cpu_ticks(server.pid());
    std::thread::sleep(Duration::from_secs(idle as u64));
    let after = cpu_ticks(server.pid());
    let tck = clock_ticks();
    let rss = status_kb(server.pid(), "VmRSS").unwrap_or(0);
    let hwm = status_kb(server.pid(), "VmHWM").unwrap_or(0);
    say(&format!(
        "  idle: the watching server used {:.2} s of CPU over {idle} s ({:.2} % of one core), RSS {} MiB (peak {} MiB), \
         on a {files}-file tree",
        (after - before) as f64 / tck,
        (after - before) as f64 / tck / idle as f64 * 100.0,
        rss >> 10,
        hwm >> 10
    ));
    server.stop();
    Ok(())
}

/// How long after `t` a version of `library` newer than `before` and with vectors was
/// installed (each version installed meanwhile said), waiting up to 2 min.
fn vectors_follow(library: &Path, before: Option<&Path>, t: Instant) -> String {
    let mut seen: Vec<(PathBuf, f64, u64)> = Vec::new();
    while t.elapsed() < Duration::from_secs(120) {
        if let Ok(now) = std::fs::read_link(library.join("current"))
            && Some(now.as_path()) != before
            && seen.last().is_none_or(|(v, _, _)| *v != now)
        {
            let m: Value = std::fs::read(library.join(&now).join("manifest.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            let rows = m["embedding_rows"].as_u64().unwrap_or(0);
            seen.push((now, t.elapsed().as_secs_f64(), rows));
            if rows > 0 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let list =
        seen.iter().map(|(v, s, r)| format!("{} at {s:.2}s ({r} vectors)", v.display())).collect::<Vec<_>>().join(", ");
    match seen.last() {
        Some((_, s, r)) if *r > 0 => format!("vectors installed {s:.2}s after the checkout (versions: {list})"),
        _ => format!("no version with vectors within 120s of the checkout (versions: {list})"),
    }
}

/// `atlas init --no-deps [--keyword-only] DIR`, returning its stderr.
fn init(atlas: &Path, home: &Path, dir: &Path, keyword_only: bool) -> anyhow::Result<String> {
    let mut c = Command::new(atlas);
    c.env("ATLAS_HOME", home).env("ATLAS_NO_PROGRESS", "1").arg("init").arg(dir).args([
        "--no-deps",
        "--client",
        "claude-code",
    ]);
    if keyword_only {
        c.arg("--keyword-only");
    }
    let out = c.stdin(Stdio::null()).output().context("running atlas init")?;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        bail!("atlas init failed: {err}");
    }
    Ok(err)
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .args(if args[0] == "commit" { &["--no-gpg-sign"][..] } else { &[] })
        .output()?;
    anyhow::ensure!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// The modes each edit is looked for in: with `BENCH_LIVE_VECTORS=0` the tree is
/// indexed keyword-only and only the first two are.
const MODES: [&str; 4] = ["keyword", "symbol", "hybrid", "vector"];

fn modes() -> &'static [&'static str] {
    if std::env::var("BENCH_LIVE_VECTORS").is_ok_and(|v| v == "0") { &MODES[..2] } else { &MODES[..] }
}

/// What one edit appended: the function's name, the sentence of its doc comment, and
/// the line the doc comment is on.
struct Block {
    name: String,
    sentence: String,
    line: u64,
}

/// Appends a documented function to `rel`, then polls until every mode finds it.
#[allow(clippy::type_complexity)]
fn edit_and_wait(
    server: &mut Server,
    edits: &Fresh,
    dir: &Path,
    rel: &str,
    rng: &mut Rng,
) -> anyhow::Result<(Vec<(&'static str, Option<Duration>)>, String)> {
    let path = dir.join(rel);
    let (text, block) = append_block(&std::fs::read_to_string(&path)?, rng);
    let t = Instant::now();
    std::fs::write(&path, text)?;
    let found = wait_for(server, edits, rel, &block, t)?;
    Ok((found, block.name))
}

fn append_block(text: &str, rng: &mut Rng) -> (String, Block) {
    let mut text = text.to_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let line = text.lines().count() as u64 + 2;
    let name = rng.word();
    let sentence = rng.sentence();
    text.push_str(&format!("\n/// {sentence}\npub fn {name}() -> u32 {{\n    {}\n}}\n", rng.next() % 1000));
    (text, Block { name, sentence, line })
}

/// Polls each mode until it finds `block` in `rel` (or [`EDIT_TIMEOUT`] passes). A
/// vector hit counts once the file has left the tree's fresh edits (`edits`: what the
/// writer says it serves beside the library): before, a vector search reads the
/// fresh copy by keyword.
fn wait_for(
    server: &mut Server,
    edits: &Fresh,
    rel: &str,
    block: &Block,
    t: Instant,
) -> anyhow::Result<Vec<(&'static str, Option<Duration>)>> {
    let mut found: BTreeMap<&'static str, Duration> = BTreeMap::new();
    let modes = modes();
    while found.len() < modes.len() && t.elapsed() < EDIT_TIMEOUT {
        for &mode in modes {
            if found.contains_key(mode) {
                continue;
            }
            let hit = match mode {
                "symbol" => {
                    let r = server.call("find_symbol", json!({"name": block.name}))?;
                    r["structuredContent"]["definitions"].as_array().is_some_and(|d| !d.is_empty())
                }
                "keyword" => {
                    let r = server.call(
                        "search_code",
                        json!({"query": block.name, "mode": "keyword", "top_k": 10, "detail": "brief"}),
                    )?;
                    hits_in(&r, rel, 0)
                }
                m => {
                    // Hybrid: the name too (its keyword half); vector: the sentence alone,
                    // among 50 (earlier edits' sentences share its words).
                    let (query, k) = match m {
                        "hybrid" => (format!("{} {}", block.name, block.sentence), 10),
                        _ => (block.sentence.clone(), 50),
                    };
                    let r = server
                        .call("search_code", json!({"query": query, "mode": m, "top_k": k, "detail": "brief"}))?;
                    hits_in(&r, rel, block.line) && (m != "vector" || !edits.holds(rel))
                }
            };
            if hit {
                found.insert(mode, t.elapsed());
            }
        }
        std::thread::sleep(POLL);
    }
    Ok(modes.iter().map(|m| (*m, found.get(m).copied())).collect())
}

/// A working tree's fresh edits as its writer says them (`ATLAS_HOME/trees/*/edits.json`).
struct Fresh {
    file: PathBuf,
    /// The tree's source name, which starts its chunk paths.
    source: String,
}

impl Fresh {
    /// The fresh edits of the tree at `dir` in `home`.
    fn of(home: &Path, dir: &Path) -> anyhow::Result<Fresh> {
        let source = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let name = format!("project+{source}");
        let work = std::fs::read_dir(home.join("trees"))?
            .flatten()
            .find(|e| std::fs::read_to_string(e.path().join("name")).is_ok_and(|n| n.trim() == name))
            .with_context(|| format!("no work folder of {name} under {}", home.display()))?;
        Ok(Fresh { file: work.path().join("edits.json"), source })
    }

    /// Whether the fresh edits hold `rel` (the library's view hides it).
    fn holds(&self, rel: &str) -> bool {
        let said: Value =
            std::fs::read(&self.file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        said["hidden"]
            .as_array()
            .is_some_and(|h| h.iter().any(|p| p.as_str() == Some(&format!("{}/{rel}", self.source))))
    }
}

/// Whether a search reply has a hit in `rel` that reaches `line` (0: any): the
/// file's previous index ended before the appended lines.
fn hits_in(reply: &Value, rel: &str, line: u64) -> bool {
    reply["structuredContent"]["hits"].as_array().is_some_and(|hits| {
        hits.iter().any(|h| {
            h["path"].as_str().is_some_and(|p| p.ends_with(rel)) && h["end_line"].as_u64().unwrap_or(0) >= line
        })
    })
}

/// Gives the server's first build at start (its catch-up) time to finish, then asks
/// it something.
fn settle(server: &mut Server) -> anyhow::Result<()> {
    std::thread::sleep(Duration::from_secs(5));
    let _ = server.call("get_bundle_info", json!({}))?;
    Ok(())
}

/// On a branch `switch`: a comment holding `word` appended to [`SWITCHED`] files (the
/// tracked text files first, then new ones), and a documented function in the last;
/// then back on `main`. Returns that file and its block.
fn branch(dir: &Path, rs: &[String], word: &str, rng: &mut Rng) -> anyhow::Result<(String, Block)> {
    git(dir, &["add", "-A"])?;
    git(dir, &["commit", "-q", "-m", "edits"])?;
    git(dir, &["checkout", "-q", "-b", "switch"])?;
    let mut changed = 0;
    for rel in rs.iter().take(SWITCHED) {
        let p = dir.join(rel);
        let mut text = std::fs::read_to_string(&p)?;
        text.push_str(&format!("\n// switched: {word}\n"));
        std::fs::write(&p, text)?;
        changed += 1;
    }
    let mut k = 0;
    while changed < SWITCHED {
        let rel = format!("switched/extra_{k}.rs");
        std::fs::create_dir_all(dir.join("switched"))?;
        std::fs::write(dir.join(&rel), format!("// switched: {word}\npub fn extra_{k}() -> u32 {{ {k} }}\n"))?;
        changed += 1;
        k += 1;
    }
    let last = rs[rs.len().min(SWITCHED) - 1].clone();
    let p = dir.join(&last);
    let (text, block) = append_block(&std::fs::read_to_string(&p)?, rng);
    std::fs::write(&p, text)?;
    git(dir, &["add", "-A"])?;
    git(dir, &["commit", "-q", "-m", "switch"])?;
    git(dir, &["checkout", "-q", "main"])?;
    Ok((last, block))
}

/// One `atlas serve rag --project` spoken to over its stdio.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    id: u64,
}

impl Server {
    /// Starts `atlas serve rag --project DIR` and completes the handshake; returns it
    /// and how long initialize took.
    fn start(atlas: &Path, home: &Path, dir: &Path, log: &Path) -> anyhow::Result<(Server, Duration)> {
        let mut c = Command::new(atlas);
        c.env("ATLAS_HOME", home).args(["serve", "rag", "--project"]).arg(dir);
        Server::spawn(c, log)
    }

    /// Starts any MCP stdio server and completes the handshake.
    fn spawn(mut cmd: Command, log: &Path) -> anyhow::Result<(Server, Duration)> {
        let t = Instant::now();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log)?)
            .spawn()
            .with_context(|| format!("starting {cmd:?}"))?;
        let mut s = Server {
            stdin: child.stdin.take().context("stdin")?,
            stdout: BufReader::new(child.stdout.take().context("stdout")?),
            child,
            id: 0,
        };
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench-live", "version": "1"}}),
        )?;
        let took = t.elapsed();
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok((s, took))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, m: &Value) -> anyhow::Result<()> {
        writeln!(self.stdin, "{m}")?;
        self.stdin.flush()?;
        Ok(())
    }

    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.id += 1;
        let id = self.id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("the server closed its stdout");
            }
            let Ok(m) = serde_json::from_str::<Value>(&line) else { continue };
            if m["id"] == json!(id) {
                if let Some(e) = m.get("error") {
                    bail!("{method}: {e}");
                }
                return Ok(m["result"].clone());
            }
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> anyhow::Result<Value> {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
    }

    /// Closes its stdin and waits for it (killed after 5 s).
    fn stop(mut self) {
        drop(self.stdin);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- the large tree: first index and peak RSS ----

fn big(atlas: &Path, home: &Path, dir: &Path) -> anyhow::Result<()> {
    let copies = env_num("BENCH_LIVE_COPIES", 3);
    let registry = PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo/registry/src");
    let made = dir.join(".bench-copies");
    if std::fs::read_to_string(&made).ok().and_then(|s| s.trim().parse::<usize>().ok()) != Some(copies) {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        for i in 0..copies {
            for e in std::fs::read_dir(&registry).with_context(|| format!("reading {}", registry.display()))?.flatten()
            {
                crate::sync_bench::copy_dir(&e.path(), &dir.join(format!("copy{i}")))?;
            }
        }
        git(dir, &["init", "-q", "-b", "main"])?;
        std::fs::write(dir.join(".gitignore"), ".bench-copies\n")?;
        std::fs::write(&made, copies.to_string())?;
    }
    let all = crate::files_under(dir)?;
    let files = all.iter().filter(|f| !f.starts_with(".git/")).count();
    let source = all.iter().filter(|f| is_source(f)).count();
    let rs = all.iter().filter(|f| f.ends_with(".rs")).count();
    evict(dir);
    let t = Instant::now();
    let mut c = Command::new(atlas);
    c.env("ATLAS_HOME", home)
        .env("ATLAS_NO_PROGRESS", "1")
        .arg("init")
        .arg(dir)
        .args(["--no-deps", "--keyword-only", "--client", "claude-code"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().context("starting atlas init")?;
    let peaks = Peaks::watch(child.id());
    let out = child.wait_with_output()?;
    let wall = t.elapsed();
    let peaks = peaks.stop();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("atlas init on the large tree failed: {err}");
    }
    let indexed = std::fs::read_dir(home.join("bundles"))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("project+big"))
        .find_map(|e| {
            let m: Value = serde_json::from_slice(&std::fs::read(e.path().join("current/manifest.json")).ok()?).ok()?;
            Some((m["sources"][0]["files"].as_u64()?, m["chunk_count"].as_u64()?))
        });
    say(&format!(
        "large tree: the crates under ~/.cargo/registry/src copied {copies} times: {files} files ({source} source \
         files by extension, {rs} .rs)"
    ));
    say(&format!(
        "  first index, `atlas init --no-deps --keyword-only`: {:.1}s wall; {}; peak RSS: atlas-pipeline {} MiB, \
         atlas {} MiB",
        wall.as_secs_f64(),
        indexed.map_or_else(|| "no manifest read".to_owned(), |(f, c)| format!("{f} files indexed, {c} chunks")),
        peaks.get("atlas-pipeline").copied().unwrap_or(0) >> 10,
        peaks.get("atlas").copied().unwrap_or(0) >> 10,
    ));
    for l in err.lines().filter(|l| l.contains("searchable")) {
        say(&format!("  {l}"));
    }
    // A restart with nothing changed: answers at once, and the watcher's look at what
    // moved while nothing watched (a walk of sizes and times) builds nothing.
    let log = dir.with_extension("serve.log");
    let t = Instant::now();
    let (mut server, init_t) = Server::start(atlas, home, dir, &log)?;
    let r = server.call("search_code", json!({"query": "parse the input", "mode": "keyword", "top_k": 3}))?;
    let answered = t.elapsed();
    let hits = r["structuredContent"]["hits"].as_array().map_or(0, Vec::len);
    std::thread::sleep(Duration::from_secs(20));
    let built = std::fs::read_to_string(&log).unwrap_or_default().matches("indexed as").count();
    let before = cpu_ticks(server.pid());
    std::thread::sleep(Duration::from_secs(20));
    let idle = (cpu_ticks(server.pid()) - before) as f64 / clock_ticks() / 20.0 * 100.0;
    say(&format!(
        "  restart with nothing changed: initialize {:.0} ms, the first search ({hits} hits) {:.0} ms after the start; builds at start: {built}; watching: RSS {} MiB (peak {} MiB), CPU {idle:.2} % of one core over 20 s",
        ms(init_t),
        ms(answered),
        status_kb(server.pid(), "VmRSS").unwrap_or(0) >> 10,
        status_kb(server.pid(), "VmHWM").unwrap_or(0) >> 10,
    ));
    server.stop();
    Ok(())
}

fn is_source(rel: &str) -> bool {
    const EXT: [&str; 16] = [
        ".rs", ".c", ".h", ".cc", ".cpp", ".hpp", ".py", ".js", ".ts", ".go", ".java", ".md", ".toml", ".s", ".S",
        ".pl",
    ];
    EXT.iter().any(|e| rel.ends_with(e))
}

/// Drops the tree's files from the page cache (a cold first index), where the system lets us.
fn evict(dir: &Path) {
    let script = "import os,sys\nfor r,_,fs in os.walk(sys.argv[1]):\n  for f in fs:\n    p=os.path.join(r,f)\n    try:\n      fd=os.open(p,os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)\n    except OSError: pass\n";
    let _ = Command::new("python3").args(["-c", script]).arg(dir).status();
}

/// The peak RSS (VmHWM, KiB) of a process and its descendants, by command name,
/// sampled from `/proc` every 50 ms until stopped.
struct Peaks {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<BTreeMap<String, u64>>,
}

impl Peaks {
    fn watch(root: u32) -> Peaks {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peaks: BTreeMap<String, u64> = BTreeMap::new();
            while !flag.load(Ordering::SeqCst) {
                for pid in family(root) {
                    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                    if let Some(kb) = status_kb(pid, "VmHWM") {
                        let e = peaks.entry(comm.trim().to_owned()).or_default();
                        *e = (*e).max(kb);
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            peaks
        });
        Peaks { stop, thread }
    }

    fn stop(self) -> BTreeMap<String, u64> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}

/// `root` and every process below it.
fn family(root: u32) -> Vec<u32> {
    let mut parent: Vec<(u32, u32)> = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // The fields after the command name, which may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parent.push((pid, ppid));
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// A `/proc/PID/status` field in KiB.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

/// utime + stime + cutime + cstime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    // After the name: state(0) ppid … utime(11) stime(12) cutime(13) cstime(14).
    rest.split_whitespace().skip(11).take(4).filter_map(|v| v.parse::<u64>().ok()).sum()
}

fn clock_ticks() -> f64 {
    crate::output({
        let mut c = Command::new("getconf");
        c.arg("CLK_TCK");
        c
    })
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(100.0)
}

// ---- small helpers ----

fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The `p`th percentile (nearest rank) of `v`; NaN when empty.
fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank.min(s.len()) - 1]
}

/// Words no tree holds, and sentences of plain words, from a seeded xorshift.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64);
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `zq` and ten letters: one token to every tokenizer, in no tree.
    fn word(&mut self) -> String {
        let mut w = String::from("zq");
        for _ in 0..10 {
            w.push((b'a' + (self.next() % 26) as u8) as char);
        }
        w
    }

    fn sentence(&mut self) -> String {
        const WORDS: [&str; 32] = [
            "walrus", "lantern", "violet", "harbor", "comet", "saffron", "glacier", "orchid", "falcon", "meadow",
            "copper", "thunder", "pebble", "velvet", "canyon", "maple", "ember", "tundra", "quartz", "willow",
            "jasmine", "beacon", "lagoon", "cobalt", "sparrow", "prairie", "marble", "cinder", "juniper", "ferret",
            "monsoon", "pyramid",
        ];
        let words: Vec<&str> = (0..8).map(|_| WORDS[(self.next() % 32) as usize]).collect();
        format!(
            "The {} counts every {} beside the {} while the {} sings of {} and {} under a {} {}.",
            words[0], words[1], words[2], words[3], words[4], words[5], words[6], words[7]
        )
    }
}

mod peer {
    //! The peer: jcodemunch-mcp from PyPI (with its `watch` extra), in a venv under
    //! target/, on the same tree: its first index (`jcodemunch-mcp index`), then its
    //! MCP server with its watcher (`serve --watcher`), the same edits looked for
    //! through its own tools, `search_symbols` and `search_text` (through its `order`
    //! front door).

    use std::path::Path;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use anyhow::Context as _;
    use serde_json::{Value, json};

    use super::{EDIT_TIMEOUT, POLL, Rng, Server, append_block, env_num, ms, pct};
    use crate::say;

    const PACKAGE: &str = "jcodemunch-mcp[watch]==1.108.399";

    /// The peer's binary, installed from PyPI into a venv under target/ on first use.
    fn bin() -> anyhow::Result<std::path::PathBuf> {
        let venv = crate::project_root().join("target/bench-live/peer-venv");
        let bin = venv.join("bin/jcodemunch-mcp");
        if !bin.is_file() {
            crate::status({
                let mut c = Command::new("python3");
                c.args(["-m", "venv"]).arg(&venv);
                c
            })?;
            crate::status({
                let mut c = Command::new(venv.join("bin/pip"));
                c.args(["install", "--quiet", PACKAGE]);
                c
            })
            .context("installing the peer from PyPI")?;
        }
        Ok(bin)
    }

    /// The peer's first index of `dir` (into `store`, emptied first), then its server
    /// with its watcher on it; the server, the repository name its tools take, how
    /// long the index and the handshake took.
    fn start(store: &Path, dir: &Path, log: &Path) -> anyhow::Result<(Server, String, Duration, Duration)> {
        let bin = bin()?;
        let _ = std::fs::remove_dir_all(store);
        let t = Instant::now();
        crate::status({
            let mut c = Command::new(&bin);
            c.arg("index").arg(dir).env("CODE_INDEX_PATH", store).current_dir(dir);
            c.stdout(std::process::Stdio::null());
            c
        })?;
        let first = t.elapsed();
        let mut serve = Command::new(&bin);
        serve
            .args(["serve", "--watcher", "--watcher-no-ai-summaries", "--watcher-path"])
            .arg(dir)
            .env("CODE_INDEX_PATH", store)
            .current_dir(dir);
        let (mut server, init) = Server::spawn(serve, log)?;
        let repo = {
            let r = order(&mut server, "index_folder", json!({"path": dir}), true)?;
            r["repo"].as_str().context("index_folder named no repo")?.to_owned()
        };
        Ok((server, repo, first, init))
    }

    /// The quality questions through the peer's own search tools ([`super::quality`]).
    pub fn quality(store: &Path, dir: &Path, questions: &[super::Question]) -> anyhow::Result<()> {
        let (mut server, repo, first, _) = start(store, dir, &dir.with_extension("peer-serve.log"))?;
        // Its search tool for a question in words (`search_text` is a substring
        // search: a sentence finds nothing).
        let mut symbols = super::Scores::default();
        for q in questions {
            let ask = |format: Option<&str>| {
                let mut a = json!({"action": "search_symbols", "args": {"repo": repo, "query": q.query},
                                   "allow_state_change": false});
                if let Some(f) = format {
                    a["args"]["format"] = json!(f);
                }
                a
            };
            // What an agent reads (its default, compact encoding when it saves tokens),
            // and the same search as JSON to read the ranking from.
            let read = server.call("order", ask(None))?;
            let r = server.call("order", ask(Some("json")))?;
            let parsed: Value =
                r["content"][0]["text"].as_str().and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null);
            let files: Vec<String> =
                results(&parsed).iter().filter_map(|h| h["file"].as_str().map(str::to_owned)).collect();
            symbols.add(q, &files, &read["content"][0]["text"]);
        }
        server.stop();
        say(&format!("  peer {PACKAGE} on the same copy (its first index {:.1}s):", first.as_secs_f64()));
        symbols.say("peer search_symbols (top 10)");
        Ok(())
    }

    pub fn run(work: &Path, dir: &Path) -> anyhow::Result<()> {
        anyhow::ensure!(dir.is_dir(), "the small tree is not there: run without skipping `small`");
        let (mut server, repo, first, init) = start(&work.join("peer-home"), dir, &work.join("peer-serve.log"))?;
        say(&format!(
            "peer {PACKAGE}: first index of the small tree (`jcodemunch-mcp index`) {:.1}s; its server with its watcher \
             answered initialize in {:.0} ms",
            first.as_secs_f64(),
            ms(init)
        ));
        let mut rs: Vec<String> =
            crate::files_under(dir)?.into_iter().filter(|f| f.ends_with(".rs") && !f.starts_with(".git/")).collect();
        rs.sort();
        let n = env_num("BENCH_LIVE_EDITS", 100);
        let mut rng = Rng::new();
        std::thread::sleep(Duration::from_secs(3));
        let (mut sym, mut text, mut missed) = (Vec::new(), Vec::new(), [0usize; 2]);
        for i in 0..=n {
            let rel = &rs[(3 + i * 7) % rs.len()];
            let path = dir.join(rel);
            let (body, block) = append_block(&std::fs::read_to_string(&path)?, &mut rng);
            let t = Instant::now();
            std::fs::write(&path, body)?;
            let mut found: [Option<Duration>; 2] = [None, None];
            while found.iter().any(Option::is_none) && t.elapsed() < EDIT_TIMEOUT {
                if found[0].is_none() {
                    let r = order(&mut server, "search_symbols", json!({"repo": repo, "query": block.name}), false)?;
                    if results(&r).iter().any(|h| h["name"] == json!(block.name)) {
                        found[0] = Some(t.elapsed());
                    }
                }
                if found[1].is_none() {
                    let r = order(&mut server, "search_text", json!({"repo": repo, "query": block.name}), false)?;
                    if results(&r).iter().any(|h| h["file"].as_str().is_some_and(|f| rel.ends_with(f))) {
                        found[1] = Some(t.elapsed());
                    }
                }
                std::thread::sleep(POLL);
            }
            // The first edit warms up, untimed (as for atlas).
            if i > 0 {
                for (k, f) in found.iter().enumerate() {
                    match (k, f) {
                        (0, Some(d)) => sym.push(ms(*d)),
                        (1, Some(d)) => text.push(ms(*d)),
                        _ => missed[k] += 1,
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        say(&format!("  peer edit-to-searchable over {n} edits, the same edits and polling:"));
        for (name, v, m) in [("search_symbols", &sym, missed[0]), ("search_text", &text, missed[1])] {
            say(&format!(
                "    {name:<14} p50 {:>6.0} ms  p95 {:>6.0} ms  max {:>6.0} ms  ({} found, {m} not within {}s)",
                pct(v, 50.0),
                pct(v, 95.0),
                pct(v, 100.0),
                v.len(),
                EDIT_TIMEOUT.as_secs()
            ));
        }
        server.stop();
        Ok(())
    }

    /// `order(action, args)`: the peer's one front door to its catalog; its reply's
    /// JSON text, parsed.
    /// Searches asked as JSON: by default it answers large results in its own compact
    /// encoding, which would read here as no results at all.
    fn order(server: &mut Server, action: &str, mut args: Value, change: bool) -> anyhow::Result<Value> {
        if action.starts_with("search") {
            args["format"] = json!("json");
        }
        let r = server.call("order", json!({"action": action, "args": args, "allow_state_change": change}))?;
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        Ok(serde_json::from_str(text).unwrap_or(Value::Null))
    }

    fn results(r: &Value) -> Vec<Value> {
        r["results"].as_array().cloned().unwrap_or_default()
    }
}
