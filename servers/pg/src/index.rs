//! Serving exported bundles: each complete export becomes a [`Bundle`] whose chunk and
//! symbol tables are loaded from the database and whose candidates are SQL
//! ([`RemoteIndex`]): nearest windows through pgvector's HNSW index, BM25 over the
//! stored postings and statistics, the chunks holding a phrase's words from the same
//! postings, words' document frequencies through the term table. Filters go into each
//! statement's WHERE.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context as _;
use atlas_runtime::remote::{Near, RemoteBundle, RemoteIndex, WeightedTerm};
use atlas_runtime::search::Filters;
use atlas_runtime::{Bundle, OpenOptions};
use pgvector::HalfVector;
use tokio_postgres::types::ToSql;

use super::{CATALOG, Db, catalog_exists, pg, schema_ident};

/// `sql` prepared once per connection: a search sends each statement's text once, then
/// only its parameters (one round trip a statement, not two).
async fn prepared(c: &deadpool_postgres::Client, sql: &str) -> anyhow::Result<tokio_postgres::Statement> {
    c.prepare_cached(sql).await.map_err(pg)
}

/// Postings read per query term, best BM25 factor first: exact for every term in at
/// most this many chunks; for commoner ones, the chunks where the term weighs most.
/// One stored block.
const PER_TERM: i64 = super::POSTING_BLOCK as i64;

/// One exported bundle's tables.
#[derive(Debug)]
pub struct PgIndex {
    db: Arc<Db>,
    schema: String,
    /// Whether the windows have pgvector's HNSW index (else queries scan them).
    hnsw: bool,
    /// How the export stores postings and kinds.
    layout: Layout,
}

/// What an export's tables hold, by the Atlas that wrote it: each layout still serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// A row per posting, the kind only in `chunks` (exports before issue 51).
    Rows,
    /// A row per posting, each posting and window with its chunk's kind.
    RowsWithKinds,
    /// Each term's postings in blocks of arrays, best first per kind and segment.
    Blocks,
}

/// The layout of the export in schema `library`, read from its columns.
pub(crate) async fn layout(c: &deadpool_postgres::Client, library: &str) -> anyhow::Result<Layout> {
    let columns: Vec<String> = c
        .query(
            "SELECT table_name || '.' || column_name FROM information_schema.columns
             WHERE table_schema = $1 AND table_name IN ('postings', 'windows')",
            &[&library],
        )
        .await
        .map_err(pg)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let has = |c: &str| columns.iter().any(|x| x == c);
    Ok(match (has("postings.block"), has("postings.kind") && has("windows.kind")) {
        (true, _) => Layout::Blocks,
        (false, true) => Layout::RowsWithKinds,
        (false, false) => Layout::Rows,
    })
}

impl Layout {
    /// Whether windows and postings filter by kind without a lookup per row.
    fn kinds(self) -> bool {
        self != Layout::Rows
    }
}

fn remote(db: &Db, e: anyhow::Error) -> atlas_runtime::Error {
    atlas_runtime::Error::Remote { database: db.label.clone(), cause: e.into() }
}

/// `filters` as SQL over the chunk table aliased `c` (the kind from `kind`, a column
/// of that name), its parameters appended to `params` (numbered from
/// `params.len() + 1`).
fn where_filters(filters: &Filters, kind: &str, params: &mut Vec<Box<dyn ToSql + Sync + Send>>) -> String {
    let mut sql = String::new();
    let mut add = |cond: &str, v: String, params: &mut Vec<Box<dyn ToSql + Sync + Send>>| {
        params.push(Box::new(v));
        sql.push_str(&format!(" AND {}", cond.replace('?', &format!("${}", params.len()))));
    };
    if let Some(k) = filters.kind {
        add(&format!("{kind} = ?"), k.as_str().to_owned(), params);
    }
    if let Some(s) = &filters.section {
        add("c.section = ?", s.clone(), params);
    }
    if let Some(l) = &filters.language {
        add("c.language = ?", l.clone(), params);
    }
    if let Some(s) = &filters.symbol_kind {
        add("c.symbol_kind = ?", s.clone(), params);
    }
    if let Some(p) = &filters.path_prefix {
        add("starts_with(c.path, ?)", p.clone(), params);
    }
    if let Some(r) = &filters.repo {
        // Both `?` are the one parameter: the URL, or its last path segment.
        add("(c.repo = ? OR split_part(rtrim(c.repo, '/'), '/', -1) = ?)", r.clone(), params);
    }
    sql
}

