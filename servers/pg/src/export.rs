//! `atlas export BUNDLE --to postgres://…`: the bundle into a schema named
//! `name@version`, step by step, each step one transaction that records itself in the
//! schema's `progress` table. A killed export reruns the steps it had not committed
//! and ends in the same state; a finished one is checked against the bundle (counts,
//! the files' blake3, every text's sha256, a sample of vectors) before the catalog
//! marks it complete, and only complete exports are served.
//!
//! Tables (docs/scaling.md): `bundle` (manifest, provenance, signature), `files` (the
//! bundle's small files, byte for byte), `chunks` (the fields filters use, the text, a
//! weighted `tsvector`), `windows` (one halfvec per embedding row, HNSW), `postings`,
//! `terms` and `fields` (the BM25 statistics of the bundle's own tantivy index: keyword
//! search through the database scores as the local index does), `symbols`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use atlas_runtime::exit::UsageError;
use atlas_runtime::manifest::Manifest;
use atlas_runtime::{Bundle, OpenOptions};
use pgvector::HalfVector;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

use super::{BM25_B, BM25_K1, CATALOG, Db, EXPORT_STATEMENT_TIMEOUT_MS, catalog_exists, db_error, pg, schema_ident};

/// Chunks, windows and postings per COPY (and per committed step).
const CHUNK_BATCH: usize = 2_000;
const WINDOW_BATCH: usize = 5_000;
const POSTING_BATCH: usize = 200_000;
/// Vectors read back and compared after the load.
const VECTOR_SAMPLE: usize = 500;
/// Files that stay out of `files`: the database holds their contents as tables.
const AS_TABLES: [&str; 3] = ["embeddings.npy", "chunks.text", "hnsw/"];

/// What the export did, for the one-line summary.
#[derive(Debug, Default)]
pub struct Exported {
    pub schema: String,
    pub steps_run: usize,
    pub steps_skipped: usize,
    pub bytes: i64,
    pub already: bool,
}

/// Where a bundle came from, stored beside it (`bundle.provenance`): for an installed
/// bundle its install record: the source, the archive's sha256, the id of the key
/// whose minisign signature was checked and that key.
#[derive(Debug, Default, serde::Serialize)]
pub struct Provenance {
    pub source: Option<String>,
    pub sha256: Option<String>,
    pub signed_by: Option<String>,
    pub trusted_key: Option<String>,
    /// Seconds since the epoch.
    pub installed: Option<u64>,
}

/// How the vectors are indexed in the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VectorIndex {
    /// pgvector's HNSW graph (`halfvec_cosine_ops`): approximate, fast at any size.
    Hnsw,
    /// No index: every query scans the windows exactly (small bundles, or a pgvector
    /// build that cannot build indexes on this CPU).
    None,
}

