//! Checks over the real corpora named by ATLAS_CORPORA; skipped, with a printed reason,
//! when it is unset.

use std::path::{Path, PathBuf};

use atlas_stages::artifacts::DocEntry;
use atlas_stages::chunk::ChunkParams;
use atlas_stages::chunk::chunk_document;
use atlas_stages::clean::{CleanParams, clean};
use atlas_stages::crawl::local::scan_local;

use crate::clean::lost_words;

pub fn corpora() -> Option<PathBuf> {
    match std::env::var_os("ATLAS_CORPORA") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            atlas_e2e::skip("ATLAS_CORPORA is unset (set it to ../shared/corpora to run the real-corpus tests)");
            None
        }
    }
}

fn pages(root: &Path) -> Vec<(String, String)> {
    let scan = scan_local(root, &["**/*.md".into()], &[], 16 << 20).unwrap();
    scan.files.into_iter().map(|f| (f.rel, String::from_utf8(f.bytes).unwrap())).collect()
}

/// The export boilerplate GitBook adds to published `.md` pages (the raw corpora lack it).
fn with_export_boilerplate(page: &str) -> String {
    format!(
        "> For the complete documentation index, see [llms.txt](https://docs.example.com/llms.txt).\n\n{page}\n\n## Agent Instructions\n\nAnswer from this page; cite it.\n"
    )
}

#[test]
fn slow_both_gitbook_sites_clean_to_zero_residual_tags_and_lose_no_words() {
    let Some(root) = corpora() else { return };
    for site in ["devtron-docs/site", "aep-sdks-docs/site"] {
        let mut residual = 0;
        let mut converted = 0u64;
        let mut n = 0;
        for (rel, text) in pages(&root.join(site)) {
            let input = with_export_boilerplate(&text);
            let c = clean(&input, &CleanParams::default());
            let lost = lost_words(&input, &c);
            assert!(lost.is_empty(), "{site}/{rel}: words lost by the cleaner: {lost:?}");
            assert!(!c.text.contains("Agent Instructions"), "{site}/{rel}: boilerplate left");
            assert!(!c.text.contains("llms.txt"), "{site}/{rel}: preamble left");
            let gitbook: Vec<_> = c.residual.iter().filter(|r| r.kind == "gitbook").collect();
            assert!(gitbook.is_empty(), "{site}/{rel}: GitBook tags left: {gitbook:?}");
            residual += c.residual.len();
            converted += c.counts.values().map(|v| u64::from(*v)).sum::<u64>();
            n += 1;
        }
        eprintln!("{site}: {n} pages, {converted} conversions, {residual} residuals");
        assert_eq!(residual, 0, "{site}: residual HTML left");
    }
}

#[test]
fn rule_tokens_survive_in_aep_pages() {
    let Some(root) = corpora() else { return };
    let all: String = pages(&root.join("aep-sdks-docs/site")).into_iter().map(|(_, t)| t).collect();
    let cleaned: String = pages(&root.join("aep-sdks-docs/site"))
        .into_iter()
        .map(|(_, t)| clean(&t, &CleanParams::default()).text)
        .collect();
    for token in ["{%~", "{%%", "{%urlenc("] {
        let before = all.matches(token).count();
        assert!(before > 0, "{token} occurs in the corpus");
        assert_eq!(cleaned.matches(token).count(), before, "{token} kept everywhere");
    }
}

#[test]
fn slow_real_pages_chunk_with_exact_line_ranges() {
    let Some(root) = corpora() else { return };
    for site in ["devtron-docs/site", "aep-sdks-docs/site", "concrete-ml/repo/docs", "tfhe-rs/repo/tfhe/docs"] {
        let mut chunks = 0;
        for (rel, text) in pages(&root.join(site)) {
            let c = clean(&text, &CleanParams::default());
            let d = DocEntry::new("s", &rel, atlas_cache::Digest::of(text.as_bytes()));
            let lines: Vec<&str> = c.text.lines().collect();
            for ch in chunk_document(&d, &c, &ChunkParams::default()) {
                let body = &ch.text[ch.overlap_chars as usize..];
                let cited = lines[ch.start_line as usize - 1..ch.end_line as usize].join("\n");
                assert_eq!(body, cited.trim_end(), "{site}/{rel} chunk {}", ch.ordinal);
                assert!(body.len() <= 8000 || !body.contains("\n\n"), "{site}/{rel}: oversize chunk");
                for h in &ch.heading_path {
                    assert!(!h.contains("<a id") && !h.contains("\\("), "{site}/{rel}: raw heading {h:?}");
                }
                chunks += 1;
            }
        }
        eprintln!("{site}: {chunks} chunks");
    }
}

#[test]
fn fence_hash_lines_in_real_pages_never_start_chunks() {
    let Some(root) = corpora() else { return };
    // devtron's pages have `# comment` lines in bash and yaml fences.
    let mut fence_hash_lines = 0;
    for (rel, text) in pages(&root.join("devtron-docs/site")) {
        let c = clean(&text, &CleanParams::default());
        let mut in_fence = vec![false; c.text.lines().count() + 2];
        let mut open: Option<String> = None;
        for (i, l) in c.text.lines().enumerate() {
            let t = l.trim_start_matches([' ', '>']);
            let marker: String = t.chars().take_while(|&ch| ch == '`' || ch == '~').collect();
            match &open {
                Some(m) => {
                    in_fence[i + 1] = true;
                    if marker.len() >= m.len() && marker.starts_with(&m[..1]) && t[marker.len()..].trim().is_empty() {
                        open = None;
                    }
                }
                None if marker.len() >= 3 => open = Some(marker),
                None => {}
            }
            if in_fence[i + 1] && t.starts_with('#') {
                fence_hash_lines += 1;
            }
        }
        let d = DocEntry::new("s", &rel, atlas_cache::Digest::of(b""));
        for ch in chunk_document(&d, &c, &ChunkParams { overlap_chars: 0, ..ChunkParams::default() }) {
            if ch.text.starts_with('#') {
                assert!(!in_fence[ch.start_line as usize], "{rel}: chunk {} starts inside a fence", ch.ordinal);
            }
        }
    }
    assert!(fence_hash_lines > 50, "the corpus has `#` lines in fences ({fence_hash_lines})");
}

