//! Package sources (`kind: package`): a crate at an exact version from the registry
//! cargo is configured for (here cargo's source replacement, pointing at a local sparse
//! registry serving the real `.crate` files of the local cargo cache), built into a
//! bundle and searched by symbol; and the bad inputs, each one line that leaves
//! nothing behind: an unknown crate, an unpublished version, a yanked one, a download
//! whose checksum differs.

use std::path::Path;
use std::process::Command;

use atlas_e2e::registry::{Published, cached_crate, cargo_home, sparse_registry};
use atlas_e2e::{bin, pipeline, run, skip};

fn pipeline_yaml(work: &Path, spec: &str) {
    std::fs::write(
        work.join("pipeline.yaml"),
        format!("name: dep\nsources:\n  itoa:\n    kind: package\n    spec: \"{spec}\"\n"),
    )
    .unwrap();
}

fn build(work: &Path, home: &Path) -> atlas_e2e::Run {
    run(pipeline().current_dir(work).env("CARGO_HOME", home).args(["run"]))
}

#[test]
fn a_crate_from_cargos_registry_is_built_at_its_exact_version_and_bad_specs_are_one_line() {
    if !crate::embed::model_ready() {
        return;
    }
    let Some((version, file)) = cached_crate("itoa") else {
        return skip("no itoa .crate in the local cargo cache (build the workspace once)");
    };
    let bytes = std::fs::read(&file).unwrap();
    let t = tempfile::tempdir().unwrap();
    let mut yanked = Published::real("itoa", "0.9.0", b"never served".to_vec());
    yanked.yanked = true;
    let older = Published { bytes: None, ..Published::real("itoa", "0.4.8", vec![]) };
    let registry = sparse_registry(vec![older, yanked, Published::real("itoa", &version, bytes.clone())], |_, b| b);
    let home = cargo_home(t.path(), &registry);
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();

    pipeline_yaml(&work, &format!("crate:itoa@{version}"));
    let r = build(&work, &home).success();
    assert_eq!(registry.hits(&format!("/dl/itoa/{version}/download")), [200], "{}", r.stderr);
    let bundle = work.join(".atlas/build/bundle");
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["sources"][0]["kind"], "package");
    assert_eq!(m["sources"][0]["url"], format!("crate:itoa@{version}"));
    // Its sources and README, not its tests or benches.
    let mirror = bundle.join("mirror/itoa");
    assert!(mirror.join("src/lib.rs").is_file() && mirror.join("README.md").is_file());
    assert!(!mirror.join("tests").exists() && !mirror.join("benches").exists());
    let s = run(Command::new(bin("atlas")).args(["search", "--symbol", "Buffer", "--json", "--bundle"]).arg(&bundle))
        .success();
    let v: serde_json::Value = serde_json::from_str(&s.stdout).unwrap();
    assert!(
        v["definitions"].as_array().unwrap().iter().any(|d| d["path"] == "itoa/src/lib.rs" && d["kind"] == "struct"),
        "{v}"
    );
    // A second run reuses the artifact: no second download; offline works too.
    build(&work, &home).success();
    run(pipeline().current_dir(&work).env("CARGO_HOME", &home).args(["run", "--offline"])).success();
    assert_eq!(registry.hits(&format!("/dl/itoa/{version}/download")).len(), 1);

    // Each bad spec: exit non-zero, one line that names the fix, and the bundle as it was.
    let before = std::fs::read(bundle.join("manifest.json")).unwrap();
    let fresh = |n: &str| {
        let w = t.path().join(n);
        std::fs::create_dir_all(&w).unwrap();
        w
    };
    for (name, spec, needle) in [
        ("unknown", "crate:itoa@9.9.9".to_owned(), "is not published; the nearest are"),
        ("yanked", "crate:itoa@0.9.0".to_owned(), "was yanked"),
        ("nocrate", format!("crate:nosuchcrate@{version}"), "no crate \"nosuchcrate\""),
        ("npm", "npm:zod@3.23.8".to_owned(), "not supported yet"),
        ("range", "crate:itoa@^1".to_owned(), "not an exact version"),
    ] {
        let w = fresh(name);
        pipeline_yaml(&w, &spec);
        let r = build(&w, &home);
        assert_ne!(r.code, Some(0), "{name}: {r:?}");
        let last = r.stderr.trim().lines().last().unwrap_or_default();
        assert!(last.contains(needle), "{name}: {last}\n{}", r.stderr);
        assert!(!w.join(".atlas/build/bundle").exists(), "{name}: nothing built");
    }
    // A mirror that serves other bytes under the same checksum: refused, nothing used.
    let tampered = sparse_registry(vec![Published::real("itoa", &version, bytes)], |_, mut b| {
        let mid = b.len() / 2;
        b[mid] ^= 1;
        b
    });
    let w = fresh("tampered");
    pipeline_yaml(&w, &format!("crate:itoa@{version}"));
    let r = build(&w, &cargo_home(&w, &tampered));
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("the download's sha256 is") && r.stderr.contains("nothing was used"), "{}", r.stderr);
    assert_eq!(std::fs::read(bundle.join("manifest.json")).unwrap(), before);
}
