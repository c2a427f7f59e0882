//! The languages read through one table ([`SPECS`]): C, C++, C#, Ruby, PHP, Kotlin,
//! Swift, Scala, Bash and Lua. Each entry says which nodes are items, how an item is
//! named, what its doc comments look like and what it exports; one generic reading
//! serves them all, so a language is one entry plus its tests.

use tree_sitter::Node;

use super::{Ctx, ItemInfo, MAX_SCOPE_DEPTH, text};

/// One language's rules.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Spec {
    /// The name `language_of` gives its files.
    pub language: &'static str,
    /// The nodes that are items.
    pub items: &'static [Item],
    /// Nodes that only wrap an item (C++ `template_declaration`): the item inside counts.
    pub wrappers: &'static [&'static str],
    /// Node kinds that hold a container's members when the grammar names no `body` field.
    pub bodies: &'static [&'static str],
    /// Nodes that are no item but whose children are read as the scope's own (C's
    /// `#ifdef`, `extern "C" {…}`, Kotlin's `companion object`, Ruby's `class << self` and `do` blocks,
    /// a Bash script wrapped in `{ … }`, Lua's `if not package.searchpath then … end`).
    pub transparent: &'static [&'static str],
    /// What joins a container's name to its members' (`Shape::area`, `Shape.area`).
    pub sep: &'static str,
    /// Comment node kinds.
    pub comments: &'static [&'static str],
    /// Nodes that belong to the item after them besides comments (C# `[Attribute]`).
    pub attachments: &'static [&'static str],
    /// Line comment markers that make a doc comment (longest first); `/** */` always does.
    pub doc_markers: &'static [&'static str],
    /// What the package exports.
    pub exported: Exported,
}

/// A node kind that is an item.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Item {
    /// The grammar's node kind (`function_definition`).
    pub node: &'static str,
    /// function (a method inside a class), method, class, struct, enum, union,
    /// interface, trait, type, mod (members are functions), impl (defines no name).
    pub kind: &'static str,
    /// Where its name is.
    pub name: Name,
    /// Whether it holds members.
    pub body: Body,
}

/// How an item's name is found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Name {
    /// The text of a field (`name`): `M.area` and `M:area` (Lua), `Shape::area` (C++)
    /// are qualified as written.
    Field(&'static str),
    /// C and C++: the identifier at the bottom of the `declarator` chain.
    Declarator,
    /// A fixed name (Swift's `init`).
    Fixed(&'static str),
}

/// Whether an item holds members.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Body {
    /// None (a function).
    None,
    /// Its `body` field (or a [`Spec::bodies`] child) holds members.
    Members,
    /// As `Members`, and without a body it is no item (C's `struct s;` declares).
    Required,
}

/// What a language exports, read from the item's own modifiers and its container.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Exported {
    /// Child node kinds whose words are modifiers (`storage_class_specifier`, `modifiers`,
    /// Lua's `local` keyword).
    pub modifiers: &'static [&'static str],
    /// A modifier word that makes the item private (`static`, `private`, `local`).
    pub deny: &'static [&'static str],
    /// When not empty, the item is exported only with one of these words (`public`).
    pub require: &'static [&'static str],
    /// Nodes among a container's members that open a visibility section (C++
    /// `access_specifier`, a bare Ruby `private`): `public` opens a public one,
    /// `private` or `protected` a private one. Inside a container with sections, the
    /// modifiers do not apply (a C++ member's `static` is not C's).
    pub sections: &'static [&'static str],
    /// Containers whose members are private until a section says otherwise (a C++ `class`).
    pub private_by_default: &'static [&'static str],
    /// Containers whose members are exported as the container is (C# interfaces, Swift
    /// protocols).
    pub as_container: &'static [&'static str],
    /// A name prefix that makes an item private (Bash's `_helper`).
    pub private_prefix: Option<&'static str>,
}