/// One real page, what its cleaned text must and must not hold, and its chunks' shape.
struct RealCase {
    page: &'static str,
    why: &'static str,
    has: &'static [&'static str],
    lacks: &'static [&'static str],
    title: Option<&'static str>,
    /// Heading paths (joined with " > ") that some chunk must carry.
    paths: &'static [&'static str],
}

const REAL_CASES: &[RealCase] = &[
    RealCase {
        page: "devtron-docs/site/user-guide/global-configurations/container-registries.md",
        why: "a hint opened inside an unclosed hint; later H2s must still split",
        has: &["> **Warning:**", "> **Info:**", "\n## Supported Registry Providers"],
        lacks: &["> ## "],
        title: None,
        paths: &["Supported Registry Providers", "Delete an OCI Registry"],
    },
    RealCase {
        page: "devtron-docs/site/user-guide/global-configurations/external-links.md",
        why: "HTML table whose header row is a non-standard <row>",
        has: &["| Field | Description |", "| **Link name** |"],
        lacks: &["<table", "<td", "<row"],
        title: None,
        paths: &[],
    },
    RealCase {
        page: "devtron-docs/site/user-guide/creating-application/app-metrics.md",
        why: "<details>/<summary> with <strong>",
        has: &["**Facing Prometheus Deployment Timeout due to Failed CRDs**"],
        lacks: &["<details", "<summary"],
        title: None,
        paths: &["Troubleshoot Issues"],
    },
    RealCase {
        page: "devtron-docs/site/user-guide/creating-application/docker-build-configuration.md",
        why: "an H1 indented by one space",
        has: &[],
        lacks: &[],
        title: Some("Build Configuration"),
        paths: &[],
    },
    RealCase {
        page: "devtron-docs/site/user-guide/command-bar.md",
        why: "front matter without a title",
        has: &["# Command bar"],
        lacks: &["hidden: true"],
        title: Some("Command bar"),
        paths: &[],
    },
    RealCase {
        page: "aep-sdks-docs/site/foundation-extensions/mobile-core/lifecycle.md",
        why: "table cells with <code>, <p> and a <br> split over two lines",
        has: &["`a.CarrierName`"],
        lacks: &["<br", "<td"],
        title: None,
        paths: &[],
    },
    RealCase {
        page: "aep-sdks-docs/site/foundation-extensions/mobile-core/lifecycle/lifecycle-api-reference.md",
        why: "headings with <a id> anchors",
        has: &["### lifecycleStart\n"],
        lacks: &["<a id"],
        title: None,
        paths: &[],
    },
    RealCase {
        page: "aep-sdks-docs/site/foundation-extensions/places/places-usage-reference.md",
        why: "untitled tabs",
        has: &["**Tab "],
        lacks: &["{% tab"],
        title: None,
        paths: &[],
    },
    RealCase {
        page: "aep-sdks-docs/site/foundation-extensions/places/migration.md",
        why: "tab titles with escaped parentheses",
        has: &["**AEP 3.x \\(Swift\\)**"],
        lacks: &["{% tab"],
        title: None,
        paths: &[],
    },
    RealCase {
        page: "aep-sdks-docs/site/resources/privacy-and-gdpr.md",
        why: "two H1s: the second restarts the heading path",
        has: &[],
        lacks: &[],
        title: Some("Privacy and GDPR"),
        paths: &["Privacy and GDPR", "Setup steps > Update and get collect consent preferences"],
    },
    RealCase {
        page: "aep-sdks-docs/site/beta/project-griffon/using-project-griffon.md",
        why: "no H1, and a balanced hint that holds an H2",
        has: &["> **Success:**\n>\n> ## Project Griffon will be Assurance!"],
        lacks: &[],
        title: Some("using-project-griffon"),
        paths: &["Log in"],
    },
];

#[test]
fn real_page_cases() {
    let Some(root) = corpora() else { return };
    for case in REAL_CASES {
        let text = std::fs::read_to_string(root.join(case.page)).unwrap_or_else(|e| panic!("{}: {e}", case.page));
        let c = clean(&text, &CleanParams::default());
        for needle in case.has {
            assert!(c.text.contains(needle), "{} ({}): missing {needle:?}", case.page, case.why);
        }
        for needle in case.lacks {
            assert!(!c.text.contains(needle), "{} ({}): still has {needle:?}", case.page, case.why);
        }
        let rel = case.page.split_once("/site/").map_or(case.page, |(_, r)| r);
        let d = DocEntry::new("s", rel, atlas_cache::Digest::of(b""));
        let chunks = chunk_document(&d, &c, &ChunkParams::default());
        if let Some(t) = case.title {
            assert_eq!(chunks[0].title, t, "{} ({})", case.page, case.why);
        }
        for p in case.paths {
            assert!(
                chunks.iter().any(|ch| ch.heading_path.join(" > ").ends_with(p)),
                "{} ({}): no chunk under {p:?}; paths: {:?}",
                case.page,
                case.why,
                chunks.iter().map(|ch| ch.heading_path.join(" > ")).collect::<Vec<_>>()
            );
        }
    }
}
