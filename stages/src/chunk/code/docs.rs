//! Where an item's own first line is, and its doc comment or docstring, kept with
//! its definition; and the documentation written in code that is also chunked as
//! docs ([`DocBlock`]): the module's guide and long doc comments of exported items.

use tree_sitter::Node;

use super::*;

/// The row of the item's own first line: past decorators, attributes and doc
/// comments that the grammar puts inside the node.
pub(super) fn item_row(cx: &Ctx<'_>, node: Node<'_>) -> usize {
    let mut row = node.start_position().row;
    if cx.lang == Lang::Python
        && node.kind() == "decorated_definition"
        && let Some(d) = node.child_by_field_name("definition")
    {
        row = d.start_position().row;
    }
    let end = end_row(node);
    while row < end {
        let t = cx.lines.get(row).copied().unwrap_or_default().trim_start();
        if t.starts_with('@') || t.starts_with("#[") || t.starts_with("//") || t.starts_with("/*") || t.starts_with('*')
        {
            row += 1;
        } else {
            break;
        }
    }
    row
}

/// The doc comment of an item: the comment lines between its attachments' start and
/// its own first line (`///`, `//`, `/** */`, `#`), or a Python docstring; its first
/// paragraph, cut to [`atlas_runtime::symbols::MAX_DOC_CHARS`].
pub(super) fn doc_comment(cx: &Ctx<'_>, from: usize, item_row: usize, node: Node<'_>) -> Option<String> {
    let mut text = String::new();
    if cx.lang == Lang::Python {
        let def = if node.kind() == "decorated_definition" { node.child_by_field_name("definition")? } else { node };
        let first = def.child_by_field_name("body")?.named_child(0)?;
        if first.kind() == "expression_statement" && first.named_child(0).is_some_and(|s| s.kind() == "string") {
            let quoted = self::text(first, cx.src).trim_start_matches(['r', 'R', 'b', 'B', 'u', 'U', 'f', 'F']);
            text = quoted.trim_matches(['"', '\'']).to_owned();
        }
    } else {
        for row in doc_from(cx, from, item_row)..item_row.min(cx.lines.len()) {
            let t = cx.lines[row].trim();
            if t.starts_with("#!") {
                continue; // a shebang
            }
            let t = table_marker(cx, t).map_or(t, |m| &t[m.len()..]);
            let t = t.trim_start_matches("///").trim_start_matches("//!").trim_start_matches("//");
            let t = t.trim_start_matches("/**").trim_start_matches("/*").trim_end_matches("*/");
            let t = t.trim_start_matches('*').trim();
            if t.starts_with("#[") || t.starts_with('@') {
                continue;
            }
            text.push_str(t);
            text.push('\n');
        }
    }
    let para = text.trim().split("\n\n").next().unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ");
    if para.is_empty() {
        return None;
    }
    Some(atlas_runtime::utf8::clip_chars(&para, atlas_runtime::symbols::MAX_DOC_CHARS))
}

/// The line doc marker of a table language that `line` (trimmed) starts with.
fn table_marker(cx: &Ctx<'_>, line: &str) -> Option<&'static str> {
    let Lang::Table(spec) = cx.lang else { return None };
    // A shebang (`#!/bin/bash`) is no comment of the item below it.
    spec.doc_markers.iter().copied().find(|m| line.starts_with(m) && !line.starts_with("#!"))
}

/// Where an item's doc comment starts: `from` (its attached comments), or for a table
/// language, earlier when comment lines run directly above it outside its scope's
/// nodes (Ruby puts a class's first member's comment in the class node).
fn doc_from(cx: &Ctx<'_>, from: usize, item_row: usize) -> usize {
    if !matches!(cx.lang, Lang::Table(_)) {
        return from;
    }
    let mut r = from.min(item_row);
    while r > 0 && cx.lines.get(r - 1).is_some_and(|l| table_marker(cx, l.trim()).is_some()) {
        r -= 1;
    }
    r
}

/// A file's documentation written in its code, chunked as markdown beside the code
/// (`search_docs` finds it): the module's guide (Rust `//!` and `/*! */` at the top,
/// a Python module docstring) or the doc comment of an exported item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocBlock {
    /// 1-based inclusive lines of the comment in the file.
    pub start_line: u32,
    pub end_line: u32,
    /// The comment's text without its comment markers, one line per line of the file
    /// (`start_line` first), so the markdown chunker's line numbers map back.
    pub text: String,
    /// The item it documents; None for the module's guide.
    pub symbol: Option<String>,
}

