//! `cargo xtask eval`: retrieval quality on the development sets in `xtask/eval/`
//! (docs/eval.md has the format), each over a bundle of its corpus built as a new user
//! would (one `kind: local` source, the default config), through `atlas eval`. Each
//! set's report goes to `target/eval/<set>.json`, and the previous run's report, when
//! there is one, is printed beside it. Every figure is given for the whole set and for
//! its tune and test halves (`half=…` in the per-tag table).
//!
//! `--symbols` adds a symbol-lookup set per code corpus, drawn from the bundle's own
//! definitions; `--multi` asks every set's questions of one server holding all the
//! corpora, unpinned and pinned to the right library; `--v1` runs the round-2 sets.
//! `--small` builds a small library from each corpus ([`small`]) and asks it the set's
//! questions it still answers and every negative: refusal on a corpus the size of a
//! small package, which no fit has seen.
//!
//! `--projects` is the real-project set instead (`xtask/eval/projects/`, [`projects`]):
//! each project synced as a new user would (`atlas sync`), then its questions asked
//! through `atlas tool --project`, as an agent asks them, unpinned and pinned.

use std::process::Command;

use crate::{Profile, corpora, project_root, status};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these sets (file stems in xtask/eval/; default: all).
    sets: Vec<String>,
    /// Per query that misses rank 1: what ranked first, where the expected files landed.
    #[arg(long)]
    explain: bool,
    /// Also a symbol-lookup set of this many names per code corpus (0: none).
    #[arg(long, default_value_t = 0)]
    symbols: usize,
    /// Also the multi-library run: every set against one server holding all corpora.
    #[arg(long)]
    multi: bool,
    /// The round-2 sets (xtask/eval/v1) instead of the current ones.
    #[arg(long)]
    v1: bool,
    /// Also each set over a small library cut from its corpus (47 files).
    #[arg(long)]
    small: bool,
    /// Compare these ranking knobs (a JSON file, see `atlas eval --tuning`).
    #[arg(long)]
    tuning: Option<std::path::PathBuf>,
    /// The real-project set (xtask/eval/projects) instead: `atlas sync` of each project,
    /// then its questions through `atlas tool --project`, unpinned and pinned. Needs the
    /// registries, not ATLAS_CORPORA; reads and writes ATLAS_HOME.
    #[arg(long)]
    projects: bool,
    /// With --projects: sync by keyword and symbols only (no vectors pass).
    #[arg(long, requires = "projects")]
    keyword_only: bool,
    /// With --projects: sync every kind of direct dependency (atlas's default), not only
    /// the runtime ones the questions are about.
    #[arg(long, requires = "projects")]
    every_kind: bool,
    /// With --projects: this `atlas` binary (atlas-pipeline beside it) instead of
    /// building the debug ones.
    #[arg(long, requires = "projects", value_name = "PATH")]
    atlas: Option<std::path::PathBuf>,
}

/// `(set, bundle name, corpus folder under ATLAS_CORPORA)`.
pub const SETS: &[(&str, &str, &str)] = &[
    ("docs-aep", "aep", "aep-sdks-docs/site"),
    ("docs-devtron", "devtron", "devtron-docs/site"),
    ("code-concrete-ml", "concrete-ml", "concrete-ml/repo"),
    ("code-tfhe", "tfhe-rs", "tfhe-rs/repo"),
];

/// The libraries the multi-library server holds, and the cross-library set's pair.
const MULTI: &[&str] = &["aep", "concrete-ml", "tfhe-rs"];
const CROSS: (&str, &[&str]) = ("cross-fhe", &["concrete-ml", "tfhe-rs"]);

pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.projects {
        return projects::run(args);
    }
    let corpora = corpora()?;
    let release = Profile::Release;
    release.build()?;
    crate::setup::run(release)?;
    let wanted = |set: &str| args.sets.is_empty() || args.sets.iter().any(|s| s == set);
    let folder = if args.v1 { "xtask/eval/v1" } else { "xtask/eval" };
    let mut bundles = std::collections::BTreeMap::new();
    for &(set, name, corpus) in SETS {
        let needed = wanted(set) || (args.multi && MULTI.contains(&name));
        if !needed {
            continue;
        }
        let work = project_root().join("target/eval").join(name);
        let bundle = crate::local_bundle(&work, name, &name.replace('-', "_"), &corpora.join(corpus))?;
        bundles.insert(name, bundle.clone());
        if !wanted(set) {
            continue;
        }
        let golden = project_root().join(format!("{folder}/{set}.jsonl"));
        let stem = if args.v1 { format!("v1-{set}") } else { set.to_owned() };
        let mut ev = atlas_eval(&release, &stem, args);
        ev.arg("--golden").arg(&golden).arg("--bundle").arg(&bundle);
        status(ev)?;
        if args.small && !args.v1 {
            let (corpus, golden) = small::cut(&corpora.join(corpus), &golden, &work.with_extension("small"))?;
            let small = crate::local_bundle(&work.with_extension("small"), &format!("small-{name}"), "small", &corpus)?;
            let mut ev = atlas_eval(&release, &format!("small-{set}"), args);
            ev.arg("--golden").arg(&golden).arg("--bundle").arg(&small);
            status(ev)?;
        }
        if args.symbols > 0 && set.starts_with("code-") {
            let mut ev = atlas_eval(&release, &format!("symbols-{name}"), args);
            ev.arg("--symbol-set").arg(args.symbols.to_string()).args(["--kind", "code"]).arg("--bundle").arg(&bundle);
            status(ev)?;
        }
    }
    if args.multi && !args.v1 {
        let all: Vec<_> = MULTI.iter().filter_map(|n| bundles.get(n)).collect();
        for &(set, name, _) in SETS.iter().filter(|(_, n, _)| MULTI.contains(n)) {
            for pinned in [false, true] {
                let stem = format!("multi-{set}-{}", if pinned { "pinned" } else { "unpinned" });
                let mut ev = atlas_eval(&release, &stem, args);
                ev.arg("--golden").arg(project_root().join(format!("xtask/eval/{set}.jsonl")));
                for b in &all {
                    ev.arg("--bundle").arg(b);
                }
                if pinned {
                    ev.args(["--library", name]);
                }
                status(ev)?;
            }
        }
        let (set, pair) = CROSS;
        let mut ev = atlas_eval(&release, &format!("multi-{set}"), args);
        ev.arg("--golden").arg(project_root().join(format!("xtask/eval/{set}.jsonl")));
        for b in pair.iter().filter_map(|n| bundles.get(n)) {
            ev.arg("--bundle").arg(b);
        }
        status(ev)?;
    }
    Ok(())
}

/// `atlas eval` writing `target/eval/<stem>.json`, compared with the previous run's.
fn atlas_eval(release: &Profile, stem: &str, args: &Args) -> Command {
    let name = if args.tuning.is_some() { format!("{stem}.tuning.json") } else { format!("{stem}.json") };
    let out = project_root().join("target/eval").join(name);
    let prev = out.with_extension("prev.json");
    if out.is_file() && args.tuning.is_none() {
        let _ = std::fs::rename(&out, &prev);
    }
    let mut ev = Command::new(release.bin("atlas"));
    ev.arg("eval").arg("--json").arg(&out);
    if let Some(t) = &args.tuning {
        ev.arg("--tuning").arg(t);
    } else if prev.is_file() {
        ev.arg("--compare").arg(&prev);
    }
    if args.explain {
        ev.arg("--explain");
    }
    ev
}

/// Small libraries cut from a development corpus, for refusal where the held-out
/// sets found it weakest: a small package's docs and source (47 files), where an
/// everyday word or a name's two words are missing more often than in a large corpus.
mod small {
    use std::path::{Component, Path, PathBuf};

    use sha2::{Digest, Sha256};

    /// The files a small library holds: the held-out fifth corpus's size.
    const FILES: usize = 47;
    /// Files left for ones no question names.
    const OTHERS: usize = 7;
    /// Fixes the cut: questions and files are taken in the order of their hash.
    const SEED: &str = "small-1";

    fn order(key: &str) -> [u8; 32] {
        Sha256::digest(format!("{SEED}\0{key}")).into()
    }

