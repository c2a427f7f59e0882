//! The module graph of a crate, read from its source: which top-level module names
//! which (`crate::<module>` paths outside comments), and the circles in it. The
//! layering test over every crate (`tests/it/layout.rs`) is built on it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `src`.
pub fn rust_files(src: &Path) -> Vec<PathBuf> {
    files_with_ext(src, "rs")
}

/// Every file named `*.<ext>` below `root`, sorted.
pub fn files_with_ext(root: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_owned()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).expect("reading a source folder") {
            let path = e.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|x| x == ext) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `top-level module` → the top-level modules its files name, each with one example.
pub fn module_uses(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for path in rust_files(src) {
        let rel = path.strip_prefix(src).expect("below src").to_string_lossy().replace('\\', "/");
        let top = rel.split('/').next().unwrap_or_default().trim_end_matches(".rs").to_owned();
        let text = std::fs::read_to_string(&path).expect("reading a source file");
        let entry = out.entry(top.clone()).or_default();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for (i, _) in code.match_indices("crate::") {
                if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                    continue; // `atlas_dist::crate::`-like tails, `my_crate::`
                }
                let rest = &code[i + "crate::".len()..];
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !name.is_empty() && name != top && name != "main" && name != "lib" {
                    let path: String =
                        rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
                    entry.entry(name).or_insert(format!("{rel}: crate::{path}"));
                }
            }
        }
    }
    out
}

/// The first circle in the module graph of `src`, as `a → b → a` with an example
/// path for each edge; None when dependencies go one way.
pub fn first_circle(src: &Path) -> Option<String> {
    let uses = module_uses(src);
    let graph: BTreeMap<&str, Vec<&str>> =
        uses.iter().map(|(m, used)| (m.as_str(), used.keys().map(String::as_str).collect())).collect();
    fn visit<'a>(
        m: &'a str,
        graph: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(at) = path.iter().position(|p| *p == m) {
            let mut c = path[at..].to_vec();
            c.push(m);
            return Some(c);
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        if let Some(c) = visit(m, &graph, &mut Vec::new(), &mut done) {
            let edges: Vec<String> = c.windows(2).map(|w| uses[w[0]][w[1]].clone()).collect();
            return Some(format!("{} ({})", c.join(" → "), edges.join("; ")));
        }
    }
    None
}
