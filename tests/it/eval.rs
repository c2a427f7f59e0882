//! `atlas eval`: its figures on the fixture bundle, the JSON report, `--compare`,
//! `--explain`, the `--min-mrr` gate, bad golden files, and the eval a bundle ships
//! (pack → manifest → rerun → drift). The exact-string cases over the real corpora.

use std::path::{Path, PathBuf};
use std::process::Command;

use atlas_e2e::{bin, pipeline, run, write_fixture_code, write_fixture_site};
use atlas_runtime::{Bundle, Mode, OpenOptions, SearchOptions};

fn atlas() -> Command {
    Command::new(bin("atlas"))
}

/// Three answerable queries over the fixture (docs, and code with a symbol) and one
/// the fixture cannot answer.
const GOLDEN: &str = r#"# the fixture's golden set
{"query": "helm repo add", "expected": ["guides/install.md"], "tags": {"kind": "docs"}}
{"query": "Retry-After header value in seconds", "expected": [{"path": "net/retry.rs", "grade": 3, "symbols": ["parse_retry_after"]}], "tags": {"kind": "code"}}
{"query": "sum the amounts of the invoice lines", "expected": [{"path": "billing/invoice.py", "grade": 2}], "tags": {"kind": "code"}}
{"query": "quantum chromodynamics on a lattice", "expected": []}
"#;

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn atlas_eval_reports_every_mode_compares_explains_and_gates() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let work = tempfile::tempdir().unwrap();
    let golden = work.path().join("golden.jsonl");
    std::fs::write(&golden, GOLDEN).unwrap();
    let out = work.path().join("report.json");
    let eval = |extra: &[&str]| {
        let mut c = atlas();
        c.arg("eval").arg("--golden").arg(&golden).arg("--bundle").arg(bundle).args(extra);
        run(&mut c)
    };
    let first = eval(&["--json", out.to_str().unwrap()]).success();
    for want in ["3 answerable queries, 1 negative,", "keyword", "vector", "hybrid", "kind=code (2)", "threshold"] {
        assert!(first.stdout.contains(want), "{want:?} in\n{}", first.stdout);
    }
    let r = report(&out);
    assert_eq!((r["answerable"].as_u64(), r["negatives"].as_u64(), r["k"].as_u64()), (Some(3), Some(1), Some(10)));
    let modes: Vec<&str> = r["modes"].as_array().unwrap().iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["keyword", "vector", "hybrid"]);
    let hybrid = &r["modes"][2];
    assert_eq!(hybrid["metrics"]["mrr10"], 1.0, "{hybrid:#}");
    assert_eq!(hybrid["queries"].as_array().unwrap().len(), 4);
    // The negative's confidence sits below every answerable one's in vector mode.
    let neg = &r["modes"][1]["negatives"];
    assert_eq!((neg["false_answers"].as_u64(), neg["false_refusals"].as_u64()), (Some(0), Some(0)), "{neg:#}");

    // The same bundle and set again: every delta is zero.
    let again = eval(&["--modes", "hybrid", "--compare", out.to_str().unwrap()]).success();
    assert!(again.stdout.contains("MRR@10 1.000 → 1.000 (+0.000)"), "{}", again.stdout);
    let explained = eval(&["--modes", "keyword", "--explain"]).success();
    assert!(explained.stdout.contains("keyword: 0 of 3 queries miss rank 1"), "{}", explained.stdout);

    // The gate: above it passes, below it fails with one line.
    eval(&["--modes", "hybrid", "--min-mrr", "0.9"]).success();
    let gated = eval(&["--modes", "hybrid", "--min-mrr", "1.01"]);
    assert_eq!(gated.code, Some(1), "{}", gated.stderr);
    assert!(gated.stderr.contains("below --min-mrr 1.01: hybrid MRR@10 1.000"), "{}", gated.stderr);
}

#[test]
fn a_bad_golden_file_is_one_line_naming_the_line() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let work = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        ("{\"query\": \"ok\"}\n{\"query\": 3}\n", "line 2:"),
        ("{\"query\": \"q\", \"expected\": [{\"path\": \"a.md\", \"grade\": 7}]}\n", "grade 7"),
        ("{\"query\": \"q\", \"expect\": []}\n", "unknown field `expect`"),
        ("\n# nothing\n", "no queries"),
    ];
    for (text, want) in cases {
        let golden = work.path().join("bad.jsonl");
        std::fs::write(&golden, text).unwrap();
        let r = run(atlas().arg("eval").arg("--golden").arg(&golden).arg("--bundle").arg(bundle));
        assert_eq!(r.code, Some(2), "{text:?}: {}", r.stderr);
        assert!(r.stderr.contains(want) && r.stderr.lines().count() == 1, "{text:?}: {}", r.stderr);
    }
    let r = run(atlas().arg("eval").arg("--bundle").arg(bundle));
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("ships no eval; pass --golden"), "{}", r.stderr);
}