    /// Cuts the corpus at `corpus` into `work/corpus`: questions of `golden` in hash
    /// order, each kept while every file it expects fits in the first `FILES −
    /// OTHERS`, then other docs and source files in hash order up to `FILES`. Writes
    /// `work/set.jsonl` (the kept questions and every negative, their halves as in
    /// the full set) and returns the two paths.
    pub fn cut(corpus: &Path, golden: &Path, work: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
        let text = std::fs::read_to_string(golden)?;
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?;
        let expected = |q: &serde_json::Value| -> Vec<String> {
            q["expected"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["path"].as_str().map(str::to_owned))
                .collect()
        };
        let mut answerable: Vec<&serde_json::Value> = lines.iter().filter(|q| !expected(q).is_empty()).collect();
        answerable.sort_by_key(|q| order(q["query"].as_str().unwrap_or_default()));
        let mut files = std::collections::BTreeSet::new();
        let mut kept = Vec::new();
        for q in answerable {
            let need = expected(q);
            // A file the corpus does not hold cannot be copied, and a path that would
            // leave the corpus is no path of it: not cut.
            let inside = |p: &String| Path::new(p).components().all(|c| matches!(c, Component::Normal(_)));
            if !need.iter().all(|p| inside(p) && corpus.join(p).is_file()) {
                continue;
            }
            let more = need.iter().filter(|p| !files.contains(*p)).count();
            if files.len() + more <= FILES - OTHERS {
                files.extend(need);
                kept.push(q);
            }
        }
        let mut others = crate::files_under(corpus)?;
        others.retain(|p| !files.contains(p) && [".md", ".py", ".rs"].iter().any(|e| p.ends_with(e)));
        others.sort_by_key(|p| order(p));
        let room = FILES.saturating_sub(files.len());
        files.extend(others.into_iter().take(room));
        let out = work.join("corpus");
        if out.exists() {
            std::fs::remove_dir_all(&out)?;
        }
        for f in &files {
            let to = out.join(f);
            std::fs::create_dir_all(to.parent().unwrap_or(&out))?;
            std::fs::copy(corpus.join(f), &to)?;
        }
        let set = work.join("set.jsonl");
        let negatives = lines.iter().filter(|q| expected(q).is_empty());
        let body: Vec<String> = kept.into_iter().chain(negatives).map(|q| q.to_string()).collect();
        std::fs::write(&set, body.join("\n") + "\n")?;
        Ok((out, set))
    }
}

/// The real-project set (issue 68): public projects, three per ecosystem, each folder
/// its manifest and lockfile, each `<name>.jsonl` ten questions about its direct
/// dependencies (`library`, `version`, `kind`, `expected` paths inside the package as
/// published). Per project: a fresh copy synced into ATLAS_HOME (`atlas sync --json`,
/// one package at a time: the keyword pass's and the vectors pass's seconds), then
/// each question through `atlas tool --project`, as an agent asks it (`search_code` or
/// `search_docs` by its kind, every argument at its default), unpinned and pinned to
/// its library. A hit is relevant when it is of the question's library at its
/// version and its file, below the package's source folder, is an expected path (any
/// grade). Top 1 and top 5 are read from the default reply; MRR@10 from the same
/// search with `top_k=10` and `detail=brief`; reply tokens are the default reply's
/// text bytes / 3 (the servers' estimator).
mod projects {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::process::Command;

    use anyhow::Context as _;
    use serde_json::{Value, json};

    use super::Args;
    use crate::{Profile, project_root, say};

    /// One question of a project's set.
    struct Question {
        id: String,
        query: String,
        library: String,
        version: String,
        kind: String,
        expected: Vec<String>,
    }

    /// One question's outcome, unpinned or pinned: the rank of its first relevant hit
    /// in the default reply and in the top 10, the reply's tokens, or why it failed.
    #[derive(Debug, Default, Clone)]
    struct Outcome {
        rank: Option<usize>,
        rank10: Option<usize>,
        tokens: usize,
        first: String,
        error: Option<String>,
    }

    /// A project's sync: seconds to searchable by keyword, seconds more to embedded
    /// (none when some package was left without vectors), and what went wrong.
    #[derive(Debug, Default)]
    struct Synced {
        lockfiles: Vec<String>,
        libraries: usize,
        keyword_s: f64,
        vectors_s: Option<f64>,
        notes: Vec<String>,
    }

    struct Project {
        name: String,
        ecosystem: &'static str,
        synced: Synced,
        questions: Vec<Question>,
        unpinned: Vec<Outcome>,
        pinned: Vec<Outcome>,
    }

