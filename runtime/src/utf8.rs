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

#[cfg(test)]
mod tests {
    use super::*;

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
