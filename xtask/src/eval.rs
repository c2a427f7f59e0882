//! `cargo xtask eval`: retrieval quality on the development sets in `xtask/eval/`
//! (docs/eval.md has the format), each over a bundle of its corpus built as a new user
//! would (one `kind: local` source, the default config), through `atlas eval`. Each
//! set's report goes to `target/eval/<set>.json`, and the previous run's report, when
//! there is one, is printed beside it.

use std::process::Command;

use crate::{Profile, corpora, project_root, status};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these sets (file stems in xtask/eval/; default: all).
    sets: Vec<String>,
    /// Per query that misses rank 1: what ranked first, where the expected files landed.
    #[arg(long)]
    explain: bool,
}

/// `(set, bundle name, corpus folder under ATLAS_CORPORA)`.
const SETS: &[(&str, &str, &str)] = &[
    ("docs-aep", "aep", "aep-sdks-docs/site"),
    ("docs-devtron", "devtron", "devtron-docs/site"),
    ("code-concrete-ml", "concrete-ml", "concrete-ml/repo"),
    ("code-tfhe", "tfhe-rs", "tfhe-rs/repo"),
];

pub fn run(args: &Args) -> anyhow::Result<()> {
    let corpora = corpora()?;
    let release = Profile::Release;
    release.build()?;
    crate::setup::run(release)?;
    for &(set, name, corpus) in SETS {
        if !args.sets.is_empty() && !args.sets.iter().any(|s| s == set) {
            continue;
        }
        let work = project_root().join("target/eval").join(name);
        let bundle = crate::bench::local_bundle(&work, name, &name.replace('-', "_"), &corpora.join(corpus))?;
        let out = project_root().join(format!("target/eval/{set}.json"));
        let prev = out.with_extension("prev.json");
        if out.is_file() {
            std::fs::rename(&out, &prev)?;
        }
        let mut ev = Command::new(release.bin("atlas"));
        ev.arg("eval").arg("--golden").arg(project_root().join(format!("xtask/eval/{set}.jsonl")));
        ev.arg("--bundle").arg(&bundle).arg("--json").arg(&out);
        if prev.is_file() {
            ev.arg("--compare").arg(&prev);
        }
        if args.explain {
            ev.arg("--explain");
        }
        status(ev)?;
    }
    Ok(())
}
