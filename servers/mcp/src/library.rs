//! Several bundles behind one server: the libraries, `name@version` pinning (semver
//! ranges allowed, never a silent substitute), and the search merged across them.
//!
//! A library is one served bundle, named `name@version` from its manifest. Each may
//! follow an installed bundle's `current` ([`Live`]), so its version is read per call.

use std::sync::Arc;

use atlas_runtime::search::{self, Searched};
use atlas_runtime::{Bundle, SearchOptions};

use crate::live::Live;

/// Why a search over the served libraries gave nothing; its text is what a tool
/// reply, the web page and `atlas ask` say.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The `library` argument names nothing served (the text says what is).
    #[error("{0}")]
    Library(String),
    /// The engine refused the query (empty, too long, a bad option).
    #[error(transparent)]
    Search(atlas_runtime::Error),
    /// No library could be searched: a line for each, paths left out.
    #[error("{0}")]
    NoneSearched(String),
}

/// The served libraries, in the order they were given (then those a project's set
/// gained while serving, [`Libraries::add`]), and those that could not be opened.
#[derive(Debug, Clone)]
pub struct Libraries(Arc<std::sync::RwLock<Vec<Live>>>, Arc<Vec<Broken>>);

/// A library given to a server of several that did not open (damaged, half-installed,
/// its model missing): not served, named in the log and by `list_libraries`, and a
/// call pinned to it is an error saying so. The others serve.
///
/// Architecture invariant: one broken library never takes the others down.
/// *`tests/it/hardening.rs` (`one_broken_bundle_leaves_the_others_served`).*
#[derive(Debug, Clone, serde::Serialize, rmcp::schemars::JsonSchema)]
pub struct Broken {
    /// `name@version` when the manifest could be read, else the name or folder.
    pub library: String,
    /// The bundle's name, as a `library` argument names it.
    pub name: String,
    pub error: String,
    /// What to do about it.
    pub fix: String,
}

/// What a server of several may serve: each `name@version` once, and at least one
/// (else the broken ones, named, are the error).
pub fn check_served(labels: impl Iterator<Item = String>, broken: &[Broken]) -> Result<(), NotServed> {
    let mut seen = std::collections::BTreeSet::new();
    for label in labels {
        if seen.contains(&label) {
            return Err(NotServed::Twice(label));
        }
        seen.insert(label);
    }
    match (seen.is_empty(), broken.is_empty()) {
        (false, _) => Ok(()),
        (true, false) => Err(NotServed::AllBroken(broken.to_vec())),
        (true, true) => Err(NotServed::Nothing),
    }
}

/// Why a server of several cannot start.
#[derive(Debug, thiserror::Error)]
pub enum NotServed {
    #[error("two bundles are {0}: serve each name and version once (drop one --bundle)")]
    Twice(String),
    /// None opened: each one's line.
    #[error("{}", .0.iter().map(Broken::line).collect::<Vec<_>>().join("; "))]
    AllBroken(Vec<Broken>),
    #[error("no bundle to serve: pass --bundle NAME|DIR (several times) or --all")]
    Nothing,
}

impl Broken {
    /// A library that did not open: `installed` when it is an installed name.
    pub fn new(library: String, name: String, error: String, installed: bool) -> Broken {
        let fix = if installed {
            format!("run `atlas restore {name}` (the previous version) or reinstall it (`atlas install SOURCE`)")
        } else {
            "rebuild it (`atlas-pipeline run`) or install it again".to_owned()
        };
        Broken { library, name, error: crate::output::inert(&error).into(), fix }
    }

    /// A library that did not open, with what to do about it.
    pub fn with_fix(library: String, name: String, error: String, fix: String) -> Broken {
        Broken { library, name, error: crate::output::inert(&error).into(), fix }
    }

    /// One line for the log, a tool error and list_libraries.
    pub fn line(&self) -> String {
        format!("{} is broken and not served ({}); {}", self.library, self.error, self.fix)
    }
}

/// What a `library` argument names: a name, and maybe a version or a range.
#[derive(Debug, Clone, PartialEq)]
pub enum Version {
    /// Any served version.
    Any,
    /// This version exactly (a full `x.y.z`, or any other text compared as is).
    Exact(String),
    /// A semver range: `^1.2`, `~1`, `>=1, <2`, `1.x`, or a partial `1.2` (= `~1.2`).
    Range(semver::VersionReq),
}

/// Parses `name`, `name@version` or `name@range`. Errors echo the argument cut short
/// and on one line (an agent may send 10 KB of anything).
pub fn parse_spec(spec: &str) -> Result<(String, Version), String> {
    parse_spec_inner(spec.trim()).map_err(|e| crate::output::inert(&e).into())
}

