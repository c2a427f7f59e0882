//! Cutting text at a byte budget or a character count without splitting a character:
//! the one place the pipeline and the servers do it.

/// The largest index at most `max` that starts a character of `s` (`s.len()` when
/// it is shorter): where to cut a string at a byte budget.
pub fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    (0..=max).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0)
}

/// [`floor_char_boundary`], but never less than the first character: a cut that
/// must make progress (a reply continued from where it stopped).
pub fn floor_char_boundary_nonempty(s: &str, max: usize) -> usize {
    floor_char_boundary(s, max).max(s.chars().next().map_or(0, char::len_utf8))
}

/// The first `n` characters of `s` and `…` when it is longer, else `s`: a line or a
/// paragraph cut for display.
pub fn clip_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

/// Unicode's invisible formatting characters (bidi overrides and isolates, zero-width
/// joiners, the BOM, the soft hyphen, interlinear annotation marks, and the tag
/// characters U+E0000–E007F, which spell ASCII an agent reads and a person never sees)
/// and its line and paragraph separators (U+2028,
/// U+2029: a line break to some readers, nothing to others): they can make a line
/// read other than it is. With `char::is_control` (C0, DEL and C1, U+0085 among them)
/// it is every character that [`printable`], [`terminal_safe`], the servers' inert
/// line and their file names keep off a line.
pub fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
            | '\u{00AD}'
            | '\u{061C}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// `line` for a terminal: control characters (escape sequences, carriage returns,
/// newlines) and invisible formatting characters become spaces; length stays.
pub fn printable(line: &str) -> String {
    line.chars().map(|c| if c.is_control() || is_invisible_format(c) { ' ' } else { c }).collect()
}

/// Text for a terminal, whatever it holds: newlines and tabs stay; other control
/// characters (an escape sequence's ESC, a carriage return) become spaces; invisible
/// formatting characters are written as `\uXXXX` (a surrogate pair past the BMP, the
/// tag characters), which reads the same inside a JSON string, so JSON output keeps
/// its values.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    let odd = |c: char| (c.is_control() && c != '\n' && c != '\t') || is_invisible_format(c);
    if !s.chars().any(odd) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_invisible_format(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{:04X}", *unit));
            }
        } else if odd(c) {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_text_holds_no_escape_and_json_keeps_its_value() {
        assert_eq!(terminal_safe("a\x1b[31mb\r\n\tc"), "a [31mb \n\tc");
        let json = serde_json::to_string(&serde_json::json!({"t": "x\u{202E}y"})).unwrap();
        let safe = terminal_safe(&json);
        assert_eq!(safe, r#"{"t":"x\u202Ey"}"#);
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["t"], "x\u{202E}y");
        assert!(matches!(terminal_safe("plain"), std::borrow::Cow::Borrowed(_)));
        // Tag characters (text an agent reads but a person never sees) past the BMP:
        // a surrogate pair, which JSON reads back as the same character.
        let json = serde_json::to_string(&serde_json::json!({"t": "a\u{E0041}\u{E0049}b"})).unwrap();
        let safe = terminal_safe(&json);
        assert_eq!(safe, r#"{"t":"a\uDB40\uDC41\uDB40\uDC49b"}"#);
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["t"], "a\u{E0041}\u{E0049}b");
        assert_eq!(printable("x\u{E0041}y\u{FFF9}"), "x y ");
    }

    #[test]
    fn line_and_paragraph_separators_and_bidi_controls_never_reach_a_line() {
        for c in ['\u{2028}', '\u{2029}', '\u{0085}', '\u{202E}', '\u{2066}', '\u{200F}', '\u{061C}', '\u{1b}'] {
            let s = format!("a{c}b");
            assert_eq!(printable(&s), "a b", "{:04X}", u32::from(c));
            assert!(!terminal_safe(&s).contains(c), "{:04X}", u32::from(c));
        }
        // A JSON reader gets the same value back.
        let json = serde_json::to_string(&serde_json::json!({"t": "x\u{2028}y"})).unwrap();
        let back: serde_json::Value = serde_json::from_str(&terminal_safe(&json)).unwrap();
        assert_eq!(back["t"], "x\u{2028}y");
    }

    #[test]
    fn cuts_fall_between_characters() {
        let s = "aé€😀";
        assert_eq!(floor_char_boundary(s, 100), s.len());
        assert_eq!(floor_char_boundary(s, 2), 1);
        assert_eq!(floor_char_boundary(s, 3), 3);
        assert_eq!(floor_char_boundary(s, 5), 3);
        assert_eq!(floor_char_boundary("€", 1), 0);
        assert_eq!(floor_char_boundary_nonempty("€x", 1), 3);
        assert_eq!(floor_char_boundary_nonempty("", 0), 0);
        assert_eq!(clip_chars("aé€😀", 2), "aé…");
        assert_eq!(clip_chars("aé", 2), "aé");
    }
}
