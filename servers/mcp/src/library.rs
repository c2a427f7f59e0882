//! Several bundles behind one server: the libraries, `name@version` pinning (semver
//! ranges allowed, never a silent substitute), and the search merged across them.
//!
//! A library is one served bundle, named `name@version` from its manifest. Each may
//! follow an installed bundle's `current` ([`Live`]), so its version is read per call.

use std::sync::Arc;

use atlas_runtime::search::Searched;
use atlas_runtime::{Bundle, Hit, Mode, SearchOptions};

use crate::live::Live;

/// The served libraries, in the order they were given, and those that could not be
/// opened.
#[derive(Debug, Clone)]
pub struct Libraries(Arc<Vec<Live>>, Arc<Vec<Broken>>);

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
pub fn check_served(labels: impl Iterator<Item = String>, broken: &[Broken]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for label in labels {
        if seen.contains(&label) {
            return Err(format!("two bundles are {label}: serve each name and version once (drop one --bundle)"));
        }
        seen.insert(label);
    }
    match (seen.is_empty(), broken.is_empty()) {
        (false, _) => Ok(()),
        (true, false) => Err(broken.iter().map(Broken::line).collect::<Vec<_>>().join("; ")),
        (true, true) => Err("no bundle to serve: pass --bundle NAME|DIR (several times) or --all".into()),
    }
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
    pub fn new(libs: Vec<Live>, broken: Vec<Broken>) -> Result<Libraries, String> {
        check_served(libs.iter().map(|l| l.get().library()), &broken)?;
        Ok(Libraries(Arc::new(libs), Arc::new(broken)))
    }

    pub fn single(live: Live) -> Libraries {
        Libraries(Arc::new(vec![live]), Arc::new(Vec::new()))
    }

    /// The libraries that did not open.
    pub fn broken(&self) -> &[Broken] {
        &self.1
    }

    /// More than one library given: tools take `library`, fs paths start with it.
    pub fn is_multi(&self) -> bool {
        self.0.len() + self.1.len() > 1
    }

    /// The bundles serving now, in order.
    pub fn bundles(&self) -> Vec<Arc<Bundle>> {
        self.0.iter().map(Live::get).collect()
    }

    /// The first library (what a single-bundle server serves).
    pub fn first(&self) -> Arc<Bundle> {
        self.0[0].get()
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
            // `name` alone or a range: the highest version (semver order, then text).
            hits.sort_by(|a, b| {
                let (va, vb) = (&a.manifest.version, &b.manifest.version);
                as_semver(va).cmp(&as_semver(vb)).then_with(|| va.cmp(vb))
            });
            hits = hits.split_off(hits.len() - 1);
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

    /// The search over the named libraries (all without one), merged fairly (see
    /// [`merge`]), and a line for each library that failed while others answered (its
    /// model missing, say): one broken library does not take the others down.
    pub fn search(
        &self,
        query: &str,
        opts: &SearchOptions,
        library: Option<&str>,
    ) -> Result<(Searched, Vec<String>), String> {
        let bundles = self.select(library)?;
        let mut each = Vec::with_capacity(bundles.len());
        let mut failed = Vec::new();
        for b in &bundles {
            // A library that fails, even by a panic, is left out with its error; the
            // others answer.
            let searched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.search_scored(query, opts)));
            match searched {
                Ok(Ok(s)) => each.push(s),
                // No model here (or not this bundle's): keyword results, and a line
                // that says so and how to fix it.
                Ok(Err(atlas_runtime::Error::Model(why))) if opts.mode != Mode::Keyword => {
                    let kw = SearchOptions { mode: Mode::Keyword, rerank: false, ..opts.clone() };
                    match b.search_scored(query, &kw) {
                        Ok(mut s) => {
                            // BM25 is not a calibrated confidence: it neither leads the
                            // merge nor vouches for the reply.
                            s.confidence = 0.0;
                            s.signals = Default::default();
                            each.push(s);
                            failed.push(format!(
                                "{} was searched by keyword only ({})",
                                b.library(),
                                crate::output::bundle_error(b, &why)
                            ));
                        }
                        Err(e) => failed.push(format!(
                            "{} was not searched: {}",
                            b.library(),
                            crate::output::bundle_error(b, &e)
                        )),
                    }
                }
                Ok(Err(e @ atlas_runtime::Error::Query(_))) => return Err(e.to_string()),
                Ok(Err(e)) => {
                    failed.push(format!("{} was not searched: {}", b.library(), crate::output::bundle_error(b, &e)));
                }
                Err(_) => failed.push(format!("{} was not searched: it failed inside the server", b.library())),
            }
        }
        if each.is_empty() {
            return Err(failed.join("; "));
        }
        Ok((merge(each, opts.top_k, opts.mode, opts.tuning.library_sharpness), failed))
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

/// Merges each library's ranked hits into `top_k`.
///
/// In vector and hybrid mode the hits form one relevance order, built from each
/// library's calibrated confidence ([`atlas_runtime::search::Signals::logit`]: the
/// nearest chunk's cosine, which every library of one model shares a scale for, and
/// the question's words the library has never seen). A library's weight is
/// `exp(−s · gap)`, the gap being how far its log-odds are behind the best library's,
/// in cosine units (`s`: [`atlas_runtime::search::Tuning::library_sharpness`]; a
/// library that found a name or a quoted string verbatim leads). A hit's merge score
/// is its library's weight times its score relative to that library's first hit, so
/// the right library's second hit beats another library's weak first. Keyword scores
/// (BM25) differ per corpus and come without a cosine: there the libraries take turns,
/// the most confident first. The merged confidence is the best library's.
pub fn merge(mut each: Vec<Searched>, top_k: usize, mode: Mode, sharpness: f32) -> Searched {
    if each.len() == 1 {
        return each.pop().unwrap_or_else(empty);
    }
    let best = each.iter().max_by(|a, b| a.confidence.total_cmp(&b.confidence));
    let (confidence, signals) = best.map_or((0.0, Default::default()), |s| (s.confidence, s.signals));
    let mut hits: Vec<Hit> = Vec::with_capacity(top_k);
    if mode != Mode::Keyword {
        let c = &atlas_runtime::search::CALIBRATION;
        let nearest = |s: &Searched| s.signals.logit(c) / c.top_cosine;
        let lead = each.iter().map(nearest).fold(f32::MIN, f32::max);
        let mut scored: Vec<(f32, usize, &Hit)> = Vec::new();
        for s in &each {
            let weight = (-sharpness * (lead - nearest(s))).exp();
            for (rank, h) in s.hits.iter().enumerate() {
                scored.push((weight * relative(&s.hits, rank), rank, h));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        hits.extend(scored.into_iter().take(top_k).map(|(_, _, h)| h.clone()));
        return Searched { hits, confidence, signals };
    }
    each.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    let longest = each.iter().map(|s| s.hits.len()).max().unwrap_or(0);
    'turns: for rank in 0..longest {
        for s in &each {
            if hits.len() == top_k {
                break 'turns;
            }
            if let Some(h) = s.hits.get(rank) {
                hits.push(h.clone());
            }
        }
    }
    Searched { hits, confidence, signals }
}

fn empty() -> Searched {
    Searched { hits: Vec::new(), confidence: 0.0, signals: Default::default() }
}

/// How a library's hit at `rank` compares with its first: the ratio of their scores
/// (both positive), else a decay by rank (a reranker's logits can be negative).
fn relative(hits: &[Hit], rank: usize) -> f32 {
    let top = hits.first().map_or(0.0, |h| h.score);
    let s = hits[rank].score;
    if top > 0.0 && s > 0.0 { (s / top).min(1.0) } else { 1.0 / (1.0 + 0.1 * rank as f32) }
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

    fn hit(lib: &str, n: usize) -> Hit {
        Hit { library: lib.into(), chunk_id: format!("{lib}-{n}"), ..Hit::default() }
    }

    fn searched(lib: &str, scores: &[f32], top_cosine: f32) -> Searched {
        let hits = scores.iter().enumerate().map(|(i, &score)| Hit { score, ..hit(lib, i) }).collect();
        let signals = atlas_runtime::search::Signals { top_cosine, words: 3, ..Default::default() };
        Searched { hits, confidence: top_cosine, signals }
    }

    fn ids(s: &Searched) -> Vec<String> {
        s.hits.iter().map(|h| h.chunk_id.clone()).collect()
    }

    #[test]
    fn a_weak_first_hit_of_one_library_never_outranks_a_strong_second_hit_of_another() {
        // a is nearer (0.80 against 0.72, no unseen words: the log-odds gap in cosine
        // units is 0.08): b weighs exp(−20 · 0.08) = 0.20 of a, so
        // b's first (0.20 × 1) ranks after a's second (0.97) and third (0.93), and
        // after a's fourth at half of a's first.
        let a = searched("a", &[0.030, 0.029, 0.028, 0.015], 0.80);
        let b = searched("b", &[0.031, 0.020], 0.72);
        let m = merge(vec![b, a], 5, Mode::Hybrid, 20.0);
        assert_eq!(ids(&m), ["a-0", "a-1", "a-2", "a-3", "b-0"]);
        assert_eq!(m.confidence, 0.80);
        // Two libraries as near as each other interleave by their hits' own scores.
        let m = merge(vec![searched("a", &[0.9, 0.5], 0.8), searched("b", &[0.9, 0.8], 0.8)], 4, Mode::Vector, 20.0);
        assert_eq!(ids(&m), ["a-0", "b-0", "b-1", "a-1"]);
    }

    #[test]
    fn a_library_that_found_the_name_leads_and_keyword_takes_turns() {
        let mut named = searched("a", &[0.5, 0.4], 0.3);
        named.signals.exact = true;
        let m = merge(vec![searched("b", &[0.9, 0.9], 0.7), named], 3, Mode::Hybrid, 20.0);
        assert_eq!(ids(&m), ["a-0", "a-1", "b-0"]);
        // Keyword confidence (BM25) is not comparable: turns only, the surer first.
        let m = merge(vec![searched("a", &[5.0, 4.0], 0.2), searched("b", &[9.0, 1.0], 9.0)], 4, Mode::Keyword, 20.0);
        assert_eq!(ids(&m), ["b-0", "a-0", "b-1", "a-1"]);
    }
}
