//! English words: the function words searches drop, the inflections a keyword query
//! adds, the stems the summariser compares (the keyword index's own stemmer), and a
//! count printed with its noun ([`count`]), singular for one.

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

/// `n` and its noun, singular for one and plural otherwise (`1 library`, `3
/// libraries`, `0 matches`): the one way a count is printed with its noun.
pub fn count(n: impl TryInto<i128>, noun: &str) -> String {
    let n: i128 = n.try_into().unwrap_or(i128::MAX);
    if n == 1 { format!("1 {noun}") } else { format!("{n} {}", plural(noun)) }
}

/// `one` when `n` is one, else `many`: a verb that agrees with a count (`is`/`are`).
pub fn agree<'a>(n: impl TryInto<i128>, one: &'a str, many: &'a str) -> &'a str {
    if n.try_into().is_ok_and(|n: i128| n == 1) { one } else { many }
}

/// A regular English plural of a noun (or of a phrase's last word): `library` →
/// `libraries`, `match` → `matches`, `day` → `days`, `file` → `files`.
pub fn plural(noun: &str) -> String {
    let vowel = |c: char| "aeiouAEIOU".contains(c);
    match noun.strip_suffix('y') {
        Some(stem) if stem.chars().last().is_some_and(|c| c.is_alphabetic() && !vowel(c)) => format!("{stem}ies"),
        _ if ["s", "x", "z", "ch", "sh"].iter().any(|e| noun.ends_with(e)) => format!("{noun}es"),
        _ => format!("{noun}s"),
    }
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

/// The American spellings a British-spelt word may stand for (`behaviour` →
/// `behavior`, `initialise` → `initialize`, `analysed` → `analyzed`, `centre` →
/// `center`, `catalogue` → `catalog`, `modelling` → `modeling`, `licence` →
/// `license`), for a lowercase ASCII word. Candidates, not answers: some are no
/// word at all (`promise` → `promize`), so a caller keeps one only where the corpus
/// uses it more than the word as typed.
pub fn american_spellings(w: &str) -> Vec<String> {
    let mut out = Vec::new();
    if w.len() < 5 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return out;
    }
    // `-ise`/`-isation` → `-ize`/`-ization`, `-yse` → `-yze`: the suffix after `is`/`ys`.
    const IZE: &[&str] = &["e", "ed", "es", "ing", "er", "ers", "ation", "ations", "ational", "able"];
    for (from, to) in [("is", "iz"), ("ys", "yz")] {
        for tail in IZE {
            if let Some(stem) = w.strip_suffix(tail).and_then(|s| s.strip_suffix(from)).filter(|s| s.len() >= 2) {
                out.push(format!("{stem}{to}{tail}"));
            }
        }
    }
    // `-our` → `-or`, with what follows (`behaviours`, `favourite`, `colouring`).
    if let Some(at) = w.rfind("our").filter(|&at| at >= 3) {
        out.push(format!("{}or{}", &w[..at], &w[at + 3..]));
    }
    for (from, to) in [("tre", "ter"), ("tres", "ters"), ("ogue", "og"), ("ogues", "ogs"), ("ence", "ense")] {
        if let Some(stem) = w.strip_suffix(from).filter(|s| s.len() >= 2) {
            // `-ence` → `-ense` only for the nouns that differ (`licence`, `defence`).
            if from != "ence" || ["lic", "def", "off", "pret"].contains(&stem) {
                out.push(format!("{stem}{to}"));
            }
        }
    }
    // A doubled `l` after the vowel of a later syllable, before an ending:
    // `cancelled`, `modelling`, `labeller` (not `filled`, `called`).
    let vowel = |b: &u8| b"aeiou".contains(b);
    for tail in ["ed", "ing", "er", "ers"] {
        if let Some(stem) = w.strip_suffix(tail).and_then(|s| s.strip_suffix("ll"))
            && let Some((last, before)) = stem.as_bytes().split_last()
            && vowel(last)
            && before.iter().any(vowel)
        {
            out.push(format!("{stem}l{tail}"));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The English stems of `text`'s words, lowercased, function words left out: what
/// the keyword index's English fields hold (tantivy's Snowball stemmer).
pub fn stems(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_stem(text, |_, stem| out.push(stem));
    out
}

/// Each of `text`'s words as written, with its stems ([`stems`]; a word joined by `_`
/// gives one per part), function words left out.
pub fn stemmed_words(text: &str) -> Vec<(&str, Vec<String>)> {
    let mut out: Vec<(&str, Vec<String>)> = Vec::new();
    each_stem(text, |word, stem| match out.last_mut() {
        // Pointer equality: the same word of `text`, not an equal one elsewhere.
        Some((w, stems)) if std::ptr::eq(*w, word) => stems.push(stem),
        _ => out.push((word, vec![stem])),
    });
    out
}

/// Calls `f` with each word of `text` (function words left out) and each of its stems.
fn each_stem<'t>(text: &'t str, mut f: impl FnMut(&'t str, String)) {
    let mut analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .build();
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty() && !is_stopword(w)) {
        let mut stream = analyzer.token_stream(word);
        while let Some(tok) = stream.next() {
            f(word, tok.text.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_word_keeps_its_stems() {
        let w = stemmed_words("How do I run the tests of snake_case tests?");
        let got: Vec<(&str, Vec<&str>)> = w.iter().map(|(w, s)| (*w, s.iter().map(String::as_str).collect())).collect();
        assert_eq!(
            got,
            [
                ("run", vec!["run"]),
                ("tests", vec!["test"]),
                ("snake_case", vec!["snake", "case"]),
                ("tests", vec!["test"])
            ]
        );
        assert_eq!(stems("How do I run the tests of snake_case tests?"), ["run", "test", "snake", "case", "test"]);
    }

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

    #[test]
    fn a_count_is_printed_with_its_noun_singular_for_one_and_plural_otherwise() {
        assert_eq!(count(1, "library"), "1 library");
        assert_eq!(count(2, "library"), "2 libraries");
        assert_eq!(count(0, "match"), "0 matches");
        assert_eq!(count(1, "match"), "1 match");
        assert_eq!(count(7, "day"), "7 days");
        assert_eq!(count(3, "query"), "3 queries");
        assert_eq!(count(2, "entry"), "2 entries");
        assert_eq!(count(5, "licence-header line"), "5 licence-header lines");
        assert_eq!(count(1, "hit"), "1 hit");
        assert_eq!(
            (count(1u64, "run"), count(2i32, "run"), count(3usize, "run")),
            ("1 run".into(), "2 runs".into(), "3 runs".into())
        );
        assert_eq!(agree(1, "is", "are"), "is");
        assert_eq!(agree(4, "is", "are"), "are");
    }

    #[test]
    fn british_spellings_have_american_candidates() {
        let check = |w: &str, want: &[&str]| assert_eq!(american_spellings(w), want, "{w}");
        check("behaviour", &["behavior"]);
        check("neighbours", &["neighbors"]);
        check("favourite", &["favorite"]);
        check("initialise", &["initialize"]);
        check("serialised", &["serialized"]);
        check("quantisation", &["quantization"]);
        check("organisational", &["organizational"]);
        check("analyse", &["analyze"]);
        check("centre", &["center"]);
        check("catalogue", &["catalog"]);
        check("licence", &["license"]);
        check("modelling", &["modeling"]);
        check("cancelled", &["canceled"]);
        // Words no rule touches, or too short to be a spelling at all.
        check("presence", &[]);
        check("your", &[]);
        check("four", &[]);
        check("install", &[]);
        check("Colour", &[]);
        // Candidates the corpus must rule out.
        check("filled", &[]);
        check("called", &[]);
        check("promise", &["promize"]);
        check("installed", &["instaled"]);
    }
}
