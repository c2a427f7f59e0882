//! The plan (every lookup the question calls for, at once) and the reads that make
//! the evidence packet: each passage verbatim through fs `read_file`, within a budget.

use std::time::Instant;

use serde_json::{Map, Value, json};

use super::evidence::{Evidence, Pool, passages};
use super::{CallRecord, Served, call};
use atlas_mcp::output::inert;

/// Names and quoted strings the plan looks up, each at most.
const MAX_NAMES: usize = 3;
const MAX_STRINGS: usize = 2;
/// Hits asked of each search in the plan.
const PLAN_TOP_K: usize = 8;
/// A search's weight in the evidence order when it reports no confidence (keyword
/// only): between a weak and a sure one.
const KEYWORD_WEIGHT: f64 = 0.5;

/// The plan: every lookup the question calls for, at once, merged into `pool`.
/// Returns the best search confidence, the question's words that search's library
/// does not hold, and whether a name the question holds is defined.
pub(super) async fn plan(
    served: &Served<'_>,
    question: &str,
    pool: &mut Pool,
    calls: &mut Vec<CallRecord>,
    trace: bool,
) -> (Option<f32>, Vec<String>, bool) {
    let has = |t: &str| served.local.tool(t).is_some();
    let obj = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    // Each list's weight: a search's is its confidence (below), a definition of a
    // name the question holds counts as a sure search's first hit, a grep match less.
    let mut wanted: Vec<(&str, Map<String, Value>, f64)> = Vec::new();
    for tool in ["search_docs", "search_code"].into_iter().filter(|t| has(t)) {
        wanted.push((tool, obj(json!({"query": question, "top_k": PLAN_TOP_K, "detail": "brief"})), KEYWORD_WEIGHT));
    }
    if has("find_symbol") {
        for name in names(question).into_iter().take(MAX_NAMES) {
            wanted.push(("find_symbol", obj(json!({"name": name})), 1.0));
        }
    }
    for s in quoted(question).into_iter().take(MAX_STRINGS) {
        wanted.push(("search", obj(json!({"pattern": s, "max_results": 10})), 0.3));
    }
    // Each call is traced as it returns, not when the whole plan has.
    let replies = futures_util::future::join_all(wanted.iter().map(|(tool, args, _)| async move {
        let t = Instant::now();
        let reply = served.local.call(tool, args.clone()).await;
        let r = CallRecord::of(0, tool, Value::Object(args.clone()), t, &reply);
        if trace {
            r.trace();
        }
        (reply, r)
    }))
    .await;
    let (mut confidence, mut unseen, mut defined) = (None::<f32>, Vec::new(), false);
    for ((tool, _, weight), (reply, r)) in wanted.into_iter().zip(replies) {
        calls.push(r);
        let Some(s) = reply.structured.as_ref().filter(|_| !reply.is_error) else { continue };
        let mut weight = weight;
        if let Some(c) = s["confidence"]["score"].as_f64().filter(|c| c.is_finite()) {
            if confidence.is_none_or(|b| c as f32 > b) {
                unseen = unseen_words(&s["confidence"]["unseen_words"]);
            }
            confidence = Some(confidence.map_or(c as f32, |b| b.max(c as f32)));
            weight = c.clamp(0.0, 1.0);
        }
        defined |= tool == "find_symbol" && s["total"].as_u64().unwrap_or(0) > 0;
        let found = passages(tool, s, served.prefixed);
        let numbers = pool.add(found, weight);
        if let Some(last) = calls.last_mut() {
            last.evidence = numbers;
        }
    }
    (confidence, unseen, defined)
}

/// A reply's `unseen_words`: at most [`atlas_runtime::search::MAX_UNSEEN_WORDS`] short
/// words, each made inert (a server's reply is read, never trusted).
fn unseen_words(v: &Value) -> Vec<String> {
    let words = v.as_array().map(Vec::as_slice).unwrap_or_default();
    words
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| !w.is_empty() && w.len() <= atlas_runtime::search::MAX_UNSEEN_WORD_BYTES)
        .take(atlas_runtime::search::MAX_UNSEEN_WORDS)
        .map(|w| inert(w).to_string())
        .collect()
}

/// Reads the passages in rank order through fs `read_file`, verbatim, while they fit
/// `budget` tokens; a passage that cannot be read, or does not fit, is dropped.
pub(super) async fn read_within(
    served: &Served<'_>,
    pool: &mut Pool,
    budget: usize,
    calls: &mut Vec<CallRecord>,
    trace: bool,
) {
    let mut left = budget;
    let mut kept = Vec::new();
    for e in std::mem::take(&mut pool.items) {
        if !kept.is_empty() && left < 64 {
            break;
        }
        let mut e = e;
        if !e.read {
            let room = left.saturating_sub(atlas_mcp::budget::tokens(e.head().len()) + 8).max(64);
            let Some((text, end)) = read(served, &e, room, calls, trace, 0).await else { continue };
            (e.text, e.end_line, e.read) = (text, end, true);
            cut_to(&mut e, room);
        }
        left = left.saturating_sub(atlas_mcp::budget::tokens(e.render().len()));
        kept.push(e);
    }
    for (i, e) in kept.iter_mut().enumerate() {
        e.n = i + 1;
    }
    pool.items = kept;
}

