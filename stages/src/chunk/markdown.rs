//! chunk (markdown): one chunk per section, split on headings found with
//! pulldown-cmark, so a `#` line inside a code fence is never a heading.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};

use super::ChunkParams;
use crate::text::Fence;

/// A chunk as the per-document step produces it (file-level fields are added later).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DocChunk {
    pub heading_path: Vec<String>,
    /// The occurrence of this heading path in the file (0, then 1 for a second part…).
    pub part: u32,
    pub text: String,
    /// Bytes at the start of `text` that are overlap from the previous chunk.
    pub overlap_chars: u32,
    pub is_code: bool,
    /// 1-based, inclusive, in the cleaned document.
    pub start_line: u32,
    pub end_line: u32,
}

#[derive(Debug)]
struct Heading {
    level: usize,
    start: usize,
    text: String,
}

/// Top-level headings (not inside block quotes or lists) with their byte offsets.
fn headings(text: &str) -> Vec<Heading> {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TASKLISTS);
    opts.insert(Options::ENABLE_FOOTNOTES);
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut current: Option<Heading> = None;
    for (ev, range) in Parser::new_ext(text, opts).into_offset_iter() {
        match ev {
            Event::Start(Tag::Heading { level, .. }) if depth == 0 => {
                // Cut at the start of the heading's line, so line ranges stay exact.
                let start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
                current = Some(Heading { level: heading_level(level), start, text: String::new() });
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = current.take() {
                    out.push(Heading { text: h.text.split_whitespace().collect::<Vec<_>>().join(" "), ..h });
                }
            }
            Event::Start(Tag::BlockQuote(_) | Tag::List(_) | Tag::FootnoteDefinition(_)) => depth += 1,
            Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::FootnoteDefinition) => {
                depth = depth.saturating_sub(1);
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = current.as_mut() {
                    h.text.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(h) = current.as_mut() {
                    h.text.push(' ');
                }
            }
            _ => {}
        }
    }
    out
}

fn heading_level(l: HeadingLevel) -> usize {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// The first H1's text, for the page title.
pub fn first_h1(text: &str) -> Option<String> {
    headings(text).into_iter().find(|h| h.level == 1).map(|h| h.text).filter(|t| !t.is_empty())
}

struct Section {
    path: Vec<String>,
    start: usize,
    end: usize,
}

/// Splits a cleaned markdown document into chunks.
pub fn chunk_markdown(text: &str, params: &ChunkParams) -> Vec<DocChunk> {
    let split = usize::from(params.split_level);
    let mut path: Vec<String> = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    let mut sec_start = 0;
    let mut sec_path: Vec<String> = Vec::new();
    for h in headings(text).into_iter().filter(|h| h.level <= split) {
        sections.push(Section { path: sec_path.clone(), start: sec_start, end: h.start });
        path.truncate(h.level - 1);
        while path.len() < h.level - 1 {
            path.push(String::new()); // a skipped level (H2 without H1)
        }
        path.push(h.text);
        sec_start = h.start;
        sec_path = path.iter().filter(|p| !p.is_empty()).cloned().collect();
    }
    sections.push(Section { path: sec_path, start: sec_start, end: text.len() });

    // A section that is only its heading line folds into the next one.
    let mut merged: Vec<Section> = Vec::new();
    let mut carry: Option<usize> = None;
    let n = sections.len();
    for (i, mut s) in sections.into_iter().enumerate() {
        if let Some(c) = carry.take() {
            s.start = c;
        }
        let body = &text[s.start..s.end];
        if body.trim().is_empty() {
            continue;
        }
        let heading_only = body.trim().lines().count() == 1 && body.trim_start().starts_with('#');
        if heading_only && i + 1 < n {
            carry = Some(s.start);
            continue;
        }
        merged.push(s);
    }

    let lines = LineIndex::new(text);
    let mut chunks: Vec<DocChunk> = Vec::new();
    let mut prev_body: Option<&str> = None;
    for s in merged {
        for (a, b) in split_long(text, s.start, s.end, params.max_chars) {
            let (a, b) = trim_range(text, a, b);
            if a >= b {
                continue;
            }
            let body = &text[a..b];
            let overlap = prev_body.map(|p| overlap_tail(p, params.overlap_chars)).unwrap_or_default();
            let mut full = String::with_capacity(overlap.len() + body.len() + 2);
            if !overlap.is_empty() {
                full.push_str(&overlap);
                full.push_str("\n\n");
            }
            let overlap_len = full.len() as u32;
            full.push_str(body);
            let part = chunks.iter().filter(|c| c.heading_path == s.path).count() as u32;
            chunks.push(DocChunk {
                heading_path: s.path.clone(),
                part,
                is_code: has_fence(&full),
                text: full,
                overlap_chars: overlap_len,
                start_line: lines.line_of(a),
                end_line: lines.line_of(b - 1),
            });
            prev_body = Some(body);
        }
    }
    chunks
}

/// Splits a text file that is not markdown into windows of whole lines: at most
/// `code_max_lines` lines and `max_chars` bytes, cut at a blank line when one falls in
/// the second half of the window. Blank lines between windows belong to no chunk.
pub fn chunk_lines(text: &str, params: &ChunkParams) -> Vec<DocChunk> {
    let lines: Vec<&str> = text.lines().collect();
    let max_lines = params.code_max_lines.max(1);
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim().is_empty() {
            i += 1;
            continue;
        }
        let mut end = i;
        let mut bytes = 0;
        while end < lines.len() && end - i < max_lines && (end == i || bytes + lines[end].len() < params.max_chars) {
            bytes += lines[end].len() + 1;
            end += 1;
        }
        if end < lines.len() {
            // Prefer to cut at the last blank line in the second half of the window.
            let half = i + (end - i) / 2;
            if let Some(b) = (half.max(i + 1)..end).rev().find(|&j| lines[j].trim().is_empty()) {
                end = b;
            }
        }
        let mut last = end;
        while last > i && lines[last - 1].trim().is_empty() {
            last -= 1;
        }
        out.push(DocChunk {
            heading_path: Vec::new(),
            part: out.len() as u32,
            text: lines[i..last].join("\n"),
            overlap_chars: 0,
            is_code: true,
            start_line: i as u32 + 1,
            end_line: last as u32,
        });
        i = end;
    }
    out
}

