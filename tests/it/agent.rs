//! The agent's side of MCP, with a real client against the built binary: tool
//! annotations and output schemas (every reply checked against its tool's schema),
//! replies that keep to `max_tokens` and continue exactly through `next_cursor`, the
//! mirror as resources (listed, read, traversal refused), prompts and completions,
//! and code intelligence (`find_symbol`, `find_references`, `get_file_outline`) on the
//! fixture and on the real corpora.

use std::collections::BTreeMap;
use std::path::Path;

use rmcp::model::{
    ArgumentInfo, CallToolResult, CompleteRequestParams, GetPromptRequestParams, PaginatedRequestParams,
    ReadResourceRequestParams, Reference, ResourceContents, Tool,
};
use serde_json::{Value, json};

use crate::mcp::{Client, call, err, ok, rt, stdio_client, text};

/// Checks `v` against `schema`, the subset of JSON Schema 2020-12 that schemars
/// writes, resolving `$ref` in `root`; every failure with its place. A keyword the
/// checker does not know fails the check: a schema cannot pass by using what the
/// checker would skip. (The `jsonschema` crate would add some twenty crates to the
/// test build for the same subset: docs/decisions.md.)
fn validate(v: &Value, schema: &Value, root: &Value, at: &str, errs: &mut Vec<String>) {
    let s = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => return errs.push(format!("{at}: no value is allowed")),
        Value::Object(s) => s,
        other => panic!("{at}: a schema must be an object or a boolean, not {other}"),
    };
    let passes = |sub: &Value| {
        let mut e = Vec::new();
        validate(v, sub, root, at, &mut e);
        e.is_empty()
    };
    for (k, sub) in s {
        match k.as_str() {
            "$schema" | "title" | "description" | "default" | "examples" | "$defs" | "definitions" | "readOnly"
            | "writeOnly" | "deprecated" => {}
            "$ref" => {
                let r = sub.as_str().unwrap();
                let target = root.pointer(r.trim_start_matches('#')).unwrap_or_else(|| panic!("unresolved $ref {r}"));
                validate(v, target, root, at, errs);
            }
            "type" => {
                let types: Vec<&str> = match sub {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(a) => a.iter().map(|t| t.as_str().unwrap()).collect(),
                    other => panic!("{at}: bad type {other}"),
                };
                let is = |t: &str| match t {
                    "null" => v.is_null(),
                    "boolean" => v.is_boolean(),
                    "string" => v.is_string(),
                    "array" => v.is_array(),
                    "object" => v.is_object(),
                    "number" => v.is_number(),
                    "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
                    other => panic!("{at}: unknown type {other}"),
                };
                if !types.iter().any(|t| is(t)) {
                    errs.push(format!("{at}: {v} is not of type {types:?}"));
                }
            }
            "properties" => {
                if let Some(o) = v.as_object() {
                    for (p, ps) in sub.as_object().unwrap() {
                        if let Some(x) = o.get(p) {
                            validate(x, ps, root, &format!("{at}/{p}"), errs);
                        }
                    }
                }
            }
            "required" => {
                if let Some(o) = v.as_object() {
                    for p in sub.as_array().unwrap() {
                        if !o.contains_key(p.as_str().unwrap()) {
                            errs.push(format!("{at}: {p} is required"));
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(o) = v.as_object() {
                    let known = s.get("properties").and_then(Value::as_object);
                    for (p, x) in o.iter().filter(|(p, _)| !known.is_some_and(|k| k.contains_key(*p))) {
                        validate(x, sub, root, &format!("{at}/{p}"), errs);
                    }
                }
            }
            "items" => {
                if let Some(a) = v.as_array() {
                    let skip = s.get("prefixItems").and_then(Value::as_array).map_or(0, Vec::len);
                    for (i, x) in a.iter().enumerate().skip(skip) {
                        validate(x, sub, root, &format!("{at}/{i}"), errs);
                    }
                }
            }
            "prefixItems" => {
                if let Some(a) = v.as_array() {
                    for (i, (x, ps)) in a.iter().zip(sub.as_array().unwrap()).enumerate() {
                        validate(x, ps, root, &format!("{at}/{i}"), errs);
                    }
                }
            }
            "minItems" | "maxItems" => {
                if let Some(a) = v.as_array() {
                    let n = sub.as_u64().unwrap() as usize;
                    if (k == "minItems" && a.len() < n) || (k == "maxItems" && a.len() > n) {
                        errs.push(format!("{at}: {} items breaks {k} {n}", a.len()));
                    }
                }
            }
            "minimum" | "maximum" => {
                if let (Some(x), Some(bound)) = (v.as_f64(), sub.as_f64())
                    && ((k == "minimum" && x < bound) || (k == "maximum" && x > bound))
                {
                    errs.push(format!("{at}: {x} breaks {k} {bound}"));
                }
            }
            "format" => {
                let f = sub.as_str().unwrap();
                let ok = match f {
                    "uint" | "uint8" | "uint16" | "uint32" | "uint64" => v.as_u64().is_some() || !v.is_number(),
                    "int" | "int8" | "int16" | "int32" | "int64" => v.as_i64().is_some() || !v.is_number(),
                    "float" | "double" => true,
                    other => panic!("{at}: unknown format {other}"),
                };
                if !ok {
                    errs.push(format!("{at}: {v} is not a {f}"));
                }
            }
            "enum" => {
                if !sub.as_array().unwrap().contains(v) {
                    errs.push(format!("{at}: {v} is not one of {sub}"));
                }
            }
            "const" => {
                if sub != v {
                    errs.push(format!("{at}: {v} is not {sub}"));
                }
            }
            "anyOf" => {
                if !sub.as_array().unwrap().iter().any(passes) {
                    errs.push(format!("{at}: {v} matches none of anyOf"));
                }
            }
            "oneOf" => {
                let n = sub.as_array().unwrap().iter().filter(|s| passes(s)).count();
                if n != 1 {
                    errs.push(format!("{at}: {v} matches {n} of oneOf"));
                }
            }
            "allOf" => {
                for one in sub.as_array().unwrap() {
                    validate(v, one, root, at, errs);
                }
            }
            other => {
                panic!("{at}: the checker does not know {other:?}; teach it before trusting a schema that uses it")
            }
        }
    }
}

/// The failures of `v` against `schema`.
fn schema_errors(v: &Value, schema: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    validate(v, schema, schema, "", &mut errs);
    errs
}

#[test]
fn the_schema_checker_catches_what_it_must() {
    let schema = json!({
        "type": "object",
        "required": ["hits"],
        "properties": {
            "hits": {"type": "array", "items": {"$ref": "#/$defs/Hit"}},
            "next": {"type": ["string", "null"]},
            "mode": {"enum": ["a", "b"]},
            "pick": {"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}
        },
        "$defs": {"Hit": {"type": "object", "required": ["line"], "properties": {"line": {"type": "integer", "format": "uint32", "minimum": 0}}}}
    });
    assert!(schema_errors(&json!({"hits": [{"line": 3}], "next": null, "mode": "a", "pick": 2}), &schema).is_empty());
    for bad in [
        json!({}),
        json!({"hits": [{"line": -1}]}),
        json!({"hits": [{"line": "3"}]}),
        json!({"hits": [], "next": 4}),
        json!({"hits": [], "mode": "c"}),
        json!({"hits": [], "pick": -2}),
    ] {
        assert!(!schema_errors(&bad, &schema).is_empty(), "{bad} passed");
    }
    let unknown = std::panic::catch_unwind(|| schema_errors(&json!(1), &json!({"patternProperties": {}})));
    assert!(unknown.is_err(), "an unknown keyword must fail the check");
}

/// Every tool of a server, by name.
async fn tools(c: &Client) -> BTreeMap<String, Tool> {
    c.list_all_tools().await.unwrap().into_iter().map(|t| (t.name.to_string(), t)).collect()
}

/// Calls `tool`; a successful reply must carry structured content that validates
/// against the tool's output schema (a tool error carries none).
async fn checked(c: &Client, tools: &BTreeMap<String, Tool>, tool: &str, args: Value) -> CallToolResult {
    let r = call(c, tool, args.clone()).await;
    if r.is_error == Some(true) {
        return r;
    }
    let schema = Value::Object((*tools[tool].output_schema.clone().unwrap()).clone());
    let v = r.structured_content.clone().unwrap_or_else(|| panic!("{tool} {args}: no structured content"));
    let errs = schema_errors(&v, &schema);
    assert!(errs.is_empty(), "{tool} {args}: the reply breaks its schema:\n{}\n{v}", errs.join("\n"));
    r
}

/// Annotations and output schemas on every tool.
fn assert_annotated(tools: &BTreeMap<String, Tool>) {
    for (name, t) in tools {
        let title = t.title.as_deref().or(t.annotations.as_ref().and_then(|a| a.title.as_deref()));
        assert!(title.is_some_and(|t| t.len() > 3), "{name}: no title");
        let a = t.annotations.as_ref().unwrap_or_else(|| panic!("{name}: no annotations"));
        assert_eq!(
            (a.read_only_hint, a.idempotent_hint, a.open_world_hint, a.destructive_hint),
            (Some(true), Some(true), Some(false), Some(false)),
            "{name}"
        );
        let schema = t.output_schema.as_ref().unwrap_or_else(|| panic!("{name}: no output schema"));
        assert_eq!(schema.get("type"), Some(&json!("object")), "{name}");
        for p in ["max_tokens", "cursor"] {
            assert!(t.input_schema["properties"].get(p).is_some(), "{name} takes no {p}");
        }
    }
}

/// Every fs tool's replies, checked against its schema, over a bundle.
async fn fs_replies_validate(c: &Client) {
    let tools = tools(c).await;
    assert_annotated(&tools);
    for (tool, args) in [
        ("list_publications", json!({})),
        ("list_publications", json!({"max_tokens": 250})),
        ("list_files", json!({})),
        ("list_files", json!({"glob": "**/*.md", "limit": 2})),
        ("list_files", json!({"publication": "code/net", "max_tokens": 250})),
        ("read_file", json!({"path": "site/guides/install.md"})),
        ("read_file", json!({"path": "site/guides/install.md", "start_line": 2, "end_line": 4})),
        ("read_file", json!({"path": "code/net/retry.rs", "max_tokens": 250})),
        ("search", json!({"pattern": "helm"})),
        ("search", json!({"pattern": "fn \\w+", "regex": true, "context_lines": 2})),
        ("search", json!({"pattern": "e", "max_tokens": 250})),
        ("get_release_info", json!({})),
    ] {
        ok(checked(c, &tools, tool, args).await);
    }
}

/// Every rag tool's replies, checked against its schema, over a bundle.
async fn rag_replies_validate(c: &Client) {
    let tools = tools(c).await;
    assert_annotated(&tools);
    let (_, v) = ok(checked(c, &tools, "search_docs", json!({"query": "helm repo add"})).await);
    let id = v["hits"][0]["chunk_id"].as_str().unwrap().to_owned();
    for (tool, args) in [
        ("search_docs", json!({"query": "install with helm", "detail": "brief", "top_k": 10})),
        ("search_docs", json!({"query": "install with helm", "mode": "keyword", "max_tokens": 400})),
        ("search_code", json!({"query": "retry delay"})),
        ("search_code", json!({"query": "InvoiceBuilder", "detail": "brief"})),
        ("get_chunk", json!({"id": id, "neighbors": 2})),
        // A chunk cut at the budget (at 250 tokens its frame alone does not fit: a tool
        // error says how much it needs, `hostile_bundles.rs`).
        ("get_chunk", json!({"id": id, "neighbors": 2, "max_tokens": 700})),
        ("list_libraries", json!({})),
        ("get_bundle_info", json!({})),
        ("find_symbol", json!({"name": "Backoff"})),
        ("find_symbol", json!({"name": "Backoff::delay_ms"})),
        ("find_symbol", json!({"name": "add", "prefix": true, "language": "python"})),
        ("find_symbol", json!({"name": "nothing_is_called_this"})),
        ("find_references", json!({"name": "delay_ms"})),
        ("find_references", json!({"name": "parse_retry_after", "max_tokens": 250})),
        ("get_file_outline", json!({"path": "code/billing/invoice.py"})),
    ] {
        ok(checked(c, &tools, tool, args).await);
    }
}

#[test]
fn every_tool_is_annotated_and_every_reply_validates_against_its_schema() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let b = bundle.to_str().unwrap();
    let logs = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--bundle", b], &logs.path().join("fs.log")).await;
        fs_replies_validate(&c).await;
        c.cancel().await.unwrap();
        let c = stdio_client(&["serve", "rag", "--bundle", b], &logs.path().join("rag.log")).await;
        rag_replies_validate(&c).await;
        c.cancel().await.unwrap();
    });
}

