//! The web page's HTML, written by hand: every piece of corpus text goes through
//! [`esc`] (or the sanitising markdown renderer, or the highlighter, which escapes),
//! so a page that holds `<script>` shows it as text.

use atlas_runtime::ChunkKind;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use atlas_runtime::{Hit, Mode};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::ask::{Answer, Kind, Source};

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a query-string value.
pub fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A link target from untrusted text: http(s), mailto, in-page or relative; anything
/// else (`javascript:`, `data:`…) becomes `#`.
pub fn safe_href(href: &str) -> String {
    let h = href.trim();
    let lower = h.to_ascii_lowercase();
    let scheme = lower.split_once(':').map(|(s, _)| s).filter(|s| !s.contains(['/', '?', '#']));
    match scheme {
        None | Some("http" | "https" | "mailto") => esc(h),
        Some(_) => "#".to_owned(),
    }
}

/// What the search page was asked.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    pub q: String,
    pub mode: Mode,
    pub kind: Option<ChunkKind>,
    pub section: Option<String>,
    pub language: Option<String>,
    pub repo: Option<String>,
    pub library: Option<String>,
}

impl SearchQuery {
    /// The page URL of this search with one parameter changed (`None` drops it).
    pub fn url_with(&self, key: &str, value: Option<&str>) -> String {
        let mut pairs: Vec<(&str, String)> = vec![("q", self.q.clone()), ("mode", self.mode.as_str().to_owned())];
        let kind = self.kind.map(|k| k.as_str().to_owned());
        for (k, v) in [
            ("kind", &kind),
            ("section", &self.section),
            ("language", &self.language),
            ("repo", &self.repo),
            ("library", &self.library),
        ] {
            if let Some(v) = v {
                pairs.push((k, v.clone()));
            }
        }
        pairs.retain(|(k, _)| *k != key);
        if let Some(v) = value {
            pairs.push((key, v.to_owned()));
        }
        let qs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", enc(v))).collect();
        format!("/?{}", qs.join("&"))
    }
}

/// Facet counts among the hits a search's pool holds.
#[derive(Debug, Clone, Default)]
pub struct Facets {
    pub pool: usize,
    pub kind: BTreeMap<String, usize>,
    pub section: BTreeMap<String, usize>,
    pub language: BTreeMap<String, usize>,
    pub repo: BTreeMap<String, usize>,
    pub library: BTreeMap<String, usize>,
}

impl Facets {
    pub fn of(hits: &[Hit]) -> Facets {
        let mut f = Facets { pool: hits.len(), ..Facets::default() };
        for h in hits {
            *f.kind.entry(h.kind.to_string()).or_default() += 1;
            *f.section.entry(h.section.clone()).or_default() += 1;
            if let Some(l) = &h.language {
                *f.language.entry(l.clone()).or_default() += 1;
            }
            if let Some(r) = &h.repo {
                *f.repo.entry(r.rsplit('/').next().unwrap_or(r).to_owned()).or_default() += 1;
            }
            *f.library.entry(h.library.clone()).or_default() += 1;
        }
        // One library is no choice.
        if f.library.len() < 2 {
            f.library.clear();
        }
        f
    }
}

const HEAD: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/app.css">
<script src="/assets/app.js" defer></script>
"#;

