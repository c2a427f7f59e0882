//! clean-gitbook: GitBook markup → plain CommonMark, keeping every word of content.
//!
//! The cleaner walks the page line by line. Code fences pass through untouched (only
//! the blockquote prefix of an enclosing hint is added). Outside fences it replaces the
//! known GitBook tags (`{% hint %}`, `{% tabs %}`, `{% code %}`, `{% embed %}`, …) and a
//! fixed list of HTML elements; anything else, such as the SDK rule tokens `{%~x%}` and
//! `{%%x%%}`, is content and is left alone. Containers are tracked on a stack, so an
//! unbalanced or misnested tag closes what it must and loses no text.
//!
//! Invariant: the output, and the work, are linear in the page. Tags that nest without
//! end (a hint in tabs in a hint …) stop nesting at [`MAX_TAG_DEPTH`] containers and
//! [`MAX_QUOTE_DEPTH`] quote levels; past them a tag keeps its words at the depth
//! reached, and the page is counted as [`TAGS_TOO_DEEP`]. Each line's tags, code spans
//! and links are found in one pass
//! (`tests::gitbook_tags_nested_without_end_keep_the_output_linear`,
//! `clean::lines_full_of_tags_code_spans_and_links_keep_the_output_linear`).
//!
//! Here the walker and its container stack; GitBook's tags in `tags.rs`, the HTML
//! elements in `html.rs`.

mod html;
mod tags;

use html::{TABLE_PARTS, convert_html_inline, html_tag_at, html_tag_in};
use tags::{open_ended_hints, tags};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::artifacts::{Cleaned, Residual};
use crate::text::html::{
    MAX_HTML_DEPTH, MAX_PARSE_DEPTH, decode_entities, html_as_text, html_nests_deeper_than, html_table_to_markdown,
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

/// The most GitBook containers (`{% tabs %}`, `{% hint %}`, `{% column %}`, …) open at
/// once: the same bound as HTML elements'. Each line walks the open containers, so a
/// page that opens them without end would cost the square of its length; a container
/// opened past this keeps its words where the walker is and its end tag closes nothing.
pub const MAX_TAG_DEPTH: usize = MAX_HTML_DEPTH;

/// The most `> ` levels a line is quoted with by hints inside other containers inside
/// hints; deeper hints are quoted at this level. Every line of a hint carries its
/// prefix, so without a bound N nested hints make each line N times longer.
pub const MAX_QUOTE_DEPTH: usize = 8;

/// The count (in [`Cleaned::counts`]) of GitBook tags opened past [`MAX_TAG_DEPTH`] or
/// hints past [`MAX_QUOTE_DEPTH`], kept at the depth reached.
pub const TAGS_TOO_DEEP: &str = "gitbook-too-deep";

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
    /// Per tag name, the containers not opened for [`MAX_TAG_DEPTH`]: their end tags
    /// close nothing.
    unopened: BTreeMap<String, usize>,
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
            unopened: BTreeMap::new(),
        }
    }

    fn hints(&self) -> usize {
        self.stack.iter().filter(|c| matches!(c, Container::Hint { .. })).count()
    }

    fn quote_depth(&self) -> usize {
        self.hints().min(MAX_QUOTE_DEPTH)
    }

    /// Opens `c`, unless [`MAX_TAG_DEPTH`] containers are open: then it is counted as
    /// [`TAGS_TOO_DEEP`], its words stay where they are, and its end tag closes nothing.
    fn open(&mut self, c: Container) {
        if self.stack.len() >= MAX_TAG_DEPTH {
            bump(self.counts, TAGS_TOO_DEEP);
            *self.unopened.entry(c.tag().to_owned()).or_default() += 1;
            return;
        }
        if matches!(c, Container::Hint { .. }) && self.hints() >= MAX_QUOTE_DEPTH {
            bump(self.counts, TAGS_TOO_DEEP);
        }
        self.stack.push(c);
    }

    /// Closes the innermost open container, and with it every tag not opened inside it.
    fn pop(&mut self) -> Option<Container> {
        self.unopened.clear();
        self.stack.pop()
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
                    let c = self.pop().expect("non-empty");
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
        let mut at = 0;
        for (start, end, tag) in tags(line) {
            let converted = convert_html_inline(&line[at..start], self.counts);
            self.buf.push_str(&converted);
            self.gitbook_tag(&tag);
            at = end;
        }
        let converted = convert_html_inline(&line[at..], self.counts);
        self.buf.push_str(&converted);
    }

    fn close(&mut self, what: &str) {
        // embed/include have no container; their end tags just go.
        if matches!(what, "embed" | "include") {
            return;
        }
        // Tags not opened for the bound lie inside every open container: the innermost
        // tag of this name is one of them.
        if let Some(n) = self.unopened.get_mut(what).filter(|n| **n > 0) {
            *n -= 1;
            return;
        }
        if !self.stack.iter().any(|c| c.tag() == what) {
            bump(self.counts, "unbalanced");
            return;
        }
        self.flush();
        while let Some(c) = self.pop() {
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
        while let Some(c) = self.pop() {
            bump(self.counts, "unbalanced");
            self.closed(c);
        }
        while self.out.last().is_some_and(|l| l.trim().is_empty()) {
            self.out.pop();
        }
    }
}