/// The bytes a reply puts in the client's context: its text and its structured content.
fn reply_bytes(r: &CallToolResult) -> usize {
    text(r).len() + r.structured_content.as_ref().map_or(0, |v| serde_json::to_vec(v).unwrap().len())
}

/// Calls `tool` with `max_tokens` 500, then with each `next_cursor` until there is
/// none; every reply must keep to the budget by the documented estimate (the
/// embedding model's tokenizer's count is printed beside it when `count` is given).
/// Returns the replies.
async fn paged(c: &Client, tool: &str, args: Value, count: Option<&(dyn Fn(&str) -> usize + Sync)>) -> Vec<Value> {
    let mut replies = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut a = args.clone();
        a["max_tokens"] = json!(500);
        if let Some(cur) = &cursor {
            a["cursor"] = json!(cur);
        }
        let r = call(c, tool, a).await;
        let bytes = reply_bytes(&r);
        assert!(bytes.div_ceil(3) <= 500, "{tool} {args}: {bytes} bytes is over 500 tokens at 3 bytes a token");
        if let Some(count) = count {
            // Reported, not asserted: BERT's WordPiece makes every punctuation mark a
            // token, so JSON counts about 40 % higher than in the BPE tokenizers
            // clients use (docs/servers.md, "Budgets").
            let full = format!("{}{}", text(&r), r.structured_content.clone().unwrap_or_default());
            eprintln!(
                "{tool}: {bytes} bytes, {} by the estimate, {} by the embedding model's tokenizer",
                bytes.div_ceil(3),
                count(&full)
            );
        }
        let (_, v) = ok(r);
        cursor = v["next_cursor"].as_str().map(str::to_owned);
        replies.push(v);
        assert!(replies.len() < 200, "{tool}: the cursor does not advance");
        if cursor.is_none() {
            return replies;
        }
    }
}

