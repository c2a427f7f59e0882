//! The rag server: ranked search over the bundle (the runtime's engine), with a
//! citation on every hit.

use std::sync::Arc;

use atlas_runtime::ChunkKind;
use atlas_runtime::search::{Filters, MAX_TOOL_TOP_K, SearchRequest};
use atlas_runtime::{Mode, SearchOptions};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerConfig};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};
use tokio_util::sync::CancellationToken;

mod code_tools;
mod handler;
mod reply;
mod wire;

use reply::{chunk_reply, describe, hit_link, hit_out, hit_text};
use wire::{
    BundleInfoOut, ChunkOut, Confidence, Detail, FindReferencesArgs, FindReferencesOut, FindSymbolArgs, FindSymbolOut,
    GetChunkArgs, HitOut, LibrariesOut, LibraryArg, LibraryOut, OutlineArgs, OutlineOut, SearchCodeArgs,
    SearchDocsArgs, SearchOut, SourceOut,
};

use crate::budget::{self, Budget, Piece, call_key};
use crate::code::{self, BY_NAME, RefFile, SymbolQuery};
use crate::library::Libraries;
use crate::output::{self, fence, inert};

#[derive(Debug, Clone)]
pub struct RagServer {
    libs: Libraries,
    rerank_default: bool,
    tool_router: ToolRouter<Self>,
}

impl RagServer {
    /// The tools this server lists: the code tools only when a served library holds code.
    fn listed_tools(&self) -> Vec<rmcp::model::Tool> {
        let code = serves_code(&self.libs.bundles());
        self.tool_router.list_all().into_iter().filter(|t| code || !CODE_TOOLS.contains(&t.name.as_ref())).collect()
    }

    /// Sends `notifications/tools/list_changed` to `peer` whenever what is served moves
    /// (a new version, a keyword-first library completed) in a way that adds or drops
    /// the code tools; ends with the session.
    fn watch_tools(&self, peer: rmcp::Peer<rmcp::RoleServer>) {
        let libs = self.libs.clone();
        tokio::spawn(async move {
            let ids = |b: &[Arc<atlas_runtime::Bundle>]| b.iter().map(|b| Arc::as_ptr(b) as usize).collect::<Vec<_>>();
            let now = libs.bundles();
            let (mut seen, mut code) = (ids(&now), serves_code(&now));
            while !peer.is_transport_closed() {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let now = libs.bundles();
                if ids(&now) == seen {
                    continue;
                }
                seen = ids(&now);
                if serves_code(&now) != code {
                    code = !code;
                    if let Err(e) = peer.notify_tool_list_changed().await {
                        tracing::debug!("tools/list_changed not sent: {e}");
                    }
                }
            }
        });
    }

