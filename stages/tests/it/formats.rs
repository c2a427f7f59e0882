//! The doc formats other than markdown (issue 70 item 2): each cleaned into markdown
//! and chunked as docs, with heading paths and line ranges true to the source file;
//! and bad input (deep nesting, unclosed blocks, huge notebooks, invalid JSON) kept
//! bounded, counted for the stage's notes.

use std::time::Instant;

use atlas_stages::artifacts::{Cleaned, DocEntry};
use atlas_stages::chunk::{ChunkParams, chunk_document};
use atlas_stages::clean::CleanParams;
use atlas_stages::clean::formats::{self, DocSet};
use atlas_stages::text::doc_format;

/// Cleans `rel` among `others` (path, text) of the same source.
fn convert_among(rel: &str, text: &str, others: &[(&str, &str)]) -> Cleaned {
    let mut docs: Vec<(&str, Option<&str>)> = vec![(rel, Some(text))];
    docs.extend(others.iter().map(|(r, t)| (*r, Some(*t))));
    let set = DocSet::new(docs.iter().map(|(r, t)| (*r, t.filter(|_| r.ends_with(".rst")))));
    formats::convert(doc_format(rel).expect("a doc format"), rel, text, &set, &CleanParams::default())
}

fn convert(rel: &str, text: &str) -> Cleaned {
    convert_among(rel, text, &[])
}

/// (heading path, start line, end line) of each chunk, checking that its text is its
/// lines of the cleaned document.
fn chunks(rel: &str, cleaned: &Cleaned) -> Vec<(String, u32, u32)> {
    let params = ChunkParams { overlap_chars: 0, ..ChunkParams::default() };
    let lines: Vec<&str> = cleaned.text.lines().collect();
    chunk_document(&DocEntry::new("pkg", rel, atlas_cache::Digest::of(b"")), cleaned, &params)
        .into_iter()
        .map(|c| {
            assert_eq!(c.kind, atlas_runtime::ChunkKind::Docs, "{rel}: docs chunks");
            let cited = lines[c.start_line as usize - 1..c.end_line as usize].join("\n");
            assert_eq!(c.text, cited.trim_end(), "{rel}: chunk {} is its lines", c.ordinal);
            (c.heading_path.join(" > "), c.start_line, c.end_line)
        })
        .collect()
}

/// The source line where each chunk starts, for a line-for-line format.
fn source_line(src: &str, line: u32) -> &str {
    src.lines().nth(line as usize - 1).unwrap_or("")
}

const RST: &str = "\
.. _top:

=========
 Widgets
=========

Intro text with :func:`make_widget` and ``code``.

.. _install:

Install
=======

Run this::

    pip install widgets
    # not a heading

See :ref:`usage` and :doc:`api/index`, and :doc:`missing`.

.. note::
   Widgets need Python 3.

   .. code-block:: python
      :linenos:

      # a comment, not a heading
      import widgets

Usage
=====

.. code-block:: bash

   widgets --help

Details
-------

Read :ref:`the install guide <install>`.

.. toctree::
   :maxdepth: 2

   api/index
";

#[test]
fn rst_titles_directives_and_links() {
    let api = "API\n===\n\n.. _usage:\n\nCalling\n-------\n\nText.\n";
    let c = convert_among("docs/index.rst", RST, &[("docs/api/index.rst", api)]);
    assert_eq!(c.text.lines().count(), RST.lines().count(), "line for line:\n{}", c.text);
    let t = &c.text;
    assert!(t.contains("\n# Widgets\n"), "{t}");
    assert!(t.contains("\n## Install\n") && t.contains("\n## Usage\n") && t.contains("\n### Details\n"), "{t}");
    assert!(t.contains("Run this:\n```\npip install widgets\n# not a heading\n```"), "{t}");
    assert!(t.contains("[Calling](api/index.rst#calling)"), ":ref: across pages: {t}");
    assert!(t.contains("[api/index](api/index.rst)") && t.contains("and missing."), ":doc: links: {t}");
    assert!(t.contains("[the install guide](#install)"), ":ref: on the page: {t}");
    assert!(t.contains("> **Note:**\n> Widgets need Python 3.\n>\n>\n> ```python\n>\n> # a comment"), "{t}");
    assert!(t.contains("> # a comment, not a heading"), "{t}");
    assert!(t.contains("```bash\n\nwidgets --help\n```"), "{t}");
    assert!(t.contains("`make_widget`") && t.contains("- [api/index](api/index.rst)"), "{t}");
    let got = chunks("docs/index.rst", &c);
    let paths: Vec<&str> = got.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(paths, ["Widgets", "Widgets > Install", "Widgets > Usage"], "{got:?}"); // split at H2
    for (path, start, _) in &got {
        let title = path.rsplit(" > ").next().unwrap();
        let l = source_line(RST, *start);
        assert!(l.trim() == title || source_line(RST, start + 1).trim() == title, "{path} at line {start}: {l}");
    }
}

