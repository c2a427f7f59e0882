//! Dependencies go one way in every crate: no two top-level modules of a crate name
//! each other, directly or around a circle (read from the source by
//! `atlas_e2e::layout`). `stages/tests/it/layout.rs` adds the stage rules.

use std::path::Path;

/// Every crate's source folder, relative to the workspace root.
const CRATES: &[&str] = &[
    "cache/src",
    "stages/src",
    "runtime/src",
    "runtime/dist/src",
    "runtime/grammar/src",
    "servers/src",
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
