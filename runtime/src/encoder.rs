//! Text embeddings with ONNX Runtime (`ort`, load-dynamic) and `tokenizers`.
//!
//! The shipped tokenizer.json of the default model pads and truncates every input to
//! 128 tokens; both are turned off here: batches are padded to their longest member
//! and long texts are cut into windows by the caller. Vectors are pooled as the model
//! says (mean over the attention mask, or CLS) and L2-normalised.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ndarray::Array2;
use ort::session::Session;
use ort::value::TensorRef;
use tokenizers::Tokenizer;

use crate::model::{ModelSpec, Pooling};
use crate::{Error, ModelError, Result};

/// Where the session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Auto,
    Cpu,
    Cuda,
    Coreml,
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Backend, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "cpu" => Ok(Backend::Cpu),
            "cuda" => Ok(Backend::Cuda),
            "coreml" => Ok(Backend::Coreml),
            other => Err(format!("unknown backend {other:?}; use auto, cpu, cuda or coreml")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct EncoderOptions {
    pub intra_threads: usize,
    pub backend: Backend,
    /// Let idle intra-op workers spin (`session.intra_op.allow_spinning`). Good for
    /// back-to-back batches; at query time a spinning worker steals the core the
    /// keyword search needs next.
    pub spinning: bool,
    /// ONNX Runtime's CPU memory arena: fast for big batches, but it keeps its peak
    /// (about 1.5 GB after a few 32×256 batches). Off at query time.
    pub arena: bool,
    /// Run an int8 model's weights as int8 ([`crate::int8`]): no float copy of them in
    /// memory. At query time (`ATLAS_INT8_WEIGHTS=0` turns it off).
    pub int8_weights: bool,
    /// With `int8_weights`, also run each attention block, GELU and bias add as one
    /// fused kernel ([`crate::int8`]). On by default; the embed bench turns it off to
    /// measure it.
    pub fused: bool,
}

impl Default for EncoderOptions {
    /// Build-time settings: every core, spinning and the arena on.
    fn default() -> Self {
        EncoderOptions {
            intra_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            backend: Backend::Cpu,
            spinning: true,
            arena: true,
            int8_weights: false,
            fused: true,
        }
    }
}

impl EncoderOptions {
    /// Query-time settings: one short input at a time, no spinning, no arena.
    pub fn query() -> EncoderOptions {
        let int8_weights = std::env::var("ATLAS_INT8_WEIGHTS").map_or(true, |v| v != "0");
        EncoderOptions { spinning: false, arena: false, int8_weights, ..EncoderOptions::default() }
    }
}

/// A session on `model_path` with `opts`; warnings name accelerators that were not
/// there, and an int8 model whose attention the rewrite could not fuse.
pub(crate) fn session(model_path: &Path, lib: &Path, opts: &EncoderOptions) -> Result<(Session, Vec<String>)> {
    let env = environment(lib)?;
    let mut warnings = Vec::new();
    let mut builder = Session::builder(env).map_err(ort_err("creating a session"))?;
    builder = builder
        .with_intra_threads(opts.intra_threads.max(1))
        .map_err(cfg("setting threads"))?
        .with_inter_threads(1)
        .map_err(cfg("setting threads"))?
        .with_intra_op_spinning(opts.spinning)
        .map_err(cfg("setting spinning"))?;
    if !opts.arena {
        builder = builder
            .with_memory_pattern(false)
            .map_err(cfg("turning the memory pattern off"))?
            .with_execution_providers([ort::ep::CPU::default().with_arena_allocator(false).build()])
            .map_err(cfg("turning the CPU arena off"))?;
    }
    let accelerators: Vec<(&str, ort::ep::ExecutionProviderDispatch)> = match opts.backend {
        Backend::Cpu => Vec::new(),
        Backend::Cuda => vec![("CUDA", ort::ep::CUDA::default().build().error_on_failure())],
        Backend::Coreml => vec![("CoreML", ort::ep::CoreML::default().build().error_on_failure())],
        Backend::Auto => vec![
            ("CUDA", ort::ep::CUDA::default().build().error_on_failure()),
            ("CoreML", ort::ep::CoreML::default().build().error_on_failure()),
        ],
    };
    for (name, ep) in accelerators {
        match builder.clone().with_execution_providers([ep]) {
            Ok(b) => {
                builder = b;
                break;
            }
            Err(e) => {
                if opts.backend != Backend::Auto {
                    warnings.push(format!("{name} is not available here ({e}); running on the CPU"));
                }
            }
        }
    }
    let loading = |e: ort::Error| Error::Model(ModelError::caused(format!("loading {}", model_path.display()), e));
    let rewritten = match opts.int8_weights {
        true => std::fs::read(model_path)
            .map_err(|error| Error::Io { path: model_path.to_owned(), error })
            .map(|b| crate::int8::rewrite(&b, opts.fused))?,
        false => None,
    };
    if let Some((_, fused)) = &rewritten
        && opts.fused
        && (fused.attention == 0 || fused.gelu == 0)
    {
        warnings.push(format!(
            "{}: its attention or GELU is not in a form the int8 rewrite fuses ({} attention blocks, {} GELUs fused); it runs unfused, slower",
            model_path.display(),
            fused.attention,
            fused.gelu
        ));
    }
    let session = match rewritten {
        Some((bytes, _)) => builder.commit_from_memory(&bytes).map_err(loading)?,
        None => builder.commit_from_file(model_path).map_err(loading)?,
    };
    Ok((session, warnings))
}

#[derive(Debug)]
pub struct Encoder {
    session: Mutex<Session>,
    tokenizer: Tokenizer,
    pub spec: &'static ModelSpec,
    /// sha256 of model.onnx: part of every embedding's cache key.
    pub model_sha256: String,
    cls: u32,
    sep: u32,
    pad: u32,
    has_token_types: bool,
    /// Warnings from loading (a backend that was not there).
    pub warnings: Vec<String>,
    /// The last query and its embedding: a server of several bundles that share this
    /// model embeds each query once, not once per bundle.
    last_query: Mutex<Option<(String, Vec<f32>)>>,
}

static ENV: OnceLock<std::result::Result<ort::environment::Environment, ModelError>> = OnceLock::new();

fn environment(lib: &Path) -> Result<&'static ort::environment::Environment> {
    let env = ENV.get_or_init(|| {
        if !lib.is_file() {
            return Err(ModelError::new(format!(
                "ONNX Runtime not found at {}; run `atlas setup` (or set ORT_DYLIB_PATH)",
                lib.display()
            )));
        }
        ort::init_from(lib)
            .map_err(|e| ModelError::caused(format!("loading ONNX Runtime from {}", lib.display()), e))?
            .with_name("atlas")
            .build()
            .map_err(|e| ModelError::caused("starting ONNX Runtime", e))
    });
    env.as_ref().map_err(|e| Error::Model(e.clone()))
}

