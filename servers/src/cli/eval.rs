//! `atlas eval`: retrieval quality on a golden set (docs/eval.md).

use super::locate::{locate, open_options};
use atlas_dist::config::Config;
use atlas_runtime::{Mode, OpenOptions};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The golden set (JSON Lines).
    #[arg(long)]
    golden: Option<PathBuf>,
    /// An installed bundle's name or a bundle folder; repeat it to evaluate the merged
    /// search over several libraries (what `serve rag --bundle A --bundle B` answers).
    #[arg(long, env = "ATLAS_BUNDLE")]
    bundle: Vec<String>,
    /// With several bundles: pin every query to this library (`name` or
    /// `name@version`), as an agent that names the library would.
    #[arg(long)]
    library: Option<String>,
    /// Instead of a golden file: N names the bundle's code defines once, asked bare and
    /// qualified, each judged by its definition (a symbol-lookup set; docs/eval.md).
    #[arg(long, value_name = "N", conflicts_with = "golden")]
    symbol_set: Option<usize>,
    /// Search only chunks of this kind (`docs` or `code`).
    #[arg(long, value_parser = super::parse_kind)]
    kind: Option<atlas_runtime::ChunkKind>,
    /// A JSON array of `{"name": …, "tuning": {…}}` ranking knobs to compare side by
    /// side on hybrid, per half of the set (for tuning the defaults; docs/eval.md).
    #[arg(long, value_name = "FILE")]
    tuning: Option<PathBuf>,
    /// The modes to evaluate, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "keyword,vector,hybrid", value_parser = super::parse_mode)]
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
    /// Evaluate the bundles exported to this PostgreSQL database (`atlas export`) as
    /// `serve rag --backend` serves them (needs --golden; pin one with --library).
    #[arg(long, value_name = "URL", conflicts_with = "bundle")]
    backend: Option<String>,
    /// Per query that misses rank 1: what ranked first, and where the expected files landed.
    #[arg(long)]
    explain: bool,
    /// Run the golden set through `atlas agent` instead: whether its citations hold a
    /// relevant file, against search alone, and the LLM tokens each question costs
    /// (against `atlas ask`). Without --llm, a scripted LLM cites the first passage.
    #[arg(long, requires = "golden", conflicts_with_all = ["backend", "tuning", "symbol_set"])]
    agent: bool,
    /// --agent: an OpenAI-compatible endpoint with tool calling (the key from ATLAS_LLM_API_KEY).
    #[arg(long, value_name = "URL", requires = "agent")]
    llm: Option<String>,
    /// --agent: the model the endpoint should run.
    #[arg(long, value_name = "M", requires = "agent")]
    model: Option<String>,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        if self.agent {
            return self.run_agent(cfg);
        }
        let mut dirs = Vec::new();
        let open = open_options(cfg, OpenOptions::default())?;
        let exported = match &self.backend {
            Some(url) => {
                // An evaluation of a database measures every export in it, or none.
                let (open, broken) = atlas_pg::open_all(url, 4, &open)?;
                if let Some(b) = broken.into_iter().next() {
                    anyhow::bail!("{}", super::locate::unopened(b).line());
                }
                open
            }
            None => {
                let names =
                    if self.bundle.is_empty() { vec![None] } else { self.bundle.into_iter().map(Some).collect() };
                for b in names {
                    dirs.push(locate(b, cfg)?.0);
                }
                Vec::new()
            }
        };
        let opts = atlas_runtime::eval::EvalOptions {
            modes: self.modes,
            rerank: self.rerank,
            k: usize::from(self.k),
            filters: atlas_runtime::search::Filters { kind: self.kind, ..Default::default() },
            ..Default::default()
        };
        let args = crate::eval::Args {
            golden: self.golden,
            opts,
            json: self.json,
            compare: self.compare,
            min_mrr: self.min_mrr,
            explain: self.explain,
            library: self.library,
            tuning: self.tuning,
            symbol_set: self.symbol_set,
        };
        crate::eval::run(&dirs, exported, open, args)
    }
}

impl Args {
    /// `--agent`: the set through the agent, over the bundles given.
    fn run_agent(self, cfg: &Config) -> anyhow::Result<()> {
        use crate::agent::{self, AgentOptions, brain::Brain};
        let path = self.golden.clone().unwrap_or_default();
        let golden = crate::eval::golden_set(&path)?;
        let llm = crate::ask::llm_from(&cfg.ask, self.llm, self.model, None)?;
        let opts = AgentOptions { brain: Some(llm.map_or(Brain::Scripted, Brain::Llm)), ..AgentOptions::default() };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let located = super::locate::locate_many(self.bundle, false, cfg)?;
        let (local, libs) = super::locate::start_local(&rt, located, cfg)?;
        let set = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let report = rt.block_on(async {
            let served = agent::Served::new(&local, &libs);
            let r = agent::eval::evaluate(&served, &libs, &set, &golden, &opts).await;
            local.close().await;
            r
        });
        rt.shutdown_timeout(std::time::Duration::from_secs(1));
        let report = report?;
        super::print(&agent::eval::render(&report))?;
        if let Some(out) = &self.json {
            std::fs::write(out, serde_json::to_string_pretty(&report)?)?;
        }
        Ok(())
    }
}
