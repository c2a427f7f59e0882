//! Merging ranked lists: weighted reciprocal-rank or score fusion, file evidence,
//! docs ↔ code links, per-file diversity, and the promotion of exact matches and
//! definitions.

use std::collections::{HashMap, HashSet};

use super::options::{MIX_SLOT, Norm};
use super::{Fusion, Shape, Tuning};
use crate::chunk_table::{ChunkKind, ChunkRecord};

pub(super) fn sort_desc(v: &mut [(usize, f32)]) {
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
}

/// `score` scaled by `factor` in the direction the factor means, whatever the score's
/// sign: a negative score (a cosine can be one) is divided, so a penalty moves it down
/// and a boost up.
pub(super) fn scale(score: f32, factor: f32) -> f32 {
    if score >= 0.0 { score * factor } else { score / factor.max(f32::EPSILON) }
}

/// Fuses two ranked lists with equal weights (RRF with k = 60, or score fusion).
pub fn fuse(vector: &[(usize, f32)], keyword: &[(usize, f32)], fusion: Fusion) -> Vec<(usize, f32)> {
    let t = Tuning::default();
    fuse_weighted(vector, keyword, fusion, &t, |_| 1.0)
}

/// Fuses two ranked lists, keyword's contribution for chunk `i` weighted by
/// `keyword_weight(i)` against vector's 1.
pub(super) fn fuse_weighted(
    vector: &[(usize, f32)],
    keyword: &[(usize, f32)],
    fusion: Fusion,
    t: &Tuning,
    keyword_weight: impl Fn(usize) -> f32,
) -> Vec<(usize, f32)> {
    let mut acc: HashMap<usize, f32> = HashMap::new();
    for (list, is_keyword) in [(vector, false), (keyword, true)] {
        let (lo, hi) = list.iter().fold((f32::MAX, f32::MIN), |(lo, hi), (_, s)| (lo.min(*s), hi.max(*s)));
        let span = hi - lo;
        let norm = t.norm[usize::from(is_keyword)];
        for (rank, &(i, s)) in list.iter().enumerate() {
            let w = if is_keyword { keyword_weight(i) } else { 1.0 };
            let part = match fusion {
                Fusion::Rrf => 1.0 / (t.rrf_k + rank as f32 + 1.0),
                Fusion::Score => {
                    0.5 * match norm {
                        Norm::MinMax if span > 1e-9 => (s - lo) / span,
                        Norm::MinMax => 1.0,
                        Norm::Max if hi > 1e-9 => s / hi,
                        Norm::Max => 0.0,
                        Norm::Raw => s,
                    }
                }
            };
            *acc.entry(i).or_default() += w * part;
        }
    }
    let mut out: Vec<(usize, f32)> = acc.into_iter().collect();
    sort_desc(&mut out);
    out
}

/// Hybrid's keyword weight for a candidate of `kind` under a query of `shape`.
pub(super) fn keyword_weight(t: &Tuning, shape: Shape, kind: ChunkKind) -> f32 {
    t.keyword_weight[shape.index()][usize::from(kind == ChunkKind::Code)]
}

/// File evidence: each file's best chunk gains `share` of its second-best chunk's
/// score (a file with two good sections beats one with a single lucky one).
pub(super) fn file_evidence(chunks: &[ChunkRecord], ranked: &mut [(usize, f32)], share: f32) {
    if share <= 0.0 {
        return;
    }
    let mut best: HashMap<&str, (usize, f32)> = HashMap::new();
    let mut second: HashMap<&str, f32> = HashMap::new();
    for &(i, s) in ranked.iter() {
        let path = chunks[i].path.as_str();
        match best.get(path) {
            None => {
                best.insert(path, (i, s));
            }
            Some(_) => {
                second.entry(path).or_insert(s);
            }
        }
    }
    for (i, s) in ranked.iter_mut() {
        let path = chunks[*i].path.as_str();
        if best.get(path).is_some_and(|b| b.0 == *i)
            && let Some(s2) = second.get(path)
        {
            *s += share * s2.max(0.0);
        }
    }
    sort_desc(ranked);
}

/// Chunks of files that are not the package's own code ([`crate::Origin`]) score
/// `factor` times theirs ([`Tuning::not_own_code`]): below the package's own code at a
/// like score.
pub(super) fn not_own_code(chunks: &[ChunkRecord], ranked: &mut [(usize, f32)], factor: f32) {
    if factor == 1.0 {
        return;
    }
    let mut moved = false;
    for (i, s) in ranked.iter_mut() {
        if chunks[*i].origin.is_some() {
            *s = scale(*s, factor);
            moved = true;
        }
    }
    if moved {
        sort_desc(ranked);
    }
}

/// Docs ↔ code links: the candidates that one of the `from` top hits links to (a code
/// chunk whose symbol a docs hit mentions, a docs chunk that mentions a code hit's
/// symbol) score `factor` times more.
pub(super) fn link_boost(
    chunks: &[ChunkRecord],
    by_id: &HashMap<String, u32>,
    ranked: &mut [(usize, f32)],
    from: usize,
    factor: f32,
) {
    if (factor - 1.0).abs() < f32::EPSILON {
        return;
    }
    let mut linked: HashSet<usize> = HashSet::new();
    let mut mentioned: HashSet<&str> = HashSet::new();
    for &(i, _) in ranked.iter().take(from) {
        let c = &chunks[i];
        linked.extend(c.mentioned_in.iter().filter_map(|id| by_id.get(id)).map(|&j| j as usize));
        mentioned.extend(c.mentions.iter().map(String::as_str));
    }
    let top: HashSet<usize> = ranked.iter().take(from).map(|x| x.0).collect();
    for (i, s) in ranked.iter_mut() {
        let c = &chunks[*i];
        let named = c
            .symbol
            .iter()
            .chain(&c.symbols)
            .any(|sym| mentioned.contains(sym.as_str()) || mentioned.contains(crate::symbols::short_name(sym)));
        if !top.contains(i) && (linked.contains(i) || named) {
            *s = scale(*s, factor);
        }
    }
    sort_desc(ranked);
}

