//! HTML helpers shared by the crawl (pages served as HTML) and the GitBook cleaner
//! (HTML inside markdown): bounded nesting, plain text, tables.

/// HTML is converted by recursion over its element tree down to this depth; deeper
/// content (untrusted pages can nest thousands of levels) is kept as plain text.
pub const MAX_HTML_DEPTH: usize = 64;

/// HTML whose tags nest deeper than this is not parsed at all: html5ever's scope
/// checks walk the open-element stack, so each tag costs its depth and a deep page
/// costs the square of it (50,000 nested `<div>`s took 30 s). It is kept as text.
pub const MAX_PARSE_DEPTH: usize = 512;

/// Does `html` nest its tags deeper than `limit`? A linear scan: void elements,
/// self-closing tags and elements whose end tag may be left out (`p`, `li`, `td`, …)
/// do not count, so ordinary pages stay far below any limit.
pub fn html_nests_deeper_than(html: &str, limit: usize) -> bool {
    const FLAT: &[&str] = &[
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr", "p",
        "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "tbody", "thead", "tfoot", "colgroup", "rb", "rt",
        "rp",
    ];
    let b = html.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(off) = b[i..].iter().position(|&c| c == b'<') {
        i += off + 1;
        let close = b.get(i) == Some(&b'/');
        let start = i + usize::from(close);
        let len = b[start..].iter().take_while(|c| c.is_ascii_alphanumeric()).count();
        if len == 0 || !b[start].is_ascii_alphabetic() {
            continue;
        }
        let name = html[start..start + len].to_ascii_lowercase();
        if FLAT.contains(&name.as_str()) {
            continue;
        }
        if close {
            depth = depth.saturating_sub(1);
            continue;
        }
        let end = b[start..].iter().position(|&c| c == b'>').map(|e| start + e);
        if end.is_some_and(|e| e > 0 && b[e - 1] == b'/') {
            continue;
        }
        depth += 1;
        if depth > limit {
            return true;
        }
    }
    false
}

/// The text of `html` without parsing it: tags dropped, entities decoded,
/// whitespace collapsed. For markup too deep to parse.
pub fn html_as_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        out.push(' ');
        rest = match rest[i..].find('>') {
            Some(e) => &rest[i + e + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    decode_entities(&out).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Converts one HTML table to markdown rows. Cells keep their text; inline markup
/// becomes markdown; `|` is escaped; `<br>` and block breaks become spaces. Only the
/// outermost table's rows become rows: a nested table is text in its cell. The flag
/// says that markup nested deeper than [`MAX_HTML_DEPTH`] was kept as plain text.
pub fn html_table_to_markdown(html: &str) -> (Vec<String>, bool) {
    use scraper::{ElementRef, Html, Selector};
    let doc = Html::parse_fragment(html);
    let table_sel = Selector::parse("table").expect("static selector");
    let tr = Selector::parse("tr").expect("static selector");
    let Some(table) = doc.select(&table_sel).next() else { return (Vec::new(), false) };
    let mut too_deep = false;
    let mut rows: Vec<(bool, Vec<String>)> = Vec::new();
    let own_row = |row: &ElementRef<'_>| {
        row.ancestors().find(|a| a.value().as_element().is_some_and(|e| e.name() == "table")).map(|a| a.id())
            == Some(table.id())
    };
    for row in table.select(&tr).filter(own_row) {
        let mut cells = Vec::new();
        let mut header = false;
        for cell in row.child_elements() {
            let n = cell.value().name();
            if n != "td" && n != "th" {
                continue;
            }
            header |= n == "th";
            let mut text = String::new();
            cell_text(cell, &mut text, 0, &mut too_deep);
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
            let span: usize = cell.value().attr("colspan").and_then(|c| c.parse().ok()).unwrap_or(1).clamp(1, 50);
            cells.push(text);
            for _ in 1..span {
                cells.push(String::new());
            }
        }
        if !cells.is_empty() {
            rows.push((header, cells));
        }
    }
    fn cell_text(el: ElementRef<'_>, out: &mut String, depth: usize, too_deep: &mut bool) {
        if depth >= MAX_HTML_DEPTH {
            *too_deep = true;
            out.extend(el.text().flat_map(|t| [t, " "]));
            return;
        }
        let mut inner = |e: ElementRef<'_>, out: &mut String| cell_text(e, out, depth + 1, too_deep);
        for child in el.children() {
            if let Some(t) = child.value().as_text() {
                out.push_str(t);
            } else if let Some(e) = ElementRef::wrap(child) {
                match e.value().name() {
                    "br" => out.push(' '),
                    "code" => {
                        out.push('`');
                        inner(e, out);
                        out.push('`');
                    }
                    "strong" | "b" => {
                        out.push_str("**");
                        inner(e, out);
                        out.push_str("**");
                    }
                    "em" => {
                        out.push('*');
                        inner(e, out);
                        out.push('*');
                    }
                    "a" => match e.value().attr("href") {
                        Some(h) => {
                            out.push('[');
                            inner(e, out);
                            out.push_str(&format!("]({h})"));
                        }
                        None => inner(e, out),
                    },
                    "img" => {
                        let alt = e.value().attr("alt").unwrap_or_default();
                        let src = e.value().attr("src").unwrap_or_default();
                        out.push_str(&format!("![{alt}]({src})"));
                    }
                    "li" => {
                        out.push_str(" • ");
                        inner(e, out);
                    }
                    "p" | "div" | "ul" | "ol" | "table" | "tr" => {
                        out.push(' ');
                        inner(e, out);
                        out.push(' ');
                    }
                    "td" | "th" => {
                        inner(e, out);
                        out.push(' ');
                    }
                    _ => inner(e, out),
                }
            }
        }
    }
    if rows.is_empty() {
        return (Vec::new(), too_deep);
    }
    let width = rows.iter().map(|(_, c)| c.len()).max().unwrap_or(1);
    let mut out = Vec::new();
    let mut iter = rows.into_iter().peekable();
    // The first row is the header (markdown needs one), whether or not it used <th>.
    let (_, first) = iter.next().expect("non-empty");
    let pad = |mut c: Vec<String>| {
        c.resize(width, String::new());
        format!("| {} |", c.join(" | "))
    };
    out.push(pad(first));
    out.push(format!("|{}", " --- |".repeat(width)));
    for (_, cells) in iter {
        out.push(pad(cells));
    }
    (out, too_deep)
}

/// Decodes character references: numeric ones and every HTML5 named entity
/// (html-escape's table: `&mdash;`, `&hellip;`, `&rarr;` …); `&nbsp;` becomes a plain
/// space, as the text around it is searched and chunked by words.
pub fn decode_entities(s: &str) -> String {
    html_escape::decode_html_entities(&s.replace("&nbsp;", " ")).into_owned()
}
