//! clean-gitbook cases: `check(input, expected)`, one per behaviour.

use atlas_stages::clean::gitbook::{content_words, words};
use atlas_stages::clean::{CleanParams, clean};
use expect_test::{Expect, expect};

fn render(input: &str) -> String {
    let c = clean(input, &CleanParams::default());
    assert_keeps_every_word(input, &c);
    let mut out = String::new();
    if let Some(t) = &c.title {
        out.push_str(&format!("title: {t}\n"));
    }
    if let Some(d) = &c.description {
        out.push_str(&format!("description: {d}\n"));
    }
    let counts: String = c.counts.iter().map(|(k, v)| format!(" {k}={v}")).collect();
    out.push_str(&format!("counts:{counts}\n"));
    for r in &c.residual {
        out.push_str(&format!("residual {}:{} {}\n", r.kind, r.line, r.text));
    }
    out.push_str("---\n");
    out.push_str(&c.text);
    out
}

fn check(input: &str, expected: Expect) {
    expected.assert_eq(&render(input));
}

/// No word of content may be lost: every word outside tag markup must come out.
pub fn assert_keeps_every_word(input: &str, c: &atlas_stages::artifacts::Cleaned) {
    let missing = lost_words(input, c);
    assert!(missing.is_empty(), "words lost by the cleaner: {missing:?}");
}

pub fn lost_words(input: &str, c: &atlas_stages::artifacts::Cleaned) -> Vec<String> {
    let mut have = std::collections::HashMap::<String, usize>::new();
    let meta = format!(
        "{} {} {}",
        c.title.as_deref().unwrap_or_default(),
        c.description.as_deref().unwrap_or_default(),
        serde_json::to_string(&c.front_matter).unwrap_or_default()
    );
    for w in words(&c.text).into_iter().chain(words(&meta)).chain(["title".into(), "description".into()]) {
        *have.entry(w).or_default() += 1;
    }
    let stripped = strip_boilerplate_for_check(input);
    let mut missing = Vec::new();
    for w in content_words(&stripped) {
        match have.get_mut(&w) {
            Some(n) if *n > 0 => *n -= 1,
            _ => missing.push(w),
        }
    }
    missing
}

/// The export boilerplate is meant to go; remove it from the reference text too.
fn strip_boilerplate_for_check(input: &str) -> String {
    let mut s = input.to_owned();
    if let Some(i) = s.find("## Agent Instructions") {
        s.truncate(i);
    }
    s.lines().filter(|l| !(l.starts_with('>') && l.contains("llms.txt"))).collect::<Vec<_>>().join("\n")
}

