//! Doc formats end to end (issue 70 item 2): a local source with one page each of
//! reStructuredText, AsciiDoc, MDX and a Jupyter notebook, taken by the default
//! include globs, is built and searched; each page's chunks are docs with heading
//! paths, cited by the file's own lines (the notebook's by its cleaned text, whose
//! `<!-- cell N -->` lines name the cells). A broken notebook and a page nested too deep
//! get a one-line note each, and the rest of the source still builds.

use atlas_e2e::run;
use atlas_runtime::search::Filters;
use atlas_runtime::{Bundle, ChunkKind, Mode, OpenOptions, SearchOptions};

const RST: &str = "\
Frobnicator
===========

.. _tuning:

Tuning the flux capacitor
-------------------------

Set the quantum dampening ratio before calling :func:`frob`::

    frob(ratio=0.5)
";

const ADOC: &str = "\
= Gearbox Manual

== Lubrication schedule

NOTE: Grease the sprocket axle every fortnight with lithium paste.
";

const MDX: &str = "\
import { Callout } from './callout';

# Widget Theming

<Callout type=\"tip\">
Override the chartreuse palette through the theme provider.
</Callout>
";

const NOTEBOOK: &str = r##"{"cells": [
  {"cell_type": "markdown", "source": ["# Regression walkthrough\n", "\n", "Fit a heteroscedastic model."]},
  {"cell_type": "code", "source": ["model = fit_heteroscedastic(data)"], "outputs": []}
 ], "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4}"##;

#[test]
fn each_doc_format_is_built_and_searched_as_docs() {
    let work = tempfile::tempdir().unwrap();
    let deep: String = (0..2000).map(|i| if i % 2 == 0 { "====\n" } else { "****\n" }).collect();
    let files = [
        ("docs/frob.rst", RST.to_owned()),
        ("docs/gearbox.adoc", ADOC.to_owned()),
        ("docs/theming.mdx", MDX.to_owned()),
        ("docs/walkthrough.ipynb", NOTEBOOK.to_owned()),
        ("docs/broken.ipynb", "{\"cells\": [".to_owned()),
        ("docs/deep.adoc", format!("= Deep\n\n{deep}")),
    ];
    for (rel, text) in &files {
        let p = work.path().join("src").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(&cfg, "name: formats\nsources:\n  pkg:\n    kind: local\n    path: src\n").unwrap();
    let r = run(atlas_e2e::pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let log = format!("{}{}", r.stdout, r.stderr);
    assert!(log.contains("not notebook JSON, left out: 1 page (pkg/docs/broken.ipynb)"), "{log}");
    assert!(log.contains("blocks nested past 8 levels, kept as text: 1 page (pkg/docs/deep.adoc)"), "{log}");

    let b = Bundle::open(&work.path().join(".atlas/build/bundle"), OpenOptions::default()).unwrap();
    let docs = Filters { kind: Some(ChunkKind::Docs), ..Filters::default() };
    for (q, path, heading, cite) in [
        ("quantum dampening ratio", "pkg/docs/frob.rst", "Frobnicator > Tuning the flux capacitor", "#L1-L12"),
        ("grease sprocket axle lithium", "pkg/docs/gearbox.adoc", "Gearbox Manual > Lubrication schedule", "#L1-L5"),
        ("chartreuse palette theme provider", "pkg/docs/theming.mdx", "Widget Theming", "#L3-L6"),
        ("heteroscedastic model", "pkg/docs/walkthrough.ipynb", "Regression walkthrough", "#L1-L9"),
    ] {
        let opts = SearchOptions { mode: Mode::Keyword, top_k: 5, filters: docs.clone(), ..SearchOptions::default() };
        let hits = b.search(q, &opts).unwrap();
        let first = hits.first().unwrap_or_else(|| panic!("{q}: no hits"));
        assert_eq!(first.path, path, "{q}: {hits:#?}");
        assert_eq!(first.heading_path.join(" > "), heading, "{q}");
        assert_eq!(first.citation(), format!("{path}{cite}"), "{q}");
    }
}

/// The issue's "Packages" figure over a build folder (ATLAS_DOC_FORMATS_BUILD, built
/// from extracted packages, one local source each): per source, the doc files in a
/// supported format (every file in `mirror/`) and how many became docs chunks, now and
/// before issue 70 (when only markdown did). A measurement, not a check: run with
/// `--ignored`.
#[test]
#[ignore = "a measurement over packages ATLAS_DOC_FORMATS_BUILD names; run with --ignored"]
fn doc_files_that_become_chunks() {
    let Some(build) = std::env::var_os("ATLAS_DOC_FORMATS_BUILD") else {
        return atlas_e2e::skip("ATLAS_DOC_FORMATS_BUILD is not set");
    };
    let build = std::path::PathBuf::from(build);
    let chunks = atlas_runtime::chunk_table::read_file(&build.join("chunks.parquet")).unwrap();
    let chunked: std::collections::BTreeSet<&str> =
        chunks.iter().filter(|c| c.kind == ChunkKind::Docs).map(|c| c.path.as_str()).collect();
    eprintln!("| source | doc files | bytes | chunked before | after | bytes before | after |");
    eprintln!("|---|---|---|---|---|---|---|");
    let mut sources: Vec<_> = std::fs::read_dir(build.join("mirror")).unwrap().map(|e| e.unwrap().path()).collect();
    sources.sort();
    for dir in sources {
        let source = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (mut files, mut bytes, mut before, mut after, mut bytes_before, mut bytes_after) = (0, 0, 0, 0, 0, 0);
        let mut todo = vec![dir.clone()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    todo.push(p);
                    continue;
                }
                let rel = p.strip_prefix(&dir).unwrap().to_string_lossy().replace('\\', "/");
                let Some(format) = atlas_stages::text::doc_format(&rel) else { continue };
                let size = std::fs::metadata(&p).unwrap().len();
                files += 1;
                bytes += size;
                if chunked.contains(format!("{source}/{rel}").as_str()) {
                    after += 1;
                    bytes_after += size;
                    if format == atlas_stages::text::DocFormat::Markdown {
                        before += 1;
                        bytes_before += size;
                    }
                }
            }
        }
        let pct = |a: u64, b: u64| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
        eprintln!(
            "| {source} | {files} | {bytes} | {before} ({:.0} %) | {after} ({:.0} %) | {:.0} % | {:.0} % |",
            pct(before, files),
            pct(after, files),
            pct(bytes_before, bytes),
            pct(bytes_after, bytes)
        );
    }
}
