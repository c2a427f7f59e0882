//! `read_file`'s windows of lines.

use atlas_runtime::utf8::{floor_char_boundary, floor_char_boundary_nonempty};
use rmcp::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Fs, READ_MAX_BYTES, READ_MAX_LINES, ReadFileArgs};
use crate::budget::{Cursor, call_key};
use crate::mirror::{read_checked, shown};
use crate::output::fence;

/// `read_file`'s work, off the async workers: a window of lines (and, for a line over
/// the byte cap, a window of bytes within it), within `budget` bytes of reply.
pub(super) fn read_window(fs: &Fs, prefix: &str, a: &ReadFileArgs, budget: usize) -> Result<(String, ReadOut), String> {
    let shown_path = format!("{prefix}{}", shown(&a.path));
    let (bytes, raw_rel) = read_checked(fs, &a.path, &shown_path)?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let rel = format!("{prefix}{}", shown(&raw_rel));
    let start = a.start_line.unwrap_or(1).max(1);
    if total == 0 {
        let out = ReadOut { path: rel.clone(), total_lines: 0, ..ReadOut::default() };
        return Ok((format!("{rel} is empty"), out));
    }
    if start > total {
        return Err(format!("start_line {start} is past the end: {shown_path:?} has {total} lines"));
    }
    let want_end = a.end_line.unwrap_or(total).min(total);
    if want_end < start {
        return Err(format!("end_line {want_end} is before start_line {start}"));
    }
    let offset = a.byte_offset.unwrap_or(0);
    let first = lines[start - 1];
    if offset > 0 && offset >= first.len() {
        return Err(format!("byte_offset {offset} is past the end of line {start} ({} bytes)", first.len()));
    }
    let offset = floor_char_boundary(first, offset);
    // The lines come back twice (the fenced text and the structured `text`), and the
    // reply's frame takes some: what is left of the budget, halved, caps the window;
    // at the smallest budgets, a line's worth all the same (not one byte).
    let budget_cap = budget.saturating_sub(READ_FRAME_BYTES).max(2 * READ_MIN_WINDOW_BYTES) / 2;
    let byte_cap = READ_MAX_BYTES.min(budget_cap.max(1));
    let cap_name = if byte_cap < READ_MAX_BYTES {
        "budget (max_tokens)".to_owned()
    } else {
        format!("{} KiB", READ_MAX_BYTES / 1024)
    };
    let mut out = String::new();
    let mut end = start - 1;
    let mut cap = None;
    // Where to continue: (line, byte offset within it).
    let mut next: Option<(usize, usize)> = None;
    for (i, line) in lines[start - 1..want_end].iter().enumerate() {
        let line = if i == 0 { &line[offset..] } else { line };
        if i >= READ_MAX_LINES {
            cap = Some(format!("{READ_MAX_LINES} lines"));
            next = Some((start + i, 0));
            break;
        }
        if out.len() + line.len() + 1 > byte_cap {
            cap = Some(cap_name);
            if i == 0 {
                // One line over the cap: return a piece of it, cut at a char boundary.
                let cut = floor_char_boundary_nonempty(line, byte_cap.saturating_sub(1));
                out.push_str(&line[..cut]);
                out.push('\n');
                end = start;
                next = Some((start, offset + cut));
            } else {
                next = Some((start + i, 0));
            }
            break;
        }
        out.push_str(line);
        out.push('\n');
        end = start + i;
    }
    let range = match next {
        Some((l, o)) if l == end && o > 0 => format!("line {end} bytes {offset}-{o} of {}", lines[end - 1].len()),
        _ if offset > 0 => format!("lines {start}-{end} (from byte {offset} of line {start})"),
        _ => format!("lines {start}-{end}"),
    };
    let mut text = fence(&format!("{rel} {range} of {total}"), &out).to_string();
    let key = read_key(&format!("{prefix}{}", a.path), a.end_line);
    let next_cursor = next.map(|(l, o)| Cursor { at: l, within: o }.encode(&key));
    if let (Some(c), Some((l, o)), Some(cur)) = (&cap, next, &next_cursor) {
        let how = if o > 0 { format!("start_line={l} and byte_offset={o}") } else { format!("start_line={l}") };
        text.push_str(&format!(
            "truncated: the {c} cap was hit at line {end}; call read_file again with {how} (or cursor={cur:?})\n"
        ));
    }
    Ok((
        text,
        ReadOut {
            path: rel,
            start_line: start,
            byte_offset: offset,
            end_line: end,
            total_lines: total,
            truncated: cap.is_some(),
            next: next.map(|(start_line, byte_offset)| NextRead { start_line, byte_offset }),
            next_cursor,
            text: out,
        },
    ))
}

/// What the reply of `read_file` spends besides the lines themselves (the fence, the
/// notes, the structured fields), in bytes.
const READ_FRAME_BYTES: usize = 900;
/// The least of a file one read returns, whatever its budget: a line's worth.
const READ_MIN_WINDOW_BYTES: usize = 240;

/// The cursor binding of a read: the file and where it was asked to end.
pub(super) fn read_key(path: &str, end_line: Option<usize>) -> String {
    call_key("read_file", &[path, &end_line.map_or(String::new(), |e| e.to_string())])
}

/// Where a read continues.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, JsonSchema)]
pub struct NextRead {
    pub start_line: usize,
    pub byte_offset: usize,
}

/// `read_file`'s structured reply.
#[derive(Debug, Default, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReadOut {
    /// The file, as the tools name it.
    pub path: String,
    pub start_line: usize,
    /// Where within `start_line` the text starts, in bytes.
    pub byte_offset: usize,
    pub end_line: usize,
    pub total_lines: usize,
    /// A cap (lines, bytes or the budget) stopped the window before `end_line` was reached.
    pub truncated: bool,
    pub next: Option<NextRead>,
    /// Pass it back as `cursor` to continue.
    pub next_cursor: Option<String>,
    /// The lines, verbatim.
    pub text: String,
}
