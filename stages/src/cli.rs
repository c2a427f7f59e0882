//! The `atlas-pipeline` command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use atlas_cache::{Cache, LockWait};
use clap::{Parser, Subcommand};

use crate::registry::registry;
use crate::runner::dag::{self, Freshness, RunOptions};
use crate::runner::{self, Loaded, Progress};

#[derive(Debug, Parser)]
#[command(
    name = "atlas-pipeline",
    version,
    about = "Build an Atlas bundle: crawl → clean-gitbook → chunk → embed, bm25 → pack"
)]
struct Cli {
    /// The pipeline config.
    #[arg(long, short, global = true, default_value = "pipeline.yaml")]
    config: PathBuf,
    /// The artifact cache (default: .atlas/cache beside the config).
    #[arg(long, global = true, env = "ATLAS_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Seconds to wait for another run holding the cache lock.
    #[arg(long, global = true, default_value_t = 30)]
    lock_wait: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the pipeline (every built stage, or up to --until).
    Run {
        /// Stop after this stage.
        #[arg(long)]
        until: Option<String>,
        /// Recompute this stage (and its items) even when cached; repeatable.
        #[arg(long)]
        force: Vec<String>,
        /// Use what sources already hold; never touch the network.
        #[arg(long)]
        offline: bool,
        /// Crawl only these sections of llms.txt sources (`##` group or first path
        /// folder; comma-separated or repeated). Overrides the config.
        #[arg(long, value_delimiter = ',')]
        sections: Vec<String>,
        /// Crawl at most this many pages of each llms.txt source. Overrides the config.
        #[arg(long)]
        max_pages: Option<usize>,
        /// Also write `<name>-<version>.tar.zst` of the bundle and its `.sha256`.
        #[arg(long)]
        archive: bool,
        /// Where outputs go (default: .atlas/build beside the config, or `out:` in it).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Then publish the archive where pipeline.yaml's `publish:` says (implies --archive).
        #[arg(long)]
        publish: bool,
        /// Write the bundle folder alone, not each stage's outputs beside it (what a
        /// working tree's rebuild after an edit needs).
        #[arg(long, conflicts_with_all = ["until", "publish"])]
        bundle_only: bool,
    },
    /// Publish the archive `run --archive` wrote: to a GitHub release and/or object storage.
    Publish {
        /// A GitHub release target: OWNER/REPO (the token comes from GITHUB_TOKEN).
        #[arg(long, value_name = "OWNER/REPO")]
        github: Option<String>,
        /// The release tag (default v<version>).
        #[arg(long)]
        tag: Option<String>,
        /// An object store target: s3://bucket/prefix, gs://…, az://… or file:///path.
        #[arg(long, value_name = "URL")]
        to: Option<String>,
        /// Sign the archive with this minisign secret key.
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        /// Overwrite different bytes already published under this version or tag.
        #[arg(long)]
        replace: bool,
        /// The archive (default: <out>/<name>-<version>.tar.zst).
        #[arg(long)]
        archive: Option<PathBuf>,
        /// Where outputs went (default: as for run).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The GitHub API root, for GitHub Enterprise (default GITHUB_API_URL or api.github.com).
        #[arg(long)]
        api_url: Option<String>,
    },
    /// Make a minisign key pair: <name>.pub and <name>.key (mode 0600).
    Keygen {
        /// The folder to write them to.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// The files' name (default: the pipeline's name, else "atlas").
        #[arg(long)]
        name: Option<String>,
        /// Protect the secret key with a password (asked on the terminal, or ATLAS_KEY_PASSWORD).
        #[arg(long)]
        password: bool,
    },
    /// Say, per stage, whether it is fresh, stale (and why) or never run.
    Status,
    /// Remove cache objects that no kept run references.
    Gc {
        /// Runs to keep per pipeline.
        #[arg(long, default_value_t = 3)]
        keep: usize,
        /// Also forget every run of a pipeline whose config file is gone (`atlas gc`
        /// removes the builds of package versions no longer wanted).
        #[arg(long)]
        forget_missing: bool,
    },
}

