//! After a file is chunked: runs of tiny chunks merged, and every line accounted for
//! (in a chunk, or dropped with its reason).

use super::*;

/// Merges runs of tiny chunks up to `code_merge_max_lines`, when only blank lines or
/// closing delimiters lie between them.
pub(super) fn merge_tiny(cx: &mut Ctx<'_>, chunks: Vec<CodeChunk>) -> Vec<CodeChunk> {
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
pub(super) fn account_gaps(cx: &mut Ctx<'_>) {
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
