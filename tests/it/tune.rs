//! The tune stage's query map: mined pairs never name their answer, a bundle with a
//! map and one without both serve, and a hostile map is refused with one line.

use std::path::{Path, PathBuf};

use atlas_e2e::{bin, pipeline, run, write_config};
use atlas_runtime::query_map::{self, QueryMap};
use atlas_runtime::{Bundle, Mode, OpenOptions, SearchOptions};
use serde_json::{Value, json};

fn edit_manifest(dir: &Path, f: impl FnOnce(&mut Value)) {
    let p = dir.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    f(&mut m);
    std::fs::write(&p, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

/// A copy of `from` in `dir` that ships `map` (as bytes) as its query map, listed with
/// its hashes and a `tune` block, as the pack stage writes it.
fn with_map(from: &Path, dir: &Path, bytes: &[u8]) -> PathBuf {
    let to = dir.join("bundle");
    std::fs::create_dir_all(&to).unwrap();
    atlas_e2e::copy_tree(from, &to);
    std::fs::write(to.join(query_map::FILE), bytes).unwrap();
    let a = serde_json::to_value(atlas_runtime::manifest::Artifact::of(query_map::FILE, bytes)).unwrap();
    edit_manifest(&to, |m| {
        m["artifacts"].as_array_mut().unwrap().push(a);
        m["tune"] = json!({
            "file": query_map::FILE, "rank": 8, "pairs": {"heading": 90}, "held_out": 9, "seed": 7,
            "epochs": 3, "held_out_mrr_before": 0.5, "held_out_mrr_after": 0.6
        });
    });
    to
}

/// A small map that moves queries (rank 8, fixed values).
fn some_map(dims: usize) -> QueryMap {
    let mut m = QueryMap::identity(dims, 8);
    for (i, x) in m.a.iter_mut().chain(m.b.iter_mut()).enumerate() {
        *x = (i * 7919 % 1000) as f32 / 1000.0 - 0.5;
    }
    m
}

fn vector(b: &Bundle, q: &str) -> Vec<atlas_runtime::Hit> {
    b.search(q, &SearchOptions { mode: Mode::Vector, top_k: 5, ..SearchOptions::default() }).unwrap()
}

#[test]
fn an_adapted_bundle_and_an_unadapted_one_both_serve() {
    let Some(plain) = crate::search::fixture_bundle() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dims = Bundle::open(plain, OpenOptions::default()).unwrap().manifest.model.dims;
    let adapted = with_map(plain, tmp.path(), &some_map(dims).to_bytes());
    run(std::process::Command::new(bin("atlas")).arg("verify").arg(&adapted)).success();
    let (a, p) =
        (Bundle::open(&adapted, OpenOptions::default()).unwrap(), Bundle::open(plain, OpenOptions::default()).unwrap());
    assert!(a.query_map().is_some() && p.query_map().is_none());
    for q in ["helm repo add", "how many pods run"] {
        let (ha, hp) = (vector(&a, q), vector(&p, q));
        assert!(!ha.is_empty() && !hp.is_empty(), "{q}");
        // The map moved the query: the same chunks score differently.
        assert_ne!(ha.iter().map(|h| h.score).collect::<Vec<_>>(), hp.iter().map(|h| h.score).collect::<Vec<_>>());
    }
    // Hybrid and the command line serve it too.
    let hits = a.search("helm repo add", &SearchOptions::default()).unwrap();
    assert_eq!(hits[0].path, "site/guides/install.md");
    let r = run(std::process::Command::new(bin("atlas")).args(["search", "helm repo add", "--bundle"]).arg(&adapted))
        .success();
    assert!(r.stdout.contains("site/guides/install.md#L"), "{}", r.stdout);
}

#[test]
fn a_hostile_query_map_is_refused_with_one_line() {
    let Some(plain) = crate::search::fixture_bundle() else { return };
    let dims = Bundle::open(plain, OpenOptions::default()).unwrap().manifest.model.dims;
    let good = some_map(dims).to_bytes();
    let mut nan = good.clone();
    nan[16..20].copy_from_slice(&f32::NAN.to_le_bytes());
    let mut huge_rank = good.clone();
    huge_rank[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut huge = good.clone();
    huge.extend(std::iter::repeat_n(0u8, 8 << 20));
    let cases: [(&str, Vec<u8>, &str); 5] = [
        ("wrong shape", some_map(dims / 2).to_bytes(), "-dimensional queries"),
        ("NaN", nan, "NaN"),
        ("huge rank", huge_rank, "rank"),
        ("huge file", huge, "bytes"),
        ("not a map", b"{\"hello\": 1}".to_vec(), "ATQM"),
    ];
    for (what, bytes, says) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let b = with_map(plain, tmp.path(), &bytes);
        let e = Bundle::open(&b, OpenOptions::default()).unwrap_err().to_string();
        assert!(e.contains(query_map::FILE) && e.contains(says) && !e.contains('\n'), "{what}: {e}");
        let r = run(std::process::Command::new(bin("atlas")).args(["search", "helm", "--bundle"]).arg(&b));
        assert_ne!(r.code, Some(0), "{what}: {}", r.stdout);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{what}: {}", r.stderr);
        assert!(r.stderr.contains(query_map::FILE), "{what}: {}", r.stderr);
    }
    // A manifest that names a map it does not list.
    let tmp = tempfile::tempdir().unwrap();
    let b = with_map(plain, tmp.path(), &good);
    edit_manifest(&b, |m| m["artifacts"].as_array_mut().unwrap().retain(|a| a["path"] != query_map::FILE));
    let e = Bundle::open(&b, OpenOptions::default()).unwrap_err().to_string();
    assert!(e.contains(query_map::FILE) && !e.contains('\n'), "{e}");
}

/// On the real code corpora: no question side holds a name of its answer (the
/// chunk's symbol, its parts, its items), and every kind of pair is mined.
#[test]
fn mined_pairs_never_name_their_answer() {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA") else {
        atlas_e2e::skip("ATLAS_CORPORA is unset (set it to ../shared/corpora)");
        return;
    };
    let corpora = PathBuf::from(corpora);
    for corpus in ["tfhe-rs/repo", "concrete-ml/repo", "devtron-docs/site"] {
        let work = tempfile::tempdir().unwrap();
        let cfg = write_config(work.path(), &corpora.join(corpus), "");
        run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
        let chunks = atlas_runtime::chunk_table::read_file(&work.path().join(".atlas/build/chunks.parquet")).unwrap();
        let pairs = atlas_stages::tune::pairs::mine(&chunks);
        let counts = atlas_stages::tune::pairs::counts(&pairs);
        assert!(pairs.len() >= 50, "{corpus}: {counts:?}");
        if corpus.ends_with("repo") {
            assert!(counts.get("doc_comment").copied().unwrap_or(0) >= 20, "{corpus}: {counts:?}");
        }
        for p in &pairs {
            let ids = atlas_stages::tune::pairs::identifiers(&chunks[p.chunk]);
            let words: Vec<String> = p
                .question
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect();
            for id in &ids {
                assert!(!words.contains(id), "{corpus}: {:?} names {id} of its answer", p.question);
            }
            assert!(!p.question.contains('`'), "{corpus}: {:?}", p.question);
        }
    }
}
