//! `atlas export BUNDLE --to postgres://…`: the bundle into a schema named
//! `name@version`, step by step, each step one transaction that records itself in the
//! schema's `progress` table. A killed export reruns the steps it had not committed
//! and ends in the same state; a finished one is checked against the bundle (counts,
//! the files' blake3, every text's sha256, a sample of vectors) before the catalog
//! marks it complete, and only complete exports are served.
//!
//! Tables (docs/scaling.md): `bundle` (manifest, provenance, signature), `files` (the
//! bundle's small files, byte for byte), `chunks` (the fields filters use and the
//! text), `windows` (one halfvec per embedding row, HNSW), `postings` (each term's, in
//! blocks best first), `terms` and `fields` (the BM25 statistics of the bundle's own
//! tantivy index: keyword search through the database scores as the local index does),
//! `symbols`.
//!
//! Here the plan of an export, its tables and the catalog (`--list`, `--drop`); the
//! load in `load.rs`, its steps and progress in `steps.rs`, the check in `verify.rs`.

mod load;
mod steps;
mod verify;

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, bail};
use atlas_runtime::exit::UsageError;
use atlas_runtime::{Bundle, OpenOptions};
use deadpool_postgres::Client;

use super::{CATALOG, Db, EXPORT_STATEMENT_TIMEOUT_MS, catalog_exists, db_error, pg, schema_ident};
use load::{Load, Source, bundle_row, files, symbols, terms};
use steps::Steps;
use verify::verify;

