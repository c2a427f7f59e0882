//! The Atlas MCP servers, `fs` (the verbatim mirror) and `rag` (ranked search).
//!
//! Architecture invariant: this is the only crate that knows MCP. The servers are not
//! built yet; this crate holds no code until they are, so nothing here claims to work.
