//! HTML pages → markdown: listed pages of a site that have no `.md` form, and HTML files
//! inside a package (the clean stage). Only the main
//! content is kept (`main`, else `article`, else `body`, without nav, header, footer,
//! aside, script and style).

use scraper::{ElementRef, Html, Selector};

pub fn looks_like_html(body: &str, content_type: Option<&str>) -> bool {
    if content_type.is_some_and(|c| c.to_ascii_lowercase().contains("text/html")) {
        return true;
    }
    let head = body.trim_start().get(..100).unwrap_or(body.trim_start()).to_ascii_lowercase();
    head.starts_with("<!doctype html") || head.starts_with("<html")
}

pub fn to_markdown(html: &str) -> String {
    if crate::text::html::html_nests_deeper_than(html, crate::text::html::MAX_PARSE_DEPTH) {
        return tidy(&crate::text::html::html_as_text(html));
    }
    let doc = Html::parse_document(html);
    let pick = |sel: &str| Selector::parse(sel).ok().and_then(|s| doc.select(&s).next());
    let root = pick("main").or_else(|| pick("article")).or_else(|| pick("[role=main]")).or_else(|| pick("body"));
    let mut out = String::new();
    if let Some(root) = root {
        if pick("main").is_none()
            && let Some(t) = pick("title")
        {
            let title = t.text().collect::<String>();
            if !title.trim().is_empty() && !root.text().any(|x| x.contains(title.trim())) {
                out.push_str(&format!("# {}\n\n", title.trim()));
            }
        }
        block(root, &mut out, 0, 0);
    }
    tidy(&out)
}

/// Element nesting past this is kept as plain text (see [`crate::text::html::MAX_HTML_DEPTH`]).
const MAX_DEPTH: usize = crate::text::html::MAX_HTML_DEPTH;

fn flat_text(e: ElementRef<'_>) -> String {
    collapse(&e.text().collect::<Vec<_>>().join(" "))
}

/// Lists nested deeper than this are not indented further.
const MAX_LIST_INDENT: usize = 8;

fn block(el: ElementRef<'_>, out: &mut String, list_depth: usize, depth: usize) {
    if depth >= MAX_DEPTH {
        out.push_str(&flat_text(el));
        return;
    }
    let depth = depth + 1;
    for child in el.children() {
        if let Some(text) = child.value().as_text() {
            let t = collapse(text);
            if !t.trim().is_empty() {
                out.push_str(&t);
            }
            continue;
        }
        let Some(e) = ElementRef::wrap(child) else { continue };
        let name = e.value().name();
        match name {
            "script" | "style" | "nav" | "header" | "footer" | "aside" | "noscript" | "template" | "svg" | "button" => {
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = usize::from(name.as_bytes()[1] - b'0');
                let text = inline_text(e, depth);
                if !text.is_empty() {
                    out.push_str(&format!("\n\n{} {}\n\n", "#".repeat(level), text));
                }
            }
            "p" | "div" | "section" | "article" | "main" | "figure" | "blockquote" | "dl" => {
                out.push_str("\n\n");
                if name == "blockquote" {
                    let mut inner = String::new();
                    block(e, &mut inner, list_depth, depth);
                    for l in tidy(&inner).lines() {
                        out.push_str(&format!("> {l}\n"));
                    }
                } else {
                    block(e, out, list_depth, depth);
                }
                out.push_str("\n\n");
            }
            "pre" => {
                let code = e.text().collect::<String>();
                let lang = e
                    .select(&Selector::parse("code").expect("static"))
                    .next()
                    .and_then(|c| c.value().attr("class"))
                    .and_then(|c| c.split_whitespace().find_map(|k| k.strip_prefix("language-")))
                    .unwrap_or_default()
                    .to_owned();
                out.push_str(&format!("\n\n```{lang}\n{}\n```\n\n", code.trim_end_matches('\n')));
            }
            "ul" | "ol" => {
                out.push_str("\n\n");
                for (i, li) in e.child_elements().filter(|c| c.value().name() == "li").enumerate() {
                    let marker = if name == "ol" { format!("{}.", i + 1) } else { "-".to_owned() };
                    let mut inner = String::new();
                    block(li, &mut inner, list_depth + 1, depth);
                    let inner = tidy(&inner);
                    let mut lines = inner.lines();
                    // Each level re-indents its items' lines: past MAX_LIST_INDENT levels
                    // items are not indented further, so deep nesting stays linear in size.
                    let (pad, more) = match list_depth < MAX_LIST_INDENT {
                        true => ("  ".repeat(list_depth), "  "),
                        false => (String::new(), ""),
                    };
                    out.push_str(&format!("{pad}{marker} {}\n", lines.next().unwrap_or_default()));
                    for l in lines {
                        out.push_str(&format!("{pad}{more}{l}\n"));
                    }
                }
                out.push_str("\n\n");
            }
            "table" => {
                out.push_str("\n\n");
                for row in crate::text::html::html_table_to_markdown(&e.html()).0 {
                    out.push_str(&row);
                    out.push('\n');
                }
                out.push_str("\n\n");
            }
            "br" => out.push('\n'),
            "hr" => out.push_str("\n\n***\n\n"),
            _ => out.push_str(&inline(e, depth)),
        }
    }
}

