//! clean-gitbook: GitBook markup → plain CommonMark, keeping every word of content.
//!
//! The cleaner walks the page line by line. Code fences pass through untouched (only
//! the blockquote prefix of an enclosing hint is added). Outside fences it replaces the
//! known GitBook tags (`{% hint %}`, `{% tabs %}`, `{% code %}`, `{% embed %}`, …) and a
//! fixed list of HTML elements; anything else, such as the SDK rule tokens `{%~x%}` and
//! `{%%x%%}`, is content and is left alone. Containers are tracked on a stack, so an
//! unbalanced or misnested tag closes what it must and loses no text.

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

/// GitBook block tags the cleaner understands (the `end…` forms are derived).
const GITBOOK_TAGS: &[&str] = &[
    "hint",
    "tabs",
    "tab",
    "code",
    "embed",
    "content-ref",
    "columns",
    "column",
    "file",
    "swagger",
    "swagger-description",
    "swagger-parameter",
    "swagger-response",
    "openapi",
    "openapi-operation",
    "openapi-schemas",
    "openapi-webhook",
    "stepper",
    "step",
    "include",
    "updates",
    "update",
];

/// HTML elements converted (or dropped) outside code; all others are left as text.
const HTML_TAGS: &[&str] = &[
    "a",
    "b",
    "br",
    "code",
    "del",
    "details",
    "div",
    "em",
    "figcaption",
    "figure",
    "hr",
    "i",
    "img",
    "kbd",
    "li",
    "mark",
    "ol",
    "p",
    "picture",
    "source",
    "span",
    "strong",
    "summary",
    "table",
    "u",
    "ul",
];

