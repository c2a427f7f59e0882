//! Judging one query's ranked hits against its expected files, and the metrics over a
//! set: MRR, recall, nDCG, and how well confidence separates answerable questions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Expected, GoldenQuery, MRR_AT, tags_of};
use crate::Bundle;
use crate::Hit;
use crate::search::Signals;

/// What judging needs of a hit: its file, the symbols its chunk defines (its own and,
/// for a chunk that merges small items, theirs), its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub path: String,
    pub symbols: Vec<String>,
    pub lines: (u32, u32),
}

impl Judged {
    /// Whether this hit (of a matching file) satisfies `e`'s symbol and line constraints.
    fn satisfies(&self, e: &Expected) -> bool {
        let symbol_ok = e.symbols.is_empty()
            || self
                .symbols
                .iter()
                .any(|s| e.symbols.iter().any(|w| s == w || s.rsplit(['.', ':']).next() == Some(w.as_str())));
        let lines_ok = e.lines.is_none_or(|[a, b]| self.lines.0 <= b && self.lines.1 >= a);
        symbol_ok && lines_ok
    }

    pub fn of(bundle: &Bundle, hit: &Hit) -> Judged {
        let mut symbols: Vec<String> = hit.symbol.iter().cloned().collect();
        if let Some(&i) = bundle.by_id.get(&hit.chunk_id) {
            symbols.extend(bundle.chunks[i as usize].symbols.iter().cloned());
        }
        Judged { path: hit.path.clone(), symbols, lines: (hit.start_line, hit.end_line) }
    }
}

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

/// Judges one ranked hit list against a query's expected entries.
pub fn judge(q: &GoldenQuery, hits: &[Judged], k: usize, confidence: f32) -> QueryOutcome {
    judge_with(q, tags_of(q), hits, k, confidence, None)
}

pub(super) fn judge_with(
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
        .map(|e| files.iter().position(|f| e.file_matches(f) && hits.iter().any(|h| h.path == *f && h.satisfies(e))))
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
