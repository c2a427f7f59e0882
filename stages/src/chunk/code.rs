//! Structure-aware chunks for code (tree-sitter): one chunk per function, method,
//! class, struct, enum, trait, impl block or interface, with its decorators or
//! attributes, doc comments and the comment lines directly above it.
//!
//! - Symbols are qualified by their containers: `Class.method` (Python, JS/TS, Go,
//!   Java), `Type::method` and `module::item` (Rust, where an `impl`'s target type
//!   gives the prefix).
//! - A container (class, impl, trait, mod, interface) that fits `code_max_lines` is
//!   one chunk listing its members; a larger one is split into a header chunk and one
//!   chunk per member. Its closing delimiter lines are dropped (counted).
//! - A function that fits stays whole, nested functions included; a longer one is
//!   split at statement boundaries into parts that each repeat the signature line as
//!   context (the `overlap` bytes), keeping exact line ranges.
//! - Code between items (imports, constants, big dicts) forms module chunks.
//! - Runs of tiny items are merged up to `code_merge_max_lines`, keeping every symbol.
//! - A leading comment block that carries a licence is dropped and counted; so are
//!   blank lines between chunks. Every line of a file is in exactly one chunk or
//!   dropped.

use tree_sitter::{Language, Node, Parser};

use super::ChunkParams;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChunk {
    /// 1-based inclusive lines.
    pub start_line: u32,
    pub end_line: u32,
    /// Context prefix (a signature line) + the exact lines.
    pub text: String,
    /// Bytes of `text` that are context, not lines of the range.
    pub overlap: u32,
    pub symbol: Option<String>,
    /// function, method, class, struct, enum, union, trait, impl, interface, type, mod,
    /// macro, module (code between items), merged.
    pub symbol_kind: String,
    pub signature: Option<String>,
    /// Symbols inside the chunk: members of a whole container, the items of a merged
    /// run.
    pub symbols: Vec<String>,
    /// The header of a container split into members (never merged with neighbours).
    pub header: bool,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CodeChunks {
    pub chunks: Vec<CodeChunk>,
    /// `(first line, last line, reason)`, 1-based inclusive.
    pub dropped: Vec<(u32, u32, &'static str)>,
    /// Every definition the parse saw, chunked whole, split or merged alike.
    pub defs: Vec<CodeDef>,
    /// Identifier uses, `(name, 1-based line)`, each once per line; the chunk stage
    /// keeps those that name a definition of the corpus.
    pub refs: Vec<(String, u32)>,
}

/// A definition in one file (the chunk stage places it in its chunk).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CodeDef {
    /// Qualified like the chunk symbols: `Type::method`, `Class.method`.
    pub name: String,
    pub kind: String,
    /// 1-based inclusive lines of the item itself (its attached comments excluded).
    pub start_line: u32,
    pub end_line: u32,
    pub signature: Option<String>,
    pub doc: Option<String>,
    /// Whether the package exports it ([`exported`]); None where the file does not say.
    pub exported: Option<bool>,
}

/// The most identifier uses recorded per file (a hostile file can hold millions).
const MAX_REFS_PER_FILE: usize = 20_000;
/// The most definitions recorded per file.
const MAX_DEFS_PER_FILE: usize = 20_000;

impl CodeChunks {
    pub fn dropped_lines(&self, reason: &str) -> u32 {
        self.dropped.iter().filter(|d| d.2 == reason).map(|d| d.1 - d.0 + 1).sum()
    }
}

/// The tree-sitter grammar of a language, by the name `source::language_of` gives.
pub fn grammar(language: &str, path: &str) -> Option<Language> {
    atlas_grammar::of(language, path).map(|g| g.language)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    Rust,
    Js,
    Go,
    Java,
}

impl Lang {
    fn of(language: &str) -> Option<Lang> {
        Some(match language {
            "python" => Lang::Python,
            "rust" => Lang::Rust,
            "javascript" | "typescript" => Lang::Js,
            "go" => Lang::Go,
            "java" => Lang::Java,
            _ => return None,
        })
    }

    fn sep(self) -> &'static str {
        if self == Lang::Rust { "::" } else { "." }
    }

    fn is_comment(self, kind: &str) -> bool {
        matches!(kind, "comment" | "line_comment" | "block_comment")
    }

    /// Nodes that belong to the item after them (besides comments).
    fn is_attachment(self, kind: &str) -> bool {
        matches!(kind, "attribute_item" | "decorator")
    }
}

/// What an item is: its kind, name, and (for containers) the node holding members.
struct ItemInfo<'t> {
    kind: &'static str,
    name: String,
    body: Option<Node<'t>>,
    /// For Rust impls: the type the methods qualify with.
    qualifier: Option<String>,
}