fn is_gitbook_tag(name: &str) -> bool {
    let base = name.strip_prefix("end").unwrap_or(name);
    GITBOOK_TAGS.contains(&base) || GITBOOK_TAGS.contains(&name)
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

    /// `<table>…</table>` (possibly over many lines) → a markdown table.
    fn try_table(&mut self, lines: &[&str], i: usize) -> Option<usize> {
        let line = lines[i];
        let start = find_outside_code(line, "<table")?;
        if self.last_table_close.is_none_or(|last| last < i) {
            return None; // unclosed: leave it to the residual report
        }
        let mut html = String::from(&line[start..]);
        let mut j = i;
        let mut closed = html.contains("</table>");
        while !closed {
            j += 1;
            if j >= lines.len() {
                return None;
            }
            html.push('\n');
            html.push_str(lines[j]);
            closed = lines[j].contains("</table>");
        }
        let end = html.find("</table>").expect("checked") + "</table>".len();
        let after = html[end..].to_owned();
        let before = &line[..start];
        self.inline(before);
        self.flush();
        self.blank();
        let fragment = &html[..end];
        if html_nests_deeper_than(fragment, MAX_PARSE_DEPTH) {
            self.emit(&html_as_text(fragment));
            bump(self.counts, TOO_DEEP);
        } else {
            let (rows, too_deep) = html_table_to_markdown(fragment);
            for row in rows {
                self.emit(&row);
            }
            bump(self.counts, "html-table");
            if too_deep {
                bump(self.counts, TOO_DEEP);
            }
        }
        self.blank();
        self.inline(&after);
        self.flush();
        Some(j + 1)
    }

    /// `<details>` lines: the summary becomes a bold line, the rest passes through.
    fn try_details_block(&mut self, lines: &[&str], i: usize) -> Option<usize> {
        let t = lines[i].trim();
        if t == "<details>" || (t.starts_with("<details ") && t.ends_with('>')) {
            self.blank();
            bump(self.counts, "details");
            return Some(i + 1);
        }
        if t == "</details>" {
            self.blank();
            return Some(i + 1);
        }
        None
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

    fn gitbook_tag(&mut self, tag: &Tag) {
        let name = tag.name.as_str();
        bump(self.counts, name);
        match name {
            "hint" => {
                self.flush();
                // GitBook cannot nest hints: a hint opened inside one closes it.
                if matches!(self.stack.last(), Some(Container::Hint { .. })) {
                    bump(self.counts, "unbalanced");
                    let c = self.stack.pop().expect("checked");
                    self.closed(c);
                }
                self.blank();
                let style = tag.attr("style").unwrap_or("info");
                let label = hint_label(style);
                let open_ended = self.open_ended_hints.contains(&self.line_no);
                self.stack.push(Container::Hint { open_ended });
                self.emit(&format!("**{label}:**"));
                self.emit("");
            }
            "tabs" => {
                self.flush();
                self.blank();
                self.stack.push(Container::Tabs { count: 0 });
            }
            "tab" => {
                self.flush();
                // A new tab closes the previous one of the same group.
                if matches!(self.stack.last(), Some(Container::Tab)) {
                    self.stack.pop();
                }
                let n = match self.stack.last_mut() {
                    Some(Container::Tabs { count }) => {
                        *count += 1;
                        *count
                    }
                    _ => {
                        bump(self.counts, "unbalanced");
                        1
                    }
                };
                self.stack.push(Container::Tab);
                self.blank();
                let title = tag.attr("title").map(str::trim).filter(|t| !t.is_empty());
                match title {
                    Some(t) => self.emit(&format!("**{t}**")),
                    None => self.emit(&format!("**Tab {n}**")),
                }
                self.emit("");
            }
            "code" => {
                self.flush();
                self.stack.push(Container::Code);
                self.code_title = tag.attr("title").map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned);
            }
            "content-ref" => {
                self.flush();
                let url = tag.attr("url").unwrap_or_default().to_owned();
                self.stack.push(Container::ContentRef { url, had_content: false });
            }
            "embed" | "file" | "openapi" | "openapi-operation" | "openapi-schemas" | "openapi-webhook" | "include" => {
                let url = tag.attr("url").or_else(|| tag.attr("src")).or(tag.positional.as_deref()).unwrap_or_default();
                let caption = tag.attr("caption").map(str::trim).filter(|c| !c.is_empty());
                let mut text = caption.unwrap_or(url).to_owned();
                for extra in ["path", "method"] {
                    if let Some(v) = tag.attr(extra) {
                        text.push_str(&format!(" {v}"));
                    }
                }
                if !url.is_empty() {
                    self.buf.push_str(&format!("[{text}]({url})"));
                } else if !text.is_empty() {
                    self.buf.push_str(&text);
                }
                if name != "embed" && name != "include" {
                    self.stack.push(Container::Other(name.to_owned()));
                }
            }
            "swagger-parameter" => {
                let mut parts: Vec<&str> = Vec::new();
                for k in ["in", "type"] {
                    if let Some(v) = tag.attr(k) {
                        parts.push(v);
                    }
                }
                if tag.attr("required").is_some_and(|r| r == "true") {
                    parts.push("required");
                }
                self.flush();
                self.emit(&format!("- `{}` ({})", tag.attr("name").unwrap_or("?"), parts.join(", ")));
                self.stack.push(Container::Other(name.to_owned()));
            }
            "swagger" => {
                self.flush();
                let mut head = String::new();
                for k in ["method", "path", "summary"] {
                    if let Some(v) = tag.attr(k) {
                        head.push_str(v);
                        head.push(' ');
                    }
                }
                if !head.trim().is_empty() {
                    self.blank();
                    self.emit(&format!("**{}**", head.trim()));
                    self.emit("");
                }
                self.stack.push(Container::Other(name.to_owned()));
            }
            "swagger-response" => {
                self.flush();
                if let Some(status) = tag.attr("status") {
                    self.emit(&format!("Response {status}: {}", tag.attr("description").unwrap_or_default()));
                }
                self.stack.push(Container::Other(name.to_owned()));
            }
            _ if name.starts_with("end") => self.close(&name[3..]),
            _ => {
                // columns, column, stepper, step, updates, update, swagger-description: structure only.
                self.flush();
                self.blank();
                self.stack.push(Container::Other(name.to_owned()));
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

/// Lines that open a hint whose next hint tag is not `{% endhint %}`.
fn open_ended_hints(lines: &[&str]) -> std::collections::HashSet<usize> {
    let mut fence = Fence::default();
    let mut tags: Vec<(usize, bool)> = Vec::new(); // (line, is_open)
    for (i, line) in lines.iter().enumerate() {
        if fence.step(line) {
            continue;
        }
        let mut rest = *line;
        while let Some((_, end, tag)) = next_tag(rest) {
            match tag.name.as_str() {
                "hint" => tags.push((i, true)),
                "endhint" => tags.push((i, false)),
                _ => {}
            }
            rest = &rest[end..];
        }
    }
    let mut open_ended = std::collections::HashSet::new();
    for (k, &(line, is_open)) in tags.iter().enumerate() {
        if is_open && tags.get(k + 1).is_none_or(|&(_, next_open)| next_open) {
            open_ended.insert(line);
        }
    }
    open_ended
}

fn hint_label(style: &str) -> String {
    match style.trim().to_ascii_lowercase().as_str() {
        "info" => "Info".into(),
        "warning" => "Warning".into(),
        "danger" => "Danger".into(),
        "success" => "Success".into(),
        "tip" => "Tip".into(),
        "" => "Note".into(),
        other => {
            let mut c = other.chars();
            c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
        }
    }
}

#[derive(Debug, Default)]
struct Tag {
    name: String,
    attrs: Vec<(String, String)>,
    positional: Option<String>,
}

impl Tag {
    fn attr(&self, k: &str) -> Option<&str> {
        self.attrs.iter().find(|(key, _)| key.eq_ignore_ascii_case(k)).map(|(_, v)| v.as_str())
    }
}

/// Finds the next known GitBook tag in `s` outside inline code: `(start, end, tag)`.
fn next_tag(s: &str) -> Option<(usize, usize, Tag)> {
    let code = code_spans(s);
    let mut from = 0;
    while let Some(rel) = s[from..].find("{%") {
        let start = from + rel;
        from = start + 2;
        if code.iter().any(|&(a, b)| start >= a && start < b) {
            continue;
        }
        let inner_start = start + 2;
        let Some(close_rel) = s[inner_start..].find("%}") else { continue };
        let inner = &s[inner_start..inner_start + close_rel];
        let inner = inner.strip_prefix('-').unwrap_or(inner);
        let inner = inner.strip_suffix('-').unwrap_or(inner);
        // `{%%x%%}` and `{%~x%}` are SDK rule tokens: the tag name must follow spaces or directly.
        let trimmed = inner.trim_start();
        let name: String =
            trimmed.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
        if name.is_empty() || !is_gitbook_tag(&name.to_ascii_lowercase()) {
            continue;
        }
        let after_name = &trimmed[name.len()..];
        // A real tag name ends at whitespace or the end: `{%urlenc(x)%}` is not `url…`.
        if !(after_name.is_empty() || after_name.starts_with(char::is_whitespace)) {
            continue;
        }
        let (attrs, positional) = parse_attrs(after_name);
        let end = inner_start + close_rel + 2;
        return Some((start, end, Tag { name: name.to_ascii_lowercase(), attrs, positional }));
    }
    None
}

fn parse_attrs(s: &str) -> (Vec<(String, String)>, Option<String>) {
    let s = s.replace(['\u{201c}', '\u{201d}'], "\"");
    let mut attrs = Vec::new();
    let mut positional = None;
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        if b[i] == b'"' || b[i] == b'\'' {
            let q = b[i];
            let end = s[i + 1..].find(q as char).map_or(s.len(), |e| i + 1 + e);
            positional.get_or_insert_with(|| s[i + 1..end].to_owned());
            i = end + 1;
            continue;
        }
        let key_start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' {
            i += 1;
        }
        let key = s[key_start..i].to_owned();
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            let value = if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i] as char;
                let end = s[i + 1..].find(q).map_or(s.len(), |e| i + 1 + e);
                let v = s[i + 1..end].to_owned();
                i = end + 1;
                v
            } else {
                let st = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                s[st..i].to_owned()
            };
            attrs.push((key, value));
        } else if !key.is_empty() {
            attrs.push((key, String::new()));
        }
    }
    (attrs, positional)
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

