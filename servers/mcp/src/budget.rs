//! Replies that fit the client's budget. Clients cap a tool's output (25,000 tokens by
//! default in the common ones), and a reply past the cap is cut where the client
//! decides, or refused. Every tool that returns text takes `max_tokens` (default
//! [`DEFAULT_MAX_TOKENS`]); a reply holds whole items (hits, lines, matches,
//! definitions) while they fit, and ends with a `next_cursor` that the same tool,
//! called again with the same arguments and `cursor`, continues from exactly.
//!
//! Tokens are estimated, not counted: one per [`BYTES_PER_TOKEN`] bytes of the reply
//! (its text and its structured content together). English prose runs about four
//! bytes a token in the tokenizers clients use, code and non-Latin text fewer, so the
//! estimate errs on the side of a smaller reply.

/// The budget and continuation every text-returning tool takes (docs/servers.md,
/// "Budgets").
#[derive(Debug, Default, serde::Deserialize, rmcp::schemars::JsonSchema)]
pub struct Budget {
    /// The most tokens the reply may hold (estimated: one per 3 bytes; default 8000,
    /// 250 to 200000). Past it the reply ends with a `next_cursor`.
    #[serde(default, deserialize_with = "crate::lenient::opt_usize")]
    pub max_tokens: Option<usize>,
    /// The `next_cursor` of an earlier reply of this tool, with the same arguments:
    /// continue where it stopped.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// The budget when a call names none: well under the 25,000 tokens clients allow.
pub const DEFAULT_MAX_TOKENS: usize = 8_000;
/// The smallest budget a call may ask for: a reply's frame and one item.
pub const MIN_MAX_TOKENS: usize = 250;
/// The largest budget a call may ask for.
pub const MAX_MAX_TOKENS: usize = 200_000;
/// How many bytes of a reply count as one token.
pub const BYTES_PER_TOKEN: usize = 3;

/// The estimated tokens of `bytes` bytes of reply.
pub fn tokens(bytes: usize) -> usize {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// The budget of a call, checked: the default without one, a tool error (what to do)
/// for one out of range.
pub fn resolve(max_tokens: Option<usize>) -> Result<usize, String> {
    match max_tokens {
        None => Ok(DEFAULT_MAX_TOKENS),
        Some(n) if (MIN_MAX_TOKENS..=MAX_MAX_TOKENS).contains(&n) => Ok(n),
        Some(n) => Err(format!(
            "max_tokens {n} is out of range; pass {MIN_MAX_TOKENS} to {MAX_MAX_TOKENS} (default {DEFAULT_MAX_TOKENS})"
        )),
    }
}

/// What a reply has spent of its budget, in bytes of text and of structured content.
#[derive(Debug, Clone, Copy)]
pub struct Spend {
    limit: usize,
    used: usize,
}

impl Spend {
    /// A budget of `max_tokens` with `fixed` bytes already spent (the reply's frame).
    pub fn new(max_tokens: usize, fixed: usize) -> Spend {
        Spend { limit: max_tokens * BYTES_PER_TOKEN, used: fixed }
    }

    /// Spends `bytes` when they fit, and says whether they did.
    pub fn take(&mut self, bytes: usize) -> bool {
        if self.used + bytes > self.limit {
            return false;
        }
        self.used += bytes;
        true
    }

    /// The bytes left.
    pub fn left(&self) -> usize {
        self.limit.saturating_sub(self.used)
    }
}

/// One item of a paged reply: its lines of text and its structured form.
#[derive(Debug, Clone)]
pub struct Piece<T> {
    pub text: String,
    pub item: T,
}

/// The size of a reply as it reaches the client's context: its text blocks, its
/// structured content and its other blocks (resource links) as JSON.
pub fn reply_bytes(r: &rmcp::model::CallToolResult) -> usize {
    let content: usize = r.content.iter().map(|c| c.as_text().map_or_else(|| json_bytes(c), |t| t.text.len())).sum();
    content + r.structured_content.as_ref().map_or(0, json_bytes)
}

/// Whether a reply keeps to `max_tokens`.
pub fn fits(r: &rmcp::model::CallToolResult, max_tokens: usize) -> bool {
    reply_bytes(r) <= max_tokens * BYTES_PER_TOKEN
}

/// A reply of whole items that keeps to `max_tokens`. `pieces` are the items from the
/// cursor's position `from` on (of `total` in all), made only as far as the budget
/// reaches; `render` makes the reply from the first pieces and the `next_cursor` that
/// follows them (bound to `key`). The estimate (each piece's text and JSON) picks how
/// many to try; the real reply is then measured and shortened until it fits. One
/// piece always comes: a tool refuses a budget too small for one (see [`fits`]) or
/// shows it cut, as `get_chunk` does.
pub fn page<T: serde::Serialize>(
    max_tokens: usize,
    from: usize,
    total: usize,
    pieces: impl IntoIterator<Item = Piece<T>>,
    key: &str,
    render: impl Fn(&[Piece<T>], Option<String>) -> Result<rmcp::model::CallToolResult, rmcp::ErrorData>,
) -> Result<rmcp::model::CallToolResult, rmcp::ErrorData> {
    let limit = max_tokens * BYTES_PER_TOKEN;
    let (mut kept, mut used) = (Vec::new(), 0);
    for p in pieces {
        used += p.text.len() + json_bytes(&p.item);
        if used > limit && !kept.is_empty() {
            break;
        }
        kept.push(p);
    }
    let mut n = kept.len();
    loop {
        let next = (from + n < total).then(|| Cursor { at: from + n, within: 0 }.encode(key));
        let r = render(&kept[..n], next)?;
        let bytes = reply_bytes(&r);
        if n <= 1 || bytes <= limit {
            return Ok(r);
        }
        // Drop as many items as the overshoot is worth, at least one.
        let per = (bytes / n).max(1);
        n -= (bytes - limit).div_ceil(per).clamp(1, n - 1);
    }
}

/// A reply of lists (sections, sources) cut to keep to `max_tokens`: `render(cap)`
/// makes it with at most `cap` items of each list, saying what it left out; the cap
/// halves from `longest` until the reply fits. When not even none fits, a tool error
/// says how large a budget the reply needs.
pub fn fit_lists(
    max_tokens: usize,
    longest: usize,
    render: impl Fn(usize) -> Result<rmcp::model::CallToolResult, rmcp::ErrorData>,
) -> Result<rmcp::model::CallToolResult, rmcp::ErrorData> {
    let mut cap = longest;
    loop {
        let r = render(cap)?;
        if fits(&r, max_tokens) {
            return Ok(r);
        }
        if cap == 0 {
            return Ok(crate::output::error(format!(
                "max_tokens {max_tokens} is too small for this reply ({} needed); raise it",
                tokens(reply_bytes(&r))
            )));
        }
        cap /= 2;
    }
}

/// The line a reply holds when `cap` of `total` items of a list were shown.
pub fn left_out(what: &str, cap: usize, total: usize) -> String {
    if cap >= total {
        return String::new();
    }
    format!("({} more {what} left out at this budget; raise max_tokens to see them)\n", total - cap)
}

/// The size of `v` as the client receives it (compact JSON).
pub fn json_bytes<T: serde::Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// A continuation point: where the next reply starts, bound to the call it continues
/// (the tool, its other arguments, the libraries served) so that a cursor from
/// another call, or one the libraries have moved on from, is refused rather than
/// answered wrongly. Agents treat it as opaque.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// How many items (or, for a file, where in it) the earlier replies covered.
    pub at: usize,
    /// A second position inside the item at `at` (a byte offset within a line), 0
    /// when none.
    pub within: usize,
}

/// The binding of a cursor to its call: 16 hex digits of a blake3 of the tool, its
/// arguments (without `cursor` and `max_tokens`) and what it reads.
pub fn call_key(tool: &str, parts: &[&str]) -> String {
    let mut h = atlas_runtime::hash::Blake3::new();
    h.update(tool.as_bytes());
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes()).update(p.as_bytes());
    }
    h.hex()[..16].to_owned()
}