const ADOC: &str = "\
= Gadgets Guide
:toc:

Intro paragraph.

== Setup

NOTE: Needs a license.

[source,rust]
----
// not a comment here
# not a heading
fn main() {}
----

=== Options

[WARNING]
====
Be careful with <<setup,the setup>>.
====

// a hidden remark

== Usage

.Example title
Use it.
";

#[test]
fn asciidoc_titles_blocks_admonitions() {
    let c = convert("guide/gadgets.adoc", ADOC);
    assert_eq!(c.text.lines().count(), ADOC.lines().count(), "line for line:\n{}", c.text);
    let t = &c.text;
    assert!(t.starts_with("# Gadgets Guide\n\n"), "{t}");
    assert!(t.contains("> **Note:** Needs a license."), "{t}");
    assert!(t.contains("\n```rust\n// not a comment here\n# not a heading\nfn main() {}\n```\n"), "{t}");
    assert!(t.contains("**Warning:**") && t.contains("Be careful with the setup."), "{t}");
    assert!(t.contains("**Example title**") && !t.contains("hidden"), "{t}");
    let got = chunks("guide/gadgets.adoc", &c);
    let paths: Vec<&str> = got.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        ["Gadgets Guide", "Gadgets Guide > Setup", "Gadgets Guide > Usage"], // split at H2
        "{got:?}"
    );
    for (path, start, _) in &got {
        let title = path.rsplit(" > ").next().unwrap();
        assert!(source_line(ADOC, *start).ends_with(title), "{path} at {start}");
    }
}

const MDX: &str = "\
---
title: Sprockets
---
import { Tabs, TabItem } from '@site/tabs';
import Note from './note';
export const meta = {
  title: 'x',
};

# Sprockets

<Note type=\"info\">
Sprockets spin **fast**.
</Note>

## Install

<Tabs>
  <TabItem value=\"npm\" label=\"npm\">
    Use `npm i <Sprocket>` here.
  </TabItem>
</Tabs>

{/* a comment */}

```jsx
<Tabs>inside code</Tabs>
```
";

#[test]
fn mdx_drops_imports_and_keeps_component_text() {
    let c = convert("docs/sprockets.mdx", MDX);
    assert_eq!(c.text.lines().count(), MDX.lines().count(), "line for line:\n{}", c.text);
    let t = &c.text;
    assert!(!t.contains("import") && !t.contains("export") && !t.contains("title: 'x'"), "{t}");
    assert!(t.contains("Sprockets spin **fast**.") && !t.contains("<Note"), "{t}");
    assert!(t.contains("Use `npm i <Sprocket>` here.") && !t.contains("TabItem value"), "{t}");
    assert!(t.contains("<Tabs>inside code</Tabs>") && !t.contains("a comment"), "{t}");
    let got = chunks("docs/sprockets.mdx", &c);
    assert_eq!(got.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(), ["Sprockets", "Sprockets > Install"]);
    for (path, start, _) in &got {
        assert!(source_line(MDX, *start).ends_with(path.rsplit(" > ").next().unwrap()), "{path} at {start}");
    }
}

fn notebook(cells: &str, lang: &str) -> String {
    format!(
        r#"{{"cells": [{cells}], "metadata": {{"kernelspec": {{"language": "{lang}", "name": "k"}}}}, "nbformat": 4}}"#
    )
}

