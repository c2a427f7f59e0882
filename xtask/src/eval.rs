//! `cargo xtask eval`: retrieval quality on the development sets in `xtask/eval/`
//! (docs/eval.md has the format), each over a bundle of its corpus built as a new user
//! would (one `kind: local` source, the default config), through `atlas eval`. Each
//! set's report goes to `target/eval/<set>.json`, and the previous run's report, when
//! there is one, is printed beside it. Every figure is given for the whole set and for
//! its tune and test halves (`half=…` in the per-tag table).
//!
//! `--symbols` adds a symbol-lookup set per code corpus, drawn from the bundle's own
//! definitions; `--multi` asks every set's questions of one server holding all the
//! corpora, unpinned and pinned to the right library; `--v1` runs the round-2 sets.
//! `--small` builds a small library from each corpus ([`small`]) and asks it the set's
//! questions it still answers and every negative: refusal on a corpus the size of a
//! small package, which no fit has seen.

use std::process::Command;

use crate::{Profile, corpora, project_root, status};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these sets (file stems in xtask/eval/; default: all).
    sets: Vec<String>,
    /// Per query that misses rank 1: what ranked first, where the expected files landed.
    #[arg(long)]
    explain: bool,
    /// Also a symbol-lookup set of this many names per code corpus (0: none).
    #[arg(long, default_value_t = 0)]
    symbols: usize,
    /// Also the multi-library run: every set against one server holding all corpora.
    #[arg(long)]
    multi: bool,
    /// The round-2 sets (xtask/eval/v1) instead of the current ones.
    #[arg(long)]
    v1: bool,
    /// Also each set over a small library cut from its corpus (47 files).
    #[arg(long)]
    small: bool,
    /// Compare these ranking knobs (a JSON file, see `atlas eval --tuning`).
    #[arg(long)]
    tuning: Option<std::path::PathBuf>,
}

/// `(set, bundle name, corpus folder under ATLAS_CORPORA)`.
pub const SETS: &[(&str, &str, &str)] = &[
    ("docs-aep", "aep", "aep-sdks-docs/site"),
    ("docs-devtron", "devtron", "devtron-docs/site"),
    ("code-concrete-ml", "concrete-ml", "concrete-ml/repo"),
    ("code-tfhe", "tfhe-rs", "tfhe-rs/repo"),
];

/// The libraries the multi-library server holds, and the cross-library set's pair.
const MULTI: &[&str] = &["aep", "concrete-ml", "tfhe-rs"];
const CROSS: (&str, &[&str]) = ("cross-fhe", &["concrete-ml", "tfhe-rs"]);

pub fn run(args: &Args) -> anyhow::Result<()> {
    let corpora = corpora()?;
    let release = Profile::Release;
    release.build()?;
    crate::setup::run(release)?;
    let wanted = |set: &str| args.sets.is_empty() || args.sets.iter().any(|s| s == set);
    let folder = if args.v1 { "xtask/eval/v1" } else { "xtask/eval" };
    let mut bundles = std::collections::BTreeMap::new();
    for &(set, name, corpus) in SETS {
        let needed = wanted(set) || (args.multi && MULTI.contains(&name));
        if !needed {
            continue;
        }
        let work = project_root().join("target/eval").join(name);
        let bundle = crate::local_bundle(&work, name, &name.replace('-', "_"), &corpora.join(corpus))?;
        bundles.insert(name, bundle.clone());
        if !wanted(set) {
            continue;
        }
        let golden = project_root().join(format!("{folder}/{set}.jsonl"));
        let stem = if args.v1 { format!("v1-{set}") } else { set.to_owned() };
        let mut ev = atlas_eval(&release, &stem, args);
        ev.arg("--golden").arg(&golden).arg("--bundle").arg(&bundle);
        status(ev)?;
        if args.small && !args.v1 {
            let (corpus, golden) = small::cut(&corpora.join(corpus), &golden, &work.with_extension("small"))?;
            let small = crate::local_bundle(&work.with_extension("small"), &format!("small-{name}"), "small", &corpus)?;
            let mut ev = atlas_eval(&release, &format!("small-{set}"), args);
            ev.arg("--golden").arg(&golden).arg("--bundle").arg(&small);
            status(ev)?;
        }
        if args.symbols > 0 && set.starts_with("code-") {
            let mut ev = atlas_eval(&release, &format!("symbols-{name}"), args);
            ev.arg("--symbol-set").arg(args.symbols.to_string()).args(["--kind", "code"]).arg("--bundle").arg(&bundle);
            status(ev)?;
        }
    }
    if args.multi && !args.v1 {
        let all: Vec<_> = MULTI.iter().filter_map(|n| bundles.get(n)).collect();
        for &(set, name, _) in SETS.iter().filter(|(_, n, _)| MULTI.contains(n)) {
            for pinned in [false, true] {
                let stem = format!("multi-{set}-{}", if pinned { "pinned" } else { "unpinned" });
                let mut ev = atlas_eval(&release, &stem, args);
                ev.arg("--golden").arg(project_root().join(format!("xtask/eval/{set}.jsonl")));
                for b in &all {
                    ev.arg("--bundle").arg(b);
                }
                if pinned {
                    ev.args(["--library", name]);
                }
                status(ev)?;
            }
        }
        let (set, pair) = CROSS;
        let mut ev = atlas_eval(&release, &format!("multi-{set}"), args);
        ev.arg("--golden").arg(project_root().join(format!("xtask/eval/{set}.jsonl")));
        for b in pair.iter().filter_map(|n| bundles.get(n)) {
            ev.arg("--bundle").arg(b);
        }
        status(ev)?;
    }
    Ok(())
}