    /// The labels of what a call reads, for binding its cursor.
    fn served_key(&self, library: Option<&str>) -> String {
        self.libs.select(library).map_or_else(|e| e, |b| b.iter().map(|b| b.library()).collect::<Vec<_>>().join(","))
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_search(
        &self,
        tool: &str,
        query: String,
        mut opts: SearchOptions,
        library: Option<String>,
        detail: Detail,
        budget: Budget,
        ct: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return Ok(output::error(e)),
        };
        let key = call_key(
            tool,
            &[
                &query,
                &self.served_key(library.as_deref()),
                &serde_json::to_string(&(&opts.mode, opts.top_k, &opts.filters, opts.min_score, opts.rerank))
                    .unwrap_or_default(),
                &format!("{detail:?}"),
            ],
        );
        let skip = match budget::start(budget.cursor.as_deref(), &key) {
            Ok(c) => c.at.min(opts.top_k),
            Err(e) => return Ok(output::error(e)),
        };
        let want = opts.top_k;
        opts.top_k = want.max(1);
        let libs = self.libs.clone();
        let q = query.clone();
        let (mode, threshold) = (opts.mode, self.libs.threshold(library.as_deref()));
        let job = tokio::task::spawn_blocking(move || {
            let found = libs.search(&q, &opts, library.as_deref());
            // When this kind answers without high confidence, whether the other kind
            // answers more surely: one short search, on the first page only.
            let other = match (&found, opts.filters.kind) {
                (Ok((s, _)), Some(kind))
                    if mode != Mode::Keyword
                        && skip == 0
                        && Confidence::new(s.confidence, threshold).level != "high" =>
                {
                    let flipped = if kind == ChunkKind::Docs { ChunkKind::Code } else { ChunkKind::Docs };
                    let filters = Filters { kind: Some(flipped), ..Filters::default() };
                    let o = SearchOptions { top_k: 1, filters, ..opts };
                    libs.search(&q, &o, library.as_deref())
                        .ok()
                        .filter(|(o, _)| o.confidence >= threshold && o.confidence > s.confidence && !o.hits.is_empty())
                        .map(|(o, _)| (flipped, o.confidence))
                }
                _ => None,
            };
            (found, other)
        });
        let (found, other) = tokio::select! {
            r = job => r.map_err(|e| ErrorData::internal_error(e.to_string(), None))?,
            () = ct.cancelled() => return Ok(output::error("search cancelled")),
        };
        // The right tool, said once.
        let try_instead = other.map(|(kind, _)| if kind == ChunkKind::Code { "search_code" } else { "search_docs" });
        let instead = match (other, try_instead) {
            (Some((kind, c)), Some(tool)) => {
                let who = if kind == ChunkKind::Code { "the code answers" } else { "the docs answer" };
                format!("{who} this more surely (confidence {c:.2}): call {tool} for it\n")
            }
            _ => String::new(),
        };
        let (s, mut failed) = match found {
            Ok(f) => f,
            Err(e) => return Ok(output::error(e.to_string())),
        };
        // A working tree with edits not indexed yet says so, with their count.
        let labels: std::collections::BTreeSet<String> = self.libs.bundles().iter().map(|b| b.library()).collect();
        failed.extend(labels.iter().filter_map(|l| crate::live::pending_note(l)));
        // Keyword scores (BM25) are not calibrated: no confidence for them.
        let confidence = (mode != Mode::Keyword).then(|| {
            Confidence::new(s.confidence, threshold)
                .with_unseen(s.unseen_words.clone())
                .keyword_only(s.signals.keyword_only)
        });
        if s.hits.is_empty() {
            let mut text = format!(
                "{instead}no hits for {query:?}; try other words, mode=keyword for exact names, or fewer filters\n"
            );
            // A library that could not be searched may hold the answer: said here too.
            if !failed.is_empty() {
                text.push_str(&format!("warning: {}\n", failed.join("; ")));
            }
            let out = SearchOut { hits: Vec::new(), confidence, try_instead, warnings: failed, next_cursor: None };
            return output::typed(text, &out);
        }
        // Below the refusal threshold, the reply says so first: what `atlas ask` refuses.
        let head = match &confidence {
            Some(c) if c.level == "none" => format!(
                "nothing served answers this confidently (confidence {:.2}{}, under the threshold {:.2}){}; the nearest hits follow, check them before relying on them\n",
                c.score,
                c.source(),
                c.threshold,
                match atlas_runtime::search::unseen_note(&c.unseen_words) {
                    n if n.is_empty() => n,
                    n => format!("; {n}"),
                }
            ),
            _ => String::new(),
        };
        let sure = confidence
            .as_ref()
            .map(|c| format!(", confidence {} ({:.2}{})", c.level, c.score, c.source()))
            .unwrap_or_default();
        let total = s.hits.len();
        let pieces = |first: Detail| {
            s.hits.iter().enumerate().skip(skip).map(move |(i, h)| {
                let d = if i == skip { first } else { detail };
                Piece { text: hit_text(i, h, d), item: (hit_out(h, d), hit_link(h)) }
            })
        };
        let render = |kept: &[Piece<(HitOut, ContentBlock)>], next_cursor: Option<String>| {
            let upto = skip + kept.len();
            let from = if skip > 0 { format!(" (hits {}-{upto} of {total})", skip + 1) } else { String::new() };
            let mut text = format!(
                "{head}{instead}{} for {query:?}{from}{sure}; cite each by its citation, verify with the fs server's read_file or the hit's resource:\n",
                atlas_runtime::words::count(kept.len(), "hit")
            );
            text.extend(kept.iter().map(|p| p.text.as_str()));
            if !failed.is_empty() {
                text.push_str(&format!("warning: {}\n", failed.join("; ")));
            }
            if let Some(c) = &next_cursor {
                text.push_str(&budget::more_line(c, max));
            }
            let hits = kept.iter().map(|p| p.item.0.clone()).collect();
            let links = kept.iter().map(|p| p.item.1.clone()).collect();
            let out =
                SearchOut { hits, confidence: confidence.clone(), try_instead, warnings: failed.clone(), next_cursor };
            output::typed_with(text, &out, links)
        };
        let r = budget::page(max, skip, total, pieces(detail), &key, render)?;
        if budget::fits(&r, max) || detail == Detail::Brief {
            return Ok(r);
        }
        // Not even one whole hit fits: the first comes brief (its place and citation).
        let r = budget::page(max, skip, total, pieces(Detail::Brief), &key, render)?;
        if budget::fits(&r, max) {
            return Ok(r);
        }
        Ok(output::error(format!(
            "max_tokens {max} is too small for one hit ({} needed); raise it",
            budget::tokens(budget::reply_bytes(&r))
        )))
    }

