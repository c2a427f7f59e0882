//! The extractive answer: the sentences of the sources that best match the question.

use atlas_runtime::ChunkKind;
use std::collections::BTreeSet;

use atlas_runtime::Bundle;

use super::{EXTRACT_SENTENCES, Source};

/// One sentence picked for an extractive answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    pub n: usize,
    pub sentence: String,
    pub score: f32,
}

/// Stems of words a question uses that say nothing about its topic, beyond the
/// function words ([`atlas_runtime::words::STOPWORDS`]).
const TOPICLESS: &[&str] = &["there", "should", "use", "get"];

/// The topic words of `text`, as the keyword index's English stems (`install`,
/// `installs` and `installing` agree).
fn words(text: &str) -> Vec<String> {
    atlas_runtime::words::stems(text).into_iter().filter(|w| !TOPICLESS.contains(&w.as_str())).collect()
}

/// The share of the question's words that `sentence` holds.
fn overlap(question: &[String], sentence: &str) -> f32 {
    if question.is_empty() {
        return 0.0;
    }
    let have: BTreeSet<String> = words(sentence).into_iter().collect();
    let hit = question.iter().filter(|w| have.contains(*w)).count();
    hit as f32 / question.len() as f32
}

/// The prose sentences of a markdown chunk: no code blocks, headings, tables, HTML
/// or GitBook tags; markdown emphasis and link targets stripped.
pub fn sentences(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            prose.push('\n');
            continue;
        }
        if in_fence || t.starts_with('#') || t.starts_with('|') || t.starts_with('<') || t.starts_with("{%") {
            prose.push('\n');
            continue;
        }
        let t = t.trim_start_matches(['-', '*', '>', '+']).trim_start();
        let t = t.split_once(". ").filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit())).map_or(t, |(_, r)| r);
        prose.push_str(t);
        prose.push(if t.is_empty() { '\n' } else { ' ' });
    }
    let prose = strip_markdown(&prose);
    let mut out = Vec::new();
    for para in prose.split('\n') {
        let mut start = 0;
        let b = para.as_bytes();
        for i in 0..b.len() {
            let end = matches!(b[i], b'.' | b'!' | b'?') && (i + 1 == b.len() || b[i + 1] == b' ');
            if end {
                push_sentence(&mut out, &para[start..=i]);
                start = i + 1;
            }
        }
        push_sentence(&mut out, &para[start..]);
    }
    out
}

fn push_sentence(out: &mut Vec<String>, s: &str) {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let letters = s.chars().filter(|c| c.is_alphabetic()).count();
    if (12..=400).contains(&s.len()) && letters * 2 > s.len() && s.split(' ').count() >= 3 {
        out.push(s);
    }
}

