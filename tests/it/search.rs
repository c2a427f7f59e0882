//! The runtime's search over a bundle built from fixtures by the real pipeline, and
//! the `atlas search` command line.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use atlas_e2e::{bin, build_fixture_bundle, run, write_tiny_cross_encoder};
use atlas_runtime::search::{Filters, Fusion, Tuning};
use atlas_runtime::{Bundle, Mode, OpenOptions, SearchOptions};

/// One fixture bundle for every test in this module (built once, read-only after).
pub fn fixture_bundle() -> Option<&'static Path> {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    if !crate::embed::model_ready() {
        return None;
    }
    let (_, dir) = DIR.get_or_init(|| {
        let work = tempfile::tempdir().unwrap();
        let dir = build_fixture_bundle(work.path());
        (work, dir)
    });
    Some(dir)
}

fn open(dir: &Path) -> Bundle {
    Bundle::open(dir, OpenOptions::default()).unwrap()
}

fn search(b: &Bundle, q: &str, opts: SearchOptions) -> Vec<atlas_runtime::Hit> {
    b.search(q, &SearchOptions { top_k: 10, ..opts }).unwrap()
}

fn mode(m: Mode) -> SearchOptions {
    SearchOptions { mode: m, ..SearchOptions::default() }
}

#[test]
fn every_mode_finds_the_page_that_answers() {
    let Some(dir) = fixture_bundle() else { return };
    let b = open(dir);
    let cases = [
        ("helm repo add", "site/guides/install.md"),
        ("how many pods run", "site/guides/configure.md"),
        ("list the apps endpoint", "site/reference/api.md"),
        ("InvoiceBuilder", "code/billing/invoice.py"),
    ];
    for m in [Mode::Keyword, Mode::Vector, Mode::Hybrid] {
        for fusion in [Fusion::Rrf, Fusion::Score] {
            for (q, want) in cases {
                if m == Mode::Vector && q == "InvoiceBuilder" {
                    continue; // an identifier is keyword's job
                }
                let hits = search(&b, q, SearchOptions { mode: m, fusion, ..SearchOptions::default() });
                assert!(!hits.is_empty(), "{m:?} {q}");
                assert_eq!(
                    hits[0].path,
                    want,
                    "{m:?}/{fusion:?} {q:?}: {:#?}",
                    hits.iter().map(|h| &h.path).collect::<Vec<_>>()
                );
                let h = &hits[0];
                assert!(h.start_line >= 1 && h.end_line >= h.start_line, "{h:?}");
                assert!(h.citation().contains("#L"), "{}", h.citation());
                assert!(!h.snippet.is_empty());
            }
        }
    }
}

#[test]
fn keyword_expands_plain_words_but_not_identifiers() {
    let Some(dir) = fixture_bundle() else { return };
    let b = open(dir);
    // "amounts" (plural) finds `total_amount` through the symbol field variant.
    let hits = search(&b, "amounts", mode(Mode::Keyword));
    assert!(hits.iter().any(|h| h.symbol.as_deref() == Some("total_amount")), "{hits:#?}");
    // An identifier is taken as typed (no variants): the chunk that defines it is first.
    assert!(atlas_runtime::search::query_words("delay_ms").len() == 1);
    let hits = search(&b, "delay_ms", mode(Mode::Keyword));
    assert!(hits[0].snippet.contains("fn delay_ms"), "{hits:#?}");
    // And labelled by that definition, whatever the chunk holding it is named after.
    let labels = |h: &atlas_runtime::Hit| (h.symbol.clone(), h.symbol_kind.clone());
    for q in ["delay_ms", "Backoff::delay_ms", "Backoff.delay_ms()"] {
        let hits = search(&b, q, mode(Mode::Hybrid));
        assert_eq!(labels(&hits[0]), (Some("Backoff::delay_ms".into()), Some("method".into())), "{q}: {hits:#?}");
    }
}

