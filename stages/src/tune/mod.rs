//! tune: the bundle teaches its own query model. Pairs mined from the chunks
//! ([`pairs`]: a heading and its section, a page's description and its page, a doc
//! comment and its item, with the answer's names stripped from the question side) fit
//! a low-rank residual map on the query vector ([`fit`]), which the bundle ships as
//! `query_map.bin` and every query path applies (`atlas_runtime::query_map`).
//!
//! A seeded tenth of the pairs is held out; the map is kept only when it ranks the
//! held-out answers better than the model alone, and the manifest records both figures
//! and what it was fitted on. `stages.tune: true` turns it on (off by default until it
//! lifts held-out questions, not only held-out pairs). The questions'
//! vectors are memoised per text, like the embed stage's.

pub mod fit;
pub mod pairs;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Context as _;
use atlas_cache::{Digest, KeyBuilder};
use atlas_runtime::encoder::{Encoder, EncoderOptions};
use atlas_runtime::manifest::TuneInfo;
use atlas_runtime::model;
use atlas_runtime::query_map;
use serde::{Deserialize, Serialize};

use crate::artifacts::{ChunkManifest, EmbedManifest, TuneManifest};
use crate::runner::{Ctx, Outputs, ParamError, Stage, StageOutput, check_range, load_json};
use fit::{Answers, Example, FitOptions};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TuneFields {
    /// On: fit and ship a query map. Off by default: on our development sets it lifts
    /// the tune halves but not the test halves (docs/decisions.md, "Quality, round 4");
    /// off, the bundle serves with the model's query vectors.
    pub enabled: bool,
    /// The map's rank (A and B are dims × rank).
    pub rank: usize,
    /// At most this many passes over the pairs.
    pub epochs: usize,
    /// Pairs a step.
    pub batch: usize,
    pub learning_rate: f32,
    /// Hard negatives a question and step, from its nearest chunks of other files.
    pub hard_negatives: usize,
    /// The softmax's scale (1 / temperature).
    pub scale: f32,
    pub weight_decay: f32,
    /// At most this many pairs (a seeded sample of them), to bound the stage's time.
    pub max_pairs: usize,
    /// Draws the held-out tenth, B's start and the order of the steps.
    pub seed: u64,
}

/// `stages.tune`: `false`, or the fields of [`TuneFields`].
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
#[serde(transparent)]
pub struct TuneParams(pub TuneFields);

impl Default for TuneFields {
    fn default() -> Self {
        TuneFields {
            enabled: false,
            rank: 64,
            epochs: 12,
            batch: 64,
            learning_rate: 1e-3,
            hard_negatives: 4,
            scale: 20.0,
            weight_decay: 1e-4,
            max_pairs: 4000,
            seed: 7,
        }
    }
}

impl<'de> Deserialize<'de> for TuneParams {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = TuneParams;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("false, true, or the tune stage's fields")
            }
            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<TuneParams, E> {
                Ok(TuneParams(TuneFields { enabled: on, ..TuneFields::default() }))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<TuneParams, E> {
                Ok(TuneParams::default())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<TuneParams, A::Error> {
                TuneFields::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(TuneParams)
            }
        }
        d.deserialize_any(Visit)
    }
}

#[derive(Debug, Default)]
pub struct Tune;

