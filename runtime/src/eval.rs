//! Retrieval evaluation over a golden set: the format (docs/eval.md), the metrics, and
//! the threshold that best separates answerable queries from unanswerable ones.
//!
//! Judged by file: the ranked list is the files of the hits in order of their first
//! hit; an expected file counts at its first position. An expected entry with
//! `symbols` or `lines` counts only when a hit of that file (within the searched
//! depth) has one of the symbols or overlaps the range.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::bundle::Bundle;
use crate::hit::Hit;
use crate::search::{Filters, MAX_QUERY_BYTES, Mode, SearchOptions, Signals, Tuning};
use crate::{Error, Result};

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

/// One line of a golden file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldenQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub query: String,
    /// Empty: a negative (the corpus does not answer it).
    #[serde(default)]
    pub expected: Vec<Expected>,
    /// Free tags (`kind`, `target`, …); metrics are also given per `key=value`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

impl GoldenQuery {
    pub fn is_negative(&self) -> bool {
        self.expected.is_empty()
    }
}

/// An expected file: a bare path, or an object with a grade, symbols or lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "ExpectedRepr")]
pub struct Expected {
    /// The file, as the bundle names it (`<source>/<path>`) or any tail of that path
    /// at a `/` (`docs/guide.md` matches `site/docs/guide.md`).
    pub path: String,
    /// 1 (helps) to 3 (the answer); nDCG gains are 2^grade − 1.
    pub grade: u32,
    /// Any of these symbols (a qualified name or its last segment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<String>,
    /// A line range the hit must overlap, inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<[u32; 2]>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ExpectedRepr {
    Path(String),
    Full {
        path: String,
        #[serde(default = "one")]
        grade: u32,
        #[serde(default)]
        symbols: Vec<String>,
        #[serde(default)]
        lines: Option<[u32; 2]>,
    },
}

fn one() -> u32 {
    1
}

impl From<ExpectedRepr> for Expected {
    fn from(r: ExpectedRepr) -> Expected {
        match r {
            ExpectedRepr::Path(path) => Expected { path, grade: 1, symbols: Vec::new(), lines: None },
            ExpectedRepr::Full { path, grade, symbols, lines } => Expected { path, grade, symbols, lines },
        }
    }
}

impl Expected {
    /// Whether `path` (a hit's, `<source>/<path>`) is this expected file.
    pub fn file_matches(&self, path: &str) -> bool {
        let want = self.path.trim_start_matches('/');
        path == want || path.strip_suffix(want).is_some_and(|head| head.ends_with('/'))
    }
    /// Whether `hit` (of a matching file) satisfies the symbol and line constraints.
    fn hit_matches(&self, hit: &Judged) -> bool {
        let symbol_ok = self.symbols.is_empty()
            || hit
                .symbols
                .iter()
                .any(|s| self.symbols.iter().any(|w| s == w || s.rsplit(['.', ':']).next() == Some(w.as_str())));
        let lines_ok = self.lines.is_none_or(|[a, b]| hit.lines.0 <= b && hit.lines.1 >= a);
        symbol_ok && lines_ok
    }
}

/// What judging needs of a hit: its file, the symbols its chunk defines (its own and,
/// for a chunk that merges small items, theirs), its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub path: String,
    pub symbols: Vec<String>,
    pub lines: (u32, u32),
}

impl Judged {
    pub fn of(bundle: &Bundle, hit: &Hit) -> Judged {
        let mut symbols: Vec<String> = hit.symbol.iter().cloned().collect();
        if let Some(&i) = bundle.by_id.get(&hit.chunk_id) {
            symbols.extend(bundle.chunks[i as usize].symbols.iter().cloned());
        }
        Judged { path: hit.path.clone(), symbols, lines: (hit.start_line, hit.end_line) }
    }
}

