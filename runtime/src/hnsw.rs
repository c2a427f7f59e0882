//! The approximate vector index: an HNSW graph (hnsw_rs) over the f16 embeddings.
//!
//! The build inserts rows one at a time in row order; hnsw_rs draws levels from a
//! fixed-seed generator, so equal embeddings give a byte-identical dump. Points are
//! stored as f16 bit patterns (`u16`), half the size of f32, and compared by
//! `1 - dot` (the vectors are L2-normalised).

use std::path::Path;

use half::f16;
use half::slice::HalfFloatSliceExt as _;
use hnsw_rs::api::AnnT as _;
use hnsw_rs::prelude::{Distance, Hnsw, HnswIo};

use crate::{Error, Result};

/// File stem of the dump: `hnsw.hnsw.graph` and `hnsw.hnsw.data`.
pub const BASENAME: &str = "hnsw";
pub const GRAPH_FILE: &str = "hnsw.hnsw.graph";
pub const DATA_FILE: &str = "hnsw.hnsw.data";

/// Graph degree and build effort: recall@10 ≥ 0.98 on 50k normalised 384-d vectors.
pub const MAX_CONNECTIONS: usize = 16;
pub const EF_CONSTRUCTION: usize = 100;
/// Search effort (candidate list size) per query.
pub const EF_SEARCH: usize = 128;

/// Cosine distance on L2-normalised f16 vectors.
#[derive(Debug, Clone, Copy, Default)]
pub struct DotF16;

/// Dot product of two f16 rows (as bits), converted in 64-lane blocks.
pub fn dot_f16_bits(a: &[u16], b: &[u16]) -> f32 {
    let (mut fa, mut fb) = ([0f32; 64], [0f32; 64]);
    let mut sum = 0f32;
    for (ca, cb) in a.chunks(64).zip(b.chunks(64)) {
        let n = ca.len();
        f16_bits_as_slice(ca).convert_to_f32_slice(&mut fa[..n]);
        f16_bits_as_slice(cb).convert_to_f32_slice(&mut fb[..n]);
        sum += dot(&fa[..n], &fb[..n]);
    }
    sum
}

/// Dot product; written so that the compiler vectorises it (8 independent lanes).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn f16_bits_as_slice(bits: &[u16]) -> &[f16] {
    // f16 is repr(transparent) over u16.
    half::slice::HalfBitsSliceExt::reinterpret_cast(bits)
}

impl Distance<u16> for DotF16 {
    fn eval(&self, va: &[u16], vb: &[u16]) -> f32 {
        (1.0 - dot_f16_bits(va, vb)).max(0.0)
    }
}

/// Builds the index over `rows × dims` f16 values and dumps it into `dir`
/// ([`GRAPH_FILE`], [`DATA_FILE`]). Rows go in one at a time, in order: the dump is
/// deterministic.
pub fn build(rows: usize, dims: usize, data: &[f16], dir: &Path) -> Result<()> {
    build_with(rows, dims, data, dir, |hnsw, bits| {
        for (i, row) in bits.chunks_exact(dims.max(1)).enumerate() {
            hnsw.insert_slice((row, i));
        }
    })
}

/// As [`build`], inserting on every core: much faster, but the graph (and the dump)
/// depends on thread timing. For tests and benchmarks, never for bundles.
pub fn build_parallel(rows: usize, dims: usize, data: &[f16], dir: &Path) -> Result<()> {
    build_with(rows, dims, data, dir, |hnsw, bits| {
        let owned: Vec<Vec<u16>> = bits.chunks_exact(dims.max(1)).map(<[u16]>::to_vec).collect();
        let batch: Vec<(&Vec<u16>, usize)> = owned.iter().enumerate().map(|(i, v)| (v, i)).collect();
        hnsw.parallel_insert(&batch);
    })
}

fn build_with(
    rows: usize,
    dims: usize,
    data: &[f16],
    dir: &Path,
    insert: impl FnOnce(&Hnsw<'_, u16, DotF16>, &[u16]),
) -> Result<()> {
    assert_eq!(data.len(), rows * dims, "matrix data matches its shape");
    let bits: &[u16] = half::slice::HalfFloatSliceExt::reinterpret_cast(data);
    let hnsw: Hnsw<'_, u16, DotF16> = Hnsw::new(MAX_CONNECTIONS, rows.max(1), 16, EF_CONSTRUCTION, DotF16);
    insert(&hnsw, bits);
    hnsw.file_dump(dir, BASENAME)
        .map_err(|e| Error::Io { path: dir.to_owned(), error: std::io::Error::other(e.to_string()) })?;
    Ok(())
}

/// A loaded index.
pub struct HnswIndex {
    hnsw: Hnsw<'static, u16, DotF16>,
}

impl std::fmt::Debug for HnswIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HnswIndex").field("points", &self.hnsw.get_nb_point()).finish()
    }
}

