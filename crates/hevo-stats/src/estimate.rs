//! Estimates of a mean score: the point value, its standard error and a 95% interval.
//!
//! Every score hevo reports is an [`Estimate`], whether it comes from a full evaluation
//! (exact up to trial noise) or from a subset with a design-based estimator.

use serde::{Deserialize, Serialize};

/// The 97.5% quantile of the standard normal distribution (two-sided 95% intervals).
pub const Z95: f64 = 1.959_963_984_540_054;

/// Reads a standard error written by serde_json: `null` stands for infinity.
fn se_from_json<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// A point estimate of a mean score with its standard error and a 95% interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The point estimate.
    pub value: f64,
    /// Its standard error (0 when the value is known exactly; infinite when the data bound
    /// nothing, e.g. a stratum without a sampled task). JSON has no infinity: serde_json
    /// writes it as `null`, which is read back as infinity.
    #[serde(deserialize_with = "se_from_json")]
    pub se: f64,
    /// Lower end of the 95% interval.
    pub ci_low: f64,
    /// Upper end of the 95% interval.
    pub ci_high: f64,
}

impl Estimate {
    /// A normal-approximation interval `value ± 1.96 se`, clipped to `[lo, hi]`.
    ///
    /// Scores in hevo live in `[0, 1]`; pass those bounds for scores, or
    /// `f64::NEG_INFINITY, f64::INFINITY` for unbounded quantities such as differences.
    pub fn normal(value: f64, se: f64, lo: f64, hi: f64) -> Self {
        let se = if se.is_finite() {
            se.max(0.0)
        } else {
            f64::INFINITY
        };
        Estimate {
            value,
            se,
            ci_low: (value - Z95 * se).max(lo),
            ci_high: (value + Z95 * se).min(hi),
        }
    }

    /// The estimate clipped to `[lo, hi]`, for reporting a bounded score: the value is
    /// clamped and the interval widened if needed so that it always contains the value.
    ///
    /// Design-based estimators (Horvitz-Thompson, GREG, ...) can leave `[0, 1]` on a small
    /// sample; a pass rate of 1.002 means "about 1". Use this for display and storage, not
    /// inside simulations that check unbiasedness (clipping biases the mean).
    pub fn clipped(self, lo: f64, hi: f64) -> Estimate {
        if self.value.is_nan() {
            return self;
        }
        let value = self.value.clamp(lo, hi);
        Estimate {
            value,
            se: self.se,
            ci_low: self.ci_low.min(value).max(lo),
            ci_high: self.ci_high.max(value).min(hi),
        }
    }

    /// A value known without sampling error (e.g. a full-set mean of deterministic outcomes).
    pub fn exact(value: f64) -> Self {
        Estimate {
            value,
            se: 0.0,
            ci_low: value,
            ci_high: value,
        }
    }
}

/// The mean of per-task outcomes in `[0, 1]`, with the sample standard error and a 95%
/// Wilson score interval: [`task_mean`] with one trial per task.
pub fn sample_mean(xs: &[f64]) -> Estimate {
    task_mean(xs, 1)
}

