//! Search over an opened bundle: vector, keyword (fielded BM25) and hybrid, with
//! filters, diversity and an optional cross-encoder rerank.
//!
//! Scores by mode: vector is the cosine of the best window of the chunk; keyword is
//! the boosted BM25 sum over fields; hybrid is the fused score (RRF: Σ 1/(60 + rank);
//! score fusion: a weighted sum of min-max-normalised scores, in [0, 1]); rerank is the
//! cross-encoder's logit. `min_score` applies to the mode's own scale.

pub use crate::hit::{Hit, Link, slug};
use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use tantivy::Term;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::IndexRecordOption;

use crate::bundle::Bundle;
use crate::chunk_table::ChunkRecord;
use crate::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Vector,
    Keyword,
    #[default]
    Hybrid,
}

impl Mode {
    /// The name `FromStr` reads back.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Vector => "vector",
            Mode::Keyword => "keyword",
            Mode::Hybrid => "hybrid",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Mode, String> {
        match s {
            "vector" => Ok(Mode::Vector),
            "keyword" => Ok(Mode::Keyword),
            "hybrid" => Ok(Mode::Hybrid),
            other => Err(format!("unknown mode {other:?}; use vector, keyword or hybrid")),
        }
    }
}

/// How hybrid fuses its two candidate lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// Reciprocal-rank fusion, k = 60: ranks only, scale-free. The default: it beats
    /// score fusion on every measure of the devtron evaluation (see ARCHITECTURE.md).
    #[default]
    Rrf,
    /// Min-max-normalised scores, weighted equally.
    Score,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Filters {
    /// `docs` or `code`.
    pub kind: Option<String>,
    pub section: Option<String>,
    pub language: Option<String>,
    /// Matches the repository URL or its last path segment.
    pub repo: Option<String>,
    /// A prefix of the chunk's file path (`<source>/<path>`).
    pub path_prefix: Option<String>,
    pub symbol_kind: Option<String>,
}

impl Filters {
    pub fn keep(&self, c: &ChunkRecord) -> bool {
        let eq = |want: &Option<String>, got: Option<&str>| want.as_deref().is_none_or(|w| got == Some(w));
        eq(&self.kind, Some(&c.kind))
            && eq(&self.section, Some(&c.section))
            && eq(&self.language, c.language.as_deref())
            && eq(&self.symbol_kind, c.symbol_kind.as_deref())
            && self.path_prefix.as_deref().is_none_or(|p| c.path.starts_with(p))
            && self.repo.as_deref().is_none_or(|r| {
                c.repo.as_deref().is_some_and(|got| got == r || got.trim_end_matches('/').rsplit('/').next() == Some(r))
            })
    }
    fn is_empty(&self) -> bool {
        *self == Filters::default()
    }
}

/// The most hits one search returns.
pub const MAX_TOP_K: usize = 1000;
/// The longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchOptions {
    pub mode: Mode,
    pub top_k: usize,
    pub min_score: Option<f32>,
    pub filters: Filters,
    pub fusion: Fusion,
    /// Rerank a pooled candidate set with the cross-encoder (see [`Bundle::search`]).
    pub rerank: bool,
    /// Only each chunk's first window (what a plain, truncating embedder would give).
    /// For the evaluation of the window policy; not for users.
    #[serde(skip)]
    pub first_window_only: bool,
    /// Weight of a chunk's later windows against its first (the default
    /// [`LATER_WINDOW_WEIGHT`]); for the evaluation.
    #[serde(skip)]
    pub later_window_weight: f32,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            mode: Mode::Hybrid,
            top_k: 5,
            min_score: None,
            filters: Filters::default(),
            fusion: Fusion::default(),
            rerank: false,
            first_window_only: false,
            later_window_weight: LATER_WINDOW_WEIGHT,
        }
    }
}

/// A chunk's later windows count this much against its first: the first window holds
/// the title and the section's opening, and the devtron evaluation ranks better when
/// tails count a little less (see ARCHITECTURE.md, "Long chunks").
pub const LATER_WINDOW_WEIGHT: f32 = 0.9;