/// Entry point of the binary: exit code 2 when the input is wrong and nothing was
/// written (a [`ConfigError`](crate::runner::ConfigError) or a bad flag), 1 when the run failed.
pub fn main() -> ExitCode {
    atlas_runtime::exit::short_panics();
    atlas_runtime::exit::follow_launcher();
    atlas_runtime::exit::finish(run(&Cli::parse()))
}

fn cache_dir(cli: &Cli, cfg: &Loaded) -> PathBuf {
    cli.cache_dir.clone().unwrap_or_else(|| cfg.dir.join(".atlas").join("cache"))
}

fn open_cache(cli: &Cli, cfg: &Loaded, progress: &Progress) -> anyhow::Result<Cache> {
    let dir = cache_dir(cli, cfg);
    let wait = if cli.lock_wait == 0 { LockWait::NoWait } else { LockWait::Up(Duration::from_secs(cli.lock_wait)) };
    let cache = Cache::open(&dir, wait, |holder| {
        progress.log(&format!("waiting up to {}s for the cache lock held by {holder}", cli.lock_wait));
    })?;
    if let Some(ms) = atlas_runtime::failpoint::armed("hold-lock", None) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    Ok(match runner::remote::RemoteCache::configured(cfg)? {
        Some(r) => {
            progress.log(&format!("remote cache {} ({})", r.url, r.describe()));
            cache.with_remote(Box::new(runner::remote::StoreRemote::open(&r.url, r.timeout)?), r.policy)
        }
        None => cache,
    })
}

fn out_dir(flag: Option<&PathBuf>, cfg: &Loaded) -> PathBuf {
    match (flag, &cfg.config.out) {
        (Some(o), _) => o.clone(),
        (None, Some(o)) => cfg.resolve(o),
        (None, None) => cfg.dir.join(".atlas").join("build"),
    }
}

