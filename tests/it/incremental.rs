//! Incremental rebuilds: a no-op run does no work, one changed page re-runs one item,
//! a changed param re-runs only its stage.

use std::path::Path;

use atlas_e2e::{copy_tree, pipeline, run, write_config, write_fixture_site};

fn chunks(out: &Path) -> Vec<atlas_runtime::chunk_table::ChunkRecord> {
    atlas_runtime::chunk_table::read_file(&out.join(".atlas/build/chunks.parquet")).expect("chunks.parquet")
}

/// The whole incremental story on a site; returns the page count.
fn incremental_story(site: &Path, page_to_edit: &str) -> usize {
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site, "");
    let run_until_chunk = || run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"]));

    let cold = run_until_chunk().success();
    let (outcome, pages, reused) = cold.stage("crawl");
    assert_eq!((outcome.as_str(), reused), ("ran", 0));
    assert_eq!(cold.stage("clean-gitbook"), ("ran".into(), pages, 0));
    assert_eq!(cold.stage("chunk"), ("ran".into(), pages, 0));
    let first = chunks(work.path());
    assert!(!first.is_empty());

    // A second run does no work.
    let noop = run_until_chunk().success();
    for stage in ["crawl", "clean-gitbook", "chunk"] {
        assert_eq!(noop.stage(stage), ("cached".into(), 0, pages), "{stage}: {}", noop.stderr);
    }
    let status = run(pipeline().arg("-c").arg(&cfg).arg("status")).success();
    assert_eq!(status.stdout.matches(" fresh").count(), 3, "{}", status.stdout);

    // One page changes: exactly that page is re-cleaned and re-chunked.
    let page = site.join(page_to_edit);
    let mut text = std::fs::read_to_string(&page).unwrap();
    text.push_str("\n\n## Added by the test\n\nA new section about flux capacitors.\n");
    std::fs::write(&page, text).unwrap();
    let status = run(pipeline().arg("-c").arg(&cfg).arg("status")).success();
    assert!(status.stdout.contains("crawl          stale: input source:site changed"), "{}", status.stdout);
    assert!(status.stdout.contains("chunk          stale: upstream clean-gitbook is not fresh"), "{}", status.stdout);
    let one = run_until_chunk().success();
    assert_eq!(one.stage("crawl").0, "ran");
    assert_eq!(one.stage("clean-gitbook"), ("ran".into(), 1, pages - 1), "{}", one.stderr);
    assert_eq!(one.stage("chunk"), ("ran".into(), 1, pages - 1), "{}", one.stderr);
    let after = chunks(work.path());
    assert!(after.iter().any(|c| c.text.contains("flux capacitors")));
    assert_eq!(after.len(), first.len() + 1);

    // A chunk param changes: chunk re-runs, clean stays cached.
    let cfg_text = std::fs::read_to_string(&cfg).unwrap() + "stages:\n  chunk:\n    overlap_chars: 100\n";
    std::fs::write(&cfg, cfg_text).unwrap();
    let status = run(pipeline().arg("-c").arg(&cfg).arg("status")).success();
    assert!(status.stdout.contains("clean-gitbook  fresh"), "{}", status.stdout);
    assert!(
        status.stdout.contains("chunk          stale: param chunk.overlap_chars changed (150 → 100)"),
        "{}",
        status.stdout
    );
    let param = run_until_chunk().success();
    assert_eq!(param.stage("crawl").0, "cached");
    assert_eq!(param.stage("clean-gitbook"), ("cached".into(), 0, pages));
    assert_eq!(param.stage("chunk"), ("ran".into(), pages, 0));
    pages
}

#[test]
fn incremental_runs_on_a_fixture_site() {
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    assert_eq!(incremental_story(site.path(), "guides/install.md"), 4);
}

#[test]
fn slow_incremental_runs_on_the_devtron_site() {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA") else {
        atlas_e2e::skip("ATLAS_CORPORA is unset (set it to ../shared/corpora)");
        return;
    };
    let site = tempfile::tempdir().unwrap();
    copy_tree(&Path::new(&corpora).join("devtron-docs/site"), site.path());
    assert_eq!(incremental_story(site.path(), "setup/install.md"), 199);
}

