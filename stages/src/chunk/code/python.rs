//! Python: functions, classes and decorated definitions; names without a leading
//! `_` (dunders aside) in a module without one are public.

use tree_sitter::Node;

use super::{Ctx, ItemInfo, field_text, info};

/// What `n` is, when it is an item of this language.
pub(super) fn item<'t>(n: Node<'t>, src: &str, in_class: bool) -> Option<ItemInfo<'t>> {
    let name = |field: &str| field_text(n, field, src);
    match n.kind() {
        "function_definition" => info(if in_class { "method" } else { "function" }, name("name"), None),
        "class_definition" => info("class", name("name"), n.child_by_field_name("body")),
        "decorated_definition" => {
            let def = n.child_by_field_name("definition")?;
            let inner = item(def, src, in_class)?;
            Some(inner)
        }
        _ => None,
    }
}

/// Whether the package exports the item `node` defines as `name` ([`super::exported`]).
pub(super) fn exported(_cx: &Ctx<'_>, name: &str, _attached_from: usize, _node: Node<'_>) -> Option<bool> {
    Some(
        atlas_runtime::symbols::segments(name)
            .iter()
            .all(|s| !s.starts_with('_') || (s.starts_with("__") && s.ends_with("__") && s.len() > 4)),
    )
}

/// A Python module that is private by its name (`_impl.py`, `_internal/x.py`), dunder
/// files (`__init__.py`) aside.
pub(super) fn private_module(path: &str) -> bool {
    path.split('/').any(|c| c.starts_with('_') && !(c.starts_with("__") && c.trim_end_matches(".py").ends_with("__")))
}
