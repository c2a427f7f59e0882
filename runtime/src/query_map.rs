//! A bundle's own query model: a low-rank map the `tune` stage fits on pairs mined
//! from the bundle's text, applied to every query vector before the search
//! (`q' = normalise(q + A·(Bᵀ·q))`). The chunks' vectors are untouched, so a bundle
//! without the file serves exactly as before.
//!
//! `query_map.bin`, little-endian: `ATQM`, u32 format (1), u32 dims, u32 rank, then A
//! and B, each dims × rank f32, row-major. Read from an untrusted bundle: the shape
//! must match the bundle's model, the size is bounded, every value finite and small.

/// The file in the bundle (and in a database's `files`).
pub const FILE: &str = "query_map.bin";

const MAGIC: &[u8; 4] = b"ATQM";
const FORMAT: u32 = 1;
const HEADER: usize = 16;
/// No fitted value comes near this; a larger one is a damaged or hostile file.
const MAX_ABS: f32 = 1e3;
/// The largest rank a file may declare (a full map of 4,096 dims is 128 MiB: beyond
/// what a query model needs).
pub const MAX_RANK: usize = 512;

/// The widest query vector of a model this build knows, in dimensions: the bundle's
/// model must be one of them (its dims checked at open).
const WIDEST_DIMS: usize = {
    let (mut i, mut widest) = (0, 0);
    while i < crate::model::REGISTRY.len() {
        if crate::model::REGISTRY[i].dims > widest {
            widest = crate::model::REGISTRY[i].dims;
        }
        i += 1;
    }
    widest
};

/// The largest `query_map.bin` any bundle may ship, in bytes: the highest-rank map of
/// the widest model this build knows (768 dims at rank 512: 3 MiB).
pub const MAX_FILE_BYTES: u64 = max_bytes(WIDEST_DIMS);

/// The size of the largest valid map for a model of `dims` dimensions, in bytes: the
/// header, then A and B at the highest rank the format allows ([`MAX_RANK`], at most
/// `dims`), never more than [`MAX_FILE_BYTES`] whatever a manifest says `dims` is.
pub const fn max_bytes(dims: usize) -> u64 {
    let dims = if dims < WIDEST_DIMS { dims } else { WIDEST_DIMS };
    let rank = if dims < MAX_RANK { dims } else { MAX_RANK };
    (HEADER + 2 * dims * rank * 4) as u64
}

/// `W = A·Bᵀ`, applied as a residual to a query vector.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryMap {
    pub dims: usize,
    pub rank: usize,
    /// dims × rank, row-major.
    pub a: Vec<f32>,
    /// dims × rank, row-major.
    pub b: Vec<f32>,
}

impl QueryMap {
    /// The identity (A = 0): what training starts from.
    pub fn identity(dims: usize, rank: usize) -> QueryMap {
        QueryMap { dims, rank, a: vec![0.0; dims * rank], b: vec![0.0; dims * rank] }
    }

    /// `Bᵀ·q` (rank values).
    pub fn project(&self, q: &[f32]) -> Vec<f32> {
        let mut z = vec![0.0f32; self.rank];
        for (row, &x) in self.b.chunks_exact(self.rank).zip(q) {
            for (z, &w) in z.iter_mut().zip(row) {
                *z += w * x;
            }
        }
        z
    }

    /// `q + A·(Bᵀ·q)`, not normalised.
    pub fn residual(&self, q: &[f32]) -> Vec<f32> {
        let z = self.project(q);
        q.iter()
            .zip(self.a.chunks_exact(self.rank))
            .map(|(&x, row)| x + row.iter().zip(&z).map(|(a, z)| a * z).sum::<f32>())
            .collect()
    }

