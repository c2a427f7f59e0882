//! The pack stage: one bundle that verifies against its manifest.

use atlas_e2e::{pipeline, run, write_config, write_fixture_site};
use atlas_runtime::manifest;

#[test]
fn the_bundle_verifies_and_a_flipped_byte_is_caught() {
    if !crate::embed::model_ready() {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site.path(), "stages:\n  pack:\n    version: 1.2.3\n");
    let r = run(pipeline().arg("-c").arg(&cfg).args(["run", "--archive"])).success();
    assert_eq!(r.stage("pack").0, "ran", "{}", r.stderr);
    let build = work.path().join(".atlas/build");
    let dir = build.join("bundle");
    let m = manifest::verify(&dir).unwrap();
    assert_eq!((m.name.as_str(), m.version.as_str(), m.format_version), ("test", "1.2.3", 1));
    assert_eq!(m.model.id, "all-minilm-l6-v2-int8");
    assert_eq!(m.model.dims, 384);
    assert_eq!(m.sources[0].files, 4);
    let paths: Vec<&str> = m.artifacts.iter().map(|a| a.path.as_str()).collect();
    for want in ["chunks.parquet", "embeddings.npy", "embeddings.json", "bm25.json", "mirror/site/guides/install.md"] {
        assert!(paths.contains(&want), "{want} in {paths:?}");
    }
    assert!(paths.iter().any(|p| p.starts_with("tantivy/")));
    // The archive and its checksum.
    let archive = build.join("test-1.2.3.tar.zst");
    let sum = std::fs::read_to_string(build.join("test-1.2.3.tar.zst.sha256")).unwrap();
    let bytes = std::fs::read(&archive).unwrap();
    use sha2::Digest as _;
    let hex: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(sum, format!("{hex}  test-1.2.3.tar.zst\n"));
    // A rebuild with nothing changed is all cached and leaves the bundle as it was.
    let again = run(pipeline().arg("-c").arg(&cfg).args(["run", "--archive"])).success();
    assert_eq!(again.stage("pack").0, "cached");
    assert_eq!(std::fs::read(&archive).unwrap(), bytes);

    // One flipped byte is caught, naming the file.
    let parquet = dir.join("chunks.parquet");
    let mut b = std::fs::read(&parquet).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x01;
    std::fs::write(&parquet, b).unwrap();
    let err = manifest::verify(&dir).unwrap_err().to_string();
    assert!(err.contains("chunks.parquet") && err.contains("does not match the manifest"), "{err}");
}

#[test]
fn a_newer_bundle_format_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let m = serde_json::json!({
        "format_version": 99, "name": "x", "version": "1", "created": "", "config_digest": "",
        "sources": [], "model": {"id": "m", "sha256": "", "dims": 1, "pooling": "mean"},
        "chunk_count": 0, "embedding_rows": 0, "artifacts": []
    });
    std::fs::write(dir.path().join("manifest.json"), m.to_string()).unwrap();
    let err = manifest::read_manifest(dir.path()).unwrap_err().to_string();
    assert!(err.contains("bundle format 99 is newer than this build reads"), "{err}");
}

#[test]
fn equal_inputs_give_a_byte_identical_bundle_but_for_created() {
    if !crate::embed::model_ready() {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    let build = || {
        let work = tempfile::tempdir().unwrap();
        let cfg = write_config(work.path(), site.path(), "");
        run(pipeline().arg("-c").arg(&cfg).arg("run")).success();
        let dir = work.path().join(".atlas/build/bundle");
        let mut files = std::collections::BTreeMap::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(&dir).unwrap().display().to_string();
                    let mut bytes = std::fs::read(&p).unwrap();
                    if rel == "manifest.json" {
                        let mut m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                        m["created"] = serde_json::Value::Null;
                        bytes = m.to_string().into_bytes();
                    }
                    files.insert(rel, bytes);
                }
            }
        }
        (work, files)
    };
    let (_a, first) = build();
    let (_b, second) = build();
    assert_eq!(first.keys().collect::<Vec<_>>(), second.keys().collect::<Vec<_>>());
    for (k, v) in &first {
        assert!(second[k] == *v, "{k} differs between two builds of the same inputs");
    }
}
