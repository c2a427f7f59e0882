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

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use atlas_runtime::exit::UsageError;
use atlas_runtime::manifest::Manifest;
use atlas_runtime::{Bundle, OpenOptions};
use deadpool_postgres::Client;
use pgvector::HalfVector;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

use super::{
    BM25_B, BM25_K1, CATALOG, Db, EXPORT_STATEMENT_TIMEOUT_MS, POSTING_BLOCK, catalog_exists, db_error, pg,
    schema_ident,
};

/// Chunks and windows per COPY (and per committed step); postings per batch read.
const CHUNK_BATCH: usize = 2_000;
const WINDOW_BATCH: usize = 5_000;
const POSTING_BATCH: usize = 200_000;
/// Steps run at once, each on its own connection (and server process): the load's
/// COPYs and the index builds are each one server process's work.
const LANES: usize = 2;
/// `maintenance_work_mem` for each index build but HNSW's (whose graph sets its own).
const INDEX_MEMORY_MB: usize = 256;
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

/// What the load reads from.
struct Source<'a> {
    schema: &'a str,
    bundle: &'a Bundle,
    window_chunk: &'a [u32],
    first: HashSet<u32>,
    vectors: &'a atlas_runtime::vectors::MappedMatrix,
    searcher: &'a atlas_runtime::text_index::Searcher,
    stats: &'a [atlas_runtime::text_index::FieldStats],
}

/// One step of the load.
#[derive(Debug, Clone, Copy)]
enum Load {
    /// The chunks from this one, [`CHUNK_BATCH`] of them.
    Chunks(usize),
    /// The windows from this row, [`WINDOW_BATCH`] of them.
    Windows(usize),
    /// One field's postings in one segment of the index.
    Postings { field: usize, seg: usize },
}

impl Load {
    /// The step's name in `progress`.
    fn step(self, stats: &[atlas_runtime::text_index::FieldStats]) -> String {
        match self {
            Load::Chunks(start) => format!("chunks:{start}"),
            Load::Windows(start) => format!("windows:{start}"),
            Load::Postings { field, seg } => format!("postings:{}:{seg}", stats[field].field),
        }
    }
}

impl Source<'_> {
    async fn load(&self, what: Load, c: &Client) -> anyhow::Result<()> {
        match what {
            Load::Chunks(start) => self.chunks(start, c).await,
            Load::Windows(start) => self.windows(start, c).await,
            Load::Postings { field, seg } => self.postings(field, seg, c).await,
        }
    }

    fn kind(&self, chunk: u32) -> &str {
        self.bundle.chunks().get(chunk as usize).map_or("", |c| c.kind.as_str())
    }

    async fn chunks(&self, start: usize, c: &Client) -> anyhow::Result<()> {
        let all = self.bundle.chunks();
        let end = (start + CHUNK_BATCH).min(all.len());
        let sink = c
            .copy_in(&format!(
                "COPY {}.chunks (idx, chunk_id, path, kind, section, language, repo, symbol_kind, title, heading, \
                 text) FROM STDIN BINARY",
                self.schema
            ))
            .await
            .map_err(pg)?;
        let mut types = vec![Type::INT4];
        types.resize(11, Type::TEXT);
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
                &nul_free(self.bundle.text(i)),
            ];
            w.as_mut().write(&row).await.map_err(pg)?;
        }
        w.finish().await.map_err(pg)?;
        Ok(())
    }

    async fn windows(&self, start: usize, c: &Client) -> anyhow::Result<()> {
        let end = (start + WINDOW_BATCH).min(self.vectors.rows);
        let halfvec = halfvec_type(c).await?;
        let sink = c
            .copy_in(&format!("COPY {}.windows (row, chunk, first, kind, embedding) FROM STDIN BINARY", self.schema))
            .await
            .map_err(pg)?;
        let w = BinaryCopyInWriter::new(sink, &[Type::INT4, Type::INT4, Type::BOOL, Type::TEXT, halfvec]);
        let mut w = std::pin::pin!(w);
        for row in start..end {
            let chunk = self.window_chunk[row];
            let v = HalfVector::from_f32_slice(&self.vectors.row(row));
            let (r, ch, f) = (row as i32, chunk as i32, self.first.contains(&(row as u32)));
            w.as_mut().write(&[&r, &ch, &f, &self.kind(chunk), &v]).await.map_err(pg)?;
        }
        w.finish().await.map_err(pg)?;
        Ok(())
    }

    /// One field's postings in one segment, through one COPY, in blocks ([`blocks`]).
    async fn postings(&self, field: usize, seg: usize, c: &Client) -> anyhow::Result<()> {
        let sink = c
            .copy_in(&format!(
                "COPY {}.postings (field, term, kind, seg, block, chunks, impacts) FROM STDIN BINARY",
                self.schema
            ))
            .await
            .map_err(pg)?;
        let types = [Type::INT2, Type::TEXT, Type::TEXT, Type::INT2, Type::INT4, Type::INT4_ARRAY, Type::FLOAT4_ARRAY];
        let w = BinaryCopyInWriter::new(sink, &types);
        let mut w = std::pin::pin!(w);
        // The index is read on a blocking thread, a batch of terms at a time, while the
        // previous batch is written: memory stays at two batches.
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let (searcher, stats) = (self.searcher.clone(), self.stats[field]);
        let reader = tokio::task::spawn_blocking(move || {
            atlas_runtime::text_index::postings(&searcher, stats.field, seg, POSTING_BATCH, |b| {
                tx.blocking_send(b).map_err(|_| anyhow::anyhow!("the export stopped"))
            })
        });
        let (f, seg) = (field as i16, seg as i16);
        let avg = stats.tokens as f64 / stats.docs.max(1) as f64;
        while let Some(batch) = rx.recv().await {
            for t in batch {
                for (kind, blocks) in blocks(&t.docs, avg, |chunk| self.kind(chunk)) {
                    for (block, (chunks, impacts)) in blocks.into_iter().enumerate() {
                        let block = block as i32;
                        w.as_mut().write(&[&f, &t.term, &kind, &seg, &block, &chunks, &impacts]).await.map_err(pg)?;
                    }
                }
            }
        }
        reader.await.context("reading the bundle's index")??;
        w.finish().await.map_err(pg)?;
        Ok(())
    }
}

