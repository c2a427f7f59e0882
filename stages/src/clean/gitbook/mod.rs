//! clean-gitbook: GitBook markup → plain CommonMark, keeping every word of content.
//!
//! The cleaner walks the page line by line. Code fences pass through untouched (only
//! the blockquote prefix of an enclosing hint is added). Outside fences it replaces the
//! known GitBook tags (`{% hint %}`, `{% tabs %}`, `{% code %}`, `{% embed %}`, …) and a
//! fixed list of HTML elements; anything else, such as the SDK rule tokens `{%~x%}` and
//! `{%%x%%}`, is content and is left alone. Containers are tracked on a stack, so an
//! unbalanced or misnested tag closes what it must and loses no text.
//!
//! Here the walker and its container stack; GitBook's tags in `tags.rs`, the HTML
//! elements in `html.rs`.

mod html;
mod tags;

use html::{TABLE_PARTS, convert_html_inline, html_tag_at, html_tag_in};
use tags::{next_tag, open_ended_hints};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::artifacts::{Cleaned, Residual};
use crate::text::html::{
    MAX_PARSE_DEPTH, decode_entities, html_as_text, html_nests_deeper_than, html_table_to_markdown,
};
use crate::text::{Fence, atx_heading, code_spans};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CleanParams {
    /// Drop the export boilerplate of published GitBook pages (leading llms.txt
    /// blockquote, trailing "Agent Instructions" section).
    #[serde(default = "yes")]
    pub strip_export_boilerplate: bool,
    /// Convert HTML tables to markdown tables.
    #[serde(default = "yes")]
    pub html_tables: bool,
}

fn yes() -> bool {
    true
}

impl Default for CleanParams {
    fn default() -> Self {
        CleanParams { strip_export_boilerplate: true, html_tables: true }
    }
}

pub fn clean(input: &str, params: &CleanParams) -> Cleaned {
    let mut out = Cleaned::default();
    let normalized = input.replace("\r\n", "\n");
    let mut body: &str = &normalized;

    if let Some((fm, rest)) = split_front_matter(body) {
        match serde_saphyr::from_str::<BTreeMap<String, serde_json::Value>>(fm) {
            Ok(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("title", serde_json::Value::String(s)) => out.title = Some(s.trim().to_owned()),
                        ("description", serde_json::Value::String(s)) => {
                            out.description = Some(s.split_whitespace().collect::<Vec<_>>().join(" "));
                        }
                        (_, v) => {
                            out.front_matter.insert(k, v);
                        }
                    }
                }
                bump(&mut out.counts, "front-matter");
                body = rest;
            }
            Err(_) => {
                // Keep it as text: nothing is lost, and the report says why.
                bump(&mut out.counts, "front-matter-unparsable");
            }
        }
    }

    let mut lines: Vec<&str> = body.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    if params.strip_export_boilerplate {
        strip_boilerplate(&mut lines, &mut out.counts);
    }

    let mut w = Walker::new(params, &mut out.counts);
    w.open_ended_hints = open_ended_hints(&lines);
    w.last_table_close = lines.iter().rposition(|l| l.contains("</table>"));
    let mut i = 0;
    while i < lines.len() {
        i = w.line(&lines, i);
    }
    w.finish();
    let mut text = w.out.join("\n");
    text = collapse_blank_runs(&text);
    out.residual = residuals(&text);
    out.text = text;
    out
}

fn bump(counts: &mut BTreeMap<String, u32>, key: &str) {
    *counts.entry(key.to_owned()).or_default() += 1;
}

fn split_front_matter(s: &str) -> Option<(&str, &str)> {
    let rest = s.strip_prefix("---\n")?;
    let mut off = 0;
    for line in rest.split_inclusive('\n') {
        let t = line.trim_end();
        if t == "---" || t == "..." {
            return Some((&rest[..off], &rest[off + line.len()..]));
        }
        off += line.len();
    }
    None
}

/// Drops the export boilerplate of published GitBook `.md` pages: a leading blockquote
/// that points at llms.txt, and a trailing "Agent Instructions" section.
fn strip_boilerplate(lines: &mut Vec<&str>, counts: &mut BTreeMap<String, u32>) {
    let first = lines.iter().position(|l| !l.trim().is_empty());
    if let Some(start) = first
        && lines[start].trim_start().starts_with('>')
    {
        let end =
            lines[start..].iter().position(|l| !l.trim_start().starts_with('>')).map_or(lines.len(), |n| start + n);
        if lines[start..end].iter().any(|l| l.contains("llms.txt")) {
            lines.drain(..end);
            bump(counts, "export-preamble");
        }
    }
    let mut fence = Fence::default();
    let mut agent_at = None;
    for (i, l) in lines.iter().enumerate() {
        if fence.step(l) {
            continue;
        }
        if let Some((_, text)) = atx_heading(l)
            && text.trim().trim_end_matches('#').trim().eq_ignore_ascii_case("agent instructions")
        {
            agent_at = Some(i);
        }
    }
    if let Some(at) = agent_at {
        lines.truncate(at);
        while lines.last().is_some_and(|l| l.trim().is_empty() || l.trim() == "---" || l.trim() == "***") {
            lines.pop();
        }
        bump(counts, "agent-instructions");
    }
}

