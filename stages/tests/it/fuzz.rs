//! Property tests over every parser that reads untrusted bytes: llms.txt, GitBook
//! markup and HTML (the cleaner), HTML pages, robots.txt, the markdown and code
//! chunkers. Inputs mix random text with the shapes attacks use (deep nesting,
//! traversal, odd Unicode). Each property runs `ATLAS_FUZZ_CASES` cases (default 64,
//! a few seconds in CI); raise it for a longer local run.

use atlas_runtime::safe_path;
use atlas_stages::chunk::ChunkParams;
use atlas_stages::chunk::code::chunk_code;
use atlas_stages::chunk::markdown::chunk_markdown;
use atlas_stages::clean::{CleanParams, TOO_DEEP, clean};
use atlas_stages::crawl::llms::parse_with;
use atlas_stages::crawl::robots::Robots;
use atlas_stages::text::page::to_markdown;
use proptest::prelude::*;
use url::Url;

fn config() -> ProptestConfig {
    let cases = std::env::var("ATLAS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Pieces that hostile pages are made of.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,12}",
        Just("\n".to_owned()),
        Just("## ".to_owned()),
        Just("# ".to_owned()),
        Just("- [x](".to_owned()),
        Just(")".to_owned()),
        Just("../".to_owned()),
        Just("/".to_owned()),
        Just("%2e%2e/".to_owned()),
        Just("%2F".to_owned()),
        Just("\0".to_owned()),
        Just("!!!".to_owned()),
        Just("🚀".to_owned()),
        Just("\u{202E}".to_owned()),
        Just("<table><tr><td>".to_owned()),
        Just("</td></tr></table>".to_owned()),
        Just("<div>".to_owned()),
        Just("<ul><li>".to_owned()),
        Just("<blockquote>".to_owned()),
        Just("{% hint style=\"info\" %}".to_owned()),
        Just("{% endhint %}".to_owned()),
        Just("{% tabs %}{% tab title=\"a\" %}".to_owned()),
        Just("```".to_owned()),
        Just("> ".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("---\n".to_owned()),
        Just("*".to_owned()),
        Just("$".to_owned()),
        Just("Disallow: ".to_owned()),
        Just("User-agent: *\n".to_owned()),
    ]
}

/// A document of pieces, some repeated many times (nesting). Kept to tens of KB so
/// that the properties run in seconds; `deep_nesting_of_every_kind_is_survived`
/// covers the large depths.
fn document() -> impl Strategy<Value = String> {
    prop::collection::vec((piece(), prop_oneof![9 => Just(1usize), 1 => 1usize..400]), 0..32)
        .prop_map(|parts| parts.into_iter().map(|(p, n)| p.repeat(n)).collect())
}

proptest! {
    #![proptest_config(config())]

    /// Every entry's mirror path is a safe relative path, and every fetched URL is on
    /// the llms.txt host or an allowed one.
    #[test]
    fn llms_txt_never_yields_an_unsafe_mirror_path(doc in document(), at_root in any::<bool>()) {
        let url = Url::parse(if at_root { "https://docs.example.com/llms.txt" } else { "https://docs.example.com/v2/llms.txt" }).unwrap();
        if let Ok(index) = parse_with(&doc, &url, &["mirror.example.com".to_owned()]) {
            for e in &index.entries {
                prop_assert!(safe_path::check(&e.mirror).is_ok(), "{:?}", e.mirror);
                let host = e.url.host_str().unwrap_or_default();
                prop_assert!(host == "docs.example.com" || host == "mirror.example.com", "{}", e.url);
            }
        }
    }

    /// The cleaner terminates on anything, nested any depth, without a panic.
    #[test]
    fn the_gitbook_cleaner_survives_any_page(doc in document()) {
        let c = clean(&doc, &CleanParams::default());
        prop_assert!(c.text.len() <= 4 * doc.len() + 1024);
    }

    /// HTML pages convert without a panic whatever their nesting.
    #[test]
    fn html_pages_convert_without_a_panic(doc in document()) {
        let md = to_markdown(&doc);
        prop_assert!(md.len() <= 4 * doc.len() + 1024);
    }

    /// robots.txt: any body parses; robots.txt itself is always allowed.
    #[test]
    fn robots_txt_parses_anything(body in document(), path in "/\\PC{0,40}") {
        let r = Robots::parse(&body, "atlas");
        let _ = r.allows(&path);
        prop_assert!(r.allows("/robots.txt"));
    }

    /// The markdown and code chunkers survive anything a cleaned page or a repository
    /// file can hold.
    #[test]
    fn chunkers_survive_any_text(doc in document()) {
        let p = ChunkParams::default();
        let _ = chunk_markdown(&doc, &p);
        for (lang, path) in [("python", "a.py"), ("rust", "a.rs"), ("javascript", "a.js"), ("go", "a.go")] {
            let _ = chunk_code(&doc, lang, path, &p);
        }
    }
}

/// Deep nesting of each kind, at sizes a hostile page can reach.
#[test]
fn deep_nesting_of_every_kind_is_survived() {
    let deep = |open: &str, close: &str, n: usize| format!("{}x{}", open.repeat(n), close.repeat(n));
    // Each case, and whether the cleaner parses it as HTML (a table): past the depth
    // limit such a page is flattened to text and `html-too-deep` names it in the run's
    // notes; the other kinds are text to the cleaner already.
    let cases = [
        (deep("<table><tr><td>", "</td></tr></table>", 20_000), true),
        (deep("<div>", "</div>", 50_000), false),
        (deep("<ul><li>", "</li></ul>", 20_000), false),
        (deep("<blockquote>", "</blockquote>", 20_000), false),
        (deep("<b><i>", "</i></b>", 20_000), false),
        (deep("> ", "", 20_000), false),
        (deep("- ", "", 20_000), false),
        (deep("[", "]", 50_000), false),
        (deep("{% hint style=\"info\" %}\n", "{% endhint %}\n", 5_000), false),
        (format!("---\ntitle: {}x{}\n---\nbody\n", "[".repeat(5_000), "]".repeat(5_000)), false),
    ];
    let p = ChunkParams::default();
    for (doc, parsed) in &cases {
        let head: String = doc.chars().take(24).collect();
        let c = clean(doc, &CleanParams::default());
        // The page is kept, as text: its words survive whatever the nesting.
        let word = if doc.starts_with("---") { "body" } else { "x" };
        assert!(c.text.contains(word), "{head:?}…: the cleaned page lost its text");
        assert_eq!(c.counts.contains_key(TOO_DEEP), *parsed, "{head:?}…: the notes: {:?}", c.counts);
        if doc.starts_with('<') {
            assert!(to_markdown(doc).contains('x'), "{head:?}…: the converted page lost its text");
        }
        assert!(!chunk_markdown(&c.text, &p).is_empty(), "{head:?}…: no chunk");
    }
    let code = [
        ("python", "a.py", (0..1_000).map(|i| format!("{}class A{i}:\n", " ".repeat(i))).collect()),
        ("python", "a.py", deep("(", ")", 50_000)),
        ("rust", "a.rs", deep("mod a {\n", "}\n", 3_000)),
        ("rust", "a.rs", deep("fn f() { ", "}", 10_000)),
        ("javascript", "a.js", deep("[", "]", 50_000)),
    ];
    for (lang, path, src) in &code {
        let _ = chunk_code(src, lang, path, &p);
    }
}

/// html5ever's cost grows with the square of the nesting (50,000 nested `<div>`s took
/// 30 s); past the parse limit the markup is kept as text without being parsed.
#[test]
fn markup_too_deep_to_parse_is_kept_as_text_quickly() {
    let page = format!("<html><body>{}deep words{}</body></html>", "<div>".repeat(50_000), "</div>".repeat(50_000));
    let md = to_markdown(&page);
    assert!(md.contains("deep words"), "{md}");
    let table = format!(
        "# T\n\n{}cell words{}\n",
        "<table><tr><td><div>".repeat(2_000),
        "</div></td></tr></table>".repeat(2_000)
    );
    let c = clean(&table, &CleanParams::default());
    assert!(c.text.contains("cell words") && c.counts.contains_key("html-too-deep"), "{:?}", c.counts);
}