fn text<'s>(n: Node<'_>, src: &'s str) -> &'s str {
    n.utf8_text(src.as_bytes()).unwrap_or_default()
}

fn field_text(n: Node<'_>, field: &str, src: &str) -> Option<String> {
    n.child_by_field_name(field).map(|c| text(c, src).to_owned())
}

/// The base name of a type expression: `&'a mut Foo<T>` → `Foo`, `crate::x::Bar` → `Bar`.
fn base_type(t: &str) -> String {
    let t = t.trim_start_matches('&').trim_start();
    let t = if let Some(rest) = t.strip_prefix('\'') { rest.split_once(' ').map_or(rest, |(_, r)| r) } else { t };
    let t = t.trim_start_matches("mut ").trim_start_matches("dyn ").trim();
    let t = t.split('<').next().unwrap_or(t);
    let t = t.rsplit("::").next().unwrap_or(t);
    t.trim_start_matches('*').trim().to_owned()
}

fn item_info<'t>(lang: Lang, n: Node<'t>, src: &str, in_class: bool) -> Option<ItemInfo<'t>> {
    let name = |field: &str| field_text(n, field, src);
    let k = n.kind();
    let info = |kind, name: Option<String>, body: Option<Node<'t>>| {
        Some(ItemInfo { kind, name: name.unwrap_or_else(|| "?".to_owned()), body, qualifier: None })
    };
    match lang {
        Lang::Python => match k {
            "function_definition" => info(if in_class { "method" } else { "function" }, name("name"), None),
            "class_definition" => info("class", name("name"), n.child_by_field_name("body")),
            "decorated_definition" => {
                let def = n.child_by_field_name("definition")?;
                let inner = item_info(lang, def, src, in_class)?;
                Some(inner)
            }
            _ => None,
        },
        Lang::Rust => match k {
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
        },
        Lang::Js => match k {
            "function_declaration" | "generator_function_declaration" => info("function", name("name"), None),
            "class_declaration" | "abstract_class_declaration" | "class" => {
                info("class", name("name"), n.child_by_field_name("body"))
            }
            "method_definition" | "method_signature" | "abstract_method_signature" => {
                info("method", name("name"), None)
            }
            "interface_declaration" => info("interface", name("name"), n.child_by_field_name("body")),
            "type_alias_declaration" => info("type", name("name"), None),
            "enum_declaration" => info("enum", name("name"), None),
            "export_statement" => {
                let d = n.child_by_field_name("declaration")?;
                item_info(lang, d, src, in_class)
            }
            "lexical_declaration" | "variable_declaration" => {
                // `const f = () => …` / `const f = function …`
                let d = n.named_child(0)?;
                let v = d.child_by_field_name("value")?;
                matches!(v.kind(), "arrow_function" | "function_expression" | "function").then_some(())?;
                info("function", field_text(d, "name", src), None)
            }
            _ => None,
        },
        Lang::Go => match k {
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
        },
        Lang::Java => match k {
            "class_declaration" | "record_declaration" => info("class", name("name"), n.child_by_field_name("body")),
            "interface_declaration" | "annotation_type_declaration" => {
                info("interface", name("name"), n.child_by_field_name("body"))
            }
            "enum_declaration" => info("enum", name("name"), n.child_by_field_name("body")),
            "method_declaration" | "constructor_declaration" => info("method", name("name"), None),
            _ => None,
        },
    }
}

/// A unit of one scope: an item (with what is attached above it) or other code.
struct Unit<'t> {
    start: usize, // 0-based rows
    end: usize,
    item: Option<(ItemInfo<'t>, Node<'t>)>,
}

struct Ctx<'a> {
    lang: Lang,
    src: &'a str,
    lines: Vec<&'a str>,
    p: &'a ChunkParams,
    out: CodeChunks,
    /// How many containers [`scope`] is inside.
    depth: usize,
    /// What says what the file exports ([`exported`]).
    exports: Exports,
}

/// What a file says of what it exports, beyond each item's own marking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exports {
    /// Each item says (Rust `pub`, Go's capital, Java `public`, an ES module's `export`).
    ByItem,
    /// A Python module whose own name starts with `_`: nothing in it is public.
    None,
    /// A JS/TS file without `export` statements (a CommonJS module, a script): unknown.
    Unknown,
}

/// Containers nested deeper than this (a hostile file can nest thousands) are chunked
/// as plain lines instead of being split member by member.
const MAX_SCOPE_DEPTH: usize = 32;