/// The items under `key` of every reply, in order.
fn items(replies: &[Value], key: &str) -> Vec<Value> {
    replies.iter().flat_map(|r| r[key].as_array().cloned().unwrap_or_default()).collect()
}

#[test]
fn a_budget_of_500_tokens_is_kept_and_the_cursor_continues_exactly() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // A mirror with a long file and many matches, over the budget in every tool.
    let site = tmp.path().join("m");
    std::fs::create_dir_all(site.join("guide")).unwrap();
    let long: String = (1..=400).map(|i| format!("line {i}: the operator reconciles release {i}\n")).collect();
    std::fs::write(site.join("guide/long.md"), &long).unwrap();
    for i in 0..60 {
        std::fs::write(site.join(format!("guide/page{i:02}.md")), format!("# Page {i}\n\nneedle {i}\n")).unwrap();
    }
    let opened = atlas_runtime::Bundle::open(bundle, atlas_runtime::OpenOptions::default()).unwrap();
    let enc = opened.embedder().unwrap();
    let count = move |s: &str| enc.tokenize(s).unwrap().len();
    let count: &(dyn Fn(&str) -> usize + Sync) = &count;
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--mirror", site.to_str().unwrap()], &tmp.path().join("fs.log")).await;
        // read_file: the pages' texts join into the file, byte for byte.
        let pages = paged(&c, "read_file", json!({"path": "guide/long.md"}), Some(count)).await;
        assert!(pages.len() > 3, "{} pages", pages.len());
        let joined: String = pages.iter().map(|p| p["text"].as_str().unwrap()).collect();
        assert_eq!(joined, long);
        // search and list_files: the pages' items are the unbounded reply's.
        let (_, all) =
            ok(call(&c, "search", json!({"pattern": "needle", "max_results": 500, "max_tokens": 200000})).await);
        let pages = paged(&c, "search", json!({"pattern": "needle", "max_results": 500}), Some(count)).await;
        assert!(pages.len() > 1);
        assert_eq!(items(&pages, "matches"), all["matches"].as_array().unwrap().clone());
        let (_, all) = ok(call(&c, "list_files", json!({"limit": 1000, "max_tokens": 200000})).await);
        let pages = paged(&c, "list_files", json!({"limit": 1000}), Some(count)).await;
        assert!(pages.len() > 1);
        assert_eq!(items(&pages, "files"), all["files"].as_array().unwrap().clone());
        // A cursor continues only its own call.
        let (_, first) = ok(call(&c, "search", json!({"pattern": "needle", "max_tokens": 500})).await);
        let cur = first["next_cursor"].as_str().unwrap();
        let e = err(call(&c, "search", json!({"pattern": "other", "cursor": cur})).await);
        assert!(e.contains("does not continue this call"), "{e}");
        let e = err(call(&c, "search", json!({"pattern": "needle", "max_tokens": 5})).await);
        assert!(e.contains("max_tokens 5 is out of range"), "{e}");
        c.cancel().await.unwrap();

        let b = bundle.to_str().unwrap();
        let c = stdio_client(&["serve", "rag", "--bundle", b], &tmp.path().join("rag.log")).await;
        for (tool, args) in [
            ("search_docs", json!({"query": "install the operator with helm", "top_k": 10})),
            ("search_code", json!({"query": "invoice lines and retries", "top_k": 10})),
        ] {
            let mut unbounded = args.clone();
            unbounded["max_tokens"] = json!(200000);
            let (_, all) = ok(call(&c, tool, unbounded).await);
            let pages = paged(&c, tool, args, Some(count)).await;
            assert!(pages.len() > 1, "{tool}: one page");
            let ids = |hits: Vec<Value>| hits.iter().map(|h| h["chunk_id"].clone()).collect::<Vec<_>>();
            assert_eq!(ids(items(&pages, "hits")), ids(all["hits"].as_array().unwrap().clone()), "{tool}");
        }
        let (_, v) = ok(call(&c, "search_docs", json!({"query": "install with helm"})).await);
        let id = v["hits"][0]["chunk_id"].as_str().unwrap();
        let (_, all) = ok(call(&c, "get_chunk", json!({"id": id, "neighbors": 5, "max_tokens": 200000})).await);
        let pages = paged(&c, "get_chunk", json!({"id": id, "neighbors": 5}), Some(count)).await;
        let joined: String = pages.iter().map(|p| p["chunk"]["text"].as_str().unwrap_or("")).collect();
        assert_eq!(joined, all["chunk"]["text"].as_str().unwrap());
        c.cancel().await.unwrap();
    });
}

