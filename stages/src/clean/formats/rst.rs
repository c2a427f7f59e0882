//! reStructuredText → markdown, line for line. Section titles become `#` headings,
//! their level the order in which each adornment style (underline, or overline and
//! underline, of one character) is first seen; adornment lines become blank.
//! Code directives (`.. code-block::`) and `::` literal blocks become fences,
//! admonitions (`.. note::`) block quotes, comments and labels blank lines; `:ref:`
//! and `:doc:` roles become links to the page they name in the same source, when it
//! is there. A directive's body is converted as its own text one level deeper; past
//! [`MAX_BLOCK_DEPTH`] it is kept as it is.

use std::collections::BTreeMap;

use super::{BLOCKS_TOO_DEEP, DocSet, MAX_BLOCK_DEPTH, bump, heading, indent_of, no_heading};

/// Directives whose body is code (or math), fenced.
const CODE: &[&str] = &[
    "code-block",
    "code",
    "sourcecode",
    "doctest",
    "testcode",
    "testoutput",
    "ipython",
    "jupyter-execute",
    "parsed-literal",
    "math",
    "prompt",
    "productionlist",
];

/// Directives shown as a block quote, their name the quote's first word.
const ADMONITIONS: &[&str] = &[
    "note",
    "warning",
    "tip",
    "important",
    "caution",
    "danger",
    "attention",
    "hint",
    "error",
    "seealso",
    "admonition",
    "deprecated",
    "versionadded",
    "versionchanged",
    "versionremoved",
    "todo",
];

struct State<'a> {
    /// Adornment styles in the order first seen: (character, overlined).
    styles: Vec<(char, bool)>,
    rel: &'a str,
    set: &'a DocSet,
    counts: &'a mut BTreeMap<&'static str, u32>,
}

/// Converts one rst page at `rel` in its source.
pub fn to_markdown(text: &str, rel: &str, set: &DocSet, counts: &mut BTreeMap<&'static str, u32>) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut st = State { styles: Vec::new(), rel, set, counts };
    let mut out = Vec::with_capacity(lines.len());
    body(&lines, 0, &mut st, &mut out);
    out.join("\n")
}

/// The labels (`.. _name:`) a page defines, lowercased, each with the title of the
/// section it stands before ("" when none follows).
pub fn labels(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = line.trim().strip_prefix(".. _").and_then(|r| r.strip_suffix(':')) else { continue };
        if name.is_empty() || name.contains(": ") {
            continue; // an external target (`.. _name: https://…`)
        }
        // The section it stands before, looked for a few lines on (so a run of labels
        // stays linear).
        let next = lines[i + 1..].iter().take(32).position(|l| !l.trim().is_empty() && !l.trim().starts_with(".. _"));
        let title = next
            .map(|j| i + 1 + j)
            .and_then(|j| {
                let (t, u) = (lines[j], lines.get(j + 1)?);
                if adornment(t).is_some() {
                    lines.get(j + 1).map(|l| l.trim().to_owned())
                } else {
                    adornment(u).is_some().then(|| t.trim().to_owned())
                }
            })
            .unwrap_or_default();
        out.push((name.trim_matches('`').to_lowercase(), title));
    }
    out
}

/// The character of an adornment line (one punctuation character repeated, at
/// least twice), with its length.
fn adornment(line: &str) -> Option<(char, usize)> {
    let t = line.trim_end();
    let c = t.chars().next()?;
    let ok = "=-`:'\"~^_*+#<>.!$%&(),/;?@[\\]{|}".contains(c);
    let n = t.len();
    (ok && n >= 2 && t.bytes().all(|b| b == c as u8)).then_some((c, n))
}