/// Chunks one code file. `language` as `source::language_of` names it.
pub fn chunk_code(src: &str, language: &str, path: &str, params: &ChunkParams) -> Option<CodeChunks> {
    let lang = Lang::of(language)?;
    let mut parser = Parser::new();
    parser.set_language(&grammar(language, path)?).ok()?;
    let tree = parser.parse(src, None)?;
    let root = tree.root_node();
    let exports = match lang {
        Lang::Python if private_module(path) => Exports::None,
        Lang::Js
            if !(0..root.named_child_count())
                .any(|i| root.named_child(i).is_some_and(|c| c.kind() == "export_statement")) =>
        {
            Exports::Unknown
        }
        _ => Exports::ByItem,
    };
    let mut cx =
        Ctx { lang, src, lines: src.lines().collect(), p: params, out: CodeChunks::default(), depth: 0, exports };
    if cx.lines.is_empty() {
        return Some(cx.out);
    }
    let mut children: Vec<Node<'_>> = (0..root.child_count()).filter_map(|i| root.child(i)).collect();
    drop_license(&mut cx, &mut children);
    let units = units(&cx, &children, false);
    let mut chunks = Vec::new();
    scope(&mut cx, units, "", &mut chunks);
    chunks.sort_by_key(|c| c.start_line);
    let chunks = merge_tiny(&mut cx, chunks);
    cx.out.chunks = chunks;
    account_gaps(&mut cx);
    constants(&mut cx, root, "", 0);
    cx.out.defs.sort_by(|a, b| (a.start_line, &a.name).cmp(&(b.start_line, &b.name)));
    cx.out.defs.dedup();
    cx.out.defs.truncate(MAX_DEFS_PER_FILE);
    cx.out.refs = references(&cx, root);
    Some(cx.out)
}

/// Drops a leading comment block that carries a licence (after a Python module
/// docstring): from the first to the last group of comment lines that mentions a
/// licence or a copyright.
fn drop_license(cx: &mut Ctx<'_>, children: &mut Vec<Node<'_>>) {
    let docstring = cx.lang == Lang::Python
        && children.first().is_some_and(|n| {
            n.kind() == "expression_statement" && n.named_child(0).is_some_and(|s| s.kind() == "string")
        });
    let from = usize::from(docstring);
    let to = children[from..].iter().position(|n| !cx.lang.is_comment(n.kind())).map_or(children.len(), |p| from + p);
    if from == to {
        return;
    }
    // Comment groups: runs of comments on consecutive lines.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for k in from..to {
        match groups.last_mut() {
            Some(g) if children[g.1].end_position().row + 1 >= children[k].start_position().row => g.1 = k,
            _ => groups.push((k, k)),
        }
    }
    let is_license = |a: usize, b: usize| {
        let t: String = children[a..=b].iter().map(|n| text(*n, cx.src).to_ascii_lowercase()).collect();
        t.contains("licence") || t.contains("license") || t.contains("copyright") || t.contains("spdx-")
    };
    // From the first to the last group that mentions a licence.
    let Some(&(first, _)) = groups.iter().find(|&&(a, b)| is_license(a, b)) else { return };
    let Some(&(_, last)) = groups.iter().rev().find(|&&(a, b)| is_license(a, b)) else { return };
    let start = children[first].start_position().row;
    let end = end_row(children[last]);
    cx.out.dropped.push((start as u32 + 1, end as u32 + 1, "license"));
    children.drain(first..=last);
}