fn find_outside_code(s: &str, needle: &str) -> Option<usize> {
    let mut code = Outside::new(s);
    let mut from = 0;
    while let Some(rel) = s[from..].find(needle) {
        let at = from + rel;
        if code.outside(at) {
            return Some(at);
        }
        from = at + needle.len();
    }
    None
}

/// Whether places of one line, asked in increasing order, lie outside its code spans:
/// linear in the line however many it has.
struct Outside {
    code: Vec<(usize, usize)>,
    /// The first span that does not end at or before the last place asked.
    next: usize,
}

impl Outside {
    fn new(line: &str) -> Self {
        Outside { code: code_spans(line), next: 0 }
    }

    /// Whether `at` (no smaller than the last place asked) lies outside every code span.
    fn outside(&mut self, at: usize) -> bool {
        while self.code.get(self.next).is_some_and(|&(_, b)| b <= at) {
            self.next += 1;
        }
        self.code.get(self.next).is_none_or(|&(a, _)| at < a)
    }
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
        if let Some((_, _, tag)) = tags(line).next() {
            res.push(Residual { line: n + 1, kind: "gitbook".into(), text: format!("{{% {} %}}", tag.name) });
        }
        let mut code = Outside::new(line);
        for (i, _) in line.match_indices('<') {
            if !code.outside(i) {
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
        let mut at = 0;
        for (s, e, _) in tags(line) {
            no_tags.push_str(&line[at..s]);
            no_tags.push(' ');
            at = e;
        }
        no_tags.push_str(&line[at..]);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every content word of `input` is in `c`'s text, as often.
    fn keeps_every_word(input: &str, c: &Cleaned) -> bool {
        let mut have: std::collections::HashMap<String, usize> = Default::default();
        for w in words(&c.text) {
            *have.entry(w).or_default() += 1;
        }
        content_words(input).into_iter().all(|w| have.get_mut(&w).is_some_and(|n| std::mem::replace(n, *n - 1) > 0))
    }

    /// `n` hints, each opened inside tabs inside the one before, none ever closed.
    fn nested_without_end(n: usize) -> String {
        (0..n).map(|k| format!("{{% hint style=\"info\" %}}\nWords of level {k}.\n{{% tabs %}}\n")).collect()
    }

    #[test]
    fn gitbook_tags_nested_without_end_keep_the_output_linear() {
        // 2,000 levels are an 80 KB page that became 14.5 MB of text.
        let (small, large) = (nested_without_end(1_000), nested_without_end(2_000));
        let (a, b) = (clean(&small, &CleanParams::default()), clean(&large, &CleanParams::default()));
        assert!(b.text.len() <= 3 * large.len(), "{} bytes out of {}", b.text.len(), large.len());
        assert!(b.text.len() <= 2 * a.text.len() + 4096, "{} then {}", a.text.len(), b.text.len());
        assert!(keeps_every_word(&large, &b));
        assert!(b.counts[TAGS_TOO_DEEP] > 0, "{:?}", b.counts);
        let quotes = |l: &str| l.chars().filter(|&c| c == '>').count();
        assert_eq!(b.text.lines().map(quotes).max(), Some(MAX_QUOTE_DEPTH));
    }

    #[test]
    fn a_container_past_the_depth_bound_keeps_its_words_and_its_end_tag_closes_nothing() {
        let depth = MAX_TAG_DEPTH + 40;
        let page = format!(
            "{}{{% hint %}}\nDeep words.\n{{% endhint %}}\n{}\nAfter all of them.\n",
            "{% tabs %}\n".repeat(depth),
            "{% endtabs %}\n".repeat(depth)
        );
        let c = clean(&page, &CleanParams::default());
        assert!(keeps_every_word(&page, &c));
        assert_eq!(c.counts[TAGS_TOO_DEEP], 41, "{:?}", c.counts);
        assert!(!c.counts.contains_key("unbalanced"), "{:?}", c.counts);
        assert!(c.text.contains("\nAfter all of them.\n"), "{}", c.text);
        assert!(c.text.contains("\nDeep words.\n"), "{}", c.text);
    }

    #[test]
    fn hints_nested_in_other_containers_are_quoted_at_most_the_quote_bound() {
        let page: String =
            (0..MAX_QUOTE_DEPTH + 3).map(|k| format!("{{% hint %}}\nLevel {k}.\n{{% tab %}}\n")).collect();
        let c = clean(&page, &CleanParams::default());
        assert!(keeps_every_word(&page, &c));
        let last = c.text.lines().find(|l| l.ends_with(&format!("Level {}.", MAX_QUOTE_DEPTH + 2))).unwrap();
        assert_eq!(last, format!("{}Level {}.", "> ".repeat(MAX_QUOTE_DEPTH), MAX_QUOTE_DEPTH + 2));
        assert_eq!(c.counts[TAGS_TOO_DEEP], 3, "{:?}", c.counts);
    }
}
