//! The HNSW index against the exact scan, on synthetic vectors shaped like text
//! embeddings (clustered, L2-normalised, 384-d, stored as f16).

use atlas_runtime::hnsw::{self, HnswIndex};
use atlas_runtime::vectors::{MappedMatrix, to_npy_f16};
use half::f16;

/// `n` vectors shaped like text embeddings: points around 500 topic centres in a
/// 48-d latent space, mixed through a fixed projection to `dims`, plus noise,
/// L2-normalised. Deterministic per `seed` (which picks the points, not the topics).
pub fn clustered(n: usize, dims: usize, seed: u64) -> Vec<f16> {
    const LATENT: usize = 48;
    let mut rng = atlas_e2e::XorShift::new(0x9e37_79b9_7f4a_7c15);
    let mut next = move || rng.signed_unit();
    // The projection is the same for every seed; the seed picks the points.
    let projection: Vec<f32> = (0..LATENT * dims).map(|_| next()).collect();
    let topics: Vec<Vec<f32>> = (0..500).map(|_| (0..LATENT).map(|_| next()).collect()).collect();
    for _ in 0..seed * 1000 {
        next();
    }
    let mut out = Vec::with_capacity(n * dims);
    for i in 0..n {
        let t = &topics[(i * 7919 + seed as usize) % topics.len()];
        let z: Vec<f32> = t.iter().map(|c| c + 0.5 * next()).collect();
        let v: Vec<f32> = (0..dims)
            .map(|d| z.iter().enumerate().map(|(k, zk)| zk * projection[k * dims + d]).sum::<f32>() + 0.3 * next())
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        out.extend(v.iter().map(|x| f16::from_f32(x / norm)));
    }
    out
}

#[test]
fn slow_hnsw_recall_at_10_against_the_exact_scan_is_at_least_0_98_on_50k_vectors() {
    let (n, dims) = (50_000, 384);
    let data = clustered(n, dims, 7);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("embeddings.npy"), to_npy_f16(n, dims, &data)).unwrap();
    let exact = MappedMatrix::open(&dir.path().join("embeddings.npy")).unwrap();
    hnsw::build_parallel(n, dims, &data, dir.path()).unwrap();
    let index = HnswIndex::open(dir.path(), n).unwrap();
    // Queries: perturbed copies of stored rows, as real queries land near documents.
    let queries = clustered(200, dims, 99);
    let (mut found, mut total) = (0, 0);
    for q in queries.chunks_exact(dims) {
        let q: Vec<f32> = q.iter().map(|x| x.to_f32()).collect();
        let truth: Vec<usize> = exact.scan(&q, 10, &|_| true).into_iter().map(|r| r.0).collect();
        let got: Vec<usize> = index.search(&q, 10, None).into_iter().map(|r| r.0).collect();
        found += truth.iter().filter(|t| got.contains(t)).count();
        total += truth.len();
    }
    let recall = found as f64 / total as f64;
    eprintln!("HNSW recall@10 on {n} vectors: {recall:.4}");
    assert!(recall >= 0.98, "recall@10 {recall:.4}");
}

#[test]
fn equal_vectors_give_a_byte_identical_dump() {
    let (n, dims) = (2_000, 32);
    let data = clustered(n, dims, 3);
    let dump = || {
        let dir = tempfile::tempdir().unwrap();
        hnsw::build(n, dims, &data, dir.path()).unwrap();
        [hnsw::GRAPH_FILE, hnsw::DATA_FILE].map(|f| std::fs::read(dir.path().join(f)).unwrap())
    };
    assert!(dump() == dump());
}

#[test]
fn a_corrupt_dump_is_an_error_not_an_abort() {
    let (n, dims) = (300, 16);
    let data = clustered(n, dims, 5);
    let dir = tempfile::tempdir().unwrap();
    hnsw::build(n, dims, &data, dir.path()).unwrap();
    let graph = dir.path().join(hnsw::GRAPH_FILE);
    let mut b = std::fs::read(&graph).unwrap();
    b[0] ^= 0xff;
    std::fs::write(&graph, b).unwrap();
    let err = HnswIndex::open(dir.path(), n).unwrap_err().to_string();
    assert!(err.contains("hnsw.hnsw.graph"), "{err}");
    let err = HnswIndex::open(dir.path(), n + 1).unwrap_err().to_string();
    assert!(err.contains("hnsw"), "{err}");
}

/// Hardening, round 4: hnsw_rs sizes buffers by the counts a dump states, reads a
/// vector through a raw slice of the stated length and exits the process on a short
/// data file; each of those in a hostile dump is an error at open, before hnsw_rs
/// reads it.
#[test]
fn a_dump_that_states_huge_counts_or_ends_early_is_an_error_not_an_abort() {
    let (n, dims) = (300, 16);
    let data = clustered(n, dims, 7);
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        hnsw::build(n, dims, &data, dir.path()).unwrap();
        dir
    };
    let find = |b: &[u8], magic: u32| b.windows(4).position(|w| w == magic.to_ne_bytes()).unwrap();
    // A layer that claims 2^62 points.
    let dir = fresh();
    let graph = dir.path().join(hnsw::GRAPH_FILE);
    let mut b = std::fs::read(&graph).unwrap();
    let at = find(&b, 0x000a_676f) + 4;
    b[at..at + 8].copy_from_slice(&(1u64 << 62).to_ne_bytes());
    std::fs::write(&graph, b).unwrap();
    let err = HnswIndex::open(dir.path(), n).unwrap_err().to_string();
    assert!(err.contains("corrupt") && err.contains("points"), "{err}");
    // A vector record that claims a terabyte, and one shorter than the dimensions.
    for len in [1u64 << 40, 2] {
        let dir = fresh();
        let data_file = dir.path().join(hnsw::DATA_FILE);
        let mut b = std::fs::read(&data_file).unwrap();
        let at = 4 + 8 + 4 + 8;
        b[at..at + 8].copy_from_slice(&len.to_ne_bytes());
        std::fs::write(&data_file, b).unwrap();
        let err = HnswIndex::open(dir.path(), n).unwrap_err().to_string();
        assert!(err.contains("corrupt") && err.contains("vector"), "{len}: {err}");
    }
    // A data file cut short (hnsw_rs would end the process).
    let dir = fresh();
    let data_file = dir.path().join(hnsw::DATA_FILE);
    let b = std::fs::read(&data_file).unwrap();
    std::fs::write(&data_file, &b[..b.len() - 10]).unwrap();
    let err = HnswIndex::open(dir.path(), n).unwrap_err().to_string();
    assert!(err.contains("ends early"), "{err}");
    // An intact dump still opens.
    assert!(HnswIndex::open(fresh().path(), n).is_ok());
}