fn refs(params: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()
}

impl PgIndex {
    /// [`RemoteIndex::bm25`] over a block export under a kind filter or none: the
    /// database sends each query term's weight × idf and its first blocks (one per
    /// kind and segment, together holding its best [`PER_TERM`] under the filter), and
    /// the sum is made here. Summing in SQL unnests every posting into a row, sorts
    /// and aggregates them: most of a hybrid search's database time at 200k chunks.
    /// The same postings, factors and order as the sum in SQL (ties by chunk).
    fn bm25_blocks(
        &self,
        params: &[Box<dyn ToSql + Sync + Send>],
        cond: &str,
        want: usize,
    ) -> atlas_runtime::Result<Vec<(usize, f32)>> {
        let s = &self.schema;
        let sql = format!(
            "WITH q AS (SELECT * FROM unnest($1::smallint[], $2::text[], $3::float8[]) WITH ORDINALITY
                          AS q(field, term, weight, i))
             SELECT q.i, q.weight * ln(1 + (f.docs - t.df + 0.5)::float8 / (t.df + 0.5)), p.chunks, p.impacts
             FROM q JOIN {s}.terms t ON t.field = q.field AND t.term = q.term
               JOIN {s}.fields f ON f.field = q.field
               JOIN {s}.postings p ON p.field = q.field AND p.term = q.term AND p.block = 0
             WHERE true{cond}"
        );
        self.db
            .run(async |c| {
                let rows = c.query(&prepared(c, &sql).await?, &refs(params)).await.map_err(pg)?;
                let blocks: Vec<TermBlock> = rows
                    .iter()
                    .map(|r| TermBlock { term: r.get(0), w: r.get(1), chunks: r.get(2), impacts: r.get(3) })
                    .collect();
                bm25_sum(&blocks, PER_TERM as usize, want)
            })
            .map_err(|e| remote(&self.db, e))
    }
}

/// One stored block of one query term, as [`PgIndex::bm25_blocks`] reads it.
struct TermBlock {
    /// The query term's place in the query.
    term: i64,
    /// Its weight × idf.
    w: f64,
    chunks: Vec<i32>,
    impacts: Vec<f32>,
}

