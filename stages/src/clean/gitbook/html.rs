//! The fixed list of HTML elements GitBook pages carry: tables to markdown tables,
//! `<details>` to a bold summary line, inline elements to their markdown.

use super::tags::parse_attrs;
use super::*;

/// HTML elements converted (or dropped) outside code; all others are left as text.
pub(super) const HTML_TAGS: &[&str] = &[
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

/// A parsed HTML tag in running text.
pub(super) struct HtmlTag<'s> {
    pub(super) name: String,
    pub(super) closing: bool,
    pub(super) raw: &'s str,
}

impl HtmlTag<'_> {
    pub(super) fn attr(&self, key: &str) -> Option<String> {
        let inner = self.raw.trim_start_matches('<').trim_end_matches('>').trim_end_matches('/');
        let (attrs, _) = parse_attrs(inner.get(self.name.len()..).unwrap_or_default());
        attrs.into_iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v)
    }
}

/// Elements that only appear inside `<table>`, converted with it.
pub(super) const TABLE_PARTS: &[&str] =
    &["thead", "tbody", "tfoot", "tr", "td", "th", "caption", "colgroup", "col", "row"];

/// Finds a known HTML tag at `s[i..]` (which starts with `<`).
pub(super) fn html_tag_at(s: &str, i: usize) -> Option<HtmlTag<'_>> {
    html_tag_in(s, i, HTML_TAGS)
}

pub(super) fn html_tag_in<'s>(s: &'s str, i: usize, names: &[&str]) -> Option<HtmlTag<'s>> {
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
pub(super) fn convert_html_inline(s: &str, counts: &mut BTreeMap<String, u32>) -> String {
    if !s.contains('<') {
        return s.to_owned();
    }
    let code = code_spans(s);
    // The first code span that does not start before `i` (the spans are in order).
    let mut span = 0;
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut icon_depth = 0usize;
    // Open links: where their '[' is in `out`, and their href.
    let mut links: Vec<(usize, String)> = Vec::new();
    while i < s.len() {
        while code.get(span).is_some_and(|&(a, _)| a < i) {
            span += 1;
        }
        if let Some(&(a, b)) = code.get(span).filter(|&&(a, _)| a == i) {
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
    if !links.is_empty() {
        let mut kept = String::with_capacity(out.len());
        let mut from = 0;
        for (at, _) in links {
            kept.push_str(&out[from..at]);
            from = at + 1;
        }
        kept.push_str(&out[from..]);
        out = kept;
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

impl Walker<'_> {
    /// `<table>…</table>` (possibly over many lines) → a markdown table.
    pub(super) fn try_table(&mut self, lines: &[&str], i: usize) -> Option<usize> {
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
    pub(super) fn try_details_block(&mut self, lines: &[&str], i: usize) -> Option<usize> {
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
}
