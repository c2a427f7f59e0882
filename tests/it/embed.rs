//! The embed stage through the real binary, with real ONNX inference. Needs the
//! provisioned default model (`atlas setup`): skipped with a printed reason when
//! it is missing, unless ATLAS_REQUIRE_MODELS is set (CI).

use std::collections::HashSet;
use std::path::Path;

use atlas_e2e::{pipeline, run, write_config, write_fixture_site};

pub fn model_ready() -> bool {
    let ok = atlas_runtime::model::model_dir(atlas_runtime::model::DEFAULT_MODEL).join("model.onnx").is_file()
        && atlas_runtime::model::ort_dylib().is_file();
    if !ok {
        assert!(std::env::var_os("ATLAS_REQUIRE_MODELS").is_none(), "the model is not provisioned: run `atlas setup`");
        atlas_e2e::skip("the embedding model is not provisioned (run `atlas setup`)");
    }
    ok
}

fn texts(dir: &Path) -> Vec<String> {
    atlas_runtime::chunk_table::read_file(&dir.join(".atlas/build/chunks.parquet"))
        .unwrap()
        .into_iter()
        .map(|c| c.text)
        .collect()
}

#[test]
fn embeds_every_chunk_then_only_what_changed() {
    if !model_ready() {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    // One section long enough to need several windows.
    let long =
        format!("# Long\n\n## Everything\n\n{}\n", "The operator reconciles every release in the cluster. ".repeat(80));
    std::fs::write(site.path().join("guides/long.md"), long).unwrap();
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site.path(), "stages:\n  embed:\n    threads: 2\n");
    let go = || run(pipeline().arg("-c").arg(&cfg).arg("run")).success();

    let cold = go();
    let chunks = texts(work.path()).len();
    assert_eq!(cold.stage("embed"), ("ran".into(), chunks, 0), "{}", cold.stderr);
    assert!(cold.stderr.contains("run past the 254-token window"), "{}", cold.stderr);
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.path().join(".atlas/build/embeddings.json")).unwrap()).unwrap();
    assert_eq!(m["model"], "all-minilm-l6-v2-int8");
    assert_eq!(m["dims"], 384);
    assert_eq!(m["chunks"], chunks);
    let rows = m["rows"].as_u64().unwrap() as usize;
    assert!(rows > chunks, "the long chunk became several windows");
    assert_eq!(m["window_chunk"].as_array().unwrap().len(), rows);
    let npy = std::fs::read(work.path().join(".atlas/build/embeddings.npy")).unwrap();
    let (r, d, data) = atlas_runtime::vectors::from_npy_f16(&npy).unwrap();
    assert_eq!((r, d), (rows, 384));
    let norm: f32 = data[..384].iter().map(|x| x.to_f32() * x.to_f32()).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 0.01, "vectors are L2-normalised ({norm})");

    let noop = go();
    assert_eq!(noop.stage("embed").0, "cached");

    // Edit one page: exactly the chunks whose text changed are embedded again.
    let before: HashSet<String> = texts(work.path()).into_iter().collect();
    let page = site.path().join("guides/install.md");
    let text = std::fs::read_to_string(&page).unwrap().replace("Use brew.", "Use brew, or the installer.");
    std::fs::write(&page, text).unwrap();
    let one = go();
    let changed = texts(work.path()).iter().filter(|t| !before.contains(*t)).count();
    assert!(changed >= 1);
    let after = texts(work.path()).len();
    assert_eq!(one.stage("embed"), ("ran".into(), changed, after - changed), "{}", one.stderr);
}

/// Two single-threaded sessions side by side (the default on 2 cores) give the vectors
/// one two-threaded session gives: the same rows, each within the int8 tolerance.
#[test]
fn parallel_sessions_give_the_vectors_of_one_session() {
    if !model_ready() {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    let long = format!("# Long\n\n## Everything\n\n{}\n", "Each release is reconciled in turn. ".repeat(90));
    std::fs::write(site.path().join("guides/long.md"), long).unwrap();
    let vectors = |sessions: usize| {
        let work = tempfile::tempdir().unwrap();
        let extra = format!("stages:\n  embed:\n    threads: 2\n    sessions: {sessions}\n    batch_size: 2\n");
        let cfg = write_config(work.path(), site.path(), &extra);
        run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "embed"])).success();
        let npy = std::fs::read(work.path().join(".atlas/build/embeddings.npy")).unwrap();
        let (rows, dims, data) = atlas_runtime::vectors::from_npy_f16(&npy).unwrap();
        (rows, dims, data.iter().map(|x| x.to_f32()).collect::<Vec<f32>>())
    };
    let (one, two) = (vectors(1), vectors(2));
    assert_eq!((one.0, one.1), (two.0, two.1));
    assert!(one.0 > 3, "several batches: {}", one.0);
    for (a, b) in one.2.chunks(one.1).zip(two.2.chunks(two.1)) {
        let cos: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        assert!(cos > 0.9999, "cosine {cos}");
    }
}

#[test]
fn a_missing_model_names_the_setup_command() {
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site.path(), "");
    let home = tempfile::tempdir().unwrap();
    let r = run(pipeline().arg("-c").arg(&cfg).arg("run").env("ATLAS_HOME", home.path()).env_remove("ORT_DYLIB_PATH"));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap();
    assert!(last.contains("atlas setup"), "{last}");
}

