//! The `atlas` command line.

use atlas_runtime::exit::print;
use std::path::PathBuf;
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
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a bundle to an agent over MCP (stdio by default).
    Serve {
        #[arg(value_enum)]
        which: Which,
        /// The bundle folder (the one holding manifest.json).
        #[arg(long, env = "ATLAS_BUNDLE", required_unless_present = "mirror")]
        bundle: Option<PathBuf>,
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
    },
    /// What a bundle holds: name, version, model, chunks by kind and section, sources.
    Info {
        /// The bundle folder (the one holding manifest.json).
        #[arg(env = "ATLAS_BUNDLE")]
        bundle: PathBuf,
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
        /// The bundle folder (the one holding manifest.json).
        #[arg(env = "ATLAS_BUNDLE")]
        bundle: PathBuf,
    },
    /// Ranked search over a bundle.
    Search {
        /// What to look for, in words or identifiers.
        query: String,
        /// The bundle folder (the one holding manifest.json).
        #[arg(long, env = "ATLAS_BUNDLE")]
        bundle: PathBuf,
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
    which: Which,
    bundle: Option<PathBuf>,
    mirror: Option<PathBuf>,
    rerank: bool,
    warm: bool,
    http: Option<std::net::SocketAddr>,
    http_opts: crate::transport::HttpOptions,
) -> anyhow::Result<()> {
    init_logging();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    match which {
        Which::Fs => {
            let fs = match (&bundle, &mirror) {
                (Some(b), _) => {
                    crate::fs::Fs::bundle(b).with_context(|| format!("opening the bundle {}", b.display()))?
                }
                (None, Some(m)) => crate::fs::Fs::plain(m)?,
                (None, None) => anyhow::bail!("pass --bundle DIR or --mirror DIR"),
            };
            tracing::info!("fs server for {} at {}", fs.name, fs.root.path().display());
            run_server(rt, crate::fs::FsServer::new(fs), http, http_opts)
        }
        Which::Rag => {
            let dir = bundle.context("the rag server needs --bundle DIR")?;
            let b = Bundle::open(&dir, OpenOptions { warm, ..OpenOptions::default() })
                .with_context(|| format!("opening the bundle {}", dir.display()))?;
            tracing::info!("rag server for {} ({} chunks)", b.manifest.name, b.chunk_count());
            run_server(rt, crate::rag::RagServer::new(std::sync::Arc::new(b), rerank), http, http_opts)
        }
    }
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
    match cli.command {
        Command::Serve { which, bundle, mirror, rerank, warm, http, max_sessions, session_idle_s, allow_origins } => {
            let opts = crate::transport::HttpOptions {
                max_sessions: usize::from(max_sessions),
                idle: std::time::Duration::from_secs(u64::from(session_idle_s)),
                allow_origins,
            };
            serve(which, bundle, mirror, rerank, warm, http, opts)
        }
        Command::Info { bundle, json } => {
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
                    let state = match (p.path.is_file(), p.sha256) {
                        (false, _) => "missing",
                        (true, None) => "installed",
                        (true, Some(want)) => match atlas_runtime::encoder::sha256_file(&p.path) {
                            Ok(got) if got == want => "installed",
                            _ => "corrupt",
                        },
                    };
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
            let keyword_only = mode == Mode::Keyword && !rerank;
            let b = Bundle::open(&bundle, OpenOptions { keyword_only, ..OpenOptions::default() })
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
                let doc = serde_json::json!({ "query": query, "mode": mode, "hits": hits });
                format!("{}\n", serde_json::to_string_pretty(&doc)?)
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
        let place = if h.heading_path.is_empty() { h.title.clone() } else { h.heading_path.join(" › ") };
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
