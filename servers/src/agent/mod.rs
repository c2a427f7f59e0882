//! `atlas agent`: a question fanned out to both servers' tools in parallel, the results
//! merged into one numbered evidence list and read verbatim through fs; then, with an
//! LLM, a bounded tool-calling loop over the servers' read-only tools, and an answer
//! whose every `[n]` is checked against lines actually read. Without an LLM, the
//! evidence packet.
//!
//! 1. Plan ([`plan()`]): search_docs, search_code, find_symbol for the names the
//!    question holds, fs grep for the strings it quotes; one call each, at once.
//! 2. Evidence ([`evidence::Pool`]): one item per passage, ranked by fused rank, the
//!    best read through fs `read_file` within the packet's token budget.
//! 3. Refuse below the calibrated confidence (unless a name the question holds is
//!    defined): no LLM call.
//! 4. Loop ([`brain::Brain`]): bounded in LLM turns, total tokens and wall time; each
//!    tool call is checked (known tool, a JSON object, at most [`MAX_CALL_ARGUMENT_BYTES`])
//!    and answered by the server, its passages numbered into the evidence.
//! 5. Answer: each `[n]` it cites is read verbatim through fs first; a citation of
//!    a passage not given or not readable is removed, and the answer says so.
//!
//! Here the options, the outcome and the run; the plan and the reads in `plan.rs`, the
//! loop and the checked answer in `converse.rs`.

pub mod brain;
mod converse;
pub mod eval;
pub mod evidence;
mod plan;

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};

use atlas_mcp::local::{Local, Reply};
use atlas_mcp::output::inert;
use brain::Brain;
use converse::converse;
use evidence::{Evidence, Pool};
use plan::{plan, read_within};

/// Passages in the evidence at most.
pub const MAX_EVIDENCE: usize = 8;
/// Tokens of passages in the packet by default (as `atlas ask`'s sources).
pub const DEFAULT_PACKET_TOKENS: usize = 3000;
/// LLM turns at most, by default.
pub const DEFAULT_MAX_STEPS: usize = 8;
/// Tokens (prompt and completion, every turn) at most, by default.
pub const DEFAULT_MAX_TOKENS: u64 = 40_000;
/// Wall time at most, by default.
pub const DEFAULT_MAX_WALL: Duration = Duration::from_secs(180);
/// The most bytes of arguments one tool call may carry.
pub const MAX_CALL_ARGUMENT_BYTES: usize = 16 << 10;

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// None: the evidence packet, no LLM.
    pub brain: Option<Brain>,
    pub max_steps: usize,
    pub max_tokens: u64,
    pub max_wall: Duration,
    pub packet_tokens: usize,
    /// None: the libraries' calibrated threshold.
    pub threshold: Option<f32>,
    /// Print each call on stderr as it happens.
    pub trace: bool,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            brain: None,
            max_steps: DEFAULT_MAX_STEPS,
            max_tokens: DEFAULT_MAX_TOKENS,
            max_wall: DEFAULT_MAX_WALL,
            packet_tokens: DEFAULT_PACKET_TOKENS,
            threshold: None,
            trace: false,
        }
    }
}

/// Why the agent stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The LLM answered.
    Answered,
    /// No LLM: the evidence packet is the answer.
    Evidence,
    /// The evidence is below the confidence threshold; no LLM call was made.
    Refused,
    /// The LLM-turn bound was reached.
    Steps,
    /// The token bound was reached.
    Tokens,
    /// The wall-time bound was reached.
    Time,
    /// The LLM failed; the evidence packet follows.
    LlmError,
}

/// One tool call, as `--json` and `--trace` show it.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// 0 for the plan, else the LLM turn that asked for it.
    pub step: usize,
    pub tool: String,
    pub arguments: Value,
    pub duration_ms: f64,
    /// About how many tokens its reply is.
    pub tokens: usize,
    pub is_error: bool,
    /// The passages it added or found again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<usize>,
}

/// Tokens spent on the LLM.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
    /// Some turns' usage was estimated (the endpoint did not say it).
    pub estimated: bool,
}

impl Tokens {
    /// Adds one turn's usage. The sums saturate: an endpoint that reports near
    /// `u64::MAX` trips the bound instead of wrapping past it.
    pub fn add(&mut self, prompt: u64, completion: u64) {
        self.prompt = self.prompt.saturating_add(prompt);
        self.completion = self.completion.saturating_add(completion);
        self.total = self.total.saturating_add(prompt).saturating_add(completion);
    }
}

