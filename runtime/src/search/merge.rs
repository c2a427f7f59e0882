//! Several libraries searched as one: each bundle's [`Engine`], then one relevance
//! order ([`merge`]), with a typed list of the libraries left out. A library that
//! fails, even by a panic, is left out with its reason; the others answer. A library
//! without vectors answers by keyword with a keyword-only confidence and competes on
//! it (`merge`'s tests, tests/it/libraries.rs).

use std::sync::Arc;

use super::{CALIBRATION, Engine, Mode, SearchOptions, Searched};
use crate::bundle::Bundle;
use crate::hit::Hit;
use crate::{Error, Result};

/// A library a merged search left out, or searched by keyword only, and why.
#[derive(Debug)]
pub struct Skipped {
    /// Which of the bundles given (its index), and its `name@version`.
    pub index: usize,
    pub library: String,
    pub why: Skip,
}

/// Why a library was left out of a merged search.
#[derive(Debug, thiserror::Error)]
pub enum Skip {
    /// Its model could not be used here (missing, or not this bundle's, or no vectors
    /// yet): searched by keyword only. Its hits are in the merge with a keyword-only
    /// confidence ([`super::KEYWORD_CALIBRATION`]).
    #[error("searched by keyword only ({0})")]
    KeywordOnly(Error),
    /// Its search failed: not searched.
    #[error("not searched: {0}")]
    Failed(Error),
    /// Its search panicked: not searched.
    #[error("not searched: it failed inside the server")]
    Panicked,
}

/// A merged search: the hits in one order with the best library's confidence, and
/// the libraries left out.
#[derive(Debug)]
pub struct Merged {
    pub searched: Searched,
    pub skipped: Vec<Skipped>,
}

/// `query` over each of `bundles`, merged fairly ([`merge`]). A query the engine
/// refuses (empty, too long) is the error; a library that fails is [`Skipped`]; when
/// none answers, [`Error::NoneSearched`] holds each one's reason.
pub fn search_all(bundles: &[Arc<Bundle>], query: &str, opts: &SearchOptions) -> Result<Merged> {
    let mut each = Vec::with_capacity(bundles.len());
    let mut skipped = Vec::new();
    for (index, b) in bundles.iter().enumerate() {
        let engine = Engine::new(b);
        let skip = |why| Skipped { index, library: b.library(), why };
        let searched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.search_scored(query, opts)));
        match searched {
            Ok(Ok(s)) => each.push(s),
            // No vectors or no model here (or not this bundle's): keyword results with
            // a confidence from the keyword evidence, and why.
            Ok(Err(why @ Error::Model(_))) if opts.mode != Mode::Keyword => {
                match engine.search_keyword_scored(query, opts) {
                    Ok(s) => {
                        each.push(s);
                        skipped.push(skip(Skip::KeywordOnly(why)));
                    }
                    Err(e) => skipped.push(skip(Skip::Failed(e))),
                }
            }
            Ok(Err(e @ Error::Query(_))) => return Err(e),
            Ok(Err(e)) => skipped.push(skip(Skip::Failed(e))),
            Err(_) => skipped.push(skip(Skip::Panicked)),
        }
    }
    if each.is_empty() {
        return Err(Error::NoneSearched(skipped));
    }
    Ok(Merged { searched: merge(each, opts.top_k, opts.mode, opts.tuning.library_sharpness), skipped })
}

