//! Facade packages: the locked packages a direct dependency re-exports (clap's `pub
//! use clap_builder::*`, an npm package's `module.exports = require('@scope/x')`),
//! served beside it, because its API is defined there.
//!
//! The re-exports are read from the facade's own entry point in its installed mirror
//! (a crate's `src/lib.rs`, an npm package's `main`), once the keyword pass has built
//! it: untrusted text, read up to [`MAX_ENTRY_BYTES`] and scanned line by line (no
//! parser), each name found kept only when the lockfile resolves it for the facade
//! (Cargo.lock's `dependencies` of that crate, package-lock.json's copy the facade
//! loads), at that version. One level: what a re-exported package re-exports is not
//! followed
//! (`tests::a_facade_re_exports_only_the_crates_its_lines_name_and_a_huge_binary_file_is_read_up_to_its_cap`).

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use atlas_dist::home::Home;
use atlas_runtime::package::Ecosystem;

use super::lockfiles::{self, Graph, Kind, Locked};

/// The most bytes of a facade's entry point read.
pub const MAX_ENTRY_BYTES: u64 = 1 << 20;
/// The most package names one facade's entry point yields.
pub const MAX_REEXPORTS: usize = 64;
/// The longest npm `main` followed, in bytes.
const MAX_MAIN_CHARS: usize = 256;

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

/// The scoped npm packages an entry point re-exports, each once (`@scope/x`):
/// `module.exports = require('@scope/x')`, `export * from '@scope/x'`, `export {
/// default } from "@scope/x/sub"` (the package, not its subpath). Only scoped names:
/// an unscoped re-export is as often a helper as a facade's API.
pub fn npm_reexports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let l = line.trim_start();
        let quoted = if l.starts_with("module.exports") || l.starts_with("exports.") {
            l.split_once("require(").map(|(_, r)| r.trim_start())
        } else if l.starts_with("export ") {
            l.rsplit_once(" from ").map(|(_, r)| r.trim_start())
        } else {
            None
        };
        let Some(q) = quoted else { continue };
        let Some(rest) = q.strip_prefix(['\'', '"']) else { continue };
        let Some(end) = rest.find(['\'', '"']) else { continue };
        let mut parts = rest[..end].splitn(3, '/');
        let (Some(scope), Some(name)) = (parts.next(), parts.next()) else { continue };
        let ok = |p: &str| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._".contains(&b))
        };
        if scope.len() > 1 && scope.starts_with('@') && ok(&scope[1..]) && ok(name) && scope.len() + name.len() < 214 {
            out.insert(format!("{scope}/{name}"));
        }
        if out.len() >= MAX_REEXPORTS {
            break;
        }
    }
    out
}

