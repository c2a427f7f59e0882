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
//! changed in 0.2" is near every changelog). A name or a quoted string of the query
//! found verbatim makes it certain. Other signals were measured and left out: the
//! cosine's margin over the next hits, keyword and vector agreeing on the top, the top
//! hits' coverage of the question's words, the rarest word's document frequency, and
//! whether the question's word pairs occur as phrases; none refused more questions the
//! corpus cannot answer on the test halves (docs/decisions.md, "Refusal").

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
    /// none of the first hits' text holds ([`unmatched_numbers`]).
    #[serde(default)]
    pub unmatched: bool,
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
/// `--add unmatched`).
pub const CALIBRATION: Calibration = Calibration {
    model: "cosine-unseen-keyword-unmatched-v3",
    top_cosine: 7.545,
    unseen: -14.323,
    keyword: 5.565,
    unmatched: -6.723,
    bias: -10.402,
};

/// The bounds a probability is kept within when its odds are compared.
const EDGE: f32 = 1e-4;

impl Signals {
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

/// Whether `query` names a version or a size that none of `texts` (the first hits')
/// holds: a question about a release or a width the corpus does not cover.
pub fn unmatched_numbers<'t>(query: &str, texts: impl Iterator<Item = &'t str> + Clone) -> bool {
    named_numbers(query).iter().any(|n| !texts.clone().any(|t| n.in_text(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

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