/// The questions' vectors, as memoised: dims f32 LE.
fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode(b: &[u8], dims: usize) -> anyhow::Result<Vec<f32>> {
    anyhow::ensure!(b.len() == dims * 4, "a memoised question vector has the wrong size");
    Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

impl Stage for Tune {
    const NAME: &'static str = "tune";
    const VERSION: u32 = 1;
    const DEPS: &'static [&'static str] = &["chunk", "embed"];
    type Params = TuneParams;
    type Prepared = ();

    fn check(TuneParams(p): &TuneParams) -> Result<(), ParamError> {
        let range = |key: &str, v: f64, lo: f64, hi: f64| check_range(Self::NAME, key, v, lo, hi);
        range("rank", p.rank as f64, 1.0, query_map::MAX_RANK as f64)?;
        range("epochs", p.epochs as f64, 1.0, 200.0)?;
        range("batch", p.batch as f64, 2.0, 4096.0)?;
        range("learning_rate", f64::from(p.learning_rate), 1e-6, 1.0)?;
        range("hard_negatives", p.hard_negatives as f64, 0.0, fit::HARD_POOL as f64)?;
        range("scale", f64::from(p.scale), 1.0, 100.0)?;
        range("weight_decay", f64::from(p.weight_decay), 0.0, 1.0)?;
        range("max_pairs", p.max_pairs as f64, 10.0, 1e6)
    }

    fn run(&self, TuneParams(p): &TuneParams, ctx: &Ctx<'_>, (): ()) -> anyhow::Result<StageOutput> {
        let mut out = StageOutput::default();
        let embed: EmbedManifest = ctx.input("embed")?;
        if !p.enabled || embed.rows == 0 {
            if p.enabled {
                out.notes.push("no vectors to tune a query model for".into());
            }
            return finish(out, TuneManifest::default(), ctx);
        }
        let t0 = Instant::now();
        let chunk: ChunkManifest = ctx.input("chunk")?;
        let records = atlas_runtime::chunk_table::from_parquet(&ctx.cache.get_required(chunk.chunks)?)?;
        let mut mined = pairs::mine(&records);
        let counts = pairs::counts(&mined);
        let mut rng = fastrand::Rng::with_seed(p.seed);
        rng.shuffle(&mut mined);
        mined.truncate(p.max_pairs);
        let held_n = mined.len() / 10;
        if held_n < 5 {
            out.notes.push(format!("{} pairs mined: too few to fit a query model on; none shipped", mined.len()));
            return finish(out, TuneManifest::default(), ctx);
        }
        // The fixed side: each chunk's first window, unit length, and its file.
        let (rows, dims, data) = atlas_runtime::vectors::from_npy_f16(&ctx.cache.get_required(embed.embeddings)?)?;
        anyhow::ensure!(
            rows == embed.window_chunk.len() && dims == embed.dims,
            "the embed output's matrix and row map disagree"
        );
        let mut first = vec![usize::MAX; records.len()];
        for (row, &c) in embed.window_chunk.iter().enumerate() {
            let f = &mut first[c as usize];
            *f = (*f).min(row);
        }
        let mut answer_rows = vec![0.0f32; records.len() * dims];
        for (c, &row) in first.iter().enumerate() {
            if row == usize::MAX {
                continue;
            }
            let v = &mut answer_rows[c * dims..(c + 1) * dims];
            for (x, h) in v.iter_mut().zip(&data[row * dims..(row + 1) * dims]) {
                *x = h.to_f32();
            }
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|x| *x /= n);
        }
        let mut files: BTreeMap<&str, u32> = BTreeMap::new();
        let file: Vec<u32> = records
            .iter()
            .map(|r| {
                let n = files.len() as u32;
                *files.entry(r.path.as_str()).or_insert(n)
            })
            .collect();
        // The question sides, embedded as queries are (one at a time, as the runtime
        // does), memoised by model and text.
        let spec = model::spec(&embed.model).with_context(|| format!("unknown model {:?}", embed.model))?;
        let encoder = Encoder::load(spec, &model::model_dir(spec.id), &model::ort_dylib(), &EncoderOptions::query())?;
        let key = |q: &pairs::Pair| {
            let mut k = KeyBuilder::new("item");
            k.str("stage", Self::NAME).str("model", &embed.model_sha256);
            k.digest("question", Digest::of(q.question.as_bytes())).finish()
        };
        let vectors = ctx.memoised(&mined, key, |q| Ok(encode(&encoder.embed_query(&q.question)?)), &mut out)?;
        let mut examples = Vec::with_capacity(mined.len());
        for (pair, d) in mined.iter().zip(vectors) {
            examples.push(Example { q: decode(&ctx.cache.get_required(d)?, dims)?, chunk: pair.chunk });
        }
        let train = examples.split_off(held_n);
        let held = examples;
        let answers = Answers { dims, rows: &answer_rows, file: &file };
        let o = FitOptions {
            rank: p.rank.min(dims),
            epochs: p.epochs,
            batch: p.batch,
            learning_rate: p.learning_rate,
            hard: p.hard_negatives,
            scale: p.scale,
            weight_decay: p.weight_decay,
            seed: p.seed,
        };
        let fitted = fit::fit(&train, &held, &answers, &o);
        let secs = t0.elapsed().as_secs_f64();
        out.notes.push(format!(
            "{} pairs mined ({}), {} held out: held-out MRR@10 {:.3} → {:.3} after {} passes, in {secs:.1} s",
            counts.values().sum::<usize>(),
            counts.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", "),
            held.len(),
            fitted.before,
            fitted.after,
            fitted.epochs,
        ));
        if fitted.epochs == 0 {
            out.notes.push("the query model did not beat the model on the held-out pairs: none shipped".into());
            return finish(out, TuneManifest::default(), ctx);
        }
        let map = ctx.cache.put(&fitted.map.to_bytes())?;
        out.objects.insert(map);
        let info = TuneInfo {
            file: query_map::FILE.to_owned(),
            rank: fitted.map.rank,
            pairs: counts,
            held_out: held.len(),
            seed: p.seed,
            epochs: fitted.epochs,
            held_out_mrr_before: round(fitted.before),
            held_out_mrr_after: round(fitted.after),
        };
        out.items = mined.len();
        finish(out, TuneManifest { map: Some(map), info: Some(info) }, ctx)
    }

    /// `query_map.bin` (when one was fitted) and `tune.json` (what it was fitted on).
    fn materialize(output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()> {
        let m: TuneManifest = load_json(out.cache, output, "the tune manifest")?;
        if let Some(map) = m.map {
            out.write(query_map::FILE, &out.cache.get_required(map)?, true)?;
        }
        out.write("tune.json", &serde_json::to_vec_pretty(&m)?, false)
    }
}

/// Four decimals: the manifest's figures read the same on every machine.
fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn finish(mut out: StageOutput, m: TuneManifest, ctx: &Ctx<'_>) -> anyhow::Result<StageOutput> {
    let d = ctx.cache.put_json(&m)?;
    out.objects.insert(d);
    out.output = Some(d);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use atlas_runtime::query_map::QueryMap;

    use super::*;

    #[test]
    fn tune_true_or_false_and_fields_keep_their_defaults() {
        let off: TuneParams = serde_json::from_str("false").unwrap();
        assert!(!off.0.enabled);
        let on: TuneParams = serde_json::from_str("true").unwrap();
        assert_eq!(on.0, TuneFields { enabled: true, ..TuneFields::default() });
        let some: TuneParams = serde_json::from_str(r#"{"rank": 8}"#).unwrap();
        assert_eq!(some.0, TuneFields { rank: 8, ..TuneFields::default() });
        let bad = serde_json::from_str::<TuneParams>(r#"{"rnk": 8}"#).unwrap_err().to_string();
        assert!(bad.contains("rnk"), "{bad}");
        let m = QueryMap::identity(4, 2);
        assert_eq!(QueryMap::from_bytes(&m.to_bytes(), 4).unwrap(), m);
    }
}
