//! Constants, statics and module-level variables, recorded as definitions though
//! they are not items of their own.

use tree_sitter::Node;

use super::*;

/// Constants, statics and module-level variables: not items the chunker cuts at, but
/// names users look up (`const MAX_ROWS`, `DEFAULT_TIMEOUT = 30`). Walks the module
/// and container bodies (not function bodies) to [`MAX_SCOPE_DEPTH`].
pub(super) fn constants(cx: &mut Ctx<'_>, node: Node<'_>, prefix: &str, depth: usize) {
    if depth >= MAX_SCOPE_DEPTH {
        return;
    }
    let sep = cx.lang.sep();
    let qualify = |name: &str| if prefix.is_empty() { name.to_owned() } else { format!("{prefix}{sep}{name}") };
    for i in 0..node.named_child_count() {
        let Some(n) = node.named_child(i) else { continue };
        let mut found: Vec<(String, &'static str, Node<'_>)> = Vec::new();
        match (cx.lang, n.kind()) {
            (Lang::Rust, "const_item") => found.extend(field_text(n, "name", cx.src).map(|x| (x, "const", n))),
            (Lang::Rust, "static_item") => found.extend(field_text(n, "name", cx.src).map(|x| (x, "static", n))),
            (Lang::Rust, "mod_item" | "trait_item") => {
                if let (Some(name), Some(body)) = (field_text(n, "name", cx.src), n.child_by_field_name("body")) {
                    constants(cx, body, &qualify(&name), depth + 1);
                }
            }
            (Lang::Rust, "impl_item") => {
                if let (Some(ty), Some(body)) = (field_text(n, "type", cx.src), n.child_by_field_name("body")) {
                    constants(cx, body, &base_type(&ty), depth + 1);
                }
            }
            (Lang::Python, "expression_statement") => {
                if let Some(a) = n.named_child(0).filter(|a| a.kind() == "assignment")
                    && let Some(left) = a.child_by_field_name("left").filter(|l| l.kind() == "identifier")
                {
                    found.push((text(left, cx.src).to_owned(), "variable", n));
                }
            }
            (Lang::Python, "class_definition") => {
                if let (Some(name), Some(body)) = (field_text(n, "name", cx.src), n.child_by_field_name("body")) {
                    constants(cx, body, &qualify(&name), depth + 1);
                }
            }
            (Lang::Python, "decorated_definition") => {
                if let Some(def) = n.child_by_field_name("definition").filter(|d| d.kind() == "class_definition")
                    && let (Some(name), Some(body)) = (field_text(def, "name", cx.src), def.child_by_field_name("body"))
                {
                    constants(cx, body, &qualify(&name), depth + 1);
                }
            }
            (Lang::Js, "lexical_declaration" | "variable_declaration") if depth == 0 => constants_of_one(cx, n, prefix),
            (Lang::Js, "export_statement") if depth == 0 => {
                if let Some(d) = n.child_by_field_name("declaration") {
                    constants_of_one(cx, d, prefix);
                }
            }
            (Lang::Go, "const_declaration" | "var_declaration") => {
                for k in 0..n.named_child_count() {
                    let Some(spec) = n.named_child(k) else { continue };
                    for j in 0..spec.named_child_count() {
                        if let Some(name) = spec.named_child(j).filter(|x| x.kind() == "identifier") {
                            let kind = if n.kind() == "const_declaration" { "const" } else { "variable" };
                            found.push((text(name, cx.src).to_owned(), kind, spec));
                        }
                    }
                }
            }
            (Lang::Java, "field_declaration") => {
                let constant =
                    text(n, cx.src).split('=').next().is_some_and(|h| h.contains("static") && h.contains("final"));
                if constant
                    && let Some(d) = n.child_by_field_name("declarator")
                    && let Some(name) = field_text(d, "name", cx.src)
                {
                    found.push((name, "const", n));
                }
            }
            (Lang::Java, "class_declaration" | "interface_declaration" | "enum_declaration") => {
                if let (Some(name), Some(body)) = (field_text(n, "name", cx.src), n.child_by_field_name("body")) {
                    constants(cx, body, &qualify(&name), depth + 1);
                }
            }
            _ => {}
        }
        for (name, kind, at) in found {
            let sig = signature(cx, at);
            let from = attached_from(cx, n);
            record_def(cx, &qualify(&name), kind, from, at, &sig);
        }
    }
}

/// The constants of a top-level `const`/`let`/`var` of a JS/TS module (functions
/// assigned to a name are items already).
fn constants_of_one(cx: &mut Ctx<'_>, decl: Node<'_>, prefix: &str) {
    if !matches!(decl.kind(), "lexical_declaration" | "variable_declaration") {
        return;
    }
    for k in 0..decl.named_child_count() {
        let Some(d) = decl.named_child(k).filter(|d| d.kind() == "variable_declarator") else { continue };
        let is_fn = d
            .child_by_field_name("value")
            .is_some_and(|v| matches!(v.kind(), "arrow_function" | "function_expression" | "function"));
        if let Some(name) = d.child_by_field_name("name").filter(|x| x.kind() == "identifier")
            && !is_fn
        {
            let name = text(name, cx.src).to_owned();
            let full = if prefix.is_empty() { name } else { format!("{prefix}.{name}") };
            let sig = signature(cx, decl);
            let from = attached_from(cx, decl);
            record_def(cx, &full, "const", from, decl, &sig);
        }
    }
}