/// What `atlas agent --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub question: String,
    pub answer: String,
    /// The passages the answer cites, each read verbatim through fs.
    pub citations: Vec<Evidence>,
    /// `[n]` the LLM wrote for passages it was not given or that could not be read.
    pub removed_citations: Vec<u128>,
    pub evidence: Vec<Evidence>,
    pub tool_calls: Vec<CallRecord>,
    pub stop_reason: Stop,
    /// The bound hit, or the LLM's failure, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_detail: Option<String>,
    pub llm_turns: usize,
    pub tokens: Tokens,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub confidence: Option<f32>,
    pub threshold: f32,
    pub total_ms: f64,
}

/// The served libraries as the agent sees them.
pub struct Served<'a> {
    pub local: &'a Local,
    /// The fs server's paths start with `name@version/`.
    pub prefixed: bool,
    /// The calibrated refusal threshold of what is served.
    pub threshold: f32,
    /// A name for the system prompt (`name@version`, or several).
    pub name: String,
}

impl<'a> Served<'a> {
    /// What `local` serves: the rag server's `libs`, the same libraries as its fs server.
    pub fn new(local: &'a Local, libs: &atlas_mcp::library::Libraries) -> Served<'a> {
        Served {
            local,
            prefixed: libs.is_multi(),
            threshold: libs.threshold(None),
            name: libs.bundles().iter().map(|b| b.library()).collect::<Vec<_>>().join(", "),
        }
    }
}

/// A task: one of the rag server's prompts, its text the LLM's instruction.
#[derive(Debug, Clone)]
pub struct Task {
    pub name: String,
    pub text: String,
}

/// Answers `question` (what the plan searches for) with what `served` holds.
pub async fn run(
    served: &Served<'_>,
    question: &str,
    task: Option<&Task>,
    opts: &AgentOptions,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let question = crate::ask::checked_question(question)?;
    let mut out = Outcome {
        question: question.clone(),
        answer: String::new(),
        citations: Vec::new(),
        removed_citations: Vec::new(),
        evidence: Vec::new(),
        tool_calls: Vec::new(),
        stop_reason: Stop::Evidence,
        stop_detail: None,
        llm_turns: 0,
        tokens: Tokens::default(),
        model: opts.brain.as_ref().map(Brain::model),
        confidence: None,
        threshold: opts.threshold.unwrap_or(served.threshold),
        total_ms: 0.0,
    };
    let mut pool = Pool::default();
    let (confidence, unseen, defined) = plan(served, &question, &mut pool, &mut out.tool_calls, opts.trace).await;
    pool.rank_and_keep(MAX_EVIDENCE);
    let found = pool.items.len();
    read_within(served, &mut pool, opts.packet_tokens, &mut out.tool_calls, opts.trace).await;
    out.confidence = confidence;
    let weak = confidence.is_none_or(|c| c < out.threshold) && !defined;
    let why = match (weak, pool.items.is_empty()) {
        (true, _) => Some(Refusal::Weak { confidence, threshold: out.threshold, unseen: &unseen }),
        (false, true) => Some(Refusal::Unread { found }),
        (false, false) => None,
    };
    if let Some(why) = why {
        out.stop_reason = Stop::Refused;
        out.answer = refusal(&served.name, why, &pool);
    } else if let Some(brain) = &opts.brain {
        converse(served, brain, &question, task, opts, &mut pool, &mut out, started).await;
    } else {
        out.answer = packet(&pool);
    }
    out.evidence = pool.items;
    out.total_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(out)
}

/// Runs one call, recording it (and tracing it).
async fn call(
    served: &Served<'_>,
    step: usize,
    tool: &str,
    args: Map<String, Value>,
    calls: &mut Vec<CallRecord>,
    trace: bool,
) -> Reply {
    let t = Instant::now();
    let reply = served.local.call(tool, args.clone()).await;
    record(calls, step, tool, Value::Object(args), t, &reply, trace);
    reply
}

fn record(calls: &mut Vec<CallRecord>, step: usize, tool: &str, args: Value, t: Instant, reply: &Reply, trace: bool) {
    let r = CallRecord::of(step, tool, args, t, reply);
    if trace {
        r.trace();
    }
    calls.push(r);
}

impl CallRecord {
    fn of(step: usize, tool: &str, arguments: Value, t: Instant, reply: &Reply) -> Self {
        Self {
            step,
            tool: tool.to_owned(),
            arguments,
            duration_ms: t.elapsed().as_secs_f64() * 1000.0,
            tokens: atlas_mcp::budget::tokens(reply.text.len()),
            is_error: reply.is_error,
            evidence: Vec::new(),
        }
    }