/// Builds the fixture with `stages.pack.eval`; returns the bundle folder.
fn build_with_eval(work: &Path, golden: &str) -> Result<PathBuf, atlas_e2e::Run> {
    write_fixture_site(&work.join("site"));
    write_fixture_code(&work.join("code"));
    std::fs::write(work.join("golden.jsonl"), golden).unwrap();
    let cfg = work.join("pipeline.yaml");
    std::fs::write(
        &cfg,
        "name: fixture\nsources:\n  site:\n    kind: local\n    path: site\n  code:\n    kind: local\n    path: code\nstages:\n  pack:\n    eval: golden.jsonl\n",
    )
    .unwrap();
    let r = run(pipeline().arg("-c").arg(&cfg).arg("run"));
    if r.code == Some(0) { Ok(work.join(".atlas/build/bundle")) } else { Err(r) }
}

#[test]
fn the_shipped_eval_round_trips_and_flags_drift() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let bundle = build_with_eval(work.path(), GOLDEN).unwrap_or_else(|r| panic!("{}", r.stderr));
    // The manifest's eval block, and the two files, hashed like every other.
    let manifest = report(&bundle.join("manifest.json"));
    let eval = &manifest["eval"];
    assert_eq!(eval["golden"], "eval/golden.jsonl");
    assert_eq!((eval["answerable"].as_u64(), eval["negatives"].as_u64()), (Some(3), Some(1)));
    assert_eq!(eval["summary"]["hybrid"]["mrr10"], 1.0, "{eval:#}");
    assert!(eval["threshold"].as_f64().is_some(), "{eval:#}");
    assert_eq!(std::fs::read_to_string(bundle.join("eval/golden.jsonl")).unwrap(), GOLDEN);
    run(atlas().arg("verify").arg(&bundle)).success();

    // Rerun: the same figures.
    let rerun = run(atlas().arg("eval").arg("--bundle").arg(&bundle)).success();
    assert!(rerun.stdout.contains("shipped eval: every figure matches"), "{}", rerun.stdout);

    // A stored figure that the index no longer gives is flagged: exit 1, one line.
    let results = bundle.join("eval/results.json");
    let mut stored = report(&results);
    stored["modes"][2]["metrics"]["mrr10"] = 0.5.into();
    stored["modes"][2]["queries"][0]["rr"] = 0.5.into();
    std::fs::write(&results, serde_json::to_vec(&stored).unwrap()).unwrap();
    let drift = run(atlas().arg("eval").arg("--bundle").arg(&bundle));
    assert_eq!(drift.code, Some(1), "{}", drift.stderr);
    assert!(drift.stderr.contains("hybrid MRR@10: stored 0.500, now 1.000"), "{}", drift.stderr);
    assert!(drift.stderr.contains("\"helm repo add\": reciprocal rank stored 0.500, now 1.000"), "{}", drift.stderr);

    // A golden set that does not parse stops the build with the line, exit 2.
    let bad = tempfile::tempdir().unwrap();
    let r = build_with_eval(bad.path(), "{\"query\": \"q\"}\n{\"nope\": 1}\n").expect_err("a bad golden set");
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("stages.pack.eval") && r.stderr.contains("line 2"), "{}", r.stderr);
}

