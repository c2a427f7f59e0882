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
//! - The module's guide (Rust `//!`, a Python module docstring) is dropped from the
//!   code and kept as a [`DocBlock`], which the chunk stage chunks as docs; so is a
//!   copy of each exported item's long doc comment, which stays in its code chunk too.
//!
//! What differs by language (which nodes are items, what a file exports) is in the
//! language's own module for the first six, and one entry of [`table::SPECS`] for the
//! others; the chunking itself is the same for all.

use tree_sitter::{Language, Node, Parser};

use super::ChunkParams;

mod constants;
mod docs;
mod functions;
mod go;
mod java;
mod js;
mod python;
mod references;
mod rust;
mod table;
mod tidy;

use constants::constants;
pub use docs::DocBlock;
use docs::{doc_comment, item_doc, item_row, module_guide};
use functions::split_function;
use references::references;
use tidy::{account_gaps, merge_tiny};

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
    /// Documentation written in the code, chunked as docs, in line order: the
    /// module's guide (its lines dropped as `docs`, in no code chunk) and long doc
    /// comments of exported items (also in their item's code chunk).
    pub docs: Vec<DocBlock>,
    /// Whether the file nests past [`MAX_SCOPE_DEPTH`] containers or [`MAX_TREE_DEPTH`]
    /// syntax levels: its deep part is chunked as plain lines.
    pub too_deep: bool,
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
    /// A language of the table ([`table::SPECS`]).
    Table(&'static table::Spec),
}

impl Lang {
    fn of(language: &str) -> Option<Lang> {
        Some(match language {
            "python" => Lang::Python,
            "rust" => Lang::Rust,
            "javascript" | "typescript" => Lang::Js,
            "go" => Lang::Go,
            "java" => Lang::Java,
            other => Lang::Table(table::spec(other)?),
        })
    }

    fn sep(self) -> &'static str {
        match self {
            Lang::Rust => "::",
            Lang::Table(spec) => spec.sep,
            _ => ".",
        }
    }

    fn is_comment(self, kind: &str) -> bool {
        match self {
            Lang::Table(spec) => spec.comments.contains(&kind),
            _ => matches!(kind, "comment" | "line_comment" | "block_comment"),
        }
    }

    /// Nodes that belong to the item after them (besides comments).
    fn is_attachment(self, kind: &str) -> bool {
        match self {
            Lang::Table(spec) => spec.attachments.contains(&kind),
            _ => matches!(kind, "attribute_item" | "decorator"),
        }
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

/// An item's [`ItemInfo`] with no qualifier, its name `?` when it has none.
fn info<'t>(kind: &'static str, name: Option<String>, body: Option<Node<'t>>) -> Option<ItemInfo<'t>> {
    Some(ItemInfo { kind, name: name.unwrap_or_else(|| "?".to_owned()), body, qualifier: None })
}

/// What `n` is, when it is an item: each language's own module says.
fn item_info<'t>(lang: Lang, n: Node<'t>, src: &str, in_class: bool) -> Option<ItemInfo<'t>> {
    match lang {
        Lang::Python => python::item(n, src, in_class),
        Lang::Rust => rust::item(n, src, in_class),
        Lang::Js => js::item(n, src, in_class),
        Lang::Go => go::item(n, src, in_class),
        Lang::Java => java::item(n, src, in_class),
        Lang::Table(spec) => table::item_info(spec, n, src, in_class),
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
/// Syntax levels past which a file counts as [`CodeChunks::too_deep`] (100k nested
/// blocks parse, but nothing the chunker cuts at lies that deep).
const MAX_TREE_DEPTH: usize = 1_000;

/// The one-line note for the files (`paths`) that nest code too deep, if any.
pub fn deep_note(paths: &[String]) -> Option<String> {
    let first = paths.first()?;
    let more = if paths.len() > 1 { format!(" and {} more", paths.len() - 1) } else { String::new() };
    Some(format!(
        "code nested past {MAX_SCOPE_DEPTH} containers or {MAX_TREE_DEPTH} syntax levels, its deep part chunked as \
         lines: {} ({first}{more})",
        atlas_runtime::words::count(paths.len(), "file")
    ))
}

/// Whether the tree under `root` is deeper than [`MAX_TREE_DEPTH`] (walked without
/// recursion, stopping there).
fn deeper_than_limit(root: Node<'_>) -> bool {
    let mut cursor = root.walk();
    let mut depth = 0usize;
    loop {
        if cursor.goto_first_child() {
            depth += 1;
            if depth > MAX_TREE_DEPTH {
                return true;
            }
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return false;
            }
            depth -= 1;
        }
    }
}

