//! Where an item's own first line is, and its doc comment or docstring, kept with
//! its definition.

use tree_sitter::Node;

use super::*;

/// The row of the item's own first line: past decorators, attributes and doc
/// comments that the grammar puts inside the node.
pub(super) fn item_row(cx: &Ctx<'_>, node: Node<'_>) -> usize {
    let mut row = node.start_position().row;
    if cx.lang == Lang::Python
        && node.kind() == "decorated_definition"
        && let Some(d) = node.child_by_field_name("definition")
    {
        row = d.start_position().row;
    }
    let end = end_row(node);
    while row < end {
        let t = cx.lines.get(row).copied().unwrap_or_default().trim_start();
        if t.starts_with('@') || t.starts_with("#[") || t.starts_with("//") || t.starts_with("/*") || t.starts_with('*')
        {
            row += 1;
        } else {
            break;
        }
    }
    row
}

/// The doc comment of an item: the comment lines between its attachments' start and
/// its own first line (`///`, `//`, `/** */`, `#`), or a Python docstring; its first
/// paragraph, cut to [`atlas_runtime::symbols::MAX_DOC_CHARS`].
pub(super) fn doc_comment(cx: &Ctx<'_>, from: usize, item_row: usize, node: Node<'_>) -> Option<String> {
    let mut text = String::new();
    if cx.lang == Lang::Python {
        let def = if node.kind() == "decorated_definition" { node.child_by_field_name("definition")? } else { node };
        let first = def.child_by_field_name("body")?.named_child(0)?;
        if first.kind() == "expression_statement" && first.named_child(0).is_some_and(|s| s.kind() == "string") {
            let quoted = self::text(first, cx.src).trim_start_matches(['r', 'R', 'b', 'B', 'u', 'U', 'f', 'F']);
            text = quoted.trim_matches(['"', '\'']).to_owned();
        }
    } else {
        for row in from..item_row.min(cx.lines.len()) {
            let t = cx.lines[row].trim();
            let t = t.trim_start_matches("///").trim_start_matches("//!").trim_start_matches("//");
            let t = t.trim_start_matches("/**").trim_start_matches("/*").trim_end_matches("*/");
            let t = t.trim_start_matches('*').trim();
            if t.starts_with("#[") || t.starts_with('@') {
                continue;
            }
            text.push_str(t);
            text.push('\n');
        }
    }
    let para = text.trim().split("\n\n").next().unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ");
    if para.is_empty() {
        return None;
    }
    Some(atlas_runtime::utf8::clip_chars(&para, atlas_runtime::symbols::MAX_DOC_CHARS))
}
