//! `search`'s work: ripgrep's searcher over a library's files, into a bounded sink.

use std::sync::atomic::{AtomicBool, Ordering};

use grep_searcher::{Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch};
use serde::Serialize;

use super::{LINE_MAX_CHARS, Lib, SEARCH_MAX_LINE_BYTES};

/// One matching line, with its context lines.
#[derive(Debug, Clone, Serialize, rmcp::schemars::JsonSchema)]
pub struct Match {
    /// The file, as the tools name it.
    pub path: String,
    pub line: u64,
    /// The line, cut at 400 characters.
    pub text: String,
    /// Context lines before, as `[line, text]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<(u64, String)>,
    /// Context lines after, as `[line, text]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<(u64, String)>,
}

fn clip(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(line);
    let s = s.trim_end_matches(['\n', '\r']);
    atlas_runtime::utf8::clip_chars(s, LINE_MAX_CHARS)
}

/// What a grep found.
#[derive(Default)]
pub(super) struct Found {
    pub(super) matches: Vec<Match>,
    pub(super) truncated: bool,
    pub(super) files: usize,
    pub(super) cancelled: bool,
    /// Files that could not be searched (a line over the cap, an I/O error).
    pub(super) skipped: Vec<String>,
}

/// Greps a library's regular files into `f` (paths and publications as the tools show
/// them, under the library's prefix); stops early when `stop` is set.
#[allow(clippy::too_many_arguments)]
pub(super) fn grep(
    f: &mut Found,
    lib: &Lib,
    matcher: &grep_regex::RegexMatcher,
    glob: Option<&globset::GlobMatcher>,
    publication: Option<&str>,
    context: usize,
    max: usize,
    stop: &AtomicBool,
) {
    let root = &lib.fs.root;
    let mut searcher: Searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(context)
        .after_context(context)
        .heap_limit(Some(SEARCH_MAX_LINE_BYTES))
        .build();
    let slow = atlas_runtime::failpoint::armed("slow-search", None);
    for file in lib.fs.files() {
        if stop.load(Ordering::SeqCst) {
            f.cancelled = true;
            return;
        }
        let rel = format!("{}{file}", lib.prefix);
        if publication.is_some_and(|p| format!("{}{}", lib.prefix, root.publication_of(&file)) != p)
            || glob.is_some_and(|g| !g.is_match(&rel))
        {
            continue;
        }
        if let Some(ms) = slow {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        f.files += 1;
        let mut sink = Collect {
            rel: &rel,
            out: &mut f.matches,
            pending_before: Vec::new(),
            max,
            truncated: &mut f.truncated,
            stop,
        };
        // A working tree's file as it is now; one gone since it was indexed, skipped.
        let path = match lib.fs.live_path(&file) {
            Some(Some(live)) => live,
            Some(None) => continue,
            None => root.path().join(&file),
        };
        if searcher.search_path(matcher, path, &mut sink).is_err() {
            f.skipped.push(rel.clone());
        }
        if f.truncated {
            break;
        }
    }
}

struct Collect<'a> {
    rel: &'a str,
    out: &'a mut Vec<Match>,
    pending_before: Vec<(u64, String)>,
    max: usize,
    truncated: &'a mut bool,
    stop: &'a AtomicBool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;
    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        if self.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if self.out.len() == self.max {
            *self.truncated = true;
            return Ok(false);
        }
        self.out.push(Match {
            path: self.rel.to_owned(),
            line: m.line_number().unwrap_or(0),
            text: clip(m.bytes()),
            before: std::mem::take(&mut self.pending_before),
            after: Vec::new(),
        });
        Ok(true)
    }
    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        let line = (c.line_number().unwrap_or(0), clip(c.bytes()));
        match c.kind() {
            SinkContextKind::Before => self.pending_before.push(line),
            SinkContextKind::After => {
                if let Some(last) = self.out.last_mut().filter(|m| m.path == self.rel) {
                    last.after.push(line);
                }
            }
            SinkContextKind::Other => {}
        }
        Ok(true)
    }
}