/// A page named after one of the question's words (title, heading, file name) must
/// not outrank the section whose text holds the question: keyword scores the text
/// first (`text_index::DEFAULT_BOOSTS`; with the former boosts, 3 on the title, 2 on
/// the heading and 2.5 on the path, `tokens.md` came first).
#[test]
fn keyword_ranks_the_text_that_answers_above_a_page_named_after_one_word() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let pages = [
        ("guides/tokens.md", "# Tokens\n\nAn overview of the kinds of tokens.\n"),
        (
            "guides/security.md",
            "# Security\n\n## Rotation\n\nRotate the API tokens every month from the admin console, then restart the workers.\n",
        ),
    ];
    let b = open(&atlas_e2e::build_fixture_bundle_with(work.path(), &pages));
    for m in [Mode::Keyword, Mode::Hybrid] {
        let hits = search(&b, "how often should I rotate API tokens", mode(m));
        assert_eq!(
            hits[0].path,
            "site/guides/security.md",
            "{m:?}: {:#?}",
            hits.iter().map(|h| &h.path).collect::<Vec<_>>()
        );
    }
}

/// A question in British spelling searches as the corpus spells: in a corpus that
/// writes `serialize` and `behavior`, `serialise` and `behaviour` find what the
/// American spelling finds, with the same scores and confidence (as typed, neither is
/// in any chunk: keyword misses them and the confidence counts them unseen). A word
/// the corpus writes the British way (`colour`) stays as typed.
#[test]
fn british_spelling_searches_as_the_corpus_spells() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let pages = [
        (
            "guides/export.md",
            "# Export\n\nSerialize a trained model to disk, then load the serialized file on the server. \
             The loader's behavior on a missing file is to raise an error.\n",
        ),
        ("guides/theme.md", "# Theme\n\nPick the colour of the dashboard theme; the colour applies to every chart.\n"),
    ];
    let b = open(&atlas_e2e::build_fixture_bundle_with(work.path(), &pages));
    let british = "how do I serialise a model, and what is the behaviour when the file is missing";
    let american = "how do I serialize a model, and what is the behavior when the file is missing";
    for m in [Mode::Keyword, Mode::Vector, Mode::Hybrid] {
        let (uk, us) = (b.search_scored(british, &mode(m)).unwrap(), b.search_scored(american, &mode(m)).unwrap());
        let ranked = |s: &atlas_runtime::search::Searched| {
            s.hits.iter().map(|h| (h.chunk_id.clone(), h.score)).collect::<Vec<_>>()
        };
        assert_eq!(ranked(&uk), ranked(&us), "{m:?}");
        assert_eq!((uk.confidence, uk.signals.unseen), (us.confidence, us.signals.unseen), "{m:?}");
        assert_eq!(uk.hits[0].path, "site/guides/export.md", "{m:?}");
    }
    let colour = b.search_scored("the colour of the dashboard", &mode(Mode::Hybrid)).unwrap();
    assert_eq!(colour.signals.unseen, 0.0, "{:?}", colour.signals);
    assert_eq!(colour.hits[0].path, "site/guides/theme.md");
}

/// The refusal model's keyword signal is the same whichever mode asked (vector mode
/// runs the keyword query for it), and a question the pages hold scores above one
/// they do not.
#[test]
fn the_confidence_reads_the_best_keyword_score_in_every_mode() {
    let Some(dir) = fixture_bundle() else { return };
    let b = open(dir);
    let scored = |q: &str, m: Mode| b.search_scored(q, &mode(m)).unwrap();
    let (v, h) = (scored("how many pods run", Mode::Vector), scored("how many pods run", Mode::Hybrid));
    assert!(v.signals.keyword > 0.0, "{:?}", v.signals);
    assert_eq!(v.signals.keyword, h.signals.keyword);
    let off = scored("quantum chromodynamics lattice gauge", Mode::Hybrid);
    assert!(off.signals.keyword < h.signals.keyword && off.confidence < h.confidence, "{off:?} / {h:?}");
}

/// A question about a release the pages do not cover reads as unanswered, though it
/// is as near the release notes as one they cover: the version it names is in none of
/// the first hits (`Signals::unmatched`).
#[test]
fn a_version_the_pages_never_mention_lowers_the_confidence() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let pages = [(
        "release-notes.md",
        "# Release notes\n\n## 1.4.0\n\nThe scheduler retries failed jobs with backoff.\n\n\
         ## 1.3.2\n\nFixed a crash when the queue was empty.\n",
    )];
    let b = open(&atlas_e2e::build_fixture_bundle_with(work.path(), &pages));
    let scored = |q: &str| b.search_scored(q, &mode(Mode::Hybrid)).unwrap();
    let covered = scored("what changed in the scheduler in version 1.4");
    let uncovered = scored("what changed in the scheduler in version 2.7");
    assert!(!covered.signals.unmatched, "{:?}", covered.signals);
    assert!(uncovered.signals.unmatched, "{:?}", uncovered.signals);
    assert!(uncovered.confidence < covered.confidence / 4.0, "{uncovered:?} / {covered:?}");
}