#[test]
fn notebook_cells_by_heading_code_in_kernel_language() {
    let nb = notebook(
        r###"{"cell_type": "markdown", "source": ["# Tutorial\n", "\n", "Load the data."]},
            {"cell_type": "code", "source": "import pandas as pd\n# a comment\ndf = pd.read_csv('x')",
             "outputs": [{"output_type": "stream", "text": ["lots of output\n"]}]},
            {"cell_type": "markdown", "source": "## Plot"},
            {"cell_type": "code", "source": [], "outputs": []},
            {"cell_type": "code", "source": ["df.plot()"]}"###,
        "Python",
    );
    let c = convert("nb/tutorial.ipynb", &nb);
    let t = &c.text;
    assert!(t.starts_with("# Tutorial\n<!-- cell 1 -->\n\nLoad the data.\n\n<!-- cell 2 -->\n```python\n"), "{t}");
    assert!(!t.contains("lots of output") && !t.contains("cell 4 "), "outputs and empty cells left out: {t}");
    assert!(t.contains("<!-- cell 5 -->\n```python\ndf.plot()\n```"), "{t}");
    let got = chunks("nb/tutorial.ipynb", &c);
    assert_eq!(got.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(), ["Tutorial", "Tutorial > Plot"], "{got:?}");
    // Each chunk's first line names the cell it starts in.
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[got[1].1 as usize], "<!-- cell 3 -->", "{got:?}");
}

#[test]
fn html_in_a_package_goes_through_the_html_cleaner() {
    let html = "<html><head><title>T</title><script>x()</script></head><body><nav>menu</nav><main>\
                <h1>Guide</h1><p>Hello <b>there</b>.</p><h2>More</h2><pre>code</pre></main></body></html>";
    let c = convert("pkg/docs/guide.html", html);
    assert!(c.text.contains("# Guide") && c.text.contains("## More") && !c.text.contains("menu"), "{}", c.text);
    let got = chunks("pkg/docs/guide.html", &c);
    assert_eq!(got.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(), ["Guide", "Guide > More"]);
}

// ------------------------------------------------------------------ bad input

/// Converts `text` as `rel` within `secs`, and chunks it when small (the markdown
/// chunker's own bounds are tested with the markdown cases), returning the counts.
fn bounded(rel: &str, text: &str, secs: f64) -> std::collections::BTreeMap<String, u32> {
    let t0 = Instant::now();
    let c = convert(rel, text);
    let took = t0.elapsed().as_secs_f64();
    assert!(took < secs, "{rel}: {took:.1}s for {} bytes", text.len());
    assert!(c.text.len() <= text.len() + text.len() / 2 + 64, "{rel}: output bounded");
    if c.text.len() < 1 << 20 {
        chunk_document(&DocEntry::new("pkg", rel, atlas_cache::Digest::of(b"")), &c, &ChunkParams::default());
    }
    c.counts
}

#[test]
fn rst_deep_nesting_is_bounded() {
    // rst nests by indentation, so depth costs its square in bytes: 2,000 levels of
    // directives (4 MB), and 100k lines each one deeper than the last, capped.
    let mut s = String::new();
    for d in 0..2000 {
        s.push_str(&format!("{}.. note::\n\n", " ".repeat(2 * d)));
    }
    s.push_str(&format!("{}deep text\n", " ".repeat(4000)));
    let counts = bounded("deep.rst", &s, 5.0);
    assert!(counts.contains_key(formats::BLOCKS_TOO_DEEP), "{counts:?}");
    let stair: String = (0..100_000).map(|d| format!("{}.. note:: {d}\n", " ".repeat(d % 64))).collect();
    bounded("stair.rst", &stair, 5.0);
    // An unclosed code block at 10 MB.
    let open = format!(".. code-block:: python\n\n{}", "    x = 1  # a line of code\n".repeat(10 << 20 >> 5));
    bounded("open.rst", &open, 5.0);
}

#[test]
fn asciidoc_deep_nesting_and_unclosed_blocks_are_bounded() {
    // A delimiter other than the innermost block's opens one inside it.
    let deep: String = (0..100_000).map(|i| if i % 2 == 0 { "====\n" } else { "****\n" }).collect();
    let counts = bounded("deep.adoc", &deep, 5.0);
    assert!(counts.contains_key(formats::BLOCKS_TOO_DEEP), "{counts:?}");
    let open = format!("= T\n\n----\n{}", "== not a title inside a listing\n".repeat(10 << 20 >> 5));
    let counts = bounded("open.adoc", &open, 5.0);
    assert!(counts.contains_key(formats::UNCLOSED_BLOCK), "{counts:?}");
}

