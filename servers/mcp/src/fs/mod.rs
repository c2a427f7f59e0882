//! The fs server: the bundle's mirror, verbatim. Lists publications and files, reads
//! a file by line range, greps. Nothing ranked, nothing invented.
//!
//! Every path an agent passes is resolved beneath the mirror root (see
//! [`MirrorRoot::resolve`]); anything else is a tool error that says why.
//!
//! `root` is the path guard and name escaping, `read` the line windows, `grep` the
//! search sink and `search` the tool over it, `wire` the tools' arguments and replies, `handler` the MCP server
//! around the tools; the tools and the routing between libraries are here.

mod grep;
mod handler;
mod read;
mod search;
mod wire;

use wire::{
    FilesOut, GrepOut, ListFilesArgs, ListPublicationsArgs, Publication, PublicationsOut, ReadFileArgs, ReleaseInfo,
    ReleaseOut, SearchArgs,
};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use grep_regex::RegexMatcherBuilder;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ServerConfig};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};
use tokio_util::sync::CancellationToken;

use crate::budget::{self, Cursor, Piece, call_key};
use crate::library::Broken;
use crate::live::Live;
use crate::mirror::Fs;
use crate::mirror::{read_checked, shown};
use crate::output::{self, fence};
use grep::{Found, grep};
use read::read_window;

/// The most lines `read_file` returns in one call.
pub const READ_MAX_LINES: usize = 2000;
/// The most bytes `read_file` returns in one call.
pub const READ_MAX_BYTES: usize = 256 * 1024;
/// `search` default and ceiling for matches.
pub const SEARCH_DEFAULT_RESULTS: usize = 50;
pub const SEARCH_MAX_RESULTS: usize = 500;
/// Longest matched line shown, in characters.
const LINE_MAX_CHARS: usize = 400;
/// The longest search pattern accepted, in bytes.
pub const PATTERN_MAX_BYTES: usize = 4096;
/// The compiled regex and its lazy DFA may use this much memory.
const REGEX_SIZE_LIMIT: usize = 2 * 1024 * 1024;
const REGEX_DFA_SIZE_LIMIT: usize = 16 * 1024 * 1024;
/// Lines longer than this are not searched (the file is reported as skipped).
pub const SEARCH_MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// The longest one tool call may take before it answers with what it has.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct FsServer {
    /// One entry per library, each following its origin (an installed name's
    /// `current`, like the rag server); with several, each path starts with its key.
    /// A project's server adds those its set gains ([`FsServer::add`]).
    sources: Arc<std::sync::RwLock<Vec<Live<Fs>>>>,
    /// Libraries given that did not open: named, not served.
    broken: Arc<Vec<Broken>>,
    tool_router: ToolRouter<Self>,
}

/// A served mirror as one call sees it, and the first path segment that names it
/// (`name@version/`, or empty when the server serves one).
#[derive(Debug, Clone)]
struct Lib {
    prefix: String,
    fs: Arc<Fs>,
}

impl FsServer {
    /// The mirrors serving now: each call takes the versions current when it starts.
    fn libs(&self) -> Vec<Lib> {
        let sources = self.sources.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let multi = sources.len() + self.broken.len() > 1;
        sources
            .iter()
            .map(|l| {
                let fs = l.get();
                Lib { prefix: if multi { format!("{}/", fs.label()) } else { String::new() }, fs }
            })
            .collect()
    }