/// Ways to name a file outside the mirror, or none at all, in a resource URI; each
/// read must be refused (with the URI's library prefixed where it is a path).
const TRAVERSALS: &[&str] = &[
    "../outside.md",
    "../../outside.md",
    "docs/../../outside.md",
    "./../outside.md",
    "guide/../../outside.md",
    "guide/./../../../outside.md",
    "..",
    "../",
    "%2e%2e/outside.md",
    "%2E%2E/outside.md",
    "%2e%2e%2foutside.md",
    "guide/%2e%2e/%2e%2e/outside.md",
    "%252e%252e/outside.md",
    "%c0%ae%c0%ae/outside.md",
    "..%5coutside.md",
    "..\\outside.md",
    "/etc/passwd",
    "//etc/passwd",
    "%2fetc%2fpasswd",
    "guide/long.md%00.txt",
    "guide/long.md\u{0}",
    "to-file.md",
    "to-dir/secret.md",
    "chain.md",
    "guide/missing.md",
    "",
    "guide",
    "guide/",
    "\u{ff0e}\u{ff0e}/outside.md",
];

#[cfg(unix)]
#[test]
fn resources_are_listed_paged_read_and_refuse_every_traversal() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("m/docs");
    std::fs::create_dir_all(real.join("guide")).unwrap();
    for i in 0..450 {
        std::fs::write(real.join(format!("guide/p{i:03}.md")), format!("# Page {i}\n")).unwrap();
    }
    std::fs::write(real.join("guide/long.md"), "# Long\n").unwrap();
    std::fs::write(tmp.path().join("m/outside.md"), "OUTSIDE").unwrap();
    std::fs::create_dir_all(tmp.path().join("m/evil")).unwrap();
    std::fs::write(tmp.path().join("m/evil/secret.md"), "SECRET").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("m/outside.md"), real.join("to-file.md")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("m/evil"), real.join("to-dir")).unwrap();
    std::os::unix::fs::symlink(real.join("to-file.md"), real.join("chain.md")).unwrap();
    assert_eq!(TRAVERSALS.len(), 29);
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--mirror", real.to_str().unwrap()], &tmp.path().join("fs.log")).await;
        // Paged: every file once, in order, 200 a page.
        let mut all = Vec::new();
        let mut cursor = None;
        loop {
            let page =
                c.list_resources(Some(PaginatedRequestParams::default().with_cursor(cursor.clone()))).await.unwrap();
            assert!(page.resources.len() <= 200);
            all.extend(page.resources.into_iter().map(|r| r.uri));
            cursor = page.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(all.len(), 451, "{:?}", &all[..3]);
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        let library = all[0].trim_start_matches("atlas://").split('/').next().unwrap().to_owned();
        let templates = c.list_resource_templates(None).await.unwrap();
        assert_eq!(templates.resource_templates[0].uri_template, "atlas://{library}/{+path}");
        // A listed URI reads back as the file.
        let first = all.iter().find(|u| u.ends_with("/guide/p000.md")).unwrap();
        let r = c.read_resource(ReadResourceRequestParams::new(first)).await.unwrap();
        match &r.contents[0] {
            ResourceContents::TextResourceContents { text, mime_type, .. } => {
                assert_eq!((text.as_str(), mime_type.as_deref()), ("# Page 0\n", Some("text/markdown")));
            }
            other => panic!("{other:?}"),
        }
        for t in TRAVERSALS {
            let uri = format!("atlas://{library}/{t}");
            match c.read_resource(ReadResourceRequestParams::new(&uri)).await {
                Ok(r) => panic!("{uri:?} was read: {r:?}"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(!e.contains("OUTSIDE") && !e.contains("SECRET") && !e.contains("root:"), "{uri:?}: {e}");
                    assert!(e.contains("-32002") || e.contains("not found"), "{uri:?}: {e}");
                }
            }
        }
        for uri in ["file:///etc/passwd", "atlas://other@1.0.0/guide/long.md", "atlas://..%2f../outside.md"] {
            assert!(c.read_resource(ReadResourceRequestParams::new(uri)).await.is_err(), "{uri}");
        }
        // The session goes on.
        assert!(c.read_resource(ReadResourceRequestParams::new(&all[1])).await.is_ok());
        c.cancel().await.unwrap();

        // The rag server's hits link to resources that either server reads.
        let b = bundle.to_str().unwrap();
        let rag = stdio_client(&["serve", "rag", "--bundle", b], &tmp.path().join("rag.log")).await;
        let fs = stdio_client(&["serve", "fs", "--bundle", b], &tmp.path().join("fs2.log")).await;
        let r = call(&rag, "search_docs", json!({"query": "helm repo add", "top_k": 3})).await;
        let links: Vec<String> = r.content.iter().filter_map(|c| c.as_resource_link().map(|l| l.uri.clone())).collect();
        let (_, v) = ok(r);
        assert_eq!(links.len(), v["hits"].as_array().unwrap().len());
        assert_eq!(links[0], v["hits"][0]["uri"].as_str().unwrap());
        for server in [&rag, &fs] {
            let r = server.read_resource(ReadResourceRequestParams::new(&links[0])).await.unwrap();
            match &r.contents[0] {
                ResourceContents::TextResourceContents { text, .. } => assert!(text.contains("helm repo add")),
                other => panic!("{other:?}"),
            }
        }
        rag.cancel().await.unwrap();
        fs.cancel().await.unwrap();
    });
}

