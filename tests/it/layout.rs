//! Dependencies go one way in every crate: no two top-level modules of a crate name
//! each other, directly or around a circle (read from the source by
//! `atlas_e2e::layout`). `stages/tests/it/layout.rs` adds the stage rules.

use std::path::Path;

/// Every crate's source folder, relative to the workspace root.
const CRATES: &[&str] = &[
    "cache/src",
    "stages/src",
    "runtime/src",
    "runtime/distribution/src",
    "runtime/grammar/src",
    "servers/src",
    "servers/mcp/src",
    "servers/pg/src",
    "xtask/src",
    "tests",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root")
}

#[test]
fn no_crate_has_modules_that_import_each_other_in_a_circle() {
    let circles: Vec<String> = CRATES
        .iter()
        .filter_map(|c| atlas_e2e::layout::first_circle(&root().join(c)).map(|circle| format!("{c}: {circle}")))
        .collect();
    assert!(circles.is_empty(), "modules import each other in a circle:\n{}", circles.join("\n"));
}

/// The code map names every source file: in ARCHITECTURE.md's section of its crate,
/// each file appears by its name (`site.rs`), a folder module by its folder (`crawl/`);
/// `lib.rs` and `main.rs` are the crate's heading.
#[test]
fn every_source_file_is_named_in_the_code_map() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut missing = Vec::new();
    for c in CRATES {
        let dir = c.trim_end_matches("/src");
        let heading = format!("### `{dir}/`");
        let at = map.find(&heading).unwrap_or_else(|| panic!("ARCHITECTURE.md has no section {heading}"));
        let rest = &map[at + heading.len()..];
        let section = &rest[..rest.find("\n#").unwrap_or(rest.len())];
        let src = root().join(c);
        for f in atlas_e2e::layout::rust_files(&src) {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            if rel.starts_with("it/") || rel.starts_with("bench/") || rel == "lib.rs" || rel == "main.rs" {
                continue; // the crate root (its heading), and tests' own files (their folders)
            }
            let file = rel.rsplit('/').next().unwrap_or(&rel);
            let name = match (file, rel.rsplit_once('/')) {
                ("mod.rs", Some((folder, _))) => format!("{}/", folder.rsplit('/').next().unwrap_or(folder)),
                _ => file.to_owned(),
            };
            if !section.contains(&name) {
                missing.push(format!("{c}/{rel} (as `{name}` in {heading})"));
            }
        }
    }
    assert!(missing.is_empty(), "not in ARCHITECTURE.md's code map:\n{}", missing.join("\n"));
}

/// ARCHITECTURE.md stays a map: detail lives in docs/ (round-4 hardening brought it
/// back from 26.6 KB).
#[test]
fn the_architecture_map_stays_under_24_kb() {
    let len = std::fs::metadata(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md").len();
    assert!(len < 24_000, "ARCHITECTURE.md is {len} bytes: move detail to docs/ and keep it a map");
}

/// Product code hashes through the two hash modules only: `runtime::hash` (sha256,
/// sha512 and blake3 of bytes, files and fields) and the cache's `digest` (its object
/// names and memo keys).
#[test]
fn product_code_hashes_through_the_two_hash_modules() {
    let allowed = ["runtime/src/hash.rs", "cache/src/digest.rs"];
    let mut found = Vec::new();
    for c in CRATES.iter().filter(|c| !c.starts_with("tests") && !c.starts_with("xtask")) {
        for f in atlas_e2e::layout::rust_files(&root().join(c)) {
            let rel = f.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/");
            if allowed.contains(&rel.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            for (n, line) in text.lines().enumerate() {
                if ["blake3::", "sha2::", "use blake3", "use sha2"].iter().any(|p| line.contains(p)) {
                    found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "hashing outside runtime::hash and the cache's digest:\n{}", found.join("\n"));
}

/// The crates' own dependencies (`[dependencies]`, not dev or build), by package name.
fn product_dependencies() -> std::collections::BTreeMap<String, Vec<String>> {
    let mut graph = std::collections::BTreeMap::new();
    for c in CRATES.iter().filter(|c| c.ends_with("/src")) {
        let manifest = root().join(c.trim_end_matches("/src")).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{} names no package", manifest.display()));
        let mut section = "";
        let mut deps = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
            } else if section == "[dependencies]" && line.starts_with("atlas-") {
                deps.push(line.split(['.', ' ', '=']).next().unwrap_or(line).to_owned());
            }
        }
        graph.insert(name.to_owned(), deps);
    }
    graph
}

/// Every crate `name` depends on, directly or through another.
fn reaches(graph: &std::collections::BTreeMap<String, Vec<String>>, name: &str) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![name.to_owned()];
    while let Some(n) = todo.pop() {
        for d in graph.get(&n).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

/// The crate boundaries (ARCHITECTURE.md): the MCP servers know neither PostgreSQL nor
/// the `atlas` command (and so not its web page); the PostgreSQL crate knows no MCP;
/// the runtime, the pipeline and the cache depend on no server crate.
#[test]
fn the_crates_depend_on_each_other_one_way() {
    let graph = product_dependencies();
    let servers = ["atlas-cli", "atlas-mcp", "atlas-pg"];
    let rules: &[(&str, &[&str])] = &[
        ("atlas-mcp", &["atlas-pg", "atlas-cli", "atlas-stages"]),
        ("atlas-pg", &["atlas-mcp", "atlas-cli", "atlas-stages"]),
        ("atlas-runtime", &servers),
        ("atlas-dist", &servers),
        ("atlas-grammar", &servers),
        ("atlas-cache", &servers),
        ("atlas-stages", &servers),
    ];
    let mut wrong = Vec::new();
    for (krate, never) in rules {
        assert!(graph.contains_key(*krate), "no crate {krate} among {:?}", graph.keys());
        let deps = reaches(&graph, krate);
        wrong.extend(never.iter().filter(|n| deps.contains(**n)).map(|n| format!("{krate} depends on {n}")));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Protocol types stay in the crate that speaks the protocol (as rust-analyzer keeps
/// LSP types out of its core): the runtime derives no JSON Schema and knows no MCP;
/// the MCP crate gives the wire shape of the runtime types it sends.
#[test]
fn protocol_types_live_in_the_mcp_crate() {
    let manifest = std::fs::read_to_string(root().join("runtime/Cargo.toml")).unwrap();
    let mut section = "";
    let mut wrong = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]" && ["schemars", "rmcp"].iter().any(|p| line.starts_with(p)) {
            wrong.push(line.to_owned());
        }
    }
    assert!(wrong.is_empty(), "runtime depends on a protocol crate: {wrong:?}");
    for file in atlas_e2e::layout::rust_files(&root().join("runtime/src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("JsonSchema"), "{} derives a protocol schema", file.display());
    }
}