/// Loads the bundle in `dir` into `url`.
pub fn export(dir: &Path, url: &str, provenance: Provenance, vector_index: VectorIndex) -> anyhow::Result<Exported> {
    let manifest = atlas_runtime::manifest::verify(dir).with_context(|| format!("checking {}", dir.display()))?;
    let bundle = Bundle::open(dir, OpenOptions { keyword_only: true, ..OpenOptions::default() })
        .with_context(|| format!("opening {}", dir.display()))?;
    let library = bundle.library();
    let schema = schema_ident(&library)?;
    let db = Db::connect(url, 1, Some(EXPORT_STATEMENT_TIMEOUT_MS))?;
    // The manifest's bytes, read once: stored as they are, and their blake3 tells two
    // builds of one version apart.
    let raw_manifest = std::fs::read(dir.join("manifest.json")).context("reading manifest.json")?;
    let digest = atlas_runtime::hash::blake3_bytes(&raw_manifest);
    let mut out = Exported { schema: library.clone(), ..Exported::default() };
    // The catalog and this bundle's tables, or what a killed run left of them.
    let state = db.run(async |c| {
        c.batch_execute(&format!(
            "CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm;
             CREATE SCHEMA IF NOT EXISTS atlas;
             CREATE TABLE IF NOT EXISTS {CATALOG} (library text PRIMARY KEY, name text NOT NULL,
               version text NOT NULL, manifest_blake3 text NOT NULL, complete boolean NOT NULL DEFAULT false,
               chunks integer NOT NULL, windows integer NOT NULL, bytes bigint,
               started timestamptz NOT NULL DEFAULT now(), finished timestamptz);"
        ))
        .await
        .map_err(pg)?;
        let row = c
            .query_opt(&format!("SELECT manifest_blake3, complete FROM {CATALOG} WHERE library = $1"), &[&library])
            .await
            .map_err(pg)?;
        Ok(row.map(|r| (r.get::<_, String>(0), r.get::<_, bool>(1))))
    })?;
    match state {
        Some((d, _)) if d != digest => bail!(UsageError(format!(
            "{library} is already in {} from a different build; `atlas export --drop {library} --to …` first",
            db.label
        ))),
        Some((_, true)) => {
            out.already = true;
            return Ok(out);
        }
        _ => {}
    }
    let dims = manifest.model.dims;
    let (chunks, rows) = (manifest.chunk_count as i32, manifest.embedding_rows as i32);
    let ddl = tables(&schema, dims);
    db.run(async |c| {
        c.execute(
            &format!(
                "INSERT INTO {CATALOG} (library, name, version, manifest_blake3, chunks, windows)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (library) DO NOTHING"
            ),
            &[&library, &manifest.name, &manifest.version, &digest, &chunks, &rows],
        )
        .await
        .map_err(pg)?;
        c.batch_execute(&ddl).await.map_err(pg)?;
        Ok(())
    })?;
    let done: HashSet<String> = db.run(async |c| {
        let rows = c.query(&format!("SELECT step FROM {schema}.progress"), &[]).await.map_err(pg)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    })?;
    let mut steps = Steps { db: &db, schema: &schema, done, out: &mut out };

    steps.run("bundle", async |c| {
        let json: serde_json::Value = serde_json::from_slice(&raw_manifest)?;
        let prov = serde_json::to_value(&provenance)?;
        c.execute(
            &format!("INSERT INTO {schema}.bundle (library, manifest, provenance) VALUES ($1, $2::text::jsonb, $3::text::jsonb)"),
            &[&library, &json.to_string(), &prov.to_string()],
        )
        .await
        .map_err(pg)?;
        Ok(())
    })?;
    steps.run("files", async |c| {
        for a in &manifest.artifacts {
            if a.path.starts_with("tantivy/") || AS_TABLES.iter().any(|t| a.path == *t || a.path.starts_with(t)) {
                continue;
            }
            let bytes = atlas_runtime::manifest::read_checked(dir, &manifest, &a.path)?;
            c.execute(
                &format!("INSERT INTO {schema}.files (name, bytes, blake3) VALUES ($1, $2, $3)"),
                &[&a.path, &bytes, &a.blake3],
            )
            .await
            .map_err(pg)?;
        }
        c.execute(
            &format!("INSERT INTO {schema}.files (name, bytes, blake3) VALUES ('manifest.json', $1, $2)"),
            &[&raw_manifest, &digest],
        )
        .await
        .map_err(pg)?;
        Ok(())
    })?;

    let all = bundle.chunks();
    for start in (0..all.len()).step_by(CHUNK_BATCH) {
        let end = (start + CHUNK_BATCH).min(all.len());
        steps.run(&format!("chunks:{start}"), async |c| {
            let sink = c
                .copy_in(&format!(
                    "COPY {schema}.chunks (idx, chunk_id, path, kind, section, language, repo, symbol_kind, title, \
                     heading, text) FROM STDIN BINARY"
                ))
                .await
                .map_err(pg)?;
            let t = Type::TEXT;
            let types = [
                Type::INT4,
                t.clone(),
                t.clone(),
                t.clone(),
                t.clone(),
                t.clone(),
                t.clone(),
                t.clone(),
                t.clone(),
                t.clone(),
                t,
            ];
            let w = BinaryCopyInWriter::new(sink, &types);
            let mut w = std::pin::pin!(w);
            for (i, ch) in all.iter().enumerate().take(end).skip(start) {
                let (idx, heading) = (i as i32, ch.heading_path.join(" > "));
                let kind = ch.kind.as_str();
                let row: [&(dyn ToSql + Sync); 11] = [
                    &idx,
                    &ch.chunk_id,
                    &ch.path,
                    &kind,
                    &ch.section,
                    &ch.language,
                    &ch.repo,
                    &ch.symbol_kind,
                    &ch.title,
                    &heading,
                    &nul_free(bundle.text(i)),
                ];
                w.as_mut().write(&row).await.map_err(pg)?;
            }
            w.finish().await.map_err(pg)?;
            Ok(())
        })?;
    }

    let meta: atlas_runtime::vectors::EmbeddingsMeta =
        serde_json::from_slice(&atlas_runtime::manifest::read_checked(dir, &manifest, "embeddings.json")?)?;
    let vectors = atlas_runtime::vectors::MappedMatrix::open(&dir.join("embeddings.npy"))?;
    let first = first_rows(&meta.window_chunk);
    for start in (0..vectors.rows).step_by(WINDOW_BATCH) {
        let end = (start + WINDOW_BATCH).min(vectors.rows);
        steps.run(&format!("windows:{start}"), async |c| {
            let halfvec = halfvec_type(c).await?;
            let sink = c
                .copy_in(&format!("COPY {schema}.windows (row, chunk, first, kind, embedding) FROM STDIN BINARY"))
                .await
                .map_err(pg)?;
            let w = BinaryCopyInWriter::new(sink, &[Type::INT4, Type::INT4, Type::BOOL, Type::TEXT, halfvec]);
            let mut w = std::pin::pin!(w);
            for row in start..end {
                let chunk = meta.window_chunk[row];
                let v = HalfVector::from_f32_slice(&vectors.row(row));
                let (r, ch, f) = (row as i32, chunk as i32, first.contains(&(row as u32)));
                let kind = all.get(chunk as usize).map_or("", |c| c.kind.as_str());
                w.as_mut().write(&[&r, &ch, &f, &kind, &v]).await.map_err(pg)?;
            }
            w.finish().await.map_err(pg)?;
            Ok(())
        })?;
    }

    let (searcher, stats) = atlas_runtime::text_index::field_stats(&dir.join("tantivy"))
        .map_err(|e| anyhow::anyhow!("reading the bundle's tantivy index: {e}"))?;
    for (f, s) in stats.iter().enumerate() {
        for seg in 0..searcher.segment_readers().len() {
            steps.run(&format!("postings:{}:{seg}", s.field), async |c| {
                // One transaction per field and segment; the batches go through one COPY.
                let sink = c
                    .copy_in(&format!(
                        "COPY {schema}.postings (field, term, chunk, kind, tf, norm, impact) FROM STDIN BINARY"
                    ))
                    .await
                    .map_err(pg)?;
                let types = [Type::INT2, Type::TEXT, Type::INT4, Type::TEXT, Type::INT4, Type::INT4, Type::FLOAT4];
                let w = BinaryCopyInWriter::new(sink, &types);
                let mut w = std::pin::pin!(w);
                // The index is read on a blocking thread, a batch at a time, while
                // the previous batch is written: memory stays at two batches.
                let (tx, mut rx) = tokio::sync::mpsc::channel(1);
                let (searcher, field_name) = (searcher.clone(), s.field);
                let reader = tokio::task::spawn_blocking(move || {
                    atlas_runtime::text_index::postings(&searcher, field_name, seg, POSTING_BATCH, |b| {
                        tx.blocking_send(b).map_err(|_| anyhow::anyhow!("the export stopped"))
                    })
                });
                let field = f as i16;
                let avg = s.tokens as f64 / s.docs.max(1) as f64;
                while let Some(batch) = rx.recv().await {
                    for p in batch {
                        let (chunk, tf, norm) = (p.chunk as i32, p.tf as i32, p.norm as i32);
                        let impact = bm25_impact(p.tf, p.norm, avg);
                        let kind = all.get(p.chunk as usize).map_or("", |c| c.kind.as_str());
                        w.as_mut().write(&[&field, &p.term, &chunk, &kind, &tf, &norm, &impact]).await.map_err(pg)?;
                    }
                }
                reader.await.context("reading the bundle's index")??;
                w.finish().await.map_err(pg)?;
                Ok(())
            })?;
        }
    }
    steps.run("terms", async |c| {
        c.batch_execute(&format!(
            "INSERT INTO {schema}.terms (field, term, df) SELECT field, term, count(*) FROM {schema}.postings GROUP BY 1, 2"
        ))
        .await
        .map_err(pg)?;
        for (f, s) in stats.iter().enumerate() {
            let (field, docs, tokens) = (f as i16, s.docs as i64, s.tokens as i64);
            c.execute(
                &format!("INSERT INTO {schema}.fields (field, name, docs, tokens) VALUES ($1, $2, $3, $4)"),
                &[&field, &s.field, &docs, &tokens],
            )
            .await
            .map_err(pg)?;
        }
        Ok(())
    })?;
    steps.run("symbols", async |c| {
        let defs = bundle.symbols().defs.clone();
        for chunk in defs.chunks(1_000) {
            let tx_sql = format!(
                "INSERT INTO {schema}.symbols (name, kind, path, language, start_line, end_line, chunk_id, signature) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[], $8::text[])"
            );
            let col = |f: fn(&atlas_runtime::symbols::Definition) -> String| chunk.iter().map(f).collect::<Vec<_>>();
            let lines = |f: fn(&atlas_runtime::symbols::Definition) -> u32| {
                chunk.iter().map(|d| f(d) as i32).collect::<Vec<i32>>()
            };
            let signature: Vec<Option<String>> = chunk.iter().map(|d| d.signature.clone()).collect();
            c.execute(
                &tx_sql,
                &[
                    &col(|d| d.name.clone()),
                    &col(|d| d.kind.clone()),
                    &col(|d| d.path.clone()),
                    &col(|d| d.language.clone()),
                    &lines(|d| d.start_line),
                    &lines(|d| d.end_line),
                    &col(|d| d.chunk_id.clone()),
                    &signature,
                ],
            )
            .await
            .map_err(pg)?;
        }
        Ok(())
    })?;
    // The graph built in memory: pgvector's HNSW build slows several times once its
    // graph outgrows `maintenance_work_mem` (64 MB by default; 200,000 windows of
    // 384 dimensions need about 400 MB). Twice the vectors' f16 bytes, at most 2 GB,
    // for this transaction only.
    let build_mb = (vectors.rows * dims * 2 * 2 / (1 << 20)).clamp(64, 2048);
    steps.run("indexes", async |c| {
        c.batch_execute(&format!("SET LOCAL maintenance_work_mem = '{build_mb}MB'")).await.map_err(pg)?;
        if vector_index == VectorIndex::Hnsw {
            c.batch_execute(&format!(
                "CREATE INDEX IF NOT EXISTS windows_hnsw ON {schema}.windows USING hnsw (embedding halfvec_cosine_ops)"
            ))
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "building the HNSW index: {}; if the server's log shows an illegal instruction, its pgvector \
                     was built for a newer CPU: export with `--vector-index none`",
                    db_error(&e)
                )
            })?;
        }
        c.batch_execute(&format!(
            "CREATE INDEX IF NOT EXISTS windows_chunk ON {schema}.windows (chunk);
             CREATE INDEX IF NOT EXISTS postings_term ON {schema}.postings (field, term, impact DESC) INCLUDE (chunk, kind);
             CREATE INDEX IF NOT EXISTS chunks_tsv ON {schema}.chunks USING gin (tsv);
             CREATE INDEX IF NOT EXISTS chunks_text_trgm ON {schema}.chunks USING gin (lower(text) gin_trgm_ops);
             CREATE INDEX IF NOT EXISTS symbols_name ON {schema}.symbols (name);
             ANALYZE {schema}.chunks; ANALYZE {schema}.windows; ANALYZE {schema}.postings; ANALYZE {schema}.terms;"
        ))
        .await
        .map_err(pg)?;
        Ok(())
    })?;
    drop(steps);
    verify(&db, &schema, dir, &bundle, &manifest, &vectors)?;
    out.bytes = db.run(async |c| {
        let bytes: i64 = c
            .query_one(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
                 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')",
                &[&library],
            )
            .await
            .map_err(pg)?
            .get(0);
        c.execute(
            &format!("UPDATE {CATALOG} SET complete = true, bytes = $2, finished = now() WHERE library = $1"),
            &[&library, &bytes],
        )
        .await
        .map_err(pg)?;
        Ok(bytes)
    })?;
    Ok(out)
}

