//! What a stage is, what the runner gives it, and per-item memoisation.
//!
//! A stage describes itself: its name, version, inputs, params type and their checks,
//! and how its output is written into the build folder. The DAG, the config checks and
//! the outputs are built from the registry of stages (`crate::registry`), so adding a
//! stage touches its own module and one registry line.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use atlas_cache::{Cache, Digest, KeyBuilder};
use rayon::prelude::*;
use serde::Serialize;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::config::{ConfigError, PipelineConfig, SourceConfig, Versions, yaml_error, yaml_options};
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
pub trait Stage: Default + Send + Sync + 'static {
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

/// A stage as the registry holds it, behind `dyn` (implemented for every [`Stage`]):
/// what it is, and how it reads its params into a [`Configured`] stage.
pub trait DynStage: Send + Sync {
    fn name(&self) -> &'static str;
    fn version(&self) -> u32;
    fn deps(&self) -> &'static [&'static str];
    /// Reads `stages.<name>` (`None`: the section is absent) as this stage's typed
    /// params: the stage configured with them. A `null` section means the defaults.
    fn configure(
        &self,
        section: Option<&mut dyn erased_serde::Deserializer<'_>>,
    ) -> Result<Arc<dyn Configured>, erased_serde::Error>;
    fn materialize(&self, output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()>;
}

impl fmt::Debug for dyn DynStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} v{}", self.name(), self.version())
    }
}

/// A stage with its typed params, as a loaded config holds it: what the runner calls.
pub trait Configured: Send + Sync + fmt::Debug {
    /// The params beyond their types ([`Stage::check`]).
    fn check(&self) -> Result<(), ParamError>;
    /// The params as canonical JSON: what a bundle records it was built with.
    fn canonical(&self) -> serde_json::Value;
    /// The same stage with params read from `value` (canonical JSON, edited).
    fn reconfigure(&self, value: serde_json::Value) -> Result<Arc<dyn Configured>, serde_json::Error>;
    fn key_params(&self, cfg: &Loaded) -> serde_json::Value;
    /// The inputs from outside the cache, and the stage ready to run on what was read
    /// to find them.
    fn prepare(&self, ctx: &Ctx<'_>) -> anyhow::Result<(BTreeMap<String, Digest>, Box<dyn Ready + '_>)>;
}

/// A configured stage with what [`Configured::prepare`] read, ready to run once.
pub trait Ready: Send {
    fn run(self: Box<Self>, ctx: &Ctx<'_>) -> anyhow::Result<StageOutput>;
}

/// A [`Stage`] and its params.
struct WithParams<S: Stage> {
    stage: S,
    params: S::Params,
}

/// A [`WithParams`] and its [`Stage::Prepared`].
struct Prepared<'c, S: Stage> {
    with: &'c WithParams<S>,
    prepared: S::Prepared,
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
    fn configure(
        &self,
        section: Option<&mut dyn erased_serde::Deserializer<'_>>,
    ) -> Result<Arc<dyn Configured>, erased_serde::Error> {
        let params = match section {
            Some(de) => erased_serde::deserialize::<Option<S::Params>>(de)?.unwrap_or_default(),
            None => S::Params::default(),
        };
        Ok(Arc::new(WithParams { stage: S::default(), params }))
    }
    fn materialize(&self, output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()> {
        S::materialize(output, out)
    }
}

impl<S: Stage> fmt::Debug for WithParams<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} v{} {}", S::NAME, S::VERSION, canonical(&self.params))
    }
}

impl<S: Stage> Configured for WithParams<S> {
    fn check(&self) -> Result<(), ParamError> {
        S::check(&self.params)
    }
    fn canonical(&self) -> serde_json::Value {
        canonical(&self.params)
    }
    fn reconfigure(&self, value: serde_json::Value) -> Result<Arc<dyn Configured>, serde_json::Error> {
        Ok(Arc::new(WithParams { stage: S::default(), params: serde_json::from_value::<S::Params>(value)? }))
    }
    fn key_params(&self, cfg: &Loaded) -> serde_json::Value {
        S::key_params(&self.params, cfg)
    }
    fn prepare(&self, ctx: &Ctx<'_>) -> anyhow::Result<(BTreeMap<String, Digest>, Box<dyn Ready + '_>)> {
        let (inputs, prepared) = self.stage.external_inputs(&self.params, ctx)?;
        Ok((inputs, Box::new(Prepared { with: self, prepared })))
    }
}

impl<S: Stage> Ready for Prepared<'_, S> {
    fn run(self: Box<Self>, ctx: &Ctx<'_>) -> anyhow::Result<StageOutput> {
        self.with.stage.run(&self.with.params, ctx, self.prepared)
    }
}