/// A section title at `i` (top level only): the number of lines it spans and its
/// heading line, at the title's own line.
fn title_at(lines: &[&str], i: usize, st: &mut State<'_>) -> Option<(usize, usize, String)> {
    let blank_before = i == 0 || lines[i - 1].trim().is_empty();
    if !blank_before {
        return None;
    }
    let (style, span, at, title) = if let Some((c, n)) = adornment(lines[i]) {
        let t = lines.get(i + 1)?;
        let (c2, n2) = adornment(lines.get(i + 2)?)?;
        if c2 != c || n2 != n || t.trim().is_empty() || adornment(t).is_some() {
            return None;
        }
        ((c, true), 3, 1, t.trim())
    } else {
        let t = lines[i];
        let (c, n) = adornment(lines.get(i + 1)?)?;
        let len = t.trim().chars().count();
        if t.trim().is_empty() || indent_of(t) > 0 || t.trim_start().starts_with("..") || (n < len && n < 4) {
            return None;
        }
        ((c, false), 2, 0, t.trim())
    };
    let level = match st.styles.iter().position(|s| *s == style) {
        Some(p) => p + 1,
        None => {
            st.styles.push(style);
            st.styles.len()
        }
    };
    Some((span, at, heading(level, &inline(title, st))))
}

/// The end (exclusive) of the indented block after line `from - 1` at indent `ind`:
/// blank lines and lines indented deeper, trailing blank lines left out.
fn block_end(lines: &[&str], from: usize, ind: usize) -> usize {
    let mut end = from;
    let mut j = from;
    while j < lines.len() && (lines[j].trim().is_empty() || indent_of(lines[j]) > ind) {
        j += 1;
        if !lines[j - 1].trim().is_empty() {
            end = j;
        }
    }
    end
}

/// Lines `from..to` without their common indentation.
fn dedent<'a>(lines: &[&'a str], from: usize, to: usize) -> Vec<&'a str> {
    let cut = lines[from..to].iter().filter(|l| !l.trim().is_empty()).map(|l| indent_of(l)).min().unwrap_or(0);
    lines[from..to].iter().map(|l| l.get(cut..).unwrap_or("")).collect()
}

/// Converts `lines` (a page, or a directive's dedented body at `depth`) onto `out`,
/// one line for each.
fn body(lines: &[&str], depth: usize, st: &mut State<'_>, out: &mut Vec<String>) {
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if depth == 0
            && let Some((span, at, h)) = title_at(lines, i, st)
        {
            for k in 0..span {
                out.push(if k == at { h.clone() } else { String::new() });
            }
            i += span;
            continue;
        }
        let ind = indent_of(line);
        let t = line.trim();
        if t == ".." || t.starts_with(".. ") {
            i = explicit(lines, i, ind, depth, st, out);
            continue;
        }
        if t.ends_with("::") && i + 1 < lines.len() && lines[i + 1].trim().is_empty() {
            // A literal block: the fence opens on the blank line after the `::`.
            let start = i + 2 + lines[i + 2..].iter().take_while(|l| l.trim().is_empty()).count();
            let end = block_end(lines, start, ind);
            if end > start {
                let para =
                    if t == "::" { String::new() } else { inline(&line.trim_end()[..line.trim_end().len() - 1], st) };
                out.push(no_heading(&para));
                i = fenced(lines, i + 1, start, end, "", out);
                continue;
            }
        }
        out.push(no_heading(&inline(line, st)));
        i += 1;
    }
}

/// Lines `start..end` as a fenced block in `lang`, the opening fence on line
/// `open` (blank lines between it and `start` kept) and the closing one on the blank
/// line after `end` (or an added line when there is none). Returns the next line.
fn fenced(lines: &[&str], open: usize, start: usize, end: usize, lang: &str, out: &mut Vec<String>) -> usize {
    let content = dedent(lines, start, end);
    let run = content.iter().map(|l| l.trim_start().bytes().take_while(|&b| b == b'`').count()).max().unwrap_or(0);
    let fence = "`".repeat(run.max(2) + 1);
    out.push(format!("{fence}{lang}"));
    out.extend((open + 1..start).map(|_| String::new()));
    out.extend(content.iter().map(|l| (*l).to_owned()));
    out.push(fence);
    if lines.get(end).is_some_and(|l| l.trim().is_empty()) { end + 1 } else { end }
}

