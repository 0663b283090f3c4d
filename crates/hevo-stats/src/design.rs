//! Sampling designs: which tasks a candidate is evaluated on, and each task's inclusion
//! probability `pi_t = P(t in S)`.
//!
//! - [`successive_sample`]: the paper's draw, `m` tasks without replacement, each next task
//!   drawn with probability proportional to its weight among those left (successive
//!   sampling, "probability proportional to size without replacement").
//! - [`McInclusion`]: the paper's inclusion probabilities, estimated by simulating the same
//!   draw (default 4,000 times) with seeded common random numbers.
//! - [`successive_inclusion_exact`]: the low-noise alternative, the exact inclusion
//!   probabilities of successive sampling computed by numerical integration (no simulation
//!   noise, accurate to about `1e-9`).
//! - [`pips_inclusion`] and [`NestedPoisson`]: a design whose inclusion probabilities are
//!   known exactly by construction (Poisson sampling with `pi_t` proportional to `w_t`,
//!   capped at 1), nested so a sample can grow batch by batch (racing).
//! - [`Strata`]: stratified versions, one stratum per task group with
//!   `m_g = ceil(rho * N_g)`.
//!
//! Everything here is pure: randomness comes from the caller's seeded generator.

use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The paper's default number of Monte Carlo draws for inclusion probabilities.
pub const DEFAULT_MC_DRAWS: usize = 4_000;

/// A standard exponential variate (`-ln U`, `U` uniform in `(0, 1]`).
fn exp1<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u: f64 = rng.gen();
    -(1.0 - u).ln()
}

/// Draws `m` distinct tasks by successive sampling with probability proportional to
/// `weights`, returned in draw order.
///
/// # Formula
///
/// The first task is `t` with probability `w_t / sum_j w_j`; each next one is drawn the same
/// way among the tasks not yet drawn. Implemented as exponential order sampling, which has
/// exactly the same distribution: `key_t = E_t / w_t` with `E_t ~ Exp(1)` i.i.d., and the
/// sample is the `m` smallest keys in increasing order (Rosén 1997). Tasks with weight `0`
/// are drawn only after every positive-weight task. `m` is clamped to the number of tasks.
pub fn successive_sample<R: Rng + ?Sized>(weights: &[f64], m: usize, rng: &mut R) -> Vec<usize> {
    let m = m.min(weights.len());
    let mut keys: Vec<(f64, usize)> = weights
        .iter()
        .enumerate()
        .map(|(t, &w)| {
            let e = exp1(rng);
            let k = if w > 0.0 { e / w } else { f64::INFINITY };
            // Zero-weight tasks tie at infinity; break those ties at random.
            (if k.is_finite() { k } else { f64::MAX - e }, t)
        })
        .collect();
    if m == 0 {
        return Vec::new();
    }
    if m < keys.len() {
        keys.select_nth_unstable_by(m - 1, |a, b| a.0.total_cmp(&b.0));
        keys.truncate(m);
    }
    keys.sort_by(|a, b| a.0.total_cmp(&b.0));
    keys.into_iter().map(|(_, t)| t).collect()
}

/// Monte Carlo inclusion probabilities of [`successive_sample`], with common random numbers.
///
/// The exponential variates `E_{d,t}` of `draws` simulated draws are generated once from
/// the seed and reused for every weight vector, so each call costs `O(draws * N)` without
/// generating random numbers, and estimates for successive iterations are comparable. Each
/// call is still an unbiased estimate of the inclusion probabilities, exactly as if the
/// draw had been simulated afresh (the paper simulates 4,000 draws per iteration).
#[derive(Clone, Debug)]
pub struct McInclusion {
    n: usize,
    draws: usize,
    exps: Vec<f32>,
    keys: Vec<u64>,
}

impl McInclusion {
    /// Precomputes the variates for `n_tasks` tasks and `draws` simulated draws.
    pub fn new(n_tasks: usize, draws: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let exps = (0..n_tasks * draws)
            .map(|_| exp1(&mut rng) as f32)
            .collect();
        McInclusion {
            n: n_tasks,
            draws,
            exps,
            keys: Vec::with_capacity(n_tasks),
        }
    }

