//! embed: one vector per window of each chunk, memoised per chunk.
//!
//! No silent truncation: a chunk longer than the model's window is embedded as
//! overlapping windows that each fit, one vector per window, each mapped back to its
//! chunk (`window_chunk`). Misses are tokenised in parallel (rayon), sorted by token
//! length and batched with padding to each batch's longest, while ONNX Runtime uses
//! every core. Vectors are stored as f16. The memo key is (model sha256, window
//! params, chunk text digest), so unchanged chunks are never embedded again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context as _, bail};
use atlas_cache::{Digest, KeyBuilder};
use atlas_runtime::encoder::{Backend, Encoder, EncoderOptions};
use atlas_runtime::model;
use half::f16;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::artifacts::{ChunkManifest, EmbedManifest};
mod passages;

pub use passages::{file_context, header, opening, passages, with_header};

use crate::runner::{Ctx, Loaded, Outputs, ParamError, Stage, StageOutput, canonical, check_range, load_json};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedParams {
    /// Off: no vectors (a keyword-first build). The bundle answers by keyword and
    /// symbols at once and says it has no vectors yet; the same config with embedding
    /// on reuses every other stage's work. `atlas sync` builds so first.
    pub enabled: bool,
    /// A model id from the registry.
    pub model: String,
    /// Windows per forward pass (0: 1 with the int8 GEMM, 16 on the float path). With
    /// `int8`, each pass's activations are quantised as a whole, so a window's vector
    /// depends on its batch-mates unless it runs alone: one a pass gives every window
    /// the vector a query of the same text gets, whatever else is embedded, and is the
    /// fastest on a CPU (docs/benchmarks.md).
    pub batch_size: usize,
    /// Tokens a window holds (0: as many as the model takes, 254 for MiniLM).
    pub window_tokens: usize,
    /// Tokens shared by consecutive windows of an over-long chunk.
    pub window_overlap: usize,
    /// Run an int8 model's weights as int8 (the int8 GEMM, each batch's activations
    /// quantised on the fly), as queries do; off: the weights widened to float at load.
    pub int8: bool,
    /// auto | cpu | cuda | coreml; ATLAS_EMBED_BACKEND overrides it.
    pub backend: Backend,
    /// ONNX Runtime threads in all (0: every core).
    pub threads: usize,
    /// ONNX Runtime sessions that embed batches side by side, the threads shared out
    /// among them (0: one single-threaded session per thread, at most 4; 1: one
    /// session with every thread). docs/benchmarks.md, "Embed stage variants".
    pub sessions: usize,
    /// Embed each chunk with a line that places it ([`with_header`]); off: the text alone.
    pub header: bool,
    /// Start every window of an over-long chunk with that line, not the first alone
    /// ([`header_windows`]): a tail then reads as part of its page. Off by default: it
    /// lifts the docs sets but not every test half (docs/decisions.md).
    pub header_windows: bool,
    /// Words of a docs page's opening paragraph added to the header of the page's
    /// later chunks ([`file_context`]): a section then reads as part of its page, and
    /// sibling pages (a feature, its troubleshooting, its release notes) read apart.
    /// 0: none.
    pub context_words: usize,
}

impl Default for EmbedParams {
    fn default() -> Self {
        EmbedParams {
            enabled: true,
            model: model::DEFAULT_MODEL.to_owned(),
            batch_size: 0,
            window_tokens: 0,
            window_overlap: 32,
            int8: true,
            backend: Backend::Cpu,
            threads: 0,
            sessions: 0,
            header: true,
            header_windows: false,
            context_words: 30,
        }
    }
}

/// A keyword-first build's output: no rows, the model the vectors will come from
/// (its pinned sha256, so the model need not be here yet).
fn no_vectors(spec: &'static model::ModelSpec, chunks: usize, ctx: &Ctx<'_>) -> anyhow::Result<StageOutput> {
    let mut out = StageOutput::default();
    let emb = ctx.cache.put(&atlas_runtime::vectors::to_npy_f16(0, spec.dims, &[]))?;
    out.objects.insert(emb);
    let pinned = spec.files.iter().find(|f| f.name == "model.onnx").and_then(|f| f.sha256).unwrap_or_default();
    let manifest = EmbedManifest {
        model: spec.id.to_owned(),
        model_sha256: pinned.to_owned(),
        dims: spec.dims,
        pooling: spec.pooling,
        embeddings: emb,
        rows: 0,
        window_chunk: Vec::new(),
        chunks,
        over_window_chunks: 0,
        over_window_windows: 0,
        tokens: 0,
    };
    out.notes.push(format!(
        "{} left unembedded (stages.embed.enabled: false): keyword and symbols only",
        atlas_runtime::words::count(chunks, "chunk")
    ));
    let d = ctx.cache.put_json(&manifest)?;
    out.objects.insert(d);
    out.output = Some(d);
    Ok(out)
}

