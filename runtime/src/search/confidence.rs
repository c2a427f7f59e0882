//! How likely the corpus answers a query: a logistic model over signals of the
//! search itself, not the top cosine alone (which overlapped completely between the
//! questions a corpus answers and those it cannot, on held-out sets).
//!
//! The signals: the nearest chunk's cosine, how many of the question's content words
//! the index has never seen at all (a question about a product, a format or an option
//! the corpus never names), and the best keyword score (how much of the question's
//! rarer vocabulary one chunk's text holds), and whether a version or a size the
//! question names (`0.2`, `5.x`, `512-bit`) is missing from the first hits (a
//! release or a width the corpus does not cover, which the cosine cannot see: "what
//! changed in 0.2" is near every changelog), or whether it writes a name of which no
//! chunk holds two adjacent words (`Google Analytics 4`: a product the corpus never
//! names, though each of its words is common there). A name or a quoted string of the
//! query found verbatim makes it certain. Other signals were measured and left out: the
//! cosine's margin over the next hits, keyword and vector agreeing on the top, the top
//! hits' coverage of the question's words, the rarest word's document frequency, and
//! whether every pair of the question's words occurs as a phrase (a name's pairs do
//! count); none refused more questions the corpus cannot answer on the test halves
//! (docs/decisions.md, "Refusal").

use serde::{Deserialize, Serialize};

/// What the search saw, for the confidence model and for `atlas eval --json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    /// The cosine of the query's nearest chunk (within the filters).
    pub top_cosine: f32,
    /// The share of the query's content words (stemmed) that no chunk's text, title
    /// or heading holds.
    pub unseen: f32,
    /// The query's content words (what `unseen` is a share of).
    pub words: usize,
    /// The best keyword (BM25) score within the filters over `ln(1 + chunks)`, about
    /// the largest idf a term can have, so that corpora of other sizes read alike.
    #[serde(default)]
    pub keyword: f32,
    /// A quoted string, an identifier or a defined name of the query was found verbatim.
    pub exact: bool,
    /// The question names a version or a size (`0.2`, `5.x`, `v4`, `512-bit`) that
    /// none of the first hits' text holds ([`unmatched_numbers`]), or a name no
    /// chunk's text writes ([`name_pairs`]): something the corpus does not cover.
    #[serde(default)]
    pub unmatched: bool,
    /// The library had no vectors to search (built keyword-first, or its model is not
    /// here): no cosine, and the confidence is [`KEYWORD_CALIBRATION`]'s, from the
    /// keyword evidence alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keyword_only: bool,
}

/// A fitted logistic model:
/// `p = σ(bias + w_cos · top_cosine + w_unseen · unseen + w_keyword · ln(1 + keyword)
/// + w_unmatched · [unmatched])`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Names the model, so a bundle's stored threshold is read with the model it was
    /// fitted on.
    pub model: &'static str,
    pub top_cosine: f32,
    pub unseen: f32,
    pub keyword: f32,
    pub unmatched: f32,
    pub bias: f32,
}

/// The model Atlas ships: fitted on the tune halves of the round-3 development sets
/// (`python3 xtask/eval/fit_refusal.py`; `unmatched` added with the others held,
/// `--add unmatched`; refitted the same way when it came to cover names, v4).
pub const CALIBRATION: Calibration = Calibration {
    model: "cosine-unseen-keyword-unmatched-v4",
    top_cosine: 7.545,
    unseen: -14.323,
    keyword: 5.565,
    unmatched: -7.406,
    bias: -10.402,
};

/// The model of a library searched by keyword only (no vectors yet, or no model here):
/// the same signals less the cosine, fitted the same way on the same tune halves
/// (`fit_refusal.py` with `top_cosine` left out of its features; docs/decisions.md,
/// "Dependencies on real projects (issue 68)"). Its probability reads against the
/// same refusal threshold (`eval::DEFAULT_THRESHOLD`), and its log-odds against the
/// calibrated libraries' in a merged search.
pub const KEYWORD_CALIBRATION: Calibration = Calibration {
    model: "unseen-keyword-unmatched-keyword-only-v1",
    top_cosine: 0.0,
    unseen: -14.108,
    keyword: 6.917,
    unmatched: -9.712,
    bias: -7.512,
};