const fn item(node: &'static str, kind: &'static str, name: Name, body: Body) -> Item {
    Item { node, kind, name, body }
}

const NO_EXPORT_RULES: Exported = Exported {
    modifiers: &[],
    deny: &[],
    require: &[],
    sections: &[],
    private_by_default: &[],
    as_container: &[],
    private_prefix: None,
};

const C_ITEMS: &[Item] = &[
    item("function_definition", "function", Name::Declarator, Body::None),
    item("struct_specifier", "struct", Name::Field("name"), Body::Required),
    item("union_specifier", "union", Name::Field("name"), Body::Required),
    item("enum_specifier", "enum", Name::Field("name"), Body::Required),
    item("type_definition", "type", Name::Declarator, Body::None),
];

const CPP_ITEMS: &[Item] = &[
    item("function_definition", "function", Name::Declarator, Body::None),
    item("class_specifier", "class", Name::Field("name"), Body::Required),
    item("struct_specifier", "struct", Name::Field("name"), Body::Required),
    item("union_specifier", "union", Name::Field("name"), Body::Required),
    item("enum_specifier", "enum", Name::Field("name"), Body::Required),
    item("type_definition", "type", Name::Declarator, Body::None),
    item("alias_declaration", "type", Name::Field("name"), Body::None),
    item("namespace_definition", "mod", Name::Field("name"), Body::Required),
];

const C_COMMENTS: &[&str] = &["comment"];
const SLASH_DOCS: &[&str] = &["///", "//"];