/// `name` and the version text after its `@`: the last `@` that is not a scope's
/// (`npm:@scope/x@1.2`).
fn split(spec: &str) -> (&str, Option<&str>) {
    let at = match spec.rfind('@') {
        Some(0) if !spec.contains('/') => Some(0),
        Some(i) if i > 0 && !spec[..i].ends_with(':') => Some(i),
        _ => None,
    };
    match at {
        Some(i) => (spec[..i].trim(), Some(spec[i + 1..].trim())),
        None => (spec, None),
    }
}

fn parse_spec_inner(spec: &str) -> Result<(String, Version), String> {
    let (name, v) = split(spec);
    if name.is_empty() {
        return Err(format!("library {spec:?} has no name; pass `name` or `name@version` (list_libraries names them)"));
    }
    let version = match v {
        None => Version::Any,
        Some("") => return Err(format!("library {spec:?} has an empty version; drop the `@` or name a version")),
        Some(v) => {
            let bare = v.strip_prefix('v').unwrap_or(v);
            if semver::Version::parse(bare).is_ok() {
                Version::Exact(v.to_owned())
            } else if bare.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
                // A partial version: every release of that line.
                Version::Range(semver::VersionReq::parse(&format!("~{bare}")).map_err(|e| format!("{v:?}: {e}"))?)
            } else if v.starts_with(['^', '~', '>', '<', '=', '*']) || v.contains(['x', 'X', '*', ',']) {
                Version::Range(
                    semver::VersionReq::parse(v)
                        .map_err(|e| format!("library {spec:?}: {v:?} is not a version range ({e})"))?,
                )
            } else {
                Version::Exact(v.to_owned())
            }
        }
    };
    Ok((name.to_owned(), version))
}

/// A version as semver, leniently: a leading `v` is dropped.
fn as_semver(v: &str) -> Option<semver::Version> {
    semver::Version::parse(v.strip_prefix('v').unwrap_or(v)).ok()
}

impl Version {
    fn matches(&self, v: &str) -> bool {
        match self {
            Version::Any => true,
            Version::Exact(want) => {
                want == v || matches!((as_semver(want), as_semver(v)), (Some(a), Some(b)) if a == b)
            }
            Version::Range(req) => as_semver(v).is_some_and(|s| req.matches(&s)),
        }
    }
}

impl Libraries {
    /// The libraries (and the broken ones, named); two with the same `name@version` are
    /// refused.
    pub fn new(libs: Vec<Live>, broken: Vec<Broken>) -> Result<Libraries, NotServed> {
        check_served(libs.iter().map(|l| l.get().library()), &broken)?;
        Ok(Libraries(Arc::new(std::sync::RwLock::new(libs)), Arc::new(broken)))
    }

    pub fn single(live: Live) -> Libraries {
        Libraries(Arc::new(std::sync::RwLock::new(vec![live])), Arc::new(Vec::new()))
    }

