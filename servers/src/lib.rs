//! The `atlas` binary: `atlas search` over a bundle, and the Atlas MCP servers, `fs`
//! (the verbatim mirror) and `rag` (ranked search), over stdio or streamable HTTP.
//!
//! Architecture invariant: this is the only crate that knows MCP, and the servers
//! write only protocol to stdout; logs go to stderr (tracing). `print!` to stdout is
//! denied here.
#![deny(clippy::print_stdout)]

pub mod cli;
pub mod fs;
pub mod output;
pub mod rag;
mod test_hooks;
pub mod transport;
