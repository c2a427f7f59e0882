//! Content-defined pieces of a large file: a gear rolling hash cuts it where its
//! content says, so an insertion moves the cuts of one piece, not of every piece after
//! it; the recipe (`<blake3>.pieces.json`) that lists them, and its checks.

/// The recipe of a file published in pieces.
pub(super) fn recipe_name(blake3: &str) -> String {
    format!("{blake3}.pieces.json")
}

/// Files larger than this are published as pieces.
pub const PIECES_OVER: u64 = 64 << 10;

pub(super) const PIECE_MIN: usize = 8 << 10;

/// A cut where the hash's low 15 bits are zero: 32 KiB pieces on average.
pub(super) const PIECE_MASK: u64 = (1 << 15) - 1;

pub(super) const PIECE_MAX: usize = 128 << 10;

/// A recipe holds at most this many pieces (a 64 GiB file at the minimum size).
pub(super) const MAX_PIECES: usize = 1 << 22;

/// The gear table: one fixed pseudo-random word per byte value.
pub(super) const GEAR: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut i = 0;
    while i < 256 {
        // splitmix64
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        t[i] = z ^ (z >> 31);
        i += 1;
    }
    t
};

/// Where content-defined pieces of `data` end (exclusive offsets; the last is the length).
pub fn cut_points(data: &[u8]) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let end = (start + PIECE_MAX).min(data.len());
        let mut cut = end;
        let mut h = 0u64;
        let mut i = start + PIECE_MIN.min(end - start);
        while i < end {
            h = (h << 1).wrapping_add(GEAR[data[i] as usize]);
            if h & PIECE_MASK == 0 {
                cut = i + 1;
                break;
            }
            i += 1;
        }
        cuts.push(cut);
        start = cut;
    }
    cuts
}

/// A file's pieces, as its recipe lists them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Piece {
    pub blake3: String,
    pub size: u64,
}

pub(super) fn pieces(data: &[u8]) -> Vec<(Piece, std::ops::Range<usize>)> {
    let mut start = 0;
    cut_points(data)
        .into_iter()
        .map(|end| {
            let r = start..end;
            start = end;
            (Piece { blake3: atlas_runtime::hash::blake3_bytes(&data[r.clone()]), size: r.len() as u64 }, r)
        })
        .collect()
}

/// A recipe (`<blake3>.pieces.json`) from the store, when it can describe a file of
/// `size` bytes: at most [`MAX_PIECES`] pieces, each of 1 to [`PIECE_MAX`] bytes with a
/// blake3 of 64 hex digits, adding up to `size` (checked: a sum that wraps is no sum).
pub fn parse_recipe(bytes: &[u8], size: u64) -> Result<Vec<Piece>, BadRecipe> {
    let listed: Vec<Piece> = serde_json::from_slice(bytes).map_err(BadRecipe::Unreadable)?;
    if listed.len() > MAX_PIECES {
        return Err(BadRecipe::TooMany(listed.len()));
    }
    if let Some(p) = listed.iter().find(|p| p.size == 0 || p.size > PIECE_MAX as u64) {
        return Err(BadRecipe::PieceSize(p.size));
    }
    if listed.iter().any(|p| p.blake3.len() != 64 || !p.blake3.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    {
        return Err(BadRecipe::Name);
    }
    let total = listed.iter().try_fold(0u64, |sum, p| sum.checked_add(p.size));
    if total != Some(size) {
        return Err(BadRecipe::Sum);
    }
    Ok(listed)
}

/// How a recipe from the store fails to describe its file (read after "the recipe of
/// PATH").
#[derive(Debug, thiserror::Error)]
pub enum BadRecipe {
    #[error("is unreadable ({0})")]
    Unreadable(serde_json::Error),
    #[error("lists {0} pieces, more than {MAX_PIECES}")]
    TooMany(usize),
    #[error("lists a piece of {0} bytes (pieces are 1 to {PIECE_MAX})")]
    PieceSize(u64),
    #[error("names a piece by something other than 64 lowercase hex digits")]
    Name,
    #[error("does not add up")]
    Sum,
}
