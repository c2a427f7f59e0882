//! The code tools: where a symbol is defined (`find_symbol`), where it is used
//! (`find_references`) and a file's outline (`get_file_outline`), over [`crate::code`].

use super::*;

#[tool_router(router = code_router, vis = "pub(super)")]
impl RagServer {
    #[tool(
        title = "Find a symbol's definition",
        description = "Where a function, method, type, trait, module or constant is defined. Across the served libraries' code: by name (bare, or qualified as `Type::method`, `Class.method`, `module.function`), or every name starting with it (prefix=true); filter by kind, language or library. Each definition has its file, lines, signature, doc comment, a citation, its file as a resource and its chunk_id. Exact, from the code's syntax tree; use search_code for what code does.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<FindSymbolArgs>(),
        output_schema = output::output_schema::<FindSymbolOut>()
    )]
    async fn find_symbol(&self, Parameters(a): Parameters<FindSymbolArgs>) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return Ok(output::error(e)),
        };
        if a.name.trim().is_empty() || a.name.len() > MAX_NAME_BYTES {
            return Ok(output::error(format!("name must hold 1 to {MAX_NAME_BYTES} bytes")));
        }
        let bundles = match self.code_bundles(a.library.as_deref()) {
            Ok(b) => b,
            Err(e) => return Ok(output::error(e)),
        };
        let key = call_key(
            "find_symbol",
            &[
                &a.name,
                &a.prefix.to_string(),
                a.kind.as_deref().unwrap_or(""),
                a.language.as_deref().unwrap_or(""),
                &self.served_key(a.library.as_deref()),
            ],
        );
        let from = match budget::start(a.budget.cursor.as_deref(), &key) {
            Ok(c) => c.at,
            Err(e) => return Ok(output::error(e)),
        };
        let q = SymbolQuery {
            name: a.name.trim(),
            prefix: a.prefix,
            kind: a.kind.as_deref(),
            language: a.language.as_deref(),
        };
        let found = code::find_symbol(&bundles, &q);
        if found.is_empty() {
            let hint = if a.prefix { "" } else { "; try prefix=true, a shorter name, or search_code" };
            return output::typed(
                format!("no definition of {} in the served code{hint}\n", inert(&format!("{:?}", a.name))),
                &FindSymbolOut { name: a.name, total: 0, definitions: Vec::new(), next_cursor: None },
            );
        }
        let pieces = found.iter().enumerate().skip(from).map(|(n, (b, i))| {
            let d = code::symbol_out(b, *i);
            let mut t = format!(
                "{}. {} {} ({}) {}:{}-{}\n   citation: {}\n   chunk_id: {}\n",
                n + 1,
                inert(&code::kind_said(&d)),
                inert(&d.name),
                inert(&d.library),
                inert(&d.path),
                d.start_line,
                d.end_line,
                inert(&d.citation),
                inert(&d.chunk_id)
            );
            let mut src = String::new();
            if let Some(sig) = &d.signature {
                src.push_str(sig);
                src.push('\n');
            }
            if let Some(doc) = &d.doc {
                src.push_str(doc);
                src.push('\n');
            }
            if !src.is_empty() {
                t.push_str(&fence(&format!("signature and doc of {}", d.name), &src));
            }
            Piece { text: t, item: d }
        });
        budget::page(max, from, found.len(), pieces, &key, |kept, next_cursor| {
            let mut text = format!(
                "{} of {}:\n",
                atlas_runtime::words::count(found.len(), "definition"),
                inert(&format!("{:?}", a.name))
            );
            text.extend(kept.iter().map(|p| p.text.as_str()));
            if let Some(c) = &next_cursor {
                text.push_str(&budget::more_line(c, max));
            }
            let definitions = kept.iter().map(|p| p.item.clone()).collect();
            output::typed(text, &FindSymbolOut { name: a.name.clone(), total: found.len(), definitions, next_cursor })
        })
    }

    #[tool(
        title = "Find a symbol's uses",
        description = "Where the served code uses a name. Grouped by file, each with its line and the function or type it sits in. By name, not resolved by type: a use of `new` is listed for every `new` (pass the last segment; `Type::method` looks up `method`). Use find_symbol for the definition.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<FindReferencesArgs>(),
        output_schema = output::output_schema::<FindReferencesOut>()
    )]
    async fn find_references(
        &self,
        Parameters(a): Parameters<FindReferencesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return Ok(output::error(e)),
        };
        if a.name.trim().is_empty() || a.name.len() > MAX_NAME_BYTES {
            return Ok(output::error(format!("name must hold 1 to {MAX_NAME_BYTES} bytes")));
        }
        let bundles = match self.code_bundles(a.library.as_deref()) {
            Ok(b) => b,
            Err(e) => return Ok(output::error(e)),
        };
        let key = call_key("find_references", &[&a.name, &self.served_key(a.library.as_deref())]);
        let from = match budget::start(a.budget.cursor.as_deref(), &key) {
            Ok(c) => c.at,
            Err(e) => return Ok(output::error(e)),
        };
        let (files, failed) = match code::find_references(&bundles, &a.name) {
            Ok(f) => f,
            Err(e) => {
                let why = bundles.first().map_or_else(|| e.to_string(), |b| output::bundle_error(b, &e));
                return Ok(output::error(why));
            }
        };
        let short = atlas_runtime::symbols::segments(&a.name).last().map(|s| (*s).to_owned()).unwrap_or_default();
        let total: usize = files.iter().map(|f| f.references.len()).sum();
        // Paged by use: `from` counts the uses earlier replies gave. A piece is one use
        // and the file it is in; the reply groups consecutive uses by file.
        let pieces = files.iter().flat_map(|f| f.references.iter().map(move |r| (f, r))).skip(from).map(|(f, r)| {
            let text = format!(
                "  {}: in {}\n",
                r.line,
                r.enclosing.as_deref().map_or_else(|| "module level".to_owned(), |e| inert(e).into())
            );
            Piece { text, item: code::Use { file: f, line: r } }
        });
        budget::page(max, from, total, pieces, &key, |kept, next_cursor| {
            let mut text = format!(
                "{} of {} in {} ({BY_NAME}):\n",
                atlas_runtime::words::count(total, "use"),
                inert(&format!("{short:?}")),
                atlas_runtime::words::count(files.len(), "file")
            );
            let mut out = Vec::<RefFile>::new();
            for p in kept {
                let (f, r) = (p.item.file, p.item.line);
                match out.last_mut() {
                    Some(o) if o.path == f.path && o.library == f.library => o.references.push(r.clone()),
                    _ => {
                        text.push_str(&format!("{} ({}):\n", inert(&f.path), inert(&f.library)));
                        out.push(RefFile {
                            library: f.library.clone(),
                            path: f.path.clone(),
                            uri: f.uri.clone(),
                            references: vec![r.clone()],
                        });
                    }
                }
                text.push_str(&p.text);
            }
            for f in &failed {
                text.push_str(&format!("warning: {f}\n"));
            }
            if let Some(c) = &next_cursor {
                text.push_str(&budget::more_line(c, max));
            }
            output::typed(
                text,
                &FindReferencesOut { name: short.clone(), total, files: out, note: BY_NAME.to_owned(), next_cursor },
            )
        })
    }

    #[tool(
        title = "Outline a file",
        description = "The symbols one source file defines. In order, with their kinds and lines: functions, methods, types, constants. Use it to see a file's structure before reading it.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<OutlineArgs>(),
        output_schema = output::output_schema::<OutlineOut>()
    )]
    async fn get_file_outline(&self, Parameters(a): Parameters<OutlineArgs>) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return Ok(output::error(e)),
        };
        let bundles = match self.code_bundles(a.library.as_deref()) {
            Ok(b) => b,
            Err(e) => return Ok(output::error(e)),
        };
        let holding: Vec<_> =
            bundles.iter().filter(|b| !b.hides(&a.path) && !b.symbols().in_file(&a.path).is_empty()).collect();
        let b = match holding.as_slice() {
            [one] => *one,
            [] => {
                return Ok(output::error(format!(
                    "no served code file {} defines anything; pass the path as a search hit names it (`<source>/<path>`)",
                    inert(&format!("{:?}", a.path))
                )));
            }
            many => {
                return Ok(output::error(format!(
                    "{} is in several libraries ({}); pass library",
                    inert(&format!("{:?}", a.path)),
                    many.iter().map(|b| b.library()).collect::<Vec<_>>().join(", ")
                )));
            }
        };
        let key = call_key("get_file_outline", &[&a.path, &b.library()]);
        let from = match budget::start(a.budget.cursor.as_deref(), &key) {
            Ok(c) => c.at,
            Err(e) => return Ok(output::error(e)),
        };
        let all = code::outline(b, &a.path);
        let uri = crate::resources::uri(&b.library(), &a.path);
        let pieces = all.iter().skip(from).map(|s| Piece {
            text: format!("{}-{} {} {}\n", s.start_line, s.end_line, inert(&s.kind), inert(&s.name)),
            item: s.clone(),
        });
        budget::page(max, from, all.len(), pieces, &key, |kept, next_cursor| {
            let mut text =
                format!("{} defines {}:\n", inert(&a.path), atlas_runtime::words::count(all.len(), "symbol"));
            text.extend(kept.iter().map(|p| p.text.as_str()));
            if let Some(c) = &next_cursor {
                text.push_str(&budget::more_line(c, max));
            }
            let symbols = kept.iter().map(|p| p.item.clone()).collect();
            output::typed(
                text,
                &OutlineOut { library: b.library(), path: a.path.clone(), uri: uri.clone(), symbols, next_cursor },
            )
        })
    }
}
