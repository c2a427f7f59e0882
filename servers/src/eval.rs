//! `atlas eval`: retrieval quality of a bundle on a golden set (docs/eval.md), or a
//! rerun of the set the bundle ships, checked against the figures stored at pack time.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use atlas_runtime::eval::{self, EvalOptions, ModeReport, Report};
use atlas_runtime::exit::{UsageError, print};
use atlas_runtime::{Bundle, OpenOptions};

#[derive(Debug)]
pub struct Args {
    pub golden: Option<PathBuf>,
    pub opts: EvalOptions,
    pub json: Option<PathBuf>,
    pub compare: Option<PathBuf>,
    pub min_mrr: Option<f64>,
    pub explain: bool,
    /// With several bundles: the library each query is pinned to.
    pub library: Option<String>,
    /// Ranking knobs to compare (`--tuning`).
    pub tuning: Option<PathBuf>,
    /// A symbol-lookup set of this many names instead of a golden file.
    pub symbol_set: Option<usize>,
}

/// The seed of `--symbol-set`: the same names on every machine.
const SYMBOL_SET_SEED: u64 = 2025;

/// One bundle: its golden set or its shipped eval. Several (or bundles served from a
/// database, `exported`): the merged search of a server holding them all, on a golden
/// set.
pub fn run(dirs: &[PathBuf], exported: Vec<Bundle>, open: OpenOptions, args: Args) -> anyhow::Result<()> {
    if let [dir] = dirs
        && exported.is_empty()
        && args.library.is_none()
    {
        return run_one(dir, open, args);
    }
    let golden_path =
        args.golden.clone().ok_or_else(|| UsageError("evaluating several bundles needs --golden FILE.jsonl".into()))?;
    let golden = golden_set(&golden_path)?;
    let mut lives: Vec<_> = exported.into_iter().map(|b| atlas_mcp::live::Live::new(std::sync::Arc::new(b))).collect();
    for dir in dirs {
        let b = Bundle::open(dir, open.clone()).with_context(|| format!("opening the bundle {}", dir.display()))?;
        lives.push(atlas_mcp::live::Live::new(std::sync::Arc::new(b)));
    }
    let libs = atlas_mcp::library::Libraries::new(lives, Vec::new()).map_err(|e| UsageError(e.to_string()))?;
    let name = libs.bundles().iter().map(|b| b.library()).collect::<Vec<_>>().join(" + ");
    let name = match &args.library {
        Some(l) => format!("{name}, pinned to {l}"),
        None => format!("{name}, unpinned"),
    };
    let searched = libs.select(args.library.as_deref()).map_err(UsageError)?;
    let search = |query: &str, o: &atlas_runtime::SearchOptions| -> atlas_runtime::Result<eval::Judgement> {
        let s = atlas_runtime::search::search_all(&searched, query, o)?.searched;
        let judged = s
            .hits
            .iter()
            .map(|h| {
                let b = libs.bundles().into_iter().find(|b| b.library() == h.library);
                match b {
                    Some(b) => eval::Judged::of(&b, h),
                    None => {
                        eval::Judged { path: h.path.clone(), symbols: Vec::new(), lines: (h.start_line, h.end_line) }
                    }
                }
            })
            .collect();
        Ok((judged, s.confidence, Some(s.signals)))
    };
    if let Some(t) = &args.tuning {
        return compare_tunings(&name, &golden, &args, t, &search);
    }
    let report = eval::evaluate_with(&name, &golden, &args.opts, &search)?;
    finish(report, &args)
}

/// The golden set at `path`, parsed (a bad line is a usage error naming it).
pub(crate) fn golden_set(path: &Path) -> anyhow::Result<Vec<eval::GoldenQuery>> {
    let text =
        String::from_utf8(read(path)?).map_err(|_| UsageError(format!("{} is not UTF-8 text", path.display())))?;
    Ok(eval::parse_golden(&text).map_err(|e| UsageError(format!("{}: {e}", path.display())))?)
}