/// Candidates each retriever hands to fusion.
const CANDIDATES: usize = 50;
/// Per type in the rerank pool.
pub const RERANK_POOL_PER_KIND: usize = 15;
const RRF_K: f32 = 60.0;
/// Score factor per earlier hit from the same file.
const SAME_FILE_PENALTY: f32 = 0.85;
/// Score factor when a query word names one of the chunk's cluster tags.
const CLUSTER_BOOST: f32 = 1.05;
/// A string found verbatim in more files than this is not promoted (see
/// [`Bundle::exact_matches`]).
pub const EXACT_MAX_FILES: usize = 20;
/// Phrase matches checked for the verbatim string.
const EXACT_CANDIDATES: usize = 200;
/// Weight of a morphological variant against the word the user typed.
const VARIANT_WEIGHT: f32 = 0.6;

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
        for kind in ["code", "docs"] {
            if opts.filters.kind.as_deref().is_some_and(|k| k != kind) {
                continue;
            }
            let mut o = opts.clone();
            o.mode = Mode::Hybrid;
            o.filters.kind = Some(kind.to_owned());
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
    fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        self.embedder()?.embed_query(query)
    }

    pub(crate) fn vector(&self, q: &[f32], opts: &SearchOptions, want: usize) -> Vec<(usize, f32)> {
        let (filters, first_window_only) = (&opts.filters, opts.first_window_only);
        let keep_row = |row: usize| {
            let c = self.window_chunk[row] as usize;
            (!first_window_only || self.first_window[c] == row as u32)
                && (filters.is_empty() || filters.keep(&self.chunks[c]))
        };
        let rows: Vec<(usize, f32)> = match &self.hnsw {
            // Loaded only above the exact-scan threshold (see `open::EXACT_MAX_ROWS`).
            Some(h) => {
                let all = filters.is_empty() && !first_window_only;
                // Windows of one chunk compete for slots: ask for more rows than chunks.
                let k = want * 3;
                if all { h.search(q, k, None) } else { h.search(q, k, Some(&keep_row)) }
            }
            _ => self.vectors.scan(q, want * 3, &keep_row),
        };
        let mut best: HashMap<usize, f32> = HashMap::new();
        for (row, s) in rows {
            let c = self.window_chunk[row] as usize;
            let s = if self.first_window[c] == row as u32 { s } else { s * opts.later_window_weight };
            let e = best.entry(c).or_insert(f32::MIN);
            *e = e.max(s);
        }
        let mut out: Vec<(usize, f32)> = best.into_iter().collect();
        sort_desc(&mut out);
        out.truncate(want);
        out
    }

    /// Keyword candidates: boosted BM25 over the fields, with morphological variants
    /// of plain words (identifiers stay as typed).
    pub(crate) fn keyword(&self, query: &str, filters: &Filters, want: usize) -> Result<Vec<(usize, f32)>> {
        let t = &self.text;
        let words = query_words(query);
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut seen: HashSet<Term> = HashSet::new();
        for (field, _, boost) in &t.fields {
            let mut analyzer = t.index.tokenizer_for_field(*field).map_err(tantivy_err)?;
            for (word, weight) in &words {
                let mut stream = analyzer.token_stream(word);
                while let Some(tok) = stream.next() {
                    let term = Term::from_field_text(*field, &tok.text);
                    if !seen.insert(term.clone()) {
                        continue;
                    }
                    let q = TermQuery::new(term, IndexRecordOption::WithFreqs);
                    should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost * weight))));
                }
            }
        }
        if should.is_empty() {
            return Ok(Vec::new());
        }
        self.run_filtered(Box::new(BooleanQuery::new(should)), filters, want)
    }

    /// Runs `query` within `filters`: the ones the index holds (kind, section,
    /// language) as Must clauses, the others (repo, path prefix, symbol kind) on a
    /// longer candidate list.
    fn run_filtered(&self, query: Box<dyn Query>, filters: &Filters, want: usize) -> Result<Vec<(usize, f32)>> {
        let t = &self.text;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, query)];
        for (field, value) in [(t.kind, &filters.kind), (t.section, &filters.section), (t.language, &filters.language)]
        {
            if let Some(v) = value {
                let q = TermQuery::new(Term::from_field_text(field, v), IndexRecordOption::Basic);
                clauses.push((Occur::Must, Box::new(q)));
            }
        }
        let query = BooleanQuery::new(clauses);
        let searcher = t.reader.searcher();
        let post = filters.repo.is_some() || filters.path_prefix.is_some() || filters.symbol_kind.is_some();
        let limit = if post { want * 20 } else { want };
        let top = searcher.search(&query, &TopDocs::with_limit(limit).order_by_score()).map_err(tantivy_err)?;
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let col = searcher
                .segment_reader(addr.segment_ord)
                .fast_fields()
                .u64("chunk")
                .map_err(tantivy_err)?
                .first(addr.doc_id)
                .unwrap_or(u64::MAX) as usize;
            if let Some(c) = self.chunks.get(col)
                && (!post || filters.keep(c))
            {
                out.push((col, score));
            }
            if out.len() == want {
                break;
            }
        }
        Ok(out)
    }

    /// Chunks that hold one of the query's exact strings ([`exact_strings`]) verbatim
    /// (ASCII case aside, whitespace collapsed, at word boundaries), best first: more
    /// strings matched, then the phrase's BM25. A string inside a longer query counts
    /// when one file holds it (a name that rare is what the user means); a query that
    /// is nothing but the string, when up to [`EXACT_MAX_FILES`] files do. Beyond
    /// that, the string names nothing in particular and is left to the ranking.
    fn exact_matches(&self, query: &str, filters: &Filters) -> Result<Vec<usize>> {
        let t = &self.text;
        let Some(&(field, _, _)) = t.fields.iter().find(|(_, name, _)| *name == "text") else {
            return Ok(Vec::new());
        };
        let mut analyzer = t.index.tokenizer_for_field(field).map_err(tantivy_err)?;
        let mut found: HashMap<usize, (usize, f32)> = HashMap::new();
        // Each candidate chunk's text, normalised once for all the strings.
        let mut normalised: HashMap<usize, String> = HashMap::new();
        for literal in exact_strings(query) {
            let max_files = if is_only_literal(query, &literal) { EXACT_MAX_FILES } else { 1 };
            let Some(q) = phrase(&mut analyzer, field, &literal) else { continue };
            let needle = normalise(&literal);
            let mut files: HashSet<&str> = HashSet::new();
            let mut hits = Vec::new();
            for (i, score) in self.run_filtered(q, filters, EXACT_CANDIDATES)? {
                let text = normalised.entry(i).or_insert_with(|| normalise(self.text(i)));
                if contains_at_boundaries(text, &needle) {
                    files.insert(self.chunks[i].path.as_str());
                    hits.push((i, score));
                }
            }
            if files.len() > max_files {
                continue;
            }
            for (i, score) in hits {
                let e = found.entry(i).or_insert((0, 0.0));
                e.0 += 1;
                e.1 = e.1.max(score);
            }
        }
        let mut out: Vec<(usize, (usize, f32))> = found.into_iter().collect();
        out.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(b.1.1.total_cmp(&a.1.1)).then(a.0.cmp(&b.0)));
        Ok(out.into_iter().map(|(i, _)| i).collect())
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
            kind: c.kind.clone(),
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

