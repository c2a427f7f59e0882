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
}

pub fn run(dir: &Path, open: OpenOptions, args: Args) -> anyhow::Result<()> {
    let b = Bundle::open(dir, open).with_context(|| format!("opening the bundle {}", dir.display()))?;
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
    let text = String::from_utf8(read(&golden_path)?)
        .map_err(|_| UsageError(format!("{} is not UTF-8 text", golden_path.display())))?;
    let golden = eval::parse_golden(&text).map_err(|e| UsageError(format!("{}: {e}", golden_path.display())))?;
    let report = eval::evaluate(&b, &golden, &opts)?;
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
    if let Some(stored) = stored {
        let drift = eval::drift(&stored, &report);
        if !drift.is_empty() {
            anyhow::bail!(
                "the shipped eval no longer gives the figures stored at pack time ({}); the index, the model or \
                 the search changed",
                drift.join("; ")
            );
        }
        print("shipped eval: every figure matches the one stored at pack time\n")?;
    }
    if let Some(min) = args.min_mrr {
        gate(&report, min)?;
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
    let _ = writeln!(s, "{}: {} answerable queries, {} negatives, k = {}", r.bundle, r.answerable, r.negatives, r.k);
    let header = |s: &mut String, first: &str| {
        let _ = write!(s, "{first:<28}");
        for (name, _) in eval::Metrics::default().figures(r.k) {
            let _ = write!(s, " {name:>8}");
        }
        let _ = writeln!(s, " {:>7}", "p50 ms");
    };
    header(&mut s, "mode");
    for m in &r.modes {
        let _ = write!(s, "{:<28}", m.mode);
        for (_, v) in m.metrics.figures(r.k) {
            let _ = write!(s, " {v:>8.3}");
        }
        let _ = writeln!(s, " {:>7}", m.p50_ms.map_or("-".to_owned(), |t| format!("{t:.1}")));
    }
    let tags: Vec<&String> = r.modes.first().map(|m| m.by_tag.keys().collect()).unwrap_or_default();
    if !tags.is_empty() {
        let _ = writeln!(s, "\nper tag (MRR@10 / R@5):");
        let _ = write!(s, "{:<28}", "tag");
        for m in &r.modes {
            let _ = write!(s, " {:>16}", m.mode);
        }
        s.push('\n');
        for t in tags {
            let n = r.modes[0].by_tag[t].queries;
            let _ = write!(s, "{:<28}", format!("{t} ({n})"));
            for m in &r.modes {
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
                "{:<16} threshold {:.3}: {} of {} negatives answered, {} of {} answerable refused",
                "", n.threshold, n.false_answers, n.negatives.n, n.false_refusals, n.answerable.n
            );
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