/// The steps of one export: each runs in a transaction with its own progress row, and
/// is skipped when a previous run committed it.
struct Steps<'a> {
    db: &'a Arc<Db>,
    schema: &'a str,
    done: HashSet<String>,
    out: &'a mut Exported,
}

impl Steps<'_> {
    fn run(
        &mut self,
        step: &str,
        f: impl AsyncFnOnce(&deadpool_postgres::Client) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        if self.done.contains(step) {
            self.out.steps_skipped += 1;
            return Ok(());
        }
        let schema = self.schema;
        self.db
            .run(async |c| {
                c.batch_execute("BEGIN").await.map_err(pg)?;
                let result = async {
                    f(c).await?;
                    c.execute(&format!("INSERT INTO {schema}.progress (step) VALUES ($1)"), &[&step])
                        .await
                        .map_err(pg)?;
                    c.batch_execute("COMMIT").await.map_err(pg)
                }
                .await;
                if result.is_err() {
                    let _ = c.batch_execute("ROLLBACK").await;
                }
                result
            })
            .with_context(|| format!("export step {step}"))?;
        // The fault tests' kill: the process dies between two committed steps.
        atlas_runtime::failpoint::count("export-abort", None);
        self.out.steps_run += 1;
        Ok(())
    }
}

/// A posting's BM25 factor besides the term's idf and weight, as tantivy computes it:
/// `(1 + k1) · tf / (tf + k1 · (1 − b + b · len / avg))`. Stored, so a query reads a
/// term's best postings first.
fn bm25_impact(tf: u32, norm: u32, avg: f64) -> f32 {
    let (tf, norm) = (f64::from(tf), f64::from(norm));
    ((1.0 + BM25_K1) * tf / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * norm / avg.max(f64::MIN_POSITIVE)))) as f32
}