    /// One stderr line, printed as the call returns.
    fn trace(&self) {
        let args = atlas_runtime::utf8::clip_chars(&self.arguments.to_string(), 160);
        let status = if self.is_error { "error" } else { "ok" };
        eprintln!(
            "atlas: step {} {} {} → {status}, {:.0} ms, ~{} tokens",
            self.step,
            inert(&self.tool),
            inert(&args),
            self.duration_ms,
            self.tokens
        );
    }
}

/// The packet: every passage with its citation, fenced.
pub fn packet(pool: &Pool) -> String {
    pool.items.iter().map(Evidence::render).collect::<Vec<_>>().join("\n")
}

/// Why no answer was attempted.
enum Refusal<'a> {
    /// The best search's confidence is under the threshold (or no search gave one),
    /// and no name the question holds is defined.
    Weak { confidence: Option<f32>, threshold: f32, unseen: &'a [String] },
    /// Confident enough, but none of the `found` passages could be read verbatim
    /// through fs, so nothing could be cited.
    Unread { found: usize },
}

fn refusal(name: &str, why: Refusal<'_>, pool: &Pool) -> String {
    let mut s = match why {
        Refusal::Weak { confidence, threshold, unseen } => {
            let c = match confidence {
                Some(c) => format!("confidence {c:.2}, below the threshold {threshold:.2}"),
                None => format!("no search gave a confidence to compare with the threshold {threshold:.2}"),
            };
            let mut s = format!(
                "I can't answer that from {}: nothing found is close enough to the question ({c}), so no answer \
                 was attempted.",
                inert(name)
            );
            s.push_str(&crate::ask::unseen_sentence(unseen));
            s
        }
        Refusal::Unread { found: 0 } => {
            format!("I can't answer that from {}: the searches found nothing, so no answer was attempted.", inert(name))
        }
        Refusal::Unread { found } => format!(
            "I can't answer that from {}: {}, so nothing could be cited and no answer was attempted \
             (`--trace` shows each read_file and its error).",
            inert(name),
            match found {
                1 => "the one passage found could not be read verbatim through the fs server".to_owned(),
                n => format!("none of the {n} passages found could be read verbatim through the fs server"),
            }
        ),
    };
    if !pool.items.is_empty() {
        s.push_str(" The nearest passages:\n");
        for e in pool.items.iter().take(3) {
            s.push_str(&format!("- {}\n", e.head()));
        }
    }
    s
}

/// What `atlas agent` prints: the answer, its sources, and the stop reason.
pub fn render(out: &Outcome) -> String {
    let mut s = out.answer.trim_end().to_owned();
    s.push('\n');
    let shown: Vec<&Evidence> =
        if out.citations.is_empty() { out.evidence.iter().collect() } else { out.citations.iter().collect() };
    if out.stop_reason != Stop::Evidence && !shown.is_empty() && out.stop_reason != Stop::Refused {
        s.push_str("\nSources:\n");
        for e in shown {
            s.push_str(&format!("{}\n", e.head()));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_the_confidence_is_below_the_threshold_only_when_it_is() {
        let pool = Pool::default();
        let weak = refusal("lib@1", Refusal::Weak { confidence: Some(0.12), threshold: 0.25, unseen: &[] }, &pool);
        assert!(weak.contains("(confidence 0.12, below the threshold 0.25)"), "{weak}");
        let none = refusal("lib@1", Refusal::Weak { confidence: None, threshold: 0.25, unseen: &[] }, &pool);
        assert!(none.contains("no search gave a confidence") && !none.contains("below"), "{none}");
        // Sure, but nothing could be read: no confidence compared, the reads named.
        let unread = refusal("lib@1", Refusal::Unread { found: 3 }, &pool);
        assert!(!unread.contains("confidence") && !unread.contains("below"), "{unread}");
        assert!(unread.contains("none of the 3 passages found could be read verbatim"), "{unread}");
        let one = refusal("lib@1", Refusal::Unread { found: 1 }, &pool);
        assert!(one.contains("the one passage found could not be read"), "{one}");
    }
}
