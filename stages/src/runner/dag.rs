//! The DAG runner: stages keyed by blake3(name, version, params, input digests) in the
//! content-addressed cache, so a rebuild redoes only what changed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use atlas_cache::{Cache, Digest, KeyBuilder, RunRecord};
use serde::{Deserialize, Serialize};

use super::config::ConfigError;
use super::outputs::Outputs;
use super::progress::Progress;
use super::stage::Loaded;
use super::stage::{Ctx, DynStage};

/// Stored behind a stage's memo ref.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StageRecord {
    output: Digest,
    objects: BTreeSet<Digest>,
    refs: BTreeSet<String>,
    items: usize,
}

/// Checks that the registry is a DAG in topological order: names are unique and every
/// dependency is a stage listed before the one that reads it.
pub fn check_registry(registry: &[Box<dyn DynStage>]) -> Result<(), RegistryError> {
    for (i, s) in registry.iter().enumerate() {
        if registry[..i].iter().any(|e| e.name() == s.name()) {
            return Err(RegistryError::Twice(s.name()));
        }
        for dep in s.deps() {
            if !registry[..i].iter().any(|e| e.name() == *dep) {
                return Err(RegistryError::Unordered { stage: s.name(), dep });
            }
        }
    }
    Ok(())
}

/// How a registry breaks the DAG's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("stage {0} is registered twice")]
    Twice(&'static str),
    #[error("stage {stage} reads {dep}, which is not a stage registered before it")]
    Unordered { stage: &'static str, dep: &'static str },
}

fn deps_of<'r>(registry: &'r [Box<dyn DynStage>], name: &str) -> &'r [&'static str] {
    registry.iter().find(|s| s.name() == name).map_or(&[], |s| s.deps())
}

/// Checks a stage name given on the command line against the registry.
pub fn check_stage_name(name: &str, flag: &str, registry: &[Box<dyn DynStage>]) -> Result<(), ConfigError> {
    if registry.iter().any(|s| s.name() == name) {
        return Ok(());
    }
    let built: Vec<&str> = registry.iter().map(|s| s.name()).collect();
    Err(ConfigError(format!("{flag} {name}: unknown stage `{name}`; available stages: {}", built.join(", "))))
}

/// Stages to run for `until` (it and its ancestors), in DAG order.
pub fn plan<'r>(registry: &'r [Box<dyn DynStage>], until: Option<&str>) -> Vec<&'r dyn DynStage> {
    let mut wanted: BTreeSet<&str> = BTreeSet::new();
    match until {
        Some(u) => {
            let mut todo = vec![u];
            while let Some(n) = todo.pop() {
                if wanted.insert(n) {
                    todo.extend(deps_of(registry, n));
                }
            }
        }
        None => wanted.extend(registry.iter().map(|s| s.name())),
    }
    registry.iter().filter(|s| wanted.contains(s.name())).map(|s| &**s).collect()
}

pub fn stage_key(stage: &dyn DynStage, params: &serde_json::Value, inputs: &BTreeMap<String, Digest>) -> Digest {
    let mut k = KeyBuilder::new("stage");
    k.str("name", stage.name()).part("version", &stage.version().to_le_bytes()).str("params", &params.to_string());
    for (label, d) in inputs {
        k.str("input", label).digest("digest", *d);
    }
    k.finish()
}

/// Per-stage line of the summary and of the run record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageReport {
    pub name: String,
    pub version: u32,
    pub outcome: Outcome,
    pub key: Digest,
    pub params: serde_json::Value,
    pub inputs: BTreeMap<String, Digest>,
    pub output: Digest,
    pub items: usize,
    pub reused: usize,
    pub millis: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ran,
    Cached,
}

#[derive(Debug)]
pub struct RunSummary {
    pub stages: Vec<StageReport>,
    pub total: Duration,
    pub corruptions: Vec<String>,
}

#[derive(Debug)]
pub struct RunOptions<'a> {
    pub until: Option<&'a str>,
    pub force: &'a [String],
    pub offline: bool,
}

/// What `stage` runs with under `opts`, before its inputs are known.
fn context<'a>(
    cache: &'a Cache,
    cfg: &'a Loaded,
    progress: &'a Progress,
    stage: &dyn DynStage,
    key_params: &'a serde_json::Value,
    opts: &RunOptions<'a>,
) -> Ctx<'a> {
    static NO_INPUTS: BTreeMap<String, Digest> = BTreeMap::new();
    Ctx {
        cache,
        cfg,
        progress,
        stage: stage.name(),
        version: stage.version(),
        key_params,
        inputs: &NO_INPUTS,
        force: opts.force.iter().any(|f| f == stage.name()),
        offline: opts.offline,
    }
}