/// Parses a golden file (JSON Lines; blank lines and lines starting with `#` are
/// skipped). Errors name the line.
pub fn parse_golden(text: &str) -> Result<Vec<GoldenQuery>> {
    if text.len() > MAX_GOLDEN_BYTES {
        return Err(golden_err(0, format!("the file is over {} MiB; split it", MAX_GOLDEN_BYTES >> 20)));
    }
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = n + 1;
        if out.len() == MAX_QUERIES {
            return Err(golden_err(n, format!("more than {MAX_QUERIES} queries; split the file")));
        }
        let q: GoldenQuery = serde_json::from_str(line).map_err(|e| golden_err(n, format!("{e}")))?;
        let query = q.query.trim();
        if query.is_empty() || query.len() > MAX_QUERY_BYTES {
            return Err(golden_err(n, format!("\"query\" must hold 1 to {MAX_QUERY_BYTES} bytes")));
        }
        if q.expected.len() > MAX_EXPECTED {
            return Err(golden_err(n, format!("more than {MAX_EXPECTED} expected files")));
        }
        for e in &q.expected {
            if e.path.trim().is_empty() {
                return Err(golden_err(n, "an expected path is empty".into()));
            }
            if !(1..=3).contains(&e.grade) {
                return Err(golden_err(n, format!("grade {} of {:?} must be 1, 2 or 3", e.grade, e.path)));
            }
            if let Some([a, b]) = e.lines
                && (a == 0 || a > b)
            {
                return Err(golden_err(n, format!("lines [{a}, {b}] of {:?} must be 1-based and ordered", e.path)));
            }
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err(golden_err(0, "no queries; write one JSON object per line".into()));
    }
    Ok(out)
}

fn golden_err(line: usize, msg: String) -> Error {
    Error::Golden(if line == 0 { msg } else { format!("line {line}: {msg}") })
}

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

/// The half of a development set a query belongs to: `tune` (changes are fitted on
/// it) or `test` (they are judged on it). Fixed by a seeded hash of the query text, so
/// a query keeps its half as a set grows and every tool splits the same way.
pub fn half(query: &str) -> &'static str {
    let h = crate::hash::Blake3::new().update(format!("atlas-eval-split/1\0{}", query.trim()).as_bytes()).bytes();
    if h[0] & 1 == 0 { "tune" } else { "test" }
}

/// The tags a query is judged under: its own, plus `half` ([`half`]) and `shape`
/// ([`crate::search::shape`]) unless the golden line sets them.
pub fn tags_of(q: &GoldenQuery) -> BTreeMap<String, String> {
    let mut t = q.tags.clone();
    t.entry("half".into()).or_insert_with(|| half(&q.query).to_owned());
    t.entry("shape".into()).or_insert_with(|| crate::search::shape(&q.query).as_str().to_owned());
    t
}

/// The name of the reranked hybrid row.
pub const RERANKED: &str = "hybrid+rerank";

/// Averages over the answerable queries of a set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub queries: usize,
    pub mrr10: f64,
    pub ndcg10: f64,
    pub recall5: f64,
    pub recall_k: f64,
    pub hit_k: f64,
    pub p_k: f64,
}

impl Metrics {
    /// `(name, value)` of each figure, for printing and comparing.
    pub fn figures(&self, k: usize) -> [(String, f64); 6] {
        [
            ("MRR@10".into(), self.mrr10),
            ("nDCG@10".into(), self.ndcg10),
            ("R@5".into(), self.recall5),
            (format!("R@{k}"), self.recall_k),
            (format!("Hit@{k}"), self.hit_k),
            (format!("P@{k}"), self.p_k),
        ]
    }
}

/// One query in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryOutcome {
    pub query: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    pub negative: bool,
    pub rr: f64,
    pub ndcg10: f64,
    pub recall5: f64,
    pub recall_k: f64,
    pub hit_k: f64,
    pub p_k: f64,
    /// The search's confidence ([`crate::search::Searched::confidence`]).
    pub confidence: f32,
    /// What the confidence was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<Signals>,
    /// The first file ranked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<String>,
    /// Each expected path with its 1-based rank among files (none: not in the top [`DEPTH`] hits).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected: Vec<(String, Option<usize>)>,
}