/// A question about a product the pages never name reads as unanswered, though each
/// of the name's words is in the pages (`Google Analytics 4`: "Google", "Analytics"
/// and "4" all are): no chunk holds two of its words together. A name the pages write
/// (`Google Tag Manager`, in the plural too; `Server Side`, hyphenated there), a
/// brand before a product the pages name rarely (`Google Gemini`), a sentence's first
/// word and a name the code defines (`InvoiceBuilder`) are no such thing.
#[test]
fn a_product_the_pages_never_name_lowers_the_confidence() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let pages = [(
        "integrations.md",
        "# Integrations\n\nForward events to Google Tag Manager containers with the forwarder, \
         or tag them server-side. Analytics reports group events by session; set the batch size to \
         4 events. Summaries can come from Gemini.\n",
    )];
    let b = open(&atlas_e2e::build_fixture_bundle_with(work.path(), &pages));
    let scored = |q: &str| b.search_scored(q, &mode(Mode::Hybrid)).unwrap();
    let written = scored("forward events to Google Tag Managers");
    let unwritten = scored("forward events to Google Analytics 4");
    assert!(!written.signals.unmatched, "{:?}", written.signals);
    assert!(unwritten.signals.unmatched && unwritten.signals.unseen == 0.0, "{:?}", unwritten.signals);
    assert!(unwritten.confidence < written.confidence / 4.0, "{unwritten:?} / {written:?}");
    for q in [
        "Forward events by session",
        "pass an InvoiceBuilder Analytics reports read",
        "tag events Server Side",
        "summarise events with Google Gemini",
    ] {
        assert!(!scored(q).signals.unmatched, "{q}");
    }
}

#[test]
fn filters_narrow_every_mode() {
    let Some(dir) = fixture_bundle() else { return };
    let b = open(dir);
    let with = |f: Filters, m: Mode| {
        search(
            &b,
            "invoice lines retry backoff install",
            SearchOptions { mode: m, filters: f, ..SearchOptions::default() },
        )
    };
    for m in [Mode::Keyword, Mode::Vector, Mode::Hybrid] {
        let code = with(Filters { kind: Some(atlas_runtime::ChunkKind::Code), ..Filters::default() }, m);
        assert!(!code.is_empty() && code.iter().all(|h| h.kind == atlas_runtime::ChunkKind::Code), "{m:?}");
        let docs = with(Filters { kind: Some(atlas_runtime::ChunkKind::Docs), ..Filters::default() }, m);
        assert!(!docs.is_empty() && docs.iter().all(|h| h.kind == atlas_runtime::ChunkKind::Docs), "{m:?}");
        let py = with(Filters { language: Some("python".into()), ..Filters::default() }, m);
        assert!(!py.is_empty() && py.iter().all(|h| h.language.as_deref() == Some("python")), "{m:?}");
        let guides = with(Filters { section: Some("guides".into()), ..Filters::default() }, m);
        assert!(!guides.is_empty() && guides.iter().all(|h| h.section == "guides"), "{m:?}: {guides:#?}");
        let prefix = with(Filters { path_prefix: Some("code/net/".into()), ..Filters::default() }, m);
        assert!(!prefix.is_empty() && prefix.iter().all(|h| h.path.starts_with("code/net/")), "{m:?}");
        let kinds = with(Filters { symbol_kind: Some("function".into()), ..Filters::default() }, m);
        assert!(
            !kinds.is_empty() && kinds.iter().all(|h| h.symbol_kind.as_deref() == Some("function")),
            "{m:?}: {kinds:#?}"
        );
        let repo = with(Filters { repo: Some("nowhere".into()), ..Filters::default() }, m);
        assert!(repo.is_empty(), "{m:?}: local sources have no repository");
    }
}