/// A parsed HTML tag in running text.
struct HtmlTag<'s> {
    name: String,
    closing: bool,
    raw: &'s str,
}

impl HtmlTag<'_> {
    fn attr(&self, key: &str) -> Option<String> {
        let inner = self.raw.trim_start_matches('<').trim_end_matches('>').trim_end_matches('/');
        let (attrs, _) = parse_attrs(inner.get(self.name.len()..).unwrap_or_default());
        attrs.into_iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v)
    }
}

/// Elements that only appear inside `<table>`, converted with it.
const TABLE_PARTS: &[&str] = &["thead", "tbody", "tfoot", "tr", "td", "th", "caption", "colgroup", "col", "row"];

/// Finds a known HTML tag at `s[i..]` (which starts with `<`).
fn html_tag_at(s: &str, i: usize) -> Option<HtmlTag<'_>> {
    html_tag_in(s, i, HTML_TAGS)
}

fn html_tag_in<'s>(s: &'s str, i: usize, names: &[&str]) -> Option<HtmlTag<'s>> {
    let rest = &s[i..];
    let after = rest.strip_prefix('<')?;
    let (closing, after) = match after.strip_prefix('/') {
        Some(a) => (true, a),
        None => (false, after),
    };
    let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    let lname = name.to_ascii_lowercase();
    if !names.contains(&lname.as_str()) {
        return None;
    }
    let next = after[name.len()..].chars().next()?;
    if !(next == '>' || next == '/' || next.is_whitespace()) {
        return None;
    }
    let end = rest.find('>')?;
    Some(HtmlTag { name: lname, closing, raw: &rest[..=end] })
}