/// The query model runs its int8 weights as int8 with its attention and GELU fused
/// (`runtime::int8`): the rewrite applies in full to the default model and its
/// embeddings stay those of the folded float path, to within quantisation (cosine
/// ≥ 0.98 on prose and code).
#[test]
fn the_int8_query_model_agrees_with_the_float_one() {
    use atlas_runtime::encoder::{Encoder, EncoderOptions};
    if !model_ready() {
        return;
    }
    let spec = atlas_runtime::model::spec(atlas_runtime::model::DEFAULT_MODEL).unwrap();
    let dir = atlas_runtime::model::model_dir(spec.id);
    let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
    let (_, fused) = atlas_runtime::int8::rewrite(&bytes, true).expect("the default model has int8 weights to keep");
    let all = atlas_runtime::int8::Fused { int8_matmuls: 36, attention: 6, gelu: 6 };
    assert_eq!(fused, all, "every GEMM, attention block and GELU of the 6 layers");
    let load = |int8_weights: bool, fused: bool| {
        let o = EncoderOptions { int8_weights, fused, ..EncoderOptions::query() };
        Encoder::load(spec, &dir, &atlas_runtime::model::ort_dylib(), &o).unwrap()
    };
    let texts = [
        "how do I install with helm",
        "configure the number of replicas",
        "fn parse_retry_after(v: &str) -> Option<u64>",
        "class InvoiceBuilder: builds invoices line by line",
    ];
    let fused = load(true, true);
    assert!(fused.warnings.is_empty(), "the default model fuses without a warning: {:?}", fused.warnings);
    let embed = |int8, fused| load(int8, fused).embed_texts(&texts).unwrap();
    let (float, int8, fused) = (embed(false, false), embed(true, false), fused.embed_texts(&texts).unwrap());
    // The vectors are normalised: the dot product is the cosine.
    let cos = atlas_runtime::encoder::cosine;
    for (i, t) in texts.iter().enumerate() {
        assert!(cos(&float[i], &fused[i]) >= 0.98, "{t}: fused against float {}", cos(&float[i], &fused[i]));
        assert!(cos(&int8[i], &fused[i]) >= 0.99, "{t}: fused against unfused {}", cos(&int8[i], &fused[i]));
    }
}

/// With the int8 GEMM (the default) each forward pass quantises its activations as a
/// whole, so each window runs alone: its vector is the one its text gets on its own
/// (as a query does), whatever else the build embeds. The float path (`int8: false`)
/// agrees with it to within quantisation.
#[test]
fn every_window_gets_the_vector_its_text_gets_alone() {
    use atlas_runtime::encoder::{Encoder, EncoderOptions};
    if !model_ready() {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    let build = |extra: &str| {
        let work = tempfile::tempdir().unwrap();
        let cfg = write_config(work.path(), site.path(), &format!("stages:\n  embed:\n    threads: 2\n{extra}"));
        run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "embed"])).success();
        let npy = std::fs::read(work.path().join(".atlas/build/embeddings.npy")).unwrap();
        let (rows, dims, data) = atlas_runtime::vectors::from_npy_f16(&npy).unwrap();
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(work.path().join(".atlas/build/embeddings.json")).unwrap()).unwrap();
        let records = atlas_runtime::chunk_table::read_file(&work.path().join(".atlas/build/chunks.parquet")).unwrap();
        assert_eq!(rows, records.len(), "the fixture's chunks each fit one window");
        assert!(m["window_chunk"].as_array().unwrap().iter().enumerate().all(|(i, c)| c.as_u64() == Some(i as u64)));
        let vectors: Vec<Vec<f32>> = data.chunks(dims).map(|r| r.iter().map(|x| x.to_f32()).collect()).collect();
        (records, vectors)
    };
    let (records, int8) = build("");
    let (_, float) = build("    int8: false\n    batch_size: 16\n");
    let spec = atlas_runtime::model::spec(atlas_runtime::model::DEFAULT_MODEL).unwrap();
    let dir = atlas_runtime::model::model_dir(spec.id);
    let alone = Encoder::load(
        spec,
        &dir,
        &atlas_runtime::model::ort_dylib(),
        &EncoderOptions { int8_weights: true, ..EncoderOptions::query() },
    )
    .unwrap();
    let cos = |a: &[f32], b: &[f32]| -> f32 { a.iter().zip(b).map(|(x, y)| x * y).sum() };
    assert!(records.len() > 8, "several batches' worth: {}", records.len());
    let p = atlas_stages::embed::EmbedParams::default();
    let context = atlas_stages::embed::file_context(&records, p.context_words);
    let passages = atlas_stages::embed::passages(&records, &context, p.header);
    for (i, (r, passage)) in records.iter().zip(&passages).enumerate() {
        let ids = alone.tokenize(&format!("{}{}", spec.passage_prefix, passage)).unwrap();
        let own = alone.embed_ids(&[&ids]).unwrap().remove(0);
        assert!(cos(&own, &int8[i]) > 0.9999, "{}: cosine {} to its text alone", r.chunk_id, cos(&own, &int8[i]));
        assert!(
            cos(&float[i], &int8[i]) > 0.97,
            "{}: cosine {} to the float path",
            r.chunk_id,
            cos(&float[i], &int8[i])
        );
    }
}
