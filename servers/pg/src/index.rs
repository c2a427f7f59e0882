//! Serving exported bundles: each complete export becomes a [`Bundle`] whose chunk and
//! symbol tables are loaded from the database and whose candidates are SQL
//! ([`RemoteIndex`]): nearest windows through pgvector's HNSW index, BM25 over the
//! stored postings and statistics, substrings through the trigram index, words' document
//! frequencies through the term table. Filters go into each statement's WHERE.

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

/// The chunk indexes of rows whose first column is one, in index order.
fn in_index_order(rows: &[tokio_postgres::Row]) -> Vec<usize> {
    let mut found: Vec<usize> = rows.iter().map(|r| r.get::<_, i32>(0) as usize).collect();
    found.sort_unstable();
    found
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
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> =
            vec![Box::new(field), Box::new(term), Box::new(weight), Box::new(want as i64), Box::new(PER_TERM)];
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

    fn containing(&self, needle: &str, filters: &Filters, limit: usize) -> atlas_runtime::Result<Vec<usize>> {
        let s = &self.schema;
        let pattern = format!("%{}%", like_escape(&needle.to_lowercase()));
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(pattern), Box::new(limit as i64)];
        let cond = where_filters(filters, "c.kind", &mut params);
        // No ORDER BY: the scan stops at the `limit`th match instead of checking every
        // candidate the trigram index gives (a short or common string gives tens of
        // thousands at 200k chunks); the matches are put in index order here.
        let sql = format!("SELECT c.idx FROM {s}.chunks c WHERE lower(c.text) LIKE $1{cond} LIMIT $2");
        self.db
            .run(async |c| Ok(in_index_order(&c.query(&prepared(c, &sql).await?, &refs(&params)).await.map_err(pg)?)))
            .map_err(|e| remote(&self.db, e))
    }

    fn phrase(&self, words: &str, limit: usize) -> atlas_runtime::Result<Vec<usize>> {
        // The weighted `tsvector` (title, heading, text) through its GIN index; the
        // caller checks the text verbatim.
        let sql = format!(
            "SELECT c.idx FROM {}.chunks c WHERE c.tsv @@ phraseto_tsquery('english', $1) LIMIT $2",
            self.schema
        );
        let limit = limit as i64;
        self.db
            .run(async |c| {
                Ok(in_index_order(&c.query(&prepared(c, &sql).await?, &[&words, &limit]).await.map_err(pg)?))
            })
            .map_err(|e| remote(&self.db, e))
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

/// `s` with LIKE's wildcards escaped (the default escape is a backslash).
fn like_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
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
