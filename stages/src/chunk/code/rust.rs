//! Rust: functions, types, traits, modules, impls and macros; `pub` items (trait
//! items as their trait, trait impls' items, `#[macro_export]` macros) are public.

use tree_sitter::Node;

use super::{Ctx, ItemInfo, base_type, field_text, info, item_row};

/// What `n` is, when it is an item of this language.
pub(super) fn item<'t>(n: Node<'t>, src: &str, in_class: bool) -> Option<ItemInfo<'t>> {
    let name = |field: &str| field_text(n, field, src);
    match n.kind() {
        "function_item" | "function_signature_item" => {
            info(if in_class { "method" } else { "function" }, name("name"), None)
        }
        "struct_item" => info("struct", name("name"), None),
        "enum_item" => info("enum", name("name"), None),
        "union_item" => info("union", name("name"), None),
        "type_item" => info("type", name("name"), None),
        "trait_item" => info("trait", name("name"), n.child_by_field_name("body")),
        "mod_item" => info("mod", name("name"), n.child_by_field_name("body")),
        "macro_definition" => info("macro", name("name").map(|m| format!("{m}!")), None),
        "impl_item" => {
            let ty = name("type").unwrap_or_default();
            let label = match name("trait") {
                Some(tr) => format!("impl {tr} for {ty}"),
                None => format!("impl {ty}"),
            };
            Some(ItemInfo {
                kind: "impl",
                name: label,
                body: n.child_by_field_name("body"),
                qualifier: Some(base_type(&ty)),
            })
        }
        "macro_invocation" => info("macro", name("macro").map(|m| format!("{m}!")), None),
        "expression_statement" => {
            let c = n.named_child(0)?;
            (c.kind() == "macro_invocation").then_some(())?;
            info("macro", field_text(c, "macro", src).map(|m| format!("{m}!")), None)
        }
        _ => None,
    }
}

/// Whether the package exports the item `node` defines as `name` ([`super::exported`]).
pub(super) fn exported(cx: &Ctx<'_>, _name: &str, attached_from: usize, node: Node<'_>) -> Option<bool> {
    let modifier = |n: Node<'_>, kind: &str| super::modifier(n, kind, cx.src);
    let ancestors = || super::ancestors(node);
    if node.kind() == "macro_definition" {
        let attrs = cx.lines.get(attached_from..item_row(cx, node)).unwrap_or_default();
        return Some(attrs.iter().any(|l| l.contains("macro_export")));
    }
    if let Some(v) = modifier(node, "visibility_modifier") {
        return Some(v == "pub");
    }
    // No modifier: a trait's items are as public as the trait, a trait impl's
    // items as the trait they implement.
    let container = ancestors().find(|a| matches!(a.kind(), "trait_item" | "impl_item"));
    Some(match container {
        Some(t) if t.kind() == "trait_item" => modifier(t, "visibility_modifier") == Some("pub"),
        Some(i) => i.child_by_field_name("trait").is_some(),
        None => false,
    })
}