/// Runs the planned stages, recording the run for status and gc.
pub fn run(
    cache: &Cache,
    cfg: &Loaded,
    registry: &[Box<dyn DynStage>],
    opts: &RunOptions<'_>,
    progress: &Progress,
) -> anyhow::Result<RunSummary> {
    let started = atlas_cache::now_unix_ms();
    let t0 = Instant::now();
    let mut outputs: BTreeMap<&str, Digest> = BTreeMap::new();
    let mut reports = Vec::new();
    let mut objects = BTreeSet::new();
    let mut refs = BTreeSet::new();
    for stage in plan(registry, opts.until) {
        let name = stage.name();
        let ts = Instant::now();
        let configured = cfg.stage(name)?;
        let params = configured.key_params(cfg);
        let mut ctx = context(cache, cfg, progress, stage, &params, opts);
        let (mut inputs, ready) =
            configured.prepare(&ctx).with_context(|| format!("stage {name}: reading its inputs"))?;
        for dep in stage.deps() {
            let d = outputs.get(dep).with_context(|| format!("stage {name}: input {dep} was not produced"))?;
            inputs.insert((*dep).to_owned(), *d);
        }
        let key = stage_key(stage, &params, &inputs);
        ctx.inputs = &inputs;
        let hit = if ctx.force { None } else { cached_record(cache, key)? };
        let (record, outcome, items, reused) = match hit {
            Some(rec) => {
                let n = rec.items;
                (rec, Outcome::Cached, n, n)
            }
            None => {
                let out = ready.run(&ctx).with_context(|| format!("stage {name} failed"))?;
                for note in &out.notes {
                    progress.log(&format!("{name}: {note}"));
                }
                let output = out.output.with_context(|| format!("stage {name} produced no output"))?;
                let rec = StageRecord { output, objects: out.objects, refs: out.refs, items: out.items };
                let rec_digest = cache.put_json(&rec)?;
                cache.set_ref("stage", key, rec_digest)?;
                objects.insert(rec_digest);
                (rec, Outcome::Ran, out.items, out.reused)
            }
        };
        if outcome == Outcome::Cached
            && let Some(d) = cache.get_ref("stage", key)?
        {
            objects.insert(d);
        }
        refs.insert(Cache::ref_name("stage", key));
        objects.extend(record.objects.iter().copied());
        refs.extend(record.refs.iter().cloned());
        outputs.insert(name, record.output);
        let millis = ts.elapsed().as_millis() as u64;
        progress.log(&format!(
            "{name}: {} ({}, {reused} reused) in {}",
            match outcome {
                Outcome::Ran => "ran",
                Outcome::Cached => "cached",
            },
            atlas_runtime::words::count(items, "item"),
            fmt_ms(millis)
        ));
        reports.push(StageReport {
            name: name.to_owned(),
            version: stage.version(),
            outcome,
            key,
            params,
            inputs,
            output: record.output,
            items,
            reused,
            millis,
        });
    }
    let run = RunRecord {
        id: format!("{started}-{}", std::process::id()),
        pipeline: pipeline_id(cfg),
        started_unix_ms: started,
        finished_unix_ms: atlas_cache::now_unix_ms(),
        detail: serde_json::to_value(&reports)?,
        objects,
        refs,
    };
    cache.record_run(&run)?;
    Ok(RunSummary { stages: reports, total: t0.elapsed(), corruptions: cache.take_corruptions() })
}

/// A stage memo hit whose record and every referenced object are intact.
fn cached_record(cache: &Cache, key: Digest) -> anyhow::Result<Option<StageRecord>> {
    let Some(rec_digest) = cache.get_ref("stage", key)? else { return Ok(None) };
    let Some(rec) = cache.get_json::<StageRecord>(rec_digest)? else { return Ok(None) };
    // From a remote cache, the objects come in parallel before they are checked.
    cache.prefetch(&rec.objects.iter().copied().collect::<Vec<_>>())?;
    for d in &rec.objects {
        if !cache.verify(*d)? {
            return Ok(None); // a lost or corrupt artifact: recompute the stage
        }
    }
    Ok(Some(rec))
}

pub fn pipeline_id(cfg: &Loaded) -> String {
    cfg.path.display().to_string()
}

