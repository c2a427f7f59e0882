//! Embedding matrices: row-major f16 with a `.npy` (version 1.0) header, so numpy
//! reads them as they are (`np.load` → float16, shape (rows, dims)).

use std::path::Path;

use half::f16;
use half::slice::HalfFloatSliceExt as _;

use crate::{Error, Result};

const MAGIC: &[u8] = b"\x93NUMPY\x01\x00";

/// The bundle's embedding matrix (mapped, never read whole).
pub const FILE: &str = "embeddings.npy";
/// The bundle's row map ([`EmbeddingsMeta`]), read whole.
pub const META_FILE: &str = "embeddings.json";
/// What `embeddings.json` holds besides its row map (the model's id and sha256, the
/// counts), in bytes, with room to spare.
const META_FIXED_BYTES: u64 = 4 << 10;
/// What one row of the row map takes in `embeddings.json` at most, in bytes: a `u32`
/// of 10 digits, its comma and newline, and the pack stage's 4 spaces of indentation.
const META_ROW_BYTES: u64 = 16;

/// The largest `embeddings.json` a matrix of `npy_bytes` bytes of `dims`-wide f16
/// rows can have, in bytes: one row-map entry per row the matrix can hold.
pub fn max_meta_bytes(npy_bytes: u64, dims: usize) -> u64 {
    let rows = npy_bytes / (2 * dims.max(1) as u64);
    META_FIXED_BYTES.saturating_add(rows.saturating_mul(META_ROW_BYTES))
}

/// Serialises `rows × dims` vectors as an f16 `.npy` file.
pub fn to_npy_f16(rows: usize, dims: usize, data: &[f16]) -> Vec<u8> {
    assert_eq!(data.len(), rows * dims, "matrix data matches its shape");
    let mut header = format!("{{'descr': '<f2', 'fortran_order': False, 'shape': ({rows}, {dims}), }}");
    // Pad so that the data starts on a 64-byte boundary; the header ends with '\n'.
    let unpadded = MAGIC.len() + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 2 + header.len() + data.len() * 2);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Parses an f16 `.npy` written by [`to_npy_f16`]: `(rows, dims, values)`.
pub fn from_npy_f16(bytes: &[u8]) -> Result<(usize, usize, Vec<f16>)> {
    let (rows, cols, offset) = npy_header(bytes, Path::new("embeddings.npy"))?;
    Ok((rows, cols, bytes[offset..].chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]])).collect()))
}

/// Parses an `.npy` header: `(rows, dims, data offset)`.
fn npy_header(bytes: &[u8], path: &Path) -> Result<(usize, usize, usize)> {
    let bad = |reason: &str| Error::DataCorruption { path: path.to_owned(), reason: reason.to_owned() };
    if bytes.len() < 10 || &bytes[..8] != MAGIC {
        return Err(bad("not an .npy version 1.0 file"));
    }
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(bytes.get(10..10 + hlen).ok_or_else(|| bad("truncated header"))?)
        .map_err(|_| bad("header is not text"))?;
    if !header.contains("'descr': '<f2'") || header.contains("'fortran_order': True") {
        return Err(bad("expected little-endian f16 in C order"));
    }
    let shape = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).ok_or_else(|| bad("no shape"))?;
    let dims: Vec<usize> = shape.split(',').filter_map(|d| d.trim().parse().ok()).collect();
    let [rows, cols] = dims[..] else { return Err(bad("expected a 2-d shape")) };
    if rows.checked_mul(cols).and_then(|n| n.checked_mul(2)) != Some(bytes.len() - 10 - hlen) {
        return Err(bad("data length does not match the shape"));
    }
    Ok((rows, cols, 10 + hlen))
}

/// The embeddings of an opened bundle, memory-mapped: f16 rows read in place.
#[derive(Debug)]
pub struct MappedMatrix {
    map: memmap2::Mmap,
    offset: usize,
    pub rows: usize,
    pub dims: usize,
}

impl MappedMatrix {
    pub fn open(path: &Path) -> Result<MappedMatrix> {
        let io = |error| Error::Io { path: path.to_owned(), error };
        let file = std::fs::File::open(path).map_err(io)?;
        // SAFETY: the bundle's files are read-only once packed; the map lives as long
        // as the matrix, and every read goes through bounds-checked slices.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        let (rows, dims, offset) = npy_header(&map, path)?;
        if offset % 2 != 0 || cfg!(target_endian = "big") {
            return Err(Error::DataCorruption { path: path.to_owned(), reason: "unaligned or big-endian data".into() });
        }
        Ok(MappedMatrix { map, offset, rows, dims })
    }

    /// The first row holding a NaN or an infinity: such a row would score garbage
    /// silently, so a bundle with one is refused at open.
    pub fn first_non_finite_row(&self) -> Option<usize> {
        // An f16 is NaN or infinite exactly when its exponent bits are all ones.
        self.bits().iter().position(|&b| b & 0x7C00 == 0x7C00).map(|i| i / self.dims.max(1))
    }

    fn bits(&self) -> &[u16] {
        bytemuck::cast_slice(&self.map[self.offset..])
    }

    /// Row `r` as f32.
    pub fn row(&self, r: usize) -> Vec<f32> {
        let mut out = vec![0f32; self.dims];
        let bits = &self.bits()[r * self.dims..(r + 1) * self.dims];
        half::slice::HalfBitsSliceExt::reinterpret_cast::<f16>(bits).convert_to_f32_slice(&mut out);
        out
    }

    /// Exact scan: the `k` rows with the highest dot product with `q` among rows
    /// that `keep` accepts, best first.
    pub fn scan(&self, q: &[f32], k: usize, keep: &dyn Fn(usize) -> bool) -> Vec<(usize, f32)> {
        let bits = self.bits();
        let mut row = vec![0f32; self.dims];
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<Scored>> = std::collections::BinaryHeap::new();
        for (r, chunk) in bits.chunks_exact(self.dims.max(1)).enumerate() {
            if !keep(r) {
                continue;
            }
            half::slice::HalfBitsSliceExt::reinterpret_cast::<f16>(chunk).convert_to_f32_slice(&mut row);
            let s = crate::hnsw::dot(q, &row);
            if heap.len() < k {
                heap.push(std::cmp::Reverse(Scored(s, r)));
            } else if heap.peek().is_some_and(|m| s > m.0.0) {
                heap.pop();
                heap.push(std::cmp::Reverse(Scored(s, r)));
            }
        }
        let mut out: Vec<(usize, f32)> = heap.into_iter().map(|std::cmp::Reverse(Scored(s, r))| (r, s)).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

#[derive(Debug, PartialEq)]
struct Scored(f32, usize);
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scored {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

/// Row → chunk map and window facts, as `embeddings.json` records them.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct EmbeddingsMeta {
    pub rows: usize,
    pub dims: usize,
    /// For each row, the chunk's position in chunks.parquet.
    pub window_chunk: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_roundtrip_and_alignment() {
        let data: Vec<f16> = (0..6).map(|i| f16::from_f32(i as f32 / 4.0)).collect();
        let bytes = to_npy_f16(2, 3, &data);
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        assert_eq!(from_npy_f16(&bytes).unwrap(), (2, 3, data));
        assert!(from_npy_f16(&bytes[..bytes.len() - 1]).is_err());
    }
}
