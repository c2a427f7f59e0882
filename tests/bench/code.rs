//! Code-chunking figures on the real repositories (needs ATLAS_CORPORA):
//! files/s and lines/s on tfhe-rs `tfhe/src/high_level_api`, and the chunk-size
//! distribution of both repositories. Run by `cargo xtask bench` (release).
//!
//! Tokens are counted lexically (identifier and number runs, and each punctuation
//! character), the unit a code-aware BM25 sees; a WordPiece model splits identifiers
//! further, so its counts run higher.

use std::path::{Path, PathBuf};
use std::time::Instant;

use atlas_stages::chunk::ChunkParams;
use atlas_stages::chunk::code::chunk_code;
use atlas_stages::text::language_of;

fn files(root: &Path, ext: &str) -> Vec<PathBuf> {
    atlas_e2e::layout::files_with_ext(root, ext)
}

fn tokens(s: &str) -> usize {
    let mut n = 0;
    let mut in_word = false;
    for c in s.chars() {
        if c.is_alphanumeric() || c == '_' {
            if !in_word {
                n += 1;
            }
            in_word = true;
        } else {
            in_word = false;
            if !c.is_whitespace() {
                n += 1;
            }
        }
    }
    n
}

fn pct(sorted: &[usize], p: f64) -> usize {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[allow(clippy::print_stdout)]
fn main() {
    let root = PathBuf::from(std::env::var_os("ATLAS_CORPORA").expect("set ATLAS_CORPORA to ../shared/corpora"));
    let params = ChunkParams::default();
    let hl = files(&root.join("tfhe-rs/repo/tfhe/src/high_level_api"), "rs");
    let sources: Vec<(String, String)> =
        hl.iter().map(|p| (p.display().to_string(), std::fs::read_to_string(p).expect("utf-8"))).collect();
    let lines: usize = sources.iter().map(|(_, s)| s.lines().count()).sum();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for (path, src) in &sources {
            std::hint::black_box(chunk_code(src, "rust", path, &params));
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "tfhe-rs high_level_api: {} files, {lines} lines in {:.3} s (best of 5): {:.0} files/s, {:.0} lines/s",
        sources.len(),
        best,
        sources.len() as f64 / best,
        lines as f64 / best
    );
    for (name, dir, ext) in [("concrete-ml", "concrete-ml/repo", "py"), ("tfhe-rs", "tfhe-rs/repo", "rs")] {
        let mut sizes = Vec::new();
        let mut dropped = 0;
        for p in files(&root.join(dir), ext) {
            let src = std::fs::read_to_string(&p).expect("utf-8");
            let path = p.display().to_string();
            let out = chunk_code(&src, language_of(&path).expect("known"), &path, &params).expect("grammar");
            dropped += out.dropped_lines("license");
            sizes.extend(out.chunks.iter().map(|c| tokens(&c.text)));
        }
        sizes.sort_unstable();
        println!(
            "{name}: {} chunks, tokens p50 {} p95 {} max {}; {dropped} licence lines dropped",
            sizes.len(),
            pct(&sizes, 0.5),
            pct(&sizes, 0.95),
            sizes.last().copied().unwrap_or(0)
        );
    }
}
