//! Pareto dominance and HarnessPro's tier selection (SPEC section 3, step 5).
//!
//! HarnessPro keeps up to three harnesses per epoch: among candidates at least as good as the
//! initial harness on pass rate and not Pareto-dominated, it picks the one closest to the
//! ideal point (best pass rate, lowest cost) under three weightings of the two objectives:
//!
//! | tier   | `alpha` (pass rate) | `beta` (cost) |
//! |--------|---------------------|---------------|
//! | lite   | 1                   | 2             |
//! | medium | 1                   | 1             |
//! | heavy  | 2                   | 1             |
//!
//! The general functions ([`dominates`], [`pareto_front`], [`normalized_goodness`],
//! [`closest_to_ideal`]) take any number of objectives, each with a [`Direction`]; the
//! two-objective API ([`Point`], [`non_dominated`], [`tier_picks`]) is built on them.
//!
//! # Conventions
//!
//! - Dominance is strict: `a` dominates `b` when `a` is at least as good on every objective
//!   and strictly better on at least one. Identical points do not dominate each other, so
//!   duplicates are **all kept** in a Pareto front; tie-breaking by earliest index then makes
//!   sure duplicates never yield two different picks.
//! - Points with a `NaN` objective are never on the front and never picked (they neither
//!   dominate nor are comparable).

use serde::{Deserialize, Serialize};

/// Whether an objective is to be maximized or minimized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// Larger is better (e.g. pass rate).
    Maximize,
    /// Smaller is better (e.g. cost per task).
    Minimize,
}

impl Direction {
    /// `+1` for [`Direction::Maximize`], `-1` for [`Direction::Minimize`]: multiplying an
    /// objective by it turns every objective into one to maximize.
    pub fn sign(self) -> f64 {
        match self {
            Direction::Maximize => 1.0,
            Direction::Minimize => -1.0,
        }
    }
}

/// The objectives of a HarnessPro candidate: pass rate (maximize) and cost (minimize).
pub const PASS_COST: [Direction; 2] = [Direction::Maximize, Direction::Minimize];

/// Whether `a` Pareto-dominates `b` under `dirs`.
///
/// # Formula
///
/// With `s_i = dirs[i].sign()`: `a ≻ b  ⇔  ∀i: s_i a_i ≥ s_i b_i  ∧  ∃i: s_i a_i > s_i b_i`.
/// Any `NaN` coordinate in `a` or `b` makes the result `false`.
///
/// # Panics
///
/// If `a`, `b` and `dirs` differ in length.
pub fn dominates(a: &[f64], b: &[f64], dirs: &[Direction]) -> bool {
    assert!(
        a.len() == dirs.len() && b.len() == dirs.len(),
        "dominates: {} / {} objectives for {} directions",
        a.len(),
        b.len(),
        dirs.len()
    );
    let mut strictly = false;
    for ((&x, &y), d) in a.iter().zip(b).zip(dirs) {
        if x.is_nan() || y.is_nan() {
            return false;
        }
        let (x, y) = (d.sign() * x, d.sign() * y);
        if x < y {
            return false;
        }
        if x > y {
            strictly = true;
        }
    }
    strictly
}

