//! The Atlas pipeline: a DAG of stages over a content-addressed cache.
//!
//! `crawl → clean-gitbook → chunk → {embed, bm25} → pack`. Stages are pure functions of
//! (params, input artifacts); only the source stage (crawl) reads the outside world.

pub mod bm25;
pub mod builtin;
pub mod chunk;
pub mod clean;
pub mod cli;
pub mod code;
pub mod config;
pub mod crawl;
pub mod dag;
pub mod embed;
pub mod failpoint;
pub mod outputs;
pub mod pack;
pub mod progress;
pub mod source;
