//! The evidence list: every passage the agent found, numbered once, in one relevance
//! order, with the verbatim lines read through the fs server.
//!
//! Passages come from the tools' structured replies (search hits, symbol
//! definitions, grep matches, reads, chunks). One passage found by several tools is
//! one item. Its relevance sums, over the lists it was found in, the list's weight
//! times its score there: a search hit's score (1 for the first) weighted by that
//! search's calibrated confidence, so docs and code hits fall in one order by how
//! surely each kind answers; a definition or a match by its rank.

use serde::Serialize;
use serde_json::Value;

use atlas_mcp::output::{fence, inert};

/// Lines of context a grep match is read with, each side.
const GREP_CONTEXT: u32 = 3;
/// The longest corpus string kept in a field (a title, a citation).
const MAX_FIELD_CHARS: usize = 300;

/// One passage.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    /// What the answer cites it as: `[n]`.
    pub n: usize,
    /// `name@version`, when known.
    pub library: String,
    /// The file as the fs server names it (with the library first when it serves several).
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    /// Where a reader checks it.
    pub citation: String,
    pub title: String,
    /// The tools that found it, in order.
    pub via: Vec<String>,
    /// The lines as read through the fs server (empty until read).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Its lines were read verbatim through the fs server.
    pub read: bool,
    #[serde(skip)]
    score: f64,
}

impl Evidence {
    /// Its heading line, made inert: `[n] title — citation (path:lines)`, the path
    /// as read_file takes it.
    pub fn head(&self) -> String {
        let place = if self.title.is_empty() { self.path.clone() } else { self.title.clone() };
        let at = format!("{}:{}-{}", self.path, self.start_line, self.end_line);
        format!("[{}] {} — {} ({})", self.n, inert(&place), inert(&self.citation), inert(&at))
    }

    /// The heading and the fenced text, for an LLM or a person.
    pub fn render(&self) -> String {
        let mut s = format!("{}\n", self.head());
        if !self.text.is_empty() {
            s.push_str(&fence(&format!("source [{}]", self.n), &self.text).to_string());
        }
        s
    }

    fn overlaps(&self, o: &Evidence) -> bool {
        self.path == o.path && self.start_line <= o.end_line && o.start_line <= self.end_line
    }
}

/// The passages of one tool reply, in the reply's order. `prefixed`: the fs server
/// serves several libraries, so its paths start with `name@version/`.
pub fn passages(tool: &str, structured: &Value, prefixed: bool) -> Vec<Evidence> {
    let s = |v: &Value| atlas_runtime::utf8::clip_chars(v.as_str().unwrap_or_default(), MAX_FIELD_CHARS);
    let line = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let item = |library: String, path: String, start: u32, end: u32, citation: String, title: String| {
        // A hit names its library shown (`crate:clap@4.5.20`); the fs server's paths
        // start with it stored (`crate+clap@4.5.20/…`).
        let path = if prefixed && !library.is_empty() {
            format!("{}/{path}", atlas_runtime::package::stored_label(&library))
        } else {
            path
        };
        Evidence {
            n: 0,
            library,
            citation: if citation.is_empty() { format!("{path}#L{start}-L{end}") } else { citation },
            path,
            start_line: start.max(1),
            end_line: end.max(start.max(1)),
            title,
            via: vec![tool.to_owned()],
            text: String::new(),
            read: false,
            score: -1.0,
        }
    };
    let hit = |h: &Value| {
        let mut e = item(
            s(&h["library"]),
            s(&h["path"]),
            line(&h["start_line"]),
            line(&h["end_line"]),
            s(&h["citation"]),
            s(&h["title"]),
        );
        e.score = h["score"].as_f64().filter(|v| v.is_finite()).map_or(-1.0, |v| v.clamp(0.0, 1.0));
        e
    };
    let list = |key: &str| structured[key].as_array().cloned().unwrap_or_default();
    match tool {
        "search_docs" | "search_code" => list("hits").iter().map(hit).collect(),
        "find_symbol" => list("definitions")
            .iter()
            .map(|d| {
                let title = format!("{} {}", s(&d["kind"]), s(&d["name"]));
                item(
                    s(&d["library"]),
                    s(&d["path"]),
                    line(&d["start_line"]),
                    line(&d["end_line"]),
                    s(&d["citation"]),
                    title,
                )
            })
            .collect(),
        "get_chunk" => {
            let c = &structured["chunk"];
            if c.is_object() { vec![hit(c)] } else { Vec::new() }
        }
        // fs paths are already as the fs server names them.
        "search" => list("matches")
            .iter()
            .map(|m| {
                let at = line(&m["line"]);
                let path = s(&m["path"]);
                let mut e = item(
                    String::new(),
                    path.clone(),
                    at.saturating_sub(GREP_CONTEXT),
                    at + GREP_CONTEXT,
                    String::new(),
                    path,
                );
                e.citation = format!("{}#L{at}", e.path);
                e
            })
            .collect(),
        "read_file" => {
            let path = s(&structured["path"]);
            if path.is_empty() {
                return Vec::new();
            }
            let (a, b) = (line(&structured["start_line"]), line(&structured["end_line"]));
            let mut e = item(String::new(), path.clone(), a, b, String::new(), path);
            e.text = structured["text"].as_str().unwrap_or_default().to_owned();
            e.read = true;
            vec![e]
        }
        _ => Vec::new(),
    }
}