/// `atlas eval` writing `target/eval/<stem>.json`, compared with the previous run's.
fn atlas_eval(release: &Profile, stem: &str, args: &Args) -> Command {
    let name = if args.tuning.is_some() { format!("{stem}.tuning.json") } else { format!("{stem}.json") };
    let out = project_root().join("target/eval").join(name);
    let prev = out.with_extension("prev.json");
    if out.is_file() && args.tuning.is_none() {
        let _ = std::fs::rename(&out, &prev);
    }
    let mut ev = Command::new(release.bin("atlas"));
    ev.arg("eval").arg("--json").arg(&out);
    if let Some(t) = &args.tuning {
        ev.arg("--tuning").arg(t);
    } else if prev.is_file() {
        ev.arg("--compare").arg(&prev);
    }
    if args.explain {
        ev.arg("--explain");
    }
    ev
}

/// Small libraries cut from a development corpus, for refusal where the held-out
/// sets found it weakest: a small package's docs and source (47 files), where an
/// everyday word or a name's two words are missing more often than in a large corpus.
mod small {
    use std::path::{Component, Path, PathBuf};

    use sha2::{Digest, Sha256};

    /// The files a small library holds: the held-out fifth corpus's size.
    const FILES: usize = 47;
    /// Files left for ones no question names.
    const OTHERS: usize = 7;
    /// Fixes the cut: questions and files are taken in the order of their hash.
    const SEED: &str = "small-1";

    fn order(key: &str) -> [u8; 32] {
        Sha256::digest(format!("{SEED}\0{key}")).into()
    }

    /// Cuts the corpus at `corpus` into `work/corpus`: questions of `golden` in hash
    /// order, each kept while every file it expects fits in the first `FILES −
    /// OTHERS`, then other docs and source files in hash order up to `FILES`. Writes
    /// `work/set.jsonl` (the kept questions and every negative, their halves as in
    /// the full set) and returns the two paths.
    pub fn cut(corpus: &Path, golden: &Path, work: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
        let text = std::fs::read_to_string(golden)?;
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?;
        let expected = |q: &serde_json::Value| -> Vec<String> {
            q["expected"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["path"].as_str().map(str::to_owned))
                .collect()
        };
        let mut answerable: Vec<&serde_json::Value> = lines.iter().filter(|q| !expected(q).is_empty()).collect();
        answerable.sort_by_key(|q| order(q["query"].as_str().unwrap_or_default()));
        let mut files = std::collections::BTreeSet::new();
        let mut kept = Vec::new();
        for q in answerable {
            let need = expected(q);
            // A file the corpus does not hold cannot be copied, and a path that would
            // leave the corpus is no path of it: not cut.
            let inside = |p: &String| Path::new(p).components().all(|c| matches!(c, Component::Normal(_)));
            if !need.iter().all(|p| inside(p) && corpus.join(p).is_file()) {
                continue;
            }
            let more = need.iter().filter(|p| !files.contains(*p)).count();
            if files.len() + more <= FILES - OTHERS {
                files.extend(need);
                kept.push(q);
            }
        }
        let mut others = crate::files_under(corpus)?;
        others.retain(|p| !files.contains(p) && [".md", ".py", ".rs"].iter().any(|e| p.ends_with(e)));
        others.sort_by_key(|p| order(p));
        let room = FILES.saturating_sub(files.len());
        files.extend(others.into_iter().take(room));
        let out = work.join("corpus");
        if out.exists() {
            std::fs::remove_dir_all(&out)?;
        }
        for f in &files {
            let to = out.join(f);
            std::fs::create_dir_all(to.parent().unwrap_or(&out))?;
            std::fs::copy(corpus.join(f), &to)?;
        }
        let set = work.join("set.jsonl");
        let negatives = lines.iter().filter(|q| expected(q).is_empty());
        let body: Vec<String> = kept.into_iter().chain(negatives).map(|q| q.to_string()).collect();
        std::fs::write(&set, body.join("\n") + "\n")?;
        Ok((out, set))
    }
}