/// Byte ranges of at most `max` bytes, cut at top-level block boundaries (falling back
/// to line boundaries for a single block that is too long).
fn split_long(text: &str, start: usize, end: usize, max: usize) -> Vec<(usize, usize)> {
    if end - start <= max {
        return vec![(start, end)];
    }
    // Candidate cut points: starts of lines that begin a paragraph (after a blank line,
    // outside fences). Fall back to any line start outside… or inside a fence.
    let mut para_cuts = Vec::new();
    let mut line_cuts = Vec::new();
    let mut fence = Fence::default();
    let mut prev_blank = false;
    let mut off = start;
    for line in text[start..end].split_inclusive('\n') {
        let in_fence_before = fence.is_open();
        let is_fence_line = fence.step(line);
        if off > start {
            line_cuts.push(off);
            if prev_blank && !in_fence_before && !line.trim().is_empty() {
                para_cuts.push(off);
            }
        }
        prev_blank = line.trim().is_empty() && !is_fence_line;
        off += line.len();
    }
    let mut parts = Vec::new();
    let mut a = start;
    while end - a > max {
        let limit = a + max;
        let cut = para_cuts
            .iter()
            .rev()
            .find(|&&c| c > a && c <= limit)
            .or_else(|| line_cuts.iter().rev().find(|&&c| c > a && c <= limit))
            .or_else(|| line_cuts.iter().find(|&&c| c > a)) // one line longer than max
            .copied();
        match cut {
            Some(c) => {
                parts.push((a, c));
                a = c;
            }
            None => break,
        }
    }
    parts.push((a, end));
    parts
}

fn trim_range(text: &str, mut a: usize, mut b: usize) -> (usize, usize) {
    // Skip leading blank lines (whole lines, to keep line numbers exact).
    while a < b {
        let line_end = text[a..b].find('\n').map_or(b, |i| a + i + 1);
        if text[a..line_end].trim().is_empty() {
            a = line_end;
        } else {
            break;
        }
    }
    while b > a && text.as_bytes()[b - 1].is_ascii_whitespace() {
        b -= 1;
    }
    (a, b)
}

/// The last `n` characters of `s`, starting at a word boundary.
fn overlap_tail(s: &str, n: usize) -> String {
    if n == 0 {
        return String::new();
    }
    let s = s.trim_end();
    let total = s.chars().count();
    if total <= n {
        return s.to_owned();
    }
    let start = s.char_indices().nth(total - n).map_or(0, |(i, _)| i);
    let tail = &s[start..];
    // Do not start mid-word.
    let tail = match tail.find(char::is_whitespace) {
        Some(i) if !s[..start].ends_with(char::is_whitespace) => &tail[i..],
        _ => tail,
    };
    tail.trim().to_owned()
}

fn has_fence(s: &str) -> bool {
    s.lines().any(|l| {
        let t = l.trim_start_matches([' ', '>']);
        t.starts_with("```") || t.starts_with("~~~")
    })
}

struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    /// 1-based line of a byte offset.
    fn line_of(&self, off: usize) -> u32 {
        (self.starts.partition_point(|&s| s <= off)) as u32
    }
}