/// The languages of the table.
pub(super) const SPECS: &[Spec] = &[
    Spec {
        language: "c",
        items: C_ITEMS,
        wrappers: &[],
        transparent: &[
            "preproc_if",
            "preproc_ifdef",
            "preproc_else",
            "preproc_elif",
            "linkage_specification",
            "declaration_list",
        ],
        bodies: &[],
        sep: ".",
        comments: C_COMMENTS,
        attachments: &[],
        doc_markers: SLASH_DOCS,
        exported: Exported { modifiers: &["storage_class_specifier"], deny: &["static"], ..NO_EXPORT_RULES },
    },
    Spec {
        language: "cpp",
        items: CPP_ITEMS,
        wrappers: &["template_declaration"],
        transparent: &[
            "preproc_if",
            "preproc_ifdef",
            "preproc_else",
            "preproc_elif",
            "linkage_specification",
            "declaration_list",
        ],
        bodies: &[],
        sep: "::",
        comments: C_COMMENTS,
        attachments: &[],
        doc_markers: SLASH_DOCS,
        exported: Exported {
            modifiers: &["storage_class_specifier"],
            deny: &["static"],
            sections: &["access_specifier"],
            private_by_default: &["class_specifier"],
            ..NO_EXPORT_RULES
        },
    },
    Spec {
        language: "csharp",
        items: &[
            item("class_declaration", "class", Name::Field("name"), Body::Members),
            item("record_declaration", "class", Name::Field("name"), Body::Members),
            item("struct_declaration", "struct", Name::Field("name"), Body::Members),
            item("interface_declaration", "interface", Name::Field("name"), Body::Members),
            item("enum_declaration", "enum", Name::Field("name"), Body::None),
            item("delegate_declaration", "type", Name::Field("name"), Body::None),
            item("method_declaration", "method", Name::Field("name"), Body::None),
            item("constructor_declaration", "method", Name::Field("name"), Body::None),
            item("namespace_declaration", "mod", Name::Field("name"), Body::Members),
        ],
        wrappers: &[],
        transparent: &[],
        bodies: &[],
        sep: ".",
        comments: C_COMMENTS,
        attachments: &["attribute_list"],
        doc_markers: SLASH_DOCS,
        exported: Exported {
            modifiers: &["modifier"],
            require: &["public"],
            as_container: &["interface_declaration"],
            ..NO_EXPORT_RULES
        },
    },
    Spec {
        language: "ruby",
        items: &[
            item("module", "mod", Name::Field("name"), Body::Members),
            item("class", "class", Name::Field("name"), Body::Members),
            item("method", "function", Name::Field("name"), Body::None),
            item("singleton_method", "method", Name::Field("name"), Body::None),
        ],
        wrappers: &[],
        transparent: &["singleton_class", "body_statement", "call", "do_block", "block", "block_body", "begin"],
        bodies: &[],
        sep: "::",
        comments: C_COMMENTS,
        attachments: &[],
        doc_markers: &["#"],
        exported: Exported { sections: &["identifier"], ..NO_EXPORT_RULES },
    },
    Spec {
        language: "php",
        items: &[
            item("function_definition", "function", Name::Field("name"), Body::None),
            item("class_declaration", "class", Name::Field("name"), Body::Members),
            item("interface_declaration", "interface", Name::Field("name"), Body::Members),
            item("trait_declaration", "trait", Name::Field("name"), Body::Members),
            item("enum_declaration", "enum", Name::Field("name"), Body::Members),
            item("method_declaration", "method", Name::Field("name"), Body::None),
        ],
        wrappers: &[],
        transparent: &[],
        bodies: &[],
        sep: "::",
        comments: C_COMMENTS,
        attachments: &["attribute_list"],
        doc_markers: &["///"],
        exported: Exported { modifiers: &["visibility_modifier"], deny: &["private", "protected"], ..NO_EXPORT_RULES },
    },
    Spec {
        language: "kotlin",
        items: &[
            item("function_declaration", "function", Name::Field("name"), Body::None),
            item("class_declaration", "class", Name::Field("name"), Body::Members),
            item("object_declaration", "class", Name::Field("name"), Body::Members),
        ],
        wrappers: &[],
        transparent: &["companion_object", "class_body"],
        bodies: &["class_body", "enum_class_body"],
        sep: ".",
        comments: &["line_comment", "block_comment"],
        attachments: &[],
        doc_markers: SLASH_DOCS,
        exported: Exported {
            modifiers: &["modifiers"],
            deny: &["private", "internal", "protected"],
            ..NO_EXPORT_RULES
        },
    },
    Spec {
        language: "swift",
        items: &[
            item("function_declaration", "function", Name::Field("name"), Body::None),
            item("protocol_function_declaration", "method", Name::Field("name"), Body::None),
            item("init_declaration", "method", Name::Fixed("init"), Body::None),
            item("class_declaration", "class", Name::Field("name"), Body::Members),
            item("protocol_declaration", "interface", Name::Field("name"), Body::Members),
            item("typealias_declaration", "type", Name::Field("name"), Body::None),
        ],
        wrappers: &[],
        transparent: &[],
        bodies: &[],
        sep: ".",
        comments: &["comment", "multiline_comment"],
        attachments: &[],
        doc_markers: SLASH_DOCS,
        exported: Exported {
            modifiers: &["modifiers"],
            require: &["public", "open"],
            as_container: &["protocol_declaration"],
            ..NO_EXPORT_RULES
        },
    },
    Spec {
        language: "scala",
        items: &[
            item("function_definition", "function", Name::Field("name"), Body::None),
            item("function_declaration", "function", Name::Field("name"), Body::None),
            item("class_definition", "class", Name::Field("name"), Body::Members),
            item("object_definition", "class", Name::Field("name"), Body::Members),
            item("trait_definition", "trait", Name::Field("name"), Body::Members),
            item("enum_definition", "enum", Name::Field("name"), Body::Members),
            item("type_definition", "type", Name::Field("name"), Body::None),
        ],
        wrappers: &[],
        transparent: &[],
        bodies: &[],
        sep: ".",
        comments: &["comment", "block_comment"],
        attachments: &[],
        doc_markers: SLASH_DOCS,
        exported: Exported { modifiers: &["modifiers"], deny: &["private", "protected"], ..NO_EXPORT_RULES },
    },
    Spec {
        language: "shell",
        items: &[item("function_definition", "function", Name::Field("name"), Body::None)],
        wrappers: &[],
        transparent: &["compound_statement", "if_statement", "elif_clause", "else_clause"],
        bodies: &[],
        sep: ".",
        comments: C_COMMENTS,
        attachments: &[],
        doc_markers: &["#"],
        exported: Exported { private_prefix: Some("_"), ..NO_EXPORT_RULES },
    },
    Spec {
        language: "lua",
        items: &[item("function_declaration", "function", Name::Field("name"), Body::None)],
        wrappers: &[],
        transparent: &["if_statement", "elseif_statement", "else_statement", "do_statement", "block"],
        bodies: &[],
        sep: ".",
        comments: C_COMMENTS,
        attachments: &[],
        doc_markers: &["---", "--"],
        exported: Exported { modifiers: &["local"], deny: &["local"], ..NO_EXPORT_RULES },
    },
];

