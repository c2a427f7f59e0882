#![allow(clippy::print_stdout)] // a report printer
//! Search latency, readiness and memory on a bundle.
//!
//! `search_bench <bundle> <golden.jsonl> [--synthetic N <out dir>]`
//!
//! With `--synthetic N DIR`, writes a bundle of N chunks to DIR made from the given
//! bundle's chunks (copies with perturbed vectors and a marker word each), with an
//! HNSW index, and exits; benchmark it with a second run. `cargo xtask bench search` runs both.
//! With `--many K N DIR`, writes K bundles of N chunks (distinct names) under DIR; a
//! second run with `BENCH_PHASE=many` and the same arguments opens them all in one
//! process, as `atlas serve rag --bundle …` does, and reports readiness and RSS.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use atlas_runtime::encoder::EncoderOptions;
use atlas_runtime::manifest::{Artifact, Manifest};
use atlas_runtime::search::Fusion;
use atlas_runtime::{Bundle, Mode, OpenOptions, SearchOptions};
use half::f16;

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res {
    let args: Vec<String> = std::env::args().skip(1).collect();
    const USAGE: &str = "usage: search_bench <bundle> <golden.jsonl> [--synthetic N DIR | --many K N DIR]";
    let arg = |i: usize| args.get(i).map(String::as_str).ok_or(USAGE);
    let [bundle, golden, ..] = args.as_slice() else { return Err(USAGE.into()) };
    let bundle = PathBuf::from(bundle);
    let queries: Vec<String> = atlas_runtime::eval::parse_golden(&std::fs::read_to_string(golden)?)?
        .into_iter()
        .filter(|q| !q.is_negative())
        .map(|q| q.query)
        .collect();
    let Some(first) = queries.first() else { return Err(format!("{golden}: no answerable question to time").into()) };
    if args.get(2).map(String::as_str) == Some("--many") {
        let (k, n): (usize, usize) = (arg(3)?.parse()?, arg(4)?.parse()?);
        let out = PathBuf::from(arg(5)?);
        let dirs: Vec<PathBuf> = (0..k).map(|i| out.join(i.to_string())).collect();
        if std::env::var("BENCH_PHASE").as_deref() == Ok("many") {
            return many(&dirs, first);
        }
        for (i, d) in dirs.iter().enumerate() {
            synthesize(&bundle, n, d, &format!("synthetic-{n}-{i}"))?;
        }
        println!("{k} synthetic bundles of {n} chunks written");
        return Ok(());
    }
    let dir = if args.get(2).map(String::as_str) == Some("--synthetic") {
        let n: usize = arg(3)?.parse()?;
        let out = PathBuf::from(arg(4)?);
        let t = Instant::now();
        synthesize(&bundle, n, &out, &format!("synthetic-{n}"))?;
        println!("synthetic bundle: {n} chunks written in {:.1}s", t.elapsed().as_secs_f64());
        return Ok(());
    } else {
        bundle
    };
    let mode = std::env::var("BENCH_PHASE").unwrap_or_default();
    if mode == "ready" {
        return ready(&dir, first);
    }
    if mode == "keyword" {
        // Keyword p50 alone, on one line, for the side-by-side with rank_bm25.
        let b = Bundle::open(&dir, OpenOptions { keyword_only: true, ..OpenOptions::default() })?;
        let opts = SearchOptions { mode: Mode::Keyword, ..SearchOptions::default() };
        let mut times = Vec::new();
        for _ in 0..5 {
            for q in &queries {
                let t = Instant::now();
                b.search(q, &opts)?;
                times.push(ms(t.elapsed()));
            }
        }
        let (p50, p95) = percentiles(times);
        println!("{p50:.4} {p95:.4}");
        return Ok(());
    }
    latency(&dir, &queries)
}

/// Open → first keyword hit and open → first hybrid hit (model load included), in
/// this process: the caller runs it once with a cold page cache, once warm.
fn ready(dir: &Path, q: &str) -> Res {
    let t = Instant::now();
    let b = Bundle::open(dir, OpenOptions::default())?;
    let opened = t.elapsed();
    println!("RSS after open: {}", rss());
    b.search(q, &SearchOptions { mode: Mode::Keyword, ..SearchOptions::default() })?;
    let keyword = t.elapsed();
    b.search(q, &SearchOptions::default())?;
    let hybrid = t.elapsed();
    println!(
        "ready: open {:.0} ms, first keyword result {:.0} ms, first hybrid result {:.0} ms (model load included)",
        ms(opened),
        ms(keyword),
        ms(hybrid)
    );
    println!("RSS after the first hybrid search: {}", rss());
    for q in std::iter::repeat_n(q, 50) {
        b.search(q, &SearchOptions::default())?;
    }
    println!("RSS after 50 more hybrid searches: {}", rss());
    Ok(())
}

