#![allow(clippy::print_stdout)] // a report printer
//! Retrieval quality on a golden set: MRR@10, Recall@5 and nDCG@10 per mode.
//!
//! `cargo run --release -p atlas-e2e --example eval -- <bundle> <golden.json>`
//! (`cargo xtask eval` builds the devtron bundle and runs this.)
//!
//! Hits are judged by page: a hit's file is its page, the first hit of a page counts.

use std::collections::HashMap;
use std::path::PathBuf;

use atlas_runtime::search::Fusion;
use atlas_runtime::{Bundle, Mode, OpenOptions, SearchOptions};

#[derive(serde::Deserialize)]
struct Golden {
    queries: Vec<Query>,
}

#[derive(serde::Deserialize)]
struct Query {
    q: String,
    relevant: HashMap<String, u32>,
}

fn main() -> anyhow_free::Result {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bundle, golden] = &args[..] else {
        eprintln!("usage: eval <bundle dir> <golden.json>");
        std::process::exit(2);
    };
    let golden: Golden = serde_json::from_slice(&std::fs::read(golden)?)?;
    let b = Bundle::open(&PathBuf::from(bundle), OpenOptions::default())?;
    let vector = |weight: f32, first_only: bool| SearchOptions {
        mode: Mode::Vector,
        later_window_weight: weight,
        first_window_only: first_only,
        ..SearchOptions::default()
    };
    let hybrid = |fusion: Fusion| SearchOptions { mode: Mode::Hybrid, fusion, ..SearchOptions::default() };
    let configs: Vec<(&str, SearchOptions)> = vec![
        ("keyword", SearchOptions { mode: Mode::Keyword, ..SearchOptions::default() }),
        ("vector (windows, tails x0.9)", vector(0.9, false)),
        ("vector (windows, tails x1.0)", vector(1.0, false)),
        ("vector (first window only)", vector(1.0, true)),
        ("hybrid, RRF", hybrid(Fusion::Rrf)),
        ("hybrid, score fusion", hybrid(Fusion::Score)),
    ];
    let mut report = String::new();
    report.push_str(&format!(
        "{} queries, bundle {} ({} chunks)\n",
        golden.queries.len(),
        b.manifest.name,
        b.chunk_count()
    ));
    report.push_str(&format!("{:<28} {:>7} {:>9} {:>8}\n", "mode", "MRR@10", "Recall@5", "nDCG@10"));
    for (name, opts) in configs {
        let (mut mrr, mut recall, mut ndcg) = (0.0, 0.0, 0.0);
        for q in &golden.queries {
            let hits = b.search(&q.q, &SearchOptions { top_k: 40, ..opts.clone() })?;
            let mut pages: Vec<String> = Vec::new();
            for h in hits {
                // `<source>/<path in site>` → path in site
                let page = h.path.split_once('/').map_or(h.path.clone(), |(_, p)| p.to_owned());
                if !pages.contains(&page) {
                    pages.push(page);
                }
            }
            let grade = |p: &str| q.relevant.get(p).copied().unwrap_or(0);
            if let Some(r) = pages.iter().take(10).position(|p| grade(p) > 0) {
                mrr += 1.0 / (r as f64 + 1.0);
            }
            let found = pages.iter().take(5).filter(|p| grade(p) > 0).count();
            recall += found as f64 / q.relevant.len() as f64;
            let dcg: f64 = pages
                .iter()
                .take(10)
                .enumerate()
                .map(|(i, p)| (2f64.powi(grade(p) as i32) - 1.0) / (i as f64 + 2.0).log2())
                .sum();
            let mut ideal: Vec<u32> = q.relevant.values().copied().collect();
            ideal.sort_unstable_by(|a, b| b.cmp(a));
            let idcg: f64 = ideal
                .iter()
                .take(10)
                .enumerate()
                .map(|(i, g)| (2f64.powi(*g as i32) - 1.0) / (i as f64 + 2.0).log2())
                .sum();
            ndcg += dcg / idcg;
        }
        let n = golden.queries.len() as f64;
        report.push_str(&format!("{name:<28} {:>7.3} {:>9.3} {:>8.3}\n", mrr / n, recall / n, ndcg / n));
    }
    print!("{report}");
    Ok(())
}

/// Examples may not pull anyhow into the runtime's dependencies: a boxed error will do.
mod anyhow_free {
    pub type Result = std::result::Result<(), Box<dyn std::error::Error>>;
}