    /// Number of simulated draws.
    pub fn draws(&self) -> usize {
        self.draws
    }

    /// Estimated `pi_t` for samples of size `m` drawn with `weights` (length `n_tasks`).
    ///
    /// # Formula
    ///
    /// `pi_t = (1/D) sum_{d=1..D} 1[t is among the m smallest E_{d,j} / w_j]`. The estimates
    /// sum to exactly `m`. A task never drawn in simulation gets `pi_t = 1 / (2D)` (half a
    /// draw) so that the estimators stay finite should it ever be sampled.
    pub fn inclusion(&mut self, weights: &[f64], m: usize) -> Vec<f64> {
        assert_eq!(weights.len(), self.n, "weights length must equal n_tasks");
        let n = self.n;
        let m = m.min(n);
        let mut counts = vec![0u32; n];
        if m == n {
            return vec![1.0; n];
        }
        if m == 0 {
            return vec![0.0; n];
        }
        // Keys are packed as (f32 bits << 32 | task): non-negative f32 values order like
        // their bit patterns, so selection runs on plain integers (ties broken by index,
        // probability zero for positive weights). Precision: f32 keys perturb the draw
        // by about 1e-7 relative, far below the Monte Carlo error.
        let mean_w = weights.iter().sum::<f64>() / n as f64;
        let inv: Vec<f32> = weights
            .iter()
            .map(|&w| {
                if w > 0.0 {
                    (mean_w / w) as f32
                } else {
                    f32::MAX
                }
            })
            .collect();
        for d in 0..self.draws {
            let e = &self.exps[d * n..(d + 1) * n];
            self.keys.clear();
            self.keys
                .extend(e.iter().zip(&inv).enumerate().map(|(t, (e, i))| {
                    let k = (e * i).min(f32::MAX);
                    ((k.to_bits() as u64) << 32) | t as u64
                }));
            self.keys.select_nth_unstable(m - 1);
            for &k in &self.keys[..m] {
                counts[(k & 0xffff_ffff) as usize] += 1;
            }
        }
        let d = self.draws as f64;
        counts
            .into_iter()
            .map(|c| if c == 0 { 0.5 / d } else { c as f64 / d })
            .collect()
    }
}

/// Monte Carlo inclusion probabilities of successive sampling (one-off convenience).
pub fn mc_inclusion(weights: &[f64], m: usize, draws: usize, seed: u64) -> Vec<f64> {
    McInclusion::new(weights.len(), draws, seed).inclusion(weights, m)
}

/// 8-point Gauss-Legendre nodes and weights on `[-1, 1]` (positive half).
const GL8: [(f64, f64); 4] = [
    (0.183_434_642_495_649_8, 0.362_683_783_378_362),
    (0.525_532_409_916_329, 0.313_706_645_877_887_3),
    (0.796_666_477_413_626_7, 0.222_381_034_453_374_5),
    (0.960_289_856_497_536_3, 0.101_228_536_290_376_3),
];

/// `P(C(x) <= k)` for `C(x) = sum_j Bernoulli(1 - exp(-w_j x))` (all tasks).
fn count_cdf(weights: &[f64], x: f64, k: usize, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.resize(k + 1, 0.0);
    buf[0] = 1.0;
    for &w in weights {
        let q = 1.0 - (-w * x).exp();
        for a in (1..=k).rev() {
            buf[a] = buf[a] * (1.0 - q) + buf[a - 1] * q;
        }
        buf[0] *= 1.0 - q;
    }
    buf.iter().sum()
}

