//! `atlas ask`: an answer to a question from the bundle's docs and code, with numbered
//! citations that are checked against the sources given.
//!
//! 1. Retrieve: hybrid search over docs and code together (what the rag server's
//!    search pool holds), and the search's confidence.
//! 2. Refuse below the threshold (the bundle's calibrated one, else
//!    `atlas_runtime::eval::DEFAULT_THRESHOLD`): no LLM call, the nearest hits shown.
//! 3. Assemble the numbered sources within a token budget.
//! 4. Generate through an OpenAI-compatible endpoint ([`crate::llm`]), streaming, each
//!    `[n]` checked by [`Citations`]; or, with no endpoint or when it fails, an
//!    extractive answer: the sentences of the sources that best match the question.
//!
//! `prompt` assembles the sources and the messages, `cite` checks the citations,
//! `extract` is the answer without an LLM.

mod cite;
mod extract;
mod prompt;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atlas_runtime::search::SearchRequest;
use atlas_runtime::{Bundle, Hit, Mode};
use serde::Serialize;

use crate::llm::{self, Llm};
use atlas_mcp::library::Libraries;
use atlas_mcp::output::inert;
pub(crate) use cite::Citations;
use extract::{extract, render_extract};
pub(crate) use prompt::unseen_sentence;
use prompt::{assemble, prompt, refusal};

/// Tokens of sources given to the LLM by default.
pub const DEFAULT_BUDGET_TOKENS: usize = 3000;
/// Sources at most.
pub const MAX_SOURCES: usize = 8;
/// The longest question taken.
pub const MAX_QUESTION_BYTES: usize = 2000;
/// Sentences in an extractive answer.
const EXTRACT_SENTENCES: usize = 3;

/// How `ask` runs.
#[derive(Debug, Clone)]
pub struct AskOptions {
    pub budget_tokens: usize,
    /// None: the libraries' calibrated threshold, else Atlas's ([`Libraries::threshold`]).
    pub threshold: Option<f32>,
    pub llm: Option<Llm>,
}

impl Default for AskOptions {
    fn default() -> Self {
        AskOptions { budget_tokens: DEFAULT_BUDGET_TOKENS, threshold: None, llm: None }
    }
}

/// One numbered source: the hit it came from and the text the LLM is given.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    pub n: usize,
    pub citation: String,
    #[serde(flatten)]
    pub hit: Hit,
    #[serde(skip)]
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Written by the LLM from the sources.
    Generated,
    /// The sentences of the sources that best match the question.
    Extractive,
    /// Nothing retrieved was relevant enough; no answer was attempted.
    Refused,
}

#[derive(Debug, Clone, Serialize)]
pub struct Timings {
    pub retrieve_ms: f64,
    /// From the question to the answer's first text.
    pub first_token_ms: Option<f64>,
    pub total_ms: f64,
}

/// What `atlas ask --json` prints and `/api/ask` returns.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub question: String,
    pub kind: Kind,
    pub answer: String,
    pub sources: Vec<Source>,
    /// The sources the answer cites.
    pub cited: Vec<usize>,
    /// `[n]` the LLM wrote for sources it was not given, removed from the answer.
    /// (As written: a group holds at most 31 digits, so a u128 keeps every one exact.)
    pub removed_citations: Vec<u128>,
    /// Why the LLM's answer was replaced by the extractive one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub confidence: f32,
    pub threshold: f32,
    /// The question's words no chunk holds ([`atlas_runtime::search::Searched::unseen_words`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unseen_words: Vec<String>,
    pub timings: Timings,
}

