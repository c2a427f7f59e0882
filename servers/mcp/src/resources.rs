//! The mirror as MCP resources: `atlas://{library}/{path}`, the library as
//! `name@version` and the path as the mirror names the file (`<source>/<path>`),
//! percent-encoded where a byte is not unreserved. Both servers read them (the rag
//! server's hits link to them); the fs server and the rag server list them.
//!
//! A read goes through the fs server's path guard and the manifest's hash check, the
//! same as `read_file`. Caching hints (SEP-2549): a versioned file never changes, so a
//! read may be kept an hour; the lists change when a library's `current` moves.

use rmcp::model::{
    CacheScope, ErrorData, ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};

use crate::budget::Cursor;

type Context = rmcp::service::RequestContext<rmcp::RoleServer>;

/// The scheme every resource URI starts with.
pub const SCHEME: &str = "atlas://";
/// The template of every resource URI (RFC 6570: `+` keeps the path's slashes).
pub const TEMPLATE: &str = "atlas://{library}/{+path}";
/// Resources per `resources/list` page.
pub const PAGE: usize = 200;
/// How long a read stays fresh: a `name@version` file does not change.
pub const READ_TTL_MS: u64 = 3_600_000;
/// How long a list stays fresh: a served library's `current` can move.
pub const LIST_TTL_MS: u64 = 60_000;
/// How long the prompt list and the resource templates stay fresh (they change only
/// with the server).
pub const STATIC_TTL_MS: u64 = 3_600_000;

/// The hints to add to a result for this peer: only protocol versions that know them
/// (2026-07-28 and later) get them.
pub fn cache_hints(context: &Context, ttl_ms: u64) -> (Option<u64>, Option<CacheScope>) {
    let knows = context.protocol_version().is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
    if knows { (Some(ttl_ms), Some(CacheScope::Public)) } else { (None, None) }
}

/// Whether `b` may stand in a URI path unencoded.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/' | b'@' | b'+')
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if unreserved(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-decodes `s`; `None` for a broken escape or bytes that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The URI of `path` (as the mirror names it) in `library` (`name@version`), the
/// library's name in its stored spelling (`crate+tokio@1.40.0`: no `:` or `/`).
pub fn uri(library: &str, path: &str) -> String {
    let stored = match atlas_runtime::package::split_version(library) {
        Some((name, version)) => format!("{}@{version}", atlas_runtime::package::stored_name(name)),
        None => atlas_runtime::package::stored_name(library),
    };
    format!("{SCHEME}{}/{}", encode(&stored), encode(path))
}

/// The library and the path a URI names, decoded (the path still to be guarded).
pub fn parse(uri: &str) -> Result<(String, String), String> {
    let rest = uri
        .strip_prefix(SCHEME)
        .ok_or_else(|| format!("{} is not an Atlas resource; URIs look like {TEMPLATE}", crate::output::inert(uri)))?;
    let (lib, path) = rest
        .split_once('/')
        .ok_or_else(|| format!("{} names no file; URIs look like {TEMPLATE}", crate::output::inert(uri)))?;
    let bad = || format!("{} holds a broken %-escape", crate::output::inert(uri));
    Ok((decode(lib).ok_or_else(bad)?, decode(path).ok_or_else(bad)?))
}

/// The MIME type a file is served as.
pub fn mime(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).as_deref() {
        Some("md" | "markdown") => "text/markdown",
        Some("rs") => "text/x-rust",
        Some("py") => "text/x-python",
        Some("js" | "mjs" | "cjs") => "text/javascript",
        Some("ts" | "tsx") => "text/x-typescript",
        Some("go") => "text/x-go",
        Some("java") => "text/x-java",
        Some("json") => "application/json",
        _ => "text/plain",
    }
}

/// The listing entry of a file.
pub fn resource(library: &str, path: &str) -> Resource {
    let name = path.rsplit('/').next().unwrap_or(path);
    Resource::new(uri(library, path), crate::output::inert(name))
        .with_title(crate::output::inert(&format!("{library}/{path}")))
        .with_mime_type(mime(path))
}

/// The one template both servers answer.
pub fn template() -> ResourceTemplate {
    ResourceTemplate::new(TEMPLATE, "mirror-file").with_title("A file of a served library's mirror").with_description(
        "A documentation page or source file, verbatim, as the bundle's mirror holds it: `library` is \
             name@version (list_libraries or list_publications names them), `path` the file as a search hit or \
             list_files gives it.",
    )
}

/// One page of `resources/list` from `from` (a cursor's position), with the cursor of
/// the next.
pub fn page(all: Vec<Resource>, from: usize, key: &str, context: &Context) -> ListResourcesResult {
    let total = all.len();
    let items: Vec<Resource> = all.into_iter().skip(from).take(PAGE).collect();
    let after = from + items.len();
    let mut r = ListResourcesResult::with_all_items(items);
    r.next_cursor = (after < total).then(|| Cursor { at: after, within: 0 }.encode(key));
    (r.ttl_ms, r.cache_scope) = cache_hints(context, LIST_TTL_MS);
    r
}

/// `resources/templates/list`: the one template.
pub fn templates(context: &Context) -> ListResourceTemplatesResult {
    let mut r = ListResourceTemplatesResult::with_all_items(vec![template()]);
    (r.ttl_ms, r.cache_scope) = cache_hints(context, STATIC_TTL_MS);
    r
}

/// `resources/read`'s result for a file read through the guard.
pub fn read_result(uri: &str, path: &str, text: String, context: &Context) -> ReadResourceResult {
    let r = ReadResourceResult::new(vec![contents(uri, path, text)]);
    match cache_hints(context, READ_TTL_MS) {
        (Some(ttl), Some(scope)) => r.with_ttl_ms(ttl).with_cache_scope(scope),
        _ => r,
    }
}

/// A read's contents.
pub fn contents(uri: &str, path: &str, text: String) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(mime(path).to_owned()),
        text,
        meta: None,
    }
}

/// The error for a URI that names nothing served (-32002, the URI in `data`).
pub fn not_found(uri: &str, why: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("resource not found: {}", crate::output::inert(why)),
        Some(serde_json::json!({ "uri": uri })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_escape_what_they_must() {
        let u = uri("docs@1.2.0", "site/guides/a b#c?.md");
        assert_eq!(u, "atlas://docs@1.2.0/site/guides/a%20b%23c%3F.md");
        assert_eq!(parse(&u).unwrap(), ("docs@1.2.0".to_owned(), "site/guides/a b#c?.md".to_owned()));
        assert_eq!(parse("atlas://d@1/x/%2e%2e/%2E%2E/etc/passwd").unwrap().1, "x/../../etc/passwd");
        assert!(parse("file:///etc/passwd").is_err());
        assert!(parse("atlas://only-a-library").is_err());
        assert!(parse("atlas://d@1/%zz").is_err());
        assert!(parse("atlas://d@1/%ff%fe").is_err());
        assert_eq!(mime("a/b.rs"), "text/x-rust");
    }
}