/// Indices (ascending) of the points of `subset` that no other point of `subset` dominates;
/// points with a `NaN` objective are left out.
///
/// Quadratic in `subset.len()`, which is fine for the tens of candidates of an epoch.
/// Identical points are all kept (see the module's conventions).
///
/// # Panics
///
/// If a point's length differs from `dirs.len()` or an index is out of range.
pub fn pareto_front_of<P: AsRef<[f64]>>(
    points: &[P],
    dirs: &[Direction],
    subset: &[usize],
) -> Vec<usize> {
    let mut out: Vec<usize> = subset
        .iter()
        .copied()
        .filter(|&i| {
            let p = points[i].as_ref();
            !p.iter().any(|x| x.is_nan())
                && !subset
                    .iter()
                    .any(|&j| j != i && dominates(points[j].as_ref(), p, dirs))
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Indices (ascending) of the non-dominated points among all `points`; see
/// [`pareto_front_of`].
pub fn pareto_front<P: AsRef<[f64]>>(points: &[P], dirs: &[Direction]) -> Vec<usize> {
    let all: Vec<usize> = (0..points.len()).collect();
    pareto_front_of(points, dirs, &all)
}

/// Min-max normalization of `xs` to `[0, 1]` (0 = smallest, 1 = largest).
///
/// # Formula
///
/// `x'_i = (x_i - min x) / (max x - min x)`; when all values are equal (`max = min`) every
/// `x'_i = 0`. `NaN` values are ignored for the minimum and maximum and stay `NaN`.
pub fn min_max_normalize(xs: &[f64]) -> Vec<f64> {
    let (lo, hi) = xs
        .iter()
        .filter(|x| !x.is_nan())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    let range = hi - lo;
    xs.iter()
        .map(|&x| {
            if x.is_nan() {
                f64::NAN
            } else if range > 0.0 && range.is_finite() {
                ((x - lo) / range).clamp(0.0, 1.0)
            } else {
                0.0
            }
        })
        .collect()
}

/// The objectives of the points in `subset`, min-max normalized over `subset` into
/// "goodness" in `[0, 1]` (1 = the best value in the subset, whatever the direction).
///
/// # Formula
///
/// For objective `i`: `g_i = x'_i` if maximized, `1 - x'_i` if minimized, where `x'` is
/// [`min_max_normalize`] over the subset. An objective that is constant over the subset gets
/// `g_i = 1` for every point (everyone is at the ideal on it), so it adds nothing to a
/// distance. Row `k` of the result belongs to `subset[k]`.
pub fn normalized_goodness<P: AsRef<[f64]>>(
    points: &[P],
    dirs: &[Direction],
    subset: &[usize],
) -> Vec<Vec<f64>> {
    let mut rows = vec![vec![0.0; dirs.len()]; subset.len()];
    for (i, d) in dirs.iter().enumerate() {
        let col: Vec<f64> = subset.iter().map(|&k| points[k].as_ref()[i]).collect();
        let constant = col.iter().all(|&x| x == col[0]);
        let norm = min_max_normalize(&col);
        for (row, x) in rows.iter_mut().zip(norm) {
            row[i] = if constant {
                1.0
            } else {
                match d {
                    Direction::Maximize => x,
                    Direction::Minimize => 1.0 - x,
                }
            };
        }
    }
    rows
}

/// Weighted squared distance of a normalized point to the ideal point (all ones).
///
/// # Formula
///
/// `D(g; w) = Σ_i w_i (1 - g_i)²`, with `g` from [`normalized_goodness`].
///
/// # Panics
///
/// If `goodness` and `weights` differ in length.
pub fn weighted_sq_distance(goodness: &[f64], weights: &[f64]) -> f64 {
    assert_eq!(goodness.len(), weights.len(), "weighted_sq_distance");
    goodness
        .iter()
        .zip(weights)
        .map(|(g, w)| w * (1.0 - g) * (1.0 - g))
        .sum()
}

/// HarnessPro's distance for one candidate with normalized pass rate and cost.
///
/// # Formula
///
/// `D = alpha (1 - pass_norm)² + beta cost_norm²`, where `pass_norm` and `cost_norm` are the
/// min-max normalized pass rate and cost (0 = lowest, 1 = highest over the survivors), so the
/// ideal point is `(pass_norm, cost_norm) = (1, 0)`. `alpha` weights pass rate, `beta` cost.
pub fn weighted_sq_distance_to_ideal(pass_norm: f64, cost_norm: f64, alpha: f64, beta: f64) -> f64 {
    alpha * (1.0 - pass_norm) * (1.0 - pass_norm) + beta * cost_norm * cost_norm
}

/// Among `subset`, the point closest to the ideal point by [`weighted_sq_distance`] with
/// `weights`, after normalizing over `subset` ([`normalized_goodness`]); ties go to the
/// earliest position in `subset`. `None` when `subset` is empty.
///
/// This does not drop dominated points; [`tier_picks`] does that first.
pub fn closest_to_ideal<P: AsRef<[f64]>>(
    points: &[P],
    dirs: &[Direction],
    subset: &[usize],
    weights: &[f64],
) -> Option<usize> {
    let rows = normalized_goodness(points, dirs, subset);
    argmin_first(
        subset
            .iter()
            .zip(&rows)
            .map(|(&k, g)| (k, weighted_sq_distance(g, weights))),
    )
}

/// The index with the smallest distance, the first one on ties; `NaN` distances never win.
fn argmin_first(items: impl Iterator<Item = (usize, f64)>) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (k, d) in items {
        let better = match best {
            None => !d.is_nan(),
            Some((_, bd)) => d < bd,
        };
        if better {
            best = Some((k, d));
        }
    }
    best.map(|(k, _)| k)
}

/// A HarnessPro candidate's objectives.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Validation pass rate (maximize).
    pub pass_rate: f64,
    /// Mean cost per task, e.g. in USD (minimize).
    pub cost: f64,
}

impl Point {
    /// The point as an objective vector ordered like [`PASS_COST`].
    pub fn objectives(&self) -> [f64; 2] {
        [self.pass_rate, self.cost]
    }
}

/// `(alpha, beta)` of the lite, medium and heavy tiers: weights of pass rate and cost.
pub const TIER_WEIGHTS: [(f64, f64); 3] = [(1.0, 2.0), (1.0, 1.0), (2.0, 1.0)];

/// The three HarnessPro picks (indices into the candidate list); `None` only when no
/// candidate survives the filters. Several tiers may name the same candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierPicks {
    /// Cost-leaning pick, `(alpha, beta) = (1, 2)`.
    pub lite: Option<usize>,
    /// Balanced pick, `(alpha, beta) = (1, 1)`.
    pub medium: Option<usize>,
    /// Pass-rate-leaning pick, `(alpha, beta) = (2, 1)`.
    pub heavy: Option<usize>,
}