/// Chunks one code file. `language` as `source::language_of` names it.
pub fn chunk_code(src: &str, language: &str, path: &str, params: &ChunkParams) -> Option<CodeChunks> {
    let lang = Lang::of(language)?;
    let mut parser = Parser::new();
    parser.set_language(&grammar(language, path)?).ok()?;
    let tree = parser.parse(src, None)?;
    let root = tree.root_node();
    let exports = match lang {
        Lang::Python if python::private_module(path) => Exports::None,
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
    module_guide(&mut cx, &mut children);
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
    cx.out.too_deep |= deeper_than_limit(root);
    cx.out.docs.sort_by(|a, b| (a.start_line, &a.symbol).cmp(&(b.start_line, &b.symbol)));
    cx.out.docs.dedup_by(|a, b| a.start_line == b.start_line);
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
    let opened;
    let nodes = match cx.lang {
        Lang::Table(spec) if !spec.transparent.is_empty() => {
            opened = table::open_transparent(spec, nodes);
            &opened[..]
        }
        _ => nodes,
    };
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
        cx.out.too_deep = true;
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

/// The nodes of a container's body, [`table::Spec::transparent`] ones opened.
fn scope_nodes<'t>(cx: &Ctx<'_>, body: Node<'t>) -> Vec<Node<'t>> {
    let nodes: Vec<Node<'t>> = (0..body.child_count()).filter_map(|i| body.child(i)).collect();
    match cx.lang {
        Lang::Table(spec) => table::open_transparent(spec, &nodes),
        _ => nodes,
    }
}

/// Qualified names of the items directly inside a container body.
fn member_names(cx: &Ctx<'_>, body: Node<'_>, prefix: &str) -> Vec<String> {
    let sep = cx.lang.sep();
    scope_nodes(cx, body)
        .into_iter()
        .filter(|m| m.is_named())
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
    let exported = exported(cx, name, attached_from, node);
    if exported != Some(false)
        && let Some(block) = item_doc(cx, name, attached_from, item_row, node)
    {
        cx.out.docs.push(block);
    }
    cx.out.defs.push(CodeDef {
        name: name.to_owned(),
        kind: kind.to_owned(),
        start_line: item_row as u32 + 1,
        end_line: end_row(node) as u32 + 1,
        signature: (!sig.is_empty()).then(|| sig.to_owned()),
        doc,
        exported,
    });
}

/// Whether the package exports the item `node` defines as `name`: Rust's `pub` (not
/// `pub(crate)`; trait items as their trait, trait impls' items always, macros by
/// `#[macro_export]`), Python names without a leading `_` (dunders are public) in
/// modules without one, an ES module's `export` (its classes' members unless
/// `private`, `protected` or `#`), Go's capital, Java's `public` (interface members
/// always), and the table's rules for the others ([`table::Exported`]). It reads the item as declared: a `pub` item of a private module counts.
fn exported(cx: &Ctx<'_>, name: &str, attached_from: usize, node: Node<'_>) -> Option<bool> {
    if cx.exports == Exports::None {
        return Some(false);
    }
    match cx.lang {
        Lang::Rust => rust::exported(cx, name, attached_from, node),
        Lang::Python => python::exported(cx, name, attached_from, node),
        Lang::Js => js::exported(cx, name, attached_from, node),
        Lang::Go => go::exported(cx, name, attached_from, node),
        Lang::Java => java::exported(cx, name, attached_from, node),
        Lang::Table(spec) => table::exported(cx, spec, name, node),
    }
}

/// The text of `n`'s first child of `kind` (a visibility or accessibility modifier).
fn modifier<'s>(n: Node<'_>, kind: &str, src: &'s str) -> Option<&'s str> {
    (0..n.child_count()).filter_map(|i| n.child(i)).find(|c| c.kind() == kind).map(|c| text(c, src))
}

/// `node` and its containers, nearest first (bounded by the nesting the chunker follows).
fn ancestors(node: Node<'_>) -> impl Iterator<Item = Node<'_>> {
    std::iter::successors(Some(node), |p| p.parent()).take(4 * MAX_SCOPE_DEPTH)
}

/// Definitions of the items inside a container chunked whole (its members have no
/// chunk of their own), nested containers included to [`MAX_SCOPE_DEPTH`].
fn member_defs(cx: &mut Ctx<'_>, body: Node<'_>, prefix: &str, in_class: bool, depth: usize) {
    if depth >= MAX_SCOPE_DEPTH {
        return;
    }
    let sep = cx.lang.sep();
    let mut attached: Option<usize> = None;
    for m in scope_nodes(cx, body).into_iter().filter(|m| m.is_named()) {
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