/// The bundle's tables (all `IF NOT EXISTS`: a rerun finds them).
fn tables(schema: &str, dims: usize) -> String {
    format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.progress (step text PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
         CREATE TABLE IF NOT EXISTS {schema}.bundle (library text PRIMARY KEY, manifest jsonb NOT NULL,
           provenance jsonb NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.files (name text PRIMARY KEY, bytes bytea NOT NULL, blake3 text NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.chunks (idx integer PRIMARY KEY, chunk_id text NOT NULL UNIQUE,
           path text NOT NULL, kind text NOT NULL, section text NOT NULL, language text, repo text,
           symbol_kind text, title text NOT NULL, heading text NOT NULL, text text NOT NULL,
           tsv tsvector GENERATED ALWAYS AS (
             setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', heading), 'B')
             || setweight(to_tsvector('english', text), 'C')) STORED);
         CREATE TABLE IF NOT EXISTS {schema}.windows (row integer PRIMARY KEY, chunk integer NOT NULL,
           first boolean NOT NULL, kind text NOT NULL, embedding halfvec({dims}) NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.postings (field smallint NOT NULL, term text NOT NULL,
           chunk integer NOT NULL, kind text NOT NULL, tf integer NOT NULL, norm integer NOT NULL, impact real NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.terms (field smallint NOT NULL, term text NOT NULL, df integer NOT NULL,
           PRIMARY KEY (field, term));
         CREATE TABLE IF NOT EXISTS {schema}.fields (field smallint PRIMARY KEY, name text NOT NULL,
           docs bigint NOT NULL, tokens bigint NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.symbols (name text NOT NULL, kind text NOT NULL, path text NOT NULL,
           language text NOT NULL, start_line integer NOT NULL, end_line integer NOT NULL, chunk_id text NOT NULL,
           signature text);"
    )
}

/// Each chunk's first row.
fn first_rows(window_chunk: &[u32]) -> HashSet<u32> {
    let mut seen = HashSet::new();
    let mut first = HashSet::new();
    for (row, &c) in window_chunk.iter().enumerate() {
        if seen.insert(c) {
            first.insert(row as u32);
        }
    }
    first
}

/// PostgreSQL's text type holds no NUL; a chunk's text never should either, but a
/// bundle is untrusted input.
fn nul_free(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') { s.replace('\0', "\u{fffd}").into() } else { s.into() }
}

/// pgvector's `halfvec` type, as COPY needs it named.
async fn halfvec_type(c: &deadpool_postgres::Client) -> anyhow::Result<Type> {
    let st = c.prepare("SELECT $1::halfvec").await.map_err(pg)?;
    Ok(st.params()[0].clone())
}

/// The export against the bundle: row counts, every stored file's blake3, every text's
/// sha256 (in the database, against the bundle's), and a spread sample of vectors
/// read back bit for bit.
fn verify(
    db: &Db,
    schema: &str,
    dir: &Path,
    bundle: &Bundle,
    manifest: &Manifest,
    vectors: &atlas_runtime::vectors::MappedMatrix,
) -> anyhow::Result<()> {
    let bad = |what: String| {
        anyhow::anyhow!(
            "the export of {} does not match the bundle: {what}; drop it (`atlas export --drop`) and export again",
            dir.display()
        )
    };
    db.run(async |c| {
        let count = async |table: &str| -> anyhow::Result<i64> {
            Ok(c.query_one(&format!("SELECT count(*) FROM {schema}.{table}"), &[]).await.map_err(pg)?.get(0))
        };
        let (chunks, windows) = (count("chunks").await?, count("windows").await?);
        if chunks as usize != manifest.chunk_count || windows as usize != manifest.embedding_rows {
            return Err(bad(format!(
                "{chunks} chunks and {windows} windows, the manifest says {} and {}",
                manifest.chunk_count, manifest.embedding_rows
            )));
        }
        for r in c.query(&format!("SELECT name, bytes, blake3 FROM {schema}.files"), &[]).await.map_err(pg)? {
            let (name, bytes, want): (String, Vec<u8>, String) = (r.get(0), r.get(1), r.get(2));
            let listed = manifest.artifact(&name).map(|a| a.blake3.as_str()).unwrap_or(want.as_str());
            if atlas_runtime::hash::blake3_bytes(&bytes) != listed {
                return Err(bad(format!("file {name} differs")));
            }
        }
        let rows = c
            .query(
                &format!(
                    "SELECT idx, encode(sha256(convert_to(text, 'UTF8')), 'hex') FROM {schema}.chunks ORDER BY idx"
                ),
                &[],
            )
            .await
            .map_err(pg)?;
        for r in rows {
            let (i, got): (i32, String) = (r.get(0), r.get(1));
            if atlas_runtime::hash::sha256_bytes(nul_free(bundle.text(i as usize)).as_bytes()) != got {
                return Err(bad(format!("chunk {i}'s text differs")));
            }
        }
        let step = (vectors.rows / VECTOR_SAMPLE).max(1);
        let sample: Vec<i32> = (0..vectors.rows).step_by(step).map(|r| r as i32).collect();
        for r in c
            .query(&format!("SELECT row, embedding FROM {schema}.windows WHERE row = ANY($1)"), &[&sample])
            .await
            .map_err(pg)?
        {
            let (row, got): (i32, HalfVector) = (r.get(0), r.get(1));
            if HalfVector::from_f32_slice(&vectors.row(row as usize)).as_slice() != got.as_slice() {
                return Err(bad(format!("embedding row {row} differs")));
            }
        }
        Ok(())
    })
}

/// The exported bundles: library, complete or not, chunks, bytes, when.
pub fn list(url: &str) -> anyhow::Result<Vec<Listed>> {
    let db = Db::connect(url, 1, None)?;
    db.run(async |c| {
        if !catalog_exists(c).await? {
            return Ok(Vec::new());
        }
        let rows = c
            .query(
                &format!(
                    "SELECT library, complete, chunks, coalesce(bytes, 0), coalesce(finished, started)::text                      FROM {CATALOG} ORDER BY library"
                ),
                &[],
            )
            .await
            .map_err(pg)?;
        Ok(rows
            .iter()
            .map(|r| Listed { library: r.get(0), complete: r.get(1), chunks: r.get(2), bytes: r.get(3), at: r.get(4) })
            .collect())
    })
}

/// One row of `atlas export --list`.
#[derive(Debug, serde::Serialize)]
pub struct Listed {
    pub library: String,
    pub complete: bool,
    pub chunks: i32,
    pub bytes: i64,
    pub at: String,
}

/// Drops `library` (`name@version`): its schema and its catalog row, in one transaction.
pub fn drop_bundle(url: &str, library: &str) -> anyhow::Result<bool> {
    let schema = schema_ident(library)?;
    let db = Db::connect(url, 1, None)?;
    db.run(async |c| {
        if !catalog_exists(c).await? {
            return Ok(false);
        }
        c.batch_execute("BEGIN").await.map_err(pg)?;
        let n = c.execute(&format!("DELETE FROM {CATALOG} WHERE library = $1"), &[&library]).await.map_err(pg)?;
        c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; COMMIT")).await.map_err(pg)?;
        Ok(n > 0)
    })
}
