//! Search over an opened bundle: vector, keyword (fielded BM25) and hybrid, with
//! filters, diversity and an optional cross-encoder rerank.
//!
//! Scores by mode: vector is the cosine of the best window of the chunk; keyword is
//! the boosted BM25 sum over fields; hybrid is the fused score (RRF: Σ 1/(60 + rank);
//! score fusion: a weighted sum of min-max-normalised scores, in [0, 1]); rerank is the
//! cross-encoder's logit. `min_score` applies to the mode's own scale.

//!
//! The pipeline is here; the candidates come from `retrieve` (vector, keyword, exact
//! strings), `fusion` merges and diversifies them, `exact` finds the strings a query
//! wants verbatim, `query` its weighted words. What a hit shows is `hit::snippet`'s.

mod confidence;
mod exact;
mod fusion;
mod merge;
mod options;
mod query;
mod retrieve;
mod shape;

pub use crate::hit::{Hit, Link, slug};
pub use confidence::{CALIBRATION, Calibration, KEYWORD_CALIBRATION, Signals, unseen_note};
pub use exact::exact_strings;
pub use fusion::fuse;
pub use merge::{Merged, Skip, Skipped, merge, search_all};
pub use options::{
    DEFAULT_TOP_K, Filters, Fusion, LATER_WINDOW_WEIGHT, MAX_QUERY_BYTES, MAX_TOOL_TOP_K, MAX_TOP_K, Mode,
    NOT_OWN_CODE, SearchOptions, SearchRequest, Tuning,
};
pub use query::query_words;
pub use retrieve::{EXACT_MAX_FILES, MAX_DEFINITIONS};
pub use shape::{Shape, shape};

use std::borrow::Cow;
use std::collections::HashSet;

use crate::bundle::{Bundle, Candidates};
use crate::chunk_table::ChunkKind;
use crate::hit::snippet::passage;
use crate::{Error, Result};
use fusion::{
    diversify, file_evidence, fuse_weighted, keyword_weight, link_boost, mix_kinds, not_own_code, promote, sort_desc,
};
use query::spelling_candidates;

/// Candidates each retriever hands to fusion.
const CANDIDATES: usize = 50;
/// Per type in the rerank pool.
pub const RERANK_POOL_PER_KIND: usize = 15;
/// How many top vector hits Rocchio feedback averages.
const PRF_DEPTH: usize = 3;
/// How many of the first hits a version or size the question names is looked for in
/// (the confidence's `unmatched`).
const UNMATCHED_DEPTH: usize = 5;

/// Hits with the search's confidence that the corpus answers the query.
#[derive(Debug, Clone, PartialEq)]
pub struct Searched {
    pub hits: Vec<Hit>,
    /// Vector and hybrid (reranked or not): the probability that the corpus answers
    /// the query ([`Signals::confidence`]), 1 when a quoted string, an identifier or
    /// a defined name of the query was found verbatim; keyword: the top BM25 score.
    /// `atlas eval` calibrates the threshold below which a question is refused.
    pub confidence: f32,
    /// What the confidence was computed from (vector and hybrid).
    pub signals: Signals,
    /// The question's words, as written, that no chunk holds (vector and hybrid; at
    /// most [`MAX_UNSEEN_WORDS`]): what lowers the confidence most, and what a reader
    /// can put in the library's own words.
    pub unseen_words: Vec<String>,
}

/// The most unseen words a search reports, and the longest (a longer one is not a
/// word a reader rephrases; it is left out).
pub const MAX_UNSEEN_WORDS: usize = 8;
pub const MAX_UNSEEN_WORD_BYTES: usize = 64;

/// What the retrievers found for one query, before the rules that order them.
struct Retrieved {
    vector: Vec<(usize, f32)>,
    keyword: Vec<(usize, f32)>,
    ranked: Vec<(usize, f32)>,
}

/// The search engine over one opened bundle: the [`Bundle`] reads (its chunks, index,
/// vectors and models), the engine ranks. Cheap to make: one per search is fine.
#[derive(Debug, Clone, Copy)]
pub struct Engine<'b> {
    b: &'b Bundle,
}

impl<'b> Engine<'b> {
    pub fn new(bundle: &'b Bundle) -> Engine<'b> {
        Engine { b: bundle }
    }
}

/// A bundle's own entry to its engine (what a caller with one bundle writes).
impl Bundle {
    /// [`Engine::search`] over this bundle.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<Vec<Hit>> {
        Engine::new(self).search(query, opts)
    }