/// Inline markup of one element.
fn inline(e: ElementRef<'_>, depth: usize) -> String {
    if depth >= MAX_DEPTH {
        return flat_text(e);
    }
    let inner = || e.children().map(|n| inline_node(n, depth + 1)).collect::<String>();
    match e.value().name() {
        "a" => {
            let text = inner();
            match e.value().attr("href") {
                Some(h) if !text.trim().is_empty() && !h.starts_with("javascript:") => {
                    format!("[{}]({h})", text.trim())
                }
                _ => text,
            }
        }
        "strong" | "b" => wrap("**", &inner()),
        "em" | "i" => wrap("*", &inner()),
        "code" | "kbd" => wrap("`", &e.text().collect::<String>()),
        "img" => {
            format!("![{}]({})", e.value().attr("alt").unwrap_or_default(), e.value().attr("src").unwrap_or_default())
        }
        "br" => "\n".to_owned(),
        "script" | "style" | "svg" | "button" => String::new(),
        _ => inner(),
    }
}

fn inline_node(n: ego_tree::NodeRef<'_, scraper::Node>, depth: usize) -> String {
    if let Some(t) = n.value().as_text() {
        return collapse(t);
    }
    ElementRef::wrap(n).map(|e| inline(e, depth)).unwrap_or_default()
}

fn inline_text(e: ElementRef<'_>, depth: usize) -> String {
    e.children().map(|n| inline_node(n, depth)).collect::<String>().split_whitespace().collect::<Vec<_>>().join(" ")
}

fn wrap(marker: &str, s: &str) -> String {
    let t = s.trim();
    if t.is_empty() { String::new() } else { format!("{marker}{t}{marker}") }
}

fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
    out
}

/// Trims lines and keeps at most one blank line in a row (outside fences).
fn tidy(s: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut fence = false;
    for line in s.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            out.push(line.trim().to_owned());
            continue;
        }
        if fence {
            out.push(line.to_owned());
            continue;
        }
        let l = line.trim_end();
        let l = if l.trim_start().starts_with(['-', '>']) || l.starts_with("  ") { l } else { l.trim_start() };
        if l.is_empty() && out.last().is_none_or(|p| p.is_empty()) {
            continue;
        }
        out.push(l.to_owned());
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzz test in a fresh clone: 60 nested `<ul><li>` gave markdown
    /// quadratic in the depth (every level re-indented every line below it).
    #[test]
    fn deeply_nested_lists_stay_linear_in_size() {
        for depth in [9, 60, 400] {
            let doc = "<ul><li>".repeat(depth) + "x";
            let md = to_markdown(&doc);
            assert!(md.len() <= 4 * doc.len() + 1024, "{depth} levels: {} bytes from {}", md.len(), doc.len());
            assert!(md.contains('x'), "{depth}: the text is kept");
        }
    }

    #[test]
    fn main_content_becomes_markdown() {
        let html = r#"<!doctype html><html><head><title>T</title></head><body>
            <nav>Menu</nav>
            <main><h1>Install</h1><p>Run <code>helm</code> then <a href="/next">go on</a>.</p>
            <ul><li>one</li><li><b>two</b></li></ul>
            <pre><code class="language-bash">echo hi
</code></pre>
            <table><tr><th>A</th></tr><tr><td>1</td></tr></table></main>
            <footer>(c)</footer></body></html>"#;
        assert_eq!(
            to_markdown(html),
            "# Install\n\nRun `helm` then [go on](/next).\n\n- one\n- **two**\n\n```bash\necho hi\n```\n\n| A |\n| --- |\n| 1 |\n"
        );
    }
}
