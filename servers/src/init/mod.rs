//! `atlas init`: one command from nothing to an agent that knows the project.
pub mod clients;
