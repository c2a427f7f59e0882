//! Identifier uses in a file, for find_references.

use tree_sitter::Node;

use super::*;

/// Identifier uses in the file, each `(name, line)` once, skipping the line a name is
/// defined on. Walks the tree without recursion; at most [`MAX_REFS_PER_FILE`].
pub(super) fn references(cx: &Ctx<'_>, root: Node<'_>) -> Vec<(String, u32)> {
    let defined_on: std::collections::HashSet<(&str, u32)> =
        cx.out.defs.iter().map(|d| (atlas_runtime::symbols::short_name(&d.name), d.start_line)).collect();
    let mut seen: std::collections::HashSet<(String, u32)> = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut cursor = root.walk();
    'walk: loop {
        let n = cursor.node();
        let names = IDENTIFIER_KINDS.contains(&n.kind())
            || (n.kind() == "word" && n.parent().is_some_and(|p| p.kind() == "command_name"));
        if n.child_count() == 0 && names {
            let name = text(n, cx.src);
            let line = n.start_position().row as u32 + 1;
            if name.len() >= 2 && !defined_on.contains(&(name, line)) && seen.insert((name.to_owned(), line)) {
                out.push((name.to_owned(), line));
                if out.len() >= MAX_REFS_PER_FILE {
                    break;
                }
            }
        }
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                break 'walk;
            }
            if cursor.goto_next_sibling() {
                break;
            }
        }
    }
    out
}

/// Leaf node kinds that name something, across the grammars (and a Bash command's
/// `word`).
const IDENTIFIER_KINDS: &[&str] = &[
    "identifier",
    "type_identifier",
    "field_identifier",
    "property_identifier",
    "shorthand_property_identifier",
    "package_identifier",
    "constant",
    "simple_identifier",
    "name",
];
