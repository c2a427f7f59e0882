//! AsciiDoc → markdown, line for line. `=` section titles (outside blocks) become
//! `#` headings of the same level; listing (`----`, `[source,lang]`) and literal
//! (`....`) blocks fences; comments and attribute entries blank lines; admonitions
//! (`NOTE: …`, `[NOTE]` blocks) a bold label. Other delimited blocks (example,
//! sidebar, quote, open, table) keep their content as text. A delimiter closes the
//! innermost block when it matches it, else opens one inside it, up to
//! [`MAX_BLOCK_DEPTH`]; deeper delimiters are kept as text.

use std::collections::BTreeMap;

use super::{BLOCKS_TOO_DEEP, MAX_BLOCK_DEPTH, UNCLOSED_BLOCK, bump, heading, no_heading};

const ADMONITIONS: &[&str] = &["NOTE", "TIP", "IMPORTANT", "WARNING", "CAUTION"];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Listing or literal: fenced, content verbatim.
    Code,
    /// A comment block: blank.
    Comment,
    /// A passthrough block: verbatim.
    Pass,
    /// Example, sidebar, quote, open, table: content converted.
    Text,
}

/// The kind of a delimiter line, if it is one.
fn delimiter(line: &str) -> Option<Kind> {
    let t = line.trim_end();
    if t == "--" || matches!(t, "|===" | ",===" | ":===" | "!===") {
        return Some(Kind::Text);
    }
    if t.starts_with("```") {
        return Some(Kind::Code);
    }
    let c = t.bytes().next()?;
    if t.len() < 4 || !t.bytes().all(|b| b == c) {
        return None;
    }
    Some(match c {
        b'-' | b'.' => Kind::Code,
        b'/' => Kind::Comment,
        b'+' => Kind::Pass,
        b'=' | b'*' | b'_' => Kind::Text,
        _ => return None,
    })
}

/// Converts one AsciiDoc page.
pub fn to_markdown(text: &str, counts: &mut BTreeMap<&'static str, u32>) -> String {
    let mut out: Vec<String> = Vec::new();
    // Open blocks, innermost last: (delimiter, kind).
    let mut stack: Vec<(&str, Kind)> = Vec::new();
    let mut lang = String::new();
    let mut too_deep = false;
    for line in text.split('\n') {
        let t = line.trim_end();
        let inner = stack.last().map(|s| s.1);
        if matches!(inner, Some(Kind::Code | Kind::Comment | Kind::Pass)) {
            let (delim, kind) = *stack.last().unwrap_or(&("", Kind::Text));
            let closes = if delim.starts_with("```") { t == "```" } else { t == delim };
            if closes {
                stack.pop();
                out.push(if kind == Kind::Code { "```".to_owned() } else { String::new() });
            } else {
                out.push(if kind == Kind::Comment { String::new() } else { line.to_owned() });
            }
            continue;
        }
        if let Some(kind) = delimiter(t) {
            if stack.last().is_some_and(|(d, _)| *d == t) {
                stack.pop();
                out.push(String::new());
                continue;
            }
            if stack.len() >= MAX_BLOCK_DEPTH {
                too_deep = true;
                out.push(no_heading(line));
                continue;
            }
            stack.push((t, kind));
            out.push(match kind {
                Kind::Code => {
                    let l = t.strip_prefix("```").unwrap_or(&lang).trim().to_owned();
                    format!("```{l}")
                }
                _ => String::new(),
            });
            lang.clear();
            continue;
        }
        if t.starts_with("//") {
            out.push(String::new());
            continue;
        }
        if stack.is_empty()
            && let Some(rest) = t.strip_prefix('=')
        {
            let level = 1 + rest.bytes().take_while(|&b| b == b'=').count();
            let title = rest.trim_start_matches('=');
            if level <= 6 && title.starts_with(' ') && !title.trim().is_empty() {
                out.push(heading(level, title));
                continue;
            }
        }
        if let Some(attr) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']'))
            && !attr.starts_with('[')
        {
            // A block attribute line: the next block's style.
            let mut parts = attr.split(',').map(str::trim);
            let style = parts.next().unwrap_or("");
            lang = if style == "source" { parts.next().unwrap_or("").to_owned() } else { String::new() };
            out.push(if ADMONITIONS.contains(&style) { format!("**{}:**", title_case(style)) } else { String::new() });
            continue;
        }
        if t.starts_with("[[") && t.ends_with("]]") || (stack.is_empty() && is_attribute_entry(t)) {
            out.push(String::new());
            continue;
        }
        if let Some(title) = t.strip_prefix('.')
            && title.chars().next().is_some_and(|c| !c.is_whitespace() && c != '.')
        {
            out.push(format!("**{}**", inline(title)));
            continue;
        }
        if let Some((label, rest)) = t.split_once(": ")
            && ADMONITIONS.contains(&label)
        {
            out.push(format!("> **{}:** {}", title_case(label), inline(rest)));
            continue;
        }
        out.push(no_heading(&inline(line)));
    }
    if too_deep {
        bump(counts, BLOCKS_TOO_DEEP);
    }
    if !stack.is_empty() {
        bump(counts, UNCLOSED_BLOCK);
    }
    out.join("\n")
}

/// `:name: value`, a document attribute.
fn is_attribute_entry(t: &str) -> bool {
    t.strip_prefix(':').and_then(|r| r.split_once(':')).is_some_and(|(name, _)| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_!".contains(&b))
    })
}

fn title_case(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    format!("{}{}", lower[..1].to_ascii_uppercase(), &lower[1..])
}

/// Cross references (`<<id,text>>`, `xref:page.adoc[text]`) as their text.
fn inline(line: &str) -> String {
    if !line.contains("<<") && !line.contains("xref:") {
        return line.to_owned();
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(p) = rest.find("<<") {
        let Some(end) = rest[p..].find(">>").map(|e| p + e) else { break };
        let inner = &rest[p + 2..end];
        out.push_str(&rest[..p]);
        out.push_str(inner.split_once(',').map_or(inner, |(_, text)| text.trim()));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    let (mut rest, mut done) = (out.as_str(), String::with_capacity(out.len()));
    while let Some(p) = rest.find("xref:") {
        let Some(open) = rest[p..].find('[').map(|o| p + o) else { break };
        let Some(close) = rest[open..].find(']').map(|c| open + c) else { break };
        let (target, text) = (&rest[p + 5..open], &rest[open + 1..close]);
        done.push_str(&rest[..p]);
        done.push_str(&format!("[{}]({target})", if text.is_empty() { target } else { text }));
        rest = &rest[close + 1..];
    }
    done.push_str(rest);
    done
}