/// The mean of per-task outcomes in `[0, 1]`, each the mean of up to `trials` repeated
/// trials, with the sample standard error and a 95% Wilson interval at the number of
/// observations that standard error is worth.
///
/// # Formula
///
/// `p = mean(x)`, `se = sd(x) / sqrt(n)` (sample sd, `n - 1` denominator). The interval is
/// Wilson's, `(p + z²/2n' ± z sqrt(p(1-p)/n' + z²/4n'²)) / (1 + z²/n')` with `z = 1.96`, at
/// `n' = (p(1-p) / se²) (z / t)²` clamped to `[n, n × trials]`, `t` Student's 0.975
/// quantile with `n - 1` degrees of freedom (the standard error is itself estimated); `n'`
/// is `n` when `p` is 0 or 1 or fewer than 20 tasks are scored.
///
/// With one trial per task `n' = n`: Wilson's interval uses the largest variance a `[0, 1]`
/// variable with mean `p` can have, so it stays honest for partial credit and does not
/// collapse to a point when every task passes or fails. With repeated trials a task's mean
/// varies less than a single outcome, and Wilson at `n` would be wider than the standard
/// error says (about 2.8 standard errors each side at 5 trials); at `n'` the interval is
/// about `p ± t se`, as the standard error says, yet never narrower than `n × trials`
/// independent trials allow, nor wider than one trial per task. An empty input gives `NaN`
/// with the interval `[0, 1]`.
pub fn task_mean(xs: &[f64], trials: u32) -> Estimate {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return Estimate {
            value: f64::NAN,
            se: f64::NAN,
            ci_low: 0.0,
            ci_high: 1.0,
        };
    }
    let p = xs.iter().sum::<f64>() / n;
    let se = if xs.len() > 1 {
        let var = xs.iter().map(|x| (x - p) * (x - p)).sum::<f64>() / (n - 1.0);
        (var / n).sqrt()
    } else {
        0.0
    };
    let pc = p.clamp(0.0, 1.0);
    let most = n * f64::from(trials.max(1));
    // The standard error is itself estimated from n tasks: worth what Student's t allows.
    let t = student_t975((n - 1.0).max(1.0));
    let worth = pc * (1.0 - pc) / (se * se) * (Z95 / t).powi(2);
    let n_eff = if pc * (1.0 - pc) > 0.0 && xs.len() >= MIN_TASKS_TO_NARROW {
        if worth.is_finite() {
            worth.clamp(n, most)
        } else {
            most
        }
    } else {
        n
    };
    let (ci_low, ci_high) = wilson(pc, n_eff);
    Estimate {
        value: p,
        se,
        ci_low,
        ci_high,
    }
}

/// The fewest tasks whose standard error [`task_mean`] lets narrow the interval below one
/// observation per task: below it the sample standard deviation is too unsure (at 10 tasks
/// of a population where most tasks always pass, 8 trials each, the narrowed interval
/// covered 92% in `tests/stats_task_mean.rs`; one observation per task, 99%).
const MIN_TASKS_TO_NARROW: usize = 20;

/// The 0.975 quantile of Student's t with `nu` degrees of freedom, by its Cornish-Fisher
/// expansion around `Z95` (three terms; within 0.01 of the exact value for `nu >= 4`).
fn student_t975(nu: f64) -> f64 {
    let z = Z95;
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * nu)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * nu * nu)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * nu.powi(3))
}

/// The 95% Wilson score interval for a proportion `p` observed on `n` items.
///
/// The interval always holds `p` (for `p` in `[0, 1]`): Wilson's lower end is at most `p` and
/// its upper end at least `p`, but computed in floating point the ends at `p = 0` and
/// `p = 1` come out a rounding error inside (`5.6e-17` above 0 for 0 of 3), so each end is
/// clamped to `p`: 0 of `n` starts at exactly 0 and `n` of `n` ends at exactly 1.
pub fn wilson(p: f64, n: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 1.0);
    }
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    // `min`/`max`, not `clamp`: a `NaN` proportion keeps the whole `[0, 1]`.
    let p = p.clamp(0.0, 1.0);
    (
        (center - half).max(0.0).min(p),
        (center + half).min(1.0).max(p),
    )
}

/// The least standard error of a paired difference in mean score (each task's difference in
/// `[-1, 1]`) observed on `n` of `m` tasks, whatever the sample showed.
///
/// A sample in which the two candidates agree on every task has a plug-in variance of 0,
/// yet 4 agreeing tasks of 40 cannot rule out that they differ on half of them. If they
/// differ on `k` tasks, a sample of `n` drawn without replacement misses all of them with
/// probability `C(m - k, n) / C(m, n)` (hypergeometric). `k*` is the largest `k` for which
/// that is above 2.5% (one side of a 95% interval): the largest difference, `k* / m`, the
/// sample cannot rule out. This is that bound as a normal standard error, `k* / m / Z95`,
/// so that `± Z95 se` spans it. 0 when every task is seen; `1 / Z95` (the whole range of
/// a difference of means in `[0, 1]`) when none is.
pub fn unseen_difference_se(n: usize, m: usize) -> f64 {
    if m == 0 || n >= m {
        return 0.0;
    }
    if n == 0 {
        return 1.0 / Z95;
    }
    // P(k) = prod_{j < k} (m - j - n) / (m - j), decreasing in k.
    let mut p_miss = 1.0;
    let mut k_star = 0;
    for k in 1..=(m - n) {
        let j = (k - 1) as f64;
        p_miss *= (m as f64 - j - n as f64) / (m as f64 - j);
        if p_miss <= 0.025 {
            break;
        }
        k_star = k;
    }
    k_star as f64 / m as f64 / Z95
}

