//! Code in the source view: tree-sitter-highlight with the grammars the chunker
//! parses with (their own highlight queries), one numbered line per row, the cited
//! range marked. A language without a grammar, a file over [`MAX_HIGHLIGHT_BYTES`] or
//! a parse that fails is shown plain; every byte of source is HTML-escaped either way.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::OnceLock;

use tree_sitter_highlight::{HighlightConfiguration, Highlighter, HtmlRenderer};

use super::render::esc;

/// Larger files are shown without highlighting.
pub const MAX_HIGHLIGHT_BYTES: usize = 1 << 20;

/// The capture names given a class (`hl-keyword`, …); the stylesheet colours them.
const NAMES: &[&str] = &[
    "attribute",
    "comment",
    "constant",
    "constant.builtin",
    "constructor",
    "escape",
    "function",
    "function.builtin",
    "function.method",
    "keyword",
    "label",
    "module",
    "number",
    "operator",
    "property",
    "punctuation",
    "string",
    "tag",
    "type",
    "type.builtin",
    "variable.builtin",
    "variable.parameter",
];

fn config(language: &str) -> Option<&'static HighlightConfiguration> {
    static CONFIGS: OnceLock<HashMap<&'static str, HighlightConfiguration>> = OnceLock::new();
    CONFIGS
        .get_or_init(|| {
            atlas_grammar::NAMES
                .iter()
                .filter_map(|name| atlas_grammar::by_name(name))
                .filter_map(|g| {
                    let name = g.name;
                    let mut c = HighlightConfiguration::new(g.language, name, &g.highlights, "", "")
                        .map_err(|e| tracing::warn!("highlight query for {name}: {e}"))
                        .ok()?;
                    c.configure(NAMES);
                    Some((name, c))
                })
                .collect()
        })
        .get(language)
}

/// The lines of `source` as HTML (highlighted when it can be), without newlines.
fn lines(source: &str, grammar: Option<&str>) -> Vec<String> {
    let plain = || source.lines().map(esc).collect::<Vec<_>>();
    let Some(cfg) = grammar.filter(|_| source.len() <= MAX_HIGHLIGHT_BYTES).and_then(config) else {
        return plain();
    };
    let mut hl = Highlighter::new();
    let Ok(events) = hl.highlight(cfg, source.as_bytes(), None, |_| None) else { return plain() };
    let mut r = HtmlRenderer::new();
    let classes: Vec<String> = NAMES.iter().map(|n| format!("class=\"hl-{}\"", n.replace('.', "-"))).collect();
    let class = |h: tree_sitter_highlight::Highlight, out: &mut Vec<u8>| out.extend_from_slice(classes[h.0].as_bytes());
    if r.render(events, source.as_bytes(), &class).is_err() {
        return plain();
    }
    r.lines().map(|l| l.trim_end_matches('\n').to_owned()).collect()
}

/// A code file (at `path`, in `language`) as a table of numbered lines, `cited`
/// marked (the first cited line carries `id="cited"`).
pub fn code(source: &str, path: &str, language: Option<&str>, cited: (u32, u32)) -> String {
    let grammar = language.and_then(|l| atlas_grammar::of(l, path)).map(|g| g.name);
    let mut out = String::from("<div class=\"code\"><table><tbody>\n");
    for (i, line) in lines(source, grammar).iter().enumerate() {
        let n = i as u32 + 1;
        let on = (cited.0..=cited.1).contains(&n);
        let id = if n == cited.0 { " id=\"cited\"" } else { "" };
        let _ = writeln!(
            out,
            "<tr class=\"{}\"{id}><td class=\"ln\" id=\"L{n}\"><a href=\"#L{n}\">{n}</a></td><td><code>{line}</code></td></tr>",
            if on { "cited" } else { "" }
        );
    }
    out.push_str("</tbody></table></div>\n");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn code_is_highlighted_and_escaped() {
        let html = super::code("fn main() {\n    let s = \"<script>\";\n}\n", "main.rs", Some("rust"), (2, 2));
        assert!(html.contains("hl-keyword"), "{html}");
        assert!(html.contains("&lt;script&gt;") && !html.contains("<script"), "{html}");
        assert!(html.contains(r#"<tr class="cited" id="cited"><td class="ln" id="L2">"#), "{html}");
        let plain = super::code("<b>x</b>\n", "x.cob", Some("cobol"), (1, 1));
        assert!(plain.contains("&lt;b&gt;x&lt;/b&gt;"), "{plain}");
        for lang in atlas_grammar::NAMES {
            assert!(super::config(lang).is_some(), "{lang}");
        }
    }
}