fn run(cli: &Cli) -> anyhow::Result<()> {
    let registry = registry();
    if let Command::Keygen { out, name, password } = &cli.command {
        // No pipeline.yaml needed; its name is only the default file name.
        let name = name.clone().unwrap_or_else(|| {
            runner::load(&cli.config, &registry).map_or_else(|_| "atlas".to_owned(), |c| c.config.name)
        });
        return write_stdout(&crate::publish::keygen(out, &name, *password)?);
    }
    // The model's home as `atlas` sees it: the config file's `home` and `model_dir`.
    if let Ok((user, _)) = atlas_dist::config::load() {
        atlas_runtime::model::configure(user.home, user.model_dir);
    }
    // Validate everything the user gave before touching the cache.
    let mut cfg = runner::load(&cli.config, &registry)?;
    let progress = Progress::new();
    match &cli.command {
        Command::Keygen { .. } => unreachable!("handled above"),
        Command::Publish { github, tag, to, sign, replace, archive, out, api_url } => {
            let flags = crate::publish::Flags {
                github: github.clone(),
                tag: tag.clone(),
                to: to.clone(),
                sign: sign.clone(),
                replace: *replace,
                archive: archive.clone(),
                api_url: api_url.clone(),
            };
            write_stdout(&crate::publish::publish(&cfg, &out_dir(out.as_ref(), &cfg), &flags)?)
        }
        Command::Run { until, force, offline, out, sections, max_pages, archive, publish, bundle_only } => {
            if let Some(u) = until {
                dag::check_stage_name(u, "--until", &registry)?;
            }
            for f in force {
                dag::check_stage_name(f, "--force", &registry)?;
            }
            let out_dir = out_dir(out.as_ref(), &cfg);
            if *publish && until.is_some() {
                anyhow::bail!(runner::ConfigError("--publish needs the whole pipeline; drop --until".into()));
            }
            let cache = open_cache(cli, &cfg, &progress)?;
            cfg.override_crawl(sections, *max_pages);
            let opts = RunOptions { until: until.as_deref(), force, offline: *offline };
            if let Some((source, url, versions)) = cfg.train()? {
                let tags = crate::crawl::repo::tags(cache.root(), &cfg, &source, &url, *offline)?;
                let train = versions.select(&tags);
                if train.is_empty() {
                    anyhow::bail!(runner::ConfigError(format!(
                        "sources.{source}.versions names none of the repository's {} tags; check the glob or the list",
                        tags.len()
                    )));
                }
                if let Some((tag, _)) = train.iter().find(|(_, v)| !runner::is_safe_name(v)) {
                    anyhow::bail!(runner::ConfigError(format!(
                        "sources.{source}.versions: the tag {tag:?} does not make a bundle version (letters, digits, \
                         `.`, `-`, `_`, `+`); narrow the glob or list the tags"
                    )));
                }
                for (tag, version) in &train {
                    let mut one = cfg.at_tag(&source, tag);
                    one.edit_params("pack", |pack| pack["version"] = version.as_str().into())?;
                    let summary = dag::run(&cache, &one, &registry, &opts, &progress)?;
                    let dir = out_dir.join("versions").join(version);
                    let written = dag::materialize(&cache, &dir, &registry, &summary.stages, *archive || *publish)
                        .with_context(|| format!("writing outputs to {}", dir.display()))?;
                    let embed = summary.stages.iter().find(|s| s.name == "embed");
                    eprintln!(
                        "version {version} (tag {tag}): {} chunks embedded, {} reused from earlier versions, in {:.1}s; wrote {}",
                        embed.map_or(0, |e| e.items - e.reused.min(e.items)),
                        embed.map_or(0, |e| e.reused),
                        summary.total.as_secs_f64(),
                        written.first().map_or_else(|| dir.display().to_string(), |p| p.display().to_string())
                    );
                    if *publish {
                        write_stdout(&crate::publish::publish(&one, &dir, &crate::publish::Flags::default())?)?;
                    }
                }
                cache.flush_remote();
                return Ok(());
            }
            let summary = dag::run(&cache, &cfg, &registry, &opts, &progress)?;
            cache.flush_remote();
            for c in summary.corruptions.iter().chain(&cache.take_warnings()) {
                progress.log(&format!("warning: {c}"));
            }
            let stages: Vec<_> = summary.stages.iter().filter(|s| !*bundle_only || s.name == "pack").cloned().collect();
            let written = dag::materialize(&cache, &out_dir, &registry, &stages, *archive || *publish)
                .with_context(|| format!("writing outputs to {}", out_dir.display()))?;
            eprintln!("{}", dag::summary_table(&summary));
            for p in &written {
                eprintln!("wrote {}", p.display());
            }
            if *publish {
                drop(cache);
                return write_stdout(&crate::publish::publish(&cfg, &out_dir, &crate::publish::Flags::default())?);
            }
            Ok(())
        }
        Command::Status => {
            let dir = cache_dir(cli, &cfg);
            // Never wait on a running build's lock: say at once that one is running.
            let cache = if dir.join("runs").is_dir() {
                match Cache::open(&dir, LockWait::NoWait, |_| {}) {
                    Ok(c) => Some(c),
                    Err(atlas_cache::Error::Locked { holder, .. }) => {
                        anyhow::bail!("a run is in progress ({holder}); status is available when it finishes")
                    }
                    Err(e) => return Err(e.into()),
                }
            } else {
                None
            };
            let rows = dag::status(cache.as_ref(), &cfg, &registry, &progress)?;
            let mut text = String::new();
            for (name, f) in rows {
                let line = match f {
                    Freshness::Fresh => format!("{name:<14} fresh\n"),
                    Freshness::Stale(why) => format!("{name:<14} stale: {why}\n"),
                    Freshness::NeverRun => format!("{name:<14} never run\n"),
                };
                text.push_str(&line);
            }
            write_stdout(&text)
        }
        Command::Gc { keep, forget_missing } => {
            let cache = open_cache(cli, &cfg, &progress)?;
            let r =
                cache.gc_forgetting(*keep, |run| *forget_missing && !std::path::Path::new(&run.pipeline).is_file())?;
            write_stdout(&format!(
                "kept {} and {}; removed {}, {} ({} bytes) and {}\n",
                atlas_runtime::words::count(r.kept_runs, "run"),
                atlas_runtime::words::count(r.kept_objects, "object"),
                atlas_runtime::words::count(r.removed_runs, "run"),
                atlas_runtime::words::count(r.removed_objects, "object"),
                r.freed_bytes,
                atlas_runtime::words::count(r.removed_refs, "ref")
            ))
        }
    }
}

/// Data goes to stdout; a closed pipe is not an error.
fn write_stdout(s: &str) -> anyhow::Result<()> {
    atlas_runtime::exit::print(s).context("writing to stdout")
}