    fn lives(&self) -> std::sync::RwLockReadGuard<'_, Vec<Live>> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Serves one more library (a project's set gained it while serving), unless one
    /// of its `name@version` serves already; whether it was added.
    pub fn add(&self, live: Live) -> bool {
        let label = live.get().library();
        let mut lives = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if lives.iter().any(|l| l.get().library() == label) {
            return false;
        }
        lives.push(live);
        true
    }

    /// Whether `name@version` (as a library is named) serves now.
    pub fn serves(&self, library: &str) -> bool {
        self.lives().iter().any(|l| l.get().library() == library)
    }

    /// The libraries that did not open.
    pub fn broken(&self) -> &[Broken] {
        &self.1
    }

    /// More than one library given: tools take `library`, fs paths start with it.
    pub fn is_multi(&self) -> bool {
        self.lives().len() + self.1.len() > 1
    }

    /// The bundles serving now, in order: a working tree's library with its latest
    /// edits ([`crate::live::Edits`]) is two, the library's view that hides the edited
    /// files, then their fresh copies.
    pub fn bundles(&self) -> Vec<Arc<Bundle>> {
        let mut out = Vec::new();
        for b in self.lives().iter().map(Live::get) {
            let version = b.dir.file_name().unwrap_or_default().to_string_lossy();
            match crate::live::edits(&b.library(), &version) {
                Some(e) => {
                    out.push(Arc::new(b.hiding(e.hidden.clone())));
                    out.extend(e.fresh.clone());
                }
                None => out.push(b),
            }
        }
        out
    }

    /// The first library (what a single-bundle server serves).
    pub fn first(&self) -> Arc<Bundle> {
        self.lives()[0].get()
    }

    /// The bundles a `library` argument names (all without one). A name with a range
    /// picks the highest matching version; a version that is not served is an error
    /// naming those that are.
    pub fn select(&self, spec: Option<&str>) -> Result<Vec<Arc<Bundle>>, String> {
        let all = self.bundles();
        let Some(spec) = spec.filter(|s| !s.trim().is_empty()) else { return Ok(all) };
        let (name, version) = parse_spec(spec)?;
        let named: Vec<Arc<Bundle>> =
            all.iter().filter(|b| atlas_runtime::package::matches(&b.manifest.name, &name)).cloned().collect();
        let mut names: Vec<&str> = named.iter().map(|b| b.manifest.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if names.len() > 1 {
            let shown: Vec<String> = names.iter().map(|n| atlas_runtime::package::shown_name(n)).collect();
            return Err(crate::output::inert(&format!(
                "{name:?} names {} libraries; name one of {}",
                shown.len(),
                shown.join(", ")
            ))
            .into());
        }
        if named.is_empty()
            && let Some(b) =
                self.1.iter().find(|b| atlas_runtime::package::matches(&b.name, &name) || b.library == spec.trim())
        {
            return Err(b.line());
        }
        if named.is_empty() {
            return Err(format!(
                "no library {:?} is served; served: {} (list_libraries describes them)",
                crate::output::inert(&name),
                all.iter().map(|b| b.library()).collect::<Vec<_>>().join(", ")
            ));
        }
        let mut hits: Vec<Arc<Bundle>> =
            named.iter().filter(|b| version.matches(&b.manifest.version)).cloned().collect();
        if hits.is_empty()
            && let Some(b) =
                self.1.iter().find(|b| b.library == format!("{name}@{}", split(spec.trim()).1.unwrap_or_default()))
        {
            return Err(b.line());
        }
        if hits.is_empty() {
            // Installed versions that this server does not serve, to say how to get them.
            let home = atlas_dist::home::Home::from_env();
            let installed: Vec<String> = home.records(&name).into_iter().map(|r| r.version).collect();
            let more = match installed.is_empty() {
                true => String::new(),
                false => format!(
                    "; installed: {} (serve one beside them with --bundle {name}@VERSION)",
                    installed.join(", ")
                ),
            };
            return Err(crate::output::inert(&format!(
                "{name}@{} is not served; the versions served are {}{more}",
                split(spec.trim()).1.unwrap_or_default(),
                named.iter().map(|b| b.manifest.version.as_str()).collect::<Vec<_>>().join(", ")
            ))
            .into());
        }
        if !matches!(version, Version::Exact(_)) && hits.len() > 1 {
            // `name` alone or a range: the highest version (semver order, then text),
            // whole (a working tree's library and its fresh edits are one version).
            let key = |b: &Arc<Bundle>| (as_semver(&b.manifest.version), b.manifest.version.clone());
            let top = hits.iter().map(key).max();
            hits.retain(|b| Some(key(b)) == top);
        }
        Ok(hits)
    }

    /// The refusal threshold of a search over the named libraries (all without one):
    /// their calibrated one when they agree on it, else Atlas's
    /// ([`atlas_runtime::eval::DEFAULT_THRESHOLD`]). What `atlas ask`, the web page and
    /// the rag tools' confidence all use.
    pub fn threshold(&self, library: Option<&str>) -> f32 {
        let bundles = self.select(library).unwrap_or_default();
        let calibrated = |b: &Arc<Bundle>| atlas_runtime::eval::threshold(&b.manifest);
        let agreed = bundles.first().map(calibrated).filter(|t| bundles.iter().all(|b| calibrated(b) == *t));
        agreed.unwrap_or(atlas_runtime::eval::DEFAULT_THRESHOLD)
    }

    /// The search over the named libraries (all without one), merged fairly
    /// ([`search::search_all`]), and a line for each library left out while others
    /// answered (its model missing, say): one broken library does not take the others
    /// down.
    pub fn search(
        &self,
        query: &str,
        opts: &SearchOptions,
        library: Option<&str>,
    ) -> Result<(Searched, Vec<String>), SearchError> {
        let bundles = self.select(library).map_err(SearchError::Library)?;
        let line = |s: &search::Skipped| {
            let b = &bundles[s.index];
            match &s.why {
                search::Skip::KeywordOnly(_) if crate::live::is_fresh_edits(b) => format!(
                    "{}: the files edited since it was built are searched by keyword and symbols until the whole tree is built again",
                    s.library
                ),
                search::Skip::KeywordOnly(why) => {
                    format!("{} was searched by keyword only ({})", s.library, crate::output::bundle_error(b, why))
                }
                search::Skip::Failed(e) => {
                    format!("{} was not searched: {}", s.library, crate::output::bundle_error(b, e))
                }
                search::Skip::Panicked => format!("{} {}", s.library, s.why),
            }
        };
        match search::search_all(&bundles, query, opts) {
            Ok(m) => Ok((m.searched, m.skipped.iter().map(line).collect())),
            Err(atlas_runtime::Error::NoneSearched(skipped)) => {
                Err(SearchError::NoneSearched(skipped.iter().map(line).collect::<Vec<_>>().join("; ")))
            }
            Err(e) => Err(SearchError::Search(e)),
        }
    }

    /// The bundle holding chunk `id`: the named library's, or the one library holding
    /// it; an id found in several libraries asks for `library`.
    pub fn chunk_bundle(&self, id: &str, library: Option<&str>) -> Result<Arc<Bundle>, String> {
        let bundles = self.select(library)?;
        let holding: Vec<Arc<Bundle>> = bundles.into_iter().filter(|b| b.has_chunk(id)).collect();
        match holding.len() {
            0 => Err(format!("no chunk {id:?} in {}; use a chunk_id from a search hit", self.scope(library))),
            1 => Ok(holding.into_iter().next().unwrap_or_else(|| self.first())),
            _ => Err(format!(
                "chunk {id:?} is in several libraries ({}); pass library as the hit's library",
                holding.iter().map(|b| b.library()).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    fn scope(&self, library: Option<&str>) -> String {
        match library {
            Some(l) => format!("library {l:?}"),
            None if self.is_multi() => "any served library".into(),
            None => "this bundle".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_specs_parse() {
        let check = |input: &str, expected: Result<(&str, &str), &str>| {
            let got = parse_spec(input).map(|(n, v)| {
                let v = match v {
                    Version::Any => "any".to_owned(),
                    Version::Exact(e) => format!("={e}"),
                    Version::Range(r) => format!("range {r}"),
                };
                (n, v)
            });
            match expected {
                Ok((n, v)) => assert_eq!(got, Ok((n.to_owned(), v.to_owned())), "{input}"),
                Err(needle) => {
                    let e = got.unwrap_err();
                    assert!(e.contains(needle), "{input}: {e}");
                }
            }
        };
        check("devtron", Ok(("devtron", "any")));
        check("devtron@1.2.3", Ok(("devtron", "=1.2.3")));
        check("devtron@v1.2.3", Ok(("devtron", "=v1.2.3")));
        check("devtron@1.2", Ok(("devtron", "range ~1.2")));
        check("devtron@1", Ok(("devtron", "range ~1")));
        check("devtron@^1.2", Ok(("devtron", "range ^1.2")));
        check("devtron@>=1, <2", Ok(("devtron", "range >=1, <2")));
        check("devtron@1.x", Ok(("devtron", "range 1.*")));
        check("devtron@2024-05", Ok(("devtron", "=2024-05")));
        check("devtron@latest", Ok(("devtron", "=latest")));
        check("@1.0.0", Err("has no name"));
        check("devtron@", Err("empty version"));
        check("devtron@>=banana", Err("not a version range"));
        check("npm:@scope/x@1.2.3", Ok(("npm:@scope/x", "=1.2.3")));
        check("npm:@scope/x", Ok(("npm:@scope/x", "any")));
        check("@scope/x@^1", Ok(("@scope/x", "range ^1")));
        check("crate:tokio@1.40", Ok(("crate:tokio", "range ~1.40")));
    }

    #[test]
    fn versions_match_exactly_or_by_range_never_by_neighbourhood() {
        let v = |s: &str| parse_spec(&format!("x@{s}")).unwrap().1;
        assert!(v("1.0.0").matches("1.0.0"));
        assert!(v("v1.0.0").matches("1.0.0"));
        assert!(!v("1.0.0").matches("1.2.0"), "a full version is exact, not ^1.0.0");
        assert!(v("1").matches("1.9.0"));
        assert!(!v("1").matches("2.0.0"));
        assert!(v("1.2").matches("1.2.7"));
        assert!(!v("1.2").matches("1.3.0"));
        assert!(v(">=1, <2").matches("1.5.0"));
        assert!(!v("^2").matches("not-semver"));
    }
}