/// Canonical JSON of a params value: object keys sorted (serde_json's default map),
/// defaults filled in by the typed structs.
pub fn canonical<T: Serialize>(params: &T) -> serde_json::Value {
    serde_json::to_value(params).expect("params serialise")
}

/// A loaded config: the parsed file plus where it lives.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub dir: PathBuf,
    pub config: PipelineConfig,
    /// Each registered stage with its params, typed (defaults filled) and checked.
    pub(super) stages: BTreeMap<&'static str, Arc<dyn Configured>>,
    /// The same, as canonical JSON: what the bundle records it was built with.
    pub(super) canonical: BTreeMap<&'static str, serde_json::Value>,
}

impl Loaded {
    /// Stage `name` with its params: what the runner calls.
    pub fn stage(&self, name: &str) -> Result<&dyn Configured, ConfigError> {
        self.stages
            .get(name)
            .map(|s| &**s)
            .ok_or_else(|| ConfigError(format!("{}: no stage {name} was configured", self.path.display())))
    }

    /// `atlas-pipeline run --sections/--max-pages`: replaces every llms.txt source's
    /// own `sections` (when `sections` is not empty) and `max_pages`, so the stages see
    /// one config and no stage reads the command line.
    pub fn override_crawl(&mut self, sections: &[String], max_pages: Option<usize>) {
        for src in self.config.sources.values_mut() {
            if let SourceConfig::LlmsTxt { sections: s, max_pages: m, .. } = src {
                if !sections.is_empty() {
                    *s = sections.to_vec();
                }
                if max_pages.is_some() {
                    *m = max_pages;
                }
            }
        }
    }

    /// Edits stage `name`'s params as canonical JSON (a version train's pack version),
    /// reading them back as the stage's typed params and checking them.
    pub fn edit_params(&mut self, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> Result<(), ConfigError> {
        let shown = self.path.display().to_string();
        let (key, stage) = self
            .stages
            .get_key_value(name)
            .ok_or_else(|| ConfigError(format!("{shown}: no stage {name} was configured")))?;
        let mut value = stage.canonical();
        edit(&mut value);
        let edited = stage.reconfigure(value).map_err(|e| ConfigError(format!("{shown}: stages.{name}: {e}")))?;
        edited.check().map_err(|e| ConfigError(format!("{shown}: {}", e.message)))?;
        let key = *key;
        self.canonical.insert(key, edited.canonical());
        self.stages.insert(key, edited);
        Ok(())
    }

    /// The git source with a version train, if any: its name, URL and versions.
    pub fn train(&self) -> Result<Option<(String, String, Versions)>, ConfigError> {
        let mut trains = self.config.sources.iter().filter_map(|(n, s)| match s {
            SourceConfig::Git { url, versions: Some(v), .. } => Some((n.clone(), url.clone(), v.clone())),
            _ => None,
        });
        let first = trains.next();
        if trains.next().is_some() {
            return Err(ConfigError(format!(
                "{}: more than one source has versions; a bundle's version comes from one",
                self.path.display()
            )));
        }
        Ok(first)
    }

    /// This config at one tag of its train: the git source at `tag`.
    pub fn at_tag(&self, source: &str, tag: &str) -> Loaded {
        let mut one = self.clone();
        if let Some(SourceConfig::Git { rev, versions, .. }) = one.config.sources.get_mut(source) {
            *rev = Some(tag.to_owned());
            *versions = None;
        }
        one
    }

    /// Every stage's params as canonical JSON, by stage name.
    pub fn canonical_params(&self) -> &BTreeMap<&'static str, serde_json::Value> {
        &self.canonical
    }

    /// Resolves a path written in the config against the config's folder.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() { p.to_owned() } else { self.dir.join(p) }
    }
}

/// Reads every registered stage's section of the config text in one pass (the rest of
/// the file was read by [`parse`]): each stage configured with its typed params, by
/// name. Errors read `LINE:COL: message`, as [`parse`]'s do.
pub(super) fn configure_stages(
    text: &str,
    registry: &[Box<dyn DynStage>],
) -> Result<BTreeMap<&'static str, Arc<dyn Configured>>, ConfigError> {
    let mut found = serde_saphyr::with_deserializer_from_str_with_options(text, yaml_options(), |de| {
        serde::Deserializer::deserialize_map(de, Sections { registry, nested: false })
    })
    .map_err(|e| ConfigError(yaml_error(text, &e)))?;
    for stage in registry {
        if !found.contains_key(stage.name()) {
            let defaults = stage.configure(None).map_err(|e| ConfigError(format!(" stages.{}: {e}", stage.name())))?;
            found.insert(stage.name(), defaults);
        }
    }
    Ok(found)
}

