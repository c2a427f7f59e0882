//! Runtime integration tests. The embedding tests run real ONNX inference on the
//! provisioned default model (`atlas setup`); without it they are skipped with
//! a printed reason, unless ATLAS_REQUIRE_MODELS is set (CI sets it), then they fail.

use atlas_runtime::encoder::{Backend, Encoder, EncoderOptions, cosine};
use atlas_runtime::model;

mod docs;
mod hnsw;
mod readers;

pub fn default_embedder(opts: &EncoderOptions) -> Option<Encoder> {
    let spec = model::spec(model::DEFAULT_MODEL).unwrap();
    match Encoder::load(spec, &model::model_dir(spec.id), &model::ort_dylib(), opts) {
        Ok(e) => Some(e),
        Err(e) if std::env::var_os("ATLAS_REQUIRE_MODELS").is_none() => {
            atlas_e2e::skip(&format!("{e} (set ATLAS_REQUIRE_MODELS=1 to make this a failure)"));
            None
        }
        Err(e) => panic!("{e}"),
    }
}

const TEXTS: [&str; 3] =
    ["How do I authenticate to the REST API?", "API authentication uses bearer tokens", "The cat sat on the mat"];

/// First 8 dimensions of each text's vector, computed with Python onnxruntime 1.32.0
/// and tokenizers on the same files (padding and truncation off, mask-mean pooling,
/// L2 normalisation).
const REFERENCE: [[f32; 8]; 3] = [
    [-0.034501, 0.063693, -0.05845, -0.063298, -0.034566, -0.022048, -0.031177, 0.00414],
    [-0.074815, 0.088247, -0.003209, -0.007153, 0.025668, -0.028309, 0.067565, -0.055233],
    [0.12724, -0.011875, -0.026688, 0.048999, -0.056073, 0.029792, 0.031465, 0.027112],
];

#[test]
fn default_model_matches_the_python_reference() {
    let Some(e) = default_embedder(&EncoderOptions { intra_threads: 2, ..EncoderOptions::default() }) else { return };
    let v = e.embed_texts(&TEXTS).unwrap();
    assert_eq!(v[0].len(), 384);
    let (near, far) = (cosine(&v[0], &v[1]), cosine(&v[0], &v[2]));
    assert!((near - 0.5718).abs() < 1e-3, "cos(query, related) = {near}");
    assert!((far - -0.0057).abs() < 1e-3, "cos(query, unrelated) = {far}");
    for (got, want) in v.iter().zip(REFERENCE) {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-4, "{:?} vs {want:?}", &got[..8]);
        }
    }
}

#[test]
fn batching_and_padding_do_not_change_vectors() {
    let Some(e) = default_embedder(&EncoderOptions { intra_threads: 2, ..EncoderOptions::default() }) else { return };
    let alone: Vec<Vec<f32>> = TEXTS.iter().map(|t| e.embed_texts(&[t]).unwrap().remove(0)).collect();
    let together = e.embed_texts(&TEXTS).unwrap();
    for (a, b) in alone.iter().zip(&together) {
        assert!(cosine(a, b) > 0.9999, "padding to the longest must not move a vector");
    }
}

#[test]
fn the_shipped_128_token_padding_and_truncation_are_off() {
    let Some(e) = default_embedder(&EncoderOptions { intra_threads: 2, ..EncoderOptions::default() }) else { return };
    assert_eq!(e.tokenize("hello world").unwrap().len(), 2, "no padding");
    let long = "word ".repeat(300);
    assert_eq!(e.tokenize(&long).unwrap().len(), 300, "no truncation at 128");
    assert_eq!(e.window(), 254);
}

#[test]
fn a_missing_accelerator_falls_back_to_the_cpu_with_a_warning() {
    let Some(e) = default_embedder(&EncoderOptions {
        intra_threads: 1,
        backend: Backend::Cuda,
        spinning: false,
        arena: false,
        int8_weights: false,
        fused: false,
    }) else {
        return;
    };
    assert!(e.warnings.iter().any(|w| w.contains("CUDA is not available here")), "{:?}", e.warnings);
    let v = e.embed_texts(&TEXTS[..2]).unwrap();
    assert!((cosine(&v[0], &v[1]) - 0.5718).abs() < 1e-3);
}

#[test]
fn missing_model_names_the_setup_command() {
    let spec = model::spec(model::DEFAULT_MODEL).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let err = Encoder::load(spec, dir.path(), &model::ort_dylib(), &EncoderOptions::default()).unwrap_err();
    assert!(err.to_string().contains("atlas setup"), "{err}");
}
