//! Merging ranked lists: reciprocal-rank or score fusion, per-file diversity, and
//! the promotion of exact matches.

use std::collections::{HashMap, HashSet};

use super::Fusion;
use crate::chunk_table::ChunkRecord;

const RRF_K: f32 = 60.0;
/// Score factor per earlier hit from the same file.
const SAME_FILE_PENALTY: f32 = 0.85;

pub(super) fn sort_desc(v: &mut [(usize, f32)]) {
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
}

/// Fuses two ranked lists.
pub fn fuse(vector: &[(usize, f32)], keyword: &[(usize, f32)], fusion: Fusion) -> Vec<(usize, f32)> {
    let mut acc: HashMap<usize, f32> = HashMap::new();
    match fusion {
        Fusion::Rrf => {
            for list in [vector, keyword] {
                for (rank, (i, _)) in list.iter().enumerate() {
                    *acc.entry(*i).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
                }
            }
        }
        Fusion::Score => {
            for list in [vector, keyword] {
                let (lo, hi) = list.iter().fold((f32::MAX, f32::MIN), |(lo, hi), (_, s)| (lo.min(*s), hi.max(*s)));
                let span = hi - lo;
                for (i, s) in list {
                    let n = if span > 1e-9 { (s - lo) / span } else { 1.0 };
                    *acc.entry(*i).or_default() += 0.5 * n;
                }
            }
        }
    }
    let mut out: Vec<(usize, f32)> = acc.into_iter().collect();
    sort_desc(&mut out);
    out
}

/// Diversity: a second section of an already-listed file loses 15 % per earlier hit
/// from that file; the same file and heading again is dropped.
pub(super) fn diversify(chunks: &[ChunkRecord], ranked: &mut Vec<(usize, f32)>) {
    let mut per_file: HashMap<&str, i32> = HashMap::new();
    let mut seen: HashSet<(&str, String)> = HashSet::new();
    let mut out = Vec::with_capacity(ranked.len());
    for &(i, s) in ranked.iter() {
        let c = &chunks[i];
        if !seen.insert((c.path.as_str(), c.heading_path.join("\u{1f}"))) {
            continue;
        }
        let n = per_file.entry(c.path.as_str()).or_default();
        // Penalties scale the magnitude, whatever the sign of the score.
        let f = SAME_FILE_PENALTY.powi(*n);
        out.push((i, if s >= 0.0 { s * f } else { s / f }));
        *n += 1;
    }
    sort_desc(&mut out);
    *ranked = out;
}

/// Puts `exact` first, in its order, above everything else; the rest keep theirs.
/// Scores stay on the list's scale: a promoted chunk scores just above the best.
pub(super) fn promote(ranked: &mut Vec<(usize, f32)>, exact: &[usize]) {
    let top = ranked.first().map_or(0.0, |x| x.1).max(0.0);
    let promoted: HashSet<usize> = exact.iter().copied().collect();
    let n = exact.len() as f32;
    // 10 % above the best, in their order.
    let mut out: Vec<(usize, f32)> =
        exact.iter().enumerate().map(|(k, &i)| (i, top * 1.1 + 1e-3 + (n - k as f32) * 1e-4)).collect();
    out.extend(ranked.iter().copied().filter(|(i, _)| !promoted.contains(i)));
    *ranked = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_and_score_fusion_reward_agreement() {
        let v = [(1, 0.9), (2, 0.8), (3, 0.1)];
        let k = [(2, 12.0), (4, 11.0), (1, 1.0)];
        for f in [Fusion::Rrf, Fusion::Score] {
            let fused = fuse(&v, &k, f);
            assert_eq!(fused[0].0, 2, "{f:?}: {fused:?}");
            assert_eq!(fused.len(), 4);
        }
    }
}
