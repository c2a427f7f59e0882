//! The documentation formats other than markdown, each turned into markdown that the
//! markdown chunker splits at its headings: reStructuredText ([`rst`]), AsciiDoc
//! ([`asciidoc`]), MDX ([`mdx`]), Jupyter notebooks ([`notebook`]) and HTML pages
//! ([`crate::text::page`], the crawl's HTML cleaner). Line for line where the format allows (rst, AsciiDoc,
//! MDX): line N of the cleaned text is line N of the file, so a citation by line
//! points into the source as well as the mirror. A notebook is cited by cell (a
//! `<!-- cell N -->` line opens each). Every converter is one linear pass, bounded in
//! depth; what it could not convert is counted under the keys below, for the stage's
//! one-line notes.

pub mod asciidoc;
pub mod mdx;
pub mod notebook;
pub mod rst;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::gitbook::{CleanParams, clean};
use crate::artifacts::Cleaned;
use crate::text::{DocFormat, atx_heading};

/// Blocks nested deeper than this (rst directives, AsciiDoc delimited blocks) are
/// kept as their text, unconverted.
pub const MAX_BLOCK_DEPTH: usize = 8;

/// Count key: a page whose blocks nest past [`MAX_BLOCK_DEPTH`].
pub const BLOCKS_TOO_DEEP: &str = "format-too-deep";
/// Count key: a block left open at the end of the page (kept to the end as it is).
pub const UNCLOSED_BLOCK: &str = "format-unclosed-block";
/// Count key: a notebook that is not valid notebook JSON (kept out).
pub const NOTEBOOK_INVALID: &str = "notebook-invalid";
/// Count key: notebook cells past [`notebook::MAX_CELLS`] (left out).
pub const CELLS_DROPPED: &str = "notebook-cells-dropped";

/// What an rst page's `:ref:` and `:doc:` roles resolve against: the source's other
/// documents and the labels (`.. _name:`) its rst pages define. One per source.
#[derive(Debug, Default, Clone, Serialize)]
pub struct DocSet {
    /// Every document's path inside the source.
    pub paths: BTreeSet<String>,
    /// Label → the page defining it and the title of the section it opens.
    pub labels: BTreeMap<String, (String, String)>,
}

impl DocSet {
    /// The set for `docs` (path, text of rst pages or None).
    pub fn new<'a>(docs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> DocSet {
        let mut set = DocSet::default();
        for (rel, text) in docs {
            set.add(rel, text);
        }
        set
    }

    /// Adds a document (with its text when it is an rst page).
    pub fn add(&mut self, rel: &str, text: Option<&str>) {
        self.paths.insert(rel.to_owned());
        for (label, title) in text.map(rst::labels).unwrap_or_default() {
            self.labels.entry(label).or_insert_with(|| (rel.to_owned(), title));
        }
    }

    fn has(&self, rel: &str) -> bool {
        self.paths.contains(rel)
    }
}

/// Cleans one document of a non-markdown doc format (`rel` its path in the source).
pub fn convert(format: DocFormat, rel: &str, text: &str, set: &DocSet, params: &CleanParams) -> Cleaned {
    let text = text.replace("\r\n", "\n");
    let mut counts = BTreeMap::new();
    let mut cleaned = match format {
        DocFormat::Markdown => clean(&text, params),
        DocFormat::Mdx => Cleaned { text: mdx::to_markdown(&text, &mut counts), ..Cleaned::default() },
        DocFormat::Rst => Cleaned { text: rst::to_markdown(&text, rel, set, &mut counts), ..Cleaned::default() },
        DocFormat::AsciiDoc => Cleaned { text: asciidoc::to_markdown(&text, &mut counts), ..Cleaned::default() },
        DocFormat::Notebook => Cleaned { text: notebook::to_markdown(&text, &mut counts), ..Cleaned::default() },
        DocFormat::Html => Cleaned { text: crate::text::page::to_markdown(&text), ..Cleaned::default() },
    };
    for (k, v) in counts {
        *cleaned.counts.entry(k.to_owned()).or_default() += v;
    }
    cleaned
}

/// A line of source prose that markdown would read as a heading (`# x` in an rst or
/// AsciiDoc paragraph), its `#` escaped.
fn no_heading(line: &str) -> String {
    if atx_heading(line).is_some() {
        let i = line.find('#').unwrap_or(0);
        format!("{}\\{}", &line[..i], &line[i..])
    } else {
        line.to_owned()
    }
}

/// Counts one occurrence of `key`.
fn bump(counts: &mut BTreeMap<&'static str, u32>, key: &'static str) {
    *counts.entry(key).or_default() += 1;
}

/// The leading spaces of a line (a tab counts as one).
fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// The markdown heading line for a title at `level` (1-based, past 6 is 6).
fn heading(level: usize, title: &str) -> String {
    format!("{} {}", "#".repeat(level.clamp(1, 6)), title.trim())
}