/// BM25 from each query term's blocks: per term its best `per_term` postings (impact
/// first, ties by chunk), each chunk's sum of `w × impact` over the terms, the best
/// `want` (score first, as `real`; ties by chunk).
fn bm25_sum(blocks: &[TermBlock], per_term: usize, want: usize) -> anyhow::Result<Vec<(usize, f32)>> {
    // Per query term: its place, its weight × idf, its postings as (impact, chunk).
    type Term = (i64, f64, Vec<(f32, i32)>);
    let mut by_term: Vec<Term> = Vec::new();
    for b in blocks {
        if b.chunks.len() != b.impacts.len() {
            anyhow::bail!(
                "a postings block of the export has {} chunks and {} factors",
                b.chunks.len(),
                b.impacts.len()
            );
        }
        let postings = b.impacts.iter().copied().zip(b.chunks.iter().copied());
        match by_term.iter_mut().find(|t| t.0 == b.term) {
            Some(t) => t.2.extend(postings),
            None => by_term.push((b.term, b.w, postings.collect())),
        }
    }
    let best_first = |a: &(f32, i32), b: &(f32, i32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    let mut scores: HashMap<i32, f64> = HashMap::new();
    for (_, w, mut postings) in by_term {
        if postings.len() > per_term {
            postings.select_nth_unstable_by(per_term - 1, best_first);
            postings.truncate(per_term);
        }
        for (impact, chunk) in postings {
            *scores.entry(chunk).or_default() += w * f64::from(impact);
        }
    }
    let mut ranked: Vec<(f32, i32)> = scores.into_iter().map(|(c, s)| (s as f32, c)).collect();
    if ranked.len() > want && want > 0 {
        ranked.select_nth_unstable_by(want - 1, best_first);
    }
    ranked.truncate(want);
    ranked.sort_unstable_by(best_first);
    Ok(ranked.into_iter().map(|(s, c)| (c as usize, s)).collect())
}

impl RemoteIndex for PgIndex {
    fn nearest(&self, q: &[f32], filters: &Filters, first_only: bool, k: usize) -> atlas_runtime::Result<Vec<Near>> {
        let s = &self.schema;
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> =
            vec![Box::new(HalfVector::from_f32_slice(q)), Box::new(k as i64)];
        let kind = if self.layout.kinds() { "w.kind" } else { "c.kind" };
        let mut cond = where_filters(filters, kind, &mut params);
        if first_only {
            cond.push_str(" AND w.first");
        }
        let join = if cond.contains("c.") { format!("JOIN {s}.chunks c ON c.idx = w.chunk") } else { String::new() };
        let sql = format!(
            "SELECT w.chunk, w.first, (1 - (w.embedding <=> $1))::real FROM {s}.windows w {join} \
             WHERE true{cond} ORDER BY w.embedding <=> $1 LIMIT $2"
        );
        self.db
            .run(async |c| {
                let rows = c.query(&prepared(c, &sql).await?, &refs(&params)).await.map_err(pg)?;
                Ok(rows
                    .iter()
                    .map(|r| Near { chunk: r.get::<_, i32>(0) as u32, first: r.get(1), cosine: r.get(2) })
                    .collect())
            })
            .map_err(|e| remote(&self.db, e))
    }

    fn bm25(&self, terms: &[WeightedTerm], filters: &Filters, want: usize) -> atlas_runtime::Result<Vec<(usize, f32)>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let s = &self.schema;
        let field: Vec<i16> = terms.iter().map(|t| field_no(t.field)).collect();
        let term: Vec<String> = terms.iter().map(|t| t.term.clone()).collect();
        let weight: Vec<f64> = terms.iter().map(|t| f64::from(t.weight)).collect();
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(field), Box::new(term), Box::new(weight)];
        // A kind filter or none: each term's first blocks hold what it needs.
        if self.layout == Layout::Blocks && *filters == (Filters { kind: filters.kind, ..Filters::default() }) {
            let cond = where_filters(filters, "p.kind", &mut params);
            return self.bm25_blocks(&params, &cond, want);
        }
        params.extend([Box::new(want as i64) as Box<dyn ToSql + Sync + Send>, Box::new(PER_TERM)]);
        let kind = if self.layout.kinds() { "p.kind" } else { "c.kind" };
        let cond = where_filters(filters, kind, &mut params);
        let lookup = cond.contains("c.");
        // A term's best postings: read from its first blocks (under a kind filter or
        // none), from all of them when a filter needs each chunk looked up, or, in a
        // row-per-posting export, from the covering index, best first.
        let best = match self.layout {
            Layout::Blocks => {
                let (blocks, join) = match lookup {
                    true => ("", format!("JOIN {s}.chunks c ON c.idx = u.chunk")),
                    false => (" AND p.block = 0", String::new()),
                };
                format!(
                    "SELECT u.chunk, u.impact FROM {s}.postings p
                       CROSS JOIN LATERAL unnest(p.chunks, p.impacts) AS u(chunk, impact) {join}
                     WHERE p.field = s.field AND p.term = s.term{blocks}{cond}
                     ORDER BY u.impact DESC, u.chunk LIMIT $5"
                )
            }
            Layout::Rows | Layout::RowsWithKinds => {
                let join = if lookup { format!("JOIN {s}.chunks c ON c.idx = p.chunk") } else { String::new() };
                format!(
                    "SELECT p.chunk, p.impact FROM {s}.postings p {join}
                     WHERE p.field = s.field AND p.term = s.term{cond}
                     ORDER BY p.impact DESC LIMIT $5"
                )
            }
        };
        // tantivy's BM25 per term: idf · (1 + k1) · tf / (tf + k1 · (1 − b + b · norm / avg)),
        // the factor after idf stored per posting (`impact`), times the term's weight,
        // summed over the query's terms. Each term's weight × idf is computed once, in
        // float8 (not per posting, nor in numeric).
        let sql = format!(
            "WITH q AS (SELECT * FROM unnest($1::smallint[], $2::text[], $3::float8[]) AS q(field, term, weight)),
             s AS MATERIALIZED (SELECT q.field, q.term,
                     q.weight * ln(1 + (f.docs - t.df + 0.5)::float8 / (t.df + 0.5)) AS w
                   FROM q JOIN {s}.terms t ON t.field = q.field AND t.term = q.term
                   JOIN {s}.fields f ON f.field = q.field)
             SELECT b.chunk, sum(s.w * b.impact)::real AS score
             FROM s CROSS JOIN LATERAL ({best}) b
             GROUP BY b.chunk ORDER BY score DESC, b.chunk LIMIT $4"
        );
        self.db
            .run(async |c| {
                let rows = c.query(&prepared(c, &sql).await?, &refs(&params)).await.map_err(pg)?;
                Ok(rows.iter().map(|r| (r.get::<_, i32>(0) as usize, r.get::<_, f32>(1))).collect())
            })
            .map_err(|e| remote(&self.db, e))
    }

    fn holding_all(&self, terms: &[String], limit: usize) -> atlas_runtime::Result<Vec<usize>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Each term's chunks in the text field, all its blocks (or rows).
        let s = &self.schema;
        let sql = match self.layout {
            Layout::Blocks => format!("SELECT term, chunks FROM {s}.postings WHERE field = $1 AND term = ANY($2)"),
            Layout::Rows | Layout::RowsWithKinds => format!(
                "SELECT term, array_agg(chunk) FROM {s}.postings WHERE field = $1 AND term = ANY($2) GROUP BY term"
            ),
        };
        let rows = self
            .db
            .run(async |c| {
                let rows = c.query(&prepared(c, &sql).await?, &[&field_no("text"), &terms]).await.map_err(pg)?;
                Ok(rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, Vec<i32>>(1))).collect::<Vec<_>>())
            })
            .map_err(|e| remote(&self.db, e))?;
        Ok(holding_all(terms, rows, limit))
    }

    fn doc_freqs(&self, stems: &[String]) -> atlas_runtime::Result<HashMap<String, u64>> {
        if stems.is_empty() {
            return Ok(HashMap::new());
        }
        let s = &self.schema;
        let prose: Vec<i16> = ["text", "title", "heading"].iter().map(|f| field_no(f)).collect();
        let sql = format!("SELECT term, max(df) FROM {s}.terms WHERE field = ANY($1) AND term = ANY($2) GROUP BY term");
        self.db
            .run(async |c| {
                let rows = c.query(&prepared(c, &sql).await?, &[&prose, &stems]).await.map_err(pg)?;
                Ok(rows.iter().map(|r| (r.get(0), u64::try_from(r.get::<_, i32>(1)).unwrap_or(0))).collect())
            })
            .map_err(|e| remote(&self.db, e))
    }

    fn vector_index(&self) -> String {
        if self.hnsw { "pgvector-hnsw".into() } else { "pgvector-exact".into() }
    }

    fn file(&self, name: &str) -> atlas_runtime::Result<Option<Vec<u8>>> {
        let sql = format!("SELECT bytes FROM {}.files WHERE name = $1", self.schema);
        self.db
            .run(async |c| {
                Ok(c.query_opt(&prepared(c, &sql).await?, &[&name]).await.map_err(pg)?.map(|r| r.get::<_, Vec<u8>>(0)))
            })
            .map_err(|e| remote(&self.db, e))
    }
}

