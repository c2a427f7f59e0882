//! Golden sets: the format (docs/eval.md), reading it within its caps, the tune and
//! test halves, and the symbol-lookup set drawn from a bundle's own definitions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{MAX_EXPECTED, MAX_GOLDEN_BYTES, MAX_QUERIES};
use crate::search::MAX_QUERY_BYTES;
use crate::{Error, Result};

/// One line of a golden file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldenQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub query: String,
    /// Empty: a negative (the corpus does not answer it).
    #[serde(default)]
    pub expected: Vec<Expected>,
    /// Free tags (`kind`, `target`, …); metrics are also given per `key=value`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

impl GoldenQuery {
    pub fn is_negative(&self) -> bool {
        self.expected.is_empty()
    }
}

/// An expected file: a bare path, or an object with a grade, symbols or lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "ExpectedRepr")]
pub struct Expected {
    /// The file, as the bundle names it (`<source>/<path>`) or any tail of that path
    /// at a `/` (`docs/guide.md` matches `site/docs/guide.md`).
    pub path: String,
    /// 1 (helps) to 3 (the answer); nDCG gains are 2^grade − 1.
    pub grade: u32,
    /// Any of these symbols (a qualified name or its last segment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<String>,
    /// A line range the hit must overlap, inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<[u32; 2]>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ExpectedRepr {
    Path(String),
    Full {
        path: String,
        #[serde(default = "one")]
        grade: u32,
        #[serde(default)]
        symbols: Vec<String>,
        #[serde(default)]
        lines: Option<[u32; 2]>,
    },
}

fn one() -> u32 {
    1
}

impl From<ExpectedRepr> for Expected {
    fn from(r: ExpectedRepr) -> Expected {
        match r {
            ExpectedRepr::Path(path) => Expected { path, grade: 1, symbols: Vec::new(), lines: None },
            ExpectedRepr::Full { path, grade, symbols, lines } => Expected { path, grade, symbols, lines },
        }
    }
}

impl Expected {
    /// Whether `path` (a hit's, `<source>/<path>`) is this expected file.
    pub fn file_matches(&self, path: &str) -> bool {
        let want = self.path.trim_start_matches('/');
        path == want || path.strip_suffix(want).is_some_and(|head| head.ends_with('/'))
    }
}

/// Parses a golden file (JSON Lines; blank lines and lines starting with `#` are
/// skipped). Errors name the line.
pub fn parse_golden(text: &str) -> Result<Vec<GoldenQuery>> {
    if text.len() > MAX_GOLDEN_BYTES {
        return Err(golden_err(0, format!("the file is over {} MiB; split it", MAX_GOLDEN_BYTES >> 20)));
    }
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = n + 1;
        if out.len() == MAX_QUERIES {
            return Err(golden_err(n, format!("more than {MAX_QUERIES} queries; split the file")));
        }
        let q: GoldenQuery = serde_json::from_str(line).map_err(|e| golden_err(n, format!("{e}")))?;
        let query = q.query.trim();
        if query.is_empty() || query.len() > MAX_QUERY_BYTES {
            return Err(golden_err(n, format!("\"query\" must hold 1 to {MAX_QUERY_BYTES} bytes")));
        }
        if q.expected.len() > MAX_EXPECTED {
            return Err(golden_err(n, format!("more than {MAX_EXPECTED} expected files")));
        }
        for e in &q.expected {
            if e.path.trim().is_empty() {
                return Err(golden_err(n, "an expected path is empty".into()));
            }
            if !(1..=3).contains(&e.grade) {
                return Err(golden_err(n, format!("grade {} of {:?} must be 1, 2 or 3", e.grade, e.path)));
            }
            if let Some([a, b]) = e.lines
                && (a == 0 || a > b)
            {
                return Err(golden_err(n, format!("lines [{a}, {b}] of {:?} must be 1-based and ordered", e.path)));
            }
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err(golden_err(0, "no queries; write one JSON object per line".into()));
    }
    Ok(out)
}