#[test]
fn diversity_drops_repeats_and_min_score_cuts() {
    let Some(dir) = fixture_bundle() else { return };
    let b = open(dir);
    let hits = search(&b, "apps", mode(Mode::Hybrid));
    let mut seen = std::collections::HashSet::new();
    for h in &hits {
        assert!(seen.insert((h.path.clone(), h.heading_path.clone())), "same file and heading twice: {hits:#?}");
    }
    let all = search(&b, "install", mode(Mode::Vector));
    let cut = all[1].score;
    let kept =
        search(&b, "install", SearchOptions { mode: Mode::Vector, min_score: Some(cut), ..SearchOptions::default() });
    assert!(kept.iter().all(|h| h.score >= cut) && kept.len() < all.len());
}

#[test]
fn the_first_five_hits_hold_docs_and_code_when_the_next_five_hold_the_other() {
    let Some(dir) = fixture_bundle() else { return };
    let b = open(dir);
    let ids = |h: &[atlas_runtime::Hit]| h.iter().map(|h| h.chunk_id.clone()).collect::<Vec<_>>();
    let kinds = |h: &[atlas_runtime::Hit]| h.iter().take(5).map(|h| h.kind).collect::<std::collections::HashSet<_>>();
    let off = Tuning { kind_mix: 0, ..Tuning::default() };
    let mut fired = 0;
    for q in [
        "install the chart with helm",
        "how many pods run",
        "list the apps endpoint",
        "tokens in rules",
        "wait before retrying",
        "add up the invoice",
    ] {
        for m in [Mode::Keyword, Mode::Vector, Mode::Hybrid] {
            let plain = search(&b, q, SearchOptions { mode: m, tuning: off, ..SearchOptions::default() });
            let mixed = search(&b, q, mode(m));
            assert!(mixed.windows(2).all(|w| w[0].score >= w[1].score), "{m:?} {q:?}: scores out of order");
            if kinds(&plain).len() == 1 && plain.iter().skip(5).any(|h| h.kind != plain[0].kind) {
                fired += 1;
                assert_eq!(kinds(&mixed).len(), 2, "{m:?} {q:?}: {:#?}", ids(&mixed));
                assert_eq!(ids(&mixed[..4]), ids(&plain[..4]), "{m:?} {q:?}: the first four moved");
            } else {
                assert_eq!(ids(&mixed), ids(&plain), "{m:?} {q:?}: mixed without need");
            }
        }
    }
    assert!(fired > 0, "no question of the fixture needed the other kind");
}

#[test]
fn a_file_of_tests_ranks_after_the_code_and_ahead_of_it_when_the_question_is_about_tests() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let code = work.path().join("code");
    for (rel, text) in [
        (
            "src/invoice.rs",
            "/// The amount due on an invoice: its lines summed, then the tax rate applied.\n\
             pub fn amount_due(lines: &[u64], tax_percent: u64) -> u64 {\n\
             \x20   let net: u64 = lines.iter().sum();\n\
             \x20   net + net * tax_percent / 100\n}\n",
        ),
        (
            "tests/invoice.rs",
            "// The amount due on an invoice sums its lines and applies the tax rate.\n\
             #[test]\nfn amount_due_sums_the_invoice_lines_and_applies_the_tax_rate() {\n\
             \x20   // invoice lines summed, tax rate applied: the amount due\n\
             \x20   assert_eq!(invoice::amount_due(&[100, 50], 20), 180);\n}\n",
        ),
    ] {
        let p = code.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        "name: tests-apart\nsources:\n  code:\n    kind: local\n    path: code\n    include: [\"**/*.rs\"]\n",
    )
    .unwrap();
    run(atlas_e2e::pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let b = open(&work.path().join(".atlas/build/bundle"));
    let first = |q: &str, m: Mode, tuning: Tuning| {
        search(&b, q, SearchOptions { mode: m, tuning, ..SearchOptions::default() })[0].path.clone()
    };
    let even = Tuning { test_files: 1.0, test_questions: 1.0, ..Tuning::default() };
    let question = "sum the invoice lines and apply the tax rate to get the amount due";
    let about_tests = format!("tests that {question}");
    let mut demoted = 0;
    for m in [Mode::Keyword, Mode::Vector, Mode::Hybrid] {
        assert_eq!(first(question, m, Tuning::default()), "code/src/invoice.rs", "{m:?}");
        demoted += usize::from(first(question, m, even) == "code/tests/invoice.rs");
        // A question about tests is answered by them: they rank first, lifted by
        // `test_questions` over the score an even factor gives them.
        let score = |tuning: Tuning| {
            let hits = search(&b, &about_tests, SearchOptions { mode: m, tuning, ..SearchOptions::default() });
            assert_eq!(hits[0].path, "code/tests/invoice.rs", "{m:?}");
            hits[0].score
        };
        let (lifted, level) = (score(Tuning::default()), score(even));
        assert!((lifted - level * Tuning::default().test_questions).abs() <= 1e-4 * lifted.abs(), "{m:?}");
        // With both factors even, neither question is reordered.
        let plain = search(&b, &about_tests, SearchOptions { mode: m, tuning: even, ..SearchOptions::default() });
        let unlifted = Tuning { test_questions: 1.0, ..Tuning::default() };
        let ranked = search(&b, &about_tests, SearchOptions { mode: m, tuning: unlifted, ..SearchOptions::default() });
        assert_eq!(
            ranked.iter().map(|h| &h.chunk_id).collect::<Vec<_>>(),
            plain.iter().map(|h| &h.chunk_id).collect::<Vec<_>>(),
            "{m:?}: the factor for other questions touched a question about tests"
        );
    }
    assert!(demoted > 0, "the file of tests ranked after the code even at an even factor: the test shows nothing");
}