fn tantivy_err(e: tantivy::TantivyError) -> Error {
    Error::Query(format!("keyword search: {e}"))
}

fn sort_desc(v: &mut [(usize, f32)]) {
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
}

/// Fuses two ranked lists.
pub fn fuse(vector: &[(usize, f32)], keyword: &[(usize, f32)], fusion: Fusion) -> Vec<(usize, f32)> {
    let mut acc: HashMap<usize, f32> = HashMap::new();
    match fusion {
        Fusion::Rrf => {
            for list in [vector, keyword] {
                for (rank, (i, _)) in list.iter().enumerate() {
                    *acc.entry(*i).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
                }
            }
        }
        Fusion::Score => {
            for list in [vector, keyword] {
                let (lo, hi) = list.iter().fold((f32::MAX, f32::MIN), |(lo, hi), (_, s)| (lo.min(*s), hi.max(*s)));
                let span = hi - lo;
                for (i, s) in list {
                    let n = if span > 1e-9 { (s - lo) / span } else { 1.0 };
                    *acc.entry(*i).or_default() += 0.5 * n;
                }
            }
        }
    }
    let mut out: Vec<(usize, f32)> = acc.into_iter().collect();
    sort_desc(&mut out);
    out
}

/// Diversity: a second section of an already-listed file loses 15 % per earlier hit
/// from that file; the same file and heading again is dropped.
fn diversify(chunks: &[ChunkRecord], ranked: &mut Vec<(usize, f32)>) {
    let mut per_file: HashMap<&str, i32> = HashMap::new();
    let mut seen: HashSet<(&str, String)> = HashSet::new();
    let mut out = Vec::with_capacity(ranked.len());
    for &(i, s) in ranked.iter() {
        let c = &chunks[i];
        if !seen.insert((c.path.as_str(), c.heading_path.join("\u{1f}"))) {
            continue;
        }
        let n = per_file.entry(c.path.as_str()).or_default();
        // Penalties scale the magnitude, whatever the sign of the score.
        let f = SAME_FILE_PENALTY.powi(*n);
        out.push((i, if s >= 0.0 { s * f } else { s / f }));
        *n += 1;
    }
    sort_desc(&mut out);
    *ranked = out;
}