/// A module guide with fewer lines of prose than this ([`prose_lines`]) stays in the
/// code: a one-line "Utilities." says nothing a docs search needs.
pub const MIN_GUIDE_LINES: usize = 3;
/// An item's doc comment with at least this many lines of prose ([`prose_lines`]) is
/// also a docs chunk: several sentences that explain. Shorter ones, and a one-line
/// summary over an example, are found with their code (and as the definition's doc).
pub const MIN_ITEM_DOC_LINES: usize = 6;
/// Characters of a line of doc text that count as one line ([`prose_lines`]): a
/// docstring written as one long line is as much prose as a wrapped one.
const DOC_LINE_CHARS: usize = 80;

/// How many lines of prose `lines` hold: not blank lines, headings (`# Examples`),
/// fenced code or doctest lines (`>>>`, `...`); a long line once per
/// [`DOC_LINE_CHARS`] characters. An example is code: a method's doc that is a
/// summary over `use tfhe::prelude::*; …` answers a docs question no better than its
/// code does.
fn prose_lines(lines: &[String]) -> usize {
    let mut fence = crate::text::Fence::default();
    lines
        .iter()
        .filter(|l| !fence.step(l))
        .map(|l| l.trim())
        .filter(|t| !(t.is_empty() || t.starts_with('#') || t.starts_with(">>>") || t.starts_with("...")))
        .map(|t| t.chars().count().div_ceil(DOC_LINE_CHARS))
        .sum()
}

/// Takes the module's guide out of the file's top-level nodes `children` into
/// `cx.out.docs`, its lines dropped from the code as `docs`, when it holds
/// [`MIN_GUIDE_LINES`] lines of prose: a Python module docstring, or the Rust inner
/// doc comments (`//!`, `/*! */`) among the comments and inner attributes before the
/// first item, from the first to the last, with what lies between them (clap's
/// tutorial interleaves `#![doc = include_str!(…)]` examples) kept as written. A guide
/// that shares a line with other code stays code.
pub(super) fn module_guide(cx: &mut Ctx<'_>, children: &mut Vec<Node<'_>>) {
    let is_inner_doc = |n: Node<'_>| {
        let t = text(n, cx.src);
        cx.lang.is_comment(n.kind()) && (t.starts_with("//!") || t.starts_with("/*!"))
    };
    let span = match cx.lang {
        Lang::Rust => {
            let leading = |n: &Node<'_>| cx.lang.is_comment(n.kind()) || n.kind() == "inner_attribute_item";
            let lead = children.iter().take_while(|n| leading(n)).count();
            let first = children[..lead].iter().position(|&n| is_inner_doc(n));
            let last = children[..lead].iter().rposition(|&n| is_inner_doc(n));
            first.zip(last)
        }
        Lang::Python => children
            .iter()
            .position(|n| !cx.lang.is_comment(n.kind()))
            .filter(|&k| is_docstring(children[k]))
            .map(|k| (k, k)),
        _ => None,
    };
    let Some((a, b)) = span else { return };
    let (s, e) = (children[a].start_position().row, end_row(children[b]));
    let alone = a.checked_sub(1).is_none_or(|p| end_row(children[p]) < s)
        && children.get(b + 1).is_none_or(|n| n.start_position().row > e);
    if !alone {
        return;
    }
    let mut lines: Vec<String> = cx.lines[s..=e].iter().map(|l| l.trim_end().to_owned()).collect();
    for &n in &children[a..=b] {
        let (ns, ne) = (n.start_position().row, end_row(n));
        let stripped = if cx.lang == Lang::Python {
            docstring_lines(&cx.lines[ns..=ne])
        } else if !is_inner_doc(n) {
            continue; // an attribute or a plain comment between: as written
        } else if text(n, cx.src).starts_with("/*!") {
            block_lines(&cx.lines[ns..=ne], "/*!")
        } else {
            vec![line_doc(cx.lines[ns], "//!")]
        };
        for (i, l) in stripped.into_iter().enumerate() {
            lines[ns - s + i] = l;
        }
    }
    if prose_lines(&lines) < MIN_GUIDE_LINES {
        return;
    }
    cx.out.docs.push(DocBlock {
        start_line: s as u32 + 1,
        end_line: e as u32 + 1,
        text: lines.join("\n"),
        symbol: None,
    });
    cx.out.dropped.push((s as u32 + 1, e as u32 + 1, "docs"));
    children.drain(a..=b);
}

