//! The `atlas` binary: `atlas search` and `atlas ask` over a bundle, the Atlas MCP
//! servers, `fs` (the verbatim mirror) and `rag` (ranked search), over stdio or
//! streamable HTTP, and the web page (`atlas serve web`).
//!
//! Architecture invariant: this is the only crate that knows MCP, and the servers
//! write only protocol to stdout; logs go to stderr (tracing). `print!` to stdout is
//! denied here.
#![deny(clippy::print_stdout)]

pub(crate) mod ask;
pub(crate) mod budget;
pub mod cli;
pub(crate) mod code;
pub(crate) mod deps;
pub(crate) mod doctor;
pub(crate) mod eval;
pub(crate) mod fs;
pub(crate) mod http_serve;
pub(crate) mod lenient;
pub(crate) mod library;
pub(crate) mod live;
pub(crate) mod llm;
pub(crate) mod manage;
pub(crate) mod output;
pub(crate) mod pg;
pub(crate) mod prompts;
pub(crate) mod rag;
pub(crate) mod resources;
pub(crate) mod smoke;
pub(crate) mod transport;
pub(crate) mod web;

/// The tools docs/servers.md lists in the table under `heading`, sorted.
#[cfg(test)]
pub(crate) fn documented_tools(heading: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/servers.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut tools: Vec<String> = doc
        .lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|l| l.trim_matches('|').split('|').next().map(|c| c.trim().trim_matches('`').to_owned()))
        .collect();
    tools.sort();
    tools
}
