//! The fit: a low-rank residual map on the query vector ([`QueryMap`]), trained by
//! contrastive learning (InfoNCE) on mined pairs, against the other answers of the
//! batch and hard negatives from the bundle's own search. The chunks' vectors stay
//! fixed. Pure Rust, deterministic for a fixed seed (the order of every sum is fixed;
//! threads only split independent rows).
//!
//! Negatives never come from the positive's own file: the answer a question wants is a
//! file (and its lines), and a sibling section of the same page is not wrong.

use atlas_runtime::query_map::QueryMap;
use rayon::prelude::*;

/// How the fit runs (the tune stage's params give these).
#[derive(Debug, Clone, Copy)]
pub struct FitOptions {
    pub rank: usize,
    /// At most this many passes; the fit keeps the pass whose held-out MRR is best and
    /// stops after [`PATIENCE`] passes without a better one.
    pub epochs: usize,
    pub batch: usize,
    pub learning_rate: f32,
    /// Hard negatives per question and step, drawn from its [`HARD_POOL`] nearest
    /// other-file chunks.
    pub hard: usize,
    /// Softmax scale (1 / temperature).
    pub scale: f32,
    /// L2 pull of A and B towards zero (the map towards the identity).
    pub weight_decay: f32,
    pub seed: u64,
}

/// The nearest chunks of other files each question's hard negatives are drawn from.
pub const HARD_POOL: usize = 16;
/// Passes without a better held-out MRR before the fit stops.
pub const PATIENCE: usize = 3;

/// The fixed side: one row per chunk (its first window, unit length), and each
/// chunk's file.
#[derive(Debug)]
pub struct Answers<'a> {
    pub dims: usize,
    pub rows: &'a [f32],
    pub file: &'a [u32],
}

impl Answers<'_> {
    fn row(&self, c: usize) -> &[f32] {
        &self.rows[c * self.dims..(c + 1) * self.dims]
    }
    fn len(&self) -> usize {
        self.file.len()
    }
}

/// A question's vector (unit length) and its answer's chunk.
#[derive(Debug, Clone)]
pub struct Example {
    pub q: Vec<f32>,
    pub chunk: usize,
}

/// What the fit kept.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub map: QueryMap,
    /// The pass kept (0: none beat the identity; the map is then the identity).
    pub epochs: usize,
    pub before: f64,
    pub after: f64,
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Scores of `q` against every chunk.
fn scores(q: &[f32], answers: &Answers<'_>) -> Vec<f32> {
    (0..answers.len()).map(|c| dot(q, answers.row(c))).collect()
}

/// Reciprocal rank (cut at 10) of `e`'s answer for the query vector `q`: chunks of
/// its own file do not count against it.
fn reciprocal_rank(q: &[f32], e: &Example, answers: &Answers<'_>) -> f64 {
    let s = scores(q, answers);
    let own = s[e.chunk];
    let file = answers.file[e.chunk];
    let above = s.iter().zip(answers.file).filter(|&(&x, &f)| f != file && x > own).count();
    if above < 10 { 1.0 / (above + 1) as f64 } else { 0.0 }
}

/// MRR@10 of `examples` through `map` (`None`: the model's vectors as they are).
pub fn mrr(map: Option<&QueryMap>, examples: &[Example], answers: &Answers<'_>) -> f64 {
    if examples.is_empty() {
        return 0.0;
    }
    let each: Vec<f64> = examples
        .par_iter()
        .map(|e| match map {
            Some(m) => reciprocal_rank(&m.apply(&e.q), e, answers),
            None => reciprocal_rank(&e.q, e, answers),
        })
        .collect();
    // Summed in order: the same figure on any number of threads.
    each.iter().sum::<f64>() / examples.len() as f64
}

