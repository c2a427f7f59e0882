//! End-to-end tests: the real `atlas-pipeline` binary on real files.

mod agent;
mod ask;
mod bad_input;
mod bm25;
mod cache_faults;
mod conformance;
mod crawl;
mod distribution;
mod embed;
mod eval;
mod git;
mod hardening;
mod hostile;
mod hostile_bundles;
mod hostile_servers;
mod incremental;
mod layout;
mod libraries;
mod mcp;
mod pack;
mod package;
mod postgres;
mod remote_cache;
mod search;
mod snapshots;
mod web;