/// An explicit markup block at line `i` (indent `ind`): a directive, a label, a
/// comment. Returns the next line.
fn explicit(lines: &[&str], i: usize, ind: usize, depth: usize, st: &mut State<'_>, out: &mut Vec<String>) -> usize {
    let t = lines[i].trim();
    let end = block_end(lines, i + 1, ind);
    // A body takes its trailing blank lines, where a fence inside it can close.
    let full = end + lines[end..].iter().take_while(|l| l.trim().is_empty()).count();
    let rest = t.strip_prefix("..").unwrap_or(t).trim();
    let directive = rest.split_once("::").filter(|(name, _)| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_:+".contains(&b))
    });
    let Some((name, args)) = directive else {
        if rest.starts_with('[') || rest.starts_with('|') {
            // A footnote or a substitution: its text is content.
            out.push(no_heading(&inline(rest, st)));
            for l in &lines[i + 1..end] {
                out.push(no_heading(&inline(l.trim(), st)));
            }
        } else {
            // A label or a comment: blank, keeping its lines.
            out.extend((i..end).map(|_| String::new()));
        }
        return end;
    };
    let name = name.rsplit(':').next().unwrap_or(name).to_ascii_lowercase();
    let args = args.trim();
    // Options (`:linenos:`) right after the directive line are dropped.
    let opts = lines[i + 1..end].iter().take_while(|l| l.trim().starts_with(':') && !l.trim().is_empty()).count();
    let start = i + 1 + opts;
    if depth >= MAX_BLOCK_DEPTH {
        bump(st.counts, BLOCKS_TOO_DEEP);
        out.extend(lines[i..end].iter().map(|l| no_heading(l)));
        return end;
    }
    if CODE.contains(&name.as_str()) && lines[start..end].iter().any(|l| !l.trim().is_empty()) {
        let lang = match name.as_str() {
            "doctest" | "testcode" | "ipython" | "jupyter-execute" => "python",
            "math" => "math",
            _ => args.split_whitespace().next().unwrap_or(""),
        };
        out.extend((i..start - 1).map(|_| String::new()));
        return fenced(lines, start - 1, start, end, lang, out);
    }
    let inner = dedent(lines, start, full);
    let mut sub = Vec::with_capacity(inner.len());
    if name == "toctree" {
        sub.extend(inner.iter().map(|l| toc_entry(l, st)));
    } else {
        body(&inner, depth + 1, st, &mut sub);
    }
    let is_quote = ADMONITIONS.contains(&name.as_str());
    if is_quote {
        let label = match name.as_str() {
            "admonition" => String::new(),
            "seealso" => "See also:".to_owned(),
            n => format!("{}{}:", n[..1].to_ascii_uppercase(), &n[1..]),
        };
        let args = inline(args, st);
        out.push(format!("> **{}** {args}", label.trim_end()).replace("**** ", "").trim_end().to_owned());
    } else {
        out.push(no_heading(&inline(args, st)));
    }
    out.extend((i + 1..start).map(|_| String::new()));
    for l in sub {
        out.push(match (is_quote, l.is_empty()) {
            (true, true) => ">".to_owned(),
            (true, false) => format!("> {l}"),
            (false, _) => l,
        });
    }
    full
}

/// A toctree entry (`Title <path>` or `path`) as a list item linking the page.
fn toc_entry(line: &str, st: &State<'_>) -> String {
    let t = line.trim();
    if t.is_empty() {
        return String::new();
    }
    let (text, target) = split_target(t);
    match resolve_doc(target, st) {
        Some(link) => format!("- [{}]({link})", if text.is_empty() { target } else { text }),
        None => format!("- {}", no_heading(t)),
    }
}

/// `text <target>` → (text, target); `target` → ("", target).
fn split_target(s: &str) -> (&str, &str) {
    match s.strip_suffix('>').and_then(|r| r.rsplit_once('<')) {
        Some((text, target)) => (text.trim(), target.trim()),
        None => ("", s.trim()),
    }
}