/// Groups a scope's nodes into items (with comments and attributes directly above
/// them) and runs of other code.
fn units<'t>(cx: &Ctx<'_>, nodes: &[Node<'t>], in_class: bool) -> Vec<Unit<'t>> {
    let mut out: Vec<Unit<'t>> = Vec::new();
    let mut pending: Option<usize> = None; // start row of comments/attributes awaiting an item
    let mut pending_end = 0usize;
    for &n in nodes {
        if !n.is_named() {
            // punctuation such as `;` belongs with what precedes it
            if let Some(last) = out.last_mut() {
                last.end = last.end.max(n.end_position().row);
            }
            continue;
        }
        let (s, e) = (n.start_position().row, end_row(n));
        // A node starting on a row the previous unit covers (`foo!(…);` then `;`, a
        // trailing comment) belongs to that unit: no line may be in two chunks.
        if pending.is_none()
            && let Some(last) = out.last_mut()
            && s <= last.end
        {
            last.end = last.end.max(e);
            continue;
        }
        if cx.lang.is_comment(n.kind()) || cx.lang.is_attachment(n.kind()) {
            match pending {
                Some(_) if s <= pending_end + 1 => pending_end = pending_end.max(e),
                Some(ps) => {
                    out.push(Unit { start: ps, end: pending_end, item: None });
                    pending = Some(s);
                    pending_end = e;
                }
                None => {
                    pending = Some(s);
                    pending_end = e;
                }
            }
            continue;
        }
        let info = item_info(cx.lang, n, cx.src, in_class);
        let start = match pending.take() {
            Some(ps) if s <= pending_end + 1 && info.is_some() => ps,
            Some(ps) => {
                out.push(Unit { start: ps, end: pending_end, item: None });
                s
            }
            None => s,
        };
        out.push(Unit { start, end: e, item: info.map(|i| (i, n)) });
    }
    if let Some(ps) = pending {
        out.push(Unit { start: ps, end: pending_end, item: None });
    }
    out
}

/// The last row a node really covers (a node ending at column 0 ends on the line before).
fn end_row(n: Node<'_>) -> usize {
    let e = n.end_position();
    if e.column == 0 && e.row > n.start_position().row { e.row - 1 } else { e.row }
}

fn line_span(cx: &Ctx<'_>, start: usize, end: usize) -> String {
    cx.lines[start..=end.min(cx.lines.len() - 1)].join("\n")
}

fn plain(cx: &Ctx<'_>, start: usize, end: usize, kind: &str, symbol: Option<String>) -> CodeChunk {
    CodeChunk {
        start_line: start as u32 + 1,
        end_line: end as u32 + 1,
        text: line_span(cx, start, end),
        overlap: 0,
        symbol,
        symbol_kind: kind.to_owned(),
        signature: None,
        symbols: Vec::new(),
        header: false,
    }
}

/// The one-line signature of an item: its first line after attachments.
fn signature(cx: &Ctx<'_>, n: Node<'_>) -> String {
    // Skip decorators/attributes that tree-sitter includes in the node.
    let mut row = n.start_position().row;
    if cx.lang == Lang::Python
        && n.kind() == "decorated_definition"
        && let Some(d) = n.child_by_field_name("definition")
    {
        row = d.start_position().row;
    }
    let mut sig = cx.lines.get(row).copied().unwrap_or_default().trim().to_owned();
    // Java and Rust put annotations/attributes on the item's own first lines.
    let mut r = row;
    while (sig.starts_with('@') || sig.starts_with("#[") || sig.starts_with("///") || sig.starts_with("//"))
        && r < end_row(n)
    {
        r += 1;
        sig = cx.lines.get(r).copied().unwrap_or_default().trim().to_owned();
    }
    sig.chars().take(200).collect()
}

/// Chunks the units of one scope; `prefix` qualifies symbols.
fn scope<'t>(cx: &mut Ctx<'_>, scope_units: Vec<Unit<'t>>, prefix: &str, out: &mut Vec<CodeChunk>) {
    if cx.depth >= MAX_SCOPE_DEPTH {
        if let (Some(first), Some(last)) = (scope_units.first(), scope_units.last()) {
            module_code(cx, first.start, last.end, prefix, out);
        }
        return;
    }
    cx.depth += 1;
    scope_inner(cx, scope_units, prefix, out);
    cx.depth -= 1;
}