/// `literal` as a query on `field`: a phrase of one term per position (the segment
/// itself, not a dotted path or a part), or a term query for a single position.
fn phrase(
    analyzer: &mut tantivy::tokenizer::TextAnalyzer,
    field: tantivy::schema::Field,
    literal: &str,
) -> Option<Box<dyn Query>> {
    let mut at: Vec<(usize, String)> = Vec::new();
    let mut stream = analyzer.token_stream(literal);
    while let Some(tok) = stream.next() {
        if tok.text.contains('.') || tok.text.contains("::") {
            continue;
        }
        match at.iter_mut().find(|(p, _)| *p == tok.position) {
            Some((_, best)) if best.len() >= tok.text.len() => {}
            Some((_, best)) => *best = tok.text.clone(),
            None => at.push((tok.position, tok.text.clone())),
        }
    }
    let mut terms: Vec<(usize, Term)> = at.into_iter().map(|(p, w)| (p, Term::from_field_text(field, &w))).collect();
    match terms.len() {
        0 => None,
        1 => Some(Box::new(TermQuery::new(terms.remove(0).1, IndexRecordOption::WithFreqs))),
        _ => Some(Box::new(PhraseQuery::new_with_offset(terms))),
    }
}

/// Puts `exact` first, in its order, above everything else; the rest keep theirs.
/// Scores stay on the list's scale: a promoted chunk scores just above the best.
fn promote(ranked: &mut Vec<(usize, f32)>, exact: &[usize]) {
    let top = ranked.first().map_or(0.0, |x| x.1).max(0.0);
    let promoted: HashSet<usize> = exact.iter().copied().collect();
    let n = exact.len() as f32;
    // 10 % above the best, in their order.
    let mut out: Vec<(usize, f32)> =
        exact.iter().enumerate().map(|(k, &i)| (i, top * 1.1 + 1e-3 + (n - k as f32) * 1e-4)).collect();
    out.extend(ranked.iter().copied().filter(|(i, _)| !promoted.contains(i)));
    *ranked = out;
}

/// The strings of a query to find verbatim: quoted strings, identifier-shaped words
/// (`X-Foo-Bar`, `fooBar()`, `a.b.c`, `a::b`, `--flag`, `snake_case`, `camelCase`,
/// `path/to`), a query that is a single word, and a query of four words or more as a
/// whole (a pasted error message). Trailing `()` and sentence punctuation are dropped.
pub fn exact_strings(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let push = |s: &str, out: &mut Vec<String>| {
        let s = s.trim();
        if s.chars().filter(|c| c.is_alphanumeric()).count() >= 2 && !out.iter().any(|x| x == s) {
            out.push(s.to_owned());
        }
    };
    // Quoted: "…", `…`, '…' (a whole quoted span).
    for quote in ['"', '`'] {
        let parts: Vec<&str> = query.split(quote).collect();
        for (k, p) in parts.iter().enumerate() {
            if k % 2 == 1 && k + 1 < parts.len() {
                push(clean_literal(p), &mut out);
            }
        }
    }
    let words: Vec<&str> = query.split_whitespace().map(clean_literal).filter(|w| !w.is_empty()).collect();
    if words.len() == 1 {
        push(words[0], &mut out);
    }
    for w in &words {
        if is_identifier(w) {
            push(w, &mut out);
        }
        // `fooBar()`: the call as written, and the name alone (`fooBar(x)`, `obj.fooBar`).
        if let Some(bare) = w.strip_suffix("()") {
            push(bare, &mut out);
        }
    }
    if words.len() >= 4 && looks_pasted(query) && !query.contains(['"', '`']) {
        let whole = clean_literal(query.trim().trim_end_matches(['?', '.', '!']));
        push(whole, &mut out);
    }
    out
}