/// Converts the inline HTML of one line of text, outside code spans.
fn convert_html_inline(s: &str, counts: &mut BTreeMap<String, u32>) -> String {
    if !s.contains('<') {
        return s.to_owned();
    }
    let code = code_spans(s);
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut icon_depth = 0usize;
    // Open links: where their '[' is in `out`, and their href.
    let mut links: Vec<(usize, String)> = Vec::new();
    while i < s.len() {
        if let Some(&(a, b)) = code.iter().find(|&&(a, _)| a == i) {
            out.push_str(&s[a..b]);
            i = b;
            continue;
        }
        let ch = s[i..].chars().next().expect("in bounds");
        if ch != '<' {
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        let Some(tag) = html_tag_at(s, i) else {
            out.push('<');
            i += 1;
            continue;
        };
        i += tag.raw.len();
        let key = format!("html-{}", tag.name);
        bump(counts, &key);
        match (tag.name.as_str(), tag.closing) {
            ("a", false) => {
                // Anchors (<a id>, <a name>) just go; links become [text](href).
                if let Some(href) = tag.attr("href") {
                    links.push((out.len(), href));
                    out.push('[');
                }
            }
            ("a", true) => {
                if let Some((at, href)) = links.pop() {
                    let text = out[at + 1..].to_owned();
                    out.truncate(at);
                    let text = if text.trim().is_empty() { href.clone() } else { text };
                    out.push_str(&format!("[{text}]({href})"));
                }
            }
            ("b" | "strong", _) => out.push_str("**"),
            ("em", _) => out.push('*'),
            ("i", false) => {
                let class = tag.attr("class").unwrap_or_default();
                if class.contains("fa-") || class.contains("icon") {
                    icon_depth += 1; // icons carry no words
                } else {
                    out.push('*');
                }
            }
            ("i", true) => {
                if icon_depth > 0 {
                    icon_depth -= 1;
                } else {
                    out.push('*');
                }
            }
            ("code", _) => out.push('`'),
            ("del", _) => out.push_str("~~"),
            ("li", false) => out.push_str(" • "),
            ("hr", _) => out.push_str("***"),
            ("br", _) => out.push(' '),
            ("img", _) => {
                let src = tag.attr("src").unwrap_or_default();
                let alt = tag.attr("alt").unwrap_or_default();
                out.push_str(&format!("![{alt}]({src})"));
            }
            ("summary", false) => out.push_str("**"),
            ("summary", true) => out.push_str("**"),
            ("p" | "div" | "figcaption", true) => out.push(' '),
            // mark, u, kbd, span, figure, picture, source, div, p, details: tags go, text stays.
            _ => {}
        }
    }
    // Links never closed on this line keep their text; only the '[' goes.
    for (at, _) in links.into_iter().rev() {
        out.remove(at);
    }
    let out = out.replace("****", "**");
    // Removing a tag can leave double spaces or trailing spaces; keep leading indentation.
    let indent = out.len() - out.trim_start().len();
    let (lead, body) = out.split_at(indent);
    let mut squeezed = String::with_capacity(body.len());
    let mut prev_space = false;
    for c in body.chars() {
        if c == ' ' {
            if !prev_space {
                squeezed.push(c);
            }
            prev_space = true;
        } else {
            squeezed.push(c);
            prev_space = false;
        }
    }
    format!("{lead}{}", squeezed.trim_end())
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