/// The page frame: title, the bundle's name, the Search/Ask tabs, then `body`.
pub fn page(title: &str, bundle: &str, tab: &str, q: &str, body: &str) -> String {
    let tab_link = |name: &str, href: &str| {
        let current = if name == tab { r#" aria-current="page""# } else { "" };
        format!(r#"<a href="{href}"{current}>{name}</a>"#)
    };
    let qs = if q.is_empty() { String::new() } else { format!("?q={}", enc(q)) };
    format!(
        "{HEAD}<title>{} · {} · Atlas</title>\n</head>\n<body>\n<a class=\"skip\" href=\"#main\">Skip to content</a>\n\
         <header><span class=\"brand\">Atlas</span> <span class=\"bundle\">{}</span>\n<nav aria-label=\"Views\">{} {}</nav></header>\n\
         <main id=\"main\">\n{body}</main>\n</body>\n</html>\n",
        esc(title),
        esc(bundle),
        esc(bundle),
        tab_link("Search", &format!("/{qs}")),
        tab_link("Ask", &format!("/ask{qs}")),
    )
}

/// The search form (a GET form: it works without JavaScript).
pub fn search_form(s: &SearchQuery) -> String {
    let opt = |value: &str, label: &str, on: bool| {
        format!(r#"<option value="{value}"{}>{label}</option>"#, if on { " selected" } else { "" })
    };
    let mut h = String::from(r#"<form id="search" role="search" action="/" method="get">"#);
    let _ = write!(
        h,
        r#"<label for="q">Search the docs and code</label>
<div class="row"><input id="q" name="q" type="search" value="{}" autocomplete="off" placeholder="Search (press / to focus)" autofocus>
<button type="submit">Search</button></div>
<div class="row opts"><label for="mode">Mode</label> <select id="mode" name="mode">{}{}{}</select>
<label for="kind">Kind</label> <select id="kind" name="kind">{}{}{}</select>"#,
        esc(&s.q),
        opt("hybrid", "hybrid", s.mode == Mode::Hybrid),
        opt("keyword", "keyword", s.mode == Mode::Keyword),
        opt("vector", "vector", s.mode == Mode::Vector),
        opt("", "docs and code", s.kind.is_none()),
        opt("docs", "docs", s.kind == Some(ChunkKind::Docs)),
        opt("code", "code", s.kind == Some(ChunkKind::Code)),
    );
    for (k, v) in [("section", &s.section), ("language", &s.language), ("repo", &s.repo), ("library", &s.library)] {
        if let Some(v) = v {
            let _ = write!(h, r#"<input type="hidden" name="{k}" value="{}">"#, esc(v));
        }
    }
    h.push_str("</div></form>\n");
    h
}

/// The query's words worth marking in a snippet.
fn terms(q: &str) -> Vec<String> {
    let mut t: Vec<String> = q
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .filter(|w| !matches!(w.as_str(), "the" | "and" | "for" | "how" | "do" | "to" | "of" | "in" | "is" | "a"))
        .collect();
    t.sort_by_key(|w| std::cmp::Reverse(w.len()));
    t.dedup();
    t
}

/// `text` escaped, with the query's terms (as word prefixes, any case) in `<mark>`.
pub fn mark(text: &str, q: &str) -> String {
    let terms = terms(q);
    let lower = text.to_lowercase();
    if terms.is_empty() || lower.len() != text.len() {
        return esc(text);
    }
    let mut out = String::with_capacity(text.len() + 32);
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < text.len() {
        let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let found = starts_word.then(|| terms.iter().find(|t| lower[i..].starts_with(t.as_str()))).flatten();
        match found {
            Some(t) if text.is_char_boundary(i + t.len()) => {
                let _ = write!(out, "<mark>{}</mark>", esc(&text[i..i + t.len()]));
                i += t.len();
            }
            _ => {
                let c = text[i..].chars().next().unwrap_or(' ');
                out.push_str(&esc(c.encode_utf8(&mut [0; 4])));
                i += c.len_utf8();
            }
        }
    }
    out
}

/// A link to the source view of a chunk (in its library), scrolled to its first line.
pub fn source_href(h: &Hit) -> String {
    format!("/source?id={}&library={}#L{}", enc(&h.chunk_id), enc(&h.library), h.start_line)
}

/// The citation as a link (a web page) or as text (a file).
fn citation(h: &Hit) -> String {
    let c = h.citation();
    if c.starts_with("http://") || c.starts_with("https://") {
        format!(r#"<a class="cite" href="{}" rel="noopener noreferrer">{}</a>"#, safe_href(&c), esc(&c))
    } else {
        format!(r#"<code class="cite">{}</code>"#, esc(&c))
    }
}

fn badges(h: &Hit) -> String {
    let mut b = format!(r#"<span class="badge">{}</span>"#, esc(h.kind.as_str()));
    if let Some(l) = &h.language {
        let _ = write!(b, r#" <span class="badge">{}</span>"#, esc(l));
    }
    if let Some(s) = &h.symbol {
        let kind = h.symbol_kind.as_deref().unwrap_or("symbol");
        let _ = write!(b, r#" <span class="badge sym">{} <code>{}</code></span>"#, esc(kind), esc(s));
    }
    if !h.section.is_empty() {
        let _ = write!(b, r#" <span class="badge">{}</span>"#, esc(&h.section));
    }
    if !h.library.is_empty() {
        let _ = write!(b, r#" <span class="badge lib">{}</span>"#, esc(&h.library));
    }
    b
}

/// The results block: facets, then hits (what `/?…&partial=1` returns alone).
pub fn results(s: &SearchQuery, hits: &[Hit], facets: &Facets, error: Option<&str>) -> String {
    let mut h = String::from(r#"<div id="results" aria-live="polite">"#);
    if let Some(e) = error {
        let _ = write!(h, r#"<p class="error" role="alert">{}</p></div>"#, esc(e));
        return h;
    }
    if s.q.is_empty() {
        h.push_str("<p class=\"hint\">Type a question, a name or an error message.</p></div>");
        return h;
    }
    h.push_str(&facet_block(s, facets));
    if hits.is_empty() {
        let _ = write!(
            h,
            r#"<p class="empty">No hits for “{}”. Try other words, or keyword mode for exact names.</p>"#,
            esc(&s.q)
        );
    }
    h.push_str(r#"<ol class="hits">"#);
    for hit in hits {
        let snippet = mark(hit.snippet.trim(), &s.q);
        let snippet = if hit.kind == ChunkKind::Code {
            format!(r#"<pre class="snippet">{snippet}</pre>"#)
        } else {
            format!(r#"<p class="snippet">{snippet}</p>"#)
        };
        let _ = write!(
            h,
            r#"<li class="hit"><h2><a href="{}">{}</a></h2><div class="meta">{} <span class="lines">lines {}–{}</span></div>{snippet}<div class="where">{} · <a href="{}">source view</a></div></li>"#,
            source_href(hit),
            esc(&hit.place()),
            badges(hit),
            hit.start_line,
            hit.end_line,
            citation(hit),
            source_href(hit),
        );
    }
    h.push_str("</ol></div>");
    h
}

fn facet_block(s: &SearchQuery, f: &Facets) -> String {
    let mut h = format!(r#"<aside class="facets" aria-label="Filters"><p>In the top {} hits:</p>"#, f.pool);
    for (key, label, counts, chosen) in [
        ("section", "Section", &f.section, &s.section),
        ("language", "Language", &f.language, &s.language),
        ("repo", "Repository", &f.repo, &s.repo),
        ("library", "Library", &f.library, &s.library),
    ] {
        if counts.is_empty() && chosen.is_none() {
            continue;
        }
        let _ = write!(h, r#"<div class="facet"><h3>{label}</h3><ul>"#);
        if let Some(c) = chosen {
            let _ = write!(
                h,
                r#"<li><a class="on" href="{}" aria-pressed="true">{} ✕</a></li>"#,
                esc(&s.url_with(key, None)),
                esc(c)
            );
        }
        for (value, n) in counts.iter().filter(|(v, _)| Some(*v) != chosen.as_ref()) {
            let label = if value.is_empty() { "(none)" } else { value };
            let _ = write!(
                h,
                r#"<li><a href="{}">{}</a> <span class="count">{n}</span></li>"#,
                esc(&s.url_with(key, Some(value))),
                esc(label)
            );
        }
        h.push_str("</ul></div>");
    }
    h.push_str("</aside>");
    h
}

/// Markdown rendered with raw HTML shown as text, link targets checked and images as
/// links; top-level blocks are wrapped with their line range, the ones that touch
/// `lines` marked.
pub fn markdown(text: &str, lines: (u32, u32)) -> String {
    let newlines: Vec<usize> = text.match_indices('\n').map(|(i, _)| i).collect();
    let line_of = |byte: usize| newlines.partition_point(|&n| n < byte) as u32 + 1;
    let mut out = String::new();
    let mut block: Vec<Event> = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut first_marked = true;
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for (ev, range) in Parser::new_ext(text, opts).into_offset_iter() {
        if depth == 0 {
            start = range.start;
        }
        let ev = match ev {
            Event::Start(_) => {
                depth += 1;
                sanitize(ev)
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                sanitize(ev)
            }
            other => sanitize(other),
        };
        block.push(ev);
        if depth == 0 {
            let (a, b) = (line_of(start), line_of(range.end.saturating_sub(1)));
            let cited = a <= lines.1 && b >= lines.0;
            let mut html = String::new();
            pulldown_cmark::html::push_html(&mut html, block.drain(..));
            let id = if cited && first_marked {
                first_marked = false;
                r#" id="cited""#
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "<div class=\"blk{}\" data-lines=\"{a}-{b}\"{id}><a class=\"ln\" id=\"L{a}\" href=\"#L{a}\" aria-hidden=\"true\"></a>{html}</div>",
                if cited { " cited" } else { "" }
            );
        }
    }
    out
}

/// Raw HTML becomes text; links keep only safe targets; images become links.
fn sanitize(ev: Event<'_>) -> Event<'_> {
    match ev {
        Event::Html(s) | Event::InlineHtml(s) => Event::Text(s),
        Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
            let safe = if safe_href(&dest_url) == "#" { "#".into() } else { dest_url };
            Event::Start(Tag::Link { link_type, dest_url: safe, title, id })
        }
        Event::Start(Tag::Image { link_type, dest_url, title, id }) => {
            let safe = if safe_href(&dest_url) == "#" { "#".into() } else { dest_url };
            Event::Start(Tag::Link { link_type, dest_url: safe, title, id })
        }
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        other => other,
    }
}

/// The source view of one chunk's file.
#[derive(Debug)]
pub struct SourceView<'a> {
    pub hit: &'a Hit,
    pub body: String,
    pub prev: Option<&'a Hit>,
    pub next: Option<&'a Hit>,
}

pub fn source_page(v: &SourceView<'_>) -> String {
    let h = v.hit;
    let mut out = format!(
        r#"<article class="source"><h1>{}</h1><div class="meta">{} <code>{}</code> <span class="lines">lines {}–{} cited</span></div><nav class="around" aria-label="Around this chunk">"#,
        esc(&h.place()),
        badges(h),
        esc(&h.path),
        h.start_line,
        h.end_line
    );
    if let Some(url) = &h.url {
        let _ = write!(
            out,
            r#"<a href="{}" rel="noopener noreferrer">Original: {}</a> "#,
            safe_href(&h.citation()),
            esc(url)
        );
    }
    if let Some(p) = v.prev {
        let _ = write!(out, r#"<a rel="prev" href="{}">← {}</a> "#, source_href(p), esc(&p.place()));
    }
    if let Some(n) = v.next {
        let _ = write!(out, r#"<a rel="next" href="{}">{} →</a>"#, source_href(n), esc(&n.place()));
    }
    let _ = write!(out, "</nav>\n{}</article>\n", v.body);
    out
}

/// The ask form and, when there is one, the answer.
pub fn ask_page(q: &str, answer: Option<&Answer>, error: Option<&str>) -> String {
    let mut h = format!(
        r#"<form id="ask" action="/ask" method="post"><label for="q">Ask a question about the docs and code</label>
<div class="row"><input id="q" name="q" type="search" value="{}" autocomplete="off" placeholder="Ask (press / to focus)" autofocus>
<button type="submit">Ask</button></div></form>
<section id="answer" aria-live="polite" aria-label="Answer">"#,
        esc(q)
    );
    if let Some(e) = error {
        let _ = write!(h, r#"<p class="error" role="alert">{}</p>"#, esc(e));
    }
    if let Some(a) = answer {
        h.push_str(&answer_html(a));
    }
    h.push_str("</section>\n");
    h
}

/// An answer: its text (escaped; `[n]` linked to the source list), a notice when
/// the LLM failed, and the numbered sources linked to the source view.
pub fn answer_html(a: &Answer) -> String {
    let kind = match a.kind {
        Kind::Generated => "generated",
        Kind::Extractive => "extractive",
        Kind::Refused => "refused",
    };
    let mut h = format!(r#"<div class="answer {kind}" data-kind="{kind}">"#);
    if let Some(e) = &a.llm_error {
        let _ = write!(
            h,
            r#"<p class="notice" role="status">The LLM failed ({}); this is the extractive answer.</p>"#,
            esc(e)
        );
    }
    h.push_str(r#"<div class="text">"#);
    h.push_str(&answer_text(&a.answer, a.sources.len()));
    h.push_str("</div></div>");
    h.push_str(&sources_html(&a.sources));
    h
}

/// Answer text as HTML: paragraphs, `code`, and `[n]` as links to source n.
pub fn answer_text(text: &str, given: usize) -> String {
    let mut h = String::new();
    for para in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
        h.push_str("<p>");
        let mut in_code = false;
        for (i, piece) in para.split('`').enumerate() {
            if i > 0 {
                h.push_str(if in_code { "</code>" } else { "<code>" });
                in_code = !in_code;
            }
            if in_code {
                h.push_str(&esc(piece));
            } else {
                h.push_str(&link_citations(&esc(piece), given).replace('\n', "<br>"));
            }
        }
        if in_code {
            h.push_str("</code>");
        }
        h.push_str("</p>");
    }
    h
}

/// `[n]` (escaped text) → a link to `#src-n` for n in 1..=given.
fn link_citations(s: &str, given: usize) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let n = after[..digits].parse::<usize>().ok().filter(|n| (1..=given).contains(n));
        match n {
            Some(n) if after[digits..].starts_with(']') => {
                let _ = write!(out, r##"<a class="ref" href="#src-{n}">[{n}]</a>"##);
                rest = &after[digits + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

pub fn sources_html(sources: &[Source]) -> String {
    if sources.is_empty() {
        return String::new();
    }
    let mut h = String::from(r#"<h2 class="sources-h">Sources</h2><ol class="sources">"#);
    for s in sources {
        let _ = write!(
            h,
            r#"<li id="src-{}" value="{}"><a href="{}">{}</a> {}</li>"#,
            s.n,
            s.n,
            source_href(&s.hit),
            esc(&s.hit.place()),
            citation(&s.hit)
        );
    }
    h.push_str("</ol>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_html_is_text() {
        let evil = "# T\n\n<script>alert(1)</script>\n\nHi <img src=x onerror=alert(1)> [x](javascript:alert(1)) ![i](data:x)\n";
        let html = markdown(evil, (1, 1));
        assert!(!html.contains("<script") && !html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("javascript:") && !html.contains("data:x"), "{html}");
        assert_eq!(esc(r#"<a href="x">'"#), "&lt;a href=&quot;x&quot;&gt;&#39;");
        assert_eq!(mark("<b>Install</b> it", "install"), "&lt;b&gt;<mark>Install</mark>&lt;/b&gt; it");
    }

    #[test]
    fn links_keep_safe_targets_only() {
        let check = |href: &str, want: &str| assert_eq!(safe_href(href), want, "{href}");
        check("https://x.test/a?b=1&c", "https://x.test/a?b=1&amp;c");
        check("guides/install#with-helm", "guides/install#with-helm");
        check(" JavaScript:alert(1)", "#");
        check("data:text/html,x", "#");
        check("vbscript:x", "#");
        check("/a:b", "/a:b");
        check("mailto:a@x.test", "mailto:a@x.test");
    }

    #[test]
    fn cited_blocks_are_marked_by_line() {
        let md = "# Title\n\nIntro.\n\n## Part\n\nBody line.\n";
        let html = markdown(md, (5, 7));
        assert!(html.contains(r#"<div class="blk" data-lines="1-1">"#), "{html}");
        assert!(html.contains(r#"<div class="blk cited" data-lines="5-5" id="cited">"#), "{html}");
        assert!(html.contains(r#"<div class="blk cited" data-lines="7-7">"#), "{html}");
    }

    #[test]
    fn answers_link_only_given_citations() {
        assert_eq!(
            answer_text("Use `a[1]` <b> [1] and [9].", 2),
            r##"<p>Use <code>a[1]</code> &lt;b&gt; <a class="ref" href="#src-1">[1]</a> and [9].</p>"##
        );
    }
}