/// How the sample was drawn, for the variance estimator of design-based estimators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Design {
    /// A fixed-size, high-entropy without-replacement design (successive sampling,
    /// conditional Poisson, Pareto): variance by the Hájek-Deville approximation.
    FixedSize,
    /// Independent inclusions (Poisson sampling): exact unbiased variance.
    Poisson,
}

/// The estimated variance of a Horvitz-Thompson total `sum_{k in S} z_k` where
/// `z_k = y_k / pi_k` are already expanded values.
///
/// # Formula
///
/// - [`Design::Poisson`]: `V = sum_{k in S} (1 - pi_k) z_k^2` (unbiased).
/// - [`Design::FixedSize`] (Deville 1999; Tillé 2006, Eq. 7.8 with the Hájek
///   approximation): `c_k = (1 - pi_k) n / (n - 1)`, `B = sum c_k z_k / sum c_k`,
///   `V = sum_{k in S} c_k (z_k - B)^2`. It needs only first-order inclusion probabilities
///   and is accurate for high-entropy designs such as successive sampling. With `n = 1` the
///   variance is unknown (`+inf`).
///
/// `n`: sample size, `pi_k`: inclusion probability of unit `k`.
pub fn ht_total_variance(z: &[f64], pi: &[f64], design: Design) -> f64 {
    match design {
        Design::Poisson => z.iter().zip(pi).map(|(z, p)| (1.0 - p) * z * z).sum(),
        Design::FixedSize => {
            let n = z.len();
            if n < 2 {
                return if n == 1 && pi[0] >= 1.0 {
                    0.0
                } else {
                    f64::INFINITY
                };
            }
            let f = n as f64 / (n as f64 - 1.0);
            let c: Vec<f64> = pi.iter().map(|p| (1.0 - p).max(0.0) * f).collect();
            let sc: f64 = c.iter().sum();
            if sc <= 0.0 {
                return 0.0;
            }
            let b = c.iter().zip(z).map(|(c, z)| c * z).sum::<f64>() / sc;
            c.iter().zip(z).map(|(c, z)| c * (z - b) * (z - b)).sum()
        }
    }
}

/// The estimators of a full-set mean from a sample (see the functions of the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Estimator {
    /// [`raw_mean`]: the plain subset mean (biased under unequal probabilities).
    Raw,
    /// [`horvitz_thompson`].
    HorvitzThompson,
    /// [`hajek`] (paper Eq. 3).
    Hajek,
    /// [`residual`] (paper Eq. 4, anchor = historical success rates).
    Residual,
    /// [`hajek_residual`]: the residual estimator with Hájek normalization.
    HajekResidual,
    /// [`residual`] with a model prediction (Rasch/IRT) as anchor: model-assisted GREG.
    Greg,
}

impl Estimator {
    /// The lowercase name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Estimator::Raw => "raw",
            Estimator::HorvitzThompson => "ht",
            Estimator::Hajek => "hajek",
            Estimator::Residual => "residual",
            Estimator::HajekResidual => "hajek-residual",
            Estimator::Greg => "greg",
        }
    }
}

/// One sampled unit: its outcome `y_k`, inclusion probability `pi_k` and anchor `a_k`
/// (the anchor is ignored by estimators without one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unit {
    /// Observed outcome `y_k` in `[0, 1]`.
    pub y: f64,
    /// Inclusion probability `pi_k` in `(0, 1]`.
    pub pi: f64,
    /// Anchor (prediction) `a_k` of the outcome.
    pub anchor: f64,
}

fn split(units: &[Unit]) -> (Vec<f64>, Vec<f64>) {
    (
        units.iter().map(|u| u.y / u.pi).collect(),
        units.iter().map(|u| u.pi).collect(),
    )
}