impl HnswIndex {
    /// Loads the dump in `dir`, which must hold `rows` points.
    pub fn open(dir: &Path, rows: usize) -> Result<HnswIndex> {
        let corrupt = |reason: String| Error::DataCorruption { path: dir.join(GRAPH_FILE), reason };
        for f in [GRAPH_FILE, DATA_FILE] {
            let p = dir.join(f);
            if !p.is_file() {
                return Err(Error::Io { path: p, error: std::io::ErrorKind::NotFound.into() });
            }
        }
        // hnsw_rs sizes its buffers by the counts the dump states, reads each point's
        // vector through a raw slice of the length the description states, and ends
        // the process on a short data file: every count and length is checked first.
        check_dump(dir, rows).map_err(corrupt)?;
        // The loader borrows its HnswIo for the index's life; one small leak per open
        // index (a path and options) buys an owned, 'static index.
        let io: &'static HnswIo = Box::leak(Box::new(HnswIo::new(dir, BASENAME)));
        // hnsw_rs asserts on bad magic numbers: a corrupt dump must not abort a server.
        let loaded = std::panic::catch_unwind(|| io.load_hnsw_with_dist::<u16, DotF16>(DotF16))
            .map_err(|_| corrupt("the HNSW dump is corrupt; rebuild or re-download the bundle".into()))?
            .map_err(|e| corrupt(format!("unreadable HNSW dump: {e}")))?;
        let mut hnsw = loaded;
        if hnsw.get_nb_point() != rows {
            return Err(corrupt(format!("the HNSW dump holds {} points, the embeddings {rows}", hnsw.get_nb_point())));
        }
        hnsw.set_searching_mode(true);
        Ok(HnswIndex { hnsw })
    }

    /// The `k` nearest rows to the (normalised) query: `(row, cosine)`, best first.
    /// `keep` filters rows during the walk.
    pub fn search(&self, query: &[f32], k: usize, keep: Option<&dyn Fn(usize) -> bool>) -> Vec<(usize, f32)> {
        let q: Vec<u16> = query.iter().map(|x| f16::from_f32(*x).to_bits()).collect();
        let ef = EF_SEARCH.max(k);
        let found = match keep {
            None => self.hnsw.search(&q, k, ef),
            Some(f) => {
                let filter = RowFilter(f);
                self.hnsw.search_filter(&q, k, ef, Some(&filter))
            }
        };
        found.into_iter().map(|n| (n.d_id, 1.0 - n.distance)).collect()
    }
}

/// The widest vector a dump may hold: far past any embedding model's.
const MAX_DUMP_DIMS: usize = 8192;
/// Layers an hnsw_rs graph has at most (its `NB_LAYER_MAX`).
const MAX_LAYERS: u8 = 16;
/// The dump's magic numbers (hnsw_rs 0.3's `hnswio`): descriptions of formats 3 and 4,
/// a layer, a point, a data record.
const MAGIC_DESCR_3: u32 = 0x002a_6771;
const MAGIC_DESCR_4: u32 = 0x002a_6779;
const MAGIC_LAYER: u32 = 0x000a_676f;
const MAGIC_POINT: u32 = 0x000a_678f;
const MAGIC_DATA: u32 = 0xa67f_0000;