/// A field's number in `postings` (its place in the schema's scored fields).
fn field_no(name: &str) -> i16 {
    atlas_runtime::text_index::FIELDS.iter().position(|f| *f == name).unwrap_or(0) as i16
}

/// The chunks (in index order, the first `limit`) that every one of `stems` holds,
/// from each stem's postings blocks; none when a stem has none.
fn holding_all(stems: &[String], blocks: Vec<(String, Vec<i32>)>, limit: usize) -> Vec<usize> {
    let mut lists: Vec<Vec<i32>> = vec![Vec::new(); stems.len()];
    for (term, chunks) in blocks {
        if let Some(i) = stems.iter().position(|s| *s == term) {
            lists[i].extend(chunks);
        }
    }
    lists.iter_mut().for_each(|l| l.sort_unstable());
    lists.sort_by_key(Vec::len);
    let Some((first, rest)) = lists.split_first() else { return Vec::new() };
    first.iter().filter(|c| rest.iter().all(|l| l.binary_search(c).is_ok())).take(limit).map(|&c| c as usize).collect()
}

/// An export that did not open: the servers name it, with [`Unopened::FIX`], and serve
/// the others.
#[derive(Debug, Clone)]
pub struct Unopened {
    /// `name@version`.
    pub library: String,
    /// The bundle's name, as a `library` argument names it.
    pub name: String,
    pub error: String,
}

