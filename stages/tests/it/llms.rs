//! llms.txt parsing: `check(base, text, expected)` over the forms sites really write.

use atlas_stages::crawl::llms::{parse, section_of};
use expect_test::{Expect, expect};
use url::Url;

fn check(llms_url: &str, text: &str, expected: Expect) {
    let index = parse(text, &Url::parse(llms_url).unwrap()).unwrap();
    let mut out = format!("title: {:?}\ngroups: {:?}\n", index.title, index.groups);
    for e in &index.entries {
        out.push_str(&format!(
            "{} | {} | {} -> {} | section={}{}\n",
            e.title,
            e.url,
            e.rel,
            e.mirror,
            section_of(e),
            e.description.as_deref().map(|d| format!(" | {d}")).unwrap_or_default()
        ));
    }
    for (t, u) in &index.offsite {
        out.push_str(&format!("offsite: {t} {u}\n"));
    }
    for (t, u) in &index.duplicates {
        out.push_str(&format!("duplicate: {t} {u}\n"));
    }
    expected.assert_eq(&out);
}

#[test]
fn absolute_root_relative_and_relative_links() {
    check(
        "https://docs.example.com/llms.txt",
        "# Example\n\n- [Abs](https://docs.example.com/a/b.md)\n- [Root](/c.md)\n- [Rel](d/e.md)\n* [Star](f.md)\n",
        expect![[r#"
            title: Some("Example")
            groups: []
            Abs | https://docs.example.com/a/b.md | a/b.md -> a/b.md | section=a
            Root | https://docs.example.com/c.md | c.md -> root/c.md | section=root
            Rel | https://docs.example.com/d/e.md | d/e.md -> d/e.md | section=d
            Star | https://docs.example.com/f.md | f.md -> root/f.md | section=root
        "#]],
    );
}

#[test]
fn base_with_a_path_prefix() {
    check(
        "https://aep.example.io/docs/llms.txt",
        "# Docs\n\n- [Home](https://aep.example.io/docs/readme.md): Welcome home.\n- [Rel](getting-started/overview.md)\n- [Outside prefix](/other/x.md)\n",
        expect![[r#"
            title: Some("Docs")
            groups: []
            Home | https://aep.example.io/docs/readme.md | readme.md -> root/readme.md | section=root | Welcome home.
            Rel | https://aep.example.io/docs/getting-started/overview.md | getting-started/overview.md -> getting-started/overview.md | section=getting-started
            offsite: Outside prefix https://aep.example.io/other/x.md
        "#]],
    );
}

#[test]
fn groups_with_anchors_escaped_titles_and_duplicates() {
    check(
        "https://d.example.com/llms.txt",
        "# D\n\n## Mobile Foundations <a id=\"foundation-extensions\"></a>\n\n- [AEP 3.x \\(Swift\\)](a.md)\n- [Same page again](a.md)\n\n## ADOBE ASSURANCE\n\n- [Title with [brackets] inside](b.md#section)\n- [Other host](https://elsewhere.example.com/x.md)\n",
        expect![[r#"
            title: Some("D")
            groups: ["Mobile Foundations", "ADOBE ASSURANCE"]
            AEP 3.x (Swift) | https://d.example.com/a.md | a.md -> mobile-foundations/a.md | section=mobile-foundations
            Title with [brackets] inside | https://d.example.com/b.md | b.md -> adobe-assurance/b.md | section=adobe-assurance
            offsite: Other host https://elsewhere.example.com/x.md
            duplicate: Same page again https://d.example.com/a.md
        "#]],
    );
}

#[test]
fn pages_without_md_and_folder_urls_get_md_names() {
    check(
        "https://s.example.com/llms.txt",
        "- [Html](guide/page)\n- [Folder](guide/)\n- [Encoded](a%20b.md)\n",
        expect![[r#"
            title: None
            groups: []
            Html | https://s.example.com/guide/page | guide/page.md -> guide/page.md | section=guide
            Folder | https://s.example.com/guide/ | guide/README.md -> guide/README.md | section=guide
            Encoded | https://s.example.com/a%20b.md | a b.md -> root/a b.md | section=root
        "#]],
    );
}

#[test]
fn malformed_indexes_are_errors() {
    let u = Url::parse("https://x.example.com/llms.txt").unwrap();
    assert!(parse("<!DOCTYPE html><html></html>", &u).unwrap_err().to_string().contains("HTML page"));
    assert!(parse("just text\n", &u).unwrap_err().to_string().contains("no page links found"));
}

#[test]
fn the_real_sites_llms_txt() {
    let Some(root) = crate::corpora::corpora() else { return };
    for (site, base, pages, dupes) in [
        ("devtron-docs/site", "https://docs.devtron.ai/llms.txt", 199, 1),
        ("aep-sdks-docs/site", "https://aep-sdks.gitbook.io/docs/llms.txt", 184, 0),
    ] {
        let text = std::fs::read_to_string(root.join(site).join("llms.txt")).unwrap();
        let index = parse(&text, &Url::parse(base).unwrap()).unwrap();
        assert_eq!(index.entries.len(), pages, "{site}");
        assert_eq!(index.duplicates.len(), dupes, "{site}");
        for e in &index.entries {
            assert!(root.join(site).join(&e.rel).is_file(), "{site}: {} maps to a published file", e.rel);
        }
    }
}