/// One chunk's vectors, as memoised: `windows` (u32 LE), `tokens` (u32 LE), then
/// windows × dims f16 LE.
struct ChunkVectors {
    windows: u32,
    tokens: u32,
    data: Vec<u8>,
}

impl ChunkVectors {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(8 + self.data.len());
        b.extend_from_slice(&self.windows.to_le_bytes());
        b.extend_from_slice(&self.tokens.to_le_bytes());
        b.extend_from_slice(&self.data);
        b
    }
    fn decode(b: &[u8]) -> anyhow::Result<ChunkVectors> {
        anyhow::ensure!(b.len() >= 8, "chunk vectors too short");
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(ChunkVectors { windows: u(0), tokens: u(4), data: b[8..].to_vec() })
    }
}

/// Windows of at most `size` tokens over `header` then `text`: one when both fit,
/// else the text's windows (consecutive ones sharing `overlap` tokens), each after the
/// header, which keeps at most half the window.
pub fn header_windows(header: &[u32], text: &[u32], size: usize, overlap: usize) -> Vec<Vec<u32>> {
    if header.len() + text.len() <= size {
        return vec![[header, text].concat()];
    }
    let header = &header[..header.len().min(size / 2)];
    let room = size - header.len();
    windows(text, room, overlap.min(room / 2)).into_iter().map(|w| [header, w].concat()).collect()
}

/// Windows of at most `size` tokens, consecutive ones sharing `overlap` tokens.
pub fn windows(ids: &[u32], size: usize, overlap: usize) -> Vec<&[u32]> {
    if ids.len() <= size {
        return vec![ids];
    }
    let step = size.saturating_sub(overlap).max(1);
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + size).min(ids.len());
        out.push(&ids[start..end]);
        if end == ids.len() {
            break;
        }
        start += step;
    }
    out
}

/// How windows (sorted by length) are grouped into forward passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchBy {
    /// At most this many windows a batch.
    Count(usize),
    /// At most this many tokens a batch, padding included ([CLS] and [SEP] counted):
    /// many short windows together, few long ones.
    Tokens(usize),
}

impl BatchBy {
    /// Consecutive ranges over windows of these lengths (ascending), one per batch.
    pub fn split(self, lengths: &[usize]) -> Vec<std::ops::Range<usize>> {
        let mut out = Vec::new();
        let mut start = 0;
        while start < lengths.len() {
            let mut end = start + 1;
            match self {
                BatchBy::Count(n) => end = (start + n.max(1)).min(lengths.len()),
                BatchBy::Tokens(budget) => {
                    let mut longest = lengths[start] + 2;
                    while end < lengths.len() {
                        let l = longest.max(lengths[end] + 2);
                        if l * (end + 1 - start) > budget {
                            break;
                        }
                        longest = l;
                        end += 1;
                    }
                }
            }
            out.push(start..end);
            start = end;
        }
        out
    }
}

