//! English words: the function words searches drop, the inflections a keyword query
//! adds, and the stems the summariser compares (the keyword index's own stemmer).

use tantivy::tokenizer::{Language, LowerCaser, SimpleTokenizer, Stemmer, TextAnalyzer};

/// Function words: they match every page and say nothing about the topic.
pub const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "in", "is", "it",
    "its", "me", "my", "of", "on", "or", "so", "that", "the", "this", "to", "was", "we", "what", "when", "where",
    "which", "who", "why", "will", "with", "you", "your",
];

/// Whether `w` is a function word (any case).
pub fn is_stopword(w: &str) -> bool {
    STOPWORDS.contains(&w.to_ascii_lowercase().as_str())
}

/// English inflections of a plain word: plural ↔ singular, -ing ↔ base.
pub fn variants(w: &str) -> Vec<String> {
    let mut v = Vec::new();
    let vowel = |c: char| "aeiou".contains(c);
    if let Some(stem) = w.strip_suffix("ies") {
        v.push(format!("{stem}y"));
    } else if let Some(stem) =
        w.strip_suffix("es").filter(|s| ["s", "x", "z", "ch", "sh"].iter().any(|e| s.ends_with(e)))
    {
        v.push(stem.to_owned());
    } else if let Some(stem) = w.strip_suffix('s').filter(|s| !s.ends_with('s') && s.len() > 2) {
        v.push(stem.to_owned());
    } else if let Some(stem) = w.strip_suffix("ing").filter(|s| s.len() > 2) {
        let b = stem.as_bytes();
        if b.len() > 2 && b[b.len() - 1] == b[b.len() - 2] && !vowel(b[b.len() - 1] as char) {
            v.push(stem[..stem.len() - 1].to_owned()); // running → run
        }
        v.push(format!("{stem}e")); // creating → create
        v.push(stem.to_owned()); // deploying → deploy
    } else if let Some(stem) = w.strip_suffix("ed").filter(|s| s.len() > 2) {
        v.push(stem.to_owned());
        v.push(format!("{stem}e"));
    } else {
        if let Some(stem) = w.strip_suffix('y').filter(|s| s.ends_with(|c: char| !vowel(c))) {
            v.push(format!("{stem}ies"));
        } else if ["s", "x", "z", "ch", "sh"].iter().any(|e| w.ends_with(e)) {
            v.push(format!("{w}es"));
        } else {
            v.push(format!("{w}s"));
        }
        match w.strip_suffix('e') {
            Some(stem) => v.push(format!("{stem}ing")),
            None => v.push(format!("{w}ing")),
        }
    }
    v
}

/// The English stems of `text`'s words, lowercased, function words left out: what
/// the keyword index's English fields hold (tantivy's Snowball stemmer).
pub fn stems(text: &str) -> Vec<String> {
    let mut analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .build();
    let mut out = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty() && !is_stopword(w)) {
        let mut stream = analyzer.token_stream(word);
        while let Some(tok) = stream.next() {
            out.push(tok.text.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_cover_plurals_and_gerunds() {
        let check = |w: &str, want: &[&str]| assert_eq!(variants(w), want, "{w}");
        check("asset", &["assets", "asseting"]);
        check("assets", &["asset"]);
        check("creating", &["create", "creat"]);
        check("create", &["creates", "creating"]);
        check("policies", &["policy"]);
        check("policy", &["policies", "policying"]);
        check("running", &["run", "runne", "runn"]);
        check("indexes", &["index"]);
    }
}
