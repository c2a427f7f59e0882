//! MDX → markdown, line for line: front matter, `import` and `export` statements
//! become blank lines; JSX tags, components and HTML alike (`<Tabs>`, `</Tab>`,
//! `<Note title="…" />`, fragments), are dropped and their text children kept;
//! `{/* … */}` comments are dropped. A linear scan, not a tree: nesting costs nothing. A
//! statement or tag left open past [`MAX_OPEN_LINES`] lines is closed there.

use std::collections::BTreeMap;

use super::{UNCLOSED_BLOCK, bump};
use crate::text::{Fence, code_spans};

/// An `import`/`export` statement or a component tag spans at most this many lines.
pub const MAX_OPEN_LINES: usize = 1000;

/// A component tag being read across lines: its brace depth and open quote.
#[derive(Default)]
struct Tag {
    braces: usize,
    quote: Option<u8>,
    lines: usize,
}

/// Converts one MDX page.
pub fn to_markdown(text: &str, counts: &mut BTreeMap<&'static str, u32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut fence = Fence::default();
    // Bracket depth and line count of an import/export statement being blanked.
    let mut esm: Option<(i64, usize)> = None;
    let mut tag: Option<Tag> = None;
    let mut unclosed = false;
    // Front matter: blank, up to its closing `---`.
    let mut front = text.starts_with("---\n").then_some(0usize);
    for line in text.split('\n') {
        if let Some(n) = front.as_mut() {
            *n += 1;
            if (*n > 1 && line.trim_end() == "---") || *n >= MAX_OPEN_LINES {
                front = None;
            }
            out.push(String::new());
            continue;
        }
        if let Some((depth, n)) = esm.as_mut() {
            *depth += brackets(line);
            *n += 1;
            if *depth <= 0 || *n >= MAX_OPEN_LINES {
                unclosed |= *depth > 0;
                esm = None;
            }
            out.push(String::new());
            continue;
        }
        if tag.is_none() && fence.step(line) {
            out.push(line.to_owned());
            continue;
        }
        if tag.is_none() && (line.starts_with("import ") || line.starts_with("export ")) {
            let depth = brackets(line);
            if depth > 0 {
                esm = Some((depth, 1));
            }
            out.push(String::new());
            continue;
        }
        out.push(strip_tags(line, &mut tag));
        if let Some(t) = tag.as_mut() {
            t.lines += 1;
            if t.lines >= MAX_OPEN_LINES {
                unclosed = true;
                tag = None;
            }
        }
    }
    if unclosed || tag.is_some() || esm.is_some() {
        bump(counts, UNCLOSED_BLOCK);
    }
    out.join("\n")
}

/// Opening minus closing brackets on a line (strings not told apart: a statement's
/// extent, not its meaning).
fn brackets(line: &str) -> i64 {
    line.bytes().fold(0, |d, b| match b {
        b'{' | b'(' | b'[' => d + 1,
        b'}' | b')' | b']' => d - 1,
        _ => d,
    })
}

/// Does a tag start at `b[i]` (`<Name …`, `</name>`, `<>`, `</>`; not an autolink
/// `<https://…>` nor a comparison `a < b`)?
fn tag_starts(b: &[u8], i: usize) -> bool {
    let at = |k: usize| b.get(k).copied().unwrap_or(b'\n');
    if at(i) != b'<' {
        return false;
    }
    let from = i + 1 + usize::from(at(i + 1) == b'/');
    if at(from) == b'>' {
        return true; // a fragment
    }
    if !at(from).is_ascii_alphabetic() {
        return false;
    }
    let name = b[from..].iter().take_while(|c| c.is_ascii_alphanumeric() || b".-_".contains(c)).count();
    matches!(at(from + name), b' ' | b'\t' | b'\n' | b'>' | b'/')
}

/// One line without its component tags and `{/* */}` comments (outside code spans).
fn strip_tags(line: &str, tag: &mut Option<Tag>) -> String {
    let b = line.as_bytes();
    let spans = if tag.is_none() { code_spans(line) } else { Vec::new() };
    let mut out = String::with_capacity(line.len());
    let mut seg = 0; // start of the text not yet copied
    let (mut i, mut sp) = (0, 0);
    let had_tag = tag.is_some() || line.contains('<') || line.contains("{/*");
    while i < b.len() {
        if let Some(t) = tag.as_mut() {
            match (t.quote, b[i]) {
                (Some(q), c) if c == q => t.quote = None,
                (Some(_), _) => {}
                (None, c @ (b'"' | b'\'' | b'`')) => t.quote = Some(c),
                (None, b'{') => t.braces += 1,
                (None, b'}') => t.braces = t.braces.saturating_sub(1),
                (None, b'>') if t.braces == 0 => {
                    *tag = None;
                    seg = i + 1;
                }
                _ => {}
            }
            i += 1;
            continue;
        }
        while sp < spans.len() && spans[sp].0 < i {
            sp += 1;
        }
        if let Some(&(_, end)) = spans.get(sp).filter(|(s, _)| *s == i) {
            i = end;
            continue;
        }
        if tag_starts(b, i) {
            out.push_str(&line[seg..i]);
            *tag = Some(Tag::default());
            i += 1;
            continue;
        }
        if b[i..].starts_with(b"{/*")
            && let Some(e) = line[i..].find("*/}")
        {
            out.push_str(&line[seg..i]);
            i += e + 3;
            seg = i;
            continue;
        }
        i += 1;
    }
    if tag.is_none() && seg <= b.len() {
        out.push_str(&line[seg..]);
    }
    if had_tag && out.trim().is_empty() { String::new() } else { out }
}