/// A query that reads like text copied from somewhere (an error message, a log line,
/// a sentence of the docs) rather than a question typed in: it starts with a capital
/// or holds code punctuation, and does not open with a question word. Typed questions
/// that happen to match a sentence verbatim must not jump the ranking.
fn looks_pasted(query: &str) -> bool {
    let q = query.trim();
    let first = q.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
    const QUESTION: &[&str] = &[
        "how", "what", "why", "where", "when", "which", "who", "can", "could", "does", "do", "is", "are", "should",
        "will", "would", "i",
    ];
    let code = q.chars().any(|c| matches!(c, ':' | ';' | '=' | '/' | '{' | '}' | '[' | ']' | '<' | '>'));
    let capital = q.starts_with(|c: char| c.is_uppercase());
    (capital || code) && !QUESTION.contains(&first.as_str())
}

/// Whether the query is `literal` and nothing else (quoted or not, `()` aside).
fn is_only_literal(query: &str, literal: &str) -> bool {
    let q = clean_literal(query.trim());
    q == literal || q.strip_suffix("()") == Some(literal)
}

/// A word without the quotes, brackets and sentence punctuation around it; a call's
/// `()` stays.
fn clean_literal(w: &str) -> &str {
    let w = w.trim_matches(['"', '`', '\'']);
    let w = w.trim_end_matches([',', ';', ':', '?', '!', '.']);
    let w = w.trim_start_matches(['(', '[', '{', '<']);
    if w.ends_with("()") {
        return w;
    }
    w.trim_end_matches([')', ']', '}', '>', ',', ';', ':', '?', '!', '.'])
}

/// Identifier-shaped: a flag, a path (`a.b`, `a::b`, `a/b`), `snake_case`, a humped
/// `camelCase`, or a hyphenated name with a capital (`X-Foo-Bar`; lowercase
/// hyphenated English such as `on-device` is prose).
fn is_identifier(w: &str) -> bool {
    let chars: Vec<char> = w.chars().collect();
    if chars.len() < 3 {
        return false;
    }
    let inner = |sep: char| {
        chars.windows(3).any(|x| x[1] == sep && x[0].is_alphanumeric() && (x[2].is_alphanumeric() || x[2] == '_'))
    };
    let flag = w.starts_with('-') && chars.iter().find(|c| **c != '-').is_some_and(|c| c.is_alphabetic());
    let hump = chars.windows(2).any(|x| x[0].is_lowercase() && x[1].is_uppercase());
    let capital = chars.iter().any(|c| c.is_uppercase());
    flag || w.contains("::")
        || inner('.')
        || inner('/')
        || (inner('_') || w.starts_with('_'))
        || hump
        || (inner('-') && capital)
}

/// Lowercase (ASCII), markdown escapes dropped, whitespace collapsed.
fn normalise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c == '\\' {
            continue;
        }
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// `needle` in `hay`, not inside a longer word at either end.
fn contains_at_boundaries(hay: &str, needle: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let (first, last) = (needle.chars().next(), needle.chars().last());
    hay.match_indices(needle).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + needle.len()..].chars().next();
        let cut_before = word(first) && word(before);
        let cut_after = word(last) && word(after);
        !cut_before && !cut_after
    })
}

