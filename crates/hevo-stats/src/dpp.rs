//! Determinantal point process (DPP) core-set selection: greedy MAP inference with the fast
//! incremental Cholesky algorithm of Chen, Zhang and Zhou (2018), "Fast Greedy MAP Inference
//! for Determinantal Point Process to Improve Recommendation Diversity" (NeurIPS).
//!
//! HarnessPro (SPEC section 3, step 1) picks its training core set with a DPP that balances
//! difficulty and diversity of failure modes. A DPP with kernel `L` (positive semidefinite,
//! `n x n`) assigns a set `Y` probability `∝ det(L_Y)`; with the quality-diversity
//! decomposition `L = diag(q) S diag(q)` ([`quality_diversity_kernel`]),
//!
//! ```text
//! det(L_Y) = (Π_{i∈Y} q_i²) · det(S_Y)
//! ```
//!
//! so a set scores high when its items are individually valuable (`q`, e.g. how informative a
//! task is) and mutually dissimilar (`S`, e.g. [`cosine_similarity`] of failure-pattern
//! vectors: which candidates fail which tasks). Finding the MAP set is NP-hard; the greedy
//! algorithm adds, at each step, the item with the largest gain in `log det(L_Y)`.
//!
//! # Algorithm (Chen et al. 2018, Algorithm 1)
//!
//! Keep the Cholesky factor of `L_Y` implicitly: for every item `i` a row `c_i` and a
//! residual `d_i²` such that `d_i² = det(L_{Y∪{i}}) / det(L_Y)`, the *marginal gain*
//! (its log is the gain in `log det`). Start with `c_i = []`, `d_i² = L_ii`. Then repeat:
//!
//! ```text
//! j   = argmax_{i ∉ Y} d_i²                      (ties: smallest index)
//! stop if d_j² <= epsilon or |Y| = k
//! Y   = Y ∪ {j}
//! for i ∉ Y:   e_i = (L_ji - <c_j, c_i>) / d_j;   c_i = [c_i, e_i];   d_i² = d_i² - e_i²
//! ```
//!
//! Each step costs `O(n |Y|)`, so selecting `k` items costs `O(n k²)` time and `O(n k)`
//! memory, instead of the `O(n k⁴)` of recomputing determinants. `log det(L_Y)` is the sum of
//! `ln d_j²` over the picks. An item that duplicates (or lies in the span of) the picked ones
//! has `d_i² = 0`, so it is never picked while `epsilon > 0`; `epsilon = 1` gives the
//! unconstrained MAP rule of the paper (stop as soon as adding an item would lower `det`).

use serde::{Deserialize, Serialize};

/// Default stopping threshold on the marginal gain `d_j²` (see the module docs): small enough
/// to keep every item that is not numerically a combination of the picked ones.
pub const DEFAULT_EPSILON: f64 = 1e-10;

/// The result of a greedy MAP run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DppSelection {
    /// Picked items in the order they were picked.
    pub items: Vec<usize>,
    /// The marginal gain `d_j² = det(L_{Y∪{j}}) / det(L_Y)` of each pick, same order.
    pub gains: Vec<f64>,
    /// `log det(L_Y)` of the picked set (`Σ ln gains`; 0 for the empty set).
    pub log_det: f64,
}

/// Greedy MAP selection of at most `k` items from a PSD kernel given as rows, stopping
/// early when the best marginal gain is `<= DEFAULT_EPSILON`.
///
/// See [`greedy_map_with`] and the [module documentation](self).
///
/// # Panics
///
/// If the kernel is not square.
///
/// # Examples
///
/// ```
/// use hevo_stats::dpp::greedy_map;
/// // Items 0 and 1 are identical; 2 is different but of lower quality.
/// let l = vec![
///     vec![1.0, 1.0, 0.0],
///     vec![1.0, 1.0, 0.0],
///     vec![0.0, 0.0, 0.5],
/// ];
/// assert_eq!(greedy_map(&l, 3), vec![0, 2]);
/// ```
pub fn greedy_map(kernel: &[Vec<f64>], k: usize) -> Vec<usize> {
    greedy_map_with(kernel, k, DEFAULT_EPSILON).items
}

/// Greedy MAP selection from a kernel given as rows, with an explicit stopping threshold
/// `epsilon` on the marginal gain `d_j²`.
///
/// # Formula
///
/// See the [module documentation](self): picks `j = argmax d_i²` while `|Y| < k` and
/// `d_j² > epsilon`, updating `e_i = (L_ji - <c_j, c_i>) / d_j`, `d_i² -= e_i²`.
///
/// # Panics
///
/// If the kernel is not square.
pub fn greedy_map_with(kernel: &[Vec<f64>], k: usize, epsilon: f64) -> DppSelection {
    let n = kernel.len();
    for row in kernel {
        assert_eq!(row.len(), n, "greedy_map: kernel is not square");
    }
    greedy(n, k, epsilon, |i, j| kernel[i][j])
}