    /// [`Engine::search_scored`] over this bundle.
    pub fn search_scored(&self, query: &str, opts: &SearchOptions) -> Result<Searched> {
        Engine::new(self).search_scored(query, opts)
    }
}

impl Engine<'_> {
    /// Ranked hits for `query`.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<Vec<Hit>> {
        Ok(self.search_scored(query, opts)?.hits)
    }

    /// Ranked hits for `query`, with the search's confidence.
    pub fn search_scored(&self, query: &str, opts: &SearchOptions) -> Result<Searched> {
        self.scored(query, opts, false)
    }

    /// Keyword hits for `query` (whatever `opts.mode` and `opts.rerank` ask), with a
    /// confidence from the keyword evidence alone ([`KEYWORD_CALIBRATION`]: the share
    /// of the question's words no chunk holds, the best keyword score, a version or a
    /// name not covered, an exact find) and the words no chunk holds: how a library
    /// without vectors (built keyword-first, or its model not here) answers a vector
    /// or hybrid search, comparable with the libraries that have them.
    pub fn search_keyword_scored(&self, query: &str, opts: &SearchOptions) -> Result<Searched> {
        let kw = SearchOptions { mode: Mode::Keyword, rerank: false, ..opts.clone() };
        self.scored(query, &kw, true)
    }

    /// [`Engine::search_scored`]; in keyword mode with `evidence`, the keyword-only
    /// confidence instead of the top BM25 score.
    fn scored(&self, query: &str, opts: &SearchOptions, evidence: bool) -> Result<Searched> {
        // A view's hidden files are a filter like any other.
        let masked;
        let opts = match self.b.hidden() {
            Some(h) => {
                masked = SearchOptions {
                    filters: Filters { hidden: Some(h.clone()), ..opts.filters.clone() },
                    ..opts.clone()
                };
                &masked
            }
            None => opts,
        };
        let query = query.trim();
        if query.is_empty() {
            return Err(Error::Query("the query is empty; pass some words to search for".into()));
        }
        if query.len() > MAX_QUERY_BYTES {
            return Err(Error::Query(format!(
                "the query is {} bytes, over the {MAX_QUERY_BYTES}-byte limit; shorten it",
                query.len()
            )));
        }
        if opts.top_k > MAX_TOP_K {
            return Err(Error::Query(format!(
                "top_k {} is over the maximum {MAX_TOP_K}; ask for fewer hits",
                opts.top_k
            )));
        }
        if opts.min_score.is_some_and(|m| !m.is_finite()) {
            return Err(Error::Query("min_score must be a finite number".into()));
        }
        // A filter no chunk passes (code of a docs-only library) answers at once: a
        // graph search under it would walk the whole graph to find nothing.
        if opts.top_k == 0 || (opts.filters.narrows() && !self.b.chunks.iter().any(|c| opts.filters.keep(c))) {
            return Ok(Searched {
                hits: Vec::new(),
                confidence: 0.0,
                signals: Signals { keyword_only: evidence, ..Signals::default() },
                unseen_words: Vec::new(),
            });
        }
        let t = &opts.tuning;
        // The ranking reads the query in the corpus's spelling; definitions and exact
        // strings, as typed.
        let typed = query;
        let respelled = self.in_corpus_spelling(query)?;
        let query = respelled.as_ref();
        let keyword_only = opts.mode == Mode::Keyword && !opts.rerank;
        let qvec = if keyword_only { Vec::new() } else { self.embed_query(query)? };
        let want = (opts.top_k * 4).max(CANDIDATES);
        let (mut ranked, retrieved) = if opts.rerank {
            self.rerank_pool(query, &qvec, opts)?
        } else {
            let r = self.retrieve(query, &qvec, opts, opts.mode, want)?;
            (r.ranked.clone(), r)
        };
        not_own_code(&self.b.chunks, &mut ranked, t.not_own_code);
        // Definitions, then exact strings: a chunk defining a name the query gives, or
        // holding a quoted string, an identifier or the whole query verbatim, goes
        // first in keyword and hybrid mode (grep never loses).
        let mut defines: Vec<(usize, u32)> = Vec::new();
        let mut promoted: Vec<usize> = Vec::new();
        if opts.mode != Mode::Vector && !opts.rerank {
            if t.definitions_first {
                defines = self.definition_matches(typed, &opts.filters);
            }
            promoted = defines.iter().map(|&(c, _)| c).collect();
            for i in self.exact_matches(typed, &opts.filters)? {
                if !promoted.contains(&i) {
                    promoted.push(i);
                }
            }
            if !promoted.is_empty() {
                promote(&mut ranked, &promoted);
            }
        }
        let found_verbatim = !promoted.is_empty();
        diversify(&self.b.chunks, &mut ranked, t.same_file);
        mix_kinds(&self.b.chunks, &mut ranked, t.kind_mix, &promoted, opts.min_score);
        let mut hits = Vec::new();
        let stems = crate::words::stems(typed);
        for &(i, score) in &ranked {
            if opts.min_score.is_some_and(|m| score < m) {
                continue;
            }
            let mut hit = self.b.hit_for(i, score, &stems);
            // A chunk promoted for a definition is labelled by it: a small item
            // merged into a chunk named after its first item (`struct KeyBuilder` in
            // `impl From<Digest> for String`) is what the query asked for. Not against
            // a symbol-kind filter the chunk was kept for.
            if let Some(&(_, d)) = defines.iter().find(|&&(c, _)| c == i)
                && let def = &self.b.symbols.defs[d as usize]
                && opts.filters.symbol_kind.as_ref().is_none_or(|k| *k == def.kind)
            {
                hit.symbol = Some(def.name.clone());
                hit.symbol_kind = Some(def.kind.clone());
            }
            hits.push(hit);
            if hits.len() == opts.top_k {
                break;
            }
        }
        let (confidence, signals, unseen_words) = if keyword_only && !evidence {
            let top = retrieved.keyword.first().map_or(0.0, |x| x.1);
            (top, Signals { exact: found_verbatim, ..Signals::default() }, Vec::new())
        } else {
            let (mut s, unseen) = self.signals(query, &retrieved, opts, found_verbatim)?;
            s.keyword_only = keyword_only;
            (s.confidence(s.calibration()), s, unseen)
        };
        Ok(Searched { hits, confidence, signals, unseen_words })
    }

    /// The candidates of `mode` (hybrid: both lists, fused with the tuning's weights
    /// for the query's shape), with the cluster, file and link rules applied.
    fn retrieve(&self, query: &str, qvec: &[f32], opts: &SearchOptions, mode: Mode, want: usize) -> Result<Retrieved> {
        let t = &opts.tuning;
        let vector = || if mode == Mode::Keyword { Ok(Vec::new()) } else { self.vector_feedback(qvec, opts, want) };
        let keyword = || if mode == Mode::Vector { Ok(Vec::new()) } else { self.keyword(query, &opts.filters, want) };
        let (vector, keyword) = match &self.b.candidates {
            // A database answers both at once: the two statements overlap (on two
            // connections) instead of following each other. Locally both are this
            // process's own CPU work, and requests in flight already fill the cores.
            Candidates::Remote(_) if mode == Mode::Hybrid => std::thread::scope(|s| {
                let v = s.spawn(vector);
                let k = keyword();
                (v.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), k)
            }),
            _ => (vector(), keyword()),
        };
        let (vector, keyword) = (vector?, keyword?);
        let mut ranked = match mode {
            Mode::Vector => vector.clone(),
            Mode::Keyword => keyword.clone(),
            Mode::Hybrid => {
                let shape = shape(query);
                fuse_weighted(&vector, &keyword, t.fusion.unwrap_or(opts.fusion), t, |i| {
                    keyword_weight(t, shape, self.b.chunks[i].kind)
                })
            }
        };
        self.cluster_boost(query, &mut ranked, t.cluster_boost);
        self.test_files(query, &mut ranked, t);
        file_evidence(&self.b.chunks, &mut ranked, t.file_second);
        link_boost(&self.b.chunks, &self.b.by_id, &mut ranked, t.link_from, t.link_boost);
        Ok(Retrieved { vector, keyword, ranked })
    }

    /// Vector candidates, with Rocchio feedback when the tuning asks for it: the
    /// query vector moved towards the mean of its top hits, then searched again.
    /// A remote bundle's vectors stay in the database: no feedback there.
    fn vector_feedback(&self, qvec: &[f32], opts: &SearchOptions, want: usize) -> Result<Vec<(usize, f32)>> {
        let first = self.vector(qvec, opts, want)?;
        let beta = opts.tuning.prf;
        let Candidates::Local { vectors, first_window, .. } = &self.b.candidates else { return Ok(first) };
        if beta <= 0.0 || first.is_empty() {
            return Ok(first);
        }
        let mut q: Vec<f32> = qvec.to_vec();
        let top: Vec<usize> = first.iter().take(PRF_DEPTH).map(|x| x.0).collect();
        for &c in &top {
            let row = first_window[c] as usize;
            for (a, b) in q.iter_mut().zip(vectors.row(row)) {
                *a += beta * b / top.len() as f32;
            }
        }
        let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        q.iter_mut().for_each(|x| *x /= norm);
        // Rank by the moved query, but keep each chunk's cosine to the query itself
        // (what the confidence and `min_score` read).
        let moved = self.vector(&q, opts, want)?;
        let cos: std::collections::HashMap<usize, f32> = first.iter().copied().collect();
        Ok(moved.into_iter().map(|(i, s)| (i, cos.get(&i).copied().unwrap_or(s))).collect())
    }

    /// The confidence model's inputs for a search (vector mode runs the keyword
    /// query too, for its best score), and the question's words no chunk holds, as
    /// written.
    fn signals(&self, query: &str, r: &Retrieved, opts: &SearchOptions, exact: bool) -> Result<(Signals, Vec<String>)> {
        let top_cosine = r.vector.first().map_or(0.0, |x| x.1);
        let best_keyword = if opts.mode == Mode::Vector && !opts.rerank {
            self.keyword(query, &opts.filters, 1)?.first().map_or(0.0, |x| x.1)
        } else {
            r.keyword.first().map_or(0.0, |x| x.1)
        };
        let keyword = best_keyword / (1.0 + self.b.chunks.len() as f32).ln().max(1.0);
        let written = crate::words::stemmed_words(query);
        let words: std::collections::BTreeSet<&String> = written.iter().flat_map(|(_, s)| s).collect();
        let words: Vec<String> = words.into_iter().cloned().collect();
        let unseen = self.unseen_words(&words)?;
        let share = if words.is_empty() { 0.0 } else { unseen.len() as f32 / words.len() as f32 };
        let first = r.ranked.iter().take(UNMATCHED_DEPTH).map(|&(i, _)| self.b.text(i));
        let unmatched = confidence::unmatched_numbers(query, first) || self.unwritten_name(query)?;
        let signals =
            Signals { top_cosine, unseen: share, words: words.len(), keyword, exact, unmatched, keyword_only: false };
        let mut shown: Vec<String> = Vec::new();
        for (word, stems) in &written {
            if shown.len() < MAX_UNSEEN_WORDS
                && word.len() <= MAX_UNSEEN_WORD_BYTES
                && stems.iter().any(|s| unseen.contains(s))
                && !shown.iter().any(|w| w.eq_ignore_ascii_case(word))
            {
                shown.push((*word).to_owned());
            }
        }
        Ok((signals, shown))
    }

    /// The rerank pool: the top code and top docs candidates of hybrid (15 each,
    /// within the filters), scored together by the cross-encoder.
    fn rerank_pool(&self, query: &str, qvec: &[f32], opts: &SearchOptions) -> Result<(Vec<(usize, f32)>, Retrieved)> {
        let reranker = self.b.reranker()?;
        let mut pool = Vec::new();
        let mut all = Retrieved { vector: Vec::new(), keyword: Vec::new(), ranked: Vec::new() };
        for kind in ChunkKind::ALL {
            if opts.filters.kind.is_some_and(|k| k != kind) {
                continue;
            }
            let mut o = opts.clone();
            o.filters.kind = Some(kind);
            let r = self.retrieve(query, qvec, &o, Mode::Hybrid, CANDIDATES)?;
            pool.extend(r.ranked.iter().take(RERANK_POOL_PER_KIND).map(|(i, _)| *i));
            all.vector.extend(r.vector);
            all.keyword.extend(r.keyword);
        }
        sort_desc(&mut all.vector);
        sort_desc(&mut all.keyword);
        let passages: Vec<String> = pool.iter().map(|&i| passage(&self.b.chunks[i], self.b.text(i))).collect();
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        let scores = reranker.score(query, &refs)?;
        let mut out: Vec<(usize, f32)> = pool.into_iter().zip(scores).collect();
        sort_desc(&mut out);
        all.ranked.clone_from(&out);
        Ok((out, all))
    }

    /// `query` in the corpus's spelling: each word that may be a British spelling
    /// ([`spelling_candidates`]) becomes the American form the corpus's chunks hold
    /// more often than the word as typed (`behaviour` → `behavior` in a corpus that
    /// writes `behavior`; as typed where the corpus writes `behaviour` more).
    /// Unchanged when no word may be one.
    fn in_corpus_spelling<'q>(&self, query: &'q str) -> Result<Cow<'q, str>> {
        let words = spelling_candidates(query);
        if words.is_empty() {
            return Ok(Cow::Borrowed(query));
        }
        let stem = |w: &str| crate::words::stems(w).into_iter().next().unwrap_or_else(|| w.to_owned());
        // Each word as typed and each candidate, with its stem: (range, typed, [(candidate, stem)]).
        let words: Vec<_> = words
            .into_iter()
            .map(|(range, candidates)| {
                let typed = stem(&query[range.clone()].to_ascii_lowercase());
                let candidates: Vec<(String, String)> = candidates
                    .into_iter()
                    .map(|c| {
                        let s = stem(&c);
                        (c, s)
                    })
                    .collect();
                (range, typed, candidates)
            })
            .collect();
        let mut stems: Vec<String> =
            words.iter().flat_map(|(_, t, c)| std::iter::once(t).chain(c.iter().map(|x| &x.1))).cloned().collect();
        stems.sort();
        stems.dedup();
        let df = self.doc_freqs(&stems)?;
        let freq = |s: &String| df.get(s).copied().unwrap_or(0);
        let (mut out, mut at) = (String::with_capacity(query.len()), 0);
        for (range, typed, candidates) in &words {
            let best = candidates.iter().map(|(c, s)| (freq(s), c)).max().filter(|&(n, _)| n > freq(typed));
            if let Some((_, best)) = best {
                out.push_str(&query[at..range.start]);
                if query[range.clone()].starts_with(|c: char| c.is_ascii_uppercase()) {
                    out.push_str(&best[..1].to_ascii_uppercase());
                    out.push_str(&best[1..]);
                } else {
                    out.push_str(best);
                }
                at = range.end;
            }
        }
        out.push_str(&query[at..]);
        Ok(Cow::Owned(out))
    }

    /// The query's embedding (with the model's query prefix), through the bundle's
    /// own query model when it ships one.
    fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let q = self.b.embedder()?.embed_query(query)?;
        Ok(match &self.b.query_map {
            Some(m) => m.apply(&q),
            None => q,
        })
    }

    /// A file of tests answers a question about tests, so its chunks take
    /// [`Tuning::test_questions`] then; otherwise the code it tests or the page that
    /// explains it does, and they take [`Tuning::test_files`].
    fn test_files(&self, query: &str, ranked: &mut [(usize, f32)], t: &Tuning) {
        if t.test_files == 1.0 && t.test_questions == 1.0 {
            return;
        }
        let tests: Vec<usize> =
            (0..ranked.len()).filter(|&k| crate::symbols::is_test_path(&self.b.chunks[ranked[k].0].path)).collect();
        // The query is read only when a file of tests is among the candidates.
        if tests.is_empty() {
            return;
        }
        let about_tests = crate::words::stems(query).iter().any(|w| w == "test");
        let factor = if about_tests { t.test_questions } else { t.test_files };
        if factor == 1.0 {
            return;
        }
        for k in tests {
            ranked[k].1 = fusion::scale(ranked[k].1, factor);
        }
        sort_desc(ranked);
    }

    fn cluster_boost(&self, query: &str, ranked: &mut [(usize, f32)], factor: f32) {
        let words: HashSet<String> = query_words(query).into_iter().map(|(w, _)| w.to_lowercase()).collect();
        for (i, s) in ranked.iter_mut() {
            let tags = &self.b.chunks[*i].cluster_tags;
            if !tags.is_empty() && tags.split_whitespace().any(|t| words.contains(&t.to_lowercase())) {
                *s = fusion::scale(*s, factor);
            }
        }
        sort_desc(ranked);
    }
}