/// The query's words with weights: each as typed (1.0), plus morphological variants
/// of plain lowercase words (asset ↔ assets, create ↔ creating). Identifiers
/// (camelCase, snake_case, paths, digits) are left as typed. English function words
/// ("how", "do", "I", "the", …) are dropped unless the query is nothing else: they
/// match every page and drown the words that matter (keyword MRR@10 on the devtron
/// set 0.378 → 0.441, Recall@5 0.380 → 0.609).
pub fn query_words(query: &str) -> Vec<(String, f32)> {
    let raw: Vec<&str> = query
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '?' | '!' | '"' | '\'' | '(' | ')'))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let is_stop = |w: &str| STOPWORDS.contains(&w.to_ascii_lowercase().as_str());
    let all_stop = raw.iter().all(|w| is_stop(w));
    let mut out: Vec<(String, f32)> = Vec::new();
    let push = |w: String, weight: f32, out: &mut Vec<(String, f32)>| {
        if !w.is_empty() && !out.iter().any(|(x, _)| *x == w) {
            out.push((w, weight));
        }
    };
    for w in raw {
        if !all_stop && is_stop(w) {
            continue;
        }
        push(w.to_owned(), 1.0, &mut out);
        let plain = w.chars().all(|c| c.is_ascii_alphabetic()) && w.chars().skip(1).all(|c| c.is_ascii_lowercase());
        if plain && w.len() > 2 {
            for v in variants(&w.to_ascii_lowercase()) {
                push(v, VARIANT_WEIGHT, &mut out);
            }
        }
    }
    out
}

/// Function words dropped from keyword queries (see [`query_words`]).
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "in", "is", "it",
    "its", "me", "my", "of", "on", "or", "so", "that", "the", "this", "to", "was", "we", "what", "when", "where",
    "which", "who", "why", "will", "with", "you", "your",
];

/// English inflections of a plain word: plural ↔ singular, -ing ↔ base.
pub fn variants(w: &str) -> Vec<String> {
    let mut v = Vec::new();
    let vowel = |c: char| "aeiou".contains(c);
    if let Some(stem) = w.strip_suffix("ies") {
        v.push(format!("{stem}y"));
    } else if let Some(stem) =
        w.strip_suffix("es").filter(|s| ["s", "x", "z", "ch", "sh"].iter().any(|e| s.ends_with(e)))
    {
        v.push(stem.to_owned());
    } else if let Some(stem) = w.strip_suffix('s').filter(|s| !s.ends_with('s') && s.len() > 2) {
        v.push(stem.to_owned());
    } else if let Some(stem) = w.strip_suffix("ing").filter(|s| s.len() > 2) {
        let b = stem.as_bytes();
        if b.len() > 2 && b[b.len() - 1] == b[b.len() - 2] && !vowel(b[b.len() - 1] as char) {
            v.push(stem[..stem.len() - 1].to_owned()); // running → run
        }
        v.push(format!("{stem}e")); // creating → create
        v.push(stem.to_owned()); // deploying → deploy
    } else if let Some(stem) = w.strip_suffix("ed").filter(|s| s.len() > 2) {
        v.push(stem.to_owned());
        v.push(format!("{stem}e"));
    } else {
        if let Some(stem) = w.strip_suffix('y').filter(|s| s.ends_with(|c: char| !vowel(c))) {
            v.push(format!("{stem}ies"));
        } else if ["s", "x", "z", "ch", "sh"].iter().any(|e| w.ends_with(e)) {
            v.push(format!("{w}es"));
        } else {
            v.push(format!("{w}s"));
        }
        match w.strip_suffix('e') {
            Some(stem) => v.push(format!("{stem}ing")),
            None => v.push(format!("{w}ing")),
        }
    }
    v
}

/// What the cross-encoder reads for a chunk: its title, heading path and text.
fn passage(c: &ChunkRecord, text: &str) -> String {
    let body = text.get(c.overlap_chars as usize..).unwrap_or(text);
    let heading = c.heading_path.join(" > ");
    format!("{} | {heading}\n{body}", c.title)
}

const SNIPPET_CHARS: usize = 300;

