//! How likely the corpus answers a query: a logistic model over signals of the
//! search itself, not the top cosine alone (which overlapped completely between the
//! questions a corpus answers and those it cannot, on held-out sets).
//!
//! The signals: the nearest chunk's cosine, how many of the question's content words
//! the index has never seen at all (a question about a product, a format or an option
//! the corpus never names), and the best keyword score (how much of the question's
//! rarer vocabulary one chunk's text holds). A name or a quoted string of the query
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
}

/// A fitted logistic model:
/// `p = σ(bias + w_cos · top_cosine + w_unseen · unseen + w_keyword · ln(1 + keyword))`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Names the model, so a bundle's stored threshold is read with the model it was
    /// fitted on.
    pub model: &'static str,
    pub top_cosine: f32,
    pub unseen: f32,
    pub keyword: f32,
    pub bias: f32,
}

/// The model Atlas ships: fitted on the tune halves of the round-3 development sets
/// (`python3 xtask/eval/fit_refusal.py`).
pub const CALIBRATION: Calibration = Calibration {
    model: "cosine-unseen-keyword-v2",
    top_cosine: 7.545,
    unseen: -14.323,
    keyword: 5.565,
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
            + c.keyword * self.keyword.max(0.0).ln_1p();
        z.clamp((EDGE / (1.0 - EDGE)).ln(), ((1.0 - EDGE) / EDGE).ln())
    }
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
}
