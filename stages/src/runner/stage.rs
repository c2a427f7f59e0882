//! What a stage is, what the runner gives it, and per-item memoisation.
//!
//! A stage describes itself: its name, version, inputs, params type and their checks,
//! and how its output is written into the build folder. The DAG, the config checks and
//! the outputs are built from the registry of stages (`crate::registry`), so adding a
//! stage touches its own module and one registry line.

use std::any::Any;
use std::collections::BTreeMap;

use anyhow::Context as _;
use atlas_cache::{Cache, Digest, KeyBuilder};
use rayon::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::config::Loaded;
use super::outputs::Outputs;
use super::progress::Progress;
use atlas_runtime::failpoint;

/// What a stage's run hands to the runner.
#[derive(Debug, Default)]
pub struct StageOutput {
    /// The stage's output object (a manifest that names everything else).
    pub output: Option<Digest>,
    /// Every object the output references, itself included.
    pub objects: std::collections::BTreeSet<Digest>,
    /// Memo refs used, for gc.
    pub refs: std::collections::BTreeSet<String>,
    pub items: usize,
    pub reused: usize,
    /// Lines for the log (skipped files, warnings).
    pub notes: Vec<String>,
}

/// A param a stage refuses: the key (for the line number) and why, on one line.
#[derive(Debug)]
pub struct ParamError {
    /// The section the key is found under (default: the stage's own).
    pub within: Option<String>,
    /// The key whose line the error points at.
    pub key: String,
    /// The message, naming `stages.<stage>.<key>` and what is allowed.
    pub message: String,
}

impl ParamError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> ParamError {
        ParamError { within: None, key: key.into(), message: message.into() }
    }

    /// Points the error at `key` under `section` (e.g. a field under `boosts:`).
    pub fn within(mut self, section: &str) -> ParamError {
        self.within = Some(section.to_owned());
        self
    }
}

/// `stages.<stage>.<key>` must be a finite number in `lo..=hi`.
pub fn check_range(stage: &str, key: &str, v: f64, lo: f64, hi: f64) -> Result<(), ParamError> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        return Ok(());
    }
    Err(ParamError::new(key, format!("stages.{stage}.{key} is {v}; it must be a number from {lo} to {hi}")))
}

/// A pipeline stage: a pure function of its params and input artifacts (only the
/// source stage reads the outside world).
pub trait Stage: Send + Sync + 'static {
    /// Its name in the DAG, on the command line and under `stages:` in pipeline.yaml.
    const NAME: &'static str;
    /// Bump when the implementation changes what it produces.
    const VERSION: u32;
    /// The stages whose outputs it reads; they come earlier in the registry.
    const DEPS: &'static [&'static str];
    /// `stages.<NAME>` in pipeline.yaml; every field has a default.
    type Params: Serialize + DeserializeOwned + Default + Send + Sync + 'static;
    /// What [`Stage::external_inputs`] read that [`Stage::run`] needs again (the source
    /// stage's scans), handed over by the runner; `()` for the other stages.
    type Prepared: Default + Send + 'static;

    /// Checks the params beyond their types, at config load, before anything runs.
    fn check(_p: &Self::Params) -> Result<(), ParamError> {
        Ok(())
    }
    /// The params that go into the cache key (default: all of them, canonical).
    fn key_params(p: &Self::Params, _cfg: &Loaded) -> serde_json::Value {
        canonical(p)
    }
    /// Inputs from outside the cache (only the source stage has any), and what was
    /// read to find them, for [`Stage::run`].
    fn external_inputs(
        &self,
        _p: &Self::Params,
        _ctx: &Ctx<'_>,
    ) -> anyhow::Result<(BTreeMap<String, Digest>, Self::Prepared)> {
        Ok((BTreeMap::new(), Self::Prepared::default()))
    }
    /// Computes the output, given what `external_inputs` prepared.
    fn run(&self, p: &Self::Params, ctx: &Ctx<'_>, prepared: Self::Prepared) -> anyhow::Result<StageOutput>;
    /// Writes the stage's output into the build folder (default: nothing).
    fn materialize(_output: Digest, _out: &mut Outputs<'_>) -> anyhow::Result<()> {
        Ok(())
    }
}