/// Embeds `batches` (ranges over `windows`) with the sessions side by side: each takes
/// the next batch as it frees up (batches in order of length keep them equally busy),
/// and `done` gets each batch's index and vectors on the calling thread as they come
/// back. The first error, a session's or `done`'s, stops every session after its
/// current batch and is returned.
pub fn embed_batches(
    encoders: &[&Encoder],
    windows: &[&[u32]],
    batches: &[std::ops::Range<usize>],
    mut done: impl FnMut(usize, Vec<Vec<f32>>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, atlas_runtime::Result<Vec<Vec<f32>>>)>();
    std::thread::scope(|scope| {
        for &e in encoders {
            let (tx, next) = (tx.clone(), &next);
            scope.spawn(move || {
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    let Some(range) = batches.get(b) else { break };
                    let r = e.embed_ids(&windows[range.clone()]);
                    let failed = r.is_err();
                    if tx.send((b, r)).is_err() || failed {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let stop = || next.store(batches.len(), Ordering::Relaxed);
        for (b, r) in &rx {
            let vs = r.inspect_err(|_| stop())?;
            done(b, vs).inspect_err(|_| stop())?;
        }
        Ok(())
    })
}

#[derive(Debug, Default)]
pub struct Embed;

fn backend(p: &EmbedParams) -> anyhow::Result<Backend> {
    match std::env::var("ATLAS_EMBED_BACKEND") {
        Ok(v) if !v.is_empty() => v.parse().map_err(|e: String| anyhow::anyhow!("ATLAS_EMBED_BACKEND: {e}")),
        _ => Ok(p.backend),
    }
}

impl Stage for Embed {
    const NAME: &'static str = "embed";
    /// 2: each chunk is embedded with its header ([`with_header`]).
    const VERSION: u32 = 2;
    const DEPS: &'static [&'static str] = &["chunk"];
    type Params = EmbedParams;
    type Prepared = ();

    fn check(e: &EmbedParams) -> Result<(), ParamError> {
        if model::spec(&e.model).is_none() {
            let ids: Vec<&str> = model::REGISTRY.iter().map(|m| m.id).collect();
            return Err(ParamError::new(
                "model",
                format!("stages.embed.model: unknown model {:?}; registered: {}", e.model, ids.join(", ")),
            ));
        }
        let range = |key: &str, v: usize, lo: f64, hi: f64| check_range(Self::NAME, key, v as f64, lo, hi);
        range("batch_size", e.batch_size, 0.0, 1024.0)?;
        if e.window_tokens != 0 {
            range("window_tokens", e.window_tokens, 32.0, 8192.0)?;
        }
        range("window_overlap", e.window_overlap, 0.0, 128.0)?;
        range("threads", e.threads, 0.0, 256.0)?;
        range("sessions", e.sessions, 0.0, 256.0)
    }
    fn key_params(p: &EmbedParams, _cfg: &Loaded) -> serde_json::Value {
        // The backend and thread count do not change what is produced: keep them out of
        // the key. The batch size does only where activations are quantised per batch.
        let mut v = canonical(p);
        if let Some(o) = v.as_object_mut() {
            o.remove("backend");
            o.remove("threads");
            o.remove("sessions");
            // On (the default): keys stay what they were before the switch existed.
            if p.enabled {
                o.remove("enabled");
            }
            if !p.int8 {
                o.remove("batch_size");
            }
        }
        v
    }
    /// The model file itself: a new file under the same id must not reuse vectors.
    fn external_inputs(&self, p: &EmbedParams, _ctx: &Ctx<'_>) -> anyhow::Result<(BTreeMap<String, Digest>, ())> {
        if !p.enabled {
            return Ok((BTreeMap::new(), ()));
        }
        let spec = model::spec(&p.model).with_context(|| format!("unknown model {:?}", p.model))?;
        let path = model::model_file(spec, &model::model_dir(spec.id), "model.onnx");
        let bytes = std::fs::read(&path)
            .with_context(|| format!("model {} is not provisioned ({}); run `atlas setup`", p.model, path.display()))?;
        Ok((BTreeMap::from([("model".to_owned(), Digest::of(&bytes))]), ()))
    }
    fn run(&self, p: &EmbedParams, ctx: &Ctx<'_>, (): ()) -> anyhow::Result<StageOutput> {
        let chunks_manifest: ChunkManifest = ctx.input("chunk")?;
        let records = atlas_runtime::chunk_table::from_parquet(&ctx.cache.get_required(chunks_manifest.chunks)?)?;
        // Embed::check (at config load) made sure the id is registered.
        let spec = model::spec(&p.model).with_context(|| format!("unknown model {:?}", p.model))?;
        if !p.enabled {
            return no_vectors(spec, records.len(), ctx);
        }
        let threads =
            if p.threads == 0 { std::thread::available_parallelism().map_or(2, |n| n.get()) } else { p.threads };
        // Single-threaded sessions side by side beat one session with every thread on
        // 2 cores by about 20 % (small matrices parallelise poorly inside one run);
        // each session keeps its own arena, so at most 4 by default. An accelerator
        // gets one session unless told otherwise.
        let backend = backend(p)?;
        let sessions = match p.sessions {
            0 if backend != Backend::Cpu => 1,
            0 => threads.min(4),
            n => n.min(threads),
        }
        .max(1);
        // The int8 GEMM is ONNX Runtime's CPU kernel: an accelerator (or `auto`) runs the
        // float path, in batches.
        let int8 = p.int8 && backend == Backend::Cpu;
        let batch_size = match p.batch_size {
            0 if int8 => 1,
            0 => 16,
            n => n,
        };
        let opts = EncoderOptions {
            intra_threads: (threads / sessions).max(1),
            backend,
            int8_weights: int8,
            ..EncoderOptions::default()
        };
        let load = || Encoder::load(spec, &model::model_dir(spec.id), &model::ort_dylib(), &opts);
        let embedder = &load()?;
        let mut out = StageOutput::default();
        out.notes.extend(embedder.warnings.iter().cloned());
        let size = match p.window_tokens {
            0 => embedder.window(),
            n => n.min(embedder.window()),
        };
        let overlap = p.window_overlap.min(size / 2);
        let repeat = p.header && p.header_windows;
        let key = |text: &str| -> Digest {
            let mut k = KeyBuilder::new("item");
            k.str("stage", "embed")
                .part("version", &Self::VERSION.to_le_bytes())
                .str("model", &embedder.model_sha256)
                .str("prefix", spec.passage_prefix)
                .part("window", &(size as u64).to_le_bytes())
                .part("overlap", &(overlap as u64).to_le_bytes())
                .part("int8", &[if int8 { atlas_runtime::int8::REWRITE } else { 0 }])
                .part("batch", &(if int8 { batch_size as u64 } else { 0 }).to_le_bytes());
            // Only when on: with it off, keys (and the vectors cached under them) stay
            // what they were before the option existed.
            if repeat {
                k.part("header_windows", &[1]);
            }
            k.digest("text", Digest::of(text.as_bytes())).finish()
        };
        let context = file_context(&records, p.context_words);
        let passages = passages(&records, &context, p.header);
        let mut memo = ctx.memo(passages.par_iter().map(|t| key(t)).collect())?;
        let missing = memo.missing();
        // Tokenise the misses in parallel, and cut them into windows.
        let t0 = Instant::now();
        let tokenized: Vec<(usize, Vec<Vec<u32>>)> = missing
            .par_iter()
            .map(|&i| -> anyhow::Result<(usize, Vec<Vec<u32>>)> {
                let (head, text) = if repeat {
                    let r = &records[i];
                    let head = header(r, &context);
                    (embedder.tokenize(&format!("{}{}", spec.passage_prefix, head))?, embedder.tokenize(&r.text)?)
                } else {
                    (Vec::new(), embedder.tokenize(&format!("{}{}", spec.passage_prefix, passages[i]))?)
                };
                Ok((head.len() + text.len(), header_windows(&head, &text, size, overlap)))
            })
            .collect::<Result<_, _>>()?;
        let mut jobs: Vec<(usize, usize, &[u32])> = Vec::new(); // (miss index, window index, ids)
        let mut vectors: Vec<Vec<Vec<f32>>> = Vec::with_capacity(tokenized.len());
        for (m, (_, wins)) in tokenized.iter().enumerate() {
            vectors.push(vec![Vec::new(); wins.len()]);
            jobs.extend(wins.iter().enumerate().map(|(w, win)| (m, w, win.as_slice())));
        }
        jobs.sort_by_key(|j| j.2.len());
        let bar = ctx.progress.stage("embed", missing.len());
        let total_tokens: u64 = tokenized.iter().map(|t| t.0 as u64).sum();
        let mut done_tokens = 0u64;
        let mut remaining: Vec<usize> = vectors.iter().map(Vec::len).collect();
        // The other sessions, only when there is something to embed.
        let more: Vec<Encoder> =
            if jobs.is_empty() { Vec::new() } else { (1..sessions).map(|_| load()).collect::<Result<_, _>>()? };
        let encoders: Vec<&Encoder> = std::iter::once(embedder).chain(&more).collect();
        let lengths: Vec<usize> = jobs.iter().map(|j| j.2.len()).collect();
        let batches = BatchBy::Count(batch_size).split(&lengths);
        // This thread stores each chunk as soon as its last window is back, so a kill
        // loses little.
        let windows: Vec<&[u32]> = jobs.iter().map(|j| j.2).collect();
        embed_batches(&encoders, &windows, &batches, |b, vs| {
            for ((m, w, win), v) in jobs[batches[b].clone()].iter().zip(vs) {
                vectors[*m][*w] = v;
                remaining[*m] -= 1;
                done_tokens += win.len() as u64;
                if remaining[*m] == 0 {
                    let i = missing[*m];
                    let mut data = Vec::with_capacity(vectors[*m].len() * spec.dims * 2);
                    for v in &vectors[*m] {
                        data.extend(v.iter().flat_map(|x| f16::from_f32(*x).to_le_bytes()));
                    }
                    let item = ChunkVectors { windows: vectors[*m].len() as u32, tokens: tokenized[*m].0 as u32, data };
                    memo.store(i, &item.encode())?;
                    bar.inc();
                }
            }
            Ok(())
        })?;
        bar.finish();
        if !missing.is_empty() {
            let secs = t0.elapsed().as_secs_f64().max(1e-9);
            out.notes.push(format!(
                "embedded {} ({total_tokens} tokens) in {secs:.2} s: {:.1} chunks/s, {:.0} tokens/s",
                atlas_runtime::words::count(missing.len(), "chunk"),
                missing.len() as f64 / secs,
                done_tokens as f64 / secs
            ));
        }
        // Assemble the matrix in chunk order.
        let mut data: Vec<f16> = Vec::new();
        let mut window_chunk = Vec::new();
        let (mut over_chunks, mut over_windows, mut tokens) = (0, 0, 0u64);
        for (i, d) in memo.finish(&mut out)?.into_iter().enumerate() {
            let item = ChunkVectors::decode(&ctx.cache.get_required(d)?)?;
            if item.data.len() != item.windows as usize * spec.dims * 2 {
                bail!("cached vectors of chunk {} have the wrong size", records[i].chunk_id);
            }
            data.extend(item.data.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]])));
            window_chunk.extend(std::iter::repeat_n(i as u32, item.windows as usize));
            if item.windows > 1 {
                over_chunks += 1;
                over_windows += item.windows as usize;
            }
            tokens += u64::from(item.tokens);
        }
        if over_chunks > 0 {
            out.notes.push(format!(
                "{over_chunks} of {} chunks run past the {size}-token window: embedded as {over_windows} overlapping windows ({overlap} tokens shared), none truncated",
                records.len()
            ));
        }
        let rows = window_chunk.len();
        let npy = atlas_runtime::vectors::to_npy_f16(rows, spec.dims, &data);
        let emb = ctx.cache.put(&npy)?;
        out.objects.insert(emb);
        let manifest = EmbedManifest {
            model: spec.id.to_owned(),
            model_sha256: embedder.model_sha256.clone(),
            dims: spec.dims,
            pooling: spec.pooling,
            embeddings: emb,
            rows,
            window_chunk,
            chunks: records.len(),
            over_window_chunks: over_chunks,
            over_window_windows: over_windows,
            tokens,
        };
        let d = ctx.cache.put_json(&manifest)?;
        out.objects.insert(d);
        out.output = Some(d);
        Ok(out)
    }

    /// `embeddings.npy` and `embeddings.json` (the manifest: model, rows, row → chunk).
    fn materialize(output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()> {
        let m: EmbedManifest = load_json(out.cache, output, "the embed manifest")?;
        out.write("embeddings.npy", &out.cache.get_required(m.embeddings)?, true)?;
        out.write("embeddings.json", &serde_json::to_vec_pretty(&m)?, false)
    }
}

