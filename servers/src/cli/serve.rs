//! `atlas serve fs|rag|web`: the MCP servers over stdio or streamable HTTP, and the web
//! page with the rag server's `/mcp` beside it.

use super::locate::{Located, locate_many, locate_project, open_libraries, open_mirrors, open_options};
use crate::ask::AskOptions;
use atlas_dist::config::Config;
use atlas_mcp::transport::HttpOptions;
use atlas_runtime::OpenOptions;
use clap::ValueEnum;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[arg(value_enum)]
    which: Which,
    /// An installed bundle's name (follows its `current`), NAME@VERSION (a kept
    /// version), or a bundle folder. Repeat it to serve several libraries.
    #[arg(long, env = "ATLAS_BUNDLE", value_delimiter = ',')]
    bundle: Vec<String>,
    /// Serve every installed bundle (each at its current version).
    #[arg(long, conflicts_with_all = ["bundle", "mirror"])]
    all: bool,
    /// Serve a project's library set, the versions `atlas sync DIR` pinned from its
    /// lockfiles; a library moves when the next sync moves it.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["bundle", "all", "mirror"])]
    project: Option<PathBuf>,
    /// fs only: serve a plain mirror folder instead of a bundle's.
    #[arg(long, conflicts_with = "bundle")]
    mirror: Option<PathBuf>,
    /// rag only: also serve every bundle exported to this PostgreSQL database (`atlas
    /// export`); replicas started on one database are stateless and interchangeable.
    #[arg(long, env = "ATLAS_DATABASE_URL", hide_env_values = true, value_name = "URL", conflicts_with = "mirror")]
    backend: Option<String>,
    /// rag only: connections to the --backend database, per server.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pool: u16,
    /// rag only: rerank with the cross-encoder by default.
    #[arg(long)]
    rerank: bool,
    /// rag only: load the query model in the background at start.
    #[arg(long)]
    warm: bool,
    /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
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
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let http_opts = HttpOptions {
            max_sessions: usize::from(self.max_sessions),
            idle: Duration::from_secs(u64::from(self.session_idle_s)),
            allow_origins: self.allow_origins,
            allow_hosts: self.allow_hosts,
        };
        let ask = match self.which {
            Which::Web => AskOptions {
                llm: crate::ask::llm_from(&cfg.ask, self.llm, self.model, None)?,
                threshold: cfg.ask.threshold,
                budget_tokens: cfg.ask.budget_tokens.unwrap_or(crate::ask::DEFAULT_BUDGET_TOKENS),
            },
            Which::Fs | Which::Rag => AskOptions::default(),
        };
        if self.backend.is_some() && !matches!(self.which, Which::Rag) {
            anyhow::bail!(atlas_runtime::exit::UsageError(
                "--backend serves the rag server only: `atlas serve rag --backend URL`".into()
            ));
        }
        let located = match self.mirror {
            Some(_) => Located::default(),
            None => match &self.project {
                Some(dir) => locate_project(dir)?,
                // A database alone needs no bundle on disk.
                None if self.backend.is_some() && self.bundle.is_empty() && !self.all => Located::default(),
                None => locate_many(self.bundle, self.all, cfg)?,
            },
        };
        init_logging();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        match self.which {
            Which::Web => serve_web(cfg, rt, located, self.rerank, self.http, http_opts, ask),
            Which::Fs => {
                let fs = match self.mirror {
                    Some(m) => atlas_mcp::fs::FsServer::new(atlas_mcp::mirror::Fs::plain(&m)?),
                    None => open_mirrors(&rt, located)?,
                };
                if let Some(dir) = &self.project {
                    super::locate::follow_project(&rt, dir, fs.clone());
                }
                run_server(rt, fs, self.http, http_opts)
            }
            Which::Rag => {
                let opts = open_options(cfg, OpenOptions { warm: self.warm, ..OpenOptions::default() })?;
                let exported = match &self.backend {
                    Some(url) => atlas_pg::open_all(url, usize::from(self.pool), &opts)?,
                    None => (Vec::new(), Vec::new()),
                };
                let libs = open_libraries(&rt, located, exported, &opts)?;
                if let Some(dir) = &self.project {
                    super::locate::follow_project(&rt, dir, (libs.clone(), opts));
                }
                run_server(rt, atlas_mcp::rag::RagServer::libraries(libs, self.rerank), self.http, http_opts)
            }
        }
    }
}

/// Logs go to stderr only (stdout carries the protocol). `ATLAS_LOG` sets the filter.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ATLAS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,atlas_cli=info,atlas_mcp=info,atlas_pg=info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
}

/// `atlas serve web`: the page and the rag server's `/mcp` on one port, over every
/// library given, each following an installed bundle's `current` as `serve rag` does.
fn serve_web(
    cfg: &Config,
    rt: tokio::runtime::Runtime,
    located: Located,
    rerank: bool,
    http: Option<SocketAddr>,
    opts: HttpOptions,
    ask: AskOptions,
) -> anyhow::Result<()> {
    let o = open_options(cfg, OpenOptions { warm: true, ..OpenOptions::default() })?;
    let libs = open_libraries(&rt, located, (Vec::new(), Vec::new()), &o)?;
    let addr = http.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
    let web = crate::web::Web { libs, ask, allow_hosts: std::sync::Arc::new(opts.allow_hosts.clone()) };
    let r = rt.block_on(crate::web::serve(web, rerank, addr, opts));
    rt.shutdown_timeout(Duration::from_secs(1));
    r
}

/// Serves `server` over HTTP (a fresh clone per session) or stdio until the client
/// or Ctrl-C ends it.
fn run_server<S: rmcp::ServerHandler + Clone + Send + Sync + 'static>(
    rt: tokio::runtime::Runtime,
    server: S,
    http: Option<SocketAddr>,
    http_opts: HttpOptions,
) -> anyhow::Result<()> {
    let r = rt.block_on(async move {
        match http {
            Some(addr) => atlas_mcp::transport::serve_http(move || server.clone(), addr, http_opts).await,
            None => atlas_mcp::transport::serve_stdio(server).await,
        }
    });
    // A read stuck in the kernel (a slow network file system) must not keep the
    // process alive after the client has gone.
    rt.shutdown_timeout(Duration::from_secs(1));
    r
}