/// A stage as the runner holds it, behind `dyn` (implemented for every [`Stage`]).
pub trait DynStage: Send + Sync {
    fn name(&self) -> &'static str;
    fn version(&self) -> u32;
    fn deps(&self) -> &'static [&'static str];
    /// Parses and checks `stages.<name>` of the config text: the typed params, or a
    /// one-line error (`LINE:COL: message` where the position is known).
    fn parse_params(&self, text: &str) -> Result<Box<dyn Any + Send + Sync>, ParamFailure>;
    fn canonical_params(&self, typed: &(dyn Any + Send + Sync)) -> serde_json::Value;
    fn key_params(&self, cfg: &Loaded) -> serde_json::Value;
    fn external_inputs(&self, ctx: &Ctx<'_>) -> anyhow::Result<(BTreeMap<String, Digest>, Prepared)>;
    fn run(&self, ctx: &Ctx<'_>, prepared: Prepared) -> anyhow::Result<StageOutput>;
    fn materialize(&self, output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()>;
}

impl std::fmt::Debug for dyn DynStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} v{}", self.name(), self.version())
    }
}

/// A stage's [`Stage::Prepared`] behind `dyn`, from `external_inputs` to `run`.
pub type Prepared = Box<dyn Any + Send>;

/// Why a stage's params were refused.
#[derive(Debug)]
pub enum ParamFailure {
    /// The YAML did not deserialise: the message, with its position when known.
    Parse(String),
    /// A value its type allows but the stage does not.
    Check(ParamError),
}

impl<S: Stage> DynStage for S {
    fn name(&self) -> &'static str {
        S::NAME
    }
    fn version(&self) -> u32 {
        S::VERSION
    }
    fn deps(&self) -> &'static [&'static str] {
        S::DEPS
    }
    fn parse_params(&self, text: &str) -> Result<Box<dyn Any + Send + Sync>, ParamFailure> {
        let p: S::Params = super::config::stage_section(text, S::NAME).map_err(ParamFailure::Parse)?;
        S::check(&p).map_err(ParamFailure::Check)?;
        Ok(Box::new(p))
    }
    fn canonical_params(&self, typed: &(dyn Any + Send + Sync)) -> serde_json::Value {
        typed.downcast_ref::<S::Params>().map(canonical).unwrap_or_default()
    }
    fn key_params(&self, cfg: &Loaded) -> serde_json::Value {
        S::key_params(cfg.params::<S::Params>(S::NAME), cfg)
    }
    fn external_inputs(&self, ctx: &Ctx<'_>) -> anyhow::Result<(BTreeMap<String, Digest>, Prepared)> {
        let (inputs, prepared) = Stage::external_inputs(self, ctx.cfg.params::<S::Params>(S::NAME), ctx)?;
        Ok((inputs, Box::new(prepared)))
    }
    fn run(&self, ctx: &Ctx<'_>, prepared: Prepared) -> anyhow::Result<StageOutput> {
        let prepared = prepared.downcast::<S::Prepared>().map_or_else(|_| S::Prepared::default(), |p| *p);
        Stage::run(self, ctx.cfg.params::<S::Params>(S::NAME), ctx, prepared)
    }
    fn materialize(&self, output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()> {
        S::materialize(output, out)
    }
}

/// Canonical JSON of a params value: object keys sorted (serde_json's default map),
/// defaults filled in by the typed structs.
pub fn canonical<T: Serialize>(params: &T) -> serde_json::Value {
    serde_json::to_value(params).expect("params serialise")
}

/// What the runner gives a stage.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub cache: &'a Cache,
    pub cfg: &'a Loaded,
    pub progress: &'a Progress,
    /// The stage being run, its version and its key params (for item keys).
    pub stage: &'static str,
    pub version: u32,
    pub key_params: &'a serde_json::Value,
    /// The outputs of the stages it depends on, by stage name.
    pub inputs: &'a BTreeMap<String, Digest>,
    /// Recompute items even when memoised (`--force STAGE`).
    pub force: bool,
    pub offline: bool,
}

impl<'a> Ctx<'a> {
    /// The output of stage `dep`, decoded as `T` (its manifest type).
    pub fn input<T: DeserializeOwned>(&self, dep: &str) -> anyhow::Result<T> {
        let d = self.inputs.get(dep).copied().with_context(|| format!("missing input {dep}"))?;
        self.load(d, &format!("the {dep} output"))
    }

    /// A JSON object from the cache, decoded as `T`.
    pub fn load<T: DeserializeOwned>(&self, d: Digest, what: &str) -> anyhow::Result<T> {
        load_json(self.cache, d, what)
    }

    /// The memo key of one item of this stage: the stage, its version, its key params,
    /// the labelled parts and the item's content digest.
    pub fn item_key(&self, parts: &[(&str, &str)], content: Digest) -> Digest {
        let mut k = KeyBuilder::new("item");
        k.str("stage", self.stage)
            .part("version", &self.version.to_le_bytes())
            .str("params", &self.key_params.to_string());
        for (label, v) in parts {
            k.str(label, v);
        }
        k.digest("content", content).finish()
    }

