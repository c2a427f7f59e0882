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
