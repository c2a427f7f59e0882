//! Java: classes, records, interfaces, enums, methods and constructors; `public`
//! members (and interface members) are public.

use tree_sitter::Node;

use super::{Ctx, ItemInfo, field_text, info};

/// What `n` is, when it is an item of this language.
pub(super) fn item<'t>(n: Node<'t>, src: &str, _in_class: bool) -> Option<ItemInfo<'t>> {
    let name = |field: &str| field_text(n, field, src);
    match n.kind() {
        "class_declaration" | "record_declaration" => info("class", name("name"), n.child_by_field_name("body")),
        "interface_declaration" | "annotation_type_declaration" => {
            info("interface", name("name"), n.child_by_field_name("body"))
        }
        "enum_declaration" => info("enum", name("name"), n.child_by_field_name("body")),
        "method_declaration" | "constructor_declaration" => info("method", name("name"), None),
        _ => None,
    }
}

/// Whether the package exports the item `node` defines as `name` ([`super::exported`]).
pub(super) fn exported(cx: &Ctx<'_>, _name: &str, _attached_from: usize, node: Node<'_>) -> Option<bool> {
    let modifier = |n: Node<'_>, kind: &str| super::modifier(n, kind, cx.src);
    let ancestors = || super::ancestors(node);
    let public = modifier(node, "modifiers").is_some_and(|m| m.split_whitespace().any(|w| w == "public"));
    Some(public || ancestors().nth(2).is_some_and(|a| a.kind() == "interface_declaration"))
}