/// `(corpus folder, the one file that holds the string, the string, its shape)`.
const EXACT: &[(&str, &str, &str, &str)] = &[
    (
        "aep-sdks-docs/site",
        "using-mobile-extensions/adobe-campaign-standard/adobe-campaign-standard-api-reference.md",
        "X-InApp-Auth",
        "hyphenated name",
    ),
    ("aep-sdks-docs/site", "resources/user-guides/track-beacon.md", "clearCurrentBeacon()", "call with ()"),
    ("aep-sdks-docs/site", "beta/iam/public-classes-enums.md", "suppressAutoTrack", "camelCase"),
    (
        "aep-sdks-docs/site",
        "foundation-extensions/experience-platform-extension/validation.md",
        "com.adobe.edge.konductor",
        "dotted path",
    ),
    ("tfhe-rs/repo", "tfhe/src/high_level_api/kv_store.rs", "Self::insert_with_clear_key", ":: path"),
    ("tfhe-rs/repo", "tfhe/src/high_level_api/kv_store.rs", "kv_store_update_test_case", "snake_case"),
    ("tfhe-rs/repo", "tfhe/docs/tutorials/sha256-bool.md", "--ladner-fischer", "flag"),
    ("concrete-ml/repo", "docs/guides/using_gpu.md", "--extra-index-url", "flag"),
    (
        "tfhe-rs/repo",
        "tfhe/src/high_level_api/errors.rs",
        "The server key was not properly initialized.",
        "error message",
    ),
    (
        "concrete-ml/repo",
        "src/concrete/ml/common/serialization/encoder.py",
        "Concrete Circuit object serialization is not implemented",
        "error message",
    ),
    (
        "concrete-ml/repo",
        "src/concrete/ml/onnx/onnx_model_manipulations.py",
        "onnx_model.graph.initializer.remove",
        "dotted path",
    ),
];

