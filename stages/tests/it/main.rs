//! Integration tests of the stages crate: data-driven cleaner and chunker cases on
//! fixtures this project wrote, and checks over the real corpora (ATLAS_CORPORA).

mod chunk;
mod clean;
mod code;
mod corpora;
mod formats;
mod fuzz;
mod languages;
mod layout;
mod llms;