/// Prints the report (compared, saved, gated as asked).
fn finish(report: Report, args: &Args) -> anyhow::Result<()> {
    let mut out = render(&report, args.explain);
    if let Some(old) = &args.compare {
        let old: Report = serde_json::from_slice(&read(old)?)
            .map_err(|e| UsageError(format!("{}: not an `atlas eval --json` report: {e}", old.display())))?;
        out.push_str(&compare(&old, &report));
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    print(&out)?;
    if let Some(min) = args.min_mrr {
        gate(&report, min)?;
    }
    Ok(())
}

/// One named set of ranking knobs, as `--tuning` lists them.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedTuning {
    name: String,
    #[serde(default)]
    tuning: atlas_runtime::search::Tuning,
}

/// `--tuning`: hybrid under each set of knobs, per half and per shape, one line each.
/// Each batch of questions written after a ranking change (a `round=N` tag) gets a
/// column too, since the halves have judged every earlier change and favour the
/// knobs in force; and `moved` counts the answerable questions each line ranks
/// better and worse than the first (docs/eval.md, "Judging a change").
fn compare_tunings(
    name: &str,
    golden: &[eval::GoldenQuery],
    args: &Args,
    path: &Path,
    search: &dyn Fn(&str, &atlas_runtime::SearchOptions) -> atlas_runtime::Result<eval::Judgement>,
) -> anyhow::Result<()> {
    let tunings: Vec<NamedTuning> = serde_json::from_slice(&read(path)?)
        .map_err(|e| UsageError(format!("{}: not a JSON array of {{\"name\", \"tuning\"}}: {e}", path.display())))?;
    let mut reports: Vec<(String, Report)> = Vec::new();
    for t in tunings {
        let opts = EvalOptions {
            modes: vec![atlas_runtime::Mode::Hybrid],
            rerank: false,
            tuning: t.tuning,
            ..args.opts.clone()
        };
        reports.push((t.name, eval::evaluate_with(name, golden, &opts, search)?));
    }
    print(&tuning_table(&reports))?;
    if let Some(path) = &args.json {
        let all: Vec<serde_json::Value> =
            reports.iter().map(|(n, r)| serde_json::json!({"name": n, "report": r})).collect();
        std::fs::write(path, serde_json::to_vec_pretty(&all)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The `--tuning` table: one line per named report (hybrid only).
fn tuning_table(reports: &[(String, Report)]) -> String {
    let first = reports.first().and_then(|(_, r)| r.modes.first());
    // The rounds' tags, in numeric order (`round=9` before `round=13`).
    let mut rounds: Vec<&String> =
        first.map(|m| m.by_tag.keys().filter(|t| t.starts_with("round=")).collect()).unwrap_or_default();
    rounds.sort_by_key(|t| (t["round=".len()..].parse::<u64>().unwrap_or(u64::MAX), t.as_str()));
    let mut s = String::new();
    let _ = write!(
        s,
        "{:<24} {:>15} {:>15} {:>15}   {:>10} {:>10} {:>10}",
        "hybrid (MRR@10 / R@5)", "tune", "test", "all", "identifier", "keywords", "question"
    );
    for r in &rounds {
        let _ = write!(s, " {r:>10}");
    }
    let _ = writeln!(s, " {:>9}", "moved");
    let pair = |x: Option<&eval::Metrics>| x.map_or("-".to_owned(), |x| format!("{:.3} / {:.3}", x.mrr10, x.recall5));
    let mrr = |x: Option<&eval::Metrics>| x.map_or("-".to_owned(), |x| format!("{:.3}", x.mrr10));
    for (name, r) in reports {
        let Some(m) = r.modes.first() else { continue };
        let _ = write!(
            s,
            "{:<24} {:>15} {:>15} {:>15}   {:>10} {:>10} {:>10}",
            name,
            pair(m.by_tag.get("half=tune")),
            pair(m.by_tag.get("half=test")),
            pair(Some(&m.metrics)),
            mrr(m.by_tag.get("shape=identifier")),
            mrr(m.by_tag.get("shape=keywords")),
            mrr(m.by_tag.get("shape=question")),
        );
        for t in &rounds {
            let _ = write!(s, " {:>10}", mrr(m.by_tag.get(*t)));
        }
        let (up, down) = first.map_or((0, 0), |f| moved(&f.queries, &m.queries));
        let _ = writeln!(s, " {:>9}", format!("+{up} -{down}"));
    }
    s
}

/// How many answerable queries rank better (`.0`) and worse (`.1`) in `now` than in
/// `before` (the same set, in the same order).
fn moved(before: &[eval::QueryOutcome], now: &[eval::QueryOutcome]) -> (usize, usize) {
    let pairs = before.iter().zip(now).filter(|(b, n)| !b.negative && b.query == n.query);
    pairs.fold((0, 0), |(up, down), (b, n)| {
        if n.rr > b.rr + 1e-9 {
            (up + 1, down)
        } else if n.rr < b.rr - 1e-9 {
            (up, down + 1)
        } else {
            (up, down)
        }
    })
}

/// One bundle's search, as the evaluation judges it.
fn one_search(
    b: &Bundle,
) -> impl Fn(&str, &atlas_runtime::SearchOptions) -> atlas_runtime::Result<eval::Judgement> + '_ {
    move |query, o| {
        let s = b.search_scored(query, o)?;
        let judged = s.hits.iter().map(|h| eval::Judged::of(b, h)).collect();
        Ok((judged, s.confidence, Some(s.signals)))
    }
}

fn run_one(dir: &Path, open: OpenOptions, args: Args) -> anyhow::Result<()> {
    let b = Bundle::open(dir, open).with_context(|| format!("opening the bundle {}", dir.display()))?;
    if let Some(n) = args.symbol_set {
        if b.symbols().is_empty() {
            return Err(UsageError(format!(
                "the bundle {} has no symbol table (no code, or built before symbol tables); rebuild it",
                dir.display()
            ))
            .into());
        }
        let golden = eval::symbol_set(b.symbols(), n, SYMBOL_SET_SEED);
        if let Some(t) = &args.tuning {
            return compare_tunings(&b.library(), &golden, &args, t, &one_search(&b));
        }
        return finish(eval::evaluate(&b, &golden, &args.opts)?, &args);
    }
    if let (Some(t), Some(g)) = (&args.tuning, &args.golden) {
        return compare_tunings(&b.library(), &golden_set(g)?, &args, t, &one_search(&b));
    }
    let (golden_path, opts, stored) = match &args.golden {
        Some(g) => (g.clone(), args.opts.clone(), None),
        None => {
            let info = b.manifest.eval.as_ref().ok_or_else(|| {
                UsageError(format!(
                    "the bundle {} ships no eval; pass --golden FILE.jsonl (or build it with stages.pack.eval)",
                    dir.display()
                ))
            })?;
            // The manifest names the files: untrusted, so joined only inside the bundle.
            let inside = |rel: &str| {
                atlas_runtime::safe_path::join_inside(dir, rel)
                    .with_context(|| format!("the manifest's eval block names {rel:?}; the bundle is damaged"))
            };
            let stored: Report = serde_json::from_slice(&read(&inside(&info.results)?)?).with_context(|| {
                format!("reading the stored results {}; run `atlas verify` on the bundle", info.results)
            })?;
            (inside(&info.golden)?, stored.options(), Some(stored))
        }
    };
    let golden = golden_set(&golden_path)?;
    let report = eval::evaluate(&b, &golden, &opts)?;
    let drift = stored.as_ref().map(|s| eval::drift(s, &report));
    finish(report, &args)?;
    if let Some(drift) = drift {
        if !drift.is_empty() {
            anyhow::bail!(
                "the shipped eval no longer gives the figures stored at pack time ({}); the index, the model or \
                 the search changed",
                drift.join("; ")
            );
        }
        print("shipped eval: every figure matches the one stored at pack time\n")?;
    }
    Ok(())
}

/// The largest golden set or report read (a report holds every query of every mode).
const MAX_READ: u64 = 64 << 20;

/// The file's bytes, refusing one over [`MAX_READ`] unread.
fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len();
    if len > MAX_READ {
        return Err(UsageError(format!(
            "{} is {len} bytes, over the {} MiB a golden set or report may hold; split it",
            path.display(),
            MAX_READ >> 20
        ))
        .into());
    }
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// `--min-mrr`: hybrid (reranked or not) when it was evaluated, else every mode.
fn gate(report: &Report, min: f64) -> anyhow::Result<()> {
    let hybrid: Vec<&ModeReport> = report.modes.iter().filter(|m| m.mode.starts_with("hybrid")).collect();
    let gated = if hybrid.is_empty() { report.modes.iter().collect() } else { hybrid };
    let below: Vec<String> = gated
        .iter()
        .filter(|m| m.metrics.mrr10 < min)
        .map(|m| format!("{} MRR@10 {:.3}", m.mode, m.metrics.mrr10))
        .collect();
    if !below.is_empty() {
        anyhow::bail!("below --min-mrr {min}: {}", below.join(", "));
    }
    Ok(())
}

/// The report as text: per mode, per tag, the negatives, and with `explain` the misses.
pub fn render(r: &Report, explain: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {}, {}, k = {}",
        r.bundle,
        atlas_runtime::words::count(r.answerable, "answerable query"),
        atlas_runtime::words::count(r.negatives, "negative"),
        r.k
    );
    let header = |s: &mut String, first: &str| {
        let _ = write!(s, "{first:<28}");
        for (name, _) in eval::Metrics::default().figures(r.k) {
            let _ = write!(s, " {name:>8}");
        }
        let _ = writeln!(s, " {:>7}", "p50 ms");
    };
    header(&mut s, "mode");
    let hindsight = eval::hindsight(r);
    let modes: Vec<&ModeReport> = r.modes.iter().chain(&hindsight).collect();
    for m in &modes {
        let _ = write!(s, "{:<28}", m.mode);
        for (_, v) in m.metrics.figures(r.k) {
            let _ = write!(s, " {v:>8.3}");
        }
        let _ = writeln!(s, " {:>7}", m.p50_ms.map_or("-".to_owned(), |t| format!("{t:.1}")));
    }
    if hindsight.is_some() {
        let _ = writeln!(
            s,
            "({}: each query's best mode, chosen in hindsight: what a perfect choice of mode per query reaches)",
            eval::HINDSIGHT
        );
    }
    let tags: Vec<&String> = r.modes.first().map(|m| m.by_tag.keys().collect()).unwrap_or_default();
    if !tags.is_empty() {
        let _ = writeln!(s, "\nper tag (MRR@10 / R@5):");
        let _ = write!(s, "{:<28}", "tag");
        for m in &modes {
            let _ = write!(s, " {:>16}", m.mode);
        }
        s.push('\n');
        for t in tags {
            let n = r.modes[0].by_tag[t].queries;
            let _ = write!(s, "{:<28}", format!("{t} ({n})"));
            for m in &modes {
                let f = m.by_tag.get(t).copied().unwrap_or_default();
                let _ = write!(s, " {:>16}", format!("{:.3} / {:.3}", f.mrr10, f.recall5));
            }
            s.push('\n');
        }
    }
    let negs: Vec<&ModeReport> = r.modes.iter().filter(|m| m.negatives.is_some()).collect();
    if !negs.is_empty() {
        let _ = writeln!(
            s,
            "\nnegatives: confidence of answerable vs unanswerable queries (min / p25 / median / p75 / max)"
        );
        for m in negs {
            let n = m.negatives.expect("filtered");
            let five = |x: eval::Spread| format!("{:.3} {:.3} {:.3} {:.3} {:.3}", x.min, x.p25, x.p50, x.p75, x.max);
            let _ = writeln!(s, "{:<16} answerable  {}", m.mode, five(n.answerable));
            let _ = writeln!(s, "{:<16} negatives   {}", "", five(n.negatives));
            let _ = writeln!(
                s,
                "{:<16} best threshold {:.3}: {} of {} negatives answered, {} of {} answerable refused",
                "", n.threshold, n.false_answers, n.negatives.n, n.false_refusals, n.answerable.n
            );
            for (part, f) in &m.refusals {
                let _ = writeln!(
                    s,
                    "{:<16} shipped {:.3} ({part}): {} of {} negatives answered, {} of {} answerable refused",
                    "", f.threshold, f.false_answers, f.negatives, f.false_refusals, f.answerable
                );
            }
        }
    }
    if explain {
        s.push_str(&explanation(r));
    }
    s
}

/// Per mode, each answerable query whose expected file was not ranked first: what
/// ranked first, and where each expected file landed.
fn explanation(r: &Report) -> String {
    let mut s = String::new();
    for m in &r.modes {
        let misses: Vec<_> = m.queries.iter().filter(|q| !q.negative && q.rr < 1.0).collect();
        let _ = writeln!(s, "\n{}: {} of {} queries miss rank 1", m.mode, misses.len(), m.metrics.queries);
        for q in misses {
            let _ = writeln!(s, "  {:?}", q.query);
            let _ = writeln!(s, "    first: {}", q.top.as_deref().unwrap_or("(no hits)"));
            for (path, rank) in &q.expected {
                let at = rank.map_or(format!("not in the top {} hits", eval::DEPTH), |r| format!("rank {r}"));
                let _ = writeln!(s, "    expected {path}: {at}");
            }
        }
    }
    s
}

/// The old report's figures beside the new one's, with deltas.
pub fn compare(old: &Report, new: &Report) -> String {
    let mut s = format!("\ncompared with {} (old → new, Δ):\n", old.bundle);
    for m in &new.modes {
        let Some(o) = old.mode(&m.mode) else {
            let _ = writeln!(s, "{:<16} (not in the old report)", m.mode);
            continue;
        };
        let _ = write!(s, "{:<16}", m.mode);
        for ((name, a), (_, b)) in o.metrics.figures(old.k).iter().zip(m.metrics.figures(new.k)) {
            let _ = write!(s, " {name} {a:.3} → {b:.3} ({:+.3})", b - a);
        }
        s.push('\n');
        let changed: Vec<_> = m
            .queries
            .iter()
            .filter_map(|q| {
                let before = o.queries.iter().find(|x| x.query == q.query)?;
                ((before.rr - q.rr).abs() > eval::NOISE).then_some((q.query.as_str(), before.rr, q.rr))
            })
            .collect();
        for (query, a, b) in changed {
            let _ = writeln!(s, "    {query:?}: RR {a:.3} → {b:.3}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of `ranks` (the rank of each golden query's file, 0 for none) under a
    /// fake search.
    fn report(golden: &[eval::GoldenQuery], ranks: &[usize]) -> Report {
        let opts = EvalOptions { modes: vec![atlas_runtime::Mode::Hybrid], ..EvalOptions::default() };
        let search = |query: &str, _: &atlas_runtime::SearchOptions| -> atlas_runtime::Result<eval::Judgement> {
            let i = golden.iter().position(|g| g.query == query).expect("a golden query");
            let hit = |path: &str| eval::Judged { path: path.into(), symbols: Vec::new(), lines: (1, 1) };
            let mut hits: Vec<eval::Judged> = (1..ranks[i].max(1)).map(|n| hit(&format!("other{n}.md"))).collect();
            if ranks[i] > 0 {
                hits.push(hit(&format!("q{i}.md")));
            }
            Ok((hits, 0.9, None))
        };
        eval::evaluate_with("lib@1", golden, &opts, &search).expect("evaluated")
    }

    #[test]
    fn the_tuning_table_has_a_column_per_round_in_order_and_counts_the_questions_that_moved() {
        let lines: Vec<String> = [13, 2, 13, 2]
            .iter()
            .enumerate()
            .map(|(i, round)| {
                format!(r#"{{"query": "q{i}", "expected": [{{"path": "q{i}.md"}}], "tags": {{"round": "{round}"}}}}"#)
            })
            .chain([r#"{"query": "nothing", "expected": []}"#.to_owned()])
            .collect();
        let golden = eval::parse_golden(&lines.join("\n")).expect("a golden set");
        let before = report(&golden, &[1, 2, 1, 0, 0]);
        let after = report(&golden, &[1, 1, 2, 3, 0]);
        let table = tuning_table(&[("before".into(), before), ("after".into(), after)]);
        let head = table.lines().next().expect("a header");
        let (r2, r13) = (head.find("round=2").expect("round 2"), head.find("round=13").expect("round 13"));
        assert!(r2 < r13, "rounds in numeric order: {head}");
        let row = |name: &str| table.lines().find(|l| l.starts_with(name)).expect("a row").to_owned();
        // Round 2 is q1 and q3: 0.5 and 0 before, 1 and 1/3 after.
        assert!(row("before").contains(" 0.250 ") && row("after").contains(" 0.667 "), "{table}");
        // q1 and q3 rose, q2 fell, q0 and the negative stayed.
        assert!(row("before").ends_with("+0 -0") && row("after").ends_with("+2 -1"), "{table}");
    }
}