/// `[text](url)` → `text`, `**b**`/`__b__` → `b`; inline code keeps its backticks.
fn strip_markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("](") {
        let (before, after) = rest.split_at(i);
        match after.find(')') {
            Some(j) => {
                // The link text opens at the last `[` (an image's at its `![`).
                match before.rfind('[') {
                    Some(k) => {
                        out.push_str(before[..k].strip_suffix('!').unwrap_or(&before[..k]));
                        out.push_str(&before[k + 1..]);
                    }
                    None => out.push_str(before),
                }
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out.replace("**", "").replace("__", "")
}

/// The sentences of the sources that best match `question`. Each candidate is read
/// with its place (title and headings), so "Install › With Helm: `helm repo add …`"
/// answers "how do I install with Helm". A lexical pass keeps the likeliest 24, then
/// the bundle's embedder (when it loads) scores them by meaning, with word overlap
/// and source rank as tie-breakers. Docs offer their prose sentences and the first
/// command of each code block; code offers its symbol and its doc comments.
pub fn extract(bundle: &Bundle, question: &str, sources: &[Source]) -> Vec<Picked> {
    let q = words(question);
    let mut cands: Vec<(Picked, String)> = Vec::new();
    for s in sources {
        let mut own: Vec<String> = if s.hit.kind == ChunkKind::Code {
            let mut v: Vec<String> = s
                .hit
                .symbol
                .iter()
                .map(|sym| {
                    let kind = s.hit.symbol_kind.as_deref().unwrap_or("symbol");
                    format!("`{sym}` ({kind}) in {}, lines {}–{}.", s.hit.path, s.hit.start_line, s.hit.end_line)
                })
                .collect();
            v.extend(sentences(&doc_comment(&s.text)));
            v
        } else {
            let mut v = sentences(&s.text);
            v.extend(commands(&s.text));
            v
        };
        own.dedup();
        let place = s.hit.place();
        for sentence in own {
            let context = format!("{place}: {sentence}");
            let score = overlap(&q, &context) + 0.1 / s.n as f32;
            cands.push((Picked { n: s.n, sentence, score }, context));
        }
    }
    cands.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
    cands.truncate(24);
    if let Ok(enc) = bundle.embedder() {
        let mut texts: Vec<&str> = vec![question];
        texts.extend(cands.iter().map(|c| c.1.as_str()));
        if let Ok(v) = enc.embed_texts(&texts) {
            for ((c, _), e) in cands.iter_mut().zip(&v[1..]) {
                c.score = atlas_runtime::encoder::cosine(&v[0], e) + 0.25 * c.score;
            }
            cands.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
        }
    }
    let mut picked: Vec<Picked> = Vec::new();
    for (c, _) in cands {
        if picked.len() == EXTRACT_SENTENCES {
            break;
        }
        if picked.iter().filter(|p| p.n == c.n).count() < 2 && !picked.iter().any(|p| p.sentence == c.sentence) {
            picked.push(c);
        }
    }
    picked
}

/// The first command of each fenced code block of a markdown chunk, in backticks.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut taken = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("```") || line.starts_with("~~~") {
            in_fence = !in_fence;
            taken = false;
            continue;
        }
        let comment = line.starts_with('#') || line.starts_with("//") || line.starts_with("--");
        if in_fence && !taken && !line.is_empty() && !comment && line.len() <= 160 {
            out.push(format!("`{}`", line.trim_start_matches("$ ")));
            taken = true;
        }
    }
    out
}

/// The comment and docstring lines of a code chunk, as prose.
fn doc_comment(code: &str) -> String {
    code.lines()
        .map(str::trim)
        .filter_map(|l| {
            l.strip_prefix("///")
                .or_else(|| l.strip_prefix("//!"))
                .or_else(|| l.strip_prefix("//"))
                .or_else(|| l.strip_prefix('#'))
                .or_else(|| l.strip_prefix("\"\"\"").map(|r| r.trim_end_matches("\"\"\"")))
                .or_else(|| l.strip_prefix("*"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn render_extract(picked: &[Picked]) -> String {
    if picked.is_empty() {
        return "No LLM answer; no sentence of the sources matches the question well. The sources are listed below.\n"
            .to_owned();
    }
    let mut s = String::from("The passages of the sources that best match the question (extractive, no LLM):\n");
    for p in picked {
        s.push_str(&format!("- {} [{}]\n", p.sentence, p.n));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_are_prose_only() {
        let text = "# Install\n\nYou need a **cluster** first. Then run the [installer](https://x.test).\n\n```bash\nhelm install x. Not prose.\n```\n\n| a | b |\n\n- Use brew on macOS to install it.\n";
        assert_eq!(
            sentences(text),
            ["You need a cluster first.", "Then run the installer.", "Use brew on macOS to install it."]
        );
        assert_eq!(commands(text), ["`helm install x. Not prose.`"]);
        assert_eq!(strip_markdown("See [a] and [the docs](x), ![a chart](c.png)."), "See [a] and the docs, a chart.");
        assert_eq!(commands("```bash\n# add the repo\n$ helm repo add x\nhelm update\n```\n"), ["`helm repo add x`"]);
    }
}
