//! Crawl and pipeline figures on the real GitBook sites served from 127.0.0.1:
//! `cargo xtask bench` (release build). Needs ATLAS_CORPORA.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use atlas_e2e::http::serve_site;

fn run(bin: &Path, cfg: &Path, until: &str) -> f64 {
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("-c")
        .arg(cfg)
        .args(["run", "--until", until])
        .env("ATLAS_NO_PROGRESS", "1")
        .output()
        .expect("running atlas-pipeline");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    t.elapsed().as_secs_f64()
}

fn main() {
    let corpora = PathBuf::from(std::env::var_os("ATLAS_CORPORA").expect("set ATLAS_CORPORA to ../shared/corpora"));
    let bin = std::env::args().nth(1).map_or_else(|| PathBuf::from("target/release/atlas-pipeline"), PathBuf::from);
    let bin = std::fs::canonicalize(&bin).expect("build atlas-pipeline first (cargo xtask bench does)");
    eprintln!(
        "{:<20} {:>6} {:>12} {:>10} {:>10} {:>11}",
        "site", "pages", "crawl p/s", "cold s", "warm s", "cold/warm"
    );
    for (site, base, prefix) in [
        ("devtron-docs/site", "https://docs.devtron.ai", ""),
        ("aep-sdks-docs/site", "https://aep-sdks.gitbook.io/docs", "/docs"),
    ] {
        let server = serve_site(&corpora, site, base, prefix);
        let params = "stages:\n  crawl:\n    delay_ms: [0, 0]\n    max_concurrent: 5\n";
        let cfg_text = format!(
            "name: bench\nsources:\n  site:\n    kind: llms-txt\n    url: {}\n{params}",
            server.url(&format!("{prefix}/llms.txt"))
        );
        // Crawl alone, cold: pages per second.
        let a = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("pipeline.yaml"), &cfg_text).unwrap();
        let crawl_s = run(&bin, &a.path().join("pipeline.yaml"), "crawl");
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(a.path().join(".atlas/cache/sources/site/crawl_meta.json")).unwrap())
                .unwrap();
        let pages = meta["pages"].as_object().map_or(0, |p| p.len());
        // The full run up to chunk, cold then warm.
        let b = tempfile::tempdir().unwrap();
        std::fs::write(b.path().join("pipeline.yaml"), &cfg_text).unwrap();
        let cold = run(&bin, &b.path().join("pipeline.yaml"), "chunk");
        let warm = run(&bin, &b.path().join("pipeline.yaml"), "chunk");
        #[allow(clippy::print_stdout)]
        {
            println!(
                "{:<20} {:>6} {:>12.0} {:>10.2} {:>10.2} {:>10.1}x",
                site.split('/').next().unwrap_or(site),
                pages,
                pages as f64 / crawl_s,
                cold,
                warm,
                cold / warm
            );
        }
    }
}
