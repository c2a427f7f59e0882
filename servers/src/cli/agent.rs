//! `atlas agent`: a question fanned out to both servers, answered with checked
//! citations through an LLM's bounded tool loop, or the evidence packet without one.

use super::locate::Served;
use crate::agent::{self, AgentOptions, Stop, Task};
use atlas_dist::config::Config;
use atlas_runtime::exit::UsageError;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The question; with --task, the task's main argument (a symbol's name for
    /// explain_symbol, the question for answer_with_citations, the topic for compare_versions).
    question: String,
    /// One of the rag server's prompts as the task: answer_with_citations,
    /// explain_symbol, compare_versions, or one a served bundle ships.
    #[arg(long, value_name = "NAME")]
    task: Option<String>,
    /// More arguments of the task's prompt, as KEY=VALUE (compare_versions: library, from, to).
    #[arg(long = "task-arg", value_name = "KEY=VALUE")]
    task_args: Vec<String>,
    #[command(flatten)]
    served: Served,
    /// The LLM (it must call tools); without one, the evidence packet is printed.
    #[command(flatten)]
    llm: super::ask::LlmArgs,
    /// LLM turns at most.
    #[arg(long, default_value_t = agent::DEFAULT_MAX_STEPS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100))]
    max_steps: usize,
    /// Tokens (prompt and completion, every turn together) at most.
    #[arg(long, default_value_t = agent::DEFAULT_MAX_TOKENS, value_parser = clap::value_parser!(u64).range(1000..=10_000_000))]
    max_tokens: u64,
    /// Seconds of wall time at most.
    #[arg(long, default_value_t = agent::DEFAULT_MAX_WALL.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    max_seconds: u64,
    /// Tokens of passages in the evidence packet.
    #[arg(long, default_value_t = agent::DEFAULT_PACKET_TOKENS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(200..=200_000))]
    budget: usize,
    /// Refuse below this confidence (default: the libraries' calibrated threshold).
    #[arg(long, value_parser = super::parse_min_score)]
    threshold: Option<f32>,
    /// Print the answer, citations, tool calls (name, arguments, duration, tokens) and stop reason as JSON.
    #[arg(long)]
    json: bool,
    /// Print each tool call on stderr as it happens.
    #[arg(long)]
    trace: bool,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let llm = self.llm.resolve(cfg)?;
        let opts = AgentOptions {
            brain: llm.map(agent::brain::Brain::Llm),
            max_steps: self.max_steps,
            max_tokens: self.max_tokens,
            max_wall: Duration::from_secs(self.max_seconds),
            packet_tokens: self.budget,
            threshold: self.threshold.or(cfg.ask.threshold),
            trace: self.trace,
        };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let (local, libs) = self.served.start(&rt, cfg)?;
        let (question, task_name, task_args) = (self.question, self.task, self.task_args);
        let r = rt.block_on(async {
            let task = match &task_name {
                Some(name) => Some(task(&local, name, &question, &task_args).await?),
                None => None,
            };
            let served = agent::Served::new(&local, &libs);
            let r = agent::run(&served, &question, task.as_ref(), &opts).await;
            local.close().await;
            r
        });
        rt.shutdown_timeout(Duration::from_secs(1));
        let out = r?;
        if let Some(d) = &out.stop_detail {
            eprintln!("atlas: {d}");
        }
        if self.json {
            super::print(&format!("{}\n", serde_json::to_string_pretty(&out)?))?;
        } else {
            super::print(&agent::render(&out))?;
        }
        if out.stop_reason == Stop::LlmError {
            anyhow::bail!("the LLM failed; the evidence packet is above. Check --llm and the endpoint's log");
        }
        Ok(())
    }
}

/// The task's prompt text, its main argument the question: Atlas's prompts name it
/// (`question`, `name`, `topic`); a prompt a bundle ships takes it as its first
/// required argument.
async fn task(local: &atlas_mcp::local::Local, name: &str, main: &str, more: &[String]) -> anyhow::Result<Task> {
    let prompts = local.prompts().await;
    let Some((_, params)) = prompts.iter().find(|(n, _)| n == name) else {
        let names: Vec<&str> = prompts.iter().map(|(n, _)| n.as_str()).collect();
        anyhow::bail!(UsageError(format!("no task is named {name:?}; the tasks are {}", names.join(", "))));
    };
    let key = match name {
        "answer_with_citations" => "question",
        "explain_symbol" => "name",
        "compare_versions" => "topic",
        _ => params.iter().find(|(_, required)| *required).or(params.first()).map_or("question", |(k, _)| k.as_str()),
    };
    let mut args = serde_json::Map::new();
    args.insert(key.to_owned(), main.into());
    for pair in more {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| UsageError(format!("--task-arg {pair:?}: write KEY=VALUE, e.g. --task-arg from=1.0")))?;
        args.insert(k.to_owned(), v.into());
    }
    let text = local.prompt(name, args).await.map_err(|e| UsageError(format!("--task {name}: {e}")))?;
    Ok(Task { name: name.to_owned(), text })
}
