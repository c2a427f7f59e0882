//! The strings of a query to find verbatim, and how they match.

/// The strings of a query to find verbatim: quoted strings, identifier-shaped words
/// (`X-Foo-Bar`, `fooBar()`, `a.b.c`, `a::b`, `--flag`, `snake_case`, `camelCase`,
/// `path/to`), a query that is a single word, and a query of four words or more as a
/// whole (a pasted error message). Trailing `()` and sentence punctuation are dropped.
pub fn exact_strings(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let push = |s: &str, out: &mut Vec<String>| {
        let s = s.trim();
        if s.chars().filter(|c| c.is_alphanumeric()).count() >= 2 && !out.iter().any(|x| x == s) {
            out.push(s.to_owned());
        }
    };
    // Quoted: "…", `…`, '…' (a whole quoted span).
    for quote in ['"', '`'] {
        let parts: Vec<&str> = query.split(quote).collect();
        for (k, p) in parts.iter().enumerate() {
            if k % 2 == 1 && k + 1 < parts.len() {
                push(clean_literal(p), &mut out);
            }
        }
    }
    let words: Vec<&str> = query.split_whitespace().map(clean_literal).filter(|w| !w.is_empty()).collect();
    if words.len() == 1 {
        push(words[0], &mut out);
    }
    for w in &words {
        if is_identifier(w) {
            push(w, &mut out);
        }
        // `fooBar()`: the call as written, and the name alone (`fooBar(x)`, `obj.fooBar`).
        if let Some(bare) = w.strip_suffix("()") {
            push(bare, &mut out);
        }
    }
    if words.len() >= 4 && looks_pasted(query) && !query.contains(['"', '`']) {
        let whole = clean_literal(query.trim().trim_end_matches(['?', '.', '!']));
        push(whole, &mut out);
    }
    out
}

/// A query that reads like text copied from somewhere (an error message, a log line,
/// a sentence of the docs) rather than a question typed in: it starts with a capital
/// or holds code punctuation, and does not open with a question word. Typed questions
/// that happen to match a sentence verbatim must not jump the ranking.
fn looks_pasted(query: &str) -> bool {
    let q = query.trim();
    let first = q.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
    const QUESTION: &[&str] = &[
        "how", "what", "why", "where", "when", "which", "who", "can", "could", "does", "do", "is", "are", "should",
        "will", "would", "i",
    ];
    let code = q.chars().any(|c| matches!(c, ':' | ';' | '=' | '/' | '{' | '}' | '[' | ']' | '<' | '>'));
    let capital = q.starts_with(|c: char| c.is_uppercase());
    (capital || code) && !QUESTION.contains(&first.as_str())
}

/// Whether the query is `literal` and nothing else (quoted or not, `()` aside).
pub(super) fn is_only_literal(query: &str, literal: &str) -> bool {
    let q = clean_literal(query.trim());
    q == literal || q.strip_suffix("()") == Some(literal)
}

/// A word without the quotes, brackets and sentence punctuation around it; a call's
/// `()` stays.
pub(super) fn clean_literal(w: &str) -> &str {
    let w = w.trim_matches(['"', '`', '\'']);
    let w = w.trim_end_matches([',', ';', ':', '?', '!', '.']);
    let w = w.trim_start_matches(['(', '[', '{', '<']);
    if w.ends_with("()") {
        return w;
    }
    w.trim_end_matches([')', ']', '}', '>', ',', ';', ':', '?', '!', '.'])
}

/// Identifier-shaped: a flag, a path (`a.b`, `a::b`, `src/lib`; not `A/B`), `snake_case`, a humped
/// `camelCase`, or a hyphenated name whose every part opens with a capital or a digit
/// (`X-Foo-Bar`, `UTF-8`; hyphenated English such as `on-device` or `CPU-only` is
/// prose).
pub(super) fn is_identifier(w: &str) -> bool {
    let chars: Vec<char> = w.chars().collect();
    if chars.len() < 3 {
        return false;
    }
    let inner = |sep: char| {
        chars.windows(3).any(|x| x[1] == sep && x[0].is_alphanumeric() && (x[2].is_alphanumeric() || x[2] == '_'))
    };
    let flag = w.starts_with('-') && chars.iter().find(|c| **c != '-').is_some_and(|c| c.is_alphabetic());
    let hump = chars.windows(2).any(|x| x[0].is_lowercase() && x[1].is_uppercase());
    let capital = chars.iter().any(|c| c.is_uppercase())
        && w.split('-').all(|part| part.chars().next().is_none_or(|c| c.is_uppercase() || c.is_ascii_digit()));
    // A path has a segment longer than one letter: `A/B`, `I/O` are English.
    let path = inner('/') && w.split('/').any(|seg| seg.chars().filter(|c| c.is_alphanumeric()).count() > 1);
    flag || w.contains("::")
        || inner('.')
        || path
        || (inner('_') || w.starts_with('_'))
        || hump
        || (inner('-') && capital)
}

/// Lowercase (ASCII), markdown escapes dropped, whitespace collapsed.
pub(super) fn normalise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c == '\\' {
            continue;
        }
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// `needle` in `hay`, not inside a longer word at either end.
pub(super) fn contains_at_boundaries(hay: &str, needle: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let (first, last) = (needle.chars().next(), needle.chars().last());
    hay.match_indices(needle).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + needle.len()..].chars().next();
        let cut_before = word(first) && word(before);
        let cut_after = word(last) && word(after);
        !cut_before && !cut_after
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_strings_keep_identifiers_whole() {
        let check = |q: &str, want: &[&str]| assert_eq!(exact_strings(q), want, "{q}");
        check("X-InApp-Auth", &["X-InApp-Auth"]);
        check("what does clearCurrentBeacon() do", &["clearCurrentBeacon()", "clearCurrentBeacon"]);
        check("set lifecycle.sessionTimeout, please", &["lifecycle.sessionTimeout"]);
        check("call Self::insert_with_clear_key", &["Self::insert_with_clear_key"]);
        check("pip --extra-index-url", &["--extra-index-url"]);
        check("store attributes in the on-device profile", &[]);
        check("run the CPU-only tests with UTF-8 names", &["UTF-8"]);
        check("how do I A/B test the I/O layer in docs/guides", &["docs/guides"]);
        check("the `node_to_cut_name` argument", &["node_to_cut_name"]);
        check("\"not properly initialized\" error", &["not properly initialized"]);
        // A pasted message is taken whole; a typed question is not.
        check("The server key was not properly initialized.", &["The server key was not properly initialized"]);
        check("send an experience event to the Edge Network", &[]);
        check("How do I send an event to the Edge Network?", &[]);
    }

    #[test]
    fn literals_match_at_word_boundaries() {
        assert!(contains_at_boundaries("call foo.bar() now", "foo.bar()"));
        assert!(!contains_at_boundaries("x-inapp-auth-token", "x-inapp-auth-tok"));
        assert!(contains_at_boundaries("--extra-index-url https://x", "--extra-index-url"));
        assert!(!contains_at_boundaries("my_node_to_cut_name", "node_to_cut_name"));
        assert_eq!(normalise("Not  \\_properly\n  initialized"), "not _properly initialized");
    }
}
