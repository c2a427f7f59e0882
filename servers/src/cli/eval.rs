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
    /// An installed bundle's name or a bundle folder.
    #[arg(long, env = "ATLAS_BUNDLE")]
    bundle: Option<String>,
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
    /// Per query that misses rank 1: what ranked first, and where the expected files landed.
    #[arg(long)]
    explain: bool,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let (dir, _) = locate(self.bundle, cfg)?;
        let opts = atlas_runtime::eval::EvalOptions { modes: self.modes, rerank: self.rerank, k: usize::from(self.k) };
        let args = crate::eval::Args {
            golden: self.golden,
            opts,
            json: self.json,
            compare: self.compare,
            min_mrr: self.min_mrr,
            explain: self.explain,
        };
        crate::eval::run(&dir, open_options(cfg, OpenOptions::default())?, args)
    }
}
