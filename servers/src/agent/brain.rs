//! What decides the agent's next step: an OpenAI-compatible LLM with tools, or the
//! scripted policy `atlas eval --agent` measures with (no LLM reachable): cite what
//! the search returned first.

use serde_json::Value;

use crate::llm::{self, Llm, Turn};

/// The agent's LLM.
#[derive(Debug, Clone)]
pub enum Brain {
    Llm(Llm),
    /// Answers at once, citing the first passage of the evidence: what search alone
    /// would have cited, through the agent's whole path (plan, read, check).
    Scripted,
}

impl Brain {
    /// One turn over `messages`, offering `tools`, writing at most `max_tokens`.
    pub async fn turn(&self, messages: &[Value], tools: &[Value], max_tokens: u64) -> anyhow::Result<Turn> {
        match self {
            Brain::Llm(l) => llm::chat(l, messages, tools, max_tokens).await,
            Brain::Scripted => Ok(scripted()),
        }
    }

    pub fn model(&self) -> String {
        match self {
            Brain::Llm(l) => l.model.clone(),
            Brain::Scripted => "scripted: cite the first passage".to_owned(),
        }
    }
}

/// The scripted policy: "the first passage answers", citing `[1]` (the evidence's
/// first passage, which is what the merged searches ranked first).
fn scripted() -> Turn {
    Turn { content: "The first passage answers this [1].".to_owned(), ..Turn::default() }
}
