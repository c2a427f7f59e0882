//! `atlas ask`: an answer with checked citations, through an LLM or extractive.

use super::locate::{locate, open, open_options};
use crate::ask::{AskOptions, DEFAULT_BUDGET_TOKENS};
use atlas_dist::config::Config;
use atlas_mcp::library::Libraries;
use atlas_mcp::live::Live;
use atlas_runtime::OpenOptions;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    question: String,
    /// An installed bundle's name or a bundle folder.
    #[arg(long, env = "ATLAS_BUNDLE")]
    bundle: Option<String>,
    #[command(flatten)]
    llm: LlmArgs,
    /// Refuse below this confidence (default: the bundle's calibrated threshold).
    #[arg(long, value_parser = super::parse_min_score)]
    threshold: Option<f32>,
    /// Tokens of sources given to the LLM (default 3000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(200..=200_000))]
    budget: Option<u64>,
    /// Print the answer, its sources and timings as JSON at the end instead of streaming text.
    #[arg(long)]
    json: bool,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let (dir, _) = locate(self.bundle, cfg)?;
        let b = open(&dir, open_options(cfg, OpenOptions::default())?)?;
        let opts = AskOptions {
            budget_tokens: self.budget.map_or(cfg.ask.budget_tokens.unwrap_or(DEFAULT_BUDGET_TOKENS), |b| b as usize),
            threshold: self.threshold.or(cfg.ask.threshold),
            llm: self.llm.resolve(cfg)?,
        };
        let libs = Libraries::single(Live::new(std::sync::Arc::new(b)));
        crate::ask::run_cli(&libs, &self.question, &opts, self.json)
    }
}

/// The LLM an `ask` or `agent` uses: flags, then the config file's `[ask]`.
#[derive(Debug, clap::Args)]
pub(super) struct LlmArgs {
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
}

impl LlmArgs {
    pub(super) fn resolve(self, cfg: &Config) -> anyhow::Result<Option<crate::llm::Llm>> {
        crate::ask::llm_from(&cfg.ask, self.llm, self.model, self.timeout)
    }
}
