//! The `search` tool: a literal or regex search over the mirror's files, ripgrep's
//! searcher with the sink in `grep.rs`, within the call's budget and time limit.

use super::*;

#[tool_router(router = search_router, vis = "pub(super)")]
impl FsServer {
    #[tool(
        title = "Search the mirror",
        description = "Grep the mirror. A literal string or a regular expression (ripgrep's engine), optionally case-sensitive, within a glob or a publication, with context lines. Returns file, line number and the matching line. Use it to find exact names, error messages or flags, and to verify a claim verbatim. When max_results is hit the reply says \"truncated\"; when the budget (max_tokens) is, it ends with a next_cursor.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<SearchArgs>(),
        output_schema = output::output_schema::<GrepOut>()
    )]
    async fn search(
        &self,
        Parameters(a): Parameters<SearchArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let max_tokens = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return tool_error(e),
        };
        if a.pattern.is_empty() {
            return tool_error("the pattern is empty; pass the text to look for");
        }
        if a.pattern.len() > PATTERN_MAX_BYTES {
            return tool_error(format!(
                "the pattern is {} bytes, over the {PATTERN_MAX_BYTES}-byte limit; search for a shorter part of it",
                a.pattern.len()
            ));
        }
        let glob = match glob_matcher(a.glob.as_deref()) {
            Ok(g) => g,
            Err(e) => return tool_error(e),
        };
        let matcher = match RegexMatcherBuilder::new()
            .fixed_strings(!a.regex)
            .case_insensitive(!a.case_sensitive)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
            .build(&a.pattern)
        {
            Ok(m) => m,
            Err(e) => return tool_error(format!("bad regular expression: {e}")),
        };
        let context = a.context_lines.unwrap_or(0).min(5);
        let max = a.max_results.unwrap_or(SEARCH_DEFAULT_RESULTS).clamp(1, SEARCH_MAX_RESULTS);
        let libs = self.libs();
        let key = call_key(
            "search",
            &[
                &Self::served_key(&libs),
                &a.pattern,
                &format!("{} {} {context} {max}", a.regex, a.case_sensitive),
                a.glob.as_deref().unwrap_or(""),
                a.publication.as_deref().unwrap_or(""),
            ],
        );
        let skip = match budget::start(a.budget.cursor.as_deref(), &key) {
            Ok(c) => c.at.min(max),
            Err(e) => return tool_error(e),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let publication = a.publication.clone();
        let stop2 = stop.clone();
        let job = tokio::task::spawn_blocking(move || {
            let mut found = Found::default();
            for l in libs.iter() {
                grep(&mut found, l, &matcher, glob.as_ref(), publication.as_deref(), context, max, &stop2);
                if found.truncated || found.cancelled {
                    break;
                }
            }
            found
        });
        let found = tokio::select! {
            r = job => r.map_err(|e| ErrorData::internal_error(e.to_string(), None))?,
            () = ct.cancelled() => {
                stop.store(true, Ordering::SeqCst);
                tracing::info!("search cancelled by the client");
                return tool_error("search cancelled");
            }
            () = tokio::time::sleep(CALL_TIMEOUT) => {
                stop.store(true, Ordering::SeqCst);
                return tool_error(format!(
                    "search took over {}s and was stopped; narrow the pattern, glob or publication",
                    CALL_TIMEOUT.as_secs()
                ));
            }
        };
        let Found { matches, truncated, files, cancelled, skipped } = found;
        if cancelled {
            return tool_error("search cancelled");
        }
        let all = matches.len();
        let pieces = matches.into_iter().skip(skip).map(|m| {
            let mut lines = String::new();
            for (n, l) in &m.before {
                lines.push_str(&format!("{}-{n}- {l}\n", shown(&m.path)));
            }
            lines.push_str(&format!("{}:{}: {}\n", shown(&m.path), m.line, m.text));
            for (n, l) in &m.after {
                lines.push_str(&format!("{}-{n}- {l}\n", shown(&m.path)));
            }
            Piece { text: lines, item: m }
        });
        budget::page(max_tokens, skip, all, pieces, &key, |kept, next_cursor| {
            let shown_to = skip + kept.len();
            let from = if skip > 0 { format!(" (matches {}-{shown_to} of {all})", skip + 1) } else { String::new() };
            let mut text = format!(
                "{} in {} searched{from}",
                atlas_runtime::words::count(kept.len(), "match"),
                atlas_runtime::words::count(files, "file")
            );
            text.push_str(if truncated {
                " (truncated: more matches exist; narrow the pattern, glob or publication, or raise max_results)\n"
            } else {
                "\n"
            });
            if !skipped.is_empty() {
                text.push_str(&format!(
                    "{} not searched (a line over {} MiB, or unreadable): {}\n",
                    atlas_runtime::words::count(skipped.len(), "file"),
                    SEARCH_MAX_LINE_BYTES >> 20,
                    skipped.iter().take(5).map(|p| shown(p).into_owned()).collect::<Vec<_>>().join(", ")
                ));
            }
            if !kept.is_empty() {
                let body: String = kept.iter().map(|p| p.text.as_str()).collect();
                text.push_str(&fence("matching lines, as path:line: text", &body));
            }
            if let Some(c) = &next_cursor {
                text.push_str(&budget::more_line(c, max_tokens));
            }
            let matches = kept.iter().map(|p| p.item.clone()).collect();
            output::typed(
                text,
                &GrepOut { matches, truncated, files_searched: files, files_skipped: skipped.clone(), next_cursor },
            )
        })
    }
}