pub fn fmt_ms(ms: u64) -> String {
    if ms < 1000 { format!("{ms}ms") } else { format!("{:.2}s", ms as f64 / 1000.0) }
}

/// The end-of-run table.
pub fn summary_table(s: &RunSummary) -> String {
    let mut out = format!("{:<14} {:<7} {:>9} {:>9} {:>9}\n", "stage", "outcome", "processed", "reused", "time");
    for r in &s.stages {
        let outcome = match r.outcome {
            Outcome::Ran => "ran",
            Outcome::Cached => "cached",
        };
        out.push_str(&format!(
            "{:<14} {:<7} {:>9} {:>9} {:>9}\n",
            r.name,
            outcome,
            r.items - r.reused,
            r.reused,
            fmt_ms(r.millis)
        ));
    }
    out.push_str(&format!("total {}", fmt_ms(s.total.as_millis() as u64)));
    out
}

/// Freshness of one stage against the latest recorded run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    Fresh,
    Stale(String),
    NeverRun,
}

/// Compares the current config and sources with the latest run of this pipeline.
pub fn status(
    cache: Option<&Cache>,
    cfg: &Loaded,
    registry: &[Box<dyn DynStage>],
    progress: &Progress,
) -> anyhow::Result<Vec<(String, Freshness)>> {
    let last: Vec<StageReport> = match cache {
        Some(c) => match c.latest_run(&pipeline_id(cfg))? {
            Some(run) => serde_json::from_value(run.detail).unwrap_or_default(),
            None => Vec::new(),
        },
        None => Vec::new(),
    };
    let mut out = Vec::new();
    let mut fresh_outputs: BTreeMap<String, Digest> = BTreeMap::new();
    for stage in plan(registry, None) {
        let name = stage.name();
        let Some(prev) = last.iter().find(|r| r.name == name) else {
            out.push((name.to_owned(), Freshness::NeverRun));
            continue;
        };
        let configured = cfg.stage(name)?;
        let params = configured.key_params(cfg);
        let mut why = Vec::new();
        if prev.version != stage.version() {
            why.push(format!("implementation version {} → {}", prev.version, stage.version()));
        }
        diff_params(name, &prev.params, &params, &mut why);
        let mut inputs = BTreeMap::new();
        if let Some(cache) = cache {
            let offline = RunOptions { until: None, force: &[], offline: true };
            let ctx = context(cache, cfg, progress, stage, &params, &offline);
            match configured.prepare(&ctx) {
                Ok((i, _)) => inputs = i,
                Err(e) => why.push(format!("its sources cannot be read offline ({e:#})")),
            }
        }
        for dep in stage.deps() {
            match fresh_outputs.get(*dep) {
                Some(d) => {
                    inputs.insert((*dep).to_owned(), *d);
                }
                None => why.push(format!("upstream {dep} is not fresh")),
            }
        }
        for (label, d) in &inputs {
            if prev.inputs.get(label) != Some(d) && !why.iter().any(|w| w.contains(label.as_str())) {
                why.push(format!("input {label} changed"));
            }
        }
        if why.is_empty() && cache.is_some_and(|c| cached_record(c, prev.key).ok().flatten().is_none()) {
            why.push("its cached output is gone (gc or corruption)".to_owned());
        }
        if why.is_empty() {
            fresh_outputs.insert(name.to_owned(), prev.output);
            out.push((name.to_owned(), Freshness::Fresh));
        } else {
            out.push((name.to_owned(), Freshness::Stale(why.join("; "))));
        }
    }
    Ok(out)
}

fn diff_params(prefix: &str, old: &serde_json::Value, new: &serde_json::Value, why: &mut Vec<String>) {
    use serde_json::Value;
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                diff_params(&p, a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null), why);
            }
        }
        (a, b) if a != b => why.push(format!("param {prefix} changed ({a} → {b})")),
        _ => {}
    }
}

/// Writes the outputs of the stages a run reached, each through its own stage.
pub fn materialize(
    cache: &Cache,
    out_dir: &Path,
    registry: &[Box<dyn DynStage>],
    stages: &[StageReport],
    archive: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Outputs { cache, dir: out_dir, archive, written: Vec::new() };
    for report in stages {
        let stage = registry.iter().find(|s| s.name() == report.name).context("a stage that ran is registered")?;
        stage.materialize(report.output, &mut out).with_context(|| format!("writing the {} output", report.name))?;
    }
    Ok(out.written)
}