fn scope_inner<'t>(cx: &mut Ctx<'_>, scope_units: Vec<Unit<'t>>, prefix: &str, out: &mut Vec<CodeChunk>) {
    let max = cx.p.code_max_lines.max(4);
    let mut code_run: Option<(usize, usize)> = None;
    let flush = |cx: &mut Ctx<'_>, run: &mut Option<(usize, usize)>, out: &mut Vec<CodeChunk>| {
        if let Some((s, e)) = run.take() {
            module_code(cx, s, e, prefix, out);
        }
    };
    for u in scope_units {
        let Some((info, node)) = u.item else {
            // A run of code breaks where lines it does not own (a dropped licence) lie between.
            if let Some((_, e)) = code_run
                && (e + 1..u.start).any(|r| !cx.lines[r].trim().is_empty())
            {
                flush(cx, &mut code_run, out);
            }
            code_run = Some(match code_run {
                Some((s, _)) => (s, u.end),
                None => (u.start, u.end),
            });
            continue;
        };
        flush(cx, &mut code_run, out);
        let sep = cx.lang.sep();
        let symbol = if prefix.is_empty() || info.kind == "impl" {
            info.name.clone()
        } else {
            format!("{prefix}{sep}{}", info.name)
        };
        let member_prefix = match (&info.qualifier, info.kind) {
            (Some(q), _) => {
                if prefix.is_empty() || cx.lang != Lang::Rust {
                    q.clone()
                } else {
                    format!("{prefix}{sep}{q}")
                }
            }
            _ => symbol.clone(),
        };
        let lines = u.end - u.start + 1;
        let sig = signature(cx, node);
        record_def(cx, &symbol, info.kind, u.start, node, &sig);
        match info.body {
            Some(body) if lines > max => {
                // Split the container: header, members, closing lines dropped.
                let members: Vec<Node<'_>> = (0..body.child_count()).filter_map(|i| body.child(i)).collect();
                let inner: Vec<Node<'_>> =
                    members.into_iter().filter(|m| !(m.kind() == "{" || m.kind() == "}" || m.kind() == ":")).collect();
                let mut member_units = units(cx, &inner, info.kind != "mod");
                // Code before the first member item (docstring, fields) stays in the header.
                let first_item = member_units.iter().position(|m| m.item.is_some()).unwrap_or(member_units.len());
                let header_end = match member_units.get(first_item) {
                    Some(m) => m.start.saturating_sub(1).max(u.start),
                    None => member_units.last().map_or(u.start, |m| m.end).max(u.start),
                };
                let last_member = member_units.last().map_or(header_end, |m| m.end);
                member_units.drain(..first_item);
                let mut header_last = header_end.min(u.end);
                while header_last > u.start && cx.lines[header_last].trim().is_empty() {
                    header_last -= 1;
                }
                let mut header = plain(cx, u.start, header_last, info.kind, Some(symbol.clone()));
                header.signature = Some(sig);
                header.header = true;
                out.push(header);
                if !member_units.is_empty() {
                    scope(cx, member_units, &member_prefix, out);
                }
                if last_member < u.end {
                    cx.out.dropped.push((last_member as u32 + 2, u.end as u32 + 1, "closing"));
                }
            }
            _ if lines > max => split_function(cx, u.start, u.end, node, &symbol, info.kind, &sig, out),
            _ => {
                let mut c = plain(cx, u.start, u.end, info.kind, Some(symbol.clone()));
                c.signature = Some(sig);
                if let Some(body) = info.body {
                    c.symbols = member_names(cx, body, &member_prefix);
                    member_defs(cx, body, &member_prefix, info.kind != "mod", 0);
                }
                out.push(c);
            }
        }
    }
    flush(cx, &mut code_run, out);
}

/// Qualified names of the items directly inside a container body.
fn member_names(cx: &Ctx<'_>, body: Node<'_>, prefix: &str) -> Vec<String> {
    let sep = cx.lang.sep();
    (0..body.named_child_count())
        .filter_map(|i| body.named_child(i))
        .filter_map(|m| item_info(cx.lang, m, cx.src, true))
        .map(|i| format!("{prefix}{sep}{}", i.name))
        .collect()
}

/// Code between items: one chunk per run, split at blank lines (then anywhere) when long.
fn module_code(cx: &mut Ctx<'_>, start: usize, end: usize, prefix: &str, out: &mut Vec<CodeChunk>) {
    let max = cx.p.code_max_lines.max(4);
    let symbol = (!prefix.is_empty()).then(|| prefix.to_owned());
    let mut s = start;
    while s <= end {
        // skip blank lines at the start of a piece
        while s <= end && cx.lines[s].trim().is_empty() {
            s += 1;
        }
        if s > end {
            break;
        }
        let mut e = (s + max - 1).min(end);
        if e < end {
            // prefer cutting after a blank line in the second half
            if let Some(b) = (s + max / 2..=e).rev().find(|&r| cx.lines[r].trim().is_empty()) {
                e = b;
            }
        }
        let mut last = e;
        while last > s && cx.lines[last].trim().is_empty() {
            last -= 1;
        }
        out.push(plain(cx, s, last, "module", symbol.clone()));
        s = e + 1;
    }
}