/// Five-number summary of a set of scores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub min: f32,
    pub p25: f32,
    pub p50: f32,
    pub p75: f32,
    pub max: f32,
}

impl Spread {
    fn of(mut v: Vec<f32>) -> Spread {
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f32::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Spread { n: v.len(), min: v[0], p25: at(0.25), p50: at(0.5), p75: at(0.75), max: v[v.len() - 1] }
    }
}

/// How well the search's confidence tells answerable queries from unanswerable ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Separation {
    pub answerable: Spread,
    pub negatives: Spread,
    /// Answer when the confidence is at least this; refuse below.
    pub threshold: f32,
    /// Negatives at or above the threshold.
    pub false_answers: usize,
    /// Answerable queries below it.
    pub false_refusals: usize,
}

/// The threshold with the fewest errors (ties: the widest gap, then its middle).
pub fn separate(answerable: &[f32], negatives: &[f32]) -> Separation {
    let mut all: Vec<f32> = answerable.iter().chain(negatives).copied().collect();
    all.sort_by(f32::total_cmp);
    all.dedup();
    // Candidates: below everything, between each pair of neighbours, above everything.
    let mut candidates = vec![all.first().map_or(0.0, |v| v - 1e-3)];
    candidates.extend(all.windows(2).map(|w| (w[0] + w[1]) / 2.0));
    candidates.push(all.last().map_or(0.0, |v| v + 1e-3));
    let errors = |t: f32| {
        let fa = negatives.iter().filter(|&&s| s >= t).count();
        let fr = answerable.iter().filter(|&&s| s < t).count();
        (fa, fr)
    };
    let gap = |t: f32| all.iter().map(|v| (v - t).abs()).fold(f32::MAX, f32::min);
    let mut best = candidates[0];
    for &t in &candidates {
        let (e, b) = (errors(t), errors(best));
        if e.0 + e.1 < b.0 + b.1 || (e.0 + e.1 == b.0 + b.1 && gap(t) > gap(best)) {
            best = t;
        }
    }
    let (false_answers, false_refusals) = errors(best);
    Separation {
        answerable: Spread::of(answerable.to_vec()),
        negatives: Spread::of(negatives.to_vec()),
        threshold: best,
        false_answers,
        false_refusals,
    }
}

/// Refusals at a fixed threshold: what a user of `atlas ask` would see.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Refusals {
    pub threshold: f32,
    pub negatives: usize,
    /// Negatives at or above the threshold (answered though the corpus cannot).
    pub false_answers: usize,
    pub answerable: usize,
    /// Answerable queries below it (refused though the corpus answers).
    pub false_refusals: usize,
}

impl Refusals {
    fn at(threshold: f32, outcomes: &[&QueryOutcome]) -> Refusals {
        let neg: Vec<_> = outcomes.iter().filter(|o| o.negative).collect();
        let pos: Vec<_> = outcomes.iter().filter(|o| !o.negative).collect();
        Refusals {
            threshold,
            negatives: neg.len(),
            false_answers: neg.iter().filter(|o| o.confidence >= threshold).count(),
            answerable: pos.len(),
            false_refusals: pos.iter().filter(|o| o.confidence < threshold).count(),
        }
    }
}

/// One mode's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeReport {
    /// `keyword`, `vector`, `hybrid`, or [`RERANKED`].
    pub mode: String,
    pub metrics: Metrics,
    /// Per `key=value` tag.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_tag: BTreeMap<String, Metrics>,
    /// Present when the set has both answerable queries and negatives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negatives: Option<Separation>,
    /// Refusals at the threshold Atlas ships ([`DEFAULT_THRESHOLD`]), over the whole
    /// set (`all`) and each half; vector and hybrid, when the set has negatives.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refusals: BTreeMap<String, Refusals>,
    /// Median search time, informational (never compared; not stored in a bundle, whose
    /// files stay byte-identical for equal inputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    pub queries: Vec<QueryOutcome>,
}