impl Unopened {
    /// What to do about an export that does not open.
    pub const FIX: &str = "export it again (`atlas export BUNDLE --to …`) or drop it (`atlas export --drop`)";
}

/// Every complete export in the database at `url`, opened as bundles served from it,
/// over a pool of `pool` connections; an export that does not open (its tables gone,
/// a file that does not match its manifest) is named with its error, and the others
/// serve.
pub fn open_all(url: &str, pool: usize, opts: &OpenOptions) -> anyhow::Result<(Vec<Bundle>, Vec<Unopened>)> {
    let db = Db::connect(url, pool, None)?;
    let libraries: Vec<String> = db.run(async |c| {
        if !catalog_exists(c).await? {
            return Ok(Vec::new());
        }
        let rows = c
            .query(&format!("SELECT library FROM {CATALOG} WHERE complete ORDER BY library"), &[])
            .await
            .map_err(pg)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    })?;
    if libraries.is_empty() {
        anyhow::bail!(atlas_runtime::exit::UsageError(format!(
            "{} holds no exported bundle; load one with `atlas export BUNDLE --to …`",
            db.label
        )));
    }
    let (mut open, mut broken) = (Vec::new(), Vec::new());
    for l in &libraries {
        match open_one(&db, l, opts) {
            Ok(b) => open.push(b),
            Err(e) => {
                let name = l.split_once('@').map_or(l.as_str(), |(n, _)| n).to_owned();
                tracing::warn!("{l} did not open ({e:#}; in {}); {}", db.label, Unopened::FIX);
                broken.push(Unopened { library: l.clone(), name, error: format!("{e:#}") });
            }
        }
    }
    Ok((open, broken))
}

