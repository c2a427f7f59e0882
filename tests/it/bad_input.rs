//! Bad input: a one-line error naming the file, line or key; exit code 2; nothing
//! written to the cache.

use std::path::Path;

use atlas_e2e::{pipeline, run, write_fixture_site};

/// Runs `atlas-pipeline -c <config> <args>` in a fresh folder and checks the contract.
fn check(config: Option<&str>, args: &[&str], expect_in_error: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    write_fixture_site(&site);
    let cfg = work.path().join("pipeline.yaml");
    if let Some(text) = config {
        std::fs::write(&cfg, text.replace("SITE", &site.display().to_string())).unwrap();
    }
    let r = run(pipeline().current_dir(work.path()).arg("-c").arg(&cfg).args(args));
    assert_eq!(r.code, Some(2), "exit code 2 for {expect_in_error:?}; stderr:\n{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", r.stderr);
    assert!(lines[0].starts_with("error: "), "{}", lines[0]);
    for needle in expect_in_error {
        assert!(lines[0].contains(needle), "{needle:?} in {:?}", lines[0]);
    }
    assert!(r.stdout.is_empty());
    assert!(!work.path().join(".atlas").exists(), "nothing written: {:?}", list(work.path()));
}

fn list(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

const GOOD: &str = "name: t\nsources:\n  site:\n    kind: local\n    path: SITE\n";

#[test]
fn missing_config() {
    check(None, &["run"], &["pipeline.yaml", "config file not found", "--config"]);
}

#[test]
fn yaml_syntax_error() {
    check(Some("name: t\nsources:\n  site: [unclosed\n"), &["run"], &["pipeline.yaml:3:", "unclosed"]);
}

#[test]
fn unknown_stage_in_until() {
    check(
        Some(GOOD),
        &["run", "--until", "chunkk"],
        &["--until chunkk", "unknown stage", "crawl, clean-gitbook, chunk"],
    );
}

#[test]
fn unknown_key() {
    check(Some(&format!("{GOOD}    colour: red\n")), &["run"], &["pipeline.yaml:6:5:", "unknown field `colour`"]);
}

#[test]
fn unknown_kind() {
    check(
        Some("name: t\nsources:\n  site:\n    kind: ftp\n"),
        &["run"],
        &["pipeline.yaml:4:", "unknown variant `ftp`"],
    );
}

#[test]
fn unknown_stage_in_config() {
    check(
        Some(&format!("{GOOD}stages:\n  embedd:\n    batch: 3\n")),
        &["run"],
        &["pipeline.yaml:7:3:", "unknown field `embedd`"],
    );
}

#[test]
fn unknown_stage_param() {
    check(
        Some(&format!("{GOOD}stages:\n  chunk:\n    overlap: 3\n")),
        &["run"],
        &["pipeline.yaml:8:5:", "unknown field `overlap`", "overlap_chars"],
    );
}

#[test]
fn missing_source_path() {
    check(
        Some("name: t\nsources:\n  site:\n    kind: local\n    path: no/such/folder\n"),
        &["run"],
        &["pipeline.yaml:5:", "sources.site.path", "no/such/folder", "is not a folder"],
    );
}

#[test]
fn llms_txt_url_that_is_not_http() {
    check(
        Some("name: t\nsources:\n  docs:\n    kind: llms-txt\n    url: ftp://docs.example.com/llms.txt\n"),
        &["run"],
        &["pipeline.yaml:5:", "sources.docs.url", "not an http(s) URL"],
    );
}

#[test]
fn unknown_embedding_model() {
    check(
        Some(&format!("{GOOD}stages:\n  embed:\n    model: no-such-model\n")),
        &["run"],
        &["pipeline.yaml:8:", "stages.embed.model", "no-such-model", "all-minilm-l6-v2-int8"],
    );
}

#[test]
fn unknown_bm25_boost_field() {
    check(
        Some(&format!("{GOOD}stages:\n  bm25:\n    boosts:\n      body: 2.0\n")),
        &["run"],
        &["pipeline.yaml:9:", "stages.bm25.boosts", "\"body\"", "text, title, heading, file_path, symbol"],
    );
}