/// The evidence so far: numbered in the order first added, ranked by fused rank.
#[derive(Debug, Default)]
pub struct Pool {
    pub items: Vec<Evidence>,
}

impl Pool {
    /// Adds one tool's ranked list with `weight`; returns the numbers of its passages
    /// (a passage already held keeps its number and gains this tool and score). A
    /// passage without a score of its own scores by rank, 1/(1 + rank).
    pub fn add(&mut self, list: Vec<Evidence>, weight: f64) -> Vec<usize> {
        let mut numbers = Vec::new();
        for (rank, mut e) in list.into_iter().enumerate() {
            let own = if e.score >= 0.0 { e.score } else { 1.0 / (1.0 + rank as f64) };
            let gain = weight * own;
            match self.items.iter_mut().find(|o| o.overlaps(&e)) {
                Some(o) => {
                    o.score += gain;
                    if !o.via.contains(&e.via[0]) {
                        o.via.push(e.via[0].clone());
                    }
                    if o.library.is_empty() {
                        o.library = std::mem::take(&mut e.library);
                    }
                    if !o.read && e.read {
                        (o.start_line, o.end_line, o.text, o.read) = (e.start_line, e.end_line, e.text, true);
                    }
                    if !numbers.contains(&o.n) {
                        numbers.push(o.n);
                    }
                }
                None => {
                    e.n = self.items.len() + 1;
                    e.score = gain;
                    numbers.push(e.n);
                    self.items.push(e);
                }
            }
        }
        numbers
    }

    /// The numbers in relevance order (the first found first on a tie).
    pub fn ranked(&self) -> Vec<usize> {
        let mut order: Vec<&Evidence> = self.items.iter().collect();
        order.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.n.cmp(&b.n)));
        order.iter().map(|e| e.n).collect()
    }

    pub fn get(&self, n: usize) -> Option<&Evidence> {
        n.checked_sub(1).and_then(|i| self.items.get(i))
    }

    pub fn get_mut(&mut self, n: usize) -> Option<&mut Evidence> {
        n.checked_sub(1).and_then(|i| self.items.get_mut(i))
    }

    /// Renumbers in relevance order, keeping the first `keep` (before anything is shown).
    pub fn rank_and_keep(&mut self, keep: usize) {
        let order = self.ranked();
        let mut items: Vec<Evidence> = order.into_iter().take(keep).filter_map(|n| self.get(n).cloned()).collect();
        for (i, e) in items.iter_mut().enumerate() {
            e.n = i + 1;
        }
        self.items = items;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(path: &str, a: u32, b: u32, score: f64) -> Value {
        serde_json::json!({"library": "lib@1", "path": path, "start_line": a, "end_line": b, "citation": format!("{path}#L{a}"), "title": path, "score": score})
    }

    #[test]
    fn one_passage_found_twice_is_one_item_ranked_by_both_lists() {
        let docs = serde_json::json!({"hits": [hit("a.md", 1, 9, 1.0), hit("b.md", 1, 5, 0.8)]});
        let code = serde_json::json!({"hits": [hit("b.md", 3, 4, 1.0), hit("c.rs", 10, 20, 0.9)]});
        let mut ev = Pool::default();
        assert_eq!(ev.add(passages("search_docs", &docs, false), 0.9), [1, 2]);
        assert_eq!(ev.add(passages("search_code", &code, false), 0.2), [2, 3]);
        assert_eq!(ev.ranked(), [2, 1, 3]);
        assert_eq!(ev.get(2).unwrap().via, ["search_docs", "search_code"]);
        ev.rank_and_keep(2);
        assert_eq!(ev.items.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["b.md", "a.md"]);
        assert_eq!(ev.items[0].n, 1);
    }

    #[test]
    fn several_libraries_prefix_the_path_and_grep_reads_context() {
        let docs = serde_json::json!({"hits": [hit("a.md", 1, 9, 1.0)]});
        assert_eq!(passages("search_docs", &docs, true)[0].path, "lib@1/a.md");
        let grep = serde_json::json!({"matches": [{"path": "lib@1/x.py", "line": 2, "text": "t"}]});
        let g = &passages("search", &grep, true)[0];
        assert_eq!((g.path.as_str(), g.start_line, g.end_line), ("lib@1/x.py", 1, 5));
        assert!(passages("list_files", &serde_json::json!({"files": ["a"]}), false).is_empty());
    }

    #[test]
    fn a_package_librarys_passage_is_read_by_the_path_the_fs_server_lists() {
        let hit = serde_json::json!({"hits": [{"library": "crate:clap@4.5.20", "path": "clap/src/lib.rs", "start_line": 1, "end_line": 9, "score": 1.0}]});
        let e = &passages("search_code", &hit, true)[0];
        assert_eq!((e.library.as_str(), e.path.as_str()), ("crate:clap@4.5.20", "crate+clap@4.5.20/clap/src/lib.rs"));
        let scoped = serde_json::json!({"definitions": [{"library": "npm:@scope/x@1.2.3", "path": "x/index.js", "start_line": 2, "end_line": 4, "kind": "function", "name": "pad"}]});
        assert_eq!(passages("find_symbol", &scoped, true)[0].path, "npm+scope+x@1.2.3/x/index.js");
    }
}
