//! A function too long for one chunk, cut at statement boundaries into parts that
//! each repeat its signature line.

use tree_sitter::Node;

use super::*;

/// A long function: nested items become their own chunks (qualified by the
/// function), and the code around them is cut at statement boundaries into parts
/// that each repeat the signature line as context.
#[allow(clippy::too_many_arguments)]
pub(super) fn split_function(
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
