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
