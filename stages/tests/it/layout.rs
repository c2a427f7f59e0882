//! The crate's module layout is its architecture: dependencies go one way.
//!
//! Read from the source: every `crate::<module>` path outside comments, grouped by the
//! top-level module of the file it is written in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One module per stage.
const STAGES: &[&str] = &["crawl", "clean", "chunk", "embed", "tune", "bm25", "pack"];
/// What a stage module may use besides itself.
const STAGE_MAY_USE: &[&str] = &["runner", "artifacts", "text"];

/// `file's top-level module` → the top-level modules it names, with one example path.
fn uses() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut todo = vec![src.clone()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            let top = rel.split('/').next().unwrap().trim_end_matches(".rs").to_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let entry = out.entry(top.clone()).or_default();
            for line in text.lines() {
                let code = line.split("//").next().unwrap_or_default();
                for (i, _) in code.match_indices("crate::") {
                    let rest = &code[i + "crate::".len()..];
                    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    let path: String =
                        rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
                    if !name.is_empty() && name != top && !code[..i].ends_with("atlas_") {
                        entry.entry(name).or_insert(format!("{rel}: crate::{path}"));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn stage_modules_use_the_runner_api_and_no_other_stage() {
    for (module, used) in uses().iter().filter(|(m, _)| STAGES.contains(&m.as_str())) {
        for (name, example) in used {
            assert!(
                STAGE_MAY_USE.contains(&name.as_str()),
                "stage module {module} uses crate::{name} ({example}); a stage may use only {STAGE_MAY_USE:?}: \
                 read another stage's output through ctx.input::<Manifest>(name) and crate::artifacts"
            );
            // The runner's API is what `runner` re-exports, and its `stage` module; not
            // the config's, the DAG's or the outputs' internals.
            assert!(
                !["runner::config", "runner::dag", "runner::outputs"].iter().any(|p| example.contains(p)),
                "stage module {module} reaches into the runner's internals: {example}"
            );
        }
    }
}

#[test]
fn the_runner_artifacts_and_text_use_no_stage() {
    for (module, used) in uses().iter().filter(|(m, _)| ["runner", "artifacts", "text"].contains(&m.as_str())) {
        for (name, example) in used {
            assert!(
                !STAGES.contains(&name.as_str()) && name != "registry" && name != "cli",
                "{module} uses crate::{name} ({example}); the runner and the shared modules know no stage"
            );
        }
    }
}

#[test]
fn no_module_imports_in_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> =
        uses().into_iter().map(|(m, used)| (m, used.into_keys().collect())).collect();
    // Depth-first search for a back edge.
    fn visit(m: &str, graph: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if let Some(at) = path.iter().position(|p| p == m) {
            panic!("modules import each other in a circle: {} → {m}", path[at..].join(" → "));
        }
        if done.contains(m) {
            return;
        }
        path.push(m.to_owned());
        for next in graph.get(m).into_iter().flatten() {
            visit(next, graph, path, done);
        }
        path.pop();
        done.insert(m.to_owned());
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        visit(m, &graph, &mut Vec::new(), &mut done);
    }
}

/// Inside a folder module, the files (siblings; `mod.rs` is their parent) import no
/// one another in a circle either: `super::x` and `crate::<folder>::x` paths.
#[test]
fn no_sibling_files_import_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for folder in std::fs::read_dir(&src).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()) {
        let name = folder.file_name().unwrap().to_string_lossy().into_owned();
        let files: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .filter(|s| s != "mod")
            .collect();
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for f in &files {
            let text = std::fs::read_to_string(folder.join(format!("{f}.rs"))).unwrap();
            let code: String = text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect();
            let prefix = format!("crate::{name}::");
            for start in ["super::", prefix.as_str()] {
                for (i, _) in code.match_indices(start) {
                    for other in first_segments(&code[i + start.len()..]) {
                        if files.contains(&other) && other != *f {
                            graph.entry(f.clone()).or_default().insert(other);
                        }
                    }
                }
            }
        }
        for (a, targets) in &graph {
            for b in targets {
                assert!(
                    !graph.get(b).is_some_and(|t| t.contains(a)),
                    "{name}/{a}.rs and {name}/{b}.rs import each other"
                );
            }
        }
    }
}

/// The first segment of each path at the start of `rest`: `a::b` → `a`; `{a, b::c}` → `a`, `b`.
fn first_segments(rest: &str) -> Vec<String> {
    let ident =
        |s: &str| -> String { s.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    match rest.strip_prefix('{') {
        Some(list) => list.split('}').next().unwrap_or_default().split(',').map(ident).collect(),
        None => vec![ident(rest)],
    }
}

#[test]
fn each_stage_is_one_module_and_there_is_no_builtin() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for stage in STAGES {
        assert!(
            src.join(format!("{stage}.rs")).is_file() != src.join(stage).join("mod.rs").is_file(),
            "stage {stage} is one module: src/{stage}.rs or src/{stage}/mod.rs"
        );
    }
    assert!(!src.join("builtin.rs").exists() && !src.join("builtin").exists());
}