impl TierPicks {
    /// The distinct picked candidates in tier order lite, medium, heavy (at most three; fewer
    /// when tiers coincide): the survivors that spawn children next epoch.
    pub fn distinct(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(3);
        for k in [self.lite, self.medium, self.heavy].into_iter().flatten() {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }
}

/// Indices (ascending) of the non-dominated points for (max pass rate, min cost); duplicates
/// are all kept, points with a `NaN` objective are left out. See [`pareto_front`].
pub fn non_dominated(points: &[Point]) -> Vec<usize> {
    let objs: Vec<[f64; 2]> = points.iter().map(Point::objectives).collect();
    pareto_front(&objs, &PASS_COST)
}

/// The candidates that pass HarnessPro's two filters, ascending: pass rate at least
/// `baseline_pass_rate`, then not dominated by another such candidate.
///
/// A `NaN` baseline means no pass-rate floor. Because a dominating point must have at least
/// the same pass rate, dominance among the survivors of the floor equals dominance among all
/// points restricted to them.
pub fn tier_survivors(points: &[Point], baseline_pass_rate: f64) -> Vec<usize> {
    let objs: Vec<[f64; 2]> = points.iter().map(Point::objectives).collect();
    let feasible: Vec<usize> = (0..points.len())
        .filter(|&i| baseline_pass_rate.is_nan() || points[i].pass_rate >= baseline_pass_rate)
        .collect();
    pareto_front_of(&objs, &PASS_COST, &feasible)
}

/// HarnessPro's selection (SPEC section 3, step 5).
///
/// 1. keep candidates with `pass_rate >= baseline_pass_rate` (the initial harness's
///    validation pass rate; it may itself be a candidate and survive);
/// 2. drop Pareto-dominated ones (max pass rate, min cost) — [`tier_survivors`];
/// 3. min-max normalize pass rate and cost over the survivors;
/// 4. per tier, pick the survivor minimizing [`weighted_sq_distance_to_ideal`] with the
///    tier's `(alpha, beta)` from [`TIER_WEIGHTS`]; ties go to the earliest index.
///
/// # Formula
///
/// `pick(alpha, beta) = argmin_{i ∈ survivors} alpha (1 - P'_i)² + beta C'_i²`, with
/// `P'_i = (P_i - min P) / (max P - min P)` and `C'_i = (C_i - min C) / (max C - min C)` over
/// the survivors. A constant objective (e.g. one survivor) contributes the same amount to
/// every distance and so does not affect the pick.
///
/// # Examples
///
/// ```
/// use hevo_stats::pareto::{tier_picks, Point};
/// let pts = [
///     Point { pass_rate: 0.50, cost: 1.0 }, // initial harness
///     Point { pass_rate: 0.52, cost: 0.3 }, // cheap; dominates the initial harness
///     Point { pass_rate: 0.56, cost: 1.4 }, // balanced
///     Point { pass_rate: 0.64, cost: 2.0 }, // strong but expensive
///     Point { pass_rate: 0.45, cost: 0.1 }, // below the baseline
/// ];
/// let picks = tier_picks(&pts, 0.50);
/// assert_eq!(picks.lite, Some(1));
/// assert_eq!(picks.medium, Some(2));
/// assert_eq!(picks.heavy, Some(3));
/// assert_eq!(picks.distinct(), vec![1, 2, 3]);
/// ```
pub fn tier_picks(points: &[Point], baseline_pass_rate: f64) -> TierPicks {
    let survivors = tier_survivors(points, baseline_pass_rate);
    let pass: Vec<f64> = survivors.iter().map(|&i| points[i].pass_rate).collect();
    let cost: Vec<f64> = survivors.iter().map(|&i| points[i].cost).collect();
    let pass_n = min_max_normalize(&pass);
    let cost_n = min_max_normalize(&cost);
    let pick = |(alpha, beta): (f64, f64)| {
        argmin_first(survivors.iter().enumerate().map(|(k, &i)| {
            (
                i,
                weighted_sq_distance_to_ideal(pass_n[k], cost_n[k], alpha, beta),
            )
        }))
    };
    TierPicks {
        lite: pick(TIER_WEIGHTS[0]),
        medium: pick(TIER_WEIGHTS[1]),
        heavy: pick(TIER_WEIGHTS[2]),
    }
}