#[test]
fn prompts_and_completions_name_what_is_served() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let c =
            stdio_client(&["serve", "rag", "--bundle", bundle.to_str().unwrap()], &tmp.path().join("rag.log")).await;
        let prompts = c.list_all_prompts().await.unwrap();
        let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["answer_with_citations", "explain_symbol", "compare_versions"]);
        let p = c
            .get_prompt(
                GetPromptRequestParams::new("explain_symbol")
                    .with_arguments(json!({"name": "Backoff::delay_ms"}).as_object().cloned().unwrap()),
            )
            .await
            .unwrap();
        let msg = serde_json::to_string(&p.messages).unwrap();
        assert!(msg.contains("find_symbol") && msg.contains("Backoff::delay_ms"), "{msg}");
        let e = c.get_prompt(GetPromptRequestParams::new("explain_symbol")).await.unwrap_err();
        assert!(e.to_string().contains("name"), "{e}");
        let e = c
            .get_prompt(
                GetPromptRequestParams::new("answer_with_citations")
                    .with_arguments(json!({"question": "q", "library": "nope"}).as_object().cloned().unwrap()),
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");

        let complete = async |r: Reference, arg: &str, value: &str| -> Vec<String> {
            let req = CompleteRequestParams::new(r, ArgumentInfo::new(arg, value));
            c.complete(req).await.unwrap().completion.values
        };
        let prompt = || Reference::for_prompt("answer_with_citations");
        assert_eq!(complete(prompt(), "library", "fix").await, ["fixture", "fixture@0.1.0"]);
        assert!(complete(prompt(), "library", "zzz").await.is_empty());
        let versions = complete(Reference::for_prompt("compare_versions"), "from", "").await;
        assert!(!versions.is_empty(), "{versions:?}");
        let names = complete(Reference::for_prompt("explain_symbol"), "name", "Back").await;
        assert!(names.contains(&"Backoff".to_owned()), "{names:?}");
        let paths = complete(Reference::for_resource("atlas://{library}/{+path}"), "path", "site/gu").await;
        assert!(paths.iter().all(|p| p.starts_with("site/gu")) && !paths.is_empty(), "{paths:?}");
        c.cancel().await.unwrap();
    });
}