    /// The bundles a code-intelligence call reads.
    fn code_bundles(&self, library: Option<&str>) -> Result<Vec<Arc<atlas_runtime::Bundle>>, String> {
        let bundles = self.libs.select(library)?;
        if bundles.iter().all(|b| b.symbols().is_empty()) {
            return Err(
                "no served library has a symbol table (no code, or built before symbol tables): rebuild the bundle \
                 with atlas-pipeline, or use search_code"
                    .to_owned(),
            );
        }
        Ok(bundles)
    }
}

impl RagServer {
    /// Every tool: search and libraries (here), and code ([`code_tools`]).
    pub(crate) fn router() -> ToolRouter<Self> {
        Self::tool_router() + Self::code_router()
    }
}

#[tool_router]
impl RagServer {
    /// A server over several libraries.
    pub fn libraries(libs: Libraries, rerank_default: bool) -> RagServer {
        RagServer { libs, rerank_default, tool_router: Self::router() }
    }

    #[tool(
        title = "Search the documentation",
        description = "Ranked search over the documentation of the served libraries (all of them merged, or the one `library` names): their pages, and the guides and long doc comments written in their code (`//!`, `///`, docstrings). Use it first for how-to and concept questions; each hit has its library@version, a citation (the page URL with its heading anchor, or file + line range), a snippet (detail=full, the default; brief leaves it out), a chunk_id for get_chunk, and a link to its file as a resource. Modes: hybrid (default), vector (meaning), keyword (exact words and names). The reply keeps to max_tokens (default 8000) and ends with a next_cursor when hits were left out.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<SearchDocsArgs>(),
        output_schema = output::output_schema::<SearchOut>()
    )]
    async fn search_docs(
        &self,
        Parameters(a): Parameters<SearchDocsArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = SearchRequest {
            mode: a.mode.map(Mode::from),
            top_k: a.top_k,
            min_score: a.min_score,
            rerank: Some(a.rerank.unwrap_or(self.rerank_default)),
            filters: Filters { kind: Some(ChunkKind::Docs), section: a.section, ..Filters::default() },
            ..SearchRequest::default()
        }
        .options(MAX_TOOL_TOP_K);
        self.run_search("search_docs", a.query, opts, a.library, a.detail.unwrap_or_default(), a.budget, ct).await
    }

    #[tool(
        title = "Search the code",
        description = "Ranked search over the source code of the served libraries (or the one `library` names), chunked by function, class and impl. Use it to find where something is implemented or how an API is called; filter by language, repo or symbol_kind. Each hit has file + line range, symbol, the docs that mention it and a link to its file as a resource. For where a name is defined or used, find_symbol and find_references are exact. Same budget and detail as search_docs.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<SearchCodeArgs>(),
        output_schema = output::output_schema::<SearchOut>()
    )]
    async fn search_code(
        &self,
        Parameters(a): Parameters<SearchCodeArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = SearchRequest {
            mode: a.mode.map(Mode::from),
            top_k: a.top_k,
            rerank: Some(self.rerank_default),
            filters: Filters {
                kind: Some(ChunkKind::Code),
                language: a.language,
                repo: a.repo,
                symbol_kind: a.symbol_kind,
                ..Filters::default()
            },
            ..SearchRequest::default()
        }
        .options(MAX_TOOL_TOP_K);
        self.run_search("search_code", a.query, opts, a.library, a.detail.unwrap_or_default(), a.budget, ct).await
    }

    #[tool(
        title = "Get a chunk",
        description = "The full text of one chunk. By its chunk_id (from a search hit), with its neighbouring chunks in the same file while they fit the budget (max_tokens). A chunk longer than the budget comes in pieces: pass the reply's next_cursor back for the rest. Use it when a snippet is not enough.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<GetChunkArgs>(),
        output_schema = output::output_schema::<ChunkOut>()
    )]
    async fn get_chunk(&self, Parameters(a): Parameters<GetChunkArgs>) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return Ok(output::error(e)),
        };
        let n = a.neighbors.unwrap_or(1).min(5);
        let b = match self.libs.chunk_bundle(&a.chunk_id, a.library.as_deref()) {
            Ok(b) => b,
            Err(e) => return Ok(output::error(e)),
        };
        let key = call_key("get_chunk", &[&a.chunk_id, &b.library(), &n.to_string()]);
        let from = match budget::start(a.budget.cursor.as_deref(), &key) {
            Ok(c) => c.at,
            Err(e) => return Ok(output::error(e)),
        };
        let ctx = match b.get_chunk(&a.chunk_id, n) {
            Ok(c) => c,
            Err(e) => return Ok(output::error(output::bundle_error(&b, &e))),
        };
        // Estimated first, then measured: a reply over the budget is made again with
        // the overshoot counted as frame, until it fits or only one line is left.
        let limit = max * budget::BYTES_PER_TOKEN;
        let mut frame = budget::json_bytes(&ctx.chunk.hit) * 2 + 200;
        loop {
            let r = chunk_reply(ctx.clone(), from, frame, max, &key)?;
            let bytes = budget::reply_bytes(&r);
            if bytes <= limit || frame >= limit {
                return Ok(r);
            }
            frame += bytes - limit;
        }
    }

    #[tool(
        title = "List the libraries",
        description = "The libraries this server searches. For each: name@version, the other versions served, a description, sources, chunk counts by kind, model, and how old the build and its sources are. Call it first when the server serves several libraries; pass library to the search tools to pin one (name, name@version, or a semver range).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<LibraryArg>(),
        output_schema = output::output_schema::<LibrariesOut>()
    )]
    async fn list_libraries(&self, Parameters(a): Parameters<LibraryArg>) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return Ok(output::error(e)),
        };
        let bundles = self.libs.bundles();
        let key = call_key("list_libraries", &[&self.served_key(None)]);
        let from = match budget::start(a.budget.cursor.as_deref(), &key) {
            Ok(c) => c.at,
            Err(e) => return Ok(output::error(e)),
        };
        let broken = self.libs.broken().to_vec();
        let pieces = bundles.iter().skip(from).map(|b| {
            let m = &b.manifest;
            let info = b.info();
            let versions: Vec<String> =
                bundles.iter().filter(|o| o.manifest.name == m.name).map(|o| o.manifest.version.clone()).collect();
            let built_age = atlas_runtime::manifest::age_days(&m.created);
            let description = m.description.clone().unwrap_or_else(|| describe(&info));
            // A bundle's manifest is untrusted text too: one inert line per library.
            let line = format!(
                "- {} — {}; {} ({}); model {}; built {}{}; versions served: {}\n",
                inert(&b.library()),
                inert(&description),
                atlas_runtime::words::count(info.chunks, "chunk"),
                inert(&info.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")),
                inert(&info.model),
                inert(&m.created),
                built_age.map(|d| format!(" ({} ago)", atlas_runtime::words::count(d, "day"))).unwrap_or_default(),
                inert(&versions.join(", ")),
            );
            // At most a few sources and commits per library: get_bundle_info has them all.
            let sources = m
                .sources
                .iter()
                .take(LIST_SOURCES)
                .map(|s| SourceOut {
                    name: s.name.clone(),
                    kind: s.kind.clone(),
                    url: s.url.clone(),
                    commits: s.commits.iter().take(LIST_COMMITS).cloned().collect(),
                    files: s.files,
                    fetched_at: s.fetched_at.clone(),
                    age_days: s.fetched_at.as_deref().and_then(atlas_runtime::manifest::age_days),
                })
                .collect();
            let item = LibraryOut {
                library: b.library(),
                name: m.name.clone(),
                version: m.version.clone(),
                versions,
                description,
                model: info.model.clone(),
                chunks: info.chunks,
                by_kind: info.by_kind,
                built: m.created.clone(),
                built_age_days: built_age,
                sources,
            };
            Piece { text: line, item }
        });
        let r = budget::page(max, from, bundles.len(), pieces, &key, |kept, next_cursor| {
            let mut text = match broken.len() {
                0 => format!("{}:\n", atlas_runtime::words::count(bundles.len(), "library")),
                n => format!("{} served, {n} broken:\n", atlas_runtime::words::count(bundles.len(), "library")),
            };
            text.extend(kept.iter().map(|p| p.text.as_str()));
            for b in &broken {
                text.push_str(&format!("- {}\n", inert(&b.line())));
            }
            if let Some(c) = &next_cursor {
                text.push_str(&budget::more_line(c, max));
            }
            let libraries = kept.iter().map(|p| p.item.clone()).collect();
            output::typed(text, &LibrariesOut { libraries, broken: broken.clone(), next_cursor })
        })?;
        if budget::fits(&r, max) {
            return Ok(r);
        }
        Ok(output::error(format!(
            "max_tokens {max} is too small for one library ({} needed); raise it",
            budget::tokens(budget::reply_bytes(&r))
        )))
    }

    #[tool(
        title = "Library information",
        description = "What one library holds. Model and dimensions, chunk counts by kind and section, build date, sources and how old they are, and the search modes available. Call it once to learn the sections to filter on (pass library when the server serves several).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<LibraryArg>(),
        output_schema = output::output_schema::<BundleInfoOut>()
    )]
    async fn get_bundle_info(&self, Parameters(a): Parameters<LibraryArg>) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return Ok(output::error(e)),
        };
        let b = match (self.libs.select(a.library.as_deref()), self.libs.is_multi() && a.library.is_none()) {
            (Ok(b), false) => b.into_iter().next_back().unwrap_or_else(|| self.libs.first()),
            (Ok(_), true) => {
                return Ok(output::error(
                    "this server serves several libraries: pass library (list_libraries names them)",
                ));
            }
            (Err(e), _) => return Ok(output::error(e)),
        };
        let full = b.info();
        let longest = full.by_section.len().max(full.sources.len());
        // Every bundle-derived string is made inert; the lists are cut to the budget.
        budget::fit_lists(max, longest, |cap| {
            let mut info = full.clone();
            info.by_section = full.by_section.iter().take(cap).map(|(k, n)| (k.clone(), *n)).collect();
            info.sources.truncate(cap);
            let mut text = format!(
                "{} {} built {}; model {} ({} dims); {} ({}); modes: {}\nsections: {}\n",
                inert(&info.name),
                inert(&info.version),
                inert(&info.created),
                inert(&info.model),
                info.dims,
                atlas_runtime::words::count(info.chunks, "chunk"),
                inert(&info.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")),
                info.modes.join(", "),
                info.by_section.iter().map(|(k, n)| format!("{} ({n})", inert(k))).collect::<Vec<_>>().join(", "),
            );
            text.push_str(&budget::left_out("sections", cap, full.by_section.len()));
            if !info.by_origin.is_empty() {
                let each: Vec<String> = info.by_origin.iter().map(|(k, n)| format!("{n} {k}")).collect();
                text.push_str(&format!("not the package's own code, ranked below it: {}\n", each.join(", ")));
            }
            for s in &info.sources {
                let age = s.fetched_at.as_deref().map(|t| format!(", fetched {}", inert(t))).unwrap_or_default();
                text.push_str(&format!(
                    "source {} ({}): {}{age}\n",
                    inert(&s.name),
                    inert(&s.kind),
                    inert(s.url.as_deref().unwrap_or("-"))
                ));
                // Each file left out said once: the whole group's paths when they are
                // few or too large to index, else the count.
                for g in &s.left_out {
                    let named = g.reason == "too large" || g.files <= 5;
                    let paths = match named {
                        true => {
                            format!(": {}", g.paths.iter().map(|p| inert(p).to_string()).collect::<Vec<_>>().join(", "))
                        }
                        false => String::new(),
                    };
                    text.push_str(&format!("  left out: {}{paths}\n", g.summary()));
                }
            }
            text.push_str(&budget::left_out("sources", cap, full.sources.len()));
            let source_age_days = info
                .sources
                .iter()
                .filter_map(|s| s.fetched_at.as_deref())
                .filter_map(atlas_runtime::manifest::age_days)
                .collect();
            let built_age_days = atlas_runtime::manifest::age_days(&info.created);
            output::typed(text, &BundleInfoOut { info, source_age_days, built_age_days })
        })
    }
}

/// The sources, and commits of each, `list_libraries` shows per library.
const LIST_SOURCES: usize = 8;
const LIST_COMMITS: usize = 2;

/// The longest name the code tools take, in bytes.
const MAX_NAME_BYTES: usize = 1_024;

/// The tools that answer from code: listed only when a served library holds code.
pub(crate) const CODE_TOOLS: [&str; 4] = ["search_code", "find_symbol", "find_references", "get_file_outline"];

/// Whether any of `bundles` holds code.
fn serves_code(bundles: &[Arc<atlas_runtime::Bundle>]) -> bool {
    bundles.iter().any(|b| b.chunks().iter().any(|c| c.kind == ChunkKind::Code))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_rag_tool_is_documented() {
        let mut tools: Vec<String> =
            super::RagServer::router().list_all().into_iter().map(|t| t.name.into_owned()).collect();
        tools.sort();
        assert_eq!(tools, crate::documented_tools("### rag tools"), "docs/servers.md's rag tools table");
    }
    #[test]
    fn age_of_a_date() {
        assert!(atlas_runtime::manifest::age_days("2020-01-01T00:00:00Z").unwrap() > 365 * 5);
        assert_eq!(atlas_runtime::manifest::age_days("garbage"), None);
    }
}