/// At the top level it looks for `stages:`; inside it, it configures each registered
/// stage from its section (a name that is not registered was refused by [`parse`]).
struct Sections<'r> {
    registry: &'r [Box<dyn DynStage>],
    nested: bool,
}

type ConfiguredStages = BTreeMap<&'static str, Arc<dyn Configured>>;

impl<'de> Visitor<'de> for Sections<'_> {
    type Value = ConfiguredStages;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(BTreeMap::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if !self.nested && key == "stages" {
                found = map.next_value_seed(Sections { registry: self.registry, nested: true })?;
            } else if let Some(stage) = self.registry.iter().find(|s| self.nested && s.name() == key) {
                found.insert(stage.name(), map.next_value_seed(Section(&**stage))?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

impl<'de> DeserializeSeed<'de> for Sections<'_> {
    type Value = ConfiguredStages;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

/// One stage's section, read as its typed params.
struct Section<'r>(&'r dyn DynStage);

impl<'de> DeserializeSeed<'de> for Section<'_> {
    type Value = Arc<dyn Configured>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let mut erased = <dyn erased_serde::Deserializer>::erase(d);
        self.0.configure(Some(&mut erased)).map_err(serde::de::Error::custom)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::config::parse;

    #[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Params {
        overlap_chars: usize,
        ratio: f64,
    }

    /// Two stages, `chunk` and `pack`, with [`Params`].
    #[derive(Debug, Default)]
    struct ChunkLike;
    #[derive(Debug, Default)]
    struct PackLike;
    macro_rules! test_stage {
        ($t:ty, $name:literal) => {
            impl Stage for $t {
                const NAME: &'static str = $name;
                const VERSION: u32 = 1;
                const DEPS: &'static [&'static str] = &[];
                type Params = Params;
                type Prepared = ();
                fn check(p: &Params) -> Result<(), ParamError> {
                    if p.ratio == 0.0 { Ok(()) } else { check_range($name, "ratio", p.ratio, 0.0, 4.0) }
                }
                fn run(&self, _: &Params, _: &Ctx<'_>, (): ()) -> anyhow::Result<StageOutput> {
                    anyhow::bail!("not run in these tests")
                }
            }
        };
    }
    test_stage!(ChunkLike, "chunk");
    test_stage!(PackLike, "pack");

    /// Stage `name` as `text` configures it.
    fn stage(text: &str, name: &str) -> Result<Arc<dyn Configured>, String> {
        let registry: Vec<Box<dyn DynStage>> = vec![Box::new(ChunkLike), Box::new(PackLike)];
        Ok(configure_stages(text, &registry).map_err(|e| e.0)?[name].clone())
    }

    /// Stage `name`'s params as `text` configures them.
    fn configured(text: &str, name: &str) -> Result<Params, String> {
        Ok(serde_json::from_value(stage(text, name)?.canonical()).unwrap())
    }

    #[test]
    fn defaults_are_filled_so_explicit_defaults_do_not_change_keys() {
        let absent = configured("name: x\nsources: {}\n", "chunk").unwrap();
        let null = configured("name: x\nsources: {}\nstages:\n  chunk:\n", "chunk").unwrap();
        let explicit = configured("name: x\nsources: {}\nstages:\n  chunk:\n    overlap_chars: 0\n", "chunk").unwrap();
        assert_eq!(absent, explicit);
        assert_eq!(absent, null);
    }

    #[test]
    fn each_stage_reads_its_own_section_and_its_errors_have_a_line() {
        let text =
            "name: x\nsources: {}\nstages:\n  chunk:\n    overlap_chars: 7\n    ratio: .nan\n  pack:\n    ratio: 2\n";
        let chunk = stage(text, "chunk").unwrap();
        assert_eq!(chunk.canonical()["overlap_chars"], 7);
        let e = chunk.check().unwrap_err();
        assert!(e.key == "ratio" && e.message.contains("NaN"), "NaN survives to the stage's own range check: {e:?}");
        assert_eq!(configured(text, "pack").unwrap().ratio, 2.0);
        // The whole-file parse skips the sections, .nan included (it must not reject it
        // before the stage's check can name the key).
        parse(text, &["pack", "chunk"]).unwrap();
        let bad = "name: x\nsources: {}\nstages:\n  chunk:\n    overlap_chars: 7\n  pack:\n    colour: 1\n";
        let e = configured(bad, "chunk").unwrap_err();
        assert!(e.starts_with("7:") && e.contains("colour"), "{e}");
    }
}