    pub fn run(args: &Args) -> anyhow::Result<()> {
        let atlas = match &args.atlas {
            Some(a) => std::path::absolute(a)?,
            None => {
                Profile::Debug.build()?;
                Profile::Debug.bin("atlas")
            }
        };
        let folder = project_root().join("xtask/eval/projects");
        let mut names: Vec<String> = std::fs::read_dir(&folder)?
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| args.sets.is_empty() || args.sets.contains(n))
            .collect();
        names.sort();
        anyhow::ensure!(!names.is_empty(), "no project of xtask/eval/projects is named {:?}", args.sets);
        let vectors = !args.keyword_only && model_ready(&atlas)?;
        if !args.keyword_only && !vectors {
            say("eval projects: the default embedding model is not provisioned (`atlas setup`): keyword pass only");
        }
        let home = std::env::var_os("ATLAS_HOME")
            .map_or_else(|| "~/.cache/atlas".into(), |h| h.to_string_lossy().into_owned());
        let bundles = std::fs::read_dir(Path::new(&home).join("bundles"));
        let installed = bundles.map_or(0, |d| d.flatten().filter(|e| e.path().is_dir()).count());
        if installed > 0 {
            say(&format!(
                "eval projects: ATLAS_HOME ({home}) holds {installed} libraries already; packages it holds are not \
                 rebuilt, so their sync times are not a cold sync's"
            ));
        }
        let work = std::env::temp_dir().join("atlas-eval-projects");
        let mut done = Vec::new();
        for name in names {
            let dir = work.join(&name);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            for e in std::fs::read_dir(folder.join(&name))?.flatten() {
                std::fs::copy(e.path(), dir.join(e.file_name()))?;
            }
            let questions = read(&folder.join(format!("{name}.jsonl")))?;
            let ecosystem = ecosystem(questions.first().map_or("", |q| q.library.as_str()));
            say(&format!("eval projects: {name}: atlas sync"));
            let synced = sync(&atlas, &dir, vectors, args.every_kind)?;
            let ask_all = |pinned| questions.iter().map(|q| ask(&atlas, &dir, q, pinned)).collect::<Vec<_>>();
            let (unpinned, pinned) = (ask_all(false), ask_all(true));
            done.push(Project { name, ecosystem, synced, questions, unpinned, pinned });
        }
        report(&done, vectors)
    }

    /// Whether every default model file (the embedding model, ONNX Runtime) is installed.
    fn model_ready(atlas: &Path) -> anyhow::Result<bool> {
        let files = crate::models(atlas)?;
        Ok(files.iter().filter(|m| m["default"] == true).all(|m| m["state"] == "installed"))
    }

    fn ecosystem(library: &str) -> &'static str {
        match library.split_once(':').map(|(e, _)| e) {
            Some("crate") => "Rust",
            Some("npm") => "Node",
            Some("pypi") => "Python",
            _ => "other",
        }
    }

    fn read(path: &Path) -> anyhow::Result<Vec<Question>> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
            let v: Value = serde_json::from_str(line).with_context(|| format!("a line of {}", path.display()))?;
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            let expected = v["expected"].as_array().into_iter().flatten();
            out.push(Question {
                id: s("id"),
                query: s("query"),
                library: s("library"),
                version: s("version"),
                kind: s("kind"),
                expected: expected.filter_map(|e| e["path"].as_str().map(str::to_owned)).collect(),
            });
        }
        Ok(out)
    }

    /// `atlas sync DIR --json`, one package at a time: keyword first, then vectors
    /// unless `!vectors`; only the runtime dependencies unless `every_kind`.
    fn sync(atlas: &Path, dir: &Path, vectors: bool, every_kind: bool) -> anyhow::Result<Synced> {
        let mut cmd = Command::new(atlas);
        cmd.arg("sync").arg(dir).args(["--json", "--jobs", "1"]).env("ATLAS_NO_PROGRESS", "1");
        if !vectors {
            cmd.arg("--keyword-only");
        }
        if !every_kind {
            cmd.args(["--only", "runtime"]);
        }
        eprintln!("xtask: running {cmd:?}");
        let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
        // A sync where some package failed exits 1 and still prints its outcome.
        let v: Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!("`atlas sync` printed no outcome: {}", String::from_utf8_lossy(&out.stderr).trim())
        })?;
        let keyword_s = v["searchable_s"].as_f64().unwrap_or(f64::NAN);
        let libraries = v["libraries"].as_array().cloned().unwrap_or_default();
        let mut lockfiles: Vec<String> =
            libraries.iter().filter_map(|l| l["lockfile"].as_str().map(str::to_owned)).collect();
        lockfiles.sort();
        lockfiles.dedup();
        let mut notes = Vec::new();
        for (key, what) in [("failed", "failed"), ("skipped", "skipped"), ("not_embedded", "not embedded")] {
            for n in v[key].as_array().into_iter().flatten() {
                notes.push(format!("{what}: {}", n.as_str().unwrap_or_default()));
            }
        }
        Ok(Synced {
            lockfiles,
            libraries: libraries.len(),
            keyword_s,
            vectors_s: v["embedded_s"].as_f64().filter(|_| vectors).map(|e| e - keyword_s),
            notes,
        })
    }

    /// One question through `atlas tool`: the default reply, then the top 10.
    fn ask(atlas: &Path, dir: &Path, q: &Question, pinned: bool) -> Outcome {
        let first_relevant = |reply: &Value| {
            let hits = reply["structured"]["hits"].as_array().cloned().unwrap_or_default();
            hits.iter().position(|h| relevant(h, q)).map(|i| i + 1)
        };
        let reply = match tool(atlas, dir, q, pinned, &[]) {
            Ok(r) => r,
            Err(e) => return Outcome { error: Some(e), ..Outcome::default() },
        };
        let first = reply["structured"]["hits"][0].clone();
        let first = format!("{} {}", first["library"].as_str().unwrap_or("-"), first["path"].as_str().unwrap_or("-"));
        let tokens = reply["text"].as_str().map_or(0, |t| t.len().div_ceil(3));
        let (rank10, error) = match tool(atlas, dir, q, pinned, &["top_k=10", "detail=brief"]) {
            Ok(r) => (first_relevant(&r), None),
            Err(e) => (None, Some(e)),
        };
        Outcome { rank: first_relevant(&reply), rank10, tokens, first, error }
    }

    /// `atlas tool --project DIR search_code|search_docs --json`: the reply, or its error.
    fn tool(atlas: &Path, dir: &Path, q: &Question, pinned: bool, extra: &[&str]) -> Result<Value, String> {
        let name = if q.kind == "code" { "search_code" } else { "search_docs" };
        let mut cmd = Command::new(atlas);
        cmd.args(["tool", "--json", "--project"]).arg(dir).arg(name).arg("--arg").arg(format!("query={}", q.query));
        if pinned {
            cmd.arg("--arg").arg(format!("library={}", q.library));
        }
        for a in extra {
            cmd.args(["--arg", a]);
        }
        let out = cmd.env("ATLAS_NO_PROGRESS", "1").output().map_err(|e| format!("starting atlas tool: {e}"))?;
        let reply: Value = serde_json::from_slice(&out.stdout).map_err(|_| {
            let err = String::from_utf8_lossy(&out.stderr);
            err.lines().next().unwrap_or("atlas tool printed nothing").to_owned()
        })?;
        if reply["is_error"] == true {
            return Err(reply["text"].as_str().and_then(|t| t.lines().next()).unwrap_or("a tool error").to_owned());
        }
        Ok(reply)
    }

    /// A hit of the question's library at its version whose file, below the package's
    /// source folder (`clap/`, `@scope/name/`), is one of the expected paths.
    fn relevant(hit: &Value, q: &Question) -> bool {
        let (Some(library), Some(path)) = (hit["library"].as_str(), hit["path"].as_str()) else {
            return false;
        };
        let skip = if path.starts_with('@') { 2 } else { 1 };
        let inside = path.splitn(skip + 1, '/').nth(skip).unwrap_or_default();
        library == format!("{}@{}", q.library, q.version) && q.expected.iter().any(|e| e == inside)
    }

    /// Top 1, top 5 and MRR@10 of some outcomes, and their mean reply tokens.
    fn figures(o: &[&Outcome]) -> (f64, f64, f64, f64) {
        let n = o.len().max(1) as f64;
        let share = |f: &dyn Fn(&Outcome) -> bool| o.iter().filter(|x| f(x)).count() as f64 / n;
        let top1 = share(&|x| x.rank == Some(1));
        let top5 = share(&|x| x.rank.is_some_and(|r| r <= 5));
        let mrr = o.iter().map(|x| x.rank10.map_or(0.0, |r| 1.0 / r as f64)).sum::<f64>() / n;
        let tokens = o.iter().map(|x| x.tokens as f64).sum::<f64>() / n;
        (top1, top5, mrr, tokens)
    }

    fn report(done: &[Project], vectors: bool) -> anyhow::Result<()> {
        let pct = |x: f64| format!("{:.0}%", 100.0 * x);
        let secs = |s: Option<f64>| s.map_or_else(|| "–".to_owned(), |s| format!("{s:.1}"));
        let line = |label: &str, eco: &str, ps: &[&Project]| {
            let un: Vec<&Outcome> = ps.iter().flat_map(|p| &p.unpinned).collect();
            let pi: Vec<&Outcome> = ps.iter().flat_map(|p| &p.pinned).collect();
            let (u1, u5, um, ut) = figures(&un);
            let (p1, p5, pm, pt) = figures(&pi);
            let kw: f64 = ps.iter().map(|p| p.synced.keyword_s).sum();
            let vs: Option<f64> = ps.iter().map(|p| p.synced.vectors_s).sum();
            format!(
                "| {label} | {eco} | {} | {} | {} | {um:.3} | {} | {} | {pm:.3} | {ut:.0} / {pt:.0} | {kw:.1} | {} |",
                un.len(),
                pct(u1),
                pct(u5),
                pct(p1),
                pct(p5),
                secs(if vectors { vs } else { None }),
            )
        };
        let mut out = vec![
            format!(
                "| project | ecosystem | questions | unpinned top-1 | unpinned top-5 | unpinned MRR@10 | pinned top-1 | \
                 pinned top-5 | pinned MRR@10 | reply tokens (unpinned / pinned) | sync keyword s | sync vectors s{} |",
                if vectors { "" } else { " (not run)" }
            ),
            "|---|---|---|---|---|---|---|---|---|---|---|---|".to_owned(),
        ];
        for p in done {
            out.push(line(&p.name, p.ecosystem, &[p]));
        }
        let mut by_eco: BTreeMap<&str, Vec<&Project>> = BTreeMap::new();
        for p in done {
            by_eco.entry(p.ecosystem).or_default().push(p);
        }
        for (eco, ps) in &by_eco {
            out.push(line(&format!("**{eco}**"), eco, ps));
        }
        out.push(line("**all**", "", &done.iter().collect::<Vec<_>>()));
        say(&out.join("\n"));
        let mut json = Vec::new();
        for p in done {
            for n in &p.synced.notes {
                say(&format!("  {}: {n}", p.name));
            }
            let mut qs = Vec::new();
            for ((q, u), pi) in p.questions.iter().zip(&p.unpinned).zip(&p.pinned) {
                for (how, o) in [("unpinned", u), ("pinned", pi)] {
                    if let Some(e) = &o.error {
                        say(&format!("  {} {how}: failed: {e}", q.id));
                    } else if o.rank.is_none() {
                        say(&format!(
                            "  {} {how}: not in the reply (top 10: {:?}); first: {}",
                            q.id, o.rank10, o.first
                        ));
                    }
                }
                qs.push(json!({
                    "id": q.id, "library": q.library, "kind": q.kind,
                    "unpinned": {"rank": u.rank, "rank10": u.rank10, "tokens": u.tokens, "first": u.first, "error": u.error},
                    "pinned": {"rank": pi.rank, "rank10": pi.rank10, "tokens": pi.tokens, "first": pi.first, "error": pi.error},
                }));
            }
            json.push(json!({
                "project": p.name, "ecosystem": p.ecosystem, "lockfiles": p.synced.lockfiles,
                "libraries": p.synced.libraries, "keyword_s": p.synced.keyword_s, "vectors_s": p.synced.vectors_s,
                "notes": p.synced.notes, "questions": qs,
            }));
        }
        let file = project_root().join("target/eval/projects.json");
        std::fs::create_dir_all(file.parent().unwrap_or(&project_root()))?;
        std::fs::write(&file, serde_json::to_string_pretty(&json)?)?;
        say(&format!("eval projects: every question's outcome in {}", file.display()));
        Ok(())
    }
}
