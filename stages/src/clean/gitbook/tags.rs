//! GitBook's own tags (`{% hint %}`, `{% tabs %}`, `{% code %}`, `{% embed %}`, …):
//! finding and parsing them, and what each becomes.

use super::*;

/// GitBook block tags the cleaner understands (the `end…` forms are derived).
pub(super) const GITBOOK_TAGS: &[&str] = &[
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

pub(super) fn is_gitbook_tag(name: &str) -> bool {
    let base = name.strip_prefix("end").unwrap_or(name);
    GITBOOK_TAGS.contains(&base) || GITBOOK_TAGS.contains(&name)
}

/// Lines that open a hint whose next hint tag is not `{% endhint %}`.
pub(super) fn open_ended_hints(lines: &[&str]) -> std::collections::HashSet<usize> {
    let mut fence = Fence::default();
    let mut hints: Vec<(usize, bool)> = Vec::new(); // (line, is_open)
    for (i, line) in lines.iter().enumerate() {
        if fence.step(line) {
            continue;
        }
        for (_, _, tag) in tags(line) {
            match tag.name.as_str() {
                "hint" => hints.push((i, true)),
                "endhint" => hints.push((i, false)),
                _ => {}
            }
        }
    }
    let mut open_ended = std::collections::HashSet::new();
    for (k, &(line, is_open)) in hints.iter().enumerate() {
        if is_open && hints.get(k + 1).is_none_or(|&(_, next_open)| next_open) {
            open_ended.insert(line);
        }
    }
    open_ended
}

pub(super) fn hint_label(style: &str) -> String {
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
pub(super) struct Tag {
    pub(super) name: String,
    pub(super) attrs: Vec<(String, String)>,
    pub(super) positional: Option<String>,
}

impl Tag {
    pub(super) fn attr(&self, k: &str) -> Option<&str> {
        self.attrs.iter().find(|(key, _)| key.eq_ignore_ascii_case(k)).map(|(_, v)| v.as_str())
    }
}

/// The known GitBook tags of one line outside inline code, in order: `(start, end,
/// tag)`. Linear in the line, however many `{%` it holds: its code spans are found once
/// and each `%}` once.
pub(super) struct Tags<'a> {
    s: &'a str,
    code: Outside,
    /// Where the search for the next `{%` starts.
    from: usize,
    /// The `%}` found last: the first at or after the `{%` it was found for.
    close: Option<usize>,
}

pub(super) fn tags(s: &str) -> Tags<'_> {
    Tags { s, code: Outside::new(s), from: 0, close: None }
}

impl Iterator for Tags<'_> {
    type Item = (usize, usize, Tag);

    fn next(&mut self) -> Option<(usize, usize, Tag)> {
        let s = self.s;
        while let Some(rel) = s[self.from..].find("{%") {
            let start = self.from + rel;
            self.from = start + 2;
            if !self.code.outside(start) {
                continue;
            }
            let inner_start = start + 2;
            let close = match self.close.filter(|&c| c >= inner_start) {
                Some(c) => c,
                // No `%}` follows: no later `{%` is a tag either.
                None => inner_start + s[inner_start..].find("%}")?,
            };
            self.close = Some(close);
            let inner = &s[inner_start..close];
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
            let end = close + 2;
            self.from = end;
            return Some((start, end, Tag { name: name.to_ascii_lowercase(), attrs, positional }));
        }
        None
    }
}

pub(super) fn parse_attrs(s: &str) -> (Vec<(String, String)>, Option<String>) {
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

impl Walker<'_> {
    pub(super) fn gitbook_tag(&mut self, tag: &Tag) {
        let name = tag.name.as_str();
        bump(self.counts, name);
        match name {
            "hint" => {
                self.flush();
                // GitBook cannot nest hints: a hint opened inside one closes it.
                if matches!(self.stack.last(), Some(Container::Hint { .. })) {
                    bump(self.counts, "unbalanced");
                    let c = self.pop().expect("checked");
                    self.closed(c);
                }
                self.blank();
                let style = tag.attr("style").unwrap_or("info");
                let label = hint_label(style);
                let open_ended = self.open_ended_hints.contains(&self.line_no);
                self.open(Container::Hint { open_ended });
                self.emit(&format!("**{label}:**"));
                self.emit("");
            }
            "tabs" => {
                self.flush();
                self.blank();
                self.open(Container::Tabs { count: 0 });
            }
            "tab" => {
                self.flush();
                // A new tab closes the previous one of the same group.
                if matches!(self.stack.last(), Some(Container::Tab)) {
                    self.pop();
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
                self.open(Container::Tab);
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
                self.open(Container::Code);
                self.code_title = tag.attr("title").map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned);
            }
            "content-ref" => {
                self.flush();
                let url = tag.attr("url").unwrap_or_default().to_owned();
                self.open(Container::ContentRef { url, had_content: false });
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
                    self.open(Container::Other(name.to_owned()));
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
                self.open(Container::Other(name.to_owned()));
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
                self.open(Container::Other(name.to_owned()));
            }
            "swagger-response" => {
                self.flush();
                if let Some(status) = tag.attr("status") {
                    self.emit(&format!("Response {status}: {}", tag.attr("description").unwrap_or_default()));
                }
                self.open(Container::Other(name.to_owned()));
            }
            _ if name.starts_with("end") => self.close(&name[3..]),
            _ => {
                // columns, column, stepper, step, updates, update, swagger-description: structure only.
                self.flush();
                self.blank();
                self.open(Container::Other(name.to_owned()));
            }
        }
    }
}