#[test]
fn get_chunk_returns_the_chunk_and_its_neighbours() {
    let Some(dir) = fixture_bundle() else { return };
    let b = open(dir);
    let hits = search(&b, "With kubectl", mode(Mode::Keyword));
    let id = &hits.iter().find(|h| h.heading_path.last().is_some_and(|x| x == "With kubectl")).unwrap().chunk_id;
    let ctx = b.get_chunk(id, 1).unwrap();
    assert_eq!(ctx.chunk.hit.chunk_id, *id);
    assert!(ctx.chunk.text.contains("brew"), "{}", ctx.chunk.text);
    assert_eq!(ctx.before.len(), 1);
    assert_eq!(ctx.before[0].hit.heading_path.last().map(String::as_str), Some("With Helm"));
    assert!(ctx.after.is_empty(), "the last section of the file");
    let err = b.get_chunk("nope", 1).unwrap_err().to_string();
    assert!(err.contains("no chunk \"nope\""), "{err}");
}

#[test]
fn rerank_reorders_the_pooled_candidates_with_a_real_onnx_cross_encoder() {
    let Some(dir) = fixture_bundle() else { return };
    let models = tempfile::tempdir().unwrap();
    write_tiny_cross_encoder(models.path(), "brew");
    let b = Bundle::open(dir, OpenOptions { reranker_dir: Some(models.path().to_owned()), ..OpenOptions::default() })
        .unwrap();
    // Without rerank, an API question ranks the API page first; the tiny model only
    // rewards passages holding "brew", so rerank must lift the macOS tab to the top.
    let plain = search(&b, "list the apps endpoint", mode(Mode::Hybrid));
    assert_ne!(plain[0].path, "site/guides/install.md");
    let hits = search(&b, "list the apps endpoint", SearchOptions { rerank: true, ..SearchOptions::default() });
    assert_eq!(hits[0].path, "site/guides/install.md", "{hits:#?}");
    assert!(hits[0].score >= 1000.0, "the logit is the sum of passage ids: {}", hits[0].score);
    // Code and docs both made the pool.
    assert!(
        hits.iter().any(|h| h.kind == atlas_runtime::ChunkKind::Code)
            && hits.iter().any(|h| h.kind == atlas_runtime::ChunkKind::Docs)
    );

    // A missing reranker is a clear error, not a crash.
    let empty = tempfile::tempdir().unwrap();
    let b = Bundle::open(dir, OpenOptions { reranker_dir: Some(empty.path().to_owned()), ..OpenOptions::default() })
        .unwrap();
    let err = b.search("x", &SearchOptions { rerank: true, ..SearchOptions::default() }).unwrap_err().to_string();
    assert!(
        err.contains("reranker ms-marco-minilm-l-6-v2 is missing model.onnx") && err.contains("huggingface.co"),
        "{err}"
    );
}

