//! Embed-stage variants over one bundle's chunks, side by side in one run (`cargo xtask
//! bench embed`): the stage's windows (header, prefix, window and overlap), each
//! variant timed over all of them, its vectors compared with the first row's where the
//! windows are the same (per chunk, its first window). Prints one row per variant:
//! `variant  windows  tokens  seconds  tokens/s  ms/chunk  min-cosine-vs-first`.
//!
//! Usage: embed_bench CHUNKS_PARQUET MODEL_DIR ORT_LIB [LIMIT]

use std::path::Path;
use std::time::Instant;

use Weights::{Float, Fused, Int8};
use atlas_runtime::encoder::{Encoder, EncoderOptions};
use atlas_runtime::model;
use atlas_stages::embed::{BatchBy, EmbedParams, embed_batches, file_context, passages, windows};

struct Job<'a> {
    chunk: usize,
    ids: &'a [u32],
}

/// How the model runs (`EncoderOptions::int8_weights` and `fused`).
#[derive(Clone, Copy)]
enum Weights {
    /// Float weights (ONNX Runtime folds the int8 ones).
    Float,
    /// The int8 GEMM, the graph otherwise as exported.
    Int8,
    /// The int8 GEMM with attention, GELU and bias adds fused (the stage's default).
    Fused,
}

/// One way to run the stage's loop.
struct Variant {
    name: String,
    sessions: usize,
    threads_each: usize,
    weights: Weights,
    batch: BatchBy,
    /// Tokens a window (the model's own: 254).
    size: usize,
    overlap: usize,
}

#[allow(clippy::print_stdout)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(parquet), Some(model_dir), Some(ort)) = (args.get(1), args.get(2), args.get(3)) else {
        panic!("usage: embed_bench CHUNKS_PARQUET MODEL_DIR ORT_LIB [LIMIT]");
    };
    let limit: usize = args.get(4).map_or(usize::MAX, |l| l.parse().expect("a number"));
    let mut records = atlas_runtime::chunk_table::read_file(Path::new(parquet)).expect("chunks.parquet");
    records.truncate(limit);
    let spec = model::spec(model::DEFAULT_MODEL).expect("the default model");
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let load = |threads: usize, weights: Weights| {
        let (int8_weights, fused) = match weights {
            Float => (false, false),
            Int8 => (true, false),
            Fused => (true, true),
        };
        let opts = EncoderOptions { intra_threads: threads, int8_weights, fused, ..EncoderOptions::default() };
        Encoder::load(spec, Path::new(model_dir), Path::new(ort), &opts).expect("the model")
    };
    let probe = load(1, Float);
    let size = probe.window();
    let p = EmbedParams::default();
    let tokenized: Vec<Vec<u32>> = passages(&records, &file_context(&records, p.context_words), p.header)
        .iter()
        .map(|t| probe.tokenize(&format!("{}{}", spec.passage_prefix, t)).expect("tokens"))
        .collect();
    drop(probe);
    let v = |name: String, sessions: usize, threads_each: usize, weights: Weights, batch: usize| Variant {
        name,
        sessions,
        threads_each,
        weights,
        batch: BatchBy::Count(batch),
        size,
        overlap: 32,
    };
    let variants = vec![
        v(format!("before: {cores} sessions x 1 thread, float, 16 a batch"), cores, 1, Float, 16),
        v(format!("{cores} sessions x 1 thread, int8 GEMM, 1 a batch"), cores, 1, Int8, 1),
        v(format!("{cores} sessions x 1 thread, int8 GEMM + fused, 1 a batch"), cores, 1, Fused, 1),
        v(format!("1 session x {cores} threads, int8 GEMM + fused, 1 a batch"), 1, cores, Fused, 1),
        v(format!("{cores} sessions x 1 thread, int8 GEMM + fused, 16 a batch"), cores, 1, Fused, 16),
    ];

    println!("{} chunks, {} tokens, window {size}", records.len(), tokenized.iter().map(Vec::len).sum::<usize>());
    let mut first: Option<Vec<Vec<f32>>> = None;
    for v in &variants {
        let mut jobs: Vec<Job<'_>> = Vec::new();
        for (chunk, ids) in tokenized.iter().enumerate() {
            jobs.extend(windows(ids, v.size, v.overlap).into_iter().map(|ids| Job { chunk, ids }));
        }
        jobs.sort_by_key(|j| j.ids.len());
        let batches = v.batch.split(jobs.iter().map(|j| j.ids.len()).collect::<Vec<_>>().as_slice());
        let encoders: Vec<Encoder> = (0..v.sessions).map(|_| load(v.threads_each, v.weights)).collect();
        // Warm each session once (first-run allocations), outside the timing.
        for e in &encoders {
            e.embed_ids(&[&jobs[0].ids[..jobs[0].ids.len().min(8)]]).expect("warm-up");
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; jobs.len()];
        let t = Instant::now();
        let windows: Vec<&[u32]> = jobs.iter().map(|j| j.ids).collect();
        let sessions: Vec<&Encoder> = encoders.iter().collect();
        embed_batches(&sessions, &windows, &batches, |b, vs| {
            for (i, vec) in batches[b].clone().zip(vs) {
                out[i] = Some(vec);
            }
            Ok(())
        })
        .expect("every batch");
        let secs = t.elapsed().as_secs_f64();
        let tokens: usize = jobs.iter().map(|j| j.ids.len() + 2).sum();
        // Per chunk, its first window's vector: comparable across overlaps too.
        let mut per_chunk: Vec<Vec<f32>> = vec![Vec::new(); tokenized.len()];
        for (j, v) in jobs.iter().zip(&out) {
            let v = v.as_ref().expect("every window embedded");
            if per_chunk[j.chunk].is_empty() && j.ids.as_ptr() == tokenized[j.chunk].as_ptr() {
                per_chunk[j.chunk] = v.clone();
            }
        }
        // Against the first row's vectors, where the windows are the same.
        let min_cos = match &first {
            None => 1.0,
            Some(_) if v.size != size => f64::NAN,
            Some(f) => f
                .iter()
                .zip(&per_chunk)
                .map(|(a, b)| a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>())
                .fold(1.0f64, f64::min),
        };
        println!(
            "{:<62} {:>7} {:>8} {:>7.2} s {:>7.0} tokens/s {:>6.2} ms/chunk  min cos {:.6}",
            v.name,
            jobs.len(),
            tokens,
            secs,
            tokens as f64 / secs,
            secs * 1e3 / tokenized.len() as f64,
            min_cos
        );
        if first.is_none() {
            first = Some(per_chunk);
        }
    }
}