/// An evaluation: what `atlas eval --json` writes and the bundle stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `name@version` of the bundle.
    pub bundle: String,
    pub k: usize,
    pub answerable: usize,
    pub negatives: usize,
    pub modes: Vec<ModeReport>,
}

impl Report {
    pub fn mode(&self, name: &str) -> Option<&ModeReport> {
        self.modes.iter().find(|m| m.mode == name)
    }
    /// The manifest's `eval` block for this report.
    pub fn info(&self) -> crate::manifest::EvalInfo {
        use crate::manifest::{EvalInfo, EvalSummary};
        EvalInfo {
            golden: GOLDEN_FILE.to_owned(),
            results: RESULTS_FILE.to_owned(),
            answerable: self.answerable,
            negatives: self.negatives,
            summary: self
                .modes
                .iter()
                .map(|m| (m.mode.clone(), EvalSummary { mrr10: m.metrics.mrr10, recall5: m.metrics.recall5 }))
                .collect(),
            threshold: self.mode("hybrid").and_then(|m| m.negatives).map(|s| s.threshold),
            calibration: Some(crate::search::CALIBRATION.model.to_owned()),
        }
    }
    /// The options that produced it (to rerun it).
    pub fn options(&self) -> EvalOptions {
        let modes = self.modes.iter().filter_map(|m| m.mode.parse().ok()).collect();
        EvalOptions { modes, rerank: self.mode(RERANKED).is_some(), k: self.k, ..EvalOptions::default() }
    }
}

/// Judges one ranked hit list against a query's expected entries.
pub fn judge(q: &GoldenQuery, hits: &[Judged], k: usize, confidence: f32) -> QueryOutcome {
    judge_with(q, tags_of(q), hits, k, confidence, None)
}

fn judge_with(
    q: &GoldenQuery,
    tags: BTreeMap<String, String>,
    hits: &[Judged],
    k: usize,
    confidence: f32,
    signals: Option<Signals>,
) -> QueryOutcome {
    let mut files: Vec<&str> = Vec::new();
    for h in hits {
        if !files.contains(&h.path.as_str()) {
            files.push(&h.path);
        }
    }
    // Each expected entry's 0-based rank among files.
    let ranks: Vec<Option<usize>> = q
        .expected
        .iter()
        .map(|e| files.iter().position(|f| e.file_matches(f) && hits.iter().any(|h| h.path == *f && e.hit_matches(h))))
        .collect();
    let mut gains = vec![0u32; files.len()];
    for (e, r) in q.expected.iter().zip(&ranks) {
        if let Some(r) = r {
            gains[*r] = gains[*r].max(e.grade);
        }
    }
    let n = q.expected.len().max(1) as f64;
    let within = |c: usize| ranks.iter().filter(|r| r.is_some_and(|r| r < c)).count() as f64;
    let first = ranks.iter().flatten().min().copied();
    let dcg = |g: &mut dyn Iterator<Item = u32>| -> f64 {
        g.take(MRR_AT).enumerate().map(|(i, g)| (2f64.powi(g as i32) - 1.0) / (i as f64 + 2.0).log2()).sum()
    };
    let mut ideal: Vec<u32> = q.expected.iter().map(|e| e.grade).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg = dcg(&mut ideal.into_iter());
    QueryOutcome {
        query: q.query.clone(),
        tags,
        negative: q.is_negative(),
        rr: first.filter(|&r| r < MRR_AT).map_or(0.0, |r| 1.0 / (r as f64 + 1.0)),
        ndcg10: if idcg > 0.0 { dcg(&mut gains.iter().copied()) / idcg } else { 0.0 },
        recall5: within(5) / n,
        recall_k: within(k) / n,
        hit_k: if first.is_some_and(|r| r < k) { 1.0 } else { 0.0 },
        p_k: gains.iter().take(k).filter(|&&g| g > 0).count() as f64 / k as f64,
        confidence,
        signals,
        top: files.first().map(|f| (*f).to_owned()),
        expected: q.expected.iter().zip(&ranks).map(|(e, r)| (e.path.clone(), r.map(|r| r + 1))).collect(),
    }
}