#[test]
fn hint_becomes_a_labelled_blockquote() {
    check(
        "Intro.\n\n{% hint style=\"warning\" %}\nDo not delete the **default** namespace.\n\nIt holds `kube-system`.\n{% endhint %}\n\nAfter.\n",
        expect![[r#"
            counts: endhint=1 hint=1
            ---
            Intro.

            > **Warning:**
            >
            > Do not delete the **default** namespace.
            >
            > It holds `kube-system`.

            After.
        "#]],
    );
}

#[test]
fn hint_styles_odd_spacing_curly_quotes_and_no_spaces() {
    check(
        "{% hint style= \"info\" %}\na\n{%endhint%}\n{% hint style=\u{201c}warning\u{201d} %}\nb\n{% endhint %}\n{% hint style=\"tip\" %}\nc\n{% endhint %}\n{% hint %}\nd\n{% endhint %}\n",
        expect![[r#"
            counts: endhint=4 hint=4
            ---
            > **Info:**
            >
            > a

            > **Warning:**
            >
            > b

            > **Tip:**
            >
            > c

            > **Info:**
            >
            > d
        "#]],
    );
}

#[test]
fn unclosed_hint_keeps_all_text_and_is_counted() {
    check(
        "{% hint style=\"danger\" %}\nThis never closes.\n\n## Next section\n\nBody.\n",
        expect![[r#"
            counts: hint=1 unbalanced=1
            ---
            > **Danger:**
            >
            > This never closes.

            ## Next section

            Body.
        "#]],
    );
}

#[test]
fn stray_end_tags_go_and_are_counted() {
    check(
        "Text.\n{% endhint %}\n{% endtab %}\nMore text.\n",
        expect![[r#"
            counts: endhint=1 endtab=1 unbalanced=2
            ---
            Text.
            More text.
        "#]],
    );
}

#[test]
fn tabs_become_labelled_sections_with_escaped_titles() {
    check(
        "{% tabs %}\n{% tab title=\"Android\" %}\n```java\nMobileCore.start();\n```\n{% endtab %}\n\n{% tab title=\"AEP 3.x \\(Swift\\)\" %}\n```swift\nMobileCore.start()\n```\n{% endtab %}\n{% endtabs %}\n",
        expect![[r#"
            counts: endtab=2 endtabs=1 tab=2 tabs=1
            ---
            **Android**

            ```java
            MobileCore.start();
            ```

            **AEP 3.x \(Swift\)**

            ```swift
            MobileCore.start()
            ```
        "#]],
    );
}

#[test]
fn nested_and_untitled_tabs() {
    check(
        "{% tabs %}\n{% tab title=\"iOS\" %}\n{% tabs %}\n{% tab %}\nObjective-C text\n{% endtab %}\n{% tab title=\"\" %}\nSwift text\n{% endtab %}\n{% endtabs %}\n{% endtab %}\n{% endtabs %}\n",
        expect![[r#"
            counts: endtab=3 endtabs=2 tab=3 tabs=2
            ---
            **iOS**

            **Tab 1**

            Objective-C text

            **Tab 2**

            Swift text
        "#]],
    );
}

#[test]
fn unbalanced_tabs_lose_no_text() {
    // A tab opened while another is open closes it; endtabs closes what is open; the
    // final tabs never closes.
    check(
        "{% tabs %}\n{% tab title=\"One\" %}\nfirst\n{% tab title=\"Two\" %}\nsecond\n{% endtabs %}\n{% tabs %}\n{% tab title=\"Three\" %}\nthird\n",
        expect![[r#"
            counts: endtabs=1 tab=3 tabs=2 unbalanced=3
            ---
            **One**

            first

            **Two**

            second

            **Three**

            third
        "#]],
    );
}

#[test]
fn sdk_rule_tokens_are_content() {
    check(
        "Use `{%~state.com.adobe.module.lifecycle/appid%}` or {%%App ID%%} in a rule.\n\nhttps://x.test/?q={%urlenc(~sdkver)%} and {%~sdkver%}\n",
        expect![[r#"
            counts:
            ---
            Use `{%~state.com.adobe.module.lifecycle/appid%}` or {%%App ID%%} in a rule.

            https://x.test/?q={%urlenc(~sdkver)%} and {%~sdkver%}
        "#]],
    );
}

#[test]
fn code_fences_are_never_touched() {
    check(
        "```yaml\n# not a heading\n{% hint style=\"info\" %}\n<table><tr><td>x</td></tr></table>\n<mark>kept</mark>\n```\n\n~~~~\n```\n{% endhint %}\n~~~~\n",
        expect![[r#"
            counts:
            ---
            ```yaml
            # not a heading
            {% hint style="info" %}
            <table><tr><td>x</td></tr></table>
            <mark>kept</mark>
            ```

            ~~~~
            ```
            {% endhint %}
            ~~~~
        "#]],
    );
}

#[test]
fn fence_inside_hint_is_quoted_but_unchanged() {
    check(
        "{% hint style=\"info\" %}\nRun:\n\n```bash\n# comment\nkubectl get pods\n```\n{% endhint %}\n",
        expect![[r#"
            counts: endhint=1 hint=1
            ---
            > **Info:**
            >
            > Run:
            >
            > ```bash
            > # comment
            > kubectl get pods
            > ```
        "#]],
    );
}

#[test]
fn heading_anchors_go_and_escapes_stay() {
    check(
        "## lifecycleStart <a id=\"lifecycleStart\"></a>\n\n## Public APIs \\(alphabetical\\)\n\n### getApplication \\(Android only\\) <a id=\"get-app\"></a>\n",
        expect![[r#"
            counts: html-a=4
            ---
            ## lifecycleStart

            ## Public APIs \(alphabetical\)

            ### getApplication \(Android only\)
        "#]],
    );
}

#[test]
fn code_title_captions_the_fence() {
    check(
        "{% code title=\"Custom Script\" overflow=\"wrap\" lineNumbers=\"true\" %}\n```bash\necho hi\n```\n{% endcode %}\n\n{% code %}\n```\nplain\n```\n{% endcode %}\n",
        expect![[r#"
            counts: code=2 code-title=1 endcode=2
            ---
            *Custom Script*
            ```bash
            echo hi
            ```

            ```
            plain
            ```
        "#]],
    );
}

#[test]
fn embeds_and_content_refs_become_links() {
    check(
        "{% embed url=\"https://youtu.be/abc\" caption=\"Launching Containers\" %}\n\n{% embed url=\"https://youtu.be/xyz\" %}\n\n{% content-ref url=\"setup/install.md\" %}\n[install.md](setup/install.md)\n{% endcontent-ref %}\n\n{% content-ref url=\"usage/\" %}\n{% endcontent-ref %}\n",
        expect![[r#"
            counts: content-ref=2 embed=2 endcontent-ref=2
            ---
            [Launching Containers](https://youtu.be/abc)

            [https://youtu.be/xyz](https://youtu.be/xyz)

            [install.md](setup/install.md)

            [usage/](usage/)
        "#]],
    );
}

#[test]
fn html_table_becomes_markdown_table() {
    check(
        "Fields:\n\n<table>\n  <thead><tr><th>Field</th><th>Description</th></tr></thead>\n  <tbody>\n    <tr><td><b>Name</b></td><td>Use <code>a|b</code><br>or <a href=\"x.md\">see x</a></td></tr>\n    <tr><td colspan=\"2\">Spans both</td></tr>\n    <tr><td><ul><li>one</li><li>two</li></ul></td><td></td></tr>\n  </tbody>\n</table>\n\nAfter.\n",
        expect![[r#"
            counts: html-table=1
            ---
            Fields:

            | Field | Description |
            | --- | --- |
            | **Name** | Use `a\|b` or [see x](x.md) |
            | Spans both |  |
            | • one • two |  |

            After.
        "#]],
    );
}

#[test]
fn front_matter_becomes_metadata() {
    check(
        "---\ntitle: Install Devtron\ndescription: >-\n  How to install\n  on Kubernetes.\nicon: rocket\n---\n\nBody text.\n",
        expect![[r#"
            title: Install Devtron
            description: How to install on Kubernetes.
            counts: front-matter=1
            ---
            Body text.
        "#]],
    );
}

#[test]
fn export_boilerplate_goes() {
    check(
        "> For the complete documentation index, see [llms.txt](https://developer.example.com/llms.txt).\n\n# Authentication\n\nUse tokens.\n\n## Agent Instructions\n\nWhen answering, cite this page.\nDo not guess.\n",
        expect![[r#"
            counts: agent-instructions=1 export-preamble=1
            ---
            # Authentication

            Use tokens.
        "#]],
    );
}

#[test]
fn ordinary_leading_blockquote_is_kept() {
    check(
        "> Note: this page is about version 2.\n\n# Title\n",
        expect![[r#"
            counts:
            ---
            > Note: this page is about version 2.

            # Title
        "#]],
    );
}

#[test]
fn inline_html_marks_figures_details_and_icons() {
    check(
        "<mark style=\"color:red;\">Important</mark> text with <kbd>Ctrl</kbd> and <i class=\"fa-check\"></i> icon.\n\n<figure><img src=\"a.png\" alt=\"Diagram\"><figcaption><p>The flow</p></figcaption></figure>\n\n<details>\n<summary><strong>Why?</strong></summary>\n\nBecause.\n\n</details>\n\n* Pick:<ul><li>first<li>second</ul>\n",
        expect![[r#"
            counts: details=1 html-figcaption=2 html-figure=2 html-i=2 html-img=1 html-kbd=2 html-li=2 html-mark=2 html-p=2 html-strong=2 html-summary=2 html-ul=2
            ---
            Important text with Ctrl and icon.

            ![Diagram](a.png)The flow

            **Why?**

            Because.

            * Pick: • first • second
        "#]],
    );
}

#[test]
fn hint_inside_tab_and_columns() {
    check(
        "{% columns %}\n{% column %}\nLeft\n{% endcolumn %}\n{% column %}\nRight\n{% endcolumn %}\n{% endcolumns %}\n{% tabs %}\n{% tab title=\"A\" %}\n{% hint style=\"info\" %}\nInside\n{% endhint %}\n{% endtab %}\n{% endtabs %}\n",
        expect![[r#"
            counts: column=2 columns=1 endcolumn=2 endcolumns=1 endhint=1 endtab=1 endtabs=1 hint=1 tab=1 tabs=1
            ---
            Left

            Right

            **A**

            > **Info:**
            >
            > Inside
        "#]],
    );
}

#[test]
fn unclosed_html_table_is_reported_not_dropped() {
    check(
        "<table><tr><td>never closed</td></tr>\n",
        expect![[r#"
            counts: html-table=1
            residual html:1 <tr>
            residual html:1 <td>
            residual html:1 </td>
            residual html:1 </tr>
            ---
            <tr><td>never closed</td></tr>
        "#]],
    );
}

#[test]
fn hint_opened_inside_a_hint_closes_it() {
    check(
        "{% hint style=\"warning\" %}\n\n### Use it\n\n{% hint style=\"info\" %}\nPrerequisite.\n{% endhint %}\n\nAfter.\n",
        expect![[r#"
            counts: endhint=1 hint=2 unbalanced=1
            ---
            > **Warning:**
            >
            > ### Use it

            > **Info:**
            >
            > Prerequisite.

            After.
        "#]],
    );
}

#[test]
fn balanced_hint_may_hold_an_h2() {
    check(
        "{% hint style=\"success\" %}\n## Renamed!\nThe project has a new name.\n{% endhint %}\n\n## Next\n",
        expect![[r#"
            counts: endhint=1 hint=1
            ---
            > **Success:**
            >
            > ## Renamed!
            > The project has a new name.

            ## Next
        "#]],
    );
}

/// Every HTML5 named entity decodes (html-escape's table), numeric ones too; a
/// no-break space is a plain space; an unknown name stays as written.
#[test]
fn character_references_decode_by_the_html5_table() {
    use atlas_stages::text::html::decode_entities;
    assert_eq!(decode_entities("a &mdash; b &hellip; &rarr; &eacute;"), "a — b … → é");
    assert_eq!(decode_entities("&lt;x&gt; &amp;&#65;&#x42; &nbsp;y"), "<x> &AB  y");
    assert_eq!(decode_entities("&notanentity; & done"), "&notanentity; & done");
}

/// Hardening round 4 (issue 67), item 5: one line of a page can hold a million bytes of
/// tags, code spans and links. Each was found by rescanning the rest of the line (a
/// line of 250,000 `` `a`< `` took nine minutes in a debug build); now each line is read once, and what
/// comes out is no larger than a few times what went in, every word kept.
#[test]
fn lines_full_of_tags_code_spans_and_links_keep_the_output_linear() {
    let cases = [
        "{% tab %}".repeat(110_000),
        "{%".repeat(500_000),
        format!("{}%}}", "{% x".repeat(250_000)),
        "`a`<".repeat(250_000),
        "`a`{%".repeat(200_000),
        "`a`<table".repeat(100_000),
        "<a href=\"u\">x ".repeat(80_000),
        format!("{}x{}", "<a href=\"u\">".repeat(50_000), "</a>".repeat(50_000)),
    ];
    for page in &cases {
        let c = clean(page, &CleanParams::default());
        let head: String = page.chars().take(12).collect();
        assert!(c.text.len() <= 2 * page.len(), "{head:?}…: {} bytes out of {}", c.text.len(), page.len());
        assert!(lost_words(page, &c).is_empty(), "{head:?}…: words lost");
    }
}