#[test]
fn outputs_carry_cleaned_mirror_report_and_chunks() {
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site.path(), "");
    run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
    let build = work.path().join(".atlas/build");
    let install = std::fs::read_to_string(build.join("mirror/site/guides/install.md")).unwrap();
    assert!(!install.contains("{%"), "{install}");
    assert!(install.contains("**macOS \\(arm64\\)**"), "{install}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(build.join("clean-report.json")).unwrap()).unwrap();
    assert_eq!(report["residual_gitbook"], 0);
    assert_eq!(report["totals"]["hint"], 1);
    assert_eq!(report["per_file"]["site/guides/configure.md"]["counts"]["html-table"], 1);

    let chunks = chunks(work.path());
    let readme: Vec<_> = chunks.iter().filter(|c| c.path == "site/README.md").collect();
    assert_eq!(readme[0].title, "Fixture Docs");
    assert_eq!(readme[0].description.as_deref(), Some("A tiny site."));
    let api = chunks.iter().find(|c| c.heading_path.last().is_some_and(|h| h == "GET /apps")).expect("api chunk");
    assert_eq!(api.section, "reference");
    assert_eq!(api.heading_path, ["API", "GET /apps"]);
    let helm = chunks.iter().find(|c| c.heading_path.last().is_some_and(|h| h == "With Helm")).unwrap();
    assert!(helm.is_code);
    assert_eq!(helm.cluster_tags, "configure");
    // Citations: the line range points into the mirrored file.
    let mirror_lines: Vec<&str> = install.lines().collect();
    let cited = mirror_lines[helm.start_line as usize - 1..helm.end_line as usize].join("\n");
    assert_eq!(&helm.text[helm.overlap_chars as usize..], cited);

    // A page that goes away leaves the mirror too.
    std::fs::remove_file(site.path().join("reference/api.md")).unwrap();
    run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
    assert!(!build.join("mirror/site/reference/api.md").exists());
}

#[test]
fn summary_table_snapshot() {
    let site = tempfile::tempdir().unwrap();
    write_fixture_site(site.path());
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site.path(), "");
    run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
    let second = run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
    insta::with_settings!({filters => vec![
        (r" +\d+(\.\d+)?m?s\b", " [TIME]"),
        (r"/[^\s]*/\.atlas/build", "[OUT]"),
    ]}, {
        insta::assert_snapshot!(second.stderr);
    });
}

#[test]
fn code_chunks_and_docs_code_cross_links() {
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("src")).unwrap();
    std::fs::write(
        site.path().join("guide.md"),
        "# Guide\n\n## Saving\n\nCall `Model.dump_dict()` to save, or `load_dict` to restore.\n\n## Other\n\nNothing about code here: dump_dict in prose is not a mention.\n",
    )
    .unwrap();
    std::fs::write(
        site.path().join("src/model.py"),
        "# Copyright 2024 Example. Licensed under the MIT License.\n\nclass Model:\n    def dump_dict(self):\n        return {}\n\n    def load_dict(self, d):\n        return Model()\n",
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site.path(), "    include: [\"**/*.md\", \"**/*.py\"]\n");
    let r = run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
    assert!(r.stderr.contains("dropped 1 licence-header line in 1 file"), "{}", r.stderr);
    let all = chunks(work.path());
    let code: Vec<_> = all.iter().filter(|c| c.kind == atlas_runtime::ChunkKind::Code).collect();
    assert_eq!(code.len(), 1, "a small class is one chunk");
    let model = code[0];
    assert_eq!(model.symbol.as_deref(), Some("Model"));
    assert_eq!(model.symbol_kind.as_deref(), Some("class"));
    assert_eq!(model.signature.as_deref(), Some("class Model:"));
    assert_eq!(model.symbols, ["Model.dump_dict", "Model.load_dict"]);
    assert_eq!((model.start_line, model.end_line), (3, 8));
    let saving = all.iter().find(|c| c.heading_path.last().is_some_and(|h| h == "Saving")).unwrap();
    assert_eq!(saving.mentions, ["Model.dump_dict", "load_dict"]);
    assert_eq!(model.mentioned_in, std::slice::from_ref(&saving.chunk_id));
    let other = all.iter().find(|c| c.heading_path.last().is_some_and(|h| h == "Other")).unwrap();
    assert!(other.mentions.is_empty());
}
