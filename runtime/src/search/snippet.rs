//! What a hit shows and what the cross-encoder reads.

use crate::chunk_table::ChunkRecord;

/// What the cross-encoder reads for a chunk: its title, heading path and text.
pub(super) fn passage(c: &ChunkRecord, text: &str) -> String {
    let body = text.get(c.overlap_chars as usize..).unwrap_or(text);
    let heading = c.heading_path.join(" > ");
    format!("{} | {heading}\n{body}", c.title)
}

const SNIPPET_CHARS: usize = 300;

/// The chunk's own text (overlap skipped), cut at a character boundary.
pub(super) fn snippet(c: &ChunkRecord, text: &str) -> String {
    let body = text.get(c.overlap_chars as usize..).unwrap_or(text).trim();
    match body.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", body[..cut].trim_end()),
        None => body.to_owned(),
    }
}