#[test]
fn code_intelligence_on_the_fixture_bundle() {
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let c =
            stdio_client(&["serve", "rag", "--bundle", bundle.to_str().unwrap()], &tmp.path().join("rag.log")).await;
        let (t, v) = ok(call(&c, "find_symbol", json!({"name": "Backoff::delay_ms"})).await);
        let d = &v["definitions"][0];
        assert_eq!((d["path"].as_str(), d["kind"].as_str()), (Some("code/net/retry.rs"), Some("method")), "{t}");
        assert_eq!((d["start_line"].as_u64(), d["end_line"].as_u64()), (Some(10), Some(12)));
        assert!(d["signature"].as_str().unwrap().contains("pub fn delay_ms(&self, n: u32) -> u64"), "{d}");
        assert!(d["doc"].as_str().unwrap().contains("doubling each time"), "{d}");
        assert!(t.contains("code/net/retry.rs") && t.contains("<<<SOURCE "), "{t}");
        let (_, v) = ok(call(&c, "find_symbol", json!({"name": "InvoiceBuilder.add_line()"})).await);
        assert_eq!(v["definitions"][0]["name"], "InvoiceBuilder.add_line");
        let (_, v) = ok(call(&c, "find_symbol", json!({"name": "Invoice", "prefix": true, "kind": "class"})).await);
        assert_eq!(v["total"], 1);
        let (t, v) = ok(call(&c, "find_symbol", json!({"name": "nothing_is_called_this"})).await);
        assert_eq!(v["total"], 0);
        assert!(t.contains("search_code"), "a miss says what to try next: {t}");

        let (t, v) = ok(call(&c, "find_references", json!({"name": "Backoff::delay_ms"})).await);
        assert!(t.contains("by name, not resolved by type"), "{t}");
        let f = &v["files"][0];
        assert_eq!(f["path"], "code/net/retry.rs");
        let used =
            f["references"].as_array().unwrap().iter().find(|r| r["line"] == 22).unwrap_or_else(|| panic!("{v}"));
        assert_eq!(used["enclosing"], "wait_ms");

        let (_, v) = ok(call(&c, "get_file_outline", json!({"path": "code/billing/invoice.py"})).await);
        let names: Vec<&str> = v["symbols"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["InvoiceBuilder", "InvoiceBuilder.__init__", "InvoiceBuilder.add_line", "total_amount"]);
        let e = err(call(&c, "get_file_outline", json!({"path": "../etc/passwd"})).await);
        assert!(e.contains("no served code file"), "{e}");
        c.cancel().await.unwrap();
    });
    // The command line answers the same lookups.
    let b = bundle.to_str().unwrap();
    let out = atlas_e2e::run(std::process::Command::new(atlas_e2e::bin("atlas")).args([
        "search",
        "--bundle",
        b,
        "--symbol",
        "Backoff::delay_ms",
    ]))
    .success();
    assert!(out.stdout.contains("code/net/retry.rs") && out.stdout.contains("#L10-L12"), "{}", out.stdout);
    let out = atlas_e2e::run(std::process::Command::new(atlas_e2e::bin("atlas")).args([
        "search",
        "--bundle",
        b,
        "--references",
        "delay_ms",
    ]))
    .success();
    assert!(out.stdout.contains("22: in wait_ms"), "{}", out.stdout);
}