/// Exact inclusion probabilities of [`successive_sample`] of size `m` (no simulation).
///
/// # Formula
///
/// Successive sampling equals exponential order sampling: `t` is in the sample iff its key
/// `E_t / w_t` is among the `m` smallest. Conditioning on `t`'s key `x`,
///
/// `pi_t = integral_0^inf w_t exp(-w_t x) P(C_{-t}(x) <= m - 1) dx`,
///
/// where `C_{-t}(x) = sum_{j != t} B_j(x)` counts the other tasks whose key is below `x`,
/// `B_j(x) ~ Bernoulli(1 - exp(-w_j x))` independent (a Poisson-binomial variable).
///
/// - `w_t`: weight of task `t` (positive);
/// - `m`: sample size, `N`: number of tasks.
///
/// The distribution of `C_{-t}(x)` up to `m - 1` comes from prefix and suffix
/// convolutions (`O(N m)` per node for all `t` together); the integral is truncated where
/// `P(C(x) <= m) < 1e-14` and evaluated by composite 8-point Gauss-Legendre quadrature
/// (32 panels). The result sums to `m` up to about `1e-7`; a test checks it against Monte
/// Carlo. Cost `O(256 N m)`. Zero-weight tasks get `pi_t = 0` unless `m` exceeds the number
/// of positive weights, where the design is not defined here (it panics).
pub fn successive_inclusion_exact(weights: &[f64], m: usize) -> Vec<f64> {
    let n = weights.len();
    let m = m.min(n);
    if m == n {
        return vec![1.0; n];
    }
    if m == 0 {
        return vec![0.0; n];
    }
    let positive = weights.iter().filter(|w| **w > 0.0).count();
    assert!(
        m <= positive,
        "sample size exceeds the number of positive weights"
    );
    // Scale weights to mean 1 so x is O(1).
    let mean = weights.iter().sum::<f64>() / n as f64;
    let w: Vec<f64> = weights.iter().map(|v| v / mean).collect();
    let mut buf = Vec::new();
    let mut hi = 1.0;
    while count_cdf(&w, hi, m, &mut buf) > 1e-14 {
        hi *= 2.0;
        if hi > 1e12 {
            break;
        }
    }
    let panels = 32;
    let width = hi / panels as f64;
    let mut pi = vec![0.0; n];
    // prefix[j * m + a] = P(sum of the first j Bernoullis = a), a < m.
    let mut prefix = vec![0.0; (n + 1) * m];
    let mut suffix_cdf = vec![0.0; (n + 1) * m];
    let mut suf = vec![0.0; m];
    let mut q = vec![0.0; n];
    for p in 0..panels {
        let center = (p as f64 + 0.5) * width;
        for &(node, gw) in &GL8 {
            for sign in [-1.0, 1.0] {
                let x = center + sign * node * width / 2.0;
                let qw = gw * width / 2.0;
                for (qj, wj) in q.iter_mut().zip(&w) {
                    *qj = 1.0 - (-wj * x).exp();
                }
                // prefix
                prefix[..m].fill(0.0);
                prefix[0] = 1.0;
                for j in 0..n {
                    let (cur, next) = prefix.split_at_mut((j + 1) * m);
                    let cur = &cur[j * m..];
                    let next = &mut next[..m];
                    let qj = q[j];
                    next[0] = cur[0] * (1.0 - qj);
                    for a in 1..m {
                        next[a] = cur[a] * (1.0 - qj) + cur[a - 1] * qj;
                    }
                }
                // suffix distribution of tasks j..n, stored as its CDF
                suf.fill(0.0);
                suf[0] = 1.0;
                let base = n * m;
                {
                    let mut acc = 0.0;
                    for a in 0..m {
                        acc += suf[a];
                        suffix_cdf[base + a] = acc;
                    }
                }
                for j in (0..n).rev() {
                    let qj = q[j];
                    for a in (1..m).rev() {
                        suf[a] = suf[a] * (1.0 - qj) + suf[a - 1] * qj;
                    }
                    suf[0] *= 1.0 - qj;
                    let mut acc = 0.0;
                    for a in 0..m {
                        acc += suf[a];
                        suffix_cdf[j * m + a] = acc;
                    }
                }
                for t in 0..n {
                    if w[t] <= 0.0 {
                        continue;
                    }
                    let pre = &prefix[t * m..(t + 1) * m];
                    let sc = &suffix_cdf[(t + 1) * m..(t + 2) * m];
                    let mut cdf = 0.0;
                    for a in 0..m {
                        cdf += pre[a] * sc[m - 1 - a];
                    }
                    pi[t] += qw * w[t] * (-w[t] * x).exp() * cdf;
                }
            }
        }
    }
    for v in &mut pi {
        *v = v.clamp(0.0, 1.0);
    }
    pi
}