/// The files a `kind: local` source takes by default (docs and code).
fn corpus_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| ["md", "rs", "py"].contains(&x.to_str().unwrap_or(""))) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every exact string of the issue's shapes, each in one file of its real corpus, is
/// rank 1 in keyword and hybrid mode. The bundle holds each string's file and the
/// corpus files most likely to outrank it on words: the ones that share the string's
/// longest word part (up to 4 per string).
#[test]
fn slow_exact_strings_rank_first_in_keyword_and_hybrid_over_the_real_corpora() {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA") else {
        atlas_e2e::skip("ATLAS_CORPORA is unset (set it to ../shared/corpora)");
        return;
    };
    if !crate::embed::model_ready() {
        return;
    }
    let corpora = PathBuf::from(corpora);
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("corpus");
    for (corpus, file, string, shape) in EXACT {
        let root = corpora.join(corpus);
        let files = corpus_files(&root);
        let lower = string.trim_end_matches('.').to_lowercase();
        let holders: Vec<&PathBuf> = files
            .iter()
            .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.to_lowercase().contains(&lower)))
            .collect();
        assert_eq!(holders, [&root.join(file)], "{shape} {string:?} must be in one file of {corpus}");
        let part = string.split(|c: char| !c.is_alphanumeric()).max_by_key(|p| p.len()).unwrap().to_lowercase();
        let decoys = files
            .iter()
            .filter(|f| **f != root.join(file))
            .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.to_lowercase().contains(&part)))
            .take(4);
        for f in std::iter::once(&root.join(file)).chain(decoys) {
            let to = site.join(corpus.split('/').next().unwrap()).join(f.strip_prefix(&root).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(f, to).unwrap();
        }
    }
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(&cfg, format!("name: exact\nsources:\n  c:\n    kind: local\n    path: {}\n", site.display()))
        .unwrap();
    run(pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let b = Bundle::open(&work.path().join(".atlas/build/bundle"), OpenOptions::default()).unwrap();
    let mut failures = Vec::new();
    for (corpus, file, string, shape) in EXACT {
        let want = format!("c/{}/{file}", corpus.split('/').next().unwrap());
        for mode in [Mode::Keyword, Mode::Hybrid] {
            let hits = b.search(string, &SearchOptions { mode, top_k: 3, ..SearchOptions::default() }).unwrap();
            let got = hits.first().map(|h| h.path.as_str());
            if got != Some(want.as_str()) {
                failures.push(format!("{shape} {string:?} in {mode:?}: first {got:?}, want {want}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn rerank_adds_a_reranked_hybrid_row_beside_the_modes() {
    use atlas_runtime::eval::{EvalOptions, evaluate, parse_golden};
    let Some(dir) = crate::search::fixture_bundle() else { return };
    let models = tempfile::tempdir().unwrap();
    // The tiny cross-encoder rewards passages that hold "brew" (the install page).
    atlas_e2e::write_tiny_cross_encoder(models.path(), "brew");
    let b = Bundle::open(dir, OpenOptions { reranker_dir: Some(models.path().to_owned()), ..OpenOptions::default() })
        .unwrap();
    let golden = parse_golden(r#"{"query": "list the apps endpoint", "expected": ["guides/install.md"]}"#).unwrap();
    let opts = EvalOptions { modes: vec![Mode::Hybrid], rerank: true, k: 10, ..EvalOptions::default() };
    let r = evaluate(&b, &golden, &opts).unwrap();
    let names: Vec<&str> = r.modes.iter().map(|m| m.mode.as_str()).collect();
    assert_eq!(names, ["hybrid", "hybrid+rerank"]);
    assert!(r.modes[0].metrics.mrr10 < 1.0, "{:?}", r.modes[0].metrics);
    assert_eq!(r.modes[1].metrics.mrr10, 1.0);
    assert_eq!(r.options(), opts);
}

/// `(corpus, defining file, query, shape)`: names defined once in the real corpora,
/// each used, re-exported or documented in other files that would outrank the
/// definition on words alone.
const DEFINITIONS: &[(&str, &str, &str, &str)] = &[
    ("tfhe-rs/repo", "tfhe/src/high_level_api/global_state.rs", "with_server_key_as_context", "bare snake_case"),
    ("tfhe-rs/repo", "tfhe/src/high_level_api/global_state.rs", "unset_server_key()", "call"),
    (
        "tfhe-rs/repo",
        "tfhe/src/high_level_api/xof_key_set/parts.rs",
        "CompressedXofKeySet::decompress_parts",
        "Type::method",
    ),
    (
        "tfhe-rs/repo",
        "tfhe/src/high_level_api/xof_key_set/parts.rs",
        "CompressedXofKeySet.decompress_parts()",
        "Type.method()",
    ),
    ("concrete-ml/repo", "src/concrete/ml/onnx/ops_impl.py", "numpy_erf", "bare snake_case"),
    ("concrete-ml/repo", "src/concrete/ml/torch/compile.py", "compile_torch_model()", "call"),
    (
        "concrete-ml/repo",
        "src/concrete/ml/quantization/quantizers.py",
        "quantizers.fill_from_kwargs",
        "module.function",
    ),
    ("concrete-ml/repo", "src/concrete/ml/quantization/quantized_module.py", "QuantizedModule", "CamelCase class"),
    ("concrete-ml/repo", "src/concrete/ml/quantization/quantized_module.py", "QuantizedModule.compile", "Class.method"),
];

/// A query that names a symbol defined once ranks its defining chunk first, above the
/// re-exports, imports, callers, tests and docs that mention it, in keyword and hybrid
/// mode, for every shape of name (bare, `()`, `Type::method`, `Type.method`,
/// `module.function`). The bundle holds each defining file and up to six other files
/// that mention the name.
#[test]
fn slow_definitions_rank_first_for_every_shape_of_name_over_the_real_corpora() {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA") else {
        atlas_e2e::skip("ATLAS_CORPORA is unset (set it to ../shared/corpora)");
        return;
    };
    if !crate::embed::model_ready() {
        return;
    }
    let corpora = PathBuf::from(corpora);
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("corpus");
    for (corpus, file, name, _) in DEFINITIONS {
        let root = corpora.join(corpus);
        let bare = atlas_runtime::symbols::segments(name).last().copied().unwrap().to_owned();
        let users = corpus_files(&root)
            .into_iter()
            .filter(|f| *f != root.join(file))
            .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(&bare)))
            .take(6);
        for f in std::iter::once(root.join(file)).chain(users) {
            let to = site.join(corpus.split('/').next().unwrap()).join(f.strip_prefix(&root).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&f, to).unwrap();
        }
    }
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(&cfg, format!("name: defs\nsources:\n  c:\n    kind: local\n    path: {}\n", site.display()))
        .unwrap();
    run(pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let b = Bundle::open(&work.path().join(".atlas/build/bundle"), OpenOptions::default()).unwrap();
    let mut failures = Vec::new();
    for (corpus, file, name, shape) in DEFINITIONS {
        let want = format!("c/{}/{file}", corpus.split('/').next().unwrap());
        let defs = b.symbols().lookup(name);
        assert_eq!(defs.len(), 1, "{name:?} must be defined once: {defs:?}");
        let def = &b.symbols().defs[defs[0] as usize];
        for mode in [Mode::Keyword, Mode::Hybrid] {
            let hits = b.search(name, &SearchOptions { mode, top_k: 3, ..SearchOptions::default() }).unwrap();
            let first = hits.first().map(|h| (h.path.as_str(), h.start_line, h.end_line));
            let holds = first.is_some_and(|(p, a, z)| p == want && a <= def.start_line && def.start_line <= z);
            if !holds {
                failures.push(format!("{shape} {name:?} in {mode:?}: first {first:?}, want {want}:{}", def.start_line));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
