//! The Atlas pipeline: a DAG of stages over a content-addressed cache.
//!
//! `crawl → clean-gitbook → chunk → {embed → tune, bm25} → pack`. Stages are pure functions of
//! (params, input artifacts); only the source stage (crawl) reads the outside world.
//!
//! - one module per stage: [`crawl`], [`clean`], [`chunk`], [`embed`], [`tune`],
//!   [`bm25`], [`pack`], listed once in [`registry`];
//! - [`runner`]: the machinery that is not a stage (config, DAG, memo, outputs);
//! - [`artifacts`]: the outputs stages hand each other;
//! - [`text`]: text helpers shared by stages (markdown lines, HTML, time).
//!
//! Architecture invariant: a stage module uses `crate::runner`'s API,
//! `crate::artifacts` and `crate::text`, never another stage's module, and the runner
//! uses no stage module (checked by `tests/it/layout.rs`).

pub mod artifacts;
pub mod bm25;
pub mod chunk;
pub mod clean;
pub mod cli;
pub mod crawl;
pub mod embed;
pub mod pack;
pub mod publish;
pub mod registry;
pub mod runner;
pub mod text;
pub mod tune;
