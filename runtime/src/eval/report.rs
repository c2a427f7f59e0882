//! An evaluation's report: each mode's figures and refusals, the best-per-query row,
//! and where a rerun drifted from the stored one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    DEFAULT_THRESHOLD, EvalOptions, GOLDEN_FILE, Metrics, NOISE, QueryOutcome, RESULTS_FILE, Separation, average,
    separate,
};

/// The name of the reranked hybrid row.
pub const RERANKED: &str = "hybrid+rerank";

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
