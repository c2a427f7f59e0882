//! A keyword query's words, with weights.

use std::ops::Range;

use crate::words::{american_spellings, is_stopword, variants};

/// Weight of a morphological variant against the word the user typed.
const VARIANT_WEIGHT: f32 = 0.6;

/// The query's words with weights: each as typed (1.0), plus morphological variants
/// of plain lowercase words (asset ↔ assets, create ↔ creating). Identifiers
/// (camelCase, snake_case, paths, digits) are left as typed. English function words
/// ("how", "do", "I", "the", …) are dropped unless the query is nothing else: they
/// match every page and drown the words that matter (keyword MRR@10 on the devtron
/// set 0.378 → 0.441, Recall@5 0.380 → 0.609).
pub fn query_words(query: &str) -> Vec<(String, f32)> {
    let raw: Vec<&str> = query
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '?' | '!' | '"' | '\'' | '(' | ')'))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let all_stop = raw.iter().all(|w| is_stopword(w));
    let mut out: Vec<(String, f32)> = Vec::new();
    let push = |w: String, weight: f32, out: &mut Vec<(String, f32)>| {
        if !w.is_empty() && !out.iter().any(|(x, _)| *x == w) {
            out.push((w, weight));
        }
    };
    for w in raw {
        if !all_stop && is_stopword(w) {
            continue;
        }
        push(w.to_owned(), 1.0, &mut out);
        let plain = w.chars().all(|c| c.is_ascii_alphabetic()) && w.chars().skip(1).all(|c| c.is_ascii_lowercase());
        if plain && w.len() > 2 {
            for v in variants(&w.to_ascii_lowercase()) {
                push(v, VARIANT_WEIGHT, &mut out);
            }
        }
    }
    out
}

/// The words of `query` that may be British spellings, with their American
/// candidates ([`american_spellings`]): plain words, lowercase or capitalised, set
/// off by spaces or sentence punctuation. Quoted and backticked text and words joined
/// to others (`colour_map`, `--colour`, `a.colour`, `colour-blind`) are left as typed.
pub(super) fn spelling_candidates(query: &str) -> Vec<(Range<usize>, Vec<String>)> {
    let b = query.as_bytes();
    let mut out = Vec::new();
    let mut quoted: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quoted {
            quoted = (c != q).then_some(q);
            i += 1;
            continue;
        }
        if matches!(c, b'"' | b'`') {
            quoted = Some(c);
            i += 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] >= 0x80) {
            i += 1;
        }
        let opens = start == 0 || matches!(b[start - 1], b' ' | b'\t' | b'\n' | b'(' | b'\'');
        let closes = match b.get(i) {
            None => true,
            Some(b'.') => b.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()),
            Some(&n) => n.is_ascii_whitespace() || matches!(n, b',' | b';' | b':' | b'?' | b'!' | b')' | b'\''),
        };
        let word = &query[start..i];
        let capitalised =
            word.starts_with(|c: char| c.is_ascii_uppercase()) && word[1..].bytes().all(|c| c.is_ascii_lowercase());
        if opens && closes && (capitalised || word.bytes().all(|c| c.is_ascii_lowercase())) {
            let candidates = american_spellings(&word.to_ascii_lowercase());
            if !candidates.is_empty() {
                out.push((start..i, candidates));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_words_are_dropped_unless_they_are_all_there_is() {
        let words = |q: &str| -> Vec<String> { query_words(q).into_iter().map(|w| w.0).collect() };
        assert_eq!(words("How do I roll back?"), ["roll", "rolls", "rolling", "back", "backs", "backing"]);
        assert_eq!(words("how to"), ["how", "hows", "howing", "to"]);
    }

    #[test]
    fn identifiers_get_no_variants() {
        let words: Vec<String> =
            query_words("getAssets snake_case Foo::bar v2 assets").into_iter().map(|w| w.0).collect();
        assert_eq!(words, ["getAssets", "snake_case", "Foo::bar", "v2", "assets", "asset"]);
    }

    #[test]
    fn spelling_candidates_are_plain_words_outside_quotes_and_identifiers() {
        fn found(q: &str) -> Vec<&str> {
            spelling_candidates(q).into_iter().map(|(r, _)| &q[r]).collect()
        }
        assert_eq!(found("Initialise the colour, then serialise."), ["Initialise", "colour", "serialise"]);
        assert_eq!(
            found("set \"colour\" with `colour_map`, colour_map, --colour, a.colour, colour-blind"),
            Vec::<&str>::new()
        );
        assert_eq!(found("(behaviour) of the user's favourite"), ["behaviour", "favourite"]);
        assert_eq!(found("BEHAVIOUR Behaviour behaviour2"), ["Behaviour"]);
        assert_eq!(found("neighbours in ünïcödé behaviour"), ["neighbours", "behaviour"]);
    }
}