/// The raw subset mean (ignores the design); [`sample_mean`] of the outcomes.
pub fn raw_mean(units: &[Unit]) -> Estimate {
    let ys: Vec<f64> = units.iter().map(|u| u.y).collect();
    sample_mean(&ys)
}

/// Horvitz-Thompson estimator of the mean over `n_pop` units.
///
/// # Formula
///
/// `S = (1/N) sum_{k in S} y_k / pi_k`, `se = sqrt(V(y/pi)) / N` with `V` from
/// [`ht_total_variance`]. Unbiased under any design with `pi_k > 0` for every unit.
pub fn horvitz_thompson(units: &[Unit], n_pop: usize, design: Design) -> Estimate {
    let n = n_pop as f64;
    let (z, pi) = split(units);
    let value = z.iter().sum::<f64>() / n;
    let se = ht_total_variance(&z, &pi, design).sqrt() / n;
    Estimate::normal(value, se, 0.0, 1.0)
}

/// Hájek (ratio) estimator of the mean, paper Eq. 3.
///
/// # Formula
///
/// `S = sum_{k in S} (y_k / pi_k) / sum_{k in S} (1 / pi_k)`; linearized variance with
/// residuals `e_k = y_k - S`: `se = sqrt(V(e/pi)) / N_hat`, `N_hat = sum 1/pi_k`.
/// Asymptotically unbiased. An empty sample gives `NaN` with the interval `[0, 1]`.
pub fn hajek(units: &[Unit], design: Design) -> Estimate {
    let nh: f64 = units.iter().map(|u| 1.0 / u.pi).sum();
    if units.is_empty() || nh <= 0.0 {
        return Estimate::normal(f64::NAN, f64::INFINITY, 0.0, 1.0);
    }
    let value = units.iter().map(|u| u.y / u.pi).sum::<f64>() / nh;
    let e: Vec<f64> = units.iter().map(|u| (u.y - value) / u.pi).collect();
    let pi: Vec<f64> = units.iter().map(|u| u.pi).collect();
    let se = ht_total_variance(&e, &pi, design).sqrt() / nh;
    Estimate::normal(value, se, 0.0, 1.0)
}

/// Anchored residual (difference) estimator, paper Eq. 4; with a model prediction as the
/// anchor it is the model-assisted GREG (difference form).
///
/// # Formula
///
/// `S = A + (1/N) sum_{k in S} (y_k - a_k) / pi_k`, where `A = (1/N) sum_{t in T} a_t` is
/// the anchor's full-set mean (`anchor_mean`), `a_t` the anchor (paper: the historical
/// success rate `p_t`; GREG: a per-candidate prediction), `N = n_pop`.
/// `se = sqrt(V((y - a)/pi)) / N`. Unbiased for any anchor fixed before sampling.
pub fn residual(units: &[Unit], anchor_mean: f64, n_pop: usize, design: Design) -> Estimate {
    let n = n_pop as f64;
    let z: Vec<f64> = units.iter().map(|u| (u.y - u.anchor) / u.pi).collect();
    let pi: Vec<f64> = units.iter().map(|u| u.pi).collect();
    let value = anchor_mean + z.iter().sum::<f64>() / n;
    let se = if units.is_empty() {
        f64::INFINITY
    } else {
        ht_total_variance(&z, &pi, design).sqrt() / n
    };
    Estimate::normal(value, se, 0.0, 1.0)
}