/// Merges each library's ranked hits into `top_k`.
///
/// In vector and hybrid mode the hits form one relevance order, built from each
/// library's confidence as log-odds ([`super::Signals::logit`]: the calibrated model's
/// over the nearest chunk's cosine, which every library of one model shares a scale
/// for, and the question's words the library has never seen; a library searched by
/// keyword only reads its keyword evidence with [`super::KEYWORD_CALIBRATION`]). A
/// library's weight is `exp(−s · gap)`, the gap being how far its log-odds are behind
/// the best library's, in cosine units (`s`: [`super::Tuning::library_sharpness`]; a
/// library that found a name or a quoted string verbatim leads). A hit's merge score
/// is its library's weight times its score relative to that library's first hit, so
/// the right library's second hit beats another library's weak first. Keyword scores
/// (BM25) differ per corpus and come without a cosine: there the libraries take turns,
/// the most confident first. The merged confidence is the best library's; its words
/// no chunk holds are those no library's chunk holds.
pub fn merge(mut each: Vec<Searched>, top_k: usize, mode: Mode, sharpness: f32) -> Searched {
    if each.len() == 1 {
        return each.pop().unwrap_or_else(empty);
    }
    let best = each.iter().max_by(|a, b| a.confidence.total_cmp(&b.confidence));
    let (confidence, signals, mut unseen_words) =
        best.map_or((0.0, Default::default(), Vec::new()), |s| (s.confidence, s.signals, s.unseen_words.clone()));
    // A word is unseen only where no library's chunk holds it.
    unseen_words.retain(|w| each.iter().all(|s| s.unseen_words.iter().any(|u| u.eq_ignore_ascii_case(w))));
    let mut hits: Vec<Hit> = Vec::with_capacity(top_k);
    if mode != Mode::Keyword {
        let nearest = |s: &Searched| s.signals.logit(s.signals.calibration()) / CALIBRATION.top_cosine;
        let lead = each.iter().map(nearest).fold(f32::MIN, f32::max);
        let mut scored: Vec<(f32, usize, &Hit)> = Vec::new();
        for s in &each {
            let weight = (-sharpness * (lead - nearest(s))).exp();
            for (rank, h) in s.hits.iter().enumerate() {
                scored.push((weight * relative(&s.hits, rank), rank, h));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        hits.extend(scored.into_iter().take(top_k).map(|(_, _, h)| h.clone()));
        return Searched { hits, confidence, signals, unseen_words };
    }
    each.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    let longest = each.iter().map(|s| s.hits.len()).max().unwrap_or(0);
    'turns: for rank in 0..longest {
        for s in &each {
            if hits.len() == top_k {
                break 'turns;
            }
            if let Some(h) = s.hits.get(rank) {
                hits.push(h.clone());
            }
        }
    }
    Searched { hits, confidence, signals, unseen_words }
}

fn empty() -> Searched {
    Searched { hits: Vec::new(), confidence: 0.0, signals: Default::default(), unseen_words: Vec::new() }
}

/// How a library's hit at `rank` compares with its first: the ratio of their scores
/// (both positive), else a decay by rank (a reranker's logits can be negative).
fn relative(hits: &[Hit], rank: usize) -> f32 {
    let top = hits.first().map_or(0.0, |h| h.score);
    let s = hits[rank].score;
    if top > 0.0 && s > 0.0 { (s / top).min(1.0) } else { 1.0 / (1.0 + 0.1 * rank as f32) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::Signals;

    fn hit(lib: &str, n: usize) -> Hit {
        Hit { library: lib.into(), chunk_id: format!("{lib}-{n}"), ..Hit::default() }
    }

    fn searched(lib: &str, scores: &[f32], top_cosine: f32) -> Searched {
        let hits = scores.iter().enumerate().map(|(i, &score)| Hit { score, ..hit(lib, i) }).collect();
        let signals = Signals { top_cosine, words: 3, ..Default::default() };
        Searched { hits, confidence: top_cosine, signals, unseen_words: Vec::new() }
    }

    fn ids(s: &Searched) -> Vec<String> {
        s.hits.iter().map(|h| h.chunk_id.clone()).collect()
    }

    #[test]
    fn a_weak_first_hit_of_one_library_never_outranks_a_strong_second_hit_of_another() {
        // a is nearer (0.80 against 0.72, no unseen words: the log-odds gap in cosine
        // units is 0.08): b weighs exp(−20 · 0.08) = 0.20 of a, so
        // b's first (0.20 × 1) ranks after a's second (0.97) and third (0.93), and
        // after a's fourth at half of a's first.
        let a = searched("a", &[0.030, 0.029, 0.028, 0.015], 0.80);
        let b = searched("b", &[0.031, 0.020], 0.72);
        let m = merge(vec![b, a], 5, Mode::Hybrid, 20.0);
        assert_eq!(ids(&m), ["a-0", "a-1", "a-2", "a-3", "b-0"]);
        assert_eq!(m.confidence, 0.80);
        // Two libraries as near as each other interleave by their hits' own scores.
        let m = merge(vec![searched("a", &[0.9, 0.5], 0.8), searched("b", &[0.9, 0.8], 0.8)], 4, Mode::Vector, 20.0);
        assert_eq!(ids(&m), ["a-0", "b-0", "b-1", "a-1"]);
    }

    #[test]
    fn a_keyword_only_library_competes_on_its_keyword_evidence() {
        let mut a = searched("a", &[0.9, 0.8, 0.7, 0.6], 0.55);
        a.unseen_words = vec!["sirv".to_owned(), "frobnicate".to_owned()];
        // Every word held, a strong keyword score: its keyword-only confidence leads
        // a library whose nearest chunk is far.
        let signals = Signals { keyword: 3.0, words: 3, keyword_only: true, ..Default::default() };
        let confidence = signals.confidence(signals.calibration());
        assert!(confidence > 0.5, "{confidence}");
        let hits = vec![Hit { score: 9.0, ..hit("k", 0) }, Hit { score: 4.0, ..hit("k", 1) }];
        let k = Searched { hits, confidence, signals, unseen_words: vec!["frobnicate".to_owned()] };
        let m = merge(vec![a, k], 4, Mode::Hybrid, 20.0);
        assert_eq!(m.hits[0].chunk_id, "k-0");
        assert!(m.signals.keyword_only && m.confidence == confidence);
        // A word one library holds is not reported as held by no chunk.
        assert_eq!(m.unseen_words, ["frobnicate"]);
        // Without any keyword evidence it stays behind a near library.
        let none = Signals { words: 3, unseen: 1.0, keyword_only: true, ..Default::default() };
        let hits = vec![Hit { score: 1.0, ..hit("k", 0) }];
        let k =
            Searched { hits, confidence: none.confidence(none.calibration()), signals: none, unseen_words: Vec::new() };
        let m = merge(vec![searched("a", &[0.9], 0.8), k], 2, Mode::Hybrid, 20.0);
        assert_eq!(ids(&m), ["a-0", "k-0"]);
    }

    #[test]
    fn a_library_that_found_the_name_leads_and_keyword_takes_turns() {
        let mut named = searched("a", &[0.5, 0.4], 0.3);
        named.signals.exact = true;
        let m = merge(vec![searched("b", &[0.9, 0.9], 0.7), named], 3, Mode::Hybrid, 20.0);
        assert_eq!(ids(&m), ["a-0", "a-1", "b-0"]);
        // Keyword confidence (BM25) is not comparable: turns only, the surer first.
        let m = merge(vec![searched("a", &[5.0, 4.0], 0.2), searched("b", &[9.0, 1.0], 9.0)], 4, Mode::Keyword, 20.0);
        assert_eq!(ids(&m), ["b-0", "a-0", "b-1", "a-1"]);
    }
}
