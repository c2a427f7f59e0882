//! Go: functions, methods (qualified by their receiver) and type declarations;
//! capitalised names are public.

use tree_sitter::Node;

use super::{Ctx, ItemInfo, base_type, field_text, info, text};

/// What `n` is, when it is an item of this language.
pub(super) fn item<'t>(n: Node<'t>, src: &str, _in_class: bool) -> Option<ItemInfo<'t>> {
    let name = |field: &str| field_text(n, field, src);
    match n.kind() {
        "function_declaration" => info("function", name("name"), None),
        "method_declaration" => {
            let recv = n
                .child_by_field_name("receiver")
                .and_then(|r| r.named_child(0))
                .and_then(|p| p.child_by_field_name("type"))
                .map(|t| base_type(text(t, src)));
            let m = name("name").unwrap_or_default();
            Some(ItemInfo {
                kind: "method",
                name: match recv {
                    Some(r) => format!("{r}.{m}"),
                    None => m,
                },
                body: None,
                qualifier: None,
            })
        }
        "type_declaration" => {
            let spec = n.named_child(0)?;
            let kind = match spec.child_by_field_name("type").map(|t| t.kind()) {
                Some("struct_type") => "struct",
                Some("interface_type") => "interface",
                _ => "type",
            };
            info(kind, field_text(spec, "name", src), None)
        }
        _ => None,
    }
}

/// Whether the package exports the item `node` defines as `name` ([`super::exported`]).
pub(super) fn exported(_cx: &Ctx<'_>, name: &str, _attached_from: usize, _node: Node<'_>) -> Option<bool> {
    let short = atlas_runtime::symbols::short_name(name);
    Some(short.starts_with(|c: char| c.is_uppercase()))
}