/// How deep [`Spec::transparent`] nodes are opened (`#ifdef` in `#ifdef`).
const MAX_TRANSPARENT_DEPTH: usize = 8;

/// A scope's nodes with [`Spec::transparent`] ones replaced by their children, to
/// [`MAX_TRANSPARENT_DEPTH`] levels.
pub(super) fn open_transparent<'t>(spec: &Spec, nodes: &[Node<'t>]) -> Vec<Node<'t>> {
    fn open<'t>(spec: &Spec, n: Node<'t>, depth: usize, out: &mut Vec<Node<'t>>) {
        if depth >= MAX_TRANSPARENT_DEPTH || !spec.transparent.contains(&n.kind()) {
            out.push(n);
            return;
        }
        for i in 0..n.child_count() {
            if let Some(c) = n.child(i) {
                open(spec, c, depth + 1, out);
            }
        }
    }
    let mut out = Vec::with_capacity(nodes.len());
    for &n in nodes {
        open(spec, n, 0, &mut out);
    }
    out
}

/// The entry for a language, by the name `language_of` gives.
pub(super) fn spec(language: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.language == language)
}

/// Keywords that say what a class-like node declares (Swift's and Kotlin's
/// `class_declaration` covers structs, enums, interfaces and extensions).
const KIND_KEYWORDS: &[(&str, &str)] =
    &[("struct", "struct"), ("enum", "enum"), ("interface", "interface"), ("extension", "impl")];

/// What `n` is, when it is an item of `spec`'s language.
pub(super) fn item_info<'t>(spec: &Spec, n: Node<'t>, src: &str, in_class: bool) -> Option<ItemInfo<'t>> {
    let n = unwrapped(spec, n)?;
    let rule = spec.items.iter().find(|i| i.node == n.kind())?;
    let body = match rule.body {
        Body::None => None,
        Body::Members | Body::Required => n.child_by_field_name("body").or_else(|| {
            (0..n.named_child_count()).filter_map(|i| n.named_child(i)).find(|c| spec.bodies.contains(&c.kind()))
        }),
    };
    if rule.body == Body::Required && body.is_none() {
        return None;
    }
    let name = match rule.name {
        Name::Field(f) => n.child_by_field_name(f).map(|c| text(c, src).to_owned()),
        Name::Declarator => declarator_name(n, src),
        Name::Fixed(f) => Some(f.to_owned()),
    };
    let name = name.map(|s| clean_name(&s, spec.sep)).filter(|s| !s.is_empty());
    let mut kind = rule.kind;
    if kind == "class" {
        let keyword = (0..n.child_count())
            .filter_map(|i| n.child(i))
            .filter(|c| !c.is_named())
            .find_map(|c| KIND_KEYWORDS.iter().find(|(k, _)| *k == c.kind()).map(|(_, kind)| *kind));
        kind = keyword.unwrap_or(kind);
    }
    if kind == "function" && (in_class || name.as_deref().is_some_and(|s| s.contains(spec.sep))) {
        kind = "method";
    }
    let name = name.unwrap_or_else(|| "?".to_owned());
    let qualifier = (kind == "impl").then(|| name.clone());
    Some(ItemInfo { kind, name, body, qualifier })
}