/// Inclusion probabilities proportional to `weights`, capped at 1, summing to `n`.
///
/// # Formula
///
/// `pi_t = min(1, c w_t)` with `c` such that `sum_t pi_t = n` (found by iterating the
/// capped set: tasks whose `c w_t >= 1` get `pi_t = 1`, the others share the rest in
/// proportion to `w_t`). Zero-weight tasks get `0` unless `n` exceeds the number of
/// positive weights, in which case the remainder is spread evenly over them.
pub fn pips_inclusion(weights: &[f64], n: f64) -> Vec<f64> {
    let big_n = weights.len();
    let n = n.clamp(0.0, big_n as f64);
    let mut pi = vec![0.0; big_n];
    let mut capped = vec![false; big_n];
    loop {
        let n_capped = capped.iter().filter(|c| **c).count() as f64;
        let rest: f64 = weights
            .iter()
            .zip(&capped)
            .filter(|(_, c)| !**c)
            .map(|(w, _)| w.max(0.0))
            .sum();
        let target = n - n_capped;
        if rest <= 0.0 {
            // Spread what is left evenly over uncapped (zero-weight) tasks.
            let free = big_n as f64 - n_capped;
            for (p, c) in pi.iter_mut().zip(&capped) {
                *p = if *c {
                    1.0
                } else if free > 0.0 {
                    (target / free).clamp(0.0, 1.0)
                } else {
                    0.0
                };
            }
            return pi;
        }
        let c = target / rest;
        let mut changed = false;
        for t in 0..big_n {
            if !capped[t] && c * weights[t].max(0.0) >= 1.0 {
                capped[t] = true;
                changed = true;
            }
        }
        if !changed {
            for t in 0..big_n {
                pi[t] = if capped[t] {
                    1.0
                } else {
                    c * weights[t].max(0.0)
                };
            }
            return pi;
        }
    }
}

/// Nested Poisson sampling with exactly known inclusion probabilities, grown in levels.
///
/// Every task gets one uniform `U_t` for the whole race. Level `L` (expected size
/// `L * batch`) is the sample `S_L = {t : U_t < pi_t(L)}` with
/// `pi_t(L) = min(1, c_L w_t)` from [`pips_inclusion`]. Because `pi_t(L)` grows with `L`,
/// `S_1 ⊆ S_2 ⊆ ...`: a racing candidate's tasks can be extended batch by batch, and the
/// inclusion probability of every task at every level is exact (`pi_t(L)`), with no
/// simulation. Independent inclusions make the variance estimator exact as well
/// ([`crate::estimate::Design::Poisson`]). The sample size is random (mean `L * batch`).
#[derive(Clone, Debug)]
pub struct NestedPoisson {
    weights: Vec<f64>,
    uniforms: Vec<f64>,
}

impl NestedPoisson {
    /// A new nested sample over tasks with these weights, drawing the `U_t` from `rng`.
    pub fn new<R: Rng + ?Sized>(weights: &[f64], rng: &mut R) -> Self {
        NestedPoisson {
            weights: weights.to_vec(),
            uniforms: weights.iter().map(|_| rng.gen::<f64>()).collect(),
        }
    }

    /// Inclusion probabilities at expected sample size `expected` (exact).
    pub fn inclusion(&self, expected: f64) -> Vec<f64> {
        pips_inclusion(&self.weights, expected)
    }

    /// The sample at expected size `expected` and its inclusion probabilities.
    pub fn sample(&self, expected: f64) -> (Vec<usize>, Vec<f64>) {
        let pi = self.inclusion(expected);
        let s = (0..pi.len())
            .filter(|&t| self.uniforms[t] < pi[t])
            .collect();
        (s, pi)
    }
}

/// Tasks grouped into strata (one stratum per task group, e.g. a dataset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Strata {
    /// Task indices of each stratum, in increasing order.
    pub members: Vec<Vec<usize>>,
}

impl Strata {
    /// One stratum holding all `n_tasks` tasks.
    pub fn single(n_tasks: usize) -> Self {
        Strata {
            members: vec![(0..n_tasks).collect()],
        }
    }