/// The bounds a probability is kept within when its odds are compared.
const EDGE: f32 = 1e-4;

impl Signals {
    /// The model these signals are read with: [`KEYWORD_CALIBRATION`] for a library
    /// searched by keyword only, else [`CALIBRATION`].
    pub fn calibration(&self) -> &'static Calibration {
        if self.keyword_only { &KEYWORD_CALIBRATION } else { &CALIBRATION }
    }

    /// The probability that the corpus answers the query: 1 when an exact string or a
    /// defined name was found, else the model's.
    pub fn confidence(&self, c: &Calibration) -> f32 {
        if self.exact {
            return 1.0;
        }
        1.0 / (1.0 + (-self.logit(c)).exp())
    }

    /// The model's log-odds (an exact find: the most the bounds allow).
    pub fn logit(&self, c: &Calibration) -> f32 {
        if self.exact {
            return ((1.0 - EDGE) / EDGE).ln();
        }
        let z = c.bias
            + c.top_cosine * self.top_cosine
            + c.unseen * self.unseen
            + c.keyword * self.keyword.max(0.0).ln_1p()
            + if self.unmatched { c.unmatched } else { 0.0 };
        z.clamp((EDGE / (1.0 - EDGE)).ln(), ((1.0 - EDGE) / EDGE).ln())
    }
}

/// A version or a size a question names, as it must appear in a text that speaks of it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    /// `0.2`, `3.0.1`: the version as written (`0.2.1` holds `0.2`).
    Version(String),
    /// `5.x`, `v5`: any `5.<digit>`, `5.x` or `v5`.
    Major(String),
    /// `512-bit`, `16bit`: the number, alone or ending a name (`FheUint512`, `u16`).
    Bits(String),
}

/// The versions and sizes `query` names (at most 8; plain numbers are too common in
/// any text to say anything).
fn named_numbers(query: &str) -> Vec<Named> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    query
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter_map(|w| {
            let lower = w.to_ascii_lowercase();
            if let Some(m) = lower.strip_suffix(".x").or_else(|| lower.strip_prefix('v')).filter(|m| digits(m)) {
                return Some(Named::Major(m.to_owned()));
            }
            if let Some(n) = lower
                .strip_suffix("-bits")
                .or_else(|| lower.strip_suffix("-bit"))
                .or_else(|| lower.strip_suffix("bit"))
                .filter(|n| digits(n))
            {
                return Some(Named::Bits(n.to_owned()));
            }
            let parts: Vec<&str> = lower.split('.').collect();
            (parts.len() > 1 && parts.iter().all(|p| digits(p))).then(|| Named::Version(lower.clone()))
        })
        .take(8)
        .collect()
}

impl Named {
    /// Whether `text` speaks of it: each occurrence of its needle checked at its
    /// edges (no digit or dot before a version, no digit after it; …).
    fn in_text(&self, text: &str) -> bool {
        let b = text.as_bytes();
        let at = |needle: &str, ok: &dyn Fn(Option<u8>, Option<u8>) -> bool| {
            text.match_indices(needle).any(|(i, m)| ok(i.checked_sub(1).map(|j| b[j]), b.get(i + m.len()).copied()))
        };
        let digit = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_digit());
        match self {
            Named::Version(v) => at(v, &|before, after| !digit(before) && before != Some(b'.') && !digit(after)),
            Named::Major(m) => {
                at(&format!("{m}."), &|before, after| {
                    !digit(before) && before != Some(b'.') && (digit(after) || matches!(after, Some(b'x' | b'X')))
                }) || at(&format!("v{m}"), &|before, after| {
                    !before.is_some_and(|c| c.is_ascii_alphanumeric()) && !digit(after)
                })
            }
            Named::Bits(n) => at(n, &|before, after| !digit(before) && !digit(after)),
        }
    }
}

/// The most words a name has (`Adobe Experience Platform Mobile SDK`).
const MAX_NAME_WORDS: usize = 5;

