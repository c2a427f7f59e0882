//! Retrieval evaluation over a golden set: `sets.rs` (the format, docs/eval.md, and
//! the sets drawn from a bundle), `metrics.rs` (judging a ranked list, the metrics, the
//! threshold that best separates answerable queries from unanswerable ones) and
//! `report.rs` (a run's report and its drift); here, the run itself.
//!
//! Judged by file: the ranked list is the files of the hits in order of their first
//! hit; an expected file counts at its first position. An expected entry with
//! `symbols` or `lines` counts only when a hit of that file (within the searched
//! depth) has one of the symbols or overlaps the range.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::bundle::Bundle;
use crate::search::SearchRequest;
use crate::search::{Filters, Mode, SearchOptions, Signals, Tuning};
use crate::{Error, Result};

mod metrics;
mod report;
mod sets;

pub use metrics::*;
pub use report::*;
pub use sets::*;

/// The refusal threshold for a bundle that ships no eval: hybrid's confidence (the
/// probability of [`crate::search::CALIBRATION`]) below which a question is taken as
/// not in the corpus. Fitted on the tune halves of the development sets
/// (docs/decisions.md, "Refusal"); `atlas ask`, the web page and the merged search of
/// several libraries read it through [`threshold`].
pub const DEFAULT_THRESHOLD: f32 = 0.25;

/// The refusal threshold for a bundle: the one its shipped eval fitted, when fitted
/// on the confidence model this build computes, else [`DEFAULT_THRESHOLD`].
pub fn threshold(manifest: &crate::manifest::Manifest) -> f32 {
    manifest
        .eval
        .as_ref()
        .filter(|e| e.calibration.as_deref() == Some(crate::search::CALIBRATION.model))
        .and_then(|e| e.threshold)
        .unwrap_or(DEFAULT_THRESHOLD)
}
/// The most queries one golden file may hold.
pub const MAX_QUERIES: usize = 10_000;
/// The largest golden file read, in bytes.
pub const MAX_GOLDEN_BYTES: usize = 16 << 20;
/// The most expected entries one query may list.
pub const MAX_EXPECTED: usize = 100;
/// How deep each query is searched: the metrics cut at k (at most 50), `--explain`
/// says where an expected file landed down to this rank.
pub const DEPTH: usize = 50;
/// The cutoff of MRR and nDCG.
pub const MRR_AT: usize = 10;
/// Where a bundle keeps its shipped golden set and results.
pub const GOLDEN_FILE: &str = "eval/golden.jsonl";
pub const RESULTS_FILE: &str = "eval/results.json";
/// Two figures closer than this are the same figure (float noise across CPUs).
pub const NOISE: f64 = 1e-3;

/// What to evaluate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalOptions {
    pub modes: Vec<Mode>,
    /// Also hybrid reranked by the cross-encoder ([`RERANKED`]).
    pub rerank: bool,
    /// The cutoff of Recall@k, Hit@k and P@k (1 to [`DEPTH`]).
    pub k: usize,
    /// The ranking's knobs (the default unless `atlas eval --tuning` tries others).
    #[serde(default, skip)]
    pub tuning: Tuning,
    /// Filters every query is searched with (`atlas eval --kind code`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub filters: Filters,
}

fn is_default(f: &Filters) -> bool {
    *f == Filters::default()
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            modes: vec![Mode::Keyword, Mode::Vector, Mode::Hybrid],
            rerank: false,
            k: 10,
            tuning: Tuning::default(),
            filters: Filters::default(),
        }
    }
}

/// One search as the evaluation sees it: the judged hits, the confidence, its signals.
pub type Judgement = (Vec<Judged>, f32, Option<Signals>);

/// Runs every query of `golden` in every mode of `opts` over `bundle`.
pub fn evaluate(bundle: &Bundle, golden: &[GoldenQuery], opts: &EvalOptions) -> Result<Report> {
    let name = format!("{}@{}", bundle.manifest.name, bundle.manifest.version);
    evaluate_with(&name, golden, opts, &|query, search| {
        let s = bundle.search_scored(query, search)?;
        let judged = s.hits.iter().map(|h| Judged::of(bundle, h)).collect();
        Ok((judged, s.confidence, (search.mode != Mode::Keyword || search.rerank).then_some(s.signals)))
    })
}