#[test]
fn bad_inputs_get_clear_errors() {
    let Some(dir) = fixture_bundle() else { return };
    // A missing bundle.
    let err = Bundle::open(Path::new("/nonexistent/bundle"), OpenOptions::default()).unwrap_err().to_string();
    assert!(err.contains("no bundle here"), "{err}");
    // A corrupt manifest.
    let copy = tempfile::tempdir().unwrap();
    atlas_e2e::copy_tree(dir, copy.path());
    std::fs::write(copy.path().join("manifest.json"), "{ not json").unwrap();
    let err = Bundle::open(copy.path(), OpenOptions::default()).unwrap_err().to_string();
    assert!(err.contains("manifest.json") && err.contains("unreadable manifest"), "{err}");
    // A model this build does not know.
    atlas_e2e::copy_tree(dir, copy.path());
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let p = copy.path().join("manifest.json");
        let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        f(&mut m);
        std::fs::write(&p, m.to_string()).unwrap();
    };
    edit(&|m| m["model"]["id"] = "bge-large-zh".into());
    let err = Bundle::open(copy.path(), OpenOptions::default()).unwrap_err().to_string();
    assert!(err.contains("model \"bge-large-zh\", which this build of atlas does not know"), "{err}");
    // The right model id but other weights: refused at the first vector search.
    atlas_e2e::copy_tree(dir, copy.path());
    edit(&|m| m["model"]["sha256"] = "00".repeat(32).into());
    let b = Bundle::open(copy.path(), OpenOptions::default()).unwrap();
    let err = b.search("install", &mode(Mode::Vector)).unwrap_err().to_string();
    assert!(err.contains("model mismatch"), "{err}");
    // An empty query.
    let b = open(dir);
    let err = b.search("  ", &SearchOptions::default()).unwrap_err().to_string();
    assert_eq!(err, "the query is empty; pass some words to search for");
}

#[test]
fn atlas_search_prints_for_people_and_stable_json_for_scripts() {
    let Some(dir) = fixture_bundle() else { return };
    let atlas = || {
        let mut c = std::process::Command::new(bin("atlas"));
        c.arg("search");
        c
    };
    let r = run(atlas().args(["helm repo add", "--bundle"]).arg(dir).args(["-k", "2"])).success();
    assert!(r.stdout.starts_with(" 1. "), "{}", r.stdout);
    assert!(r.stdout.contains("site/guides/install.md#L"), "{}", r.stdout);
    let r = run(atlas().args(["InvoiceBuilder", "--kind", "code", "--mode", "keyword", "--json", "--bundle"]).arg(dir))
        .success();
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["mode"], "keyword");
    let hit = &v["hits"][0];
    for key in [
        "score",
        "chunk_id",
        "path",
        "title",
        "heading_path",
        "start_line",
        "end_line",
        "snippet",
        "kind",
        "language",
        "symbol",
    ] {
        assert!(hit.get(key).is_some(), "{key} in {hit}");
    }
    assert_eq!(hit["kind"], "code");
    // Errors: one line, non-zero exit.
    // A --bundle that names no folder and no installed bundle is the user's input: exit 2.
    let r = run(atlas().args(["x", "--bundle", "/nonexistent"]));
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr.starts_with("error: \"/nonexistent\" is neither a bundle folder nor an installed bundle")
            && r.stderr.lines().count() == 1,
        "{}",
        r.stderr
    );
    let r = run(atlas().args(["x", "--mode", "fuzzy", "--bundle"]).arg(dir));
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("unknown mode \"fuzzy\""), "{}", r.stderr);
}

#[test]
fn a_filter_over_the_hnsw_index_scans_the_rows_it_keeps_and_one_nothing_passes_answers_at_once() {
    let Some(dir) = fixture_bundle() else { return };
    let exact = open(dir);
    let graph = Bundle::open(dir, OpenOptions { exact_max_rows: 0, ..OpenOptions::default() }).unwrap();
    for kind in [atlas_runtime::ChunkKind::Docs, atlas_runtime::ChunkKind::Code] {
        let o = SearchOptions { filters: Filters { kind: Some(kind), ..Filters::default() }, ..mode(Mode::Vector) };
        for q in ["helm repo add", "how many pods run", "retry after a delay"] {
            let ids = |b: &Bundle| -> Vec<String> {
                search(b, q, o.clone()).into_iter().take(5).map(|h| h.chunk_id).collect()
            };
            assert_eq!(ids(&exact), ids(&graph), "{q} ({kind:?})");
            assert!(!ids(&graph).is_empty(), "{q} ({kind:?})");
        }
    }
    // A filter no chunk passes: no hits and no confidence, in every mode.
    for m in [Mode::Keyword, Mode::Vector, Mode::Hybrid] {
        let none = Filters { section: Some("no-such-section".into()), ..Filters::default() };
        let o = SearchOptions { filters: none, ..mode(m) };
        assert!(search(&graph, "helm repo add", o).is_empty(), "{m:?}");
    }
}