#[test]
fn mdx_deep_nesting_and_unclosed_tags_are_bounded() {
    let deep = format!("# T\n\n{}text{}\n", "<Box>".repeat(100_000), "</Box>".repeat(100_000));
    let c = convert("deep.mdx", &deep);
    assert!(c.text.contains("text") && !c.text.contains("<Box>"), "nesting costs nothing");
    let lines: String = (0..100_000).map(|_| "<Box>\n").collect();
    bounded("lines.mdx", &lines, 5.0);
    let open = format!("# T\n\n<Box title=\"{}\n", "never closed ".repeat(10 << 20 >> 4));
    let counts = bounded("open.mdx", &open, 5.0);
    assert!(counts.contains_key(formats::UNCLOSED_BLOCK), "{counts:?}");
    let esm = format!("export const x = {{\n{}", "  a: 1,\n".repeat(20_000));
    let counts = bounded("esm.mdx", &esm, 5.0);
    assert!(counts.contains_key(formats::UNCLOSED_BLOCK), "{counts:?}");
}

#[test]
fn notebooks_huge_or_invalid_are_bounded() {
    let cells: Vec<String> =
        (0..100_000).map(|i| format!(r#"{{"cell_type": "markdown", "source": "cell {i}"}}"#)).collect();
    let counts = bounded("many.ipynb", &notebook(&cells.join(","), "python"), 5.0);
    assert_eq!(counts.get(formats::CELLS_DROPPED), Some(&90_000), "{counts:?}");
    let big = "x".repeat(50 << 20);
    let nb = notebook(
        &format!(
            r#"{{"cell_type": "code", "source": "print(1)", "outputs": [{{"output_type": "stream", "text": "{big}"}}]}}"#
        ),
        "python",
    );
    let counts = bounded("big.ipynb", &nb, 5.0);
    assert!(counts.is_empty(), "{counts:?}");
    for bad in ["{not json", "[1, 2]", &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))] {
        let c = convert("bad.ipynb", bad);
        assert!(c.text.is_empty() && c.counts.contains_key(formats::NOTEBOOK_INVALID), "{:?}", c.counts);
    }
}

/// Random pages of each format's syntax: no panic, and rst, AsciiDoc and MDX keep
/// their lines (an rst code block closing at the end of the page may add one).
#[test]
fn random_markup_never_panics_and_keeps_lines() {
    const PIECES: &[&str] = &[
        "\n",
        "\n\n",
        "  ",
        "   ",
        "::",
        ".. ",
        ".. note::",
        ".. code-block:: py",
        ".. _x:",
        ":ref:`x`",
        ":doc:`../a`",
        "`a <b>`_",
        "``",
        "`",
        "====",
        "----",
        "****",
        "....",
        "////",
        "[source,py]",
        "[NOTE]",
        "NOTE: ",
        "= T",
        "== T",
        "<<a,b>>",
        "xref:a[b]",
        "<Tab",
        ">",
        "</Tab>",
        "<>",
        "{/*",
        "*/}",
        "{",
        "}",
        "import x",
        "export {",
        "```",
        "# h",
        "é",
        "日本",
        "\t",
        "'",
        "\"",
        "text",
        "|===",
    ];
    let mut seed: u64 = 0x5eed;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    for _ in 0..3000 {
        let n = next() % 40;
        let page: String = (0..n).map(|_| PIECES[next() % PIECES.len()]).collect();
        for rel in ["p.rst", "p.adoc", "p.mdx"] {
            let c = convert(rel, &page);
            let (got, want) = (c.text.split('\n').count(), page.split('\n').count());
            assert!(got == want || rel == "p.rst" && got > want, "{rel} {page:?} → {:?}", c.text);
        }
        convert("p.ipynb", &page);
    }
}

#[test]
fn rst_labels_and_links_in_bulk_stay_linear() {
    let labels: String = (0..100_000).map(|i| format!(".. _l{i}:\n")).collect();
    let links: String = (0..100_000).map(|i| format!(":ref:`l{i}` :doc:`/a{i}`\n")).collect();
    let page = format!("{labels}\nTitle\n=====\n\n{links}");
    let t0 = Instant::now();
    let c = convert_among("docs/big.rst", &page, &[("docs/a1.rst", "A\n=\n")]);
    assert!(t0.elapsed().as_secs_f64() < 5.0, "{:?}", t0.elapsed());
    assert!(c.text.contains("[/a1](a1.rst)") && c.text.contains("[l1](#l1)"), "resolved");
}
