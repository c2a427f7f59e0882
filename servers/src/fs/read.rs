//! `read_file`'s windows of lines.

use super::{Fs, PathError, READ_MAX_BYTES, READ_MAX_FILE_BYTES, READ_MAX_LINES, ReadFileArgs, shown};
use crate::output::fence;

/// The largest `i <= at` that is a char boundary of `s`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `read_file`'s work, off the async workers: a window of lines (and, for a line over
/// the byte cap, a window of bytes within it). Only regular files are read.
pub(super) fn read_window(fs: &Fs, prefix: &str, a: &ReadFileArgs) -> Result<(String, serde_json::Value), String> {
    let path = fs.root.resolve_listed(&a.path).map_err(|PathError(e)| e)?;
    let shown_path = format!("{prefix}{}", shown(&a.path));
    let meta = std::fs::metadata(&path).map_err(|e| format!("reading {shown_path:?}: {e}"))?;
    if meta.is_dir() {
        return Err(format!("{shown_path:?} is a folder; use list_files with a glob to see its files"));
    }
    if !meta.is_file() {
        return Err(format!("{shown_path:?} is not a regular file (a FIFO, socket or device); only files are served"));
    }
    if meta.len() > READ_MAX_FILE_BYTES {
        return Err(format!(
            "{shown_path:?} is {} bytes, over the {} MiB read limit; use search to find the lines you need",
            meta.len(),
            READ_MAX_FILE_BYTES >> 20
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("reading {shown_path:?}: {e}"))?;
    let raw_rel = fs.root.rel(&path);
    if let Some(want) = fs.hashes.get(&raw_rel)
        && blake3::hash(&bytes).to_hex().as_str() != want
    {
        return Err(format!(
            "{shown_path:?} does not match the bundle's manifest: the bundle is damaged or was tampered with; \
             run `atlas verify` and reinstall it"
        ));
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let rel = format!("{prefix}{}", shown(&raw_rel));
    let start = a.start_line.unwrap_or(1).max(1);
    if total == 0 {
        return Ok((format!("{rel} is empty"), serde_json::json!({"path": rel, "total_lines": 0, "lines": ""})));
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
    let offset = floor_boundary(first, offset);
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
        if out.len() + line.len() + 1 > READ_MAX_BYTES {
            cap = Some(format!("{} KiB", READ_MAX_BYTES / 1024));
            if i == 0 {
                // One line over the cap: return a piece of it, cut at a char boundary.
                let cut = floor_boundary(line, READ_MAX_BYTES - 1).max(line.chars().next().map_or(0, char::len_utf8));
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
    let mut text = fence(&format!("{rel} {range} of {total}"), &out);
    if let (Some(c), Some((l, o))) = (&cap, next) {
        let how = if o > 0 { format!("start_line={l} and byte_offset={o}") } else { format!("start_line={l}") };
        text.push_str(&format!("truncated: the {c} cap was hit at line {end}; call read_file again with {how}\n"));
    }
    let next_json = next.map(|(l, o)| serde_json::json!({"start_line": l, "byte_offset": o}));
    Ok((
        text,
        serde_json::json!({"path": rel, "start_line": start, "byte_offset": offset, "end_line": end,
            "total_lines": total, "truncated": cap.is_some(), "next": next_json, "text": out}),
    ))
}