/// A pair of a name's words without a plural `s` on the second: `amd gpus` is
/// written `amd gpu` too, and the index's stemmer keeps `gpus` apart from `gpu`.
pub fn without_plural(pair: &str) -> Option<&str> {
    pair.strip_suffix('s').filter(|one| one.rsplit(' ').next().is_some_and(|w| w.len() >= 3 && !w.ends_with('s')))
}

/// Whether `query` names a version or a size that none of `texts` (the first hits')
/// holds: a question about a release or a width the corpus does not cover.
pub fn unmatched_numbers<'t>(query: &str, texts: impl Iterator<Item = &'t str> + Clone) -> bool {
    named_numbers(query).iter().any(|n| !texts.clone().any(|t| n.in_text(t)))
}

/// The names `query` writes, each as its adjacent word pairs to look for in the
/// corpus: runs of two or more capitalised words (`Google Analytics 4`, `HashiCorp
/// Nomad`, `Apple Vision Pro`), a number continuing a run (`Xcode 15`). A sentence's
/// first word is not a name for its capital (`Send …`), `I` never is, a possessive
/// ends one (`the SDK's HTTP stack`), and code is none: a quoted span, a word of code
/// punctuation (`a::b`, `snake_case`, `f()`) or one that `is_code` says the corpus
/// defines (`ServerKey`). A run of more than [`MAX_NAME_WORDS`] is a title-cased
/// sentence, not a name. Each pair is lowercase. At most 4 names.
pub fn name_pairs(query: &str, is_code: impl Fn(&str) -> bool) -> Vec<Vec<String>> {
    let mut names: Vec<Vec<String>> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let close = |run: &mut Vec<&str>, names: &mut Vec<Vec<String>>| {
        if (2..=MAX_NAME_WORDS).contains(&run.len()) {
            names.push(run.windows(2).map(|w| format!("{} {}", w[0], w[1]).to_ascii_lowercase()).collect());
        }
        run.clear();
    };
    let mut sentence_start = true;
    let mut quoted = false;
    for raw in query.split_whitespace() {
        let quotes = raw.chars().filter(|c| matches!(c, '"' | '`')).count();
        let in_quotes = quoted || quotes > 0;
        quoted ^= quotes % 2 == 1;
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        // `SDK's HTTP`, `Apple's IDFA`: a possessive ends a name.
        let possessive = word.contains(['\'', '’']);
        let code = raw.contains("::")
            || raw.contains("()")
            || raw.contains('_')
            || word.contains(['.', '/'])
            || (!word.is_empty() && is_code(word));
        let capital = word.chars().next().is_some_and(char::is_uppercase);
        let humped = word.chars().skip(1).any(char::is_uppercase);
        let number = !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit());
        let name = !in_quotes
            && !code
            && !possessive
            && word != "I"
            && ((capital && !sentence_start) || (humped && !capital) || (number && !run.is_empty()));
        if !name || raw.starts_with('(') {
            close(&mut run, &mut names);
        }
        if name {
            run.push(word);
        }
        if raw.ends_with([',', ';', ':', '?', '!', '.', ')']) {
            close(&mut run, &mut names);
        }
        sentence_start = raw.ends_with(['?', '!', '.']);
    }
    close(&mut run, &mut names);
    names.truncate(4);
    names
}

