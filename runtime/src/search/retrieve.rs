//! The candidate generators: vector (best window per chunk), keyword (boosted BM25
//! over the fields) and the chunks that hold a query's exact strings.

use std::collections::{HashMap, HashSet};

use tantivy::Term;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::IndexRecordOption;

use super::Engine;
use super::exact::{contains_at_boundaries, exact_strings, is_only_literal, normalise};
use super::fusion::sort_desc;
use super::query::query_words;
use super::{Filters, SearchOptions};
use crate::bundle::{Candidates, EXACT_MAX_ROWS};
use crate::remote::WeightedTerm;
use crate::{Error, Result};

/// A string found verbatim in more files than this is not promoted (see
/// [`Engine::exact_matches`]).
pub const EXACT_MAX_FILES: usize = 20;
/// A name with more definitions than this names nothing in particular: its
/// definitions are not promoted (see [`Engine::definition_matches`]).
pub const MAX_DEFINITIONS: usize = 3;
/// Phrase matches checked for the verbatim string.
const EXACT_CANDIDATES: usize = 200;
/// Phrase matches checked for a pair of a name's words ([`Engine::unwritten_name`]).
const NAME_CANDIDATES: usize = 20;
/// Chunks a database offers as holding a name's two words, each checked verbatim: not
/// ranked, and not only where the words are a phrase, so all of them but in a
/// pathological corpus.
const PAIR_CANDIDATES: usize = 20_000;
/// The same for an exact string's words (checked until the string is too common).
const STRING_CANDIDATES: usize = 5_000;

