//! Facade crates: the locked crates a direct dependency re-exports (clap's `pub use
//! clap_builder::*`), served beside it, because its API is defined there.
//!
//! The re-exports are read from the facade's own `src/lib.rs` in its installed mirror,
//! once the keyword pass has built it: untrusted text, read up to
//! [`MAX_ENTRY_BYTES`] and scanned line by line (no parser), each name found kept only
//! when Cargo.lock lists it among the facade's own dependencies, at the version it
//! pins there. One level: what a re-exported crate re-exports is not followed
//! (`tests::a_facade_re_exports_only_the_crates_its_lines_name_and_a_huge_binary_file_is_read_up_to_its_cap`).

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::Path;

use atlas_dist::home::Home;
use atlas_runtime::package::Ecosystem;

use super::lockfiles::{Graph, Kind, Locked};

/// The most bytes of a facade's entry point read.
pub const MAX_ENTRY_BYTES: u64 = 1 << 20;
/// The most crate names one facade's entry point yields.
pub const MAX_REEXPORTS: usize = 64;

/// The crate names a Rust entry point re-exports, each once, as written (`clap_builder`):
/// `pub use name::…`, `pub use ::name…`, `pub use name;`, `pub extern crate name`, with
/// or without `#[doc(inline)]` or `#[doc(hidden)]` before them on the line. Paths of
/// the crate itself (`crate`, `self`, `super`) and the standard library are not crates.
pub fn rust_reexports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let mut l = line.trim_start();
        while let Some(rest) = l.strip_prefix("#[") {
            let Some(end) = rest.find(']') else { break };
            l = rest[end + 1..].trim_start();
        }
        let Some(rest) = l.strip_prefix("pub ") else { continue };
        let rest = rest.trim_start();
        let name = if let Some(r) = rest.strip_prefix("use ") {
            r.trim_start().trim_start_matches("::")
        } else if let Some(r) = rest.strip_prefix("extern crate ") {
            r.trim_start()
        } else {
            continue;
        };
        let name: String = name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if name.is_empty() || ["crate", "self", "super", "std", "core", "alloc"].contains(&name.as_str()) {
            continue;
        }
        out.insert(name);
        if out.len() >= MAX_REEXPORTS {
            break;
        }
    }
    out
}

/// Up to [`MAX_ENTRY_BYTES`] of the file at `path`, as text (bytes that are not UTF-8
/// replaced); None when it is not a regular file that can be read.
fn read_entry(path: &Path) -> Option<String> {
    let mut bytes = Vec::new();
    atlas_runtime::safe_path::open_regular(path).ok()?.take(MAX_ENTRY_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// One crate served because a facade re-exports it.
#[derive(Debug, Clone)]
pub struct Reexported {
    /// The crate, marked with its facade's kinds and [`Kind::Reexported`].
    pub locked: Locked,
    /// The facade, as a spec is written (`crate:clap@4.5.20`).
    pub by: String,
}

/// The locked crates the installed crates of `locked` re-export, each once, that
/// `locked` does not hold already.
pub fn follow(home: &Home, graph: &Graph, locked: &[Locked]) -> Vec<Reexported> {
    let mut out: Vec<Reexported> = Vec::new();
    for facade in locked.iter().filter(|l| l.spec.ecosystem == Ecosystem::Crate) {
        let Some(dir) = home.resolve_version(&facade.spec.bundle_name(), &facade.spec.version) else { continue };
        let entry = dir.join("mirror").join(facade.spec.source_name()).join("src").join("lib.rs");
        let Some(text) = read_entry(&entry) else { continue };
        let names = rust_reexports(&text);
        for dep in graph.dependencies(&facade.spec.name, &facade.spec.version) {
            if !names.contains(&dep.spec.name.replace('-', "_")) {
                continue;
            }
            if locked.iter().any(|l| l.spec == dep.spec) || out.iter().any(|r| r.locked.spec == dep.spec) {
                continue;
            }
            let mut inner = dep.clone();
            inner.kinds = facade.kinds.iter().filter(|k| !matches!(k, Kind::Reexported(_))).cloned().collect();
            inner.kinds.insert(Kind::reexported(&facade.spec.name));
            inner.lockfile.clone_from(&facade.lockfile);
            out.push(Reexported { locked: inner, by: facade.spec.to_string() });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_facade_re_exports_only_the_crates_its_lines_name_and_a_huge_binary_file_is_read_up_to_its_cap() {
        let lib = "//! The facade.\n#![doc = \"x\"]\npub use clap_builder::*;\n#[doc(inline)] pub use ::serde_core::Serialize;\n\
                   pub extern crate futures_util as util;\n  pub use tokio_macros;\n#[cfg(feature = \"x\")]\npub use derive_more::{A, B};\n\
                   pub use crate::local::Thing;\npub use self::x::Y;\npub use std::fmt;\nuse private_dep::Z;\npub(crate) use hidden::W;\n\
                   pub mod error;\npub fn use_me() {}\n// pub use commented_out::X;\n";
        let found: Vec<String> = rust_reexports(lib).into_iter().collect();
        assert_eq!(found, ["clap_builder", "derive_more", "futures_util", "serde_core", "tokio_macros"]);

        let t = tempfile::tempdir().unwrap();
        let huge = t.path().join("lib.rs");
        let mut bytes = b"pub use early::*;\n\xff\xfe\x00binary\n".to_vec();
        bytes.resize(MAX_ENTRY_BYTES as usize + 10, b'x');
        bytes.extend_from_slice(b"\npub use past_the_cap::*;\n");
        std::fs::write(&huge, &bytes).unwrap();
        let text = read_entry(&huge).unwrap();
        assert_eq!(text.len() as u64, MAX_ENTRY_BYTES + 4, "read up to its cap; two bad bytes made U+FFFD");
        let found: Vec<String> = rust_reexports(&text).into_iter().collect();
        assert_eq!(found, ["early"]);
        let many: String = (0..1000).map(|i| format!("pub use c{i}::*;\n")).collect();
        assert_eq!(rust_reexports(&many).len(), MAX_REEXPORTS);
        assert!(read_entry(t.path()).is_none(), "a folder is not read");
    }
}