/// Walks the dump as hnsw_rs will read it (formats 3 and 4), allocating nothing it
/// states: every layer's point count within `rows` in all, every point's neighbours
/// within twice the graph's degree and pointing at a layer that exists, every vector
/// exactly `dimension` f16 values, and both files long enough. What hnsw_rs would
/// abort, exit or read out of bounds on is an error here.
fn check_dump(dir: &Path, rows: usize) -> std::result::Result<(), String> {
    use std::io::Read as _;
    struct In<R>(R, &'static str);
    impl<R: std::io::Read> In<R> {
        fn bytes<const N: usize>(&mut self) -> std::result::Result<[u8; N], String> {
            let mut b = [0u8; N];
            self.0.read_exact(&mut b).map_err(|_| format!("the HNSW {} file ends early", self.1))?;
            Ok(b)
        }
        fn u8(&mut self) -> std::result::Result<u8, String> {
            Ok(self.bytes::<1>()?[0])
        }
        fn u32(&mut self) -> std::result::Result<u32, String> {
            self.bytes::<4>().map(u32::from_ne_bytes)
        }
        fn u64(&mut self) -> std::result::Result<u64, String> {
            self.bytes::<8>().map(u64::from_ne_bytes)
        }
        fn skip(&mut self, n: u64) -> std::result::Result<(), String> {
            let got = std::io::copy(&mut (&mut self.0).take(n), &mut std::io::sink()).map_err(|e| e.to_string())?;
            if got == n { Ok(()) } else { Err(format!("the HNSW {} file ends early", self.1)) }
        }
    }
    let open = |f: &str| std::fs::File::open(dir.join(f)).map(std::io::BufReader::new).map_err(|e| e.to_string());
    let mut g = In(open(GRAPH_FILE)?, "graph");
    let mut d = In(open(DATA_FILE)?, "data");
    let bad = |what: String| Err(format!("the HNSW dump is corrupt ({what}); rebuild or re-download the bundle"));
    // The description.
    let version = match g.u32()? {
        MAGIC_DESCR_3 => 3,
        MAGIC_DESCR_4 => 4,
        m => return bad(format!("description magic {m:#x}")),
    };
    let dump_mode = g.u8()?;
    let degree = usize::from(g.u8()?);
    if version == 4 {
        g.bytes::<8>()?; // the level scale
    }
    let layers = g.u8()?;
    let _ef = g.u64()?;
    let (points, dims) = (g.u64()?, g.u64()?);
    if dump_mode > 1 || layers > MAX_LAYERS || points != rows as u64 || dims == 0 || dims > MAX_DUMP_DIMS as u64 {
        return bad(format!("{points} points of {dims} dimensions in {layers} layers, mode {dump_mode}"));
    }
    for _name in 0..2 {
        let len = g.u64()?;
        if len > 256 {
            return bad(format!("a type name of {len} bytes"));
        }
        g.skip(len)?;
    }
    // The data file's head, then each layer's points, each with its record there.
    let dims = dims as usize;
    if d.u32()? != MAGIC_DATA || d.u64()? != dims as u64 {
        return bad("the data file's head".into());
    }
    let record = (dims * 2) as u64;
    let indexed = g.u8()?;
    if indexed > MAX_LAYERS {
        return bad(format!("{indexed} layers"));
    }
    let mut sizes: Vec<u64> = Vec::with_capacity(usize::from(indexed));
    let mut left = rows as u64;
    let mut neighbours: Vec<(u8, i32)> = Vec::new();
    for l in 0..indexed {
        let n = match (g.u32()?, g.u64()?) {
            (MAGIC_LAYER, n) if n <= left => n,
            (_, n) => return bad(format!("layer {l} holds {n} points")),
        };
        left -= n;
        sizes.push(n);
        for r in 0..n {
            let (magic, origin, layer, rank) = (g.u32()?, g.u64()?, g.u8()?, g.bytes::<4>().map(i32::from_ne_bytes)?);
            if magic != MAGIC_POINT || origin >= rows as u64 || layer != l || u64::try_from(rank) != Ok(r) {
                return bad(format!("point {r} of layer {l}"));
            }
            for _ in 0..layers {
                let count = g.u64()?;
                if count > 2 * degree.max(1) as u64 {
                    return bad(format!("a point with {count} neighbours"));
                }
                for _ in 0..count {
                    g.u64()?;
                    if dump_mode == 1 {
                        neighbours.push((g.u8()?, g.bytes::<4>().map(i32::from_ne_bytes)?));
                    }
                    g.bytes::<4>()?; // the distance
                }
            }
            if d.u32()? != MAGIC_DATA || d.u64()? != origin || d.u64()? != record {
                return bad(format!("the vector of point {origin}"));
            }
            d.skip(record)?;
        }
    }
    // The entry point, and every neighbour, name a point that exists.
    g.u64()?;
    let entry = (g.u8()?, g.bytes::<4>().map(i32::from_ne_bytes)?);
    let exists = |(layer, rank): (u8, i32)| {
        sizes.get(usize::from(layer)).is_some_and(|n| u64::try_from(rank).is_ok_and(|r| r < *n))
    };
    if left != 0 || !exists(entry) || !neighbours.into_iter().all(exists) {
        return bad("a point it names is missing".into());
    }
    Ok(())
}

struct RowFilter<'a>(&'a dyn Fn(usize) -> bool);

impl hnsw_rs::filter::FilterT for RowFilter<'_> {
    fn hnsw_filter(&self, id: &usize) -> bool {
        (self.0)(*id)
    }
}