#[derive(Debug)]
enum Container {
    /// `open_ended`: no `{% endhint %}` follows before the next hint or the end.
    Hint {
        open_ended: bool,
    },
    Tabs {
        count: u32,
    },
    Tab,
    Code,
    ContentRef {
        url: String,
        had_content: bool,
    },
    Other(String),
}

impl Container {
    fn tag(&self) -> &str {
        match self {
            Container::Hint { .. } => "hint",
            Container::Tabs { .. } => "tabs",
            Container::Tab => "tab",
            Container::Code => "code",
            Container::ContentRef { .. } => "content-ref",
            Container::Other(t) => t,
        }
    }
}

struct Walker<'a> {
    params: &'a CleanParams,
    counts: &'a mut BTreeMap<String, u32>,
    out: Vec<String>,
    stack: Vec<Container>,
    fence: Fence,
    /// Title of a `{% code title %}` waiting for its fence.
    code_title: Option<String>,
    /// Line buffer for text around inline tags.
    buf: String,
    /// Index of the line being processed.
    line_no: usize,
    /// Lines whose `{% hint %}` has no matching `{% endhint %}`.
    open_ended_hints: std::collections::HashSet<usize>,
    /// The last line holding `</table>`: no table can close after it.
    last_table_close: Option<usize>,
}

impl<'a> Walker<'a> {
    fn new(params: &'a CleanParams, counts: &'a mut BTreeMap<String, u32>) -> Self {
        Walker {
            params,
            counts,
            out: Vec::new(),
            stack: Vec::new(),
            fence: Fence::default(),
            code_title: None,
            buf: String::new(),
            line_no: 0,
            open_ended_hints: Default::default(),
            last_table_close: None,
        }
    }

    fn quote_depth(&self) -> usize {
        self.stack.iter().filter(|c| matches!(c, Container::Hint { .. })).count()
    }

    fn emit(&mut self, line: &str) {
        if !line.trim().is_empty()
            && let Some(Container::ContentRef { had_content, .. }) =
                self.stack.iter_mut().rev().find(|c| matches!(c, Container::ContentRef { .. }))
        {
            *had_content = true;
        }
        let depth = self.quote_depth();
        if depth == 0 {
            self.out.push(line.to_owned());
        } else {
            let prefix = ">".repeat(depth);
            self.out.push(if line.is_empty() {
                prefix
            } else {
                format!("{} {line}", prefix.replace('>', "> ").trim_end())
            });
        }
    }

    fn blank(&mut self) {
        if self.out.last().is_some_and(|l| !l.trim_start_matches('>').trim().is_empty()) {
            self.emit("");
        }
    }

    fn flush(&mut self) {
        if !self.buf.trim().is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.emit(line.trim_end());
        }
        self.buf.clear();
    }

    /// Processes the line at `i`; returns the index of the next unprocessed line.
    fn line(&mut self, lines: &[&str], i: usize) -> usize {
        let line = lines[i];
        self.line_no = i;
        let was_open = self.fence.is_open();
        if self.fence.step(line) {
            if !was_open && let Some(title) = self.code_title.take() {
                self.blank();
                self.emit(&format!("*{title}*"));
                bump(self.counts, "code-title");
            }
            self.emit(line);
            return i + 1;
        }
        if self.params.html_tables
            && let Some(next) = self.try_table(lines, i)
        {
            return next;
        }
        if let Some(next) = self.try_details_block(lines, i) {
            return next;
        }
        if line.trim().is_empty() {
            self.emit("");
            return i + 1;
        }
        // A hint that is never closed does not swallow the next top-level section.
        if atx_heading(line).is_some_and(|(level, _)| level <= 2) {
            while let Some(pos) = self.stack.iter().rposition(|c| matches!(c, Container::Hint { open_ended: true })) {
                bump(self.counts, "unbalanced");
                while self.stack.len() > pos {
                    let c = self.stack.pop().expect("non-empty");
                    self.closed(c);
                }
            }
        }
        self.inline(line);
        self.flush();
        i + 1
    }

    /// Converts tags within one line of text, emitting block structure as needed.
    fn inline(&mut self, line: &str) {
        let mut rest = line;
        loop {
            match next_tag(rest) {
                None => {
                    let converted = convert_html_inline(rest, self.counts);
                    self.buf.push_str(&converted);
                    return;
                }
                Some((start, end, tag)) => {
                    let converted = convert_html_inline(&rest[..start], self.counts);
                    self.buf.push_str(&converted);
                    self.gitbook_tag(&tag);
                    rest = &rest[end..];
                }
            }
        }
    }

    fn close(&mut self, what: &str) {
        // embed/include have no container; their end tags just go.
        if matches!(what, "embed" | "include") {
            return;
        }
        if !self.stack.iter().any(|c| c.tag() == what) {
            bump(self.counts, "unbalanced");
            return;
        }
        self.flush();
        while let Some(c) = self.stack.pop() {
            let found = c.tag() == what;
            if !found {
                bump(self.counts, "unbalanced");
            }
            self.closed(c);
            if found {
                break;
            }
        }
    }

    fn closed(&mut self, c: Container) {
        match c {
            Container::Hint { .. } => {
                // Leave the quote: the next line must not continue it lazily.
                self.out.push(String::new());
                // …but inside an outer hint the blank line must stay quoted.
                if self.quote_depth() > 0 {
                    self.out.pop();
                    self.emit("");
                }
            }
            Container::ContentRef { url, had_content } => {
                if !had_content && !url.is_empty() {
                    self.emit(&format!("[{url}]({url})"));
                }
            }
            Container::Code => self.code_title = None,
            Container::Tabs { .. } | Container::Tab | Container::Other(_) => self.blank(),
        }
    }

    fn finish(&mut self) {
        self.flush();
        while let Some(c) = self.stack.pop() {
            bump(self.counts, "unbalanced");
            self.closed(c);
        }
        while self.out.last().is_some_and(|l| l.trim().is_empty()) {
            self.out.pop();
        }
    }
}

