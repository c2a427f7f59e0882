//! `atlas eval --agent`: a golden set through the agent, against search alone.
//!
//! For each answerable question: whether the answer's citations hold a relevant file,
//! against whether search alone (the hybrid search `atlas ask` retrieves with) ranks
//! one first, or in its first five; and the tokens each spends. With no `--llm`, the
//! scripted policy ([`super::brain::Brain::Scripted`]) answers citing the first
//! passage, so the figure measures the agent's plan, merge and checks, not an LLM.

use std::fmt::Write as _;

use serde::Serialize;

use super::{AgentOptions, Served, Stop};
use atlas_mcp::library::Libraries;
use atlas_runtime::eval::GoldenQuery;

/// The figures of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentReport {
    pub set: String,
    pub model: String,
    pub answerable: usize,
    pub negatives: usize,
    /// Answerable questions whose answer cites a relevant file.
    pub cited_relevant: f64,
    /// … whose evidence holds a relevant file.
    pub evidence_relevant: f64,
    /// Search alone: a relevant file first, and in the first five.
    pub search_hit1: f64,
    pub search_hit5: f64,
    /// Answerable questions the agent refused, and negatives it refused.
    pub refused_answerable: usize,
    pub refused_negatives: usize,
    /// The same for `atlas ask` (its retrieval's confidence below the threshold).
    pub ask_refused_answerable: usize,
    pub ask_refused_negatives: usize,
    /// LLM tokens per question (every question; a refusal spends none), agent and ask.
    pub agent_tokens: f64,
    pub ask_tokens: f64,
    pub tool_calls: f64,
    pub ms_per_question: f64,
    /// Citations and search alone (relevant first) on each half of the set
    /// (`half=tune`, `half=test`, as `atlas eval` splits it).
    pub halves: Vec<Half>,
}

/// One half's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Half {
    pub half: &'static str,
    pub answerable: usize,
    pub cited_relevant: f64,
    pub search_hit1: f64,
}

/// Runs `set` through the agent and through `ask`'s retrieval.
pub async fn evaluate(
    served: &Served<'_>,
    libs: &Libraries,
    set: &str,
    golden: &[GoldenQuery],
    opts: &AgentOptions,
) -> anyhow::Result<AgentReport> {
    let mut r = AgentReport {
        set: set.to_owned(),
        model: opts.brain.as_ref().map_or_else(|| "none".to_owned(), super::brain::Brain::model),
        ..AgentReport::default()
    };
    let (mut cited, mut evidence, mut hit1, mut hit5, mut calls, mut ms) = (0, 0, 0, 0, 0usize, 0.0);
    let (mut agent_tokens, mut ask_tokens) = (0u64, 0usize);
    let mut halves: Vec<Half> = ["tune", "test"].map(|half| Half { half, ..Half::default() }).into();
    for q in golden {
        let out = super::run(served, &q.query, None, opts).await?;
        let refused = out.stop_reason == Stop::Refused;
        let (l, query) = (libs.clone(), q.query.clone());
        let crate::ask::Retrieved { confidence, sources, .. } = tokio::task::spawn_blocking(move || {
            crate::ask::retrieve(&l, None, &query, crate::ask::DEFAULT_BUDGET_TOKENS)
        })
        .await??;
        let ask_answers = confidence >= out.threshold && !sources.is_empty();
        if ask_answers {
            ask_tokens += crate::ask::prompt_tokens(&served.name, &q.query, &sources);
        }
        agent_tokens = agent_tokens.saturating_add(out.tokens.total);
        if q.is_negative() {
            r.negatives += 1;
            r.refused_negatives += usize::from(refused);
            r.ask_refused_negatives += usize::from(!ask_answers);
            continue;
        }
        r.answerable += 1;
        r.refused_answerable += usize::from(refused);
        r.ask_refused_answerable += usize::from(!ask_answers);
        let relevant = |path: &str| q.expected.iter().any(|e| e.file_matches(path));
        let (c, h) =
            (out.citations.iter().any(|e| relevant(&e.path)), sources.first().is_some_and(|s| relevant(&s.hit.path)));
        cited += usize::from(c);
        hit1 += usize::from(h);
        if let Some(half) = halves.iter_mut().find(|x| x.half == atlas_runtime::eval::half(&q.query)) {
            half.answerable += 1;
            half.cited_relevant += f64::from(u8::from(c));
            half.search_hit1 += f64::from(u8::from(h));
        }
        evidence += usize::from(out.evidence.iter().any(|e| relevant(&e.path)));
        hit5 += usize::from(sources.iter().take(5).any(|s| relevant(&s.hit.path)));
        calls += out.tool_calls.len();
        ms += out.total_ms;
    }
    let per = |n: usize| if r.answerable == 0 { 0.0 } else { n as f64 / r.answerable as f64 };
    (r.cited_relevant, r.evidence_relevant, r.search_hit1, r.search_hit5) =
        (per(cited), per(evidence), per(hit1), per(hit5));
    let all = (r.answerable + r.negatives).max(1) as f64;
    r.agent_tokens = agent_tokens as f64 / all;
    r.ask_tokens = ask_tokens as f64 / all;
    r.tool_calls = per(calls);
    for h in &mut halves {
        let n = h.answerable.max(1) as f64;
        (h.cited_relevant, h.search_hit1) = (h.cited_relevant / n, h.search_hit1 / n);
    }
    r.halves = halves;
    r.ms_per_question = ms / r.answerable.max(1) as f64;
    Ok(r)
}

/// The report as a table.
pub fn render(r: &AgentReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "agent eval: {} ({} answerable, {} unanswerable), LLM: {}",
        r.set, r.answerable, r.negatives, r.model
    );
    let _ = writeln!(s, "  citations hold a relevant file   {:.3}", r.cited_relevant);
    for h in &r.halves {
        let _ = writeln!(
            s,
            "    {} half ({}): citations {:.3}, search alone first {:.3}",
            h.half, h.answerable, h.cited_relevant, h.search_hit1
        );
    }
    let _ = writeln!(s, "  evidence holds a relevant file   {:.3}", r.evidence_relevant);
    let _ = writeln!(s, "  search alone, relevant first     {:.3}", r.search_hit1);
    let _ = writeln!(s, "  search alone, relevant in top 5  {:.3}", r.search_hit5);
    let _ = writeln!(
        s,
        "  refused: agent {} of {} answerable, {} of {} unanswerable; ask {} and {}",
        r.refused_answerable,
        r.answerable,
        r.refused_negatives,
        r.negatives,
        r.ask_refused_answerable,
        r.ask_refused_negatives
    );
    let _ = writeln!(s, "  LLM tokens per question: agent {:.0}, ask {:.0}", r.agent_tokens, r.ask_tokens);
    let _ = writeln!(s, "  tool calls per question {:.1}, {:.0} ms per question", r.tool_calls, r.ms_per_question);
    s
}