/// Whether `n` is a statement that is only a string literal (a docstring).
fn is_docstring(n: Node<'_>) -> bool {
    n.kind() == "expression_statement"
        && n.named_child_count() == 1
        && n.named_child(0).is_some_and(|s| s.kind() == "string")
}

/// Whether `n` starts its first line and ends its last one (nothing else shares them).
fn fills_its_lines(cx: &Ctx<'_>, n: Node<'_>) -> bool {
    let (s, e) = (n.start_position(), n.end_position());
    let first = cx.lines.get(s.row).copied().unwrap_or_default();
    let starts = first.get(..s.column).is_some_and(|p| p.trim().is_empty());
    let last_row = end_row(n);
    let ends =
        last_row != e.row || cx.lines.get(e.row).and_then(|l| l.get(e.column..)).is_some_and(|r| r.trim().is_empty());
    starts && ends
}

/// The doc comment of an exported item as a [`DocBlock`], when it holds
/// [`MIN_ITEM_DOC_LINES`] lines: Rust `///` and `/** */`, JS/TS and Java `/** */`, Go's
/// `//` lines above the item (from row `from` to its own first row `item_row`), or a
/// Python docstring.
pub(super) fn item_doc(cx: &Ctx<'_>, symbol: &str, from: usize, item_row: usize, node: Node<'_>) -> Option<DocBlock> {
    let (s, lines) = if cx.lang == Lang::Python {
        let def = if node.kind() == "decorated_definition" { node.child_by_field_name("definition")? } else { node };
        let first = def.child_by_field_name("body")?.named_child(0)?;
        if !is_docstring(first) || !fills_its_lines(cx, first) {
            return None;
        }
        let (s, e) = (first.start_position().row, end_row(first));
        (s, docstring_lines(cx.lines.get(s..=e)?))
    } else {
        comment_doc(cx, doc_from(cx, from, item_row), item_row.min(cx.lines.len()))?
    };
    if prose_lines(&lines) < MIN_ITEM_DOC_LINES {
        return None;
    }
    let end = s + lines.len() - 1;
    Some(DocBlock {
        start_line: s as u32 + 1,
        end_line: end as u32 + 1,
        text: lines.join("\n"),
        symbol: Some(symbol.to_owned()),
    })
}