/// Greedy MAP selection from a row-major `n x n` kernel in one flat slice
/// (`kernel[i * n + j] = L_ij`); see [`greedy_map_with`].
///
/// # Panics
///
/// If `kernel.len() != n * n`.
pub fn greedy_map_flat(kernel: &[f64], n: usize, k: usize, epsilon: f64) -> DppSelection {
    assert_eq!(kernel.len(), n * n, "greedy_map_flat: kernel is not n x n");
    greedy(n, k, epsilon, |i, j| kernel[i * n + j])
}

/// The incremental-Cholesky greedy algorithm on an entry accessor.
fn greedy(n: usize, k: usize, epsilon: f64, l: impl Fn(usize, usize) -> f64) -> DppSelection {
    let k = k.min(n);
    // c is n x k, row-major: c[i * k + t] is the t-th Cholesky coordinate of item i.
    let mut c = vec![0.0; n * k];
    let mut d2: Vec<f64> = (0..n).map(|i| l(i, i)).collect();
    let mut picked = vec![false; n];
    let mut items = Vec::with_capacity(k);
    let mut gains = Vec::with_capacity(k);
    let mut log_det = 0.0;

    while items.len() < k {
        // argmax of d² over unpicked items, smallest index on ties; NaN never wins.
        let mut best: Option<(usize, f64)> = None;
        for i in 0..n {
            if !picked[i] && best.map_or(d2[i] > f64::NEG_INFINITY, |(_, b)| d2[i] > b) {
                best = Some((i, d2[i]));
            }
        }
        let Some((j, gain)) = best else { break };
        if gain.is_nan() || gain <= epsilon {
            break;
        }
        let t = items.len();
        picked[j] = true;
        items.push(j);
        gains.push(gain);
        log_det += gain.ln();
        if items.len() == k {
            break;
        }
        let dj = gain.sqrt();
        let cj: Vec<f64> = c[j * k..j * k + t].to_vec();
        for (i, ci) in c.chunks_mut(k).enumerate() {
            if picked[i] {
                continue;
            }
            let dot: f64 = cj.iter().zip(&ci[..t]).map(|(a, b)| a * b).sum();
            let e = (l(j, i) - dot) / dj;
            ci[t] = e;
            // Clamp rounding below zero: a residual variance cannot be negative.
            d2[i] = (d2[i] - e * e).max(0.0);
        }
    }
    DppSelection {
        items,
        gains,
        log_det,
    }
}

/// The quality-diversity kernel `L = diag(q) S diag(q)`.
///
/// # Formula
///
/// `L_ij = q_i S_ij q_j`. `L` is PSD whenever `S` is (a congruence keeps the signature), and
/// `det(L_Y) = Π_{i∈Y} q_i² · det(S_Y)`. A common choice of quality is `q_i = exp(γ r_i)` for a
/// relevance score `r_i` (Chen et al. 2018, section 4), which makes `γ` trade relevance
/// against diversity; for task core sets `r_i` can be a difficulty or disagreement score.
///
/// # Panics
///
/// If `similarity` is not `q.len() x q.len()`.
pub fn quality_diversity_kernel(quality: &[f64], similarity: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = quality.len();
    assert_eq!(
        similarity.len(),
        n,
        "quality_diversity_kernel: size mismatch"
    );
    similarity
        .iter()
        .enumerate()
        .map(|(i, row)| {
            assert_eq!(row.len(), n, "quality_diversity_kernel: size mismatch");
            row.iter()
                .enumerate()
                .map(|(j, s)| quality[i] * s * quality[j])
                .collect()
        })
        .collect()
}

/// Cosine similarity matrix of feature vectors (e.g. per-task failure patterns: entry `c` is
/// 1 when candidate `c` failed the task).
///
/// # Formula
///
/// `S_ij = <v_i, v_j> / (|v_i| |v_j|)`, the Gram matrix of the unit vectors, hence PSD with
/// unit diagonal. A zero vector has no direction: it gets `S_ii = 1` and `S_ij = 0` for
/// `j ≠ i` (treated as unlike everything else), which keeps `S` PSD.
///
/// # Panics
///
/// If the vectors differ in length.
pub fn cosine_similarity(vectors: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = vectors.len();
    let dim = vectors.first().map_or(0, Vec::len);
    for v in vectors {
        assert_eq!(v.len(), dim, "cosine_similarity: vectors differ in length");
    }
    let norms: Vec<f64> = vectors
        .iter()
        .map(|v| v.iter().map(|x| x * x).sum::<f64>().sqrt())
        .collect();
    let mut s = vec![vec![0.0; n]; n];
    for i in 0..n {
        s[i][i] = 1.0;
        for j in i + 1..n {
            let v = if norms[i] > 0.0 && norms[j] > 0.0 {
                let dot: f64 = vectors[i].iter().zip(&vectors[j]).map(|(a, b)| a * b).sum();
                (dot / (norms[i] * norms[j])).clamp(-1.0, 1.0)
            } else {
                0.0
            };
            s[i][j] = v;
            s[j][i] = v;
        }
    }
    s
}