/// Averages of the answerable outcomes among `outcomes`.
pub fn average<'a>(outcomes: impl Iterator<Item = &'a QueryOutcome>) -> Metrics {
    let mut m = Metrics::default();
    for o in outcomes.filter(|o| !o.negative) {
        m.queries += 1;
        m.mrr10 += o.rr;
        m.ndcg10 += o.ndcg10;
        m.recall5 += o.recall5;
        m.recall_k += o.recall_k;
        m.hit_k += o.hit_k;
        m.p_k += o.p_k;
    }
    if m.queries > 0 {
        let n = m.queries as f64;
        for v in [&mut m.mrr10, &mut m.ndcg10, &mut m.recall5, &mut m.recall_k, &mut m.hit_k, &mut m.p_k] {
            *v /= n;
        }
    }
    m
}

/// The name of [`hindsight`]'s row.
pub const HINDSIGHT: &str = "best per query";

/// What a perfect choice of mode per query would reach: each answerable query's best
/// figure over the report's modes, chosen in hindsight. Routing between the modes
/// cannot pass it, and fusion only by ranking an answer above where every mode
/// ranks it: when hybrid is close to it, gains must come from the lists themselves.
/// None with fewer than two modes.
pub fn hindsight(r: &Report) -> Option<ModeReport> {
    let (first, rest) = r.modes.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let best: Vec<QueryOutcome> = first
        .queries
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let mut b = q.clone();
            for o in rest.iter().filter_map(|m| m.queries.get(i)).filter(|o| o.query == q.query) {
                for (x, y) in [
                    (&mut b.rr, o.rr),
                    (&mut b.ndcg10, o.ndcg10),
                    (&mut b.recall5, o.recall5),
                    (&mut b.recall_k, o.recall_k),
                    (&mut b.hit_k, o.hit_k),
                    (&mut b.p_k, o.p_k),
                ] {
                    *x = x.max(y);
                }
            }
            b
        })
        .collect();
    let mut m = summarise(HINDSIGHT.to_owned(), best, None);
    m.negatives = None;
    m.refusals.clear();
    Some(m)
}

