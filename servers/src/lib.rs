//! The `atlas` command: `atlas search` and `atlas ask` over a bundle, `atlas serve`
//! (the MCP servers of `atlas-mcp`, PostgreSQL through `atlas-pg`, and the web page),
//! and the commands that install, update, add and sync bundles.
//!
//! Architecture invariant: `print!` to stdout is denied here; a command prints its
//! result through one function (`cli::print`), and a server's stdout is protocol only.
#![deny(clippy::print_stdout)]

pub(crate) mod agent;
pub(crate) mod ask;
pub mod cli;
pub(crate) mod deps;
pub(crate) mod doctor;
pub(crate) mod eval;
pub(crate) mod init;
pub(crate) mod llm;
pub(crate) mod manage;
pub(crate) mod smoke;
pub(crate) mod tree;
pub(crate) mod web;