/// Several bundles opened with one set of options (one shared query model), as a
/// server of several libraries opens them: readiness, then RSS after a hybrid
/// search on each.
fn many(dirs: &[PathBuf], q: &str) -> Res {
    let t = Instant::now();
    let opts = OpenOptions::default();
    let bundles: Vec<Bundle> = dirs.iter().map(|d| Bundle::open(d, opts.clone())).collect::<Result<_, _>>()?;
    let opened = t.elapsed();
    for b in &bundles {
        b.search(q, &SearchOptions { mode: Mode::Keyword, ..SearchOptions::default() })?;
    }
    let keyword = t.elapsed();
    for b in &bundles {
        b.search(q, &SearchOptions::default())?;
    }
    let hybrid = t.elapsed();
    println!(
        "{} bundles of {} chunks: open {:.0} ms, a keyword result from each {:.0} ms, a hybrid result from each {:.0} ms (model load included); query models loaded: {}",
        bundles.len(),
        bundles[0].chunk_count(),
        ms(opened),
        ms(keyword),
        ms(hybrid),
        opts.models.loaded()
    );
    for _ in 0..10 {
        for b in &bundles {
            b.search(q, &SearchOptions::default())?;
        }
    }
    println!("RSS after hybrid searches on every bundle: {}", rss());
    Ok(())
}

/// VmRSS and VmHWM (peak) of this process.
fn rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field =
        |k: &str| status.lines().find(|l| l.starts_with(k)).map(|l| l[k.len()..].trim().to_owned()).unwrap_or_default();
    format!("now {}, peak {}", field("VmRSS:"), field("VmHWM:"))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[(v.len() * 95 / 100).min(v.len() - 1)])
}

