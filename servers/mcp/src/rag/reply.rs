//! How the rag tools' replies are written: a hit's text block, its structured form and
//! resource link, and a `get_chunk` reply within a budget.

use atlas_runtime::Hit;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};

use super::wire::{ChunkOut, Detail, HitOut};
use crate::budget::{self, Cursor, Spend};
use crate::output::{self, fence, inert};

/// The hit's text block: where it is, how to cite it, and (full) its snippet fenced.
pub(super) fn hit_text(i: usize, h: &Hit, detail: Detail) -> String {
    // Every corpus-derived string outside the fence is made inert (one line, capped).
    let place = inert(&if h.heading_path.is_empty() { h.title.clone() } else { h.heading_path.join(" > ") });
    let sym = h.symbol.as_deref().map(|s| format!(" symbol {}", inert(s))).unwrap_or_default();
    let origin = h.origin.map(|o| format!(", {}", o.label())).unwrap_or_default();
    let mut text = format!(
        "{}. [{:.4}] {place} ({}{sym}, {}{origin})\n   citation: {}\n   chunk_id: {}\n",
        i + 1,
        h.score,
        h.kind,
        inert(&h.library),
        inert(&h.citation()),
        inert(&h.chunk_id)
    );
    if detail == Detail::Full {
        // The snippet's own lines when it is a window of the chunk, else the chunk's.
        let [first, last] = h.snippet_lines.unwrap_or([h.start_line, h.end_line]);
        text.push_str(&fence(&format!("snippet of {} lines {first}-{last}", h.path), &h.snippet));
    }
    text
}

/// A hit as the structured reply holds it ([`HitOut`]: never its snippet's text), and
/// (`brief`) without its links.
pub(super) fn hit_out(h: &Hit, detail: Detail) -> HitOut {
    let full = detail == Detail::Full;
    HitOut {
        score: h.score,
        chunk_id: h.chunk_id.clone(),
        library: h.library.clone(),
        path: h.path.clone(),
        title: h.title.clone(),
        heading_path: h.heading_path.clone(),
        start_line: h.start_line,
        end_line: h.end_line,
        snippet_lines: h.snippet_lines,
        kind: h.kind.as_str().to_owned(),
        language: h.language.clone(),
        section: h.section.clone(),
        symbol: h.symbol.clone(),
        symbol_kind: h.symbol_kind.clone(),
        origin: h.origin.map(|o| o.as_str().to_owned()),
        mentions: if full { h.mentions.clone() } else { Vec::new() },
        mentioned_in: if full { h.mentioned_in.clone() } else { Vec::new() },
        citation: h.citation(),
        uri: crate::resources::uri(&h.library, &h.path),
    }
}

/// The hit's file as a resource link (a content block an agent can open).
pub(super) fn hit_link(h: &Hit) -> ContentBlock {
    ContentBlock::resource_link(crate::resources::resource(&h.library, &h.path))
}

/// The least of a chunk's text one `get_chunk` reply carries (or all that is left), in
/// bytes: a budget too small for it is refused, not paged a few bytes at a time.
pub(super) const MIN_CHUNK_PIECE_BYTES: usize = 256;