/// Model-assisted GREG under Poisson sampling when the model was fitted on the same data
/// (e.g. a Rasch anchor whose ability for this candidate comes from its own sample).
///
/// # Formula
///
/// The value is [`residual`]'s: `S = A + (1/N) sum_{k in S} (y_k - a_k) / pi_k` with
/// `A = (1/N) sum_T a_t`. The standard error is the larger of `residual`'s
/// (`sqrt(sum_S (1 - pi_k) e_k^2 / pi_k^2) / N`, `e = y - a`) and the anticipated one
/// `sqrt(sum_T (1 - pi_t) a_t (1 - a_t) / pi_t) / N`: the variance the same design gives
/// when outcomes are Bernoulli(`a_t`), computed over the whole population. A fitted model
/// pulls its predictions toward the sampled outcomes, so the sample residuals understate
/// the error most on a small sample; the anticipated variance does not depend on which
/// tasks were drawn. `population[t] = (a_t, pi_t)` for every unit of the stratum; a unit
/// with `pi_t = 0` can never be sampled and makes the standard error infinite.
pub fn greg_poisson(units: &[Unit], population: &[(f64, f64)]) -> Estimate {
    let n = population.len() as f64;
    let anchor_mean = population.iter().map(|(a, _)| a).sum::<f64>() / n;
    let e = residual(units, anchor_mean, population.len(), Design::Poisson);
    let anticipated: f64 = population
        .iter()
        .map(|&(a, pi)| {
            if pi > 0.0 {
                (1.0 - pi).max(0.0) / pi * a * (1.0 - a)
            } else {
                f64::INFINITY
            }
        })
        .sum::<f64>()
        / (n * n);
    Estimate::normal(e.value, e.se.max(anticipated.sqrt()), 0.0, 1.0)
}

/// The residual estimator with Hájek normalization of the residual term.
///
/// # Formula
///
/// `S = A + sum_{k in S} ((y_k - a_k)/pi_k) / sum_{k in S} (1/pi_k)`; with
/// `r_hat` the normalized residual mean, `e_k = y_k - a_k - r_hat`,
/// `se = sqrt(V(e/pi)) / N_hat`. Asymptotically unbiased; it keeps the residual form's
/// robustness to a rare, almost-always-solved task and the Hájek form's robustness to the
/// random total weight `N_hat`.
pub fn hajek_residual(units: &[Unit], anchor_mean: f64, design: Design) -> Estimate {
    let nh: f64 = units.iter().map(|u| 1.0 / u.pi).sum();
    if units.is_empty() || nh <= 0.0 {
        return Estimate::normal(anchor_mean, f64::INFINITY, 0.0, 1.0);
    }
    let r = units.iter().map(|u| (u.y - u.anchor) / u.pi).sum::<f64>() / nh;
    let e: Vec<f64> = units.iter().map(|u| (u.y - u.anchor - r) / u.pi).collect();
    let pi: Vec<f64> = units.iter().map(|u| u.pi).collect();
    let se = ht_total_variance(&e, &pi, design).sqrt() / nh;
    Estimate::normal(anchor_mean + r, se, 0.0, 1.0)
}

/// Evaluates `which` on the sample (`anchor_mean` is used by the anchored estimators).
pub fn estimate_with(
    which: Estimator,
    units: &[Unit],
    anchor_mean: f64,
    n_pop: usize,
    design: Design,
) -> Estimate {
    match which {
        Estimator::Raw => raw_mean(units),
        Estimator::HorvitzThompson => horvitz_thompson(units, n_pop, design),
        Estimator::Hajek => hajek(units, design),
        Estimator::Residual | Estimator::Greg => residual(units, anchor_mean, n_pop, design),
        Estimator::HajekResidual => hajek_residual(units, anchor_mean, design),
    }
}

/// The variance of an estimator of a stratum mean predicted from the task history over the
/// whole stratum (not only the sample), for a new candidate whose outcome on task `t` is
/// `Bernoulli(p_t)`.
///
/// # Formula
///
/// With `z_t` the estimator's linearized variable (Hájek: `x_t - S_bar`, `S_bar = mean_t p_t`;
/// residual forms: `x_t - p_t`; HT and raw: `x_t`), `mu_t = E z_t`, `s_t^2 = p_t (1 - p_t)`,
/// the Hájek approximation for a fixed-size high-entropy design gives
///
/// `V = (1/N^2) sum_t pi_t (1 - pi_t) [ (mu_t / pi_t - B)^2 + s_t^2 / pi_t^2 ]`,
/// `B = sum_t (1 - pi_t) mu_t / sum_t pi_t (1 - pi_t)`.
///
/// - `pi_t`: inclusion probability of every task of the stratum (not only sampled ones);
/// - `p_t`: historical success rate; `N`: stratum size.
///
/// Unlike the sample-based estimate, it sees the rarely sampled tasks a small sample misses,
/// which is where Hájek fails (a tiny `pi_t` with `p_t` far from the mean).
pub fn predicted_variance(which: Estimator, pi: &[f64], p: &[f64]) -> f64 {
    let n = pi.len() as f64;
    if pi.is_empty() {
        return 0.0;
    }
    let s_bar = p.iter().sum::<f64>() / n;
    let mu: Vec<f64> = p
        .iter()
        .map(|&pt| match which {
            Estimator::Hajek => pt - s_bar,
            Estimator::Residual | Estimator::HajekResidual | Estimator::Greg => 0.0,
            Estimator::HorvitzThompson | Estimator::Raw => pt,
        })
        .collect();
    let d: f64 = pi.iter().map(|q| q * (1.0 - q)).sum();
    let b = if d > 0.0 {
        pi.iter().zip(&mu).map(|(q, m)| (1.0 - q) * m).sum::<f64>() / d
    } else {
        0.0
    };
    let v: f64 = pi
        .iter()
        .zip(&mu)
        .zip(p)
        .map(|((&q, &m), &pt)| {
            if q <= 0.0 {
                return if m != 0.0 || pt * (1.0 - pt) > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                };
            }
            q * (1.0 - q) * ((m / q - b).powi(2) + pt * (1.0 - pt) / (q * q))
        })
        .sum();
    v / (n * n)
}

