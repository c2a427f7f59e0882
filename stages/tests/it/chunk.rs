//! Markdown chunker cases: `check(input, params, expected)`.

use atlas_stages::artifacts::DocEntry;
use atlas_stages::chunk::ChunkParams;
use atlas_stages::chunk::chunk_document;
use atlas_stages::clean::{CleanParams, clean};
use expect_test::{Expect, expect};

fn doc(rel: &str) -> DocEntry {
    // (Non-markdown files are chunked as code; see the last tests.)
    DocEntry::new("site", rel, atlas_cache::Digest::of(b""))
}

fn render(rel: &str, input: &str, params: &ChunkParams) -> String {
    let cleaned = clean(input, &CleanParams::default());
    let chunks = chunk_document(&doc(rel), &cleaned, params);
    let lines: Vec<&str> = cleaned.text.lines().collect();
    let mut out = String::new();
    for c in &chunks {
        // Line ranges must point at exactly the section text in the cleaned document.
        let body = &c.text[c.overlap_chars as usize..];
        let cited = lines[c.start_line as usize - 1..c.end_line as usize].join("\n");
        assert_eq!(body, cited.trim_end(), "line range of chunk {} is exact", c.ordinal);
        out.push_str(&format!(
            "#{} [{}-{}] {} | title={}{}{}\n",
            c.ordinal,
            c.start_line,
            c.end_line,
            c.heading_path.join(" > "),
            c.title,
            if c.is_code { " code" } else { "" },
            if c.overlap_chars > 0 { format!(" overlap={}", c.overlap_chars) } else { String::new() },
        ));
        for l in c.text.lines() {
            if l.is_empty() {
                out.push('\n');
            } else {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    out
}

fn check(input: &str, expected: Expect) {
    let params = ChunkParams { overlap_chars: 0, ..ChunkParams::default() };
    expected.assert_eq(&render("guide/page.md", input, &params));
}

#[test]
fn splits_on_h1_and_h2_not_h3() {
    check(
        "# Guide\n\nIntro.\n\n## Install\n\nStep one.\n\n### Details\n\nMore.\n\n## Use\n\nRun it.\n",
        expect![[r#"
            #0 [1-3] Guide | title=Guide
              # Guide

              Intro.
            #1 [5-11] Guide > Install | title=Guide
              ## Install

              Step one.

              ### Details

              More.
            #2 [13-15] Guide > Use | title=Guide
              ## Use

              Run it.
        "#]],
    );
}

#[test]
fn hash_lines_inside_fences_are_not_headings() {
    check(
        "## Config\n\n```bash\n# install\n## still code\nhelm install\n```\n\n## Next\n\nText.\n",
        expect![[r#"
            #0 [1-7] Config | title=page code
              ## Config

              ```bash
              # install
              ## still code
              helm install
              ```
            #1 [9-11] Next | title=page
              ## Next

              Text.
        "#]],
    );
}

#[test]
fn page_without_h1_takes_its_title_from_front_matter_or_stem() {
    check(
        "---\ntitle: From Front Matter\n---\n\n## Only H2\n\nText.\n",
        expect![[r#"
            #0 [1-3] Only H2 | title=From Front Matter
              ## Only H2

              Text.
        "#]],
    );
    check(
        "Preamble without headings.\n\n## Section\n\nBody.\n",
        expect![[r#"
            #0 [1-1]  | title=page
              Preamble without headings.
            #1 [3-5] Section | title=page
              ## Section

              Body.
        "#]],
    );
}

#[test]
fn page_with_two_h1s_restarts_the_heading_path() {
    check(
        "# First\n\nA.\n\n## Sub\n\nB.\n\n# Second\n\nC.\n\n## Sub\n\nD.\n",
        expect![[r#"
            #0 [1-3] First | title=First
              # First

              A.
            #1 [5-7] First > Sub | title=First
              ## Sub

              B.
            #2 [9-11] Second | title=First
              # Second

              C.
            #3 [13-15] Second > Sub | title=First
              ## Sub

              D.
        "#]],
    );
}

#[test]
fn heading_only_h1_folds_into_the_next_section() {
    check(
        "# Title\n\n## Overview\n\nText.\n",
        expect![[r#"
            #0 [1-5] Title > Overview | title=Title
              # Title

              ## Overview

              Text.
        "#]],
    );
}

#[test]
fn escaped_and_anchored_headings_give_clean_heading_paths() {
    check(
        "## setAppGroup \\(iOS only\\) <a id=\"set-app-group\"></a>\n\nText.\n",
        expect![[r#"
            #0 [1-3] setAppGroup (iOS only) | title=page
              ## setAppGroup \(iOS only\)

              Text.
        "#]],
    );
}

#[test]
fn headings_inside_hints_do_not_split() {
    check(
        "## Setup\n\n{% hint style=\"warning\" %}\n## Who can do this?\nAdmins only.\n{% endhint %}\n\nSteps.\n",
        expect![[r#"
            #0 [1-8] Setup | title=page
              ## Setup

              > **Warning:**
              >
              > ## Who can do this?
              > Admins only.

              Steps.
        "#]],
    );
}

#[test]
fn overlap_carries_the_tail_of_the_previous_section() {
    let params = ChunkParams { overlap_chars: 30, ..ChunkParams::default() };
    expect![[r#"
        #0 [1-3] A | title=page
          ## A

          The quick brown fox jumps over the lazy dog near the river bank.
        #1 [5-7] B | title=page overlap=31
          lazy dog near the river bank.

          ## B

          Second.
    "#]]
    .assert_eq(&render(
        "x/page.md",
        "## A\n\nThe quick brown fox jumps over the lazy dog near the river bank.\n\n## B\n\nSecond.\n",
        &params,
    ));
}

#[test]
fn long_sections_split_at_paragraph_boundaries() {
    let para = |n: usize| format!("Paragraph {n} {}.", "word ".repeat(40).trim_end());
    let input = format!("## Big\n\n{}\n\n{}\n\n{}\n\n{}\n", para(1), para(2), para(3), para(4));
    let params = ChunkParams { overlap_chars: 0, max_chars: 500, ..ChunkParams::default() };
    let out = render("x/page.md", &input, &params);
    expect![[r#"
        #0 [1-5] Big | title=page
        #1 [7-9] Big | title=page
    "#]]
    .assert_eq(&out.lines().filter(|l| l.starts_with('#')).map(|l| format!("{l}\n")).collect::<String>());
}

#[test]
fn chunk_ids_are_stable_and_distinct_for_parts() {
    let params = ChunkParams { overlap_chars: 0, max_chars: 200, ..ChunkParams::default() };
    let input = format!("## Same\n\n{}\n\n{}\n", "a ".repeat(80), "b ".repeat(80));
    let c1 = chunk_document(&doc("p.md"), &clean(&input, &CleanParams::default()), &params);
    let c2 = chunk_document(&doc("p.md"), &clean(&input, &CleanParams::default()), &params);
    assert!(c1.len() >= 2);
    assert_eq!(c1.iter().map(|c| &c.chunk_id).collect::<Vec<_>>(), c2.iter().map(|c| &c.chunk_id).collect::<Vec<_>>());
    assert_ne!(c1[0].chunk_id, c1[1].chunk_id);
    // Editing the body of a section keeps its id.
    let edited = input.replace("a a", "a z");
    let c3 = chunk_document(&doc("p.md"), &clean(&edited, &CleanParams::default()), &params);
    assert_eq!(c1[0].chunk_id, c3[0].chunk_id);
}

#[test]
fn cluster_tags_are_sibling_stems() {
    let paths = ["s/a/one.md", "s/a/two.md", "s/a/README.md", "s/b/three.md"].map(String::from);
    let tags = atlas_stages::chunk::cluster_tags(&paths);
    assert_eq!(tags["s/a/one.md"], "readme two");
    assert_eq!(tags["s/b/three.md"], "");
}

#[test]
fn text_files_without_a_grammar_chunk_as_line_windows_cut_at_blank_lines() {
    let params = ChunkParams { code_max_lines: 6, ..ChunkParams::default() };
    let src = "set -e\n\na() {\n    one\n}\n\nb() {\n    two\n    three\n}\n\n\nc\n";
    expect![[r#"
        #0 [1-5]  | title=build.yaml code
          set -e

          a() {
              one
          }
        #1 [7-12]  | title=build.yaml code
          b() {
              two
              three
          }

          c
    "#]]
    .assert_eq(&render("ci/build.yaml", src, &params));
    let c = chunk_document(&doc("ci/build.yaml"), &clean(src, &CleanParams::default()), &params);
    assert!(c.iter().all(|c| c.kind == atlas_runtime::ChunkKind::Code && c.language.as_deref() == Some("yaml")));
}

/// Every non-blank line of a code file lies in exactly one window.
#[test]
fn code_windows_cover_every_line_once() {
    let src: String = (0..500).map(|i| if i % 7 == 0 { "\n".to_owned() } else { format!("line {i}\n") }).collect();
    for max in [1, 5, 60] {
        let params = ChunkParams { code_max_lines: max, ..ChunkParams::default() };
        let chunks = atlas_stages::chunk::markdown::chunk_lines(&src, &params);
        let mut seen = vec![0; 501];
        for c in &chunks {
            assert!((c.end_line - c.start_line + 1) as usize <= max);
            for l in c.start_line..=c.end_line {
                seen[l as usize] += 1;
            }
        }
        for (i, line) in src.lines().enumerate() {
            let want = usize::from(!line.is_empty());
            assert!(
                seen[i + 1] == want || (line.is_empty() && seen[i + 1] <= 1),
                "line {} seen {}",
                i + 1,
                seen[i + 1]
            );
        }
    }
}

/// A code file's chunks as `kind ordinal [lines] heading path | title`, docs chunks
/// with their text; each chunk's lines must be the file's lines its text came from.
fn render_code(rel: &str, src: &str) -> String {
    let cleaned = atlas_stages::artifacts::Cleaned { text: src.to_owned(), ..Default::default() };
    let chunks = chunk_document(&doc(rel), &cleaned, &ChunkParams::default());
    let ids: std::collections::BTreeSet<&str> = chunks.iter().map(|c| c.chunk_id.as_str()).collect();
    assert_eq!(ids.len(), chunks.len(), "chunk ids are distinct");
    let lines: Vec<&str> = src.lines().collect();
    let mut out = String::new();
    for c in &chunks {
        let docs = c.kind == atlas_runtime::ChunkKind::Docs;
        out.push_str(&format!(
            "{} #{} [{}-{}] {} | title={}\n",
            c.kind,
            c.ordinal,
            c.start_line,
            c.end_line,
            c.heading_path.join(" > "),
            c.title
        ));
        if !docs {
            continue;
        }
        let text: Vec<&str> = c.text[c.overlap_chars as usize..].lines().collect();
        assert_eq!(text.len() as u32, c.end_line - c.start_line + 1, "one line of text per line of the file");
        for (t, l) in text.iter().zip(&lines[c.start_line as usize - 1..]) {
            assert!(l.contains(t.trim()), "{t:?} is on line {l:?}");
            out.push_str(&format!("  {t}\n").replace("  \n", "\n"));
        }
    }
    out
}

#[test]
fn a_rust_files_guide_and_long_item_docs_are_docs_chunks_at_their_lines() {
    let src = r#"// SPDX-License-Identifier: MIT
//! # Tutorial
//!
//! Build a parser from a few calls: declare the arguments, parse, then read the
//! values back by name.
//!
//! ## Quick start
//!
//! Add the crate, then call [`Parser::new`]:
//!
//! ```rust
//! let p = Parser::new();
//! ```

#![warn(missing_docs)]

/// Parses arguments.
///
/// Reads them left to right, expanding `--flag=value` and grouped short flags,
/// and stops at the first `--`. A value that starts with `-` needs the `=` form;
/// a flag given twice keeps its last value.
///
/// An unknown flag is an error that names it, with the closest known one, and the
/// usage line.
///
/// # Examples
///
/// ```
/// let p = Parser::new();
/// ```
#[derive(Debug)]
pub struct Parser {
    args: Vec<String>,
}

/// A short doc stays with the code.
pub fn short() {}

/// One line over an example is not prose enough.
///
/// # Examples
///
/// ```
/// let a = example();
/// let b = example();
/// assert_eq!(a, b);
/// ```
pub fn example() -> u8 { 0 }

/// A private item's long doc is not the package's documentation.
///
/// One.
/// Two.
/// Three.
/// Four.
fn private() {}
"#;
    expect![[r#"
        code #0 [15-15]  | title=lib.rs
        code #1 [17-34] Parser | title=lib.rs
        code #2 [36-37] short | title=lib.rs
        code #3 [39-48] example | title=lib.rs
        code #4 [50-56] private | title=lib.rs
        docs #5 [2-5] Tutorial | title=Tutorial
          # Tutorial

          Build a parser from a few calls: declare the arguments, parse, then read the
          values back by name.
        docs #6 [7-13] Tutorial > Quick start | title=Tutorial
          ## Quick start

          Add the crate, then call [`Parser::new`]:

          ```rust
          let p = Parser::new();
          ```
        docs #7 [17-30] Parser | title=lib.rs
          Parses arguments.

          Reads them left to right, expanding `--flag=value` and grouped short flags,
          and stops at the first `--`. A value that starts with `-` needs the `=` form;
          a flag given twice keeps its last value.

          An unknown flag is an error that names it, with the closest known one, and the
          usage line.

          # Examples

          ```
          let p = Parser::new();
          ```
    "#]]
    .assert_eq(&render_code("src/lib.rs", src));
}

#[test]
fn a_python_module_docstring_and_long_class_docstrings_are_docs_chunks() {
    let src = r#""""Loading settings.

Settings come from the environment and from ``.env`` files;
values already set in the environment win.
"""

import os


class Loader:
    """Reads a ``.env`` file.

    Each line is ``KEY=value``; blank lines and ``#`` comments are skipped.
    Quotes around a value are removed, and ``${VAR}`` expands.
    Variables already set are kept unless ``override`` is true.
    A missing file is not an error: nothing is loaded.

    Example:
        >>> Loader(".env").load(override=False)
    """

    def load(self, override=False):
        """Sets the variables."""
        return {}


class _Private:
    """Hidden.

    One.
    Two.
    Three.
    Four.
    """
"#;
    expect![[r#"
        code #0 [7-7]  | title=settings.py
        code #1 [10-24] Loader | title=settings.py
        code #2 [27-34] _Private | title=settings.py
        docs #3 [1-4]  | title=settings.py
          Loading settings.

          Settings come from the environment and from ``.env`` files;
          values already set in the environment win.
        docs #4 [11-19] Loader | title=settings.py
          Reads a ``.env`` file.

          Each line is ``KEY=value``; blank lines and ``#`` comments are skipped.
          Quotes around a value are removed, and ``${VAR}`` expands.
          Variables already set are kept unless ``override`` is true.
          A missing file is not an error: nothing is loaded.

          Example:
              >>> Loader(".env").load(override=False)
    "#]]
    .assert_eq(&render_code("pkg/settings.py", src));
}

#[test]
fn a_guide_with_included_examples_between_its_lines_is_one_docs_chunk() {
    // clap's src/_derive/_tutorial.rs, shortened.
    let src = r#"//! ## Quick Start
//!
//! You can create an application declaratively with a `struct` and some
//! attributes. First, ensure `clap` is available with the `derive` feature.
//!
//! Here is a preview of the type of application you can make:
//! ```rust
#![doc = include_str!("../../examples/demo.rs")]
//! ```
//!
//! Which can be used as:
//! ```console
#![doc = include_str!("../../examples/demo.md")]
//! ```
#![allow(unused_imports)]
use crate::builder::ArgAction;
"#;
    expect![[r#"
        code #0 [15-16]  | title=_tutorial.rs
        docs #1 [1-14] Quick Start | title=_tutorial.rs
          ## Quick Start

          You can create an application declaratively with a `struct` and some
          attributes. First, ensure `clap` is available with the `derive` feature.

          Here is a preview of the type of application you can make:
          ```rust
          #![doc = include_str!("../../examples/demo.rs")]
          ```

          Which can be used as:
          ```console
          #![doc = include_str!("../../examples/demo.md")]
          ```
    "#]]
    .assert_eq(&render_code("src/_derive/_tutorial.rs", src));
}

#[test]
fn a_file_that_is_all_guide_is_docs_and_a_short_guide_stays_code() {
    let guide: String = (1..=40).map(|i| format!("//! Line {i} of the chapter.\n")).collect();
    let src = format!("{guide}\npub use super::chapter_1 as next;\n");
    let cleaned = atlas_stages::artifacts::Cleaned { text: src, ..Default::default() };
    let chunks = chunk_document(&doc("src/_tutorial/chapter_0.rs"), &cleaned, &ChunkParams::default());
    let docs: Vec<_> = chunks.iter().filter(|c| c.kind == atlas_runtime::ChunkKind::Docs).collect();
    assert_eq!(docs.len(), 1);
    assert_eq!((docs[0].start_line, docs[0].end_line), (1, 40));
    assert!(docs[0].text.starts_with("Line 1 of the chapter.\nLine 2"));
    assert!(chunks.iter().all(|c| c.kind == atlas_runtime::ChunkKind::Docs || c.start_line == 42));

    let short = "//! Utilities.\n\npub fn f() {}\n";
    let cleaned = atlas_stages::artifacts::Cleaned { text: short.to_owned(), ..Default::default() };
    let chunks = chunk_document(&doc("src/util.rs"), &cleaned, &ChunkParams::default());
    assert!(chunks.iter().all(|c| c.kind == atlas_runtime::ChunkKind::Code), "{chunks:?}");
}

/// A minified or generated file's very long line makes no chunk past the cap (a
/// reader refuses a bundle value over 1 MiB): its text is cut, its lines still cited.
#[test]
fn a_megabyte_line_makes_a_chunk_no_larger_than_the_cap() {
    let line = format!("var t=[{}];", "1234567,".repeat(150_000));
    for rel in ["dist/app.min.js", "data/table.rs", "notes/one-line.md"] {
        let input = format!("// head\n{line}\nfunction tail() {{ return 1; }}\n");
        let cleaned = clean(&input, &CleanParams::default());
        let chunks = chunk_document(&doc(rel), &cleaned, &ChunkParams::default());
        assert!(!chunks.is_empty(), "{rel}");
        for c in &chunks {
            assert!(c.text.len() <= atlas_stages::chunk::MAX_CHUNK_BYTES, "{rel}: {} bytes", c.text.len());
            assert!(c.start_line >= 1 && c.end_line >= c.start_line, "{rel}");
        }
    }
}