/// A `get_chunk` reply: the chunk from byte `from` and its neighbours, in a budget of
/// `max` tokens of which `frame` bytes go to everything but the texts.
pub(super) fn chunk_reply(
    mut ctx: atlas_runtime::bundle::ChunkContext,
    from: usize,
    frame: usize,
    max: usize,
    key: &str,
) -> Result<CallToolResult, ErrorData> {
    let mut spend = Spend::new(max, frame);
    // The requested chunk from `from` (a byte offset, at a line start), cut at the
    // last whole line that fits when it does not fit whole. Its text comes twice
    // (fenced and structured), so it may take half of what is left.
    let full = std::mem::take(&mut ctx.chunk.text);
    let rest = full.get(from..).unwrap_or("");
    let room = spend.left() / 2;
    let need = MIN_CHUNK_PIECE_BYTES.min(rest.len());
    if room < need {
        let want = budget::tokens(frame + 2 * need).div_ceil(50) * 50;
        return Ok(output::error(format!(
            "max_tokens {max} is too small to show this chunk (its citation and fields take most of it); pass max_tokens {want} or more"
        )));
    }
    let (piece, next) = if rest.len() <= room {
        (rest.to_owned(), None)
    } else {
        // At the last line end that keeps at least half the room, else mid-line.
        let cut = rest[..atlas_runtime::utf8::floor_char_boundary(rest, room)].rfind('\n').map_or(0, |i| i + 1);
        let cut = if cut < room / 2 { atlas_runtime::utf8::floor_char_boundary_nonempty(rest, room) } else { cut };
        (rest[..cut].to_owned(), Some(from + cut))
    };
    spend.take(piece.len() * 2);
    ctx.chunk.text = piece;
    // Neighbours, nearest first, while they fit (none when the chunk was cut, or
    // when continuing it).
    let mut before = std::mem::take(&mut ctx.before);
    let mut after = std::mem::take(&mut ctx.after);
    if next.is_none() && from == 0 {
        // Each side grows outwards from the chunk and stops at the first neighbour
        // that does not fit, so what is shown is contiguous.
        let cost = |v: &atlas_runtime::bundle::ChunkView| v.text.len() * 2 + budget::json_bytes(&v.hit) * 2;
        let (mut nb, mut na) = (0, 0);
        let (mut open_before, mut open_after) = (true, true);
        while open_before || open_after {
            open_after = open_after && na < after.len() && spend.take(cost(&after[na]));
            na += usize::from(open_after);
            open_before = open_before && nb < before.len() && spend.take(cost(&before[before.len() - 1 - nb]));
            nb += usize::from(open_before);
        }
        before.drain(..before.len() - nb);
        after.truncate(na);
    } else {
        before.clear();
        after.clear();
    }
    ctx.before = before;
    ctx.after = after;
    let next_cursor = next.map(|at| Cursor { at, within: 0 }.encode(key));
    let mut text = String::new();
    for v in ctx.before.iter().chain(std::iter::once(&ctx.chunk)).chain(&ctx.after) {
        let marker = if v.hit.chunk_id == ctx.chunk.hit.chunk_id { "requested chunk" } else { "neighbour" };
        let part = match (v.hit.chunk_id == ctx.chunk.hit.chunk_id, from, next) {
            (true, 0, None) => String::new(),
            (true, f, n) => format!(" (bytes {f}-{} of {})", n.unwrap_or(full.len()), full.len()),
            _ => String::new(),
        };
        text.push_str(&format!("{marker} {}{part} — citation {}\n", inert(&v.hit.chunk_id), inert(&v.hit.citation())));
        text.push_str(&fence(&format!("{} lines {}-{}", v.hit.path, v.hit.start_line, v.hit.end_line), &v.text));
    }
    if let Some(c) = &next_cursor {
        text.push_str(&budget::more_line(c, max));
    }
    output::typed(text, &ChunkOut { chunk: ctx, next_cursor })
}

/// A library's description when its manifest has none: what it holds.
pub(super) fn describe(info: &atlas_runtime::bundle::BundleInfo) -> String {
    const SHOWN: usize = 4;
    let mut sources =
        info.sources.iter().take(SHOWN).map(|s| format!("{} ({})", s.name, s.kind)).collect::<Vec<_>>().join(", ");
    if info.sources.len() > SHOWN {
        sources.push_str(&format!(" and {} more", info.sources.len() - SHOWN));
    }
    format!("{} {}: {sources}", info.name, info.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_from_a_file_not_the_packages_own_says_so_in_text_and_structure() {
        let own = Hit { library: "p@1".into(), path: "pkg/p/a.py".into(), title: "a.py".into(), ..Hit::default() };
        let vendored = Hit { origin: Some(atlas_runtime::Origin::Vendored), ..own.clone() };
        assert!(!hit_text(0, &own, Detail::Brief).contains("vendored"));
        assert!(hit_text(0, &vendored, Detail::Brief).contains("(docs, p@1, vendored code)"));
        assert_eq!(hit_out(&vendored, Detail::Brief).origin.as_deref(), Some("vendored"));
        let json = serde_json::to_value(hit_out(&own, Detail::Brief)).unwrap();
        assert!(json.get("origin").is_none(), "{json}");
    }
}
