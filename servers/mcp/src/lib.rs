//! The Atlas MCP servers: `fs` (the verbatim mirror) and `rag` (ranked search), the
//! agent surface they share (budgets, resources, prompts, code intelligence), and
//! their transports (guarded stdio, streamable HTTP).
//!
//! Architecture invariant: this is the only crate that speaks MCP (rmcp), and the
//! servers write only protocol to stdout; logs go to stderr (tracing). `print!` to
//! stdout is denied here. It depends on no other server crate.
#![deny(clippy::print_stdout)]

pub mod budget;
pub mod code;
pub mod fs;
pub(crate) mod handler;
pub mod http_serve;
pub(crate) mod lenient;
pub mod library;
pub mod live;
pub mod local;
pub mod mirror;
pub mod output;
pub(crate) mod prompts;
pub mod rag;
pub(crate) mod resources;
pub mod transport;

/// The tools docs/servers.md lists in the table under `heading`, sorted.
#[cfg(test)]
pub(crate) fn documented_tools(heading: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/servers.md");
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