/// A long function: nested items become their own chunks (qualified by the
/// function), and the code around them is cut at statement boundaries into parts
/// that each repeat the signature line as context.
#[allow(clippy::too_many_arguments)]
fn split_function(
    cx: &mut Ctx<'_>,
    start: usize,
    end: usize,
    node: Node<'_>,
    symbol: &str,
    kind: &str,
    sig: &str,
    out: &mut Vec<CodeChunk>,
) {
    let def = if node.kind() == "decorated_definition" {
        node.child_by_field_name("definition").unwrap_or(node)
    } else {
        node
    };
    let def =
        if def.kind() == "export_statement" { def.child_by_field_name("declaration").unwrap_or(def) } else { def };
    let body = def.child_by_field_name("body");
    let inner: Vec<Node<'_>> = body
        .map(|b| (0..b.child_count()).filter_map(|i| b.child(i)).filter(|c| c.is_named()).collect())
        .unwrap_or_default();
    let nested = units(cx, &inner, false);
    // Code runs between nested items, the signature lines starting the first.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut cur_start = start;
    let mut items = Vec::new();
    for u in nested.into_iter().filter(|u| u.item.is_some()) {
        if u.start > cur_start {
            runs.push((cur_start, u.start - 1));
        }
        cur_start = u.end + 1;
        items.push(u);
    }
    if cur_start <= end {
        runs.push((cur_start, end));
    }
    let cuts = statement_starts(node, start, end);
    for (s, e) in runs {
        code_parts(cx, s, e, start, symbol, kind, sig, &cuts, out);
    }
    if !items.is_empty() {
        scope(cx, items, symbol, out);
    }
}