/// Each example's [`HARD_POOL`] nearest chunks of other files, by the model's vectors:
/// the bundle's own vector search.
pub fn hard_pool(examples: &[Example], answers: &Answers<'_>) -> Vec<Vec<u32>> {
    examples
        .par_iter()
        .map(|e| {
            let s = scores(&e.q, answers);
            let file = answers.file[e.chunk];
            let mut idx: Vec<u32> = (0..answers.len() as u32).filter(|&c| answers.file[c as usize] != file).collect();
            let k = HARD_POOL.min(idx.len());
            if k == 0 {
                return Vec::new();
            }
            let by_score = |a: &u32, b: &u32| s[*b as usize].total_cmp(&s[*a as usize]).then(a.cmp(b));
            idx.select_nth_unstable_by(k - 1, by_score);
            idx.truncate(k);
            idx.sort_by(by_score);
            idx
        })
        .collect()
}

/// Adam's state for one parameter block.
struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
}

impl Adam {
    fn new(n: usize) -> Adam {
        Adam { m: vec![0.0; n], v: vec![0.0; n] }
    }
    fn step(&mut self, w: &mut [f32], g: &[f32], lr: f32, t: i32) {
        let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
        let (c1, c2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
        for i in 0..w.len() {
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g[i];
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g[i] * g[i];
            w[i] -= lr * (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + eps);
        }
    }
}

/// Fits the map on `train`, keeping the pass with the best MRR on `held`.
pub fn fit(train: &[Example], held: &[Example], answers: &Answers<'_>, o: &FitOptions) -> Fitted {
    let (d, r) = (answers.dims, o.rank.clamp(1, answers.dims));
    let before = mrr(None, held, answers);
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let mut map = QueryMap::identity(d, r);
    // A starts at zero (the identity); B at small random values, so A's gradient is
    // not zero.
    let spread = 1.0 / (d as f32).sqrt();
    map.b.iter_mut().for_each(|x| *x = (rng.f32() * 2.0 - 1.0) * spread);
    let pools = hard_pool(train, answers);
    let mut best = Fitted { map: QueryMap::identity(d, r), epochs: 0, before, after: before };
    let (mut adam_a, mut adam_b) = (Adam::new(d * r), Adam::new(d * r));
    let mut t = 0;
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut since_best = 0;
    for epoch in 1..=o.epochs {
        rng.shuffle(&mut order);
        for batch in order.chunks(o.batch.max(2)) {
            let hard: Vec<Vec<u32>> = batch
                .iter()
                .map(|&i| {
                    let pool = &pools[i];
                    (0..o.hard.min(pool.len())).map(|_| pool[rng.usize(..pool.len())]).collect()
                })
                .collect();
            let (ga, gb) = gradients(&map, train, batch, &hard, answers, o.scale);
            let n = batch.len() as f32;
            let ga: Vec<f32> = ga.iter().zip(&map.a).map(|(g, w)| g / n + o.weight_decay * w).collect();
            let gb: Vec<f32> = gb.iter().zip(&map.b).map(|(g, w)| g / n + o.weight_decay * w).collect();
            t += 1;
            adam_a.step(&mut map.a, &ga, o.learning_rate, t);
            adam_b.step(&mut map.b, &gb, o.learning_rate, t);
        }
        let score = mrr(Some(&map), held, answers);
        if score > best.after {
            best = Fitted { map: map.clone(), epochs: epoch, before, after: score };
            since_best = 0;
        } else {
            since_best += 1;
            if since_best >= PATIENCE {
                break;
            }
        }
    }
    best
}

/// The InfoNCE loss's gradients with respect to A and B, summed over the batch: each
/// question against its answer, the batch's other answers (of other files) and its
/// hard negatives.
fn gradients(
    map: &QueryMap,
    train: &[Example],
    batch: &[usize],
    hard: &[Vec<u32>],
    answers: &Answers<'_>,
    scale: f32,
) -> (Vec<f32>, Vec<f32>) {
    let (d, r) = (map.dims, map.rank);
    let per: Vec<(Vec<f32>, Vec<f32>)> = batch
        .par_iter()
        .zip(hard)
        .map(|(&i, hard)| {
            let e = &train[i];
            let z = map.project(&e.q);
            let v = map.residual(&e.q);
            let norm = dot(&v, &v).sqrt().max(1e-12);
            let u: Vec<f32> = v.iter().map(|x| x / norm).collect();
            let file = answers.file[e.chunk];
            let mut cands: Vec<usize> = vec![e.chunk];
            cands.extend(batch.iter().map(|&j| train[j].chunk).filter(|&c| answers.file[c] != file));
            cands.extend(hard.iter().map(|&c| c as usize));
            let logits: Vec<f32> = cands.iter().map(|&c| scale * dot(&u, answers.row(c))).collect();
            let top = logits.iter().copied().fold(f32::MIN, f32::max);
            let exp: Vec<f32> = logits.iter().map(|l| (l - top).exp()).collect();
            let sum: f32 = exp.iter().sum();
            // dL/du = scale · (Σ p_c d_c − d_answer)
            let mut gu = vec![0.0f32; d];
            for (k, &c) in cands.iter().enumerate() {
                let p = exp[k] / sum - if k == 0 { 1.0 } else { 0.0 };
                for (g, x) in gu.iter_mut().zip(answers.row(c)) {
                    *g += scale * p * x;
                }
            }
            // Through the normalisation: dL/dv = (gu − u (u·gu)) / |v|.
            let ug = dot(&u, &gu);
            let gv: Vec<f32> = gu.iter().zip(&u).map(|(g, u)| (g - u * ug) / norm).collect();
            // v = q + A z, z = Bᵀ q: dA = gv zᵀ, dB = q (Aᵀ gv)ᵀ.
            let mut ga = vec![0.0f32; d * r];
            let mut atg = vec![0.0f32; r];
            for (k, row) in map.a.chunks_exact(r).enumerate() {
                let gk = gv[k];
                for m in 0..r {
                    ga[k * r + m] = gk * z[m];
                    atg[m] += row[m] * gk;
                }
            }
            let mut gb = vec![0.0f32; d * r];
            for (k, &qk) in e.q.iter().enumerate() {
                for m in 0..r {
                    gb[k * r + m] = qk * atg[m];
                }
            }
            (ga, gb)
        })
        .collect();
    // Summed in batch order: the same result on any number of threads.
    let mut ga = vec![0.0f32; d * r];
    let mut gb = vec![0.0f32; d * r];
    for (a, b) in &per {
        ga.iter_mut().zip(a).for_each(|(x, y)| *x += y);
        gb.iter_mut().zip(b).for_each(|(x, y)| *x += y);
    }
    (ga, gb)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Questions whose vectors point half-way between their answer and a decoy: the
    /// fit learns to turn them towards the answer, and reruns give the same map.
    #[test]
    fn the_fit_learns_a_rotation_and_is_deterministic() {
        let d = 8;
        // Chunks 0..4 answer; 4..8 are decoys, each in its own file.
        let mut rows = vec![0.0f32; 8 * d];
        for c in 0..8 {
            rows[c * d + c] = 1.0;
        }
        let file: Vec<u32> = (0..8).collect();
        let answers = Answers { dims: d, rows: &rows, file: &file };
        let example = |c: usize, w: f32| {
            let mut q = vec![0.0f32; d];
            q[c] = w;
            q[c + 4] = 1.0;
            let n = dot(&q, &q).sqrt();
            Example { q: q.iter().map(|x| x / n).collect(), chunk: c }
        };
        let train: Vec<Example> = (0..4).flat_map(|c| [example(c, 0.9), example(c, 0.8)]).collect();
        let held: Vec<Example> = (0..4).map(|c| example(c, 0.85)).collect();
        let o = FitOptions {
            rank: 4,
            epochs: 60,
            batch: 4,
            learning_rate: 0.05,
            hard: 2,
            scale: 20.0,
            weight_decay: 0.0,
            seed: 7,
        };
        let a = fit(&train, &held, &answers, &o);
        assert!(a.before < 0.6, "the decoy wins before: {}", a.before);
        assert!(a.after > 0.99, "the answer wins after: {}", a.after);
        let b = fit(&train, &held, &answers, &o);
        assert_eq!(a.map, b.map, "the same seed gives the same map");
        assert_eq!(a.epochs, b.epochs);
    }
}