/// Files of `root` with extension `ext`, sorted, outside tests and vendored folders.
fn sources(root: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Lines of `text` that hold `word` as a whole word (what `grep -w` counts).
fn grep_w(text: &str, word: &str) -> Vec<u32> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let hit = line.match_indices(word).any(|(i, _)| {
            !line[..i].chars().next_back().is_some_and(is_word)
                && !line[i + word.len()..].chars().next().is_some_and(is_word)
        });
        if hit {
            lines.push(n as u32 + 1);
        }
    }
    lines
}

/// `find_symbol` and `find_references` over real code: a slice of tfhe-rs and of
/// concrete-ml, packed by the real pipeline. Every sampled name that one `fn`/`def`/
/// `struct`/`class` line of the slice defines is found at rank 1, at that line; and
/// each sampled name's references are checked against `grep -w` over the same files:
/// every reference is a grep line, and the grep lines that are code (not the
/// definition, a comment, a docstring or a string) are found.
#[test]
fn slow_find_symbol_and_find_references_agree_with_grep_over_the_real_corpora() {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA") else {
        atlas_e2e::skip("ATLAS_CORPORA is unset (set it to ../shared/corpora)");
        return;
    };
    if !crate::embed::model_ready() {
        return;
    }
    let corpora = std::path::PathBuf::from(corpora);
    let work = tempfile::tempdir().unwrap();
    let slices = [
        ("tfhe-rs/repo", "tfhe/src/high_level_api/keys", "rs"),
        ("tfhe-rs/repo", "tfhe/src/high_level_api/booleans", "rs"),
        ("concrete-ml/repo", "src/concrete/ml/quantization", "py"),
        ("concrete-ml/repo", "src/concrete/ml/torch", "py"),
    ];
    let mut files: Vec<(String, String)> = Vec::new(); // (bundle path, text)
    for (corpus, dir, ext) in slices {
        let root = corpora.join(corpus);
        for f in sources(&root.join(dir), ext) {
            let rel = f.strip_prefix(&root).unwrap();
            let to = work.path().join("src").join(corpus.split('/').next().unwrap()).join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&f, &to).unwrap();
            let shown = format!("c/{}/{}", corpus.split('/').next().unwrap(), rel.display());
            files.push((shown, std::fs::read_to_string(&f).unwrap()));
        }
    }
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!("name: code\nsources:\n  c:\n    kind: local\n    path: {}\n", work.path().join("src").display()),
    )
    .unwrap();
    atlas_e2e::run(atlas_e2e::pipeline().arg("-c").arg(&cfg).arg("run")).success();
    let bundle = work.path().join(".atlas/build/bundle");

    // Names one definition line of the slice defines, by grep's reckoning.
    let def_re = |line: &str| -> Option<String> {
        let t = line.trim_start();
        for kw in [
            "pub fn ",
            "fn ",
            "pub(crate) fn ",
            "pub struct ",
            "struct ",
            "pub enum ",
            "enum ",
            "pub trait ",
            "def ",
            "class ",
        ] {
            if let Some(rest) = t.strip_prefix(kw) {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                return (!name.is_empty()).then_some(name);
            }
        }
        None
    };
    let mut defs: BTreeMap<String, Vec<(String, u32)>> = BTreeMap::new();
    for (path, text) in &files {
        for (n, line) in text.lines().enumerate() {
            if let Some(name) = def_re(line) {
                defs.entry(name).or_default().push((path.clone(), n as u32 + 1));
            }
        }
    }
    // Defined once, and not a word any other definition or common code shares.
    let once: Vec<(&String, &(String, u32))> = defs
        .iter()
        .filter(|(n, d)| d.len() == 1 && n.len() > 4 && !n.starts_with("test"))
        .map(|(n, d)| (n, &d[0]))
        .collect();
    // A fixed sample: every k-th name.
    let step = (once.len() / 60).max(1);
    let sample: Vec<_> = once.iter().step_by(step).collect();
    assert!(sample.len() >= 30, "{} names defined once", once.len());

    let tmp = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    rt().block_on(async {
        let c =
            stdio_client(&["serve", "rag", "--bundle", bundle.to_str().unwrap()], &tmp.path().join("rag.log")).await;
        let mut misses = Vec::new();
        for (name, (path, line)) in &sample {
            let (_, v) = ok(call(&c, "find_symbol", json!({"name": name})).await);
            let first = &v["definitions"][0];
            let (p, a, z) = (first["path"].as_str(), first["start_line"].as_u64(), first["end_line"].as_u64());
            // The definition's lines hold the grep line (attributes and decorators come first).
            let holds = p == Some(path.as_str())
                && a.is_some_and(|a| a as u32 <= *line)
                && z.is_some_and(|z| *line <= z as u32);
            if !holds {
                misses.push(format!("{name}: first {p:?} {a:?}-{z:?}, want {path}:{line}"));
            }
        }
        assert!(misses.is_empty(), "find_symbol missed {} of {}:\n{}", misses.len(), sample.len(), misses.join("\n"));

        // References against grep -w, on every fifth sampled name.
        let mut totals = (0usize, 0usize, 0usize); // (grep code lines, found, references)
        for (name, (def_path, def_line)) in sample.iter().step_by(5) {
            let (_, v) = ok(call(&c, "find_references", json!({"name": name, "max_tokens": 200000})).await);
            let found: Vec<(String, u32)> = v["files"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|f| {
                    let p = f["path"].as_str().unwrap().to_owned();
                    f["references"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(move |r| (p.clone(), r["line"].as_u64().unwrap() as u32))
                })
                .collect();
            let mut grep_lines = Vec::new();
            let mut code_lines = Vec::new();
            for (path, text) in &files {
                let lines: Vec<&str> = text.lines().collect();
                let in_docstring = docstring_lines(&lines);
                for n in grep_w(text, name) {
                    grep_lines.push((path.clone(), n));
                    let l = lines[n as usize - 1].trim_start();
                    let prose =
                        l.starts_with("//") || l.starts_with('#') || l.starts_with('*') || in_docstring[n as usize - 1];
                    let quoted = l.contains(&format!("\"{name}"))
                        || l.contains(&format!("'{name}"))
                        || l.contains(&format!("`{name}"));
                    if !(prose || quoted || (path == def_path && n == *def_line)) {
                        code_lines.push((path.clone(), n));
                    }
                }
            }
            for f in &found {
                assert!(grep_lines.contains(f), "{name}: reference {f:?} is no grep -w line");
            }
            let hit = code_lines.iter().filter(|l| found.contains(l)).count();
            let missed: Vec<String> = code_lines
                .iter()
                .filter(|l| !found.contains(l))
                .take(3)
                .map(|(p, n)| {
                    let text = &files.iter().find(|(q, _)| q == p).unwrap().1;
                    format!("{p}:{n}: {}", text.lines().nth(*n as usize - 1).unwrap_or("").trim())
                })
                .collect();
            report.push(format!(
                "{name}: grep -w {} lines ({} code), references {}, code lines found {hit}{}",
                grep_lines.len(),
                code_lines.len(),
                found.len(),
                missed.iter().map(|m| format!("\n    missed {m}")).collect::<String>()
            ));
            totals = (totals.0 + code_lines.len(), totals.1 + hit, totals.2 + found.len());
        }
        let recall = totals.1 as f64 / totals.0.max(1) as f64;
        eprintln!("find_references against grep -w:\n{}\nrecall of code lines {recall:.3}", report.join("\n"));
        assert!(
            recall >= 0.9,
            "references found {} of {} code lines grep -w finds:\n{}",
            totals.1,
            totals.0,
            report.join("\n")
        );
        c.cancel().await.unwrap();
    });
}

/// Which lines of a Python file are inside (or open or close) a triple-quoted string:
/// prose to grep, no use of a name.
fn docstring_lines(lines: &[&str]) -> Vec<bool> {
    let mut open = false;
    lines
        .iter()
        .map(|l| {
            let quotes = l.matches("\"\"\"").count() + l.matches("\'\'\'").count();
            let inside = open || quotes > 0;
            if quotes % 2 == 1 {
                open = !open;
            }
            inside
        })
        .collect()
}