/// Keeps the whole lines of `e` that fit `room` tokens (at least its first line), its
/// end line moved to the last line kept: what is shown is still verbatim.
fn cut_to(e: &mut Evidence, room: usize) {
    let max = room * atlas_mcp::budget::BYTES_PER_TOKEN;
    if e.text.len() <= max {
        return;
    }
    let mut end = 0;
    let mut lines = 0u32;
    for (i, _) in e.text.match_indices('\n') {
        if i + 1 > max && lines > 0 {
            break;
        }
        end = i + 1;
        lines += 1;
    }
    if lines > 0 {
        e.text.truncate(end);
        e.end_line = e.start_line + lines - 1;
    }
}

/// The passage's lines, verbatim through fs, within `max_tokens` (at least the
/// tool's minimum): the text and the last line it holds.
pub(super) async fn read(
    served: &Served<'_>,
    e: &Evidence,
    max_tokens: usize,
    calls: &mut Vec<CallRecord>,
    trace: bool,
    step: usize,
) -> Option<(String, u32)> {
    let max_tokens = max_tokens.max(atlas_mcp::budget::MIN_MAX_TOKENS);
    let args = json!({"path": e.path, "start_line": e.start_line, "end_line": e.end_line, "max_tokens": max_tokens});
    let Value::Object(args) = args else { return None };
    let reply = call(served, step, "read_file", args, calls, trace).await;
    let out = reply.structured.filter(|_| !reply.is_error)?;
    let text = out["text"].as_str()?.to_owned();
    let end = out["end_line"].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(e.end_line);
    (!text.trim().is_empty()).then_some((text, end.max(e.start_line)))
}

/// Identifiers the question holds: `snake_case`, `CamelCase`, `a::b`, `a.b()`,
/// or anything in backticks.
fn names(question: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        if s.len() >= 3 && s.len() <= 200 && !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    };
    for (i, part) in question.split('`').enumerate() {
        if i % 2 == 1 && !part.contains(char::is_whitespace) {
            push(part);
        }
    }
    for w in question.split(|c: char| c.is_whitespace() || matches!(c, ',' | '?' | '(' | ')' | '"' | '\'' | '`')) {
        let w = w.trim_end_matches(['.', ':', ';', '!']);
        let inner_upper = w.chars().skip(1).any(char::is_uppercase) && w.chars().any(char::is_lowercase);
        let code_like = w.contains('_') || w.contains("::") || (w.contains('.') && w.ends_with("()"));
        if (inner_upper || code_like) && w.chars().all(|c| c.is_alphanumeric() || "_:.()".contains(c)) {
            push(w.trim_end_matches("()"));
        }
    }
    out
}

/// Strings the question quotes (`"…"` or backticks, 3 to 200 bytes).
fn quoted(question: &str) -> Vec<String> {
    let mut out = Vec::new();
    for delim in ['"', '`'] {
        for (i, part) in question.split(delim).enumerate() {
            let part = part.trim();
            if i % 2 == 1 && (3..=200).contains(&part.len()) && !out.iter().any(|o| o == part) {
                out.push(part.to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passage_cut_to_its_room_keeps_whole_lines_and_says_its_last() {
        let mut e = passages(
            "search_docs",
            &json!({"hits": [{"path": "a.md", "start_line": 10, "end_line": 13, "score": 1.0}]}),
            false,
        )
        .remove(0);
        e.text = "aaaa\nbbbb\ncccc\ndddd\n".into();
        cut_to(&mut e, 4);
        assert_eq!((e.text.as_str(), e.end_line), ("aaaa\nbbbb\n", 11));
        cut_to(&mut e, 1);
        assert_eq!((e.text.as_str(), e.end_line), ("aaaa\n", 10));
    }

    #[test]
    fn names_and_quoted_strings_are_found() {
        assert_eq!(
            names("How does `FheUint8` relate to set_server_key and Config::builder()?"),
            ["FheUint8", "set_server_key", "Config::builder"]
        );
        assert!(names("How do I install the chart?").is_empty());
        assert_eq!(
            quoted(r#"What does "connection refused" mean in `atlas.toml`?"#),
            ["connection refused", "atlas.toml"]
        );
    }
}