/// What a caller sees while the answer is made, in order: the sources, then text.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    Sources(&'a [Source]),
    Text(&'a str),
    /// One line for the person: the LLM failed and the extractive answer follows.
    Notice(&'a str),
}

/// Asks `question` of the served libraries (or the one `library` names), calling `on`
/// as the answer forms.
pub async fn ask(
    libs: &Libraries,
    library: Option<&str>,
    question: &str,
    opts: &AskOptions,
    on: &mut (dyn FnMut(Event<'_>) + Send),
) -> anyhow::Result<Answer> {
    let started = Instant::now();
    let question = checked_question(question)?;
    let bundles = libs.select(library).map_err(atlas_runtime::exit::UsageError)?;
    let threshold = opts.threshold.unwrap_or_else(|| libs.threshold(library));
    let name = match bundles.as_slice() {
        [one] => one.manifest.name.clone(),
        many => many.iter().map(|b| b.library()).collect::<Vec<_>>().join(", "),
    };
    let (l, q, budget, lib) = (libs.clone(), question.clone(), opts.budget_tokens, library.map(str::to_owned));
    let Retrieved { confidence, unseen_words, sources } =
        tokio::task::spawn_blocking(move || retrieve(&l, lib.as_deref(), &q, budget)).await??;
    // The extractive answer scores sentences with the first source's library's model.
    let bundle = match answer_bundle(libs, &sources) {
        Some(b) => b,
        None => bundles.first().cloned().ok_or_else(|| anyhow::anyhow!("no library to ask"))?,
    };
    let retrieve_ms = ms(started);
    let mut answer = Answer {
        question,
        kind: Kind::Refused,
        answer: String::new(),
        sources,
        cited: Vec::new(),
        removed_citations: Vec::new(),
        llm_error: None,
        model: None,
        confidence,
        threshold,
        unseen_words,
        timings: Timings { retrieve_ms, first_token_ms: None, total_ms: 0.0 },
    };
    on(Event::Sources(&answer.sources));
    let mut first: Option<f64> = None;
    let mut emit = |text: &str, on: &mut (dyn FnMut(Event<'_>) + Send)| {
        if !text.is_empty() {
            first.get_or_insert_with(|| ms(started));
            on(Event::Text(text));
        }
    };
    if confidence < threshold || answer.sources.is_empty() {
        answer.answer = refusal(&name, confidence, threshold, &answer.unseen_words, &answer.sources);
        emit(&answer.answer, on);
    } else if let Some(llm) = &opts.llm {
        answer.model = Some(llm.model.clone());
        let messages = prompt(&name, &answer.question, &answer.sources);
        let mut cites = Citations::new(answer.sources.len());
        let mut text = String::new();
        let r = llm::stream(llm, &messages, &mut |delta: &str| {
            let clean = cites.push(delta);
            text.push_str(&clean);
            emit(&clean, on);
        })
        .await;
        match r {
            Ok(ended) => {
                let tail = cites.finish();
                text.push_str(&tail);
                emit(&tail, on);
                if ended == llm::Ended::Truncated {
                    let note = format!(
                        "\n\n(The LLM's answer was cut at {} KiB; the rest was not read.)",
                        llm::MAX_ANSWER_BYTES >> 10
                    );
                    text.push_str(&note);
                    emit(&note, on);
                }
                if !cites.removed.is_empty() {
                    let note = format!(
                        "\n\n(Removed citations to sources that were not given: {}.)",
                        cites.removed.iter().map(|n| format!("[{n}]")).collect::<Vec<_>>().join(", ")
                    );
                    text.push_str(&note);
                    emit(&note, on);
                }
                answer.kind = Kind::Generated;
                answer.answer = text;
                answer.cited = cites.cited.into_iter().collect();
                answer.removed_citations = cites.removed.into_iter().collect();
            }
            Err(e) => {
                let line = format!(
                    "the LLM at {} failed ({e:#}); here is the extractive answer instead",
                    atlas_dist::http::redact_url(&llm.url)
                );
                tracing::warn!("{line}");
                on(Event::Notice(&line));
                answer.llm_error = Some(format!("{e:#}"));
                extract_into(&mut answer, &bundle, &mut emit, on).await?;
            }
        }
    } else {
        extract_into(&mut answer, &bundle, &mut emit, on).await?;
    }
    answer.timings.first_token_ms = first;
    answer.timings.total_ms = ms(started);
    Ok(answer)
}

async fn extract_into(
    answer: &mut Answer,
    bundle: &Arc<Bundle>,
    emit: &mut impl FnMut(&str, &mut (dyn FnMut(Event<'_>) + Send)),
    on: &mut (dyn FnMut(Event<'_>) + Send),
) -> anyhow::Result<()> {
    let (b, q, sources) = (bundle.clone(), answer.question.clone(), answer.sources.clone());
    let picked = tokio::task::spawn_blocking(move || extract(&b, &q, &sources)).await?;
    answer.kind = Kind::Extractive;
    answer.answer = render_extract(&picked);
    answer.cited = picked.iter().map(|p| p.n).collect::<BTreeSet<_>>().into_iter().collect();
    emit(&answer.answer, on);
    Ok(())
}

/// The question trimmed, or a usage error when it is empty or over [`MAX_QUESTION_BYTES`].
pub fn checked_question(question: &str) -> anyhow::Result<String> {
    let question = question.trim().to_owned();
    if question.is_empty() {
        anyhow::bail!(atlas_runtime::exit::UsageError("the question is empty; ask something".into()));
    }
    if question.len() > MAX_QUESTION_BYTES {
        anyhow::bail!(atlas_runtime::exit::UsageError(format!(
            "the question is {} bytes, over the {MAX_QUESTION_BYTES}-byte limit; shorten it",
            question.len()
        )));
    }
    Ok(question)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// What [`retrieve`] found: the search's confidence, the question's words no chunk
/// holds, and the numbered sources.
pub struct Retrieved {
    pub confidence: f32,
    pub unseen_words: Vec<String>,
    pub sources: Vec<Source>,
}

/// Hybrid over docs and code (of every library, merged, or of the one named), and the
/// numbered sources that fit `budget` tokens.
pub fn retrieve(libs: &Libraries, library: Option<&str>, question: &str, budget: usize) -> anyhow::Result<Retrieved> {
    let opts = SearchRequest { mode: Some(Mode::Hybrid), top_k: Some(MAX_SOURCES), ..SearchRequest::default() }
        .options(MAX_SOURCES);
    let (found, failed) = libs.search(question, &opts, library)?;
    for f in failed {
        tracing::warn!("{f}");
    }
    let mut with_text = Vec::with_capacity(found.hits.len());
    for hit in found.hits {
        let b = libs.chunk_bundle(&hit.chunk_id, Some(&hit.library)).map_err(|e| anyhow::anyhow!(e))?;
        let text = b.get_chunk(&hit.chunk_id, 0)?.chunk.text;
        with_text.push((hit, text));
    }
    Ok(Retrieved {
        confidence: found.confidence,
        unseen_words: found.unseen_words,
        sources: assemble(with_text, budget),
    })
}

/// About how many tokens the LLM is sent for `question` with `sources` (its messages
/// as the request carries them): what one `ask` costs, for comparisons.
pub fn prompt_tokens(name: &str, question: &str, sources: &[Source]) -> usize {
    prompt::tokens(&serde_json::to_string(&prompt(name, question, sources)).unwrap_or_default())
}

/// The library of the first source.
fn answer_bundle(libs: &Libraries, sources: &[Source]) -> Option<Arc<Bundle>> {
    let first = sources.first()?;
    libs.chunk_bundle(&first.hit.chunk_id, Some(&first.hit.library)).ok()
}

/// `atlas ask`: the answer streamed to stdout (then its sources), or, with `json`,
/// the whole [`Answer`] at the end. A failing LLM is one line on stderr.
pub fn run_cli(libs: &Libraries, question: &str, opts: &AskOptions, json: bool) -> anyhow::Result<()> {
    use atlas_runtime::exit::print;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut on = |ev: Event<'_>| match ev {
        Event::Text(t) if !json => {
            let _ = print(t);
        }
        Event::Notice(n) => eprintln!("atlas: {n}"),
        _ => {}
    };
    let answer = rt.block_on(ask(libs, None, question, opts, &mut on))?;
    if json {
        print(&format!("{}\n", serde_json::to_string_pretty(&answer)?))?;
        return Ok(());
    }
    let mut tail = String::from(if answer.answer.ends_with('\n') { "\n" } else { "\n\n" });
    if !answer.sources.is_empty() {
        tail.push_str("Sources:\n");
        for s in &answer.sources {
            tail.push_str(&format!("[{}] {} — {}\n", s.n, inert(&s.hit.place()), inert(&s.citation)));
        }
    }
    print(&tail)?;
    Ok(())
}

/// The LLM settings from flags, then the config file; the key from its env var.
pub fn llm_from(
    cfg: &atlas_dist::config::Ask,
    url: Option<String>,
    model: Option<String>,
    timeout_s: Option<u64>,
) -> anyhow::Result<Option<Llm>> {
    let Some(url) = url.or_else(|| cfg.llm.clone()).filter(|u| !u.is_empty()) else { return Ok(None) };
    let endpoint = llm::endpoint(&url).map_err(atlas_runtime::exit::UsageError)?;
    let key_env = cfg.api_key_env.clone().unwrap_or_else(|| "ATLAS_LLM_API_KEY".to_owned());
    Ok(Some(Llm {
        url: endpoint,
        model: model.or_else(|| cfg.model.clone()).unwrap_or_else(|| "default".to_owned()),
        api_key: std::env::var(&key_env).ok().filter(|k| !k.is_empty()),
        timeout: Duration::from_secs(timeout_s.or(cfg.timeout_s).unwrap_or(60).max(1)),
    }))
}