/// The item a [`Spec::wrappers`] node wraps (its last named child, a few levels
/// deep at most), or `n` itself.
fn unwrapped<'t>(spec: &Spec, n: Node<'t>) -> Option<Node<'t>> {
    let mut n = n;
    for _ in 0..8 {
        if !spec.wrappers.contains(&n.kind()) {
            break;
        }
        n = n.named_child(n.named_child_count().checked_sub(1)?)?;
    }
    Some(n)
}

/// The name at the bottom of a C or C++ declarator chain: `*foo(int)` → `foo`,
/// `Shape::area() const` → `Shape::area`, `typedef struct {…} point` → `point`.
fn declarator_name(n: Node<'_>, src: &str) -> Option<String> {
    let mut d = n.child_by_field_name("declarator")?;
    for _ in 0..16 {
        match d.kind() {
            "identifier"
            | "field_identifier"
            | "type_identifier"
            | "qualified_identifier"
            | "destructor_name"
            | "operator_name"
            | "primitive_type" => return Some(text(d, src).to_owned()),
            _ => d = d.child_by_field_name("declarator").or_else(|| d.named_child(0))?,
        }
    }
    None
}

/// A name as written, on one line and without generics or parameters: Lua's `M:area`
/// as `M.area`.
fn clean_name(s: &str, sep: &str) -> String {
    let s = s.split(['<', '(', '\n']).next().unwrap_or(s).trim();
    let s = if sep == "." { s.replace(':', ".") } else { s.to_owned() };
    s.chars().filter(|c| !c.is_whitespace()).take(200).collect()
}

/// Whether the package exports the item `node` defines as `name` ([`super::exported`]).
pub(super) fn exported(cx: &Ctx<'_>, spec: &Spec, name: &str, node: Node<'_>) -> Option<bool> {
    Some(exported_at(cx, spec, name, node, 0))
}

fn exported_at(cx: &Ctx<'_>, spec: &Spec, name: &str, node: Node<'_>, depth: usize) -> bool {
    let rules = &spec.exported;
    let short = atlas_runtime::symbols::short_name(name);
    if rules.private_prefix.is_some_and(|p| short.starts_with(p)) {
        return false;
    }
    let container = node.parent().and_then(|b| b.parent()).filter(|c| spec.items.iter().any(|i| i.node == c.kind()));
    if let Some(c) = container
        && rules.as_container.contains(&c.kind())
        && depth < MAX_SCOPE_DEPTH
    {
        return exported_at(cx, spec, "", c, depth + 1);
    }
    if !rules.sections.is_empty()
        && let Some(c) = container.filter(|c| spec.items.iter().any(|i| i.node == c.kind() && i.kind != "mod"))
    {
        let section = std::iter::successors(node.prev_named_sibling(), |p| p.prev_named_sibling())
            .take(10_000)
            .filter(|p| rules.sections.contains(&p.kind()))
            .find_map(|p| {
                let t = text(p, cx.src).trim_end_matches(':').trim();
                ["public", "private", "protected"].contains(&t).then_some(t)
            });
        return match section {
            Some(s) => s == "public",
            None => !rules.private_by_default.contains(&c.kind()),
        };
    }
    let target = unwrapped(spec, node).unwrap_or(node);
    let words: Vec<&str> = (0..target.child_count())
        .filter_map(|i| target.child(i))
        .filter(|c| rules.modifiers.contains(&c.kind()))
        .flat_map(|c| text(c, cx.src).split(|ch: char| !ch.is_alphanumeric()))
        .collect();
    if words.iter().any(|w| rules.deny.contains(w)) {
        return false;
    }
    rules.require.is_empty() || words.iter().any(|w| rules.require.contains(w))
}