#[test]
fn the_bundles_hnsw_index_agrees_with_the_exact_scan() {
    let Some(dir) = fixture_bundle() else { return };
    let exact = open(dir);
    let graph = Bundle::open(dir, OpenOptions { exact_max_rows: 0, ..OpenOptions::default() }).unwrap();
    assert_eq!((exact.info().vector_index.as_str(), graph.info().vector_index.as_str()), ("exact", "hnsw"));
    for q in ["helm repo add", "how many pods run", "retry after a delay", "invoice total"] {
        let ids = |b: &Bundle| -> Vec<String> {
            search(b, q, mode(Mode::Vector)).into_iter().take(3).map(|h| h.chunk_id).collect()
        };
        assert_eq!(ids(&exact), ids(&graph), "{q}");
    }
}

#[test]
fn a_keyword_only_open_never_reads_the_graph_it_would_not_walk() {
    let Some(dir) = fixture_bundle() else { return };
    let tmp = tempfile::tempdir().unwrap();
    atlas_e2e::copy_tree(dir, tmp.path());
    // The graph damaged, at its listed size: opening it to walk fails on its hash...
    let graph = tmp.path().join("hnsw").join(atlas_runtime::hnsw::GRAPH_FILE);
    let size = std::fs::metadata(&graph).unwrap().len() as usize;
    std::fs::write(&graph, vec![0x5a; size]).unwrap();
    let err = Bundle::open(tmp.path(), OpenOptions { exact_max_rows: 0, ..OpenOptions::default() }).unwrap_err();
    assert!(err.to_string().contains("does not match the manifest"), "{err}");
    // ...opened keyword-only it is never read, and the bundle still says what serves
    // its vectors.
    let kw = Bundle::open(tmp.path(), OpenOptions { exact_max_rows: 0, keyword_only: true, ..OpenOptions::default() })
        .unwrap();
    assert_eq!(kw.info().vector_index, "hnsw");
    let ids = |b: &Bundle| -> Vec<String> {
        search(b, "helm repo add", mode(Mode::Keyword)).into_iter().take(3).map(|h| h.chunk_id).collect()
    };
    assert_eq!(ids(&kw), ids(&open(dir)));
    assert!(!ids(&kw).is_empty());
}