impl Engine<'_> {
    /// Vector candidates: the best window per chunk, exact f16 scan up to the
    /// threshold, HNSW above it.
    pub(crate) fn vector(&self, q: &[f32], opts: &SearchOptions, want: usize) -> Result<Vec<(usize, f32)>> {
        let (filters, later) = (&opts.filters, opts.tuning.later_window_weight);
        let first_window_only = later <= 0.0;
        // (chunk, first window?, cosine) of the nearest windows.
        let near: Vec<(usize, bool, f32)> = match &self.b.candidates {
            Candidates::Local { vectors, hnsw, window_chunk, first_window, .. } => {
                let keep_row = |row: usize| {
                    let c = window_chunk[row] as usize;
                    (!first_window_only || first_window[c] == row as u32)
                        && (filters.is_empty() || filters.keep(&self.b.chunks[c]))
                };
                let rows: Vec<(usize, f32)> = match hnsw {
                    // Loaded only above the exact-scan threshold (see `open::EXACT_MAX_ROWS`).
                    Some(h) => {
                        // Windows of one chunk compete for slots: ask for more rows than chunks.
                        let k = want * 3;
                        if filters.is_empty() && !first_window_only {
                            h.search(q, k, None)
                        } else if (filters.narrows() || first_window_only)
                            && (0..window_chunk.len()).filter(|&r| keep_row(r)).nth(EXACT_MAX_ROWS).is_none()
                        {
                            // A filter that keeps few rows: scanning them beats a graph
                            // walk that passes over every row it rejects.
                            vectors.scan(q, k, &keep_row)
                        } else {
                            h.search(q, k, Some(&keep_row))
                        }
                    }
                    _ => vectors.scan(q, want * 3, &keep_row),
                };
                rows.into_iter()
                    .map(|(row, s)| {
                        let c = window_chunk[row] as usize;
                        (c, first_window[c] == row as u32, s)
                    })
                    .collect()
            }
            Candidates::Remote(r) => r
                .nearest(q, filters, first_window_only, want * 3)?
                .into_iter()
                .filter(|n| (n.chunk as usize) < self.b.chunks.len())
                .map(|n| (n.chunk as usize, n.first, n.cosine))
                .collect(),
        };
        let mut best: HashMap<usize, f32> = HashMap::new();
        for (c, first, s) in near {
            let s = if first { s } else { s * later };
            let e = best.entry(c).or_insert(f32::MIN);
            *e = e.max(s);
        }
        let mut out: Vec<(usize, f32)> = best.into_iter().collect();
        sort_desc(&mut out);
        out.truncate(want);
        Ok(out)
    }

    /// Keyword candidates: boosted BM25 over the fields, with morphological variants
    /// of plain words (identifiers stay as typed).
    pub(crate) fn keyword(&self, query: &str, filters: &Filters, want: usize) -> Result<Vec<(usize, f32)>> {
        let t = &self.b.text;
        let words = query_words(query);
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut remote: Vec<WeightedTerm> = Vec::new();
        let mut seen: HashSet<Term> = HashSet::new();
        for (field, name, boost) in &t.fields {
            let mut analyzer = t.index.tokenizer_for_field(*field).map_err(tantivy_err)?;
            for (word, weight) in &words {
                let mut stream = analyzer.token_stream(word);
                while let Some(tok) = stream.next() {
                    let term = Term::from_field_text(*field, &tok.text);
                    if !seen.insert(term.clone()) {
                        continue;
                    }
                    remote.push(WeightedTerm { field: name, term: tok.text.clone(), weight: boost * weight });
                    let q = TermQuery::new(term, IndexRecordOption::WithFreqs);
                    should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost * weight))));
                }
            }
        }
        if should.is_empty() {
            return Ok(Vec::new());
        }
        if let Candidates::Remote(r) = &self.b.candidates {
            let mut out = r.bm25(&remote, filters, want)?;
            out.retain(|&(i, _)| i < self.b.chunks.len());
            return Ok(out);
        }
        self.run_filtered(Box::new(BooleanQuery::new(should)), filters, want)
    }

    /// Runs `query` within `filters`: the ones the index holds (kind, section,
    /// language) as Must clauses, the others (repo, path prefix, symbol kind) on a
    /// longer candidate list.
    fn run_filtered(&self, query: Box<dyn Query>, filters: &Filters, want: usize) -> Result<Vec<(usize, f32)>> {
        let t = &self.b.text;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, query)];
        let kind = filters.kind.map(|k| k.as_str().to_owned());
        for (field, value) in [(t.kind, &kind), (t.section, &filters.section), (t.language, &filters.language)] {
            if let Some(v) = value {
                let q = TermQuery::new(Term::from_field_text(field, v), IndexRecordOption::Basic);
                clauses.push((Occur::Must, Box::new(q)));
            }
        }
        let query = BooleanQuery::new(clauses);
        let searcher = t.reader.searcher();
        let post = filters.repo.is_some()
            || filters.path_prefix.is_some()
            || filters.symbol_kind.is_some()
            || filters.hidden.is_some();
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
            if let Some(c) = self.b.chunks.get(col)
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

    /// The index's `text` field and its analyzer, for phrase queries (none in an
    /// index without one).
    fn text_field(&self) -> Result<Option<(tantivy::schema::Field, tantivy::tokenizer::TextAnalyzer)>> {
        let t = &self.b.text;
        let Some(&(field, _, _)) = t.fields.iter().find(|(_, name, _)| *name == "text") else {
            return Ok(None);
        };
        Ok(Some((field, t.index.tokenizer_for_field(field).map_err(tantivy_err)?)))
    }

    /// Chunks that hold one of the query's exact strings ([`exact_strings`]) verbatim
    /// (ASCII case aside, whitespace collapsed, at word boundaries), best first: more
    /// strings matched, then the phrase's BM25. A string inside a longer query counts
    /// when one file holds it (a name that rare is what the user means); a query that
    /// is nothing but the string, when up to [`EXACT_MAX_FILES`] files do. Beyond
    /// that, the string names nothing in particular and is left to the ranking.
    pub(super) fn exact_matches(&self, query: &str, filters: &Filters) -> Result<Vec<usize>> {
        let Some((field, mut analyzer)) = self.text_field()? else {
            return Ok(Vec::new());
        };
        let mut found: HashMap<usize, (usize, f32)> = HashMap::new();
        // Each candidate chunk's text, normalised once for all the strings.
        let mut normalised: HashMap<usize, String> = HashMap::new();
        for literal in exact_strings(query) {
            let max_files = if is_only_literal(query, &literal) { EXACT_MAX_FILES } else { 1 };
            let terms = phrase_terms(&mut analyzer, &literal);
            let Some(q) = phrase(field, &terms) else { continue };
            let needle = normalise(&literal);
            let mut files: HashSet<&str> = HashSet::new();
            let mut hits = Vec::new();
            let candidates = match &self.b.candidates {
                // A short string (`0.5`, `v2`: every word under three characters) is
                // found in the replica's own copy of the texts: its terms are in
                // nearly every chunk.
                Candidates::Remote(_) if !indexable(literal.trim()) => {
                    self.holding(literal.trim(), filters, EXACT_CANDIDATES).into_iter().map(|i| (i, 0.0)).collect()
                }
                // The database offers the chunks holding the phrase's terms (its
                // postings have no positions); they rank by index.
                Candidates::Remote(r) => r
                    .holding_all(&words(&terms), STRING_CANDIDATES)?
                    .into_iter()
                    .filter(|&i| i < self.b.chunks.len() && (filters.is_empty() || filters.keep(&self.b.chunks[i])))
                    .map(|i| (i, 0.0))
                    .collect(),
                Candidates::Local { .. } => self.run_filtered(q, filters, EXACT_CANDIDATES)?,
            };
            for (i, score) in candidates {
                let text = normalised.entry(i).or_insert_with(|| normalise(self.b.text(i)));
                if contains_at_boundaries(text, &needle) {
                    files.insert(self.b.chunks[i].path.as_str());
                    hits.push((i, score));
                    // Too common to name anything: left to the ranking (below).
                    if files.len() > max_files {
                        break;
                    }
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
}

/// Whether a database's postings narrow a search for `needle`: some word of it,
/// letters and digits, is three characters or more.
fn indexable(needle: &str) -> bool {
    needle.split(|c: char| !c.is_alphanumeric()).any(|w| w.chars().count() >= 3)
}

/// Whether `hay` holds `needle` (lowercase), ASCII case aside.
fn holds_ignoring_case(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else { return true };
    let mut at = 0;
    while let Some(i) = memchr::memchr2(first, first.to_ascii_uppercase(), &hay[at..]) {
        let start = at + i;
        if hay.get(start + 1..start + needle.len()).is_some_and(|w| w.eq_ignore_ascii_case(rest)) {
            return true;
        }
        at = start + 1;
    }
    false
}

impl Engine<'_> {
    /// The first `limit` chunks (in index order, within `filters`) whose text holds
    /// `needle`, ASCII case aside: a scan of the texts in memory.
    fn holding(&self, needle: &str, filters: &Filters, limit: usize) -> Vec<usize> {
        let needle = needle.to_ascii_lowercase();
        (0..self.b.chunks.len())
            .filter(|&i| filters.is_empty() || filters.keep(&self.b.chunks[i]))
            .filter(|&i| holds_ignoring_case(self.b.text(i).as_bytes(), needle.as_bytes()))
            .take(limit)
            .collect()
    }

    /// How many chunks hold each of `stems` (as the prose fields hold them) in their
    /// text, title or heading: the most of the three fields.
    pub(super) fn doc_freqs(&self, stems: &[String]) -> Result<HashMap<String, u64>> {
        if stems.is_empty() {
            return Ok(HashMap::new());
        }
        if let Candidates::Remote(r) = &self.b.candidates {
            return r.doc_freqs(stems);
        }
        let t = &self.b.text;
        let searcher = t.reader.searcher();
        let prose: Vec<_> =
            t.fields.iter().filter(|(_, name, _)| matches!(*name, "text" | "title" | "heading")).collect();
        Ok(stems
            .iter()
            .map(|w| {
                let df = prose
                    .iter()
                    .map(|(field, _, _)| searcher.doc_freq(&Term::from_field_text(*field, w)).unwrap_or(0))
                    .max()
                    .unwrap_or(0);
                (w.clone(), df)
            })
            .collect())
    }

    /// Which of `words` (stems, as the prose fields hold them) no chunk's text, title
    /// or heading holds.
    pub(super) fn unseen_words(&self, words: &[String]) -> Result<HashSet<String>> {
        let df = self.doc_freqs(words)?;
        Ok(words.iter().filter(|w| df.get(*w).is_none_or(|&n| n == 0)).cloned().collect())
    }

    /// Whether the query writes a name (two or more capitalised words:
    /// [`super::confidence::name_pairs`]) of which no chunk's text holds any two
    /// adjacent words: a question about a product the corpus never names, though
    /// each of its words may be common (`Google Analytics 4`, `HashiCorp Nomad`).
    /// A pair is searched as a phrase, then checked verbatim: ASCII case, a plural
    /// `s` and a hyphen for the space aside (`High Level API` is written
    /// `high-level API`). A name whose head the corpus names rarely is written
    /// ([`Engine::names_rarely`]).
    pub(super) fn unwritten_name(&self, query: &str) -> Result<bool> {
        let names = super::confidence::name_pairs(query, |w| !self.b.symbols.lookup(w).is_empty());
        if names.is_empty() {
            return Ok(false);
        }
        // Pairs are found by their terms: the field and its analyzer, once.
        let Some(mut text) = self.text_field()? else { return Ok(false) };
        'names: for pairs in names {
            let head = pairs.last().and_then(|p| p.rsplit(' ').next()).unwrap_or_default();
            if self.names_rarely(head)? {
                continue;
            }
            for pair in &pairs {
                if self.writes_pair(pair, &mut text)? {
                    continue 'names;
                }
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether the corpus holds `word` (a name's last word, its head), and rarely:
    /// then the name is a brand before a thing the corpus names (`Google Gemini` of a
    /// corpus that writes `Gemini`; `Apple UIWebView`), not something it never
    /// covers. Rarely: in at most 1 % of the chunks (a head as common as `GPU` or
    /// `Pipelines` says nothing of the brand before it). A number is no head.
    fn names_rarely(&self, word: &str) -> Result<bool> {
        if word.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(false);
        }
        let [stem] = crate::words::stems(word).try_into().unwrap_or_default();
        if stem.is_empty() {
            return Ok(false);
        }
        let df = self.doc_freqs(std::slice::from_ref(&stem))?.get(&stem).copied().unwrap_or(0);
        Ok(df > 0 && df <= (self.b.chunks.len() as u64 / 100).max(1))
    }

    /// Whether some chunk's text holds `pair` (two lowercase words), as
    /// [`Engine::unwritten_name`] reads it; `text`: the text field and its analyzer.
    fn writes_pair(
        &self,
        pair: &str,
        (field, analyzer): &mut (tantivy::schema::Field, tantivy::tokenizer::TextAnalyzer),
    ) -> Result<bool> {
        // The singular is in both numbers' text.
        let singular = super::confidence::without_plural(pair).unwrap_or(pair);
        let needles = [singular.to_owned(), singular.replacen(' ', "-", 1)];
        let none = Filters::default();
        // A phrase ignores the hyphen; the stemmer keeps some plurals apart (`gpus`,
        // `gpu`): both numbers.
        let other = if singular == pair { format!("{pair}s") } else { singular.to_owned() };
        let mut candidates = Vec::new();
        let mut asked: Vec<Vec<String>> = Vec::new();
        for form in [pair, other.as_str()] {
            let terms = phrase_terms(analyzer, form);
            match &self.b.candidates {
                // The database's chunks holding both words, not only as a phrase: all
                // of them, to prove a pair absent (once when both numbers stem alike).
                Candidates::Remote(r) => {
                    let words = words(&terms);
                    if !asked.contains(&words) {
                        candidates.extend(r.holding_all(&words, PAIR_CANDIDATES)?);
                        asked.push(words);
                    }
                }
                Candidates::Local { .. } => {
                    if let Some(q) = phrase(*field, &terms) {
                        candidates.extend(self.run_filtered(q, &none, NAME_CANDIDATES)?.into_iter().map(|x| x.0));
                    }
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        Ok(candidates.into_iter().any(|i| {
            i < self.b.chunks.len() && {
                let text = normalise(self.b.text(i));
                needles.iter().any(|n| text.contains(n.as_str()))
            }
        }))
    }

    /// The chunks that define a symbol the query names, to rank first: for each
    /// identifier-shaped string of the query (or the query itself when it is one
    /// word), the definitions the symbol table resolves it to
    /// ([`crate::symbols::SymbolTable::lookup`]: bare, or qualified by type, module
    /// or path), when there are at most [`MAX_DEFINITIONS`]. Types and functions come
    /// before variables, code before tests. Each chunk once, with the first
    /// definition it was chosen for.
    pub(super) fn definition_matches(&self, query: &str, filters: &Filters) -> Vec<(usize, u32)> {
        if self.b.symbols.is_empty() {
            return Vec::new();
        }
        let one_word = query.split_whitespace().count() == 1;
        let mut found: Vec<u32> = Vec::new();
        for s in exact_strings(query) {
            let name = s.trim_end_matches("()");
            if !(one_word || super::exact::is_identifier(name)) || name.contains(char::is_whitespace) {
                continue;
            }
            let ids = self.b.symbols.lookup(name);
            if ids.is_empty() || ids.len() > MAX_DEFINITIONS {
                continue;
            }
            for i in ids {
                if !found.contains(&i) {
                    found.push(i);
                }
            }
        }
        let rank = |i: u32| {
            let d = &self.b.symbols.defs[i as usize];
            (d.preference(), d.name.len(), d.path.clone(), d.start_line)
        };
        found.sort_by_key(|&i| rank(i));
        let mut out: Vec<(usize, u32)> = Vec::new();
        for i in found {
            let c = self.b.definition_chunk(i);
            if (filters.is_empty() || filters.keep(&self.b.chunks[c])) && !out.iter().any(|&(o, _)| o == c) {
                out.push((c, i));
            }
        }
        out
    }
}

fn tantivy_err(e: tantivy::TantivyError) -> Error {
    Error::Query(format!("keyword search: {e}"))
}

/// The terms of `literal` as the field's analyzer makes them, with their positions:
/// one per position (the segment itself, not a dotted path or a part).
fn phrase_terms(analyzer: &mut tantivy::tokenizer::TextAnalyzer, literal: &str) -> Vec<(usize, String)> {
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
    at
}

/// The terms alone, each once.
fn words(terms: &[(usize, String)]) -> Vec<String> {
    let mut w: Vec<String> = terms.iter().map(|t| t.1.clone()).collect();
    w.sort_unstable();
    w.dedup();
    w
}

/// [`phrase_terms`] as a query on `field`: a phrase, or a term query for a single
/// position.
fn phrase(field: tantivy::schema::Field, terms: &[(usize, String)]) -> Option<Box<dyn Query>> {
    let mut terms: Vec<(usize, Term)> = terms.iter().map(|(p, w)| (*p, Term::from_field_text(field, w))).collect();
    match terms.len() {
        0 => None,
        1 => Some(Box::new(TermQuery::new(terms.remove(0).1, IndexRecordOption::WithFreqs))),
        _ => Some(Box::new(PhraseQuery::new_with_offset(terms))),
    }
}

#[cfg(test)]
mod tests {
    use super::{holds_ignoring_case, indexable};

    #[test]
    fn short_strings_are_not_indexable_and_are_found_ignoring_ascii_case() {
        assert!(!indexable("0.5") && !indexable("v2") && !indexable("a.b"));
        assert!(indexable("helm") && indexable("dump_dict") && indexable("x.foo"));
        assert!(holds_ignoring_case(b"Release V2 notes", b"v2"));
        assert!(holds_ignoring_case(b"since 0.5.1", b"0.5"));
        assert!(!holds_ignoring_case(b"since 0.4", b"0.5"));
        assert!(!holds_ignoring_case(b"v", b"v2"));
        assert!(holds_ignoring_case(b"anything", b""));
    }
}