/// Inline markup of one line: roles, hyperlink references.
fn inline(line: &str, st: &State<'_>) -> String {
    if !line.contains('`') {
        return line.to_owned();
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(p) = rest.find('`') {
        // A double backtick run is a code span, as in markdown.
        if rest[p..].starts_with("``") {
            let close = rest[p + 2..].find("``").map(|c| p + 2 + c + 2);
            let end = close.unwrap_or(p + 2);
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        }
        let Some(close) = rest[p + 1..].find('`').map(|c| p + 1 + c) else { break };
        let content = &rest[p + 1..close];
        let before = &rest[..p];
        let role_start = before.strip_suffix(':').and_then(|b| {
            let s = b.len() - b.bytes().rev().take_while(|c| c.is_ascii_alphanumeric() || b":-_.+".contains(c)).count();
            (b[s..].starts_with(':') && b.len() > s + 1).then_some(s)
        });
        let mut after = close + 1;
        let converted = match role_start {
            Some(s) => {
                let role = before[s..].trim_matches(':');
                let role = role.rsplit(':').next().unwrap_or(role);
                out.push_str(&before[..s]);
                role_text(role, content, st)
            }
            None => {
                out.push_str(before);
                let underscores = rest[after..].bytes().take_while(|&b| b == b'_').count().min(2);
                after += underscores;
                let (text, target) = split_target(content);
                if underscores > 0 && !text.is_empty() && target.contains("://") {
                    format!("[{text}]({target})")
                } else if underscores > 0 {
                    if text.is_empty() { target.to_owned() } else { text.to_owned() }
                } else {
                    format!("`{content}`")
                }
            }
        };
        out.push_str(&converted);
        rest = &rest[after..];
    }
    out.push_str(rest);
    out
}

/// What a role becomes: `:ref:` and `:doc:` a link when their target is in the
/// source, other roles code spans.
fn role_text(role: &str, content: &str, st: &State<'_>) -> String {
    let (text, target) = split_target(content);
    match role {
        "ref" => {
            let hit = st.set.labels.get(&target.to_lowercase());
            let shown = if !text.is_empty() {
                text
            } else {
                hit.map(|(_, t)| t.as_str()).filter(|t| !t.is_empty()).unwrap_or(target)
            };
            match hit {
                Some((path, title)) => {
                    let file = if path == st.rel { String::new() } else { relative(st.rel, path) };
                    format!("[{shown}]({file}#{})", anchor(if title.is_empty() { target } else { title }))
                }
                None => shown.to_owned(),
            }
        }
        "doc" => {
            let shown = if text.is_empty() { target } else { text };
            match resolve_doc(target, st) {
                Some(link) => format!("[{shown}]({link})"),
                None => shown.to_owned(),
            }
        }
        "math" | "abbr" | "term" | "dfn" | "sub" | "sup" | "emphasis" | "strong" => {
            if text.is_empty() {
                target.to_owned()
            } else {
                text.to_owned()
            }
        }
        _ => {
            let shown = if text.is_empty() { target } else { text };
            format!("`{}`", shown.trim_start_matches(['~', '!']))
        }
    }
}

/// A `:doc:` target (relative to the page, or from the source's root with `/`) as
/// a relative link to a document of the source.
fn resolve_doc(target: &str, st: &State<'_>) -> Option<String> {
    let dir = st.rel.rsplit_once('/').map_or("", |(d, _)| d);
    let exts = ["", ".rst", ".txt", ".md", ".ipynb"];
    let found = if let Some(abs) = target.strip_prefix('/') {
        // From the docs root: the shortest path that ends with it.
        exts.iter()
            .filter_map(|e| {
                let (want, under) = (format!("{abs}{e}"), format!("/{abs}{e}"));
                st.set.paths.iter().filter(|p| **p == want || p.ends_with(&under)).min_by_key(|p| p.len())
            })
            .next()
            .cloned()
    } else {
        let joined = join(dir, target)?;
        exts.iter().map(|e| format!("{joined}{e}")).find(|p| st.set.has(p))
    }?;
    Some(relative(st.rel, &found))
}

/// `dir/target` with `.` and `..` resolved; None past the source's root.
fn join(dir: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in target.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The path of `to` relative to the folder of `from` (both source paths).
fn relative(from: &str, to: &str) -> String {
    let from_dir: Vec<&str> = from.split('/').collect::<Vec<_>>().split_last().map_or(Vec::new(), |(_, d)| d.to_vec());
    let to_parts: Vec<&str> = to.split('/').collect();
    let common = from_dir.iter().zip(&to_parts).take_while(|(a, b)| a == b).count();
    let mut out: Vec<&str> = vec![".."; from_dir.len() - common];
    out.extend(&to_parts[common..]);
    out.join("/")
}

/// A heading's anchor as markdown renderers make it.
fn anchor(title: &str) -> String {
    title
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' | '-' => Some('-'),
            c if c.is_alphanumeric() || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
