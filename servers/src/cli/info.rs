//! `atlas info`: what a bundle holds.

use super::locate::{locate, open};
use atlas_dist::config::Config;
use atlas_runtime::bundle::BundleInfo;
use atlas_runtime::{Mode, OpenOptions};
use std::collections::BTreeMap;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// An installed bundle's name or a bundle folder.
    #[arg(env = "ATLAS_BUNDLE")]
    bundle: Option<String>,
    /// Print stable JSON (what the rag server's get_bundle_info returns).
    #[arg(long)]
    json: bool,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let (dir, _) = locate(self.bundle, cfg)?;
        let mut info = open(&dir, OpenOptions { keyword_only: true, ..OpenOptions::default() })?.info();
        // Opened keyword-only to be quick: the modes are what the bundle offers.
        if info.embedding_rows > 0 {
            info.modes = [Mode::Keyword, Mode::Vector, Mode::Hybrid].map(|m| m.as_str().to_owned()).to_vec();
        }
        let text = if self.json { format!("{}\n", serde_json::to_string_pretty(&info)?) } else { render(&info) };
        super::print(&text)
    }
}

/// A bundle's summary for people.
fn render(i: &BundleInfo) -> String {
    let mut s = format!(
        "{} {} (built {})\n  {}, {} from {} ({}-d, {} index)\n",
        i.name,
        i.version,
        i.created,
        atlas_runtime::words::count(i.chunks, "chunk"),
        atlas_runtime::words::count(i.embedding_rows, "vector"),
        i.model,
        i.dims,
        i.vector_index
    );
    let counts = |m: &BTreeMap<String, usize>| m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ");
    s.push_str(&format!("  by kind: {}\n  by section: {}\n", counts(&i.by_kind), counts(&i.by_section)));
    if !i.by_origin.is_empty() {
        s.push_str(&format!("  not the package's own code (ranked below it): {}\n", counts(&i.by_origin)));
    }
    for src in &i.sources {
        s.push_str(&format!(
            "  source {} ({}): {}",
            src.name,
            src.kind,
            atlas_runtime::words::count(src.files, "file")
        ));
        if let Some(u) = &src.url {
            s.push_str(&format!(" from {u}"));
        }
        s.push('\n');
        for g in &src.left_out {
            let named = g.reason == "too large" || g.files <= 5;
            let paths: Vec<String> = g.paths.iter().map(|p| atlas_runtime::utf8::printable(p)).collect();
            match named {
                true => s.push_str(&format!("    left out: {}: {}\n", g.summary(), paths.join(", "))),
                false => s.push_str(&format!("    left out: {}\n", g.summary())),
            }
        }
    }
    s
}
