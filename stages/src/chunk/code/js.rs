//! JavaScript and TypeScript: functions, classes, interfaces, types and enums, and
//! `const f = () => …`; what an ES module exports is public.

use tree_sitter::Node;

use super::{Ctx, Exports, ItemInfo, field_text, info};

/// What `n` is, when it is an item of this language.
pub(super) fn item<'t>(n: Node<'t>, src: &str, _in_class: bool) -> Option<ItemInfo<'t>> {
    let name = |field: &str| field_text(n, field, src);
    match n.kind() {
        "function_declaration" | "generator_function_declaration" => info("function", name("name"), None),
        "class_declaration" | "abstract_class_declaration" | "class" => {
            info("class", name("name"), n.child_by_field_name("body"))
        }
        "method_definition" | "method_signature" | "abstract_method_signature" => info("method", name("name"), None),
        "interface_declaration" => info("interface", name("name"), n.child_by_field_name("body")),
        "type_alias_declaration" => info("type", name("name"), None),
        "enum_declaration" => info("enum", name("name"), None),
        "export_statement" => {
            let d = n.child_by_field_name("declaration")?;
            item(d, src, _in_class)
        }
        "lexical_declaration" | "variable_declaration" => {
            // `const f = () => …` / `const f = function …`
            let d = n.named_child(0)?;
            let v = d.child_by_field_name("value")?;
            matches!(v.kind(), "arrow_function" | "function_expression" | "function").then_some(())?;
            info("function", field_text(d, "name", src), None)
        }
        _ => None,
    }
}

/// Whether the package exports the item `node` defines as `name` ([`super::exported`]).
pub(super) fn exported(cx: &Ctx<'_>, name: &str, _attached_from: usize, node: Node<'_>) -> Option<bool> {
    let modifier = |n: Node<'_>, kind: &str| super::modifier(n, kind, cx.src);
    let ancestors = || super::ancestors(node);
    let short = atlas_runtime::symbols::short_name(name);
    if cx.exports == Exports::Unknown {
        return None;
    }
    let hidden = short.starts_with('#') || modifier(node, "accessibility_modifier").is_some_and(|m| m != "public");
    Some(!hidden && ancestors().any(|a| a.kind() == "export_statement"))
}