fn latency(dir: &Path, queries: &[String]) -> Res {
    let rounds = 5;
    // BENCH_EXACT_MAX_ROWS overrides the exact-scan threshold (to time the scan at 50k).
    let exact_max_rows = std::env::var("BENCH_EXACT_MAX_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(atlas_runtime::bundle::EXACT_MAX_ROWS);
    for (label, spinning) in [("spinning off (default)", false), ("spinning on", true)] {
        let embed = EncoderOptions { spinning, ..EncoderOptions::query() };
        let b = Bundle::open(dir, OpenOptions { embed, exact_max_rows, ..OpenOptions::default() })?;
        b.search("warm up", &SearchOptions::default())?;
        println!(
            "{} ({} chunks, {} rows, vector index {}), query session {label}:",
            b.manifest.name,
            b.chunk_count(),
            b.info().embedding_rows,
            b.info().vector_index
        );
        let modes = [
            ("keyword", SearchOptions { mode: Mode::Keyword, ..SearchOptions::default() }),
            ("vector", SearchOptions { mode: Mode::Vector, ..SearchOptions::default() }),
            ("hybrid", SearchOptions { mode: Mode::Hybrid, ..SearchOptions::default() }),
            ("hybrid (rrf)", SearchOptions { mode: Mode::Hybrid, fusion: Fusion::Rrf, ..SearchOptions::default() }),
        ];
        for (name, opts) in modes {
            if spinning && name != "hybrid" {
                continue;
            }
            let mut times = Vec::new();
            for _ in 0..rounds {
                for q in queries {
                    let t = Instant::now();
                    b.search(q, &opts)?;
                    times.push(ms(t.elapsed()));
                }
            }
            let (p50, p95) = percentiles(times);
            println!("  {name:<13} p50 {p50:>6.2} ms  p95 {p95:>6.2} ms");
        }
        if !spinning {
            // The query embedding alone, for the breakdown.
            let e = b.embedder()?;
            let mut times = Vec::new();
            for q in queries {
                let t = Instant::now();
                e.embed_texts(&[q])?;
                times.push(ms(t.elapsed()));
            }
            let (p50, _) = percentiles(times);
            println!("  (query embedding alone p50 {p50:.2} ms)");
        }
    }
    println!("  RSS {}", rss());
    Ok(())
}

/// A bundle of `n` chunks built from `from`'s chunks: copy k of chunk i gets the
/// chunk's vector plus noise and a marker word, under `copy<k>/` paths.
fn synthesize(from: &Path, n: usize, out: &Path, name: &str) -> Res {
    use tantivy::{Index, TantivyDocument};
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out.join("tantivy"))?;
    std::fs::create_dir_all(out.join("hnsw"))?;
    let src = Bundle::open(from, OpenOptions { keyword_only: true, ..OpenOptions::default() })?;
    let base = src.chunks();
    let vectors = atlas_runtime::vectors::MappedMatrix::open(&from.join("embeddings.npy"))?;
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(from.join("embeddings.json"))?)?;
    let first_row: Vec<usize> = {
        let map: Vec<u64> =
            meta["window_chunk"].as_array().ok_or("window_chunk")?.iter().filter_map(|v| v.as_u64()).collect();
        let mut f = vec![usize::MAX; base.len()];
        for (row, &c) in map.iter().enumerate() {
            f[c as usize] = f[c as usize].min(row);
        }
        f
    };
    let dims = vectors.dims;
    let mut rng = atlas_e2e::XorShift::new(0x2545_f491_4f6c_dd1d);
    let mut noise = move || rng.signed_unit();
    let mut chunks = Vec::with_capacity(n);
    let mut data: Vec<f16> = Vec::with_capacity(n * dims);
    for i in 0..n {
        let (k, c) = (i / base.len(), &base[i % base.len()]);
        let mut c = c.clone();
        c.chunk_id = format!("{}-{k}", c.chunk_id);
        c.path = format!("copy{k}/{}", c.path);
        c.text = format!("{} variant{k}", src.text(i % base.len()));
        c.mentioned_in.clear();
        let v = vectors.row(first_row[i % base.len()]);
        let v: Vec<f32> = v.iter().map(|x| x + 0.02 * noise()).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        data.extend(v.iter().map(|x| f16::from_f32(x / norm)));
        chunks.push(c);
    }
    // The symbol table, copied with the chunks it points into (copy k's paths and ids).
    let ids: std::collections::HashSet<&str> = chunks.iter().map(|c| c.chunk_id.as_str()).collect();
    let (mut defs, mut refs) = (Vec::new(), Vec::new());
    for k in 0..n.div_ceil(base.len()) {
        for d in &src.symbols().defs {
            let (chunk_id, path) = (format!("{}-{k}", d.chunk_id), format!("copy{k}/{}", d.path));
            if ids.contains(chunk_id.as_str()) {
                defs.push(atlas_runtime::symbols::Definition { chunk_id, path, ..d.clone() });
            }
        }
        for r in src.references()? {
            let (chunk_id, path) = (format!("{}-{k}", r.chunk_id), format!("copy{k}/{}", r.path));
            if ids.contains(chunk_id.as_str()) {
                refs.push(atlas_runtime::symbols::Reference { chunk_id, path, ..r.clone() });
            }
        }
    }
    if !defs.is_empty() {
        use atlas_runtime::symbols::{
            DEFINITIONS_FILE, REFERENCES_FILE, definitions_to_parquet, references_to_parquet,
        };
        std::fs::write(out.join(DEFINITIONS_FILE), definitions_to_parquet(&defs)?)?;
        std::fs::write(out.join(REFERENCES_FILE), references_to_parquet(&refs)?)?;
        println!("symbol table: {} definitions, {} references", defs.len(), refs.len());
    }
    std::fs::write(out.join("chunks.parquet"), atlas_runtime::chunk_table::to_parquet(&chunks)?)?;
    std::fs::write(
        out.join(atlas_runtime::text_store::FILE),
        atlas_runtime::text_store::write(chunks.iter().map(|c| c.text.as_str())),
    )?;
    std::fs::write(out.join("embeddings.npy"), atlas_runtime::vectors::to_npy_f16(n, dims, &data))?;
    std::fs::write(
        out.join("embeddings.json"),
        serde_json::json!({"rows": n, "dims": dims, "window_chunk": (0..n as u32).collect::<Vec<_>>()}).to_string(),
    )?;
    atlas_runtime::hnsw::build_parallel(n, dims, &data, &out.join("hnsw"))?;
    let index = Index::create_in_dir(out.join("tantivy"), atlas_runtime::text_index::schema())?;
    atlas_runtime::text_index::register(&index);
    let schema = index.schema();
    let mut w = index.writer_with_num_threads::<TantivyDocument>(1, 128 * 1024 * 1024)?;
    for (i, c) in chunks.iter().enumerate() {
        w.add_document(atlas_runtime::text_index::document(&schema, i, c))?;
    }
    w.commit()?;
    let segments = index.searchable_segment_ids()?;
    if segments.len() > 1 {
        w.merge(&segments).wait()?;
    }
    w.wait_merging_threads()?;
    let m = Manifest {
        name: name.to_owned(),
        chunk_count: n,
        embedding_rows: n,
        artifacts: artifacts(out)?,
        ..src.manifest.clone()
    };
    std::fs::write(out.join("manifest.json"), serde_json::to_vec_pretty(&m)?)?;
    Ok(())
}

/// Every file under `dir` as a manifest artifact, sorted: a complete bundle, which
/// `Bundle::open` and `atlas verify` accept.
fn artifacts(dir: &Path) -> Res<Vec<Artifact>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n != "manifest.json" && !n.to_string_lossy().ends_with(".lock")) {
                let rel = p.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
                out.push(Artifact::of(&rel, &std::fs::read(&p)?));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