/// Rows where a statement starts below `node` (to depth 3), for cutting.
fn statement_starts(node: Node<'_>, start: usize, end: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = Vec::new();
    let mut stack = vec![(node, 0usize)];
    while let Some((n, depth)) = stack.pop() {
        for i in 0..n.named_child_count() {
            if let Some(c) = n.named_child(i) {
                let r = c.start_position().row;
                if r > start && r <= end {
                    cuts.push(r);
                }
                if depth < 3 {
                    stack.push((c, depth + 1));
                }
            }
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Cuts rows `s..=e` of a function into parts of at most `code_max_lines`.
#[allow(clippy::too_many_arguments)]
fn code_parts(
    cx: &mut Ctx<'_>,
    s: usize,
    e: usize,
    fn_start: usize,
    symbol: &str,
    kind: &str,
    sig: &str,
    cuts: &[usize],
    out: &mut Vec<CodeChunk>,
) {
    let max = cx.p.code_max_lines.max(4);
    let mut a = s;
    while a <= e {
        while a <= e && cx.lines[a].trim().is_empty() {
            a += 1;
        }
        if a > e {
            break;
        }
        let limit = a + max - 1;
        let b = if limit >= e {
            e
        } else {
            match cuts.iter().rev().find(|&&c| c > a && c <= limit + 1) {
                Some(&c) if c > a + max / 4 => c - 1,
                _ => limit,
            }
        };
        let mut last = b;
        while last > a && cx.lines[last].trim().is_empty() {
            last -= 1;
        }
        let mut c = plain(cx, a, last, kind, Some(symbol.to_owned()));
        c.signature = Some(sig.to_owned());
        if a != fn_start {
            let context = format!("{sig} …\n");
            c.overlap = context.len() as u32;
            c.text = context + &c.text;
        }
        out.push(c);
        a = b + 1;
    }
}

/// Records a definition: an item, unless it is a macro call rather than a macro's
/// definition.
fn record_def(cx: &mut Ctx<'_>, name: &str, kind: &str, attached_from: usize, node: Node<'_>, sig: &str) {
    if kind == "macro" && node.kind() != "macro_definition" {
        return;
    }
    if kind == "impl" || name.ends_with(".?") || name.ends_with("::?") || name == "?" {
        // An impl block defines no name of its own; `?`: the grammar gave none.
        return;
    }
    let item_row = item_row(cx, node);
    let doc = doc_comment(cx, attached_from, item_row, node);
    cx.out.defs.push(CodeDef {
        name: name.to_owned(),
        kind: kind.to_owned(),
        start_line: item_row as u32 + 1,
        end_line: end_row(node) as u32 + 1,
        signature: (!sig.is_empty()).then(|| sig.to_owned()),
        doc,
        exported: exported(cx, name, attached_from, node),
    });
}

/// A Python module that is private by its name (`_impl.py`, `_internal/x.py`), dunder
/// files (`__init__.py`) aside.
fn private_module(path: &str) -> bool {
    path.split('/').any(|c| c.starts_with('_') && !(c.starts_with("__") && c.trim_end_matches(".py").ends_with("__")))
}

/// Whether the package exports the item `node` defines as `name`: Rust's `pub` (not
/// `pub(crate)`; trait items as their trait, trait impls' items always, macros by
/// `#[macro_export]`), Python names without a leading `_` (dunders are public) in
/// modules without one, an ES module's `export` (its classes' members unless
/// `private`, `protected` or `#`), Go's capital, Java's `public` (interface members
/// always). It reads the item as declared: a `pub` item of a private module counts.
fn exported(cx: &Ctx<'_>, name: &str, attached_from: usize, node: Node<'_>) -> Option<bool> {
    if cx.exports == Exports::None {
        return Some(false);
    }
    let short = atlas_runtime::symbols::short_name(name);
    let modifier = |n: Node<'_>, kind: &str| {
        (0..n.child_count()).filter_map(|i| n.child(i)).find(|c| c.kind() == kind).map(|c| text(c, cx.src))
    };
    // The item itself first (an `export_statement` can be the node recorded).
    let ancestors = || std::iter::successors(Some(node), |p| p.parent()).take(4 * MAX_SCOPE_DEPTH);
    match cx.lang {
        Lang::Rust => {
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
        Lang::Python => Some(
            atlas_runtime::symbols::segments(name)
                .iter()
                .all(|s| !s.starts_with('_') || (s.starts_with("__") && s.ends_with("__") && s.len() > 4)),
        ),
        Lang::Js => {
            if cx.exports == Exports::Unknown {
                return None;
            }
            let hidden =
                short.starts_with('#') || modifier(node, "accessibility_modifier").is_some_and(|m| m != "public");
            Some(!hidden && ancestors().any(|a| a.kind() == "export_statement"))
        }
        Lang::Go => Some(short.starts_with(|c: char| c.is_uppercase())),
        Lang::Java => {
            let public = modifier(node, "modifiers").is_some_and(|m| m.split_whitespace().any(|w| w == "public"));
            Some(public || ancestors().nth(2).is_some_and(|a| a.kind() == "interface_declaration"))
        }
    }
}

/// The row of the item's own first line: past decorators, attributes and doc
/// comments that the grammar puts inside the node.
fn item_row(cx: &Ctx<'_>, node: Node<'_>) -> usize {
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
fn doc_comment(cx: &Ctx<'_>, from: usize, item_row: usize, node: Node<'_>) -> Option<String> {
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

/// Definitions of the items inside a container chunked whole (its members have no
/// chunk of their own), nested containers included to [`MAX_SCOPE_DEPTH`].
fn member_defs(cx: &mut Ctx<'_>, body: Node<'_>, prefix: &str, in_class: bool, depth: usize) {
    if depth >= MAX_SCOPE_DEPTH {
        return;
    }
    let sep = cx.lang.sep();
    let mut attached: Option<usize> = None;
    for i in 0..body.named_child_count() {
        let Some(m) = body.named_child(i) else { continue };
        if cx.lang.is_comment(m.kind()) || cx.lang.is_attachment(m.kind()) {
            attached.get_or_insert(m.start_position().row);
            continue;
        }
        let from = attached.take().unwrap_or(m.start_position().row);
        let Some(info) = item_info(cx.lang, m, cx.src, in_class) else { continue };
        let name = if info.kind == "impl" { info.name.clone() } else { format!("{prefix}{sep}{}", info.name) };
        let sig = signature(cx, m);
        record_def(cx, &name, info.kind, from, m, &sig);
        if let Some(inner) = info.body {
            let p = info.qualifier.clone().unwrap_or(name);
            member_defs(cx, inner, &p, info.kind != "mod", depth + 1);
        }
    }
}

/// Constants, statics and module-level variables: not items the chunker cuts at, but
/// names users look up (`const MAX_ROWS`, `DEFAULT_TIMEOUT = 30`). Walks the module
/// and container bodies (not function bodies) to [`MAX_SCOPE_DEPTH`].
fn constants(cx: &mut Ctx<'_>, node: Node<'_>, prefix: &str, depth: usize) {
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

/// The first row of the comments and attributes directly above `node` (its own row
/// when there are none): what a doc comment is read from.
fn attached_from(cx: &Ctx<'_>, node: Node<'_>) -> usize {
    let mut from = node.start_position().row;
    let mut prev = node.prev_named_sibling();
    while let Some(p) = prev {
        let adjacent = end_row(p) + 1 >= from;
        if !(adjacent && (cx.lang.is_comment(p.kind()) || cx.lang.is_attachment(p.kind()))) {
            break;
        }
        from = p.start_position().row;
        prev = p.prev_named_sibling();
    }
    from
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

/// Identifier uses in the file, each `(name, line)` once, skipping the line a name is
/// defined on. Walks the tree without recursion; at most [`MAX_REFS_PER_FILE`].
fn references(cx: &Ctx<'_>, root: Node<'_>) -> Vec<(String, u32)> {
    let defined_on: std::collections::HashSet<(&str, u32)> =
        cx.out.defs.iter().map(|d| (atlas_runtime::symbols::short_name(&d.name), d.start_line)).collect();
    let mut seen: std::collections::HashSet<(String, u32)> = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut cursor = root.walk();
    'walk: loop {
        let n = cursor.node();
        if n.child_count() == 0 && IDENTIFIER_KINDS.contains(&n.kind()) {
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

/// Leaf node kinds that name something, across the grammars.
const IDENTIFIER_KINDS: &[&str] = &[
    "identifier",
    "type_identifier",
    "field_identifier",
    "property_identifier",
    "shorthand_property_identifier",
    "package_identifier",
];

/// Merges runs of tiny chunks up to `code_merge_max_lines`, when only blank lines or
/// closing delimiters lie between them.
fn merge_tiny(cx: &mut Ctx<'_>, chunks: Vec<CodeChunk>) -> Vec<CodeChunk> {
    let tiny = cx.p.code_tiny_lines;
    let cap = cx.p.code_merge_max_lines;
    // Only items merge: not module code, not the header of a split container, not parts.
    let is_tiny = |c: &CodeChunk| {
        c.overlap == 0 && !c.header && c.symbol_kind != "module" && (c.end_line - c.start_line + 1) as usize <= tiny
    };
    let sep = cx.lang.sep();
    let parent = |c: &CodeChunk| c.symbol.as_deref().and_then(|s| s.rsplit_once(sep)).map(|(p, _)| p.to_owned());
    let lines = cx.lines.clone();
    // Items of one scope, with only blank lines between them.
    let joinable = |a: &CodeChunk, b: &CodeChunk| {
        parent(a) == parent(b) && (a.end_line as usize..b.start_line as usize - 1).all(|r| lines[r].trim().is_empty())
    };
    let mut out: Vec<CodeChunk> = Vec::new();
    let mut run: Vec<CodeChunk> = Vec::new();
    let mut flush = |run: &mut Vec<CodeChunk>, out: &mut Vec<CodeChunk>| match run.len() {
        0 => {}
        1 => out.push(run.pop().expect("one")),
        _ => {
            let (first, last) = (&run[0], &run[run.len() - 1]);
            let (s, e) = (first.start_line, last.end_line);
            let mut symbols: Vec<String> = Vec::new();
            for c in run.iter() {
                for sym in c.symbol.iter().chain(&c.symbols) {
                    if !symbols.contains(sym) {
                        symbols.push(sym.clone());
                    }
                }
            }
            // Closing lines inside the merged span now belong to it.
            cx.out.dropped.retain(|d| !(d.0 > s && d.1 < e));
            out.push(CodeChunk {
                start_line: s,
                end_line: e,
                text: lines[s as usize - 1..e as usize].join("\n"),
                overlap: 0,
                symbol: symbols.first().cloned(),
                symbol_kind: "merged".to_owned(),
                signature: None,
                symbols,
                header: false,
            });
            run.clear();
        }
    };
    for c in chunks {
        if is_tiny(&c) {
            let fits = run.first().is_some_and(|f| (c.end_line - f.start_line + 1) as usize <= cap);
            let joins = run.last().is_some_and(|l| joinable(l, &c));
            if !(run.is_empty() || fits && joins) {
                flush(&mut run, &mut out);
            }
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Lines in no chunk: blank lines are dropped as `blank`; anything else left over
/// (which the scopes should not leave) becomes a module chunk so no line is lost.
fn account_gaps(cx: &mut Ctx<'_>) {
    let n = cx.lines.len();
    let mut covered = vec![false; n];
    for c in &cx.out.chunks {
        for r in (c.start_line - 1)..c.end_line {
            if let Some(x) = covered.get_mut(r as usize) {
                *x = true;
            }
        }
    }
    for &(s, e, _) in &cx.out.dropped {
        for r in (s - 1)..e {
            if let Some(x) = covered.get_mut(r as usize) {
                *x = true;
            }
        }
    }
    let mut extra = Vec::new();
    let mut r = 0;
    while r < n {
        if covered[r] {
            r += 1;
            continue;
        }
        let s = r;
        while r < n && !covered[r] {
            r += 1;
        }
        // [s, r) uncovered: blank lines are dropped, the rest kept as code.
        let mut i = s;
        while i < r {
            let blank = cx.lines[i].trim().is_empty();
            let j = (i..r).find(|&k| cx.lines[k].trim().is_empty() != blank).unwrap_or(r);
            if blank {
                cx.out.dropped.push((i as u32 + 1, j as u32, "blank"));
            } else {
                extra.push(plain(cx, i, j - 1, "module", None));
            }
            i = j;
        }
    }
    cx.out.chunks.extend(extra);
    cx.out.chunks.sort_by_key(|c| c.start_line);
    cx.out.dropped.sort_by_key(|d| d.0);
}