/// Chunks and windows per COPY (and per committed step); postings per batch read.
const CHUNK_BATCH: usize = 2_000;
const WINDOW_BATCH: usize = 5_000;
const POSTING_BATCH: usize = 200_000;
/// Steps run at once, each on its own connection (and server process): the load's
/// COPYs and the index builds are each one server process's work.
const LANES: usize = 2;
/// `maintenance_work_mem` for each index build but HNSW's (whose graph sets its own).
const INDEX_MEMORY_MB: usize = 256;

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
    // The manifest alone first: an export already complete needs nothing more.
    let listed = atlas_runtime::manifest::read_manifest(dir).with_context(|| format!("reading {}", dir.display()))?;
    listed.check_fields().map_err(|why| anyhow::anyhow!("{}'s manifest: {why}", dir.display()))?;
    let library = listed.library();
    let schema = schema_ident(&library)?;
    let db = Db::connect(url, LANES, Some(EXPORT_STATEMENT_TIMEOUT_MS))?;
    // The manifest's bytes, read once: stored as they are, and their blake3 tells two
    // builds of one version apart.
    let raw_manifest = std::fs::read(dir.join("manifest.json")).context("reading manifest.json")?;
    let digest = atlas_runtime::hash::blake3_bytes(&raw_manifest);
    let mut out = Exported { schema: library.clone(), ..Exported::default() };
    // The catalog and this bundle's tables, or what a killed run left of them.
    let state = db.run(async |c| {
        c.batch_execute(&format!(
            "CREATE EXTENSION IF NOT EXISTS vector;
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
    // Every file checked against the manifest, and the bundle opened, at once: the
    // export goes on only when both succeed.
    let (manifest, bundle) = std::thread::scope(|s| {
        let opened = s.spawn(|| Bundle::open(dir, OpenOptions { keyword_only: true, ..OpenOptions::default() }));
        let manifest = atlas_runtime::manifest::verify(dir).with_context(|| format!("checking {}", dir.display()));
        let bundle = opened.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        anyhow::Ok((manifest?, bundle.with_context(|| format!("opening {}", dir.display()))?))
    })?;
    if bundle.library() != library {
        bail!("{} changed while it was being exported; export it again", dir.display());
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
        // An export an earlier Atlas began holds postings a row each: not resumed.
        let blocks = super::index::layout(c, &library).await? == super::index::Layout::Blocks;
        Ok(blocks)
    })?
    .then_some(())
    .ok_or_else(|| {
        UsageError(format!(
            "{library} in {} is an unfinished export by an earlier Atlas; `atlas export --drop {library} --to …` first",
            db.label
        ))
    })?;
    let done: HashSet<String> = db.run(async |c| {
        let rows = c.query(&format!("SELECT step FROM {schema}.progress"), &[]).await.map_err(pg)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    })?;
    let steps = Steps::new(&db, &schema, done);

    let meta: atlas_runtime::vectors::EmbeddingsMeta =
        serde_json::from_slice(&atlas_runtime::manifest::read_checked(dir, &manifest, "embeddings.json")?)?;
    let vectors = atlas_runtime::vectors::MappedMatrix::open(&dir.join("embeddings.npy"))?;
    let (searcher, stats) = atlas_runtime::text_index::field_stats(&dir.join("tantivy"))
        .map_err(|e| anyhow::anyhow!("reading the bundle's tantivy index: {e}"))?;
    let src = Source {
        schema: &schema,
        bundle: &bundle,
        window_chunk: &meta.window_chunk,
        first: first_rows(&meta.window_chunk),
        vectors: &vectors,
        searcher: &searcher,
        stats: &stats,
    };
    // The load and the indexes: every batch a step of its own. The windows first; then
    // the HNSW build, the longest step, in one lane while the other writes the
    // manifest's row and the small files, loads the chunks and the postings and builds
    // the rest (without HNSW, both lanes load). pgvector builds HNSW with the server's
    // parallel maintenance workers (two by default: on two cores the build and the other
    // lane share them), and slows several times once its graph outgrows
    // `maintenance_work_mem` (64 MB by default; 200,000 windows of 384 dimensions need
    // about 400 MB): twice the vectors' f16 bytes, at most 2 GB, for that transaction.
    let src = &src;
    let load = |l: Load| (l.step(&stats), async move |c: &Client| src.load(l, c).await);
    steps.all("windows", (0..vectors.rows).step_by(WINDOW_BATCH).map(|r| load(Load::Windows(r))))?;
    let mut loads: Vec<Load> = (0..bundle.chunks().len()).step_by(CHUNK_BATCH).map(Load::Chunks).collect();
    for field in 0..stats.len() {
        loads.extend((0..searcher.segment_readers().len()).map(|seg| Load::Postings { field, seg }));
    }
    let hnsw = vector_index == VectorIndex::Hnsw;
    let hnsw_mb = (vectors.rows * dims * 2 * 2 / (1 << 20)).clamp(64, 2048);
    let hnsw_sql = format!(
        "SET LOCAL maintenance_work_mem = '{hnsw_mb}MB';
         CREATE INDEX IF NOT EXISTS windows_hnsw ON {schema}.windows USING hnsw (embedding halfvec_cosine_ops)"
    );
    let index = |name: &str, def: &str| {
        let sql = format!(
            "SET LOCAL maintenance_work_mem = '{INDEX_MEMORY_MB}MB'; CREATE INDEX IF NOT EXISTS {name} ON {schema}.{def}"
        );
        (format!("index:{name}"), async move |c: &Client| c.batch_execute(&sql).await.map_err(pg))
    };
    // Statistics for the columns that queries filter and join on only: sampling the
    // postings' arrays or the texts costs seconds and tells the planner nothing.
    let analyze = |tables: &'static [(&'static str, &'static str)]| {
        let sql: String = tables.iter().map(|(t, cols)| format!("ANALYZE {schema}.{t} ({cols}); ")).collect();
        let names: Vec<&str> = tables.iter().map(|t| t.0).collect();
        (format!("analyze:{}", names.join(",")), async move |c: &Client| c.batch_execute(&sql).await.map_err(pg))
    };
    let vectors_lane = async {
        if hnsw {
            steps
                .step("index:windows_hnsw".into(), async |c: &Client| {
                    c.batch_execute(&hnsw_sql).await.map_err(|e| {
                        anyhow::anyhow!(
                            "building the HNSW index: {}; if the server's log shows an illegal instruction, its \
                             pgvector was built for a newer CPU: export with `--vector-index none`",
                            db_error(&e)
                        )
                    })
                })
                .await?;
        }
        let (name, f) = analyze(&[("windows", "row, chunk, first, kind")]);
        steps.step(name, f).await
    };
    let text_lane = async {
        steps
            .step("bundle".into(), async |c: &Client| {
                bundle_row(c, &schema, &library, &raw_manifest, &provenance).await
            })
            .await?;
        steps
            .step("files".into(), async |c: &Client| files(c, &schema, dir, &manifest, &raw_manifest, &digest).await)
            .await?;
        let lanes = if hnsw { 1 } else { LANES };
        steps.par(loads.iter().map(|&l| load(l)), lanes).await?;
        steps.step("terms".into(), async |c: &Client| terms(c, &schema, &stats).await).await?;
        steps.step("symbols".into(), async |c: &Client| symbols(c, &schema, &bundle).await).await?;
        for (name, def) in [
            ("windows_chunk", "windows (chunk)"),
            ("postings_term", "postings (field, term, block, kind)"),
            ("symbols_name", "symbols (name)"),
        ] {
            let (name, f) = index(name, def);
            steps.step(name, f).await?;
        }
        let (name, f) = analyze(&[
            ("chunks", "idx, chunk_id, path, kind, section, language, repo, symbol_kind"),
            ("postings", "field, term, kind, seg, block"),
            ("terms", "field, term, df"),
        ]);
        steps.step(name, f).await?;
        // The export against the bundle, while the HNSW build (which it does not
        // read) goes on: every table it checks is loaded.
        let t = Instant::now();
        verify(&db.client().await?, &schema, dir, &bundle, &manifest, &vectors).await?;
        steps.progress.line(&format!("verify: {:.1} s", t.elapsed().as_secs_f64()));
        Ok(())
    };
    // The manifest's row and the files, the loads, terms and symbols, three B-trees,
    // two ANALYZEs, HNSW.
    let count = 2 + loads.len() + 2 + 3 + 2 + usize::from(hnsw);
    steps.phase("load and indexes", count, futures_util::future::try_join(vectors_lane, text_lane))?;
    (out.steps_run, out.steps_skipped) = (steps.run.get(), steps.skipped.get());
    steps.progress.finish();
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

/// The bundle's tables (all `IF NOT EXISTS`: a rerun finds them). The postings' arrays
/// and the texts are stored uncompressed: pglz on the texts over 2 kB (a third of
/// them) doubled the chunks' COPY on the server, for a database 1.2× the bundle's size
/// instead of 1.05× (docs/benchmarks.md).
fn tables(schema: &str, dims: usize) -> String {
    format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.progress (step text PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
         CREATE TABLE IF NOT EXISTS {schema}.bundle (library text PRIMARY KEY, manifest jsonb NOT NULL,
           provenance jsonb NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.files (name text PRIMARY KEY, bytes bytea NOT NULL, blake3 text NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.chunks (idx integer PRIMARY KEY, chunk_id text NOT NULL UNIQUE,
           path text NOT NULL, kind text NOT NULL, section text NOT NULL, language text, repo text,
           symbol_kind text, title text NOT NULL, heading text NOT NULL, text text NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.windows (row integer PRIMARY KEY, chunk integer NOT NULL,
           first boolean NOT NULL, kind text NOT NULL, embedding halfvec({dims}) NOT NULL);
         CREATE TABLE IF NOT EXISTS {schema}.postings (field smallint NOT NULL, term text NOT NULL,
           kind text NOT NULL, seg smallint NOT NULL, block integer NOT NULL, chunks integer[] NOT NULL,
           impacts real[] NOT NULL);
         ALTER TABLE {schema}.postings ALTER COLUMN chunks SET STORAGE EXTERNAL,
           ALTER COLUMN impacts SET STORAGE EXTERNAL;
         ALTER TABLE {schema}.chunks ALTER COLUMN text SET STORAGE EXTERNAL;
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