impl Cursor {
    /// The cursor's text: `<at>.<within>.<key>`.
    pub fn encode(&self, key: &str) -> String {
        format!("{}.{}.{key}", self.at, self.within)
    }

    /// Reads a cursor this call gave out; a tool error for any other.
    pub fn decode(s: &str, key: &str) -> Result<Cursor, String> {
        let bad = || {
            format!(
                "cursor {} does not continue this call: pass the next_cursor of the same tool with the same arguments, or drop it to start over",
                crate::output::inert(&format!("{s:?}"))
            )
        };
        let mut parts = s.trim().splitn(3, '.');
        let (Some(at), Some(within), Some(k)) = (parts.next(), parts.next(), parts.next()) else { return Err(bad()) };
        if k != key {
            return Err(bad());
        }
        let at = at.parse().map_err(|_| bad())?;
        let within = within.parse().map_err(|_| bad())?;
        Ok(Cursor { at, within })
    }
}

/// The starting point of a call: its cursor's, or the beginning.
pub fn start(cursor: Option<&str>, key: &str) -> Result<Cursor, String> {
    match cursor.filter(|c| !c.trim().is_empty()) {
        Some(c) => Cursor::decode(c, key),
        None => Ok(Cursor { at: 0, within: 0 }),
    }
}

/// The line a reply ends with when it stopped at the budget.
pub fn more_line(next: &str, max_tokens: usize) -> String {
    format!(
        "more: this reply stopped at its budget of {max_tokens} tokens; call again with cursor={next:?} for the rest\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_continues_only_its_own_call() {
        let key = call_key("search_docs", &["install", "hybrid"]);
        let c = Cursor { at: 7, within: 0 };
        assert_eq!(Cursor::decode(&c.encode(&key), &key).unwrap(), c);
        let other = call_key("search_docs", &["install", "keyword"]);
        assert!(Cursor::decode(&c.encode(&key), &other).is_err());
        assert!(Cursor::decode("7.0", &key).is_err());
        assert!(Cursor::decode("x.0.abc", &key).is_err());
        assert_eq!(start(None, &key).unwrap(), Cursor { at: 0, within: 0 });
    }

    #[test]
    fn budgets_are_checked_and_spent_in_bytes() {
        assert_eq!(resolve(None).unwrap(), DEFAULT_MAX_TOKENS);
        assert!(resolve(Some(5)).is_err());
        assert!(resolve(Some(MAX_MAX_TOKENS + 1)).is_err());
        let mut s = Spend::new(100, 200);
        assert!(s.take(100));
        assert!(!s.take(1));
        assert_eq!(s.left(), 0);
        assert_eq!(tokens(7), 3);
    }
}
