//! What a query looks like, which decides how hybrid weighs its two retrievers: an
//! identifier wants the keyword index, a question in prose wants the embeddings, a
//! few keywords sit between.

use serde::{Deserialize, Serialize};

use super::exact::{clean_literal, is_identifier};
use crate::words::is_stopword;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// A name, a path, a flag or a quoted string, with at most a word or two around it
    /// (`ServerKey::new`, `"not initialized"`, `compile_torch_model()`).
    Identifier,
    /// A few plain words (`rollback helm chart`).
    Keywords,
    /// A sentence: a question or a request in prose.
    Question,
}

impl Shape {
    pub const ALL: [Shape; 3] = [Shape::Identifier, Shape::Keywords, Shape::Question];

    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Identifier => "identifier",
            Shape::Keywords => "keywords",
            Shape::Question => "question",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The most words a query of [`Shape::Keywords`] has; longer plain queries read as prose.
const KEYWORDS_MAX_WORDS: usize = 4;
/// The most other words around an identifier for the query to be [`Shape::Identifier`].
const IDENTIFIER_MAX_WORDS: usize = 3;

/// The shape of `query`.
pub fn shape(query: &str) -> Shape {
    let q = query.trim();
    let words: Vec<&str> = q.split_whitespace().collect();
    let quoted = q.contains('`') || q.matches('"').count() >= 2;
    let identifiers = words.iter().filter(|w| is_identifier(clean_literal(w)) || w.ends_with("()")).count();
    if (identifiers > 0 || quoted) && words.len() <= IDENTIFIER_MAX_WORDS {
        return Shape::Identifier;
    }
    if words.len() == 1 {
        return Shape::Identifier;
    }
    let content = words.iter().filter(|w| !is_stopword(&w.to_lowercase())).count();
    let question = q.ends_with('?') || words.first().is_some_and(|w| is_stopword(&w.to_lowercase()));
    if words.len() <= KEYWORDS_MAX_WORDS && !question && content == words.len() {
        Shape::Keywords
    } else {
        Shape::Question
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_take_the_shape_they_read_as() {
        for q in
            ["ServerKey::new", "compile_torch_model()", "`set_server_key` docs", "KeyBuilder", "\"not initialized\""]
        {
            assert_eq!(shape(q), Shape::Identifier, "{q}");
        }
        for q in ["rollback helm chart", "gpu benchmarks", "datastream edge configuration"] {
            assert_eq!(shape(q), Shape::Keywords, "{q}");
        }
        for q in [
            "how do I roll back a release",
            "the code that keeps halving an interval of error probabilities",
            "rollback?",
            "send an event to the edge network and read the response",
        ] {
            assert_eq!(shape(q), if q == "rollback?" { Shape::Identifier } else { Shape::Question }, "{q}");
        }
    }
}