/// The steps of one export: each runs in a transaction with its own progress row, and
/// is skipped when a previous run committed it.
struct Steps<'a> {
    db: &'a Arc<Db>,
    schema: &'a str,
    done: HashSet<String>,
    run: Cell<usize>,
    skipped: Cell<usize>,
    progress: Progress,
    /// Per kind of step (a load step's name before `:`) in the current call: steps
    /// run and the time they took, summed over lanes.
    work: RefCell<Vec<(String, usize, Duration)>>,
}

impl<'a> Steps<'a> {
    fn new(db: &'a Arc<Db>, schema: &'a str, done: HashSet<String>) -> Self {
        let progress = Progress::new();
        Steps { db, schema, done, run: Cell::new(0), skipped: Cell::new(0), progress, work: RefCell::default() }
    }

    /// Each of `steps`, [`LANES`] at a time (one connection and one server process
    /// each); the first error stops the others (their transactions roll back).
    fn all<F: AsyncFnOnce(&Client) -> anyhow::Result<()>>(
        &self,
        phase: &str,
        steps: impl ExactSizeIterator<Item = (String, F)>,
    ) -> anyhow::Result<()> {
        let n = steps.len();
        self.phase(phase, n, self.par(steps, LANES))
    }

    /// `work`, made of `steps` steps, reported as one phase.
    fn phase<T>(&self, phase: &str, steps: usize, work: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<()> {
        self.progress.more(steps);
        let t = Instant::now();
        self.db.block_on(work)?;
        self.report(phase, t);
        Ok(())
    }

    /// Each of `steps`, `lanes` at a time.
    async fn par<F: AsyncFnOnce(&Client) -> anyhow::Result<()>>(
        &self,
        steps: impl Iterator<Item = (String, F)>,
        lanes: usize,
    ) -> anyhow::Result<()> {
        use futures_util::{StreamExt as _, TryStreamExt as _};
        futures_util::stream::iter(steps.map(|(step, f)| self.step(step, f)))
            .buffer_unordered(lanes)
            .try_collect()
            .await
    }

    /// One line for the call that began at `t`: its wall time and, per kind of step
    /// when there are several, the steps' own time.
    fn report(&self, phase: &str, t: Instant) {
        let work = self.work.take();
        let mut line = format!("{phase}: {:.1} s", t.elapsed().as_secs_f64());
        if work.len() > 1 || work.first().is_some_and(|w| w.1 > 1) {
            let parts: Vec<String> =
                work.iter().map(|(k, n, d)| format!("{k} {n} × {:.1} s", d.as_secs_f64())).collect();
            line.push_str(&format!(" ({})", parts.join(", ")));
        }
        if work.is_empty() {
            line.push_str(" (done before)");
        }
        self.progress.line(&line);
    }

    async fn step(&self, step: String, f: impl AsyncFnOnce(&Client) -> anyhow::Result<()>) -> anyhow::Result<()> {
        if self.done.contains(&step) {
            self.skipped.set(self.skipped.get() + 1);
            self.progress.done(&step);
            return Ok(());
        }
        let schema = self.schema;
        let started = Instant::now();
        let c = self.db.client().await?;
        async {
            c.batch_execute("BEGIN").await.map_err(pg)?;
            let result = async {
                f(&c).await?;
                c.execute(&format!("INSERT INTO {schema}.progress (step) VALUES ($1)"), &[&step]).await.map_err(pg)?;
                c.batch_execute("COMMIT").await.map_err(pg)
            }
            .await;
            if result.is_err() {
                let _ = c.batch_execute("ROLLBACK").await;
            }
            result
        }
        .await
        .with_context(|| format!("export step {step}"))?;
        // The fault tests' kill: the process dies between two committed steps.
        atlas_runtime::failpoint::count("export-abort", None);
        self.run.set(self.run.get() + 1);
        let kind = match step.split_once(':') {
            Some((k, _)) if k != "index" => k.to_owned(),
            _ => step.clone(),
        };
        let mut work = self.work.borrow_mut();
        match work.iter_mut().find(|w| w.0 == kind) {
            Some(w) => (w.1, w.2) = (w.1 + 1, w.2 + started.elapsed()),
            None => work.push((kind, 1, started.elapsed())),
        }
        drop(work);
        self.progress.done(&step);
        Ok(())
    }
}

/// The export's progress on stderr: a bar over its steps on a terminal, and in any
/// case one line per phase with its time.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new() -> Self {
        let bar = atlas_runtime::progress::shown().then(|| {
            let b = indicatif::ProgressBar::new(0);
            b.set_style(
                indicatif::ProgressStyle::with_template("export [{bar:30}] {pos}/{len} steps {elapsed} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b
        });
        Progress { bar }
    }

    fn more(&self, steps: usize) {
        if let Some(b) = &self.bar {
            b.inc_length(steps as u64);
        }
    }

    fn done(&self, step: &str) {
        if let Some(b) = &self.bar {
            b.inc(1);
            b.set_message(step.to_owned());
        }
    }

    fn line(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(format!("export: {msg}")),
            None => eprintln!("export: {msg}"),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The manifest's row: the manifest and where the bundle came from, as JSON.
async fn bundle_row(
    c: &Client,
    schema: &str,
    library: &str,
    raw_manifest: &[u8],
    provenance: &Provenance,
) -> anyhow::Result<()> {
    let json: serde_json::Value = serde_json::from_slice(raw_manifest)?;
    let prov = serde_json::to_value(provenance)?;
    c.execute(
        &format!(
            "INSERT INTO {schema}.bundle (library, manifest, provenance) VALUES ($1, $2::text::jsonb, $3::text::jsonb)"
        ),
        &[&library, &json.to_string(), &prov.to_string()],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// The bundle's small files byte for byte (each read checked against the manifest),
/// and the manifest's own bytes; those held as tables stay out ([`AS_TABLES`]).
async fn files(
    c: &Client,
    schema: &str,
    dir: &Path,
    manifest: &Manifest,
    raw_manifest: &[u8],
    digest: &str,
) -> anyhow::Result<()> {
    for a in &manifest.artifacts {
        if a.path.starts_with("tantivy/") || AS_TABLES.iter().any(|t| a.path == *t || a.path.starts_with(t)) {
            continue;
        }
        let bytes = atlas_runtime::manifest::read_checked(dir, manifest, &a.path)?;
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
}

/// The term table from the loaded postings (each term's document frequency), and
/// each field's statistics.
async fn terms(c: &Client, schema: &str, stats: &[atlas_runtime::text_index::FieldStats]) -> anyhow::Result<()> {
    c.batch_execute(&format!(
        "INSERT INTO {schema}.terms (field, term, df)
         SELECT field, term, sum(cardinality(chunks)) FROM {schema}.postings GROUP BY 1, 2"
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
}

/// The symbol table, a thousand definitions a statement.
async fn symbols(c: &Client, schema: &str, bundle: &Bundle) -> anyhow::Result<()> {
    let defs = bundle.symbols().defs.clone();
    for chunk in defs.chunks(1_000) {
        let tx_sql = format!(
            "INSERT INTO {schema}.symbols (name, kind, path, language, start_line, end_line, chunk_id, signature) \
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[], \
             $8::text[])"
        );
        let col = |f: fn(&atlas_runtime::symbols::Definition) -> String| chunk.iter().map(f).collect::<Vec<_>>();
        let lines =
            |f: fn(&atlas_runtime::symbols::Definition) -> u32| chunk.iter().map(|d| f(d) as i32).collect::<Vec<i32>>();
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
}

/// A posting's BM25 factor besides the term's idf and weight, as tantivy computes it:
/// `(1 + k1) · tf / (tf + k1 · (1 − b + b · len / avg))`. Stored, so a query reads a
/// term's best postings first.
fn bm25_impact(tf: u32, norm: u32, avg: f64) -> f32 {
    let (tf, norm) = (f64::from(tf), f64::from(norm));
    ((1.0 + BM25_K1) * tf / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * norm / avg.max(f64::MIN_POSITIVE)))) as f32
}

/// One stored block: chunks and their BM25 factors, best first.
type Block = (Vec<i32>, Vec<f32>);

/// One term's postings in one segment as stored: per kind, the chunks and their BM25
/// factors best first (ties by chunk), in blocks of [`POSTING_BLOCK`]. A query reads a
/// term's first blocks: per kind and segment they hold its best postings, so their
/// union holds the best [`POSTING_BLOCK`] under any kind filter.
fn blocks<'k>(docs: &[(u32, u32, u32)], avg: f64, kind_of: impl Fn(u32) -> &'k str) -> Vec<(&'k str, Vec<Block>)> {
    let mut by_kind: Vec<(&str, Vec<(f32, u32)>)> = Vec::new();
    for &(chunk, tf, norm) in docs {
        let (kind, impact) = (kind_of(chunk), bm25_impact(tf, norm, avg));
        match by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, v)) => v.push((impact, chunk)),
            None => by_kind.push((kind, vec![(impact, chunk)])),
        }
    }
    by_kind
        .into_iter()
        .map(|(kind, mut v)| {
            v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let blocks = v
                .chunks(POSTING_BLOCK)
                .map(|b| (b.iter().map(|p| p.1 as i32).collect(), b.iter().map(|p| p.0).collect()))
                .collect();
            (kind, blocks)
        })
        .collect()
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

/// PostgreSQL's text type holds no NUL; a chunk's text never should either, but a
/// bundle is untrusted input.
fn nul_free(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') { s.replace('\0', "\u{fffd}").into() } else { s.into() }
}

/// pgvector's `halfvec` type, as COPY needs it named.
async fn halfvec_type(c: &Client) -> anyhow::Result<Type> {
    let st = c.prepare("SELECT $1::halfvec").await.map_err(pg)?;
    Ok(st.params()[0].clone())
}

/// The export against the bundle: row counts, every stored file's blake3, every text's
/// sha256 (in the database, against the bundle's), and a spread sample of vectors
/// read back bit for bit.
async fn verify(
    c: &Client,
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
    {
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
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_s_first_block_holds_its_best_postings_and_the_blocks_hold_them_all() {
        // Chunks 0..5000: even ones docs, odd ones code; tf rises with the chunk.
        let docs: Vec<(u32, u32, u32)> = (0..5_000).map(|c| (c, 1 + c % 97, 40)).collect();
        let kind_of = |c: u32| if c.is_multiple_of(2) { "docs" } else { "code" };
        let stored = blocks(&docs, 40.0, kind_of);
        assert_eq!(stored.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["docs", "code"]);
        for (kind, blocks) in &stored {
            let sizes: Vec<usize> = blocks.iter().map(|b| b.0.len()).collect();
            assert_eq!(sizes, [POSTING_BLOCK, 500], "{kind}");
            let impacts: Vec<f32> = blocks.iter().flat_map(|b| b.1.clone()).collect();
            assert!(impacts.is_sorted_by(|a, b| a >= b), "{kind}: best first");
            assert!(blocks.iter().flat_map(|b| &b.0).all(|&c| kind_of(c as u32) == *kind));
        }
        // The best POSTING_BLOCK of all kinds are in the first blocks.
        let mut all: Vec<(f32, u32)> = docs.iter().map(|&(c, tf, n)| (bm25_impact(tf, n, 40.0), c)).collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let first: HashSet<i32> = stored.iter().flat_map(|(_, b)| b[0].0.clone()).collect();
        assert!(all.iter().take(POSTING_BLOCK).all(|&(_, c)| first.contains(&(c as i32))));
    }
}