/// The automatic per-stratum estimator choice: the candidate estimator with the smallest
/// variance over a batch of samples (e.g. one iteration's candidates), where each
/// estimator's variance is the larger of its pooled design-based estimate and its
/// prediction from the task history.
///
/// # Formula
///
/// For each estimator `E` in `choices`:
/// `V_E = max( (1/B) sum_b se_E(b)^2 , V_pred_E )`, where `se_E(b)` is the estimated standard
/// error on sample `b` of the batch (`B` samples) and `V_pred_E` is
/// [`predicted_variance`] over the whole stratum (`population = (pi, p)`, omitted: 0).
/// Pick `argmin V_E` (first on ties; infinite or NaN variances lose).
///
/// Why both: the sample-based estimate reflects how the new candidates actually differ from
/// the history (where the residual form loses), but with small `m` it misses the rarely
/// sampled tasks and calls Hájek safe exactly when it is not (the paper's Terminal-Bench
/// failure); the history-based prediction sees every task but assumes the new candidates
/// behave like the history. Taking the larger one is conservative for each estimator.
pub fn choose_estimator(
    choices: &[Estimator],
    batch: &[(&[Unit], f64)],
    n_pop: usize,
    design: Design,
    population: Option<(&[f64], &[f64])>,
) -> Estimator {
    let mut best = (f64::INFINITY, choices[0]);
    for &c in choices {
        let v: f64 = batch
            .iter()
            .map(|(u, a)| {
                let se = estimate_with(c, u, *a, n_pop, design).se;
                se * se
            })
            .sum::<f64>()
            / batch.len().max(1) as f64;
        let pred = population.map_or(0.0, |(pi, p)| predicted_variance(c, pi, p));
        let v = v.max(pred);
        let v = if v.is_nan() { f64::INFINITY } else { v };
        if v < best.0 {
            best = (v, c);
        }
    }
    best.1
}

