//! What a hit shows and what the cross-encoder reads.

use crate::chunk_table::ChunkRecord;

/// What the cross-encoder reads for a chunk: its title, heading path and text.
pub(crate) fn passage(c: &ChunkRecord, text: &str) -> String {
    let body = text.get(c.overlap_chars as usize..).unwrap_or(text);
    let heading = c.heading_path.join(" > ");
    format!("{} | {heading}\n{body}", c.title)
}

const SNIPPET_CHARS: usize = 300;

/// The chunk's own text (overlap skipped), cut at a character boundary.
pub(crate) fn snippet(c: &ChunkRecord, text: &str) -> String {
    let body = text.get(c.overlap_chars as usize..).unwrap_or(text).trim();
    clip(body)
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", s[..cut].trim_end()),
        None => s.to_owned(),
    }
}

/// The window of the chunk's own text (whole lines, about [`SNIPPET_CHARS`]) that holds
/// the most of the query's words (`stems`, as [`crate::words::stems`] gives them), the
/// earliest on a tie: the passage that matched, not the chunk's first lines. With no
/// query word in the chunk (a vector hit), its beginning, as [`snippet`]. Beside it,
/// the window's lines within the chunk's own text (`[from, to)`, 0 its first line),
/// when it is a window below that first line.
pub(crate) fn matching(c: &ChunkRecord, text: &str, stems: &[String]) -> (String, Option<(usize, usize)>) {
    let body = text.get(c.overlap_chars as usize..).unwrap_or(text);
    // Leading blank lines are not the chunk's first line: count them out.
    let skipped = body.len() - body.trim_start_matches(['\n', '\r']).len();
    let lead = body[..skipped].matches('\n').count();
    let body = body.trim();
    if stems.is_empty() || body.chars().count() <= SNIPPET_CHARS {
        return (clip(body), None);
    }
    let lines: Vec<&str> = body.lines().collect();
    let has: Vec<Vec<bool>> = lines
        .iter()
        .map(|l| {
            let words = crate::words::stems(l);
            stems.iter().map(|s| words.contains(s)).collect()
        })
        .collect();
    let (mut best, mut from, mut to) = (0, 0, 0);
    for i in 0..lines.len() {
        let (mut len, mut j) = (0, i);
        let mut covered = vec![false; stems.len()];
        while j < lines.len() && (j == i || len + lines[j].chars().count() < SNIPPET_CHARS) {
            len += lines[j].chars().count() + 1;
            for (k, hit) in has[j].iter().enumerate() {
                covered[k] |= hit;
            }
            j += 1;
        }
        let score = covered.iter().filter(|c| **c).count();
        if score > best {
            (best, from, to) = (score, i, j);
        }
    }
    if best == 0 || from == 0 {
        return (clip(body), None);
    }
    let window = lines[from..to].join("\n");
    let tail = if to < lines.len() { "…" } else { "" };
    let shown = match clip(window.trim()) {
        // Cut inside its last line: the window ends where the cut is.
        w if w.ends_with('…') => {
            let kept = w.trim_end_matches('…').lines().count();
            return (format!("…{w}"), Some((lead + from, lead + from + kept.max(1))));
        }
        w => format!("…{w}{tail}"),
    };
    (shown, Some((lead + from, lead + to)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_snippet_is_the_passage_that_matched() {
        let mut text = String::new();
        for i in 0..20 {
            text.push_str(&format!("line {i}: unrelated setup of the C# client and its options\n"));
        }
        text.push_str("To rotate the signing key, call rotate_key with the new secret.\n");
        text.push_str("The old key stays valid for a day.\n");
        let c = crate::chunk_table::ChunkRecord { text: text.clone(), ..Default::default() };
        let stems = crate::words::stems("how do I rotate the signing key");
        let (s, lines) = super::matching(&c, &text, &stems);
        assert!(s.starts_with('…') && s.contains("rotate the signing key"), "{s}");
        assert!(s.chars().count() <= super::SNIPPET_CHARS + 2, "{s}");
        // Its lines: they hold the matching line (20), and the snippet shows each of them.
        let (from, to) = lines.unwrap();
        assert!((from..to).contains(&20), "{from}..{to}: {s}");
        let all: Vec<&str> = text.lines().collect();
        assert!(all[from..to].iter().all(|l| s.contains(l.trim())), "{from}..{to}: {s}");
        // No query word: the beginning, as before.
        assert!(super::matching(&c, &text, &crate::words::stems("zebra")).0.starts_with("line 0"));
        assert!(super::matching(&c, &text, &[]).0.starts_with("line 0"));
    }
}