/// What a low confidence tells a reader about [`super::Searched::unseen_words`], for a
/// refusal's line (empty when there are none): `no chunk holds "graphics" or "card";
/// the library may say them in other words, so search again with those`.
pub fn unseen_note(words: &[String]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("{w:?}")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => {
            format!("no chunk holds {last}; the library may say it in other words, so search again with those")
        }
        Some((last, rest)) => format!(
            "no chunk holds {} or {last}; the library may say them in other words, so search again with those",
            rest.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_words_no_chunk_holds() {
        let w = |ws: &[&str]| unseen_note(&ws.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(w(&[]), "");
        assert_eq!(
            w(&["graphics"]),
            "no chunk holds \"graphics\"; the library may say it in other words, so search again with those"
        );
        assert!(w(&["a", "b", "c"]).starts_with("no chunk holds \"a\", \"b\" or \"c\"; the library may say them"));
    }

    #[test]
    fn an_exact_find_is_certain_and_the_model_rises_with_the_cosine_and_keyword_and_falls_with_unseen_words() {
        let mut s = Signals { top_cosine: 0.3, words: 5, ..Signals::default() };
        let low = s.confidence(&CALIBRATION);
        s.top_cosine = 0.7;
        let high = s.confidence(&CALIBRATION);
        assert!(high > low);
        s.unseen = 0.2;
        assert!(s.confidence(&CALIBRATION) < high);
        let unseen = s.confidence(&CALIBRATION);
        s.keyword = 3.0;
        assert!(s.confidence(&CALIBRATION) > unseen);
        s.exact = true;
        assert_eq!(s.confidence(&CALIBRATION), 1.0);
        assert!(s.logit(&CALIBRATION).is_finite());
    }

    #[test]
    fn names_are_runs_of_capitalised_words_that_are_not_code() {
        let names = |q: &str| name_pairs(q, |w| w == "ServerKey");
        assert_eq!(
            names("forward SDK events to Google Analytics 4 as well"),
            vec![vec!["google analytics".to_owned(), "analytics 4".to_owned()]]
        );
        assert_eq!(
            names("deploy to a HashiCorp Nomad cluster, or AMD GPUs"),
            vec![vec!["hashicorp nomad".to_owned()], vec!["amd gpus".to_owned()]]
        );
        assert_eq!(names("does iOS Safari work"), vec![vec!["ios safari".to_owned()]]);
        assert_eq!(without_plural("amd gpus"), Some("amd gpu"));
        assert_eq!(without_plural("red hat"), None);
        assert_eq!(without_plural("apple os"), None);
        assert_eq!(without_plural("gitlab access"), None);
        // A sentence's first word, `I`, one capitalised word, a number alone, code and
        // quoted text are not names.
        for q in [
            "Send events from the app",
            "can I Use it",
            "what changed in Campaign for 2 weeks",
            "call ServerKey Nomad",
            "the `Google Analytics` tag",
            "set Foo::Bar Baz_qux and Some.Thing Else",
            "replace the SDK's HTTP stack",
            "what changed about Apple’s IDFA",
        ] {
            assert!(names(q).is_empty(), "{q}: {:?}", names(q));
        }
        // Punctuation ends a name; a new sentence's first word starts none.
        assert!(names("use Campaign. Then Target").is_empty());
        assert!(names("Campaign, Target and Places").is_empty());
        assert_eq!(names("use Campaign (Classic Edition)"), vec![vec!["classic edition".to_owned()]]);
        // A title-cased sentence is not a name.
        assert!(names("how To Encrypt An Integer With The Public Key").is_empty());
    }

    #[test]
    fn versions_and_sizes_a_question_names_must_be_in_the_hits() {
        use Named::*;
        assert_eq!(
            named_numbers("upgrade from 0.2 to 3.0.1, the 5.x SDK, v4, 512-bit and 16bit (Xcode 15, SHA-3, H100)"),
            vec![
                Version("0.2".into()),
                Version("3.0.1".into()),
                Major("5".into()),
                Major("4".into()),
                Bits("512".into()),
                Bits("16".into())
            ]
        );
        let holds = |q: &str, t: &str| !unmatched_numbers(q, [t].into_iter());
        assert!(holds("what changed in 0.2", "## 0.2.1 (2023)"));
        assert!(!holds("what changed in 0.2", "set it to 10.2 or 0.25"));
        assert!(holds("the 5.x SDK", "AEP SDK 5.0 and later"));
        assert!(holds("the 5.x SDK", "the v5 SDK"));
        assert!(!holds("the 5.x SDK", "15.0, 2.5 and v55"));
        assert!(holds("512-bit division", "FheUint512::div"));
        assert!(!holds("512-bit division", "5120 bits"));
        assert!(holds("no numbers here", ""));
        assert!(!unmatched_numbers("from 1.x to 3.x", ["1.2", "3.0"].into_iter()));
        assert!(unmatched_numbers("from 1.x to 3.x", ["1.2"].into_iter()));
    }
}