fn open_one(db: &Arc<Db>, library: &str, opts: &OpenOptions) -> anyhow::Result<Bundle> {
    let schema = schema_ident(library)?;
    let (files, texts, hnsw, layout) = db.run(async |c| {
        let hnsw: bool = c
            .query_one(
                "SELECT count(*) > 0 FROM pg_indexes WHERE schemaname = $1 AND indexname = 'windows_hnsw'",
                &[&library],
            )
            .await
            .map_err(pg)?
            .get(0);
        let layout = layout(c, library).await?;
        // The tables' files only: mirror files are read one at a time when asked.
        let wanted = [
            "manifest.json",
            "chunks.parquet",
            atlas_runtime::symbols::DEFINITIONS_FILE,
            atlas_runtime::symbols::REFERENCES_FILE,
        ];
        let files: Vec<(String, Vec<u8>)> = c
            .query(&format!("SELECT name, bytes FROM {schema}.files WHERE name = ANY($1)"), &[&&wanted[..]])
            .await
            .map_err(pg)?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let texts: Vec<String> = c
            .query(&format!("SELECT text FROM {schema}.chunks ORDER BY idx"), &[])
            .await
            .map_err(pg)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        Ok((files, texts, hnsw, layout))
    })?;
    let file = |name: &str| files.iter().find(|f| f.0 == name).map(|f| f.1.clone());
    let check = |name: &str, bytes: &[u8], m: &atlas_runtime::manifest::Manifest| -> anyhow::Result<()> {
        match m.artifact(name) {
            Some(a) if atlas_runtime::hash::blake3_bytes(bytes) != a.blake3 => {
                anyhow::bail!("{name} in the database does not match the manifest; export the bundle again")
            }
            _ => Ok(()),
        }
    };
    let manifest: atlas_runtime::manifest::Manifest =
        serde_json::from_slice(&file("manifest.json").context("the export has no manifest.json")?)
            .context("the exported manifest.json")?;
    manifest.check_fields().map_err(|why| anyhow::anyhow!("the exported manifest.json: {why}"))?;
    let table = file("chunks.parquet").context("the export has no chunks.parquet")?;
    check("chunks.parquet", &table, &manifest)?;
    let mut chunks = atlas_runtime::chunk_table::from_parquet_with(&table, false)?;
    if chunks.len() != texts.len() {
        anyhow::bail!("{} chunks but {} texts in the database; export the bundle again", chunks.len(), texts.len());
    }
    for (c, t) in chunks.iter_mut().zip(texts) {
        c.text = t;
    }
    let symbols = file(atlas_runtime::symbols::DEFINITIONS_FILE);
    let references = file(atlas_runtime::symbols::REFERENCES_FILE);
    for (name, bytes) in
        [(atlas_runtime::symbols::DEFINITIONS_FILE, &symbols), (atlas_runtime::symbols::REFERENCES_FILE, &references)]
    {
        if let Some(b) = bytes {
            check(name, b, &manifest)?;
        }
    }
    let rows = manifest.embedding_rows;
    let label = format!("{}#{library}", db.label);
    let index = Arc::new(PgIndex { db: db.clone(), schema, hnsw, layout });
    let r = RemoteBundle { label, manifest, chunks, symbols, references, index };
    Ok(Bundle::open_remote(r, rows, opts.clone())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(term: i64, w: f64, postings: &[(i32, f32)]) -> TermBlock {
        TermBlock {
            term,
            w,
            chunks: postings.iter().map(|p| p.0).collect(),
            impacts: postings.iter().map(|p| p.1).collect(),
        }
    }

    #[test]
    fn bm25_from_blocks_takes_each_term_s_best_across_its_blocks_and_sums_them() {
        // Term 1 in two blocks (two kinds): its best 3 are chunks 5 (0.9), 1 and 7
        // (0.5 each, ties by chunk), not 9 (0.5) nor 2 (0.1).
        let blocks = [
            block(1, 2.0, &[(5, 0.9), (7, 0.5), (2, 0.1)]),
            block(2, 1.0, &[(7, 1.0), (3, 0.25)]),
            block(1, 2.0, &[(9, 0.5), (1, 0.5)]),
        ];
        let got = bm25_sum(&blocks, 3, 10).unwrap();
        // 7: 2·0.5 + 1·1.0 = 2.0; 5: 1.8; 1: 1.0; 3: 0.25.
        assert_eq!(got, [(7, 2.0), (5, 1.8), (1, 1.0), (3, 0.25)]);
        // The best `want`, ties by chunk.
        let tied = [block(1, 1.0, &[(4, 0.5), (2, 0.5), (8, 0.5)])];
        assert_eq!(bm25_sum(&tied, 10, 2).unwrap(), [(2, 0.5), (4, 0.5)]);
        assert!(bm25_sum(&tied, 10, 0).unwrap().is_empty());
        // A block whose arrays disagree is the export's fault, said.
        let bad = TermBlock { term: 1, w: 1.0, chunks: vec![1, 2], impacts: vec![0.5] };
        assert!(bm25_sum(&[bad], 10, 10).is_err());
    }

    #[test]
    fn a_phrase_s_candidates_hold_every_stem() {
        let stems = ["pipelin".to_owned(), "plugin".to_owned()];
        let blocks = vec![
            ("plugin".to_owned(), vec![9, 3, 4]),
            ("pipelin".to_owned(), vec![4, 1]),
            ("pipelin".to_owned(), vec![9, 7]),
            ("other".to_owned(), vec![1, 3]),
        ];
        assert_eq!(holding_all(&stems, blocks.clone(), 10), [4, 9]);
        assert_eq!(holding_all(&stems, blocks, 1), [4]);
        assert!(holding_all(&stems, vec![("plugin".to_owned(), vec![1])], 10).is_empty());
    }
}