/// Combines per-stratum estimates into the full-set score `sum_g W_g S_g`.
///
/// # Formula
///
/// `S = sum_g W_g S_g`, `se = sqrt(sum_g W_g^2 se_g^2)` (strata are sampled
/// independently), interval `S ± 1.96 se` clipped to `[0, 1]`. SPEC.md averages strata
/// (`W_g = 1/G`); pass `W_g = N_g / N` for a task-weighted mean. A single stratum returns
/// its estimate unchanged (keeping e.g. a Wilson interval).
pub fn combine_strata(parts: &[(Estimate, f64)]) -> Estimate {
    if parts.len() == 1 && (parts[0].1 - 1.0).abs() < 1e-12 {
        return parts[0].0;
    }
    let value = parts.iter().map(|(e, w)| w * e.value).sum();
    let var: f64 = parts.iter().map(|(e, w)| w * w * e.se * e.se).sum();
    Estimate::normal(value, var.sqrt(), 0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ln C(a, b).
    fn ln_choose(a: usize, b: usize) -> f64 {
        (1..=b).map(|i| ((a + 1 - i) as f64 / i as f64).ln()).sum()
    }

    /// Exactly, over every task set drawn at random without replacement: when two candidates
    /// differ on `k` of `m` tasks (all in one direction, the worst case) and a sample of `n`
    /// shows them agreeing everywhere (difference 0, plug-in se 0), the interval
    /// `0 ± Z95 unseen_difference_se(n, m)` misses the true difference `k / m` with
    /// probability at most 2.5% (one side of a 95% interval), for every `k`.
    #[test]
    fn the_unseen_difference_bound_misses_at_most_its_share_of_agreeing_samples() {
        for m in [10, 20, 40, 80, 200] {
            for n in 1..m {
                let half = Z95 * unseen_difference_se(n, m);
                let mut worst = 0.0f64;
                for k in 1..=(m - n) {
                    // P(no differing task among the n drawn) = C(m - k, n) / C(m, n).
                    let p_agree = (ln_choose(m - k, n) - ln_choose(m, n)).exp();
                    if k as f64 / m as f64 > half + 1e-9 {
                        worst = worst.max(p_agree);
                    }
                }
                assert!(worst <= 0.025 + 1e-9, "m {m} n {n}: misses {worst}");
            }
            assert_eq!(unseen_difference_se(m, m), 0.0);
        }
        // 4 agreeing tasks of 40 cannot rule out a difference of 0.5 on the rest.
        assert!(Z95 * unseen_difference_se(4, 40) > 0.5);
    }

    #[test]
    fn an_infinite_standard_error_survives_json() {
        let e = Estimate::normal(0.2, f64::INFINITY, 0.0, 1.0);
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"se\":null"), "{text}");
        let back: Estimate = serde_json::from_str(&text).unwrap();
        assert_eq!(back.se, f64::INFINITY);
        assert_eq!((back.value, back.ci_low, back.ci_high), (0.2, 0.0, 1.0));
    }

    #[test]
    fn wilson_matches_reference_values() {
        // Reference: 8 successes of 10 -> [0.4902, 0.9433] (Wilson 1927; standard tables).
        let (lo, hi) = wilson(0.8, 10.0);
        assert!((lo - 0.4902).abs() < 1e-3, "{lo}");
        assert!((hi - 0.9433).abs() < 1e-3, "{hi}");
    }

    #[test]
    fn sample_mean_of_all_passes_keeps_a_nondegenerate_interval() {
        let e = sample_mean(&[1.0; 20]);
        assert_eq!(e.value, 1.0);
        assert_eq!(e.se, 0.0);
        assert!(e.ci_low < 0.9 && e.ci_high == 1.0, "{e:?}");
    }

    #[test]
    fn clipped_keeps_the_value_inside_its_interval() {
        let e = Estimate {
            value: 1.02,
            se: 0.01,
            ci_low: 0.995,
            ci_high: 1.0,
        }
        .clipped(0.0, 1.0);
        assert_eq!(e.value, 1.0);
        assert!(e.ci_low <= e.value && e.value <= e.ci_high, "{e:?}");
        let e = Estimate {
            value: -0.1,
            se: 0.3,
            ci_low: 0.0,
            ci_high: 0.2,
        }
        .clipped(0.0, 1.0);
        assert_eq!((e.value, e.ci_low, e.ci_high), (0.0, 0.0, 0.2));
        assert!(Estimate::exact(f64::NAN).clipped(0.0, 1.0).value.is_nan());
    }

    /// Student's 0.975 quantiles from the tables: 2.776 (4), 2.093 (19), 2.045 (29),
    /// 1.984 (99).
    #[test]
    fn students_quantile_matches_the_tables() {
        for (nu, t) in [(4.0, 2.776), (19.0, 2.093), (29.0, 2.045), (99.0, 1.984)] {
            assert!(
                (student_t975(nu) - t).abs() < 0.01,
                "{nu}: {}",
                student_t975(nu)
            );
        }
    }

    #[test]
    fn sample_mean_se_is_sd_over_root_n() {
        let e = sample_mean(&[0.0, 1.0, 0.0, 1.0]);
        assert_eq!(e.value, 0.5);
        let sd = (1.0f64 / 3.0).sqrt();
        assert!((e.se - sd / 2.0).abs() < 1e-12);
    }
}