/// A mode's report from its per-query outcomes.
pub fn summarise(mode: String, queries: Vec<QueryOutcome>, p50_ms: Option<f64>) -> ModeReport {
    let metrics = average(queries.iter());
    let mut tags: BTreeMap<String, Vec<&QueryOutcome>> = BTreeMap::new();
    for o in &queries {
        for (key, v) in &o.tags {
            tags.entry(format!("{key}={v}")).or_default().push(o);
        }
    }
    let by_tag = tags.into_iter().map(|(t, os)| (t, average(os.into_iter()))).filter(|(_, m)| m.queries > 0).collect();
    let conf = |neg: bool| -> Vec<f32> { queries.iter().filter(|o| o.negative == neg).map(|o| o.confidence).collect() };
    let (pos, neg) = (conf(false), conf(true));
    let negatives = (!pos.is_empty() && !neg.is_empty()).then(|| separate(&pos, &neg));
    let mut refusals = BTreeMap::new();
    if negatives.is_some() && mode != "keyword" {
        let all: Vec<&QueryOutcome> = queries.iter().collect();
        refusals.insert("all".to_owned(), Refusals::at(DEFAULT_THRESHOLD, &all));
        for h in ["tune", "test"] {
            let part: Vec<&QueryOutcome> =
                all.iter().copied().filter(|o| o.tags.get("half").is_some_and(|x| x == h)).collect();
            if !part.is_empty() {
                refusals.insert(h.to_owned(), Refusals::at(DEFAULT_THRESHOLD, &part));
            }
        }
    }
    ModeReport { mode, metrics, by_tag, negatives, refusals, p50_ms, queries }
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
        let options = SearchOptions {
            mode,
            top_k: DEPTH,
            rerank,
            tuning: opts.tuning,
            filters: opts.filters.clone(),
            ..SearchOptions::default()
        };
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

/// A symbol-lookup set drawn from a bundle's own definitions: `n` names that one
/// definition holds (4 characters or more), sampled with a fixed seed, each asked the
/// way a user pastes it, in turn: bare (`numpy_erf`), as a call (`numpy_erf()`),
/// qualified as the code qualifies it (`ServerKey::new`, `Foo.bar`), and qualified the
/// other way or by module (`ServerKey.new`, `compile.compile_torch_model`). A query
/// counts when a hit of its defining file holds the definition's first line.
pub fn symbol_set(table: &crate::symbols::SymbolTable, n: usize, seed: u64) -> Vec<GoldenQuery> {
    use crate::symbols::segments;
    let mut once: Vec<&crate::symbols::Definition> =
        table.defs.iter().filter(|d| d.kind != "impl" && d.short().len() >= 4 && table.count(d.short()) == 1).collect();
    once.sort_by(|a, b| (&a.name, &a.path).cmp(&(&b.name, &b.path)));
    // A seeded Fisher–Yates (xorshift64*), so the set is the same on every machine.
    let mut x = seed.max(1);
    let mut next = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for i in (1..once.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        once.swap(i, j);
    }
    once.into_iter()
        .take(n)
        .enumerate()
        .map(|(i, d)| {
            let segs = segments(&d.name);
            let callable = matches!(d.kind.as_str(), "function" | "method");
            let (form, query) = match i % 4 {
                0 => ("bare", d.short().to_owned()),
                1 if callable => ("call", format!("{}()", d.short())),
                2 if segs.len() > 1 => ("qualified", d.name.trim_end_matches('!').to_owned()),
                3 if segs.len() > 1 => {
                    let other = if d.name.contains("::") { segs.join(".") } else { segs.join("::") };
                    ("qualified-other", other)
                }
                _ => {
                    // Qualified by the file's module: `compile.compile_torch_model`.
                    let stem = d.path.rsplit('/').next().and_then(|f| f.rsplit_once('.')).map_or("", |(s, _)| s);
                    let sep = if d.language == "rust" { "::" } else { "." };
                    if stem.is_empty() || matches!(stem, "mod" | "__init__" | "lib" | "main" | "index") {
                        ("bare", d.short().to_owned())
                    } else {
                        ("module", format!("{stem}{sep}{}", d.short()))
                    }
                }
            };
            GoldenQuery {
                id: None,
                query,
                expected: vec![Expected {
                    path: d.path.clone(),
                    grade: 3,
                    symbols: Vec::new(),
                    lines: Some([d.start_line, d.start_line]),
                }],
                tags: BTreeMap::from([("form".to_owned(), form.to_owned()), ("kind".to_owned(), d.kind.clone())]),
            }
        })
        .collect()
}

/// Where a rerun differs from the stored report beyond [`NOISE`]: one line each.
pub fn drift(stored: &Report, now: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for old in &stored.modes {
        let Some(new) = now.mode(&old.mode) else {
            out.push(format!("{}: not rerun", old.mode));
            continue;
        };
        for ((name, a), (_, b)) in old.metrics.figures(stored.k).iter().zip(new.metrics.figures(now.k)) {
            if (a - b).abs() > NOISE {
                out.push(format!("{} {name}: stored {a:.3}, now {b:.3}", old.mode));
            }
        }
        for (a, b) in old.queries.iter().zip(&new.queries) {
            if a.query == b.query && (a.rr - b.rr).abs() > NOISE {
                out.push(format!("{} {:?}: reciprocal rank stored {:.3}, now {:.3}", old.mode, a.query, a.rr, b.rr));
            }
        }
    }
    out
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