    /// Per-item memoisation for a stage that computes its misses itself (the embed
    /// stage batches windows across items): each item's memo entry looked up under
    /// `item-<stage>/<key>` (none with `--force`), stored as the stage completes it.
    pub fn memo(&self, keys: Vec<Digest>) -> anyhow::Result<Memo<'_, 'a>> {
        let ns = format!("item-{}", self.stage);
        let mut have = vec![None; keys.len()];
        if !self.force {
            for (slot, k) in have.iter_mut().zip(&keys) {
                *slot = self.cache.get_ref(&ns, *k)?;
            }
        }
        let reused = have.iter().filter(|d| d.is_some()).count();
        Ok(Memo { ctx: self, ns, keys, have, reused })
    }

    /// Runs `compute` for each item in parallel, memoised in the cache under
    /// `item-<stage>/<key>` (the plain form of [`Ctx::memo`]). Returns each item's
    /// output digest, in input order.
    pub fn memoised<T: Sync>(
        &self,
        items: &[T],
        key: impl Fn(&T) -> Digest + Sync,
        compute: impl Fn(&T) -> anyhow::Result<Vec<u8>> + Sync,
        out: &mut StageOutput,
    ) -> anyhow::Result<Vec<Digest>> {
        let memo = self.memo(items.par_iter().map(&key).collect())?;
        let bar = self.progress.stage(self.stage, items.len());
        bar.inc_by(memo.reused);
        let computed: Vec<anyhow::Result<(usize, Digest)>> = memo
            .missing()
            .into_par_iter()
            .map(|i| {
                let d = memo.put(i, &compute(&items[i])?)?;
                bar.inc();
                Ok((i, d))
            })
            .collect();
        bar.finish();
        let mut memo = memo;
        for r in computed {
            let (i, d) = r?;
            memo.have[i] = Some(d);
        }
        memo.finish(out)
    }

    /// Called after each item the stage computes itself (not for memo hits), for the
    /// crash tests' fault injection.
    pub fn item_done(&self) {
        failpoint::count("crash-after", Some(self.stage));
    }
}

/// The memo entries of one stage run's items (see [`Ctx::memo`]).
#[derive(Debug)]
pub struct Memo<'c, 'a> {
    ctx: &'c Ctx<'a>,
    ns: String,
    keys: Vec<Digest>,
    have: Vec<Option<Digest>>,
    reused: usize,
}

impl Memo<'_, '_> {
    /// The items without a memo entry, in order.
    pub fn missing(&self) -> Vec<usize> {
        (0..self.have.len()).filter(|&i| self.have[i].is_none()).collect()
    }

    /// Stores item `i`'s output and its memo entry; returns the output's digest.
    /// Safe from several threads; record the digest with [`Memo::set`].
    pub fn put(&self, i: usize, bytes: &[u8]) -> anyhow::Result<Digest> {
        let d = self.ctx.cache.put(bytes)?;
        self.ctx.cache.set_ref(&self.ns, self.keys[i], d)?;
        self.ctx.item_done();
        Ok(d)
    }

    /// Stores item `i`'s output (as [`Memo::put`]) and records it.
    pub fn store(&mut self, i: usize, bytes: &[u8]) -> anyhow::Result<Digest> {
        let d = self.put(i, bytes)?;
        self.have[i] = Some(d);
        Ok(d)
    }

    /// Each item's output digest, in order, once every item has one; the refs,
    /// objects and counts go into `out`.
    pub fn finish(self, out: &mut StageOutput) -> anyhow::Result<Vec<Digest>> {
        let mut digests = Vec::with_capacity(self.have.len());
        for (k, d) in self.keys.iter().zip(self.have) {
            let d = d.context("an item was neither memoised nor computed")?;
            out.refs.insert(Cache::ref_name(&self.ns, *k));
            out.objects.insert(d);
            digests.push(d);
        }
        out.items += digests.len();
        out.reused += self.reused;
        Ok(digests)
    }
}

/// A JSON object from the cache, decoded as `T`; the error names `what`.
pub fn load_json<T: DeserializeOwned>(cache: &Cache, d: Digest, what: &str) -> anyhow::Result<T> {
    let bytes = cache.get_required(d).with_context(|| format!("loading {what}"))?;
    serde_json::from_slice(&bytes).with_context(|| format!("decoding {what} {}", d.short()))
}