/// Diversity: a second section of an already-listed file loses `1 − same_file` per
/// earlier hit from that file; the same file and heading again is dropped.
pub(super) fn diversify(chunks: &[ChunkRecord], ranked: &mut Vec<(usize, f32)>, same_file: f32) {
    let mut per_file: HashMap<&str, i32> = HashMap::new();
    let mut seen: HashSet<(&str, String)> = HashSet::new();
    let mut out = Vec::with_capacity(ranked.len());
    for &(i, s) in ranked.iter() {
        let c = &chunks[i];
        if !seen.insert((c.path.as_str(), c.heading_path.join("\u{1f}"))) {
            continue;
        }
        let n = per_file.entry(c.path.as_str()).or_default();
        out.push((i, scale(s, same_file.powi(*n))));
        *n += 1;
    }
    sort_desc(&mut out);
    *ranked = out;
}

/// Both kinds in the first hits: when the first `MIX_SLOT + 1` are all one kind (docs
/// or code) and one of the other kind is among the first `reach`, the best of those
/// moves up to the last of those places, at the score of the hit it passes. A
/// question over docs and code is often answered by both (the page that explains,
/// the code that does it), and an agent shown only one kind does not know the other
/// exists. A chunk promoted for a definition or an exact string (`pinned`) is
/// never passed, and a hit under `min_score` is not moved.
pub(super) fn mix_kinds(
    chunks: &[ChunkRecord],
    ranked: &mut [(usize, f32)],
    reach: usize,
    pinned: &[usize],
    min_score: Option<f32>,
) {
    let (slot, end) = (MIX_SLOT, reach.min(ranked.len()));
    if slot >= end {
        return;
    }
    let kind = chunks[ranked[0].0].kind;
    if ranked[..=slot].iter().any(|&(i, _)| chunks[i].kind != kind) {
        return;
    }
    let Some(j) = (slot + 1..end).find(|&j| chunks[ranked[j].0].kind != kind) else { return };
    if ranked[slot..j].iter().any(|(i, _)| pinned.contains(i)) || min_score.is_some_and(|m| ranked[j].1 < m) {
        return;
    }
    let score = ranked[slot].1;
    ranked[slot..=j].rotate_right(1);
    ranked[slot].1 = score;
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
    use crate::search::Shape;

    #[test]
    fn a_boost_moves_a_score_up_and_a_penalty_down_whatever_its_sign() {
        for score in [0.4f32, -0.4] {
            assert!(scale(score, 1.05) > score, "a boost of {score}");
            assert!(scale(score, 0.5) < score, "a penalty on {score}");
            assert_eq!(scale(score, 1.0), score);
        }
        assert_eq!(scale(0.0, 2.0), 0.0);
    }

    #[test]
    fn a_code_chunk_keyword_puts_first_beats_a_page_the_model_puts_first_by_as_little() {
        // Chunk 1 is a docs page, chunk 2 code: each list puts one first and the other
        // a step behind (vector 0.62 / 0.60 over a floor of 0.30, keyword 10 / 9.5).
        let vector = [(1, 0.62), (2, 0.60), (3, 0.30)];
        let keyword = [(2, 10.0), (1, 9.5)];
        let kind = |i: usize| if i == 2 { ChunkKind::Code } else { ChunkKind::Docs };
        let fused = |t: &Tuning| {
            fuse_weighted(&vector, &keyword, Fusion::Score, t, |i| keyword_weight(t, Shape::Question, kind(i)))
        };
        let equal = Tuning { keyword_weight: [[1.0, 1.0]; 3], ..Tuning::default() };
        assert_eq!(fused(&equal)[0].0, 1, "equal weights: the model's lead wins");
        assert_eq!(fused(&Tuning::default())[0].0, 2, "the default: the code chunk's keyword lead wins");
    }

    #[test]
    fn a_chunk_not_the_packages_own_ranks_below_its_own_at_a_like_score_not_far_above() {
        let chunk = |origin| ChunkRecord { origin, ..ChunkRecord::default() };
        let chunks =
            [chunk(Some(crate::Origin::Vendored)), chunk(None), chunk(Some(crate::Origin::Legacy)), chunk(None)];
        // Vendored 0.80 beside own 0.75: own first; legacy 0.9 far above own 0.3: still above.
        let mut ranked = vec![(2, 0.9), (0, 0.80), (1, 0.75), (3, 0.3)];
        not_own_code(&chunks, &mut ranked, super::super::NOT_OWN_CODE);
        assert_eq!(ranked.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2, 0, 3]);
        // A rerank's negative logit moves down too.
        let mut ranked = vec![(0, -1.0), (1, -1.5)];
        not_own_code(&chunks, &mut ranked, 0.5);
        assert_eq!(ranked, [(1, -1.5), (0, -2.0)]);
    }

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