/// Runs every query of `golden` in every mode of `opts` through `search` (one
/// bundle's, or a server's merged search over several); `name` names what was searched.
pub fn evaluate_with(
    name: &str,
    golden: &[GoldenQuery],
    opts: &EvalOptions,
    search: &dyn Fn(&str, &SearchOptions) -> Result<Judgement>,
) -> Result<Report> {
    if !(1..=DEPTH).contains(&opts.k) {
        return Err(Error::Query(format!("k is {}; use 1 to {DEPTH}", opts.k)));
    }
    let mut modes = Vec::new();
    // Each mode as asked, then (with `rerank`) hybrid reranked, side by side.
    let runs = opts.modes.iter().map(|&m| (m, false)).chain(opts.rerank.then_some((Mode::Hybrid, true)));
    for (mode, rerank) in runs {
        let options = SearchRequest {
            mode: Some(mode),
            top_k: Some(DEPTH),
            rerank: Some(rerank),
            tuning: Some(opts.tuning),
            filters: opts.filters.clone(),
            ..SearchRequest::default()
        }
        .options(DEPTH);
        let mut outcomes = Vec::with_capacity(golden.len());
        let mut times = Vec::with_capacity(golden.len());
        for q in golden {
            let t0 = Instant::now();
            let (judged, confidence, signals) = search(&q.query, &options)?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            outcomes.push(judge_with(q, tags_of(q), &judged, opts.k, confidence, signals));
        }
        times.sort_by(f64::total_cmp);
        let p50 = times.get(times.len() / 2).copied();
        let name = if rerank { RERANKED.to_owned() } else { mode.as_str().to_owned() };
        modes.push(summarise(name, outcomes, p50));
    }
    let negatives = golden.iter().filter(|q| q.is_negative()).count();
    Ok(Report { bundle: name.to_owned(), k: opts.k, answerable: golden.len() - negatives, negatives, modes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(path: &str, symbol: Option<&str>, lines: (u32, u32)) -> Judged {
        Judged { path: path.into(), symbols: symbol.iter().map(|s| (*s).to_owned()).collect(), lines }
    }

    fn golden(line: &str) -> GoldenQuery {
        parse_golden(line).unwrap().remove(0)
    }

    /// Worked out by hand: files ranked a, b, a (again), c, d; expected c (grade 2) and
    /// z (missing), and a second query answered at rank 1.
    #[test]
    fn metrics_on_a_tiny_set_match_the_hand_computed_figures() {
        let hits = [
            hit("s/a.md", None, (1, 5)),
            hit("s/b.md", None, (1, 5)),
            hit("s/a.md", None, (6, 9)),
            hit("s/docs/c.md", None, (1, 5)),
            hit("s/d.md", None, (1, 5)),
        ];
        let q = golden(r#"{"query": "q1", "expected": [{"path": "docs/c.md", "grade": 2}, "z.md"]}"#);
        let o = judge(&q, &hits, 3, 0.5);
        // Files: a, b, c, d → c at rank 3.
        assert_eq!(o.rr, 1.0 / 3.0);
        assert_eq!(o.recall5, 0.5); // c of {c, z}
        assert_eq!(o.recall_k, 0.5); // k = 3: c is at 3
        assert_eq!(o.hit_k, 1.0);
        assert_eq!(o.p_k, 1.0 / 3.0);
        // DCG = (2²−1)/log2(4) = 1.5; IDCG = 3/log2(2) + 1/log2(3) = 3.6309…
        let idcg = 3.0 + 1.0 / 3f64.log2();
        assert!((o.ndcg10 - 1.5 / idcg).abs() < 1e-12, "{}", o.ndcg10);
        assert_eq!(o.expected, [("docs/c.md".to_owned(), Some(3)), ("z.md".to_owned(), None)]);
        assert_eq!(o.top.as_deref(), Some("s/a.md"));

        let q2 = golden(r#"{"query": "q2", "expected": ["a.md"], "tags": {"kind": "docs"}}"#);
        let o2 = judge(&q2, &hits, 3, 0.9);
        assert_eq!((o2.rr, o2.recall5, o2.ndcg10, o2.p_k), (1.0, 1.0, 1.0, 1.0 / 3.0));
        let neg = golden(r#"{"query": "q3", "expected": []}"#);
        let o3 = judge(&neg, &hits, 3, 0.2);
        let r = summarise("hybrid".into(), vec![o, o2, o3], None);
        // Means over the two answerable queries; the negative does not count.
        assert_eq!(r.metrics.queries, 2);
        assert!((r.metrics.mrr10 - (1.0 / 3.0 + 1.0) / 2.0).abs() < 1e-12);
        assert_eq!(r.metrics.recall5, 0.75);
        assert_eq!(r.by_tag["kind=docs"].mrr10, 1.0);
        let s = r.negatives.unwrap();
        // Confidences 0.5, 0.9 against 0.2: any threshold in (0.2, 0.5] separates;
        // the middle of the gap is 0.35.
        assert_eq!((s.false_answers, s.false_refusals), (0, 0));
        assert!((s.threshold - 0.35).abs() < 1e-6, "{}", s.threshold);
    }

    /// Two modes, each right on a different query: hindsight takes each query's best,
    /// per half; a lone mode has none.
    #[test]
    fn hindsight_takes_each_querys_best_mode() {
        let hits = [hit("a.md", None, (1, 5)), hit("b.md", None, (1, 5))];
        let q = |text: &str, file: &str, half: &str| {
            golden(&format!(r#"{{"query": "{text}", "expected": ["{file}"], "tags": {{"half": "{half}"}}}}"#))
        };
        let (qa, qb) = (q("qa", "a.md", "tune"), q("qb", "b.md", "test"));
        let neg = golden(r#"{"query": "qn", "expected": []}"#);
        let mode = |name: &str, order: &[Judged]| {
            let outcomes = [&qa, &qb, &neg].iter().map(|g| judge(g, order, 10, 0.5)).collect();
            summarise(name.to_owned(), outcomes, None)
        };
        let reversed = [hits[1].clone(), hits[0].clone()];
        let mut r =
            Report { bundle: "x@1".into(), k: 10, answerable: 2, negatives: 1, modes: vec![mode("keyword", &hits)] };
        assert!(hindsight(&r).is_none());
        r.modes.push(mode("vector", &reversed));
        // Each mode: 1 and 1/2. Hindsight: 1 on both.
        assert_eq!(r.modes[0].metrics.mrr10, 0.75);
        let h = hindsight(&r).unwrap();
        assert_eq!((h.mode.as_str(), h.metrics.queries, h.metrics.mrr10), (HINDSIGHT, 2, 1.0));
        assert_eq!((h.by_tag["half=tune"].mrr10, h.by_tag["half=test"].mrr10), (1.0, 1.0));
        assert!(h.negatives.is_none() && h.refusals.is_empty());
    }

    #[test]
    fn symbols_and_lines_narrow_what_counts() {
        let hits = [hit("r/src/x.rs", Some("Foo::bar"), (10, 20)), hit("r/src/y.rs", Some("baz"), (1, 9))];
        let check = |expected: &str, rank: Option<usize>| {
            let q = golden(&format!(r#"{{"query": "q", "expected": [{expected}]}}"#));
            assert_eq!(judge(&q, &hits, 10, 0.0).expected[0].1, rank, "{expected}");
        };
        check(r#"{"path": "src/x.rs", "symbols": ["bar"]}"#, Some(1));
        check(r#"{"path": "src/x.rs", "symbols": ["Foo::bar"]}"#, Some(1));
        check(r#"{"path": "src/x.rs", "symbols": ["qux"]}"#, None);
        check(r#"{"path": "src/x.rs", "lines": [20, 30]}"#, Some(1));
        check(r#"{"path": "src/x.rs", "lines": [21, 30]}"#, None);
        check(r#"{"path": "x.rs"}"#, Some(1));
        check(r#"{"path": "rc/x.rs"}"#, None); // a tail only at a '/'
        check(r#""src/y.rs""#, Some(2));
    }

    #[test]
    fn bad_golden_lines_are_named() {
        let check = |text: &str, want: &str| {
            let e = parse_golden(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        };
        check("{\"query\": \"q\"}\n{\"query\": 3}", "line 2:");
        check("{\"query\": \"  \"}", "line 1: \"query\" must hold");
        check("{\"query\": \"q\", \"expected\": [{\"path\": \"a\", \"grade\": 0}]}", "grade 0");
        check("{\"query\": \"q\", \"expected\": [{\"path\": \"a\", \"lines\": [5, 2]}]}", "ordered");
        check("{\"query\": \"q\", \"extra\": 1}", "unknown field");
        check("# only a comment\n", "no queries");
        assert_eq!(parse_golden("# c\n\n{\"query\": \"q\"}\n").unwrap().len(), 1);
    }

    #[test]
    fn separation_counts_its_errors_when_the_ranges_overlap() {
        let s = separate(&[0.9, 0.6, 0.4], &[0.5, 0.3]);
        // Best: answer at ≥ 0.55 (one false refusal: 0.4) or ≥ 0.35 (one false answer: 0.5).
        assert_eq!(s.false_answers + s.false_refusals, 1);
        assert_eq!(s.answerable.n, 3);
        assert_eq!(s.negatives.max, 0.5);
    }
}
