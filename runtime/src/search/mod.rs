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
//! wants verbatim, `query` its weighted words, `snippet` what a hit shows.

mod exact;
mod fusion;
mod options;
mod query;
mod retrieve;
mod snippet;

pub use crate::hit::{Hit, Link, slug};
pub use exact::exact_strings;
pub use fusion::fuse;
pub use options::{Filters, Fusion, LATER_WINDOW_WEIGHT, MAX_QUERY_BYTES, MAX_TOP_K, Mode, SearchOptions};
pub use query::query_words;
pub use retrieve::EXACT_MAX_FILES;

use std::collections::HashSet;

use crate::bundle::Bundle;
use crate::chunk_table::ChunkKind;
use crate::{Error, Result};
use fusion::{diversify, promote, sort_desc};
use snippet::{passage, snippet};

/// Candidates each retriever hands to fusion.
const CANDIDATES: usize = 50;
/// Per type in the rerank pool.
pub const RERANK_POOL_PER_KIND: usize = 15;
/// Score factor when a query word names one of the chunk's cluster tags.
const CLUSTER_BOOST: f32 = 1.05;

/// Hits with the search's confidence that the corpus answers the query.
#[derive(Debug, Clone, PartialEq)]
pub struct Searched {
    pub hits: Vec<Hit>,
    /// Vector and hybrid (reranked or not): the cosine of the query's nearest chunk
    /// within the filters, raised to 1 when a quoted string or identifier of the query
    /// occurs verbatim in a hit; keyword: the top BM25 score. `atlas eval` calibrates
    /// the threshold below which a question is not in the corpus.
    pub confidence: f32,
}

impl Bundle {
    /// Ranked hits for `query`.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<Vec<Hit>> {
        Ok(self.search_scored(query, opts)?.hits)
    }

    /// Ranked hits for `query`, with the search's confidence.
    pub fn search_scored(&self, query: &str, opts: &SearchOptions) -> Result<Searched> {
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
        if opts.top_k == 0 {
            return Ok(Searched { hits: Vec::new(), confidence: 0.0 });
        }
        let qvec = if opts.mode == Mode::Keyword && !opts.rerank { Vec::new() } else { self.embed_query(query)? };
        let (mut ranked, mut confidence) = if opts.rerank {
            self.rerank_pool(query, &qvec, opts)?
        } else {
            let want = (opts.top_k * 4).max(CANDIDATES);
            let (mut r, confidence) = self.ranked(query, &qvec, opts, want)?;
            self.cluster_boost(query, &mut r);
            (r, confidence)
        };
        // Exact strings: a chunk holding a quoted string, an identifier or the whole
        // query verbatim goes first in keyword and hybrid mode (grep never loses).
        if opts.mode != Mode::Vector && !opts.rerank {
            let exact = self.exact_matches(query, &opts.filters)?;
            if !exact.is_empty() {
                promote(&mut ranked, &exact);
                if opts.mode == Mode::Hybrid {
                    confidence = confidence.max(1.0);
                }
            }
        }
        diversify(&self.chunks, &mut ranked);
        let mut hits = Vec::new();
        for (i, score) in ranked {
            if opts.min_score.is_some_and(|m| score < m) {
                continue;
            }
            hits.push(self.hit(i, score));
            if hits.len() == opts.top_k {
                break;
            }
        }
        Ok(Searched { hits, confidence })
    }

    /// Chunk indexes with scores, best first, before diversity, and the confidence.
    /// `qvec` is the query's embedding, computed once per search by the caller when
    /// the mode needs it.
    fn ranked(&self, query: &str, qvec: &[f32], opts: &SearchOptions, want: usize) -> Result<(Vec<(usize, f32)>, f32)> {
        let top = |l: &[(usize, f32)]| l.first().map_or(0.0, |x| x.1);
        Ok(match opts.mode {
            Mode::Vector => {
                let v = self.vector(qvec, opts, want);
                let c = top(&v);
                (v, c)
            }
            Mode::Keyword => {
                let k = self.keyword(query, &opts.filters, want)?;
                let c = top(&k);
                (k, c)
            }
            Mode::Hybrid => {
                let v = self.vector(qvec, opts, want);
                let k = self.keyword(query, &opts.filters, want)?;
                (fuse(&v, &k, opts.fusion), top(&v))
            }
        })
    }

    /// The rerank pool: the top code and docs candidates of hybrid (15 each, within
    /// the filters), scored together by the cross-encoder.
    fn rerank_pool(&self, query: &str, qvec: &[f32], opts: &SearchOptions) -> Result<(Vec<(usize, f32)>, f32)> {
        let reranker = self.reranker()?;
        let mut pool = Vec::new();
        let mut confidence = 0f32;
        for kind in ChunkKind::ALL {
            if opts.filters.kind.is_some_and(|k| k != kind) {
                continue;
            }
            let mut o = opts.clone();
            o.mode = Mode::Hybrid;
            o.filters.kind = Some(kind);
            let (mut r, c) = self.ranked(query, qvec, &o, CANDIDATES)?;
            confidence = confidence.max(c);
            self.cluster_boost(query, &mut r);
            pool.extend(r.into_iter().take(RERANK_POOL_PER_KIND).map(|(i, _)| i));
        }
        let passages: Vec<String> = pool.iter().map(|&i| passage(&self.chunks[i], self.text(i))).collect();
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        let scores = reranker.score(query, &refs)?;
        let mut out: Vec<(usize, f32)> = pool.into_iter().zip(scores).collect();
        sort_desc(&mut out);
        Ok((out, confidence))
    }

    /// Vector candidates: the best window per chunk, exact f16 scan up to the
    /// threshold, HNSW above it.
    /// The query's embedding (with the model's query prefix).
    /// The query's embedding (with the model's query prefix).
    fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        self.embedder()?.embed_query(query)
    }

    fn cluster_boost(&self, query: &str, ranked: &mut [(usize, f32)]) {
        let words: HashSet<String> = query_words(query).into_iter().map(|(w, _)| w.to_lowercase()).collect();
        for (i, s) in ranked.iter_mut() {
            let tags = &self.chunks[*i].cluster_tags;
            if !tags.is_empty() && tags.split_whitespace().any(|t| words.contains(&t.to_lowercase())) {
                *s *= CLUSTER_BOOST;
            }
        }
        sort_desc(ranked);
    }

    pub(crate) fn hit(&self, i: usize, score: f32) -> Hit {
        let c = &self.chunks[i];
        let mentioned_in = c
            .mentioned_in
            .iter()
            .filter_map(|id| self.by_id.get(id))
            .map(|&j| {
                let d = &self.chunks[j as usize];
                Link { chunk_id: d.chunk_id.clone(), path: d.path.clone(), heading: d.heading_path.join(" > ") }
            })
            .collect();
        Hit {
            score,
            chunk_id: c.chunk_id.clone(),
            library: self.library(),
            path: c.path.clone(),
            url: c.url.clone(),
            title: c.title.clone(),
            heading_path: c.heading_path.clone(),
            start_line: c.start_line,
            end_line: c.end_line,
            snippet: snippet(c, self.text(i)),
            kind: c.kind,
            language: c.language.clone(),
            section: c.section.clone(),
            repo: c.repo.clone(),
            commit: c.commit.clone(),
            symbol: c.symbol.clone(),
            symbol_kind: c.symbol_kind.clone(),
            mentions: c.mentions.clone(),
            mentioned_in,
        }
    }
}