    /// Which library a path names, and the path inside its mirror. With several
    /// libraries the path starts with `name@version`, or `name` when one version of it
    /// is served; the name in any spelling a `library` argument takes (the stored
    /// `crate+clap`, the shown `crate:clap` or `npm:@scope/x` that hits carry, the bare
    /// package name), through [`atlas_runtime::package::matches`]. A version that is
    /// not served is an error naming those that are.
    fn route<'a, 'b>(&self, libs: &'b [Lib], path: &'a str) -> Result<(&'b Lib, &'a str), String> {
        if let ([one], true) = (libs, self.broken.is_empty()) {
            return Ok((one, path));
        }
        let (first, rest) = library_segment(path);
        // The key exactly (`crate+clap@4.5.20`), whatever a name holds.
        if let Some(one) = libs.iter().find(|l| l.prefix.trim_end_matches('/') == first) {
            return Ok((one, rest));
        }
        let (name, version) = match atlas_runtime::package::split_version(first) {
            Some((n, v)) => (n, Some(v)),
            None => (first, None),
        };
        let lib_name = |l: &Lib| l.fs.manifest.as_ref().map_or_else(|| l.fs.name.clone(), |m| m.name.clone());
        let named: Vec<&Lib> =
            libs.iter().filter(|l| !name.is_empty() && atlas_runtime::package::matches(&lib_name(l), name)).collect();
        let served_version = |l: &Lib| l.fs.manifest.as_ref().map(|m| m.version.clone());
        let at_version: Vec<&Lib> = match version {
            Some(v) => named.iter().copied().filter(|l| served_version(l).as_deref() == Some(v)).collect(),
            None => named.clone(),
        };
        match at_version.as_slice() {
            [one] => Ok((one, rest)),
            [] if !named.is_empty() => Err(output::inert(&format!(
                "{first} is not served: the {} served {} {}; start the path with {}",
                if named.len() == 1 { "version" } else { "versions" },
                if named.len() == 1 { "is" } else { "are" },
                named.iter().filter_map(|l| served_version(l)).collect::<Vec<_>>().join(", "),
                named.iter().map(|l| format!("{}/", l.prefix.trim_end_matches('/'))).collect::<Vec<_>>().join(" or ")
            ))
            .into()),
            [] => match self
                .broken
                .iter()
                .find(|b| b.library == first || atlas_runtime::package::matches(&b.name, name) || b.name == first)
            {
                Some(b) => Err(b.line()),
                None => Err(format!(
                    "{} does not start with a served library; paths start with one of {} (list_publications shows them)",
                    output::inert(&format!("{path:?}")),
                    Self::keys(libs)
                )),
            },
            many => Err(format!(
                "{} names several versions; start the path with one of {}",
                output::inert(&format!("{first:?}")),
                many.iter().map(|l| l.prefix.trim_end_matches('/')).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    fn keys(libs: &[Lib]) -> String {
        libs.iter().map(|l| l.prefix.trim_end_matches('/')).collect::<Vec<_>>().join(", ")
    }

    /// Every file of every library as a tool shows it, with its publication.
    fn all_files(libs: &[Lib]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for l in libs {
            for f in l.fs.files() {
                let p = format!("{}{}", l.prefix, l.fs.root.publication_of(&f));
                out.push((format!("{}{f}", l.prefix), p));
            }
        }
        out
    }
}

/// A path's library part and the rest: its first segment, or its first two when the
/// library is a scoped npm package in the shown spelling (`npm:@scope/x@1.2.3/…`,
/// `@scope/x/…`), whose name holds a `/`.
fn library_segment(path: &str) -> (&str, &str) {
    let cut = |at: usize| (&path[..at], path.get(at + 1..).unwrap_or(""));
    let mut slashes = path.match_indices('/').map(|(i, _)| i);
    let first = slashes.next();
    let scoped = path.starts_with('@') || path.starts_with("npm:@");
    match (first, scoped) {
        (Some(_), true) => match slashes.next() {
            Some(second) => cut(second),
            None => (path, ""),
        },
        (Some(i), false) => cut(i),
        (None, _) => (path, ""),
    }
}

fn tool_error(msg: impl Into<String>) -> Result<CallToolResult, ErrorData> {
    Ok(output::error(msg))
}

/// Runs blocking file-system work off the async workers, bounded by [`CALL_TIMEOUT`]:
/// a slow or stuck file system delays one call, never the server. `Err` is the reply.
async fn off_worker<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Result<CallToolResult, ErrorData>> {
    match tokio::time::timeout(CALL_TIMEOUT, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Err(ErrorData::internal_error(e.to_string(), None))),
        Err(_) => {
            Err(tool_error(format!("the file system took over {}s to answer; try again later", CALL_TIMEOUT.as_secs())))
        }
    }
}

/// A glob as a matcher; a glob over [`PATTERN_MAX_BYTES`] is refused before it is
/// compiled (globset panics on the regex of a very long one).
fn glob_matcher(glob: Option<&str>) -> Result<Option<globset::GlobMatcher>, String> {
    if let Some(g) = glob
        && g.len() > PATTERN_MAX_BYTES
    {
        return Err(format!(
            "the glob is {} bytes, over the {PATTERN_MAX_BYTES}-byte limit; pass a shorter one",
            g.len()
        ));
    }
    glob.map(|g| {
        globset::GlobBuilder::new(g)
            .literal_separator(false)
            .build()
            .map(|g| g.compile_matcher())
            .map_err(|e| output::inert(&format!("bad glob {g:?}: {e}")).into())
    })
    .transpose()
}

impl FsServer {
    /// The served libraries' labels, for binding cursors.
    fn served_key(libs: &[Lib]) -> String {
        libs.iter().map(|l| l.fs.label()).collect::<Vec<_>>().join(",")
    }

    /// The library a resource URI's first segment names.
    fn lib_of_uri<'l>(libs: &'l [Lib], library: &str) -> Option<&'l Lib> {
        libs.iter().find(|l| l.fs.label() == library || l.fs.name == library)
    }

    /// Reads a resource (`atlas://{library}/{path}`) through the path guard and the
    /// manifest check.
    fn read_resource_blocking(libs: &[Lib], uri: &str) -> Result<(String, String), String> {
        let (library, path) = crate::resources::parse(uri)?;
        let lib = Self::lib_of_uri(libs, &library)
            .ok_or_else(|| format!("no library {} is served", output::inert(&library)))?;
        let shown_path = format!("{library}/{}", shown(&path));
        let (bytes, _) = read_checked(&lib.fs, &path, &shown_path)?;
        Ok((path, String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Every file of every library as a resource, in path order.
    fn resources(libs: &[Lib]) -> Vec<rmcp::model::Resource> {
        let mut out = Vec::new();
        for l in libs {
            let label = l.fs.label();
            for f in l.fs.files() {
                out.push(crate::resources::resource(&label, &f));
            }
        }
        out
    }
}

impl FsServer {
    /// Every tool: the listing and reading ones (here), and `search` ([`search`]).
    pub(crate) fn router() -> ToolRouter<Self> {
        Self::tool_router() + Self::search_router()
    }
}

#[tool_router]
impl FsServer {
    pub fn new(fs: Fs) -> FsServer {
        tracing::info!("fs server for {} at {}", fs.name, fs.root.path().display());
        FsServer::libraries(vec![Live::new(Arc::new(fs))], Vec::new()).expect("one library is never a duplicate")
    }

    /// A server over bundles' mirrors (with several, each under `name@version/`), each
    /// following its origin; `broken` are those given that did not open.
    pub fn libraries(each: Vec<Live<Fs>>, broken: Vec<Broken>) -> Result<FsServer, crate::library::NotServed> {
        crate::library::check_served(each.iter().map(|l| l.get().label()), &broken)?;
        for l in &each {
            let fs = l.get();
            tracing::info!("fs server for {} at {}", fs.label(), fs.root.path().display());
        }
        Ok(FsServer {
            sources: Arc::new(std::sync::RwLock::new(each)),
            broken: Arc::new(broken),
            tool_router: Self::router(),
        })
    }

    /// Serves one more mirror (a project's set gained it while serving), unless one of
    /// its `name@version` serves already; whether it was added.
    pub fn add(&self, live: Live<Fs>) -> bool {
        let label = live.get().label();
        let mut sources = self.sources.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if sources.iter().any(|l| l.get().label() == label) {
            return false;
        }
        sources.push(live);
        true
    }

    /// Whether the mirror labelled `label` (`crate+clap@4.5.20`) serves now.
    pub fn serves(&self, label: &str) -> bool {
        self.sources.read().unwrap_or_else(std::sync::PoisonError::into_inner).iter().any(|l| l.get().label() == label)
    }

    #[tool(
        title = "List publications",
        description = "List the mirror's publications. The top-level sections of the documentation mirror, with how many files each holds. Start here to see what the mirror covers; then list_files on one publication.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<ListPublicationsArgs>(),
        output_schema = output::output_schema::<PublicationsOut>()
    )]
    async fn list_publications(
        &self,
        Parameters(a): Parameters<ListPublicationsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return tool_error(e),
        };
        let libs = self.libs();
        let key = call_key("list_publications", &[&Self::served_key(&libs)]);
        let from = match budget::start(a.budget.cursor.as_deref(), &key) {
            Ok(c) => c.at,
            Err(e) => return tool_error(e),
        };
        let counts = match off_worker(move || {
            let mut m: BTreeMap<String, usize> = BTreeMap::new();
            for (_, p) in FsServer::all_files(&libs) {
                *m.entry(p).or_default() += 1;
            }
            m
        })
        .await
        {
            Ok(c) => c,
            Err(e) => return e,
        };
        // Made only as far as the budget reaches (`budget::page`).
        let pieces = counts.iter().skip(from).map(|(p, n)| Piece {
            text: format!("- {} ({})\n", shown(p), atlas_runtime::words::count(*n, "file")),
            item: Publication { publication: p.clone(), files: *n },
        });
        budget::page(max, from, counts.len(), pieces, &key, |kept, next_cursor| {
            let mut text = format!("{}:\n", atlas_runtime::words::count(counts.len(), "publication"));
            text.extend(kept.iter().map(|p| p.text.as_str()));
            if let Some(c) = &next_cursor {
                text.push_str(&budget::more_line(c, max));
            }
            let publications = kept.iter().map(|p| p.item.clone()).collect();
            output::typed(text, &PublicationsOut { publications, next_cursor })
        })
    }

    #[tool(
        title = "List files",
        description = "List the mirror's files. Sorted by path, optionally within one publication and matching a glob, with paging (offset, limit). Use it to find the exact path to pass to read_file.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<ListFilesArgs>(),
        output_schema = output::output_schema::<FilesOut>()
    )]
    async fn list_files(&self, Parameters(a): Parameters<ListFilesArgs>) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return tool_error(e),
        };
        let glob = match glob_matcher(a.glob.as_deref()) {
            Ok(g) => g,
            Err(e) => return tool_error(e),
        };
        let libs = self.libs();
        let limit = a.limit.unwrap_or(200).clamp(1, 1000);
        let key = call_key(
            "list_files",
            &[
                &Self::served_key(&libs),
                a.publication.as_deref().unwrap_or(""),
                a.glob.as_deref().unwrap_or(""),
                &limit.to_string(),
            ],
        );
        let offset = match budget::start(a.budget.cursor.as_deref(), &key) {
            Ok(c) if a.budget.cursor.is_some() => c.at,
            Ok(_) => a.offset.unwrap_or(0),
            Err(e) => return tool_error(e),
        };
        let (all, pubs): (Vec<String>, Vec<String>) = match off_worker(move || FsServer::all_files(&libs)).await {
            Ok(all) => all.into_iter().unzip(),
            Err(e) => return e,
        };
        // A publication as `list_publications` shows it (escaped) or raw.
        let publication =
            a.publication.as_deref().map(|p| pubs.iter().find(|q| shown(q) == p).map_or(p, |q| q.as_str()));
        if let Some(p) = publication
            && !pubs.iter().any(|q| q == p)
        {
            return tool_error(format!("no publication {p:?}; call list_publications to see them"));
        }
        let matching: Vec<&String> = all
            .iter()
            .zip(&pubs)
            .filter(|(_, p)| publication.is_none_or(|want| want == p.as_str()))
            .filter(|(f, _)| glob.as_ref().is_none_or(|g| g.is_match(f.as_str())))
            .map(|(f, _)| f)
            .collect();
        let pieces =
            matching.iter().skip(offset).take(limit).map(|f| Piece { text: format!("{}\n", shown(f)), item: *f });
        // `limit` bounds the page as `total` would: a page that ends at it still
        // continues, by offset or cursor.
        budget::page(max, offset, matching.len(), pieces, &key, |kept, next_cursor| {
            let next = next_cursor.as_ref().map(|_| offset + kept.len());
            let mut text = format!(
                "{} of {} (from offset {offset}):\n",
                kept.len(),
                atlas_runtime::words::count(matching.len(), "file")
            );
            text.extend(kept.iter().map(|p| p.text.as_str()));
            if let (Some(n), Some(c)) = (next, &next_cursor) {
                text.push_str(&format!("more: call again with offset={n} (or cursor={c:?})\n"));
            }
            let files = kept.iter().map(|p| p.item.clone()).collect();
            output::typed(text, &FilesOut { total: matching.len(), offset, files, next_offset: next, next_cursor })
        })
    }

    #[tool(
        title = "Read a file",
        description = "Read one file verbatim. Optionally a line range (start_line, end_line, 1-based, inclusive). At most 2000 lines, 256 KiB or the reply's budget (max_tokens) come back per call; when a cap is hit the reply says so and where to continue (next_cursor, or start_line and byte_offset for a line longer than the cap). Use it to verify what a search hit cites.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<ReadFileArgs>(),
        output_schema = output::output_schema::<read::ReadOut>()
    )]
    async fn read_file(&self, Parameters(mut a): Parameters<ReadFileArgs>) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return tool_error(e),
        };
        let key = read::read_key(&a.path, a.end_line);
        if let Some(c) = a.budget.cursor.as_deref().filter(|c| !c.trim().is_empty()) {
            match Cursor::decode(c, &key) {
                Ok(c) => {
                    a.start_line = Some(c.at);
                    a.byte_offset = Some(c.within);
                }
                Err(e) => return tool_error(e),
            }
        }
        let libs = self.libs();
        let (fs, prefix) = match self.route(&libs, &a.path) {
            Ok((lib, rest)) => {
                let r = (lib.fs.clone(), lib.prefix.clone());
                a.path = rest.to_owned();
                r
            }
            Err(e) => return tool_error(e),
        };
        let bytes = max * budget::BYTES_PER_TOKEN;
        match off_worker(move || read_window(&fs, &prefix, &a, bytes)).await {
            Ok(Ok((text, structured))) => output::typed(text, &structured),
            Ok(Err(msg)) => tool_error(msg),
            Err(e) => e,
        }
    }

    #[tool(
        title = "Release information",
        description = "What this mirror is. Bundle name and version, when it was built and when its sources were fetched, each source with its URL or commit, and file counts. Use it to cite the release you read.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        input_schema = output::input_schema::<ListPublicationsArgs>(),
        output_schema = output::output_schema::<ReleaseOut>()
    )]
    async fn get_release_info(
        &self,
        Parameters(a): Parameters<ListPublicationsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let max = match budget::resolve(a.budget.max_tokens) {
            Ok(m) => m,
            Err(e) => return tool_error(e),
        };
        let libs = self.libs();
        let each = libs.clone();
        let counts = match off_worker(move || each.iter().map(|l| l.fs.files().len()).collect::<Vec<_>>()).await {
            Ok(n) => n,
            Err(e) => return e,
        };
        let longest = libs.iter().filter_map(|l| l.fs.manifest.as_ref()).map(|m| m.sources.len()).max().unwrap_or(0);
        // Every bundle-derived string is made inert; the sources are cut to the budget.
        budget::fit_lists(max, longest, |cap| {
            let mut text = String::new();
            let mut infos = Vec::new();
            for (l, &files) in libs.iter().zip(&counts) {
                let fs = &l.fs;
                infos.push(match &fs.manifest {
                    Some(m) => ReleaseInfo {
                        name: m.name.clone(),
                        version: Some(m.version.clone()),
                        built: Some(m.created.clone()),
                        files,
                        sources: m.sources.iter().take(cap).cloned().collect(),
                        chunks: Some(m.chunk_count),
                        model: Some(m.model.id.clone()),
                        path_prefix: l.prefix.clone(),
                        mirror: None,
                    },
                    None => ReleaseInfo {
                        name: fs.name.clone(),
                        version: None,
                        built: None,
                        files,
                        sources: Vec::new(),
                        chunks: None,
                        model: None,
                        path_prefix: l.prefix.clone(),
                        mirror: Some(fs.root.path().display().to_string()),
                    },
                });
                match &fs.manifest {
                    Some(m) => {
                        text.push_str(&format!(
                            "{} {} (built {}), {}\n",
                            output::inert(&m.name),
                            output::inert(&m.version),
                            output::inert(&m.created),
                            atlas_runtime::words::count(files, "file")
                        ));
                        for s in m.sources.iter().take(cap) {
                            let commits = if s.commits.is_empty() {
                                String::new()
                            } else {
                                format!(" at {}", s.commits.join(", "))
                            };
                            let fetched = s.fetched_at.as_deref().map(|t| format!(", fetched {t}")).unwrap_or_default();
                            text.push_str(&format!(
                                "- source {} ({}): {}, {}\n",
                                output::inert(&s.name),
                                output::inert(&s.kind),
                                output::inert(&format!("{}{commits}{fetched}", s.url.as_deref().unwrap_or("-"))),
                                atlas_runtime::words::count(s.files, "file")
                            ));
                        }
                        text.push_str(&budget::left_out("sources", cap, m.sources.len()));
                    }
                    None => text.push_str(&format!(
                        "plain mirror {} ({}), no bundle manifest\n",
                        output::inert(&fs.name),
                        atlas_runtime::words::count(files, "file")
                    )),
                }
            }
            let out = if infos.len() == 1 {
                ReleaseOut { one: Some(infos.remove(0)), libraries: Vec::new() }
            } else {
                ReleaseOut { one: None, libraries: infos }
            };
            output::typed(text, &out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_its_library_in_the_stored_or_the_shown_spelling() {
        assert_eq!(library_segment("crate+clap@4.5.20/clap/src/lib.rs"), ("crate+clap@4.5.20", "clap/src/lib.rs"));
        assert_eq!(library_segment("crate:clap@4.5.20/clap/src/lib.rs"), ("crate:clap@4.5.20", "clap/src/lib.rs"));
        assert_eq!(library_segment("npm:@scope/x@1.2.3/x/index.js"), ("npm:@scope/x@1.2.3", "x/index.js"));
        assert_eq!(library_segment("@scope/x/x/index.js"), ("@scope/x", "x/index.js"));
        assert_eq!(library_segment("npm+scope+x@1.2.3/x/index.js"), ("npm+scope+x@1.2.3", "x/index.js"));
        assert_eq!(library_segment("docs"), ("docs", ""));
    }

    #[test]
    fn every_fs_tool_is_documented() {
        let mut tools: Vec<String> = FsServer::router().list_all().into_iter().map(|t| t.name.into_owned()).collect();
        tools.sort();
        assert_eq!(tools, crate::documented_tools("### fs tools"), "docs/servers.md's fs tools table");
    }
}