    /// The adapted query: `normalise(q + A·(Bᵀ·q))`. A vector of another length is
    /// returned as it is (opening checked the dims against the model).
    pub fn apply(&self, q: &[f32]) -> Vec<f32> {
        if q.len() != self.dims {
            return q.to_vec();
        }
        let mut v = self.residual(q);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 1e-12 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + 8 * self.a.len());
        out.extend_from_slice(MAGIC);
        for n in [FORMAT, self.dims as u32, self.rank as u32] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for x in self.a.iter().chain(&self.b) {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Reads a map for a model of `dims` dimensions; the error says what is wrong.
    pub fn from_bytes(bytes: &[u8], dims: usize) -> Result<QueryMap, String> {
        if bytes.len() < HEADER || &bytes[..4] != MAGIC {
            return Err("is not a query map (no ATQM header)".into());
        }
        let word = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]) as usize;
        let (format, d, rank) = (word(4), word(8), word(12));
        if format != FORMAT as usize {
            return Err(format!("is query map format {format}; this build reads {FORMAT}"));
        }
        if d != dims {
            return Err(format!("maps {d}-dimensional queries, the bundle's model gives {dims}"));
        }
        if rank == 0 || rank > MAX_RANK.min(dims) {
            return Err(format!("declares rank {rank}; a query map has 1 to {}", MAX_RANK.min(dims)));
        }
        // Both sizes are small here (dims is the model's, rank bounded): no overflow.
        let want = HEADER + 2 * dims * rank * 4;
        if bytes.len() != want {
            return Err(format!("is {} bytes; a {dims} × {rank} map is {want}", bytes.len()));
        }
        let values: Vec<f32> =
            bytes[HEADER..].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        if let Some(i) = values.iter().position(|x| !x.is_finite() || x.abs() > MAX_ABS) {
            return Err(format!("holds {} at value {i}: not a fitted map", values[i]));
        }
        let (a, b) = values.split_at(dims * rank);
        Ok(QueryMap { dims, rank, a: a.to_vec(), b: b.to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> QueryMap {
        let mut m = QueryMap::identity(4, 2);
        m.a[0] = 0.5; // A[0][0]
        m.b[2] = 1.0; // B[1][0]
        m
    }

    #[test]
    fn the_identity_leaves_a_unit_query_as_it_is() {
        let q = [0.6, 0.8, 0.0, 0.0];
        assert_eq!(QueryMap::identity(4, 2).apply(&q), q.to_vec());
    }

    #[test]
    fn apply_adds_the_low_rank_residual_and_normalises() {
        // Bᵀq = [q1, 0]; A·that adds 0.5·q1 to dim 0.
        let v = map().residual(&[0.0, 1.0, 0.0, 0.0]);
        assert_eq!(v, vec![0.5, 1.0, 0.0, 0.0]);
        let u = map().apply(&[0.0, 1.0, 0.0, 0.0]);
        assert!((u.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn bytes_round_trip_and_hostile_files_are_refused() {
        let m = map();
        assert_eq!(QueryMap::from_bytes(&m.to_bytes(), 4).unwrap(), m);
        assert!(QueryMap::from_bytes(&m.to_bytes(), 384).unwrap_err().contains("4-dimensional"));
        assert!(QueryMap::from_bytes(b"nope", 4).unwrap_err().contains("ATQM"));
        let mut short = m.to_bytes();
        short.pop();
        assert!(QueryMap::from_bytes(&short, 4).unwrap_err().contains("bytes"));
        let mut nan = m.to_bytes();
        nan[HEADER..HEADER + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(QueryMap::from_bytes(&nan, 4).unwrap_err().contains("NaN"));
        let mut huge = m.to_bytes();
        huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(QueryMap::from_bytes(&huge, 4).unwrap_err().contains("rank"));
    }

    #[test]
    fn the_largest_valid_map_is_exactly_the_file_limit() {
        for spec in crate::model::REGISTRY {
            let rank = spec.dims.min(MAX_RANK);
            let full = QueryMap::identity(spec.dims, rank).to_bytes();
            assert_eq!(full.len() as u64, max_bytes(spec.dims), "{}", spec.id);
            assert!(QueryMap::from_bytes(&full, spec.dims).is_ok());
            assert!(max_bytes(spec.dims) <= MAX_FILE_BYTES);
        }
        assert_eq!(MAX_FILE_BYTES, 16 + 2 * 768 * 512 * 4);
        assert_eq!(max_bytes(usize::MAX), MAX_FILE_BYTES, "a manifest's dims never raise it");
    }
}
