//! Jupyter notebooks (nbformat 4 JSON) → markdown: each cell opens with a
//! `<!-- cell N -->` line (N from 1; after the heading line of a cell that opens with
//! one, so the heading opens its chunk), so a chunk's lines name the cells it cites;
//! markdown cells are kept as they are (their headings split the chunks), code cells
//! become fences in the kernel's language (`metadata.kernelspec.language`, else
//! `language_info.name`, else python), raw cells plain fences. Outputs are left out:
//! they are never read into memory (serde skips them), so a 50 MB output costs one
//! scan. Cells past [`MAX_CELLS`] are left out; JSON that is not a notebook (serde's
//! nesting limit included) gives an empty page and a count.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{CELLS_DROPPED, NOTEBOOK_INVALID, bump};
use crate::text::atx_heading;

/// A notebook's cells past this many are left out.
pub const MAX_CELLS: usize = 10_000;

#[derive(Deserialize)]
struct Notebook {
    cells: Vec<Cell>,
    #[serde(default)]
    metadata: Metadata,
}

#[derive(Deserialize, Default)]
struct Metadata {
    kernelspec: Option<Named>,
    language_info: Option<Named>,
}

#[derive(Deserialize, Default)]
struct Named {
    language: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize)]
struct Cell {
    cell_type: String,
    #[serde(default)]
    source: Source,
}

/// A cell's source: one string, or its lines.
#[derive(Deserialize)]
#[serde(untagged)]
enum Source {
    One(String),
    Lines(Vec<String>),
}

impl Default for Source {
    fn default() -> Source {
        Source::One(String::new())
    }
}

/// Converts one notebook.
pub fn to_markdown(text: &str, counts: &mut BTreeMap<&'static str, u32>) -> String {
    let nb: Notebook = match serde_json::from_str(text) {
        Ok(nb) => nb,
        Err(_) => {
            bump(counts, NOTEBOOK_INVALID);
            return String::new();
        }
    };
    let lang = nb
        .metadata
        .kernelspec
        .and_then(|k| k.language)
        .or_else(|| nb.metadata.language_info.and_then(|l| l.name))
        .unwrap_or_else(|| "python".to_owned())
        .to_ascii_lowercase();
    let lang: String = lang.chars().filter(|c| c.is_ascii_alphanumeric() || "+-_#".contains(*c)).take(32).collect();
    if nb.cells.len() > MAX_CELLS {
        *counts.entry(CELLS_DROPPED).or_default() += (nb.cells.len() - MAX_CELLS) as u32;
    }
    let mut out = String::new();
    for (n, cell) in nb.cells.iter().take(MAX_CELLS).enumerate() {
        let source = match &cell.source {
            Source::One(s) => s.clone(),
            Source::Lines(l) => l.concat(),
        };
        let source = source.replace("\r\n", "\n");
        let source = source.trim_end_matches('\n');
        if source.trim().is_empty() {
            continue;
        }
        let marker = format!("<!-- cell {} -->\n", n + 1);
        match cell.cell_type.as_str() {
            "markdown" => match source.split_once('\n').filter(|(first, _)| atx_heading(first).is_some()) {
                // After a heading line, so that the heading opens its chunk.
                Some((first, rest)) => out.push_str(&format!("{first}\n{marker}{rest}")),
                None if atx_heading(source).is_some() => out.push_str(&format!("{source}\n{marker}")),
                None => out.push_str(&format!("{marker}{source}")),
            },
            kind => {
                let run = source.lines().map(|l| l.trim_start().bytes().take_while(|&b| b == b'`').count()).max();
                let fence = "`".repeat(run.unwrap_or(0).max(2) + 1);
                let info = if kind == "code" { lang.as_str() } else { "" };
                out.push_str(&format!("{marker}{fence}{info}\n{source}\n{fence}"));
            }
        }
        out.push_str("\n\n");
    }
    out
}