#[cfg(test)]
mod tests {
    use atlas_runtime::ChunkKind;
    use atlas_runtime::chunk_table::ChunkRecord;

    use super::*;

    #[test]
    fn batches_by_count_and_by_tokens_cover_every_window_once() {
        let lengths = [3, 3, 5, 10, 10, 30, 100, 254, 254];
        assert_eq!(BatchBy::Count(4).split(&lengths), vec![0..4, 4..8, 8..9]);
        // 64 tokens: padded to the longest (+2), never over the budget unless one window alone is.
        let b = BatchBy::Tokens(64).split(&lengths);
        assert_eq!(b, vec![0..5, 5..6, 6..7, 7..8, 8..9]);
        assert!(BatchBy::Count(3).split(&[]).is_empty());
    }

    #[test]
    fn windows_overlap_and_cover_everything() {
        let ids: Vec<u32> = (0..600).collect();
        let w = windows(&ids, 254, 32);
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].len(), 254);
        assert_eq!(w[1][0], 222);
        assert_eq!(*w.last().unwrap().last().unwrap(), 599);
        assert_eq!(windows(&ids[..10], 254, 32).len(), 1);
    }

    #[test]
    fn every_window_of_a_long_chunk_starts_with_its_header() {
        let (head, text): (Vec<u32>, Vec<u32>) = ((1000..1010).collect(), (0..600).collect());
        // Both fit: one window, the header then the text, as one tokenisation gives.
        assert_eq!(header_windows(&head, &text[..200], 254, 32), vec![[&head[..], &text[..200]].concat()]);
        let w = header_windows(&head, &text, 254, 32);
        assert!(w.iter().all(|w| w.len() <= 254 && w[..10] == head[..]), "each window opens with the header");
        assert_eq!(w[0], [&head[..], &text[..244]].concat(), "the first window is the single tokenisation's");
        assert_eq!(w[1][10], 244 - 32, "consecutive windows share 32 tokens of text");
        assert_eq!(*w.last().unwrap().last().unwrap(), 599, "the text is covered to its end");
        // A header longer than half the window keeps half.
        let long: Vec<u32> = (1000..1300).collect();
        assert!(header_windows(&long, &text, 254, 32).iter().all(|w| w[..127] == long[..127] && w[127] < 1000));
    }

    fn record(kind: ChunkKind, path: &str, ordinal: u32, text: &str) -> ChunkRecord {
        ChunkRecord {
            chunk_id: format!("{path}#{ordinal}"),
            kind,
            language: None,
            source: "s".into(),
            section: String::new(),
            path: path.into(),
            url: None,
            repo: None,
            commit: None,
            title: "Title".into(),
            description: None,
            heading_path: vec!["Title".into(), "Later".into()],
            ordinal,
            text: text.into(),
            overlap_chars: 0,
            is_code: kind == ChunkKind::Code,
            cluster_tags: String::new(),
            start_line: 1,
            end_line: 2,
            symbol: None,
            symbol_kind: None,
            signature: None,
            symbols: vec![],
            mentions: vec![],
            mentioned_in: vec![],
            origin: None,
        }
    }

    #[test]
    fn later_chunks_carry_their_pages_opening_words() {
        let records = [
            record(ChunkKind::Docs, "s/page.md", 0, "# Title\n\nSend events  to the\nedge network.\n\n```\ncode\n```"),
            record(ChunkKind::Docs, "s/page.md", 1, "## Later\n\nmore"),
            record(ChunkKind::Docs, "s/short.md", 0, "# Title\n\n```\ncode first\n```\n\nprose after"),
            record(ChunkKind::Code, "s/m.py", 0, "\"\"\"Quantised linear models.\"\"\"\nimport x"),
            record(ChunkKind::Code, "s/m.py", 1, "def f(): pass"),
        ];
        let context = file_context(&records, 4);
        assert_eq!(context["s/page.md"], "Send events to the");
        assert!(!context.contains_key("s/short.md"), "a page that opens with code has no opening");
        assert!(!context.contains_key("s/m.py"), "code files get none");
        assert_eq!(header(&records[1], &context), "Title > Later (Send events to the)");
        assert_eq!(header(&records[0], &context), "Title > Later", "the first chunk holds the opening itself");
        assert_eq!(with_header(&records[4], &context), "m.py\ndef f(): pass");
        assert!(file_context(&records, 0).is_empty());
        let endless = format!("# T\n\n{}", "é".repeat(10_000));
        assert_eq!(opening(&endless, 4).map(|o| o.len()), Some(64), "16 bytes a word, cut at a character");
    }
}