/// Issue 68 item 7: a vendored copy and a minified bundle that hold the package's own
/// words, and more of the query's, rank below the package's own file in every mode, and
/// their hits say what they are.
#[test]
fn the_packages_own_code_ranks_above_vendored_and_minified_copies_of_its_words() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let own = "\"\"\"Retry helpers.\"\"\"\n\n\ndef retry_with_backoff(send, attempts):\n    \"\"\"Retry a request with exponential backoff after a timeout.\"\"\"\n    for n in range(attempts):\n        try:\n            return send()\n        except TimeoutError:\n            sleep(2 ** n)\n";
    // The copies say the query's words more often than the package's own file.
    let copy =
        own.replace("after a timeout.", "after a timeout: retry the request again, with backoff, after each timeout.");
    let minified = format!(
        "function retryWithBackoff(send,attempts){{/* retry a request with exponential backoff after a timeout; retry */{}}}\n",
        "var n=0;".repeat(400)
    );
    for (rel, text) in
        [("pkg/retry.py", own.to_owned()), ("pkg/_vendor/urllib3/retry.py", copy), ("static/retry.min.js", minified)]
    {
        let p = work.path().join("code").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        "name: origin\nsources:\n  code:\n    kind: local\n    path: code\n    include: [\"**/*.py\", \"**/*.js\"]\n",
    )
    .unwrap();
    run(atlas_e2e::pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let b = open(&work.path().join(".atlas/build/bundle"));
    let origins: Vec<_> = b.chunks().iter().map(|c| (c.path.as_str(), c.origin)).collect();
    assert!(origins.iter().all(|(p, o)| match *p {
        "code/pkg/retry.py" => o.is_none(),
        "code/pkg/_vendor/urllib3/retry.py" => *o == Some(atlas_runtime::Origin::Vendored),
        _ => *o == Some(atlas_runtime::Origin::Minified),
    }));
    assert_eq!(b.info().by_origin.values().sum::<usize>(), origins.iter().filter(|(_, o)| o.is_some()).count());
    let q = "how do I retry a request with exponential backoff after a timeout";
    for m in [Mode::Keyword, Mode::Vector, Mode::Hybrid] {
        let hits = search(&b, q, mode(m));
        let paths: Vec<(&str, Option<atlas_runtime::Origin>)> =
            hits.iter().map(|h| (h.path.as_str(), h.origin)).collect();
        assert_eq!(paths[0], ("code/pkg/retry.py", None), "{m:?}: {paths:?}");
        assert!(paths.iter().any(|(p, o)| p.contains("_vendor") && o.is_some()), "{m:?}: {paths:?}");
        // Without the rule the vendored copy, which says the words more often, is first.
        let even = Tuning { not_own_code: 1.0, ..Tuning::default() };
        let hits = search(&b, q, SearchOptions { tuning: even, ..mode(m) });
        assert_eq!(hits[0].origin, Some(atlas_runtime::Origin::Vendored), "{m:?}: {hits:#?}");
    }
}

/// Issue 68 item 6: a crate's guide written as `//!` in a code file is docs: the docs
/// filter finds it in every mode, cited at the comment's lines, beside a README that
/// does not answer.
#[test]
fn the_docs_filter_finds_a_guide_written_as_inner_doc_comments() {
    if !crate::embed::model_ready() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let guide = "//! ## Subcommands\n\
                 //!\n\
                 //! A subcommand is a command nested under the top-level one, with its own\n\
                 //! arguments and its own help, like `git commit` under `git`.\n\
                 //! Declare it with `Command::subcommand`, then match on the name the user\n\
                 //! typed to run it.\n\
                 //!\n\
                 //! ```rust\n\
                 //! let cmd = Command::new(\"git\").subcommand(Command::new(\"commit\"));\n\
                 //! ```\n\
                 \n\
                 pub use super::chapter_3 as next;\n";
    for (rel, text) in [
        ("README.md", "# Widgets\n\nA library of widgets for terminals. Install it with `cargo add widgets`.\n"),
        ("src/_tutorial/chapter_2.rs", guide),
        ("src/lib.rs", "pub fn parse(args: &[String]) -> usize {\n    args.len()\n}\n"),
    ] {
        let p = work.path().join("code").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        "name: guide\nsources:\n  code:\n    kind: local\n    path: code\n    include: [\"**/*.rs\", \"**/*.md\"]\n",
    )
    .unwrap();
    run(atlas_e2e::pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let b = open(&work.path().join(".atlas/build/bundle"));
    let q = "how do I declare a subcommand with its own arguments and help";
    let docs = Filters { kind: Some(atlas_runtime::ChunkKind::Docs), ..Filters::default() };
    for m in [Mode::Keyword, Mode::Vector, Mode::Hybrid] {
        let hits = search(&b, q, SearchOptions { mode: m, filters: docs.clone(), ..SearchOptions::default() });
        let first = &hits[0];
        assert_eq!(first.path, "code/src/_tutorial/chapter_2.rs", "{m:?}: {hits:#?}");
        assert_eq!(first.kind, atlas_runtime::ChunkKind::Docs, "{m:?}");
        assert_eq!(first.citation(), "code/src/_tutorial/chapter_2.rs#L1-L10", "{m:?}");
        assert_eq!(first.heading_path, ["Subcommands"], "{m:?}");
    }
    // The guide left the code: the code filter finds the `pub use` line alone in it.
    let code = Filters { kind: Some(atlas_runtime::ChunkKind::Code), ..Filters::default() };
    let hits = search(&b, q, SearchOptions { mode: Mode::Keyword, filters: code, ..SearchOptions::default() });
    assert!(hits.iter().all(|h| !h.snippet.contains("subcommand")), "{hits:#?}");
}