fn find_outside_code(s: &str, needle: &str) -> Option<usize> {
    let code = code_spans(s);
    let mut from = 0;
    while let Some(rel) = s[from..].find(needle) {
        let at = from + rel;
        if !code.iter().any(|&(a, b)| at >= a && at < b) {
            return Some(at);
        }
        from = at + needle.len();
    }
    None
}

/// The count (in [`Cleaned::counts`]) of places where HTML nested deeper than
/// [`MAX_HTML_DEPTH`](crate::text::html::MAX_HTML_DEPTH) was kept as plain text.
pub const TOO_DEEP: &str = "html-too-deep";

fn collapse_blank_runs(s: &str) -> String {
    // Outside fences: at most one blank line in a row, none at the start or the end; a
    // quoted blank line (`>`) is not repeated and does not end a quote.
    let is_quote_blank = |l: &str| !l.is_empty() && l.chars().all(|c| c == '>' || c == ' ');
    let mut out: Vec<&str> = Vec::new();
    let mut fence = Fence::default();
    for line in s.split('\n') {
        let in_fence = fence.step(line);
        let blank = line.trim().is_empty() && !in_fence;
        if blank {
            if out.last().is_some_and(|l| is_quote_blank(l)) {
                out.pop();
            }
            if out.last().is_none_or(|l| l.trim().is_empty()) {
                continue;
            }
            out.push("");
            continue;
        }
        if !in_fence && is_quote_blank(line) && out.last().is_some_and(|l| *l == line) {
            continue;
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.trim().is_empty() || is_quote_blank(l)) {
        out.pop();
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// Known GitBook tags and convertible HTML that remain outside code.
pub fn residuals(text: &str) -> Vec<Residual> {
    let mut fence = Fence::default();
    let mut res = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if fence.step(line) {
            continue;
        }
        if let Some((_, _, tag)) = next_tag(line) {
            res.push(Residual { line: n + 1, kind: "gitbook".into(), text: format!("{{% {} %}}", tag.name) });
        }
        let code = code_spans(line);
        for (i, _) in line.match_indices('<') {
            if code.iter().any(|&(a, b)| i >= a && i < b) {
                continue;
            }
            if let Some(tag) = html_tag_at(line, i).or_else(|| html_tag_in(line, i, TABLE_PARTS)) {
                res.push(Residual { line: n + 1, kind: "html".into(), text: tag.raw.chars().take(60).collect() });
            }
        }
    }
    res
}

/// Words of a text, for the no-word-lost check.
pub fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Text of `input` a faithful cleaner must keep: the page minus GitBook tag tokens,
/// HTML tag markup and front matter keys. Used by the tests' no-word-lost check.
pub fn content_words(input: &str) -> Vec<String> {
    let mut no_tags = String::new();
    for line in input.replace("\r\n", "\n").lines() {
        let mut rest = line;
        while let Some((s, e, _)) = next_tag(rest) {
            no_tags.push_str(&rest[..s]);
            no_tags.push(' ');
            rest = &rest[e..];
        }
        no_tags.push_str(rest);
        no_tags.push('\n');
    }
    let no_tags = decode_entities(&no_tags);
    // HTML tags may span lines (`<br\n/>`), so strip them over the whole text.
    let mut text = String::with_capacity(no_tags.len());
    let mut i = 0;
    while i < no_tags.len() {
        let ch = no_tags[i..].chars().next().expect("in bounds");
        if ch == '<'
            && let Some(tag) = html_tag_at(&no_tags, i).or_else(|| html_tag_in(&no_tags, i, TABLE_PARTS))
        {
            text.push(' ');
            i += tag.raw.len();
            continue;
        }
        text.push(ch);
        i += ch.len_utf8();
    }
    words(&text)
}
