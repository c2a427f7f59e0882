//! The `[n]` citations of a streamed answer, checked against the sources given.

use std::collections::BTreeSet;

/// Checks the `[n]` citations of a streamed answer: a number that is not a source
/// given is removed (and remembered), the rest pass through. Text arrives in pieces,
/// so a `[` that may still become a citation is held back until it is decided.
/// Inside backticks (code) nothing is touched: `a[0]` is an index, not a citation.
#[derive(Debug)]
pub struct Citations {
    given: usize,
    /// Of the sources given, the only ones that may be cited (all when None).
    only: Option<BTreeSet<usize>>,
    pending: String,
    backticks: usize,
    pub cited: BTreeSet<usize>,
    /// The numbers as written (a group's 31 digits at most fit a u128 exactly).
    pub removed: BTreeSet<u128>,
}

/// The longest `[1, 2, 3]` group considered a citation.
const MAX_GROUP: usize = 32;

enum Group {
    /// A citation group of this many bytes, with its numbers.
    Complete(usize, Vec<u128>),
    /// Could still become one.
    Open,
    /// Not a citation.
    No,
}

fn group(s: &str) -> Group {
    let mut nums = Vec::new();
    let mut cur: Option<u128> = None;
    for (i, c) in s.char_indices().skip(1) {
        if i > MAX_GROUP {
            return Group::No;
        }
        match c {
            '0'..='9' => {
                let d = u128::from(c as u8 - b'0');
                cur = Some(cur.unwrap_or(0).saturating_mul(10).saturating_add(d));
            }
            ',' | ' ' => {
                if let Some(n) = cur.take() {
                    nums.push(n);
                } else if c == ',' {
                    return Group::No;
                }
            }
            ']' => {
                nums.extend(cur);
                return if nums.is_empty() { Group::No } else { Group::Complete(i + 1, nums) };
            }
            _ => return Group::No,
        }
    }
    Group::Open
}

impl Citations {
    pub fn new(given: usize) -> Citations {
        Citations {
            given,
            only: None,
            pending: String::new(),
            backticks: 0,
            cited: BTreeSet::new(),
            removed: BTreeSet::new(),
        }
    }

    /// A checker that keeps only citations of `only` (sources read and verified).
    pub fn only(only: BTreeSet<usize>) -> Citations {
        Citations { only: Some(only.clone()), ..Citations::new(only.last().copied().unwrap_or(0)) }
    }

    fn allowed(&self, n: u128) -> bool {
        n >= 1
            && n <= self.given as u128
            && self.only.as_ref().is_none_or(|o| usize::try_from(n).is_ok_and(|n| o.contains(&n)))
    }

    /// The text of `piece` that is decided, citations checked.
    pub fn push(&mut self, piece: &str) -> String {
        self.pending.push_str(piece);
        let mut out = String::new();
        loop {
            let Some(i) = self.pending.find(['[', '`']) else {
                out.push_str(&self.pending);
                self.pending.clear();
                break;
            };
            out.push_str(&self.pending[..i]);
            self.pending.drain(..i);
            if self.pending.starts_with('`') {
                self.backticks += 1;
                out.push('`');
                self.pending.drain(..1);
                continue;
            }
            if self.backticks % 2 == 1 {
                out.push('[');
                self.pending.drain(..1);
                continue;
            }
            match group(&self.pending) {
                Group::Open => break,
                Group::No => {
                    out.push('[');
                    self.pending.drain(..1);
                }
                Group::Complete(len, nums) => {
                    let (keep, drop): (Vec<u128>, Vec<u128>) = nums.into_iter().partition(|&n| self.allowed(n));
                    let keep: Vec<usize> = keep.into_iter().filter_map(|n| usize::try_from(n).ok()).collect();
                    self.removed.extend(drop);
                    self.cited.extend(keep.iter().copied());
                    if !keep.is_empty() {
                        let list = keep.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
                        out.push_str(&format!("[{list}]"));
                    } else {
                        let next = &self.pending[len..];
                        if next.is_empty() || next.starts_with(['.', ',', ';', ':', '!', '?', ')', ' ', '\n']) {
                            out.truncate(out.trim_end_matches(' ').len());
                        }
                    }
                    self.pending.drain(..len);
                }
            }
        }
        // Trailing spaces wait: a citation removed next takes its space with it.
        let kept = out.trim_end_matches(' ').len();
        self.pending.insert_str(0, &out[kept..]);
        out.truncate(kept);
        out
    }

    /// What is still held back, as plain text (the stream ended).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams `pieces` through the checker with `given` sources.
    fn check(given: usize, pieces: &[&str], want: &str, removed: &[u128]) {
        let mut c = Citations::new(given);
        let mut out: String = pieces.iter().map(|p| c.push(p)).collect();
        out.push_str(&c.finish());
        assert_eq!(out, want, "{pieces:?}");
        assert_eq!(c.removed.iter().copied().collect::<Vec<_>>(), removed, "{pieces:?}");
    }

    #[test]
    fn citations_to_sources_not_given_are_removed_even_when_split() {
        check(3, &["Use Helm [1]."], "Use Helm [1].", &[]);
        check(3, &["Use Helm [", "1", "]."], "Use Helm [1].", &[]);
        check(3, &["Use Helm [7]."], "Use Helm.", &[7]);
        check(3, &["Use Helm [", "7", "]."], "Use Helm.", &[7]);
        check(3, &["Use Helm ", "[7] now"], "Use Helm now", &[7]);
        check(3, &["A [1, 7] and [2][9] b"], "A [1] and [2] b", &[7, 9]);
        check(3, &["See [the docs](x) and [0]"], "See [the docs](x) and", &[0]);
        check(3, &["`a[5]` stays, ", "[5] goes"], "`a[5]` stays, goes", &[5]);
        check(3, &["an open [12"], "an open [12", &[]);
        check(2, &["[", "2", ",", " ", "3", "]"], "[2]", &[3]);
        check(2, &["[99999999999999999999999]"], "", &[99_999_999_999_999_999_999_999]);
    }

    #[test]
    fn only_the_sources_verified_may_be_cited() {
        let mut c = Citations::only([1, 3].into());
        let out = c.push("A [1], B [2] and C [3][4].") + &c.finish();
        assert_eq!(out, "A [1], B and C [3].");
        assert_eq!(c.removed.iter().copied().collect::<Vec<_>>(), [2, 4]);
    }
}