/// The chunk's own text (overlap skipped), cut at a character boundary.
fn snippet(c: &ChunkRecord, text: &str) -> String {
    let body = text.get(c.overlap_chars as usize..).unwrap_or(text).trim();
    match body.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", body[..cut].trim_end()),
        None => body.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_cover_plurals_and_gerunds() {
        let check = |w: &str, want: &[&str]| assert_eq!(variants(w), want, "{w}");
        check("asset", &["assets", "asseting"]);
        check("assets", &["asset"]);
        check("creating", &["create", "creat"]);
        check("create", &["creates", "creating"]);
        check("policies", &["policy"]);
        check("policy", &["policies", "policying"]);
        check("running", &["run", "runne", "runn"]);
        check("indexes", &["index"]);
    }

    #[test]
    fn function_words_are_dropped_unless_they_are_all_there_is() {
        let words = |q: &str| -> Vec<String> { query_words(q).into_iter().map(|w| w.0).collect() };
        assert_eq!(words("How do I roll back?"), ["roll", "rolls", "rolling", "back", "backs", "backing"]);
        assert_eq!(words("how to"), ["how", "hows", "howing", "to"]);
    }

    #[test]
    fn identifiers_get_no_variants() {
        let words: Vec<String> =
            query_words("getAssets snake_case Foo::bar v2 assets").into_iter().map(|w| w.0).collect();
        assert_eq!(words, ["getAssets", "snake_case", "Foo::bar", "v2", "assets", "asset"]);
    }

    #[test]
    fn exact_strings_keep_identifiers_whole() {
        let check = |q: &str, want: &[&str]| assert_eq!(exact_strings(q), want, "{q}");
        check("X-InApp-Auth", &["X-InApp-Auth"]);
        check("what does clearCurrentBeacon() do", &["clearCurrentBeacon()", "clearCurrentBeacon"]);
        check("set lifecycle.sessionTimeout, please", &["lifecycle.sessionTimeout"]);
        check("call Self::insert_with_clear_key", &["Self::insert_with_clear_key"]);
        check("pip --extra-index-url", &["--extra-index-url"]);
        check("store attributes in the on-device profile", &[]);
        check("the `node_to_cut_name` argument", &["node_to_cut_name"]);
        check("\"not properly initialized\" error", &["not properly initialized"]);
        // A pasted message is taken whole; a typed question is not.
        check("The server key was not properly initialized.", &["The server key was not properly initialized"]);
        check("send an experience event to the Edge Network", &[]);
        check("How do I send an event to the Edge Network?", &[]);
    }

    #[test]
    fn literals_match_at_word_boundaries() {
        assert!(contains_at_boundaries("call foo.bar() now", "foo.bar()"));
        assert!(!contains_at_boundaries("x-inapp-auth-token", "x-inapp-auth-tok"));
        assert!(contains_at_boundaries("--extra-index-url https://x", "--extra-index-url"));
        assert!(!contains_at_boundaries("my_node_to_cut_name", "node_to_cut_name"));
        assert_eq!(normalise("Not  \\_properly\n  initialized"), "not _properly initialized");
    }

    #[test]
    fn headings_slug_as_the_sites_do() {
        let check = |h: &str, want: &str| assert_eq!(slug(h), want, "{h}");
        check("Getting started", "getting-started");
        check("GET /apps", "get-apps");
        check("With Helm (v3+)", "with-helm-v3");
        check("snake_case & kebab-case", "snake_case--kebab-case");
        check("Über Größe", "über-größe");
        check("  Trim  me ", "trim--me");
    }

    #[test]
    fn web_pages_are_cited_by_anchor_files_by_lines() {
        let hit = |kind: &str, url: Option<&str>, heading: &[&str]| Hit {
            path: "site/guides/install.md".into(),
            url: url.map(str::to_owned),
            title: "Install".into(),
            heading_path: heading.iter().map(|h| (*h).to_owned()).collect(),
            start_line: 3,
            end_line: 9,
            kind: kind.into(),
            ..Hit::default()
        };
        let page = Some("https://docs.x.test/guides/install");
        assert_eq!(
            hit("docs", page, &["Install", "With Helm"]).citation(),
            "https://docs.x.test/guides/install#with-helm"
        );
        assert_eq!(hit("docs", page, &["Install"]).citation(), "https://docs.x.test/guides/install");
        assert_eq!(hit("docs", None, &["Install", "With Helm"]).citation(), "site/guides/install.md#L3-L9");
        let blob = Some("https://github.com/o/r/blob/abc/net/retry.rs");
        assert_eq!(hit("code", blob, &[]).citation(), "https://github.com/o/r/blob/abc/net/retry.rs#L3-L9");
    }

    #[test]
    fn rrf_and_score_fusion_reward_agreement() {
        let v = [(1, 0.9), (2, 0.8), (3, 0.1)];
        let k = [(2, 12.0), (4, 11.0), (1, 1.0)];
        for f in [Fusion::Rrf, Fusion::Score] {
            let fused = fuse(&v, &k, f);
            assert_eq!(fused[0].0, 2, "{f:?}: {fused:?}");
            assert_eq!(fused.len(), 4);
        }
    }
}