fn golden_err(line: usize, msg: String) -> Error {
    Error::Golden(if line == 0 { msg } else { format!("line {line}: {msg}") })
}

/// The half of a development set a query belongs to: `tune` (changes are fitted on
/// it) or `test` (they are judged on it). Fixed by a seeded hash of the query text, so
/// a query keeps its half as a set grows and every tool splits the same way.
pub fn half(query: &str) -> &'static str {
    let h = crate::hash::Blake3::new().update(format!("atlas-eval-split/1\0{}", query.trim()).as_bytes()).bytes();
    if h[0] & 1 == 0 { "tune" } else { "test" }
}

/// The tags a query is judged under: its own, plus `half` ([`half`]) and `shape`
/// ([`crate::search::shape`]) unless the golden line sets them.
pub fn tags_of(q: &GoldenQuery) -> BTreeMap<String, String> {
    let mut t = q.tags.clone();
    t.entry("half".into()).or_insert_with(|| half(&q.query).to_owned());
    t.entry("shape".into()).or_insert_with(|| crate::search::shape(&q.query).as_str().to_owned());
    t
}

/// A symbol-lookup set drawn from a bundle's own definitions: `n` names that one
/// definition holds (4 characters or more), sampled with a fixed seed, each asked the
/// way a user pastes it, in turn: bare (`numpy_erf`), as a call (`numpy_erf()`),
/// qualified as the code qualifies it (`ServerKey::new`, `Foo.bar`), and qualified the
/// other way or by module (`ServerKey.new`, `compile.compile_torch_model`). A query
/// counts when a hit of its defining file holds the definition's first line.
pub fn symbol_set(table: &crate::symbols::SymbolTable, n: usize, seed: u64) -> Vec<GoldenQuery> {
    use crate::symbols::segments;
    let mut once: Vec<&crate::symbols::Definition> =
        table.defs.iter().filter(|d| d.kind != "impl" && d.short().len() >= 4 && table.count(d.short()) == 1).collect();
    once.sort_by(|a, b| (&a.name, &a.path).cmp(&(&b.name, &b.path)));
    // A seeded Fisher–Yates (xorshift64*), so the set is the same on every machine.
    let mut x = seed.max(1);
    let mut next = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for i in (1..once.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        once.swap(i, j);
    }
    once.into_iter()
        .take(n)
        .enumerate()
        .map(|(i, d)| {
            let segs = segments(&d.name);
            let callable = matches!(d.kind.as_str(), "function" | "method");
            let (form, query) = match i % 4 {
                0 => ("bare", d.short().to_owned()),
                1 if callable => ("call", format!("{}()", d.short())),
                2 if segs.len() > 1 => ("qualified", d.name.trim_end_matches('!').to_owned()),
                3 if segs.len() > 1 => {
                    let other = if d.name.contains("::") { segs.join(".") } else { segs.join("::") };
                    ("qualified-other", other)
                }
                _ => {
                    // Qualified by the file's module: `compile.compile_torch_model`.
                    let stem = d.path.rsplit('/').next().and_then(|f| f.rsplit_once('.')).map_or("", |(s, _)| s);
                    let sep = if d.language == "rust" { "::" } else { "." };
                    if stem.is_empty() || matches!(stem, "mod" | "__init__" | "lib" | "main" | "index") {
                        ("bare", d.short().to_owned())
                    } else {
                        ("module", format!("{stem}{sep}{}", d.short()))
                    }
                }
            };
            GoldenQuery {
                id: None,
                query,
                expected: vec![Expected {
                    path: d.path.clone(),
                    grade: 3,
                    symbols: Vec::new(),
                    lines: Some([d.start_line, d.start_line]),
                }],
                tags: BTreeMap::from([("form".to_owned(), form.to_owned()), ("kind".to_owned(), d.kind.clone())]),
            }
        })
        .collect()
}
