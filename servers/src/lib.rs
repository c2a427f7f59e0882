//! The `atlas` binary: `atlas search` over a bundle, and the Atlas MCP servers, `fs`
//! (the verbatim mirror) and `rag` (ranked search).
//!
//! Architecture invariant: this is the only crate that knows MCP, and the servers
//! write only protocol to stdout; logs go to stderr.

pub mod cli;