/// ONNX Runtime as loaded from `lib`: its build info (version and commit) and which
/// execution providers it was built with, for `atlas doctor`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OrtInfo {
    pub build: String,
    pub providers: Vec<(&'static str, bool)>,
}

pub fn ort_info(lib: &Path) -> Result<OrtInfo> {
    use ort::ep::ExecutionProvider as _;
    environment(lib)?;
    let avail = |r: ort::Result<bool>| r.unwrap_or(false);
    Ok(OrtInfo {
        build: ort::info().to_owned(),
        providers: vec![
            ("CPU", avail(ort::ep::CPU::is_available())),
            ("CUDA", avail(ort::ep::CUDA::is_available())),
            ("CoreML", avail(ort::ep::CoreML::is_available())),
        ],
    })
}

fn cfg(what: &'static str) -> impl FnOnce(ort::Error<ort::session::builder::SessionBuilder>) -> Error {
    move |e| Error::Model(ModelError::caused(what, ort::Error::<()>::from(e)))
}

fn ort_err(what: &str) -> impl FnOnce(ort::Error) -> Error + '_ {
    move |e| Error::Model(ModelError::caused(what, e))
}

impl Encoder {
    /// Loads `spec` from `dir` (model.onnx, tokenizer.json), checking pinned hashes.
    pub fn load(spec: &'static ModelSpec, dir: &Path, lib: &Path, opts: &EncoderOptions) -> Result<Encoder> {
        let file = |name: &str| -> Result<PathBuf> {
            let p = crate::model::model_file(spec, dir, name);
            if !p.is_file() {
                return Err(Error::Model(ModelError::new(format!(
                    "model {} is missing {} in {}; run `atlas setup` to provision it",
                    spec.id,
                    name,
                    dir.display()
                ))));
            }
            Ok(p)
        };
        let model_path = file("model.onnx")?;
        let tok_path = file("tokenizer.json")?;
        let model_sha256 = crate::hash::sha256_file(&model_path)?;
        for f in spec.files {
            if let Some(want) = f.sha256 {
                let got = if f.name == "model.onnx" {
                    model_sha256.clone()
                } else {
                    crate::hash::sha256_file(&crate::model::model_file(spec, dir, f.name))?
                };
                if got != want {
                    return Err(Error::DataCorruption {
                        path: crate::model::model_file(spec, dir, f.name),
                        reason: format!("sha256 {got}, expected {want}; delete it and run `atlas setup`"),
                    });
                }
            }
        }
        let mut tokenizer = Tokenizer::from_file(&tok_path)
            .map_err(|e| Error::Model(ModelError::boxed(format!("reading {}", tok_path.display()), e)))?;
        // The shipped tokenizer pads and truncates to 128: we batch and window ourselves.
        tokenizer.with_padding(None);
        tokenizer.with_truncation(None).map_err(|e| Error::Model(ModelError::boxed("turning truncation off", e)))?;
        let id = |t: &str| tokenizer.token_to_id(t);
        let (cls, sep) = match (id("[CLS]"), id("[SEP]")) {
            (Some(c), Some(s)) => (c, s),
            _ => {
                return Err(Error::Model(ModelError::new(format!("{}: tokenizer has no [CLS]/[SEP] tokens", spec.id))));
            }
        };
        let pad = id("[PAD]").unwrap_or(0);

        let (session, warnings) = session(&model_path, lib, opts)?;
        let has_token_types = session.inputs().iter().any(|i| i.name() == "token_type_ids");
        Ok(Encoder {
            session: Mutex::new(session),
            tokenizer,
            spec,
            model_sha256,
            cls,
            sep,
            pad,
            has_token_types,
            warnings,
            last_query: Mutex::new(None),
        })
    }