/// An npm package's entry point in its mirror folder `root`: `package.json`'s `main`
/// (a relative path inside the package, tried as written, then with `.js`, then as a
/// folder's `index.js`), else `index.js`.
fn npm_entry(root: &Path) -> Option<PathBuf> {
    let manifest = read_entry(&root.join("package.json"))?;
    let main = serde_json::from_str::<serde_json::Value>(&manifest)
        .ok()
        .and_then(|v| v.get("main")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "index.js".into());
    let inside = Path::new(&main).components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if main.is_empty() || main.len() > MAX_MAIN_CHARS || !inside {
        return None;
    }
    [main.clone(), format!("{main}.js"), format!("{main}/index.js")]
        .into_iter()
        .map(|m| root.join(m))
        .find(|p| p.is_file())
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

/// The locked packages the installed packages of `locked` re-export, each once, that
/// `locked` does not hold already: crates through `graph` (the project's Cargo.lock),
/// npm packages through `project`'s package-lock.json.
pub fn follow(home: &Home, project: &Path, graph: Option<&Graph>, locked: &[Locked]) -> Vec<Reexported> {
    let mut out: Vec<Reexported> = Vec::new();
    for facade in locked {
        let Some(dir) = home.resolve_version(&facade.spec.bundle_name(), &facade.spec.version) else { continue };
        let root = dir.join("mirror").join(facade.spec.source_name());
        let found: Vec<Locked> = match facade.spec.ecosystem {
            Ecosystem::Crate => {
                let (Some(graph), Some(text)) = (graph, read_entry(&root.join("src").join("lib.rs"))) else { continue };
                let names = rust_reexports(&text);
                graph
                    .dependencies(&facade.spec.name, &facade.spec.version)
                    .iter()
                    .filter(|d| names.contains(&d.spec.name.replace('-', "_")))
                    .cloned()
                    .collect()
            }
            Ecosystem::Npm => {
                let Some(text) = npm_entry(&root).and_then(|e| read_entry(&e)) else { continue };
                npm_reexports(&text)
                    .iter()
                    .filter(|n| **n != facade.spec.name)
                    .filter_map(|n| lockfiles::npm_dependency(project, &facade.spec.name, &facade.spec.version, n))
                    .collect()
            }
            _ => continue,
        };
        for dep in found {
            if locked.iter().any(|l| l.spec == dep.spec) || out.iter().any(|r| r.locked.spec == dep.spec) {
                continue;
            }
            let mut inner = dep;
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

    #[test]
    fn an_npm_facade_re_exports_the_scoped_packages_its_entry_point_requires_or_exports_from() {
        let js = "'use strict';\nmodule.exports = require('@scope/core');\nexport * from \"@scope/types/sub/path\";\n\
                  export { default, x } from '@other/thing';\nconst helper = require('@scope/helper');\n\
                  module.exports = require('./local');\nexport * from 'unscoped';\nexport * from '@Bad/Case';\n\
                  export * from '@scope';\nexports.y = require(\"@scope/y\").y;\n";
        let found: Vec<String> = npm_reexports(js).into_iter().collect();
        assert_eq!(found, ["@other/thing", "@scope/core", "@scope/types", "@scope/y"]);
        let binary = String::from_utf8_lossy(b"\xff\x00module.exports = require('@a/b')\xfe").into_owned();
        assert!(npm_reexports(&binary).is_empty(), "a line that does not begin as a re-export is none");

        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("package.json"), r#"{"main": "lib"}"#).unwrap();
        std::fs::write(root.join("lib/index.js"), "module.exports = require('@scope/core');\n").unwrap();
        assert_eq!(npm_entry(root), Some(root.join("lib/index.js")));
        std::fs::write(root.join("package.json"), r#"{"main": "../../etc/passwd"}"#).unwrap();
        assert_eq!(npm_entry(root), None, "a main out of the package is not followed");
        std::fs::write(root.join("package.json"), r#"{"name": "x"}"#).unwrap();
        std::fs::write(root.join("index.js"), "").unwrap();
        assert_eq!(npm_entry(root), Some(root.join("index.js")));
    }

    #[test]
    fn an_npm_facades_scoped_package_is_served_at_the_version_package_lock_or_pnpm_lock_resolves_for_it() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        let sri = |c: char| format!("sha512-{}==", c.to_string().repeat(86));
        std::fs::write(
            p.join("package-lock.json"),
            serde_json::json!({"lockfileVersion": 3, "packages": {
                "": {"dependencies": {"facade": "^1"}},
                "node_modules/facade": {"version": "1.0.0", "integrity": sri('A')},
                "node_modules/@scope/core": {"version": "2.0.0", "integrity": sri('B')},
                "node_modules/facade/node_modules/@scope/core": {"version": "1.5.0", "integrity": sri('C')},
                "node_modules/@scope/top": {"version": "3.0.0", "integrity": sri('D')}
            }})
            .to_string(),
        )
        .unwrap();
        let core = lockfiles::npm_dependency(p, "facade", "1.0.0", "@scope/core").unwrap();
        assert_eq!((core.spec.to_string(), core.checksums), ("npm:@scope/core@1.5.0".into(), vec![sri('C')]));
        assert_eq!(
            lockfiles::npm_dependency(p, "facade", "1.0.0", "@scope/top").unwrap().spec.to_string(),
            "npm:@scope/top@3.0.0"
        );
        assert!(lockfiles::npm_dependency(p, "facade", "1.0.0", "@scope/none").is_none());

        std::fs::remove_file(p.join("package-lock.json")).unwrap();
        let v9 = format!(
            "lockfileVersion: '9.0'\nimporters:\n  .:\n    dependencies:\n      facade:\n        specifier: ^1\n        \
             version: 1.0.0\npackages:\n  facade@1.0.0:\n    resolution: {{integrity: {}}}\n  '@scope/core@1.5.0':\n    \
             resolution: {{integrity: {}}}\n  '@scope/core@2.0.0':\n    resolution: {{integrity: {}}}\nsnapshots:\n  \
             facade@1.0.0(react@18.2.0):\n    dependencies:\n      '@scope/core': 1.5.0(react@18.2.0)\n",
            sri('A'),
            sri('C'),
            sri('B')
        );
        std::fs::write(p.join("pnpm-lock.yaml"), v9).unwrap();
        let core = lockfiles::npm_dependency(p, "facade", "1.0.0", "@scope/core").unwrap();
        assert_eq!((core.spec.to_string(), core.checksums), ("npm:@scope/core@1.5.0".into(), vec![sri('C')]));
        assert!(lockfiles::npm_dependency(p, "facade", "9.9.9", "@scope/core").is_none());
    }
}