/// The doc comment lines in rows `from..to` (comments and attributes above an item):
/// its first row and its lines from there, markers removed, other lines (attributes,
/// plain comments) blank.
fn comment_doc(cx: &Ctx<'_>, from: usize, to: usize) -> Option<(usize, Vec<String>)> {
    let rows = cx.lines.get(from..to)?;
    let mut doc: Vec<Option<String>> = vec![None; rows.len()];
    let mut r = 0;
    while r < rows.len() {
        let t = rows[r].trim_start();
        let block = t.starts_with("/*");
        if block {
            // The block's rows, to its closing `*/`.
            let closes = |k: usize| if k == r { t[2..].contains("*/") } else { rows[k].contains("*/") };
            let end = (r..rows.len()).find(|&k| closes(k)).unwrap_or(rows.len() - 1);
            let is_doc = t.starts_with("/**") && !t.starts_with("/***") && !t.starts_with("/**/");
            if is_doc && cx.lang != Lang::Go {
                for (i, l) in block_lines(&rows[r..=end], "/**").into_iter().enumerate() {
                    doc[r + i] = Some(l);
                }
            }
            r = end + 1;
            continue;
        }
        let marker = match cx.lang {
            Lang::Rust if t.starts_with("///") && !t.starts_with("////") => Some("///"),
            Lang::Go if t.starts_with("//") => Some("//"),
            Lang::Table(_) => table_marker(cx, t),
            _ => None,
        };
        if let Some(m) = marker {
            doc[r] = Some(line_doc(rows[r], m));
        }
        r += 1;
    }
    let first = doc.iter().position(Option::is_some)?;
    let last = doc.iter().rposition(Option::is_some)?;
    Some((from + first, doc[first..=last].iter().map(|l| l.clone().unwrap_or_default()).collect()))
}

/// One comment line without its `marker` (`///`, `//!`, `//`) and the space after it.
fn line_doc(line: &str, marker: &str) -> String {
    let t = line.trim_start();
    let t = t.strip_prefix(marker).unwrap_or(t);
    t.strip_prefix(' ').unwrap_or(t).to_owned()
}

/// The lines of a block comment opened with `open` (`/**`, `/*!`) without its markers:
/// the closing `*/` removed, and the ` * ` gutter when every inner line has one.
fn block_lines(rows: &[&str], open: &str) -> Vec<String> {
    let n = rows.len();
    let mut out: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let l = if i == 0 { l.trim_start().strip_prefix(open).unwrap_or(l) } else { l };
            let l = if i + 1 == n { l.trim_end().strip_suffix("*/").unwrap_or(l) } else { l };
            l.trim_end().to_owned()
        })
        .collect();
    let inner = || out.iter().skip(1).filter(|l| !l.trim().is_empty());
    if inner().all(|l| l.trim_start().starts_with('*')) {
        for l in out.iter_mut().skip(1) {
            let t = l.trim_start();
            let t = t.strip_prefix('*').unwrap_or(t);
            *l = t.strip_prefix(' ').unwrap_or(t).to_owned();
        }
    }
    dedent(&mut out);
    out
}

/// A docstring's lines without its quotes and string prefix, dedented as
/// `inspect.cleandoc` does (the first line on its own).
fn docstring_lines(rows: &[&str]) -> Vec<String> {
    let n = rows.len();
    let mut out: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut l = l.trim_end();
            if i == 0 {
                l = l.trim_start().trim_start_matches(['r', 'R', 'b', 'B', 'u', 'U', 'f', 'F']);
                l = l.strip_prefix("\"\"\"").or_else(|| l.strip_prefix("'''")).unwrap_or(l);
                l = l.strip_prefix(['"', '\'']).unwrap_or(l);
            }
            if i + 1 == n {
                l = l.strip_suffix("\"\"\"").or_else(|| l.strip_suffix("'''")).unwrap_or(l);
                l = l.strip_suffix(['"', '\'']).unwrap_or(l);
            }
            l.to_owned()
        })
        .collect();
    if let Some(first) = out.first_mut() {
        *first = first.trim_start().to_owned();
    }
    dedent(&mut out[1.min(n)..]);
    out
}

/// Removes the indentation (spaces and tabs) that all non-blank `lines` share.
fn dedent(lines: &mut [String]) {
    let indent = |l: &String| l.len() - l.trim_start_matches([' ', '\t']).len();
    let Some(common) = lines.iter().filter(|l| !l.trim().is_empty()).map(indent).min() else { return };
    for l in lines.iter_mut() {
        *l = l.get(common..).map_or_else(|| l.trim_start().to_owned(), str::to_owned);
    }
}