    /// Strata from a group label per task (labels are `0..G`; empty groups are dropped).
    pub fn from_groups(groups: &[usize]) -> Self {
        let g = groups.iter().copied().max().map_or(0, |x| x + 1);
        let mut members = vec![Vec::new(); g];
        for (t, &k) in groups.iter().enumerate() {
            members[k].push(t);
        }
        members.retain(|m| !m.is_empty());
        Strata { members }
    }

    /// Number of strata.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True when there is no stratum.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Per-stratum sample sizes `m_g = ceil(rho * N_g)`, at least 1 and at most `N_g`.
    pub fn sizes(&self, rho: f64) -> Vec<usize> {
        self.members
            .iter()
            .map(|m| stratum_size(m.len(), rho))
            .collect()
    }
}

/// `ceil(rho * n)` clamped to `[1, n]` (0 when `n = 0`), robust to float noise.
pub fn stratum_size(n: usize, rho: f64) -> usize {
    if n == 0 {
        return 0;
    }
    let x = rho * n as f64;
    let m = (x - 1e-9).ceil().max(1.0) as usize;
    m.min(n)
}

/// Stratified successive sampling: `m_g` tasks per stratum by [`successive_sample`] on the
/// stratum's weights; returns global task indices, stratum by stratum.
pub fn stratified_successive_sample<R: Rng + ?Sized>(
    strata: &Strata,
    weights: &[f64],
    sizes: &[usize],
    rng: &mut R,
) -> Vec<usize> {
    let mut out = Vec::new();
    for (members, &m) in strata.members.iter().zip(sizes) {
        let w: Vec<f64> = members.iter().map(|&t| weights[t]).collect();
        out.extend(
            successive_sample(&w, m, rng)
                .into_iter()
                .map(|i| members[i]),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stratum_size_is_ceil() {
        assert_eq!(stratum_size(130, 0.2), 26);
        assert_eq!(stratum_size(130, 0.07), 10);
        assert_eq!(stratum_size(10, 0.2), 2);
        assert_eq!(stratum_size(3, 0.01), 1);
    }

    #[test]
    fn successive_sample_is_distinct_and_sized() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let s = successive_sample(&[1.0, 2.0, 0.0, 3.0, 0.5], 5, &mut rng);
        assert_eq!(s.len(), 5);
        let mut u = s.clone();
        u.sort();
        u.dedup();
        assert_eq!(u.len(), 5);
        assert_eq!(s[4], 2, "zero weight task comes last");
    }

    #[test]
    fn pips_caps_at_one() {
        let pi = pips_inclusion(&[10.0, 1.0, 1.0, 1.0], 2.0);
        assert!((pi[0] - 1.0).abs() < 1e-12);
        assert!((pi.iter().sum::<f64>() - 2.0).abs() < 1e-12);
        assert!((pi[1] - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn exact_inclusion_of_equal_weights_is_m_over_n() {
        let pi = successive_inclusion_exact(&[1.0; 20], 5);
        for p in pi {
            assert!((p - 0.25).abs() < 1e-6, "{p}");
        }
    }

    #[test]
    fn exact_inclusion_two_tasks_closed_form() {
        // m = 1: pi_t = w_t / sum w.
        let pi = successive_inclusion_exact(&[1.0, 3.0], 1);
        assert!(
            (pi[0] - 0.25).abs() < 1e-6 && (pi[1] - 0.75).abs() < 1e-6,
            "{pi:?}"
        );
        // N = 3, m = 2: pi_1 = p1 + sum_{j != 1} p_j * w1/(W - w_j).
        let w = [1.0, 2.0, 3.0];
        let pi = successive_inclusion_exact(&w, 2);
        let p1 = 1.0 / 6.0 + (2.0 / 6.0) * (1.0 / 4.0) + (3.0 / 6.0) * (1.0 / 3.0);
        assert!((pi[0] - p1).abs() < 1e-6, "{pi:?} {p1}");
        assert!((pi.iter().sum::<f64>() - 2.0).abs() < 1e-6);
    }

    #[test]
    fn nested_poisson_is_nested() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let w: Vec<f64> = (1..=50).map(|i| i as f64).collect();
        let d = NestedPoisson::new(&w, &mut rng);
        let (a, _) = d.sample(5.0);
        let (b, _) = d.sample(15.0);
        assert!(a.iter().all(|t| b.contains(t)));
    }
}