    /// The embedding of one query (the spec's query prefix added), remembered for the
    /// next call with the same text.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let lock = || self.last_query.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((q, v)) = lock().as_ref()
            && q == query
        {
            return Ok(v.clone());
        }
        let text = format!("{}{query}", self.spec.query_prefix);
        let v = self.embed_texts(&[&text])?.pop().unwrap_or_default();
        *lock() = Some((query.to_owned(), v.clone()));
        Ok(v)
    }

    /// Token ids of `text` without special tokens.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self.tokenizer.encode(text, false).map_err(|e| Error::Model(ModelError::boxed("tokenizing", e)))?;
        Ok(enc.get_ids().to_vec())
    }

    /// How many content tokens fit in one forward pass ([CLS] and [SEP] aside).
    pub fn window(&self) -> usize {
        self.spec.max_tokens - 2
    }

    /// Embeds token-id sequences (each at most `window()` long): one L2-normalised
    /// vector each. The batch is padded to its longest member.
    pub fn embed_ids(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let len = batch.iter().map(|b| b.len().min(self.window()) + 2).max().unwrap_or(2);
        let n = batch.len();
        let mut ids = Array2::<i64>::from_elem((n, len), i64::from(self.pad));
        let mut mask = Array2::<i64>::zeros((n, len));
        for (r, seq) in batch.iter().enumerate() {
            let seq = &seq[..seq.len().min(self.window())];
            ids[[r, 0]] = i64::from(self.cls);
            for (c, &t) in seq.iter().enumerate() {
                ids[[r, c + 1]] = i64::from(t);
            }
            ids[[r, seq.len() + 1]] = i64::from(self.sep);
            for c in 0..seq.len() + 2 {
                mask[[r, c]] = 1;
            }
        }
        let types = Array2::<i64>::zeros((n, len));
        let mut session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        let ids_t = TensorRef::from_array_view(&ids).map_err(ort_err("input_ids"))?;
        let mask_t = TensorRef::from_array_view(&mask).map_err(ort_err("attention_mask"))?;
        let outputs = if self.has_token_types {
            let types_t = TensorRef::from_array_view(&types).map_err(ort_err("token_type_ids"))?;
            session
                .run(ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t, "token_type_ids" => types_t])
                .map_err(ort_err("running the model"))?
        } else {
            session
                .run(ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t])
                .map_err(ort_err("running the model"))?
        };
        let (shape, data) = outputs[0].try_extract_tensor::<f32>().map_err(ort_err("reading the output"))?;
        let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        if dims.len() != 3 || dims[0] != n || dims[1] != len {
            return Err(Error::Model(ModelError::new(format!(
                "unexpected output shape {dims:?} for a {n}x{len} batch"
            ))));
        }
        let hidden = dims[2];
        let mut out = Vec::with_capacity(n);
        for r in 0..n {
            let mut v = vec![0f32; hidden];
            match self.spec.pooling {
                Pooling::Cls => v.copy_from_slice(&data[r * len * hidden..r * len * hidden + hidden]),
                Pooling::Mean => {
                    let mut count = 0f32;
                    for c in 0..len {
                        if mask[[r, c]] == 1 {
                            let row = &data[(r * len + c) * hidden..(r * len + c + 1) * hidden];
                            for (acc, x) in v.iter_mut().zip(row) {
                                *acc += x;
                            }
                            count += 1.0;
                        }
                    }
                    v.iter_mut().for_each(|x| *x /= count.max(1.0));
                }
            }
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|x| *x /= norm);
            out.push(v);
        }
        Ok(out)
    }

    /// Embeds short texts (a query, a test sentence): tokenised, truncated to one window.
    pub fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| self.tokenize(t)).collect::<Result<_>>()?;
        let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        self.embed_ids(&refs)
    }
}

/// Cosine of two L2-normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
